//! Secrets that look like secrets (`format-spec/events.md`, "Credential shapes"): values in a
//! body that have the shape of a well-known credential but were not marked `{"$secret": ...}`.
//!
//! [`SHAPES`] is the one table of shapes; each is a set of literal prefixes and a hand-written
//! matcher for what follows, with a minimum length so that prose naming a prefix does not
//! match. A match starts at a boundary: the byte before it is not an ASCII letter, digit, `_`
//! or `-`.
//!
//! Invariant that keeps appends cheap: every match starts with one of its shape's prefixes, and
//! the prefixes hold no byte that JSON escapes, so a string value that holds a match holds the
//! prefix verbatim in the JSON text `serde_json` writes. [`json_may_hold_credential`] looks
//! for the prefixes in that text in one pass; only when it finds one is the text parsed and
//! walked. Object keys are not scanned (a path names them), and values inside an object with a
//! `$secret` key are marked, so skipped. `assistant/delta` text is never scanned.

use serde_json::Value;

use crate::harness::codec;
use crate::harness::event::Body;
use crate::harness::secret::SECRET_KEY;

/// One credential shape of the table [`SHAPES`].
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// The stable name, reported in findings and errors (`openai_api_key`).
    pub name: &'static str,
    /// What it matches, in the notation of `format-spec/events.md`.
    pub matches: &'static str,
    /// Why a value of this shape is a credential.
    pub reason: &'static str,
    /// The literal prefixes a match starts with.
    prefixes: &'static [&'static str],
    /// Given the text from a prefix on (the prefix included) and the prefix's length, the
    /// length of the credential that starts there, if one does.
    matcher: fn(&[u8], usize) -> Option<usize>,
}

