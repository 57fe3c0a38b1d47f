//! `factlog emit` keeps the CLI contract of issue 4: one JSON reply per input line once the
//! event meets its durability, with global gap-free seqs and per-task revisions; a refused
//! line gets an error reply with a stable code, writes nothing, and the stream goes on; a
//! stale `expected_revision` is refused with both revisions; a duplicate request key returns
//! the first receipt; secrets never reach a file or an output; replies reach a harness through
//! a pipe one by one; a `tool/result` is taken in schema 2 and, without `outcome`, in schema 1
//! through the upcast (a free-text status refused). Proved by running the real binary and
//! reading the store back with `factlog dump` and `factlog state`.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::cli::{
    contains_bytes, dir_image, dump_records, emit, emit_one, event, input, json_lines, refused,
    revision, written,
};
use common::{FACTLOG, arg, factlog, temp_log};
use factlog::{Store, StoreOptions};
use serde_json::{Value, json};

#[test]
fn replies_carry_global_gap_free_seqs_and_per_task_revisions() {
    let (_temp, dir) = temp_log();
    let lines = [
        event("t1", "task/contract", json!({ "goal": "write a report", "risk": "low" })),
        event("t2", "user/message", json!({ "text": "hello" })),
        event("t1", "turn/start", json!({})),
        event("t1", "assistant/delta", json!({ "text": "Dra" })),
        event("t2", "assistant/delta", json!({ "text": "Hi" })),
        event("t1", "assistant/delta", json!({ "text": "fting", "durability": "synced" })),
        event("t1", "assistant/message", json!({ "text": "Drafting" })),
        event("t2", "task/phase", json!({ "phase": "chat", "durability": "flushed" })),
    ];
    let replies = emit(&dir, &lines);
    let expected = [("t1", 1), ("t2", 1), ("t1", 2), ("t1", 3), ("t2", 2), ("t1", 4), ("t1", 5)];
    for (index, (reply, (task, task_revision))) in replies.iter().zip(expected).enumerate() {
        assert_eq!(written(reply), (index as u64 + 1, task_revision), "{reply}");
        assert_eq!(reply["task"], task, "{reply}");
    }
    assert_eq!(written(&replies[7]), (8, 3));

    // A second process continues the numbering, and the log holds exactly what was replied.
    let more = emit(&dir, &[event("t2", "user/message", json!({ "text": "again" }))]);
    assert_eq!(written(&more[0]), (9, 4));
    let records = dump_records(&dir, &[]);
    assert_eq!(records.len(), 9);
    for (record, reply) in records.iter().zip(replies.iter().chain(&more)) {
        assert_eq!(record["seq"], reply["seq"]);
        assert_eq!(record["task"], reply["task"]);
        assert_eq!(record["revision"], reply["revision"]);
    }
    assert_eq!(records[3]["type"], "assistant/delta");
    assert_eq!(records[3]["text"], "Dra");
    assert_eq!(revision(&dir, "t1"), 5);
    assert_eq!(revision(&dir, "t2"), 4);
}

