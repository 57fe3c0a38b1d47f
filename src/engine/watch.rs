//! Waiting for the log to grow: a thread blocks until a record at or after a sequence number
//! is appended, a deadline passes, or it is asked to stop. A served store's `follow` request
//! (`format-spec/server.md`) waits here.
//!
//! The writer calls [`SeqWatch::appended`] after each advance of its appended seq, once its
//! own lock is released. That costs an append one atomic load while no waiter is armed. A
//! waiter **arms** the watch (under the watch's mutex) before it checks the seq and sleeps;
//! the first append that finds it armed takes the watch's mutex, disarms it and wakes every
//! waiter. The appends after it find the watch disarmed until a waiter sleeps again, so a
//! stream of appends pays for one wake per wait, not one per event. A waiter holds no lock of
//! the log while it sleeps, and it never spins: it sleeps on a condition variable until woken
//! or until its deadline, so an append wakes it within the scheduler's wake-up latency
//! (microseconds), not after a polling interval.
//!
//! No wake-up is lost. The writer publishes the seq (`SeqCst`) before it reads the flag
//! (`SeqCst`); a waiter sets the flag (`SeqCst`) before it reads the seq, both under the
//! mutex, and sleeps without letting the mutex go in between. If the writer reads the flag
//! unset, the waiter set it later and so reads the new seq. If the writer reads it set, it
//! takes the mutex, which it gets only once the waiter has checked and is asleep (then the
//! wake reaches it) or has returned; a disarm under the mutex never clears the flag of a
//! waiter that has not yet checked, since arming and checking happen under the same hold of
//! it. A waiter woken for another seq arms again before it sleeps again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// Threads waiting for a sequence number, and how to wake them.
#[derive(Debug, Default)]
pub(crate) struct SeqWatch {
    /// Set by a waiter before it checks and sleeps; cleared by the append that wakes it.
    armed: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl SeqWatch {
    /// Called after the watched seq advanced (published with `SeqCst`): wakes the waiters,
    /// if any.
    pub(crate) fn appended(&self) {
        if self.armed.load(Ordering::SeqCst) {
            let guard = self.lock.lock();
            if self.armed.swap(false, Ordering::SeqCst) {
                self.wake.notify_all();
            }
            drop(guard);
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
        loop {
            let mut guard = self.lock.lock();
            self.armed.store(true, Ordering::SeqCst);
            if reached() {
                return true;
            }
            if stop() || self.wake.wait_until(&mut guard, deadline).timed_out() {
                return reached();
            }
        }
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
    fn the_append_that_wakes_disarms_the_watch() {
        let watch = SeqWatch::default();
        watch.appended();
        assert!(!watch.armed.load(Ordering::SeqCst), "appends do not arm it");
        watch.armed.store(true, Ordering::SeqCst);
        watch.appended();
        assert!(!watch.armed.load(Ordering::SeqCst), "the first append after arming disarms");
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
    }
}
