//! One client connection of a served store, over any byte stream: the seam between the
//! socket and the protocol. The server's event loops run a [`Connection`] over each accepted
//! socket ([`super::event_loop`], `Connection::nonblocking`), moving it to a thread of its own
//! when it could keep them waiting; [`serve_stream`] runs one that blocks over any reader and
//! writer (tests hand it readers and writers that cut, stall or corrupt the bytes).
//!
//! The stream rules are `format-spec/server.md`: a hello line first, then request lines
//! answered in order; blank lines get no reply; a line that is not a request gets an error
//! reply and the connection goes on; a line longer than [`SERVER_LINE_BYTES_MAX`] gets a
//! `LIMIT_EXCEEDED` reply and ends the connection; a last line without its newline (a client
//! killed mid-line) is discarded, never handled; a line the server's memory for requests
//! cannot take gets a `LIMIT_EXCEEDED` reply and the connection goes on ([`super::lines`]).
//! Appends and their replies are the library's protocol module's ([`crate::protocol`]), as for
//! `factlog emit`.

use std::collections::HashSet;
use std::io::{self, BufWriter, Read, Write};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::{Error, ErrorKind};
use crate::harness::operator;
use crate::limits::{
    SERVER_EVENTS_PER_REPLY_MAX, SERVER_FOLLOW_TIMEOUT_MS_MAX, SERVER_HELLO_BYTES_MAX,
    SERVER_LINE_BYTES_MAX, SERVER_REPLY_BUFFER_BYTES, SERVER_REPLY_PAGE_BYTES,
    SERVER_TASKS_PER_CLIENT_MAX,
};
use crate::protocol::acks::{AckMode, Acks, Fatal};
use crate::protocol::op::{
    self, CheckpointReply, ClientsReply, HistoryPage, Op, OpRequest, RecoverReply,
    RequestedDurability, RevisionReply, StateReply, TasksPage, reply_object,
};
use crate::protocol::reply::{self, error_object, with_id, write_line};
use crate::protocol::request::{self, KEY_TYPE, Refusal};
use crate::protocol::session::{
    CODE_HELLO_REQUIRED, CODE_UNSUPPORTED_VERSION, KEY_ACKS, KEY_HELLO, KEY_OP, KEY_TEXTS,
    KEY_VERSION, SERVER_PROTOCOL_VERSION,
};
use crate::protocol::{self, Reply, Request, delta_line, pages, views};
use crate::{AppendOptions, Store, Task};

use super::deliver::{Deliverer, Outbox, Pending};
use super::lines::{Line, LineReader, PROCESS_BUDGET, Parse, RequestBudget};
use crate::engine::writer::DeferredSyncs;

/// How a connection ended.
#[derive(Debug)]
pub enum End {
    /// The client closed its side after a whole line (or sent nothing).
    Closed,
    /// The client's input ended in the middle of a line: those bytes were discarded.
    PartialLineDiscarded {
        /// How many bytes were discarded.
        bytes: usize,
    },
    /// The first line was not a hello of a version this server speaks; it was answered.
    HelloRefused,
    /// No hello line came within the server's hello timeout.
    HelloTimedOut,
    /// No request line came within the server's idle timeout.
    IdleTimedOut,
    /// A line longer than [`SERVER_LINE_BYTES_MAX`]: answered `LIMIT_EXCEEDED`, then the end.
    LineTooLong,
    /// The store failed in a way that ends the stream (its reply was written).
    Fatal {
        /// The store's error message.
        message: String,
    },
    /// Reading the client's input failed.
    ReadFailed(io::Error),
    /// Writing a reply failed: the client went away or stopped reading (a write timeout).
    WriteFailed(io::Error),
}

/// What a connection does besides the protocol: the bookkeeping of the tasks it touches,
/// shared with the other connections of the server.
pub trait Holds {
    /// The connection touches task `task` for the first time (it is about to append to it).
    fn touch(&self, task: &str);

    /// The connection's hello was answered: the server now bounds its idle time instead.
    /// Default: nothing.
    fn hello_done(&self) {}

    /// The connection sent a request (a line that is not blank): its idle time starts again.
    /// Default: nothing.
    fn request_done(&self) {}

    /// How many connections the server serves now (this one included) and at most; `None`
    /// outside a server. Default: `None`.
    fn clients(&self) -> Option<(usize, usize)> {
        None
    }

    /// How many open connections of the server touched `task`, this one included if it did;
    /// `None` when not counted (a connection outside a server). Default: `None`.
    fn holders(&self, _task: &str) -> Option<usize> {
        None
    }

    /// Whether the server is stopping: a request that waits (`follow`) ends its wait. The
    /// server wakes such waits ([`crate::Log`]'s waiters) after this turns true. Default:
    /// never.
    fn stopping(&self) -> bool {
        false
    }

    /// Where this connection's replies that wait for a group commit go, and the server's
    /// thread that writes them (`format-spec/server.md`, "Group commit"); `None`: the
    /// connection waits for its syncs itself. Default: `None`.
    fn outbox(&self) -> Option<(&Deliverer, &Arc<Outbox>)> {
        None
    }

    /// The memory for long requests this connection shares with the others of its server
    /// (`format-spec/server.md`, "Memory"). Default: one budget of
    /// [`crate::limits::SERVER_REQUEST_BYTES_SHARED`] for every connection of the process
    /// that is not a [`super::Server`]'s.
    fn budget(&self) -> &RequestBudget {
        &PROCESS_BUDGET
    }
}

impl<T: Holds + ?Sized> Holds for &T {
    fn touch(&self, task: &str) {
        (**self).touch(task);
    }

    fn hello_done(&self) {
        (**self).hello_done();
    }

    fn request_done(&self) {
        (**self).request_done();
    }

    fn clients(&self) -> Option<(usize, usize)> {
        (**self).clients()
    }

    fn holders(&self, task: &str) -> Option<usize> {
        (**self).holders(task)
    }

    fn stopping(&self) -> bool {
        (**self).stopping()
    }

    fn outbox(&self) -> Option<(&Deliverer, &Arc<Outbox>)> {
        (**self).outbox()
    }

    fn budget(&self) -> &RequestBudget {
        (**self).budget()
    }
}

/// A connection that touches no shared bookkeeping (tests of the stream rules).
#[derive(Debug, Default)]
pub struct NoHolds;

impl Holds for NoHolds {
    fn touch(&self, _task: &str) {}
}

/// Serves one connection: reads the hello and then request lines from `input`, runs them
/// against `store` and writes each reply to `output`, until the input ends or a rule ends
/// the connection. Returns how it ended and the ids of the tasks it touched (appended to,
/// or tried to), which the caller hands over when it is the last to hold them.
pub fn serve_stream<R: Read, W: Write>(
    store: &Store,
    holds: &dyn Holds,
    pid: u32,
    input: R,
    output: W,
) -> (End, HashSet<String>) {
    let mut connection = Connection::new(store, holds, holds.budget(), input, output);
    let end = match connection.run(pid) {
        Step::Ended(end) => end,
        // Only a connection of the event loop suspends or moves to a thread.
        Step::Suspended { .. } | Step::Promote => End::Closed,
    };
    let end = connection.ended(end);
    (end, connection.touched)
}

