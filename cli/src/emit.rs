//! `factlog emit`: typed events from standard input, one JSON object per line, each answered
//! by one JSON line on standard output once it meets its durability. The protocol (envelope,
//! `id` echo, reply shapes, error codes, `--ack durable-only`) is `format-spec/protocol.md`,
//! version 1. Parsing requests and building replies is the library's (`factlog::protocol`,
//! shared with every other door); this module reads lines, calls it and writes the replies,
//! and owns only the stream rules: blank lines, the line length cap, `--ack durable-only`.
//!
//! The reply is the acknowledgement, as the returned `Appended` is for a library caller: it is
//! written only after the append returned. A refused line (bad JSON, a missing or mistyped
//! field, a stale revision, a missing confirmation or approval, a limit) gets an error reply,
//! nothing is written for it, and the stream goes on. A failure of the store itself (I/O, a
//! poisoned writer) is replied to the same way and ends the command with exit code 1.
//!
//! Latency against throughput: replies go through a buffer that is flushed whenever standard
//! input holds no further complete line, that is before every read that could block. A
//! harness talking through a pipe sees each reply before it sends the next line; a file of a
//! million deltas costs one `write` per buffer, not one per delta.
//!
//! Each `emit` process is a holder (`format-spec/harness-recovery.md`, "Holders"): the
//! library's `Store::task`, called for every line, takes a task written by an earlier process
//! over before its first line is checked, whether that process crashed, was killed or reached
//! the end of its input. This module adds no rule of its own.
//!
//! A store locked by another process that shares it (`DIR/factlog.sock`,
//! `format-spec/server.md`) is written through its socket: the library's client relays the
//! lines and the replies ([`relay`]); the replies are the same.
//!
//! Secrets (`{"$secret": ".."}`) are redacted by the library; this module never prints a body
//! value, and no error message it builds quotes the input.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::process::ExitCode;

use factlog::client::served::Held;
use factlog::client::{Client, ClientError};
use factlog::limits::EVENT_BODY_BYTES_MAX;
use factlog::protocol;
use factlog::protocol::acks::{Acks, Fatal};
use factlog::protocol::reply::code_is_damage;
use factlog::{Error, ErrorKind, Store, StoreOptions};

use crate::{
    AckArg, EXIT_DAMAGED, EXIT_FAILURE, EmitArgs, Failure, Outcome, library_failure, open_failure,
    output_failed, refuse_file,
};

/// Longest input line read into memory, newline included. A stored body holds at most
/// `EVENT_BODY_BYTES_MAX` bytes, but its JSON line may spell characters as longer escapes
/// (`\u0041`), so the cap leaves room; the library enforces the real bound. The cap only
/// keeps a line without a newline from growing the buffer without bound.
const LINE_BYTES_MAX: u64 = 4 * EVENT_BODY_BYTES_MAX as u64;

/// Bytes of the input buffer: many small lines per `read` when standard input is a file.
const INPUT_BUFFER_BYTES: usize = 64 * 1024;

/// Bytes of the output buffer: many replies per `write` when they are not awaited.
const OUTPUT_BUFFER_BYTES: usize = 64 * 1024;

