//! Proves that the event vectors (`format-spec/vectors/020-*` to `029-*`) hold exactly the
//! bytes and values their description in `format-spec/vectors/README.md` ("Event vectors")
//! gives, and that this build reads them as `format-spec/events.md` promises. Each record
//! vector is built with `codec::encode_event` from the described event (in the event's body
//! schema) and compared byte for byte with the committed `.bin` and with the hex columns of its
//! annotated `.txt`; the `.bin` is decoded with `codec::peek` and `codec::decode` (every
//! envelope field, every body field, the unknown field in `extra`; a schema-1 `tool/result`
//! upcast to schema 2) and re-encoded with `codec::encode_event` to the same bytes; the damaged
//! one must be `CorruptEvent`, the un-upcastable one `CannotUpcast` with its exact message.
//! Every line of `024-request-keys.txt` must match
//! `request_key::derive`, `request_key::canonical_json` and `request_key::args_digest` (after
//! `secret::mask`), and its digests must be the SHA-256 of its canonical column.
//!
//! `FACTLOG_WRITE_VECTORS=1 cargo test --test integration event_vectors::` writes the files of a vector that
//! does not exist yet. It never overwrites a file: the committed vectors are the compatibility
//! promise and are never regenerated.

use crate::common;

use common::vectors;
use std::fmt::Write as _;
use std::fs;
use std::sync::OnceLock;

use factlog::harness::codec::{self, ENCODING_BINARY, ENCODING_JSON, EVENT_MAGIC};
use factlog::harness::event::{
    AssistantDelta, Effect, Opaque, RecordBlob, RecordPut, RecordRemoved, ResultOutcome, ToolCall,
    ToolResult,
};
use factlog::harness::{Body, CallId, Event, EventType, RequestKey, TaskId, request_key, secret};
use factlog::{ErrorKind, Seq};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The append time of every record vector: 2023-11-14T22:13:20Z.
const TIMESTAMP_US: u64 = 1_700_000_000_000_000;
/// The sequence number every record vector is decoded at (it is not part of the record).
const SEQ: Seq = Seq(1);
/// Bytes of the envelope before the task id (`events.md`, "Envelope").
const ENVELOPE_BYTES: usize = 24;
const WRITE_VARIABLE: &str = "FACTLOG_WRITE_VECTORS";
const REQUEST_KEYS: &str = "024-request-keys";
/// The first field of an argument-digest line of 024.
const ARGS_LINE: &str = "args-canonical";

// ---------------------------------------------------------------------------------------------
// The inputs of 024, and the values 021 takes from them.

/// `(task, operation, source_revision)` of each request-key line of 024, in order. The first
/// is the key of vector 021.
const KEY_INPUTS: &[(&str, &str, u64)] = &[
    ("session-1", "publish_article:weekly", 6),
    ("ab", "c", 1),
    ("a", "bc", 1),
    ("タスク-é", "send_email:ünïcode", 42),
    ("t1", "", 0),
    ("t1", "publish_article:weekly", u64::MAX),
];

/// The arguments of each digest line of 024, as given (JSON text with whitespace, escapes and
/// unsorted keys). The first is the `args` of vector 021.
const ARGS_INPUTS: &[&str] = &[
    r#"{"title":"Weekly"}"#,
    r#"{ "z": {"b": 2, "a": [3, {"y": null, "x": true}]}, "a": "first" }"#,
    r#"{"\ud83d\ude00":1,"\uff5e":2,"z":3,"\u00e9":4,"Z":5}"#,
    r#"{"s":"q\" b\\ n\n t\t r\r b\b f\f c\u0001\u001F s\/ \u00e9 é \ud83d\ude00"}"#,
    r"[10, -3, 2.50, 1E2, 0.1]",
    r#"{"token": {"$secret": "x"}}"#,
    r#"{"user":"ann","list":[{"$secret":"hunter2","note":"b"},1]}"#,
];

