//! The request/reply protocol of `format-spec/protocol.md` (version 1), as a library: every
//! door to a [`Store`] (the `factlog emit` command, the Python package) parses requests and
//! builds replies with this module, so they enforce the same rules and give the same answers.
//!
//! - [`request`] turns a JSON line (or an already parsed JSON object) into a [`Request`]: the
//!   envelope keys (`id`, `task`, `type`, `expected_revision`, `durability`) and the typed
//!   body, or a [`Refusal`] that says why not.
//! - [`reply`] holds the reply objects (written, duplicate, error) and [`error_code`], the
//!   stable code of each [`crate::ErrorKind`] and whether it ends a stream.
//! - [`op`] holds [`Op`], the operations of a served store's socket (`revision`, `events`,
//!   `batch`, ...), with their typed replies: the server matches on it, the client builds it.
//! - [`pages`] builds the pages of events every door reads (`events`, the long poll of
//!   `follow`).
//! - [`views`] holds the JSON objects of an event and of the folded state that every door
//!   prints alike; [`time`] the RFC 3339 form of their timestamps.
//! - [`handle_line`] and [`execute`] run a request against a store: take the task over (the
//!   holder rules of `format-spec/harness-recovery.md`, "Holders"), append, and answer.
//!
//! - [`acks`] holds the rules of acknowledging only what became durable (`emit --ack
//!   durable-only`, a socket connection's `"acks":"durable-only"`), for every door.
//!
//! Stream rules that belong to one door only (blank lines, line length) stay with that
//! door. Nothing here prints a body value: no message quotes
//! the input, which may hold a secret.
//!
//! ```
//! use factlog::protocol::{self, Reply};
//! use factlog::{Store, StoreOptions};
//!
//! # fn main() -> factlog::Result<()> {
//! let dir = tempfile::tempdir().expect("temporary directory");
//! let store = Store::open(dir.path(), StoreOptions::new())?;
//! let reply = protocol::handle_line(&store, br#"{"id":"r1","task":"t1","type":"turn/start"}"#);
//! let Reply::Written { reply, .. } = reply else { panic!("not written") };
//! assert_eq!(
//!     serde_json::to_string(&reply).expect("json"),
//!     r#"{"id":"r1","seq":1,"task":"t1","revision":1,"durability":"buffered"}"#
//! );
//! let reply = protocol::handle_line(&store, br#"{"task":"t1","type":"no/such"}"#);
//! assert_eq!(reply.object()["error"], "INVALID_EVENT");
//! store.close()?;
//! # Ok(())
//! # }
//! ```

pub mod acks;
pub mod delta_line;
pub mod op;
pub mod pages;
pub mod reply;
pub mod request;
pub mod session;
pub mod time;
pub mod views;

pub use op::{Op, OpRequest};
pub use reply::{Reply, error_code, error_reply};
pub use request::{Refusal, Request};

use serde_json::{Map, Value};

use crate::error::Error;
use crate::harness::event::AssistantDelta;
use crate::harness::secret_shapes;
use crate::harness::{Body, EventType};
use crate::{AppendOptions, Appended, Durability, Store, Task};

/// The protocol version this module implements (`format-spec/protocol.md`, "Versioning").
pub const PROTOCOL_VERSION: u32 = 1;

/// Parses one request line and runs it against `store`: the one call a line-based door
/// needs. The line is one JSON object without its newline; blank lines are the door's to
/// skip (they get no reply).
#[must_use]
pub fn handle_line(store: &Store, line: &[u8]) -> Reply {
    let request = match Request::parse(line) {
        Ok(request) => request,
        Err(refusal) => return refusal.into_reply(),
    };
    execute(store, request, line_may_hold_credential(line))
}

/// Whether the body of a request line may hold a credential-shaped value, so that
/// [`execute`] must scan it (its `scan`). The line's own text tells, in one pass: only then
/// is the body encoded once more to find where. An escape could spell a prefix in the line
/// that the pass does not see, so a line with one is always looked at; so is a `record/blob`,
/// whose bytes are base64 on the line.
#[must_use]
pub fn line_may_hold_credential(line: &[u8]) -> bool {
    line.contains(&b'\\')
        || secret_shapes::json_may_hold_credential(line)
        || memchr::memmem::find(line, b"record/blob").is_some()
}

