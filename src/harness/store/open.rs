//! Opening and closing a store: load the newest valid snapshot, read the events after it
//! (R6, R7) only as far as [`super::lazy`] needs, and hand out the one handle its clones
//! share.
//!
//! A snapshot is only an accelerator: one that is damaged, of an unknown version, or claims
//! to cover events the log does not hold is skipped with its reason in [`OpenReport`], and
//! the state is rebuilt from an older snapshot or from the first event.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::engine::log::Log;
use crate::engine::recovery::RecoveryReport;
use crate::error::{ErrorKind, Result};
use crate::fs::Fs;
use crate::harness::ids::TaskId;
use crate::harness::snapshot::{self, SnapshotMeta};
use crate::harness::snapshotter::Snapshotter;
use crate::types::{Durability, Seq};

use super::lazy::{self, FoldBudget, Pending};
use super::read::{Folded, load_base, refuse_lost_base};
use super::{Inner, Store, StoreOptions, TaskCell};

/// What opening a store did.
#[derive(Debug, Clone)]
pub struct OpenReport {
    /// What the log's own recovery did (torn tail cut, last sequence number).
    pub log: RecoveryReport,
    /// The snapshot the state was loaded from, if any.
    pub snapshot: Option<SnapshotMeta>,
    /// Snapshots that were newer but could not be used, with the reason.
    pub skipped_snapshots: Vec<(PathBuf, String)>,
    /// Events replayed after the snapshot (all events without one): read and counted, each
    /// task's folded when the task is first touched.
    pub replayed_events: u64,
    /// Tasks in the store.
    pub tasks: usize,
}

impl OpenReport {
    /// The report as the bindings give it (`open_report` in Python, `openReport` in Node):
    /// the log's report ([`RecoveryReport::to_json`]) with `snapshot_seq` (the snapshot the
    /// state was loaded from, or null), `replayed_events` and `tasks`.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = self.log.to_json();
        value["snapshot_seq"] = self.snapshot.as_ref().map(|meta| meta.covered_seq.0).into();
        value["replayed_events"] = self.replayed_events.into();
        value["tasks"] = self.tasks.into();
        value
    }
}

/// The name of the socket file inside the store directory, where a served store listens
/// (`format-spec/server.md`).
pub const SOCKET_FILE: &str = "factlog.sock";

/// The socket path of the store in `dir`.
#[must_use]
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_FILE)
}

impl Store {
    /// Opens (or creates) the store in `dir`: opens the log (recovering its tail), loads the
    /// newest valid snapshot and replays the events after it ([`OpenReport`] says what it
    /// did). Replay reads only each event's envelope; a task's events after the snapshot are
    /// decoded and folded when the task is first touched (`src/harness/store/lazy.rs`). Writes
    /// nothing but what the log's own open writes. The handle is a new holder of every task in
    /// the store: the first [`Store::task`] on each takes it over from the earlier holder, and
    /// [`Store::recover`] takes them all over at once and reports it.
    pub fn open(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        open_store(dir.as_ref(), options, false)
    }

    /// Opens the store in `dir` for reading only: no lock, nothing written. Appends,
    /// [`Store::recover`] and [`Store::checkpoint`] fail with [`ErrorKind::ReadOnly`]; use
    /// [`Store::plan_recovery`] for a dry run.
    pub fn open_read_only(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        open_store(dir.as_ref(), options, true)
    }

    /// What open found: the snapshot used, the snapshots skipped, the events replayed.
    #[must_use]
    pub fn open_report(&self) -> &OpenReport {
        &self.inner.report
    }

    /// The underlying log (for reading records, flushing, `durable_seq`).
    #[must_use]
    pub fn log(&self) -> &Log {
        &self.inner.log
    }

    /// The store's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Flushes and closes the store, syncing everything appended. If other clones of this
    /// store (or [`Task`](super::Task) handles) are still alive, it syncs and leaves the store
    /// open for them: the directory lock is released when the last one is dropped.
    pub fn close(self) -> Result<()> {
        // `Store` has a `Drop`: take a reference of our own, then let this handle go. The call
        // counts as a handle until it knows whether it closes the last one, so that the drop
        // is never the last handle's (which would stop the snapshot thread without the
        // snapshot still due).
        let inner = Arc::clone(&self.inner);
        inner.handles.fetch_add(1, Ordering::Relaxed);
        drop(self);
        if inner.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && let Some(snapshotter) = &inner.snapshotter
        {
            // The last handle stops the snapshot thread (after a snapshot still due).
            snapshotter.stop_if_last(&inner);
        }
        match Arc::try_unwrap(inner) {
            Ok(inner) => inner.log.close(),
            Err(shared) => shared.log.flush(Durability::Synced),
        }
    }
}

