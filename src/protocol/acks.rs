//! Acknowledging only what became durable (`format-spec/protocol.md`, "Acknowledging only
//! durable events"): the rules of `factlog emit --ack durable-only` and of a served store's
//! connection whose hello asked for `"acks":"durable-only"` (`format-spec/server.md`,
//! "Acknowledgements"), one implementation for both doors.
//!
//! Under [`AckMode::DurableOnly`] a written reply whose durability is `buffered` (and that
//! carries no warnings) is not written: the line is counted as *pending*. Every reply that is
//! written carries `"covers": N`, the lines it answers (the pending ones and its own). A
//! written reply that waited for `flushed`, `synced` or `replicated` covers the pending lines
//! (durability is prefix-ordered); any other reply (an error, a duplicate, a read's reply, a
//! buffered event with warnings) cannot vouch for them, so the store is synced first and a
//! covering reply `{"covers":N,"durability":"synced"}` precedes it. Under [`AckMode::Every`]
//! every reply is written as it is.

use std::io::{self, Write};

use serde_json::{Map, Value, json};

use super::Reply;
use super::reply::{KEY_DURABILITY, KEY_WARNINGS, write_line};
use super::request::KEY_ID;
use crate::{Durability, Store};

/// The key of the lines a reply answers under [`AckMode::DurableOnly`].
pub const KEY_COVERS: &str = "covers";

/// Which replies a stream of requests gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AckMode {
    /// One reply per non-blank line, in order (the default).
    #[default]
    Every,
    /// No reply for a line whose event was written `buffered`; every reply says how many
    /// lines it covers.
    DurableOnly,
}

impl AckMode {
    /// The mode's name on the wire and on the command line: `every`, `durable-only`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            AckMode::Every => "every",
            AckMode::DurableOnly => "durable-only",
        }
    }

    /// The mode named `name`, `None` for any other name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<AckMode> {
        match name {
            "every" => Some(AckMode::Every),
            "durable-only" => Some(AckMode::DurableOnly),
            _ => None,
        }
    }
}

/// A failure that ends the stream, after its reply was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fatal {
    /// The error's message, for the door's diagnostics.
    pub message: String,
    /// The store is damaged or holds data this build refuses (rather than failing to write).
    pub damaged: bool,
}

/// The replies of one stream under an [`AckMode`]: the count of lines answered by no reply
/// yet.
#[derive(Debug, Clone, Default)]
pub struct Acks {
    mode: AckMode,
    pending: u64,
}

impl Acks {
    /// A stream with no line pending.
    #[must_use]
    pub fn new(mode: AckMode) -> Acks {
        Acks { mode, pending: 0 }
    }

    /// The stream's mode.
    #[must_use]
    pub fn mode(&self) -> AckMode {
        self.mode
    }

    /// The lines written `buffered` that no reply answered yet (always 0 under
    /// [`AckMode::Every`]).
    #[must_use]
    pub fn pending(&self) -> u64 {
        self.pending
    }

    /// Counts `pending` lines as unanswered again: a reply written into a buffer that was
    /// never sent (its sync failed), whose lines the error reply now covers.
    pub(crate) fn reopen(&mut self, pending: u64) {
        self.pending = pending;
    }

    /// For a door that writes the reply of a buffered append itself (a served store's
    /// fragment fast path): whether that reply is skipped. When it is, the line is counted
    /// as pending. The reply must be a written one without warnings.
    pub fn skips_buffered(&mut self) -> bool {
        if self.mode == AckMode::DurableOnly {
            self.pending += 1;
            return true;
        }
        false
    }

    /// Answers one append (or any request whose written reply's durability is what it
    /// waited for): skips it, writes it, or covers the pending lines with it or before it.
    /// Returns the failure that ends the stream, after its reply was written.
    ///
    /// # Errors
    ///
    /// Writing to `output` failed.
    pub fn answer(
        &mut self,
        store: &Store,
        reply: Reply,
        output: &mut impl Write,
    ) -> io::Result<Option<Fatal>> {
        self.answer_covering(Some(store), reply, output).map(|(fatal, _)| fatal)
    }

    /// As [`Acks::answer`], for a door that writes the bytes only once a sync it waits for has
    /// come (a served connection whose replies wait behind others for a group commit): a reply
    /// that cannot cover the pending lines still covers them first, without syncing them here.
    /// Also says whether it did: then the bytes vouch for every record appended so far and must
    /// wait for their sync.
    ///
    /// # Errors
    ///
    /// Writing to `output` failed.
    pub(crate) fn answer_unsynced(
        &mut self,
        reply: Reply,
        output: &mut impl Write,
    ) -> io::Result<(Option<Fatal>, bool)> {
        self.answer_covering(None, reply, output)
    }