/// Runs a parsed request: takes its task (over, if an earlier holder wrote it), appends its
/// event and builds the reply. With `scan`, the body is searched for unmarked
/// credential-shaped values to warn about (`format-spec/protocol.md`, "Warnings"); a caller
/// that cannot tell cheaply whether a body may hold one passes `true`.
#[must_use]
pub fn execute(store: &Store, request: Request, scan: bool) -> Reply {
    let id = request.id.clone();
    match store.client_task(&request.task).and_then(|task| append(&task, request, scan)) {
        Ok(reply) => reply,
        Err(error) => Reply::from_error(&error, id),
    }
}

/// Runs a parsed request on a task handle the door already holds (a [`Store::task`] of the
/// request's task): as [`execute`] without looking the task up again. A request naming
/// another task is refused.
#[must_use]
pub fn execute_on(task: &Task, request: Request, scan: bool) -> Reply {
    if task.id().as_str() != request.task {
        return Reply::from_refusal_message(
            request.id,
            "\"task\" names another task than the handle it is appended through",
        );
    }
    let id = request.id.clone();
    append(task, request, scan).unwrap_or_else(|error| Reply::from_error(&error, id))
}

/// Appends the request's event on `task` (which must be the request's task); an
/// `assistant/delta` without options takes the hot path ([`Task::delta`]).
fn append(task: &Task, request: Request, scan: bool) -> Result<Reply, Error> {
    let Request { id, task: task_id, body, options } = request;
    let hot_path = options.expected_revision.is_none()
        && matches!(options.durability, None | Some(Durability::Buffered));
    // What the append waits for: what was asked, or the type's default (a weaker one for a
    // high-risk type is refused by the library).
    let durability = options.durability.unwrap_or_else(|| {
        body.event_type().map_or(Durability::Synced, EventType::default_durability)
    });
    match body {
        Body::AssistantDelta(AssistantDelta { text }) if hot_path => {
            let (seq, revision) = task.delta_revision(&text)?;
            let reply = reply::written(id, seq.0, &task_id, revision, Durability::Buffered);
            Ok(Reply::Written { reply, durability: Durability::Buffered })
        }
        body => {
            // Values shaped like credentials and not marked as secrets: the store refuses
            // them when told to; otherwise the reply warns.
            let replicated = options.replicated;
            let (outcome, findings) = if scan {
                task.append_batch_warned(vec![body], options)?
            } else {
                (task.append_with(body, options)?, Vec::new())
            };
            Ok(appended(id, &task_id, outcome, durability, replicated, &findings))
        }
    }
}

/// The reply to what an append did; `replicated` when the request asked for the replicated
/// tier (the append returned only once the replica held it), which the reply says.
fn appended(
    id: Option<Value>,
    task: &str,
    appended: Appended,
    durability: Durability,
    replicated: bool,
    findings: &[secret_shapes::Finding],
) -> Reply {
    match appended {
        Appended::Written { seq, revision } => {
            let mut reply = reply::written(id, seq.0, task, revision, durability);
            if replicated {
                reply.insert(reply::KEY_DURABILITY.to_owned(), Value::from(reply::REPLICATED));
            }
            if !findings.is_empty() {
                reply.insert(reply::KEY_WARNINGS.to_owned(), reply::warnings(findings));
            }
            Reply::Written { reply, durability }
        }
        Appended::Duplicate { call_id, receipt, result_seq, revision } => Reply::Duplicate {
            reply: reply::duplicate(id, result_seq.0, task, revision, call_id.as_str(), receipt),
        },
    }
}

