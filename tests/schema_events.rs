//! `format-spec/schema/event.json` and the real `factlog emit` agree on what a request line
//! is. One example line per event type a client may write (in an order the store accepts)
//! validates and is written by `emit`; every variant made by removing one field (envelope,
//! body, or a field of a requested call), by setting one to `null`, to a number, to a string
//! or to a marked secret `{"$secret": ..}` is refused by the schema exactly when `emit`
//! refuses it with `INVALID_EVENT`. The types only the store writes are refused by both.
//! Each variant runs in a task of its own after the examples before it, all in one `emit`
//! process, so that one variant's state cannot decide another's fate.

use crate::common;

use common::cli::{event, input, json_lines};
use common::schema::{assert_invalid, assert_valid, is_valid};
use common::{arg, factlog};
use factlog::harness::EventType;
use serde_json::{Map, Value, json};

const SCHEMA: &str = "event.json";

/// One example of every event type a client may write, in an order the store accepts, in
/// task `task`.
fn examples(task: &str) -> Vec<Value> {
    let e = |event_type: &str, fields: Value| event(task, event_type, fields);
    vec![
        e(
            "task/contract",
            json!({ "goal": "publish the report", "done_criteria": ["published"], "risk": "low" }),
        ),
        e("task/phase", json!({ "phase": "drafting" })),
        e("task/plan", json!({ "steps": ["search", "write", "publish"] })),
        e(
            "task/todo",
            json!({ "todo_id": "t-1", "text": "find sources", "status": "in_progress" }),
        ),
        e("turn/start", json!({})),
        e("step/start", json!({})),
        e("user/message", json!({ "text": "write the weekly report" })),
        e("assistant/delta", json!({ "text": "Searching" })),
        e(
            "assistant/message",
            json!({
                "text": "Searching first.",
                "tool_calls": [{ "call_id": "c1", "tool": "search", "args": { "q": "sales" } }],
            }),
        ),
        e("approval/request", json!({ "approval_id": "a1", "action": "publish the report" })),
        e("approval/grant", json!({ "approval_id": "a1", "scope": "once" })),
        e(
            "tool/call",
            json!({ "call_id": "c1", "tool": "search", "effect": "read_only", "args": { "q": "sales" } }),
        ),
        e(
            "tool/result",
            json!({ "call_id": "c1", "outcome": "ok", "receipt": { "hits": 3 }, "output": ["a", "b", "c"] }),
        ),
        e(
            "tool/call",
            json!({
                "call_id": "c2", "tool": "publish", "effect": "idempotent", "request_key": "rk-1",
                "args": { "token": { "$secret": "s3cr3t" } }, "approval_id": "a1",
            }),
        ),
        e("tool/result", json!({ "call_id": "c2", "outcome": "error", "error": "rate limited" })),
        e("approval/request", json!({ "approval_id": "a2" })),
        e("approval/deny", json!({ "approval_id": "a2", "reason": "not now" })),
        e("approval/request", json!({ "approval_id": "a3" })),
        e(
            "approval/grant",
            json!({ "approval_id": "a3", "scope": "persistent", "expires_at_us": 4_102_444_800_000_000_u64 }),
        ),
        e("budget/usage", json!({ "input_tokens": 120, "output_tokens": 40, "cost_micros": 900 })),
        e("context/compacted", json!({ "summary": "searched, publishing failed once" })),
        e(
            "record/put",
            json!({ "kind": "agents/item", "key": "rs_1", "value": { "type": "reasoning", "summary": [] } }),
        ),
        e("record/removed", json!({ "kind": "agents/item", "seqs": [2], "through_seq": 1 })),
        e(
            "record/blob",
            json!({ "kind": "langgraph/checkpoint", "key": "cp-1", "value": { "type": "msgpack" }, "bytes": "gaF2AQD/" }),
        ),
        e("step/end", json!({ "status": "failed" })),
        e("control/cancel", json!({ "reason": "user pressed stop" })),
        e("turn/end", json!({ "status": "cancelled" })),
        e("control/pause", json!({ "reason": "lunch" })),
        e("control/resume", json!({})),
        e("tool/call", json!({ "call_id": "c3", "tool": "lookup", "effect": "read_only" })),
        // Schema 1 of tool/result (no "outcome"), upcast by emit.
        e("tool/result", json!({ "call_id": "c3", "status": "ok", "x_future": { "kept": true } })),
    ]
}

/// The client-writable type names, from the schema.
fn schema_types() -> Vec<String> {
    let document = common::schema::load(SCHEMA);
    document["properties"]["type"]["enum"]
        .as_array()
        .expect("type enum")
        .iter()
        .map(|t| t.as_str().expect("a name").to_owned())
        .collect()
}

