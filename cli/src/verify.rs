//! `factlog verify`: a read-only full scan of every segment, with an exit code from the table
//! every command shares: 0 clean or only a torn tail (which an open cuts: not damage; the
//! report says `torn_tail` and why it is one), 3 corruption or an unsupported format version,
//! 1 a log that cannot be read at all (missing, a file, an I/O error).
//!
//! What it checks: the log mark `MARK` against the segments (missing, extra or replaced
//! segments, a log shorter than the durable end the mark records, bytes after a clean close:
//! `format-spec/mark.md`), every header and frame of every segment and the sequence across
//! them, the tail of the active segment, and every snapshot: a damaged one is exit 3, and so
//! is a purged log that no valid snapshot covers. Kept tails (`NAME.seg.torn-*`) are listed.
//!
//! Finding damage is the command's answer, not its failure: the report goes to standard output
//! (text, or one JSON object with `--json`). Only a log that cannot be read at all also gets
//! the one-line `factlog: ...` message on standard error.
//! Corruption also gets one line there, naming it and pointing to `factlog salvage`.
//! The report is written whole through a locked standard output; a reader that went away
//! (`factlog verify DIR | head -1`) ends it quietly with the finding's exit code.
//!
//! `--deep` then opens the store read-only and asks the library to rebuild the state from the
//! events ([`factlog::Store::verify_deep`]): the newest snapshot must equal the rebuild folded
//! up to the seq it covers and the state an open builds the rebuild through the last event, or
//! the exit code is 3. The rebuild starts from the first event, or, after `factlog purge`
//! reclaimed segments, from the oldest valid snapshot the kept log continues, which is then
//! named in the report; a purged store whose reclaimed events no valid snapshot covers cannot
//! be rebuilt at all, and is also exit code 3. A snapshot that had to be skipped is reported but
//! does not change the exit code: it is only an accelerator, and an open falls back past it.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use factlog::engine::mark::Mark;
use factlog::harness::DeepVerify;
use factlog::harness::snapshot::{SnapshotMeta, SnapshotsChecked};
use factlog::{
    Error, ErrorKind, Options, SegmentVerify, Store, StoreOptions, TailCut, VerifyOutcome,
    VerifyReport,
};
use serde_json::{Value, json};

use crate::progress::{Progress, Unit, segment_bytes};
use crate::{
    EXIT_DAMAGED, EXIT_FAILURE, Failure, Outcome, VerifyArgs, damage_message, exit_code_of,
    is_broken_pipe, report_failure, require_store,
};
use factlog::engine::counting_fs::{CountingFs, FsCounters};
use factlog::error::counted;

/// A clean log, or one with only a torn tail.
const EXIT_CLEAN: u8 = 0;

/// What the scan concluded, in the order of the exit codes.
enum Finding<'a> {
    Clean,
    TornTail { segment: u64, path: String, offset: u64, bytes: u64, evidence: Option<Evidence> },
    Corrupt(&'a Error),
}

/// Why a torn tail is one: where it starts, what follows its hole, and what the mark vouched
/// for.
struct Evidence {
    first_seq_cut: u64,
    frames_after_hole: u64,
    mark_durable_seq: Option<u64>,
}

/// The file system the scans read through, counting what they map, and the progress line
/// that shows it.
struct Scan {
    fs: Arc<CountingFs>,
    counters: Arc<FsCounters>,
    progress: Progress,
}

