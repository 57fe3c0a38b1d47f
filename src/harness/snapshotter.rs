//! The policy snapshot, off the append path: when an append makes a snapshot due
//! ([`StoreOptions::snapshot_every_events`](crate::StoreOptions::snapshot_every_events) and
//! the others), the appending thread only raises a flag; a background thread folds the log and
//! writes the snapshot. An append never waits for a snapshot (with many sessions one took
//! half a second on the appender that happened to make it due).
//!
//! The thread holds the store only weakly, and takes a strong reference only while it writes a
//! snapshot, marked `busy` under the signal's lock. [`Snapshotter::stop_if_last`] waits until
//! it is not busy and, when the caller's handle is then the only one, stops the thread after
//! it has written a snapshot still due, so that [`Store::close`](crate::Store::close) can take
//! the store apart; [`Snapshotter::release_if_last`], called when the last handle is dropped
//! without `close`, ends it without that snapshot, so the store goes away at once on the
//! dropping thread (its directory lock too). Without background threads
//! ([`Options::background_threads`](crate::Options::background_threads)) the store writes the
//! snapshot inline instead, as the deterministic tests need.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::harness::store::Inner;

#[derive(Debug, Default)]
struct State {
    /// A snapshot was asked for and not yet started.
    due: bool,
    /// The thread holds a strong reference to the store (it is writing a snapshot).
    busy: bool,
    /// The thread must end (after a snapshot still due).
    shutdown: bool,
}

#[derive(Debug, Default)]
struct Signal {
    /// Set by the first request since the last snapshot ended: later requests return at
    /// once, without the lock.
    requested: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
}

/// The background thread that writes policy snapshots.
#[derive(Debug)]
pub(crate) struct Snapshotter {
    signal: Arc<Signal>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Snapshotter {
    /// Starts the thread for the store `inner`. A thread that cannot be started leaves the
    /// store without one: it then writes its snapshots inline (`None`).
    pub(crate) fn start(inner: Weak<Inner>) -> Option<Snapshotter> {
        let signal = Arc::new(Signal::default());
        let for_thread = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name("factlog-snapshot".to_owned())
            .spawn(move || run(&for_thread, &inner))
            .ok()?;
        Some(Snapshotter { signal, thread: Mutex::new(Some(thread)) })
    }

    /// Asks for a snapshot. Cheap when one was already asked for: one atomic swap.
    pub(crate) fn request(&self) {
        if self.signal.requested.swap(true, Ordering::AcqRel) {
            return;
        }
        self.signal.state.lock().due = true;
        self.signal.changed.notify_all();
    }

    /// Stops the thread when `inner` is the last handle on the store, once a snapshot still
    /// due is written; returns whether it did (the caller may then take the store apart).
    pub(crate) fn stop_if_last(&self, inner: &Arc<Inner>) -> bool {
        let mut state = self.signal.state.lock();
        while state.busy {
            self.signal.changed.wait(&mut state);
        }
        // Not busy: the thread holds no strong reference, and it takes one only under this
        // lock, so the count is the callers' alone.
        if Arc::strong_count(inner) != 1 {
            return false;
        }
        state.shutdown = true;
        drop(state);
        self.signal.changed.notify_all();
        self.join();
        true
    }

    /// Called by the last [`Store`](crate::Store) handle dropped without `close` (`Store`'s
    /// `Drop` counts the handles): waits for a snapshot being written and tells the thread to
    /// end without writing one still due (the store is being dropped, not closed). The thread
    /// never takes the store again, so the store goes away with the last reference to it, on a
    /// thread that drops a handle (a reference held a moment longer by another handle being
    /// dropped at the same time is let go on that handle's thread).
    pub(crate) fn release(&self) {
        let mut state = self.signal.state.lock();
        while state.busy {
            self.signal.changed.wait(&mut state);
        }
        state.due = false;
        state.shutdown = true;
        drop(state);
        self.signal.changed.notify_all();
    }

    fn join(&self) {
        let Some(thread) = self.thread.lock().take() else { return };
        if thread.thread().id() == std::thread::current().id() {
            // The last reference went away on the snapshot thread itself: it sees `shutdown`
            // and ends by itself.
            return;
        }
        // A panic on the thread has nothing left to report: its snapshot error, if any, is
        // already recorded.
        let _ = thread.join();
    }
}

impl Drop for Snapshotter {
    fn drop(&mut self) {
        self.signal.state.lock().shutdown = true;
        self.signal.changed.notify_all();
        self.join();
    }
}

fn run(signal: &Signal, inner: &Weak<Inner>) {
    loop {
        let mut state = signal.state.lock();
        while !state.due && !state.shutdown {
            signal.changed.wait(&mut state);
        }
        if !state.due {
            return;
        }
        state.due = false;
        let Some(store) = inner.upgrade() else { return };
        state.busy = true;
        drop(state);
        let busy = Busy { signal, store: Some(store) };
        let Some(store) = busy.store.as_ref() else { return };
        let written = store.write_policy_snapshot(true);
        // Requests from here on go through; the ones made while it was written were
        // swallowed: if a snapshot is due again (the appends went on, or a turn ended), it
        // is written next, also when the store is closing.
        signal.requested.store(false, Ordering::Release);
        let again = written && store.snapshot_due(store.log.last_seq().map_or(0, |s| s.0));
        if again {
            signal.state.lock().due = true;
        }
        drop(busy);
    }
}

/// The thread's reference to the store while it writes a snapshot: when dropped, also if
/// writing the snapshot panicked, the reference goes first, then `busy` is cleared: `close`
/// and the last drop, which wait for it, then find the store no longer held by the thread.
struct Busy<'a> {
    signal: &'a Signal,
    store: Option<Arc<Inner>>,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.store = None;
        self.signal.state.lock().busy = false;
        self.signal.changed.notify_all();
    }
}
