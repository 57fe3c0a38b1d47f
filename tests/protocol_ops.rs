//! Every operation of a served store's socket (`factlog::protocol::Op`) serialises to the
//! wire form `format-spec/server.md` documents, key order included, parses back equal (by the
//! server's parser and by serde), and validates against `format-spec/schema/server-line.json`;
//! the server answers each with a reply that its typed reply reads and the schema accepts; a
//! malformed or unknown operation is refused by name. `variant` is an exhaustive `match`, so
//! a variant added to `Op` without an example here does not compile.

use crate::common;

use common::schema::assert_valid;
use factlog::protocol::op::{
    CheckpointReply, ClientsReply, EventsPage, HistoryPage, RecoverReply, RequestedDurability,
    RevisionReply, StateReply, SyncReply, TasksPage, read_reply,
};
use factlog::protocol::{Op, OpRequest};
use factlog::server::conn::{NoHolds, serve_stream};
use factlog::{AppendOptions, Durability, Store, StoreOptions};
use serde_json::{Map, Value, json};

const SCHEMA: &str = "server-line.json";

/// The index of `op`'s variant. Exhaustive on purpose: a new variant must be listed here,
/// and then `every_variant_has_an_example` asks for its example.
fn variant(op: &Op) -> usize {
    match op {
        Op::Revision { .. } => 0,
        Op::State { .. } => 1,
        Op::History { .. } => 2,
        Op::Events { .. } => 3,
        Op::Follow { .. } => 4,
        Op::Tasks { .. } => 5,
        Op::Recover { .. } => 6,
        Op::Checkpoint => 7,
        Op::Purge { .. } => 8,
        Op::Batch { .. } => 9,
        Op::Clients => 10,
        Op::Sync => 11,
    }
}

const VARIANTS: usize = 12;

fn object(value: Value) -> Map<String, Value> {
    let Value::Object(object) = value else { panic!("a JSON object: {value}") };
    object
}

fn task(name: &str) -> String {
    name.to_owned()
}