/// Every credential shape, in the order a string is tried at each position.
pub const SHAPES: &[Shape] = &[
    Shape {
        name: "anthropic_api_key",
        matches: "`sk-ant-` then 32 or more of `[A-Za-z0-9_-]`, mixing digits, upper and lower case",
        reason: "an Anthropic API key: bills and acts as its owner",
        prefixes: &["sk-ant-"],
        matcher: |text, at| token_run(text, at, is_key_byte, 32, usize::MAX, true),
    },
    Shape {
        name: "openai_api_key",
        matches: "`sk-` (also `sk-proj-`, `sk-svcacct-`) then 32 or more of `[A-Za-z0-9_-]`, \
                  mixing digits, upper and lower case; not `sk-ant-`",
        reason: "an OpenAI API key: bills and acts as its owner",
        prefixes: &["sk-"],
        matcher: |text, at| {
            if text.starts_with(b"sk-ant-") {
                return None;
            }
            token_run(text, at, is_key_byte, 32, usize::MAX, true)
        },
    },
    Shape {
        name: "aws_access_key_id",
        matches: "`AKIA` or `ASIA` then exactly 16 of `[A-Z0-9]`",
        reason: "an AWS access key id (long-term or temporary): half of a cloud credential, \
                 and it names the account",
        prefixes: &["AKIA", "ASIA"],
        matcher: |text, at| {
            let run =
                text.get(at..)?.iter().take(17).take_while(|b| b.is_ascii_alphanumeric()).count();
            let upper = text.get(at..at + run)?.iter().all(|b| !b.is_ascii_lowercase());
            (run == 16 && upper).then_some(at + run)
        },
    },
    Shape {
        name: "github_token",
        matches: "`ghp_`, `gho_`, `ghu_`, `ghs_` or `ghr_` then 36 to 255 of `[A-Za-z0-9]`",
        reason: "a GitHub personal, OAuth, user-to-server, server-to-server or refresh token",
        prefixes: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        matcher: |text, at| token_run(text, at, u8::is_ascii_alphanumeric, 36, 255, false),
    },
    Shape {
        name: "github_fine_grained_token",
        matches: "`github_pat_` then 50 or more of `[A-Za-z0-9_]`",
        reason: "a GitHub fine-grained personal access token",
        prefixes: &["github_pat_"],
        matcher: |text, at| token_run(text, at, is_word_byte, 50, usize::MAX, false),
    },
    Shape {
        name: "slack_token",
        matches: "`xoxa-`, `xoxb-`, `xoxp-` or `xoxr-` then 20 or more of `[A-Za-z0-9-]` \
                  holding a digit",
        reason: "a Slack app, bot, user or refresh token",
        prefixes: &["xoxa-", "xoxb-", "xoxp-", "xoxr-"],
        matcher: |text, at| {
            let end = token_run(
                text,
                at,
                |b| b.is_ascii_alphanumeric() || *b == b'-',
                20,
                usize::MAX,
                false,
            )?;
            text.get(at..end)?.iter().any(u8::is_ascii_digit).then_some(end)
        },
    },
    Shape {
        name: "google_api_key",
        matches: "`AIza` then exactly 35 of `[A-Za-z0-9_-]`",
        reason: "a Google Cloud or Firebase API key",
        prefixes: &["AIza"],
        matcher: |text, at| token_run(text, at, is_key_byte, 35, 35, false),
    },
    Shape {
        name: "stripe_secret_key",
        matches: "`sk_live_` or `rk_live_` then 24 or more of `[A-Za-z0-9]`",
        reason: "a Stripe live secret or restricted key: moves money",
        prefixes: &["sk_live_", "rk_live_"],
        matcher: |text, at| token_run(text, at, u8::is_ascii_alphanumeric, 24, usize::MAX, false),
    },
    Shape {
        name: "jwt",
        matches: "three `.`-separated parts of `[A-Za-z0-9_-]`, the first starting `eyJ`; \
                  at least 10, 10 and 16 long",
        reason: "a signed JSON Web Token: a bearer credential until it expires",
        prefixes: &["eyJ"],
        matcher: |text, _| {
            let mut end = 0;
            for (part, min) in [10, 10, 16].into_iter().enumerate() {
                if part > 0 {
                    (text.get(end) == Some(&b'.')).then_some(())?;
                    end += 1;
                }
                end = token_run(text, end, is_key_byte, min, usize::MAX, false)?;
            }
            Some(end)
        },
    },
    Shape {
        name: "bearer_token",
        matches: "`Bearer `, `bearer ` or `BEARER ` then 20 or more of `[A-Za-z0-9._~+/-]` \
                  (then `=` padding) holding a letter and a digit",
        reason: "an HTTP `Authorization` credential: whoever holds it is the caller",
        prefixes: &["Bearer ", "bearer ", "BEARER "],
        matcher: |text, at| {
            let is_token = |b: &u8| b.is_ascii_alphanumeric() || b"._~+/-".contains(b);
            let end = token_run(text, at, is_token, 20, usize::MAX, false)?;
            let token = text.get(at..end)?;
            let mixed =
                token.iter().any(u8::is_ascii_digit) && token.iter().any(u8::is_ascii_alphabetic);
            let padding = text.get(end..)?.iter().take_while(|b| **b == b'=').count();
            mixed.then_some(end + padding)
        },
    },
    Shape {
        name: "private_key_block",
        matches: "`-----BEGIN `, words of `[A-Z ]`, `PRIVATE KEY-----`, then 64 or more \
                  base64 characters before the next `-----`",
        reason: "a PEM private key (RSA, EC, OpenSSH, PKCS #8, encrypted or not)",
        prefixes: &["-----BEGIN "],
        matcher: |text, at| {
            let label =
                text.get(at..)?.iter().take_while(|b| b.is_ascii_uppercase() || **b == b' ');
            let label_end = at + label.count();
            let rest = text.get(label_end..)?;
            let header_end = label_end + b"-----".len();
            let named =
                text.get(..label_end)?.ends_with(b"PRIVATE KEY") && rest.starts_with(b"-----");
            named.then_some(())?;
            let mut base64 = 0;
            let mut end = header_end;
            for &byte in text.get(header_end..)? {
                if byte == b'-' {
                    break;
                }
                base64 += usize::from(byte.is_ascii_alphanumeric() || byte == b'+' || byte == b'/');
                end += 1;
            }
            (base64 >= 64).then_some(end)
        },
    },
];

/// The longest run of token bytes a matcher reads. Real credentials are far shorter; the cap
/// keeps a string made of many overlapping candidates (`sk-sk-sk-...`) linear to scan.
const RUN_BYTES_MAX: usize = 8 * 1024;

