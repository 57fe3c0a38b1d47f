//! The operations of a served store's socket (`format-spec/server.md`, "Requests and
//! replies"): every line with an `op` key and no `type` is one [`Op`], which the server
//! matches on and the client builds, so that the two agree at compile time. The schema of
//! these lines is `format-spec/schema/server-line.json`; `tests/protocol_ops.rs` checks every
//! variant against it.
//!
//! Serialising is serde's (`{"op":"revision","task":"t1"}`: the tag first, then the fields
//! in the order of the spec's examples); parsing is [`OpRequest::from_object`], which reads
//! the keys one by one in a fixed order so that a malformed line is refused with the same
//! `INVALID_EVENT` message whatever the order of its keys, and never quotes a value. Keys an
//! operation does not read are ignored, except in a `batch`, which refuses them. Appends
//! (lines with `type`) are not operations: they are [`super::Request`]s, and the bare delta
//! lines of the fast path ([`super::delta_line`]) never build a tree at all.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::limits::SERVER_FOLLOW_TIMEOUT_MS_MAX;
use crate::protocol::request::{
    self, KEY_DURABILITY, KEY_EXPECTED_REVISION, KEY_ID, KEY_TASK, Refusal,
};
use crate::protocol::session::KEY_OP;
use crate::protocol::{Request, envelope_conflict};
use crate::{AppendOptions, Durability};

/// One operation of a served store: a request line with `op` and no `type`. Its `id` is the
/// envelope's ([`OpRequest`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// `{"op":"revision","task"}`: the task's revision (0 before its first event); the reply
    /// is a [`RevisionReply`].
    Revision {
        /// The task.
        task: String,
    },
    /// `{"op":"state","task"}`: the task's folded state; the reply is a [`StateReply`].
    State {
        /// The task.
        task: String,
    },
    /// `{"op":"history","task","from"}`: one page of the task's model-visible history; the
    /// reply is a [`HistoryPage`].
    History {
        /// The task.
        task: String,
        /// The first entry of the page (absent or `null` on the wire: 0).
        from: u64,
    },
    /// `{"op":"events","from_seq","task","limit"}`: one page of events; the reply is an
    /// [`EventsPage`].
    Events {
        /// The first seq to read (0 is read as 1); `None`: the first the store holds.
        #[serde(skip_serializing_if = "Option::is_none")]
        from_seq: Option<u64>,
        /// Only this task's events; `None`: every task's.
        #[serde(skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// At most this many events (at least 1); `None`: the server's maximum.
        #[serde(skip_serializing_if = "Option::is_none")]
        limit: Option<u64>,
    },
    /// `{"op":"follow","from_seq","task","limit","timeout_ms"}`: the page of
    /// [`Op::Events`], waiting up to `timeout_ms` for an event when it would hold none; the
    /// reply is an [`EventsPage`].
    Follow {
        /// As for [`Op::Events`].
        #[serde(skip_serializing_if = "Option::is_none")]
        from_seq: Option<u64>,
        /// As for [`Op::Events`]; sent as `null` when `None`.
        task: Option<String>,
        /// As for [`Op::Events`].
        #[serde(skip_serializing_if = "Option::is_none")]
        limit: Option<u64>,
        /// How long to wait, at most [`SERVER_FOLLOW_TIMEOUT_MS_MAX`] (also the default).
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
    /// `{"op":"tasks","after"}`: one page of the ids of the tasks with events; the reply is
    /// a [`TasksPage`].
    Tasks {
        /// The ids after this one; `None` (sent as `null`): from the first.
        after: Option<String>,
    },
    /// `{"op":"recover","dry_run"}`: `Store::recover` in the serving process (with
    /// `dry_run`, `Store::plan_recovery`); the reply is a [`RecoverReply`].
    Recover {
        /// Plan only (absent or `null` on the wire: `false`).
        dry_run: bool,
    },
    /// `{"op":"checkpoint"}`: `Store::checkpoint` in the serving process; the reply is a
    /// [`CheckpointReply`].
    Checkpoint,
    /// `{"op":"clients"}`: how many clients the server serves now (the asking one included)
    /// and at most; the reply is a [`ClientsReply`].
    Clients,
    /// `{"op":"sync"}`: everything the store holds made durable (`Store::flush` with
    /// [`Durability::Synced`]) in the serving process; the reply is a written reply of its own,
    /// `{"durability":"synced"}`, which under a connection's `"acks":"durable-only"` covers
    /// the lines its buffered replies skipped.
    Sync,
    /// `{"op":"purge","dry_run"}`: `Store::purge` in the serving process (with `dry_run`,
    /// `Store::plan_purge`); the reply is the [`crate::harness::PurgeReport`]'s keys.
    Purge {
        /// Plan only (absent or `null` on the wire: `false`).
        dry_run: bool,
    },
    /// `{"op":"batch","task","events","expected_revision","durability"}`: the events
    /// appended as one atomic batch; the reply is a written reply with `count`.
    Batch {
        /// The task.
        task: String,
        /// The members: request objects (`type` and the body fields) without
        /// `expected_revision` or `durability`; a member's `task`, when present, is `task`.
        /// Their bodies are read when the batch runs ([`batch_requests`]).
        events: Vec<Map<String, Value>>,
        /// A compare-and-set on the task's revision, for the whole batch.
        #[serde(skip_serializing_if = "Option::is_none")]
        expected_revision: Option<u64>,
        /// What the batch waits for; `None`: the strongest default of its events.
        #[serde(skip_serializing_if = "Option::is_none")]
        durability: Option<RequestedDurability>,
    },
}

