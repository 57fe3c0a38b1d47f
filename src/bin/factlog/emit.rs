//! `factlog emit`: typed events from standard input, one JSON object per line, each answered
//! by one JSON line on standard output once it meets its durability. The protocol (envelope,
//! `id` echo, reply shapes, error codes, `--ack durable-only`) is `format-spec/protocol.md`,
//! version 1; this module implements it and adds no rule of its own.
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
//! Secrets (`{"$secret": ".."}`) are redacted by the library; this module never prints a body
//! value, and no error message it builds quotes the input.

use std::fmt;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::process::ExitCode;

use factlog::harness::codec;
use factlog::harness::event::AssistantDelta;
use factlog::harness::secret_shapes;
use factlog::harness::upcast::{self, ToolResultV1};
use factlog::harness::{Body, EventType};
use factlog::limits::EVENT_BODY_BYTES_MAX;
use factlog::{AppendOptions, Appended, Durability, Error, ErrorKind, Store, StoreOptions};
use serde_json::{Map, Value, json};

use crate::{
    AckArg, EXIT_FAILURE, EmitArgs, Failure, Outcome, library_failure, open_failure, output_failed,
    refuse_file,
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

/// The envelope keys of an input line; every other key belongs to the body.
const KEY_ID: &str = "id";
const KEY_TASK: &str = "task";
const KEY_TYPE: &str = "type";
const KEY_EXPECTED_REVISION: &str = "expected_revision";
const KEY_DURABILITY: &str = "durability";

pub fn run(args: &EmitArgs) -> Outcome {
    refuse_file(&args.dir)?;
    let options = StoreOptions::new().refuse_unmarked_secrets(args.refuse_unmarked_secrets);
    let store = Store::open(&args.dir, options).map_err(|error| open_failure(&args.dir, &error))?;
    let emitted = emit_lines(&store, args.ack);
    // Closing syncs what was appended: the acknowledged events keep their promise either way,
    // and the buffered ones become durable. The first failure is the one to report.
    // A reader that went away ends the command quietly, unless the close then failed.
    let closed = store.close();
    match emitted {
        Err(failure) if !failure.is_quiet() => return Err(failure),
        _ => {}
    }
    closed.map_err(|error| library_failure("close", &error))?;
    emitted.map(|()| ExitCode::SUCCESS)
}

/// What became of one input line (`format-spec/protocol.md`, "Replies").
enum Reply {
    /// The event was written; the reply and the durability the append waited for.
    Written { reply: Map<String, Value>, durability: Durability },
    /// Nothing was written (a refusal or a duplicate), or a buffered event was written with
    /// warnings that must reach the harness: the reply stands alone and the stream goes on.
    NotWritten { reply: Map<String, Value> },
    /// The store can take no more events: the reply, then the command ends.
    Fatal { reply: Map<String, Value>, message: String },
    /// A blank line: no reply.
    Skip,
}

/// Replies still owed under `--ack durable-only` (`format-spec/protocol.md`, "Acknowledging
/// only durable events"): the lines answered by no reply yet, all of them written buffered
/// events.
struct Acks {
    durable_only: bool,
    pending: u64,
}

/// Reads every line of standard input and replies to each.
fn emit_lines(store: &Store, ack: AckArg) -> Result<(), Failure> {
    let stdin = io::stdin();
    let mut input = BufReader::with_capacity(INPUT_BUFFER_BYTES, stdin.lock());
    let stdout = io::stdout();
    let mut output = BufWriter::with_capacity(OUTPUT_BUFFER_BYTES, stdout.lock());
    let mut acks = Acks { durable_only: ack == AckArg::DurableOnly, pending: 0 };
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
            Line::TooLong(bytes) => refused(
                &Error::from(ErrorKind::LimitExceeded {
                    what: "emit input line bytes",
                    value: bytes,
                    limit: LINE_BYTES_MAX,
                }),
                None,
            ),
            Line::Complete => handle_line(store, &line),
        };
        if let Some(message) = acks.reply(store, reply, &mut output)? {
            output.flush().map_err(write_failed)?;
            return Err(Failure::new(EXIT_FAILURE, format_args!("append: {message}")));
        }
    }
    if acks.durable_only {
        // The final reply promises that every line it covers is synced.
        if let Err(error) = store.flush(Durability::Synced) {
            let mut reply = error_reply(&error, None);
            let message = error.to_string();
            reply.insert("covers".to_owned(), json!(acks.pending));
            write_reply(&mut output, &reply)?;
            output.flush().map_err(write_failed)?;
            return Err(Failure::new(EXIT_FAILURE, format_args!("sync: {message}")));
        }
        let mut end = Map::new();
        end.insert("end".to_owned(), json!(true));
        end.insert("covers".to_owned(), json!(acks.pending));
        end.insert("durability".to_owned(), json!(Durability::Synced.as_str()));
        write_reply(&mut output, &end)?;
    }
    output.flush().map_err(write_failed)
}