/// The maximal run (up to [`RUN_BYTES_MAX`]) of `accept` bytes from `at`: its end if its length is within
/// `min..=max` (and, with `mixed`, it holds a digit, an upper- and a lower-case letter).
fn token_run(
    text: &[u8],
    at: usize,
    accept: fn(&u8) -> bool,
    min: usize,
    max: usize,
    mixed: bool,
) -> Option<usize> {
    let rest = text.get(at..)?;
    let run = rest.iter().take(RUN_BYTES_MAX).take_while(|b| accept(b)).count();
    let token = rest.get(..run)?;
    let mixed_ok = !mixed
        || (token.iter().any(u8::is_ascii_digit)
            && token.iter().any(u8::is_ascii_uppercase)
            && token.iter().any(u8::is_ascii_lowercase));
    ((min..=max).contains(&run) && mixed_ok).then_some(at + run)
}

fn is_key_byte(byte: &u8) -> bool {
    byte.is_ascii_alphanumeric() || *byte == b'_' || *byte == b'-'
}

fn is_word_byte(byte: &u8) -> bool {
    byte.is_ascii_alphanumeric() || *byte == b'_'
}

/// An unmarked value of a body that has the shape of a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Where the value is, as a JSON path from the body's top (`$.args.headers.Authorization`,
    /// `$.items[2]`, `$["x-api-key"]`); the same path in an `emit` line, whose body fields are
    /// at its top.
    pub path: String,
    /// The [`Shape::name`] it matched.
    pub shape: &'static str,
}

impl Finding {
    /// A one-sentence warning: what was found where, and how to mark it.
    #[must_use]
    pub fn warning(&self) -> String {
        if self.path == BYTES_PATH {
            return format!(
                "the bytes of a record/blob hold what looks like a credential ({}), not marked as \
                 a secret (a mark counts only in JSON): they are stored as they are; leave the \
                 credential out of the serialized value, or store the value as JSON with the \
                 credential wrapped as {{\"{SECRET_KEY}\": \"...\"}}",
                self.shape
            );
        }
        format!(
            "{} looks like a credential ({}) and is not marked as a secret: it is stored as \
             it is; where the field takes any JSON (args, output, receipt, extra fields) wrap \
             the value as {{\"{SECRET_KEY}\": \"...\"}} to store a reference instead, and \
             in a text field (a message, a phase) leave the credential out of the text",
            self.path, self.shape
        )
    }
}

/// The shapes a string holds, each once, in the order their first matches appear. A match
/// consumes its bytes: a JWT inside a bearer token is reported as the bearer token.
#[must_use]
pub fn shapes_in(text: &str) -> Vec<&'static str> {
    shapes_at_every_position(text.as_bytes(), false)
}

/// The shapes in `bytes`, each once, trying every position not inside an earlier match: with
/// `headers`, first a match in a serialized string whose header ends there ([`strings_at`]),
/// then one at a boundary. Without a prefilter: [`find_in_bytes`] must give the same shapes.
fn shapes_at_every_position(bytes: &[u8], headers: bool) -> Vec<&'static str> {
    let mut found: Vec<&'static str> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let in_string = || strings_at(bytes, at).into_iter().flatten().find_map(match_at);
        let matched = headers
            .then(in_string)
            .flatten()
            .or_else(|| at_boundary(bytes, at).then(|| match_at(&bytes[at..]))?);
        match matched {
            Some((shape, len)) => {
                if !found.contains(&shape.name) {
                    found.push(shape.name);
                }
                at += len.max(1);
            }
            None => at += 1,
        }
    }
    found
}

/// The first shape of [`SHAPES`] whose prefix starts `text` and whose matcher accepts it,
/// with the length of the match.
fn match_at(text: &[u8]) -> Option<(&'static Shape, usize)> {
    let first = *text.first()?;
    SHAPES.iter().find_map(|shape| {
        shape
            .prefixes
            .iter()
            .filter(|prefix| prefix.as_bytes().first() == Some(&first))
            .filter(|prefix| text.starts_with(prefix.as_bytes()))
            .find_map(|prefix| (shape.matcher)(text, prefix.len()))
            .map(|len| (shape, len))
    })
}

/// Whether a match may start at `at` of a string: the byte before is no letter, digit, `_` or
/// `-`. So inside a run of those bytes only its start is a candidate, which keeps a scan
/// linear: no run of token bytes is read again from a later candidate inside it.
fn at_boundary(text: &[u8], at: usize) -> bool {
    at.checked_sub(1).and_then(|before| text.get(before)).is_none_or(|b| !is_key_byte(b))
}

