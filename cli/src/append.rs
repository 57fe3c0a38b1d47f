//! `factlog append`: one record per line of standard input, each acknowledged on standard
//! output once it meets the requested durability.
//!
//! The printed sequence number is the acknowledgement: it is written and flushed only after
//! `Log::append` returned, so a reader of standard output may rely on it the way a library
//! caller relies on the returned `Seq` (a `synced` one survives a power loss, a `flushed` one
//! a process crash).

use std::io::{self, BufRead, Read, Write};
use std::process::ExitCode;

use std::path::Path;

use factlog::harness::codec;
use factlog::harness::snapshot::SNAPSHOT_DIR_NAME;
use factlog::limits::FRAME_PAYLOAD_BYTES_MAX;
use factlog::{Durability, Log, Options, Seq};

use crate::{
    AppendArgs, DurabilityArg, EXIT_FAILURE, Failure, Outcome, library_failure, open_failure,
    output_failed, refuse_file,
};

/// Longest line read into memory, newline included. A line one byte longer than the record
/// limit is enough for the library to reject it, and the cap keeps an input without newlines
/// from growing the line buffer without bound.
const LINE_BYTES_MAX: u64 = FRAME_PAYLOAD_BYTES_MAX as u64 + 1;

/// `append`: opens (or creates) the log and appends standard input line by line.
pub fn run(args: &AppendArgs) -> Outcome {
    refuse_file(&args.dir)?;
    refuse_store(&args.dir)?;
    let log =
        Log::open(&args.dir, Options::new()).map_err(|error| open_failure(&args.dir, &error))?;
    crate::report_cut("append", &args.dir, log.recovery_report());
    if let Err(failure) = append_lines(&log, args.durability, args.json) {
        // Records acknowledged before the failure keep their promise either way; closing
        // also writes and syncs the buffered ones. The first failure is the one to report,
        // unless it is only a reader that went away: then a failed close is.
        let closed = log.close();
        if failure.is_quiet() {
            closed.map_err(|error| Failure::new(EXIT_FAILURE, format_args!("close: {error}")))?;
        }
        return Err(failure);
    }
    log.close().map_err(|error| Failure::new(EXIT_FAILURE, format_args!("close: {error}")))?;
    Ok(ExitCode::SUCCESS)
}

/// Refuses a harness store (its first record is an event, or it has snapshots): a raw record
/// appended there is not an event, and every store command would then refuse the store.
fn refuse_store(dir: &Path) -> Result<(), Failure> {
    let refuse = || {
        Failure::new(
            EXIT_FAILURE,
            format_args!(
                "{} is a harness store: a raw record appended to it would not be an event and \
                 the store commands would refuse it; append events with `factlog emit`",
                dir.display()
            ),
        )
    };
    if dir.join(SNAPSHOT_DIR_NAME).is_dir() {
        return Err(refuse());
    }
    // A directory that is not yet a log (or cannot be read) is left for `Log::open` to create
    // or to report.
    let Ok(log) = Log::open_read_only(dir, Options::new()) else { return Ok(()) };
    let Ok(mut reader) = log.read_from(log.first_seq().unwrap_or(Seq(1))) else { return Ok(()) };
    match reader.next_ref() {
        Some(Ok((seq, payload))) if codec::peek(seq, payload).is_ok() => Err(refuse()),
        _ => Ok(()),
    }
}

/// Appends every line of standard input, printing each seq once its append returned: a
/// decimal line, or with `json` `{"seq":N,"durability":".."}`.
fn append_lines(log: &Log, durability: DurabilityArg, json: bool) -> Result<(), Failure> {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut output = stdout.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(LINE_BYTES_MAX)
            .read_until(b'\n', &mut line)
            .map_err(|error| Failure::new(EXIT_FAILURE, format_args!("reading stdin: {error}")))?;
        if read == 0 {
            return Ok(());
        }
        // Without a newline the line either ends the input or hit the length cap; in the
        // second case the append below reports the limit.
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let seq = log
            .append(&line, Durability::from(durability))
            .map_err(|error| library_failure("append", &error))?;
        if json {
            writeln!(output, "{{\"seq\":{},\"durability\":\"{}\"}}", seq.0, durability.name())
        } else {
            writeln!(output, "{}", seq.0)
        }
        .and_then(|()| output.flush())
        .map_err(|error| output_failed(&error))?;
    }
}
