//! Every reply of the real `factlog emit` is valid against `format-spec/schema/emit-reply.json`:
//! written replies (with and without an `id`, with warnings), a duplicate, every error code a
//! test can provoke (INVALID_EVENT, STALE_REVISION, NEEDS_CONFIRMATION, APPROVAL_REFUSED,
//! LIMIT_EXCEEDED, NEEDS_RECOVERY, CALL_ID_REUSED, UNMARKED_SECRET), and under
//! `--ack durable-only` the `covers` of every reply, the covering reply and the end reply. The
//! codes that end the stream (IO, DISK_FULL, POISONED and the store failures) need a failing
//! disk: their shape is checked on a reply built as emit.rs builds it. The schema also refuses
//! what no reply looks like, so that it cannot accept everything.

use crate::common;

use std::path::Path;

use common::cli::{event, input, json_lines};
use common::schema::{assert_invalid, assert_valid};
use common::{arg, factlog};
use serde_json::{Value, json};

const SCHEMA: &str = "emit-reply.json";

/// Runs `factlog emit DIR EXTRA..` on `lines`; asserts exit 0, validates every reply and
/// returns them.
fn emit_valid(dir: &Path, extra: &[&str], lines: &[Value]) -> Vec<Value> {
    let mut args = vec!["emit", arg(dir)];
    args.extend_from_slice(extra);
    let run = factlog(&args, &input(lines));
    run.assert_success();
    let replies = json_lines(&run);
    for reply in &replies {
        assert_valid(SCHEMA, reply);
    }
    replies
}

fn with_id(mut line: Value, id: Value) -> Value {
    line["id"] = id;
    line
}

/// A bearer token in plain text: a credential shape (format-spec/events.md).
fn bearer() -> String {
    format!("Bearer {}", "abcDEF123456ghiJKL7890mnoPQR")
}

#[test]
fn written_duplicate_and_refusal_replies_are_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = vec![
        with_id(event("t1", "task/contract", json!({ "goal": "g" })), json!("r-1")),
        with_id(event("t1", "assistant/delta", json!({ "text": "a" })), json!(2)),
        event("t1", "user/message", json!({ "text": "hello" })),
        // Warnings: an unmarked credential.
        event(
            "t1",
            "tool/call",
            json!({
                "call_id": "c1", "tool": "fetch", "effect": "idempotent", "request_key": "k1",
                "args": { "headers": { "Authorization": bearer() } },
            }),
        ),
        event(
            "t1",
            "tool/result",
            json!({ "call_id": "c1", "outcome": "ok", "receipt": { "id": 9 } }),
        ),
        // Duplicate: the request already has a result.
        with_id(
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c2", "tool": "fetch", "effect": "idempotent", "request_key": "k1" }),
            ),
            json!("dup"),
        ),
        // STALE_REVISION.
        with_id(
            event("t1", "task/phase", json!({ "phase": "p", "expected_revision": 1 })),
            json!(3.5),
        ),
        // APPROVAL_REFUSED.
        event(
            "t1",
            "tool/call",
            json!({ "call_id": "c3", "tool": "send", "effect": "unsafe", "approval_id": "nope" }),
        ),
        // CALL_ID_REUSED: c1 already names another request.
        event("t1", "tool/call", json!({ "call_id": "c1", "tool": "other", "effect": "unsafe" })),
        // LIMIT_EXCEEDED: a task id over 128 bytes.
        event(&"x".repeat(200), "turn/start", json!({})),
        // INVALID_EVENT of several kinds.
        event("t1", "turn/end", json!({})),
        event("t1", "no/such-type", json!({})),
        with_id(event("t1", "tool/call", json!({ "call_id": "c4" })), json!("bad")),
    ];
    let mut bytes = input(&lines);
    bytes.extend_from_slice(
        b"not json\n[1,2]\n{\"id\":null,\"task\":\"t1\",\"type\":\"turn/start\"}\n",
    );
    let run = factlog(&["emit", arg(dir.path())], &bytes);
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies.len(), lines.len() + 3, "one reply per non-empty line");
    for reply in &replies {
        assert_valid(SCHEMA, reply);
    }
    let codes: Vec<&str> = replies.iter().filter_map(|r| r["error"].as_str()).collect();
    assert_eq!(
        codes,
        [
            "STALE_REVISION",
            "APPROVAL_REFUSED",
            "CALL_ID_REUSED",
            "LIMIT_EXCEEDED",
            "INVALID_EVENT",
            "INVALID_EVENT",
            "INVALID_EVENT",
            "INVALID_EVENT",
            "INVALID_EVENT",
            "INVALID_EVENT",
        ],
        "{replies:#?}"
    );
    assert_eq!(replies[0]["id"], "r-1");
    assert!(replies[3]["warnings"].is_array(), "{}", replies[3]);
    assert_eq!(replies[5]["duplicate"], true, "{}", replies[5]);
}

#[test]
fn takeover_refusals_are_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    emit_valid(
        dir.path(),
        &[],
        &[
            event("high", "task/contract", json!({ "goal": "move money", "risk": "high" })),
            event("low", "task/contract", json!({ "goal": "publish" })),
            event(
                "low",
                "tool/call",
                json!({ "call_id": "c1", "tool": "publish", "effect": "unsafe" }),
            ),
        ],
    );
    // A second process takes both tasks over.
    let replies = emit_valid(
        dir.path(),
        &[],
        &[
            event(
                "high",
                "tool/call",
                json!({ "call_id": "w1", "tool": "wire", "effect": "unsafe" }),
            ),
            event(
                "low",
                "tool/call",
                json!({ "call_id": "c2", "tool": "publish", "effect": "idempotent" }),
            ),
        ],
    );
    assert_eq!(replies[0]["error"], "NEEDS_CONFIRMATION", "{}", replies[0]);
    assert_eq!(replies[1]["error"], "NEEDS_RECOVERY", "{}", replies[1]);
}

