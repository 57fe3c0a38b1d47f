//! Opening a store and writing its snapshots: load the newest valid snapshot, replay only
//! the events after it (R6, R7), and fold the log into a snapshot on demand or by policy.
//!
//! A snapshot is only an accelerator: one that is damaged, of an unknown version, or claims
//! to cover events the log does not hold is skipped with its reason in [`OpenReport`], and
//! the state is rebuilt from an older snapshot or from the first event.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::error::{ErrorKind, Result, SnapshotFault};
use crate::fs::Fs;
use crate::harness::codec;
use crate::harness::fold;
use crate::harness::snapshot::{self, SnapshotMeta};
use crate::harness::state::{STATE_SCHEMA, State};
use crate::harness::store::{Inner, Store, StoreOptions, TaskCell};
use crate::limits::SNAPSHOTS_KEPT;
use crate::log::Log;
use crate::recovery::RecoveryReport;
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
    /// Events replayed after the snapshot (all events without one).
    pub replayed_events: u64,
    /// Tasks in the store.
    pub tasks: usize,
}

/// The state folded from the newest usable snapshot and the events after it, through
/// `through`.
pub(crate) struct Folded {
    pub(crate) state: State,
    pub(crate) snapshot: Option<SnapshotMeta>,
    pub(crate) skipped: Vec<(PathBuf, String)>,
    pub(crate) replayed: u64,
}

pub(crate) fn open(dir: &Path, options: StoreOptions, read_only: bool) -> Result<Store> {
    snapshot::refuse_newer(&*options.log.fs, dir)?;
    let log = if read_only {
        Log::open_read_only(dir, options.log.clone())?
    } else {
        Log::open(dir, options.log.clone())?
    };
    let fs = Arc::clone(&options.log.fs);
    let through = log.last_seq().map_or(0, |s| s.0);
    let folded = fold_log(&*fs, dir, &log, through, true)?;
    let cells: HashMap<_, _> = folded
        .state
        .tasks
        .iter()
        .map(|(id, task)| (id.clone(), Arc::new(TaskCell::new(id.clone(), task.clone()))))
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
        inner: Arc::new(Inner {
            fs,
            dir: dir.to_path_buf(),
            report,
            log,
            options,
            cells: RwLock::new(cells),
            checkpoint: Mutex::new(()),
            snapshot_seq: AtomicU64::new(snapshot_seq),
            appended_bytes: AtomicU64::new(0),
            snapshot_bytes_mark: AtomicU64::new(0),
            snapshot_error: Mutex::new(None),
        }),
    })
}

