//! Replies (`format-spec/protocol.md`, "Replies"): the written, duplicate and error objects,
//! their key order, and the stable code of every [`ErrorKind`] with whether it ends a stream.
//!
//! A reply is a JSON object (`serde_json::Map`, which keeps insertion order): the request's
//! `id` first when it had one, then the keys of its kind in the order the spec lists them.

use std::io::{self, Write};

use serde_json::{Map, Value, json};

use crate::Durability;
use crate::error::{Error, ErrorKind};
use crate::harness::secret_shapes::Finding;
use crate::protocol::request::KEY_ID;

/// The key of a reply's warnings about unmarked credential-shaped values.
pub const KEY_WARNINGS: &str = "warnings";
/// The key of an error reply's code.
pub const KEY_ERROR: &str = "error";
/// The key of an error reply's message.
pub const KEY_MESSAGE: &str = "message";

/// The reply to one request, and what became of it.
#[derive(Debug)]
pub enum Reply {
    /// The event was appended and met `durability` (what the append waited for). The reply
    /// ends with `"warnings"` when the body held unmarked credential-shaped values.
    Written {
        /// The reply object.
        reply: Map<String, Value>,
        /// What the append waited for.
        durability: Durability,
    },
    /// A `tool/call` whose request already has a result: nothing was written.
    Duplicate {
        /// The reply object (`"duplicate": true`, the first result's `call_id` and `receipt`).
        reply: Map<String, Value>,
    },
    /// The request was refused and nothing was written; the stream goes on.
    Refused {
        /// The error reply object.
        reply: Map<String, Value>,
    },
    /// The store can take no more events (its code ends the stream); nothing was written.
    Fatal {
        /// The error reply object.
        reply: Map<String, Value>,
        /// The error's message, for a door's diagnostics.
        message: String,
        /// The store is damaged or holds data this build refuses
        /// ([`Error::is_damaged_or_refused_data`]), rather than failing to write.
        damaged: bool,
    },
}

impl Reply {
    /// The reply to a failed append: [`Reply::Fatal`] when its code ends the stream, else
    /// [`Reply::Refused`].
    #[must_use]
    pub fn from_error(error: &Error, id: Option<Value>) -> Reply {
        let reply = error_reply(error, id);
        if error_code(error.kind()).1 {
            Reply::Fatal {
                reply,
                message: error.to_string(),
                damaged: error.is_damaged_or_refused_data(),
            }
        } else {
            Reply::Refused { reply }
        }
    }

    /// An `INVALID_EVENT` refusal whose message is `what` (which must not quote the input).
    #[must_use]
    pub fn from_refusal_message(id: Option<Value>, what: &str) -> Reply {
        crate::protocol::Refusal::line(id, what).into_reply()
    }

    /// The reply object.
    #[must_use]
    pub fn object(&self) -> &Map<String, Value> {
        match self {
            Reply::Written { reply, .. }
            | Reply::Duplicate { reply }
            | Reply::Refused { reply }
            | Reply::Fatal { reply, .. } => reply,
        }
    }

    /// The request's id, as the reply names it (`None` when it has none).
    #[must_use]
    pub fn id(&self) -> Option<Value> {
        self.object().get(KEY_ID).cloned()
    }

    /// The reply object, taken.
    #[must_use]
    pub fn into_object(self) -> Map<String, Value> {
        match self {
            Reply::Written { reply, .. }
            | Reply::Duplicate { reply }
            | Reply::Refused { reply }
            | Reply::Fatal { reply, .. } => reply,
        }
    }

    /// Whether this is an error reply (refused or fatal).
    #[must_use]
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Refused { .. } | Reply::Fatal { .. })
    }
}

/// A new reply object, holding the request's `id` first when it had one.
#[must_use]
pub fn with_id(id: Option<Value>) -> Map<String, Value> {
    let mut reply = Map::new();
    if let Some(id) = id {
        reply.insert(KEY_ID.to_owned(), id);
    }
    reply
}

/// Writes one reply line: the object's JSON and a newline (every door's replies).
///
/// # Errors
///
/// Writing to `output` failed.
pub fn write_line(output: &mut impl Write, reply: &Map<String, Value>) -> io::Result<()> {
    serde_json::to_writer(&mut *output, reply).map_err(io::Error::from)?;
    output.write_all(b"\n")
}

