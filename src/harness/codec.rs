//! Event records: the envelope and the body encodings (`format-spec/events.md`, "Envelope"
//! and "Bodies"). Pure: no I/O.
//!
//! Which body schema is written depends on the log's segment format version: [`schema_written`]
//! is the table (`format-spec/events.md`, "Schema versions"). A body older than the schema this
//! build reads it as is upcast on decode ([`crate::harness::upcast`]); a body written into a log
//! of an older format is downcast on encode.
//!
//! Invariant: `decode(encode(e)) == e` for every event this build can build, and an opaque
//! event re-encodes to the bytes it was decoded from.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::engine::segment::{FORMAT_VERSION, FORMAT_VERSION_MIN};
use crate::error::{ErrorKind, Result};
use crate::harness::event::{Body, Event, EventType, Opaque};
use crate::harness::ids::TaskId;
use crate::harness::upcast::{self, Refusal, ToolResultV1};
use crate::limits::{EVENT_BODY_BYTES_MAX, EVENT_ENVELOPE_BYTES, TASK_ID_BYTES_MAX};
use crate::types::Seq;

/// First byte of every event record: tells an event from a raw record of `factlog append`.
pub const EVENT_MAGIC: u8 = 0xFA;
/// The envelope version this build writes and reads.
pub const ENVELOPE_VERSION: u8 = 1;
/// Body encoding: type-specific binary (only `assistant/delta` in schema 1).
pub const ENCODING_BINARY: u8 = 0;
/// Body encoding: one UTF-8 JSON object.
pub const ENCODING_JSON: u8 = 1;
/// The body schema version of every event type whose body never changed: all but
/// `tool/result`, whose schema depends on the log ([`schema_written`]).
pub const SCHEMA_VERSION: u16 = 1;
/// The newest body schema of `tool/result`, the one this build reads every `tool/result` as.
pub const TOOL_RESULT_SCHEMA: u16 = 2;

/// The body schema an event of `event_type` is written in, in a log of segment format
/// `format_version` (`format-spec/events.md`, "Schema versions"): `tool/result` is 2 in a
/// format-2 log and 1 in a format-1 log; every other type is 1. A format-1 log holds only
/// schema-1 bodies, so that a build that knows only format 1 reads it correctly.
#[must_use]
pub fn schema_written(event_type: EventType, format_version: u16) -> u16 {
    match event_type {
        EventType::ToolResult if format_version >= 2 => TOOL_RESULT_SCHEMA,
        _ => SCHEMA_VERSION,
    }
}

/// True if this build decodes a body of `event_type` at `schema` into a typed body (upcast if
/// older); any other schema decodes as [`Body::Opaque`]. `tool/result`: 1 and 2; others: 1.
#[must_use]
pub fn schema_readable(event_type: EventType, schema: u16) -> bool {
    match event_type {
        EventType::ToolResult => (1..=TOOL_RESULT_SCHEMA).contains(&schema),
        _ => schema == SCHEMA_VERSION,
    }
}
/// Offset of the revision field in the envelope.
pub const REVISION_OFFSET: usize = 8;

/// The envelope fields, borrowed from a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeRef<'a> {
    /// The wire tag of the event type.
    pub tag: u16,
    /// The body schema version.
    pub schema: u16,
    /// The body encoding byte.
    pub encoding: u8,
    /// The task id.
    pub task: &'a str,
    /// The task revision after the event.
    pub revision: u64,
    /// The append time, microseconds since the Unix epoch.
    pub timestamp_us: u64,
    /// The body bytes.
    pub body: &'a [u8],
}

/// Bytes of a record holding an event of task `task` with a body of `body_bytes`.
#[must_use]
pub fn record_bytes(task: &str, body_bytes: usize) -> usize {
    EVENT_ENVELOPE_BYTES + task.len() + body_bytes
}

/// Writes the envelope and the task id into the start of `out`, which holds exactly
/// [`record_bytes`] bytes; the caller writes the body after it. Returns the body's offset.
pub fn write_envelope(
    out: &mut [u8],
    event_type: EventType,
    encoding: u8,
    task: &str,
    revision: u64,
    timestamp_us: u64,
) -> usize {
    write_raw_envelope(
        out,
        event_type.tag(),
        SCHEMA_VERSION,
        encoding,
        task,
        revision,
        timestamp_us,
    )
}

