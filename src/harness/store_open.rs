//! Opening a store and writing its snapshots: load the newest valid snapshot, replay only
//! the events after it (R6, R7), and fold the log into a snapshot on demand or by policy.
//!
//! A snapshot is only an accelerator: one that is damaged, of an unknown version, or claims
//! to cover events the log does not hold is skipped with its reason in [`OpenReport`], and
//! the state is rebuilt from an older snapshot or from the first event.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::engine::log::Log;
use crate::engine::recovery::RecoveryReport;
use crate::error::{ErrorKind, Result, SnapshotFault};
use crate::fs::Fs;
use crate::harness::codec;
use crate::harness::fold;
use crate::harness::ids::TaskId;
use crate::harness::lazy::{self, FoldBudget, Pending};
use crate::harness::snapshot::{self, SnapshotMeta};
use crate::harness::snapshotter::Snapshotter;
use crate::harness::state::{STATE_SCHEMA, State, TaskState};
use crate::harness::store::{Inner, Store, StoreOptions, TaskCell};
use crate::limits::SNAPSHOTS_KEPT;
use crate::types::Seq;

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

/// The name of the socket file inside the store directory, where a served store listens
/// (`format-spec/server.md`).
pub const SOCKET_FILE: &str = "factlog.sock";

/// The socket path of the store in `dir`.
#[must_use]
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_FILE)
}

pub(crate) fn open(dir: &Path, options: StoreOptions, read_only: bool) -> Result<Store> {
    let background = options.log.background_threads;
    snapshot::refuse_newer(&*options.log.fs, dir)?;
    let log = if read_only {
        Log::open_read_only(dir, options.log.clone())?
    } else {
        let log = Log::open(dir, options.log.clone())?;
        // This process holds the store now, so no server serves it: a socket file left by
        // a server that was killed would make other processes take the store for served
        // (`served::held_by_another`) and fail to connect instead of being told who holds
        // it. `Store::serve` creates a new one. A server killed between binding its socket
        // and moving it into place leaves `factlog.sock.new`, removed as well.
        let socket = socket_path(dir);
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_file(socket.with_extension("sock.new"));
        log
    };
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
    // fold folds them all (`harness/lazy.rs`).
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
        }),
    })
}

/// The newest usable snapshot and the events after it through `through`, read but folded
/// only lazily (`harness/lazy.rs`): the state holds every task with its revision, last seq
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

/// Refuses a replay from `from` when the log's first seq is later (segments were reclaimed)
/// and no valid snapshot holds the events before it: the error names the snapshot that should
/// have ([`crate::CorruptionReason::BaseSnapshotLost`]).
fn refuse_lost_base(fs: &dyn Fs, dir: &Path, log: &Log, from: u64) -> Result<()> {
    let first = log.first_seq()?.0;
    if from < first {
        let checked = snapshot::check_all(fs, dir, first)?;
        if let Some(lost) = snapshot::base_lost(dir, first, &checked.files) {
            return Err(lost);
        }
    }
    Ok(())
}

/// A state to replay from, the snapshot it was loaded from, and the snapshots skipped.
type Base = (State, Option<SnapshotMeta>, Vec<(PathBuf, String)>);