/// `verify`: scans every segment, then with `--deep` folds the events, and prints the report.
pub fn run(args: &VerifyArgs) -> Outcome {
    require_store(&args.dir)?;
    let (fs, counters) = CountingFs::new();
    let total = segment_bytes(&args.dir);
    let progress = Progress::new("verify", Some(total), Unit::Bytes, false);
    let scan = Scan { fs, counters, progress };
    let options = Options::new().fs(scan.fs.clone());
    let verified = scan.progress.while_running(
        || scan.counters.mapped_bytes_done(),
        || factlog::verify(&args.dir, options),
    );
    let scan = &scan;
    match verified {
        Ok(report) => {
            let first_seq = report.segments.first().map_or(1, |s| s.first_seq.0);
            let snapshots = factlog::harness::snapshot::check_all(&*scan.fs, &args.dir, first_seq)
                .map_err(|e| Failure::new(exit_code_of(&e), format_args!("{e}")))?;
            let mark = report.mark.map(|m| m.durable_seq);
            let finding = match (&report.outcome, &snapshots.problem) {
                (VerifyOutcome::Corrupt(error), _) => Finding::Corrupt(error),
                (_, Some(damaged)) => Finding::Corrupt(damaged),
                (VerifyOutcome::Clean, None) => Finding::Clean,
                (VerifyOutcome::TornTail(cut), None) => torn_tail(cut, mark),
            };
            Ok(print(args, scan, Some((&report, &snapshots)), &finding))
        }
        // Damage found before a report could be built is still a finding, not a failure.
        Err(error) => match error.kind() {
            ErrorKind::Corruption { .. } | ErrorKind::UnsupportedVersion { .. } => {
                Ok(print(args, scan, None, &Finding::Corrupt(&error)))
            }
            ErrorKind::TornTail { segment, path, offset, bytes } => {
                let finding = Finding::TornTail {
                    segment: segment.0,
                    path: path.display().to_string(),
                    offset: *offset,
                    bytes: *bytes,
                    evidence: None,
                };
                Ok(print(args, scan, None, &finding))
            }
            _ => {
                scan.progress.finish();
                if args.json {
                    let object = json!({
                        "outcome": "error",
                        "exit_code": exit_code_of(&error),
                        "error": error_json(&error),
                    });
                    let mut out = String::new();
                    say!(out, "{object}");
                    // A closed pipe leaves nobody to read it; the failure line still goes out.
                    let _ = write_stdout(&out);
                }
                Err(Failure::new(
                    exit_code_of(&error),
                    format_args!("cannot verify {}: {error}", args.dir.display()),
                ))
            }
        },
    }
}

/// Appends one line to the report being built.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {{
        // Writing into a String cannot fail.
        let _ = writeln!($out, $($arg)*);
    }};
}
use say;

/// Writes the whole report through a locked standard output.
fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

fn torn_tail(cut: &TailCut, mark_durable_seq: Option<u64>) -> Finding<'static> {
    Finding::TornTail {
        segment: cut.segment.0,
        path: cut.path.display().to_string(),
        offset: cut.offset,
        bytes: cut.bytes,
        evidence: Some(Evidence {
            first_seq_cut: cut.first_seq_cut.0,
            frames_after_hole: cut.frames,
            mark_durable_seq,
        }),
    }
}

/// The report of the segments and of the snapshots.
type Reports<'a> = (&'a VerifyReport, &'a SnapshotsChecked);

/// Prints the report and returns the exit code that goes with the finding (and with the deep
/// check, when asked for and the log is readable).
fn print(
    args: &VerifyArgs,
    scan: &Scan,
    report: Option<Reports<'_>>,
    finding: &Finding<'_>,
) -> ExitCode {
    let mut exit_code = match finding {
        Finding::Clean | Finding::TornTail { .. } => EXIT_CLEAN,
        Finding::Corrupt(_) => EXIT_DAMAGED,
    };
    let deep = (args.deep && exit_code != EXIT_DAMAGED).then(|| deep_check(args, scan));
    scan.progress.finish();
    if deep.as_ref().is_some_and(|deep| !deep_ok(deep)) {
        exit_code = EXIT_DAMAGED;
    }
    let mut out = String::new();
    if args.json {
        let mut object = report_json(args, report, finding, exit_code);
        if args.deep {
            object["deep"] = deep.as_ref().map_or(Value::Null, deep_json);
        }
        say!(out, "{object}");
    } else {
        print_text(&mut out, report, finding);
        if let Some(deep) = &deep {
            print_deep_text(&mut out, deep);
        }
    }
    if let Err(error) = write_stdout(&out)
        && !is_broken_pipe(&error)
    {
        report_failure(&format!("writing stdout: {error}"));
        return ExitCode::from(EXIT_FAILURE);
    }
    if let Finding::Corrupt(error) = finding
        && matches!(error.kind(), ErrorKind::Corruption { .. })
    {
        report_failure(&damage_message(&args.dir, error).replace(
            "every record before the damage was printed",
            "the segments before it were checked",
        ));
    }
    ExitCode::from(exit_code)
}

/// Folds the store's events from scratch and compares them with its snapshot and state. The
/// folds read the segments more than once, so the progress shows the bytes read, not a bar.
fn deep_check(args: &VerifyArgs, scan: &Scan) -> Result<DeepVerify, Error> {
    scan.progress.restart("verify --deep: folding events", None);
    let base = scan.counters.mapped_bytes_done();
    let options = StoreOptions::new().log(Options::new().fs(scan.fs.clone()));
    scan.progress.while_running(
        || scan.counters.mapped_bytes_done().saturating_sub(base),
        || Store::open_read_only(&args.dir, options)?.verify_deep(),
    )
}

