//! The read side of the store commands keeps the CLI contract of issue 4: `factlog state`
//! prints the folded state (JSON and a text summary), `factlog history` the model-visible
//! history with every call paired with its result or an explicit unknown outcome, `factlog
//! dump` decodes typed events while printing raw records exactly as before, `factlog
//! checkpoint` writes a snapshot and `factlog verify --deep` compares snapshot and state with
//! the fold of the events. Proved by running the real binary on stores fed through `emit`.

use crate::common;

use common::cli::{crashed_store, dump_records, emit, event, json_lines, json_of, written};
use common::{append_raw, arg, factlog, temp_log};
use factlog::harness::snapshot;
use factlog::harness::state::{STATE_SCHEMA, State};
use factlog::{Seq, Store, StoreOptions};
use serde_json::{Value, json};

/// A small store: a contract, a turn with a streamed message, a completed and an open call.
fn small_store(dir: &std::path::Path) {
    let replies = emit(
        dir,
        &[
            event(
                "t1",
                "task/contract",
                json!({ "goal": "weekly report", "risk": "high",
                   "done_criteria": ["published"] }),
            ),
            event("t1", "task/phase", json!({ "phase": "drafting" })),
            event("t1", "user/message", json!({ "text": "write it\nplease" })),
            event("t1", "turn/start", json!({})),
            event("t1", "assistant/delta", json!({ "text": "On " })),
            event("t1", "assistant/delta", json!({ "text": "it." })),
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c1", "tool": "fetch",
                   "effect": "read_only", "args": { "q": "sales" } }),
            ),
            event("t1", "tool/result", json!({ "call_id": "c1", "output": { "rows": 42 } })),
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c2", "tool": "publish",
                   "effect": "idempotent", "request_key": "k-pub" }),
            ),
            event("t1", "tool/result", json!({ "call_id": "c2", "receipt": { "id": 7 } })),
            event(
                "t1",
                "approval/grant",
                json!({
                    "approval_id": "a1",
                    "scope": "persistent",
                    "expires_at_us": 4_102_444_800_000_000_u64,
                }),
            ),
            event("t2", "budget/usage", json!({ "input_tokens": 10, "output_tokens": 5 })),
        ],
    );
    replies.iter().for_each(|reply| {
        written(reply);
    });
}

#[test]
fn state_json_shows_the_folded_fields() {
    let (_temp, dir) = temp_log();
    small_store(&dir);
    let state = json_of("state", &dir, &[]);
    assert_eq!(
        state.as_object().expect("object").keys().collect::<Vec<_>>(),
        ["last_seq", "tasks"]
    );
    assert_eq!(state["last_seq"], 12);
    let t1 = &state["tasks"]["t1"];
    assert_eq!(t1["revision"], 11);
    assert_eq!(t1["task"]["goal"], "weekly report");
    assert_eq!(t1["task"]["risk"], "high");
    assert_eq!(t1["task"]["phase"], "drafting");
    assert_eq!(t1["session"]["calls"]["c2"]["status"], "completed");
    assert_eq!(t1["session"]["calls"]["c2"]["receipt"], json!({ "id": 7 }));
    assert_eq!(t1["side_effects"]["k-pub"]["receipt"], json!({ "id": 7 }));
    assert_eq!(t1["execution"]["open_turn"], 1);
    assert_eq!(t1["execution"]["deltas"], 2);
    assert_eq!(t1["control"]["approvals"]["a1"]["scope"], "persistent");
    assert_eq!(t1["control"]["needs_confirmation"], false);
    assert_eq!(state["tasks"]["t2"]["execution"]["budget"]["input_tokens"], 10);

    // The persistent approval's end of validity, also in RFC 3339, right after it.
    let approval = t1["control"]["approvals"]["a1"].as_object().expect("approval");
    let keys: Vec<&str> = approval.keys().map(String::as_str).collect();
    assert_eq!(keys, ["status", "scope", "expires_at_us", "expires_at", "requested_seq"]);
    assert_eq!(approval["expires_at_us"], 4_102_444_800_000_000_u64);
    assert_eq!(approval["expires_at"], "2100-01-01T00:00:00.000000Z");

    // One task: the same shape, holding only that task.
    let one = json_of("state", &dir, &["--task", "t1"]);
    let keys: Vec<&String> = one.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["last_seq", "tasks"]);
    assert_eq!(one["last_seq"], 12);
    assert_eq!(one["tasks"].as_object().expect("tasks").len(), 1);
    assert_eq!(&one["tasks"]["t1"], t1);
}

