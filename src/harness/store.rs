//! The [`Store`]: one directory, many tasks, one log and one group commit.
//!
//! Locking: each task has a cell with its folded state behind a mutex and its revision and
//! delta counters in atomics. Every event but `assistant/delta` is checked and folded under
//! its task's lock, so events of one task are checked in log order while tasks do not wait
//! for each other and share `fdatasync`s. An `assistant/delta` takes only the log's lock: its
//! revision is assigned and its counters bumped inside [`crate::Log::append_with`], and its
//! effect on the state commutes with every other event's (see [`crate::harness::fold`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::engine::log::Log;
use crate::engine::options::Options;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::Fs;
use crate::harness::check::{self, Verdict};
use crate::harness::codec;
use crate::harness::event::{Body, Event, EventType};
use crate::harness::fold;
use crate::harness::ids::{CallId, TaskId, check_task_id};
use crate::harness::lazy::{FoldBudget, Pending};
use crate::harness::request_key;
use crate::harness::secret;
use crate::harness::secret_shapes;
use crate::harness::snapshotter::Snapshotter;
use crate::harness::state::{State, TaskState};
use crate::harness::store_open::OpenReport;
use crate::limits::{
    DELTA_TEXT_BYTES_MAX, EVENT_BATCH_MAX, SNAPSHOT_EVERY_BYTES_DEFAULT,
    SNAPSHOT_EVERY_EVENTS_DEFAULT,
};
use crate::types::{Durability, Seq};

/// Options of a [`Store`]: the log's options and the snapshot policy. A policy snapshot is
/// written by the append (other than a delta) that makes it due, before that append returns;
/// a failure to write it does not fail the append ([`Store::last_snapshot_error`]).
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub(crate) log: Options,
    pub(crate) snapshot_every_bytes: u64,
    pub(crate) snapshot_every_events: u64,
    pub(crate) snapshot_at_turn_end: bool,
    pub(crate) clock: fn() -> u64,
    pub(crate) refuse_unmarked_secrets: bool,
    pub(crate) replicated_types: Vec<EventType>,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions::new()
    }
}

impl StoreOptions {
    /// The defaults: [`Options::new`] for the log, a snapshot every 64 MiB or million events.
    #[must_use]
    pub fn new() -> StoreOptions {
        StoreOptions {
            log: Options::new(),
            snapshot_every_bytes: SNAPSHOT_EVERY_BYTES_DEFAULT,
            snapshot_every_events: SNAPSHOT_EVERY_EVENTS_DEFAULT,
            snapshot_at_turn_end: false,
            clock: system_clock_us,
            refuse_unmarked_secrets: false,
            replicated_types: Vec::new(),
        }
    }

    /// The log's options (segment size, buffer, flush delay, recovery mode, file system).
    /// Default: [`Options::new`].
    #[must_use]
    pub fn log(mut self, log: Options) -> StoreOptions {
        self.log = log;
        self
    }

    /// Writes a snapshot once this many bytes of events were appended since the last one;
    /// 0 turns the byte trigger off. Default: 64 MiB.
    #[must_use]
    pub fn snapshot_every_bytes(mut self, bytes: u64) -> StoreOptions {
        self.snapshot_every_bytes = bytes;
        self
    }

    /// Writes a snapshot once this many events were appended since the last one; 0 turns the
    /// event trigger off. Default: 1,000,000.
    #[must_use]
    pub fn snapshot_every_events(mut self, events: u64) -> StoreOptions {
        self.snapshot_every_events = events;
        self
    }

    /// Also writes a snapshot at every `turn/end` (three extra syncs per turn). Default: off.
    #[must_use]
    pub fn snapshot_at_turn_end(mut self, on: bool) -> StoreOptions {
        self.snapshot_at_turn_end = on;
        self
    }

    /// The clock that stamps events, in microseconds since the Unix epoch. Default: the
    /// system clock. Tests set a fixed one to make records byte-for-byte reproducible. It is
    /// read once per event, streamed deltas included, where it is about a quarter of the cost
    /// of an append: a harness that needs less precise timestamps can pass a cheaper clock.
    #[must_use]
    pub fn clock(mut self, clock: fn() -> u64) -> StoreOptions {
        self.clock = clock;
        self
    }

