//! The fast path of the most frequent request line: a bare `assistant/delta` append.
//!
//! A streamed model's fragments are most of a session's lines, and each of them would
//! otherwise become a JSON tree, a [`super::Request`] and a reply tree before a few bytes are
//! appended. [`parse`] reads a line that is exactly an `assistant/delta` without options
//! (`id` optional and a non-negative integer, `task`, `type`, `text`, in any order, nothing
//! else) into borrowed strings, allocating nothing unless a string holds an escape; any other
//! line gives `None` and goes the general way ([`super::handle_line`]), which also gives the
//! refusals. [`write_reply`] writes the written reply byte for byte as the general path
//! serialises it, and [`write_line`] is a client's side: the request line of one fragment,
//! into a buffer it reuses.
//!
//! A served store also reads a **fragments line** ([`parse_texts`], `format-spec/server.md`,
//! "Fragments lines"): the same keys with `texts`, a non-empty array of strings, in place of
//! `text`: one line for the consecutive fragments of one task, each appended in order as its
//! bare delta line would be (a refused fragment ends the line: those before it stay). A client of a server that offers them ([`start_texts`],
//! [`add_text`]) writes a task's fragments into one such line until something else is sent.
//!
//! The answers are the general path's (`tests/protocol_delta_line.rs` compares both on many
//! lines): the same task checks, the same [`crate::Task::delta_revision`], the same reply.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// The `type` of the lines this path takes.
const DELTA_TYPE: &str = "assistant/delta";

/// A request line that is a bare `assistant/delta`, its strings borrowed from the line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeltaLine<'a> {
    /// The request's `id`, when it has one (only non-negative integers take this path).
    #[serde(default)]
    pub id: Id,
    /// The task appended to.
    #[serde(borrow)]
    pub task: Cow<'a, str>,
    #[serde(borrow, rename = "type")]
    event_type: Cow<'a, str>,
    /// The fragment.
    #[serde(borrow)]
    pub text: Cow<'a, str>,
}

/// A fragments line: consecutive `assistant/delta` fragments of one task, in order, their
/// strings borrowed from the line where they hold no escape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextsLine<'a> {
    /// The request's `id`, when it has one (only non-negative integers are read).
    #[serde(default)]
    pub id: Id,
    /// The task appended to.
    #[serde(borrow)]
    pub task: Cow<'a, str>,
    #[serde(borrow, rename = "type")]
    event_type: Cow<'a, str>,
    /// The fragments, in order (at least one).
    #[serde(borrow)]
    pub texts: Vec<Text<'a>>,
}

/// One fragment of a [`TextsLine`].
#[derive(Debug, Deserialize)]
pub struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

/// The key that makes a line a fragments line.
const TEXTS_KEY: &[u8] = b"\"texts\"";

/// Whether `line` may be a fragments line (it names `texts`): the server charges such a line
/// for its array before [`parse_texts`] reads it, since the array costs more than the line.
#[must_use]
pub fn names_texts(line: &[u8]) -> bool {
    memchr::memmem::find(line, TEXTS_KEY).is_some()
}

/// The line as a fragments line (keys `task`, `type` = `"assistant/delta"`, `texts` a
/// non-empty array of strings, optionally an `id` that is a non-negative integer, nothing
/// else), or `None`: then the general path answers it (it refuses `texts`).
#[must_use]
pub fn parse_texts(line: &[u8]) -> Option<TextsLine<'_>> {
    if !names_texts(line) {
        return None;
    }
    let parsed: TextsLine<'_> = serde_json::from_slice(line).ok()?;
    let valid = parsed.event_type == DELTA_TYPE && !parsed.task.is_empty();
    (valid && !parsed.texts.is_empty()).then_some(parsed)
}

/// How a fragments line written by [`start_texts`] goes on after its task's string.
const TEXTS_AFTER_TASK: &[u8] = b",\"type\":\"assistant/delta\",\"texts\":[";

/// Whether `line` begins as [`start_texts`] writes a fragments line (for a task that holds
/// nothing JSON escapes): its object has a `texts` key.
fn begins_as_texts_line(line: &[u8]) -> bool {
    line.strip_prefix(b"{\"task\":\"")
        .and_then(plain_string)
        .is_some_and(|(_, rest)| rest.starts_with(TEXTS_AFTER_TASK))
}

/// Appends a fragments line of `task` holding `text` (no `id`, newline included) to `out`;
/// [`add_text`] adds the task's next fragments to it while it is the last line of `out`.
pub fn start_texts(out: &mut Vec<u8>, task: &str, text: &str) {
    out.extend_from_slice(b"{\"task\":");
    write_string(out, task);
    out.extend_from_slice(b",\"type\":\"assistant/delta\",\"texts\":[");
    write_string(out, text);
    out.extend_from_slice(TEXTS_END);
}

/// How a fragments line written by [`start_texts`] ends.
const TEXTS_END: &[u8] = b"]}\n";

/// Adds `text` to the fragments line that ends `out`, written by [`start_texts`] (the
/// caller knows it is the last line). Allocates only when `out` must grow.
pub fn add_text(out: &mut Vec<u8>, text: &str) {
    debug_assert!(out.ends_with(TEXTS_END), "a fragments line ends the buffer");
    out.truncate(out.len() - TEXTS_END.len());
    out.push(b',');
    write_string(out, text);
    out.extend_from_slice(TEXTS_END);
}

/// The `id` of a [`DeltaLine`]: absent, or a non-negative integer. Any other `id` (a string,
/// `null`, a negative or fractional number) makes the line go the general way.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Id(pub Option<u64>);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Id, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Id, E> {
                Ok(Id(Some(value)))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// The line as a bare `assistant/delta` append, or `None` when it is anything else (then