#[test]
fn the_schema_lists_every_type_a_client_may_write_and_a_body_for_every_type() {
    let writable: Vec<String> = EventType::ALL
        .iter()
        .filter(|t| !t.is_recovery_only())
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(schema_types(), writable, "event.json's type enum against EventType::ALL");
    let document = common::schema::load(SCHEMA);
    let bodies = document["$defs"]["body"]["allOf"].as_array().expect("body allOf");
    let named: Vec<String> = bodies
        .iter()
        .map(|branch| {
            let reference = branch["if"]["$ref"].as_str().expect("a discriminator");
            let def = reference.trim_start_matches("#/$defs/");
            document["$defs"][def]["properties"]["type"]["const"]
                .as_str()
                .expect("a type const")
                .to_owned()
        })
        .collect();
    let all: Vec<String> = EventType::ALL.iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(named, all, "event.json's $defs/body selects a body for every type");
    let covered: std::collections::BTreeSet<String> =
        examples("t").iter().map(|line| line["type"].as_str().expect("type").to_owned()).collect();
    // `tool/not_run` answers an unknown outcome, which only a takeover records (one `emit`
    // run cannot): its lines are checked by `schema_operator.rs` and `operator_answers.rs`.
    let writable = writable.into_iter().filter(|t| t != "tool/not_run");
    assert_eq!(covered, writable.collect(), "an example of every writable type");
}

#[test]
fn every_example_validates_and_emit_writes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = examples("t1");
    for line in &lines {
        assert_valid(SCHEMA, line);
    }
    let run = factlog(&["emit", arg(dir.path())], &input(&lines));
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies.len(), lines.len());
    for (line, reply) in lines.iter().zip(&replies) {
        assert!(reply.get("seq").is_some() && reply.get("error").is_none(), "{line} -> {reply}");
    }
}

#[test]
fn recovery_only_types_are_refused_by_the_schema_and_by_emit() {
    let recovery_only: Vec<(&str, Value)> = vec![
        ("tool/outcome_unknown", json!({ "call_id": "c1", "plan": "retry" })),
        ("approval/expired", json!({ "approval_id": "a1", "reason": "restart" })),
        ("control/expired", json!({ "signal": "control/cancel", "signal_seq": 1 })),
        ("recovery/restored", json!({ "resume": "ready", "calls": [], "expired": [] })),
        (
            "state/migrated",
            json!({ "from": 1, "to": 2, "events": 1, "rewritten": 0, "state_digest": "0".repeat(64) }),
        ),
    ];
    let names: Vec<&str> = recovery_only.iter().map(|(name, _)| *name).collect();
    let expected: Vec<&str> =
        EventType::ALL.iter().filter(|t| t.is_recovery_only()).map(|t| t.name()).collect();
    assert_eq!(names, expected);
    let dir = tempfile::tempdir().expect("tempdir");
    let lines: Vec<Value> =
        recovery_only.into_iter().map(|(name, body)| event("t1", name, body)).collect();
    for line in &lines {
        assert_invalid(SCHEMA, line);
    }
    let run = factlog(&["emit", arg(dir.path())], &input(&lines));
    run.assert_success();
    for reply in json_lines(&run) {
        assert_eq!(reply["error"], "INVALID_EVENT", "{reply}");
    }
}

/// A variant of example `index`: its line, and what it is, for messages.
struct Variant {
    index: usize,
    line: Value,
    what: String,
}

/// Every variant of every example: each field removed, and each set to null, a number, a
/// string and a marked secret (a number stays a number, a string a string).
fn variants() -> Vec<Variant> {
    let mut out = Vec::new();
    for (index, line) in examples("t").iter().enumerate() {
        let object = line.as_object().expect("an object");
        for key in object.keys() {
            let mut removed = object.clone();
            removed.shift_remove(key);
            out.push(Variant {
                index,
                line: Value::Object(removed),
                what: format!("without {key}"),
            });
            let original = &object[key];
            let mut replacements =
                vec![("null", Value::Null), ("a marked secret", json!({ "$secret": "x" }))];
            if !original.is_number() {
                replacements.push(("a number", json!(7)));
            }
            if !original.is_string() {
                replacements.push(("a string", json!("seven")));
            }
            for (name, value) in replacements {
                let mut changed = object.clone();
                changed.insert(key.clone(), value);
                out.push(Variant {
                    index,
                    line: Value::Object(changed),
                    what: format!("{key} set to {name}"),
                });
            }
        }
        // The fields of a requested call, one removed at a time.
        if let Some(calls) = line.get("tool_calls").and_then(Value::as_array) {
            for key in calls[0].as_object().expect("a call").keys() {
                let mut changed = line.clone();
                changed["tool_calls"][0].as_object_mut().expect("a call").shift_remove(key);
                out.push(Variant {
                    index,
                    line: changed,
                    what: format!("tool_calls[0] without {key}"),
                });
            }
        }
    }
    out
}