fn write_raw_envelope(
    out: &mut [u8],
    tag: u16,
    schema: u16,
    encoding: u8,
    task: &str,
    revision: u64,
    timestamp_us: u64,
) -> usize {
    assert!(!task.is_empty() && task.len() <= TASK_ID_BYTES_MAX);
    assert!(out.len() >= EVENT_ENVELOPE_BYTES + task.len());
    out[0] = EVENT_MAGIC;
    out[1] = ENVELOPE_VERSION;
    out[2..4].copy_from_slice(&tag.to_le_bytes());
    out[4..6].copy_from_slice(&schema.to_le_bytes());
    out[6] = encoding;
    out[7] = task.len() as u8;
    out[8..16].copy_from_slice(&revision.to_le_bytes());
    out[16..24].copy_from_slice(&timestamp_us.to_le_bytes());
    let body = EVENT_ENVELOPE_BYTES + task.len();
    out[EVENT_ENVELOPE_BYTES..body].copy_from_slice(task.as_bytes());
    body
}

/// Writes an `assistant/delta` record into `out` (exactly `record_bytes(task, text.len())`
/// bytes). The hot path: no allocation.
pub fn write_delta(out: &mut [u8], task: &str, revision: u64, timestamp_us: u64, text: &str) {
    let at = write_envelope(
        out,
        EventType::AssistantDelta,
        ENCODING_BINARY,
        task,
        revision,
        timestamp_us,
    );
    out[at..].copy_from_slice(text.as_bytes());
}

/// Sets the revision field of an encoded record.
pub fn set_revision(record: &mut [u8], revision: u64) {
    record[REVISION_OFFSET..REVISION_OFFSET + 8].copy_from_slice(&revision.to_le_bytes());
}

/// An encoded body: what a record holds after its envelope's task, revision and timestamp
/// (`format-spec/events.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBody {
    /// The event type's wire tag.
    pub tag: u16,
    /// The body schema version.
    pub schema: u16,
    /// The encoding byte ([`ENCODING_JSON`] or [`ENCODING_BINARY`]).
    pub encoding: u8,
    /// The body bytes.
    pub bytes: Vec<u8>,
}

/// The body bytes and encoding of `body` for a log of segment format `format_version`: JSON
/// for every type but `assistant/delta`, in the schema [`schema_written`] gives (a
/// `tool/result` is downcast to schema 1 for a format-1 log). An opaque body keeps its bytes.
/// A format version this build does not write is [`ErrorKind::InvalidOptions`]; a body the
/// downcast refuses is [`ErrorKind::InvalidEvent`].
pub fn encode_body(body: &Body, format_version: u16) -> Result<EncodedBody> {
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&format_version) {
        return Err(ErrorKind::InvalidOptions {
            reason: format!(
                "segment format version {format_version} is not one this build writes \
                 ({FORMAT_VERSION_MIN} to {FORMAT_VERSION})"
            ),
        }
        .into());
    }
    if format_version < BLOB_FORMAT_VERSION_MIN && matches!(body, Body::RecordBlob(_)) {
        return Err(ErrorKind::InvalidEvent {
            event_type: EventType::RecordBlob.name().to_owned(),
            reason: format!(
                "a log of segment format {format_version} cannot hold it (format \
                 {BLOB_FORMAT_VERSION_MIN} or later can: `factlog migrate` the store, or append \
                 the record as a record/put)"
            ),
        }
        .into());
    }
    let schema = body.event_type().map_or(SCHEMA_VERSION, |t| schema_written(t, format_version));
    encode_body_at(body, schema)
}

