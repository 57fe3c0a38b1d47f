//! The JSON views of stored facts that every door prints the same way: an event as one
//! object (a line of `factlog dump --json`, `tail --json` and `export`;
//! `format-spec/schema/dump-line.json` and `export-line.json`), and the folded state
//! (`factlog state --json`, `format-spec/schema/state.json`).
//!
//! Every microsecond timestamp a view holds is followed by the same instant in RFC 3339
//! ([`time::format_rfc3339`]): `timestamp_us` by `time`, and a field `NAME_us` holding one
//! (an approval's `expires_at_us`) by `NAME`.

use serde_json::{Map, Value};

use crate::harness::codec;
use crate::harness::{Body, Event, State, TaskState};
use crate::protocol::time;

/// The envelope keys of an event object, in order; `schema` only with `with_schema`.
pub const EVENT_ENVELOPE_KEYS: [&str; 7] =
    ["seq", "task", "revision", "timestamp_us", "time", "type", "schema"];

/// The prefix that keeps a body field named like an envelope key apart from it.
const BODY_PREFIX: &str = "body.";

/// The fields holding a microsecond timestamp that get an RFC 3339 sibling, with its name.
const TIMESTAMP_FIELDS: [(&str, &str); 1] = [("expires_at_us", "expires_at")];

/// `{"seq","task","revision","timestamp_us","time","type",..body}`. A body field whose name
/// is taken (an envelope key, or an earlier field's escaped name) is kept as `body.NAME`,
/// prefixed again until the name is free, so no value is ever lost; a body that is not an
/// object (an opaque event's) goes under `body`. With `with_schema` the body schema version
/// follows `type` as `schema`. A body's `expires_at_us` is followed by `expires_at`.
#[must_use]
pub fn event_object(event: &Event, with_schema: bool) -> Map<String, Value> {
    let keys = &EVENT_ENVELOPE_KEYS;
    let mut object = Map::new();
    object.insert(keys[0].to_owned(), Value::from(event.seq.0));
    object.insert(keys[1].to_owned(), Value::from(event.task.as_str()));
    object.insert(keys[2].to_owned(), Value::from(event.revision));
    object.insert(keys[3].to_owned(), Value::from(event.timestamp_us));
    object.insert(keys[4].to_owned(), Value::from(time::format_rfc3339(event.timestamp_us)));
    object.insert(keys[5].to_owned(), Value::from(event.body.type_name()));
    if with_schema {
        object.insert(keys[6].to_owned(), Value::from(event.schema));
    }
    match body_value(&event.body) {
        Value::Object(fields) => {
            for (key, value) in fields {
                let mut key = key;
                while object.contains_key(&key) {
                    key.insert_str(0, BODY_PREFIX);
                }
                object.insert(key, value);
            }
        }
        other => {
            let mut key = "body".to_owned();
            while object.contains_key(&key) {
                key.insert_str(0, BODY_PREFIX);
            }
            object.insert(key, other);
        }
    }
    object
}

/// The JSON of an event's body, a `NAME_us` timestamp field followed by its RFC 3339 `NAME`
/// (the body of a `dump` text line, and of [`event_object`]).
#[must_use]
pub fn body_value(body: &Body) -> Value {
    let mut value = codec::body_to_value(body);
    if let Value::Object(fields) = &mut value {
        add_rfc3339_siblings(fields);
    }
    value
}

/// `{"last_seq":N,"tasks":{ID: task}}`, each task as [`task_state_value`] gives it.
///
/// # Errors
///
/// When the state cannot be serialised (a map key that is not a string).
pub fn state_value(state: &State) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(state)?;
    if let Some(Value::Object(tasks)) = value.get_mut("tasks") {
        for task in tasks.values_mut() {
            annotate_task(task);
        }
    }
    Ok(value)
}

/// One task's folded state: the library's serialisation of [`TaskState`], each approval's
/// `expires_at_us` followed by its RFC 3339 `expires_at` (`state.json`, `$defs/task`).
///
/// # Errors
///
/// When the state cannot be serialised (a map key that is not a string).
pub fn task_state_value(task: &TaskState) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(task)?;
    annotate_task(&mut value);
    Ok(value)
}

/// A task of the operator's list: the line of `factlog tasks --json`
/// (`format-spec/schema/tasks-line.json`): `task`, `phase`, `revision`, `last_seq`,
/// `last_time` (RFC 3339, `null` when not known) and `attention`, each item as
/// [`crate::harness::operator::Attention::to_json`] gives it.
#[must_use]
pub fn task_summary_value(summary: &crate::harness::operator::TaskSummary) -> Value {
    serde_json::json!({
        "task": summary.task,
        "phase": summary.phase,
        "revision": summary.revision,
        "last_seq": summary.last_seq,
        "last_time": rfc3339_or_null(summary.last_time_us),
        "attention": summary.attention.iter().map(|a| a.to_json()).collect::<Vec<_>>(),
    })
}

/// RFC 3339 text for a timestamp, `null` for 0 (not known).
fn rfc3339_or_null(timestamp_us: u64) -> Value {
    if timestamp_us == 0 { Value::Null } else { Value::from(time::format_rfc3339(timestamp_us)) }
}

fn annotate_task(task: &mut Value) {
    if let Value::Object(fields) = task
        && let Some(us) = fields.get("last_time_us").and_then(Value::as_u64)
    {
        let mut annotated = Map::new();
        for (key, field) in std::mem::take(fields) {
            let is_time = key == "last_time_us";
            annotated.insert(key, field);
            if is_time {
                annotated.insert("last_time".to_owned(), rfc3339_or_null(us));
            }
        }
        *fields = annotated;
    }
    if let Some(Value::Object(approvals)) = task.pointer_mut("/control/approvals") {
        for approval in approvals.values_mut() {
            if let Value::Object(fields) = approval {
                add_rfc3339_siblings(fields);
            }
        }
    }
}

/// Inserts `NAME: RFC 3339` right after each numeric `NAME_us` of [`TIMESTAMP_FIELDS`]
/// (unless a field `NAME` is already there).
fn add_rfc3339_siblings(fields: &mut Map<String, Value>) {
    let has_timestamp = TIMESTAMP_FIELDS.iter().any(|(name, sibling)| {
        fields.get(*name).is_some_and(Value::is_u64) && !fields.contains_key(*sibling)
    });
    if !has_timestamp {
        return;
    }
    let mut annotated = Map::new();
    for (key, field) in std::mem::take(fields) {
        let sibling = TIMESTAMP_FIELDS
            .iter()
            .find(|(name, _)| *name == key)
            .and_then(|(_, sibling)| field.as_u64().map(|us| (*sibling, us)));
        annotated.insert(key, field);
        if let Some((sibling, us)) = sibling {
            annotated.insert(sibling.to_owned(), Value::from(time::format_rfc3339(us)));
        }
    }
    *fields = annotated;
}