impl Acks {
    /// Writes the reply (or, under `--ack durable-only`, skips it or covers the skipped
    /// lines with it); returns the message of a fatal failure.
    fn reply(
        &mut self,
        store: &Store,
        reply: Reply,
        output: &mut impl Write,
    ) -> Result<Option<String>, Failure> {
        let (mut reply, fatal) = match reply {
            Reply::Skip => return Ok(None),
            Reply::Written { reply, durability } => {
                if self.durable_only && durability == Durability::Buffered {
                    self.pending += 1;
                    return Ok(None);
                }
                // Durability is prefix-ordered: the buffered events written before this one
                // are now as durable as it is.
                (reply, None)
            }
            Reply::Fatal { reply, message } => (reply, Some(message)),
            Reply::NotWritten { reply } => {
                if self.durable_only && self.pending > 0 {
                    // A refusal or a duplicate writes nothing, so it cannot carry the skipped
                    // lines: they are synced and acknowledged by a reply of their own first.
                    match store.flush(Durability::Synced) {
                        Ok(()) => {
                            let mut covering = Map::new();
                            covering.insert("covers".to_owned(), json!(self.pending));
                            covering.insert(
                                "durability".to_owned(),
                                json!(Durability::Synced.as_str()),
                            );
                            write_reply(output, &covering)?;
                            self.pending = 0;
                            (reply, None)
                        }
                        // A failed sync ends the stream, whatever its kind.
                        Err(error) => (
                            error_reply(&error, reply.get(KEY_ID).cloned()),
                            Some(error.to_string()),
                        ),
                    }
                } else {
                    (reply, None)
                }
            }
        };
        if self.durable_only {
            reply.insert("covers".to_owned(), json!(self.pending + 1));
            self.pending = 0;
        }
        write_reply(output, &reply)?;
        Ok(fatal)
    }
}

fn write_reply(output: &mut impl Write, reply: &Map<String, Value>) -> Result<(), Failure> {
    serde_json::to_writer(&mut *output, reply).map_err(io::Error::from).map_err(write_failed)?;
    output.write_all(b"\n").map_err(write_failed)
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

/// A line the command itself refuses before the library sees it: the message says which
/// field is wrong and never quotes the input, which may hold a secret.
#[derive(Debug)]
struct BadLine(String);

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; nothing was written (each line is one JSON object with \"task\", \"type\" and \
             the body fields of that type: see format-spec/events.md)",
            self.0
        )
    }
}

/// One parsed input line.
struct Request {
    task: String,
    body: Body,
    options: AppendOptions,
}

fn handle_line(store: &Store, line: &[u8]) -> Reply {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Reply::Skip;
    }
    let mut id = None;
    let request = match parse(line, &mut id) {
        Ok(request) => request,
        Err(Refusal::Line(bad)) => {
            let mut reply = with_id(id);
            reply.insert("error".to_owned(), json!("INVALID_EVENT"));
            reply.insert("message".to_owned(), json!(bad.to_string()));
            return Reply::NotWritten { reply };
        }
        Err(Refusal::Library(error)) => return refused(&error, id),
    };
    // The line's own text tells, in one pass, whether its body can hold a credential: only
    // then is the body encoded once more to find where. An escape could spell a prefix in the
    // line that the pass does not see, so a line with one is always looked at.
    let scan = line.contains(&b'\\') || secret_shapes::json_may_hold_credential(line);
    match append(store, request, id.clone(), scan) {
        Ok(reply) => reply,
        Err(error) => refused(&error, id),
    }
}