/// The body bytes and encoding of `body` in body schema `schema`, which must be one this
/// build writes for the body's type ([`schema_written`] for some format version); else
/// [`ErrorKind::InvalidEvent`]. An opaque body keeps its own schema and bytes.
pub fn encode_body_at(body: &Body, schema: u16) -> Result<EncodedBody> {
    if let Some(event_type) = body.event_type()
        && !(FORMAT_VERSION_MIN..=FORMAT_VERSION).any(|v| schema_written(event_type, v) == schema)
    {
        return Err(ErrorKind::InvalidEvent {
            event_type: event_type.name().to_owned(),
            reason: format!("this build does not write body schema {schema} of this type"),
        }
        .into());
    }
    let (event_type, bytes) = match body {
        Body::AssistantDelta(d) => {
            return Ok(EncodedBody {
                tag: EventType::AssistantDelta.tag(),
                schema: SCHEMA_VERSION,
                encoding: ENCODING_BINARY,
                bytes: d.text.as_bytes().to_vec(),
            });
        }
        Body::RecordBlob(b) => {
            return Ok(EncodedBody {
                tag: EventType::RecordBlob.tag(),
                schema: SCHEMA_VERSION,
                encoding: ENCODING_BINARY,
                bytes: encode_blob(b)?,
            });
        }
        Body::Opaque(o) => {
            return Ok(EncodedBody {
                tag: o.tag,
                schema: o.schema,
                encoding: o.encoding,
                bytes: o.bytes.clone(),
            });
        }
        Body::ToolResult(b) if schema == 1 => {
            let v1 = upcast::tool_result_2_to_1(b).map_err(|refusal| ErrorKind::InvalidEvent {
                event_type: EventType::ToolResult.name().to_owned(),
                reason: format!(
                    "it cannot be written as schema 1 (this log is of segment format 1): {}",
                    refusal.reason
                ),
            })?;
            (EventType::ToolResult, serde_json::to_vec(&v1))
        }
        typed => match (typed.event_type(), json_body(typed)) {
            (Some(event_type), Some(fields)) => (event_type, fields.to_vec()),
            _ => unreachable!("every body but a delta, a blob and an opaque one has a struct"),
        },
    };
    let bytes = bytes.map_err(|e| ErrorKind::InvalidEvent {
        event_type: event_type.name().to_owned(),
        reason: format!("cannot encode the body: {e}"),
    })?;
    if bytes.len() > EVENT_BODY_BYTES_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "event body bytes",
            value: bytes.len() as u64,
            limit: EVENT_BODY_BYTES_MAX as u64,
        }
        .into());
    }
    Ok(EncodedBody { tag: event_type.tag(), schema, encoding: ENCODING_JSON, bytes })
}

/// Encodes a whole record for `task` at `revision`, for a log of segment format
/// `format_version` (see [`encode_body`]).
pub fn encode(
    task: &str,
    revision: u64,
    timestamp_us: u64,
    body: &Body,
    format_version: u16,
) -> Result<Vec<u8>> {
    Ok(encode_parts(task, revision, timestamp_us, &encode_body(body, format_version)?))
}

/// Encodes a whole record from a body already encoded by [`encode_body`].
#[must_use]
pub fn encode_parts(task: &str, revision: u64, timestamp_us: u64, body: &EncodedBody) -> Vec<u8> {
    // Only the envelope is zeroed first: a body may be hundreds of KiB.
    let mut out = Vec::with_capacity(record_bytes(task, body.bytes.len()));
    out.resize(record_bytes(task, 0), 0);
    write_raw_envelope(
        &mut out,
        body.tag,
        body.schema,
        body.encoding,
        task,
        revision,
        timestamp_us,
    );
    out.extend_from_slice(&body.bytes);
    out
}

/// Writes the record of [`encode_parts`] into `out`, which holds exactly
/// [`record_bytes`]`(task, body.bytes.len())` bytes: a record built where it is stored (a
/// log's buffer) rather than copied there.
pub fn write_parts(
    out: &mut [u8],
    task: &str,
    revision: u64,
    timestamp_us: u64,
    body: &EncodedBody,
) {
    let at =
        write_raw_envelope(out, body.tag, body.schema, body.encoding, task, revision, timestamp_us);
    out[at..].copy_from_slice(&body.bytes);
}

