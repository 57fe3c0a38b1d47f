//! An append's request line written straight from its typed bodies, and its reply read by its
//! head, both without a JSON tree: what [`super::Client::append`],
//! [`super::Client::append_batch`] and [`super::Client::append_pipelined`] send, and what the
//! first two read, on every append. The bytes are those
//! of the request object ([`super::event_object`], [`crate::protocol::op::Op::batch`]) with
//! the client's `id` first, serialised; the head is the keys of a reply the client reads
//! before anything else. A reply that is more than a written reply (an error, a duplicate) is
//! read again whole.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use super::ClientError;
use crate::harness::Body;
use crate::harness::codec;
use crate::protocol::acks::{AckMode, KEY_COVERS};
use crate::protocol::op::RequestedDurability;
use crate::{AppendOptions, Durability};

/// Under durable-only acknowledgements a written reply that met only `buffered` durability is
/// not sent: whether a request that waits for its reply must ask for `flushed` instead, given
/// whether it asks for `buffered` (`None`: it asks for nothing, and its events' default counts),
/// so that its reply comes and vouches for it (`format-spec/server.md`, "Acknowledgements").
pub(super) fn asks_flushed(
    asked_buffered: Option<bool>,
    by_default: impl FnOnce() -> bool,
) -> bool {
    asked_buffered.unwrap_or_else(by_default)
}

/// The request line (newline included) appending `bodies` to `task` with `id` (none: a
/// pipelined line): one event (`{"id","task","type",fields...,"expected_revision",
/// "durability"}`) or, with `batch`, one `batch` operation of them. A line with an `id` waits
/// for its reply: under durable-only `acks` it asks for `flushed` where its reply would not
/// come ([`asks_flushed`]). Errors as [`super::event_object`]'s. `None` when a body's own
/// fields (the unknown ones it keeps) may name a key of the request (`id`, `task`, `type`,
/// `expected_revision`, `durability`): the request object ([`super::append_object`]) merges
/// them into its keys, which a line written field after field would repeat instead.
pub(super) fn append_line(
    id: Option<u64>,
    task: &str,
    bodies: &[Body],
    batch: bool,
    options: AppendOptions,
    acks: AckMode,
) -> Result<Option<Vec<u8>>, ClientError> {
    let mut line = Vec::with_capacity(128);
    line.push(b'{');
    if let Some(id) = id {
        line.extend_from_slice(b"\"id\":");
        line.extend_from_slice(itoa_u64(id, &mut [0; 20]));
        line.push(b',');
    }
    if batch {
        line.extend_from_slice(b"\"op\":\"batch\",\"task\":");
        string(&mut line, task);
        line.extend_from_slice(b",\"events\":[");
        for (index, body) in bodies.iter().enumerate() {
            if index > 0 {
                line.push(b',');
            }
            line.push(b'{');
            if !event(&mut line, body)? {
                return Ok(None);
            }
            line.push(b'}');
        }
        line.push(b']');
    } else {
        line.extend_from_slice(b"\"task\":");
        string(&mut line, task);
        for body in bodies {
            line.push(b',');
            if !event(&mut line, body)? {
                return Ok(None);
            }
        }
    }
    if let Some(revision) = options.expected_revision {
        line.extend_from_slice(b",\"expected_revision\":");
        line.extend_from_slice(itoa_u64(revision, &mut [0; 20]));
    }
    let asked = RequestedDurability::of(options);
    let flushed = id.is_some()
        && acks == AckMode::DurableOnly
        && asks_flushed(asked.map(|asked| asked == RequestedDurability::Buffered), || {
            !bodies.is_empty()
                && bodies.iter().all(|body| {
                    body.event_type()
                        .is_some_and(|t| t.default_durability() == Durability::Buffered)
                })
        });
    let durability = if flushed { Some(RequestedDurability::Flushed) } else { asked };
    if let Some(durability) = durability {
        line.extend_from_slice(b",\"durability\":");
        // A unit variant serialises to its name.
        let _ = serde_json::to_writer(&mut line, &durability);
    }
    line.extend_from_slice(b"}\n");
    Ok(Some(line))
}

/// The keys of a request that a body's fields must not repeat.
const REQUEST_KEYS: [&[u8]; 5] = [b"id", b"task", b"type", b"expected_revision", b"durability"];