/// Sets the task of an example line (when it has one) to `task`.
fn in_task(line: &Value, task: &str) -> Value {
    let mut object: Map<String, Value> = line.as_object().expect("an object").clone();
    if object.get("task").is_some_and(Value::is_string) {
        object.insert("task".to_owned(), json!(task));
    }
    Value::Object(object)
}

#[test]
fn schema_and_emit_agree_on_every_removed_and_mistyped_field() {
    let variants = variants();
    assert!(variants.len() > 150, "{} variants", variants.len());
    // Each variant in a task of its own: the examples before it, then it.
    let mut lines = Vec::new();
    let mut variant_lines = Vec::new();
    for (n, variant) in variants.iter().enumerate() {
        let task = format!("v{n}");
        lines.extend(examples(&task).into_iter().take(variant.index));
        variant_lines.push(lines.len());
        lines.push(in_task(&variant.line, &task));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let run = factlog(&["emit", arg(dir.path())], &input(&lines));
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies.len(), lines.len(), "one reply per line");
    let mut refused = 0;
    let mut disagreements = Vec::new();
    for (variant, &at) in variants.iter().zip(&variant_lines) {
        let reply = &replies[at];
        for earlier in &replies[at - variant.index..at] {
            assert!(earlier.get("seq").is_some(), "the examples before a variant: {earlier}");
        }
        let schema_accepts = is_valid(SCHEMA, &lines[at]);
        let emit_refuses = reply["error"] == "INVALID_EVENT";
        assert!(
            reply.get("seq").is_some() || emit_refuses,
            "{}: {} -> {reply}",
            variant.what,
            lines[at]
        );
        if emit_refuses {
            refused += 1;
        }
        if schema_accepts == emit_refuses {
            disagreements.push(format!(
                "{} of example {} ({}): schema {}, emit {reply}",
                variant.what,
                variant.index,
                lines[at]["type"],
                if schema_accepts { "accepts" } else { "refuses" },
            ));
        }
    }
    assert!(disagreements.is_empty(), "schema and emit disagree:\n{}", disagreements.join("\n"));
    assert!(refused > 50, "{refused} variants refused");
}

#[test]
fn envelope_keys_are_checked_as_emit_checks_them() {
    let base = event("t1", "user/message", json!({ "text": "hi" }));
    let with = |key: &str, value: Value| {
        let mut line = base.clone();
        line[key] = value;
        line
    };
    let cases = [
        (with("id", json!("r-1")), true),
        (with("id", json!(7)), true),
        (with("id", json!(1.5)), true),
        (with("id", Value::Null), false),
        (with("id", json!(true)), false),
        (with("id", json!(["r"])), false),
        (with("expected_revision", Value::Null), true),
        (with("expected_revision", json!(0)), true),
        (with("expected_revision", json!(-1)), false),
        (with("expected_revision", json!(1.5)), false),
        (with("expected_revision", json!("0")), false),
        (with("durability", json!("synced")), true),
        (with("durability", Value::Null), true),
        (with("durability", json!("fsync")), false),
        (with("task", json!("")), false),
        (with("task", json!(1)), false),
        (with("type", json!("user/messages")), false),
        (with("type", json!(1)), false),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let lines: Vec<Value> = cases.iter().map(|(line, _)| line.clone()).collect();
    let run = factlog(&["emit", arg(dir.path())], &input(&lines));
    run.assert_success();
    let replies = json_lines(&run);
    for ((line, valid), reply) in cases.iter().zip(&replies) {
        assert_eq!(is_valid(SCHEMA, line), *valid, "schema on {line}");
        if *valid {
            // expected_revision 0 on a task that has events is stale, not invalid.
            assert_ne!(reply["error"], "INVALID_EVENT", "{line} -> {reply}");
        } else {
            assert_eq!(reply["error"], "INVALID_EVENT", "{line} -> {reply}");
        }
    }
}

#[test]
fn unknown_body_fields_are_stored_and_refused_on_a_delta() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kept = event("t1", "user/message", json!({ "text": "hi", "x_trace": { "span": 7 } }));
    // The body of a delta is its text alone: another key is refused, never dropped.
    let refused = event("t1", "assistant/delta", json!({ "text": "a", "x_trace": 1 }));
    assert_valid(SCHEMA, &kept);
    assert_invalid(SCHEMA, &refused);
    let run = factlog(&["emit", arg(dir.path())], &input(&[kept, refused]));
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies[1]["error"], "INVALID_EVENT", "{}", replies[1]);
    assert!(replies[1]["message"].as_str().unwrap().contains("x_trace"), "{}", replies[1]);
    let dump = factlog(&["dump", arg(dir.path()), "--json"], b"");
    dump.assert_success();
    let stored = json_lines(&dump);
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["x_trace"], json!({ "span": 7 }), "{}", stored[0]);
}