/// Encodes `event` in its own body schema, `event.schema` (its `seq` is not part of the
/// record: the log assigns it). A decoded event is in the schema it was read as (a schema-1
/// `tool/result` was upcast to 2), so it re-encodes in that schema; for the schema of a given
/// log, use [`encode`] with the log's format version.
pub fn encode_event(event: &Event) -> Result<Vec<u8>> {
    let body = encode_body_at(&event.body, event.schema)?;
    Ok(encode_parts(event.task.as_str(), event.revision, event.timestamp_us, &body))
}

/// Reads the envelope of a record without decoding its body.
pub fn peek(seq: Seq, record: &[u8]) -> Result<EnvelopeRef<'_>> {
    let bad = |reason: String| ErrorKind::CorruptEvent { seq: seq.0, reason };
    if record.len() < EVENT_ENVELOPE_BYTES {
        return Err(bad(format!("{} bytes is shorter than an event envelope", record.len())).into());
    }
    if record[0] != EVENT_MAGIC {
        return Err(bad("not an event record (bad magic byte)".to_owned()).into());
    }
    if record[1] != ENVELOPE_VERSION {
        return Err(bad(format!(
            "envelope version {} is not supported (this build reads version {ENVELOPE_VERSION}); \
             open the store with a newer factlog",
            record[1]
        ))
        .into());
    }
    let u16_at = |at: usize| u16::from_le_bytes([record[at], record[at + 1]]);
    let u64_at = |at: usize| {
        let mut b = [0; 8];
        b.copy_from_slice(&record[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let task_len = usize::from(record[7]);
    let body_at = EVENT_ENVELOPE_BYTES + task_len;
    if task_len == 0 || task_len > TASK_ID_BYTES_MAX || record.len() < body_at {
        return Err(bad(format!("bad task id length {task_len}")).into());
    }
    let task = std::str::from_utf8(&record[EVENT_ENVELOPE_BYTES..body_at])
        .map_err(|_| bad("task id is not UTF-8".to_owned()))?;
    Ok(EnvelopeRef {
        tag: u16_at(2),
        schema: u16_at(4),
        encoding: record[6],
        task,
        revision: u64_at(8),
        timestamp_us: u64_at(16),
        body: &record[body_at..],
    })
}

/// Decodes the record `record` of sequence number `seq`.
pub fn decode(seq: Seq, record: &[u8]) -> Result<Event> {
    let env = peek(seq, record)?;
    let body = decode_body(seq, &env, true)?;
    Ok(event_of(seq, &env, body))
}

/// [`decode`], except that a `record/blob`'s bytes are not copied into the event (its `bytes`
/// is left empty): they are returned borrowed from `record`, for a caller that copies them
/// once, where they go (a Python `bytes` object). `None` for any other event.
pub fn decode_lending_blob(seq: Seq, record: &[u8]) -> Result<(Event, Option<&[u8]>)> {
    let env = peek(seq, record)?;
    let body = decode_body(seq, &env, false)?;
    // The body was split when it was decoded: a blob here splits again (in constant time).
    let lent = match body {
        Body::RecordBlob(_) => Some(
            split_blob(env.body)
                .map_err(|reason| ErrorKind::CorruptEvent { seq: seq.0, reason })?
                .1,
        ),
        _ => None,
    };
    Ok((event_of(seq, &env, body), lent))
}

/// The event of a record whose envelope is `env` and whose body decoded to `body`.
fn event_of(seq: Seq, env: &EnvelopeRef<'_>, body: Body) -> Event {
    // An upcast body is in the newest schema of its type, and says so.
    let schema = match body {
        Body::ToolResult(_) => TOOL_RESULT_SCHEMA,
        _ => env.schema,
    };
    Event {
        seq,
        task: TaskId(env.task.to_owned()),
        revision: env.revision,
        timestamp_us: env.timestamp_us,
        schema,
        body,
    }
}

/// The text of an `assistant/delta` record, borrowed from it: `Ok(None)` when `env` is not a
/// delta of a schema this build reads (decode it with [`decode`]), and the error [`decode`]
/// would give for a delta whose body is not binary UTF-8 text. Replay counts deltas through
/// this without building an [`Event`].
pub fn delta_text<'a>(seq: Seq, env: &EnvelopeRef<'a>) -> Result<Option<&'a str>> {
    if env.tag != EventType::AssistantDelta.tag()
        || !schema_readable(EventType::AssistantDelta, env.schema)
    {
        return Ok(None);
    }
    let bad = |reason: String| -> crate::error::Error {
        ErrorKind::CorruptEvent { seq: seq.0, reason: format!("assistant/delta: {reason}") }.into()
    };
    if env.encoding != ENCODING_BINARY {
        return Err(bad(format!(
            "body encoding {} where {ENCODING_BINARY} is required",
            env.encoding
        )));
    }
    let text = std::str::from_utf8(env.body).map_err(|_| bad("text is not UTF-8".into()))?;
    Ok(Some(text))
}