/// Folds the log through `through`, starting from the newest usable snapshot when
/// `use_snapshot`, else from the first event.
pub(crate) fn fold_log(
    fs: &dyn Fs,
    dir: &Path,
    log: &Log,
    through: u64,
    use_snapshot: bool,
) -> Result<Folded> {
    let mut state = State::default();
    let mut snapshot = None;
    let mut skipped = Vec::new();
    if use_snapshot {
        let mut decoded: Option<State> = None;
        let loaded = snapshot::load_newest(fs, dir, |meta, body| {
            let candidate = decode_state(meta, body)?;
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
    let from = snapshot.as_ref().map_or(0, |m| m.covered_seq.0) + 1;
    let mut replayed = 0;
    if from <= through {
        let mut reader = log.read_from(Seq(from))?;
        while let Some(record) = reader.next_ref() {
            let (seq, payload) = record?;
            if seq.0 > through {
                break;
            }
            fold::apply(&mut state, &codec::decode(seq, payload)?);
            replayed += 1;
        }
    }
    state.last_seq = state.last_seq.max(through);
    Ok(Folded { state, snapshot, skipped, replayed })
}

fn decode_state(meta: &SnapshotMeta, body: &[u8]) -> Result<State> {
    let bad = |what: String| {
        crate::error::Error::from(ErrorKind::CorruptSnapshot {
            path: meta.path.clone(),
            reason: SnapshotFault::BadBody(what),
        })
    };
    snapshot::check_state_schema(&meta.path, meta.state_schema)?;
    let state: State = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    if state.last_seq != meta.covered_seq.0 {
        return Err(bad(format!(
            "state folds events through {} but the header says {}",
            state.last_seq, meta.covered_seq.0
        )));
    }
    Ok(state)
}

impl Store {
    /// Writes a snapshot of every task's state now (temp file, fsync, rename, directory
    /// fsync) and keeps the newest few. The state is folded from the previous snapshot and
    /// the log, never taken from memory, so a snapshot always equals the fold of its events.
    pub fn checkpoint(&self) -> Result<SnapshotMeta> {
        let _guard = self.inner.checkpoint.lock();
        checkpoint_locked(self)
    }

    /// Rebuilds the state from the events alone and compares it with the newest snapshot
    /// and with the live state. Returns the snapshot checked (if any).
    pub fn verify_deep(&self) -> Result<DeepVerify> {
        let inner = &self.inner;
        let through = inner.log.last_seq().map_or(0, |s| s.0);
        let latest = fold_log(&*inner.fs, &inner.dir, &inner.log, through, true)?;
        let snapshot = latest.snapshot.clone();
        let snapshot_matches = match &snapshot {
            Some(meta) => {
                let rebuilt =
                    fold_log(&*inner.fs, &inner.dir, &inner.log, meta.covered_seq.0, false)?;
                let from_file =
                    fold_log(&*inner.fs, &inner.dir, &inner.log, meta.covered_seq.0, true)?;
                Some(rebuilt.state == from_file.state)
            }
            None => None,
        };
        inner.log.flush(crate::types::Durability::Flushed).ok();
        let live = self.state();
        let rebuilt = fold_log(&*inner.fs, &inner.dir, &inner.log, live.last_seq, false)?;
        Ok(DeepVerify {
            snapshot,
            snapshot_matches,
            live_matches: rebuilt.state == live,
            events: rebuilt.replayed,
            skipped_snapshots: latest.skipped,
        })
    }
}

impl Store {
    /// Reclaims disk space, explicitly: deletes the log segments whose every event is
    /// covered by the *oldest* valid snapshot kept, so that every kept snapshot can still be
    /// completed by replay and a damaged newest one still falls back to an older one. Full
    /// replay from the first event, [`Store::verify_deep`] and the history before the first
    /// kept event are no longer possible afterwards. Nothing else ever deletes a segment.
    /// Returns the segments and bytes removed (0 without a valid snapshot).
    pub fn reclaim(&self) -> Result<(usize, u64)> {
        let inner = &self.inner;
        let _guard = inner.checkpoint.lock();
        let mut oldest_valid = None;
        for file in snapshot::list(&*inner.fs, &inner.dir)? {
            let Ok(bytes) = inner.fs.map(&file.path) else { continue };
            let usable = snapshot::decode(&file.path, &bytes)
                .and_then(|decoded| snapshot::check_state_schema(&file.path, decoded.state_schema));
            if usable.is_ok() {
                oldest_valid = Some(file.covered_seq);
                break;
            }
        }
        match oldest_valid {
            Some(covered) => inner.log.reclaim_before(Seq(covered.0 + 1)),
            None => Ok((0, 0)),
        }
    }
}

/// The outcome of [`Store::verify_deep`].
#[derive(Debug, Clone)]
pub struct DeepVerify {
    /// The newest valid snapshot.
    pub snapshot: Option<SnapshotMeta>,
    /// Whether it equals the fold of the events it covers (`None`: no snapshot).
    pub snapshot_matches: Option<bool>,
    /// Whether the live state equals the fold of every event.
    pub live_matches: bool,
    /// Events folded.
    pub events: u64,
    /// Snapshots that could not be used, with the reason.
    pub skipped_snapshots: Vec<(PathBuf, String)>,
}

pub(crate) fn checkpoint_locked(store: &Store) -> Result<SnapshotMeta> {
    let inner = &store.inner;
    if inner.log.is_read_only() {
        return Err(ErrorKind::ReadOnly.into());
    }
    let appended_before = inner.appended_bytes.load(Ordering::Acquire);
    inner.log.flush(crate::types::Durability::Flushed)?;
    let through = inner.log.last_seq().map_or(0, |s| s.0);
    let folded = fold_log(&*inner.fs, &inner.dir, &inner.log, through, true)?;
    let body = serde_json::to_vec(&folded.state).map_err(|e| ErrorKind::InvalidEvent {
        event_type: "snapshot".to_owned(),
        reason: format!("cannot serialise the state: {e}"),
    })?;
    let meta = snapshot::write(&*inner.fs, &inner.dir, Seq(through), STATE_SCHEMA, &body)?;
    snapshot::prune(&*inner.fs, &inner.dir, SNAPSHOTS_KEPT)?;
    inner.snapshot_seq.store(through, Ordering::Release);
    // Bytes appended from the read above on count towards the next snapshot; the few of them
    // this one already covers only make the next one come a little earlier.
    inner.snapshot_bytes_mark.store(appended_before, Ordering::Release);
    Ok(meta)
}
