//! The request lines of one connection, read within the server's memory for requests
//! (`format-spec/server.md`, "Memory").
//!
//! A connection spends on one request its line buffer, the JSON tree the line is parsed into
//! and what running it copies (the event's encoded body and its frame). Up to
//! [`SERVER_REQUEST_BYTES_PER_CLIENT`] of that is the connection's own; a request that needs
//! more takes the rest from the server's [`RequestBudget`] ([`SERVER_REQUEST_BYTES_SHARED`])
//! while it is read and run, and gives it back once it is answered. The line buffer is
//! charged as it grows, and the tree before the line is parsed, at an upper bound read off
//! the line's structural characters ([`parse_bytes_max`]), so a line of many small values
//! (whose tree is a hundred times larger than the line) is refused before it costs anything.
//! A request the budget cannot take is refused `LIMIT_EXCEEDED` and the connection goes on:
//! when the budget runs short in the middle of a line, the rest of the line is read and
//! dropped, so the stream stays in step.
//!
//! Invariants: `held` is what this connection holds of the budget, and equals the charged
//! cost of its current request less its own allowance; after `LineReader::settle` the
//! buffer is at most [`SERVER_LINE_BUFFER_BYTES`] and `held` is 0. A line that fits the kept
//! buffer and takes the fast path of a bare fragment costs no atomic operation.

use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::limits::{
    SERVER_HEAP_TRIM_BYTES_MIN, SERVER_INPUT_BUFFER_BYTES, SERVER_LINE_BUFFER_BYTES,
    SERVER_PARSE_BYTES_PER_TOKEN, SERVER_REQUEST_BYTES_PER_CLIENT, SERVER_REQUEST_BYTES_SHARED,
};
use crate::protocol::Reply;
use crate::protocol::reply::error_object;

/// The bytes that running a parsed request copies, per byte of its line: the event's body
/// encoded and its frame, each at most as long as the line that spelled it.
const RUN_BYTES_PER_LINE_BYTE: usize = 2;

/// The most one fragment of a parsed fragments line takes besides its bytes: its slot in the
/// array twice over (the array doubles as it grows) and the smallest allocation of a fragment
/// that holds an escape (its own string).
const TEXT_SLOT_BYTES: usize =
    2 * std::mem::size_of::<crate::protocol::delta_line::Text<'static>>() + 32;

/// The memory that the connections of one served store share for requests longer than each
/// connection's own [`SERVER_REQUEST_BYTES_PER_CLIENT`] (`format-spec/server.md`, "Memory").
/// When it falls back to nothing after having held at least [`SERVER_HEAP_TRIM_BYTES_MIN`],
/// the heap's free memory is handed back to the operating system.
#[derive(Debug)]
pub struct RequestBudget {
    limit: usize,
    in_use: AtomicUsize,
    /// The most held since the heap was last trimmed.
    peak: AtomicUsize,
}

/// The budget of connections that are not a [`super::Server`]'s (the tests of the stream
/// rules through [`super::conn::NoHolds`]): one for the process.
pub(super) static PROCESS_BUDGET: RequestBudget = RequestBudget::new(SERVER_REQUEST_BYTES_SHARED);

impl RequestBudget {
    /// A budget of `limit` bytes, none of them in use.
    #[must_use]
    pub const fn new(limit: usize) -> RequestBudget {
        RequestBudget { limit, in_use: AtomicUsize::new(0), peak: AtomicUsize::new(0) }
    }

    /// The bytes of the budget.
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The bytes that requests hold now.
    #[must_use]
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Acquire)
    }

    /// Takes `bytes`, or returns the bytes in use when fewer than `bytes` are left.
    fn take(&self, bytes: usize) -> Result<(), usize> {
        let mut in_use = self.in_use.load(Ordering::Acquire);
        loop {
            let after = match in_use.checked_add(bytes) {
                Some(after) if after <= self.limit => after,
                _ => return Err(in_use),
            };
            match self.in_use.compare_exchange_weak(
                in_use,
                after,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.peak.fetch_max(after, Ordering::AcqRel);
                    return Ok(());
                }
                Err(now) => in_use = now,
            }
        }
    }

    /// Gives back `bytes` taken before; the last request to give back after a large use
    /// trims the heap.
    fn give_back(&self, bytes: usize) {
        let before = self.in_use.fetch_sub(bytes, Ordering::AcqRel);
        assert!(before >= bytes, "a request budget gave back {bytes} of {before} bytes held");
        if before == bytes && self.peak.swap(0, Ordering::AcqRel) >= SERVER_HEAP_TRIM_BYTES_MIN {
            super::heap::trim();
        }
    }
}

