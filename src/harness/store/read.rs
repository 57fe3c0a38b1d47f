//! Reading a store: the state of one task or of all (folding what [`super::lazy`] left
//! pending first), its events, a task's model-visible history, and [`Store::read_task`],
//! which folds one task of a store read-only. Also the fold of the newest usable snapshot and
//! the log after it that the snapshots and [`Store::verify_deep`] are built from.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::engine::log::Log;
use crate::error::{ErrorKind, Result, SnapshotFault};
use crate::fs::Fs;
use crate::harness::codec;
use crate::harness::event::Event;
use crate::harness::fold;
use crate::harness::history::{self, Entry};
use crate::harness::ids::TaskId;
use crate::harness::snapshot::{self, SnapshotMeta};
use crate::harness::state::{State, TaskState};
use crate::types::Seq;

use super::{Store, StoreOptions, Task, TaskCell};

/// One task's state, read without folding the others: what [`Store::read_task`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRead {
    /// The task's state; `None` when it has no events.
    pub state: Option<TaskState>,
    /// Every task with at least one event, sorted (to name them when `state` is `None`).
    pub task_ids: Vec<TaskId>,
    /// The last sequence number of the log.
    pub last_seq: u64,
}

impl Store {
    /// The ids of every task with at least one event, sorted.
    #[must_use]
    pub fn task_ids(&self) -> Vec<TaskId> {
        let cells = self.inner.cells.read();
        let mut ids: Vec<TaskId> = cells
            .values()
            .filter(|c| c.revision.load(Ordering::Acquire) > 0)
            .map(|c| c.id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// The revision and last sequence number of task `id`, if it has events: what
    /// [`Store::task_state`] says of them, without folding the task's state.
    #[must_use]
    pub fn task_revision(&self, id: &str) -> Option<(u64, u64)> {
        let cell = Arc::clone(self.inner.cells.read().get(id)?);
        let revision = cell.revision.load(Ordering::Acquire);
        (revision > 0).then(|| (revision, cell.last_seq.load(Ordering::Acquire)))
    }

    /// Whether this process's own code holds task `id` ([`Store::task`]), not only served
    /// clients: the server never hands it over when they leave.
    pub(crate) fn held_locally(&self, id: &str) -> bool {
        self.inner.cells.read().get(id).is_some_and(|cell| cell.local.load(Ordering::Acquire))
    }

    /// The folded state of task `id`, if it has events.
    ///
    /// A task not folded since open is folded first (`harness/store/lazy.rs`). Should one of its
    /// events fail to decode (a record a store never writes; the open would have refused it
    /// had it decoded every body), the state is that without the task's unfolded events, and
    /// [`Store::task`] and [`Store::recover`] fail with the decoding error.
    #[must_use]
    pub fn task_state(&self, id: &str) -> Option<TaskState> {
        let cell = Arc::clone(self.inner.cells.read().get(id)?);
        // An error is returned by the calls that can return one (above).
        let _ = self.fold_pending(std::slice::from_ref(&cell));
        let locked = cell.state.lock();
        let state = cell.snapshot_of(&locked);
        (state.revision > 0).then_some(state)
    }

    /// As [`Store::state`], but a task whose unfolded events cannot be decoded is an error
    /// instead of a state without them: what a reader that must not guess calls (`factlog
    /// state`).
    pub fn try_state(&self) -> Result<State> {
        self.fold_all_pending()?;
        Ok(self.state())
    }

    /// The folded state of every task, as of the events appended so far. Tasks not folded
    /// since open are folded first, in one read of the log; on a decoding error, as
    /// [`Store::task_state`] says ([`Store::try_state`] returns the error).
    #[must_use]
    pub fn state(&self) -> State {
        // An error is returned by the calls that can return one ([`Store::task_state`]).
        let _ = self.fold_all_pending();
        let cells: Vec<Arc<TaskCell>> = self.inner.cells.read().values().cloned().collect();
        let mut state =
            State { last_seq: self.inner.log.last_seq().map_or(0, |s| s.0), ..State::default() };
        for cell in cells {
            let locked = cell.state.lock();
            let task = cell.snapshot_of(&locked);
            if task.revision > 0 {
                state.tasks.insert(cell.id.clone(), task);
            }
        }
        state
    }

    /// Reads every event from `from` on, decoded.
    pub fn events(&self, from: Seq) -> Result<impl Iterator<Item = Result<Event>>> {
        let reader = self.inner.log.read_from(from)?;
        Ok(reader.map(|r| r.and_then(|record| codec::decode(record.seq, &record.payload))))
    }

    /// Blocks until an event with seq `seq` or later has been appended through this handle,
    /// until `deadline` passes, or until `stop()` is true (checked before the first sleep and
    /// at every wake-up: call [`Store::wake_waiters`] after making it true). Returns whether
    /// `seq` was reached. Holds no lock of the store while it waits and does not poll: an
    /// append wakes it at once. A read-only store returns at once. The wait of every door
    /// that follows a store ([`crate::protocol::pages::follow`]).
    pub fn wait_appended(
        &self,
        seq: Seq,
        deadline: std::time::Instant,
        stop: &dyn Fn() -> bool,
    ) -> bool {
        self.inner.log.wait_appended(seq, deadline, stop)
    }

    /// Wakes every [`Store::wait_appended`] caller to check its `stop` again.
    pub fn wake_waiters(&self) {
        self.inner.log.wake_waiters();
    }

    /// The model-visible history of task `task`, projected from its events. Reads the log
    /// from the start (or from the last `context/compacted` event, whose summary replaces the
    /// history before it). After [`Store::reclaim`] it starts at the first kept event.
    pub fn history(&self, task: &str) -> Result<Vec<Entry>> {
        let compacted = self.task_state(task).map_or(1, |t| t.session.compacted_seq.max(1));
        let from = compacted.max(self.log().first_seq()?.0);
        let mut reader = self.log().read_from(Seq(from))?;
        history::project(&mut reader, task)
    }

    /// Reads the state of task `id` from the store in `dir`, read-only (no lock, nothing
    /// written), without folding the other tasks: the newest usable snapshot is loaded and
    /// the events after it are read, but only `id`'s are decoded and folded. The result is
    /// the state [`Store::open_read_only`] followed by [`Store::task_state`] would give, for
    /// the cost of a scan of the events after the snapshot (`factlog state --task`).
    pub fn read_task(dir: impl AsRef<Path>, options: StoreOptions, id: &str) -> Result<TaskRead> {
        let dir = dir.as_ref();
        snapshot::refuse_newer(&*options.log.fs, dir)?;
        let log = Log::open_read_only(dir, options.log.clone())?;
        let through = log.last_seq().map_or(0, |s| s.0);
        let mut folded = fold_log(&*options.log.fs, dir, &log, through, true, Some(id))?;
        let state = folded.state.tasks.remove(id).filter(|task| task.revision > 0);
        let mut task_ids: BTreeSet<TaskId> = folded.state.tasks.into_keys().collect();
        task_ids.append(&mut folded.unfolded_tasks);
        if state.is_some() {
            task_ids.insert(TaskId::new(id)?);
        }
        Ok(TaskRead { state, task_ids: task_ids.into_iter().collect(), last_seq: through })
    }
}

impl Task {
    /// The task's current revision: the count of its events.
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.cell.revision.load(Ordering::Acquire)
    }

    /// The task's folded state.
    #[must_use]
    pub fn state(&self) -> TaskState {
        let locked = self.cell.state.lock();
        self.cell.snapshot_of(&locked)
    }
}

/// The state folded from the newest usable snapshot and the events after it, through
/// `through`.
pub(crate) struct Folded {
    pub(crate) state: State,
    pub(crate) snapshot: Option<SnapshotMeta>,
    pub(crate) skipped: Vec<(PathBuf, String)>,
    pub(crate) replayed: u64,
    /// With a task to fold only: the other tasks that first appear after the snapshot.
    pub(crate) unfolded_tasks: BTreeSet<TaskId>,
}

/// A state to replay from, the snapshot it was loaded from, and the snapshots skipped.
type Base = (State, Option<SnapshotMeta>, Vec<(PathBuf, String)>);

/// The state to replay from: the newest usable snapshot's when `use_snapshot` (with its meta
/// and the snapshots skipped), else the empty state.
pub(super) fn load_base(fs: &dyn Fs, dir: &Path, through: u64, use_snapshot: bool) -> Result<Base> {
    let mut state = State::default();
    let mut snapshot = None;
    let mut skipped = Vec::new();
    if use_snapshot {
        let mut decoded: Option<State> = None;
        let loaded = snapshot::load_newest(fs, dir, |meta, body| {
            let candidate = snapshot::decode_state(meta, body)?;
            if meta.covered_seq.0 > through {
                return Err(ErrorKind::CorruptSnapshot {
                    path: meta.path.clone(),
                    reason: SnapshotFault::BadBody(format!(
                        "covers events through {} but the log ends at {through}",
                        meta.covered_seq.0
                    )),
                }
                .into());
            }
            decoded = Some(candidate);
            Ok(())
        })?;
        skipped =
            loaded.skipped.into_iter().map(|s| (s.path, s.error.to_string())).collect::<Vec<_>>();
        if let (Some((meta, _)), Some(found)) = (loaded.loaded, decoded) {
            state = found;
            snapshot = Some(meta);
        }
    }
    Ok((state, snapshot, skipped))
}

/// Refuses a replay from `from` when the log's first seq is later (segments were reclaimed)
/// and no valid snapshot holds the events before it: the error names the snapshot that should
/// have ([`crate::CorruptionReason::BaseSnapshotLost`]).
pub(super) fn refuse_lost_base(fs: &dyn Fs, dir: &Path, log: &Log, from: u64) -> Result<()> {
    let first = log.first_seq()?.0;
    if from < first {
        let checked = snapshot::check_all(fs, dir, first)?;
        if let Some(lost) = snapshot::base_lost(dir, first, &checked.files) {
            return Err(lost);
        }
    }
    Ok(())
}

/// Folds the log through `through`, starting from the newest usable snapshot when
/// `use_snapshot`, else from the first event. With `only`, the events after the snapshot of
/// every other task are read (CRC-checked, envelope only) but not decoded nor folded: the
/// state then holds `only`'s state, and the other tasks only as of the snapshot; the ids of
/// tasks that first appear after it are in [`Folded::unfolded_tasks`].
pub(crate) fn fold_log(
    fs: &dyn Fs,
    dir: &Path,
    log: &Log,
    through: u64,
    use_snapshot: bool,
    only: Option<&str>,
) -> Result<Folded> {
    let (mut state, snapshot, skipped) = load_base(fs, dir, through, use_snapshot)?;
    let from = snapshot.as_ref().map_or(0, |m| m.covered_seq.0) + 1;
    let mut replayed = 0;
    let mut unfolded_tasks = BTreeSet::new();
    if from <= through {
        refuse_lost_base(fs, dir, log, from)?;
        let mut reader = log.read_from(Seq(from))?;
        // Only a one-task read needs the ids the snapshot already names.
        let known = if only.is_some() {
            state.tasks.keys().cloned().collect::<BTreeSet<_>>()
        } else {
            BTreeSet::new()
        };
        let mut replay = fold::Replay::new(&mut state);
        // The last other task seen: tasks write in runs, so most records skip the lookups.
        let mut other = String::new();
        while let Some(record) = reader.next_ref() {
            let (seq, payload) = record?;
            if seq.0 > through {
                break;
            }
            replayed += 1;
            if let Some(only) = only {
                let task = codec::peek(seq, payload)?.task;
                if task != only {
                    if task != other {
                        if !known.contains(task) && !unfolded_tasks.contains(task) {
                            unfolded_tasks.insert(TaskId::new(task)?);
                        }
                        other.clear();
                        other.push_str(task);
                    }
                    continue;
                }
            }
            replay.apply_record(seq, payload)?;
        }
        replay.finish();
    }
    state.last_seq = state.last_seq.max(through);
    Ok(Folded { state, snapshot, skipped, replayed, unfolded_tasks })
}
