//! `factlog tail`: prints the records of a log like `dump`, and with `--follow` keeps printing
//! the records a live writer appends, as a second, read-only process.
//!
//! Following polls: every [`POLL_INTERVAL`] the log is opened again read-only (no lock, nothing
//! written, so the writer is never disturbed) and the records after the last one printed are
//! printed and flushed. A read-only open sees what the writer has written to its files, so a
//! record appears once it is at least `Flushed`. A failed re-open or read while following (the
//! writer rolling or reclaiming a segment at that moment, a record half written) is retried
//! for up to [`FOLLOW_RETRIES`] polls before it ends the command; the first open must succeed.
//! A reader that goes away (`factlog tail -f DIR | head`) ends the command with exit 0 at the
//! next record printed. `--task` keeps one task's events; a task the store has no events of
//! when the command starts is refused (exit 1), as in `dump`.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Duration;

use factlog::{Log, Options, Seq};

use crate::dump::{Printer, write_failed};
use crate::{
    DumpFormat, Failure, Outcome, TailArgs, TimeArgs, exit_code_of, open_failure, require_store,
    tasks,
};

/// How often `--follow` looks for new records.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Consecutive failed polls `--follow` tolerates (5 s at [`POLL_INTERVAL`]).
const FOLLOW_RETRIES: u32 = 50;

/// Why one poll stopped.
enum PollError {
    /// Opening or reading the log failed.
    Log(factlog::Error),
    /// Writing standard output failed.
    Write(io::Error),
}

/// `tail`: prints the records from `--from` on, and with `-f` keeps polling for new ones.
pub fn run(args: &TailArgs) -> Outcome {
    require_store(&args.dir)?;
    if let Some(task) = &args.task {
        let log = Log::open_read_only(&args.dir, Options::new())
            .map_err(|error| open_failure(&args.dir, &error))?;
        tasks::require_task_in_log(&args.dir, &log, task)?;
    }
    let printer = Printer {
        format: if args.json { DumpFormat::Json } else { DumpFormat::Text },
        raw: false,
        task: args.task.as_deref(),
        event_type: None,
        time: TimeArgs { since: None, until: None },
    };
    let stdout = io::stdout();
    let mut output = BufWriter::new(stdout.lock());
    let mut next = Seq(args.from);
    let mut failures = 0;
    let mut polled_once = false;
    loop {
        match poll(args, &printer, &mut next, &mut output) {
            Ok(()) => failures = 0,
            Err(PollError::Write(error)) => return write_failed(&error),
            Err(PollError::Log(error)) => {
                failures += 1;
                if !args.follow || !polled_once || failures > FOLLOW_RETRIES {
                    return Err(Failure::new(
                        exit_code_of(&error),
                        format_args!("cannot read {}: {error}", args.dir.display()),
                    ));
                }
            }
        }
        polled_once = true;
        if !args.follow {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Opens the log read-only and prints every record from `next` on, advancing `next` past each
/// record printed; flushes what it printed.
fn poll(
    args: &TailArgs,
    printer: &Printer<'_>,
    next: &mut Seq,
    output: &mut impl Write,
) -> Result<(), PollError> {
    let log = Log::open_read_only(&args.dir, Options::new()).map_err(PollError::Log)?;
    let first = log.first_seq().map_err(PollError::Log)?;
    if next.0 < first.0 {
        // Only a warning on the first poll when --from asked for reclaimed records; later, the
        // writer reclaimed records this command had not printed yet.
        eprintln!("factlog: records before {first} were reclaimed; printing from {first}");
        *next = first;
    }
    if log.last_seq().is_none_or(|last| last.0 < next.0) {
        return Ok(());
    }
    let reader = log.read_from(*next).map_err(PollError::Log)?;
    let mut line = String::new();
    for record in reader {
        let record = record.map_err(PollError::Log)?;
        line.clear();
        printer.line(&mut line, record.seq, &record.payload);
        output.write_all(line.as_bytes()).map_err(PollError::Write)?;
        *next = Seq(record.seq.0 + 1);
    }
    output.flush().map_err(PollError::Write)
}