/// Whether `members` (`"key":value` pairs, comma-separated, no braces) has one of `keys` as a
/// key of its own (not of a nested object). Keys are compared as written, escapes and all:
/// the names of `keys` have none.
fn has_key(members: &[u8], keys: &[&[u8]]) -> bool {
    let mut depth = 0_usize;
    let mut at = 0;
    while at < members.len() {
        match members[at] {
            b'"' => {
                let start = at + 1;
                let mut end = start;
                while end < members.len() && members[end] != b'"' {
                    end += if members[end] == b'\\' { 2 } else { 1 };
                }
                let name = &members[start..end.min(members.len())];
                at = end + 1;
                if depth == 0 && members.get(at) == Some(&b':') && keys.contains(&name) {
                    return true;
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    false
}

/// `"type":NAME` and the body's fields; `false` if a field of the body is named as a key of
/// the request.
fn event(line: &mut Vec<u8>, body: &Body) -> Result<bool, ClientError> {
    let Some(event_type) = body.event_type() else {
        return Err(ClientError::Protocol { what: "an opaque body cannot be sent".to_owned() });
    };
    line.extend_from_slice(b"\"type\":");
    string(line, event_type.name());
    let members = line.len();
    line.push(b',');
    if !codec::write_body_members(line, body) {
        return Err(ClientError::Protocol { what: "a body that is not an object".to_owned() });
    }
    if has_key(&line[members + 1..], &REQUEST_KEYS) {
        return Ok(false);
    }
    if line.len() == members + 1 {
        // No fields: no comma.
        line.pop();
    }
    Ok(true)
}

fn string(line: &mut Vec<u8>, text: &str) {
    // Serialising a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *line, text);
}

/// The decimal digits of `value`, written at the end of `buffer`.
fn itoa_u64(mut value: u64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &buffer[at..];
        }
    }
}

/// What a reply is read as while the replies before it are counted off: the whole object, or
/// only its head.
pub(super) trait ReplyRead: Sized {
    /// Parses a reply line.
    fn parse(line: &[u8]) -> Result<Self, ClientError>;
    /// Takes `covers` out (the count of lines it answers, under durable-only acks).
    fn take_covers(&mut self) -> Option<u64>;
    /// Whether it is an error reply.
    fn is_error(&self) -> bool;
    /// Its `id`.
    fn id(&self) -> Option<&Value>;
}

impl ReplyRead for Map<String, Value> {
    fn parse(line: &[u8]) -> Result<Self, ClientError> {
        match serde_json::from_slice(line) {
            Ok(Value::Object(reply)) => Ok(reply),
            Ok(_) => {
                Err(ClientError::Protocol { what: "a reply that is not an object".to_owned() })
            }
            Err(error) => Err(ClientError::Protocol { what: error.to_string() }),
        }
    }

    fn take_covers(&mut self) -> Option<u64> {
        self.shift_remove(KEY_COVERS).and_then(|covers| covers.as_u64())
    }

    fn is_error(&self) -> bool {
        self.contains_key("error")
    }

    fn id(&self) -> Option<&Value> {
        self.get(crate::protocol::request::KEY_ID)
    }
}

/// The head of a reply: the keys of a written reply, and whether it is more than one. A value
/// of another kind than a written reply's (a `seq` that is a string, say) fails the read, as
/// a reply the client cannot trust.
#[derive(Debug, Deserialize)]
pub(super) struct Head {
    id: Option<Value>,
    /// A written reply's first seq.
    pub(super) seq: Option<u64>,
    /// A written reply's revision.
    pub(super) revision: Option<u64>,
    covers: Option<u64>,
    #[serde(default)]
    error: Present,
    #[serde(default)]
    duplicate: Present,
}

/// Whether a key is there, whatever its value (`null` too).
#[derive(Debug, Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Present, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| Present(true))
    }
}

impl Head {
    /// Whether the reply says no more than a written reply's seq and revision (not a
    /// duplicate, not an error), so that it need not be read whole.
    pub(super) fn is_plain(&self) -> bool {
        !self.duplicate.0 && !self.error.0 && self.seq.is_some() && self.revision.is_some()
    }
}

