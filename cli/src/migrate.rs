//! `factlog migrate`: the library's [`migrate`], and its report.
//!
//! The JSON form is the library's `MigrationReport` serialised as it is; the text form says
//! what changed, per task, and where the backup is.

use std::fmt::Write as _;
use std::process::ExitCode;

use factlog::harness::migrate::{MigrateOptions, MigrationReport, migrate};
use factlog::{Options, StoreOptions};

use crate::{
    EXIT_FAILURE, Failure, MigrateArgs, Outcome, library_failure, print_out, require_store,
};
use factlog::error::counted;

pub fn run(args: &MigrateArgs) -> Outcome {
    require_store(&args.dir)?;
    let options =
        MigrateOptions { to: args.to, dry_run: args.dry_run, backup: args.backup.clone() };
    // No background threads: a migration appends nothing but its audit events, and a refused
    // one must not leave a preallocated segment behind.
    let store_options = StoreOptions::new().log(Options::new().background_threads(false));
    let report = migrate(&args.dir, store_options, &options).map_err(|error| {
        library_failure(format_args!("cannot migrate {}", args.dir.display()), &error)
    })?;
    if args.json {
        let text = serde_json::to_string(&report).map_err(|error| {
            Failure::new(EXIT_FAILURE, format_args!("cannot format the report: {error}"))
        })?;
        print_out(&format!("{text}\n"))?;
    } else {
        print_out(&report_text(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The text form. Writing into a `String` cannot fail, so the `write!` results are dropped.
fn report_text(report: &MigrationReport) -> String {
    let mut out = String::new();
    let dir = report.dir.display();
    if report.already_current {
        let _ = writeln!(out, "{dir} is already at format {}: nothing to do", report.to);
        return out;
    }
    let verb = if report.dry_run { "would migrate" } else { "migrated" };
    let _ = writeln!(
        out,
        "{verb} {dir} from format {} to {}: {} in {}, {} rewritten, the others copied byte for \
         byte",
        report.from,
        report.to,
        counted(report.events, "event"),
        counted(report.segments as u64, "segment"),
        counted(report.rewritten, "record")
    );
    for task in &report.tasks {
        let _ = writeln!(
            out,
            "  task {}: {}, {} rewritten, state {} (unchanged)",
            task.task,
            counted(task.events, "event"),
            task.rewritten,
            &task.state_digest[..16.min(task.state_digest.len())]
        );
    }
    match &report.backup {
        Some(backup) => {
            let _ = writeln!(
                out,
                "backup of the old store: {} (it still opens with the release that wrote it)",
                backup.display()
            );
            let _ = writeln!(out, "each task has a state/migrated audit event");
        }
        None => {
            let _ = writeln!(out, "dry run: nothing written");
        }
    }
    out
}
