//! A client's failure as the error reply a door raises: the bindings (Python, Node) turn
//! every failed call into the exception (or `FactlogError`) of a protocol error code, and a
//! failure of the socket itself has no reply of the server's. [`ClientError::into_reply`]
//! gives it one, with the codes `format-spec/protocol.md` lists for a client
//! (`DISCONNECTED`, `NOT_SERVED`, `BAD_REPLY`, `TIMED_OUT`, `PIPELINED_REFUSED`), so every
//! binding raises the same error for the same failure.

use serde_json::{Map, Value};

use super::ClientError;
use crate::error::{Error, ErrorKind};
use crate::protocol::reply::{error_object, error_reply};
use crate::protocol::request::KEY_ID;

impl ClientError {
    /// This failure as an error reply object (`{"error": CODE, "message": ..., ...}`).
    /// `task` names the task of an append, for the message of a stale revision (the same
    /// message as the embedded store's); `own_id` keeps the `id` of a refusal's reply (the
    /// caller gave it; otherwise it is the client's own and is removed).
    #[must_use]
    pub fn into_reply(self, task: Option<&str>, own_id: bool) -> Map<String, Value> {
        match self {
            ClientError::Refused { mut reply, .. } => {
                if !own_id {
                    reply.shift_remove(KEY_ID);
                }
                reply
            }
            ClientError::StaleRevision { expected, actual } => error_reply(
                &Error::from(ErrorKind::StaleRevision {
                    task: task.unwrap_or_default().to_owned(),
                    expected,
                    actual,
                }),
                None,
            ),
            // A pipelined fragment refused before the request that returned it: a code of its
            // own (the request itself ran: a caller must not take it for that request's
            // refusal), with the fragment's reply as `refused` and the request's as
            // `request_reply`.
            ClientError::PipelinedRefused { ref reply, ref request_reply, .. } => {
                let mut object = error_object(None, "PIPELINED_REFUSED", &self.to_string());
                object.insert("refused".to_owned(), Value::Object((**reply).clone()));
                object.insert("request_reply".to_owned(), Value::Object((**request_reply).clone()));
                object
            }
            // A server of another protocol version is not damage of this store.
            ClientError::Handshake { code, message } if code == "UNSUPPORTED_VERSION" => {
                error_object(None, "BAD_REPLY", &message)
            }
            ClientError::Handshake { code, message } => error_object(None, &code, &message),
            ClientError::Connect { .. } => error_object(None, "NOT_SERVED", &self.to_string()),
            ClientError::Disconnected { .. } => {
                error_object(None, "DISCONNECTED", &self.to_string())
            }
            ClientError::Protocol { .. } => error_object(None, "BAD_REPLY", &self.to_string()),
            ClientError::TimedOut { .. } => error_object(None, "TIMED_OUT", &self.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_stale_revision_names_its_task_and_a_lost_server_is_disconnected() {
        let stale =
            ClientError::StaleRevision { expected: 3, actual: 5 }.into_reply(Some("t1"), false);
        assert_eq!(stale["error"], "STALE_REVISION");
        assert_eq!((stale["expected"].as_u64(), stale["actual"].as_u64()), (Some(3), Some(5)));
        assert!(stale["message"].as_str().is_some_and(|m| m.contains("t1")));
        let gone = ClientError::Disconnected { path: PathBuf::from("s"), detail: "eof".into() };
        assert_eq!(gone.into_reply(None, false)["error"], "DISCONNECTED");
    }

    #[test]
    fn a_refusal_keeps_the_id_only_when_the_caller_gave_it() {
        let mut reply = error_object(Some(Value::from(7)), "INVALID_EVENT", "bad");
        reply.insert("extra".to_owned(), Value::from(1));
        let refused = |reply: &Map<String, Value>| ClientError::Refused {
            code: "INVALID_EVENT".into(),
            message: "bad".into(),
            reply: reply.clone(),
        };
        assert!(!refused(&reply).into_reply(None, false).contains_key("id"));
        assert_eq!(refused(&reply).into_reply(None, true)["id"], 7);
    }
}
