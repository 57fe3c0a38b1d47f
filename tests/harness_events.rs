//! The event codec and the durability rules of `format-spec/events.md`:
//! - every event type round-trips through `codec::encode` and `codec::decode`, and re-encodes
//!   to the same bytes;
//! - unknown JSON fields (top level and nested) survive decode and re-encode byte for byte,
//!   checked on records built by hand, not by the codec under test;
//! - an unknown wire tag or body schema decodes as `Body::Opaque`, re-encodes identically, is
//!   counted by the fold (`opaque_events`) and is never dropped from a store;
//! - a raw non-event record, every truncation of every valid record, bad task lengths,
//!   non-UTF-8 text and every single-byte mutation decode as `CorruptEvent` or a valid event,
//!   never a panic or another error;
//! - `EventType::default_durability` is the table of issue 4, the store refuses less than
//!   `Synced` for a high-risk type and honours more, and the defaults take effect on the
//!   simulated disk (a process crash keeps `Flushed`, a power loss keeps `Synced`);
//! - `Task::delta` does no I/O and does not allocate per event, measured with a counting
//!   global allocator in this test binary (allocation counts are deterministic, not timing).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use common::harness::{
    NOW_US, append, approval_request, call, contract, crash, err_of, events, grant, open, open_sim,
    result, step_start, task_events, turn_start, user,
};
use factlog::engine::segment::FORMAT_VERSION;
use factlog::fs::sim::{CrashModel, SimFs};
use factlog::harness::codec::{self, ENCODING_BINARY, ENCODING_JSON};
use factlog::harness::event::{AssistantDelta, Effect, Risk, Scope};
use factlog::harness::{Body, Event, EventType};
use factlog::limits::{EVENT_ENVELOPE_BYTES, TASK_ID_BYTES_MAX};
use factlog::{AppendOptions, Durability, ErrorKind, Log, Options, Seq, Store};
use serde_json::{Value, json};

// The counting allocator: counts allocations made by the current thread while counting is on.

struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
}

#[expect(unsafe_code, reason = "a global allocator is an unsafe trait; it only forwards")]
// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// contract `GlobalAlloc` asks of the caller is the one `System` receives. The counters are
// const-initialised thread-locals without destructors: touching them never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Allocations made by this thread while running `f`.
fn allocations_during(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|c| c.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get)
}

// Sample bodies.