    /// [`Acks::answer`]: with `sync`, the store whose pending lines a covering reply syncs
    /// first; without, the covering reply is written unsynced and said (the `bool`).
    fn answer_covering(
        &mut self,
        sync: Option<&Store>,
        reply: Reply,
        output: &mut impl Write,
    ) -> io::Result<(Option<Fatal>, bool)> {
        match reply {
            Reply::Written { reply, durability } => {
                let warned = reply.contains_key(KEY_WARNINGS);
                if durability == Durability::Buffered {
                    if !warned && self.skips_buffered() {
                        return Ok((None, false));
                    }
                    // A buffered event vouches for nothing but itself; its warnings must
                    // reach the harness.
                    return self.standalone(sync, reply, output);
                }
                // Durability is prefix-ordered: the buffered events written before this one
                // are now as durable as it is.
                self.write(reply, output).map(|()| (None, false))
            }
            Reply::Duplicate { reply } | Reply::Refused { reply } => {
                self.standalone(sync, reply, output)
            }
            Reply::Fatal { reply, message, damaged } => {
                // The pending lines are not acknowledged: after a failure that ends the
                // stream they are as after a crash (read the store).
                self.write(reply, output)?;
                Ok((Some(Fatal { message, damaged }), false))
            }
        }
    }

    /// Answers a request that appends nothing (a read, a report): its reply is never
    /// skipped and never covers a pending line, which a covering reply answers first.
    ///
    /// # Errors
    ///
    /// Writing to `output` failed.
    pub fn answer_read(
        &mut self,
        store: &Store,
        reply: Map<String, Value>,
        output: &mut impl Write,
    ) -> io::Result<Option<Fatal>> {
        self.standalone(Some(store), reply, output).map(|(fatal, _)| fatal)
    }

    /// At the end of a stream that ends in order (`emit`'s input ended): under
    /// [`AckMode::DurableOnly`] the store is synced and `{"end":true,"covers":N,
    /// "durability":"synced"}` written; nothing under [`AckMode::Every`].
    ///
    /// # Errors
    ///
    /// Writing to `output` failed. A failed sync is written as its error reply (covering
    /// the pending lines) and returned as the [`Fatal`].
    pub fn end(&mut self, store: &Store, output: &mut impl Write) -> io::Result<Option<Fatal>> {
        if self.mode == AckMode::Every {
            return Ok(None);
        }
        let (reply, fatal) = match store.flush(Durability::Synced) {
            Ok(()) => (end_reply(self.pending), None),
            Err(error) => {
                // Its error reply covers the pending lines, which are not acknowledged.
                let mut reply = super::error_reply(&error, None);
                reply.insert(KEY_COVERS.to_owned(), json!(self.pending));
                (reply, Some(Fatal { message: error.to_string(), damaged: false }))
            }
        };
        self.pending = 0;
        write_line(output, &reply)?;
        Ok(fatal)
    }

    /// A reply that cannot cover the pending lines: they are covered first, synced first
    /// with `sync` (else the `bool` says the covering reply waits for their sync).
    fn standalone(
        &mut self,
        sync: Option<&Store>,
        reply: Map<String, Value>,
        output: &mut impl Write,
    ) -> io::Result<(Option<Fatal>, bool)> {
        let mut covered = false;
        if self.pending > 0 {
            if let Some(store) = sync
                && let Err(error) = store.flush(Durability::Synced)
            {
                // A failed sync ends the stream, whatever its kind; its reply covers the
                // pending lines and the request's.
                let message = error.to_string();
                let reply = super::error_reply(&error, reply.get(KEY_ID).cloned());
                self.write(reply, output)?;
                return Ok((Some(Fatal { message, damaged: false }), false));
            }
            // Covers exactly the pending lines (no request line of its own).
            write_line(output, &covering_reply(self.pending))?;
            self.pending = 0;
            covered = sync.is_none();
        }
        self.write(reply, output).map(|()| (None, covered))
    }

    /// Writes `reply` as the answer of its own line and of the pending ones (`covers` last,
    /// under [`AckMode::DurableOnly`]).
    fn write(&mut self, mut reply: Map<String, Value>, output: &mut impl Write) -> io::Result<()> {
        if self.mode == AckMode::DurableOnly {
            reply.insert(KEY_COVERS.to_owned(), json!(self.pending + 1));
            self.pending = 0;
        }
        write_line(output, &reply)
    }
}

/// The covering reply of `covers` lines whose buffered replies were skipped, once they were
/// synced: `{"covers":N,"durability":"synced"}`.
#[must_use]
pub fn covering_reply(covers: u64) -> Map<String, Value> {
    let mut reply = Map::new();
    reply.insert(KEY_COVERS.to_owned(), json!(covers));
    reply.insert(KEY_DURABILITY.to_owned(), json!(Durability::Synced.as_str()));
    reply
}

/// The final reply of a stream that ended in order, its last `covers` lines synced:
/// `{"end":true,"covers":N,"durability":"synced"}` (`emit --ack durable-only`, and its relay
/// through a served store).
#[must_use]
pub fn end_reply(covers: u64) -> Map<String, Value> {
    let mut reply = Map::new();
    reply.insert("end".to_owned(), json!(true));
    reply.append(&mut covering_reply(covers));
    reply
}