/// An upper bound of the heap bytes that parsing `line` into a JSON tree takes at its peak,
/// allocator overhead included: the line's length (the strings and numbers) and
/// [`SERVER_PARSE_BYTES_PER_TOKEN`] for each value it can hold (one more than its `[`, `{`,
/// `,` and `:` outside strings). Reads the line once; allocates nothing.
#[must_use]
pub fn parse_bytes_max(line: &[u8]) -> usize {
    let values = json_structural_count(line).saturating_add(1);
    values.saturating_mul(SERVER_PARSE_BYTES_PER_TOKEN).saturating_add(line.len())
}

/// The `[`, `{`, `,` and `:` of `line` outside its strings (a malformed line is counted as
/// far as it goes: the parser builds a tree of a prefix before it finds the error).
fn json_structural_count(line: &[u8]) -> usize {
    let mut count = 0usize;
    let mut rest = line;
    while let Some((&byte, after)) = rest.split_first() {
        rest = after;
        match byte {
            b'[' | b'{' | b',' | b':' => count += 1,
            b'"' => loop {
                // To the closing quote: a backslash escapes the byte after it.
                let Some(at) = memchr::memchr2(b'"', b'\\', rest) else { return count };
                let quote = rest.get(at) == Some(&b'"');
                rest = rest.get(at + if quote { 1 } else { 2 }..).unwrap_or_default();
                if quote {
                    break;
                }
            },
            _ => {}
        }
    }
    count
}

/// What a request needed of the budget that it could not have.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shortfall {
    /// Other connections hold the budget now: the request runs when sent again later.
    Busy {
        /// The bytes this request needed beyond its own allowance.
        needed: usize,
        /// The bytes other requests held.
        in_use: usize,
        /// The budget.
        limit: usize,
    },
    /// The request needs more than the whole budget: it never runs.
    Never {
        /// The bytes the request would take, its own allowance included.
        needed: usize,
        /// The budget.
        limit: usize,
    },
}

impl Shortfall {
    /// The `LIMIT_EXCEEDED` reply (no `id`: the line was not parsed), saying what to do.
    pub(super) fn reply(self) -> Reply {
        let message = match self {
            Shortfall::Busy { needed, in_use, limit } => format!(
                "the server's memory for long requests (SERVER_REQUEST_BYTES_SHARED, {limit} \
                 bytes for all connections) is in use: this line needed {needed} bytes of it \
                 and other connections hold {in_use}; nothing was written for it: send it \
                 again once they are answered, or send shorter requests"
            ),
            Shortfall::Never { needed, limit } => format!(
                "this line would take about {needed} bytes to parse and run (its JSON values \
                 cost about {SERVER_PARSE_BYTES_PER_TOKEN} bytes each), more than the \
                 {limit} bytes the server has for all long requests \
                 (SERVER_REQUEST_BYTES_SHARED); nothing was written for it: split it into \
                 smaller requests (fewer events per batch, fewer values per body)"
            ),
        };
        Reply::Refused { reply: error_object(None, "LIMIT_EXCEEDED", &message) }
    }
}

/// One line of input, as read.
#[derive(Debug, Clone, Copy)]
pub(super) enum Line {
    /// The input ended before a line began.
    End,
    /// The input ended in the middle of a line of this many bytes: discarded.
    Partial(usize),
    /// A whole line, in [`LineReader::line`] without its newline.
    Complete,
    /// No newline within the limit: this many bytes were read.
    TooLong(usize),
    /// The budget could not take the line: it was read to its newline and dropped.
    Refused(Shortfall),
}

/// What a request does with its line after reading it, for the estimate of its cost.
#[derive(Debug, Clone, Copy)]
pub(super) enum Parse {
    /// The fast path of a bare fragment: its strings are borrowed or decoded once.
    Plain,
    /// A fragments line: its strings as `Plain`, and up to [`TEXT_SLOT_BYTES`] a fragment
    /// (counted as the line's commas, an upper bound).
    Texts,
    /// A JSON tree.
    Tree,
}

/// A connection's input, read line by line within its allowance and the server's budget.
pub(super) struct LineReader<'a, R: Read> {
    input: BufReader<R>,
    line: Vec<u8>,
    budget: &'a RequestBudget,
    /// What this connection holds of `budget`.
    held: usize,
    /// A line whose reading stopped at a read that would block (the event loop's): how many
    /// of its bytes were read (those kept are in `line`) and what the budget refused of it.
    resume: Option<(usize, Option<Shortfall>)>,
}