/// A JSON body for every type but `assistant/delta`, with every field the type serialises,
/// in the order it serialises them, so that the bytes of `to_vec(sample)` are canonical.
fn sample_json(event_type: EventType) -> Value {
    match event_type.name() {
        "task/contract" => {
            json!({"goal": "publish the weekly report", "done_criteria": ["published"], "risk": "high"})
        }
        "task/phase" => json!({"phase": "drafting"}),
        "task/plan" => json!({"steps": ["fetch", "write", "publish"]}),
        "task/todo" => json!({"todo_id": "t1", "text": "check links", "status": "done"}),
        "turn/start" | "step/start" => json!({}),
        "turn/end" => json!({"status": "failed"}),
        "step/end" => json!({"status": "interrupted", "repair": true}),
        "user/message" => json!({"text": "héllo, wörld ✓"}),
        "assistant/message" => json!({
            "text": "fetching",
            "tool_calls": [{"call_id": "c1", "tool": "fetch", "args": {"q": [1, 2.5, null]}}]
        }),
        "tool/call" => json!({
            "call_id": "c1", "tool": "publish", "effect": "idempotent",
            "request_key": "rk1_00112233445566778899aabbccddeeff",
            "args": {"title": "Weekly"}, "args_digest": "ab12", "approval_id": "a1"
        }),
        "tool/result" => json!({
            "call_id": "c1", "outcome": "error", "error": "timed out after 30 s",
            "receipt": {"article_id": 7}, "output": "timeout"
        }),
        "tool/outcome_unknown" => json!({"call_id": "c1", "plan": "ask_user"}),
        "tool/not_run" => json!({
            "call_id": "c1", "operator": {"name": "ann", "note": "checked", "key": "op-1f"}
        }),
        "approval/request" => json!({"approval_id": "a1", "action": "pay 10 EUR"}),
        "approval/grant" => {
            json!({"approval_id": "a1", "scope": "persistent", "expires_at_us": 1_800_000_000_000_000_u64})
        }
        "approval/deny" => json!({"approval_id": "a1", "reason": "too expensive"}),
        "approval/expired" => json!({"approval_id": "a1", "reason": "restart"}),
        "control/cancel" | "control/pause" | "control/resume" => json!({"reason": "user asked"}),
        "control/expired" => json!({"signal": "control/cancel", "signal_seq": 41}),
        "budget/usage" => json!({"input_tokens": 1200, "output_tokens": 345, "cost_micros": 6789}),
        "context/compacted" => json!({"summary": "the user wants a weekly report"}),
        "recovery/restored" => json!({
            "resume": "needs_confirmation",
            "calls": [{"call_id": "c1", "outcome": "outcome_unknown", "plan": "verify"}],
            "expired": ["a1"]
        }),
        "state/migrated" => json!({
            "from": 1, "to": 2, "events": 40, "rewritten": 3,
            "state_digest": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "backup": "/data/store.backup-v1"
        }),
        "record/put" => json!({
            "kind": "agents/item", "key": "msg_1",
            "value": {"type": "reasoning", "summary": [{"text": "ü"}], "n": [1, 2.5, null]}
        }),
        "record/removed" => json!({"kind": "agents/item", "seqs": [3, 5], "through_seq": 2}),
        "record/blob" => json!({
            "kind": "langgraph/checkpoint", "key": "cp-1",
            "value": {"checkpoint": {"type": "msgpack"}}, "bytes": "gaF2AQD/"
        }),
        other => panic!("no sample body for {other}: add one"),
    }
}

fn sample_body(event_type: EventType) -> Body {
    if event_type == EventType::AssistantDelta {
        return Body::AssistantDelta(AssistantDelta { text: "tok ✓ én".to_owned() });
    }
    let body = codec::body_from_value(event_type, sample_json(event_type))
        .unwrap_or_else(|e| panic!("sample of {}: {e}", event_type.name()));
    assert_eq!(body.event_type(), Some(event_type));
    body
}

/// A record built by hand from the envelope fields of `format-spec/events.md`.
#[expect(clippy::too_many_arguments, reason = "one argument per envelope field")]
fn raw_record(
    magic: u8,
    version: u8,
    tag: u16,
    schema: u16,
    encoding: u8,
    task_len: u8,
    revision: u64,
    task: &[u8],
    body: &[u8],
) -> Vec<u8> {
    let mut out = vec![magic, version];
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&schema.to_le_bytes());
    out.push(encoding);
    out.push(task_len);
    out.extend_from_slice(&revision.to_le_bytes());
    out.extend_from_slice(&NOW_US.to_le_bytes());
    out.extend_from_slice(task);
    out.extend_from_slice(body);
    out
}

fn record(tag: u16, schema: u16, encoding: u8, task: &str, revision: u64, body: &[u8]) -> Vec<u8> {
    let len = u8::try_from(task.len()).expect("short task id");
    raw_record(0xFA, 1, tag, schema, encoding, len, revision, task.as_bytes(), body)
}

#[track_caller]
fn assert_corrupt(seq: u64, bytes: &[u8], what: &str) {
    let decoded = catch_unwind(AssertUnwindSafe(|| codec::decode(Seq(seq), bytes)))
        .unwrap_or_else(|_| panic!("{what}: decode panicked"));
    match decoded {
        Err(e) => match e.kind() {
            ErrorKind::CorruptEvent { seq: s, .. } => assert_eq!(*s, seq, "{what}"),
            other => panic!("{what}: expected CorruptEvent, got {other:?}"),
        },
        Ok(event) => panic!("{what}: expected CorruptEvent, decoded {event:?}"),
    }
}