/// Whether JSON text written by `serde_json` may hold a value of a credential shape: some
/// shape's prefix occurs in it where a string could start a match there. Exact for that
/// question (a unit test compares it with the plain definition); `false` proves that
/// [`find_in_json`] finds nothing, so nearly every body skips the parse and the walk.
///
/// One pass over the bytes: a prefix can start only where the first two bytes of one start
/// (found 32 positions at a time by vector compares), which is rare in prose, code and base64
/// alike; only there are the boundary and the whole prefix looked at. About a third of a
/// nanosecond a byte, with or without escapes (a body of model text is full of `\n`).
#[must_use]
pub fn json_may_hold_credential(json: &[u8]) -> bool {
    any_pair_position(json, |at| candidate_at(json, at))
}

/// How many positions [`any_pair_position`] looks at in one step.
const LANES: usize = 32;

/// Calls `found` with every position of `bytes` where the first two bytes of a prefix of
/// [`SHAPES`] start, in order, until it returns true (then returns true). [`LANES`] positions
/// at a time, each compared with every pair ([`PAIRS`]) in a loop the compiler turns into
/// vector instructions; only the few positions a step finds are looked at one by one. The
/// end, shorter than a step, goes through [`PREFIX_PAIRS`].
fn any_pair_position(bytes: &[u8], mut found: impl FnMut(usize) -> bool) -> bool {
    let full = bytes.len().saturating_sub(1) / LANES * LANES;
    let mut at = 0;
    while at < full {
        let window: &[u8; LANES + 1] =
            bytes[at..=at + LANES].try_into().expect("a window of LANES + 1 bytes");
        let mut mask = lane_mask(window);
        while mask != 0 {
            let lane = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if found(at + lane) {
                return true;
            }
        }
        at += LANES;
    }
    (full..bytes.len().saturating_sub(1)).any(|at| {
        let index = usize::from(bytes[at]) << 8 | usize::from(bytes[at + 1]);
        PREFIX_PAIRS[index >> 6] >> (index & 63) & 1 == 1 && found(at)
    })
}

/// Bit `i` set when a prefix's first two bytes start at `window[i]`.
#[inline]
fn lane_mask(window: &[u8; LANES + 1]) -> u32 {
    let mut hit = [false; LANES];
    for pair in &PAIRS.0[..PAIRS.1] {
        for (lane, hit) in hit.iter_mut().enumerate() {
            *hit |= (window[lane] == pair[0]) & (window[lane + 1] == pair[1]);
        }
    }
    // Most windows have no hit: one reduction tells, before any bit is gathered.
    if !hit.iter().fold(false, |any, &hit| any | hit) {
        return 0;
    }
    hit.iter().enumerate().fold(0, |mask, (lane, &hit)| mask | u32::from(hit) << lane)
}

/// The first two bytes of every prefix of [`SHAPES`], each pair once, and how many there are.
/// Every prefix is at least two bytes long (checked here, when compiling).
const PAIRS: ([[u8; 2]; 32], usize) = {
    let mut pairs = [[0u8; 2]; 32];
    let mut count = 0;
    let mut s = 0;
    while s < SHAPES.len() {
        let prefixes = SHAPES[s].prefixes;
        let mut p = 0;
        while p < prefixes.len() {
            let bytes = prefixes[p].as_bytes();
            assert!(bytes.len() >= 2, "a prefix of at least two bytes");
            let mut seen = false;
            let mut i = 0;
            while i < count {
                seen |= pairs[i][0] == bytes[0] && pairs[i][1] == bytes[1];
                i += 1;
            }
            if !seen {
                assert!(count < pairs.len(), "room for every pair");
                pairs[count] = [bytes[0], bytes[1]];
                count += 1;
            }
            p += 1;
        }
        s += 1;
    }
    (pairs, count)
};

/// Whether a prefix of a shape starts at `at` of `json`, at a boundary (the prefix may run past
/// the text's end: it is compared with what is there).
fn candidate_at(json: &[u8], at: usize) -> bool {
    json_boundary(json, at)
        && SHAPES.iter().flat_map(|s| s.prefixes).any(|p| json[at..].starts_with(p.as_bytes()))
}