pub fn run(args: &EmitArgs) -> Outcome {
    refuse_file(&args.dir)?;
    // A store another process serves now is written through its socket at once, without
    // first waiting out the open's retries of its busy lock; a socket that does not answer
    // falls back to opening, which says why. Options only a holder applies go that way too.
    let holder_options = args.replicate_to.is_some() || args.refuse_unmarked_secrets;
    let mut first_connect = None;
    if !holder_options && factlog::client::served::served_now(&args.dir).is_some() {
        match connect(args) {
            Ok(client) => return relay(args, client),
            Err(error) => first_connect = Some(error),
        }
    }
    let options = StoreOptions::new().refuse_unmarked_secrets(args.refuse_unmarked_secrets);
    let store = match Store::open(&args.dir, options) {
        Ok(store) => store,
        Err(error) => {
            return match factlog::client::served::held_by_another(&args.dir, &error) {
                Some(Held::Served { .. }) => {
                    refuse_served_options(args)?;
                    let client = connect(args).map_err(|client| {
                        Failure::new(
                            EXIT_FAILURE,
                            format_args!("cannot open {}: {error}; {client}", args.dir.display()),
                        )
                    })?;
                    relay(args, client)
                }
                Some(Held::NotServed { pid }) => Err(Failure::new(
                    EXIT_FAILURE,
                    factlog::client::served::not_served_message(
                        &args.dir,
                        &error,
                        pid,
                        "emit connects to it",
                    ),
                )),
                // Opening failed for another reason after the socket did not answer (a peer of
                // the server's group cannot open the store's lock file): both say why.
                None => match first_connect {
                    Some(connect) => Err(Failure::new(
                        EXIT_FAILURE,
                        format_args!(
                            "cannot open {}: {error}; its socket: {connect}",
                            args.dir.display()
                        ),
                    )),
                    None => Err(open_failure(&args.dir, &error)),
                },
            };
        }
    };
    crate::report_cut("emit", &args.dir, &store.open_report().log);
    let (store, replication) = crate::replicate::beside(store, args.replicate_to.as_deref())?;
    let emitted = emit_lines(&store, args.ack);
    // The replica gets what was appended before the store closes.
    let replicated = replication.map(factlog::replica::Replication::stop).transpose();
    // Closing syncs what was appended: the acknowledged events keep their promise either way,
    // and the buffered ones become durable. The first failure is the one to report.
    // A reader that went away ends the command quietly, unless the close then failed.
    let closed = store.close();
    match emitted {
        Err(failure) if !failure.is_quiet() => return Err(failure),
        _ => {}
    }
    closed.map_err(|error| library_failure("close", &error))?;
    replicated.map_err(|error| library_failure("replicate", &error))?;
    emitted.map(|()| ExitCode::SUCCESS)
}

/// The options an emit of a served store cannot take: they are the serving process's.
fn refuse_served_options(args: &EmitArgs) -> Result<(), Failure> {
    if let Some(url) = &args.replicate_to {
        return Err(Failure::new(
            EXIT_FAILURE,
            format_args!(
                "{} is served by another process: --replicate-to {url} is that process's to \
                 run (`factlog serve --replicate-to`, or Store::replicate in it); its clients' \
                 \"durability\":\"replicated\" lines are acknowledged once its replica holds \
                 them",
                args.dir.display()
            ),
        ));
    }
    if args.refuse_unmarked_secrets {
        return Err(Failure::new(
            EXIT_FAILURE,
            format_args!(
                "{} is served by another process: --refuse-unmarked-secrets is that \
                 process's to set (give it to `factlog serve`)",
                args.dir.display()
            ),
        ));
    }
    Ok(())
}

/// Connects to the process that serves the store, with emit's acknowledgements.
fn connect(args: &EmitArgs) -> Result<Client, ClientError> {
    Client::connect_acks(&args.dir, args.ack.mode())
}

/// The store is held by another process that shares it (`DIR/factlog.sock`,
/// `format-spec/server.md`) and `client` is connected to it: standard input goes to it and
/// its replies to standard output, the same replies as from a store opened here.
fn relay(args: &EmitArgs, client: Client) -> Outcome {
    if client.acks() != args.ack.mode() {
        return Err(Failure::new(
            EXIT_FAILURE,
            format_args!(
                "{} is served by a process that does not acknowledge durable-only (an earlier \
                 release): run emit without --ack durable-only, or serve with this release",
                args.dir.display()
            ),
        ));
    }
    let stdout = io::stdout();
    let mut output = BufWriter::with_capacity(OUTPUT_BUFFER_BYTES, stdout.lock());
    let relayed = match client.relay(io::stdin(), &mut output) {
        Ok(relayed) => relayed,
        Err(ClientError::Protocol { what }) => {
            return Err(output_failed(&io::Error::other(what)));
        }
        Err(error) => return Err(Failure::new(EXIT_FAILURE, format_args!("append: {error}"))),
    };
    match relayed.ending {
        None => Ok(ExitCode::SUCCESS),
        Some((code, message)) => {
            let exit_code = if code_is_damage(&code) { EXIT_DAMAGED } else { EXIT_FAILURE };
            Err(Failure::new(exit_code, format_args!("append: {message}")))
        }
    }
}

