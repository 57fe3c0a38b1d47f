//! `factlog purge --before-snapshot`: reclaims disk space by deleting the sealed segments whose
//! every record the oldest valid snapshot covers (`format-spec/snapshot.md`, "Reclaiming
//! space"), only when asked, through the library's `Store::reclaim` under a writer open.
//!
//! `--dry-run` computes the same set read-only (no lock, nothing written): the oldest snapshot
//! file that decodes, and the sealed segments whose successor starts at or before its covered
//! seq + 1, which is the rule `Store::reclaim` applies. The active segment is never removed.
//! A real purge lists the segments it removed by comparing the segment list before and after
//! the reclaim, both taken under the writer's lock.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use factlog::fs::RealFs;
use factlog::harness::snapshot::{self, SnapshotFile};
use factlog::{Log, LogInfo, Options, SegmentInfo, Seq, Store, StoreOptions};
use serde_json::{Value, json};

use crate::counting_fs::CountingFs;
use crate::progress::{Progress, Unit};
use crate::{Failure, Outcome, Output, PurgeArgs, library_failure, open_failure, require_store};

/// A snapshot file with the outcome of decoding it.
pub struct CheckedSnapshot {
    /// The file, by name.
    pub file: SnapshotFile,
    /// Why it does not decode; `None` when it is valid.
    pub error: Option<String>,
}

/// Every snapshot file of the store in `dir`, oldest first, each judged as `Store::reclaim`
/// judges it (`snapshot::load`), so that a dry run lists what a purge removes.
pub fn checked_snapshots(dir: &Path) -> Result<Vec<CheckedSnapshot>, factlog::Error> {
    let files = snapshot::list(&RealFs, dir)?;
    Ok(files.into_iter().map(check_snapshot).collect())
}

/// `file`, judged as [`checked_snapshots`] judges each.
pub fn check_snapshot(file: SnapshotFile) -> CheckedSnapshot {
    let error = snapshot::load(&RealFs, &file).err().map(|e| e.to_string());
    CheckedSnapshot { file, error }
}

