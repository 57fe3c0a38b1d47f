//! Pages of events, as every door reads them: the `events` and `follow` requests of a served
//! store (`format-spec/server.md`) and the event iterators of the bindings build their pages
//! here, so a page read through the socket and one read in process hold the same events in the
//! same shape (`factlog dump --json`), with the same bounds.
//!
//! A page holds at most [`SERVER_EVENTS_PER_REPLY_MAX`] events and stops at the first event
//! that takes its JSON past [`SERVER_REPLY_PAGE_BYTES`]. [`follow`] is the long poll: a page
//! with no event is not returned at once; it waits until an event at or after the page's
//! `next_seq` is appended ([`Store::wait_appended`]: no lock of the store held, no polling
//! interval), builds the page again from there, and returns as soon as a page holds an event,
//! or the last (empty) page once the timeout passed or `stop` says so. With a task, events of
//! other tasks wake the wait but are skipped, and the empty page's `next_seq` moves past them.

use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind};
use crate::limits::{SERVER_EVENTS_PER_REPLY_MAX, SERVER_REPLY_PAGE_BYTES};
use crate::protocol::op::EventsPage;
use crate::protocol::views;
use crate::{Seq, Store};

/// One page of events from `from` (the first the store holds if absent), of `task` only or
/// of all, as `dump --json` prints them, and the seq to read from next. `limit` lowers the
/// page's event bound.
///
/// # Errors
///
/// [`ErrorKind::Reclaimed`] when `from` is before the first record the store holds (a purge
/// or a reclaim removed it: refused, never skipped), and the errors of reading the log.
pub fn events_page(
    store: &Store,
    from: Option<u64>,
    task: Option<&str>,
    limit: Option<u64>,
) -> Result<EventsPage, Error> {
    let from = from.map(|seq| seq.max(1));
    let limit = limit.map_or(SERVER_EVENTS_PER_REPLY_MAX, |limit| {
        usize::try_from(limit).unwrap_or(usize::MAX).clamp(1, SERVER_EVENTS_PER_REPLY_MAX)
    });
    let last = store.log().last_seq().map_or(0, |seq| seq.0);
    let first = store.log().first_seq()?.0;
    let mut next = match from {
        None => first,
        Some(from) if from < first => {
            return Err(ErrorKind::Reclaimed { requested: from, first_available: first }.into());
        }
        Some(from) => from,
    };
    let mut events = Vec::new();
    let mut bytes = 0;
    if next <= last {
        for event in store.events(Seq(next))? {
            let event = event?;
            next = event.seq.0 + 1;
            if task.is_some_and(|task| event.task.as_str() != task) {
                continue;
            }
            let object = views::event_object(&event, false);
            bytes += json_len(&object);
            events.push(object);
            if events.len() >= limit || bytes >= SERVER_REPLY_PAGE_BYTES || next > last {
                break;
            }
        }
    }
    // `last_seq`: where the log ended when this page was read: a reader that wants what
    // existed when it began (as `Store::events` gives) stops there.
    Ok(EventsPage { events, next_seq: next, last_seq: last })
}

/// The length of `value`'s JSON, counted as it is written: no text is kept.
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value).map_or(0, |()| counter.0)
}

/// The long poll of `follow`: the first page from `from` that holds an event, built by
/// `page` (given the seq to start from; [`events_page`] for every door but the tests),
/// waiting up to `timeout` for one to be appended; the last, empty page when `timeout`
/// passed or `stop()` became true (checked at every wake: call [`Store::wake_waiters`] after
/// making it true).
///
/// # Errors
///
/// Those of `page`.
pub fn follow(
    store: &Store,
    mut from: Option<u64>,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
    mut page: impl FnMut(Option<u64>) -> Result<EventsPage, Error>,
) -> Result<EventsPage, Error> {
    let deadline = Instant::now() + timeout;
    loop {
        let reply = page(from)?;
        if !reply.events.is_empty() || stop() {
            return Ok(reply);
        }
        from = Some(reply.next_seq);
        if !store.wait_appended(Seq(reply.next_seq), deadline, stop) {
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
    fn follow_while(store: &Store, stop: &AtomicBool, while_waiting: impl FnOnce()) -> EventsPage {
        let (paged, about_to_wait) = mpsc::channel();
        let timeout = Duration::from_millis(SERVER_FOLLOW_TIMEOUT_MS_MAX);
        std::thread::scope(|scope| {
            let follower = scope.spawn(|| {
                let stopping = || stop.load(Ordering::SeqCst);
                follow(store, Some(1), timeout, &stopping, |from_seq| {
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
        let stop = AtomicBool::new(false);
        let page = follow_while(&store, &stop, || {
            stop.store(true, Ordering::SeqCst);
            store.wake_waiters();
        });
        assert!(page.events.is_empty());
        assert_eq!(page.next_seq, 1);
    }

    #[test]
    fn an_append_wakes_a_waiting_follow() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
        let stop = AtomicBool::new(false);
        let page = follow_while(&store, &stop, || {
            let line = br#"{"task":"t","type":"user/message","text":"hi"}"#;
            assert!(!crate::protocol::handle_line(&store, line).is_error());
        });
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0]["seq"], 1);
        assert_eq!(page.next_seq, 2);
    }

    #[test]
    fn a_page_reads_one_task_and_refuses_what_was_reclaimed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
        for task in ["a", "b", "a"] {
            let line = format!(r#"{{"task":"{task}","type":"user/message","text":"hi"}}"#);
            assert!(!crate::protocol::handle_line(&store, line.as_bytes()).is_error());
        }
        let page = events_page(&store, None, Some("a"), None).expect("page");
        let seqs: Vec<_> = page.events.iter().map(|event| event["seq"].clone()).collect();
        assert_eq!(seqs, [json!(1), json!(3)]);
        assert_eq!((page.next_seq, page.last_seq), (4, 3));
        let limited = events_page(&store, Some(2), None, Some(1)).expect("page");
        assert_eq!(limited.events.len(), 1);
        assert_eq!(limited.next_seq, 3);
        let zero = events_page(&store, Some(1), None, Some(0)).expect("page");
        assert_eq!(zero.events.len(), 1, "a limit of 0 still reads one event");
        let text = serde_json::to_string(&page.events[0]).expect("json");
        assert_eq!(json_len(&page.events[0]), text.len());
    }
}