/// [`PAIRS`] as a set of 65,536 bits (byte 0 times 256 plus byte 1), for the end of a scan
/// shorter than a [`LANES`] window.
const PREFIX_PAIRS: [u64; 1024] = {
    let mut bits = [0u64; 1024];
    let mut i = 0;
    while i < PAIRS.1 {
        let index = (PAIRS.0[i][0] as usize) << 8 | PAIRS.0[i][1] as usize;
        bits[index >> 6] |= 1 << (index & 63);
        i += 1;
    }
    bits
};

/// A boundary as [`at_boundary`] would see it in the decoded string, over-approximated in
/// escaped JSON text: after an escape (`\n`, `\u001f`) the decoded byte before is no word byte.
fn json_boundary(json: &[u8], at: usize) -> bool {
    let back = |n: usize| at.checked_sub(n).and_then(|i| json.get(i)).copied();
    at_boundary(json, at)
        || back(2) == Some(b'\\')
        || (back(6) == Some(b'\\') && back(5) == Some(b'u'))
}

/// Every unmarked credential-shaped string value in the JSON text `json` (a body as
/// `serde_json` writes it), in document order. Cheap when there is none: see
/// [`json_may_hold_credential`]. Text that is not JSON has no findings.
#[must_use]
pub fn find_in_json(json: &[u8]) -> Vec<Finding> {
    if !json_may_hold_credential(json) {
        return Vec::new();
    }
    serde_json::from_slice::<Value>(json).map(|value| find_in_value(&value)).unwrap_or_default()
}

/// Every unmarked credential-shaped string value in `value`, in document order, each with its
/// path from `$`. An object with a `$secret` key is marked and skipped whole.
#[must_use]
pub fn find_in_value(value: &Value) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut path = String::from("$");
    walk(value, &mut path, &mut findings);
    findings
}