/// A new reply object, holding the request's `id` first when it had one.
fn with_id(id: Option<Value>) -> Map<String, Value> {
    let mut reply = Map::new();
    if let Some(id) = id {
        reply.insert(KEY_ID.to_owned(), id);
    }
    reply
}

/// Why a line was not appended.
enum Refusal {
    Line(BadLine),
    Library(Error),
}

impl From<BadLine> for Refusal {
    fn from(bad: BadLine) -> Refusal {
        Refusal::Line(bad)
    }
}

/// Splits a line into its envelope keys and its typed body.
/// The request's `id`, once read, is left in `id` for the reply, refused or not.
fn parse(line: &[u8], id: &mut Option<Value>) -> Result<Request, Refusal> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|error| BadLine(format!("the line is not valid JSON ({error})")))?;
    let Value::Object(mut object) = value else {
        return Err(BadLine("the line is not a JSON object".to_owned()).into());
    };
    match object.shift_remove(KEY_ID) {
        None => {}
        Some(value @ (Value::String(_) | Value::Number(_))) => *id = Some(value),
        Some(_) => return Err(BadLine("\"id\" must be a string or a number".to_owned()).into()),
    }
    let task = match object.shift_remove(KEY_TASK) {
        Some(Value::String(task)) if !task.is_empty() => task,
        Some(_) => return Err(BadLine("\"task\" must be a non-empty string".to_owned()).into()),
        None => return Err(BadLine("\"task\" is missing".to_owned()).into()),
    };
    let type_name = match object.shift_remove(KEY_TYPE) {
        Some(Value::String(name)) => name,
        Some(_) => return Err(BadLine("\"type\" must be a string".to_owned()).into()),
        None => return Err(BadLine("\"type\" is missing".to_owned()).into()),
    };
    let Some(event_type) = EventType::from_name(&type_name) else {
        let known: Vec<&str> = EventType::ALL.iter().map(|t| t.name()).collect();
        return Err(BadLine(format!(
            "unknown event type {type_name:?} (known: {})",
            known.join(", ")
        ))
        .into());
    };
    let options = AppendOptions {
        expected_revision: expected_revision(object.shift_remove(KEY_EXPECTED_REVISION))?,
        durability: durability(object.shift_remove(KEY_DURABILITY))?,
    };
    let body = body(event_type, object).map_err(Refusal::Library)?;
    Ok(Request { task, body, options })
}

fn expected_revision(value: Option<Value>) -> Result<Option<u64>, BadLine> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) if number.as_u64().is_some() => Ok(number.as_u64()),
        Some(_) => Err(BadLine("\"expected_revision\" must be a non-negative integer".to_owned())),
    }
}

