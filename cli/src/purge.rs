//! `factlog purge --before-snapshot`: reclaims disk space by deleting the sealed segments whose
//! every record the oldest valid snapshot covers (`format-spec/snapshot.md`, "Reclaiming
//! space"), only when asked, through the library's `Store::purge` under a writer open, and
//! prints its report.
//!
//! `--dry-run` computes the same set read-only (no lock, nothing written) with the library's
//! `plan_purge`, which applies the rule `Store::purge` applies. The active segment is never
//! removed. On a store held by a process that shares it (`format-spec/server.md`), that
//! process purges, asked through its socket: the same report. A dry run opens read-only, so it
//! needs no socket.

use std::process::ExitCode;
use std::sync::Arc;

use factlog::client::Client;
use factlog::fs::RealFs;
use factlog::harness::snapshot::{self, SnapshotFile};
use factlog::harness::{PurgeReport, plan_purge};
use factlog::{Log, Options, Store, StoreOptions};

use crate::progress::{Progress, Unit};
use crate::{
    EXIT_FAILURE, Failure, Outcome, Output, PurgeArgs, library_failure, open_failure,
    open_or_share_failure, require_store,
};
use factlog::engine::counting_fs::CountingFs;
use factlog::error::counted;

/// A snapshot file with the outcome of decoding it.
pub struct CheckedSnapshot {
    /// The file, by name.
    pub file: SnapshotFile,
    /// Why it does not decode; `None` when it is valid.
    pub error: Option<String>,
}

/// `file`, judged as `Store::purge` judges each snapshot (`snapshot::load`).
pub fn check_snapshot(file: SnapshotFile) -> CheckedSnapshot {
    let error = snapshot::load(&RealFs, &file).err().map(|e| e.to_string());
    CheckedSnapshot { file, error }
}

pub fn run(args: &PurgeArgs) -> Outcome {
    let (fs, counters) = CountingFs::new();
    let progress = Progress::new("purge: reading the store", None, Unit::Bytes, false);
    let purged = progress.while_running(|| counters.mapped_bytes_done(), || purge(args, &fs));
    progress.finish();
    let report = purged?;
    let mut out = Output::new();
    if args.json {
        let value = serde_json::to_value(&report).map_err(|error| {
            Failure::new(EXIT_FAILURE, format_args!("cannot format the report: {error}"))
        })?;
        writeln!(out, "{value}");
    } else {
        print_text(&mut out, &report);
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// Purges (or with `--dry-run` only computes what it would remove), reading through `fs`.
fn purge(args: &PurgeArgs, fs: &Arc<CountingFs>) -> Result<PurgeReport, Failure> {
    let log_options = Options::new().fs(fs.clone());
    require_store(&args.dir)?;
    if args.dry_run {
        let log = Log::open_read_only(&args.dir, log_options)
            .map_err(|error| open_failure(&args.dir, &error))?;
        return plan_purge(&**fs, &args.dir, &log)
            .map_err(|error| library_failure("cannot list the snapshots or segments", &error));
    }
    // Served now: the serving process purges, asked at once (not after the open's retries of
    // the busy lock); a socket that does not answer falls back to opening, below.
    if let Some(mut client) = factlog::client::served::connect_now(&args.dir) {
        return client.purge(false).map_err(crate::served_failure("purge", &args.dir));
    }
    match Store::open(&args.dir, StoreOptions::new().log(log_options)) {
        Ok(store) => {
            crate::report_cut("purge", &args.dir, &store.open_report().log);
            let report = store
                .purge()
                .map_err(|error| library_failure("cannot reclaim segments", &error))?;
            store.close().map_err(|error| library_failure("close", &error))?;
            Ok(report)
        }
        // Held by a process that shares the store: the purge runs there
        // (format-spec/server.md, "purge").
        Err(error)
            if matches!(
                factlog::client::served::held_by_another(&args.dir, &error),
                Some(factlog::client::served::Held::Served { .. })
            ) =>
        {
            Client::connect(&args.dir).and_then(|mut client| client.purge(false)).map_err(
                |client_error| {
                    Failure::new(
                        EXIT_FAILURE,
                        format_args!("cannot open {}: {error}; {client_error}", args.dir.display()),
                    )
                },
            )
        }
        Err(error) => Err(open_or_share_failure(&args.dir, &error)),
    }
}

fn print_text(out: &mut Output, report: &PurgeReport) {
    for skipped in &report.skipped_snapshots {
        let reason = skipped.reason.as_deref().unwrap_or_default();
        writeln!(out, "snapshot {} is not valid, passed over: {reason}", skipped.path.display());
    }
    let Some(oldest) = &report.snapshot else {
        writeln!(out, "no valid snapshot: nothing to remove (run `factlog checkpoint` first)");
        return;
    };
    writeln!(
        out,
        "oldest valid snapshot: {} covers the events through seq {}",
        oldest.path.display(),
        oldest.covered_seq
    );
    let verb = if report.dry_run { "would remove" } else { "removed" };
    for segment in &report.segments {
        writeln!(
            out,
            "{verb} segment {} {}: first seq {}, {} bytes",
            segment.id,
            segment.path.display(),
            segment.first_seq,
            segment.file_bytes
        );
    }
    writeln!(
        out,
        "{verb} {}, {}; the log {} at seq {}",
        counted(report.removed_segments, "segment"),
        counted(report.removed_bytes, "byte"),
        if report.dry_run { "would start" } else { "starts" },
        report.first_seq
    );
}
