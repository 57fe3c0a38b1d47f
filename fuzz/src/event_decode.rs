//! Target `event_decode`: [`factlog::harness::codec::peek`] and
//! [`factlog::harness::codec::decode`] on arbitrary bytes taken as one event record at seq 1
//! (`format-spec/events.md`, "Envelope" and "Bodies"), and
//! [`factlog::harness::codec::body_from_json`] on arbitrary text for a chosen event type.
//!
//! It checks that neither panics; that a refusal is `CorruptEvent` naming seq 1 (or
//! `CannotUpcast` naming seq 1, only for a `tool/result` of schema 1), never another kind of
//! error, and that `decode` refuses whatever `peek` refuses; that an accepted envelope holds
//! exactly the fields at the offsets the spec gives; that a decoded event has that envelope, is
//! opaque exactly when its tag is unknown or its schema is not one this build reads
//! (`codec::schema_readable`), and encodes
//! again (`codec::encode_event`) to a record that decodes to the same event (a pair assertion),
//! to the very same bytes for an opaque event and for `assistant/delta`, and to a stable
//! record for a JSON body or a `record/blob` (encoding it once more changes nothing).
//!
//! The JSON part reads the first byte as a selector (`EventType::ALL[b % len]`) and the rest,
//! when it is UTF-8, as the body's JSON: a body `body_from_json` accepts must have the selected
//! type, give a JSON object from `body_to_value`, come back equal through `body_from_value`,
//! and survive a record round trip (`codec::encode`, `codec::decode`).
//!
//! Inputs are bounded by libFuzzer's `-max_len`; nothing here allocates from a length read
//! from the input.

use factlog::engine::segment::FORMAT_VERSION;
use factlog::harness::codec::{self, ENCODING_BINARY, ENCODING_JSON, EVENT_MAGIC};
use factlog::harness::codec::{ENVELOPE_VERSION, EnvelopeRef};
use factlog::harness::{Body, Event, EventType};
use factlog::limits::{EVENT_ENVELOPE_BYTES, TASK_ID_BYTES_MAX};
use factlog::{Error, ErrorKind, Seq};
use serde_json::{Value, json};

/// The sequence number every input is decoded at.
const SEQ: Seq = Seq(1);

/// What an input reached, for the replay test's coverage checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// `peek` accepted the envelope.
    pub envelope: bool,
    /// `decode` accepted the record.
    pub decoded: bool,
    /// The decoded body is opaque.
    pub opaque: bool,
    /// `body_from_json` accepted the input's JSON part for the selected type.
    pub json_body: bool,
}

/// The body of the target.
pub fn run(data: &[u8]) -> Outcome {
    let mut outcome = Outcome::default();
    let peeked = codec::peek(SEQ, data);
    let decoded = codec::decode(SEQ, data);
    match (&peeked, &decoded) {
        (Ok(env), Ok(event)) => {
            check_envelope(data, env);
            check_event(data, env, event);
            outcome.envelope = true;
            outcome.decoded = true;
            outcome.opaque = matches!(event.body, Body::Opaque(_));
        }
        (Ok(env), Err(error)) => {
            check_envelope(data, env);
            let upcast = env.tag == EventType::ToolResult.tag() && env.schema == 1;
            match error.kind() {
                ErrorKind::CannotUpcast { seq, .. } if upcast => assert_eq!(*seq, SEQ.0),
                _ => assert_corrupt(error),
            }
            assert!(
                EventType::from_tag(env.tag).is_some_and(|t| codec::schema_readable(t, env.schema)),
                "only a known type of a schema it reads can have a refused body: {error}"
            );
            outcome.envelope = true;
        }
        (Err(error), Err(again)) => {
            assert_corrupt(error);
            assert_corrupt(again);
        }
        (Err(error), Ok(event)) => panic!("peek refuses ({error}) what decode accepts: {event:?}"),
    }
    outcome.json_body = check_json(data);
    outcome
}