/// The body of `env`; a `record/blob`'s bytes are copied into it only with `blob_bytes`.
fn decode_body(seq: Seq, env: &EnvelopeRef<'_>, blob_bytes: bool) -> Result<Body> {
    let opaque = || {
        Body::Opaque(Opaque {
            tag: env.tag,
            schema: env.schema,
            encoding: env.encoding,
            bytes: env.body.to_vec(),
        })
    };
    let Some(event_type) = EventType::from_tag(env.tag) else { return Ok(opaque()) };
    if !schema_readable(event_type, env.schema) {
        return Ok(opaque());
    }
    let bad = |reason: String| -> crate::error::Error {
        ErrorKind::CorruptEvent { seq: seq.0, reason: format!("{}: {reason}", event_type.name()) }
            .into()
    };
    let expected = match event_type {
        EventType::AssistantDelta | EventType::RecordBlob => ENCODING_BINARY,
        _ => ENCODING_JSON,
    };
    if env.encoding != expected {
        return Err(bad(format!("body encoding {} where {expected} is required", env.encoding)));
    }
    if let Some(text) = delta_text(seq, env)? {
        return Ok(Body::AssistantDelta(crate::harness::event::AssistantDelta {
            text: text.to_owned(),
        }));
    }
    if event_type == EventType::RecordBlob {
        return decode_blob(env.body, blob_bytes).map(Body::RecordBlob).map_err(bad);
    }
    if event_type == EventType::ToolResult && env.schema == 1 {
        let v1: ToolResultV1 = serde_json::from_slice(env.body).map_err(|e| bad(e.to_string()))?;
        return match upcast::tool_result_1_to_2(v1) {
            Ok(body) => Ok(Body::ToolResult(body)),
            Err(refusal) => Err(cannot_upcast(seq, refusal)),
        };
    }
    body_from_json(event_type, env.body).map_err(|e| bad(e.to_string()))
}

fn cannot_upcast(seq: Seq, refusal: Refusal) -> crate::error::Error {
    ErrorKind::CannotUpcast {
        seq: seq.0,
        event_type: refusal.event_type.name().to_owned(),
        from: refusal.from,
        to: refusal.to,
        reason: refusal.reason,
    }
    .into()
}

/// Builds the typed body of `event_type` from a JSON object in the schema this build reads the
/// type as (schema 2 for `tool/result`, 1 for the others). Straight from the value: no JSON
/// text is written and parsed again on the way (a client's append through the protocol, a
/// Python dict).
pub fn body_from_value(
    event_type: EventType,
    value: serde_json::Value,
) -> serde_json::Result<Body> {
    body_from(event_type, value)
}

/// Builds the typed body of `event_type` from its JSON bytes, in the schema this build reads
/// the type as (schema 2 for `tool/result`, 1 for the others).
pub fn body_from_json(event_type: EventType, bytes: &[u8]) -> serde_json::Result<Body> {
    body_from(event_type, bytes)
}

/// Where a body is deserialized from: JSON bytes or a JSON value, consumed once.
trait JsonSource {
    fn parse<T: DeserializeOwned>(self) -> serde_json::Result<T>;
}

impl JsonSource for &[u8] {
    fn parse<T: DeserializeOwned>(self) -> serde_json::Result<T> {
        serde_json::from_slice(self)
    }
}

impl JsonSource for serde_json::Value {
    fn parse<T: DeserializeOwned>(self) -> serde_json::Result<T> {
        serde_json::from_value(self)
    }
}