    /// Refuses an event whose body holds a value with the shape of a well-known credential
    /// (`format-spec/events.md`, "Credential shapes") that is not marked `{"$secret": ...}`:
    /// the append fails with [`ErrorKind::UnmarkedSecret`] and writes nothing (a batch
    /// holding one such body writes none). Off, such a body is written as it is; a front end
    /// warns with what [`Task::append_batch_warned`] returns. Events that recovery
    /// writes and `assistant/delta` text are never checked. Default: off.
    #[must_use]
    pub fn refuse_unmarked_secrets(mut self, on: bool) -> StoreOptions {
        self.refuse_unmarked_secrets = on;
        self
    }

    /// Event types whose appends are `Replicated` ([`AppendOptions::replicated`]) unless the
    /// caller asks for it anyway: for example `tool/result` (a payment's receipt) or
    /// `approval/decision`. Such an append needs the store to be replicating
    /// ([`Store::replicate`]). Default: none.
    #[must_use]
    pub fn replicated_types(mut self, types: &[EventType]) -> StoreOptions {
        self.replicated_types = types.to_vec();
        self
    }
}

fn system_clock_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| {
        d.as_secs().saturating_mul(1_000_000).saturating_add(u64::from(d.subsec_micros()))
    })
}

/// How to append one event or batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendOptions {
    /// Compare-and-set: the task revision the update was based on. A stale one fails with
    /// [`ErrorKind::StaleRevision`] and writes nothing. Default: none.
    pub expected_revision: Option<u64>,
    /// The durability to wait for. Default: the event type's
    /// ([`EventType::default_durability`]). A caller may ask for more; asking for less than
    /// `Synced` for a high-risk type is refused with [`ErrorKind::InvalidEvent`].
    pub durability: Option<Durability>,
    /// The `Replicated` tier (`format-spec/replication.md`, "Replicated appends"): the append
    /// is synced, then returns only once the store's replica holds it. Needs the store to be
    /// replicating ([`Store::replicate`]); without, it is refused and nothing is written
    /// ([`ErrorKind::NotReplicated`] with seq 0). Default: off, unless the event type is one
    /// of [`StoreOptions::replicated_types`].
    pub replicated: bool,
}

impl AppendOptions {
    /// A compare-and-set append based on `revision`.
    #[must_use]
    pub fn expecting(revision: u64) -> AppendOptions {
        AppendOptions { expected_revision: Some(revision), ..AppendOptions::default() }
    }

    /// These options with the `Replicated` tier ([`AppendOptions::replicated`]).
    #[must_use]
    pub fn replicated(self) -> AppendOptions {
        AppendOptions { replicated: true, ..self }
    }
}

/// What an append did.
#[derive(Debug, Clone, PartialEq)]
pub enum Appended {
    /// The event (or batch) was written and meets its durability.
    Written {
        /// Its (first) sequence number.
        seq: Seq,
        /// The task's revision after it (after the last event of a batch).
        revision: u64,
    },
    /// A `tool/call` whose request key (or call id) already has a result: nothing was
    /// written; this is the first result's receipt. Do not run the tool again.
    Duplicate {
        /// The call whose result it is.
        call_id: CallId,
        /// Its receipt.
        receipt: Option<Value>,
        /// The sequence number of that result.
        result_seq: Seq,
        /// The task's current revision.
        revision: u64,
    },
}