/// The `durability` a request asks for (`format-spec/protocol.md`, "Requests").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestedDurability {
    /// [`Durability::Buffered`].
    Buffered,
    /// [`Durability::Flushed`].
    Flushed,
    /// [`Durability::Synced`].
    Synced,
    /// [`Durability::Synced`], then held by the store's replica
    /// (`format-spec/replication.md`, "Replicated appends").
    Replicated,
}

impl RequestedDurability {
    /// The durability `options` ask for, as it is sent: `None` when they ask for none.
    #[must_use]
    pub fn of(options: AppendOptions) -> Option<RequestedDurability> {
        if options.replicated {
            return Some(RequestedDurability::Replicated);
        }
        options.durability.map(|durability| match durability {
            Durability::Buffered => RequestedDurability::Buffered,
            Durability::Flushed => RequestedDurability::Flushed,
            Durability::Synced => RequestedDurability::Synced,
        })
    }

    /// The append options of a request asking for `durability` (or none) and
    /// `expected_revision`.
    #[must_use]
    pub fn options(
        durability: Option<RequestedDurability>,
        expected_revision: Option<u64>,
    ) -> AppendOptions {
        let (durability, replicated) = match durability {
            None => (None, false),
            Some(RequestedDurability::Buffered) => (Some(Durability::Buffered), false),
            Some(RequestedDurability::Flushed) => (Some(Durability::Flushed), false),
            Some(RequestedDurability::Synced) => (Some(Durability::Synced), false),
            Some(RequestedDurability::Replicated) => (Some(Durability::Synced), true),
        };
        AppendOptions { expected_revision, durability, replicated }
    }
}

impl Op {
    /// The name of every operation, in the order the refusal of an unknown one lists them.
    pub const NAMES: [&'static str; 12] = [
        "revision",
        "state",
        "history",
        "events",
        "follow",
        "tasks",
        "recover",
        "checkpoint",
        "clients",
        "sync",
        "purge",
        "batch",
    ];

    /// The name of [`Op::Batch`], the one operation that appends events.
    pub const BATCH_NAME: &'static str = "batch";

    /// The operation's name: the value of its `op` key.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Op::Revision { .. } => "revision",
            Op::State { .. } => "state",
            Op::History { .. } => "history",
            Op::Events { .. } => "events",
            Op::Follow { .. } => "follow",
            Op::Tasks { .. } => "tasks",
            Op::Recover { .. } => "recover",
            Op::Checkpoint => "checkpoint",
            Op::Clients => "clients",
            Op::Sync => "sync",
            Op::Purge { .. } => "purge",
            Op::Batch { .. } => Op::BATCH_NAME,
        }
    }

    /// The request object of this operation without an `id`: `op` first, then its fields.
    ///
    /// # Panics
    ///
    /// Never: every field is a string, a number, a boolean or a JSON object.
    #[must_use]
    pub fn to_object(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(object)) => object,
            other => unreachable!("an operation serialises to a JSON object: {other:?}"),
        }
    }

    /// A `batch` of the request objects `events` on `task` with `options`.
    #[must_use]
    pub fn batch(task: &str, events: Vec<Map<String, Value>>, options: AppendOptions) -> Op {
        Op::Batch {
            task: task.to_owned(),
            events,
            expected_revision: options.expected_revision,
            durability: RequestedDurability::of(options),
        }
    }
}