/// Reads every line of standard input and replies to each, under the library's
/// acknowledgement rules (`factlog::protocol::acks`).
fn emit_lines(store: &Store, ack: AckArg) -> Result<(), Failure> {
    let stdin = io::stdin();
    let mut input = BufReader::with_capacity(INPUT_BUFFER_BYTES, stdin.lock());
    let stdout = io::stdout();
    let mut output = BufWriter::with_capacity(OUTPUT_BUFFER_BYTES, stdout.lock());
    let mut acks = Acks::new(ack.mode());
    let mut line = Vec::new();
    loop {
        // The next read blocks unless a whole line is buffered: whoever waits for the
        // replies written so far must get them first.
        if !input.buffer().contains(&b'\n') {
            output.flush().map_err(write_failed)?;
        }
        line.clear();
        let reply = match read_line(&mut input, &mut line).map_err(read_failed)? {
            Line::End => break,
            Line::TooLong(bytes) => protocol::Reply::from_error(
                &Error::from(ErrorKind::LimitExceeded {
                    what: "emit input line bytes",
                    value: bytes,
                    limit: LINE_BYTES_MAX,
                }),
                None,
            ),
            Line::Complete if line.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Complete => protocol::handle_line(store, &line),
        };
        let fatal = acks.answer(store, reply, &mut output).map_err(write_failed)?;
        if let Some(fatal) = fatal {
            output.flush().map_err(write_failed)?;
            return Err(fatal_failure("append", &fatal));
        }
    }
    // Under durable-only the final reply promises that every line it covers is synced.
    if let Some(fatal) = acks.end(store, &mut output).map_err(write_failed)? {
        output.flush().map_err(write_failed)?;
        return Err(fatal_failure("sync", &fatal));
    }
    output.flush().map_err(write_failed)
}

/// The failure that ends the command after a reply that ends the stream.
fn fatal_failure(what: &str, fatal: &Fatal) -> Failure {
    let exit_code = if fatal.damaged { EXIT_DAMAGED } else { EXIT_FAILURE };
    Failure::new(exit_code, format_args!("{what}: {}", fatal.message))
}

/// A closed standard output ends the stream quietly: nobody reads the replies any more.
fn write_failed(error: io::Error) -> Failure {
    output_failed(&error)
}

fn read_failed(error: io::Error) -> Failure {
    Failure::new(EXIT_FAILURE, format_args!("reading stdin: {error}"))
}

/// One line of input, as read.
enum Line {
    /// The end of input.
    End,
    /// A line (its newline removed), or the last bytes of input without one.
    Complete,
    /// A line longer than [`LINE_BYTES_MAX`], skipped through its newline; its length.
    TooLong(u64),
}

/// Reads one line into `line`, at most [`LINE_BYTES_MAX`] bytes of it.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Line> {
    let read = input.by_ref().take(LINE_BYTES_MAX).read_until(b'\n', line)?;
    if read == 0 {
        return Ok(Line::End);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        return Ok(Line::Complete);
    }
    if (read as u64) < LINE_BYTES_MAX {
        return Ok(Line::Complete);
    }
    line.clear();
    Ok(Line::TooLong(read as u64 + skip_line(input)?))
}

/// Discards input through the next newline (or the end); returns the bytes discarded.
fn skip_line(input: &mut impl BufRead) -> io::Result<u64> {
    let mut skipped = 0;
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok(skipped);
        }
        if let Some(end) = buffer.iter().position(|&byte| byte == b'\n') {
            input.consume(end + 1);
            return Ok(skipped + end as u64 + 1);
        }
        let len = buffer.len();
        input.consume(len);
        skipped += len as u64;
    }
}