/// What [`Connection::resume`] left a connection of the event loop in.
#[derive(Debug)]
pub(super) enum Step {
    /// It ended (its last replies written, or their error).
    Ended(End),
    /// Its input has no whole line now; `more` when it stopped early with lines still read
    /// ahead (its turn was up), so that it must be resumed without waiting for its socket.
    Suspended {
        /// Lines are waiting in its buffer.
        more: bool,
    },
    /// Its next line may block (a read, `follow`, an operator request): it goes on in a
    /// thread of its own ([`Connection::set_blocking`]), which runs that line first.
    Promote,
}

/// The lines a connection of the event loop runs before the next connection's turn.
const LINES_PER_TURN: usize = 256;

pub(super) struct Connection<'a, R: Read, W: Write, H: Holds> {
    store: &'a Store,
    holds: H,
    /// A connection of the event loop: a read that would block suspends it, and a line that
    /// could block the loop promotes it to a thread of its own.
    nonblocking: bool,
    /// The hello was answered.
    hello_done: bool,
    /// The line read last, run again before the next is read (a promoted connection's).
    replay: Option<Line>,
    /// The bytes written to `output` that its socket has not taken yet (`|_| 0`: none ever
    /// wait, the writes block).
    backlog: fn(&W) -> usize,
    touched: HashSet<String>,
    lines: LineReader<'a, R>,
    output: BufWriter<W>,
    /// The task of the last bare delta, so that a stream of fragments looks it up once.
    last_task: Option<Task>,
    /// Which replies this connection gets (its hello's `acks`), and the lines no reply
    /// answered yet.
    acks: Acks,
    /// A reply was handed to the deliverer and not yet seen gone from the outbox: the one
    /// case in which a line must look at the outbox (a fragment does not lock it).
    handed: bool,
    /// On the event loop, while replies wait in the outbox for a sync: the replies of the
    /// lines run since, which go behind them (handed at the end of the turn, or with the next
    /// reply that waits for a sync) instead of to the socket.
    staged: Option<Pending>,
}