#[test]
fn state_text_summarises_each_task() {
    let (_temp, dir) = temp_log();
    small_store(&dir);
    let run = factlog(&["state", arg(&dir)], b"");
    run.assert_success();
    let text = run.stdout_text();
    for expected in [
        "store: 2 tasks, last seq 12",
        "task t1 (revision 11, last seq 11)",
        "  goal: weekly report",
        "  risk: high",
        "  phase: drafting",
        "  turns: 1 (1 open); steps: 0 (none open)",
        "  call c1 (fetch): completed, read_only, result ok",
        "  call c2 (publish): completed, idempotent, request key k-pub, result ok, receipt {\"id\":7}",
        "  side effect k-pub: completed by call c2, receipt {\"id\":7}",
        "  approval a1: granted, scope persistent, expires at 2100-01-01T00:00:00.000000Z",
        "  paused: no; pending cancels: 0; needs_confirmation: no",
        "task t2 (revision 1, last seq 12)",
    ] {
        assert!(text.lines().any(|line| line.starts_with(expected)), "{expected:?} in:\n{text}");
    }
    let one = factlog(&["state", arg(&dir), "--task", "t2"], b"");
    one.assert_success();
    assert!(one.stdout_text().starts_with("task t2 "), "{}", one.stdout_text());
    assert!(!one.stdout_text().contains("task t1"), "{}", one.stdout_text());
}

#[test]
fn an_unknown_task_or_store_exits_1_with_one_line() {
    let (temp, dir) = temp_log();
    small_store(&dir);
    for args in [
        vec!["state", arg(&dir), "--task", "nope"],
        vec!["state", arg(&dir), "--task", "nope", "--json"],
        vec!["history", arg(&dir), "--task", "nope"],
        vec!["history", arg(&dir), "--task", "nope", "--json"],
    ] {
        let run = factlog(&args, b"");
        run.assert_one_line_error(1);
        assert!(run.stderr.contains("\"nope\"") && run.stderr.contains("t1, t2"), "{}", run.stderr);
        assert!(run.stdout.is_empty());
    }
    let missing = temp.path().join("missing");
    for command in ["state", "history"] {
        factlog(&[command, arg(&missing), "--task", "t1"], b"").assert_one_line_error(1);
    }
    factlog(&["checkpoint", arg(&missing)], b"").assert_one_line_error(1);
    assert!(!missing.exists(), "read commands must not create a store");
    factlog(&["history", arg(&dir)], b"").assert_one_line_error(2);
}

#[test]
fn history_pairs_every_call_with_its_result_or_an_unknown_outcome() {
    let (_temp, dir) = temp_log();
    crashed_store(&dir);
    json_of("recover", &dir, &[]);
    let run = factlog(&["history", arg(&dir), "--task", "t1", "--json"], b"");
    run.assert_success();
    let entries = json_lines(&run);
    let tools: Vec<&Value> = entries.iter().filter(|e| e["role"] == "tool").collect();
    let outcome = |call_id: &str| {
        let entry = tools.iter().find(|e| e["call_id"] == call_id).expect("the call's entry");
        entry["outcome"].as_str().expect("outcome").to_owned()
    };
    assert_eq!(tools.len(), 7, "{entries:?}");
    assert_eq!(outcome("c0"), "not_started");
    for call_id in ["c1", "c2", "c3", "c4", "c5"] {
        assert_eq!(outcome(call_id), "outcome_unknown", "{call_id}");
    }
    assert_eq!(outcome("c6"), "completed");
    assert!(tools.iter().all(|e| e["outcome"] != "pending"), "an unpaired call: {tools:?}");
    let c6 = tools.iter().find(|e| e["call_id"] == "c6").expect("c6");
    assert_eq!(c6["receipt"], json!({ "rows": 42 }));
    // Every entry names the event it came from and, once answered, the event that answered
    // it: the seqs of `dump`.
    let records = common::cli::dump_records(&dir, &[]);
    let type_at = |seq: &Value| {
        records.iter().find(|r| r["seq"] == *seq).map(|r| r["type"].clone()).expect("a record")
    };
    for tool in &tools {
        let from = type_at(&tool["seq"]);
        assert!(from == "assistant/message" || from == "tool/call", "{tool}: {from}");
        match tool["outcome"].as_str() {
            Some("completed") => assert_eq!(type_at(&tool["result_seq"]), "tool/result"),
            Some("outcome_unknown") => {
                assert_eq!(type_at(&tool["result_seq"]), "tool/outcome_unknown");
            }
            _ => assert!(tool.get("result_seq").is_none(), "{tool}"),
        }
    }
    assert_eq!(
        entries[0],
        json!({ "role": "assistant", "seq": 4,
               "text": "fetching, then publishing", "partial": false })
    );
}

