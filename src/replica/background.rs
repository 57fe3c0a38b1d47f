//! A store replicating in its own process (`format-spec/replication.md`, "Shipping"):
//! [`Store::replicate`] starts a [`Replicator`] on a thread of its own, which runs a round as
//! soon as the store's durable seq moves past what the replica holds (a `Synced` append, or
//! the flush of the `Flushed` ones; at most one such round every 5 ms unless a `Replicated`
//! append waits for it) and at least every interval while anything appended is not shipped. Appends never wait for it: it reads the store's files, and looks at one
//! atomic counter of the log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Remote, Replicator, ShipOptions, ShipStatus};
use crate::Store;
use crate::error::{ErrorKind, Result};
use crate::harness::replication_progress::Progress;
use crate::limits::{
    REPLICA_BACKOFF_MAX, REPLICA_BACKOFF_MIN, REPLICA_INTERVAL_DEFAULT, REPLICATED_WAIT_DEFAULT,
};

/// How often the replication thread looks at the store's durable seq, and the shortest time
/// between two rounds that a sync makes due, unless a `Replicated` append waits (which wakes
/// it at once): the synced events of a busy session are shipped together, a few objects a
/// second instead of one each.
const SYNCED_GAP: Duration = Duration::from_millis(5);

/// How a store replicates in its own process.
#[derive(Debug, Clone, Copy)]
pub struct ReplicateOptions {
    ship: ShipOptions,
    interval: Duration,
    replicated_wait: Duration,
}

impl Default for ReplicateOptions {
    fn default() -> ReplicateOptions {
        ReplicateOptions::new()
    }
}

impl ReplicateOptions {
    /// The defaults: no takeover, a round at least every second while anything is unshipped.
    #[must_use]
    pub fn new() -> ReplicateOptions {
        ReplicateOptions {
            ship: ShipOptions::new(),
            interval: REPLICA_INTERVAL_DEFAULT,
            replicated_wait: REPLICATED_WAIT_DEFAULT,
        }
    }

    /// How long a `Replicated` append ([`crate::AppendOptions::replicated`]) waits for the
    /// replica before it fails with [`ErrorKind::NotReplicated`] (default 30 s); the event
    /// stays written and synced in the store either way.
    #[must_use]
    pub fn replicated_wait(mut self, wait: Duration) -> ReplicateOptions {
        self.replicated_wait = wait;
        self
    }

    /// Takes the replica's lease even if another run holds it ([`ShipOptions::takeover`]).
    #[must_use]
    pub fn takeover(mut self, on: bool) -> ReplicateOptions {
        self.ship = self.ship.takeover(on);
        self
    }

    /// The longest the replica lags behind an append that is not synced (default 1 s).
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> ReplicateOptions {
        self.interval = interval;
        self
    }
}

/// A store replicating to a replica, until [`Replication::stop`] or drop.
#[derive(Debug)]
pub struct Replication {
    status: Arc<Mutex<ShipStatus>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<ShipStatus>>>,
}

