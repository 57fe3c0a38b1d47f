//! `factlog dump`: prints records from a sequence number on, one line per record, without
//! changing the log (a read-only open takes no lock and writes nothing).
//!
//! A record holding a typed event (`format-spec/events.md`) is decoded by the library and
//! printed with its envelope and body fields. Every other record, and every record with
//! `--raw`, is printed as a raw payload, exactly as before events existed. Raw output is
//! lossless: `text` escapes every byte that is not printable UTF-8, `json` adds the exact
//! bytes in base64 whenever the payload is not valid UTF-8.
//!
//! `--task`, `--type`, `--since` and `--until` select events by their envelope (read without
//! decoding the body, so they also select an event whose body is damaged); a record that is
//! not an event never matches them. Timestamps are not monotonic (a clock may jump back), so
//! every event is checked on its own and the scan never stops at the first one out of range.
//! `--to` ends the range, inclusive. The line format is shared with `tail` and `export`
//! through [`Printer`] and [`event_json_line`]: every timestamp also appears in RFC 3339.
//!
//! A damaged log is read up to its damage ([`factlog::Log::open_read_only_to_damage`]): every
//! selected record before it is printed, then the damage is named on standard error with a
//! pointer to `factlog salvage`, and the exit code is 3, unless `--to` ends before it.

use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use factlog::harness::{Event, EventType, codec};
use factlog::protocol::time::format_rfc3339;
use factlog::protocol::views;
use factlog::{ErrorKind, Log, Options, Seq};
use serde_json::Value;

use crate::progress::{Progress, Unit};
use crate::{
    DumpArgs, DumpFormat, EXIT_DAMAGED, EXIT_FAILURE, EXIT_USAGE, Failure, Outcome, TimeArgs,
    base64, damage_message, is_broken_pipe, library_failure, open_failure, require_store, tasks,
    warn_deprecated,
};

/// `dump`: checks the arguments, opens the log read-only up to any damage and prints the
/// selected records.
pub fn run(args: &DumpArgs) -> Outcome {
    if let Some(name) = &args.event_type {
        check_type_name(name)?;
    }
    if let Some(to) = args.to
        && to < args.from
    {
        return Err(Failure::new(
            EXIT_USAGE,
            format_args!("--to {to} is before --from {}: nothing to print (see --help)", args.from),
        ));
    }
    check_time_range(&args.time)?;
    match args.format {
        Some(DumpFormat::Json) => warn_deprecated("--format json", "--json"),
        Some(DumpFormat::Text) => warn_deprecated("--format text", "nothing: text is the default"),
        None => {}
    }
    let printer = Printer {
        format: if args.json() { DumpFormat::Json } else { DumpFormat::Text },
        raw: args.raw,
        task: args.task.as_deref(),
        event_type: args.event_type.as_deref(),
        time: args.time,
    };
    require_store(&args.dir)?;
    let (log, open_damage) = Log::open_read_only_to_damage(&args.dir, Options::new())
        .map_err(|error| open_failure(&args.dir, &error))?;
    if let Some(task) = &args.task {
        tasks::require_task_in_log(&args.dir, &log, task)?;
    }
    let read_error = |error| library_failure("read", &error);
    // After an explicit reclaim the log starts later: dump what is left, and say so.
    let first = log.first_seq().map_err(read_error)?;
    if args.from.max(1) < first.0 {
        eprintln!("factlog: records before {first} were reclaimed; dumping from {first}");
    }
    let start = args.from.max(first.0);
    let reader = log.read_from(Seq(start)).map_err(read_error)?;
    let last = log.last_seq().map_or(0, |seq| seq.0);
    let end = last.min(args.to.unwrap_or(u64::MAX));
    let total = (end + 1).saturating_sub(start);
    let progress = Progress::new("dump", Some(total), Unit::Count("records"), true);
    // Damage found by the open ends the log before it: it matters only if the range goes on.
    let mut damage = open_damage.filter(|_| args.to.is_none_or(|to| to > last));

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
        progress.set(record.seq.0 + 1 - start);
        line.clear();
        printer.line(&mut line, record.seq, &record.payload);
        if let Err(error) = output.write_all(line.as_bytes()) {
            return write_failed(&error);
        }
        if args.to.is_some_and(|to| record.seq.0 >= to) {
            break;
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

/// Refuses an `--until` before `--since`: the range would be empty.
pub fn check_time_range(time: &TimeArgs) -> Result<(), Failure> {
    if let (Some(since), Some(until)) = (time.since, time.until)
        && until < since
    {
        return Err(Failure::new(
            EXIT_USAGE,
            format_args!(
                "--until {} is before --since {}: nothing to print (see --help)",
                format_rfc3339(until),
                format_rfc3339(since)
            ),
        ));
    }
    Ok(())
}

/// Refuses a `--type` that no event can have: a known type name or `opaque/0xTAG`.
pub fn check_type_name(name: &str) -> Result<(), Failure> {
    if EventType::from_name(name).is_some() || name.starts_with("opaque/0x") {
        return Ok(());
    }
    let known: Vec<&str> = EventType::ALL.iter().map(|t| t.name()).collect();
    Err(Failure::new(
        EXIT_USAGE,
        format_args!(
            "unknown event type {name:?} for --type; the types are: {} (or opaque/0xTAG)",
            known.join(", ")
        ),
    ))
}

/// A closed pipe means the reader has seen enough (`factlog dump DIR | head`): not a failure;
/// any other write error is exit 1.
pub fn write_failed(error: &io::Error) -> Outcome {
    if is_broken_pipe(error) {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::new(EXIT_FAILURE, format_args!("writing stdout: {error}")))
    }
}

/// How records are selected and printed, shared by `dump` and `tail`.
#[derive(Debug, Clone, Copy)]
pub struct Printer<'a> {
    /// The line format.
    pub format: DumpFormat,
    /// Print every record raw, without decoding events.
    pub raw: bool,
    /// Only events of this task.
    pub task: Option<&'a str>,
    /// Only events of this type name (`tool/call`, `opaque/0x0123`).
    pub event_type: Option<&'a str>,
    /// Only events whose timestamp is in this range.
    pub time: TimeArgs,
}