/// An operation request line: the envelope's `id` (echoed first in the reply) and the
/// operation. Serialised as `id` (when given), then the operation's keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpRequest {
    /// The client's `id` (a JSON string or number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    /// The operation.
    #[serde(flatten)]
    pub op: Op,
}

impl<'de> Deserialize<'de> for OpRequest {
    /// Reads a line as [`OpRequest::from_object`] does; its refusal's message is the error.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<OpRequest, D::Error> {
        let object = Map::<String, Value>::deserialize(deserializer)?;
        OpRequest::from_object(object)
            .map_err(|refusal| serde::de::Error::custom(refusal.reason.to_string()))
    }
}

impl OpRequest {
    /// Reads an operation request from a line's object (one with an `op` key and no
    /// `type`; a door checks that first, since a line with `type` is an append).
    ///
    /// The keys are read in a fixed order: `id`, `op`; for a `follow` `timeout_ms`; then
    /// `task` where the operation needs one (an unknown `op` too, so a line without `task`
    /// is refused for that first); then the operation's own keys in the order of the spec.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] (`INVALID_EVENT`) naming the first key that is wrong, or the unknown
    /// `op` with the known ones; it holds the `id` once that was read.
    pub fn from_object(mut object: Map<String, Value>) -> Result<OpRequest, Refusal> {
        let id = match object.shift_remove(KEY_ID) {
            None => None,
            Some(value @ (Value::String(_) | Value::Number(_))) => Some(value),
            Some(_) => return Err(Refusal::line(None, "\"id\" must be a string or a number")),
        };
        let refuse = |what: &str| Refusal::line(id.clone(), what);
        let Some(Value::String(name)) = object.shift_remove(KEY_OP) else {
            return Err(refuse("\"op\" must be a string"));
        };
        let op = match name.as_str() {
            "events" => {
                let (from_seq, task, limit) = page_keys(&object).map_err(&refuse)?;
                Op::Events { from_seq, task, limit }
            }
            "follow" => {
                let timeout_ms =
                    timeout_ms(object.get("timeout_ms")).map_err(|what| refuse(&what))?;
                let (from_seq, task, limit) = page_keys(&object).map_err(&refuse)?;
                Op::Follow { from_seq, task, limit, timeout_ms }
            }
            "tasks" => match object.get("after") {
                None | Some(Value::Null) => Op::Tasks { after: None },
                Some(Value::String(after)) => Op::Tasks { after: Some(after.clone()) },
                Some(_) => return Err(refuse("\"after\" must be a task id or null")),
            },
            "recover" => Op::Recover { dry_run: dry_run(object.get("dry_run")).map_err(&refuse)? },
            "checkpoint" => Op::Checkpoint,
            "clients" => Op::Clients,
            "sync" => Op::Sync,
            "purge" => Op::Purge { dry_run: dry_run(object.get("dry_run")).map_err(&refuse)? },
            _ => {
                let task = match object.shift_remove(KEY_TASK) {
                    Some(Value::String(task)) if !task.is_empty() => task,
                    Some(_) => return Err(refuse("\"task\" must be a non-empty string")),
                    None => return Err(refuse("\"task\" is missing")),
                };
                match name.as_str() {
                    "revision" => Op::Revision { task },
                    "state" => Op::State { task },
                    "history" => {
                        let from = match object.get("from") {
                            None | Some(Value::Null) => 0,
                            Some(value) => value
                                .as_u64()
                                .ok_or_else(|| refuse("\"from\" must be a non-negative integer"))?,
                        };
                        Op::History { task, from }
                    }
                    Op::BATCH_NAME => return batch(id, task, object),
                    _ => return Err(refuse(&unknown_op(&name))),
                }
            }
        };
        Ok(OpRequest { id, op })
    }

