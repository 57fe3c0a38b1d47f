//! `factlog history`: the model-visible history of one task, through a read-only open.
//!
//! The projection is the library's ([`factlog::Store::history`]): every tool call appears
//! with its result or an explicit unknown outcome. Text is one entry per line, message text
//! escaped like a `dump` payload so that a line is an entry; JSON is one `Entry` per line.

use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use factlog::harness::Entry;
use factlog::harness::event::ResultOutcome;
use serde_json::Value;

use crate::{
    EXIT_FAILURE, Failure, HistoryArgs, Outcome, dump, is_broken_pipe, library_failure,
    open_read_only, tasks,
};

/// `history`: opens the store read-only and prints the task's entries.
pub fn run(args: &HistoryArgs) -> Outcome {
    let store = open_read_only(&args.dir)?;
    if store.task_state(&args.task).is_none() {
        return Err(tasks::unknown_store_task(&args.task, &store.task_ids()));
    }
    let entries = store.history(&args.task).map_err(|error| library_failure("read", &error))?;
    let stdout = io::stdout();
    let mut output = BufWriter::new(stdout.lock());
    let mut line = String::new();
    for entry in &entries {
        line.clear();
        if args.json {
            let json = serde_json::to_string(entry).map_err(|error| {
                Failure::new(EXIT_FAILURE, format_args!("cannot format an entry: {error}"))
            })?;
            line.push_str(&json);
        } else {
            entry_text(&mut line, entry);
        }
        line.push('\n');
        if let Err(error) = output.write_all(line.as_bytes()) {
            return write_failed(&error);
        }
    }
    if let Err(error) = output.flush() {
        return write_failed(&error);
    }
    Ok(ExitCode::SUCCESS)
}

/// A closed pipe means the reader has seen enough: not a failure.
fn write_failed(error: &io::Error) -> Outcome {
    if is_broken_pipe(error) {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::new(EXIT_FAILURE, format_args!("writing stdout: {error}")))
    }
}

/// One entry as a line (without its newline). Writing into a `String` cannot fail.
fn entry_text(out: &mut String, entry: &Entry) {
    match entry {
        Entry::User { text, .. } => {
            out.push_str("user: ");
            dump::escape_text(out, text.as_bytes());
        }
        Entry::Assistant { text, partial, .. } => {
            out.push_str("assistant: ");
            dump::escape_text(out, text.as_bytes());
            if *partial {
                out.push_str(" [partial: cut off by an interruption]");
            }
        }
        Entry::Tool { call_id, tool, outcome, result, error, receipt, output, .. } => {
            out.push_str("tool ");
            dump::escape_text(out, call_id.as_str().as_bytes());
            out.push(' ');
            dump::escape_text(out, tool.as_bytes());
            let _ = write!(out, " -> {outcome}");
            // A success is the normal case and says nothing; a failure says so, with its text.
            if *result == Some(ResultOutcome::Error) {
                out.push_str(" error");
            }
            if let Some(error) = error {
                out.push_str(if *result == Some(ResultOutcome::Error) {
                    ": "
                } else {
                    " ok, error: "
                });
                dump::escape_text(out, error.as_bytes());
            }
            push_value(out, "receipt", receipt.as_ref());
            push_value(out, "output", output.as_ref());
        }
        Entry::Operator { event, by, note, call_id, approval_id, .. } => {
            out.push_str("operator ");
            dump::escape_text(out, by.as_bytes());
            let _ = write!(out, ": {event}");
            if let Some(call_id) = call_id {
                out.push_str(" call ");
                dump::escape_text(out, call_id.as_str().as_bytes());
            }
            if let Some(approval_id) = approval_id {
                out.push_str(" approval ");
                dump::escape_text(out, approval_id.as_bytes());
            }
            if let Some(note) = note {
                out.push_str(", note: ");
                dump::escape_text(out, note.as_bytes());
            }
        }
        Entry::Summary { text, .. } => {
            out.push_str("summary: ");
            dump::escape_text(out, text.as_bytes());
        }
    }
}

fn push_value(out: &mut String, label: &str, value: Option<&Value>) {
    if let Some(value) = value {
        // Compact JSON holds no raw newline: the entry stays one line.
        let _ = write!(out, " {label} {value}");
    }
}