fn assert_corrupt(error: &Error) {
    match error.kind() {
        ErrorKind::CorruptEvent { seq, .. } => assert_eq!(*seq, SEQ.0, "the error names seq 1"),
        other => panic!("a bad event record is CorruptEvent, not {other:?}"),
    }
}

/// An accepted envelope is the bytes at the spec's offsets.
fn check_envelope(data: &[u8], env: &EnvelopeRef<'_>) {
    assert!(data.len() > EVENT_ENVELOPE_BYTES, "at least 25 bytes");
    assert_eq!(data[0], EVENT_MAGIC);
    assert_eq!(data[1], ENVELOPE_VERSION);
    assert_eq!(env.tag, u16::from_le_bytes([data[2], data[3]]));
    assert_eq!(env.schema, u16::from_le_bytes([data[4], data[5]]));
    assert_eq!(env.encoding, data[6]);
    let task_len = usize::from(data[7]);
    assert!((1..=TASK_ID_BYTES_MAX).contains(&task_len), "task_len {task_len}");
    assert_eq!(env.task.len(), task_len);
    let body_at = EVENT_ENVELOPE_BYTES + task_len;
    assert_eq!(env.task.as_bytes(), &data[EVENT_ENVELOPE_BYTES..body_at]);
    assert_eq!(env.revision, u64::from_le_bytes(data[8..16].try_into().expect("8 bytes")));
    assert_eq!(env.timestamp_us, u64::from_le_bytes(data[16..24].try_into().expect("8 bytes")));
    assert_eq!(env.body, &data[body_at..]);
}

/// A decoded event has its envelope's fields, and encodes again to a record that decodes to it.
fn check_event(data: &[u8], env: &EnvelopeRef<'_>, event: &Event) {
    assert_eq!(event.seq, SEQ);
    assert_eq!(event.task.as_str(), env.task);
    assert_eq!((event.revision, event.timestamp_us), (env.revision, env.timestamp_us));
    // A schema-1 `tool/result` is read as schema 2, the schema it was upcast to.
    let upcast = env.tag == EventType::ToolResult.tag() && env.schema == 1;
    assert_eq!(event.schema, if upcast { 2 } else { env.schema });
    let known = EventType::from_tag(env.tag).filter(|&t| codec::schema_readable(t, env.schema));
    match (&event.body, known) {
        (Body::Opaque(o), None) => {
            let kept = (o.tag, o.schema, o.encoding, &o.bytes[..]);
            assert_eq!(kept, (env.tag, env.schema, env.encoding, env.body), "kept as read");
        }
        (Body::Opaque(o), Some(t)) => panic!("a known type and schema ({t:?}) decoded as {o:?}"),
        (body, None) => panic!("an unknown tag or schema decoded as a typed body: {body:?}"),
        (body, Some(t)) => {
            assert_eq!(body.event_type(), Some(t), "the body has the tag's type");
            let binary = t == EventType::AssistantDelta || t == EventType::RecordBlob;
            let expected = if binary { ENCODING_BINARY } else { ENCODING_JSON };
            assert_eq!(env.encoding, expected, "the type's encoding");
        }
    }

    let again = codec::encode_event(event).expect("a decoded event encodes again");
    let back = codec::decode(SEQ, &again).expect("the re-encoded record decodes");
    assert_eq!(&back, event, "decode(encode(decode(bytes))) == decode(bytes)");
    match &event.body {
        Body::Opaque(_) | Body::AssistantDelta(_) => {
            assert!(again == data, "an opaque event or a delta re-encodes to the same bytes");
        }
        _ => {
            let twice = codec::encode_event(&back).expect("encodes a third time");
            assert!(twice == again, "re-encoding a JSON body is stable");
        }
    }
}