impl<'a, R: Read, W: Write, H: Holds> Connection<'a, R, W, H> {
    /// A connection that blocks on its reads and writes ([`serve_stream`]).
    pub(super) fn new(
        store: &'a Store,
        holds: H,
        budget: &'a RequestBudget,
        input: R,
        output: W,
    ) -> Connection<'a, R, W, H> {
        Connection {
            store,
            holds,
            nonblocking: false,
            hello_done: false,
            replay: None,
            backlog: |_| 0,
            touched: HashSet::new(),
            lines: LineReader::new(input, budget),
            output: BufWriter::with_capacity(SERVER_REPLY_BUFFER_BYTES, output),
            last_task: None,
            acks: Acks::new(AckMode::Every),
            handed: false,
            staged: None,
        }
    }

    /// A connection of the event loop, whose `input` returns `WouldBlock` instead of
    /// waiting and whose `output` keeps what its socket does not take (`backlog` says how
    /// much).
    pub(super) fn nonblocking(
        store: &'a Store,
        holds: H,
        budget: &'a RequestBudget,
        input: R,
        output: W,
        backlog: fn(&W) -> usize,
    ) -> Connection<'a, R, W, H> {
        let mut connection = Connection::new(store, holds, budget, input, output);
        connection.nonblocking = true;
        connection.backlog = backlog;
        connection
    }

    /// Runs what the connection's input holds now: until a read would block, its turn is
    /// up, a line must run in a thread of its own, or the connection ends (an end is settled
    /// as [`serve_stream`] settles it).
    pub(super) fn resume(&mut self, pid: u32) -> Step {
        let step = self.run(pid);
        // Whatever the turn ended in, the replies it staged go behind those that wait.
        self.hand_staged();
        match step {
            // On the loop, a reply that still waits for its sync is left to [`Self::settle`]
            // in a thread.
            Step::Ended(end) if self.nonblocking && self.reply_waits() => Step::Ended(end),
            Step::Ended(end) => Step::Ended(self.ended(end)),
            other => other,
        }
    }

    /// Settles a connection's end as [`serve_stream`] does (its reply that waits for a sync
    /// written after it, or its error; what its socket has not taken written), its reads and
    /// writes blocking from now on: in a thread of its own.
    pub(super) fn settle(&mut self, end: End) -> End {
        self.nonblocking = false;
        self.ended(end)
    }

    /// Whether the connection's end is still to be settled in a thread ([`Self::settle`]): a
    /// reply waits for its sync, or its socket has not taken all of its replies.
    pub(super) fn unsettled(&self) -> bool {
        self.staged.as_ref().is_some_and(|staged| !staged.is_empty())
            || self.reply_waits()
            || self.backlog() > 0
    }

    /// From now on the connection's reads and writes block (its input and output were
    /// switched by the caller): it runs in a thread of its own, the line it stopped at first.
    pub(super) fn set_blocking(&mut self) {
        self.nonblocking = false;
    }

    /// The connection's input and output (to switch them to blocking).
    pub(super) fn streams(&mut self) -> (&mut R, &mut W) {
        (self.lines.input_mut(), self.output.get_mut())
    }

    /// The bytes of replies its socket has not taken yet.
    pub(super) fn backlog(&self) -> usize {
        self.output.buffer().len() + (self.backlog)(self.output.get_ref())
    }

    /// The connection's hello or idle bound passed with no line (the event loop keeps them):
    /// it ends as a blocked read timing out ends it.
    pub(super) fn expire(&mut self) -> End {
        let end = if self.hello_done { self.finish(End::IdleTimedOut) } else { End::HelloTimedOut };
        if self.nonblocking && self.reply_waits() {
            return end;
        }
        self.ended(end)
    }

    /// Whether the connection touched a task (its end hands tasks over).
    pub(super) fn touched_any(&self) -> bool {
        !self.touched.is_empty()
    }

    /// The tasks the connection touched, for the hand-over once it has ended.
    pub(super) fn into_touched(self) -> HashSet<String> {
        self.touched
    }

    /// A reply still waiting for its sync is written (or its error) before the end.
    fn ended(&mut self, end: End) -> End {
        // Replies staged by a turn that did not end in `resume` (a line that panicked).
        self.hand_staged();
        match self.deliver_own() {
            None => match self.output.flush() {
                Ok(()) => end,
                Err(error) if matches!(end, End::Closed) => End::WriteFailed(error),
                Err(_) => end,
            },
            Some(failed) if matches!(end, End::Closed | End::IdleTimedOut) => failed,
            Some(_) => end,
        }
    }

    /// Hands the replies staged while others waited ([`Self::staged`]) to the deliverer,
    /// behind them.
    fn hand_staged(&mut self) {
        let Some(staged) = self.staged.take() else { return };
        if staged.is_empty() {
            return;
        }
        if let Some((deliverer, outbox)) = self.holds.outbox() {
            deliverer.hand(outbox, staged);
            self.handed = true;
        }
    }

    /// How many bytes of replies wait in the outbox (for a sync, or for their socket) and
    /// behind it, if a reply handed over still waits there ([`Self::reply_waits`]): one look
    /// at the outbox.
    fn waiting_bytes(&self) -> Option<usize> {
        if !self.handed {
            return None;
        }
        let outbox = self.holds.outbox()?.1.waiting()?;
        Some(outbox + self.staged.as_ref().map_or(0, Pending::unsent))
    }

    /// Whether this connection's last reply still waits in its outbox for its sync.
    fn reply_waits(&self) -> bool {
        self.handed && self.holds.outbox().is_some_and(|(_, outbox)| outbox.waits())
    }

    /// Whether `error` is a read of the event loop that would block (not a timeout).
    fn suspends(&self, error: &io::Error) -> bool {
        self.nonblocking && error.kind() == io::ErrorKind::WouldBlock
    }

    /// The connection's turn on the event loop ends: what it wrote goes to its socket (as
    /// much as the socket takes).
    fn suspend(&mut self, more: bool) -> Step {
        match self.output.flush() {
            Ok(()) => Step::Suspended { more },
            Err(error) => Step::Ended(End::WriteFailed(error)),
        }
    }

    /// The line read must run in a thread of its own: what was written before it goes to
    /// the socket first (the thread writes the rest of it, blocking).
    fn suspend_for_promotion(&mut self) -> Step {
        match self.output.flush() {
            Ok(()) => Step::Promote,
            Err(error) => Step::Ended(End::WriteFailed(error)),
        }
    }

    fn run(&mut self, pid: u32) -> Step {
        if !self.hello_done {
            match self.hello(pid) {
                Some(step) => return step,
                None => self.hello_done = true,
            }
        }
        let mut turn = 0;
        loop {
            let line = if let Some(line) = self.replay.take() {
                line
            } else {
                // A turn on the loop ends after its lines, or once its socket has not taken
                // a reply buffer's worth (its loop then moves it to a thread of its own).
                if self.nonblocking
                    && (turn == LINES_PER_TURN || self.backlog() > SERVER_REPLY_BUFFER_BYTES)
                {
                    return self.suspend(self.lines.line_waiting());
                }
                turn += 1;
                // The next read may block: whoever waits for the replies written so far must
                // get them first.
                if !self.lines.line_waiting()
                    && let Err(error) = self.output.flush()
                {
                    return Step::Ended(End::WriteFailed(error));
                }
                match self.lines.read_line(SERVER_LINE_BYTES_MAX) {
                    Ok(line) => line,
                    Err(error) if self.suspends(&error) => return self.suspend(false),
                    Err(error) if timed_out(&error) => {
                        return Step::Ended(self.finish(End::IdleTimedOut));
                    }
                    Err(error) => return Step::Ended(End::ReadFailed(error)),
                }
            };
            let waiting = if self.nonblocking { self.waiting_bytes() } else { None };
            if let Some(waiting) = waiting {
                // The client sent more before its last replies were written (it streams its
                // lines without waiting for them): the lines run, and their replies go
                // behind those that wait, up to a reply buffer's worth. Anything else waits
                // for them in a thread of its own.
                if matches!(line, Line::Complete) && waiting < SERVER_REPLY_BUFFER_BYTES {
                    self.staged.get_or_insert_with(Pending::default);
                } else {
                    self.replay = Some(line);
                    return self.suspend_for_promotion();
                }
            } else {
                // What was staged waited only for replies that are written now.
                if let Some(staged) = self.staged.take()
                    && let Err(error) = self.output.write_all(staged.rest())
                {
                    return Step::Ended(End::WriteFailed(error));
                }
                if let Some(end) = self.deliver_own() {
                    return Step::Ended(end);
                }
            }
            if matches!(line, Line::Complete)
                && !self.lines.line().iter().all(u8::is_ascii_whitespace)
            {
                self.holds.request_done();
            }
            let reply = match line {
                Line::End => return Step::Ended(self.finish(End::Closed)),
                Line::Partial(bytes) => {
                    return Step::Ended(self.finish(End::PartialLineDiscarded { bytes }));
                }
                Line::TooLong(bytes) => {
                    let reply = line_too_long(bytes, SERVER_LINE_BYTES_MAX);
                    return Step::Ended(
                        match self.acks.answer(self.store, reply, &mut self.output) {
                            Ok(_) => self.finish(End::LineTooLong),
                            Err(error) => End::WriteFailed(error),
                        },
                    );
                }
                Line::Refused(shortfall) => shortfall.reply(),
                Line::Complete if self.lines.line().iter().all(u8::is_ascii_whitespace) => {
                    self.lines.settle();
                    continue;
                }
                Line::Complete => match self.lines.charge(Parse::Plain) {
                    Err(shortfall) => shortfall.reply(),
                    Ok(()) => match self.delta() {
                        Delta::Answered(Ok(())) => {
                            self.lines.settle();
                            continue;
                        }
                        Delta::Answered(Err(error)) => {
                            return Step::Ended(End::WriteFailed(error));
                        }
                        Delta::Refused(reply) => reply,
                        Delta::General => match self.lines.charge(Parse::Tree) {
                            Err(shortfall) => shortfall.reply(),
                            Ok(()) => match self.handle_deferring() {
                                Handled::Deferred(None) => {
                                    self.lines.settle();
                                    continue;
                                }
                                Handled::Deferred(Some(end)) => return Step::Ended(end),
                                Handled::Now(Answer::Promote) => {
                                    self.replay = Some(Line::Complete);
                                    return self.suspend_for_promotion();
                                }
                                Handled::Now(Answer::Append(reply)) => reply,
                                Handled::Now(Answer::Read(reply)) => {
                                    let reply = self.after_others_deferred(reply, true);
                                    let answered = self.acks.answer_read(
                                        self.store,
                                        reply.into_object(),
                                        &mut reply_out(&mut self.staged, &mut self.output),
                                    );
                                    match self.answered(answered) {
                                        Some(end) => return Step::Ended(end),
                                        None => continue,
                                    }
                                }
                            },
                        },
                    },
                },
            };
            let answered = match self.staged.as_mut() {
                Some(staged) => {
                    let (answered, waits) = stage_answer(self.store, &mut self.acks, reply, staged);
                    if waits {
                        // Handed at once, as a written reply that waits for its sync is: what
                        // is staged never waits for a sync of its own.
                        self.hand_staged();
                    }
                    answered
                }
                None => {
                    let reply = self.after_others_deferred(reply, false);
                    self.acks.answer(self.store, reply, &mut self.output)
                }
            };
            if let Some(end) = self.answered(answered) {
                return Step::Ended(end);
            }
        }
    }

    /// Runs one general request ([`Self::handle`]). On a served store's connection its
    /// `Synced` appends do not wait for their sync: the written reply is handed to the
    /// server's deliverer, which writes it after the group commit that covers it
    /// ([`super::deliver`]), and this thread goes back to reading.
    fn handle_deferring(&mut self) -> Handled {
        if !self.holds.outbox().is_some_and(|(deliverer, _)| deliverer.is_alive()) {
            return Handled::Now(self.handle());
        }
        let scope = self.store.log().defer_syncs();
        let answer = self.handle();
        let Some(seq) = scope.and_then(DeferredSyncs::close) else { return Handled::Now(answer) };
        let reply = match answer {
            Answer::Append(reply @ Reply::Written { .. }) => reply,
            // Anything else waits for the sync here, as without a deliverer.
            other => return Handled::Now(self.after_sync(seq, other)),
        };
        // What was written before goes first.
        if let Err(error) = self.output.flush() {
            return Handled::Deferred(Some(End::WriteFailed(error)));
        }
        // On the event loop, a socket that has not taken all of it yet: the deliverer cannot
        // write after it, so the reply waits for its sync here.
        if self.backlog() > 0 {
            return Handled::Now(self.after_sync(seq, Answer::Append(reply)));
        }
        let id = reply.id();
        let mut bytes = Vec::new();
        let unanswered = self.acks.pending();
        match self.acks.answer(self.store, reply, &mut bytes) {
            Ok(None) => {
                if let Some((deliverer, outbox)) = self.holds.outbox() {
                    // Behind the replies staged since the last ones waited, if any.
                    let pending = match self.staged.as_mut() {
                        Some(staged) => {
                            staged.push_waiting(seq, id, unanswered, &bytes);
                            std::mem::take(staged)
                        }
                        None => Pending::new(seq, id, unanswered, bytes),
                    };
                    deliverer.hand(outbox, pending);
                    self.handed = true;
                    return Handled::Deferred(None);
                }
                // Not reached: the outbox was there above. Written after the sync, as
                // without a deliverer.
                let written = match self.store.log().sync_through(seq) {
                    Ok(()) => self.output.write_all(&bytes),
                    Err(error) => {
                        self.acks.reopen(unanswered);
                        let reply = Reply::from_error(&error, id);
                        return Handled::Now(Answer::Append(reply));
                    }
                };
                Handled::Deferred(written.err().map(End::WriteFailed))
            }
            // A covering sync failed: the store's error is written now, and ends the stream.
            Ok(Some(Fatal { message, .. })) => {
                if let Some(staged) = self.staged.as_mut() {
                    // Behind the replies that wait: the end hands them over.
                    staged.plain().extend_from_slice(&bytes);
                    return Handled::Deferred(Some(End::Fatal { message }));
                }
                let written = self.output.write_all(&bytes).and_then(|()| self.output.flush());
                Handled::Deferred(Some(match written {
                    Ok(()) => End::Fatal { message },
                    Err(error) => End::WriteFailed(error),
                }))
            }
            Err(error) => Handled::Deferred(Some(End::WriteFailed(error))),
        }
    }

    /// `answer` once the records its request deferred through `seq` are durable, or the
    /// store's error when that sync failed.
    fn after_sync(&self, seq: u64, answer: Answer) -> Answer {
        match self.store.log().sync_through(seq) {
            Ok(()) => answer,
            Err(error) => Answer::Append(Reply::from_error(&error, answer.id())),
        }
    }

    /// Before a reply that is not a written append's: whatever another connection's
    /// `Synced` append deferred is made durable first, so that no reply tells of a record
    /// that a crash could still take back (a read, a duplicate, a refusal naming a revision).
    fn after_others_deferred(&self, reply: Reply, read: bool) -> Reply {
        if matches!(reply, Reply::Written { .. }) && !read {
            return reply;
        }
        let log = self.store.log();
        let through = log.deferred_through();
        if through <= log.durable_seq().map_or(0, |seq| seq.0) {
            return reply;
        }
        match log.sync_through(through) {
            Ok(()) => reply,
            Err(error) => Reply::from_error(&error, reply.id()),
        }
    }

    /// Writes this connection's reply that waits for a group commit, if the deliverer has not
    /// written it whole: after the sync (this thread waits for it), or the store's error when
    /// the sync failed. Called before anything else is written, so replies stay in order.
    fn deliver_own(&mut self) -> Option<End> {
        if !self.handed {
            return None;
        }
        let pending = self.holds.outbox()?.1.take();
        self.handed = false;
        let pending = pending?;
        match self.store.log().sync_through(pending.seq()) {
            Ok(()) => self.output.write_all(pending.rest()).err().map(End::WriteFailed),
            Err(error) => {
                // The replies made durable before the failure are written; the first whose
                // sync failed was never sent: the error answers its lines instead, and ends
                // the stream (the lines after it are as after a crash).
                let durable = self.store.log().durable_seq().map_or(0, |seq| seq.0);
                let stopped = pending.stopped(durable);
                if let Err(error) = self.output.write_all(stopped.durable) {
                    return Some(End::WriteFailed(error));
                }
                let (id, unanswered) = stopped.failed.unwrap_or((None, 0));
                self.acks.reopen(unanswered);
                let reply = Reply::from_error(&error, id);
                let answered = self.acks.answer(self.store, reply, &mut self.output);
                match answered {
                    Ok(None) => None,
                    Ok(Some(Fatal { message, .. })) => Some(End::Fatal { message }),
                    Err(error) => Some(End::WriteFailed(error)),
                }
            }
        }
    }

    /// After a reply was answered under the connection's acknowledgements: the end of the
    /// connection when writing failed or the reply ended the stream. The line's tree and
    /// copies are gone with the request: its memory goes back.
    fn answered(&mut self, answered: io::Result<Option<Fatal>>) -> Option<End> {
        self.lines.settle();
        match answered {
            Ok(None) => None,
            Ok(Some(Fatal { message, .. })) => Some(self.finish(End::Fatal { message })),
            Err(error) => Some(End::WriteFailed(error)),
        }
    }

    /// Reads and answers the hello line; `Some` when the connection ends there (or, on the
    /// event loop, waits for the rest of it).
    fn hello(&mut self, pid: u32) -> Option<Step> {
        let mut blank = 0;
        let line = loop {
            match self.lines.read_line(SERVER_HELLO_BYTES_MAX) {
                Ok(Line::Complete) if self.lines.line().iter().all(u8::is_ascii_whitespace) => {
                    // Blank lines take turns on the loop as requests do.
                    blank += 1;
                    if self.nonblocking && blank == LINES_PER_TURN {
                        return Some(self.suspend(self.lines.line_waiting()));
                    }
                }
                Ok(line) => break line,
                Err(error) if self.suspends(&error) => return Some(self.suspend(false)),
                Err(error) if timed_out(&error) => return Some(Step::Ended(End::HelloTimedOut)),
                Err(error) => return Some(Step::Ended(End::ReadFailed(error))),
            }
        };
        let end = match line {
            Line::End => End::Closed,
            Line::Partial(bytes) => End::PartialLineDiscarded { bytes },
            Line::TooLong(bytes) => {
                let reply = line_too_long(bytes, SERVER_HELLO_BYTES_MAX);
                self.write_and_end(reply.object(), End::HelloRefused)
            }
            Line::Refused(shortfall) => {
                self.write_and_end(shortfall.reply().object(), End::HelloRefused)
            }
            Line::Complete => return self.answer_hello(pid).map(Step::Ended),
        };
        Some(Step::Ended(end))
    }

    /// Answers the hello line read; `Some` when the connection ends there.
    fn answer_hello(&mut self, pid: u32) -> Option<End> {
        let (reply, mode) = hello_reply(self.lines.line(), pid);
        self.acks = Acks::new(mode);
        let refused = reply.contains_key(reply::KEY_ERROR);
        if refused {
            return Some(self.write_and_end(&reply, End::HelloRefused));
        }
        if let Err(error) = write_line(&mut self.output, &reply) {
            return Some(End::WriteFailed(error));
        }
        self.holds.hello_done();
        None
    }

    /// A bare `assistant/delta` line, or a fragments line of several, through the fast path
    /// ([`delta_line`]): the same task checks, appends and reply as [`Self::handle`], without
    /// building JSON trees. The task handle of the last line is kept, so a stream of fragments
    /// looks its task up once.
    fn delta(&mut self) -> Delta {
        let (line_id, task_id, fragments) = if let Some(line) = delta_line::parse(self.lines.line())
        {
            (line.id, line.task, Fragments::One(line.text))
        } else if delta_line::names_texts(self.lines.line()) {
            // A fragments line's array costs more than its bytes: charged first.
            if let Err(shortfall) = self.lines.charge(Parse::Texts) {
                return Delta::Refused(shortfall.reply());
            }
            match delta_line::parse_texts(self.lines.line()) {
                Some(line) => (line.id, line.task, Fragments::Many(line.texts)),
                None => return Delta::General,
            }
        } else {
            return Delta::General;
        };
        let id = line_id.0.map(Value::from);
        // A handle whose task was handed over since (it is no longer held) is not used: the
        // store takes the task over again first, as for any new handle.
        let cached =
            self.last_task.as_ref().filter(|task| task.id().as_str() == task_id && task.is_held());
        // The cached handle's task was touched when it was cached (and `touched` only grows).
        if cached.is_none()
            && let Some(refused) = touch(&mut self.touched, &self.holds, &task_id, id.clone())
        {
            return Delta::Refused(refused);
        }
        let fresh;
        let task = match cached {
            Some(task) => task,
            None => match self.store.client_task(&task_id) {
                Ok(task) => {
                    fresh = task;
                    &fresh
                }
                Err(error) => return Delta::Refused(Reply::from_error(&error, id)),
            },
        };
        // The fragments of a line are appended in order; a refusal answers the line, and
        // the fragments before the refused one stay appended, as separate lines would.
        let appended = match &fragments {
            Fragments::One(text) => task.delta_revision(text),
            Fragments::Many(texts) => {
                // They arrived together: one reading of the clock stamps them all.
                let now = self.store.now_us();
                texts
                    .iter()
                    .try_fold((crate::Seq(0), 0), |_, text| task.delta_revision_at(&text.0, now))
            }
        };
        if cached.is_none() {
            self.last_task = Some(task.clone());
        }
        match appended {
            Ok((seq, revision)) => {
                // A fragment's written reply carries no warnings: under durable-only acks it
                // is skipped, and a later durable reply covers it. A fragments line is
                // answered as its last fragment would be.
                let written = if self.acks.skips_buffered() {
                    Ok(())
                } else {
                    let mut out = reply_out(&mut self.staged, &mut self.output);
                    delta_line::write_reply(&mut out, line_id, seq.0, &task_id, revision)
                };
                Delta::Answered(written)
            }
            Err(error) => Delta::Refused(Reply::from_error(&error, id)),
        }
    }

    /// The reply to one non-blank request line.
    fn handle(&mut self) -> Answer {
        let object = match request::parse_object(self.lines.line()) {
            Ok(object) => object,
            Err(refusal) => return Answer::Append(refusal.into_reply()),
        };
        // On the loop, an append waits for no sync and no replica: with no deliverer to hand
        // its `Synced` reply to, or event types that wait for a replica, it runs in a thread.
        let delivered = self.holds.outbox().is_some_and(|(deliverer, _)| deliverer.is_alive());
        if self.nonblocking
            && (!runs_on_the_loop(&object) || !delivered || self.store.replicates_by_type())
        {
            return Answer::Promote;
        }
        if !object.contains_key(KEY_TYPE) && object.contains_key(KEY_OP) {
            return match OpRequest::from_object(object) {
                Ok(OpRequest { id, op }) => {
                    // A batch and a sync answer with what they made durable; every other
                    // operation's written reply is a read's.
                    let appends = matches!(op, Op::Batch { .. } | Op::Sync);
                    match self.operation(id, op) {
                        reply @ Reply::Written { .. } if !appends => Answer::Read(reply),
                        reply => Answer::Append(reply),
                    }
                }
                Err(refusal) => Answer::Append(refusal.into_reply()),
            };
        }
        let request = match Request::from_object(object) {
            Ok(request) => request,
            Err(refusal) => return Answer::Append(refusal.into_reply()),
        };
        if request.body.operator().is_some()
            && let Some(refused) = self.refuse_unheld_authority(&request)
        {
            return Answer::Append(refused);
        }
        if let Some(refused) = self.touch(&request.task, request.id.clone()) {
            return Answer::Append(refused);
        }
        let scan = protocol::line_may_hold_credential(self.lines.line());
        Answer::Append(protocol::execute(self.store, request, scan))
    }

    /// A person's answer that is authority of the task's holder
    /// ([`operator::holder_authority`]: a confirmation, a cancel, a `once` or `run` grant)
    /// counts only in the holder epoch it is given in: when no other connection holds the task
    /// and the sharing process does not either, this connection would be its only holder and
    /// the answer would expire when it disconnects. It is refused instead, and nothing is
    /// written (`format-spec/events.md`, "Operator answers").
    fn refuse_unheld_authority(&self, request: &Request) -> Option<Reply> {
        let state = self.store.task_state(&request.task)?;
        let what = operator::holder_authority(&request.body, &state)?;
        let holders = self.holds.holders(&request.task)?;
        let others = holders.saturating_sub(usize::from(self.touched.contains(&request.task)));
        if others > 0 || self.store.held_locally(&request.task) {
            return None;
        }
        let error = Error::from(ErrorKind::InvalidEvent {
            event_type: request.body.type_name(),
            reason: format!(
                "no harness holds task {:?}: {what} is authority of the task's holder, and \
                 this connection would be its only holder, so the answer would expire when it \
                 disconnects (format-spec/harness-recovery.md, \"Holders\"); answer while \
                 the harness that holds the task is connected to this store or holds it itself",
                request.task
            ),
        });
        Some(Reply::from_error(&error, request.id.clone()))
    }

    /// Records that this connection touches `task`; a refusal once it touched too many.
    fn touch(&mut self, task: &str, id: Option<Value>) -> Option<Reply> {
        touch(&mut self.touched, &self.holds, task, id)
    }

    /// A request with `op` and no `type`: the operation's reply.
    fn operation(&mut self, id: Option<Value>, op: Op) -> Reply {
        match op {
            Op::Revision { task } => {
                let revision = self.store.task_state(&task).map_or(0, |state| state.revision);
                answer(id, &RevisionReply { task, revision })
            }
            Op::State { task } => {
                let state = match self.store.task_state(&task).map(|s| views::task_state_value(&s))
                {
                    None => Value::Null,
                    Some(Ok(value)) => value,
                    Some(Err(_)) => return refuse(id, "the task's state cannot be serialised"),
                };
                answer(id, &StateReply { task, state })
            }
            Op::History { task, from } => self.history(id, task, from),
            Op::Events { from_seq, task, limit } => {
                match pages::events_page(self.store, from_seq, task.as_deref(), limit) {
                    Ok(page) => answer(id, &page),
                    Err(error) => Reply::from_error(&error, id),
                }
            }
            Op::Follow { from_seq, task, limit, timeout_ms } => {
                let (store, holds) = (self.store, &self.holds);
                let timeout = timeout_ms.unwrap_or(SERVER_FOLLOW_TIMEOUT_MS_MAX);
                let timeout = std::time::Duration::from_millis(timeout);
                let stopping = || holds.stopping();
                let page = pages::follow(store, from_seq, timeout, &stopping, |from| {
                    pages::events_page(store, from, task.as_deref(), limit)
                });
                match page {
                    Ok(page) => answer(id, &page),
                    Err(error) => Reply::from_error(&error, id),
                }
            }
            Op::Tasks { after } => self.tasks(id, after.as_deref()),
            Op::Recover { dry_run } => self.recover(id, dry_run),
            // `Store::checkpoint` in the serving process: the reply of `checkpoint --json`.
            Op::Checkpoint => match self.store.checkpoint() {
                Ok(meta) => {
                    let path = meta.path.display().to_string();
                    answer(id, &CheckpointReply { path, covered_seq: meta.covered_seq.0 })
                }
                Err(error) => Reply::from_error(&error, id),
            },
            Op::Clients => {
                let (clients, clients_max) = self.holds.clients().unwrap_or((1, 1));
                answer(
                    id,
                    &ClientsReply { clients: clients as u64, clients_max: clients_max as u64 },
                )
            }
            Op::Sync => match self.store.flush(crate::Durability::Synced) {
                Ok(()) => {
                    let mut reply = with_id(id);
                    let synced = crate::Durability::Synced;
                    reply.insert(reply::KEY_DURABILITY.to_owned(), json!(synced.as_str()));
                    Reply::Written { reply, durability: synced }
                }
                Err(error) => Reply::from_error(&error, id),
            },
            Op::Purge { dry_run } => self.purge(id, dry_run),
            Op::Batch { task, events, expected_revision, durability } => {
                let options = RequestedDurability::options(durability, expected_revision);
                self.batch(id, &task, events, options)
            }
        }
    }

    /// [`Op::Tasks`]: one page of the ids of the tasks that have events, sorted,
    /// those after `after` (all when absent), at most `SERVER_EVENTS_PER_REPLY_MAX`, and the
    /// id to ask after next (`null` after the last page).
    fn tasks(&mut self, id: Option<Value>, after: Option<&str>) -> Reply {
        let ids = self.store.task_ids();
        let start = after.map_or(0, |after| ids.partition_point(|task| task.as_str() <= after));
        let page: Vec<String> = ids[start..]
            .iter()
            .take(SERVER_EVENTS_PER_REPLY_MAX)
            .map(|task| task.as_str().to_owned())
            .collect();
        let next = (start + page.len() < ids.len()).then(|| page.last().cloned()).flatten();
        answer(id, &TasksPage { tasks: page, next })
    }

    /// [`Op::Recover`]: [`Store::recover`] on the served store (every task no
    /// holder holds yet is taken over; tasks held are reported from their last repair and
    /// not touched), or with `dry_run` [`Store::plan_recovery`]; the report is that of
    /// `factlog recover --json`.
    fn recover(&mut self, id: Option<Value>, dry_run: bool) -> Reply {
        let report = if dry_run {
            self.store.plan_recovery()
        } else {
            match self.store.recover() {
                Ok(report) => report,
                Err(error) => return Reply::from_error(&error, id),
            }
        };
        match reply_object(id.clone(), &RecoverReply { report }) {
            Ok(reply) => Reply::Written { reply, durability: crate::Durability::Buffered },
            Err(_) => refuse(id, "the recovery report cannot be serialised"),
        }
    }

    /// [`Op::Purge`]: [`Store::purge`] on the served store (with `dry_run`,
    /// [`Store::plan_purge`]); the reply holds the keys of `factlog purge --json`.
    fn purge(&mut self, id: Option<Value>, dry_run: bool) -> Reply {
        let report = if dry_run { self.store.plan_purge() } else { self.store.purge() };
        match report.map(|report| reply_object(id.clone(), &report)) {
            Ok(Ok(reply)) => Reply::Written { reply, durability: crate::Durability::Buffered },
            Ok(Err(_)) => refuse(id, "the purge report cannot be serialised"),
            Err(error) => Reply::from_error(&error, id),
        }
    }

    /// [`Op::History`]: one page of the task's model-visible history (the
    /// entries of `history --json`) from entry `from`, and the index to ask from next
    /// (`null` after the last).
    fn history(&mut self, id: Option<Value>, task: String, from: u64) -> Reply {
        let from = usize::try_from(from).unwrap_or(usize::MAX);
        let entries = match self.store.history(&task) {
            Ok(entries) => entries,
            Err(error) => return Reply::from_error(&error, id),
        };
        let mut page = Vec::new();
        let mut bytes = 0;
        let mut next = None;
        for (index, entry) in entries.iter().enumerate().skip(from) {
            if bytes >= SERVER_REPLY_PAGE_BYTES {
                next = Some(index as u64);
                break;
            }
            let value = match serde_json::to_value(entry) {
                Ok(value) => value,
                Err(_) => return refuse(id, "a history entry cannot be serialised"),
            };
            bytes += value.to_string().len();
            page.push(value);
        }
        answer(id, &HistoryPage { task, entries: page, next })
    }

    /// [`Op::Batch`]: the events
    /// appended as one atomic batch ([`protocol::execute_batch`]).
    fn batch(
        &mut self,
        id: Option<Value>,
        task: &str,
        events: Vec<Map<String, Value>>,
        options: AppendOptions,
    ) -> Reply {
        let requests = match op::batch_requests(task, events) {
            Ok(requests) => requests,
            Err(refusal) => return Refusal { id, reason: refusal.reason }.into_reply(),
        };
        if let Some(refused) = self.touch(task, id.clone()) {
            return refused;
        }
        let reply = match self.store.client_task(task) {
            Ok(handle) => protocol::execute_batch(&handle, requests, options, true),
            Err(error) => return Reply::from_error(&error, id),
        };
        with_id_first(reply, id)
    }

    fn write_and_end(&mut self, reply: &Map<String, Value>, end: End) -> End {
        match write_line(&mut self.output, reply).and_then(|()| self.output.flush()) {
            Ok(()) => end,
            Err(error) => End::WriteFailed(error),
        }
    }

    fn finish(&mut self, end: End) -> End {
        match self.output.flush() {
            Ok(()) => end,
            Err(error) => End::WriteFailed(error),
        }
    }
}

