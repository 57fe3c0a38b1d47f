//! The [`Store`]: one directory, many tasks, one log and one group commit. Its methods are
//! grouped by concern, one file each:
//!
//! - `options`: [`StoreOptions`] and [`AppendOptions`].
//! - `open`: opening a store (the newest usable snapshot, then a scan of the events after
//!   it), the handle's directory and log, closing it.
//! - `append`: task handles ([`Store::task`]) and the checked, atomic append path: deltas,
//!   events and batches, secrets, durability, the compare-and-set gate.
//! - `read`: the state of tasks, their events and history, and a one-task read of a store
//!   held by another process ([`Store::read_task`]); the fold of snapshots and the log.
//! - `lazy`: the per-task lazy fold: what open scans and how a task is folded when touched.
//! - `recover`: holders and recovery: taking a task over, [`Store::recover`], the dry run.
//! - `maintenance`: snapshots (the policy and [`Store::checkpoint`]), [`Store::verify_deep`],
//!   and reclaiming space ([`Store::purge`]).
//!
//! Locking: each task has a cell with its folded state behind a mutex and its revision and
//! delta counters in atomics. Every event but `assistant/delta` is checked and folded under
//! its task's lock, so events of one task are checked in log order while tasks do not wait
//! for each other and share `fdatasync`s. An `assistant/delta` takes only the log's lock: its
//! revision is assigned and its counters bumped inside [`crate::Log::append_with`], and its
//! effect on the state commutes with every other event's (see [`crate::harness::fold`]).

mod append;
mod lazy;
mod maintenance;
mod open;
mod options;
mod read;
mod recover;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::engine::log::Log;
use crate::fs::Fs;
use crate::harness::ids::TaskId;
use crate::harness::snapshotter::Snapshotter;
use crate::harness::state::TaskState;

pub use append::Appended;
pub(crate) use append::check_delta_text;
pub use maintenance::DeepVerify;
pub use open::{OpenReport, SOCKET_FILE, socket_path};
pub use options::{AppendOptions, StoreOptions};
pub use read::TaskRead;

use lazy::{FoldBudget, Pending};

/// One task of a store: its folded state, its counters and whether this handle holds it.
pub(crate) struct TaskCell {
    pub(crate) id: TaskId,
    /// Non-delta events folded in log order. Its delta counters, revision and last seq are
    /// stale: the atomics below are the truth for those.
    pub(crate) state: Mutex<TaskState>,
    pub(crate) revision: AtomicU64,
    pub(crate) last_seq: AtomicU64,
    /// The append time of the task's last delta; the state holds that of its other events.
    pub(crate) last_time_us: AtomicU64,
    pub(crate) deltas: AtomicU64,
    pub(crate) delta_bytes: AtomicU64,
    /// Whether this store handle holds the task: it has repaired what an earlier holder left
    /// (`format-spec/harness-recovery.md`, "Holders"), or the task had no event at open. Set
    /// only under `takeover`; read without it on every checked append.
    pub(crate) held: AtomicBool,
    /// This process's own code made a [`crate::Task`] of the task ([`Store::task`]), not only
    /// a served client ([`Store::client_task`]): the process holds it for its lifetime, so the
    /// server never hands it over when its clients leave ([`Store::release_task`]).
    pub(crate) local: AtomicBool,
    /// Serialises taking the task over from an earlier holder. Taken before `state`.
    pub(crate) takeover: Mutex<()>,
    /// The task's events that `state` does not hold yet (`harness/store/lazy.rs`); `None` once
    /// folded. Changed only under `Inner::fold_budget`.
    pub(crate) pending: Mutex<Option<Pending>>,
}

impl TaskCell {
    /// A cell for a task whose folded state is `state`: held at once if it has no event yet,
    /// else left to be taken over from the holder that wrote it.
    pub(crate) fn new(id: TaskId, state: TaskState) -> TaskCell {
        TaskCell {
            held: AtomicBool::new(state.revision == 0),
            local: AtomicBool::new(false),
            takeover: Mutex::new(()),
            revision: AtomicU64::new(state.revision),
            last_seq: AtomicU64::new(state.last_seq),
            last_time_us: AtomicU64::new(state.last_time_us),
            deltas: AtomicU64::new(state.execution.deltas),
            delta_bytes: AtomicU64::new(state.execution.delta_bytes),
            state: Mutex::new(state),
            pending: Mutex::new(None),
            id,
        }
    }