fn body_from(event_type: EventType, source: impl JsonSource) -> serde_json::Result<Body> {
    use EventType as T;
    Ok(match event_type {
        T::Contract => Body::Contract(source.parse()?),
        T::Phase => Body::Phase(source.parse()?),
        T::Plan => Body::Plan(source.parse()?),
        T::Todo => Body::Todo(source.parse()?),
        T::TurnStart => Body::TurnStart(source.parse()?),
        T::TurnEnd => Body::TurnEnd(source.parse()?),
        T::StepStart => Body::StepStart(source.parse()?),
        T::StepEnd => Body::StepEnd(source.parse()?),
        T::UserMessage => Body::UserMessage(source.parse()?),
        T::AssistantDelta => {
            let v: DeltaJson = source.parse()?;
            Body::AssistantDelta(crate::harness::event::AssistantDelta { text: v.text })
        }
        T::AssistantMessage => Body::AssistantMessage(source.parse()?),
        T::ToolCall => Body::ToolCall(source.parse()?),
        T::ToolResult => Body::ToolResult(source.parse()?),
        T::ToolOutcomeUnknown => Body::ToolOutcomeUnknown(source.parse()?),
        T::ToolNotRun => Body::ToolNotRun(source.parse()?),
        T::ApprovalRequest => Body::ApprovalRequest(source.parse()?),
        T::ApprovalGrant => Body::ApprovalGrant(source.parse()?),
        T::ApprovalDeny => Body::ApprovalDeny(source.parse()?),
        T::ApprovalExpired => Body::ApprovalExpired(source.parse()?),
        T::Cancel => Body::Cancel(source.parse()?),
        T::Pause => Body::Pause(source.parse()?),
        T::Resume => Body::Resume(source.parse()?),
        T::SignalExpired => Body::SignalExpired(source.parse()?),
        T::BudgetUsage => Body::BudgetUsage(source.parse()?),
        T::ContextCompacted => Body::ContextCompacted(source.parse()?),
        T::Restored => Body::Restored(source.parse()?),
        T::Migrated => Body::StateMigrated(source.parse()?),
        T::RecordPut => Body::RecordPut(source.parse()?),
        T::RecordRemoved => Body::RecordRemoved(source.parse()?),
        T::RecordBlob => Body::RecordBlob(source.parse()?),
    })
}

/// The oldest segment format whose logs may hold a `record/blob`: a build that knows only
/// format 1 never meets one there.
pub const BLOB_FORMAT_VERSION_MIN: u16 = 2;

/// The part of a `record/blob` before its bytes, as JSON: the fields of a `record/put`.
#[derive(Serialize)]
struct BlobHead<'a> {
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: &'a Option<String>,
    value: &'a serde_json::Value,
    #[serde(flatten)]
    extra: &'a crate::harness::event::Extra,
}