/// Appends the events of `requests` on `task` as one atomic batch
/// ([`Task::append_batch_with`]): all of them are written or none is. Each request is the
/// object of one protocol line (its `task`, when present, must be `task`'s id); the batch's
/// `expected_revision` and `durability` are given once, in `options`, and each request's own
/// must be absent. The reply is a written reply whose `seq` is the first event's,
/// `revision` the task's after the last, and `durability` what the batch waited for (the
/// strongest of its events), followed by `"count"`, the number of events. A batch cannot
/// hold a duplicate dispatch (send it alone to get its receipt). With `scan`, the bodies are
/// searched for unmarked credential-shaped values to warn about, as in [`execute`].
#[must_use]
pub fn execute_batch(
    task: &Task,
    requests: Vec<Request>,
    options: AppendOptions,
    scan: bool,
) -> Reply {
    let task_id = task.id().as_str().to_owned();
    let mut bodies = Vec::with_capacity(requests.len());
    let mut default = Durability::Buffered;
    for request in requests {
        if let Some(error) = batch_member_error(&task_id, &request) {
            return error;
        }
        if let Some(event_type) = request.body.event_type() {
            default = default.max(event_type.default_durability());
        } else {
            default = Durability::Synced;
        }
        bodies.push(request.body);
    }
    if bodies.is_empty() {
        return Reply::from_refusal_message(None, "a batch holds at least one event");
    }
    let count = bodies.len();
    let durability = options.durability.unwrap_or(default);
    let appended_batch = if scan {
        task.append_batch_warned(bodies, options)
    } else {
        task.append_batch_with(bodies, options).map(|outcome| (outcome, Vec::new()))
    };
    match appended_batch {
        Ok((outcome, findings)) => {
            let replicated = options.replicated;
            let mut reply = appended(None, &task_id, outcome, durability, replicated, &findings);
            if let Reply::Written { reply, .. } = &mut reply {
                reply.insert("count".to_owned(), Value::from(count));
            }
            reply
        }
        Err(error) => Reply::from_error(&error, None),
    }
}

/// Why one request cannot be a member of a batch, if it cannot.
fn batch_member_error(task: &str, request: &Request) -> Option<Reply> {
    if request.task != task {
        return Some(Reply::from_refusal_message(
            None,
            "every event of a batch belongs to the task it is appended to",
        ));
    }
    if request.options != AppendOptions::default() {
        return Some(Reply::from_refusal_message(
            None,
            "\"expected_revision\" and \"durability\" are given once for a whole batch, not per \
             event",
        ));
    }
    None
}

/// Sets the envelope of a request object a binding builds from an event and a call's
/// arguments: `task` (the handle's), and `expected_revision` and `durability` when given, each
/// through [`set_envelope_key`] (a value the event already holds otherwise is refused).
///
/// # Errors
///
/// The `INVALID_EVENT` reply of a conflicting key.
pub fn set_envelope(
    object: &mut Map<String, Value>,
    task: &str,
    expected_revision: Option<u64>,
    durability: Option<&str>,
) -> Result<(), Reply> {
    let mut set =
        |key: &str, value: Value| set_envelope_key(object, key, value).map_err(Refusal::into_reply);
    set(request::KEY_TASK, Value::from(task))?;
    if let Some(revision) = expected_revision {
        set(request::KEY_EXPECTED_REVISION, Value::from(revision))?;
    }
    if let Some(durability) = durability {
        set(request::KEY_DURABILITY, Value::from(durability))?;
    }
    Ok(())
}

/// Inserts `key: value` into a request object being built by a door that receives the
/// envelope apart from the body (a Python call's keyword arguments): a key the object holds
/// already with another value is refused, so that no door silently prefers one of two.
///
/// # Errors
///
/// A [`Refusal`] (`INVALID_EVENT`) naming the key.
pub fn set_envelope_key(
    object: &mut Map<String, Value>,
    key: &str,
    value: Value,
) -> Result<(), Refusal> {
    if let Some(refusal) = envelope_conflict(object, key, &value) {
        return Err(refusal);
    }
    object.insert(key.to_owned(), value);
    Ok(())
}

/// The refusal of a request object that holds `key` already with another value than
/// `value` (the check of [`set_envelope_key`], without inserting).
#[must_use]
pub fn envelope_conflict(object: &Map<String, Value>, key: &str, value: &Value) -> Option<Refusal> {
    match object.get(key) {
        Some(existing) if existing != value => {
            Some(Refusal::line(None, format!("{key:?} is given twice with different values")))
        }
        _ => None,
    }
}
