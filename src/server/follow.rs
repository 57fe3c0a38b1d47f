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

#[cfg(test)]
mod tests {
    //! The wait itself, with a page builder that tells the test when the follow is about to
    //! wait: a stop or an append then ends the wait whether it comes before or after the
    //! sleep begins, so these tests need no clock.

    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    use super::*;
    use crate::StoreOptions;
    use crate::protocol::reply::with_id;

    struct Stopping(AtomicBool);

    impl Holds for Stopping {
        fn touch(&self, _task: &str) {}

        fn stopping(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// An `events`-shaped page: the events at or after `from_seq` (as seqs), and `next_seq`.
    fn page(store: &Store, object: &Map<String, Value>) -> Reply {
        let from = object.get(KEY_FROM_SEQ).and_then(Value::as_u64).unwrap_or(1);
        let last = store.log().last_seq().map_or(0, |seq| seq.0);
        let events: Vec<Value> = (from..=last).map(|seq| json!(seq)).collect();
        let mut reply = with_id(None);
        reply.insert("events".to_owned(), Value::Array(events));
        reply.insert("next_seq".to_owned(), json!(from.max(last + 1)));
        Reply::Written { reply, durability: crate::Durability::Buffered }
    }

    fn request(timeout_ms: u64) -> Map<String, Value> {
        let Value::Object(object) = json!({"from_seq": 1, "timeout_ms": timeout_ms}) else {
            unreachable!("an object")
        };
        object
    }

    /// Runs a follow with the longest timeout on a thread of its own, calls `while_waiting`
    /// once the follow has built its first page (it is about to wait), and returns its reply.
    fn follow_while(store: &Store, holds: &Stopping, while_waiting: impl FnOnce()) -> Reply {
        let (paged, about_to_wait) = mpsc::channel();
        std::thread::scope(|scope| {
            let follower = scope.spawn(|| {
                follow(store, holds, None, request(SERVER_FOLLOW_TIMEOUT_MS_MAX), |_, object| {
                    let _ = paged.send(());
                    page(store, &object)
                })
            });
            about_to_wait.recv().expect("the first page");
            while_waiting();
            follower.join().expect("the follower")
        })
    }

    #[test]
    fn a_stop_ends_a_waiting_follow_with_its_empty_page() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
        let holds = Stopping(AtomicBool::new(false));
        let reply = follow_while(&store, &holds, || {
            holds.0.store(true, Ordering::SeqCst);
            store.log().wake_waiters();
        });
        assert_eq!(reply.object()["events"], json!([]));
        assert_eq!(reply.object()["next_seq"], 1);
    }

    #[test]
    fn an_append_wakes_a_waiting_follow() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
        let holds = Stopping(AtomicBool::new(false));
        let reply = follow_while(&store, &holds, || {
            let line = br#"{"task":"t","type":"user/message","text":"hi"}"#;
            assert!(!crate::protocol::handle_line(&store, line).is_error());
        });
        assert_eq!(reply.object()["events"], json!([1]));
        assert_eq!(reply.object()["next_seq"], 2);
    }

    #[test]
    fn a_timeout_out_of_bounds_is_refused_before_any_page() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
        let holds = Stopping(AtomicBool::new(false));
        for timeout in [json!(SERVER_FOLLOW_TIMEOUT_MS_MAX + 1), json!(-1), json!("1")] {
            let mut object = request(0);
            object.insert(KEY_TIMEOUT_MS.to_owned(), timeout);
            let reply = follow(&store, &holds, Some(json!(7)), object, |_, _| {
                unreachable!("no page is built for a refused request")
            });
            assert_eq!(reply.object()["error"], "INVALID_EVENT");
            assert_eq!(reply.object()["id"], 7);
        }
    }
}