    /// The request object: `id` first (when given), then the operation's keys.
    #[must_use]
    pub fn to_object(&self) -> Map<String, Value> {
        let mut object = Map::new();
        if let Some(id) = &self.id {
            object.insert(KEY_ID.to_owned(), id.clone());
        }
        object.extend(self.op.to_object());
        object
    }
}

/// The refusal message of an unknown `op`: it names the op (never another value) and lists
/// the known ones.
fn unknown_op(name: &str) -> String {
    let known: Vec<String> = Op::NAMES.iter().map(|name| format!("{name:?}")).collect();
    format!("unknown \"op\" {name:?} (known: {}; an append has \"type\" instead)", known.join(", "))
}

/// `from_seq`, `task` and `limit` of an `events` or `follow` request, read in that order.
type PageKeys = (Option<u64>, Option<String>, Option<u64>);

fn page_keys(object: &Map<String, Value>) -> Result<PageKeys, &'static str> {
    let from_seq = match object.get("from_seq") {
        None | Some(Value::Null) => None,
        Some(value) => Some(value.as_u64().ok_or("\"from_seq\" must be a positive integer")?),
    };
    let limit = match object.get("limit") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(limit) if limit >= 1 => Some(limit),
            _ => return Err("\"limit\" must be a positive integer"),
        },
    };
    let task = match object.get(KEY_TASK) {
        None | Some(Value::Null) => None,
        Some(Value::String(task)) if !task.is_empty() => Some(task.clone()),
        Some(_) => return Err("\"task\" must be a non-empty string or null"),
    };
    Ok((from_seq, task, limit))
}

fn timeout_ms(value: Option<&Value>) -> Result<Option<u64>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(ms) if ms <= SERVER_FOLLOW_TIMEOUT_MS_MAX => Ok(Some(ms)),
            _ => Err(format!(
                "\"timeout_ms\" must be an integer from 0 to {SERVER_FOLLOW_TIMEOUT_MS_MAX} \
                 (SERVER_FOLLOW_TIMEOUT_MS_MAX): to wait longer, follow again from the reply's \
                 next_seq"
            )),
        },
    }
}

fn dry_run(value: Option<&Value>) -> Result<bool, &'static str> {
    match value {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(dry_run)) => Ok(*dry_run),
        Some(_) => Err("\"dry_run\" must be true or false"),
    }
}

/// The rest of a `batch` request, after its `task`: the options, `events`, no other key,
/// and members that are objects whose `task`, if any, is the batch's.
fn batch(
    id: Option<Value>,
    task: String,
    mut object: Map<String, Value>,
) -> Result<OpRequest, Refusal> {
    let refuse = |what: &str| Refusal::line(id.clone(), what);
    let expected_revision = request::expected_revision(object.shift_remove(KEY_EXPECTED_REVISION));
    let durability = request::durability(object.shift_remove(KEY_DURABILITY));
    let (expected_revision, (durability, replicated)) = match (expected_revision, durability) {
        (Ok(expected_revision), Ok(durability)) => (expected_revision, durability),
        (Err(what), _) | (_, Err(what)) => return Err(refuse(what)),
    };
    let options = AppendOptions { expected_revision, durability, replicated };
    let Some(Value::Array(values)) = object.shift_remove("events") else {
        return Err(refuse("\"events\" must be an array of event objects"));
    };
    if let Some(key) = object.keys().next() {
        return Err(refuse(&format!("a batch request has no key {key:?}")));
    }
    let task_value = Value::String(task.clone());
    let mut events = Vec::with_capacity(values.len().min(crate::limits::EVENT_BATCH_MAX));
    for value in values {
        // A member refused here is refused only after every member before it was read, as
        // the batch reads them when it runs: the first bad member is the one named.
        let refusal = match value {
            Value::Object(event) => match envelope_conflict(&event, KEY_TASK, &task_value) {
                None => {
                    events.push(event);
                    continue;
                }
                Some(refusal) => refusal,
            },
            _ => Refusal::line(None, "every member of \"events\" is a JSON object"),
        };
        let reason = match batch_requests(&task, events) {
            Err(earlier) => earlier.reason,
            Ok(_) => refusal.reason,
        };
        return Err(Refusal { id, reason });
    }
    let op = Op::batch(&task, events, options);
    Ok(OpRequest { id, op })
}