/// The state to replay from: the newest usable snapshot's when `use_snapshot` (with its meta
/// and the snapshots skipped), else the empty state.
fn load_base(fs: &dyn Fs, dir: &Path, through: u64, use_snapshot: bool) -> Result<Base> {
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

impl Store {
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

    /// Writes a snapshot of every task's state now (temp file, fsync, rename, directory
    /// fsync) and keeps the newest few. The state is folded from the previous snapshot and
    /// the log, never taken from memory, so a snapshot always equals the fold of its events.
    pub fn checkpoint(&self) -> Result<SnapshotMeta> {
        let _guard = self.inner.checkpoint.lock();
        checkpoint_locked(&self.inner)
    }

    /// Rebuilds the state from the events and compares it with the newest snapshot and with
    /// the live state.
    ///
    /// The rebuild starts from the first event, or, when segments were reclaimed
    /// ([`Store::reclaim`]), from the oldest valid snapshot that the kept log continues
    /// ([`DeepVerify::rebuilt_from`]). The newest snapshot is compared with the rebuild folded
    /// up to the seq it covers, unless it is that base itself, and the live state with the
    /// rebuild folded through the live last seq.
    ///
    /// Fails with [`ErrorKind::Reclaimed`] when segments were reclaimed and no valid snapshot
    /// covers them: the events before the log's first seq are then lost.
    pub fn verify_deep(&self) -> Result<DeepVerify> {
        let inner = &self.inner;
        let through = inner.log.last_seq().map_or(0, |s| s.0);
        let latest = fold_log(&*inner.fs, &inner.dir, &inner.log, through, true, None)?;
        let snapshot = latest.snapshot.clone();
        // The newest snapshot's own state, as an open would load it, to compare with the
        // rebuild at the seq it covers.
        let from_file = match &snapshot {
            Some(meta) => Some(
                fold_log(&*inner.fs, &inner.dir, &inner.log, meta.covered_seq.0, true, None)?.state,
            ),
            None => None,
        };
        inner.log.flush(crate::types::Durability::Flushed).ok();
        let live = self.state();
        let first_seq = inner.log.first_seq()?.0;
        let (mut rebuilt, rebuilt_from) = if first_seq > 1 {
            // The events before `first_seq` are gone, so the rebuild has to start from a
            // snapshot. The oldest usable one is checked against the most events; a snapshot
            // is usable under the rules an open applies to it.
            let base = snapshot::list(&*inner.fs, &inner.dir)?
                .iter()
                .filter(|f| f.covered_seq.0 + 1 >= first_seq && f.covered_seq.0 <= through)
                .find_map(|file| snapshot::load(&*inner.fs, file).ok());
            let Some((meta, state)) = base else {
                let checked = snapshot::check_all(&*inner.fs, &inner.dir, first_seq)?;
                let lost = snapshot::base_lost(&inner.dir, first_seq, &checked.files);
                return Err(lost.unwrap_or_else(|| {
                    ErrorKind::Reclaimed { requested: 1, first_available: first_seq }.into()
                }));
            };
            (state, Some(meta))
        } else {
            (State::default(), None)
        };
        let base_seq = rebuilt_from.as_ref().map_or(0, |m| m.covered_seq.0);
        // One pass over the events serves both comparisons: the rebuild reaches the newest
        // snapshot's seq on its way to the live state's. The reader is taken after the live
        // state, so it holds every event that state includes.
        let mut events = self.events(Seq(base_seq + 1))?.peekable();
        let mut replayed = 0;
        let mut fold_through = |state: &mut State, to: u64| -> Result<()> {
            // An event after `to` stays in the reader for the next call; an error is taken,
            // so that it is returned.
            let within = |event: &Result<crate::harness::Event>| {
                event.as_ref().map_or(true, |e| e.seq.0 <= to)
            };
            while let Some(event) = events.next_if(within) {
                fold::apply(state, &event?);
                replayed += 1;
            }
            state.last_seq = state.last_seq.max(to);
            Ok(())
        };
        let snapshot_matches = match (&snapshot, from_file) {
            // The base is the rebuild's starting point, so comparing it with the rebuild would
            // prove nothing: it was only checked for integrity, by decoding it.
            (Some(meta), _) if meta.covered_seq.0 <= base_seq && rebuilt_from.is_some() => None,
            (Some(meta), Some(from_file)) => {
                fold_through(&mut rebuilt, meta.covered_seq.0)?;
                Some(rebuilt == from_file)
            }
            _ => None,
        };
        fold_through(&mut rebuilt, live.last_seq)?;
        Ok(DeepVerify {
            snapshot,
            snapshot_matches,
            live_matches: rebuilt == live,
            rebuilt_from,
            events: replayed,
            skipped_snapshots: latest.skipped,
        })
    }
}

/// The outcome of [`Store::verify_deep`].
#[derive(Debug, Clone)]
pub struct DeepVerify {
    /// The newest valid snapshot.
    pub snapshot: Option<SnapshotMeta>,
    /// Whether it equals the rebuild folded up to the seq it covers. `None`: no snapshot, or
    /// the snapshot is [`DeepVerify::rebuilt_from`] itself, whose events were reclaimed, so it
    /// could only be checked for integrity.
    pub snapshot_matches: Option<bool>,
    /// Whether the live state equals the rebuild folded through the live last seq.
    pub live_matches: bool,
    /// The snapshot the rebuild started from: the oldest valid one the kept log continues,
    /// when segments were reclaimed. `None`: the rebuild started from the first event.
    pub rebuilt_from: Option<SnapshotMeta>,
    /// Events folded into the rebuild (after [`DeepVerify::rebuilt_from`], if any).
    pub events: u64,
    /// Snapshots that could not be used, with the reason.
    pub skipped_snapshots: Vec<(PathBuf, String)>,
}

pub(crate) fn checkpoint_locked(inner: &Inner) -> Result<SnapshotMeta> {
    if inner.log.is_read_only() {
        return Err(ErrorKind::ReadOnly.into());
    }
    let appended_before = inner.appended_bytes.load(Ordering::Acquire);
    // A turn that ends from here on asks for the next snapshot.
    inner.turn_ended_since_snapshot.store(false, Ordering::Release);
    // A snapshot covers only durable events: were it to cover events a power loss then took,
    // a later holder would write other events under the same seqs and the next open would
    // load the snapshot's state in place of theirs (a call repaired by a takeover would come
    // back as dispatched). So everything up to `through` is synced before it is folded.
    let through = inner.log.last_seq().map_or(0, |s| s.0);
    inner.log.flush(crate::types::Durability::Synced)?;
    // The log mark vouches for every event the snapshot covers, so that their loss is never
    // taken for a tear (`format-spec/mark.md`).
    inner.log.update_mark_now()?;
    // The folded state is dropped once serialised, before the body is compressed: the two
    // never need to be in memory together with the compressor.
    let body = {
        let folded = fold_log(&*inner.fs, &inner.dir, &inner.log, through, true, None)?;
        serde_json::to_vec(&folded.state).map_err(|e| ErrorKind::InvalidEvent {
            event_type: "snapshot".to_owned(),
            reason: format!("cannot serialise the state: {e}"),
        })?
    };
    let meta = snapshot::write(&*inner.fs, &inner.dir, Seq(through), STATE_SCHEMA, &body)?;
    snapshot::prune(&*inner.fs, &inner.dir, SNAPSHOTS_KEPT)?;
    inner.snapshot_seq.store(through, Ordering::Release);
    // Bytes appended from the read above on count towards the next snapshot; the few of them
    // this one already covers only make the next one come a little earlier.
    inner.snapshot_bytes_mark.store(appended_before, Ordering::Release);
    Ok(meta)
}