#[test]
fn every_event_type_round_trips_through_the_codec() {
    assert_eq!(EventType::ALL.len(), 30, "a new type needs a sample and a durability row");
    for (i, &event_type) in EventType::ALL.iter().enumerate() {
        let body = sample_body(event_type);
        let revision = 10 + i as u64;
        let bytes =
            codec::encode("task-ü", revision, NOW_US, &body, FORMAT_VERSION).expect("encode");
        let seq = Seq(100 + i as u64);
        let decoded = codec::decode(seq, &bytes).expect("decode");
        let expected = Event {
            seq,
            task: "task-ü".into(),
            revision,
            timestamp_us: NOW_US,
            schema: codec::schema_written(event_type, FORMAT_VERSION),
            body: body.clone(),
        };
        assert_eq!(decoded, expected, "{}", event_type.name());
        assert_eq!(codec::encode_event(&decoded).expect("re-encode"), bytes);
        let envelope = codec::peek(seq, &bytes).expect("peek");
        assert_eq!(envelope.tag, event_type.tag());
        assert_eq!(EventType::from_tag(envelope.tag), Some(event_type));
        assert_eq!(EventType::from_name(event_type.name()), Some(event_type));
        let binary = [EventType::AssistantDelta, EventType::RecordBlob].contains(&event_type);
        let encoding = if binary { ENCODING_BINARY } else { ENCODING_JSON };
        assert_eq!(envelope.encoding, encoding, "{}", event_type.name());
        // The JSON form and back gives the same body.
        let value = codec::body_to_value(&body);
        assert_eq!(codec::body_from_value(event_type, value).expect("from JSON"), body);
    }
}

#[test]
fn unknown_fields_survive_decode_and_re_encode_byte_for_byte() {
    for &event_type in EventType::ALL {
        if event_type == EventType::AssistantDelta {
            continue;
        }
        let mut value = sample_json(event_type);
        let map = value.as_object_mut().expect("an object");
        map.insert("zz_future".to_owned(), json!({"nested": [1, "two", null], "é": true}));
        map.insert("aa_added_later".to_owned(), json!("kept in its place"));
        // A nested unknown field too, where the body has nested typed objects.
        let nested = if map.contains_key("tool_calls") { "tool_calls" } else { "calls" };
        if let Some(Value::Array(items)) = map.get_mut(nested) {
            items[0].as_object_mut().expect("object").insert("x_nested".to_owned(), json!(42));
        }
        let schema = codec::schema_written(event_type, FORMAT_VERSION);
        let bytes = if event_type == EventType::RecordBlob {
            // The binary body: the two lengths, the head (unknown fields included), the bytes.
            let mut head = value.clone();
            let head = head.as_object_mut().expect("an object");
            let raw = head.remove("bytes").expect("bytes");
            let raw = codec::blob_bytes_from_base64(raw.as_str().expect("base64")).expect("b64");
            let head = serde_json::to_vec(head).expect("JSON");
            let mut body = (head.len() as u32).to_le_bytes().to_vec();
            body.extend_from_slice(&(raw.len() as u32).to_le_bytes());
            body.extend_from_slice(&head);
            body.extend_from_slice(&raw);
            record(event_type.tag(), schema, ENCODING_BINARY, "t1", 3, &body)
        } else {
            let body_bytes = serde_json::to_vec(&value).expect("JSON");
            record(event_type.tag(), schema, ENCODING_JSON, "t1", 3, &body_bytes)
        };
        let event = codec::decode(Seq(5), &bytes).expect("decode");
        assert!(!matches!(event.body, Body::Opaque(_)), "{} is typed", event_type.name());
        assert_eq!(
            codec::encode_event(&event).expect("re-encode"),
            bytes,
            "{}: unknown fields must survive byte for byte",
            event_type.name()
        );
        assert_eq!(codec::body_to_value(&event.body), value, "{}", event_type.name());
    }
}