impl ReplyRead for Head {
    fn parse(line: &[u8]) -> Result<Self, ClientError> {
        let not_an_object =
            || ClientError::Protocol { what: "a reply that is not an object".to_owned() };
        // A struct also reads from an array: only an object is a reply.
        if line.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
            return Err(not_an_object());
        }
        serde_json::from_slice(line).map_err(|error| ClientError::Protocol {
            what: format!("a reply the client cannot read: {error}"),
        })
    }

    fn take_covers(&mut self) -> Option<u64> {
        self.covers.take()
    }

    fn is_error(&self) -> bool {
        self.error.0
    }

    fn id(&self) -> Option<&Value> {
        self.id.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::harness::EventType;
    use crate::protocol::request::KEY_ID;

    /// Bodies of every type that an empty object makes, and some with fields: strings to
    /// escape, nested values, a field this build does not know.
    fn bodies() -> Vec<Body> {
        let mut bodies: Vec<Body> = EventType::ALL
            .iter()
            .filter_map(|&t| codec::body_from_value(t, json!({})).ok())
            .collect();
        let with_fields = [
            (EventType::AssistantDelta, json!({"text": "a \"token\"\n é"})),
            (
                EventType::ToolCall,
                json!({"call_id": "c1", "tool": "search", "effect": "read_only",
                       "args": {"q": "x \"y\"", "n": [1, 2.5, null]}}),
            ),
            (
                EventType::ToolResult,
                json!({"call_id": "c1", "outcome": "ok", "output": {"rows": 3},
                       "x_future": {"kept": true}}),
            ),
        ];
        for (event_type, value) in with_fields {
            bodies.push(codec::body_from_value(event_type, value).expect("a body"));
        }
        assert!(bodies.len() > 10, "most types have a body without fields");
        bodies
    }

    /// One append as a test writes it: its line field after field ([`append_line`]) and the
    /// line of its request object.
    #[derive(Debug, Clone, Copy)]
    struct Append<'a> {
        id: Option<u64>,
        task: &'a str,
        bodies: &'a [Body],
        batch: bool,
        options: AppendOptions,
        acks: AckMode,
    }

    impl Append<'_> {
        /// The line written field after field.
        fn written(self) -> Vec<u8> {
            append_line(self.id, self.task, self.bodies, self.batch, self.options, self.acks)
                .expect("a line")
                .expect("written field after field")
        }

        /// The line of the request object ([`super::super::append_object`]) with the `id`
        /// first, under durable-only acks `flushed` asked for where a reply would not come:
        /// what the client sends when a body's fields name a request key, and sent for every
        /// append before.
        fn object_line(self) -> Vec<u8> {
            let mut object = Map::new();
            if let Some(id) = self.id {
                object.insert(KEY_ID.to_owned(), json!(id));
            }
            let request =
                super::super::append_object(self.task, self.bodies, self.batch, self.options);
            object.extend(request.expect("an object"));
            if self.id.is_some() && self.acks == AckMode::DurableOnly {
                super::super::ask_for_a_reply(&mut object);
            }
            let mut line = serde_json::to_vec(&object).expect("serialised");
            line.push(b'\n');
            line
        }

        /// Both lines are the same bytes.
        fn assert_same(self) {
            assert_eq!(
                String::from_utf8_lossy(&self.written()),
                String::from_utf8_lossy(&self.object_line()),
                "{self:?}"
            );
        }
    }

    #[test]
    fn lines_are_the_bytes_of_the_request_objects() {
        let bodies = bodies();
        let options = [
            AppendOptions::default(),
            AppendOptions::expecting(7),
            AppendOptions { durability: Some(Durability::Buffered), ..AppendOptions::default() },
            AppendOptions { durability: Some(Durability::Synced), ..AppendOptions::default() },
            AppendOptions { replicated: true, ..AppendOptions::default() },
        ];
        for acks in [AckMode::Every, AckMode::DurableOnly] {
            for options in options {
                for (index, body) in bodies.iter().enumerate() {
                    let one = std::slice::from_ref(body);
                    for id in [Some(9), None] {
                        let options = if id.is_some() { options } else { AppendOptions::default() };
                        let task = "t \"1\"";
                        Append { id, task, bodies: one, batch: false, options, acks }.assert_same();
                    }
                    let pair = [body.clone(), bodies[(index + 1) % bodies.len()].clone()];
                    for members in [&pair[..1], &pair[..]] {
                        let (id, task) = (Some(10), "t");
                        Append { id, task, bodies: members, batch: true, options, acks }
                            .assert_same();
                    }
                }
            }
        }
    }

    #[test]
    fn under_durable_only_acks_a_buffered_append_asks_for_flushed() {
        let body = codec::body_from_value(EventType::StepStart, json!({})).expect("a body");
        assert_eq!(EventType::StepStart.default_durability(), Durability::Buffered);
        let options = AppendOptions::default();
        let one = std::slice::from_ref(&body);
        let acks = AckMode::DurableOnly;
        let append = Append { id: Some(1), task: "t", bodies: one, batch: false, options, acks };
        assert!(append.written().ends_with(b",\"durability\":\"flushed\"}\n"));
        let every = Append { acks: AckMode::Every, ..append }.written();
        assert!(!every.windows(10).any(|w| w == b"durability"));
        let synced = AppendOptions { durability: Some(Durability::Synced), ..options };
        let pipelined = Append { id: None, ..append }.written();
        assert!(pipelined.starts_with(b"{\"task\":\"t\",\"type\":\"step/start\""));
        let line = Append { batch: true, options: synced, ..append }.written();
        assert!(line.ends_with(b",\"durability\":\"synced\"}\n"));
    }

    #[test]
    fn fields_that_name_a_request_key_leave_the_line_to_the_request_object() {
        let options = AppendOptions::default();
        for fields in [
            json!({"text": "m", "durability": "buffered"}),
            json!({"text": "m", "id": "x"}),
            json!({"text": "m", "task": "u"}),
            json!({"text": "m", "x": "\\\"", "expected_revision": 1}),
        ] {
            let body = codec::body_from_value(EventType::UserMessage, fields).expect("a body");
            for (id, batch) in [(Some(1), false), (Some(1), true), (None, false)] {
                let line = append_line(
                    id,
                    "t",
                    std::slice::from_ref(&body),
                    batch,
                    options,
                    AckMode::DurableOnly,
                );
                assert!(line.expect("no error").is_none(), "{body:?}");
            }
        }
    }

    #[test]
    fn only_a_field_of_its_own_is_a_key_of_the_request() {
        let keys: &[&[u8]] = &[b"task"];
        assert!(has_key(br#""a":1,"task":"t""#, keys));
        assert!(!has_key(br#""a":{"task":"t"},"b":["task",{"task":1}]"#, keys));
        assert!(!has_key(br#""a":"\"task\":","b":"task""#, keys), "in strings");
        assert!(has_key(br#""a":"\\","task":2"#, keys), "after an escaped backslash");
        assert!(!has_key(br#""tasks":1,"x_task":2"#, keys));
        let args = json!({"call_id": "c", "tool": "t", "effect": "read_only",
                          "args": {"type": "object", "task": "nested"}});
        let call = codec::body_from_value(EventType::ToolCall, args).expect("a body");
        let line =
            append_line(Some(1), "t", &[call], false, AppendOptions::default(), AckMode::Every);
        assert!(line.expect("no error").is_some(), "nested keys are the body's own");
    }

    #[test]
    fn an_opaque_body_is_not_sent() {
        let opaque = Body::Opaque(crate::harness::event::Opaque {
            tag: 0x7777,
            schema: 1,
            encoding: codec::ENCODING_JSON,
            bytes: b"{}".to_vec(),
        });
        let line =
            append_line(Some(1), "t", &[opaque], false, AppendOptions::default(), AckMode::Every);
        assert!(matches!(line, Err(ClientError::Protocol { .. })));
    }

    #[test]
    fn digits() {
        for value in [0, 7, 10, 99, 12_345, u64::MAX] {
            assert_eq!(itoa_u64(value, &mut [0; 20]), value.to_string().as_bytes());
        }
    }

    #[test]
    fn a_head_reads_the_keys_of_a_written_reply() {
        let head =
            Head::parse(br#"{"id":3,"seq":9,"task":"t","revision":4,"covers":2}"#).expect("a head");
        assert!(head.is_plain() && !head.is_error());
        assert_eq!((head.seq, head.revision, head.covers), (Some(9), Some(4), Some(2)));
        assert_eq!(head.id(), Some(&Value::from(3)));
        let error =
            Head::parse(br#"{"id":3,"error":"INVALID_EVENT","message":"m"}"#).expect("a head");
        assert!(error.is_error() && !error.is_plain());
        let duplicate =
            Head::parse(br#"{"id":3,"seq":9,"revision":4,"duplicate":true,"call_id":"c"}"#)
                .expect("a head");
        assert!(!duplicate.is_plain());
        let null_error = Head::parse(br#"{"id":3,"error":null}"#).expect("a head");
        assert!(null_error.is_error(), "a key is there whatever its value");
        assert!(Head::parse(b"[3,9,4,null,null,null]").is_err(), "an array is no reply");
        assert!(Head::parse(br#"{"id":3,"seq":"9","revision":4}"#).is_err());
    }
}
