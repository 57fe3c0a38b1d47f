//! Secrets never reach the disk (R16; `format-spec/events.md`, "Secrets" and "Argument
//! digests"). Unique random-looking secrets (`{"$secret": "..."}`) are put in `tool/call`
//! arguments, the arguments of a call an `assistant/message` asks for, a `tool/result`
//! receipt, unknown extra fields of other bodies and a batch; then every file under the store
//! directory is read raw, recursively (segments, the preallocated file, snapshots after
//! `checkpoint()`), after a flush, a close and a reopen, and none holds a secret's bytes, while
//! each event holds a `{"$secret_ref": "sec_<32 hex>"}` in its place. The argument digest of
//! two dispatches with the same secret-bearing arguments is the same (masking), equals the
//! digest of the masked arguments, and differs from the digest of the unmasked ones.

use crate::common;

use std::collections::BTreeSet;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;

use common::harness::{append, contains, events, files_under, open, task_events, user};
use factlog::harness::event::{Effect, ToolCall};
use factlog::harness::{Body, EventType, codec, request_key};
use factlog::{AppendOptions, Durability, Store};
use serde_json::{Value, json};

/// A secret no file could hold by chance: 128 random bits, a recognisable prefix.
fn fresh_secret(label: &str) -> String {
    let mut bits = [0u64; 2];
    for (i, part) in bits.iter_mut().enumerate() {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write(label.as_bytes());
        hasher.write_usize(i);
        *part = hasher.finish();
    }
    format!("sk-{label}-{:016x}{:016x}", bits[0], bits[1])
}

fn secret(value: &str) -> Value {
    json!({"$secret": value})
}

/// True if `value` is `{"$secret_ref": "sec_" + 32 lowercase hex digits}`.
fn is_reference(value: &Value) -> bool {
    let Some(map) = value.as_object() else { return false };
    let Some(Value::String(reference)) = map.get("$secret_ref") else { return false };
    map.len() == 1
        && reference.len() == 36
        && reference.starts_with("sec_")
        && reference[4..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

struct Secrets {
    all: Vec<String>,
}

/// Appends events carrying secrets in every place a body can hold one.
fn write_secrets(store: &Store) -> Secrets {
    let names = ["args", "nested", "asked", "receipt", "extra", "batch"];
    let all: Vec<String> = names.iter().map(|n| fresh_secret(n)).collect();
    let [args, nested, asked, receipt, extra, batch] = &all[..] else { unreachable!() };
    let asked_message = codec::body_from_value(
        EventType::AssistantMessage,
        json!({"text": "mailing", "tool_calls": [
            {"call_id": "c1", "tool": "send_mail", "args": {"password": secret(asked)}}
        ]}),
    )
    .expect("message body");
    append(store, "t1", asked_message);
    let call = Body::ToolCall(ToolCall {
        call_id: "c1".into(),
        tool: "send_mail".to_owned(),
        effect: Effect::Unsafe,
        args: Some(json!({
            "to": "ops@example.com",
            "token": secret(args),
            "list": [1, {"deep": secret(nested)}],
        })),
        ..Default::default()
    });
    append(store, "t1", call);
    let result = codec::body_from_value(
        EventType::ToolResult,
        json!({
            "call_id": "c1",
            "outcome": "ok",
            "receipt": {"message_id": "m-7", "signature": secret(receipt)}
        }),
    )
    .expect("result body");
    append(store, "t1", result);
    // An unknown field of a body that has no secret field of its own.
    let message = codec::body_from_value(
        EventType::UserMessage,
        json!({"text": "here are my credentials", "x_credentials": {"api": secret(extra)}}),
    )
    .expect("message body");
    append(store, "t1", message);
    let in_batch = codec::body_from_value(
        EventType::Phase,
        json!({"phase": "mailing", "x_vault": [secret(batch)]}),
    )
    .expect("phase body");
    store
        .task("t1")
        .expect("task")
        .append_batch_with(vec![in_batch, user("batched")], AppendOptions::default())
        .expect("batch");
    Secrets { all: all.clone() }
}

#[track_caller]
fn assert_no_secret_on_disk(dir: &Path, secrets: &Secrets, when: &str) {
    let files = files_under(dir);
    assert!(files.iter().any(|(p, _)| p.extension().is_some_and(|e| e == "seg")), "{when}");
    for (path, bytes) in &files {
        for s in &secrets.all {
            assert!(!contains(bytes, s.as_bytes()), "{when}: {} holds secret {s}", path.display());
        }
    }
}

/// Every `$secret_ref` object in `value`.
fn references(value: &Value, out: &mut Vec<Value>) {
    match value {
        Value::Object(map) if map.contains_key("$secret_ref") => out.push(value.clone()),
        Value::Object(map) => map.values().for_each(|v| references(v, out)),
        Value::Array(items) => items.iter().for_each(|v| references(v, out)),
        _ => {}
    }
}

#[track_caller]
fn assert_events_hold_references(store: &Store, secrets: &Secrets) {
    let mut found = Vec::new();
    for event in task_events(store, "t1") {
        let value = codec::body_to_value(&event.body);
        let text = value.to_string();
        for s in &secrets.all {
            assert!(!text.contains(s.as_str()), "{}: holds a secret", event.body.type_name());
        }
        assert!(!text.contains("\"$secret\""), "{}: {text}", event.body.type_name());
        references(&value, &mut found);
    }
    assert_eq!(found.len(), secrets.all.len(), "one reference per secret: {found:?}");
    assert!(found.iter().all(is_reference), "{found:?}");
    let distinct: BTreeSet<String> = found.iter().map(Value::to_string).collect();
    assert_eq!(distinct.len(), found.len(), "every secret gets its own reference");
    // The typed places hold the references too.
    let events = task_events(store, "t1");
    let Body::ToolCall(call) = &events[1].body else { panic!("{:?}", events[1].body) };
    let args = call.args.as_ref().expect("args");
    assert!(is_reference(&args["token"]) && is_reference(&args["list"][1]["deep"]), "{args}");
    assert_eq!(args["to"], "ops@example.com", "the rest of the arguments is kept");
    let Body::ToolResult(result) = &events[2].body else { panic!("{:?}", events[2].body) };
    assert!(is_reference(&result.receipt.as_ref().expect("receipt")["signature"]));
    // So do the folded state and the model-visible history.
    let state = serde_json::to_string(&store.state()).expect("state JSON");
    let history = serde_json::to_string(&store.history("t1").expect("history")).expect("JSON");
    for s in &secrets.all {
        assert!(!state.contains(s.as_str()) && !history.contains(s.as_str()));
    }
}

#[test]
fn secrets_reach_no_file_of_the_log() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let secrets = write_secrets(&store);
    store.flush(Durability::Synced).expect("sync");
    assert_no_secret_on_disk(dir.path(), &secrets, "after a sync");
    // The walk does see what the events hold: the search would find a secret's bytes.
    let files = files_under(dir.path());
    assert!(files.iter().any(|(_, bytes)| contains(bytes, b"ops@example.com")), "control");
    assert_events_hold_references(&store, &secrets);
    store.close().expect("close");
    assert_no_secret_on_disk(dir.path(), &secrets, "after close");
    let store = open(dir.path());
    assert_events_hold_references(&store, &secrets);
    store.recover().expect("recover");
    store.close().expect("close");
    assert_no_secret_on_disk(dir.path(), &secrets, "after recovery");
}

#[test]
fn secrets_reach_no_snapshot() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let secrets = write_secrets(&store);
    let meta = store.checkpoint().expect("checkpoint");
    assert!(meta.path.starts_with(dir.path()), "{meta:?}");
    let snapshots = files_under(&dir.path().join("snapshots"));
    assert!(!snapshots.is_empty(), "a snapshot file exists");
    assert_no_secret_on_disk(dir.path(), &secrets, "after a checkpoint");
    store.close().expect("close");
    let store = open(dir.path());
    assert!(store.open_report().snapshot.is_some());
    assert_events_hold_references(&store, &secrets);
}