#[test]
fn unknown_fields_appended_through_the_store_are_read_back() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let value = json!({"text": "hi", "client": {"tab": 3, "build": "2031.1"}});
    let body = codec::body_from_value(EventType::UserMessage, value.clone()).expect("body");
    append(&store, "t1", body);
    store.close().expect("close");
    let store = open(dir.path());
    let events = events(&store);
    assert_eq!(codec::body_to_value(&events[0].body), value);
}

/// Records of types or schemas this build does not know, for task `t1` from revision `from`.
fn opaque_records(from: u64) -> Vec<Vec<u8>> {
    vec![
        // A tag from the future, JSON.
        record(0x7F01, 1, ENCODING_JSON, "t1", from, br#"{"anything": [1, 2], "b": {}}"#),
        // A tag from the future, binary, not UTF-8.
        record(0x7F02, 1, ENCODING_BINARY, "t1", from + 1, &[0, 1, 2, 0xFF, 0xFE]),
        // A known tag (tool/call) with a future body schema that schema 1 cannot decode.
        record(EventType::ToolCall.tag(), 2, ENCODING_JSON, "t1", from + 2, br#"{"v2": true}"#),
        // A known tag with a future schema whose body would also decode as schema 1.
        record(EventType::UserMessage.tag(), 7, ENCODING_JSON, "t1", from + 3, br#"{"text":"x"}"#),
    ]
}

#[test]
fn unknown_tags_and_schemas_decode_as_opaque_and_re_encode_identically() {
    for (i, bytes) in opaque_records(1).iter().enumerate() {
        let event = codec::decode(Seq(1), bytes).expect("decode");
        let Body::Opaque(opaque) = &event.body else {
            panic!("record {i} must decode as opaque, got {:?}", event.body)
        };
        let envelope = codec::peek(Seq(1), bytes).expect("peek");
        assert_eq!(opaque.tag, envelope.tag);
        assert_eq!(opaque.encoding, envelope.encoding);
        assert_eq!(opaque.bytes, envelope.body);
        assert_eq!(event.schema, envelope.schema);
        assert_eq!(
            codec::encode_event(&event).expect("re-encode"),
            *bytes,
            "opaque record {i} (tag {:#06x}, schema {}) must re-encode byte for byte",
            envelope.tag,
            envelope.schema
        );
    }
}

#[test]
fn the_fold_counts_opaque_events_and_the_store_never_drops_them() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    append(&store, "t1", contract("goal", Risk::Low));
    append(&store, "t1", user("hi"));
    store.close().expect("close");
    // A newer build wrote events this one does not know.
    let raw = opaque_records(3);
    {
        let log = Log::open(dir.path(), Options::new()).expect("open the log");
        for bytes in &raw {
            log.append(bytes, Durability::Synced).expect("append raw");
        }
        log.close().expect("close the log");
    }
    let store = open(dir.path());
    let state = store.task_state("t1").expect("task t1");
    assert_eq!(state.opaque_events, raw.len() as u64);
    assert_eq!(state.revision, 2 + raw.len() as u64);
    assert_eq!(state.session.user_messages, 1, "known events are folded as before");
    // The store keeps writing after them, and reads them back unchanged.
    append(&store, "t1", user("after"));
    store.close().expect("close");
    let store = open(dir.path());
    let events = events(&store);
    assert_eq!(events.len(), 2 + raw.len() + 1);
    for (event, bytes) in events[2..2 + raw.len()].iter().zip(&raw) {
        assert!(matches!(event.body, Body::Opaque(_)), "{:?}", event.body);
        let record = store.log().read_from(event.seq).expect("read").next().expect("a record");
        assert_eq!(&record.expect("record").payload[..], &bytes[..], "kept byte for byte");
    }
    assert_eq!(store.task_state("t1").expect("t1").opaque_events, raw.len() as u64);
    let verify = store.verify_deep().expect("verify");
    assert!(verify.live_matches);
}

#[test]
fn a_store_refuses_to_append_an_opaque_event() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let event = codec::decode(Seq(1), &opaque_records(1)[0]).expect("decode");
    let e = err_of(store.task("t1").expect("task").append(event.body));
    assert!(matches!(e.kind(), ErrorKind::InvalidEvent { .. }), "{e}");
    assert_eq!(store.log().last_seq(), None, "nothing written");
}

#[test]
fn a_raw_non_event_record_is_refused_as_corrupt_event() {
    assert_corrupt(3, b"a plain record written by factlog append", "raw text");
    assert_corrupt(3, b"", "empty record");
    assert_corrupt(3, &[0xFA; 10], "too short for an envelope");
    // A store opened on a log holding a raw record refuses it: it never guesses.
    let dir = tempfile::tempdir().expect("temporary directory");
    let log = Log::open(dir.path(), Options::new()).expect("open the log");
    log.append(b"{\"type\":\"user/message\"}", Durability::Synced).expect("append");
    log.close().expect("close");
    let e = err_of(Store::open(dir.path(), common::harness::options()));
    assert!(matches!(e.kind(), ErrorKind::CorruptEvent { seq: 1, .. }), "{e}");
}

#[test]
fn every_truncation_of_every_valid_record_is_corrupt_event_never_a_panic() {
    let mut checked = 0;
    for &event_type in EventType::ALL {
        let bytes = codec::encode("task-1", 1, NOW_US, &sample_body(event_type), FORMAT_VERSION)
            .expect("encode");
        let body_at = EVENT_ENVELOPE_BYTES + "task-1".len();
        for len in 0..bytes.len() {
            let prefix = &bytes[..len];
            let what = format!("{} cut to {len} of {} bytes", event_type.name(), bytes.len());
            if len < body_at || event_type != EventType::AssistantDelta {
                assert_corrupt(9, prefix, &what);
            } else {
                // A cut delta is a shorter delta, unless the cut splits a character.
                match catch_unwind(|| codec::decode(Seq(9), prefix)).expect("no panic") {
                    Ok(event) => {
                        let Body::AssistantDelta(d) = event.body else { panic!("{what}") };
                        assert_eq!(d.text.as_bytes(), &bytes[body_at..len], "{what}");
                    }
                    Err(_) => assert_corrupt(9, prefix, &what),
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked} truncations");
}

#[test]
fn bad_envelopes_are_corrupt_event() {
    let body = br#"{"text":"hi"}"#;
    let tag = EventType::UserMessage.tag();
    let ok = record(tag, 1, ENCODING_JSON, "t1", 1, body);
    codec::decode(Seq(1), &ok).expect("the unmodified record is valid");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("bad magic", raw_record(0xFB, 1, tag, 1, 1, 2, 1, b"t1", body)),
        ("envelope version 0", raw_record(0xFA, 0, tag, 1, 1, 2, 1, b"t1", body)),
        ("envelope version 2", raw_record(0xFA, 2, tag, 1, 1, 2, 1, b"t1", body)),
        ("task length 0", raw_record(0xFA, 1, tag, 1, 1, 0, 1, b"", body)),
        ("task length past the record", raw_record(0xFA, 1, tag, 1, 1, 200, 1, b"t1", b"")),
        ("task length over the limit", raw_record(0xFA, 1, tag, 1, 1, 129, 1, &[b'x'; 129], body)),
        ("task id not UTF-8", raw_record(0xFA, 1, tag, 1, 1, 2, 1, &[0xC3, 0x28], body)),
        ("JSON body with binary encoding", record(tag, 1, ENCODING_BINARY, "t1", 1, body)),
        ("unknown encoding", record(tag, 1, 9, "t1", 1, body)),
        ("body not JSON", record(tag, 1, ENCODING_JSON, "t1", 1, b"text")),
        ("body JSON but not an object", record(tag, 1, ENCODING_JSON, "t1", 1, b"[1]")),
        ("required field missing", record(tag, 1, ENCODING_JSON, "t1", 1, b"{}")),
        ("field of the wrong type", record(tag, 1, ENCODING_JSON, "t1", 1, br#"{"text":1}"#)),
        (
            "unknown effect class",
            record(
                EventType::ToolCall.tag(),
                1,
                ENCODING_JSON,
                "t1",
                1,
                br#"{"call_id":"c","tool":"t","effect":"maybe"}"#,
            ),
        ),
        (
            "delta with JSON encoding",
            record(EventType::AssistantDelta.tag(), 1, ENCODING_JSON, "t1", 1, b"tok"),
        ),
        (
            "delta text not UTF-8",
            record(EventType::AssistantDelta.tag(), 1, ENCODING_BINARY, "t1", 1, &[0xE2, 0x82]),
        ),
    ];
    assert_eq!(TASK_ID_BYTES_MAX, 128);
    for (what, bytes) in &cases {
        assert_corrupt(7, bytes, what);
    }
}

#[test]
fn every_single_byte_mutation_decodes_or_is_corrupt_event() {
    let mut mutations = 0;
    for &event_type in EventType::ALL {
        let bytes = codec::encode("t1", 1, NOW_US, &sample_body(event_type), FORMAT_VERSION)
            .expect("encode");
        for at in 0..bytes.len() {
            for value in [0x00, 0x01, 0x7F, 0x80, 0xFF, bytes[at] ^ 0x20] {
                let mut mutated = bytes.clone();
                mutated[at] = value;
                let decoded =
                    catch_unwind(|| codec::decode(Seq(2), &mutated)).unwrap_or_else(|_| {
                        panic!("{} byte {at} = {value:#x}: panic", event_type.name())
                    });
                // A schema byte turned to 1 makes a schema-2 `tool/result` a schema-1 one whose
                // `outcome` field the upcast refuses: a refusal naming the event, not a panic.
                if let Err(e) = decoded {
                    assert!(
                        matches!(
                            e.kind(),
                            ErrorKind::CorruptEvent { seq: 2, .. }
                                | ErrorKind::CannotUpcast { seq: 2, .. }
                        ),
                        "{} byte {at} = {value:#x}: {e}",
                        event_type.name()
                    );
                }
                mutations += 1;
            }
        }
    }
    assert!(mutations > 10_000, "{mutations} mutations");
}

#[test]
fn the_default_durability_table_is_the_one_of_issue_4() {
    use Durability::{Buffered, Flushed, Synced};
    let expected = [
        ("task/contract", Synced),
        ("task/phase", Buffered),
        ("task/plan", Buffered),
        ("task/todo", Buffered),
        ("turn/start", Buffered),
        ("turn/end", Synced),
        ("step/start", Buffered),
        ("step/end", Synced),
        ("user/message", Flushed),
        ("assistant/delta", Buffered),
        ("assistant/message", Flushed),
        ("tool/call", Synced),
        ("tool/result", Synced),
        ("tool/outcome_unknown", Synced),
        ("tool/not_run", Synced),
        ("approval/request", Synced),
        ("approval/grant", Synced),
        ("approval/deny", Synced),
        ("approval/expired", Synced),
        ("control/cancel", Synced),
        ("control/pause", Synced),
        ("control/resume", Synced),
        ("control/expired", Synced),
        ("budget/usage", Buffered),
        ("context/compacted", Synced),
        ("recovery/restored", Synced),
        ("state/migrated", Synced),
        ("record/put", Flushed),
        ("record/removed", Flushed),
        ("record/blob", Flushed),
    ];
    assert_eq!(EventType::ALL.len(), expected.len(), "every type has a row");
    for (name, durability) in expected {
        let event_type = EventType::from_name(name).unwrap_or_else(|| panic!("{name} exists"));
        assert_eq!(event_type.default_durability(), durability, "{name}");
        assert_eq!(event_type.is_high_risk(), durability == Synced, "{name}");
    }
}

/// Appends `body` to `t1` asking for `durability`; expects a refusal that writes nothing.
#[track_caller]
fn assert_refused_below_synced(store: &Store, body: &Body) {
    let task = store.task("t1").expect("task");
    for asked in [Durability::Buffered, Durability::Flushed] {
        let before = store.log().last_seq();
        let options = AppendOptions { durability: Some(asked), ..AppendOptions::default() };
        let e = err_of(task.append_with(body.clone(), options));
        assert!(
            matches!(e.kind(), ErrorKind::InvalidEvent { event_type, .. }
                if Some(event_type.as_str()) == body.event_type().map(EventType::name)),
            "{} asked {asked}: {e}",
            body.type_name()
        );
        assert_eq!(store.log().last_seq(), before, "a refusal writes nothing");
    }
    // The same event with the strong guarantee is accepted and synced before the return.
    let options =
        AppendOptions { durability: Some(Durability::Synced), ..AppendOptions::default() };
    let (seq, _) =
        common::harness::written(task.append_with(body.clone(), options).expect("synced"));
    assert!(store.log().durable_seq() >= Some(seq), "{} is synced", body.type_name());
}

#[test]
fn asking_less_than_synced_for_a_high_risk_type_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let check = |body: Body| assert_refused_below_synced(&store, &body);
    check(contract("goal", Risk::Low));
    append(&store, "t1", turn_start());
    append(&store, "t1", step_start());
    check(common::harness::step_end());
    check(common::harness::turn_end());
    check(call("c1", "publish", Effect::Unsafe, None));
    check(result("c1", Some(json!({"id": 1}))));
    check(approval_request("a1"));
    check(grant("a1", Scope::Once, None));
    check(Body::ApprovalDeny(factlog::harness::event::ApprovalDeny {
        approval_id: "a2".into(),
        ..Default::default()
    }));
    check(common::harness::cancel());
    check(Body::Pause(factlog::harness::event::Signal::default()));
    check(common::harness::resume());
    check(Body::ContextCompacted(factlog::harness::event::ContextCompacted {
        summary: "s".into(),
        ..Default::default()
    }));
    // Recovery-only types are refused from a caller at any durability.
    for &event_type in EventType::ALL.iter().filter(|t| t.is_recovery_only()) {
        let before = store.log().last_seq();
        let e = err_of(store.task("t1").expect("task").append(sample_body(event_type)));
        assert!(matches!(e.kind(), ErrorKind::InvalidEvent { .. }), "{}: {e}", event_type.name());
        assert_eq!(store.log().last_seq(), before);
    }
}

#[test]
fn asking_more_than_the_default_is_honoured_on_the_simulated_disk() {
    for (asked, model) in [
        (Durability::Synced, CrashModel::LoseUnsynced),
        (Durability::Flushed, CrashModel::ProcessCrash),
    ] {
        let fs = SimFs::new(3);
        let store = open_sim(&fs).expect("open");
        let task = store.task("t1").expect("task");
        let options = AppendOptions { durability: Some(asked), ..AppendOptions::default() };
        task.append_with(common::harness::phase("drafting"), options).expect("phase");
        let budget = Body::BudgetUsage(factlog::harness::event::BudgetUsage {
            input_tokens: 5,
            ..Default::default()
        });
        task.append_with(budget, options).expect("budget");
        let rebooted = crash(&fs, store, model);
        let store = open_sim(&rebooted).expect("reopen");
        let names = common::harness::type_names(&task_events(&store, "t1"));
        assert_eq!(names, ["task/phase", "budget/usage"], "asked {asked}, crashed {model:?}");
    }
}

#[test]
fn default_durabilities_take_effect_on_the_simulated_disk() {
    let fs = SimFs::new(5);
    let store = open_sim(&fs).expect("open");
    let task = store.task("t1").expect("task");
    // A delta does no I/O at all: it waits in the writer's buffer.
    let ops = fs.ops();
    let delta = task.delta("tok").expect("delta");
    assert_eq!(fs.ops(), ops, "a Buffered delta makes no file-system call");
    assert!(store.log().durable_seq() < Some(delta), "a delta is not synced by itself");
    // A user message is written to the kernel: it survives a process crash.
    append(&store, "t1", user("hello"));
    let after_message = fs.reboot(CrashModel::ProcessCrash, 1);
    // A tool call is synced before the append returns: it survives a power loss.
    append(&store, "t1", call("c1", "publish", Effect::Unsafe, None));
    let rebooted = crash(&fs, store, CrashModel::LoseUnsynced);

    let store = open_sim(&after_message).expect("reopen after the process crash");
    let names = common::harness::type_names(&task_events(&store, "t1"));
    assert_eq!(names, ["assistant/delta", "user/message"], "Flushed survives a process crash");
    drop(store);
    let store = open_sim(&rebooted).expect("reopen after the power loss");
    let names = common::harness::type_names(&task_events(&store, "t1"));
    assert_eq!(names, ["assistant/delta", "user/message", "tool/call"], "Synced survives");
}

#[test]
fn a_delta_does_not_allocate_per_event() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(dir.path(), common::harness::options()).expect("open");
    let task = store.task("session-1").expect("task");
    // Warm-up: the task cell, the writer's buffers and any lazily built state exist now.
    for _ in 0..1_000 {
        task.delta("tok").expect("delta");
    }
    const DELTAS: u64 = 10_000;
    let allocations = allocations_during(|| {
        for _ in 0..DELTAS {
            task.delta("tok").expect("delta");
        }
    });
    let per_delta = allocations as f64 / DELTAS as f64;
    println!("{allocations} allocations in {DELTAS} deltas ({per_delta:.4} per delta)");
    assert!(per_delta < 0.01, "{allocations} allocations in {DELTAS} deltas");
    // The counter works: an ordinary append allocates.
    let allocations = allocations_during(|| {
        task.append(user("hi")).expect("append");
    });
    assert!(allocations > 0, "the counting allocator must see allocations");
    assert_eq!(task.state().execution.deltas, 1_000 + DELTAS);
}

/// The allocations of a typed append other than a delta are few and counted: `docs/
/// performance.md` ("The typed append path") names each one (the one-event batch, the encoded
/// bodies' list, the body's JSON, the record and the list of records, the event's task id for
/// the fold; a tool call or result adds its call id and the calls' map entry in the state).
/// Deterministic counts, not timing.
#[test]
fn a_typed_append_allocates_only_what_the_performance_notes_name() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(dir.path(), common::harness::options()).expect("open");
    let task = store.task("session-1").expect("task");
    for round in 0..3 {
        // Bodies are built before the count: building them is the caller's.
        let bodies = [turn_start(), user("a message"), step_start()];
        for body in bodies {
            let name = body.type_name();
            let allocations = allocations_during(|| {
                task.append(body).expect("append");
            });
            assert!(allocations <= 4, "round {round}: {name} made {allocations} allocations");
        }
        let id = format!("c{round}");
        for body in [call(&id, "search", Effect::ReadOnly, None), result(&id, None)] {
            let name = body.type_name();
            let allocations = allocations_during(|| {
                task.append(body).expect("append");
            });
            assert!(allocations <= 7, "round {round}: {name} made {allocations} allocations");
        }
        task.append(common::harness::step_end()).expect("step/end");
        task.append(common::harness::turn_end()).expect("turn/end");
    }
}