/// The key of a written reply's durability.
pub const KEY_DURABILITY: &str = "durability";

/// A written reply's durability for an append of the replicated tier.
pub const REPLICATED: &str = "replicated";

/// The written reply: `id`, `seq`, `task`, `revision`, `durability`.
#[must_use]
pub fn written(
    id: Option<Value>,
    seq: u64,
    task: &str,
    revision: u64,
    durability: Durability,
) -> Map<String, Value> {
    let mut reply = with_id(id);
    reply.insert("seq".to_owned(), json!(seq));
    reply.insert("task".to_owned(), json!(task));
    reply.insert("revision".to_owned(), json!(revision));
    reply.insert(KEY_DURABILITY.to_owned(), json!(durability.as_str()));
    reply
}

/// The duplicate reply: the written keys of the first result (always `"synced"`: the result
/// repeated is durable), then `"duplicate": true`, `call_id` and `receipt` (`null` if none).
#[must_use]
pub fn duplicate(
    id: Option<Value>,
    result_seq: u64,
    task: &str,
    revision: u64,
    call_id: &str,
    receipt: Option<Value>,
) -> Map<String, Value> {
    let mut reply = written(id, result_seq, task, revision, Durability::Synced);
    reply.insert("duplicate".to_owned(), json!(true));
    reply.insert("call_id".to_owned(), json!(call_id));
    reply.insert("receipt".to_owned(), receipt.unwrap_or(Value::Null));
    reply
}

/// The `warnings` of a reply: one object per credential-shaped value found.
#[must_use]
pub fn warnings(findings: &[Finding]) -> Value {
    findings
        .iter()
        .map(|f| json!({ "path": f.path, "shape": f.shape, "message": f.warning() }))
        .collect()
}

/// An error reply object with its code and message, without extra keys.
#[must_use]
pub fn error_object(id: Option<Value>, code: &str, message: &str) -> Map<String, Value> {
    let mut reply = with_id(id);
    reply.insert(KEY_ERROR.to_owned(), json!(code));
    reply.insert(KEY_MESSAGE.to_owned(), json!(message));
    reply
}

/// The error reply of `error`: its code, its message and the extra keys of its code.
#[must_use]
pub fn error_reply(error: &Error, id: Option<Value>) -> Map<String, Value> {
    let mut reply = error_object(id, error_code(error.kind()).0, &error.to_string());
    match error.kind() {
        ErrorKind::StaleRevision { expected, actual, .. } => {
            reply.insert("expected".to_owned(), json!(expected));
            reply.insert("actual".to_owned(), json!(actual));
        }
        ErrorKind::NeedsRecovery { task, calls } => {
            reply.insert("task".to_owned(), json!(task));
            reply.insert(
                "calls".to_owned(),
                calls
                    .iter()
                    .map(|c| json!({ "call_id": c.call_id, "tool": c.tool, "plan": c.plan }))
                    .collect(),
            );
        }
        ErrorKind::UnmarkedSecret { task, path, shape, .. } => {
            reply.insert("task".to_owned(), json!(task));
            reply.insert("path".to_owned(), json!(path));
            reply.insert("shape".to_owned(), json!(shape));
        }
        ErrorKind::Reclaimed { requested, first_available } => {
            reply.insert("requested".to_owned(), json!(requested));
            reply.insert("first_available".to_owned(), json!(first_available));
        }
        ErrorKind::NotReplicated { seq, .. } => {
            reply.insert("seq".to_owned(), json!(seq));
        }
        ErrorKind::CallIdReused { task, call_id, earlier_seq, tool, args_digest } => {
            reply.insert("task".to_owned(), json!(task));
            reply.insert("call_id".to_owned(), json!(call_id));
            reply.insert(
                "earlier".to_owned(),
                json!({ "seq": earlier_seq, "tool": tool, "args_digest": args_digest }),
            );
        }
        _ => {}
    }
    reply
}

