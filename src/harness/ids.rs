//! Identifier newtypes of the harness model. None of them is a bare string in a public
//! signature, so a call id cannot be passed where a task id is meant.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, Result};
use crate::limits::TASK_ID_BYTES_MAX;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as a string slice.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> $name {
                $name(s.to_owned())
            }
        }
    };
}

string_id!(
    /// A task (a session or a sub-agent): 1 to [`TASK_ID_BYTES_MAX`] bytes of UTF-8, repeated
    /// in the envelope of each of its events.
    TaskId
);
string_id!(
    /// A tool call, as named by the model or the harness; unique within its task.
    CallId
);
string_id!(
    /// An approval request and the grant or denial that answers it; unique within its task.
    ApprovalId
);
string_id!(
    /// An idempotency key (`format-spec/events.md`, "Request keys"): the same logical request
    /// always has the same key. Derive one with [`crate::harness::request_key::derive`].
    RequestKey
);

impl TaskId {
    /// Checks the task id bounds: not empty, at most [`TASK_ID_BYTES_MAX`] bytes.
    pub fn new(id: &str) -> Result<TaskId> {
        check_task_id(id)?;
        Ok(TaskId(id.to_owned()))
    }
}

/// Checks that `id` may be used as a task id.
pub(crate) fn check_task_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(ErrorKind::InvalidEvent {
            event_type: "any".to_owned(),
            reason: "the task id is empty: give every event a task id of 1 to 128 bytes".to_owned(),
        }
        .into());
    }
    if id.len() > TASK_ID_BYTES_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "task id bytes",
            value: id.len() as u64,
            limit: TASK_ID_BYTES_MAX as u64,
        }
        .into());
    }
    Ok(())
}