pub(crate) struct TaskCell {
    pub(crate) id: TaskId,
    /// Non-delta events folded in log order. Its delta counters, revision and last seq are
    /// stale: the atomics below are the truth for those.
    pub(crate) state: Mutex<TaskState>,
    pub(crate) revision: AtomicU64,
    pub(crate) last_seq: AtomicU64,
    pub(crate) deltas: AtomicU64,
    pub(crate) delta_bytes: AtomicU64,
    /// Whether this store handle holds the task: it has repaired what an earlier holder left
    /// (`format-spec/harness-recovery.md`, "Holders"), or the task had no event at open. Set
    /// only under `takeover`; read without it on every checked append.
    pub(crate) held: AtomicBool,
    /// Serialises taking the task over from an earlier holder. Taken before `state`.
    pub(crate) takeover: Mutex<()>,
    /// The task's events that `state` does not hold yet (`harness/lazy.rs`); `None` once
    /// folded. Changed only under `Inner::fold_budget`.
    pub(crate) pending: Mutex<Option<Pending>>,
}

impl TaskCell {
    /// A cell for a task whose folded state is `state`: held at once if it has no event yet,
    /// else left to be taken over from the holder that wrote it.
    pub(crate) fn new(id: TaskId, state: TaskState) -> TaskCell {
        TaskCell {
            held: AtomicBool::new(state.revision == 0),
            takeover: Mutex::new(()),
            revision: AtomicU64::new(state.revision),
            last_seq: AtomicU64::new(state.last_seq),
            deltas: AtomicU64::new(state.execution.deltas),
            delta_bytes: AtomicU64::new(state.execution.delta_bytes),
            state: Mutex::new(state),
            pending: Mutex::new(None),
            id,
        }
    }

    /// The task's full folded state: the locked part with the counters filled in.
    fn snapshot_of(&self, locked: &TaskState) -> TaskState {
        let mut state = locked.clone();
        state.revision = self.revision.load(Ordering::Acquire);
        state.last_seq = self.last_seq.load(Ordering::Acquire);
        state.execution.deltas = self.deltas.load(Ordering::Acquire);
        state.execution.delta_bytes = self.delta_bytes.load(Ordering::Acquire);
        state
    }
}

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
    /// Serialises folding pending tasks (`harness/lazy.rs`) and counts what folds read.
    pub(crate) fold_budget: Mutex<FoldBudget>,
    /// The progress of the replication running in this process, if any
    /// ([`Store::replicate`]), which `Replicated` appends wait on.
    pub(crate) replication: Mutex<Option<Arc<crate::harness::replication_progress::Progress>>>,
}

impl Inner {
    /// Writes the snapshot the policy made due, unless one is being written already. The
    /// event that made it due is written and folded: a failed snapshot must not make an
    /// append look failed. A snapshot is only an accelerator; the failure is kept for
    /// [`Store::last_snapshot_error`] and the next due append tries again.
    ///
    /// With `wait` it waits for a snapshot being written by [`Store::checkpoint`] and writes
    /// its own after it (the snapshot thread); without, it leaves the snapshot to that one (an
    /// appender). Returns whether it wrote a snapshot.
    pub(crate) fn write_policy_snapshot(&self, wait: bool) -> bool {
        let guard = if wait { Some(self.checkpoint.lock()) } else { self.checkpoint.try_lock() };
        let Some(_guard) = guard else { return false };
        let outcome = crate::harness::store_open::checkpoint_locked(self);
        let written = outcome.is_ok();
        *self.snapshot_error.lock() = outcome.err().map(|e| e.to_string());
        written
    }

    /// Whether the policy asks for a snapshot now, the log's last seq being `last`: enough
    /// events or bytes since the newest snapshot, or (with `snapshot_at_turn_end`) a turn
    /// ended since it began.
    pub(crate) fn snapshot_due(&self, last: u64) -> bool {
        let options = &self.options;
        let events = last.saturating_sub(self.snapshot_seq.load(Ordering::Acquire));
        let bytes = self.appended_bytes.load(Ordering::Acquire)
            - self.snapshot_bytes_mark.load(Ordering::Acquire);
        (options.snapshot_every_events > 0 && events >= options.snapshot_every_events)
            || (options.snapshot_every_bytes > 0 && bytes >= options.snapshot_every_bytes)
            || self.turn_ended_since_snapshot.load(Ordering::Acquire)
    }
}