/// Whether a read ended because the socket's read timeout passed.
fn timed_out(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// The reply to a hello line: the server's hello, or an error that ends the connection;
/// and the acknowledgements the hello asked for (`acks`, `format-spec/server.md`, "Hello").
fn hello_reply(line: &[u8], pid: u32) -> (Map<String, Value>, AckMode) {
    let object = request::parse_object(line).ok();
    let hello = object.as_ref().and_then(|o| o.get(KEY_HELLO)).and_then(Value::as_str);
    if hello != Some("factlog") {
        let reply = error_object(
            None,
            CODE_HELLO_REQUIRED,
            &format!(
                "the first line of a connection is a hello, {{\"hello\":\"factlog\",\"version\":\
                 {SERVER_PROTOCOL_VERSION}}}: send it before any request \
                 (format-spec/server.md)"
            ),
        );
        return (reply, AckMode::Every);
    }
    let version = object.as_ref().and_then(|o| o.get(KEY_VERSION)).and_then(Value::as_u64);
    if version != Some(u64::from(SERVER_PROTOCOL_VERSION)) {
        let mut reply = error_object(
            None,
            CODE_UNSUPPORTED_VERSION,
            &format!(
                "this server speaks server protocol version {SERVER_PROTOCOL_VERSION} only; the \
                 hello asked for {}: use a client of a matching release",
                version.map_or_else(|| "no valid version".to_owned(), |v| v.to_string())
            ),
        );
        reply.insert("supported".to_owned(), json!([SERVER_PROTOCOL_VERSION]));
        return (reply, AckMode::Every);
    }
    let asked = object.as_ref().and_then(|o| o.get(KEY_ACKS));
    let mode = match asked {
        None => AckMode::Every,
        Some(Value::String(name)) if AckMode::from_name(name).is_some() => {
            AckMode::from_name(name).unwrap_or_default()
        }
        Some(other) => {
            let reply = error_object(
                None,
                CODE_UNSUPPORTED_VERSION,
                &format!(
                    "this server's acknowledgements are \"every\" and \"durable-only\"; the \
                     hello asked for {}: use a client of a matching release",
                    serde_json::to_string(other).unwrap_or_default()
                ),
            );
            return (reply, AckMode::Every);
        }
    };
    let mut reply = Map::new();
    reply.insert(KEY_HELLO.to_owned(), json!("factlog"));
    reply.insert(KEY_VERSION.to_owned(), json!(SERVER_PROTOCOL_VERSION));
    reply.insert("protocol".to_owned(), json!(protocol::PROTOCOL_VERSION));
    reply.insert("pid".to_owned(), json!(pid));
    reply.insert(KEY_TEXTS.to_owned(), json!(true));
    if asked.is_some() {
        // Said back, so that a client knows the server took it (an older server would
        // answer every line, and say nothing).
        reply.insert(KEY_ACKS.to_owned(), json!(mode.as_str()));
    }
    (reply, mode)
}

/// The reply to a request that is not an append (a read, `recover`): its typed reply after
/// the `id`, as a [`Reply::Written`], the variant of every reply that is not an error; its
/// durability is not read by this door (nothing was appended for it).
fn answer<T: Serialize>(id: Option<Value>, reply: &T) -> Reply {
    match reply_object(id.clone(), reply) {
        Ok(reply) => Reply::Written { reply, durability: crate::Durability::Buffered },
        Err(_) => refuse(id, "the reply cannot be serialised"),
    }
}

fn refuse(id: Option<Value>, what: &str) -> Reply {
    Reply::from_refusal_message(id, what)
}

fn line_too_long(bytes: usize, limit: usize) -> Reply {
    let error = Error::from(ErrorKind::LimitExceeded {
        what: "server request line bytes (the connection is closed: reconnect)",
        value: bytes as u64,
        limit: limit as u64,
    });
    Reply::from_error(&error, None)
}

/// The reply with `id` as its first key (a batch reply is built without one).
fn with_id_first(reply: Reply, id: Option<Value>) -> Reply {
    let rebuild = |object: Map<String, Value>| {
        let mut first = with_id(id.clone());
        first.extend(object);
        first
    };
    match reply {
        Reply::Written { reply, durability } => {
            Reply::Written { reply: rebuild(reply), durability }
        }
        Reply::Duplicate { reply } => Reply::Duplicate { reply: rebuild(reply) },
        Reply::Refused { reply } => Reply::Refused { reply: rebuild(reply) },
        Reply::Fatal { reply, message, damaged } => {
            Reply::Fatal { reply: rebuild(reply), message, damaged }
        }
    }
}

/// Records in `touched` that a connection touches `task` (and tells `holds` the first
/// time); a refusal once it touched too many.
fn touch(
    touched: &mut HashSet<String>,
    holds: &dyn Holds,
    task: &str,
    id: Option<Value>,
) -> Option<Reply> {
    if touched.contains(task) {
        return None;
    }
    // Only a valid id is remembered: the sets of touched tasks stay within
    // `SERVER_TASKS_PER_CLIENT_MAX` ids of at most `TASK_ID_BYTES_MAX` bytes.
    if let Err(error) = crate::harness::ids::check_task_id(task) {
        return Some(Reply::from_error(&error, id));
    }
    if touched.len() >= SERVER_TASKS_PER_CLIENT_MAX {
        let error = Error::from(ErrorKind::LimitExceeded {
            what: "distinct tasks one client connection touches (reconnect to touch others)",
            value: touched.len() as u64 + 1,
            limit: SERVER_TASKS_PER_CLIENT_MAX as u64,
        });
        return Some(Reply::from_error(&error, id));
    }
    touched.insert(task.to_owned());
    holds.touch(task);
    None
}

/// Whether a request runs on the event loop: an append or a batch, whose `Synced` reply the
/// deliverer writes, unless it waits for a replica. Anything else may wait for a sync, for
/// events (`follow`) or for a long report, and runs in a thread of its own.
fn runs_on_the_loop(object: &Map<String, Value>) -> bool {
    let appends = object.contains_key(KEY_TYPE)
        || object.get(KEY_OP).and_then(Value::as_str) == Some(Op::BATCH_NAME);
    appends
        && object.get(request::KEY_DURABILITY).and_then(Value::as_str) != Some(reply::REPLICATED)
}

/// The reply to a request line of the general path, by what the request was.
enum Answer {
    /// An append (or a batch, a sync, a refusal): its written reply says what it made
    /// durable.
    Append(Reply),
    /// A read or a report: its reply says nothing of durability.
    Read(Reply),
    /// Not run: on the event loop, the request runs in a thread of its own.
    Promote,
}

/// What [`Connection::handle_deferring`] made of a request.
enum Handled {
    /// Its answer, to write now.
    Now(Answer),
    /// Its reply waits for a group commit in the connection's outbox; `Some` when the
    /// connection ends instead.
    Deferred(Option<End>),
}

impl Answer {
    /// The request's id, as its reply says it.
    fn id(&self) -> Option<Value> {
        match self {
            Answer::Append(reply) | Answer::Read(reply) => reply.id(),
            Answer::Promote => None,
        }
    }
}

/// The fragments of a fast-path line.
enum Fragments<'a> {
    /// A bare delta line's `text`.
    One(std::borrow::Cow<'a, str>),
    /// A fragments line's `texts`, in order.
    Many(Vec<delta_line::Text<'a>>),
}

/// What the fast path made of a line.
enum Delta {
    /// Not a bare delta: the general path answers it.
    General,
    /// Appended and answered (the result of writing the reply).
    Answered(io::Result<()>),
    /// Refused or failed: this reply answers it.
    Refused(Reply),
}

/// Where a line's reply goes: behind the replies that wait for a sync while some do
/// ([`Connection::staged`]), else to the connection's output.
fn reply_out<'o, W: Write>(
    staged: &'o mut Option<Pending>,
    output: &'o mut BufWriter<W>,
) -> &'o mut dyn Write {
    match staged {
        Some(staged) => staged.plain(),
        None => output,
    }
}