fn parse(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// The arguments as the digest sees them: every secret masked.
fn masked(args: &Value) -> Value {
    let mut value = args.clone();
    secret::mask(&mut value);
    value
}

fn tool_call_key() -> RequestKey {
    let (task, operation, revision) = KEY_INPUTS[0];
    request_key::derive(&TaskId::from(task), operation, revision)
}

fn tool_call_args() -> Value {
    parse(ARGS_INPUTS[0])
}

// ---------------------------------------------------------------------------------------------
// The record vectors.

/// What a record vector must give when decoded.
#[derive(Debug)]
enum Outcome {
    /// It decodes to this event, and re-encodes to the same bytes.
    Decodes(Box<Event>),
    /// It is refused with `CorruptEvent { seq: 1, .. }`, the reason naming this word.
    Corrupt(&'static str),
    /// It is an older schema: it decodes to this event (upcast), which `encode` for a log of
    /// segment format 1 writes as the same bytes.
    Upcasts(Box<Event>),
    /// `decode` refuses it with `CannotUpcast` whose message (`Display`) is exactly this;
    /// `peek` accepts its envelope.
    CannotUpcast(&'static str),
}

struct Vector {
    name: &'static str,
    about: &'static [&'static str],
    build: fn() -> Image,
    outcome: fn() -> Outcome,
}

fn event(task: &str, revision: u64, body: Body) -> Event {
    Event {
        seq: SEQ,
        task: TaskId::from(task),
        revision,
        timestamp_us: TIMESTAMP_US,
        schema: 1,
        body,
    }
}

fn delta_event() -> Event {
    event("t1", 3, Body::AssistantDelta(AssistantDelta { text: "Hello".to_owned() }))
}

fn tool_call_event() -> Event {
    let mut extra = serde_json::Map::new();
    extra.insert("x_future".to_owned(), json!({"kept": true}));
    let args = tool_call_args();
    let body = ToolCall {
        call_id: CallId::from("c2"),
        tool: "publish".to_owned(),
        effect: Effect::Idempotent,
        request_key: Some(tool_call_key()),
        args_digest: Some(request_key::args_digest(&masked(&args))),
        args: Some(args),
        approval_id: None,
        extra,
    };
    event("session-1", 7, Body::ToolCall(body))
}

const OPAQUE_TAG: u16 = 0x7F01;

fn opaque_event() -> Event {
    let body = Opaque {
        tag: OPAQUE_TAG,
        schema: 1,
        encoding: ENCODING_JSON,
        bytes: br#"{"anything":1}"#.to_vec(),
    };
    event("t1", 4, Body::Opaque(body))
}

/// The `tool/result` of 025 and 026: an error with its text, an output and an unknown field.
fn tool_result_body() -> Body {
    let mut extra = serde_json::Map::new();
    extra.insert("x_future".to_owned(), json!({"kept": true}));
    Body::ToolResult(ToolResult {
        operator: None,
        call_id: CallId::from("c2"),
        outcome: ResultOutcome::Error,
        error: Some("rate limited".to_owned()),
        receipt: None,
        output: Some(json!({"rows": 0})),
        extra,
    })
}

/// 025: the `tool/result` at schema 2.
fn tool_result_event() -> Event {
    Event { schema: 2, ..event("session-1", 8, tool_result_body()) }
}

/// 026: 025's event as a format-1 log writes it (the downcast to schema 1).
fn tool_result_v1_record() -> Image {
    let event = tool_result_event();
    let bytes = codec::encode(event.task.as_str(), event.revision, TIMESTAMP_US, &event.body, 1)
        .expect("the downcast encodes");
    Image::new(bytes)
}

/// 028: a `record/put` of an Agents SDK item no typed event covers.
fn record_put_event() -> Event {
    let body = RecordPut {
        kind: "agents/item".to_owned(),
        key: Some("rs_1".to_owned()),
        value: json!({"type": "reasoning", "summary": []}),
        extra: serde_json::Map::new(),
    };
    event("session-1", 10, Body::RecordPut(body))
}

/// 050: a `record/blob` of a LangGraph checkpoint: its bytes raw, bytes that are not UTF-8
/// among them.
fn record_blob_event() -> Event {
    let body = RecordBlob {
        kind: "langgraph/checkpoint".to_owned(),
        key: Some("cp-1".to_owned()),
        value: json!({"checkpoint": {"type": "msgpack"}}),
        bytes: vec![0x81, 0xa1, b'v', 0x01, 0x00, 0xff],
        extra: serde_json::Map::new(),
    };
    event("thread-1", 12, Body::RecordBlob(body))
}

/// 029: a `record/removed` naming two events and a prefix of the task.
fn record_removed_event() -> Event {
    let body = RecordRemoved {
        kind: "agents/item".to_owned(),
        seqs: vec![3, 5],
        through_seq: Some(2),
        extra: serde_json::Map::new(),
    };
    event("session-1", 11, Body::RecordRemoved(body))
}

/// The schema-1 body of 027: a free-text status.
const FREE_TEXT_BODY: &[u8] = br#"{"call_id":"c3","status":"timeout"}"#;

/// The exact message of 027's refusal.
const FREE_TEXT_ERROR: &str = "event 1 (tool/result, body schema 1) cannot be read as schema \
    2: its status \"timeout\" is neither \"ok\" nor \"error\", and schema 2 has no other \
    outcome; this build refuses to guess, so the store does not open: open it with the factlog \
    release that wrote it, or inspect the event with `factlog dump DIR --raw --from 1`";

fn free_text_record() -> Image {
    let body = codec::EncodedBody {
        tag: EventType::ToolResult.tag(),
        schema: 1,
        encoding: ENCODING_JSON,
        bytes: FREE_TEXT_BODY.to_vec(),
    };
    Image::new(codec::encode_parts("session-1", 9, TIMESTAMP_US, &body))
}

fn encoded(event: &Event) -> Image {
    let bytes = codec::encode_event(event).expect("the described event encodes");
    Image::new(bytes)
}

fn vectors() -> Vec<Vector> {
    vec![
        Vector {
            name: "020-event-delta",
            about: &[
                "020-event-delta: assistant/delta (tag 0x0402, schema 1, encoding 0 = binary), task",
                "\"t1\", revision 3, timestamp_us 1700000000000000 (2023-11-14T22:13:20Z), text",
                "\"Hello\": the body is the text's bytes and nothing else.",
                "Expected: decodes (at seq 1) to that event; re-encodes to the same 31 bytes.",
            ],
            build: || encoded(&delta_event()),
            outcome: || Outcome::Decodes(Box::new(delta_event())),
        },
        Vector {
            name: "021-event-tool-call",
            about: &[
                "021-event-tool-call: tool/call (tag 0x0501, schema 1, encoding 1 = JSON), task",
                "\"session-1\", revision 7, timestamp_us 1700000000000000; body call_id \"c2\", tool",
                "\"publish\", effect idempotent, request_key of 024 line 1, args {\"title\":\"Weekly\"},",
                "args_digest of those args (024), and the unknown field x_future {\"kept\":true}.",
                "Expected: decodes (at seq 1) to that event, x_future kept in extra; re-encodes",
                "to the same bytes, the unknown field included, after the known fields.",
            ],
            build: || encoded(&tool_call_event()),
            outcome: || Outcome::Decodes(Box::new(tool_call_event())),
        },
        Vector {
            name: "022-event-opaque",
            about: &[
                "022-event-opaque: a tag this build does not know (0x7f01), schema 1, encoding 1,",
                "task \"t1\", revision 4, timestamp_us 1700000000000000, body {\"anything\":1}.",
                "Expected: decodes (at seq 1) as Body::Opaque { tag 0x7f01, schema 1, encoding 1,",
                "the body bytes }, never refused or dropped; re-encodes to the same bytes.",
            ],
            build: || encoded(&opaque_event()),
            outcome: || Outcome::Decodes(Box::new(opaque_event())),
        },
        Vector {
            name: "023-event-bad-magic",
            about: &[
                "023-event-bad-magic: 021 with byte 0 (magic) changed from 0xfa to 0x00; nothing",
                "else changed.",
                "Expected: codec::peek and codec::decode refuse it with CorruptEvent { seq: 1,",
                "reason: not an event record (bad magic byte) }.",
            ],
            build: || {
                encoded(&tool_call_event()).damage(
                    0,
                    0x00,
                    "damage: byte 0 changed from 0xfa to 0x00",
                )
            },
            outcome: || Outcome::Corrupt("magic"),
        },
        Vector {
            name: "025-event-tool-result",
            about: &[
                "025-event-tool-result: tool/result (tag 0x0502, schema 2, encoding 1 = JSON), task",
                "\"session-1\", revision 8, timestamp_us 1700000000000000; body call_id \"c2\",",
                "outcome error, error \"rate limited\", output {\"rows\":0}, and the unknown field",
                "x_future {\"kept\":true}. The schema a format-2 log writes.",
                "Expected: decodes (at seq 1) to that event, x_future kept in extra; re-encodes",
                "to the same bytes.",
            ],
            build: || encoded(&tool_result_event()),
            outcome: || Outcome::Decodes(Box::new(tool_result_event())),
        },
        Vector {
            name: "026-event-tool-result-schema-1",
            about: &[
                "026-event-tool-result-schema-1: 025's event at schema 1, as a format-1 log holds",
                "it (the downcast): status \"error\", then output, then the error text as the",
                "field error (unknown to schema 1, so after the known fields), then x_future.",
                "Expected: decodes (at seq 1) by the upcast to exactly 025's event (schema 2):",
                "outcome error, error \"rate limited\", x_future kept in extra; that event",
                "written for a log of segment format 1 gives these bytes again.",
            ],
            build: tool_result_v1_record,
            outcome: || Outcome::Upcasts(Box::new(tool_result_event())),
        },
        Vector {
            name: "027-event-tool-result-free-text",
            about: &[
                "027-event-tool-result-free-text: tool/result at schema 1, task \"session-1\",",
                "revision 9, body {\"call_id\":\"c3\",\"status\":\"timeout\"}: a free-text status",
                "schema 1 allowed and schema 2 cannot map to ok or error.",
                "Expected: codec::peek accepts the envelope; codec::decode refuses it with",
                "CannotUpcast { seq: 1, event_type: tool/result, from: 1, to: 2 }, the reason",
                "quoting the status; Store::open of a log holding it stops with that error.",
            ],
            build: free_text_record,
            outcome: || Outcome::CannotUpcast(FREE_TEXT_ERROR),
        },
        Vector {
            name: "028-event-record-put",
            about: &[
                "028-event-record-put: record/put (tag 0x0c01, schema 1, encoding 1 = JSON), task",
                "\"session-1\", revision 10, timestamp_us 1700000000000000; body kind",
                "\"agents/item\", key \"rs_1\", value {\"type\":\"reasoning\",\"summary\":[]}.",
                "Expected: decodes (at seq 1) to that event, the value whole; re-encodes to the",
                "same bytes.",
            ],
            build: || encoded(&record_put_event()),
            outcome: || Outcome::Decodes(Box::new(record_put_event())),
        },
        Vector {
            name: "029-event-record-removed",
            about: &[
                "029-event-record-removed: record/removed (tag 0x0c02, schema 1, encoding 1 =",
                "JSON), task \"session-1\", revision 11, timestamp_us 1700000000000000; body kind",
                "\"agents/item\", seqs [3,5], through_seq 2.",
                "Expected: decodes (at seq 1) to that event; re-encodes to the same bytes.",
            ],
            build: || encoded(&record_removed_event()),
            outcome: || Outcome::Decodes(Box::new(record_removed_event())),
        },
        Vector {
            name: "050-event-record-blob",
            about: &[
                "050-event-record-blob: record/blob (tag 0x0c03, schema 1, encoding 0 = binary),",
                "task \"thread-1\", revision 12, timestamp_us 1700000000000000; body: the head's",
                "length and the bytes' length (u32 LE each), the head {\"kind\":",
                "\"langgraph/checkpoint\",\"key\":\"cp-1\",\"value\":{\"checkpoint\":{\"type\":",
                "\"msgpack\"}}}, then the 6 bytes 81 a1 76 01 00 ff.",
                "Expected: decodes (at seq 1) to that event, the bytes raw; re-encodes to the same",
                "bytes; its JSON form has the bytes in base64 (\"gaF2AQD/\").",
            ],
            build: || encoded(&record_blob_event()),
            outcome: || Outcome::Decodes(Box::new(record_blob_event())),
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// The annotated dump of a record.

/// A record and the notes on its structures (`(offset, note)`).
#[derive(Debug)]
struct Image {
    bytes: Vec<u8>,
    notes: Vec<(usize, String)>,
}

impl Image {
    fn new(bytes: Vec<u8>) -> Image {
        Image { bytes, notes: Vec::new() }
    }

    fn damage(mut self, offset: usize, byte: u8, note: &str) -> Image {
        self.bytes[offset] = byte;
        self.notes.push((offset, note.to_owned()));
        self
    }

    /// The structures of the record: `[start, end)` and what they hold.
    fn spans(&self) -> Vec<(usize, usize, String)> {
        let b = &self.bytes;
        let task_len = usize::from(b[7]);
        let body_at = ENVELOPE_BYTES + task_len;
        let tag = u16::from_le_bytes([b[2], b[3]]);
        let type_name = EventType::from_tag(tag).map_or("unknown to this build", EventType::name);
        let magic = if b[0] == EVENT_MAGIC { "(event record)" } else { "(NOT 0xfa)" };
        let encoding = match b[6] {
            ENCODING_BINARY => "binary",
            ENCODING_JSON => "JSON",
            _ => "unknown",
        };
        vec![
            (
                0,
                8,
                format!(
                    "envelope [0, 8): magic {:#04x} {magic}, env_ver {}, tag {tag:#06x} \
                     ({type_name}),\n#   schema {}, encoding {} ({encoding}), task_len {task_len}",
                    b[0],
                    b[1],
                    u16::from_le_bytes([b[4], b[5]]),
                    b[6],
                ),
            ),
            (8, 16, format!("envelope [8, 16): revision {}", vectors::u64_at(b, 8))),
            (16, 24, format!("envelope [16, 24): timestamp_us {}", vectors::u64_at(b, 16))),
            (
                24,
                body_at,
                format!(
                    "task [24, {body_at}), {task_len} bytes: {:?}",
                    String::from_utf8_lossy(&b[24..body_at])
                ),
            ),
            (body_at, b.len(), self.describe_body(body_at)),
        ]
    }

    fn describe_body(&self, at: usize) -> String {
        let (b, end) = (&self.bytes, self.bytes.len());
        let head = format!("body [{at}, {end}), {} bytes", end - at);
        if b[6] == ENCODING_BINARY
            && u16::from_le_bytes([b[2], b[3]]) == EventType::RecordBlob.tag()
        {
            let len = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
            let count = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]);
            let json = String::from_utf8_lossy(&b[at + 8..at + 8 + len]);
            let raw: Vec<String> = b[at + 8 + len..].iter().map(|x| format!("{x:02x}")).collect();
            return format!(
                "{head}, binary: the head's length {len} and the bytes' length {count} (u32 LE \
                 each),\n#   the head {json},\n#   then the bytes {}",
                raw.join(" ")
            );
        }
        if b[6] == ENCODING_BINARY {
            return format!("{head}, binary: the text {:?}", String::from_utf8_lossy(&b[at..]));
        }
        let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(&b[at..]) else {
            return format!("{head}: not a JSON object");
        };
        let tag = u16::from_le_bytes([b[2], b[3]]);
        let known = EventType::from_tag(tag).map(|t| t.name());
        let extra = match codec::decode(SEQ, b) {
            Ok(Event { body: Body::ToolCall(call), .. }) => call.extra,
            Ok(Event { body: Body::ToolResult(result), .. }) => result.extra,
            _ => serde_json::Map::new(),
        };
        let mut out = format!("{head}, one JSON object with the fields:");
        for (key, value) in &fields {
            let unknown = if extra.contains_key(key) {
                format!(" (unknown to {}: kept in extra)", known.unwrap_or("its type"))
            } else {
                String::new()
            };
            let _ = write!(out, "\n#   {key}: {value}{unknown}");
        }
        if known.is_none() {
            out.push_str(
                "\n#   (the tag is unknown to this build: the body is kept as opaque bytes)",
            );
        }
        out
    }

    /// The annotated hex dump: `about` first, then each structure's annotation and its bytes.
    fn dump(&self, name: &str, about: &[&str]) -> String {
        const LEGEND: &[&str] = &[
            "Generated by tests/event_vectors.rs together with the .bin, which it checks byte for byte.",
            "The .bin is one record payload (format-spec/events.md, \"Envelope\"), not a whole segment.",
            "Each line: offset (hex), up to 16 bytes in hex, the same bytes as ASCII. The last line is",
            "the record length. Lines starting with \"#\" annotate the structure whose bytes follow them.",
        ];
        let sections: Vec<vectors::Section> = self
            .spans()
            .into_iter()
            .map(|(start, end, description)| vectors::Section {
                description,
                notes: self
                    .notes
                    .iter()
                    .filter(|(at, _)| (start..end).contains(at))
                    .map(|(_, note)| note.clone())
                    .collect(),
                start,
                end,
            })
            .collect();
        vectors::dump(name, &self.bytes, about, LEGEND, &sections)
    }
}

// ---------------------------------------------------------------------------------------------
// The checks of the record vectors.

/// The envelope read with `peek` is the described event's, field by field.
fn check_envelope(name: &str, bytes: &[u8], expected: &Event) {
    let env = codec::peek(SEQ, bytes).unwrap_or_else(|e| panic!("{name}: peek: {e}"));
    let (tag, encoding, body) = match &expected.body {
        Body::Opaque(o) => (o.tag, o.encoding, o.bytes.clone()),
        Body::AssistantDelta(d) => {
            (EventType::AssistantDelta.tag(), ENCODING_BINARY, d.text.as_bytes().to_vec())
        }
        Body::RecordBlob(b) => {
            let mut head = serde_json::to_value(b).expect("json");
            head.as_object_mut().expect("an object").remove("bytes");
            let head = serde_json::to_vec(&head).expect("json");
            let mut body = u32::try_from(head.len()).expect("short").to_le_bytes().to_vec();
            body.extend_from_slice(&u32::try_from(b.bytes.len()).expect("short").to_le_bytes());
            body.extend_from_slice(&head);
            body.extend_from_slice(&b.bytes);
            (EventType::RecordBlob.tag(), ENCODING_BINARY, body)
        }
        other => {
            let tag = other.event_type().expect("a typed body").tag();
            (tag, ENCODING_JSON, serde_json::to_vec(&codec::body_to_value(other)).expect("json"))
        }
    };
    assert_eq!(
        (env.tag, env.schema, env.encoding, env.task, env.revision, env.timestamp_us),
        (tag, expected.schema, encoding, expected.task.as_str(), expected.revision, TIMESTAMP_US),
        "{name}: envelope fields"
    );
    assert_eq!(env.body, &body[..], "{name}: body bytes");
    assert_eq!(bytes.len(), ENVELOPE_BYTES + env.task.len() + env.body.len(), "{name}: length");
}

fn check(name: &str) {
    let vector = vectors().into_iter().find(|v| v.name == name).expect("a listed vector");
    let image = (vector.build)();
    let bytes = vectors::Files {
        name: vector.name,
        built: &image.bytes,
        builder: "codec::encode",
        test: "event_vectors",
        write_variable: WRITE_VARIABLE,
    }
    .committed(|| image.dump(vector.name, vector.about));
    match (vector.outcome)() {
        Outcome::Decodes(expected) => {
            check_envelope(name, &bytes, &expected);
            let decoded = codec::decode(SEQ, &bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(decoded, *expected, "{name}: the decoded event");
            let again = codec::encode_event(&decoded).expect("the decoded event encodes");
            vectors::assert_same_bytes(&again, &bytes, &format!("{name}: re-encoded"));
        }
        Outcome::Corrupt(word) => {
            for (what, result) in [
                ("peek", codec::peek(SEQ, &bytes).map(|_| ())),
                ("decode", codec::decode(SEQ, &bytes).map(|_| ())),
            ] {
                match result.map_err(factlog::Error::into_kind) {
                    Err(ErrorKind::CorruptEvent { seq, reason }) => {
                        assert_eq!(seq, SEQ.0, "{name}: {what}: the error names the record");
                        assert!(reason.contains(word), "{name}: {what}: reason {reason:?}");
                    }
                    other => panic!("{name}: {what}: expected CorruptEvent, got {other:?}"),
                }
            }
        }
        Outcome::Upcasts(expected) => {
            let env = codec::peek(SEQ, &bytes).unwrap_or_else(|e| panic!("{name}: peek: {e}"));
            assert_eq!((env.tag, env.schema, env.encoding), (EventType::ToolResult.tag(), 1, 1));
            assert_eq!((env.task, env.revision), (expected.task.as_str(), expected.revision));
            let decoded = codec::decode(SEQ, &bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(decoded, *expected, "{name}: the upcast event");
            let again = codec::encode(env.task, env.revision, env.timestamp_us, &decoded.body, 1)
                .expect("the downcast encodes");
            vectors::assert_same_bytes(&again, &bytes, &format!("{name}: written for format 1"));
        }
        Outcome::CannotUpcast(message) => {
            let env = codec::peek(SEQ, &bytes).unwrap_or_else(|e| panic!("{name}: peek: {e}"));
            assert_eq!((env.tag, env.schema), (EventType::ToolResult.tag(), 1), "{name}");
            let error = codec::decode(SEQ, &bytes).expect_err("decode must refuse it");
            assert_eq!(error.to_string(), message, "{name}: the exact message");
            match error.into_kind() {
                ErrorKind::CannotUpcast { seq, event_type, from, to, .. } => {
                    assert_eq!((seq, event_type.as_str(), from, to), (1, "tool/result", 1, 2));
                }
                other => panic!("{name}: expected CannotUpcast, got {other:?}"),
            }
        }
    }
}

#[test]
fn vector_020_event_delta() {
    check("020-event-delta");
}

#[test]
fn vector_021_event_tool_call() {
    check("021-event-tool-call");
    // The body field by field, as the README states it, and its values as 024 pins them.
    let bytes = fs::read(vectors::dir().join("021-event-tool-call.bin")).expect("021");
    let Body::ToolCall(call) = codec::decode(SEQ, &bytes).expect("021 decodes").body else {
        panic!("021 is a tool/call");
    };
    assert_eq!((call.call_id.as_str(), call.tool.as_str()), ("c2", "publish"));
    assert_eq!(call.effect, Effect::Idempotent);
    assert_eq!(call.args, Some(json!({"title": "Weekly"})));
    assert_eq!(call.approval_id, None);
    let keys = request_key_lines();
    assert_eq!(call.request_key.as_ref().map(RequestKey::as_str), Some(keys[0].3.as_str()));
    let digests = digest_lines();
    assert_eq!(digests[0].0, r#"{"title":"Weekly"}"#, "024's first digest line is 021's args");
    assert_eq!(call.args_digest.as_deref(), Some(digests[0].2.as_str()));
    assert_eq!(call.extra.len(), 1, "one unknown field");
    assert_eq!(call.extra.get("x_future"), Some(&json!({"kept": true})));
    // The body bytes exactly as the README gives them: known fields in the spec's order, then
    // the unknown one.
    let body = &bytes[ENVELOPE_BYTES + "session-1".len()..];
    let expected = format!(
        r#"{{"call_id":"c2","tool":"publish","effect":"idempotent","request_key":"{}","args":{{"title":"Weekly"}},"args_digest":"{}","x_future":{{"kept":true}}}}"#,
        keys[0].3, digests[0].2
    );
    assert_eq!(String::from_utf8_lossy(body), expected, "021: the body bytes");
}

#[test]
fn vector_025_event_tool_result() {
    check("025-event-tool-result");
    let bytes = fs::read(vectors::dir().join("025-event-tool-result.bin")).expect("025");
    let body = &bytes[ENVELOPE_BYTES + "session-1".len()..];
    assert_eq!(
        String::from_utf8_lossy(body),
        r#"{"call_id":"c2","outcome":"error","error":"rate limited","output":{"rows":0},"x_future":{"kept":true}}"#,
        "025: the body bytes"
    );
}

#[test]
fn vector_026_event_tool_result_schema_1() {
    check("026-event-tool-result-schema-1");
    let bytes = fs::read(vectors::dir().join("026-event-tool-result-schema-1.bin")).expect("026");
    let body = &bytes[ENVELOPE_BYTES + "session-1".len()..];
    assert_eq!(
        String::from_utf8_lossy(body),
        r#"{"call_id":"c2","status":"error","output":{"rows":0},"error":"rate limited","x_future":{"kept":true}}"#,
        "026: the body bytes"
    );
    // Read, 026 is 025; written in schema 2 (a format-2 log), it is 025's bytes.
    let v1 = codec::decode(SEQ, &bytes).expect("026 decodes");
    let v2 = fs::read(vectors::dir().join("025-event-tool-result.bin")).expect("025");
    assert_eq!(v1, codec::decode(SEQ, &v2).expect("025 decodes"), "026 upcasts to 025");
    vectors::assert_same_bytes(&codec::encode_event(&v1).expect("encodes"), &v2, "026 re-encoded");
}

#[test]
fn vector_027_event_tool_result_free_text() {
    check("027-event-tool-result-free-text");
}

#[test]
fn vector_028_event_record_put() {
    check("028-event-record-put");
    let bytes = fs::read(vectors::dir().join("028-event-record-put.bin")).expect("028");
    let body = &bytes[ENVELOPE_BYTES + "session-1".len()..];
    assert_eq!(
        String::from_utf8_lossy(body),
        r#"{"kind":"agents/item","key":"rs_1","value":{"type":"reasoning","summary":[]}}"#,
        "028: the body bytes"
    );
}

#[test]
fn vector_029_event_record_removed() {
    check("029-event-record-removed");
    let bytes = fs::read(vectors::dir().join("029-event-record-removed.bin")).expect("029");
    let body = &bytes[ENVELOPE_BYTES + "session-1".len()..];
    assert_eq!(
        String::from_utf8_lossy(body),
        r#"{"kind":"agents/item","seqs":[3,5],"through_seq":2}"#,
        "029: the body bytes"
    );
}

#[test]
fn vector_050_event_record_blob() {
    check("050-event-record-blob");
    let bytes = fs::read(vectors::dir().join("050-event-record-blob.bin")).expect("050");
    let body = &bytes[ENVELOPE_BYTES + "thread-1".len()..];
    let head = br#"{"kind":"langgraph/checkpoint","key":"cp-1","value":{"checkpoint":{"type":"msgpack"}}}"#;
    let mut expected = u32::try_from(head.len()).unwrap().to_le_bytes().to_vec();
    expected.extend_from_slice(&6u32.to_le_bytes());
    expected.extend_from_slice(head);
    expected.extend_from_slice(&[0x81, 0xa1, b'v', 0x01, 0x00, 0xff]);
    assert_eq!(body, &expected[..], "050: the body bytes");
    let event = codec::decode(SEQ, &bytes).expect("050 decodes");
    assert_eq!(
        codec::body_to_value(&event.body),
        json!({"kind": "langgraph/checkpoint", "key": "cp-1",
               "value": {"checkpoint": {"type": "msgpack"}}, "bytes": "gaF2AQD/"}),
        "050: the JSON form, the bytes in base64"
    );
    // A log of segment format 1 cannot hold it.
    let refused = codec::encode("thread-1", 12, TIMESTAMP_US, &event.body, 1)
        .expect_err("format 1 refuses a record/blob");
    assert!(matches!(refused.kind(), ErrorKind::InvalidEvent { .. }), "{refused}");
    // A head naming `bytes` itself, lengths that do not add up to the body (a cut record, a
    // longer one), are corrupt.
    let at = ENVELOPE_BYTES + "thread-1".len();
    let mut named = bytes[..at].to_vec();
    let with_bytes = [&head[..head.len() - 1], br#","bytes":""}"#].concat();
    named.extend_from_slice(&u32::try_from(with_bytes.len()).unwrap().to_le_bytes());
    named.extend_from_slice(&6u32.to_le_bytes());
    named.extend_from_slice(&with_bytes);
    named.extend_from_slice(&[0x81, 0xa1, b'v', 0x01, 0x00, 0xff]);
    let mut cut = bytes.clone();
    cut.pop();
    let mut longer = bytes.clone();
    longer.push(0);
    for (bad, word) in [(named, "`bytes`"), (cut, "do not make"), (longer, "do not make")] {
        match codec::decode(SEQ, &bad).map_err(factlog::Error::into_kind) {
            Err(ErrorKind::CorruptEvent { reason, .. }) => {
                assert!(reason.contains(word), "{reason}")
            }
            other => panic!("expected CorruptEvent, got {other:?}"),
        }
        // The lending decode refuses what the copying one refuses, with the same words.
        let lending = codec::decode_lending_blob(SEQ, &bad).map(|_| ()).map_err(|e| e.to_string());
        let copying = codec::decode(SEQ, &bad).map(|_| ()).map_err(|e| e.to_string());
        assert_eq!(lending, copying, "050, damaged: the lending decode's refusal");
    }
    // The lending decode gives the same event, its bytes borrowed from the record.
    let (mut lent_event, lent) = codec::decode_lending_blob(SEQ, &bytes).expect("050 lends");
    assert_eq!(lent, Some(&[0x81, 0xa1, b'v', 0x01, 0x00, 0xff][..]), "050: the lent bytes");
    let Body::RecordBlob(blob) = &mut lent_event.body else { panic!("a record/blob") };
    assert!(blob.bytes.is_empty(), "050: the lending decode copies no bytes");
    blob.bytes = lent.expect("lent").to_vec();
    assert_eq!(lent_event, event, "050: the lending decode's event, its bytes put back");
    // A record built in place (a log's buffer) is the record `encode_parts` builds.
    let body = codec::encode_body(&event.body, 2).expect("050 encodes");
    let built = codec::encode_parts("thread-1", 12, TIMESTAMP_US, &body);
    let mut in_place = vec![0xAA; codec::record_bytes("thread-1", body.bytes.len())];
    codec::write_parts(&mut in_place, "thread-1", 12, TIMESTAMP_US, &body);
    assert_eq!(in_place, built, "050: write_parts and encode_parts build the same record");
    assert_eq!(codec::decode(SEQ, &built).expect("decodes").body, event.body);
    // Any other event is decoded as `decode` does, nothing lent.
    let call = fs::read(vectors::dir().join("021-event-tool-call.bin")).expect("021");
    let (call_event, none) = codec::decode_lending_blob(SEQ, &call).expect("021 decodes");
    assert_eq!((call_event, none), (codec::decode(SEQ, &call).expect("021"), None));
}

#[test]
fn vector_022_event_opaque() {
    assert_eq!(EventType::from_tag(OPAQUE_TAG), None, "0x7f01 must stay unknown for 022");
    check("022-event-opaque");
}

#[test]
fn vector_023_event_bad_magic() {
    check("023-event-bad-magic");
    let damaged = fs::read(vectors::dir().join("023-event-bad-magic.bin")).expect("023");
    let mut original = fs::read(vectors::dir().join("021-event-tool-call.bin")).expect("021");
    assert_eq!(original[0], EVENT_MAGIC);
    original[0] = 0x00;
    vectors::assert_same_bytes(&damaged, &original, "023 is 021 with byte 0 zeroed");
}

// ---------------------------------------------------------------------------------------------
// 024: request keys and argument digests.

/// The text of 024, as the library computes it from [`KEY_INPUTS`] and [`ARGS_INPUTS`].
fn request_keys_text() -> String {
    let mut out = String::from(
        "# format-spec/vectors/024-request-keys.txt: request keys and argument digests\n\
         # (format-spec/events.md, \"Request keys\" and \"Argument digests\").\n\
         # Fields are separated by one TAB. Two kinds of line:\n\
         #   task, operation, source_revision, key: the key is \"rk1_\" + the lowercase hex of the\n\
         #     first 16 bytes of SHA-256(\"factlog/request-key/v1\" 0x00 u32le(len task) task\n\
         #     u32le(len operation) operation u64le(source_revision)); an empty field is an empty\n\
         #     string.\n\
         #   args-canonical, JSON as given, canonical JSON, digest: the canonical JSON of the\n\
         #     given arguments with every secret masked ({\"$secret_ref\":\"masked\"}), and the\n\
         #     lowercase hex SHA-256 of its UTF-8 bytes (the args_digest of a tool/call).\n\
         # The key of line 1 and the digest of the first args-canonical line are those of vector\n\
         # 021. tests/event_vectors.rs checks every line against request_key::derive,\n\
         # request_key::canonical_json and request_key::args_digest (after secret::mask), and\n\
         # each digest against the SHA-256 of its canonical column; the values were computed\n\
         # independently of the library, from the bytes the spec describes, when 024 was made.\n\
         #\n\
         # task\toperation\tsource_revision\tkey\n",
    );
    for &(task, operation, revision) in KEY_INPUTS {
        let key = request_key::derive(&TaskId::from(task), operation, revision);
        let _ = writeln!(out, "{task}\t{operation}\t{revision}\t{key}");
    }
    out.push_str("#\n# args-canonical\tjson-as-given\tcanonical\tdigest\n");
    for given in ARGS_INPUTS {
        let value = masked(&parse(given));
        let canonical = request_key::canonical_json(&value);
        let digest = request_key::args_digest(&value);
        let _ = writeln!(out, "{ARGS_LINE}\t{given}\t{canonical}\t{digest}");
    }
    out
}

/// The lines of 024 that are not comments, split at TABs.
fn data_lines() -> Vec<Vec<String>> {
    static WRITTEN: OnceLock<()> = OnceLock::new();
    let path = vectors::dir().join(format!("{REQUEST_KEYS}.txt"));
    WRITTEN.get_or_init(|| {
        if !path.exists() {
            assert!(
                vectors::writing(WRITE_VARIABLE),
                "{} does not exist: run with {WRITE_VARIABLE}=1",
                path.display()
            );
            vectors::write_new(&path, request_keys_text().as_bytes());
        }
    });
    let text = fs::read_to_string(&path).expect("024");
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split('\t').map(str::to_owned).collect::<Vec<_>>())
        .inspect(|fields| assert_eq!(fields.len(), 4, "024: four fields: {fields:?}"))
        .collect()
}

/// `(task, operation, source_revision, key)` lines of 024.
fn request_key_lines() -> Vec<(String, String, u64, String)> {
    data_lines()
        .into_iter()
        .filter(|f| f[0] != ARGS_LINE)
        .map(|f| {
            let revision = f[2].parse().unwrap_or_else(|e| panic!("024: {f:?}: {e}"));
            (f[0].clone(), f[1].clone(), revision, f[3].clone())
        })
        .collect()
}

/// `(json as given, canonical, digest)` lines of 024.
fn digest_lines() -> Vec<(String, String, String)> {
    data_lines()
        .into_iter()
        .filter(|f| f[0] == ARGS_LINE)
        .map(|f| (f[1].clone(), f[2].clone(), f[3].clone()))
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn vector_024_request_keys() {
    let lines = request_key_lines();
    let inputs: Vec<(&str, &str, u64)> =
        lines.iter().map(|(t, o, r, _)| (t.as_str(), o.as_str(), *r)).collect();
    assert_eq!(inputs, KEY_INPUTS, "024: the request-key inputs described in the README");
    for (task, operation, revision, key) in &lines {
        let derived = request_key::derive(&TaskId::from(task.as_str()), operation, *revision);
        assert_eq!(derived.as_str(), key, "024: key of ({task:?}, {operation:?}, {revision})");
        assert!(key.starts_with("rk1_") && key.len() == 36, "{key}");
        assert!(key[4..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }
    let key_of = |t: &str, o: &str| &lines.iter().find(|l| l.0 == t && l.1 == o).expect("row").3;
    assert_ne!(key_of("ab", "c"), key_of("a", "bc"), "the lengths keep the fields apart");
    assert!(lines.iter().any(|l| !l.0.is_ascii()), "a non-ASCII task");
}

#[test]
fn vector_024_argument_digests() {
    let lines = digest_lines();
    let given: Vec<&str> = lines.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(given, ARGS_INPUTS, "024: the arguments described in the README");
    for (given, canonical, digest) in &lines {
        let args = parse(given);
        let value = masked(&args);
        assert_eq!(&request_key::canonical_json(&value), canonical, "024: canonical of {given}");
        assert_eq!(&request_key::args_digest(&value), digest, "024: digest of {given}");
        assert_eq!(&sha256_hex(canonical.as_bytes()), digest, "024: SHA-256 of {canonical}");
        assert_eq!(parse(canonical), value, "024: the canonical JSON is the masked value");
        assert_eq!(&request_key::canonical_json(&parse(canonical)), canonical, "idempotent");
        if secret::contains_secret(&args) {
            assert!(canonical.contains(r#"{"$secret_ref":"masked"}"#), "{canonical}");
            assert!(!canonical.contains("$secret\""), "{canonical}");
            assert_ne!(&request_key::args_digest(&args), digest, "masking changes the digest");
        }
    }
    assert!(
        lines.iter().any(|l| l.0 == r#"{"token": {"$secret": "x"}}"#
            && l.1 == r#"{"token":{"$secret_ref":"masked"}}"#),
        "024 pins the masked secret of the README"
    );
}

/// What the library writes for 024 is the committed file, comments included (so the
/// generator in this file stays the description of the committed bytes).
#[test]
fn vector_024_is_what_the_generator_writes() {
    let _ = data_lines(); // writes the file first when asked to
    let committed =
        fs::read_to_string(vectors::dir().join(format!("{REQUEST_KEYS}.txt"))).expect("024");
    assert_eq!(committed, request_keys_text(), "024-request-keys.txt");
}

// ---------------------------------------------------------------------------------------------
// The bookkeeping that keeps the list complete.

fn is_event_vector(stem: &str) -> bool {
    stem.get(3..).is_some_and(|rest| rest.starts_with("-event-") || rest == "-request-keys")
}

/// Every event vector file in the directory is checked here, and the README's "Event
/// vectors" section describes exactly these, in order.
#[test]
fn every_event_vector_is_described_and_checked() {
    let mut listed: Vec<&str> = vectors().iter().map(|v| v.name).collect();
    listed.push(REQUEST_KEYS);
    listed.sort_unstable();
    assert!(listed.iter().all(|n| is_event_vector(n)), "{listed:?}");
    let readme = fs::read_to_string(vectors::dir().join("README.md")).expect("vectors/README.md");
    let described: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .filter(|h| is_event_vector(h))
        .collect();
    assert_eq!(described, listed, "the event vectors of vectors/README.md, in order");
    let mut expected: Vec<String> = vectors()
        .iter()
        .flat_map(|v| [format!("{}.bin", v.name), format!("{}.txt", v.name)])
        .collect();
    expected.push(format!("{REQUEST_KEYS}.txt"));
    for entry in fs::read_dir(vectors::dir()).expect("the vectors directory") {
        let file = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
        let stem = file.split_once('.').map_or(file.as_str(), |(s, _)| s);
        if is_event_vector(stem) {
            assert!(expected.contains(&file), "{file} is not a checked event vector");
        }
    }
    if !vectors::writing(WRITE_VARIABLE) {
        for file in &expected {
            assert!(vectors::dir().join(file).exists(), "{file} is missing");
        }
    }
}
