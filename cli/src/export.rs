//! `factlog export`: every event of a store as one JSON object per line (JSON Lines), through
//! a read-only open (no lock, nothing written).
//!
//! A line is the typed JSON of `dump --json` plus the body schema version: the envelope
//! `seq`, `task`, `revision`, `timestamp_us`, `time` (RFC 3339), `type`, `schema`, then the
//! body fields (one named like an envelope field as `body.NAME`). Tools that read agent
//! transcripts as JSONL take one object per line with a `type`. `--task`, `--since` and
//! `--until` select events by their envelope; every event is checked (timestamps may jump
//! back), the scan never stops at the first one out of range.
//!
//! A store holds only events, so a record that is not one (a raw `factlog append` record, or an
//! event that does not decode) is not skipped: the export stops there with exit 3 (refused
//! data) and says which record it is, rather than hand on a transcript with a silent hole. The
//! lines before it have been printed.
//!
//! A damaged store is different: its records are not wrong, they are missing. Every event
//! before the damage is exported, then the damage is named on standard error with a pointer
//! to `factlog salvage`, and the exit code is 3.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use factlog::harness::codec;
use factlog::{ErrorKind, Log, Options, Seq};

use crate::dump::{check_time_range, event_json_line, write_failed};
use crate::progress::{Progress, Unit};
use crate::{
    EXIT_DAMAGED, ExportArgs, Failure, Outcome, damage_message, library_failure, open_failure,
    require_store, tasks, warn_deprecated,
};

/// `export`: opens the store read-only up to any damage and prints every selected event.
/// `--json` and the deprecated `--jsonl` name the only format, the default.
pub fn run(args: &ExportArgs) -> Outcome {
    // JSON Lines is the only format: both flags only name it.
    if args.jsonl {
        warn_deprecated("--jsonl", "--json, or nothing: JSON Lines is export's only format");
    }
    check_time_range(&args.time)?;
    require_store(&args.dir)?;
    let (log, mut damage) = Log::open_read_only_to_damage(&args.dir, Options::new())
        .map_err(|error| open_failure(&args.dir, &error))?;
    if let Some(task) = &args.task {
        tasks::require_task_in_log(&args.dir, &log, task)?;
    }
    let read_error = |error| library_failure("read", &error);
    let first = log.first_seq().map_err(read_error)?;
    if first.0 > 1 {
        eprintln!("factlog: records before {first} were reclaimed; exporting from {first}");
    }
    let reader = log.read_from(first).map_err(read_error)?;
    let total = log.last_seq().map_or(0, |seq| seq.0 + 1).saturating_sub(first.0);
    let progress = Progress::new("export", Some(total), Unit::Count("records"), true);
    let stdout = io::stdout();
    let mut output = BufWriter::new(stdout.lock());
    let mut line = String::new();
    for record in reader {
        let record = match record {
            Ok(record) => record,
            Err(error) if error.is_corruption() => {
                damage = Some(error);
                break;
            }
            Err(error) => return Err(read_error(error)),
        };
        progress.set(record.seq.0 + 1 - first.0);
        let event = codec::decode(record.seq, &record.payload)
            .map_err(|error| not_an_event(record.seq, &record.payload, &error))?;
        if args.task.as_deref().is_some_and(|task| event.task.as_str() != task)
            || !args.time.contains(event.timestamp_us)
        {
            continue;
        }
        line.clear();
        event_json_line(&mut line, &event, true);
        if let Err(error) = output.write_all(line.as_bytes()) {
            return write_failed(&error);
        }
    }
    if let Err(error) = output.flush() {
        return write_failed(&error);
    }
    if let Some(damage) = damage {
        return Err(Failure::new(EXIT_DAMAGED, damage_message(&args.dir, &damage)));
    }
    Ok(ExitCode::SUCCESS)
}

/// The failure for a record that is not a decodable event: refused data, exit 3.
fn not_an_event(seq: Seq, payload: &[u8], error: &factlog::Error) -> Failure {
    if codec::peek(seq, payload).is_err() {
        return Failure::new(
            EXIT_DAMAGED,
            format_args!(
                "record {seq} is not an event (a raw record, as `factlog append` writes): \
                 export reads stores, which hold only events; `factlog dump` prints raw records"
            ),
        );
    }
    let reason = match error.kind() {
        ErrorKind::CorruptEvent { reason, .. } => reason.clone(),
        _ => error.to_string(),
    };
    Failure::new(
        EXIT_DAMAGED,
        format_args!(
            "record {seq} is an event that does not decode ({reason}); `factlog dump --json` \
             shows its bytes"
        ),
    )
}