/// The JSON part: returns whether `body_from_json` accepted it.
fn check_json(data: &[u8]) -> bool {
    let Some((&selector, json)) = data.split_first() else { return false };
    if std::str::from_utf8(json).is_err() {
        return false;
    }
    let event_type = EventType::ALL[usize::from(selector) % EventType::ALL.len()];
    let Ok(body) = codec::body_from_json(event_type, json) else { return false };
    assert_eq!(body.event_type(), Some(event_type), "the body has the selected type");
    let value = codec::body_to_value(&body);
    assert!(value.is_object(), "a body's JSON is an object: {value}");
    let again = codec::body_from_value(event_type, value).expect("body_to_value is accepted back");
    assert_eq!(again, body, "body_from_value(body_to_value(body)) == body");
    let record = codec::encode("fuzz", 1, 0, &body, FORMAT_VERSION).expect("a small body encodes");
    let decoded = codec::decode(SEQ, &record).expect("an encoded body decodes");
    assert_eq!(decoded.body, body, "the body survives a record round trip");
    true
}

/// A body of each event type with every field set (and an unknown field), as JSON.
fn sample(event_type: EventType) -> Value {
    use EventType as T;
    let mut value = match event_type {
        T::Contract => json!({"goal": "ship it", "done_criteria": ["tests pass"], "risk": "high"}),
        T::Phase => json!({"phase": "build"}),
        T::Plan => json!({"steps": ["read", "write"]}),
        T::Todo => json!({"todo_id": "1", "text": "write", "status": "in_progress"}),
        T::TurnEnd => json!({"status": "interrupted", "repair": true}),
        T::StepEnd => json!({"status": "failed"}),
        T::UserMessage => json!({"text": "hello é"}),
        T::AssistantDelta => return json!({"text": "Hel"}),
        T::AssistantMessage => json!({
            "text": "calling",
            "tool_calls": [{"call_id": "c1", "tool": "search", "args": {"q": "x"}, "n": 1}],
        }),
        T::ToolCall => json!({
            "call_id": "c1", "tool": "search", "effect": "queryable",
            "request_key": "rk1_e362cd94117d2656a79816ef33cd0880", "args": {"q": "x", "k": [1]},
            "args_digest": "00", "approval_id": "a1",
        }),
        T::ToolResult => json!({
            "call_id": "c1", "outcome": "error", "error": "boom", "receipt": {"id": 7},
            "output": [1, 2.5, "x", null],
        }),
        T::ToolOutcomeUnknown => json!({"call_id": "c1", "plan": "verify"}),
        T::ToolNotRun => json!({
            "call_id": "c1", "operator": {"name": "alice", "note": "checked", "key": "op-00"},
        }),
        T::ApprovalRequest => json!({"approval_id": "a1", "action": "publish"}),
        T::ApprovalGrant => {
            json!({"approval_id": "a1", "scope": "persistent", "expires_at_us": 1_700_000_000_u64})
        }
        T::ApprovalDeny => json!({"approval_id": "a1", "reason": "no"}),
        T::ApprovalExpired => json!({"approval_id": "a1", "reason": "restart"}),
        T::Cancel | T::Pause | T::Resume => json!({"reason": "user"}),
        T::SignalExpired => json!({"signal": "control/cancel", "signal_seq": 12}),
        T::BudgetUsage => json!({"input_tokens": 10, "output_tokens": 20, "cost_micros": 30}),
        T::ContextCompacted => json!({"summary": "so far"}),
        T::Restored => json!({
            "resume": "needs_confirmation",
            "calls": [{"call_id": "c1", "outcome": "outcome_unknown", "plan": "ask_user"}],
            "expired": ["a1"],
        }),
        T::Migrated => json!({
            "from": 1, "to": 2, "events": 40, "rewritten": 3,
            "state_digest": "00ff", "backup": "/backup",
        }),
        T::RecordPut => {
            json!({"kind": "agents/item", "key": "k1", "value": {"type": "x", "n": [1]}})
        }
        T::RecordRemoved => json!({"kind": "agents/item", "seqs": [1, 2], "through_seq": 3}),
        T::RecordBlob => {
            json!({"kind": "langgraph/checkpoint", "key": "k1", "value": {"n": 1}, "bytes": "AP8="})
        }
        _ => json!({}),
    };
    value["x_seed"] = json!({"kept": [true, -1]});
    value
}