fn deep_ok(deep: &Result<DeepVerify, Error>) -> bool {
    deep.as_ref().is_ok_and(|deep| deep.live_matches && deep.snapshot_matches != Some(false))
}

fn print_deep_text(out: &mut String, deep: &Result<DeepVerify, Error>) {
    let deep = match deep {
        Ok(deep) => deep,
        Err(error) => {
            say!(out, "deep: the store cannot be folded: {}", deep_error_text(error));
            return;
        }
    };
    // After a purge the rebuild starts from a snapshot, so "from scratch" and "every event"
    // would be false, and removing the snapshots (the advice for a store with all its events)
    // would leave a store that cannot be opened at all.
    match &deep.rebuilt_from {
        None => say!(out, "deep: {} folded from scratch", counted(deep.events, "event")),
        Some(base) => say!(
            out,
            "deep: rebuilt from snapshot {} (covers seq {}; the segments before it were \
             reclaimed) + {}: {}",
            base.path.display(),
            base.covered_seq.0,
            counted(deep.events, "event"),
            seq_range(base.covered_seq.0, deep.events)
        ),
    }
    let rebuild = if deep.rebuilt_from.is_some() { "the rebuild" } else { "the fold" };
    match (&deep.snapshot, deep.snapshot_matches) {
        (Some(meta), Some(true)) => say!(
            out,
            "deep: snapshot {} (events through seq {}) equals {rebuild} of its events",
            meta.path.display(),
            meta.covered_seq.0
        ),
        (Some(meta), Some(false)) => say!(
            out,
            "deep: snapshot {} (events through seq {}) differs from {rebuild} of its events: \
             remove it, and the next open rebuilds the state from {}",
            meta.path.display(),
            meta.covered_seq.0,
            rebuild_source(deep)
        ),
        (Some(meta), None) => say!(
            out,
            "deep: snapshot {} (events through seq {}) is the one the state was rebuilt from: \
             its events were reclaimed, so it was checked for integrity only, not against them",
            meta.path.display(),
            meta.covered_seq.0
        ),
        (None, _) => say!(out, "deep: no snapshot to compare"),
    }
    match (deep.live_matches, deep.rebuilt_from.is_some()) {
        (true, false) => say!(out, "deep: the state an open builds equals the fold of every event"),
        (true, true) => say!(out, "deep: the state an open builds equals the rebuild"),
        (false, false) => say!(
            out,
            "deep: the state an open builds differs from the fold of every event: remove the \
             snapshots, and the next open rebuilds the state from the events"
        ),
        (false, true) => say!(
            out,
            "deep: the state an open builds differs from the rebuild: remove the snapshots newer \
             than the one it started from, and the next open rebuilds the state from {}",
            rebuild_source(deep)
        ),
    }
    for (path, reason) in &deep.skipped_snapshots {
        say!(out, "deep: snapshot {} skipped by an open: {reason}", path.display());
    }
}

/// What an open falls back to once the snapshots that differ are removed.
fn rebuild_source(deep: &DeepVerify) -> String {
    match &deep.rebuilt_from {
        None => "the events".to_owned(),
        Some(base) => format!("snapshot {} and the events after it", base.path.display()),
    }
}

/// The seqs of `events` events folded after seq `after`, for the text report.
fn seq_range(after: u64, events: u64) -> String {
    match events {
        0 => "none after it".to_owned(),
        _ => format!("seqs {}..={}", after + 1, after + events),
    }
}

/// Why the deep check could not run. A store whose reclaimed events no snapshot covers gets its
/// own advice: the library's names reading from a later seq, which does not apply to a fold.
fn deep_error_text(error: &Error) -> String {
    match error.kind() {
        ErrorKind::Reclaimed { first_available, .. } => format!(
            "the segments before seq {first_available} were reclaimed and no valid snapshot \
             covers seqs 1..={}: the events they held are lost to this store; restore such a \
             snapshot (or the segments) from a backup",
            first_available.saturating_sub(1)
        ),
        _ => error.to_string(),
    }
}