/// Every code [`error_code`] can return, in the order of the spec's table.
pub const ERROR_CODES: [&str; 24] = [
    "INVALID_EVENT",
    "STALE_REVISION",
    "NEEDS_CONFIRMATION",
    "APPROVAL_REFUSED",
    "NEEDS_RECOVERY",
    "CALL_ID_REUSED",
    "UNMARKED_SECRET",
    "LIMIT_EXCEEDED",
    "RECLAIMED",
    "NOT_REPLICATED",
    "IO",
    "DISK_FULL",
    "POISONED",
    "READ_ONLY",
    "LOCKED",
    "CORRUPTION",
    "TORN_TAIL",
    "UNSUPPORTED_VERSION",
    "NOT_A_LOG",
    "INVALID_OPTIONS",
    "CORRUPT_EVENT",
    "CANNOT_UPCAST",
    "CORRUPT_SNAPSHOT",
    "ERROR",
];

/// Whether an error reply's `code` ends the stream (`format-spec/protocol.md`, the table of
/// codes): `IO` and every code after it in [`ERROR_CODES`], and a code this version does not
/// know.
#[must_use]
pub fn code_ends_stream(code: &str) -> bool {
    let first_fatal = ERROR_CODES.iter().position(|c| *c == "IO").unwrap_or(0);
    ERROR_CODES.iter().position(|c| *c == code).is_none_or(|at| at >= first_fatal)
}

/// Whether an error reply's `code` says the store is damaged or holds data this build
/// refuses (the codes of [`Error::is_damaged_or_refused_data`]): `factlog emit` exits 3.
#[must_use]
pub fn code_is_damage(code: &str) -> bool {
    matches!(
        code,
        "CORRUPTION"
            | "UNSUPPORTED_VERSION"
            | "CORRUPT_EVENT"
            | "CORRUPT_SNAPSHOT"
            | "CANNOT_UPCAST"
    )
}

/// The stable upper-snake code of an error (`format-spec/protocol.md`, the table of
/// codes), and whether the store can take no more events (the stream ends).
#[must_use]
pub fn error_code(kind: &ErrorKind) -> (&'static str, bool) {
    match kind {
        ErrorKind::StaleRevision { .. } => ("STALE_REVISION", false),
        ErrorKind::InvalidEvent { .. } => ("INVALID_EVENT", false),
        ErrorKind::NeedsConfirmation { .. } => ("NEEDS_CONFIRMATION", false),
        ErrorKind::ApprovalRefused { .. } => ("APPROVAL_REFUSED", false),
        ErrorKind::NeedsRecovery { .. } => ("NEEDS_RECOVERY", false),
        ErrorKind::CallIdReused { .. } => ("CALL_ID_REUSED", false),
        ErrorKind::UnmarkedSecret { .. } => ("UNMARKED_SECRET", false),
        ErrorKind::LimitExceeded { .. } => ("LIMIT_EXCEEDED", false),
        // Only a read asks for reclaimed records; the store itself is whole.
        ErrorKind::Reclaimed { .. } => ("RECLAIMED", false),
        // Written and synced in the store (or, with seq 0, not written): the store goes on.
        ErrorKind::NotReplicated { .. } => ("NOT_REPLICATED", false),
        ErrorKind::Io { .. } => ("IO", true),
        ErrorKind::DiskFull { .. } => ("DISK_FULL", true),
        ErrorKind::Poisoned { .. } => ("POISONED", true),
        ErrorKind::ReadOnly => ("READ_ONLY", true),
        ErrorKind::Locked { .. } => ("LOCKED", true),
        ErrorKind::Corruption { .. } => ("CORRUPTION", true),
        ErrorKind::TornTail { .. } => ("TORN_TAIL", true),
        ErrorKind::UnsupportedVersion { .. } => ("UNSUPPORTED_VERSION", true),
        ErrorKind::NotALog { .. } => ("NOT_A_LOG", true),
        ErrorKind::InvalidOptions { .. } => ("INVALID_OPTIONS", true),
        ErrorKind::CorruptEvent { .. } => ("CORRUPT_EVENT", true),
        ErrorKind::CannotUpcast { .. } => ("CANNOT_UPCAST", true),
        ErrorKind::CorruptSnapshot { .. } => ("CORRUPT_SNAPSHOT", true),
        // A kind added to the library later: stop rather than guess it is harmless.
        _ => ("ERROR", true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed() {
        let kinds = [
            ErrorKind::ReadOnly,
            ErrorKind::InvalidOptions { reason: String::new() },
            ErrorKind::MigrationRefused { reason: String::new() },
        ];
        for kind in &kinds {
            assert!(ERROR_CODES.contains(&error_code(kind).0));
        }
    }
}