fn walk(value: &Value, path: &mut String, findings: &mut Vec<Finding>) {
    let len = path.len();
    match value {
        Value::String(text) => {
            findings.extend(
                shapes_in(text).into_iter().map(|shape| Finding { path: path.clone(), shape }),
            );
        }
        Value::Object(map) if map.contains_key(SECRET_KEY) => {}
        Value::Object(map) => {
            for (key, item) in map {
                push_key(path, key);
                walk(item, path, findings);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                walk(item, path, findings);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// `.key` for a key that is an identifier, else `["key"]` with the key as a JSON string.
fn push_key(path: &mut String, key: &str) {
    let identifier = key.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && key.bytes().all(|b| is_word_byte(&b));
    if identifier {
        path.push('.');
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&Value::String(key.to_owned()).to_string());
        path.push(']');
    }
}

/// Every credential-shaped run of bytes in `bytes`, raw bytes nobody parses (a `record/blob`'s:
/// a serialized checkpoint), each reported at `path`. Strings are stored verbatim in such
/// bytes (msgpack, pickle), so a credential in one holds its prefix verbatim: the same
/// prefilter as [`json_may_hold_credential`] finds where to look, and a match starts at a
/// boundary as in a string. There is no `$secret` mark to honor inside raw bytes.
#[must_use]
pub fn find_in_bytes(bytes: &[u8], path: &str) -> Vec<Finding> {
    let mut findings: Vec<Finding> = Vec::new();
    // A match consumes its bytes: no later match starts inside it.
    let mut next = 0;
    any_pair_position(bytes, |at| {
        if at < next {
            return false;
        }
        // Where a serialized string starts here, its header says where it ends: its length
        // byte before `at` is no boundary, and the byte after it may be a word byte.
        let in_string = strings_at(bytes, at).into_iter().flatten().find_map(match_at);
        let matched =
            in_string.or_else(|| at_boundary(bytes, at).then(|| match_at(&bytes[at..]))?);
        if let Some((shape, len)) = matched {
            if !findings.iter().any(|f| f.shape == shape.name) {
                findings.push(Finding { path: path.to_owned(), shape: shape.name });
            }
            next = at + len.max(1);
        }
        false
    });
    findings
}

/// The strings that may start at `at` of serialized bytes, by the string header that would end
/// right before it: msgpack's fixstr, str8, str16 and str32, pickle's short unicode (each read
/// as far as the bytes go; a byte can look like more than one header). A header byte is never
/// a word byte, so a run of word bytes holds at most a few such starts besides its own: the
/// scan stays linear.
fn strings_at(bytes: &[u8], at: usize) -> [Option<&[u8]>; 4] {
    let back = |n: usize| at.checked_sub(n).and_then(|i| bytes.get(i)).copied();
    let string = |len: Option<usize>| {
        let end = at.checked_add(len?)?.min(bytes.len());
        bytes.get(at..end)
    };
    let fixstr = back(1).filter(|b| (0xa0..=0xbf).contains(b)).map(|b| usize::from(b & 0x1f));
    let str8 = match (back(2), back(1)) {
        (Some(0xd9 | 0x8c), Some(len)) => Some(usize::from(len)),
        _ => None,
    };
    let str16 = match (back(3), back(2), back(1)) {
        (Some(0xda), Some(hi), Some(lo)) => Some(usize::from(u16::from_be_bytes([hi, lo]))),
        _ => None,
    };
    let str32 = match (back(5), back(4), back(3), back(2), back(1)) {
        (Some(0xdb), Some(a), Some(b), Some(c), Some(d)) => {
            usize::try_from(u32::from_be_bytes([a, b, c, d])).ok()
        }
        _ => None,
    };
    [string(str8), string(str16), string(str32), string(fixstr)]
}

/// Where a finding in a `record/blob`'s raw bytes is reported.
pub use crate::error::BYTES_PATH;

/// Every unmarked credential-shaped value of an encoded body: in the JSON of a JSON body,
/// and in the head and the bytes (path `$.bytes`) of a `record/blob`. Other binary bodies
/// (`assistant/delta` text, opaque ones) are not scanned.
#[must_use]
pub fn find_in_encoded(encoded: &codec::EncodedBody) -> Vec<Finding> {
    if encoded.encoding == codec::ENCODING_JSON {
        return find_in_json(&encoded.bytes);
    }
    let Some((head, bytes)) = codec::blob_parts(encoded) else { return Vec::new() };
    let mut findings = find_in_json(head);
    findings.extend(find_in_bytes(bytes, BYTES_PATH));
    findings
}

/// Every unmarked credential-shaped value of `body`, as a front end warns of them before it
/// appends (the store writes them unless [`crate::harness::StoreOptions::refuse_unmarked_secrets`]
/// is on). Pure; cheap for a body without a shape's prefix (one encoding and one pass over
/// it). `assistant/delta` text and opaque non-JSON bodies are not scanned.
#[must_use]
pub fn find_in_body(body: &Body) -> Vec<Finding> {
    match body {
        Body::AssistantDelta(_) => Vec::new(),
        Body::Opaque(opaque) if opaque.encoding != codec::ENCODING_JSON => Vec::new(),
        Body::Opaque(opaque) => find_in_json(&opaque.bytes),
        _ => codec::encode_body(body, crate::engine::segment::FORMAT_VERSION)
            .map(|encoded| find_in_encoded(&encoded))
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_consistent_with_the_prefilter() {
        let mut names: Vec<&str> = SHAPES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SHAPES.len(), "shape names are unique");
        for shape in SHAPES {
            assert!(!shape.prefixes.is_empty(), "{}", shape.name);
            for prefix in shape.prefixes {
                let bytes = prefix.as_bytes();
                let index = usize::from(bytes[0]) << 8 | usize::from(bytes[1]);
                assert_eq!(PREFIX_PAIRS[index >> 6] >> (index & 63) & 1, 1, "{prefix}");
                // Verbatim in serde_json text: no byte that JSON escapes.
                assert!(prefix.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'), "{prefix}");
            }
        }
    }

    #[test]
    fn overlapping_candidates_are_scanned_in_bounded_time() {
        let started = std::time::Instant::now();
        for text in
            ["sk-".repeat(100_000), " sk-".repeat(100_000), ".eyJaaaaaaaaaaaa".repeat(20_000)]
        {
            assert!(shapes_in(&text).is_empty());
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
    }

    /// The prefilter by its definition (a boundary and a prefix at some byte): the table
    /// driven one must answer the same on any text.
    fn reference_prefilter(json: &[u8]) -> bool {
        (0..json.len()).any(|at| {
            let back = |n: usize| at.checked_sub(n).and_then(|i| json.get(i)).copied();
            let boundary = at_boundary(json, at)
                || back(2) == Some(b'\\')
                || (back(6) == Some(b'\\') && back(5) == Some(b'u'));
            boundary
                && SHAPES
                    .iter()
                    .flat_map(|s| s.prefixes)
                    .any(|p| json[at..].starts_with(p.as_bytes()))
        })
    }

    /// 20,000 texts of `pieces` and every prefix of [`SHAPES`], each given to `check`: short
    /// ones and long ones (past a [`LANES`] window), from a fixed seed.
    fn random_texts(seed: u64, pieces: &[&str], mut check: impl FnMut(&str)) {
        let pieces: Vec<&str> = SHAPES
            .iter()
            .flat_map(|s| s.prefixes.iter().copied())
            .chain(pieces.iter().copied())
            .collect();
        let mut state = seed;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for round in 0..20_000 {
            let pieces_in = if round % 2 == 0 { next(12) } else { next(240) };
            let text: String = (0..pieces_in).map(|_| pieces[next(pieces.len())]).collect();
            check(&text);
        }
    }

    #[test]
    fn the_table_driven_prefilter_agrees_with_the_reference() {
        let pieces = ["a", "Z", "0", "_", "-", " ", "\\", "\\n", "\\u001f", "\"", "/", "+", "="];
        random_texts(0x9E37_79B9_7F4A_7C15, &pieces, |text| {
            let bytes = text.as_bytes();
            assert_eq!(json_may_hold_credential(bytes), reference_prefilter(bytes), "{text:?}");
        });
    }

    #[test]
    fn the_raw_bytes_scan_agrees_with_the_reference_and_sees_keys_in_msgpack() {
        let pieces = ["a", "Z", "0", "_", "-", " ", "\x00", "\u{ff}", "AKIAIOSFODNN7EXAMPLE"];
        let keys = ["ghp_0123456789abcdefghijABCDEFGHIJ012345", "sk-ant-", "xoxb-12345678-abc"];
        random_texts(0x2545_F491_4F6C_DD1D, &[&pieces[..], &keys[..]].concat(), |text| {
            let found: Vec<&str> =
                find_in_bytes(text.as_bytes(), "$.bytes").iter().map(|f| f.shape).collect();
            assert_eq!(found, shapes_at_every_position(text.as_bytes(), true), "{text:?}");
        });
        // A key inside a msgpack string: its header byte, then the key verbatim.
        let mut packed = vec![0x81, 0xa4];
        packed.extend_from_slice(b"note");
        packed.push(0xb4);
        packed.extend_from_slice(b"AKIAIOSFODNN7EXAMPLE");
        let findings = find_in_bytes(&packed, "$.bytes");
        assert_eq!(findings.len(), 1);
        assert_eq!(
            (findings[0].path.as_str(), findings[0].shape),
            ("$.bytes", "aws_access_key_id")
        );
        // A str8 whose length byte is a letter (108: `l`), then bytes that are word bytes: the
        // header bounds the key on both sides.
        let key = format!("sk-ant-api03-{}", "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7".repeat(4));
        let key = &key[..108];
        let mut packed = vec![0x82, 0xa4, b'n', b'o', b't', b'e', 0xd9, 108];
        packed.extend_from_slice(key.as_bytes());
        packed.extend_from_slice(b"zz");
        let shapes: Vec<&str> = find_in_bytes(&packed, "$.bytes").iter().map(|f| f.shape).collect();
        assert_eq!(shapes, ["anthropic_api_key"]);
        // Each shape is reported once.
        let twice = [&packed[..], &packed[..]].concat();
        assert_eq!(find_in_bytes(&twice, "$.bytes").len(), 1);
    }

    #[test]
    fn the_prefilter_sees_a_match_after_an_escape() {
        let key = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        for text in [format!("line\n{key}"), format!("tab\t{key}"), format!("bell\u{7}{key}")] {
            let json = serde_json::to_vec(&serde_json::json!({ "text": text })).unwrap();
            assert!(json_may_hold_credential(&json), "{text:?}");
            assert_eq!(find_in_json(&json).len(), 1, "{text:?}");
        }
        assert!(!json_may_hold_credential(br#"{"text":"task-1 on disk-2"}"#));
    }
}