#[test]
fn unmarked_secret_refusal_is_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = emit_valid(
        dir.path(),
        &["--refuse-unmarked-secrets"],
        &[with_id(
            event("t1", "user/message", json!({ "text": format!("use {}", bearer()) })),
            json!("s"),
        )],
    );
    assert_eq!(replies[0]["error"], "UNMARKED_SECRET", "{}", replies[0]);
    assert_eq!(replies[0]["id"], "s");
}

#[test]
fn durable_only_replies_are_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let delta = |text: &str| event("t1", "assistant/delta", json!({ "text": text }));
    let lines = vec![
        delta("a"),
        delta("b"),
        event("t1", "user/message", json!({ "text": "flushed, covers the deltas" })),
        delta("c"),
        // A refusal after skipped lines: a covering reply first.
        event("t1", "turn/end", json!({})),
        delta("d"),
        // A buffered event with warnings is answered at once.
        event("t1", "task/phase", json!({ "phase": bearer() })),
        delta("e"),
    ];
    let replies = emit_valid(dir.path(), &["--ack", "durable-only"], &lines);
    let covers: u64 = replies.iter().map(|r| r["covers"].as_u64().expect("covers")).sum();
    assert_eq!(covers, lines.len() as u64, "{replies:#?}");
    assert!(
        replies.iter().any(|r| r.as_object().is_some_and(|o| o.len() == 2)),
        "a covering reply"
    );
    let last = replies.last().expect("an end reply");
    assert_eq!(last["end"], true, "{last}");
    // An empty input still ends with the end reply.
    let empty = tempfile::tempdir().expect("tempdir");
    let replies = emit_valid(empty.path(), &["--ack", "durable-only"], &[]);
    assert_eq!(replies, [json!({ "end": true, "covers": 0, "durability": "synced" })]);
}

#[test]
fn the_codes_that_end_the_stream_have_a_valid_shape() {
    // The shapes of every code that ends a stream; a test cannot make the disk fail through
    // the CLI.
    for code in [
        "IO",
        "DISK_FULL",
        "POISONED",
        "READ_ONLY",
        "LOCKED",
        "CORRUPTION",
        "TORN_TAIL",
        "UNSUPPORTED_VERSION",
        "NOT_A_LOG",
        "INVALID_OPTIONS",
        "CORRUPT_EVENT",
        "CANNOT_UPCAST",
        "CORRUPT_SNAPSHOT",
        "ERROR",
    ] {
        assert_valid(SCHEMA, &json!({ "id": "r", "error": code, "message": "m", "covers": 3 }));
        assert_valid(SCHEMA, &json!({ "error": code, "message": "m" }));
    }
    // The library's own replies to errors that end a stream, built by the code `emit` and the
    // Python package call, not by hand.
    use factlog::ErrorKind;
    use factlog::protocol::reply::{ERROR_CODES, error_code, error_reply};
    let dir = std::path::PathBuf::from("/store");
    for kind in [
        ErrorKind::ReadOnly,
        ErrorKind::Locked { dir: dir.clone() },
        ErrorKind::NotALog { dir },
        ErrorKind::InvalidOptions { reason: "a reason".to_owned() },
    ] {
        let (code, ends) = error_code(&kind);
        assert!(ends && ERROR_CODES.contains(&code), "{code}");
        let error = factlog::Error::from(kind);
        assert_valid(SCHEMA, &Value::Object(error_reply(&error, Some(json!("r")))));
        assert_valid(SCHEMA, &Value::Object(error_reply(&error, None)));
    }
}

#[test]
fn the_schema_refuses_what_no_reply_looks_like() {
    let written = json!({ "seq": 1, "task": "t", "revision": 1, "durability": "synced" });
    assert_valid(SCHEMA, &written);
    let mut extra = written.clone();
    extra["x"] = json!(1);
    for bad in [
        extra,
        json!({ "seq": 0, "task": "t", "revision": 1, "durability": "synced" }),
        json!({ "seq": 1, "task": "t", "revision": 1, "durability": "durable" }),
        json!({ "seq": 1, "task": "t", "revision": 1 }),
        json!({ "id": null, "seq": 1, "task": "t", "revision": 1, "durability": "synced" }),
        json!({ "error": "STALE_REVISION", "message": "m" }),
        json!({ "error": "INVALID_EVENT", "message": "two\nlines" }),
        json!({ "error": "INVALID_EVENT", "message": "m", "expected": 1 }),
        json!({ "error": "invalid", "message": "m" }),
        json!({ "covers": 0, "durability": "synced" }),
        json!({ "end": true, "covers": 1, "durability": "flushed" }),
        json!({ "seq": 1, "task": "t", "revision": 1, "durability": "flushed", "duplicate": true, "call_id": "c", "receipt": null }),
        json!({ "seq": 1, "task": "t", "revision": 1, "durability": "synced", "warnings": [] }),
    ] {
        assert_invalid(SCHEMA, &bad);
    }
}