impl TimeArgs {
    /// Whether a filter is set.
    pub fn is_set(&self) -> bool {
        self.since.is_some() || self.until.is_some()
    }

    /// Whether an event appended at `timestamp_us` is in the range: since inclusive, until
    /// exclusive.
    pub fn contains(&self, timestamp_us: u64) -> bool {
        self.since.is_none_or(|since| timestamp_us >= since)
            && self.until.is_none_or(|until| timestamp_us < until)
    }
}

impl Printer<'_> {
    /// Appends the line of one record if the filters select it; returns whether they did.
    pub fn line(&self, out: &mut String, seq: Seq, payload: &[u8]) -> bool {
        if !self.selects(seq, payload) {
            return false;
        }
        record_line(out, self.format, self.raw, seq, payload);
        true
    }

    fn selects(&self, seq: Seq, payload: &[u8]) -> bool {
        if self.task.is_none() && self.event_type.is_none() && !self.time.is_set() {
            return true;
        }
        let Ok(envelope) = codec::peek(seq, payload) else { return false };
        self.task.is_none_or(|task| envelope.task == task)
            && self.event_type.is_none_or(|name| type_name_of_tag(envelope.tag) == name)
            && self.time.contains(envelope.timestamp_us)
    }
}

/// The type name of a wire tag, as `Body::type_name` spells it.
fn type_name_of_tag(tag: u16) -> String {
    EventType::from_tag(tag).map_or_else(|| format!("opaque/{tag:#06x}"), |t| t.name().to_owned())
}

/// Appends the line of one record: its event, or its raw payload.
fn record_line(out: &mut String, format: DumpFormat, raw: bool, seq: Seq, payload: &[u8]) {
    let decoded = if raw { None } else { Some(codec::decode(seq, payload)) };
    match (decoded, format) {
        (Some(Ok(event)), DumpFormat::Text) => event_text_line(out, &event),
        (Some(Ok(event)), DumpFormat::Json) => event_json_line(out, &event, false),
        // Starts like an event but does not decode: the bytes, and why.
        (Some(Err(error)), DumpFormat::Json) if codec::peek(seq, payload).is_ok() => {
            let reason = match error.kind() {
                ErrorKind::CorruptEvent { reason, .. } => reason.clone(),
                _ => error.to_string(),
            };
            raw_json_line(out, seq.0, payload, Some(&reason));
        }
        (_, DumpFormat::Text) => text_line(out, seq.0, payload),
        (_, DumpFormat::Json) => json_line(out, seq.0, payload),
    }
}

/// Appends `SEQ<TAB>TIME<TAB>TYPE<TAB>TASK<TAB>REVISION<TAB>compact body JSON\n`, TIME in
/// RFC 3339 UTC.
fn event_text_line(out: &mut String, event: &Event) {
    let _ = write!(
        out,
        "{}\t{}\t{}\t",
        event.seq.0,
        format_rfc3339(event.timestamp_us),
        event.body.type_name()
    );
    escape_text(out, event.task.as_str().as_bytes());
    // Compact JSON escapes every control character: the line stays one line.
    let _ = writeln!(out, "\t{}\t{}", event.revision, views::body_value(&event.body));
}

/// Appends `{"seq":..,"task":..,"revision":..,"timestamp_us":..,"time":..,"type":..,..body}\n`
/// ([`views::event_object`]: `time` is the timestamp in RFC 3339 UTC; a body field whose name
/// is taken is kept as `body.NAME`). With `with_schema` (export) the body schema version
/// follows `type` as `schema`.
pub fn event_json_line(out: &mut String, event: &Event, with_schema: bool) {
    // The object is the library's (`factlog::protocol::views`), which every door prints.
    let _ = writeln!(out, "{}", Value::Object(views::event_object(event, with_schema)));
}

