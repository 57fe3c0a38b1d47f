//! `factlog restore URL DIR [--seq N | --time T] [--dry-run]`: builds a store in DIR from the replica at
//! URL through [`factlog::replica::restore`], which checks every object it uses and refuses
//! damage and gaps. The command only opens the location and formats the library's report (text, or one
//! JSON object: `format-spec/schema/restore.json`).

use std::path::PathBuf;
use std::process::ExitCode;

use factlog::Seq;
use factlog::protocol::time::format_rfc3339;
use factlog::replica::{RestoreOptions, RestoreReport};
use serde_json::{Value, json};

use crate::{Outcome, Output, library_failure};
use factlog::error::counted;

#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The replica's location: file:///absolute/dir, s3://BUCKET/PREFIX, gs://, az://.
    url: String,
    /// The new store: a directory that does not exist or is empty.
    dir: PathBuf,
    /// Restore the log as it was at this seq: the frames whose records all have seqs up to N
    /// (a batch is whole or absent, so the restored log may end below N).
    #[arg(long, value_name = "N")]
    seq: Option<u64>,
    /// Restore the log as it was at this time: it ends before the first frame holding an event
    /// appended after T (a clock that stepped back does not bring later frames back). RFC 3339
    /// (2026-12-03T10:00:00Z, +01:00 offsets), a date (midnight UTC) or microseconds since
    /// 1970.
    #[arg(long, value_name = "T", conflicts_with = "seq",
          value_parser = factlog::protocol::time::parse_time)]
    time: Option<u64>,
    /// Check everything a restore checks (every object it would use fetched and checked)
    /// and print what it would produce; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print a single JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &RestoreArgs) -> Outcome {
    let doing = || format!("cannot restore {} into {}", args.url, args.dir.display());
    let remote =
        factlog::replica::remote::open(&args.url).map_err(|e| library_failure(doing(), &e))?;
    let mut options = RestoreOptions::new().dry_run(args.dry_run);
    if let Some(seq) = args.seq {
        options = options.seq(Seq(seq));
    }
    if let Some(time_us) = args.time {
        options = options.time(time_us);
    }
    let report = factlog::replica::restore(&*remote, &args.dir, options)
        .map_err(|e| library_failure(doing(), &e))?;
    let mut out = Output::new();
    if args.json {
        writeln!(out, "{}", report_json(&report));
    } else {
        write_text(&mut out, &report);
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

fn write_text(out: &mut Output, report: &RestoreReport) {
    let seqs = if report.through_seq.0 >= report.first_seq.0 {
        format!("seqs {}..={}", report.first_seq.0, report.through_seq.0)
    } else {
        "no events".to_owned()
    };
    let verb = if report.dry_run { "would restore" } else { "restored" };
    writeln!(
        out,
        "{verb} {} into {}: {seqs} ({} from {}, {})",
        report.location,
        report.target.display(),
        counted(report.segments.len() as u64, "segment"),
        counted(report.parts as u64, "part"),
        counted(report.bytes, "byte")
    );
    if let Some(seq) = report.requested_seq {
        writeln!(
            out,
            "--seq {}: the restored log ends at seq {} (a batch is whole or absent); {} not \
             restored",
            seq.0,
            report.through_seq.0,
            counted(report.segments_left_out as u64, "later segment")
        );
    }
    if let Some(time_us) = report.requested_time_us {
        let ended = match report.first_after_time {
            Some(after) => format!(
                "before seq {}, appended at {}",
                after.seq.0,
                format_rfc3339(after.timestamp_us)
            ),
            None => "every event was appended at or before it".to_owned(),
        };
        writeln!(
            out,
            "--time {}: the restored log ends at seq {} ({ended}); {} not restored",
            format_rfc3339(time_us),
            report.through_seq.0,
            counted(report.segments_left_out as u64, "later segment")
        );
    }
    if let Some((covered, first_kept)) = report.retention
        && report.first_seq.0 > 1
    {
        writeln!(
            out,
            "seqs 1..={} were removed from the replica by retention: its record says the \
             history begins at seq {}, and the snapshot through seq {} covers them",
            report.first_seq.0 - 1,
            first_kept.0,
            covered.0
        );
    }
    for stale in &report.stale_staging {
        writeln!(
            out,
            "note: {} is left by a restore of the same directory that did not finish: remove it",
            stale.display()
        );
    }
    if !report.snapshots.is_empty() {
        let covered: Vec<String> = report.snapshots.iter().map(|s| s.0.to_string()).collect();
        writeln!(out, "snapshots: copied those covering seqs through {}", covered.join(", "));
    }
    for skipped in &report.snapshots_skipped {
        writeln!(out, "snapshot not copied: {}: {}", skipped.object, skipped.reason);
    }
    for name in &report.ignored {
        writeln!(out, "ignored: {name} (not an object of the replica format)");
    }
    let source = report.source_device.as_deref().unwrap_or("unknown");
    writeln!(
        out,
        "replica {}, from device {source}, on device {}",
        report.replica_id, report.device
    );
    if report.dry_run {
        writeln!(out, "dry run: every object was checked, nothing was written");
    }
}

/// The `--json` object (`format-spec/schema/restore.json`).
fn report_json(report: &RestoreReport) -> Value {
    let segments: Vec<Value> = report
        .segments
        .iter()
        .map(|s| {
            json!({
                "first_seq": s.first_seq.0,
                "last_seq": s.last_seq.map(|seq| seq.0),
                "parts": s.parts,
                "bytes": s.bytes,
                "cut": s.cut,
            })
        })
        .collect();
    let skipped: Vec<Value> = report
        .snapshots_skipped
        .iter()
        .map(|s| json!({ "object": s.object, "reason": s.reason }))
        .collect();
    json!({
        "location": report.location,
        "replica_id": report.replica_id,
        "dry_run": report.dry_run,
        "retention": report.retention.map(|(covered, first_kept)| json!({
            "covered_seq": covered.0,
            "first_kept_seq": first_kept.0,
        })),
        "stale_staging": report
            .stale_staging
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>(),
        "target": report.target.display().to_string(),
        "requested_seq": report.requested_seq.map(|s| s.0),
        "requested_time_us": report.requested_time_us,
        "requested_time": report.requested_time_us.map(format_rfc3339),
        "first_after_time": report.first_after_time.map(|after| json!({
            "seq": after.seq.0,
            "timestamp_us": after.timestamp_us,
            "time": format_rfc3339(after.timestamp_us),
        })),
        "first_seq": report.first_seq.0,
        "through_seq": report.through_seq.0,
        "segments": segments,
        "segments_left_out": report.segments_left_out,
        "parts": report.parts,
        "bytes": report.bytes,
        "snapshots": report.snapshots.iter().map(|s| s.0).collect::<Vec<u64>>(),
        "snapshots_skipped": skipped,
        "ignored": report.ignored,
        "source_device": report.source_device,
        "device": report.device,
        "restored_us": report.restored_us,
    })
}