pub fn run(args: &PurgeArgs) -> Outcome {
    let (fs, counters) = CountingFs::new();
    let progress = Progress::new("purge: reading the store", None, Unit::Bytes, false);
    let purged = progress.while_running(|| counters.mapped_bytes_done(), || purge(args, &fs));
    progress.finish();
    let (snapshots, removed, first_seq) = purged?;
    let oldest = snapshots.iter().find(|s| s.error.is_none()).map(|s| &s.file);
    let mut out = Output::new();
    if args.json {
        writeln!(out, "{}", report_json(args.dry_run, &snapshots, oldest, &removed, first_seq));
    } else {
        print_text(&mut out, args.dry_run, &snapshots, oldest, &removed, first_seq);
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// The snapshots, the segments removed (or that would be) and the log's first seq after.
type Purged = (Vec<CheckedSnapshot>, Vec<SegmentInfo>, Seq);

/// Purges (or with `--dry-run` only computes what it would remove), reading through `fs`.
fn purge(args: &PurgeArgs, fs: &Arc<CountingFs>) -> Result<Purged, Failure> {
    let snapshot_error = |error| library_failure("cannot list the snapshots", &error);
    let log_options = Options::new().fs(fs.clone());
    require_store(&args.dir)?;
    Ok(if args.dry_run {
        let log = Log::open_read_only(&args.dir, log_options)
            .map_err(|error| open_failure(&args.dir, &error))?;
        let info = info(&log)?;
        let snapshots = checked_snapshots(&args.dir).map_err(snapshot_error)?;
        let removed = oldest_valid(&snapshots)
            .map(|covered| covered_segments(&info, covered))
            .unwrap_or_default();
        let first_seq = kept_first_seq(&info, &removed);
        (snapshots, removed, first_seq)
    } else {
        let store = Store::open(&args.dir, StoreOptions::new().log(log_options))
            .map_err(|error| open_failure(&args.dir, &error))?;
        let snapshots = checked_snapshots(&args.dir).map_err(snapshot_error)?;
        let before = info(store.log())?;
        store.reclaim().map_err(|error| library_failure("cannot reclaim segments", &error))?;
        let after = info(store.log())?;
        store.close().map_err(|error| library_failure("close", &error))?;
        let removed: Vec<SegmentInfo> = before
            .segments
            .into_iter()
            .filter(|segment| after.segments.iter().all(|kept| kept.id != segment.id))
            .collect();
        let first_seq = after.segments.first().map_or(Seq(1), |segment| segment.first_seq);
        (snapshots, removed, first_seq)
    })
}

fn info(log: &Log) -> Result<LogInfo, Failure> {
    log.info().map_err(|error| library_failure("info", &error))
}

/// The covered seq of the oldest snapshot that decodes.
fn oldest_valid(snapshots: &[CheckedSnapshot]) -> Option<Seq> {
    snapshots.iter().find(|s| s.error.is_none()).map(|s| s.file.covered_seq)
}

/// The sealed segments, oldest first, whose every record is at or before `covered`: those the
/// next segment of which starts at or before `covered + 1`. Never the active (last) segment.
fn covered_segments(info: &LogInfo, covered: Seq) -> Vec<SegmentInfo> {
    let keep_from = covered.0 + 1;
    info.segments
        .windows(2)
        .take_while(|pair| pair[1].first_seq.0 <= keep_from)
        .map(|pair| pair[0].clone())
        .collect()
}

/// The first seq the log holds once `removed` (a prefix of its segments) is gone.
fn kept_first_seq(info: &LogInfo, removed: &[SegmentInfo]) -> Seq {
    info.segments.get(removed.len()).map_or(Seq(1), |segment| segment.first_seq)
}

fn print_text(
    out: &mut Output,
    dry_run: bool,
    snapshots: &[CheckedSnapshot],
    oldest: Option<&SnapshotFile>,
    removed: &[SegmentInfo],
    first_seq: Seq,
) {
    for skipped in snapshots.iter().take_while(|s| s.error.is_some()) {
        let reason = skipped.error.as_deref().unwrap_or_default();
        writeln!(
            out,
            "snapshot {} is not valid, passed over: {reason}",
            skipped.file.path.display()
        );
    }
    let Some(oldest) = oldest else {
        writeln!(out, "no valid snapshot: nothing to remove (run `factlog checkpoint` first)");
        return;
    };
    writeln!(
        out,
        "oldest valid snapshot: {} covers the events through seq {}",
        oldest.path.display(),
        oldest.covered_seq.0
    );
    let verb = if dry_run { "would remove" } else { "removed" };
    for segment in removed {
        writeln!(
            out,
            "{verb} segment {} {}: first seq {}, {} bytes",
            segment.id.0,
            segment.path.display(),
            segment.first_seq.0,
            segment.file_bytes
        );
    }
    let bytes: u64 = removed.iter().map(|segment| segment.file_bytes).sum();
    writeln!(
        out,
        "{verb} {} segments, {bytes} bytes; the log {} at seq {}",
        removed.len(),
        if dry_run { "would start" } else { "starts" },
        first_seq.0
    );
}

fn report_json(
    dry_run: bool,
    snapshots: &[CheckedSnapshot],
    oldest: Option<&SnapshotFile>,
    removed: &[SegmentInfo],
    first_seq: Seq,
) -> Value {
    let skipped: Vec<Value> = snapshots
        .iter()
        .take_while(|s| s.error.is_some())
        .map(|s| json!({ "path": s.file.path.display().to_string(), "reason": s.error }))
        .collect();
    let snapshot = oldest.map_or(Value::Null, |file| {
        json!({ "path": file.path.display().to_string(), "covered_seq": file.covered_seq.0 })
    });
    let segments: Vec<Value> = removed
        .iter()
        .map(|segment| {
            json!({
                "id": segment.id.0,
                "path": segment.path.display().to_string(),
                "first_seq": segment.first_seq.0,
                "file_bytes": segment.file_bytes,
            })
        })
        .collect();
    json!({
        "dry_run": dry_run,
        "snapshot": snapshot,
        "skipped_snapshots": skipped,
        "segments": segments,
        "removed_segments": removed.len(),
        "removed_bytes": removed.iter().map(|segment| segment.file_bytes).sum::<u64>(),
        "first_seq": first_seq.0,
    })
}
