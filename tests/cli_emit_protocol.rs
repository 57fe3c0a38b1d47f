//! `factlog emit` keeps protocol version 1 (`format-spec/protocol.md`): an `id` of a request
//! (string or number) is echoed first in its reply, refused or not, and never stored; any other
//! `id` is refused; every non-empty line gets one reply in order, bad JSON included, and blank
//! lines none; every successful reply says the durability its append waited for; a stale
//! revision is refused with a message; `--ack durable-only` skips the replies of buffered
//! events, each later reply covering them, the `covers` of all replies adding up to the
//! non-empty lines, errors replied to at once and a final `end` reply. Proved by running the
//! real binary and reading the store back with `factlog dump`.

use crate::common;

use common::cli::{dump_records, emit, event, input, json_lines, refused, written};
use common::{arg, factlog, temp_log};
use serde_json::{Value, json};

/// `event` with an `id`.
fn with_id(id: Value, task: &str, event_type: &str, fields: Value) -> Value {
    let mut line = event(task, event_type, fields);
    line["id"] = id;
    line
}

/// The reply without its `id`, which must be the first key and equal `id`.
fn strip_id(reply: &Value, id: &Value) -> Value {
    let object = reply.as_object().expect("an object");
    assert_eq!(object.keys().next().map(String::as_str), Some("id"), "{reply}");
    assert_eq!(&reply["id"], id, "{reply}");
    let mut rest = object.clone();
    rest.shift_remove("id");
    Value::Object(rest)
}

#[test]
fn an_id_is_echoed_first_on_every_kind_of_reply_and_never_stored() {
    let (_temp, dir) = temp_log();
    let publish = |id: Value, call_id: &str| {
        with_id(
            id,
            "t1",
            "tool/call",
            json!({ "call_id": call_id, "tool": "publish", "effect": "idempotent",
                    "request_key": "k1" }),
        )
    };
    let ids = [json!("req-1"), json!(2), json!(3.5), json!("r4"), json!(-5), json!("r6")];
    let lines = [
        publish(ids[0].clone(), "c1"),
        with_id(ids[1].clone(), "t1", "tool/result", json!({ "call_id": "c1", "receipt": 7 })),
        publish(ids[2].clone(), "c2"),
        with_id(ids[3].clone(), "t1", "user/message", json!({ "text": 5 })),
        with_id(
            ids[4].clone(),
            "t1",
            "user/message",
            json!({ "text": "x", "expected_revision": 0 }),
        ),
        with_id(ids[5].clone(), "t1", "assistant/delta", json!({ "text": "tok" })),
    ];
    let replies = emit(&dir, &lines);
    assert_eq!(written(&strip_id(&replies[0], &ids[0])), (1, 1));
    assert_eq!(written(&strip_id(&replies[1], &ids[1])), (2, 2));
    let duplicate = strip_id(&replies[2], &ids[2]);
    assert_eq!(duplicate["duplicate"], true, "{duplicate}");
    assert_eq!(duplicate["durability"], "synced", "{duplicate}");
    refused(&strip_id(&replies[3], &ids[3]), "INVALID_EVENT");
    refused(&strip_id(&replies[4], &ids[4]), "STALE_REVISION");
    assert_eq!(written(&strip_id(&replies[5], &ids[5])), (3, 3));

    let records = dump_records(&dir, &[]);
    assert_eq!(records.len(), 3);
    for record in &records {
        assert!(record.get("id").is_none() && record.get("body.id").is_none(), "{record}");
    }
}

#[test]
fn an_id_that_is_not_a_string_or_a_number_is_refused() {
    let (_temp, dir) = temp_log();
    let lines: Vec<Value> = [json!(null), json!(true), json!([1]), json!({ "n": 1 })]
        .into_iter()
        .map(|id| with_id(id, "t1", "user/message", json!({ "text": "x" })))
        .collect();
    for reply in emit(&dir, &lines) {
        let message = refused(&reply, "INVALID_EVENT");
        assert!(message.contains("\"id\""), "{message}");
    }
    assert!(dump_records(&dir, &[]).is_empty());
}

