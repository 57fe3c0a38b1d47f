//! Waiting for the log to grow: a thread blocks until a record at or after a sequence number
//! is appended, a deadline passes, or it is asked to stop. A served store's `follow` request
//! (`format-spec/server.md`) waits here.
//!
//! The writer calls [`SeqWatch::appended`] after each advance of its appended seq. That costs
//! the append path one atomic load while nobody waits; with waiters it also takes this
//! watch's own mutex (never a lock of the writer) to wake them all. A waiter holds no lock of
//! the log while it sleeps, and it never spins: it sleeps on a condition variable until woken
//! or until its deadline, so an append wakes it within the scheduler's wake-up latency
//! (microseconds), not after a polling interval.
//!
//! No wake-up is lost: a waiter registers (`waiters`, `SeqCst`) before it checks the seq
//! under the mutex, and the writer publishes the seq (`SeqCst`) before it reads `waiters`.
//! Either the writer sees the waiter and notifies it under the mutex, after the waiter began
//! to sleep or before it checked, or the waiter's check sees the new seq.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// Threads waiting for a sequence number, and how to wake them.
#[derive(Debug, Default)]
pub(crate) struct SeqWatch {
    waiters: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

impl SeqWatch {
    /// Called after the watched seq advanced (published with `SeqCst`): wakes the waiters,
    /// if any.
    pub(crate) fn appended(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.wake_all();
        }
    }

    /// Wakes every waiter, to check its condition and its stop again.
    pub(crate) fn wake_all(&self) {
        // Taking the mutex orders this wake after a waiter's check-then-sleep.
        drop(self.lock.lock());
        self.wake.notify_all();
    }

    /// Blocks until `reached()` is true (returns true), or until `deadline` passes or
    /// `stop()` is true (returns `reached()` then). Both are checked before the first sleep
    /// and after every wake-up; `reached` must read its seq with `SeqCst`.
    pub(crate) fn wait(
        &self,
        reached: impl Fn() -> bool,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
    ) -> bool {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.lock.lock();
        let reached_it = loop {
            if reached() {
                break true;
            }
            if stop() || self.wake.wait_until(&mut guard, deadline).timed_out() {
                break reached();
            }
        };
        drop(guard);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        reached_it
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::time::Duration;

    #[test]
    fn a_waiter_wakes_at_the_seq_and_not_before() {
        let watch = Arc::new(SeqWatch::default());
        let seq = Arc::new(AtomicU64::new(0));
        let (w, s) = (Arc::clone(&watch), Arc::clone(&seq));
        let waiter = std::thread::spawn(move || {
            let far = Instant::now() + Duration::from_secs(600);
            w.wait(|| s.load(Ordering::SeqCst) >= 3, far, &|| false)
        });
        for next in 1..=3 {
            seq.store(next, Ordering::SeqCst);
            watch.appended();
        }
        assert!(waiter.join().expect("the waiter"));
    }

    #[test]
    fn a_deadline_or_a_stop_ends_the_wait_unreached() {
        let watch = SeqWatch::default();
        assert!(!watch.wait(|| false, Instant::now(), &|| false));
        let watch = Arc::new(watch);
        let stop = Arc::new(AtomicBool::new(false));
        let (w, s) = (Arc::clone(&watch), Arc::clone(&stop));
        let waiter = std::thread::spawn(move || {
            let far = Instant::now() + Duration::from_secs(600);
            w.wait(|| false, far, &|| s.load(Ordering::SeqCst))
        });
        stop.store(true, Ordering::SeqCst);
        watch.wake_all();
        assert!(!waiter.join().expect("the waiter"));
        assert_eq!(watch.waiters.load(Ordering::SeqCst), 0);
    }
}