#[test]
fn an_invalid_line_gets_an_error_reply_writes_nothing_and_the_stream_goes_on() {
    let (_temp, dir) = temp_log();
    let call = |fields: Value| event("t1", "tool/call", fields);
    let invalid: Vec<(&str, Vec<u8>)> = vec![
        ("not JSON", b"{\"task\": \"t1\", \"type\": ".to_vec()),
        ("not an object", b"[1, 2, 3]".to_vec()),
        ("no task", br#"{"type":"user/message","text":"x"}"#.to_vec()),
        ("task not a string", br#"{"task":7,"type":"user/message","text":"x"}"#.to_vec()),
        ("empty task", br#"{"task":"","type":"user/message","text":"x"}"#.to_vec()),
        ("no type", br#"{"task":"t1","text":"x"}"#.to_vec()),
        ("unknown type", br#"{"task":"t1","type":"user/shout","text":"x"}"#.to_vec()),
        ("missing effect", call(json!({ "call_id": "c1", "tool": "x" })).to_string().into()),
        (
            "mistyped effect",
            call(json!({ "call_id": "c1", "tool": "x", "effect": "maybe" })).to_string().into(),
        ),
        ("mistyped text", event("t1", "user/message", json!({ "text": 5 })).to_string().into()),
        ("delta without text", event("t1", "assistant/delta", json!({})).to_string().into()),
        (
            "bad expected_revision",
            event("t1", "user/message", json!({ "text": "x", "expected_revision": "one" }))
                .to_string()
                .into(),
        ),
        (
            "bad durability",
            event("t1", "user/message", json!({ "text": "x", "durability": "fast" }))
                .to_string()
                .into(),
        ),
        (
            "weaker durability for a high-risk type",
            call(json!({ "call_id": "c1", "tool": "x", "effect": "unsafe",
                         "durability": "buffered" }))
            .to_string()
            .into(),
        ),
        (
            "recovery-only type",
            event("t1", "tool/outcome_unknown", json!({ "call_id": "c1", "plan": "retry" }))
                .to_string()
                .into(),
        ),
        (
            "result of a call never dispatched",
            event("t1", "tool/result", json!({ "call_id": "c9" })).to_string().into(),
        ),
        ("turn end without a turn", event("t1", "turn/end", json!({})).to_string().into()),
    ];
    let mut stdin = Vec::new();
    for (n, (_, line)) in invalid.iter().enumerate() {
        stdin.extend_from_slice(line);
        stdin.push(b'\n');
        stdin.extend(input(&[event("t1", "user/message", json!({ "text": format!("ok {n}") }))]));
    }
    let run = factlog(&["emit", arg(&dir)], &stdin);
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies.len(), 2 * invalid.len(), "{run:?}");
    for (n, ((case, _), pair)) in invalid.iter().zip(replies.chunks(2)).enumerate() {
        let message = refused(&pair[0], "INVALID_EVENT");
        assert!(message.contains("nothing was written"), "{case}: {message}");
        // The next valid line takes the very next seq and revision: nothing was written.
        let n = n as u64 + 1;
        assert_eq!(written(&pair[1]), (n, n), "{case}");
    }
    let records = dump_records(&dir, &[]);
    assert_eq!(records.len(), invalid.len());
    assert!(records.iter().all(|r| r["type"] == "user/message"), "{records:?}");
}

#[test]
fn empty_lines_are_skipped_without_a_reply() {
    let (_temp, dir) = temp_log();
    let mut stdin = b"\n   \n".to_vec();
    stdin.extend(input(&[event("t1", "user/message", json!({ "text": "a" }))]));
    stdin.extend_from_slice(b"\r\n\n");
    stdin.extend(input(&[event("t1", "user/message", json!({ "text": "b" }))]));
    let run = factlog(&["emit", arg(&dir)], &stdin);
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies.len(), 2, "{run:?}");
    assert_eq!(written(&replies[0]), (1, 1));
    assert_eq!(written(&replies[1]), (2, 2));
}

#[test]
fn a_stale_expected_revision_is_refused_with_both_revisions_and_writes_nothing() {
    let (_temp, dir) = temp_log();
    let message = |text: &str, expected: u64| {
        event("t1", "user/message", json!({ "text": text, "expected_revision": expected }))
    };
    let replies = emit(
        &dir,
        &[
            message("first", 0),
            message("second", 1),
            message("stale", 1),
            event(
                "t1",
                "assistant/delta",
                json!({ "text": "stale delta", "expected_revision": 0 }),
            ),
            event(
                "t1",
                "assistant/delta",
                json!({ "text": "fresh delta", "expected_revision": 2 }),
            ),
            message("ahead", 9),
        ],
    );
    assert_eq!(written(&replies[0]), (1, 1));
    assert_eq!(written(&replies[1]), (2, 2));
    refused(&replies[2], "STALE_REVISION");
    assert_eq!((&replies[2]["expected"], &replies[2]["actual"]), (&json!(1), &json!(2)));
    refused(&replies[3], "STALE_REVISION");
    assert_eq!((&replies[3]["expected"], &replies[3]["actual"]), (&json!(0), &json!(2)));
    assert_eq!(written(&replies[4]), (3, 3));
    refused(&replies[5], "STALE_REVISION");
    assert_eq!((&replies[5]["expected"], &replies[5]["actual"]), (&json!(9), &json!(3)));
    let texts: Vec<Value> = dump_records(&dir, &[]).iter().map(|r| r["text"].clone()).collect();
    assert_eq!(texts, [json!("first"), json!("second"), json!("fresh delta")]);
    assert_eq!(revision(&dir, "t1"), 3);
}

#[test]
fn a_duplicate_request_key_returns_the_first_receipt_and_writes_nothing() {
    let (_temp, dir) = temp_log();
    let publish = |call_id: &str| {
        event(
            "t1",
            "tool/call",
            json!({ "call_id": call_id, "tool": "publish", "effect": "idempotent",
                    "request_key": "k-weekly", "args": { "title": "Weekly" } }),
        )
    };
    let receipt = json!({ "article_id": 7, "url": "https://example.com/a/7" });
    let replies = emit(
        &dir,
        &[
            publish("c1"),
            event("t1", "tool/result", json!({ "call_id": "c1", "receipt": receipt })),
            publish("c2"),
            publish("c1"),
        ],
    );
    assert_eq!(written(&replies[0]), (1, 1));
    assert_eq!(written(&replies[1]), (2, 2));
    let duplicate = json!({
        "seq": 2, "task": "t1", "revision": 2, "durability": "synced", "duplicate": true,
        "call_id": "c1",
        "receipt": receipt,
    });
    assert_eq!(replies[2], duplicate);
    // The same call dispatched again after its result: also answered from the ledger.
    assert_eq!(replies[3], duplicate);
    // Keys in this exact order: a harness may compare the text.
    let keys: Vec<&String> = replies[2].as_object().expect("object").keys().collect();
    assert_eq!(keys, ["seq", "task", "revision", "durability", "duplicate", "call_id", "receipt"]);
    assert_eq!(dump_records(&dir, &[]).len(), 2);

    // A result without a receipt gives `"receipt": null`, in a later process too.
    let replies = emit(
        &dir,
        &[
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c3", "tool": "mark", "effect":
                   "idempotent", "request_key": "k-mark" }),
            ),
            event("t1", "tool/result", json!({ "call_id": "c3" })),
        ],
    );
    // The second process took t1 over first: c1 had completed since the last closed turn, so
    // a `recovery/restored` (seq 3) records that its receipt is to be reused.
    assert_eq!(written(&replies[1]), (5, 5));
    let again = emit_one(
        &dir,
        event(
            "t1",
            "tool/call",
            json!({ "call_id": "c4", "tool": "mark", "effect": "idempotent",
               "request_key": "k-mark" }),
        ),
    );
    assert_eq!(
        again,
        json!({ "seq": 5, "task": "t1", "revision": 6, "durability": "synced",
                "duplicate": true, "call_id": "c3", "receipt": null })
    );
    assert_eq!(revision(&dir, "t1"), 6, "the third process took t1 over too");
}

