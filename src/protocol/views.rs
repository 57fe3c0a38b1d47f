//! The JSON views of stored facts that every door prints the same way: an event as one
//! object (the shape of `factlog dump --json` and `factlog export`), and one task's state
//! (the shape of `factlog state --task T --json`).

use serde_json::{Map, Value};

use crate::harness::codec;
use crate::harness::{Event, TaskState};

/// The envelope keys of an event object, in order; `schema` only with `with_schema`.
pub const EVENT_ENVELOPE_KEYS: [&str; 6] =
    ["seq", "task", "revision", "timestamp_us", "type", "schema"];

/// The key of the task id in a task's state object.
const TASK_KEY: &str = "task";
/// Where `TaskState::task` goes in a task's state object, since `"task"` holds the id.
const FACTS_KEY: &str = "facts";

/// `{"seq","task","revision","timestamp_us","type",..body}`. A body field named like an
/// envelope key is kept as `body.NAME`; a body that is not an object (an opaque event's)
/// goes under `body`. With `with_schema` the body schema version follows `type` as `schema`.
#[must_use]
pub fn event_object(event: &Event, with_schema: bool) -> Map<String, Value> {
    let keys = &EVENT_ENVELOPE_KEYS;
    let envelope = if with_schema { &keys[..] } else { &keys[..5] };
    let mut object = Map::new();
    object.insert(keys[0].to_owned(), Value::from(event.seq.0));
    object.insert(keys[1].to_owned(), Value::from(event.task.as_str()));
    object.insert(keys[2].to_owned(), Value::from(event.revision));
    object.insert(keys[3].to_owned(), Value::from(event.timestamp_us));
    object.insert(keys[4].to_owned(), Value::from(event.body.type_name()));
    if with_schema {
        object.insert(keys[5].to_owned(), Value::from(event.schema));
    }
    match codec::body_to_value(&event.body) {
        Value::Object(fields) => {
            for (key, value) in fields {
                let key =
                    if envelope.contains(&key.as_str()) { format!("body.{key}") } else { key };
                object.insert(key, value);
            }
        }
        other => {
            object.insert("body".to_owned(), other);
        }
    }
    object
}

/// The task's state object with `"task": id` first. `TaskState` has a field `task` of its
/// own (goal, risk, phase, plan, todos): it moves to `"facts"`, in its place.
///
/// # Errors
///
/// When the state cannot be serialised (a map key that is not a string).
pub fn task_state_object(id: &str, task: &TaskState) -> serde_json::Result<Map<String, Value>> {
    let value = serde_json::to_value(task)?;
    let mut object = Map::new();
    object.insert(TASK_KEY.to_owned(), Value::from(id));
    if let Value::Object(fields) = value {
        for (key, field) in fields {
            let key = if key == TASK_KEY { FACTS_KEY.to_owned() } else { key };
            object.insert(key, field);
        }
    }
    Ok(object)
}
