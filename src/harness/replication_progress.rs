//! What a store replicating in its own process has shipped, for the appends that wait for it
//! (the `Replicated` tier, `format-spec/replication.md`, "Replicated appends"): the
//! replication thread publishes the last seq the replica holds after every round, and a
//! `Replicated` append waits until it passes its seq, the replication ends, or its timeout.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{ErrorKind, Result};

#[derive(Debug, Default)]
struct Shipped {
    /// The last seq the replica holds.
    seq: u64,
    /// Why the replication ended, once it has.
    ended: Option<String>,
}

/// The progress of one replication, shared by its thread and the waiting appends.
#[derive(Debug)]
pub(crate) struct Progress {
    shipped: Mutex<Shipped>,
    changed: Condvar,
    /// How long a `Replicated` append waits before it gives up.
    timeout: Duration,
    /// `Replicated` appends waiting now: the replication thread ships at once for them.
    waiting: AtomicUsize,
    /// Wakes the replication thread when a `Replicated` append begins to wait.
    wanted: Condvar,
}

impl Progress {
    pub(crate) fn new(shipped_seq: u64, timeout: Duration) -> Progress {
        Progress {
            shipped: Mutex::new(Shipped { seq: shipped_seq, ended: None }),
            changed: Condvar::new(),
            timeout,
            waiting: AtomicUsize::new(0),
            wanted: Condvar::new(),
        }
    }

    /// Whether a `Replicated` append is waiting.
    pub(crate) fn awaited(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// Sleeps up to `timeout`, or until a `Replicated` append begins to wait (the
    /// replication thread, between its looks at the store).
    pub(crate) fn sleep(&self, timeout: Duration) {
        let mut shipped = self.shipped.lock();
        // With an append waiting, the thread looks again soon (not at once: a round that
        // failed waits for its backoff, and must not spin meanwhile).
        let timeout = if self.waiting.load(Ordering::Acquire) == 0 {
            timeout
        } else {
            timeout.min(Duration::from_millis(1))
        };
        let _ = self.wanted.wait_for(&mut shipped, timeout);
    }

    /// The replica holds everything up to `seq`.
    pub(crate) fn publish(&self, seq: u64) {
        let mut shipped = self.shipped.lock();
        if seq > shipped.seq {
            shipped.seq = seq;
            self.changed.notify_all();
        }
    }

    /// The replication ended: waiting appends give up with `why`.
    pub(crate) fn end(&self, why: String) {
        self.shipped.lock().ended = Some(why);
        self.changed.notify_all();
    }

    /// Waits until the replica holds `seq`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotReplicated`] when the replication ends first or the timeout passes.
    pub(crate) fn wait_shipped(&self, seq: u64) -> Result<()> {
        {
            let _shipped = self.shipped.lock();
            self.waiting.fetch_add(1, Ordering::AcqRel);
            self.wanted.notify_all();
        }
        let waited = self.wait_shipped_counted(seq);
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        waited
    }

    fn wait_shipped_counted(&self, seq: u64) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        let mut shipped = self.shipped.lock();
        loop {
            if shipped.seq >= seq {
                return Ok(());
            }
            if let Some(why) = &shipped.ended {
                return Err(ErrorKind::NotReplicated { seq, reason: why.clone() }.into());
            }
            if self.changed.wait_until(&mut shipped, deadline).timed_out() && shipped.seq < seq {
                let reason = format!(
                    "the replica did not take it within {} ms (the location is slow or \
                     unreachable: Replication::status says why)",
                    self.timeout.as_millis()
                );
                return Err(ErrorKind::NotReplicated { seq, reason }.into());
            }
        }
    }
}