/// Appends `SEQ<TAB>escaped payload\n`.
fn text_line(out: &mut String, seq: u64, payload: &[u8]) {
    // Writing into a String cannot fail.
    let _ = write!(out, "{seq}\t");
    escape_text(out, payload);
    out.push('\n');
}

/// Escapes a payload so that the text line is unambiguous and holds no control characters:
/// `\\`, `\t`, `\n`, `\r`, `\xNN` for other ASCII controls and for bytes that are not UTF-8,
/// `\u{NN}` for the other Unicode control characters (C1).
pub fn escape_text(out: &mut String, payload: &[u8]) {
    for chunk in payload.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_ascii_control() => {
                    let _ = write!(out, "\\x{:02x}", u32::from(c));
                }
                c if c.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
}

/// Appends `{"seq":N,"payload":"..."}` (plus `"payload_b64"` when not UTF-8) and a newline.
fn json_line(out: &mut String, seq: u64, payload: &[u8]) {
    raw_json_line(out, seq, payload, None);
}

/// [`json_line`], plus a `"corrupt_event"` field with the reason when one is given.
fn raw_json_line(out: &mut String, seq: u64, payload: &[u8], corrupt: Option<&str>) {
    let _ = write!(out, "{{\"seq\":{seq},\"payload\":");
    if let Ok(text) = std::str::from_utf8(payload) {
        push_json_string(out, text);
    } else {
        push_json_string(out, &String::from_utf8_lossy(payload));
        out.push_str(",\"payload_b64\":\"");
        out.push_str(&base64::encode(payload));
        out.push('"');
    }
    if let Some(reason) = corrupt {
        out.push_str(",\"corrupt_event\":");
        push_json_string(out, reason);
    }
    out.push_str("}\n");
}

fn push_json_string(out: &mut String, text: &str) {
    // serde_json escapes quotes, backslashes and control characters; serializing a str to a
    // String cannot fail.
    out.push_str(&serde_json::Value::from(text).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(payload: &[u8]) -> String {
        let mut out = String::new();
        text_line(&mut out, 7, payload);
        out
    }

    fn json(payload: &[u8]) -> String {
        let mut out = String::new();
        json_line(&mut out, 7, payload);
        out
    }

    #[test]
    fn text_escapes_controls_backslashes_and_invalid_bytes() {
        assert_eq!(text(b"hello world"), "7\thello world\n");
        assert_eq!(text(b"a\tb\\c\r\n"), "7\ta\\tb\\\\c\\r\\n\n");
        assert_eq!(text(b"\x00\x1f\x7f"), "7\t\\x00\\x1f\\x7f\n");
        assert_eq!(text(b"\xff\xfeok"), "7\t\\xff\\xfeok\n");
        assert_eq!(text("caf\u{e9} \u{85}".as_bytes()), "7\tcaf\u{e9} \\u{85}\n");
        assert_eq!(text(b""), "7\t\n");
    }

    fn event(body: factlog::harness::Body) -> Event {
        Event {
            seq: Seq(3),
            task: "t\t1".into(),
            revision: 2,
            timestamp_us: 9,
            schema: codec::SCHEMA_VERSION,
            body,
        }
    }

    #[test]
    fn an_event_line_keeps_the_envelope_and_renames_colliding_body_fields() {
        use factlog::harness::event::UserMessage;
        let mut extra = serde_json::Map::new();
        extra.insert("seq".to_owned(), Value::from("mine"));
        extra.insert("note".to_owned(), Value::from(1));
        let body =
            factlog::harness::Body::UserMessage(UserMessage { text: "hi\n".to_owned(), extra });
        let mut json = String::new();
        event_json_line(&mut json, &event(body.clone()), false);
        assert_eq!(
            json,
            "{\"seq\":3,\"task\":\"t\\t1\",\"revision\":2,\"timestamp_us\":9,\
             \"time\":\"1970-01-01T00:00:00.000009Z\",\"type\":\"user/message\",\"text\":\"hi\\n\",\"body.seq\":\"mine\",\"note\":1}\n"
        );
        let mut text = String::new();
        event_text_line(&mut text, &event(body));
        assert_eq!(
            text,
            "3\t1970-01-01T00:00:00.000009Z\tuser/message\tt\\t1\t2\t{\"text\":\"hi\\n\",\"seq\":\"mine\",\"note\":1}\n"
        );
    }

    #[test]
    fn json_is_exact_for_utf8_and_adds_base64_otherwise() {
        assert_eq!(json(b"hi \"there\"\n"), "{\"seq\":7,\"payload\":\"hi \\\"there\\\"\\n\"}\n");
        assert_eq!(
            json(b"\xffa"),
            "{\"seq\":7,\"payload\":\"\u{fffd}a\",\"payload_b64\":\"/2E=\"}\n"
        );
        let parsed: serde_json::Value =
            serde_json::from_str(json(b"\x00\x01").trim_end()).expect("valid json");
        assert_eq!(parsed["payload"], "\u{0}\u{1}");
        assert!(parsed.get("payload_b64").is_none());
    }
}
