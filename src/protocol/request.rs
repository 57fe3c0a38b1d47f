//! Requests (`format-spec/protocol.md`, "Requests"): one JSON object whose envelope keys
//! (`id`, `task`, `type`, `expected_revision`, `durability`) say what to do and whose other
//! keys are the body of the event type, read as `format-spec/events.md` specifies.
//!
//! A refused request is a [`Refusal`]: it keeps the request's `id` when one was read, so that
//! the reply echoes it, and its message never quotes the input.

use std::fmt;

use serde_json::{Map, Value};

use crate::error::{Error, ErrorKind};
use crate::harness::codec;
use crate::harness::upcast::{self, ToolResultV1};
use crate::harness::{Body, EventType};
use crate::protocol::reply::{self, Reply};
use crate::{AppendOptions, Durability};

/// The envelope key echoed in the reply and never stored.
pub const KEY_ID: &str = "id";
/// The envelope key naming the task.
pub const KEY_TASK: &str = "task";
/// The envelope key naming the event type.
pub const KEY_TYPE: &str = "type";
/// The envelope key of a compare-and-set on the task's revision.
pub const KEY_EXPECTED_REVISION: &str = "expected_revision";
/// The envelope key of the durability to wait for.
pub const KEY_DURABILITY: &str = "durability";

/// One parsed request: the envelope and the typed body.
#[derive(Debug, Clone)]
pub struct Request {
    /// The client's `id` (a JSON string or number), echoed in the reply; never stored.
    pub id: Option<Value>,
    /// The task id, as given (the store checks its bounds when it takes the task).
    pub task: String,
    /// The event's typed body.
    pub body: Body,
    /// `expected_revision` and `durability`.
    pub options: AppendOptions,
}

/// Why a request was refused before anything was appended: an `INVALID_EVENT` (or
/// `LIMIT_EXCEEDED`) reply, with the request's `id` when it was read.
#[derive(Debug)]
pub struct Refusal {
    /// The request's `id`, if it was read before the refusal.
    pub id: Option<Value>,
    /// What is wrong.
    pub reason: RefusalReason,
}

/// What is wrong with a refused request.
#[derive(Debug)]
pub enum RefusalReason {
    /// The line or its envelope is malformed; the message says which key and never quotes
    /// the input.
    Line(String),
    /// The library refused the body (an unknown field, a mistyped value, a limit).
    Library(Error),
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalReason::Line(what) => write!(
                f,
                "{what}; nothing was written (each line is one JSON object with \"task\", \
                 \"type\" and the body fields of that type: see format-spec/events.md)"
            ),
            RefusalReason::Library(error) => write!(f, "{error}"),
        }
    }
}

impl Refusal {
    /// A refusal of the line or its envelope, saying `what` is wrong.
    #[must_use]
    pub fn line(id: Option<Value>, what: impl Into<String>) -> Refusal {
        Refusal { id, reason: RefusalReason::Line(what.into()) }
    }

    /// The error reply to this refusal.
    #[must_use]
    pub fn into_reply(self) -> Reply {
        match self.reason {
            RefusalReason::Line(_) => {
                let message = self.reason.to_string();
                Reply::Refused { reply: reply::error_object(self.id, "INVALID_EVENT", &message) }
            }
            RefusalReason::Library(error) => Reply::from_error(&error, self.id),
        }
    }
}

impl Request {
    /// Parses one request line (one JSON object, without its newline).
    ///
    /// # Errors
    ///
    /// A [`Refusal`] when the line is not JSON, not an object, or its envelope or body is
    /// not valid; it holds the `id` when that was read.
    pub fn parse(line: &[u8]) -> Result<Request, Refusal> {
        Request::from_object(parse_object(line)?)
    }