impl<'a, R: Read> LineReader<'a, R> {
    pub(super) fn new(input: R, budget: &'a RequestBudget) -> LineReader<'a, R> {
        LineReader {
            input: BufReader::with_capacity(SERVER_INPUT_BUFFER_BYTES, input),
            line: Vec::new(),
            budget,
            held: 0,
            resume: None,
        }
    }

    /// The input read from.
    pub(super) fn input_mut(&mut self) -> &mut R {
        self.input.get_mut()
    }

    /// The line last read ([`Line::Complete`]), without its newline.
    pub(super) fn line(&self) -> &[u8] {
        &self.line
    }

    /// Whether the input read ahead holds another whole line (reading it will not block).
    pub(super) fn line_waiting(&self) -> bool {
        memchr::memchr(b'\n', self.input.buffer()).is_some()
    }

    /// Reads one line (its newline removed), at most `limit` bytes of it, newline included.
    /// A read that would block (`WouldBlock`) returns its error and keeps the part of the line
    /// read so far: the next call goes on with it.
    pub(super) fn read_line(&mut self, limit: usize) -> io::Result<Line> {
        let (mut read, mut short) = self.resume.take().unwrap_or_else(|| {
            self.line.clear();
            (0, None)
        });
        loop {
            let (take, complete) = {
                let available = match self.input.fill_buf() {
                    Ok(available) => available,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => {
                        if error.kind() == io::ErrorKind::WouldBlock {
                            self.resume = Some((read, short));
                        }
                        return Err(error);
                    }
                };
                if available.is_empty() {
                    if read == 0 {
                        return Ok(Line::End);
                    }
                    // The input ended without a newline: the client died mid-line.
                    self.settle();
                    return Ok(Line::Partial(read));
                }
                let window = available.get(..limit - read).unwrap_or(available);
                match memchr::memchr(b'\n', window) {
                    Some(at) => (at + 1, true),
                    None => (window.len(), false),
                }
            };
            if short.is_none() {
                match self.grow(self.line.len() + take, limit) {
                    Ok(()) => self.line.extend_from_slice(&self.input.buffer()[..take]),
                    Err(shortfall) => {
                        // The rest of the line is read and dropped, so the stream stays in step.
                        short = Some(shortfall);
                        self.line.clear();
                        self.settle();
                    }
                }
            }
            self.input.consume(take);
            read += take;
            if complete {
                if let Some(shortfall) = short {
                    return Ok(Line::Refused(shortfall));
                }
                self.line.pop();
                return Ok(Line::Complete);
            }
            if read == limit {
                self.line.clear();
                self.settle();
                return Ok(Line::TooLong(read));
            }
        }
    }

    /// Charges what running the line last read costs, before it is parsed (`parse`): its
    /// buffer, the strings or tree parsing makes, and what running it copies.
    pub(super) fn charge(&mut self, parse: Parse) -> Result<(), Shortfall> {
        let bytes = self.line.len();
        let run = bytes.saturating_mul(RUN_BYTES_PER_LINE_BYTE);
        let parsed = match parse {
            Parse::Plain => bytes,
            Parse::Texts => {
                let slots = memchr::memchr_iter(b',', &self.line).count().saturating_add(1);
                slots.saturating_mul(TEXT_SLOT_BYTES).saturating_add(bytes)
            }
            Parse::Tree => {
                // Every byte a value is the most a line can cost: no need to count then.
                let most = bytes.saturating_add(1).saturating_mul(SERVER_PARSE_BYTES_PER_TOKEN);
                let most = most.saturating_add(bytes);
                if self.line.capacity().saturating_add(run).saturating_add(most)
                    <= SERVER_REQUEST_BYTES_PER_CLIENT
                {
                    return Ok(());
                }
                parse_bytes_max(&self.line)
            }
        };
        self.hold(self.line.capacity().saturating_add(parsed).saturating_add(run))
    }

    /// Frees what the last line took: its buffer when it grew past
    /// [`SERVER_LINE_BUFFER_BYTES`], and what it held of the budget. Called once the line is
    /// answered (its tree and copies are gone).
    pub(super) fn settle(&mut self) {
        if self.line.capacity() > SERVER_LINE_BUFFER_BYTES {
            self.line = Vec::new();
        }
        if self.held > 0 {
            self.budget.give_back(self.held);
            self.held = 0;
        }
    }

    /// Makes room in the line buffer for `needed` bytes: doubling, at most `limit`.
    fn grow(&mut self, needed: usize, limit: usize) -> Result<(), Shortfall> {
        let capacity = self.line.capacity();
        if needed <= capacity {
            return Ok(());
        }
        let grown = needed.max(capacity.saturating_mul(2)).min(limit.max(needed));
        self.hold(grown)?;
        self.line.reserve_exact(grown - self.line.len());
        Ok(())
    }

    /// Holds what a request costing `bytes` needs beyond the connection's own allowance.
    fn hold(&mut self, bytes: usize) -> Result<(), Shortfall> {
        let needed = bytes.saturating_sub(SERVER_REQUEST_BYTES_PER_CLIENT);
        if needed <= self.held {
            return Ok(());
        }
        let limit = self.budget.limit();
        if needed > limit {
            return Err(Shortfall::Never { needed: bytes, limit });
        }
        let more = needed - self.held;
        match self.budget.take(more) {
            Ok(()) => {
                self.held = needed;
                Ok(())
            }
            Err(in_use) => {
                Err(Shortfall::Busy { needed, in_use: in_use.saturating_sub(self.held), limit })
            }
        }
    }
}

impl<R: Read> Drop for LineReader<'_, R> {
    fn drop(&mut self) {
        self.settle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structural_characters_inside_strings_are_not_counted() {
        assert_eq!(json_structural_count(b"{}"), 1);
        assert_eq!(json_structural_count(br#"{"a":[1,2],"b":{}}"#), 7);
        assert_eq!(json_structural_count(br#"{"a,:[{":"x\",\\","b":"y"}"#), 4);
        assert_eq!(json_structural_count(br#"[0,0,0"#), 3);
        // An unterminated string ends the count.
        assert_eq!(json_structural_count(br#"[0,"a,b,c"#), 2);
        assert_eq!(json_structural_count(br#"["\"#), 1);
    }

    #[test]
    fn a_budget_refuses_what_it_does_not_have_and_takes_it_back() {
        let budget = RequestBudget::new(100);
        assert!(budget.take(60).is_ok());
        assert_eq!(budget.take(41), Err(60));
        assert!(budget.take(40).is_ok());
        budget.give_back(100);
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn a_line_the_budget_cannot_take_is_dropped_and_the_next_is_read() {
        let budget = RequestBudget::new(8 * 1024 * 1024);
        // Other connections hold most of the budget.
        budget.take(6 * 1024 * 1024).expect("room");
        let mut input = vec![b'x'; 4 * 1024 * 1024];
        input.extend_from_slice(b"\n{}\n");
        let mut reader = LineReader::new(&input[..], &budget);
        assert!(matches!(reader.read_line(usize::MAX), Ok(Line::Refused(Shortfall::Busy { .. }))));
        assert_eq!(budget.in_use(), 6 * 1024 * 1024, "a refused line holds nothing");
        assert!(matches!(reader.read_line(usize::MAX), Ok(Line::Complete)));
        assert_eq!(reader.line(), b"{}");
        assert!(matches!(reader.read_line(usize::MAX), Ok(Line::End)));
    }

    #[test]
    fn a_long_line_holds_the_budget_until_it_is_settled() {
        let budget = RequestBudget::new(SERVER_REQUEST_BYTES_SHARED);
        let mut input = br#"{"t":""#.to_vec();
        input.extend(std::iter::repeat_n(b'x', 1024 * 1024));
        input.extend_from_slice(b"\"}\n");
        let mut reader = LineReader::new(&input[..], &budget);
        assert!(matches!(reader.read_line(usize::MAX), Ok(Line::Complete)));
        assert!(budget.in_use() > 0);
        reader.charge(Parse::Tree).expect("a long string fits");
        assert!(budget.in_use() >= 3 * 1024 * 1024, "{}", budget.in_use());
        reader.settle();
        assert_eq!(budget.in_use(), 0);
        assert!(reader.line.capacity() <= SERVER_LINE_BUFFER_BYTES);
    }

    #[test]
    fn a_line_of_many_values_is_refused_before_it_is_parsed() {
        let budget = RequestBudget::new(SERVER_REQUEST_BYTES_SHARED);
        let mut input = b"[".to_vec();
        input.extend(std::iter::repeat_n(&b"0,"[..], 1024 * 1024).flatten());
        input.extend_from_slice(b"0]\n");
        let mut reader = LineReader::new(&input[..], &budget);
        assert!(matches!(reader.read_line(usize::MAX), Ok(Line::Complete)));
        assert!(matches!(reader.charge(Parse::Tree), Err(Shortfall::Never { .. })));
        reader.settle();
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn a_short_fragment_line_costs_nothing_of_the_budget() {
        let budget = RequestBudget::new(0);
        let line = br#"{"task":"t","type":"assistant/delta","text":"hi"}"#;
        let mut input = line.to_vec();
        input.push(b'\n');
        let mut reader = LineReader::new(&input[..], &budget);
        assert!(matches!(reader.read_line(usize::MAX), Ok(Line::Complete)));
        assert!(reader.charge(Parse::Plain).is_ok());
        assert!(reader.charge(Parse::Tree).is_ok());
    }
}