#[test]
fn every_non_empty_line_gets_one_reply_in_order_and_blank_lines_none() {
    let (_temp, dir) = temp_log();
    let mut stdin = b"  \n\t\n".to_vec();
    stdin.extend(input(&[with_id(json!(1), "t1", "user/message", json!({ "text": "a" }))]));
    stdin.extend_from_slice(b"{\"id\": 2, \"task\": \n");
    stdin.extend_from_slice(b"[\"not\", \"an object\"]\n\n");
    stdin.extend_from_slice(b"42\n");
    stdin.extend(input(&[with_id(json!(5), "t1", "user/message", json!({ "text": "b" }))]));
    stdin.extend_from_slice(b"   \r\n");
    let run = factlog(&["emit", arg(&dir)], &stdin);
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies.len(), 5, "{run:?}");
    assert_eq!(written(&strip_id(&replies[0], &json!(1))), (1, 1));
    // A line that is not JSON cannot have its id read: its reply has none.
    assert!(refused(&replies[1], "INVALID_EVENT").contains("not valid JSON"));
    assert!(refused(&replies[2], "INVALID_EVENT").contains("not a JSON object"));
    assert!(refused(&replies[3], "INVALID_EVENT").contains("not a JSON object"));
    assert_eq!(written(&strip_id(&replies[4], &json!(5))), (2, 2));
}

#[test]
fn every_successful_reply_says_the_durability_it_waited_for() {
    let (_temp, dir) = temp_log();
    let lines = [
        event("t1", "assistant/delta", json!({ "text": "a" })),
        event("t1", "user/message", json!({ "text": "m" })),
        event("t1", "task/contract", json!({ "goal": "g", "risk": "low" })),
        event("t1", "turn/start", json!({})),
        event("t1", "assistant/delta", json!({ "text": "b", "durability": "flushed" })),
        event("t1", "assistant/delta", json!({ "text": "c", "durability": "synced" })),
        event("t1", "user/message", json!({ "text": "n", "durability": "buffered" })),
        event("t1", "user/message", json!({ "text": "o", "durability": "synced" })),
        event("t1", "turn/end", json!({ "durability": "synced" })),
        event("t1", "assistant/delta", json!({ "text": "d", "expected_revision": 9 })),
        event("t1", "assistant/delta", json!({ "text": "e", "expected_revision": 0 })),
    ];
    let replies = emit(&dir, &lines);
    let expected = [
        "buffered", "flushed", "synced", "buffered", "flushed", "synced", "buffered", "synced",
        "synced", "buffered",
    ];
    for (reply, durability) in replies.iter().zip(expected) {
        written(reply);
        assert_eq!(reply["durability"], durability, "{reply}");
    }
    refused(&replies[10], "STALE_REVISION");
}

#[test]
fn a_stale_revision_reply_has_a_message_saying_what_to_do() {
    let (_temp, dir) = temp_log();
    let replies = emit(
        &dir,
        &[
            event("t1", "user/message", json!({ "text": "a" })),
            event("t1", "user/message", json!({ "text": "b", "expected_revision": 0 })),
        ],
    );
    let message = refused(&replies[1], "STALE_REVISION");
    assert!(message.contains("nothing was written") && message.contains("re-read"), "{message}");
    assert_eq!((&replies[1]["expected"], &replies[1]["actual"]), (&json!(0), &json!(1)));
}

/// Runs `emit --ack durable-only` on `stdin`; asserts exit 0, that the `covers` of the replies
/// add up to `lines` and that the last reply is the `end` one; returns the replies.
fn durable_only(dir: &std::path::Path, stdin: &[u8], lines: u64) -> Vec<Value> {
    let run = factlog(&["emit", arg(dir), "--ack", "durable-only"], stdin);
    run.assert_success();
    let replies = json_lines(&run);
    let covered: u64 = replies.iter().map(|r| r["covers"].as_u64().expect("covers")).sum();
    assert_eq!(covered, lines, "{replies:?}");
    let end = replies.last().expect("an end reply");
    let keys: Vec<&str> = end.as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(keys, ["end", "covers", "durability"], "{end}");
    assert_eq!((&end["end"], &end["durability"]), (&json!(true), &json!("synced")));
    replies
}