/// [`Store::open`] or, with `read_only`, [`Store::open_read_only`].
fn open_store(dir: &Path, options: StoreOptions, read_only: bool) -> Result<Store> {
    let background = options.log.background_threads;
    snapshot::refuse_newer(&*options.log.fs, dir)?;
    let log = open_log(dir, &options, read_only)?;
    let fs = Arc::clone(&options.log.fs);
    let through = log.last_seq().map_or(0, |s| s.0);
    let scanned = if read_only {
        // Beside a live writer, a snapshot newer than what this open saw is normal.
        scan_log(&*fs, dir, &log, through)
    } else {
        refuse_snapshot_beyond(&*fs, dir, through).and_then(|()| scan_log(&*fs, dir, &log, through))
    };
    let (folded, mut pending) = match scanned {
        Ok(scanned) => scanned,
        Err(error) => {
            // A store this open created leaves nothing behind.
            log.discard_created();
            return Err(error);
        }
    };
    // Folds of single tasks may read as many records as the pending ranges span before one
    // fold folds them all (`harness/store/lazy.rs`).
    let budget = lazy::span(pending.values()).map_or(0, |(from, to)| to - from + 1);
    let cells: HashMap<_, _> = folded
        .state
        .tasks
        .into_iter()
        .map(|(id, task)| {
            let cell = TaskCell::new(id.clone(), task);
            *cell.pending.lock() = pending.remove(&id);
            (id, Arc::new(cell))
        })
        .collect();
    let snapshot_seq = folded.snapshot.as_ref().map_or(0, |m| m.covered_seq.0);
    let report = OpenReport {
        log: log.recovery_report().clone(),
        snapshot: folded.snapshot,
        skipped_snapshots: folded.skipped,
        replayed_events: folded.replayed,
        tasks: cells.len(),
    };
    Ok(Store {
        inner: Arc::new_cyclic(|weak| Inner {
            snapshotter: if read_only || !background {
                None
            } else {
                Snapshotter::start(weak.clone())
            },
            fs,
            dir: dir.to_path_buf(),
            report,
            log,
            options,
            cells: RwLock::new(cells),
            checkpoint: Mutex::new(()),
            replication: Mutex::new(None),
            snapshot_seq: AtomicU64::new(snapshot_seq),
            appended_bytes: AtomicU64::new(0),
            snapshot_bytes_mark: AtomicU64::new(0),
            snapshot_error: Mutex::new(None),
            turn_ended_since_snapshot: AtomicBool::new(false),
            fold_budget: Mutex::new(FoldBudget { scanned: 0, budget }),
            handles: AtomicUsize::new(1),
        }),
    })
}

/// The store's log, opened for writing (with the socket file of a server that is gone
/// removed) or, with `read_only`, for reading.
fn open_log(dir: &Path, options: &StoreOptions, read_only: bool) -> Result<Log> {
    if read_only {
        return Log::open_read_only(dir, options.log.clone());
    }
    let log = Log::open(dir, options.log.clone())?;
    // This process holds the store now, so no server serves it: a socket file left by
    // a server that was killed would make other processes take the store for served
    // (`served::held_by_another`) and fail to connect instead of being told who holds
    // it. `Store::serve` creates a new one. A server killed between binding its socket
    // and moving it into place leaves `factlog.sock.new`, removed as well.
    let socket = socket_path(dir);
    let _ = std::fs::remove_file(&socket);
    let _ = std::fs::remove_file(socket.with_extension("sock.new"));
    Ok(log)
}

/// The newest usable snapshot and the events after it through `through`, read but folded
/// only lazily (`harness/store/lazy.rs`): the state holds every task with its revision, last seq
/// and delta counters exact, and its other events folded only through the snapshot; the
/// events after it are each task's pending range.
fn scan_log(
    fs: &dyn Fs,
    dir: &Path,
    log: &Log,
    through: u64,
) -> Result<(Folded, HashMap<TaskId, Pending>)> {
    let (mut state, snapshot, skipped) = load_base(fs, dir, through, true)?;
    let from = snapshot.as_ref().map_or(0, |m| m.covered_seq.0) + 1;
    let mut replayed = 0;
    let mut pending = HashMap::new();
    if from <= through {
        refuse_lost_base(fs, dir, log, from)?;
        let scanned = lazy::scan(&mut state, &mut log.read_from(Seq(from))?, through)?;
        replayed = scanned.records;
        pending = scanned.pending;
    }
    state.last_seq = state.last_seq.max(through);
    let folded = Folded { state, snapshot, skipped, replayed, unfolded_tasks: BTreeSet::new() };
    Ok((folded, pending))
}

/// Refuses a log that ends before a valid snapshot's covered seq: a snapshot covers only
/// events that were synced when it was written, so the records after the log's end up to it
/// were on stable storage and are damaged or gone. Skipping the snapshot would hand their seqs
/// out again, and the snapshot would come back as the newest once the log grows past it.
fn refuse_snapshot_beyond(fs: &dyn Fs, dir: &Path, through: u64) -> Result<()> {
    for file in snapshot::list(fs, dir)?.into_iter().rev() {
        if file.covered_seq.0 <= through {
            break;
        }
        if snapshot::load(fs, &file).is_ok() {
            let reason = crate::error::CorruptionReason::SnapshotBeyondLog {
                covered: file.covered_seq.0,
                last: through,
            };
            return Err(ErrorKind::Corruption {
                segment: None,
                path: file.path,
                offset: 0,
                reason,
            }
            .into());
        }
    }
    Ok(())
}