/// A record with a hand-written envelope (for the damaged seeds).
fn raw(tag: u16, schema: u16, encoding: u8, task: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = vec![EVENT_MAGIC, ENVELOPE_VERSION];
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&schema.to_le_bytes());
    out.push(encoding);
    out.push(u8::try_from(task.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(&7u64.to_le_bytes());
    out.extend_from_slice(&1_700_000_000_000_000u64.to_le_bytes());
    out.extend_from_slice(task);
    out.extend_from_slice(body);
    out
}

/// Seeds: a record and a JSON-part input of every event type, and records that break each
/// validity rule of the envelope and the body.
#[must_use]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for (index, &event_type) in EventType::ALL.iter().enumerate() {
        let name = event_type.name().replace('/', "-");
        let value = sample(event_type);
        let body = codec::body_from_value(event_type, value.clone()).expect("a sample body");
        let record = codec::encode("seed-task", 3, 1_700_000_000_000_000, &body, FORMAT_VERSION)
            .expect("seed");
        seeds.push((format!("record-{name}"), record));
        let mut json = vec![u8::try_from(index).expect("fewer than 256 types")];
        json.extend_from_slice(value.to_string().as_bytes());
        seeds.push((format!("json-{name}"), json));
    }
    let call = br#"{"call_id":"c1","tool":"t","effect":"unsafe"}"#;
    let tag = |t: EventType| t.tag();
    let valid = raw(tag(EventType::ToolCall), 1, ENCODING_JSON, b"t1", call);
    let result = tag(EventType::ToolResult);
    let mut bad_version = valid.clone();
    bad_version[1] = 2;
    let mut long_task = raw(tag(EventType::Phase), 1, ENCODING_JSON, &[b'a'; 128], b"{}");
    long_task[7] = 129;
    let damaged: Vec<(&str, Vec<u8>)> = vec![
        ("short", valid[..EVENT_ENVELOPE_BYTES].to_vec()),
        ("bad-envelope-version", bad_version),
        ("task-len-zero", raw(tag(EventType::Phase), 1, ENCODING_JSON, b"", b"{}")),
        ("task-len-over-max", long_task),
        ("task-truncated", valid[..EVENT_ENVELOPE_BYTES + 1].iter().copied().chain([9]).collect()),
        ("task-not-utf8", raw(tag(EventType::Phase), 1, ENCODING_JSON, b"\xff\xfe", b"{}")),
        ("wrong-encoding", raw(tag(EventType::ToolCall), 1, ENCODING_BINARY, b"t1", call)),
        ("bad-json-body", raw(tag(EventType::ToolCall), 1, ENCODING_JSON, b"t1", b"{\"call_id\":")),
        ("missing-field", raw(tag(EventType::ToolCall), 1, ENCODING_JSON, b"t1", b"{}")),
        ("delta-not-utf8", raw(tag(EventType::AssistantDelta), 1, 0, b"t1", b"\xc3(")),
        ("delta-empty", raw(tag(EventType::AssistantDelta), 1, 0, b"t1", b"")),
        ("known-tag-future-schema", raw(tag(EventType::Phase), 2, ENCODING_JSON, b"t1", b"{}")),
        ("unknown-tag-binary", raw(0x7F02, 1, ENCODING_BINARY, b"t1", b"\x00\x01\x02")),
        ("unknown-tag-bad-json", raw(0x7F01, 1, ENCODING_JSON, b"t1", b"{not json")),
        (
            "tool-result-schema-1",
            raw(
                result,
                1,
                ENCODING_JSON,
                b"t1",
                br#"{"call_id":"c1","status":"error","error":"x"}"#,
            ),
        ),
        (
            "tool-result-schema-1-free-text",
            raw(result, 1, ENCODING_JSON, b"t1", br#"{"call_id":"c1","status":"timeout"}"#),
        ),
        ("tool-result-schema-3", raw(result, 3, ENCODING_JSON, b"t1", br#"{"call_id":"c1"}"#)),
    ];
    seeds.extend(damaged.into_iter().map(|(name, bytes)| (name.to_owned(), bytes)));
    seeds
}