/// Each operation with its line as `format-spec/server.md` writes it (without `id`) and
/// whether `server-line.json` describes it (a batch asking for `replicated` durability is not
/// in the schema, which lists the durabilities of a batch reply).
fn examples() -> Vec<(Op, &'static str, bool)> {
    let members = vec![object(json!({"type": "turn/end"})), object(json!({"type": "turn/start"}))];
    vec![
        (Op::Revision { task: task("t1") }, r#"{"op":"revision","task":"t1"}"#, true),
        (Op::State { task: task("t1") }, r#"{"op":"state","task":"t1"}"#, true),
        (
            Op::History { task: task("t1"), from: 0 },
            r#"{"op":"history","task":"t1","from":0}"#,
            true,
        ),
        (
            Op::Events { from_seq: Some(1), task: Some(task("t1")), limit: Some(100) },
            r#"{"op":"events","from_seq":1,"task":"t1","limit":100}"#,
            true,
        ),
        // What `Client::events` sends for every task.
        (
            Op::Events { from_seq: Some(1), task: None, limit: None },
            r#"{"op":"events","from_seq":1}"#,
            true,
        ),
        (
            Op::Follow {
                from_seq: Some(58),
                task: Some(task("t1")),
                limit: Some(100),
                timeout_ms: Some(30_000),
            },
            r#"{"op":"follow","from_seq":58,"task":"t1","limit":100,"timeout_ms":30000}"#,
            true,
        ),
        // What `Client::follow` sends for every task: `task` is `null`, not absent.
        (
            Op::Follow { from_seq: Some(1), task: None, limit: None, timeout_ms: Some(0) },
            r#"{"op":"follow","from_seq":1,"task":null,"timeout_ms":0}"#,
            true,
        ),
        (Op::Tasks { after: None }, r#"{"op":"tasks","after":null}"#, true),
        (Op::Tasks { after: Some(task("t1")) }, r#"{"op":"tasks","after":"t1"}"#, true),
        (Op::Recover { dry_run: false }, r#"{"op":"recover","dry_run":false}"#, true),
        (Op::Checkpoint, r#"{"op":"checkpoint"}"#, true),
        (Op::Clients, r#"{"op":"clients"}"#, true),
        (Op::Sync, r#"{"op":"sync"}"#, true),
        (Op::Purge { dry_run: true }, r#"{"op":"purge","dry_run":true}"#, true),
        (
            Op::batch(
                "t1",
                members.clone(),
                AppendOptions {
                    durability: Some(Durability::Synced),
                    ..AppendOptions::expecting(4)
                },
            ),
            r#"{"op":"batch","task":"t1","events":[{"type":"turn/end"},{"type":"turn/start"}],"expected_revision":4,"durability":"synced"}"#,
            true,
        ),
        (
            Op::batch("t1", members, AppendOptions::default().replicated()),
            r#"{"op":"batch","task":"t1","events":[{"type":"turn/end"},{"type":"turn/start"}],"durability":"replicated"}"#,
            false,
        ),
    ]
}

#[test]
fn every_variant_has_an_example() {
    let mut seen = [false; VARIANTS];
    for (op, _, _) in examples() {
        seen[variant(&op)] = true;
    }
    let missing: Vec<usize> = (0..VARIANTS).filter(|&index| !seen[index]).collect();
    assert!(missing.is_empty(), "variants without an example: {missing:?}");
    // The names the server lists when it refuses an unknown op are the variants' names.
    let mut names: Vec<&str> = examples().iter().map(|(op, _, _)| op.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), VARIANTS);
    for name in names {
        assert!(Op::NAMES.contains(&name), "{name} is not in Op::NAMES");
    }
    assert_eq!(Op::NAMES.len(), VARIANTS);
}

#[test]
fn every_op_serialises_to_its_wire_form_and_parses_back_equal() {
    for (op, wire, in_schema) in examples() {
        assert_eq!(serde_json::to_string(&op).expect("serialise"), wire, "{op:?}");
        let parsed = OpRequest::from_object(object(serde_json::from_str(wire).expect("JSON")))
            .unwrap_or_else(|refusal| panic!("{wire} refused: {}", refusal.reason));
        assert_eq!(parsed, OpRequest { id: None, op: op.clone() }, "{wire}");

        // With an `id`: first on the line, echoed by the parse, and through serde both ways.
        for id in [json!(7), json!("r7")] {
            let request = OpRequest { id: Some(id.clone()), op: op.clone() };
            let line = serde_json::to_string(&request).expect("serialise");
            assert_eq!(line, format!("{{\"id\":{id},{}", &wire[1..]));
            assert_eq!(serde_json::to_string(&request.to_object()).expect("serialise"), line);
            let back: OpRequest = serde_json::from_str(&line).expect("parse back");
            assert_eq!(back, request);
            if in_schema {
                assert_valid(SCHEMA, &serde_json::from_str(&line).expect("JSON"));
            }
        }
    }
}

#[test]
fn absent_and_null_keys_read_as_their_defaults() {
    let cases = [
        (json!({"op": "history", "task": "t1"}), Op::History { task: task("t1"), from: 0 }),
        (
            json!({"op": "history", "task": "t1", "from": null}),
            Op::History { task: task("t1"), from: 0 },
        ),
        (json!({"op": "tasks"}), Op::Tasks { after: None }),
        (json!({"op": "recover"}), Op::Recover { dry_run: false }),
        (json!({"op": "purge", "dry_run": null}), Op::Purge { dry_run: false }),
        (json!({"op": "events"}), Op::Events { from_seq: None, task: None, limit: None }),
        (
            json!({"op": "follow", "from_seq": null, "task": null, "limit": null, "timeout_ms": null}),
            Op::Follow { from_seq: None, task: None, limit: None, timeout_ms: None },
        ),
        // Keys an operation does not read are ignored (a batch refuses them).
        (json!({"op": "checkpoint", "extra": 1}), Op::Checkpoint),
        (json!({"op": "revision", "task": "t1", "extra": 1}), Op::Revision { task: task("t1") }),
    ];
    for (line, op) in cases {
        let parsed = OpRequest::from_object(object(line.clone()))
            .unwrap_or_else(|refusal| panic!("{line} refused: {}", refusal.reason));
        assert_eq!(parsed.op, op, "{line}");
    }
}

/// The message of the refusal of `line`, and its `id`.
fn refusal(line: &Value) -> (Option<Value>, String) {
    match OpRequest::from_object(object(line.clone())) {
        Ok(parsed) => panic!("{line} was read as {parsed:?}"),
        Err(refusal) => {
            let reply = refusal.into_reply();
            let reply = reply.object();
            assert_eq!(reply["error"], "INVALID_EVENT", "{line}");
            (reply.get("id").cloned(), reply["message"].as_str().expect("a message").to_owned())
        }
    }
}

#[test]
fn an_unknown_or_malformed_op_is_refused_by_name() {
    let (id, message) = refusal(&json!({"id": 3, "op": "frobnicate", "task": "t"}));
    assert_eq!(id, Some(json!(3)));
    assert!(
        message.starts_with(
            "unknown \"op\" \"frobnicate\" (known: \"revision\", \"state\", \"history\", \
             \"events\", \"follow\", \"tasks\", \"recover\", \"checkpoint\", \"clients\", \
             \"sync\", \"purge\", \"batch\"; an append has \"type\" instead); nothing was written"
        ),
        "{message}"
    );
    // Names are exact: the tag is not case-folded.
    assert!(refusal(&json!({"op": "Revision", "task": "t"})).1.starts_with("unknown \"op\""));
    let cases = [
        (json!({"id": [1], "op": "state"}), None, "\"id\" must be a string or a number"),
        (json!({"id": 1, "op": 5}), Some(json!(1)), "\"op\" must be a string"),
        (json!({"id": 1, "op": "state"}), Some(json!(1)), "\"task\" is missing"),
        // An unknown op needs a task too: its missing task is refused first, as it always was.
        (json!({"op": "frobnicate"}), None, "\"task\" is missing"),
        (json!({"op": "revision", "task": ""}), None, "\"task\" must be a non-empty string"),
        (
            json!({"op": "history", "task": "t", "from": -1}),
            None,
            "\"from\" must be a non-negative integer",
        ),
        (json!({"op": "events", "from_seq": "1"}), None, "\"from_seq\" must be a positive integer"),
        (json!({"op": "events", "limit": 0}), None, "\"limit\" must be a positive integer"),
        (json!({"op": "events", "task": 1}), None, "\"task\" must be a non-empty string or null"),
        // `timeout_ms` is read before the keys of the page.
        (
            json!({"op": "follow", "from_seq": -1, "timeout_ms": 30_001}),
            None,
            "\"timeout_ms\" must be an integer from 0 to 30000",
        ),
        (json!({"op": "tasks", "after": 1}), None, "\"after\" must be a task id or null"),
        (json!({"op": "recover", "dry_run": "yes"}), None, "\"dry_run\" must be true or false"),
        (json!({"op": "purge", "dry_run": 1}), None, "\"dry_run\" must be true or false"),
        (
            json!({"op": "batch", "task": "t", "events": {}}),
            None,
            "\"events\" must be an array of event objects",
        ),
        (
            json!({"op": "batch", "task": "t", "events": [], "zz": 1}),
            None,
            "a batch request has no key \"zz\"",
        ),
        (
            json!({"op": "batch", "task": "t", "events": [1]}),
            None,
            "every member of \"events\" is a JSON object",
        ),
        (
            json!({"op": "batch", "task": "t", "events": [{"type": "turn/start", "task": "u"}]}),
            None,
            "\"task\" is given twice with different values",
        ),
        (
            json!({"op": "batch", "task": "t", "events": [], "durability": "fast"}),
            None,
            "\"durability\" must be",
        ),
        // The first bad member is named, whatever is wrong with the ones after it.
        (
            json!({"op": "batch", "task": "t", "events": [{"type": "no/such"}, 1]}),
            None,
            "unknown event type \"no/such\"",
        ),
    ];
    for (line, id, start) in cases {
        let (got_id, message) = refusal(&line);
        assert_eq!(got_id, id, "{line}");
        assert!(message.starts_with(start), "{line}: {message}");
    }
}

fn with(durability: Durability) -> AppendOptions {
    AppendOptions { durability: Some(durability), ..AppendOptions::default() }
}

#[test]
fn requested_durability_round_trips_append_options() {
    let cases = [
        (AppendOptions::default(), None),
        (with(Durability::Buffered), Some(RequestedDurability::Buffered)),
        (with(Durability::Flushed), Some(RequestedDurability::Flushed)),
        (with(Durability::Synced), Some(RequestedDurability::Synced)),
        (AppendOptions::default().replicated(), Some(RequestedDurability::Replicated)),
    ];
    for (options, requested) in cases {
        assert_eq!(RequestedDurability::of(options), requested, "{options:?}");
        let back = RequestedDurability::options(requested, options.expected_revision);
        assert_eq!(RequestedDurability::of(back), requested);
    }
}

/// Reads `reply` as the typed reply of `op`, and checks it against the schema.
fn check_typed_reply(op: &Op, reply: Map<String, Value>) {
    assert!(!reply.contains_key("error"), "{op:?}: {reply:?}");
    assert_valid(SCHEMA, &Value::Object(reply.clone()));
    let read = |result: Result<(), serde_json::Error>| {
        result.unwrap_or_else(|error| panic!("{op:?}: the reply {reply:?} is not typed: {error}"));
    };
    match op {
        Op::Revision { .. } => read(read_reply::<RevisionReply>(reply.clone()).map(drop)),
        Op::State { .. } => read(read_reply::<StateReply>(reply.clone()).map(drop)),
        Op::History { .. } => read(read_reply::<HistoryPage>(reply.clone()).map(drop)),
        Op::Events { .. } | Op::Follow { .. } => {
            read(read_reply::<EventsPage>(reply.clone()).map(drop));
        }
        Op::Tasks { .. } => read(read_reply::<TasksPage>(reply.clone()).map(drop)),
        Op::Recover { .. } => read(read_reply::<RecoverReply>(reply.clone()).map(drop)),
        Op::Checkpoint => read(read_reply::<CheckpointReply>(reply.clone()).map(drop)),
        Op::Clients => read(read_reply::<ClientsReply>(reply.clone()).map(drop)),
        Op::Sync => {
            let synced = read_reply::<SyncReply>(reply.clone());
            assert_eq!(synced.expect("a sync reply").durability, "synced");
        }
        Op::Purge { .. } => {
            read(read_reply::<factlog::harness::PurgeReport>(reply.clone()).map(drop));
        }
        // A written reply with `count` (protocol.md's written reply, and the schema's).
        Op::Batch { .. } => assert_eq!(reply["count"], 2),
    }
}

#[test]
fn the_server_answers_every_op_with_its_typed_reply() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
    let members = vec![
        object(json!({"type": "task/contract", "goal": "g"})),
        object(json!({"type": "turn/start"})),
    ];
    let ops = vec![
        Op::Batch {
            task: task("t1"),
            events: members,
            expected_revision: Some(0),
            durability: None,
        },
        Op::Revision { task: task("t1") },
        Op::State { task: task("t1") },
        Op::State { task: task("none") },
        Op::History { task: task("t1"), from: 0 },
        Op::Events { from_seq: None, task: None, limit: None },
        Op::Events { from_seq: Some(2), task: Some(task("t1")), limit: Some(1) },
        Op::Follow { from_seq: Some(1), task: None, limit: None, timeout_ms: Some(0) },
        Op::Follow { from_seq: Some(99), task: Some(task("t1")), limit: None, timeout_ms: Some(0) },
        Op::Tasks { after: None },
        Op::Recover { dry_run: true },
        Op::Checkpoint,
        Op::Clients,
        Op::Sync,
        Op::Purge { dry_run: true },
    ];
    let mut seen = [false; VARIANTS];
    let mut input = b"{\"hello\":\"factlog\",\"version\":1}\n".to_vec();
    for (index, op) in ops.iter().enumerate() {
        seen[variant(op)] = true;
        let request = OpRequest { id: Some(json!(index)), op: op.clone() };
        input.extend_from_slice(serde_json::to_string(&request).expect("serialise").as_bytes());
        input.push(b'\n');
    }
    assert!(seen.iter().all(|&seen| seen), "every variant is run: {seen:?}");
    let mut output = Vec::new();
    let _ = serve_stream(&store, &NoHolds, 1, &input[..], &mut output);
    let replies: Vec<Map<String, Value>> = output
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .skip(1)
        .map(|line| object(serde_json::from_slice(line).expect("a JSON reply")))
        .collect();
    assert_eq!(replies.len(), ops.len());
    for (index, (op, reply)) in ops.iter().zip(replies).enumerate() {
        assert_eq!(reply.keys().next().map(String::as_str), Some("id"), "{reply:?}");
        assert_eq!(reply["id"], index, "{reply:?}");
        check_typed_reply(op, reply);
    }
}

#[test]
fn a_served_store_tells_how_many_clients_it_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
    let server = store.serve(factlog::server::ServeOptions::new().clients_max(5)).expect("serve");
    let mut first = factlog::client::Client::connect(dir.path()).expect("connect");
    assert_eq!(first.clients().expect("clients"), (1, 5));
    let second = factlog::client::Client::connect(dir.path()).expect("connect");
    assert_eq!(first.clients().expect("clients"), (2, 5));
    drop(second);
    drop(first);
    drop(server);
    store.close().expect("close");
}