fn dispatch(store: &Store, call_id: &str, args: Value) -> String {
    let body = Body::ToolCall(ToolCall {
        call_id: call_id.into(),
        tool: "send_mail".to_owned(),
        effect: Effect::Unsafe,
        args: Some(args),
        ..Default::default()
    });
    let seq = append(store, "t1", body);
    let event = events(store).into_iter().find(|e| e.seq == seq).expect("the dispatch");
    let Body::ToolCall(call) = event.body else { panic!("{:?}", event.body) };
    call.args_digest.expect("the store fills in the digest")
}

#[test]
fn the_argument_digest_masks_secrets() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let s = fresh_secret("digest");
    let args = json!({"to": "ops@example.com", "token": secret(&s), "n": [1, 2]});
    let first = dispatch(&store, "c1", args.clone());
    let second = dispatch(&store, "c2", args.clone());
    assert_eq!(first, second, "the same arguments give the same digest despite fresh references");
    assert_eq!(first.len(), 64);
    assert!(first.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert_ne!(first, request_key::args_digest(&args), "not the digest of the unmasked arguments");
    let masked = json!({"to": "ops@example.com", "token": {"$secret_ref": "masked"}, "n": [1, 2]});
    assert_eq!(first, request_key::args_digest(&masked), "the digest of the masked arguments");
    // It reveals nothing about the secret: another secret gives the same digest...
    let other =
        json!({"to": "ops@example.com", "token": secret(&fresh_secret("other")), "n": [1, 2]});
    assert_eq!(dispatch(&store, "c3", other), first);
    // ...while a change of the other arguments gives a new one.
    let changed = json!({"to": "dev@example.com", "token": secret(&s), "n": [1, 2]});
    assert_ne!(dispatch(&store, "c4", changed), first);
    // Key order does not matter (canonical JSON).
    let reordered: Value = serde_json::from_str(&format!(
        r#"{{"n":[1,2],"token":{{"$secret":"{s}"}},"to":"ops@example.com"}}"#
    ))
    .expect("JSON");
    assert_eq!(dispatch(&store, "c5", reordered), first);
    store.close().expect("close");
    let files = files_under(dir.path());
    assert!(files.iter().all(|(_, bytes)| !contains(bytes, s.as_bytes())));
}
