//! Keeping a store: snapshots (the policy that writes one when due, and
//! [`Store::checkpoint`]), [`Store::verify_deep`], which rebuilds the state and compares it,
//! and reclaiming space ([`Store::purge`], `harness/purge.rs`).

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use crate::error::{ErrorKind, Result};
use crate::harness::fold;
use crate::harness::purge::{self, PurgeReport};
use crate::harness::snapshot::{self, SnapshotMeta};
use crate::harness::state::{STATE_SCHEMA, State};
use crate::limits::SNAPSHOTS_KEPT;
use crate::types::Seq;

use super::read::fold_log;
use super::{Inner, Store};

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
        let outcome = checkpoint_locked(self);
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

impl Store {
    /// Why the last snapshot the policy tried to write failed, if it did (the appends that
    /// triggered it succeeded; [`Store::checkpoint`] reports its own errors).
    #[must_use]
    pub fn last_snapshot_error(&self) -> Option<String> {
        self.inner.snapshot_error.lock().clone()
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
        let (mut rebuilt, rebuilt_from) = self.rebuild_base(first_seq, through)?;
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
        // A state read from a snapshot of an older state schema lacks the fields the newer
        // schemas added for the events before it: those are compared at the older schema.
        let base_schema = rebuilt_from.as_ref().map_or(STATE_SCHEMA, |m| m.state_schema);
        let live_schema = inner.report.snapshot.as_ref().map_or(STATE_SCHEMA, |m| m.state_schema);
        let snapshot_matches = match (&snapshot, from_file) {
            // The base is the rebuild's starting point, so comparing it with the rebuild would
            // prove nothing: it was only checked for integrity, by decoding it.
            (Some(meta), _) if meta.covered_seq.0 <= base_seq && rebuilt_from.is_some() => None,
            (Some(meta), Some(from_file)) => {
                fold_through(&mut rebuilt, meta.covered_seq.0)?;
                let schema = meta.state_schema.min(base_schema);
                Some(rebuilt.as_schema(schema) == from_file.as_schema(schema))
            }
            _ => None,
        };
        fold_through(&mut rebuilt, live.last_seq)?;
        Ok(DeepVerify {
            snapshot,
            snapshot_matches,
            live_matches: rebuilt.as_schema(live_schema.min(base_schema))
                == live.as_schema(live_schema.min(base_schema)),
            rebuilt_from,
            events: replayed,
            skipped_snapshots: latest.skipped,
        })
    }

    /// Where [`Store::verify_deep`] rebuilds from: the empty state, or, when the log's first
    /// seq `first_seq` is past 1 (segments were reclaimed), the oldest usable snapshot that
    /// the kept log continues, through `through` at most.
    fn rebuild_base(&self, first_seq: u64, through: u64) -> Result<(State, Option<SnapshotMeta>)> {
        if first_seq <= 1 {
            return Ok((State::default(), None));
        }
        let inner = &self.inner;
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
        Ok((state, Some(meta)))
    }

    /// Reclaims disk space, explicitly: deletes the log segments whose every event is
    /// covered by the *oldest* valid snapshot kept, so that every kept snapshot can still be
    /// completed by replay and a damaged newest one still falls back to an older one, and
    /// reports what it did. Full replay from the first event and the history before the first
    /// kept event are no longer possible afterwards ([`Store::verify_deep`] then rebuilds from
    /// the oldest valid snapshot). Nothing else ever deletes a segment. Without a valid
    /// snapshot nothing is removed.
    ///
    /// # Errors
    ///
    /// [`crate::ErrorKind::ReadOnly`] for a read-only store; an I/O error listing the
    /// snapshots or removing a segment.
    pub fn purge(&self) -> Result<PurgeReport> {
        let inner = &self.inner;
        // Reclaiming may remove segments holding events of tasks not folded yet.
        self.fold_all_pending()?;
        // No snapshot is written or pruned meanwhile: the oldest valid one stays the oldest.
        let _guard = inner.checkpoint.lock();
        purge::reclaim_covered(&*inner.fs, &inner.dir, &inner.log)
    }

    /// What [`Store::purge`] would remove now, removing nothing: [`purge::plan_purge`] on this
    /// store's log.
    ///
    /// # Errors
    ///
    /// An I/O error listing the snapshots or the segments.
    pub fn plan_purge(&self) -> Result<PurgeReport> {
        purge::plan_purge(&*self.inner.fs, &self.inner.dir, &self.inner.log)
    }

    /// [`Store::purge`], returning only the segments and bytes removed (0 without a valid
    /// snapshot).
    ///
    /// # Errors
    ///
    /// As [`Store::purge`].
    pub fn reclaim(&self) -> Result<(usize, u64)> {
        let report = self.purge()?;
        Ok((report.segments.len(), report.removed_bytes))
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