#[test]
fn durable_only_skips_buffered_replies_and_the_next_durable_reply_covers_them() {
    let (_temp, dir) = temp_log();
    let delta = |text: &str| event("t1", "assistant/delta", json!({ "text": text }));
    let mut lines = vec![delta("a"), delta("b"), delta("c")];
    lines.push(with_id(json!("m1"), "t1", "user/message", json!({ "text": "m" })));
    lines.extend([delta("d"), delta("e")]);
    lines.push(event("t1", "task/contract", json!({ "goal": "g", "risk": "low" })));
    lines.extend([delta("f"), delta("g")]);
    let mut stdin = b"\n".to_vec();
    stdin.extend(input(&lines));
    let replies = durable_only(&dir, &stdin, 9);
    assert_eq!(replies.len(), 3, "{replies:?}");
    // The message (flushed) covers the three deltas before it and itself; its id is echoed.
    assert_eq!(replies[0]["id"], "m1");
    assert_eq!((&replies[0]["seq"], &replies[0]["covers"]), (&json!(4), &json!(4)));
    assert_eq!(replies[0]["durability"], "flushed");
    assert_eq!((&replies[1]["seq"], &replies[1]["covers"]), (&json!(7), &json!(3)));
    assert_eq!(replies[1]["durability"], "synced");
    assert_eq!(replies[2]["covers"], 2, "the end covers the last two deltas");
    assert_eq!(dump_records(&dir, &[]).len(), 9);

    // Nothing skipped: the end reply covers nothing.
    let (_temp, dir) = temp_log();
    let replies =
        durable_only(&dir, &input(&[event("t1", "user/message", json!({ "text": "m" }))]), 1);
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[1]["covers"], 0);
    // Empty input: only the end reply.
    let replies = durable_only(&dir, b"", 0);
    assert_eq!(replies.len(), 1);
}

#[test]
fn durable_only_replies_to_errors_and_duplicates_at_once() {
    let (_temp, dir) = temp_log();
    let delta = |text: &str| event("t1", "assistant/delta", json!({ "text": text }));
    let publish = |call_id: &str| {
        event(
            "t1",
            "tool/call",
            json!({ "call_id": call_id, "tool": "publish", "effect": "idempotent",
                    "request_key": "k1" }),
        )
    };
    let mut stdin = input(&[delta("a"), delta("b")]);
    stdin.extend_from_slice(b"not json\n");
    stdin.extend(input(&[
        with_id(json!(9), "t1", "turn/end", json!({})),
        publish("c1"),
        event("t1", "tool/result", json!({ "call_id": "c1" })),
        delta("c"),
        publish("c2"),
    ]));
    let replies = durable_only(&dir, &stdin, 8);
    let shapes: Vec<Value> = replies
        .iter()
        .map(|r| json!([r.get("error"), r.get("seq"), r.get("duplicate"), r["covers"]]))
        .collect();
    assert_eq!(
        shapes,
        [
            // The skipped deltas are synced and covered before the error is replied to.
            json!([null, null, null, 2]),
            json!(["INVALID_EVENT", null, null, 1]),
            json!(["INVALID_EVENT", null, null, 1]),
            json!([null, 3, null, 1]),
            json!([null, 4, null, 1]),
            json!([null, null, null, 1]),
            json!([null, 4, true, 1]),
            json!([null, null, null, 0]),
        ],
        "{replies:?}"
    );
    let keys: Vec<&str> =
        replies[0].as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(keys, ["covers", "durability"]);
    assert_eq!(replies[0]["durability"], "synced");
    assert_eq!(replies[2]["id"], 9);
    assert_eq!(replies[6]["durability"], "synced");
}

#[test]
fn the_default_ack_is_every_and_has_no_covers() {
    let (_temp, dir) = temp_log();
    let lines = [event("t1", "assistant/delta", json!({ "text": "a" }))];
    for args in [vec!["emit", arg(&dir)], vec!["emit", arg(&dir), "--ack", "every"]] {
        let run = factlog(&args, &input(&lines));
        run.assert_success();
        let replies = json_lines(&run);
        assert_eq!(replies.len(), 1, "{run:?}");
        written(&replies[0]);
    }
    let run = factlog(&["emit", arg(&dir), "--ack", "sometimes"], b"");
    run.assert_one_line_error(2);
}