fn deep_json(deep: &Result<DeepVerify, Error>) -> Value {
    let ok = deep_ok(deep);
    match deep {
        Err(error) => json!({ "ok": ok, "error": error_json(error) }),
        Ok(deep) => {
            let snapshot_json = |meta: &SnapshotMeta| {
                json!({
                    "path": meta.path.display().to_string(),
                    "covered_seq": meta.covered_seq.0,
                })
            };
            let skipped: Vec<Value> = deep
                .skipped_snapshots
                .iter()
                .map(|(path, reason)| {
                    json!({ "path": path.display().to_string(), "reason": reason })
                })
                .collect();
            json!({
                "ok": ok,
                "events": deep.events,
                "snapshot": deep.snapshot.as_ref().map_or(Value::Null, snapshot_json),
                "snapshot_matches": deep.snapshot_matches,
                "live_matches": deep.live_matches,
                "rebuilt_from": deep.rebuilt_from.as_ref().map_or(Value::Null, snapshot_json),
                "skipped_snapshots": skipped,
                "error": Value::Null,
            })
        }
    }
}

fn print_text(out: &mut String, reports: Option<Reports<'_>>, finding: &Finding<'_>) {
    let report = reports.map(|(report, _)| report);
    if let Some((report, snapshots)) = reports {
        say!(out, "{}", mark_text(report.mark.as_ref()));
        for segment in &report.segments {
            say!(out, "{}", segment_text(segment));
        }
        for (file, error) in &snapshots.files {
            match error {
                None => say!(
                    out,
                    "snapshot {}: covers seqs 1..={}, loads",
                    file.path.display(),
                    file.covered_seq.0
                ),
                Some(error) => say!(out, "snapshot {}: damaged: {error}", file.path.display()),
            }
        }
        for kept in &report.kept_tails {
            say!(
                out,
                "kept tail {}: bytes an open cut, kept for `factlog salvage`",
                kept.display()
            );
        }
    }
    match finding {
        Finding::Clean => {
            let (segments, records, last_seq) = report.map_or((0, 0, None), |report| {
                (report.segments.len(), report.records, report.last_seq)
            });
            let last = last_seq.map_or_else(|| "none".to_owned(), |seq| seq.0.to_string());
            let (segments, records) =
                (counted(segments as u64, "segment"), counted(records, "record"));
            say!(out, "clean: {segments}, {records}, last seq {last}");
        }
        Finding::TornTail { segment, path, offset, bytes, evidence } => {
            say!(
                out,
                "torn tail: segment {segment} ({path}) at offset {offset}: {} after the last \
                 valid record, which an open would cut",
                counted(*bytes, "byte")
            );
            if let Some(evidence) = evidence {
                say!(out, "torn tail: why it is one: {}", evidence_text(evidence));
            }
        }
        Finding::Corrupt(error) => say!(out, "{}", corrupt_text(error)),
    }
}

/// What the mark vouches for, in one line.
fn mark_text(mark: Option<&Mark>) -> String {
    match mark {
        None => "mark: none (a log written before marks: its tail is judged by the frames \
                 alone)"
            .to_owned(),
        Some(mark) if mark.clean => format!(
            "mark: closed cleanly at seq {} (segments {}..={}): every byte is accounted for",
            mark.durable_seq, mark.first_segment.0, mark.last_segment.0
        ),
        Some(mark) => format!(
            "mark: records through seq {} were on stable storage (segments {}..={}; not closed \
             cleanly)",
            mark.durable_seq, mark.first_segment.0, mark.last_segment.0
        ),
    }
}

fn evidence_text(evidence: &Evidence) -> String {
    let mark = match evidence.mark_durable_seq {
        Some(seq) => format!("the mark vouches for seqs through {seq} only"),
        None => "the log has no mark".to_owned(),
    };
    format!(
        "it starts at seq {}, {mark}, and none of the {} valid frames after the hole claims a \
         cut record durable",
        evidence.first_seq_cut, evidence.frames_after_hole
    )
}

/// One line naming where the damage is and why, without the library's advice to run verify.
fn corrupt_text(error: &Error) -> String {
    match error.kind() {
        ErrorKind::Corruption { segment: Some(segment), path, offset, reason } => format!(
            "corrupt: segment {} ({}) at offset {offset}: {reason}",
            segment.0,
            path.display()
        ),
        ErrorKind::Corruption { segment: None, path, offset, reason } => {
            format!("corrupt: {} at offset {offset}: {reason}", path.display())
        }
        ErrorKind::UnsupportedVersion { path, found, supported } => format!(
            "unsupported version: {} has format version {found}, this build reads up to \
             version {supported}",
            path.display()
        ),
        _ => format!("corrupt: {error}"),
    }
}

fn segment_text(segment: &SegmentVerify) -> String {
    let seqs = match segment.last_seq {
        Some(last) => format!("seqs {}..={}", segment.first_seq.0, last.0),
        None => format!("no records (first seq {})", segment.first_seq.0),
    };
    format!(
        "segment {} {}: {seqs}, {}, {} of {} bytes used",
        segment.id.0,
        segment.path.display(),
        counted(segment.records, "record"),
        segment.used_bytes,
        segment.file_bytes
    )
}