#[test]
fn history_text_is_one_readable_line_per_entry() {
    let (_temp, dir) = temp_log();
    small_store(&dir);
    let json = factlog(&["history", arg(&dir), "--task", "t1", "--json"], b"");
    json.assert_success();
    let run = factlog(&["history", arg(&dir), "--task", "t1"], b"");
    run.assert_success();
    assert_eq!(
        run.stdout_text(),
        "user: write it\\nplease\n\
         assistant: On it.\n\
         tool c1 fetch -> completed output {\"rows\":42}\n\
         tool c2 publish -> completed receipt {\"id\":7}\n"
    );
    assert_eq!(json_lines(&json).len(), 4);
}

#[test]
fn dump_decodes_typed_events_in_json_and_text() {
    let (_temp, dir) = temp_log();
    small_store(&dir);
    let records = dump_records(&dir, &[]);
    assert_eq!(records.len(), 12);
    let call = &records[8];
    let keys: Vec<&String> = call.as_object().expect("object").keys().collect();
    assert_eq!(keys[..6], ["seq", "task", "revision", "timestamp_us", "time", "type"]);
    assert_eq!(call["seq"], 9);
    assert_eq!(call["task"], "t1");
    assert_eq!(call["revision"], 9);
    assert!(call["timestamp_us"].as_u64().expect("timestamp") > 0);
    assert_eq!(call["type"], "tool/call");
    assert_eq!(call["call_id"], "c2");
    assert_eq!(call["effect"], "idempotent");
    assert_eq!(call["request_key"], "k-pub");
    assert_eq!(records[4]["type"], "assistant/delta");
    assert_eq!(records[4]["text"], "On ");
    assert_eq!(records[11]["task"], "t2");
    assert_eq!(records[11]["revision"], 1);

    let run = factlog(&["dump", arg(&dir), "--from", "3"], b"");
    run.assert_success();
    let text = run.stdout_text();
    // The second column is the time in RFC 3339 UTC; the rest is checked without it.
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut fields: Vec<&str> = line.split('\t').collect();
            let time = fields.remove(1);
            assert!(time.len() == 27 && time.ends_with('Z') && time.contains('T'), "{line}");
            fields.join("\t")
        })
        .collect();
    assert_eq!(lines.len(), 10);
    assert_eq!(lines[0], "3\tuser/message\tt1\t3\t{\"text\":\"write it\\nplease\"}");
    assert_eq!(lines[2], "5\tassistant/delta\tt1\t5\t{\"text\":\"On \"}");
    let fields: Vec<&str> = lines[7].split('\t').collect();
    assert_eq!(fields[..4], ["10", "tool/result", "t1", "10"]);
    let body: Value = serde_json::from_str(fields[4]).expect("compact body JSON");
    // Schema 2 of tool/result: the outcome is always there.
    assert_eq!(body, json!({ "call_id": "c2", "outcome": "ok", "receipt": { "id": 7 } }));
}

#[test]
fn dump_prints_raw_records_as_before_and_raw_forces_it() {
    let (_temp, dir) = temp_log();
    emit(&dir, &[event("t1", "user/message", json!({ "text": "hi" }))]);
    append_raw(&dir, &[b"plain", b"\xffbinary"]);

    let json = factlog(&["dump", arg(&dir), "--json"], b"");
    json.assert_success();
    let lines: Vec<String> = json.stdout_text().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3);
    let event: Value = serde_json::from_str(&lines[0]).expect("JSON");
    assert_eq!(event["type"], "user/message");
    assert_eq!(event["text"], "hi");
    assert_eq!(lines[1], "{\"seq\":2,\"payload\":\"plain\"}");
    assert_eq!(
        lines[2],
        "{\"seq\":3,\"payload\":\"\u{fffd}binary\",\"payload_b64\":\"/2JpbmFyeQ==\"}"
    );
    let text = factlog(&["dump", arg(&dir)], b"");
    text.assert_success();
    let text = text.stdout_text();
    let text_lines: Vec<&str> = text.lines().collect();
    assert_eq!(text_lines[1..], ["2\tplain", "3\t\\xffbinary"]);

    // --raw: every record as a payload, the event's envelope bytes included, exactly.
    let raw = common::dump_json(&dir, &["--raw"]);
    assert_eq!(raw, common::read_log(&dir));
    assert_eq!(raw[0].1[0], factlog::harness::codec::EVENT_MAGIC);
    let raw_text = factlog(&["dump", arg(&dir), "--raw"], b"");
    raw_text.assert_success();
    assert!(raw_text.stdout_text().starts_with("1\t\\xfa\\x01"), "{}", raw_text.stdout_text());
}