/// The binary body of a `record/blob` (`format-spec/events.md`, "Bodies"): the length of the
/// head and the length of the bytes (u32 each, little-endian), the head (a JSON object: `kind`,
/// `key`, `value` and any unknown field), then the bytes; nothing after them.
fn encode_blob(blob: &crate::harness::event::RecordBlob) -> Result<Vec<u8>> {
    if blob.extra.contains_key("bytes") {
        // Its head would hold a `bytes` of its own, which no reader would take.
        return Err(ErrorKind::InvalidEvent {
            event_type: EventType::RecordBlob.name().to_owned(),
            reason: "an unknown field named `bytes` beside the bytes".to_owned(),
        }
        .into());
    }
    let head =
        BlobHead { kind: &blob.kind, key: &blob.key, value: &blob.value, extra: &blob.extra };
    let mut out = Vec::with_capacity(BLOB_LENGTHS_BYTES + 64 + blob.bytes.len());
    out.extend_from_slice(&[0; BLOB_LENGTHS_BYTES]);
    serde_json::to_writer(&mut out, &head).map_err(|e| ErrorKind::InvalidEvent {
        event_type: EventType::RecordBlob.name().to_owned(),
        reason: format!("its value has no JSON form: {e}"),
    })?;
    let len = out.len() + blob.bytes.len();
    if len > EVENT_BODY_BYTES_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "event body bytes",
            value: len as u64,
            limit: EVENT_BODY_BYTES_MAX as u64,
        }
        .into());
    }
    // Both lengths fit a u32: the whole body is at most EVENT_BODY_BYTES_MAX (4 MiB).
    let head_len = (out.len() - BLOB_LENGTHS_BYTES) as u32;
    out[..4].copy_from_slice(&head_len.to_le_bytes());
    out[4..BLOB_LENGTHS_BYTES].copy_from_slice(&(blob.bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(&blob.bytes);
    Ok(out)
}

/// The two lengths before a `record/blob`'s head.
const BLOB_LENGTHS_BYTES: usize = 8;

/// A `record/blob` body's head and bytes, by its two lengths; the reason when they do not add
/// up to the body.
fn split_blob(body: &[u8]) -> std::result::Result<(&[u8], &[u8]), String> {
    let Some((lengths, rest)) = body.split_first_chunk::<BLOB_LENGTHS_BYTES>() else {
        return Err(format!("a body of {} bytes has no lengths", body.len()));
    };
    let head_len = u64::from(u32::from_le_bytes([lengths[0], lengths[1], lengths[2], lengths[3]]));
    let bytes_len = u64::from(u32::from_le_bytes([lengths[4], lengths[5], lengths[6], lengths[7]]));
    if head_len + bytes_len != rest.len() as u64 {
        return Err(format!(
            "a head of {head_len} bytes and {bytes_len} bytes do not make a body of {} bytes",
            body.len()
        ));
    }
    Ok(rest.split_at(head_len as usize))
}

/// A `record/blob`'s bytes as its JSON form gives them: standard base64 with padding.
#[must_use]
pub fn blob_bytes_to_base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The bytes of a `record/blob`'s JSON form (standard base64 with padding); `None` for text
/// that is not such base64.
#[must_use]
pub fn blob_bytes_from_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// The JSON text of an encoded body: the head of a `record/blob`, the whole body of a JSON
/// encoding, nothing of any other binary body.
#[must_use]
pub fn json_text(encoded: &EncodedBody) -> &[u8] {
    if encoded.encoding == ENCODING_JSON {
        return &encoded.bytes;
    }
    blob_parts(encoded).map_or(&[], |(head, _)| head)
}

/// The head (JSON text) and the raw bytes of an encoded `record/blob`; `None` for any other
/// body, or one whose head length runs past it.
#[must_use]
pub fn blob_parts(encoded: &EncodedBody) -> Option<(&[u8], &[u8])> {
    if encoded.tag != EventType::RecordBlob.tag() || encoded.encoding != ENCODING_BINARY {
        return None;
    }
    split_blob(&encoded.bytes).ok()
}

/// Decodes the binary body of a `record/blob`; the reason when it is not one.
fn decode_blob(
    body: &[u8],
    blob_bytes: bool,
) -> std::result::Result<crate::harness::event::RecordBlob, String> {
    let (head, bytes) = split_blob(body)?;
    let head: BlobHeadOwned = serde_json::from_slice(head).map_err(|e| format!("head: {e}"))?;
    if head.extra.contains_key("bytes") {
        return Err("the head has a field `bytes` (the bytes follow the head)".to_owned());
    }
    Ok(crate::harness::event::RecordBlob {
        kind: head.kind,
        key: head.key,
        value: head.value,
        bytes: if blob_bytes { bytes.to_vec() } else { Vec::new() },
        extra: head.extra,
    })
}

/// [`BlobHead`] as read back.
#[derive(serde::Deserialize)]
struct BlobHeadOwned {
    kind: String,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    value: serde_json::Value,
    #[serde(flatten)]
    extra: crate::harness::event::Extra,
}

/// The JSON body of an `assistant/delta` as a client writes it: its `text` alone. A delta is
/// stored as its bare text, so any other field is refused rather than dropped.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DeltaJson {
    text: String,
}