/// A store of the facts of many tasks. Cheap to clone: clones share one open store.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl Drop for Store {
    /// The last handle dropped without [`Store::close`] first waits for a snapshot being
    /// written and stops the snapshot thread without a snapshot still due, so that the store
    /// (and its directory lock) goes away now, on this thread.
    fn drop(&mut self) {
        if let Some(snapshotter) = &self.inner.snapshotter {
            snapshotter.release_if_last(&self.inner);
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
    store: Store,
    cell: Arc<TaskCell>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task").field("id", &self.cell.id).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`: opens the log (recovering its tail), loads the
    /// newest valid snapshot and replays the events after it ([`OpenReport`] says what it
    /// did). Replay reads only each event's envelope; a task's events after the snapshot are
    /// decoded and folded when the task is first touched (`src/harness/lazy.rs`). Writes nothing but what the log's own open writes. The handle is a new holder
    /// of every task in the store: the first [`Store::task`] on each takes it over from the
    /// earlier holder, and [`Store::recover`] takes them all over at once and reports it.
    pub fn open(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        crate::harness::store_open::open(dir.as_ref(), options, false)
    }

    /// Opens the store in `dir` for reading only: no lock, nothing written. Appends,
    /// [`Store::recover`] and [`Store::checkpoint`] fail with [`ErrorKind::ReadOnly`]; use
    /// [`Store::plan_recovery`] for a dry run.
    pub fn open_read_only(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        crate::harness::store_open::open(dir.as_ref(), options, true)
    }

    /// What open found: the snapshot used, the snapshots skipped, the events replayed.
    #[must_use]
    pub fn open_report(&self) -> &OpenReport {
        &self.inner.report
    }

    /// Why the last snapshot the policy tried to write failed, if it did (the appends that
    /// triggered it succeeded; [`Store::checkpoint`] reports its own errors).
    #[must_use]
    pub fn last_snapshot_error(&self) -> Option<String> {
        self.inner.snapshot_error.lock().clone()
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

    /// A handle on task `id`, which need not exist yet (its first event creates it).
    ///
    /// On a writable store, the first handle on a task that an earlier holder wrote (a store
    /// opened before this one: another process, a crashed one, or one closed cleanly) takes
    /// the task over first: it appends and syncs the task's repair batch, as
    /// [`Store::recover`] does, so that no one-time authority, pending cancel or in-flight
    /// call of the earlier holder is inherited (`format-spec/harness-recovery.md`,
    /// "Holders"). Later handles find the task held and write nothing.
    pub fn task(&self, id: &str) -> Result<Task> {
        check_task_id(id)?;
        let existing = self.inner.cells.read().get(id).map(Arc::clone);
        let cell = match existing {
            Some(cell) => cell,
            None => {
                let mut cells = self.inner.cells.write();
                let cell = cells.entry(TaskId(id.to_owned())).or_insert_with(|| {
                    Arc::new(TaskCell::new(TaskId(id.to_owned()), TaskState::default()))
                });
                Arc::clone(cell)
            }
        };
        self.fold_pending(std::slice::from_ref(&cell))?;
        if !cell.held.load(Ordering::Acquire) && !self.inner.log.is_read_only() {
            self.take_over(&cell, Durability::Synced)?;
        }
        Ok(Task { store: self.clone(), cell })
    }

    /// Ends this handle's hold on task `id` and takes the task over again at once, as a new
    /// holder would (`format-spec/harness-recovery.md`, "Holders"): the calls dispatched
    /// without a result get `tool/outcome_unknown`, `once`/`run` approvals and pending
    /// cancels expire, the open turn and step are closed. A served store calls it when the
    /// last client that touched the task leaves, so that a client's authority and open calls
    /// do not outlive it (`format-spec/server.md`, "Holders"). A task without events, or a
    /// read-only store, is left alone.
    ///
    /// # Errors
    ///
    /// When the repair cannot be written (as [`Store::task`]).
    pub fn release_task(&self, id: &str) -> Result<()> {
        let Some(cell) = self.inner.cells.read().get(id).map(Arc::clone) else {
            return Ok(());
        };
        if self.inner.log.is_read_only() {
            return Ok(());
        }
        {
            let _guard = cell.takeover.lock();
            if cell.revision.load(Ordering::Acquire) == 0 {
                return Ok(());
            }
            cell.held.store(false, Ordering::Release);
        }
        self.take_over(&cell, Durability::Synced).map(|_| ())
    }

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

    /// The folded state of task `id`, if it has events.
    ///
    /// A task not folded since open is folded first (`harness/lazy.rs`). Should one of its
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

    /// Makes every event appended so far meet `durability`.
    pub fn flush(&self, durability: Durability) -> Result<()> {
        self.inner.log.flush(durability)
    }

    /// Flushes and closes the store, syncing everything appended. If other clones of this
    /// store (or [`Task`] handles) are still alive, it syncs and leaves the store open for
    /// them: the directory lock is released when the last one is dropped.
    pub fn close(self) -> Result<()> {
        // `Store` has a `Drop`: take a handle of our own, then let this one go.
        let inner = Arc::clone(&self.inner);
        drop(self);
        if let Some(snapshotter) = &inner.snapshotter {
            // The last handle stops the snapshot thread (after a snapshot still due).
            snapshotter.stop_if_last(&inner);
        }
        match Arc::try_unwrap(inner) {
            Ok(inner) => inner.log.close(),
            Err(shared) => shared.log.flush(Durability::Synced),
        }
    }

    pub(crate) fn now_us(&self) -> u64 {
        (self.inner.options.clock)()
    }

    pub(crate) fn cells(&self) -> Vec<Arc<TaskCell>> {
        let mut cells: Vec<Arc<TaskCell>> = self.inner.cells.read().values().cloned().collect();
        cells.sort_by(|a, b| a.id.cmp(&b.id));
        cells
    }
}

impl Task {
    /// The task's id.
    #[must_use]
    pub fn id(&self) -> &TaskId {
        &self.cell.id
    }

    /// Whether this process holds the task (it took it over, or created it): false after
    /// [`Store::release_task`] until a new handle takes it over again.
    pub(crate) fn is_held(&self) -> bool {
        self.cell.held.load(Ordering::Acquire)
    }

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

    /// Appends one streamed `assistant/delta` fragment, `Buffered`: no allocation, one lock,
    /// and no syscall unless the log's buffer is due for a write.
    pub fn delta(&self, text: &str) -> Result<Seq> {
        self.delta_revision(text).map(|(seq, _)| seq)
    }

    /// [`Task::delta`], also returning the task's revision after the fragment: exact even
    /// while other threads append to the task (it is assigned under the log's lock).
    pub fn delta_revision(&self, text: &str) -> Result<(Seq, u64)> {
        check_delta_text(text)?;
        let task = self.cell.id.as_str();
        let len = codec::record_bytes(task, text.len());
        let now = self.store.now_us();
        let cell = &*self.cell;
        let inner = &*self.store.inner;
        let mut assigned = 0;
        let seq = inner.log.append_with(len, Durability::Buffered, |seq, out| {
            let revision = cell.revision.load(Ordering::Relaxed) + 1;
            assigned = revision;
            codec::write_delta(out, task, revision, now, text);
            // Every writer of these counters holds the log's lock: a load and a store suffice.
            cell.revision.store(revision, Ordering::Release);
            cell.last_seq.store(seq.0, Ordering::Release);
            bump(&cell.deltas, 1);
            bump(&cell.delta_bytes, text.len() as u64);
            bump(&inner.appended_bytes, len as u64);
            Ok(())
        })?;
        Ok((seq, assigned))
    }

    /// Appends one event with its type's default durability.
    pub fn append(&self, body: Body) -> Result<Appended> {
        self.append_with(body, AppendOptions::default())
    }

    /// Appends one event: checks it against the task's state (`format-spec/events.md`, "What
    /// the store refuses"), replaces secrets by references, writes it, waits for its
    /// durability and folds it in.
    pub fn append_with(&self, body: Body, options: AppendOptions) -> Result<Appended> {
        self.append_batch_with(vec![body], options)
    }

    /// Appends `bodies` as one atomic batch: after a crash all of them are in the log or none
    /// is. With `options.expected_revision` the whole batch is a compare-and-set. The batch
    /// waits for the strongest durability among its events.
    pub fn append_batch_with(&self, bodies: Vec<Body>, options: AppendOptions) -> Result<Appended> {
        self.store.append_events(&self.cell, bodies, options, false, None)
    }

    /// As [`Task::append_batch_with`], and also returns the unmarked credential-shaped values
    /// the bodies hold, in order (what `format-spec/protocol.md`, "Warnings", warns about),
    /// found in the bytes the append encodes anyway: a door that warns pays one pass over
    /// them, not a second encoding. Empty when the append is refused.
    pub fn append_batch_warned(
        &self,
        bodies: Vec<Body>,
        options: AppendOptions,
    ) -> Result<(Appended, Vec<secret_shapes::Finding>)> {
        let mut findings = Vec::new();
        let appended =
            self.store.append_events(&self.cell, bodies, options, false, Some(&mut findings))?;
        Ok((appended, findings))
    }
}

impl Store {
    /// Whether one of `bodies` is of a type of [`StoreOptions::replicated_types`] (none by
    /// default: then nothing is looked at).
    fn replicated_by_type(&self, bodies: &[Body]) -> bool {
        let types = &self.inner.options.replicated_types;
        !types.is_empty()
            && bodies.iter().any(|b| b.event_type().is_some_and(|t| types.contains(&t)))
    }

    /// The checked, atomic append of `bodies` to the task of `cell`.
    pub(crate) fn append_events(
        &self,
        cell: &TaskCell,
        mut bodies: Vec<Body>,
        options: AppendOptions,
        by_recovery: bool,
        mut findings: Option<&mut Vec<secret_shapes::Finding>>,
    ) -> Result<Appended> {
        if bodies.is_empty() || bodies.len() > EVENT_BATCH_MAX {
            return Err(ErrorKind::LimitExceeded {
                what: "events in one batch (at least 1)",
                value: bodies.len() as u64,
                limit: EVENT_BATCH_MAX as u64,
            }
            .into());
        }
        let mut durability = Durability::Buffered;
        let replicated = !by_recovery && (options.replicated || self.replicated_by_type(&bodies));
        let progress = if replicated {
            let progress = self.inner.replication.lock().clone();
            let Some(progress) = progress else {
                return Err(ErrorKind::NotReplicated {
                    seq: 0,
                    reason: "this store is not replicating".to_owned(),
                }
                .into());
            };
            durability = Durability::Synced;
            Some(progress)
        } else {
            None
        };
        let mut encoded = Vec::with_capacity(bodies.len());
        // Bodies are written in the schemas of the log's format, so that a format-1 log stays
        // readable by the release that wrote it (`format-spec/events.md`, "Schema versions").
        let format_version = self.inner.log.format_version();
        let refuse_unmarked = (!by_recovery && self.inner.options.refuse_unmarked_secrets)
            .then_some(cell.id.as_str());
        for body in &mut bodies {
            if !by_recovery {
                durability = durability.max(resolve_durability(body, options.durability)?);
            }
            encoded.push(prepare(body, format_version, refuse_unmarked, findings.as_deref_mut())?);
        }
        if by_recovery {
            // Recovery batches every task's repair and syncs once at the end.
            durability = options.durability.unwrap_or(Durability::Synced);
        }
        // A `Task` exists only once `Store::task` took its task over (on a writable store).
        debug_assert!(
            by_recovery || cell.held.load(Ordering::Acquire) || self.inner.log.is_read_only()
        );
        let now = self.now_us();
        let mut locked = cell.state.lock();
        // Check each event against the state as the batch's earlier events leave it.
        let mut scratch: Option<TaskState> = None;
        for (i, body) in bodies.iter().enumerate() {
            let view = scratch.as_ref().unwrap_or(&locked);
            match check::check(&cell.id, view, body, now, by_recovery)? {
                Verdict::Write => {}
                Verdict::Duplicate { call_id, receipt, result_seq } if bodies.len() == 1 => {
                    return Ok(Appended::Duplicate {
                        call_id,
                        receipt,
                        result_seq: Seq(result_seq),
                        revision: cell.revision.load(Ordering::Acquire),
                    });
                }
                Verdict::Duplicate { call_id, .. } => {
                    return Err(ErrorKind::InvalidEvent {
                        event_type: EventType::ToolCall.name().to_owned(),
                        reason: format!(
                            "call {:?} already completed; a batch cannot hold a duplicate \
                             dispatch: send it alone to get its receipt",
                            call_id.0
                        ),
                    }
                    .into());
                }
            }
            if bodies.len() > 1 && i + 1 < bodies.len() {
                let state = scratch.get_or_insert_with(|| check::batch_view(&locked, &bodies));
                fold::apply_to_task(state, &probe_event(&cell.id, body.clone(), now));
            }
        }
        let task = cell.id.as_str();
        let mut records: Vec<Vec<u8>> =
            encoded.iter().map(|body| codec::encode_parts(task, 0, now, body)).collect();
        let bytes: usize = records.iter().map(Vec::len).sum();
        let count = records.len() as u64;
        let gate = |seq: Seq, records: &mut [Vec<u8>]| -> Result<()> {
            let current = cell.revision.load(Ordering::Acquire);
            if let Some(expected) = options.expected_revision
                && expected != current
            {
                return Err(ErrorKind::StaleRevision {
                    task: task.to_owned(),
                    expected,
                    actual: current,
                }
                .into());
            }
            for (i, record) in records.iter_mut().enumerate() {
                codec::set_revision(record, current + 1 + i as u64);
            }
            cell.revision.store(current + count, Ordering::Release);
            cell.last_seq.store(seq.0 + count - 1, Ordering::Release);
            bump(&self.inner.appended_bytes, bytes as u64);
            Ok(())
        };
        let first = if records.len() == 1 {
            let record = &mut records[0];
            let len = record.len();
            self.inner.log.append_with(len, durability, |seq, out| {
                gate(seq, std::slice::from_mut(record))?;
                out.copy_from_slice(record);
                Ok(())
            })?
        } else {
            self.inner.log.append_batch_with(&mut records, durability, gate)?
        };
        // Fold in log order: the events are durable as asked, and the task lock is still held.
        let mut revision = 0;
        let mut turn_ended = false;
        for (i, ((body, record), (_, schema, _, _))) in
            bodies.into_iter().zip(&records).zip(&encoded).enumerate()
        {
            revision = u64::from_le_bytes(
                record[codec::REVISION_OFFSET..codec::REVISION_OFFSET + 8]
                    .try_into()
                    .expect("8 bytes"),
            );
            turn_ended |= matches!(body, Body::TurnEnd(_));
            let event = Event {
                seq: Seq(first.0 + i as u64),
                task: cell.id.clone(),
                revision,
                timestamp_us: now,
                schema: *schema,
                body,
            };
            fold::apply_to_task(&mut locked, &event);
        }
        drop(locked);
        let last = Seq(first.0 + count - 1);
        self.after_append(last, turn_ended);
        if let Some(progress) = progress {
            progress.wait_shipped(last.0)?;
        }
        Ok(Appended::Written { seq: first, revision })
    }

    /// The snapshot policy: counts what was appended and writes a snapshot when one is due.
    fn after_append(&self, last: Seq, turn_ended: bool) {
        let inner = &self.inner;
        if turn_ended && inner.options.snapshot_at_turn_end {
            inner.turn_ended_since_snapshot.store(true, Ordering::Release);
        }
        if inner.snapshot_due(last.0) {
            match &inner.snapshotter {
                Some(snapshotter) => snapshotter.request(),
                None => {
                    inner.write_policy_snapshot(false);
                }
            }
        }
    }
}

/// Checks the text of an `assistant/delta` fragment against its bound: what
/// [`Task::delta`] refuses, and what a client of a served store refuses before sending.
pub(crate) fn check_delta_text(text: &str) -> Result<()> {
    if text.len() > DELTA_TEXT_BYTES_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "assistant/delta text bytes",
            value: text.len() as u64,
            limit: DELTA_TEXT_BYTES_MAX as u64,
        }
        .into());
    }
    Ok(())
}