#[test]
fn checkpoint_writes_a_snapshot_that_the_next_open_uses() {
    let (_temp, dir) = temp_log();
    small_store(&dir);
    let meta = json_of("checkpoint", &dir, &[]);
    let keys: Vec<&String> = meta.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["path", "covered_seq"]);
    assert_eq!(meta["covered_seq"], 12);
    let path = std::path::PathBuf::from(meta["path"].as_str().expect("path"));
    assert!(path.is_file(), "{}", path.display());
    assert!(path.starts_with(&dir));
    let store = Store::open_read_only(&dir, StoreOptions::new()).expect("open");
    let used = store.open_report().snapshot.as_ref().expect("the snapshot is used");
    assert_eq!(used.covered_seq, Seq(12));
    assert_eq!(store.open_report().replayed_events, 0);
    drop(store);

    let text = factlog(&["checkpoint", arg(&dir)], b"");
    text.assert_success();
    assert!(text.stdout_text().contains("through seq 12"), "{}", text.stdout_text());
}

#[test]
fn verify_deep_checks_the_state_against_the_events() {
    let (_temp, dir) = temp_log();
    small_store(&dir);
    let run = factlog(&["verify", arg(&dir), "--deep", "--json"], b"");
    run.assert_success();
    let report: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    assert_eq!(report["outcome"], "clean");
    assert_eq!(report["deep"]["ok"], true);
    assert_eq!(report["deep"]["live_matches"], true);
    assert_eq!(report["deep"]["snapshot"], json!(null));
    assert_eq!(report["deep"]["events"], 12);
    let text = factlog(&["verify", arg(&dir), "--deep"], b"");
    text.assert_success();
    assert!(
        text.stdout_text().contains("equals the fold of every event"),
        "{}",
        text.stdout_text()
    );
    // Without --deep nothing changes.
    let plain = json_of("verify", &dir, &[]);
    assert!(plain.get("deep").is_none());
}

#[test]
fn verify_deep_compares_the_newest_snapshot_with_its_events() {
    let (_temp, dir) = temp_log();
    small_store(&dir);
    json_of("checkpoint", &dir, &[]);
    let report = json_of("verify", &dir, &["--deep"]);
    assert_eq!(report["deep"]["snapshot"]["covered_seq"], 12, "{report}");
    assert_eq!(report["deep"]["snapshot_matches"], true, "{report}");
    assert_eq!(report["deep"]["ok"], true);
}

#[test]
fn verify_deep_fails_on_a_snapshot_that_differs_from_the_events() {
    let (_temp, dir) = temp_log();
    small_store(&dir);
    // A well-formed snapshot whose state is not the fold of the events it claims to cover.
    let store = Store::open_read_only(&dir, StoreOptions::new()).expect("open");
    let mut state: State = store.state();
    drop(store);
    state.tasks.values_mut().for_each(|task| task.task.goal = Some("forged".to_owned()));
    let body = serde_json::to_vec(&state).expect("serialise");
    let fs = factlog::fs::RealFs;
    snapshot::write(&fs, &dir, Seq(12), STATE_SCHEMA, &body).expect("write the snapshot");

    let run = factlog(&["verify", arg(&dir), "--deep", "--json"], b"");
    assert_eq!(run.code, Some(3), "{run:?}");
    let report: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    assert_eq!(report["deep"]["ok"], false);
    assert_eq!(report["deep"]["live_matches"], false);
    assert_eq!(report["exit_code"], 3);
    let text = factlog(&["verify", arg(&dir), "--deep"], b"");
    assert_eq!(text.code, Some(3));
    assert!(text.stdout_text().contains("differs from the fold"), "{}", text.stdout_text());
    // The log itself is clean: without --deep, verify still exits 0.
    factlog(&["verify", arg(&dir)], b"").assert_success();
}

#[test]
fn verify_deep_fails_on_a_log_that_is_not_a_store() {
    let (_temp, dir) = temp_log();
    factlog(&["append", arg(&dir)], b"plain record\n").assert_success();
    factlog(&["verify", arg(&dir)], b"").assert_success();
    let run = factlog(&["verify", arg(&dir), "--deep", "--json"], b"");
    assert_eq!(run.code, Some(3), "{run:?}");
    let report: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    assert_eq!(report["outcome"], "clean");
    assert_eq!(report["deep"]["ok"], false);
    assert_eq!(report["deep"]["error"]["kind"], "corrupt_event");
    assert_eq!(report["deep"]["error"]["seq"], 1);
}
