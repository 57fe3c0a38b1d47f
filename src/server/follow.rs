//! The `follow` request of a served store (`format-spec/server.md`): a long-poll read.
//!
//! `{"op":"follow","from_seq","task","limit","timeout_ms"}` is answered exactly as `events`
//! is (the page is built by the `events` code itself, passed in as `page`), except that a page
//! with no event is not sent at once: the connection waits until an event at or after the
//! page's `next_seq` is appended, builds the page again from there, and answers as soon as a
//! page holds an event, or with the last (empty) page once `timeout_ms` passed or the server
//! is stopping. With `task`, events of other tasks wake the wait but are skipped, and the
//! empty page's `next_seq` moves past them.
//!
//! The wait is [`crate::Log::wait_appended`]: it holds no lock of the store and sleeps on a
//! condition variable that every append notifies (no polling interval: the wake-up latency is
//! the scheduler's), and [`super::Server::stop`] wakes it ([`Holds::stopping`]).

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::limits::SERVER_FOLLOW_TIMEOUT_MS_MAX;
use crate::protocol::Reply;
use crate::{Seq, Store};

use super::conn::Holds;

/// The key of a `follow` request holding how long to wait, in milliseconds.
pub const KEY_TIMEOUT_MS: &str = "timeout_ms";

/// The key of an `events` (or `follow`) request holding the first seq to read.
const KEY_FROM_SEQ: &str = "from_seq";

/// Answers one `follow` request: `page` builds the `events` reply of a request object (the
/// `follow` request without `timeout_ms`, its `from_seq` moved on as pages come back empty).
pub(super) fn follow(
    store: &Store,
    holds: &dyn Holds,
    id: Option<Value>,
    mut object: Map<String, Value>,
    mut page: impl FnMut(Option<Value>, Map<String, Value>) -> Reply,
) -> Reply {
    let timeout_ms = match object.shift_remove(KEY_TIMEOUT_MS) {
        None | Some(Value::Null) => SERVER_FOLLOW_TIMEOUT_MS_MAX,
        Some(value) => match value.as_u64() {
            Some(ms) if ms <= SERVER_FOLLOW_TIMEOUT_MS_MAX => ms,
            _ => {
                return Reply::from_refusal_message(
                    id,
                    &format!(
                        "\"timeout_ms\" must be an integer from 0 to \
                         {SERVER_FOLLOW_TIMEOUT_MS_MAX} (SERVER_FOLLOW_TIMEOUT_MS_MAX): to wait \
                         longer, follow again from the reply's next_seq"
                    ),
                );
            }
        },
    };
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let stopping = || holds.stopping();
    loop {
        let reply = page(id.clone(), object.clone());
        let Some(next) = empty_page_next(&reply) else { return reply };
        object.insert(KEY_FROM_SEQ.to_owned(), json!(next));
        if !store.log().wait_appended(Seq(next), deadline, &stopping) {
            return reply;
        }
    }
}

/// The `next_seq` of an `events` reply that holds no event; `None` for a page with events
/// or an error reply, which are answered as they are.
fn empty_page_next(reply: &Reply) -> Option<u64> {
    let Reply::Written { reply, .. } = reply else { return None };
    match reply.get("events") {
        Some(Value::Array(events)) if events.is_empty() => {
            reply.get("next_seq").and_then(Value::as_u64)
        }
        _ => None,
    }
}