/// Adds `n` to a counter whose every writer holds the log's writer lock.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Release);
}

fn probe_event(task: &TaskId, body: Body, now: u64) -> Event {
    Event { seq: Seq(0), task: task.clone(), revision: 0, timestamp_us: now, schema: 1, body }
}

/// The durability of `body`: the type's default, or the caller's if it is not less than
/// `Synced` for a high-risk type.
fn resolve_durability(body: &Body, asked: Option<Durability>) -> Result<Durability> {
    let Some(event_type) = body.event_type() else { return Ok(Durability::Synced) };
    let default = event_type.default_durability();
    match asked {
        None => Ok(default),
        Some(asked) if event_type.is_high_risk() && asked < default => {
            Err(ErrorKind::InvalidEvent {
                event_type: event_type.name().to_owned(),
                reason: format!(
                    "a {} event is high-risk and must be synced; {asked} was asked for",
                    event_type.name()
                ),
            }
            .into())
        }
        Some(asked) => Ok(asked),
    }
}

/// Replaces secrets by references and fills a `tool/call`'s argument digest.
/// Returns the body's encoding for a log of segment format `format_version`
/// (`codec::encode_body`). With `refuse_unmarked` (the task's id), a body holding an unmarked
/// credential-shaped value is refused ([`ErrorKind::UnmarkedSecret`]); `findings` collects
/// such values instead, for a warning.
fn prepare(
    body: &mut Body,
    format_version: u16,
    refuse_unmarked: Option<&str>,
    findings: Option<&mut Vec<secret_shapes::Finding>>,
) -> Result<codec::EncodedBody> {
    let Some(event_type) = body.event_type() else {
        return codec::encode_body(body, format_version);
    };
    if event_type == EventType::AssistantDelta {
        return codec::encode_body(body, format_version);
    }
    if let Body::ToolCall(call) = body
        && let Some(args) = &call.args
    {
        // Over the arguments with every secret masked: stable across dispatches, and it
        // reveals nothing about a secret.
        let mut masked = args.clone();
        secret::mask(&mut masked);
        let digest = request_key::args_digest(&masked);
        // A digest the caller sent must be the one of its arguments: the call-id and
        // duplicate checks compare digests, so a wrong one would pass a changed request off
        // as the same.
        if let Some(given) = &call.args_digest
            && *given != digest
        {
            return Err(ErrorKind::InvalidEvent {
                event_type: event_type.name().to_owned(),
                reason: format!(
                    "args_digest {given:?} is not the digest of args ({digest}); leave \
                     args_digest out and the store computes it"
                ),
            }
            .into());
        }
        call.args_digest = Some(digest);
    }
    let encoded = codec::encode_body(body, format_version)?;
    let found = if refuse_unmarked.is_some() || findings.is_some() {
        secret_shapes::find_in_json(&encoded.3)
    } else {
        Vec::new()
    };
    if let Some(task) = refuse_unmarked
        && let Some(finding) = found.first().cloned()
    {
        return Err(ErrorKind::UnmarkedSecret {
            task: task.to_owned(),
            event_type: event_type.name().to_owned(),
            path: finding.path,
            shape: finding.shape,
        }
        .into());
    }
    if let Some(findings) = findings {
        findings.extend(found);
    }
    // Most bodies hold no secret: the JSON text tells without building a tree of values.
    if !secret::json_mentions_secret(&encoded.3) {
        return Ok(encoded);
    }
    let mut value = codec::body_to_value(body);
    if secret::redact(&mut value) == 0 {
        return Ok(encoded);
    }
    *body = codec::body_from_value(event_type, value).map_err(|e| {
        Error::from(ErrorKind::InvalidEvent {
            event_type: event_type.name().to_owned(),
            reason: format!("a secret replaced a field of the wrong type: {e}"),
        })
    })?;
    codec::encode_body(body, format_version)
}
