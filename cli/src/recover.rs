//! `factlog recover`: the library's harness recovery, and its report.
//!
//! Without `--dry-run` the store is opened for writing and [`Store::recover`] appends each
//! task's repair events (synced); a second run without new events writes nothing and reports
//! the same decisions. With `--dry-run` the store is opened read-only (no lock, not a byte
//! written) and [`Store::plan_recovery`] says what a real run would decide.
//!
//! A store locked by a process that shares it (`format-spec/server.md`) is recovered by that
//! process, through its socket: the same report; `--dry-run` asks that process for its plan
//! too, so the preview leaves its clients' tasks alone exactly as the run will. A store held
//! by a process that does not share it is refused with or without `--dry-run`.
//!
//! The JSON form is the library's `RecoveryReport` serialised as it is, so its shape is the
//! library's contract; the text form is one block per task.

use std::fmt::Write as _;
use std::process::ExitCode;

use factlog::client::Client;
use factlog::harness::recovery::{RecoveryReport, TaskRecovery};
use factlog::harness::{ApprovalId, Outcome as CallOutcome, Resume};
use factlog::{Store, StoreOptions};

use crate::{
    EXIT_FAILURE, Failure, Outcome, RecoverArgs, library_failure, open_or_share_failure, print_out,
    require_store,
};
use factlog::error::counted;

pub fn run(args: &RecoverArgs) -> Outcome {
    require_store(&args.dir)?;
    if args.dry_run {
        // A preview must be the plan `recover` would carry out: through the serving process
        // on a served store (its clients' tasks are left alone there), and the same refusal
        // on a store a process holds without sharing it.
        match factlog::client::served::holder_of(&args.dir) {
            Some(factlog::client::served::Held::Served { .. }) => {
                let report = Client::connect(&args.dir)
                    .and_then(|mut client| client.recover(true))
                    .map_err(|error| {
                        Failure::new(
                            EXIT_FAILURE,
                            format_args!("cannot ask {} for its plan: {error}", args.dir.display()),
                        )
                    })?;
                return print_report(args, &report);
            }
            Some(factlog::client::served::Held::NotServed { .. }) => {
                let locked: factlog::Error =
                    factlog::ErrorKind::Locked { dir: args.dir.clone() }.into();
                return Err(open_or_share_failure(&args.dir, &locked));
            }
            None => {}
        }
    }
    // Served now: recovery runs in the serving process, asked at once (not after the open's
    // retries of the busy lock); a socket that does not answer falls back to opening, below.
    if !args.dry_run
        && let Some(mut client) = factlog::client::served::connect_now(&args.dir)
    {
        let report = client.recover(false).map_err(crate::served_failure("recover", &args.dir))?;
        return print_report(args, &report);
    }
    let open = if args.dry_run { Store::open_read_only } else { Store::open };
    let report = match open(&args.dir, StoreOptions::new()) {
        Ok(store) => {
            if !args.dry_run {
                crate::report_cut("recover", &args.dir, &store.open_report().log);
            }
            let report = if args.dry_run {
                store.plan_recovery()
            } else {
                store
                    .recover()
                    .map_err(|error| library_failure("recovery could not be written", &error))?
            };
            store.close().map_err(|error| library_failure("close", &error))?;
            report
        }
        // Held by a process that shares the store: recovery runs there
        // (format-spec/server.md, "recover").
        Err(error)
            if matches!(
                factlog::client::served::held_by_another(&args.dir, &error),
                Some(factlog::client::served::Held::Served { .. })
            ) =>
        {
            Client::connect(&args.dir).and_then(|mut client| client.recover(false)).map_err(
                |client_error| {
                    Failure::new(
                        EXIT_FAILURE,
                        format_args!("cannot open {}: {error}; {client_error}", args.dir.display()),
                    )
                },
            )?
        }
        Err(error) => return Err(open_or_share_failure(&args.dir, &error)),
    };
    print_report(args, &report)
}

/// Prints the report, as text or with `--json` as one object.
fn print_report(args: &RecoverArgs, report: &RecoveryReport) -> Outcome {
    if args.json {
        let text = serde_json::to_string(report).map_err(|error| {
            Failure::new(EXIT_FAILURE, format_args!("cannot format the report: {error}"))
        })?;
        print_out(&format!("{text}\n"))?;
    } else {
        print_out(&report_text(report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The text form. Writing into a `String` cannot fail, so the `write!` results are dropped.
fn report_text(report: &RecoveryReport) -> String {
    let mut out = String::new();
    if let Some(restored) = &report.restored {
        let _ = writeln!(
            out,
            "restored from {} through seq {} (replicated from device {}, restored on {}): a \
             new holder, so no authority or call in flight carried over",
            restored.from,
            restored.through_seq,
            restored.source_device.as_deref().unwrap_or("unknown"),
            restored.device
        );
    }
    for task in &report.tasks {
        task_text(&mut out, task, report.dry_run);
    }
    let tasks = report.tasks.len();
    let plural = if tasks == 1 { "" } else { "s" };
    if report.dry_run {
        let _ = writeln!(out, "dry run: {tasks} task{plural}, nothing written");
    } else {
        let _ = writeln!(
            out,
            "recovered {tasks} task{plural}: {} written",
            counted(report.events_written, "repair event")
        );
    }
    out
}

fn task_text(out: &mut String, task: &TaskRecovery, dry_run: bool) {
    let resume = match task.resume {
        Resume::Ready => "ready: may resume by itself".to_owned(),
        Resume::NeedsConfirmation => {
            "needs_confirmation: record a control/resume before any side effect".to_owned()
        }
    };
    let _ = writeln!(out, "task {}: {resume}", task.task);
    for call in &task.calls {
        let mut line = format!(
            "  call {} ({}): {} -> {}",
            call.call_id,
            call.tool,
            call.outcome.as_str(),
            call.plan.as_str()
        );
        if let Some(key) = &call.request_key {
            let _ = write!(line, ", request key {key}");
        }
        if call.outcome == CallOutcome::Completed {
            let receipt =
                call.receipt.as_ref().map_or_else(|| "none".to_owned(), ToString::to_string);
            let _ = write!(line, ", receipt {receipt}");
        }
        out.push_str(&line);
        out.push('\n');
    }
    if !task.expired.is_empty() {
        let ids: Vec<&str> = task.expired.iter().map(ApprovalId::as_str).collect();
        let _ = writeln!(out, "  expired approvals: {}", ids.join(", "));
    }
    if !task.expired_signals.is_empty() {
        let seqs: Vec<String> = task.expired_signals.iter().map(u64::to_string).collect();
        let _ = writeln!(out, "  expired cancel signals (seq): {}", seqs.join(", "));
    }
    if let Some(step) = task.interrupted_step {
        let _ = writeln!(out, "  step {step} closed as interrupted");
    }
    if let Some(turn) = task.interrupted_turn {
        let _ = writeln!(out, "  turn {turn} closed as interrupted");
    }
    if !dry_run {
        let _ = writeln!(out, "  {} written", counted(task.events_written, "repair event"));
    }
}