/// the general path answers it, refusals included).
#[must_use]
pub fn parse(line: &[u8]) -> Option<DeltaLine<'_>> {
    if let Some(parsed) = parse_plain(line) {
        return Some(parsed);
    }
    // A fragments line as a client writes it is no bare delta (it has a `texts` key). A line
    // that does not spell the type out is not parsed twice: if it is a bare delta at all (its
    // type written with escapes), the general path gives the same answer.
    if begins_as_texts_line(line) {
        return None;
    }
    memchr::memmem::find(line, DELTA_TYPE.as_bytes())?;
    let parsed: DeltaLine<'_> = serde_json::from_slice(line).ok()?;
    (parsed.event_type == DELTA_TYPE && !parsed.task.is_empty()).then_some(parsed)
}

/// The line exactly as [`write_line`] writes it, for a task and a fragment that hold nothing
/// JSON escapes (what a client of this crate sends), read without a JSON parser; `None` for
/// any other spelling, which [`parse`] then reads in full.
fn parse_plain(line: &[u8]) -> Option<DeltaLine<'_>> {
    let rest = line.strip_prefix(b"{\"task\":\"")?;
    let (task, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(b",\"type\":\"assistant/delta\",\"text\":\"")?;
    let (text, rest) = plain_string(rest)?;
    (rest == b"}" && !task.is_empty()).then_some(DeltaLine {
        id: Id(None),
        task: Cow::Borrowed(task),
        event_type: Cow::Borrowed(DELTA_TYPE),
        text: Cow::Borrowed(text),
    })
}

/// The contents of a JSON string up to its closing quote and the bytes after that quote,
/// when the contents are UTF-8 with no backslash and no control character (so they are the
/// string's value as written); `None` otherwise.
fn plain_string(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let end = bytes.iter().position(|&b| needs_escape(b))?;
    if bytes[end] != b'"' {
        return None;
    }
    let value = std::str::from_utf8(&bytes[..end]).ok()?;
    Some((value, &bytes[end + 1..]))
}

/// Appends `value` to `out` as a JSON string, exactly as `serde_json` writes it: copied
/// between quotes when nothing in it is escaped (one pass over its bytes, none of them
/// looked up one by one), else through `serde_json`.
fn write_string(out: &mut Vec<u8>, value: &str) {
    if value.bytes().fold(false, |escapes, byte| escapes | needs_escape(byte)) {
        // Serialising a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, value);
        return;
    }
    out.reserve(value.len() + 2);
    out.push(b'"');
    out.extend_from_slice(value.as_bytes());
    out.push(b'"');
}

/// Whether JSON escapes `byte` inside a string (as `serde_json` writes them: the quote, the
/// backslash and the control characters, nothing else).
fn needs_escape(byte: u8) -> bool {
    byte == b'"' || byte == b'\\' || byte < 0x20
}

/// Writes `value` in decimal, without the formatting machinery.
fn write_decimal(out: &mut impl Write, value: u64) -> std::io::Result<()> {
    let mut digits = [0_u8; 20];
    let mut start = digits.len();
    let mut rest = value;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.write_all(&digits[start..])
}

/// Writes the reply of a written delta, newline included, exactly as the general path
/// serialises [`super::reply::written`] with `durability` `buffered`.
///
/// # Errors
///
/// Those of `out`.
pub fn write_reply(
    out: &mut impl Write,
    id: Id,
    seq: u64,
    task: &str,
    revision: u64,
) -> std::io::Result<()> {
    out.write_all(b"{")?;
    if let Some(id) = id.0 {
        out.write_all(b"\"id\":")?;
        write_decimal(out, id)?;
        out.write_all(b",")?;
    }
    out.write_all(b"\"seq\":")?;
    write_decimal(out, seq)?;
    out.write_all(b",\"task\":")?;
    if task.bytes().any(needs_escape) {
        serde_json::to_writer(&mut *out, task)?;
    } else {
        out.write_all(b"\"")?;
        out.write_all(task.as_bytes())?;
        out.write_all(b"\"")?;
    }
    out.write_all(b",\"revision\":")?;
    write_decimal(out, revision)?;
    out.write_all(b",\"durability\":\"buffered\"}\n")
}

/// Appends the request line of one fragment of `task` (no `id`, newline included) to `out`:
/// what a client sends for [`crate::Task::delta`]. Allocates only when `out` must grow.
pub fn write_line(out: &mut Vec<u8>, task: &str, text: &str) {
    out.extend_from_slice(b"{\"task\":");
    write_string(out, task);
    out.extend_from_slice(b",\"type\":\"assistant/delta\",\"text\":");
    write_string(out, text);
    out.extend_from_slice(b"}\n");
}

/// Whether a reply line (without its newline) is the written reply of a bare delta sent
/// without `id`: what a client that pipelines fragments checks without parsing the reply.
/// Anything else (an error) is parsed in full.
#[must_use]
pub fn is_written_reply(line: &[u8]) -> bool {
    line.starts_with(b"{\"seq\":") && line.ends_with(b"\"durability\":\"buffered\"}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let mut strings: Vec<String> =
            (0_u8..0x80).map(|byte| format!("a{}b", byte as char)).collect();
        strings.extend(
            ["", "plain text", "é ü \u{1F600}", "\u{7f}", "/", "\\\"", "ends\n"].map(str::to_owned),
        );
        for value in &strings {
            let mut out = b"x".to_vec();
            write_string(&mut out, value);
            let mut expected = b"x".to_vec();
            expected.extend(serde_json::to_vec(value).expect("json"));
            assert_eq!(out, expected, "{value:?}");
        }
    }
}