/// Answers `reply` behind the replies that wait for a sync ([`Connection::staged`]), without
/// the loop waiting for a sync: a reply that is not an append's written reply (a refusal, a
/// duplicate) may tell of a record whose sync a connection deferred, and a covering reply of
/// skipped lines (durable-only acknowledgements) vouches for every record appended so far; such
/// bytes wait behind the others for that sync, as a written reply waits for its own (where
/// nothing waits, the connection syncs first: `Connection::after_others_deferred`,
/// [`Acks::answer`]). Also says whether they wait for a sync (the caller hands them over then).
fn stage_answer(
    store: &Store,
    acks: &mut Acks,
    reply: Reply,
    staged: &mut Pending,
) -> (io::Result<Option<Fatal>>, bool) {
    let log = store.log();
    let written = matches!(reply, Reply::Written { .. });
    let (id, unanswered) = (reply.id(), acks.pending());
    let mut bytes = Vec::new();
    let (fatal, covered) = match acks.answer_unsynced(reply, &mut bytes) {
        Ok(answered) => answered,
        Err(error) => return (Err(error), false),
    };
    let others = if written { 0 } else { log.deferred_through() };
    let covering = if covered { log.last_seq().map_or(0, |seq| seq.0) } else { 0 };
    let through = others.max(covering);
    if through <= log.durable_seq().map_or(0, |seq| seq.0) {
        staged.plain().extend_from_slice(&bytes);
        return (Ok(fatal), false);
    }
    staged.push_waiting(through, id, unanswered, &bytes);
    (Ok(fatal), true)
}