fn durability(value: Option<Value>) -> Result<Option<Durability>, BadLine> {
    let bad =
        || BadLine("\"durability\" must be \"buffered\", \"flushed\" or \"synced\"".to_owned());
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => match name.as_str() {
            "buffered" => Ok(Some(Durability::Buffered)),
            "flushed" => Ok(Some(Durability::Flushed)),
            "synced" => Ok(Some(Durability::Synced)),
            _ => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

/// The typed body of `event_type` from the remaining keys of the line. A `tool/result`
/// without `outcome` is read in schema 1 (`status`) and upcast, so that scripts written for
/// schema 1 keep working; one the upcast refuses is an invalid event.
fn body(event_type: EventType, fields: Map<String, Value>) -> Result<Body, Error> {
    let invalid = |reason: String| -> Error {
        ErrorKind::InvalidEvent { event_type: event_type.name().to_owned(), reason }.into()
    };
    if event_type == EventType::ToolResult && !fields.contains_key("outcome") {
        let v1: ToolResultV1 = serde_json::from_value(Value::Object(fields))
            .map_err(|error| invalid(format!("{error} (read as schema 1: no \"outcome\")")))?;
        // The refusal's own reason may quote a value of the input: it is not repeated here.
        return upcast::tool_result_1_to_2(v1).map(Body::ToolResult).map_err(|_| {
            invalid(
                "read as schema 1 (no \"outcome\"), it cannot be upcast: a schema-1 \"status\" \
                 must be absent, \"ok\" or \"error\" and an \"error\" field a string; give \
                 \"outcome\": \"ok\" or \"error\" instead"
                    .to_owned(),
            )
        });
    }
    codec::body_from_value(event_type, Value::Object(fields))
        .map_err(|error| invalid(error.to_string()))
}

/// Appends the event; an `assistant/delta` without options takes the hot path. With `scan`,
/// the body is searched for unmarked credential-shaped values to warn about.
fn append(store: &Store, request: Request, id: Option<Value>, scan: bool) -> Result<Reply, Error> {
    let task = store.task(&request.task)?;
    let hot_path = request.options.expected_revision.is_none()
        && matches!(request.options.durability, None | Some(Durability::Buffered));
    // What the append waits for: what was asked, or the type's default (a weaker one for a
    // high-risk type is refused by the library).
    let durability = request.options.durability.unwrap_or_else(|| {
        request.body.event_type().map_or(Durability::Synced, EventType::default_durability)
    });
    // The first keys of every reply to a line that was appended or answered as a duplicate.
    let reply = |seq: u64, revision: u64, durability: Durability| {
        let mut reply = with_id(id.clone());
        reply.insert("seq".to_owned(), json!(seq));
        reply.insert("task".to_owned(), json!(request.task));
        reply.insert("revision".to_owned(), json!(revision));
        reply.insert("durability".to_owned(), json!(durability.as_str()));
        reply
    };
    match request.body {
        Body::AssistantDelta(AssistantDelta { text }) if hot_path => {
            let seq = task.delta(&text)?;
            // Only this thread appends, so the revision now is the delta's.
            let reply = reply(seq.0, task.revision(), Durability::Buffered);
            Ok(Reply::Written { reply, durability: Durability::Buffered })
        }
        body => {
            // Values shaped like credentials and not marked as secrets: the store refuses
            // them when told to; otherwise the reply warns (format-spec/protocol.md,
            // "Warnings").
            let findings = if scan { secret_shapes::find_in_body(&body) } else { Vec::new() };
            match task.append_with(body, request.options)? {
                Appended::Written { seq, revision } => {
                    let mut reply = reply(seq.0, revision, durability);
                    if findings.is_empty() {
                        return Ok(Reply::Written { reply, durability });
                    }
                    reply.insert("warnings".to_owned(), warnings(&findings));
                    // A warning is never skipped, not even for a buffered event.
                    if durability == Durability::Buffered {
                        Ok(Reply::NotWritten { reply })
                    } else {
                        Ok(Reply::Written { reply, durability })
                    }
                }
                Appended::Duplicate { call_id, receipt, result_seq, revision } => {
                    // Nothing was written: the first result, which this one repeats, is synced.
                    let mut reply = reply(result_seq.0, revision, Durability::Synced);
                    reply.insert("duplicate".to_owned(), json!(true));
                    reply.insert("call_id".to_owned(), json!(call_id.as_str()));
                    reply.insert("receipt".to_owned(), receipt.unwrap_or(Value::Null));
                    Ok(Reply::NotWritten { reply })
                }
            }
        }
    }
}

/// The `warnings` of a reply: one object per credential-shaped value found.
fn warnings(findings: &[secret_shapes::Finding]) -> Value {
    findings
        .iter()
        .map(|f| json!({ "path": f.path, "shape": f.shape, "message": f.warning() }))
        .collect()
}

/// The reply to a refused or failed append; a failure of the store ends the stream.
fn refused(error: &Error, id: Option<Value>) -> Reply {
    let reply = error_reply(error, id);
    if error_code(error.kind()).1 {
        Reply::Fatal { reply, message: error.to_string() }
    } else {
        Reply::NotWritten { reply }
    }
}

/// The error reply of `error`: its code, its message and the extra keys of its code.
fn error_reply(error: &Error, id: Option<Value>) -> Map<String, Value> {
    let mut reply = with_id(id);
    reply.insert("error".to_owned(), json!(error_code(error.kind()).0));
    reply.insert("message".to_owned(), json!(error.to_string()));
    match error.kind() {
        ErrorKind::StaleRevision { expected, actual, .. } => {
            reply.insert("expected".to_owned(), json!(expected));
            reply.insert("actual".to_owned(), json!(actual));
        }
        ErrorKind::NeedsRecovery { task, calls } => {
            reply.insert("task".to_owned(), json!(task));
            reply.insert(
                "calls".to_owned(),
                calls
                    .iter()
                    .map(|c| json!({ "call_id": c.call_id, "tool": c.tool, "plan": c.plan }))
                    .collect(),
            );
        }
        ErrorKind::UnmarkedSecret { task, path, shape, .. } => {
            reply.insert("task".to_owned(), json!(task));
            reply.insert("path".to_owned(), json!(path));
            reply.insert("shape".to_owned(), json!(shape));
        }
        ErrorKind::CallIdReused { task, call_id, earlier_seq, tool, args_digest } => {
            reply.insert("task".to_owned(), json!(task));
            reply.insert("call_id".to_owned(), json!(call_id));
            reply.insert(
                "earlier".to_owned(),
                json!({ "seq": earlier_seq, "tool": tool, "args_digest": args_digest }),
            );
        }
        _ => {}
    }
    reply
}

/// The stable upper-snake code of an error, and whether the store can take no more events.
fn error_code(kind: &ErrorKind) -> (&'static str, bool) {
    match kind {
        ErrorKind::StaleRevision { .. } => ("STALE_REVISION", false),
        ErrorKind::InvalidEvent { .. } => ("INVALID_EVENT", false),
        ErrorKind::NeedsConfirmation { .. } => ("NEEDS_CONFIRMATION", false),
        ErrorKind::ApprovalRefused { .. } => ("APPROVAL_REFUSED", false),
        ErrorKind::NeedsRecovery { .. } => ("NEEDS_RECOVERY", false),
        ErrorKind::CallIdReused { .. } => ("CALL_ID_REUSED", false),
        ErrorKind::UnmarkedSecret { .. } => ("UNMARKED_SECRET", false),
        ErrorKind::LimitExceeded { .. } => ("LIMIT_EXCEEDED", false),
        ErrorKind::Io { .. } => ("IO", true),
        ErrorKind::DiskFull { .. } => ("DISK_FULL", true),
        ErrorKind::Poisoned { .. } => ("POISONED", true),
        ErrorKind::ReadOnly => ("READ_ONLY", true),
        ErrorKind::Locked { .. } => ("LOCKED", true),
        ErrorKind::Corruption { .. } => ("CORRUPTION", true),
        ErrorKind::TornTail { .. } => ("TORN_TAIL", true),
        ErrorKind::UnsupportedVersion { .. } => ("UNSUPPORTED_VERSION", true),
        ErrorKind::NotALog { .. } => ("NOT_A_LOG", true),
        ErrorKind::InvalidOptions { .. } => ("INVALID_OPTIONS", true),
        ErrorKind::CorruptEvent { .. } => ("CORRUPT_EVENT", true),
        ErrorKind::CannotUpcast { .. } => ("CANNOT_UPCAST", true),
        ErrorKind::CorruptSnapshot { .. } => ("CORRUPT_SNAPSHOT", true),
        // A kind added to the library later: stop rather than guess it is harmless.
        _ => ("ERROR", true),
    }
}