impl Store {
    /// Replicates this store to `remote` (see [`super::remote::open`] for a URL) on a thread
    /// of its own until the returned [`Replication`] is stopped or dropped: a round at once
    /// when the durable seq moves past what the replica holds, and at least every
    /// `options.interval` while anything appended is not shipped. The thread holds a clone
    /// of this handle: stop it before [`Store::close`], or the store stays open until it ends.
    ///
    /// # Errors
    ///
    /// Those of [`Replicator::start`] ([`ErrorKind::LeaseHeld`],
    /// [`ErrorKind::ReplicaDiverged`], [`ErrorKind::Remote`], ...), and
    /// [`ErrorKind::ReadOnly`] for a store opened read-only.
    pub fn replicate(
        &self,
        remote: Box<dyn Remote>,
        options: ReplicateOptions,
    ) -> Result<Replication> {
        if self.inner.log.is_read_only() {
            return Err(ErrorKind::ReadOnly.into());
        }
        // Registered before it starts, so that a second `replicate` is refused and a
        // `Replicated` append waits for this one (or fails when it does not start) instead of
        // being refused as "not replicating" meanwhile.
        let progress = Arc::new(Progress::new(0, options.replicated_wait));
        {
            let mut registered = self.inner.replication.lock();
            if registered.is_some() {
                return Err(ErrorKind::InvalidOptions {
                    reason: "this store is already replicating: stop that Replication first".into(),
                }
                .into());
            }
            *registered = Some(Arc::clone(&progress));
        }
        let status = Arc::new(Mutex::new(ShipStatus::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (store, shared, stopping) = (self.clone(), Arc::clone(&status), Arc::clone(&stop));
        let published = Arc::clone(&progress);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        // The replicator starts on its own thread too: an object-store client runs its
        // requests on a runtime of its own, which must not be entered from a caller's async
        // task.
        let spawned =
            std::thread::Builder::new().name("factlog-replica".to_owned()).spawn(move || {
                let fs = Arc::clone(&store.inner.fs);
                // Every round is bounded by the durable seq: nothing unsynced is shipped.
                let ship = options.ship.leave_unsynced(true);
                let ended = match Replicator::start(fs, store.dir(), remote, ship, store.now_us()) {
                    Ok(replicator) => {
                        publish(&shared, replicator.status());
                        published.publish(replicator.status().shipped_seq);
                        let _ = started_tx.send(Ok(()));
                        run(&store, replicator, &shared, &published, &stopping, options.interval)
                    }
                    Err(error) => {
                        let why = format!("the replication did not start: {error}");
                        let _ = started_tx.send(Err(error));
                        Err(ErrorKind::NotReplicated { seq: 0, reason: why }.into())
                    }
                };
                let why = match &ended {
                    Ok(_) => "the replication was stopped".to_owned(),
                    Err(error) => format!("the replication ended: {error}"),
                };
                published.end(why);
                let mut registered = store.inner.replication.lock();
                if registered.as_ref().is_some_and(|p| Arc::ptr_eq(p, &published)) {
                    *registered = None;
                }
                ended
            });
        let thread = match spawned {
            Ok(thread) => thread,
            Err(e) => {
                self.inner.replication.lock().take();
                return Err(crate::Error::io("spawn a thread", self.dir(), e));
            }
        };
        match started_rx.recv() {
            Ok(Ok(())) => Ok(Replication { status, stop, thread: Some(thread) }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            Err(_) => {
                let _ = thread.join();
                Err(ErrorKind::Poisoned { cause: "the replication thread panicked".to_owned() }
                    .into())
            }
        }
    }
}

impl Replication {
    /// Where the replication stands: the last seq the replica holds, the store's, the last
    /// error (a round that failed is retried after a backoff).
    #[must_use]
    pub fn status(&self) -> ShipStatus {
        self.status.lock().map_or_else(|p| p.into_inner().clone(), |s| s.clone())
    }

    /// Stops: a last round ships what the store's files hold, then the lease is given back.
    ///
    /// # Errors
    ///
    /// The error that ended the replication ([`ErrorKind::LeaseLost`],
    /// [`ErrorKind::ReplicaDiverged`]) or that of the last round.
    pub fn stop(mut self) -> Result<ShipStatus> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<ShipStatus> {
        self.stop.store(true, Ordering::Release);
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_else(|_| {
                Err(ErrorKind::Poisoned { cause: "the replication thread panicked".to_owned() }
                    .into())
            }),
            None => Ok(self.status()),
        }
    }
}

impl Drop for Replication {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// The replication thread: rounds until stopped or a round fails in a way no retry mends.
fn run(
    store: &Store,
    mut replicator: Replicator,
    shared: &Mutex<ShipStatus>,
    progress: &Progress,
    stop: &AtomicBool,
    interval: Duration,
) -> Result<ShipStatus> {
    let log = &store.inner.log;
    let mut backoff = REPLICA_BACKOFF_MIN;
    let mut next_try = Instant::now();
    let mut last_round = Instant::now();
    while !stop.load(Ordering::Acquire) {
        progress.sleep(SYNCED_GAP);
        let now = Instant::now();
        let shipped = replicator.status().shipped_seq;
        let durable = log.durable_seq().map_or(0, |s| s.0);
        let appended = log.last_seq().map_or(0, |s| s.0);
        let synced = durable > shipped && (progress.awaited() || now >= last_round + SYNCED_GAP);
        let due = synced || (appended > shipped && now >= last_round + interval);
        if !due || now < next_try {
            continue;
        }
        last_round = now;
        let result = replicator.round_through(durable).map(|_| ());
        publish(shared, replicator.status());
        progress.publish(replicator.status().shipped_seq);
        match result {
            Ok(()) => backoff = REPLICA_BACKOFF_MIN,
            Err(error) if super::ship::fatal(&error) => return Err(error),
            Err(_) => {
                next_try = now + backoff;
                backoff = (backoff * 2).min(REPLICA_BACKOFF_MAX);
            }
        }
    }
    // Everything appended is synced before the last round, which ships it.
    log.flush(crate::Durability::Synced)?;
    let finished = replicator.finish();
    if let Ok(status) = &finished {
        publish(shared, status);
        progress.publish(status.shipped_seq);
    }
    finished
}

fn publish(shared: &Mutex<ShipStatus>, status: &ShipStatus) {
    match shared.lock() {
        Ok(mut guard) => *guard = status.clone(),
        Err(poisoned) => *poisoned.into_inner() = status.clone(),
    }
}