#[cfg(test)]
mod tests {
    //! The stream rules through the seam: byte streams that are cut, stall or carry garbage.

    use super::*;
    use crate::StoreOptions;

    const HELLO: &[u8] = b"{\"hello\":\"factlog\",\"version\":1}\n";

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
        (dir, store)
    }

    fn replies(output: &[u8]) -> Vec<Value> {
        output
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("a JSON reply"))
            .collect()
    }

    /// Input that yields its bytes and then fails: a connection cut by a reset.
    struct Cut(io::Cursor<Vec<u8>>);

    impl Read for Cut {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(io::Error::from(io::ErrorKind::ConnectionReset)),
                n => Ok(n),
            }
        }
    }

    /// Output whose writes time out after `room` bytes: a client that stopped reading.
    struct Stalled {
        written: Vec<u8>,
        room: usize,
    }

    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.written.len() >= self.room {
                return Err(io::Error::from(io::ErrorKind::WouldBlock));
            }
            let n = buf.len().min(self.room - self.written.len());
            self.written.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_partial_last_line_is_discarded_not_handled() {
        let (_dir, store) = store();
        let mut input = HELLO.to_vec();
        input.extend_from_slice(b"{\"task\":\"t\",\"type\":\"user/message\",\"text\":\"a\"}\n");
        input.extend_from_slice(b"{\"task\":\"t\",\"type\":\"user/message\",\"text\":\"b\"}");
        let mut output = Vec::new();
        let (end, touched) = serve_stream(&store, &NoHolds, 1, &input[..], &mut output);
        assert!(matches!(end, End::PartialLineDiscarded { bytes } if bytes > 0), "{end:?}");
        assert_eq!(replies(&output).len(), 2, "the hello and one append");
        assert_eq!(store.task_state("t").expect("t").revision, 1);
        assert!(touched.contains("t"));
    }

    #[test]
    fn a_cut_connection_ends_after_the_whole_lines() {
        let (_dir, store) = store();
        let mut input = HELLO.to_vec();
        input.extend_from_slice(
            b"{\"id\":1,\"task\":\"t\",\"type\":\"user/message\",\"text\":\"a\"}\n{\"ta",
        );
        let mut output = Vec::new();
        let (end, _) = serve_stream(&store, &NoHolds, 1, Cut(io::Cursor::new(input)), &mut output);
        assert!(matches!(end, End::ReadFailed(_)), "{end:?}");
        assert_eq!(replies(&output)[1]["id"], 1);
        assert_eq!(store.task_state("t").expect("t").revision, 1);
    }

    #[test]
    fn a_stalled_client_ends_the_connection_with_a_write_failure() {
        let (_dir, store) = store();
        let mut input = HELLO.to_vec();
        for _ in 0..10_000 {
            input.extend_from_slice(b"{\"op\":\"revision\",\"task\":\"t\"}\n");
        }
        let mut output = Stalled { written: Vec::new(), room: 4096 };
        let (end, _) = serve_stream(&store, &NoHolds, 1, &input[..], &mut output);
        assert!(matches!(end, End::WriteFailed(_)), "{end:?}");
        assert!(output.written.len() <= 4096);
    }

    #[test]
    fn corrupt_bytes_get_an_error_reply_and_the_stream_goes_on() {
        let (_dir, store) = store();
        let mut input = HELLO.to_vec();
        input.extend_from_slice(b"\x00\xff{\"task\"\n");
        input.extend_from_slice(
            b"{\"id\":2,\"task\":\"t\",\"type\":\"user/message\",\"text\":\"a\"}\n",
        );
        let mut output = Vec::new();
        let (end, _) = serve_stream(&store, &NoHolds, 1, &input[..], &mut output);
        assert!(matches!(end, End::Closed), "{end:?}");
        let replies = replies(&output);
        assert_eq!(replies[1]["error"], "INVALID_EVENT");
        assert_eq!(replies[2]["revision"], 1);
    }

    #[test]
    fn a_hello_is_required_and_versioned() {
        let (_dir, store) = store();
        for (input, code) in [
            (&b"{\"task\":\"t\"}\n"[..], CODE_HELLO_REQUIRED),
            (&b"{\"hello\":\"factlog\",\"version\":2}\n"[..], CODE_UNSUPPORTED_VERSION),
        ] {
            let mut output = Vec::new();
            let (end, _) = serve_stream(&store, &NoHolds, 1, input, &mut output);
            assert!(matches!(end, End::HelloRefused), "{end:?}");
            assert_eq!(replies(&output)[0]["error"], code);
        }
    }
}