fn report_json(
    args: &VerifyArgs,
    reports: Option<Reports<'_>>,
    finding: &Finding<'_>,
    exit_code: u8,
) -> Value {
    let report = reports.map(|(report, _)| report);
    let outcome = match finding {
        Finding::Clean => "clean",
        Finding::TornTail { .. } => "torn_tail",
        Finding::Corrupt(_) => "corrupt",
    };
    let torn_tail = match finding {
        Finding::TornTail { segment, path, offset, bytes, evidence } => {
            let evidence = evidence.as_ref().map_or(Value::Null, |e| {
                json!({
                    "first_seq_cut": e.first_seq_cut,
                    "frames_after_hole": e.frames_after_hole,
                    "mark_durable_seq": e.mark_durable_seq,
                    "text": evidence_text(e),
                })
            });
            json!({
                "segment": segment, "path": path, "offset": offset, "bytes": bytes,
                "evidence": evidence,
            })
        }
        _ => Value::Null,
    };
    let mark = report.and_then(|r| r.mark.as_ref()).map_or(Value::Null, Mark::to_json);
    let kept: Vec<Value> = report
        .map(|r| r.kept_tails.iter().map(|p| Value::from(p.display().to_string())).collect())
        .unwrap_or_default();
    let snapshots: Vec<Value> = reports
        .map(|(_, checked)| {
            checked
                .files
                .iter()
                .map(|(file, error)| {
                    json!({
                        "path": file.path.display().to_string(),
                        "covered_seq": file.covered_seq.0,
                        "damage": error.as_ref().map(|e| e.to_string()),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let corruption = match finding {
        Finding::Corrupt(error) => error_json(error),
        _ => Value::Null,
    };
    let segments: Vec<Value> =
        report.map(|report| report.segments.iter().map(segment_json).collect()).unwrap_or_default();
    json!({
        "dir": args.dir.display().to_string(),
        "outcome": outcome,
        "exit_code": exit_code,
        "records": report.map(|report| report.records),
        "last_seq": report.and_then(|report| report.last_seq).map(|seq| seq.0),
        "segments": segments,
        "torn_tail": torn_tail,
        "corruption": corruption,
        "mark": mark,
        "snapshots": snapshots,
        "kept_tails": kept,
    })
}

fn segment_json(segment: &SegmentVerify) -> Value {
    json!({
        "id": segment.id.0,
        "path": segment.path.display().to_string(),
        "first_seq": segment.first_seq.0,
        "last_seq": segment.last_seq.map(|seq| seq.0),
        "records": segment.records,
        "used_bytes": segment.used_bytes,
        "file_bytes": segment.file_bytes,
    })
}

/// The structured fields of an error, for JSON output. `message` is always present.
fn error_json(error: &Error) -> Value {
    let message = error.to_string();
    match error.kind() {
        ErrorKind::Corruption { segment, path, offset, reason } => json!({
            "kind": "corruption",
            "segment": segment.map(|id| id.0),
            "path": path.display().to_string(),
            "offset": offset,
            "reason": reason.to_string(),
            "message": message,
        }),
        ErrorKind::UnsupportedVersion { path, found, supported } => json!({
            "kind": "unsupported_version",
            "path": path.display().to_string(),
            "found": found,
            "supported": supported,
            "message": message,
        }),
        ErrorKind::TornTail { segment, path, offset, bytes } => json!({
            "kind": "torn_tail",
            "segment": segment.0,
            "path": path.display().to_string(),
            "offset": offset,
            "bytes": bytes,
            "message": message,
        }),
        ErrorKind::Reclaimed { requested, first_available } => json!({
            "kind": "reclaimed",
            "requested": requested,
            "first_available": first_available,
            "message": deep_error_text(error),
        }),
        ErrorKind::NotALog { dir } => json!({
            "kind": "not_a_log",
            "dir": dir.display().to_string(),
            "message": message,
        }),
        ErrorKind::CorruptEvent { seq, reason } => json!({
            "kind": "corrupt_event",
            "seq": seq,
            "reason": reason,
            "message": message,
        }),
        ErrorKind::Io { op, path, .. } => json!({
            "kind": "io",
            "op": op,
            "path": path.display().to_string(),
            "message": message,
        }),
        _ => json!({ "kind": "other", "message": message }),
    }
}