#[test]
fn refusals_have_their_codes_and_the_stream_goes_on() {
    let (_temp, dir) = temp_log();
    let long_task = "t".repeat(factlog::limits::TASK_ID_BYTES_MAX + 1);
    let long_text = "x".repeat(factlog::limits::DELTA_TEXT_BYTES_MAX + 1);
    let call = |call_id: &str, approval: &str| {
        event(
            "t1",
            "tool/call",
            json!({ "call_id": call_id, "tool": "wire", "effect": "unsafe",
                    "approval_id": approval }),
        )
    };
    let replies = emit(
        &dir,
        &[
            event(&long_task, "user/message", json!({ "text": "x" })),
            event("t1", "assistant/delta", json!({ "text": long_text })),
            event("t1", "approval/request", json!({ "approval_id": "a1" })),
            call("c1", "a1"),
            event("t1", "approval/deny", json!({ "approval_id": "a1", "reason": "no" })),
            call("c2", "a1"),
            call("c3", "never-asked"),
            event("t1", "approval/grant", json!({ "approval_id": "a2", "scope": "once" })),
            call("c4", "a2"),
            call("c5", "a2"),
        ],
    );
    refused(&replies[0], "LIMIT_EXCEEDED");
    refused(&replies[1], "LIMIT_EXCEEDED");
    assert_eq!(written(&replies[2]), (1, 1));
    assert!(refused(&replies[3], "APPROVAL_REFUSED").contains("not granted"), "{}", replies[3]);
    assert_eq!(written(&replies[4]), (2, 2));
    assert!(refused(&replies[5], "APPROVAL_REFUSED").contains("denied"), "{}", replies[5]);
    refused(&replies[6], "APPROVAL_REFUSED");
    assert_eq!(written(&replies[7]), (3, 3));
    assert_eq!(written(&replies[8]), (4, 4));
    assert!(refused(&replies[9], "APPROVAL_REFUSED").contains("used"), "{}", replies[9]);
}

#[test]
fn an_oversized_line_is_refused_and_the_next_line_is_read_whole() {
    let (_temp, dir) = temp_log();
    let body_max = factlog::limits::EVENT_BODY_BYTES_MAX;
    let mut stdin = br#"{"task":"t1","type":"user/message","text":""#.to_vec();
    stdin.extend(std::iter::repeat_n(b'x', 4 * body_max + 10));
    stdin.extend_from_slice(b"\"}\n");
    stdin.extend(input(&[event("t1", "user/message", json!({ "text": "small" }))]));
    let run = factlog(&["emit", arg(&dir)], &stdin);
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies.len(), 2, "{:?}", run.stderr);
    refused(&replies[0], "LIMIT_EXCEEDED");
    assert_eq!(written(&replies[1]), (1, 1));
    assert_eq!(dump_records(&dir, &[])[0]["text"], "small");
}