    /// The task's full folded state: the locked part with the counters filled in.
    pub(super) fn snapshot_of(&self, locked: &TaskState) -> TaskState {
        let mut state = locked.clone();
        state.revision = self.revision.load(Ordering::Acquire);
        state.last_seq = self.last_seq.load(Ordering::Acquire);
        state.last_time_us = state.last_time_us.max(self.last_time_us.load(Ordering::Acquire));
        state.execution.deltas = self.deltas.load(Ordering::Acquire);
        state.execution.delta_bytes = self.delta_bytes.load(Ordering::Acquire);
        state
    }
}

/// What the handles of one open store share.
pub(crate) struct Inner {
    pub(crate) log: Log,
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) dir: PathBuf,
    pub(crate) options: StoreOptions,
    pub(crate) cells: RwLock<HashMap<TaskId, Arc<TaskCell>>>,
    pub(crate) report: OpenReport,
    pub(crate) checkpoint: Mutex<()>,
    /// The seq the newest snapshot covers (0: none): events since it are `last_seq - this`.
    pub(crate) snapshot_seq: AtomicU64,
    /// Record bytes appended since open, deltas included; written only under the log's lock.
    pub(crate) appended_bytes: AtomicU64,
    /// `appended_bytes` when the newest snapshot was written.
    pub(crate) snapshot_bytes_mark: AtomicU64,
    /// Why the last policy snapshot failed, if it did.
    pub(crate) snapshot_error: Mutex<Option<String>>,
    /// A turn ended since the newest snapshot began (only with `snapshot_at_turn_end`).
    pub(crate) turn_ended_since_snapshot: AtomicBool,
    /// Writes policy snapshots off the append path; `None` for a read-only store or without
    /// background threads (they are then written inline).
    pub(crate) snapshotter: Option<Snapshotter>,
    /// Serialises folding pending tasks (`harness/store/lazy.rs`) and counts what folds read.
    pub(crate) fold_budget: Mutex<FoldBudget>,
    /// The progress of the replication running in this process, if any
    /// ([`Store::replicate`]), which `Replicated` appends wait on.
    pub(crate) replication: Mutex<Option<Arc<crate::harness::replication_progress::Progress>>>,
    /// The [`Store`] handles alive (a [`Task`] holds one), and a [`Store::close`] deciding
    /// whether it closes the last: the snapshot thread's reference is not counted, so the last
    /// handle dropped is told apart from the others exactly, also when several are dropped at
    /// once.
    pub(crate) handles: AtomicUsize,
}

/// A store of the facts of many tasks. Cheap to clone: clones share one open store.
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl Clone for Store {
    fn clone(&self) -> Store {
        self.inner.handles.fetch_add(1, Ordering::Relaxed);
        Store { inner: Arc::clone(&self.inner) }
    }
}

impl Drop for Store {
    /// The last handle dropped without [`Store::close`] first waits for a snapshot being
    /// written and stops the snapshot thread without a snapshot still due, so that the store
    /// (and its directory lock) goes away now, on this thread. Any other handle returns at
    /// once, also while a snapshot is written: a served store's connections drop a task handle
    /// per request, and every one of them used to wait for the whole snapshot.
    fn drop(&mut self) {
        if self.inner.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && let Some(snapshotter) = &self.inner.snapshotter
        {
            snapshotter.release();
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

/// A handle on one task of a [`Store`], for appending its events. Cheap to clone.
#[derive(Clone)]
pub struct Task {
    pub(super) store: Store,
    pub(super) cell: Arc<TaskCell>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task").field("id", &self.cell.id).finish_non_exhaustive()
    }
}

impl Store {
    pub(crate) fn now_us(&self) -> u64 {
        (self.inner.options.clock)()
    }

    pub(crate) fn cells(&self) -> Vec<Arc<TaskCell>> {
        let mut cells: Vec<Arc<TaskCell>> = self.inner.cells.read().values().cloned().collect();
        cells.sort_by(|a, b| a.id.cmp(&b.id));
        cells
    }
}
