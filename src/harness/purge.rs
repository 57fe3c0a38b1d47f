//! Reclaiming disk space on request (`format-spec/snapshot.md`, "Reclaiming space"): the
//! sealed segments whose every event the *oldest* valid snapshot covers are deleted, and a
//! [`PurgeReport`] says which snapshot decided, which were passed over as invalid, and what
//! went. [`Store::purge`] is the one implementation: [`Store::reclaim`], `factlog purge` and a
//! served store's `purge` request (`format-spec/server.md`) all run it; [`plan_purge`] computes
//! the same set read-only for a dry run.
//!
//! A snapshot is valid when [`snapshot::load`] decodes it. A sealed segment goes when the next
//! segment starts at or before the oldest valid snapshot's covered seq + 1, oldest first; the
//! active segment never goes (the rule of [`Log::reclaim_before`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, Serializer};

use crate::engine::log::{Log, LogInfo, SegmentInfo};
use crate::error::Result;
use crate::fs::Fs;
use crate::harness::snapshot::{self, SnapshotFile};
use crate::types::Seq;

#[cfg(doc)]
use crate::harness::store::Store;

/// What a purge removed, or with [`PurgeReport::dry_run`] would remove: the shape of
/// `factlog purge --json` (`format-spec/schema/purge.json`), serialised as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeReport {
    /// Whether this was a dry run (nothing removed).
    pub dry_run: bool,
    /// The oldest valid snapshot, which decides what goes; `None`: no valid snapshot, so
    /// nothing goes.
    pub snapshot: Option<PurgeSnapshot>,
    /// The snapshots older than [`PurgeReport::snapshot`] passed over as invalid, oldest
    /// first (all of them when none is valid).
    pub skipped_snapshots: Vec<SkippedSnapshot>,
    /// The segments removed (or that would be), oldest first.
    pub segments: Vec<PurgedSegment>,
    /// How many segments were removed.
    pub removed_segments: u64,
    /// Their bytes, as [`Log::info`] counts a segment's file.
    pub removed_bytes: u64,
    /// The sequence number of the first event the log holds afterwards (1 for an empty log).
    pub first_seq: u64,
}

/// The snapshot a purge relies on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeSnapshot {
    /// The snapshot file.
    #[serde(serialize_with = "display_path")]
    pub path: PathBuf,
    /// The sequence number of the last event it covers.
    pub covered_seq: u64,
}

/// A snapshot passed over because it does not decode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedSnapshot {
    /// The snapshot file.
    #[serde(serialize_with = "display_path")]
    pub path: PathBuf,
    /// Why it cannot be used.
    pub reason: Option<String>,
}

/// A segment a purge removed, or would remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgedSegment {
    /// Its segment id.
    pub id: u64,
    /// Its file.
    #[serde(serialize_with = "display_path")]
    pub path: PathBuf,
    /// The sequence number of its first event.
    pub first_seq: u64,
    /// The size of its file.
    pub file_bytes: u64,
}

fn display_path<S: Serializer>(path: &Path, serializer: S) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.display().to_string())
}

/// Removes the sealed segments of `log` whose every event the oldest valid snapshot of
/// `store_dir` covers, and reports it: the work of [`Store::purge`], which holds the store's
/// checkpoint lock so that the oldest valid snapshot stays the oldest meanwhile.
pub(crate) fn reclaim_covered(fs: &dyn Fs, store_dir: &Path, log: &Log) -> Result<PurgeReport> {
    let (oldest, skipped) = oldest_valid(fs, store_dir)?;
    let before = log.info()?;
    if let Some(oldest) = &oldest {
        log.reclaim_before(Seq(oldest.covered_seq.0 + 1))?;
    }
    let after = log.info()?;
    let removed: Vec<SegmentInfo> = before
        .segments
        .into_iter()
        .filter(|segment| after.segments.iter().all(|kept| kept.id != segment.id))
        .collect();
    let first_seq = after.segments.first().map_or(Seq(1), |segment| segment.first_seq);
    Ok(report(false, oldest.as_ref(), skipped, &removed, first_seq))
}

/// What [`Store::purge`] would remove from the store in `store_dir` whose log is `log`,
/// removing nothing: works on a read-only [`Log`] (no lock, not a byte written), so a dry run
/// may look at a store another process holds. The snapshots are read through `fs`.
///
/// # Errors
///
/// An I/O error listing the snapshots or the segments.
pub fn plan_purge(fs: &dyn Fs, store_dir: &Path, log: &Log) -> Result<PurgeReport> {
    let info = log.info()?;
    let (oldest, skipped) = oldest_valid(fs, store_dir)?;
    let removed = oldest.as_ref().map(|file| covered_segments(&info, file.covered_seq));
    let removed = removed.unwrap_or_default();
    let first_seq = info.segments.get(removed.len()).map_or(Seq(1), |segment| segment.first_seq);
    Ok(report(true, oldest.as_ref(), skipped, &removed, first_seq))
}

/// The oldest snapshot that decodes, and the ones before it that do not, with the reason.
fn oldest_valid(fs: &dyn Fs, dir: &Path) -> Result<(Option<SnapshotFile>, Vec<SkippedSnapshot>)> {
    let mut skipped = Vec::new();
    for file in snapshot::list(fs, dir)? {
        match snapshot::load(fs, &file) {
            Ok(_) => return Ok((Some(file), skipped)),
            // Pruned since the listing: not one of the store's snapshots any more.
            Err(error) if error.is_not_found() => {}
            Err(error) => {
                skipped.push(SkippedSnapshot { path: file.path, reason: Some(error.to_string()) });
            }
        }
    }
    Ok((None, skipped))
}

/// The sealed segments, oldest first, whose every record is at or before `covered`: those the
/// next segment of which starts at or before `covered + 1`, as [`Log::reclaim_before`]
/// removes them. Never the active (last) segment.
fn covered_segments(info: &LogInfo, covered: Seq) -> Vec<SegmentInfo> {
    let keep_from = covered.0 + 1;
    info.segments
        .windows(2)
        .take_while(|pair| pair[1].first_seq.0 <= keep_from)
        .map(|pair| pair[0].clone())
        .collect()
}

fn report(
    dry_run: bool,
    oldest: Option<&SnapshotFile>,
    skipped_snapshots: Vec<SkippedSnapshot>,
    removed: &[SegmentInfo],
    first_seq: Seq,
) -> PurgeReport {
    PurgeReport {
        dry_run,
        snapshot: oldest
            .map(|file| PurgeSnapshot { path: file.path.clone(), covered_seq: file.covered_seq.0 }),
        skipped_snapshots,
        segments: removed
            .iter()
            .map(|segment| PurgedSegment {
                id: segment.id.0,
                path: segment.path.clone(),
                first_seq: segment.first_seq.0,
                file_bytes: segment.file_bytes,
            })
            .collect(),
        removed_segments: removed.len() as u64,
        removed_bytes: removed.iter().map(|segment| segment.file_bytes).sum(),
        first_seq: first_seq.0,
    }
}
