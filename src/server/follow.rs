//! The `follow` request of a served store (`format-spec/server.md`): a long-poll read.
//!
//! A `follow` ([`crate::protocol::Op::Follow`], whose keys, `timeout_ms` included, the
//! protocol module reads and checks) is answered exactly as `events` is (the page is built by
//! the `events` code itself, passed in as `page`), except that a page with no event is not
//! sent at once: the connection waits until an event at or after the
//! page's `next_seq` is appended, builds the page again from there, and answers as soon as a
//! page holds an event, or with the last (empty) page once `timeout_ms` passed or the server
//! is stopping. With `task`, events of other tasks wake the wait but are skipped, and the
//! empty page's `next_seq` moves past them.
//!
//! The wait is [`crate::Log::wait_appended`]: it holds no lock of the store and sleeps on a
//! condition variable that every append notifies (no polling interval: the wake-up latency is
//! the scheduler's), and [`super::Server::stop`] wakes it ([`Holds::stopping`]).

use std::time::{Duration, Instant};

use crate::error::Error;
use crate::protocol::op::EventsPage;
use crate::{Seq, Store};

use super::conn::Holds;

/// Answers one `follow` request whose `timeout_ms` was read ([`crate::protocol::Op::Follow`]):
/// `page` builds the `events` page from a `from_seq` (the request's, then moved on as pages
/// come back empty).
pub(super) fn follow(
    store: &Store,
    holds: &dyn Holds,
    mut from_seq: Option<u64>,
    timeout_ms: u64,
    mut page: impl FnMut(Option<u64>) -> Result<EventsPage, Error>,
) -> Result<EventsPage, Error> {
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let stopping = || holds.stopping();
    loop {
        let reply = page(from_seq)?;
        if !reply.events.is_empty() {
            return Ok(reply);
        }
        from_seq = Some(reply.next_seq);
        if !store.log().wait_appended(Seq(reply.next_seq), deadline, &stopping) {
            return Ok(reply);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The wait itself, with a page builder that tells the test when the follow is about to
    //! wait: a stop or an append then ends the wait whether it comes before or after the
    //! sleep begins, so these tests need no clock.

    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    use serde_json::json;

    use super::*;
    use crate::StoreOptions;
    use crate::limits::SERVER_FOLLOW_TIMEOUT_MS_MAX;

    struct Stopping(AtomicBool);

    impl Holds for Stopping {
        fn touch(&self, _task: &str) {}

        fn stopping(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// An `events`-shaped page: the events at or after `from_seq` (as their seqs alone).
    fn page(store: &Store, from_seq: Option<u64>) -> EventsPage {
        let from = from_seq.unwrap_or(1);
        let last = store.log().last_seq().map_or(0, |seq| seq.0);
        let events = (from..=last)
            .map(|seq| {
                let mut event = serde_json::Map::new();
                event.insert("seq".to_owned(), json!(seq));
                event
            })
            .collect();
        EventsPage { events, next_seq: from.max(last + 1), last_seq: last }
    }

    /// Runs a follow with the longest timeout on a thread of its own, calls `while_waiting`
    /// once the follow has built its first page (it is about to wait), and returns its page.
    fn follow_while(store: &Store, holds: &Stopping, while_waiting: impl FnOnce()) -> EventsPage {
        let (paged, about_to_wait) = mpsc::channel();
        std::thread::scope(|scope| {
            let follower = scope.spawn(|| {
                follow(store, holds, Some(1), SERVER_FOLLOW_TIMEOUT_MS_MAX, |from_seq| {
                    let _ = paged.send(());
                    Ok(page(store, from_seq))
                })
            });
            about_to_wait.recv().expect("the first page");
            while_waiting();
            follower.join().expect("the follower").expect("a page")
        })
    }

    #[test]
    fn a_stop_ends_a_waiting_follow_with_its_empty_page() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
        let holds = Stopping(AtomicBool::new(false));
        let page = follow_while(&store, &holds, || {
            holds.0.store(true, Ordering::SeqCst);
            store.log().wake_waiters();
        });
        assert!(page.events.is_empty());
        assert_eq!(page.next_seq, 1);
    }

    #[test]
    fn an_append_wakes_a_waiting_follow() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
        let holds = Stopping(AtomicBool::new(false));
        let page = follow_while(&store, &holds, || {
            let line = br#"{"task":"t","type":"user/message","text":"hi"}"#;
            assert!(!crate::protocol::handle_line(&store, line).is_error());
        });
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0]["seq"], 1);
        assert_eq!(page.next_seq, 2);
    }
}