#[test]
fn a_secret_never_reaches_a_file_or_an_output() {
    const SECRET: &str = "hunter2-7c1f-do-not-leak";
    let (_temp, dir) = temp_log();
    let secret = json!({ "$secret": SECRET });
    let replies = emit(
        &dir,
        &[
            event("t1", "user/message", json!({ "text": "log in", "credentials": secret })),
            event("t1", "turn/start", json!({})),
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c1", "tool": "login", "effect": "idempotent",
                        "request_key": "k-login",
                        "args": { "user": "ann", "password": secret, "list": [1, secret] } }),
            ),
            event(
                "t1",
                "tool/result",
                json!({ "call_id": "c1", "receipt": { "token": secret },
                        "output": { "session": secret } }),
            ),
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c2", "tool": "login", "effect": "idempotent",
                        "request_key": "k-login", "args": { "password": secret } }),
            ),
            // A secret where a string must be: refused, and its message does not quote it.
            event("t1", "user/message", json!({ "text": secret })),
            event("t1", "task/phase", json!({ "phase": "x", "durability": secret })),
            event("t1", "approval/request", json!({ "approval_id": "a1", "action": secret })),
        ],
    );
    written(&replies[3]);
    assert_eq!(replies[4]["duplicate"], true);
    refused(&replies[5], "INVALID_EVENT");
    refused(&replies[6], "INVALID_EVENT");
    refused(&replies[7], "INVALID_EVENT");
    let mut outputs: Vec<(String, Vec<u8>)> =
        vec![("emit".to_owned(), replies.iter().map(Value::to_string).collect::<String>().into())];
    let commands: [&[&str]; 9] = [
        &["dump"],
        &["dump", "--json"],
        &["dump", "--raw", "--json"],
        &["state"],
        &["state", "--json"],
        &["state", "--task", "t1", "--json"],
        &["history", "--task", "t1"],
        &["history", "--task", "t1", "--json"],
        &["recover", "--json"],
    ];
    for command in commands {
        let mut args = vec![command[0], arg(&dir)];
        args.extend_from_slice(&command[1..]);
        let run = factlog(&args, b"");
        run.assert_success();
        outputs.push((command.join(" "), run.stdout));
    }
    let snapshot = factlog(&["checkpoint", arg(&dir)], b"");
    snapshot.assert_success();
    for (command, stdout) in &outputs {
        assert!(!contains_bytes(stdout, SECRET.as_bytes()), "{command} printed the secret");
    }
    assert!(contains_bytes(&outputs[1].1, b"$secret_ref"), "the reference is kept");
    let image = dir_image(&dir);
    assert!(image.keys().any(|path| path.extension().is_some_and(|e| e == "snap")));
    for (path, bytes) in &image {
        assert!(!contains_bytes(bytes, SECRET.as_bytes()), "{} holds the secret", path.display());
    }
}

#[test]
fn replies_reach_a_harness_through_a_pipe_one_by_one() {
    let (_temp, dir) = temp_log();
    let mut child = Command::new(&*FACTLOG)
        .args(["emit", arg(&dir)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn factlog emit");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (sender, replies) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if sender.send(line.expect("a reply line")).is_err() {
                return;
            }
        }
    });
    // Each reply must arrive while the next line is not yet written: a reply held in a
    // buffer until more input came would block here, and the timeout fails the test.
    let lines = [
        event("t1", "assistant/delta", json!({ "text": "a" })),
        event("t1", "assistant/delta", json!({ "text": "b" })),
        event("t1", "user/message", json!({ "text": "c" })),
        event("t1", "nope", json!({})),
        event("t1", "assistant/delta", json!({ "text": "d" })),
    ];
    for (n, line) in lines.iter().enumerate() {
        stdin.write_all(&input(std::slice::from_ref(line))).expect("write a line");
        stdin.flush().expect("flush");
        let reply = replies.recv_timeout(Duration::from_secs(20)).expect("a reply in time");
        let reply: Value = serde_json::from_str(&reply).expect("JSON reply");
        if n == 3 {
            refused(&reply, "INVALID_EVENT");
        } else {
            let expected = if n < 3 { n as u64 + 1 } else { n as u64 };
            assert_eq!(written(&reply), (expected, expected), "{reply}");
        }
    }
    drop(stdin);
    assert!(child.wait().expect("wait").success());
    reader.join().expect("reader");
}