/// The requests of a batch's members ([`Op::Batch`]) on `task`, in order: each member read
/// as a request line, its `task` set to the batch's.
///
/// # Errors
///
/// The [`Refusal`] of the first member that is not a valid request (without an `id`: the
/// door gives the batch's).
pub fn batch_requests(
    task: &str,
    events: Vec<Map<String, Value>>,
) -> Result<Vec<Request>, Refusal> {
    let task_value = Value::String(task.to_owned());
    let mut requests = Vec::with_capacity(events.len());
    for mut event in events {
        if let Some(refusal) = envelope_conflict(&event, KEY_TASK, &task_value) {
            return Err(refusal);
        }
        event.entry(KEY_TASK).or_insert_with(|| task_value.clone());
        requests.push(Request::from_object(event)?);
    }
    Ok(requests)
}

/// The reply to `revision`, after the `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionReply {
    /// The task.
    pub task: String,
    /// Its revision, 0 before its first event.
    pub revision: u64,
}

/// The reply to `state`, after the `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateReply {
    /// The task.
    pub task: String,
    /// Its folded state as [`super::views::task_state_value`] prints it, `null` before its
    /// first event.
    pub state: Value,
}

/// The reply to `events` and `follow`, after the `id`: one page of events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsPage {
    /// The events, as `factlog dump --json` prints them.
    pub events: Vec<Map<String, Value>>,
    /// The seq to ask from for the next page.
    pub next_seq: u64,
    /// The last seq the log held when the page was read (0 for an empty log).
    pub last_seq: u64,
}

/// The reply to `history`, after the `id`: one page of the task's model-visible history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryPage {
    /// The task.
    pub task: String,
    /// The entries, as `factlog history --json` prints them.
    pub entries: Vec<Value>,
    /// The entry to ask from next; `None` (`null`) after the last.
    pub next: Option<u64>,
}

/// The reply to `tasks`, after the `id`: one page of task ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TasksPage {
    /// The ids of the tasks that have events, sorted.
    pub tasks: Vec<String>,
    /// The `after` of the next page; `None` (`null`) after the last.
    pub next: Option<String>,
}

/// The reply to `recover`, after the `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoverReply {
    /// The report of `factlog recover --json`.
    pub report: crate::harness::recovery::RecoveryReport,
}

/// The reply to `checkpoint`, after the `id`: the keys of `factlog checkpoint --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointReply {
    /// The snapshot file written.
    pub path: String,
    /// The last seq it covers.
    pub covered_seq: u64,
}

/// The reply to `clients`, after the `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientsReply {
    /// The connections the server serves now, the asking one included.
    pub clients: u64,
    /// The most it serves at once (`ServeOptions::clients_max`).
    pub clients_max: u64,
}

/// The reply to `sync`, after the `id`: what it made durable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncReply {
    /// Always `"synced"`.
    pub durability: String,
}

/// Why a reply object could not be read as its operation's typed reply.
pub type ReplyError = serde_json::Error;

/// A reply object (its `id` and any key a later version adds are ignored) read as the typed
/// reply `T` of its operation.
///
/// # Errors
///
/// When a key of `T` is missing or mistyped.
pub fn read_reply<T: for<'de> Deserialize<'de>>(
    reply: Map<String, Value>,
) -> Result<T, ReplyError> {
    serde_json::from_value(Value::Object(reply))
}

/// The reply object of a typed reply: `id` first (when given), then the reply's keys.
///
/// # Errors
///
/// When `reply` does not serialise to a JSON object.
pub fn reply_object<T: Serialize>(
    id: Option<Value>,
    reply: &T,
) -> Result<Map<String, Value>, ReplyError> {
    let mut object = super::reply::with_id(id);
    match serde_json::to_value(reply)? {
        Value::Object(keys) => object.extend(keys),
        _ => return Err(serde::ser::Error::custom("a reply is a JSON object")),
    }
    Ok(object)
}
