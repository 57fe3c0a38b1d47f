//! `factlog salvage DIR --to NEWDIR`: copies every intact record of a damaged log into a new
//! store with the same sequence numbers and runs the harness recovery on it, through
//! [`factlog::salvage`]. The command only formats the library's report (text, or one JSON
//! object whose shape `format-spec/salvage.md` documents).
//!
//! Output goes through a locked standard output with `writeln!`: a reader that goes away
//! (`factlog salvage ... | head -1`) ends the printing quietly, with the exit code the salvage
//! itself earned.

use std::io::{self, Write};
use std::process::ExitCode;

use factlog::harness::salvage::{Damage, KeptRange, Lost};
use factlog::{SalvageOptions, SalvageReport};
use serde_json::{Value, json};

use crate::{
    EXIT_FAILURE, Failure, Outcome, SalvageArgs, is_broken_pipe, library_failure, require_store,
};
use factlog::error::counted;

/// Exit code: the new store was written (or, dry run, the report printed).
const EXIT_DONE: u8 = 0;

pub fn run(args: &SalvageArgs) -> Outcome {
    require_store(&args.dir)?;
    let options = SalvageOptions::new().dry_run(args.dry_run);
    let report = factlog::salvage(&args.dir, &args.to, options).map_err(|error| {
        library_failure(
            format_args!("cannot salvage {} into {}", args.dir.display(), args.to.display()),
            &error,
        )
    })?;
    let mut out = io::stdout().lock();
    let written = if args.json {
        writeln!(out, "{}", report_json(&report))
    } else {
        write_text(&mut out, &report)
    };
    match written.and_then(|()| out.flush()) {
        Err(error) if !is_broken_pipe(&error) => {
            Err(Failure::new(EXIT_FAILURE, format_args!("writing stdout: {error}")))
        }
        _ => Ok(ExitCode::from(EXIT_DONE)),
    }
}

fn write_text(out: &mut impl Write, report: &SalvageReport) -> io::Result<()> {
    let verb = if report.dry_run { "would copy" } else { "copied" };
    writeln!(
        out,
        "{verb} {} of {} into {} (segment format {})",
        counted(report.records_kept, "record"),
        report.source.display(),
        report.target.display(),
        report.format_version
    )?;
    for kept in &report.kept {
        writeln!(out, "kept: {}", kept_text(kept))?;
    }
    if report.damage.is_empty() {
        writeln!(out, "no damage: the new log is a copy of every record")?;
    }
    for damage in &report.damage {
        writeln!(out, "gap: {}", damage_text(damage))?;
    }
    for kept in &report.kept_tails {
        match &kept.note {
            None => writeln!(
                out,
                "kept tail: {}: put back where an open cut it; its valid frames are kept",
                kept.path.display()
            )?,
            Some(note) => {
                writeln!(out, "kept tail: {}: not put back: {note}", kept.path.display())?
            }
        }
    }
    if !report.snapshots.is_empty() {
        let covered: Vec<String> = report.snapshots.iter().map(|s| s.0.to_string()).collect();
        let verb = if report.dry_run { "would copy" } else { "copied" };
        writeln!(out, "snapshots: {verb} those covering seqs through {}", covered.join(", "))?;
    }
    match &report.recovery {
        Some(recovery) => {
            for task in &recovery.tasks {
                for call in &task.calls {
                    writeln!(
                        out,
                        "recovery: task {} call {} ({}): {}, plan {}",
                        task.task.as_str(),
                        call.call_id.as_str(),
                        call.tool,
                        call.outcome.as_str(),
                        call.plan.as_str()
                    )?;
                }
            }
            let written = counted(recovery.events_written, "repair event");
            writeln!(out, "recovery: {written} written")?;
        }
        None if report.dry_run => writeln!(out, "dry run: nothing was written")?,
        None => writeln!(out, "the records are not events: no harness recovery to run")?,
    }
    Ok(())
}

fn kept_text(kept: &KeptRange) -> String {
    let seqs = match kept.last_seq {
        Some(last) => format!("seqs {}..={}", kept.first_seq.0, last.0),
        None => format!("no records (the log continues at seq {})", kept.first_seq.0),
    };
    format!("{seqs} ({}) from {}", counted(kept.records, "record"), kept.source.display())
}

fn damage_text(damage: &Damage) -> String {
    let segment = damage.segment.map_or_else(String::new, |id| format!("segment {} ", id.0));
    let lost = match damage.lost {
        Lost::Nothing => "no record lost".to_owned(),
        Lost::Seqs { first, last } if first == last => format!("lost seq {}", first.0),
        Lost::Seqs { first, last } => format!("lost seqs {}..={}", first.0, last.0),
        Lost::From(first) => format!("lost every record from seq {} on, if any", first.0),
        Lost::Unknown => "lost seqs unknown".to_owned(),
    };
    format!(
        "{segment}{} at offset {}, {}: {}; {lost}",
        damage.path.display(),
        damage.offset,
        counted(damage.bytes, "byte"),
        damage.reason
    )
}

/// The `--json` object (`format-spec/salvage.md`, "Report").
fn report_json(report: &SalvageReport) -> Value {
    let kept: Vec<Value> = report
        .kept
        .iter()
        .map(|k| {
            json!({
                "source": k.source.display().to_string(),
                "segment": k.segment.0,
                "first_seq": k.first_seq.0,
                "last_seq": k.last_seq.map(|s| s.0),
                "records": k.records,
            })
        })
        .collect();
    let gaps: Vec<Value> = report
        .damage
        .iter()
        .map(|d| {
            let (first, last, to_end) = match d.lost {
                Lost::Nothing | Lost::Unknown => (None, None, false),
                Lost::Seqs { first, last } => (Some(first.0), Some(last.0), false),
                Lost::From(first) => (Some(first.0), None, true),
            };
            json!({
                "path": d.path.display().to_string(),
                "segment": d.segment.map(|id| id.0),
                "offset": d.offset,
                "bytes": d.bytes,
                "reason": d.reason.to_string(),
                "lost": {
                    "known": !matches!(d.lost, Lost::Unknown | Lost::From(_)),
                    "first_seq": first,
                    "last_seq": last,
                    "to_end": to_end,
                },
            })
        })
        .collect();
    let declared: Vec<Value> =
        report.gaps.iter().map(|g| json!({ "first_seq": g.first.0, "end_seq": g.end.0 })).collect();
    json!({
        "source": report.source.display().to_string(),
        "target": report.target.display().to_string(),
        "dry_run": report.dry_run,
        "format_version": report.format_version,
        "records_kept": report.records_kept,
        "seqs_lost": report.seqs_lost(),
        "last_seq": report.last_seq.map(|s| s.0),
        "kept": kept,
        "gaps": gaps,
        "declared_gaps": declared,
        "store": report.store,
        "snapshots": report.snapshots.iter().map(|s| s.0).collect::<Vec<u64>>(),
        "kept_tails": report.kept_tails.iter().map(|k| json!({
            "path": k.path.display().to_string(),
            "restored": k.restored,
            "note": k.note,
        })).collect::<Vec<Value>>(),
        "recovery": report.recovery.as_ref().map_or(Value::Null, |r| {
            serde_json::to_value(r).unwrap_or(Value::Null)
        }),
    })
}