#[test]
fn many_deltas_from_a_file_are_all_acknowledged_in_order() {
    let (_temp, dir) = temp_log();
    let count = 20_000_u64;
    let lines: Vec<Value> = (0..count)
        .map(|n| {
            event(
                if n % 3 == 0 { "t2" } else { "t1" },
                "assistant/delta",
                json!({ "text":
            format!("tok{n} ") }),
            )
        })
        .collect();
    let replies = emit(&dir, &lines);
    let mut revisions = [0_u64; 2];
    for (n, reply) in replies.iter().enumerate() {
        let slot = usize::from(n % 3 != 0);
        revisions[slot] += 1;
        assert_eq!(written(reply), (n as u64 + 1, revisions[slot]));
    }
    let state = common::cli::json_of("state", &dir, &[]);
    assert_eq!(state["last_seq"], count);
    assert_eq!(state["tasks"]["t1"]["execution"]["deltas"], revisions[1]);
    assert_eq!(state["tasks"]["t2"]["execution"]["deltas"], revisions[0]);
}

#[test]
fn an_unusable_store_exits_1_or_3_with_one_line() {
    let (temp, dir) = temp_log();
    let file = temp.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write file");
    let line = input(&[event("t1", "user/message", json!({ "text": "x" }))]);
    let run = factlog(&["emit", arg(&file)], &line);
    run.assert_one_line_error(1);
    assert!(run.stdout.is_empty());

    emit(&dir, &[event("t1", "user/message", json!({ "text": "first" }))]);
    let writer = Store::open(&dir, StoreOptions::new()).expect("open the store for writing");
    let run = factlog(&["emit", arg(&dir)], &line);
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("locked"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
    writer.close().expect("close");

    // A log of raw `factlog append` records is not a store of events: refused data.
    let (_raw_temp, raw) = temp_log();
    factlog(&["append", arg(&raw)], b"plain record\n").assert_success();
    let run = factlog(&["emit", arg(&raw)], &line);
    run.assert_one_line_error(3);
    assert!(run.stderr.contains("not a valid event"), "{}", run.stderr);
}

#[test]
fn a_usage_error_of_a_store_command_is_exit_2_and_creates_nothing() {
    let (_temp, dir) = temp_log();
    for args in [
        vec!["emit"],
        vec!["emit", arg(&dir), "extra"],
        vec!["recover", arg(&dir), "--bogus"],
        vec!["state", arg(&dir), "--task"],
        vec!["history", arg(&dir)],
        vec!["checkpoint"],
        vec!["dump", arg(&dir), "--raw", "yes"],
    ] {
        let run = factlog(&args, b"");
        run.assert_one_line_error(2);
        assert!(run.stdout.is_empty(), "{args:?}");
    }
    assert!(!dir.exists(), "a usage error must not create a store");
}

#[test]
fn a_tool_result_is_taken_in_schema_2_and_in_schema_1_through_the_upcast() {
    let (_temp, dir) = temp_log();
    let dispatch = |call_id: &str| {
        event(
            "t1",
            "tool/call",
            json!({ "call_id": call_id, "tool": "fetch", "effect": "read_only" }),
        )
    };
    let replies = emit(
        &dir,
        &[
            dispatch("c1"),
            event(
                "t1",
                "tool/result",
                json!({ "call_id": "c1", "outcome": "error", "error": "e1" }),
            ),
            dispatch("c2"),
            // Schema 1, as scripts written for factlog 0.1.0 send it.
            event(
                "t1",
                "tool/result",
                json!({ "call_id": "c2", "status": "error", "error": "e2" }),
            ),
            dispatch("c3"),
            event("t1", "tool/result", json!({ "call_id": "c3" })),
            dispatch("c4"),
            event("t1", "tool/result", json!({ "call_id": "c4", "status": "timeout" })),
            event("t1", "tool/result", json!({ "call_id": "c4", "outcome": "maybe" })),
        ],
    );
    for reply in &replies[..7] {
        assert!(reply.get("error").is_none(), "{reply}");
    }
    let message = refused(&replies[7], "INVALID_EVENT");
    assert!(message.contains("schema 1") && !message.contains("timeout"), "{message}");
    refused(&replies[8], "INVALID_EVENT");
    let results: Vec<Value> = dump_records(&dir, &[])
        .into_iter()
        .filter(|r| r["type"] == "tool/result")
        .map(|r| json!([r["call_id"], r["outcome"], r["error"], r.get("status")]))
        .collect();
    assert_eq!(
        results,
        [
            json!(["c1", "error", "e1", null]),
            json!(["c2", "error", "e2", null]),
            json!(["c3", "ok", null, null]),
        ]
    );
}