    /// Reads a request from a JSON object already parsed (a door whose client sends
    /// structured values, such as a Python dict): the same rules as [`Request::parse`].
    ///
    /// # Errors
    ///
    /// As [`Request::parse`].
    pub fn from_object(mut object: Map<String, Value>) -> Result<Request, Refusal> {
        let id = match object.shift_remove(KEY_ID) {
            None => None,
            Some(value @ (Value::String(_) | Value::Number(_))) => Some(value),
            Some(_) => return Err(Refusal::line(None, "\"id\" must be a string or a number")),
        };
        let refuse = |what: &str| Refusal::line(id.clone(), what);
        let task = match object.shift_remove(KEY_TASK) {
            Some(Value::String(task)) if !task.is_empty() => task,
            Some(_) => return Err(refuse("\"task\" must be a non-empty string")),
            None => return Err(refuse("\"task\" is missing")),
        };
        let type_name = match object.shift_remove(KEY_TYPE) {
            Some(Value::String(name)) => name,
            Some(_) => return Err(refuse("\"type\" must be a string")),
            None => return Err(refuse("\"type\" is missing")),
        };
        let Some(event_type) = EventType::from_name(&type_name) else {
            let known: Vec<&str> = EventType::ALL.iter().map(|t| t.name()).collect();
            return Err(refuse(&format!(
                "unknown event type {type_name:?} (known: {})",
                known.join(", ")
            )));
        };
        let (durability, replicated) =
            durability(object.shift_remove(KEY_DURABILITY)).map_err(&refuse)?;
        let options = AppendOptions {
            expected_revision: expected_revision(object.shift_remove(KEY_EXPECTED_REVISION))
                .map_err(&refuse)?,
            durability,
            replicated,
        };
        let body = body(event_type, object)
            .map_err(|error| Refusal { id: id.clone(), reason: RefusalReason::Library(error) })?;
        Ok(Request { id, task, body, options })
    }
}

/// Parses one line as a JSON object, the first step of [`Request::parse`]: a door that reads
/// other requests besides appends (the served store's read requests) looks at the object
/// before it becomes a [`Request`].
///
/// # Errors
///
/// A [`Refusal`] (`INVALID_EVENT`, no `id`) when the line is not JSON or not an object.
pub fn parse_object(line: &[u8]) -> Result<Map<String, Value>, Refusal> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|error| Refusal::line(None, format!("the line is not valid JSON ({error})")))?;
    match value {
        Value::Object(object) => Ok(object),
        _ => Err(Refusal::line(None, "the line is not a JSON object")),
    }
}

pub(crate) fn expected_revision(value: Option<Value>) -> Result<Option<u64>, &'static str> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) if number.as_u64().is_some() => Ok(number.as_u64()),
        Some(_) => Err("\"expected_revision\" must be a non-negative integer"),
    }
}

/// The `durability` of a request: a tier, and whether it is `replicated` (synced, then held
/// by the store's replica; `format-spec/replication.md`, "Replicated appends").
pub(crate) fn durability(value: Option<Value>) -> Result<(Option<Durability>, bool), &'static str> {
    const BAD: &str =
        "\"durability\" must be \"buffered\", \"flushed\", \"synced\" or \"replicated\"";
    match value {
        None | Some(Value::Null) => Ok((None, false)),
        Some(Value::String(name)) => match name.as_str() {
            "buffered" => Ok((Some(Durability::Buffered), false)),
            "flushed" => Ok((Some(Durability::Flushed), false)),
            "synced" => Ok((Some(Durability::Synced), false)),
            "replicated" => Ok((Some(Durability::Synced), true)),
            _ => Err(BAD),
        },
        Some(_) => Err(BAD),
    }
}

/// The typed body of `event_type` from the remaining keys of the request. A `tool/result`
/// without `outcome` is read in schema 1 (`status`) and upcast, so that scripts written for
/// schema 1 keep working; one the upcast refuses is an invalid event.
fn body(event_type: EventType, fields: Map<String, Value>) -> Result<Body, Error> {
    let invalid = |reason: String| -> Error {
        ErrorKind::InvalidEvent { event_type: event_type.name().to_owned(), reason }.into()
    };
    if event_type == EventType::ToolResult && !fields.contains_key("outcome") {
        let v1: ToolResultV1 = serde_json::from_value(Value::Object(fields))
            .map_err(|error| invalid(format!("{error} (read as schema 1: no \"outcome\")")))?;
        // The refusal's own reason may quote a value of the input: it is not repeated here.
        return upcast::tool_result_1_to_2(v1).map(Body::ToolResult).map_err(|_| {
            invalid(
                "read as schema 1 (no \"outcome\"), it cannot be upcast: a schema-1 \"status\" \
                 must be absent, \"ok\" or \"error\" and an \"error\" field a string; give \
                 \"outcome\": \"ok\" or \"error\" instead"
                    .to_owned(),
            )
        });
    }
    codec::body_from_value(event_type, Value::Object(fields))
        .map_err(|error| invalid(error.to_string()))
}