/// The JSON object of a body (for `dump`, `state`, `export` and the CLI): the typed fields and
/// the unknown ones. `assistant/delta` gives `{"text": ...}`; an opaque body with a JSON
/// encoding gives its object; any other opaque body gives its bytes whole, as
/// `{"opaque_encoding": E, "opaque_bytes": N, "opaque_hex": "..."}`.
pub fn body_to_value(body: &Body) -> serde_json::Value {
    match body {
        Body::AssistantDelta(d) => serde_json::json!({ "text": d.text }),
        Body::Opaque(o) if o.encoding == ENCODING_JSON => {
            serde_json::from_slice(&o.bytes).unwrap_or_else(|_| opaque_value(o))
        }
        Body::Opaque(o) => opaque_value(o),
        typed => json_body(typed).map_or(serde_json::Value::Null, erased::Json::to_value),
    }
}

/// Writes the members of [`body_to_value`]'s object (`"key":value` pairs, comma-separated,
/// without braces; nothing for an object without any) at the end of `out`, serialised
/// straight from the typed body, without building the object: the same bytes as the object
/// serialised. `false`, and `out` as it was, when [`body_to_value`] is not an object.
pub fn write_body_members(out: &mut Vec<u8>, body: &Body) -> bool {
    let start = out.len();
    let written = match (body, json_body(body)) {
        (Body::AssistantDelta(d), _) => {
            out.extend_from_slice(b"\"text\":");
            // Serialising a string into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, &d.text);
            return true;
        }
        (_, Some(fields)) => fields.write_into(out).is_ok(),
        (_, None) => serde_json::to_writer(&mut *out, &body_to_value(body)).is_ok(),
    };
    // An object is `{` members `}`: the braces come off.
    let object = written && out.len() - start >= 2 && out[start] == b'{';
    if !object {
        out.truncate(start);
        return false;
    }
    out.pop();
    out.remove(start);
    true
}

/// The typed struct of `body`, as JSON: `None` for a delta and an opaque body, which have none.
fn json_body(body: &Body) -> Option<&dyn erased::Json> {
    Some(match body {
        Body::AssistantDelta(_) | Body::Opaque(_) => return None,
        Body::Contract(b) => b,
        Body::Phase(b) => b,
        Body::Plan(b) => b,
        Body::Todo(b) => b,
        Body::TurnStart(b) => b,
        Body::TurnEnd(b) => b,
        Body::StepStart(b) => b,
        Body::StepEnd(b) => b,
        Body::UserMessage(b) => b,
        Body::AssistantMessage(b) => b,
        Body::ToolCall(b) => b,
        Body::ToolResult(b) => b,
        Body::ToolOutcomeUnknown(b) => b,
        Body::ToolNotRun(b) => b,
        Body::ApprovalRequest(b) => b,
        Body::ApprovalGrant(b) => b,
        Body::ApprovalDeny(b) => b,
        Body::ApprovalExpired(b) => b,
        Body::Cancel(b) | Body::Pause(b) | Body::Resume(b) => b,
        Body::SignalExpired(b) => b,
        Body::BudgetUsage(b) => b,
        Body::ContextCompacted(b) => b,
        Body::Restored(b) => b,
        Body::StateMigrated(b) => b,
        Body::RecordPut(b) => b,
        Body::RecordRemoved(b) => b,
        Body::RecordBlob(b) => b,
    })
}

/// An opaque body that is not a JSON object, whole: its encoding byte and its bytes in hex.
fn opaque_value(o: &crate::harness::event::Opaque) -> serde_json::Value {
    let hex: String = o.bytes.iter().map(|b| format!("{b:02x}")).collect();
    serde_json::json!({
        "opaque_encoding": o.encoding,
        "opaque_bytes": o.bytes.len(),
        "opaque_hex": hex,
    })
}

mod erased {
    /// Object-safe JSON encoding, so one dispatch ([`super::json_body`]) serves every body
    /// type.
    pub(super) trait Json {
        fn to_vec(&self) -> serde_json::Result<Vec<u8>>;
        fn to_value(&self) -> serde_json::Value;
        fn write_into(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_vec(&self) -> serde_json::Result<Vec<u8>> {
            serde_json::to_vec(self)
        }
        fn to_value(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
        }
        fn write_into(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }
}
