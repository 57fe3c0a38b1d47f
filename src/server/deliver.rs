//! Replies that wait for a group commit without a thread sleeping for each
//! (`format-spec/server.md`, "Group commit").
//!
//! A connection's `Synced` append returns as soon as its records are written
//! ([`crate::engine::writer::DeferredSyncs`]); the connection puts its encoded reply in its
//! [`Outbox`], hands the outbox to the server's [`Deliverer`] and goes on with its next lines
//! (on its event loop, or in its thread). The deliverer's thread leads one `fdatasync` for
//! every reply handed to it since the last one, then writes each reply to its socket without
//! blocking. No thread sleeps through a sync for a connection.
//!
//! Rules:
//! - A reply is written only once `durable_seq` covers what its request deferred.
//! - A connection's replies stay in order. The lines a connection of the loop runs while its
//!   replies wait (a client that streams its lines) add their replies behind them
//!   ([`Pending`]); the deliverer writes an outbox's replies in order, each once it and those
//!   before it may be. A connection that writes itself takes its waiting replies back first
//!   ([`Outbox::take`]), waits for their sync and writes them. The deliverer writes under the
//!   outbox's lock, so the two never interleave.
//! - A client that leaves a reply unread for the server's write timeout is disconnected, as
//!   a connection's own blocked write would be: its socket is shut down, and its connection
//!   ends.
//! - When the sync fails, the connections waiting for it are woken (their input is shut
//!   down): each takes its replies back, writes those made durable before and answers the
//!   store's error for the first that is not.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use serde_json::Value;

use crate::Store;

/// How long the deliverer waits before it tries a stalled socket again.
const STALLED_RETRY: Duration = Duration::from_millis(2);

/// A connection's replies not written yet, in order: some wait for a sync, the others only
/// for those before them. A connection whose next lines come while its replies wait (a client
/// that streams its lines without waiting, as `factlog emit` over a served store does) adds
/// their replies behind them instead of waiting for the sync.
#[derive(Debug, Default)]
pub struct Pending {
    /// The replies' bytes, in order (each with the covering count it carries).
    bytes: Vec<u8>,
    /// How many of them the deliverer wrote.
    sent: usize,
    /// The replies that wait for a sync, in order; those whose sync came are dropped as the
    /// deliverer passes them.
    waiting: VecDeque<Waiting>,
    /// When the socket was last found full, since which nothing could be written.
    stalled_since: Option<Instant>,
}

/// One reply of a [`Pending`] that waits for a sync.
#[derive(Debug)]
struct Waiting {
    /// Where its bytes start: nothing from here on is written before its sync.
    start: usize,
    /// The seq that must be durable first.
    seq: u64,
    /// The request's id, for the error reply when the sync fails.
    id: Option<Value>,
    /// The lines its connection had left unanswered before it (durable-only
    /// acknowledgements), which the error reply covers when the sync fails.
    unanswered: u64,
}

/// Where a [`Pending`]'s writable bytes stop when a sync failed, and the reply there.
#[derive(Debug)]
pub struct Stopped<'a> {
    /// The bytes that may still be written: those before the first reply whose sync failed.
    pub durable: &'a [u8],
    /// That reply's request id and the lines its error reply covers besides its own; `None`
    /// when every reply was durable.
    pub failed: Option<(Option<Value>, u64)>,
}

impl Pending {
    /// A reply of `bytes` to wait for `seq`, none of it written; `unanswered` lines came
    /// before it.
    pub fn new(seq: u64, id: Option<Value>, unanswered: u64, bytes: Vec<u8>) -> Pending {
        let waiting = VecDeque::from([Waiting { start: 0, seq, id, unanswered }]);
        Pending { bytes, waiting, ..Pending::default() }
    }

    /// Adds a reply to wait for `seq` behind the others.
    pub fn push_waiting(&mut self, seq: u64, id: Option<Value>, unanswered: u64, bytes: &[u8]) {
        self.waiting.push_back(Waiting { start: self.bytes.len(), seq, id, unanswered });
        self.bytes.extend_from_slice(bytes);
    }

    /// The bytes of replies that wait for no sync of their own (only for those before them):
    /// write them here, behind the others.
    pub fn plain(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Whether it holds nothing to write.
    pub fn is_empty(&self) -> bool {
        self.sent == self.bytes.len()
    }

    /// How many bytes are not written yet.
    pub fn unsent(&self) -> usize {
        self.bytes.len() - self.sent
    }

    /// The highest seq one of its replies waits for (0: none).
    pub fn seq(&self) -> u64 {
        self.waiting.iter().map(|waiting| waiting.seq).max().unwrap_or(0)
    }

    /// The bytes not written yet, all of them: for a connection that made `seq()` durable.
    pub fn rest(&self) -> &[u8] {
        &self.bytes[self.sent..]
    }

    /// What may be written once `durable` is the durable seq, after a sync failed.
    pub fn stopped(&self, durable: u64) -> Stopped<'_> {
        match self.waiting.iter().find(|waiting| waiting.seq > durable) {
            Some(waiting) => Stopped {
                durable: &self.bytes[self.sent..waiting.start.max(self.sent)],
                failed: Some((waiting.id.clone(), waiting.unanswered)),
            },
            None => Stopped { durable: self.rest(), failed: None },
        }
    }

    /// Where the bytes that may be written now end, `durable` being the durable seq: the
    /// replies whose sync came are forgotten.
    fn writable(&mut self, durable: u64) -> usize {
        while self.waiting.front().is_some_and(|waiting| waiting.seq <= durable) {
            self.waiting.pop_front();
        }
        self.waiting.front().map_or(self.bytes.len(), |waiting| waiting.start)
    }

    /// Adds `more` behind what it holds, dropping the bytes already written first.
    fn append(&mut self, more: Pending) {
        if self.sent > 0 {
            self.bytes.drain(..self.sent);
            for waiting in &mut self.waiting {
                waiting.start = waiting.start.saturating_sub(self.sent);
            }
            self.sent = 0;
        }
        let base = self.bytes.len();
        self.bytes.extend_from_slice(&more.bytes[more.sent..]);
        self.waiting.extend(more.waiting.into_iter().map(|waiting| Waiting {
            start: base + waiting.start.saturating_sub(more.sent),
            ..waiting
        }));
    }
}

/// One connection's reply waiting for a sync, and its socket.
#[derive(Debug)]
pub struct Outbox {
    stream: UnixStream,
    pending: Mutex<Option<Pending>>,
}

impl Outbox {
    /// The outbox of the connection on `stream` (a handle of its own on the socket).
    pub fn new(stream: UnixStream) -> Outbox {
        Outbox { stream, pending: Mutex::new(None) }
    }

    /// Shuts the connection's socket down (`how`): its thread's blocked read returns.
    pub fn shutdown(&self, how: std::net::Shutdown) {
        let _ = self.stream.shutdown(how);
    }

    /// Whether a reply waits in the outbox (its sync has not come, or its socket has not taken
    /// it whole yet).
    pub fn waits(&self) -> bool {
        self.pending.lock().is_some()
    }

    /// How many bytes of replies wait in the outbox, if any reply does ([`Outbox::waits`]).
    pub fn waiting(&self) -> Option<usize> {
        self.pending.lock().as_ref().map(Pending::unsent)
    }

    /// Takes the connection's waiting reply back (what the deliverer has not written of
    /// it); `None` when there is none.
    pub fn take(&self) -> Option<Pending> {
        self.pending.lock().take()
    }
}

/// What the deliverer's thread works on.
#[derive(Debug, Default)]
struct Queue {
    /// Outboxes handed over since the thread last looked.
    handed: Vec<Arc<Outbox>>,
    stopping: bool,
}

/// The thread of a served store that leads the group commits of its connections' `Synced`
/// appends and writes their replies.
#[derive(Debug)]
pub struct Deliverer {
    queue: Mutex<Queue>,
    wake: Condvar,
    write_timeout: Duration,
    /// Cleared if the thread died (a panic): connections then sync for themselves.
    alive: AtomicBool,
}

/// How one attempt to write a waiting reply went.
enum Sent {
    /// Written whole, taken back by its connection, or its connection shut down.
    Done,
    /// The socket is full, or the reply waits for a later sync: try again later.
    Stalled,
}

impl Deliverer {
    /// A deliverer whose clients must read a reply within `write_timeout`.
    pub fn new(write_timeout: Duration) -> Deliverer {
        Deliverer {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            write_timeout,
            alive: AtomicBool::new(true),
        }
    }

    /// Puts `pending` in `outbox`, behind the replies that wait there, and hands it to the
    /// thread.
    pub fn hand(&self, outbox: &Arc<Outbox>, pending: Pending) {
        {
            let mut slot = outbox.pending.lock();
            match slot.as_mut() {
                Some(waiting) => waiting.append(pending),
                None => *slot = Some(pending),
            }
        }
        self.queue.lock().handed.push(Arc::clone(outbox));
        self.wake.notify_one();
        if !self.is_alive() {
            // The thread is gone: the connection writes the reply itself.
            outbox.shutdown(std::net::Shutdown::Read);
        }
    }

    /// Whether the thread runs: a connection hands it replies only then.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The thread died: no reply is handed to it from now on (the caller then wakes every
    /// connection, whose thread writes its own waiting reply).
    pub fn died(&self) {
        self.alive.store(false, Ordering::Release);
    }

    /// Ends [`Deliverer::run`] once it has nothing more to write (call after every connection
    /// ended: each writes its own waiting reply as it ends).
    pub fn stop(&self) {
        self.queue.lock().stopping = true;
        self.wake.notify_one();
    }

    /// The thread's loop: waits for outboxes, syncs once for all of them, writes their
    /// replies; `log` says what went wrong.
    pub fn run(&self, store: &Store, log: fn(&str)) {
        let mut stalled: Vec<Arc<Outbox>> = Vec::new();
        loop {
            let mut batch = {
                let mut queue = self.queue.lock();
                while queue.handed.is_empty() && !queue.stopping {
                    if stalled.is_empty() {
                        self.wake.wait(&mut queue);
                    } else if self.wake.wait_for(&mut queue, STALLED_RETRY).timed_out() {
                        break;
                    }
                }
                if queue.stopping && queue.handed.is_empty() {
                    return;
                }
                std::mem::take(&mut queue.handed)
            };
            batch.append(&mut stalled);
            // A connection that streams hands its outbox again with every reply that waits for
            // a sync: one visit a round is enough, in the order they were handed.
            let mut seen = std::collections::HashSet::with_capacity(batch.len());
            batch.retain(|outbox| seen.insert(Arc::as_ptr(outbox)));
            let through = batch
                .iter()
                .filter_map(|outbox| outbox.pending.lock().as_ref().map(Pending::seq))
                .max()
                .unwrap_or(0);
            if let Err(error) = store.log().sync_through(through) {
                log(&format!("a group commit failed: {error}"));
                // Each connection takes its reply back and answers the error.
                for outbox in &batch {
                    outbox.shutdown(std::net::Shutdown::Read);
                }
                continue;
            }
            for outbox in batch {
                // Its connection may have taken its reply back and handed a later one
                // since `through` was read: that one waits for the next round.
                let durable = store.log().durable_seq().map_or(0, |seq| seq.0);
                if let Sent::Stalled = self.send(&outbox, durable) {
                    stalled.push(outbox);
                }
            }
        }
    }

    /// Writes what `outbox` holds without blocking, as far as `durable` allows.
    fn send(&self, outbox: &Outbox, durable: u64) -> Sent {
        let mut slot = outbox.pending.lock();
        let Some(pending) = slot.as_mut() else { return Sent::Done };
        let end = pending.writable(durable);
        let flags = rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT;
        while pending.sent < end {
            match rustix::net::send(&outbox.stream, &pending.bytes[pending.sent..end], flags) {
                Ok(written) => {
                    pending.sent += written;
                    pending.stalled_since = None;
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    let since = *pending.stalled_since.get_or_insert_with(Instant::now);
                    if since.elapsed() < self.write_timeout {
                        return Sent::Stalled;
                    }
                    // A client that does not read: its connection ends (its thread's write
                    // of the rest fails).
                    outbox.shutdown(std::net::Shutdown::Both);
                    return Sent::Done;
                }
                // Gone: its connection ends (its thread's write of the rest fails).
                Err(_) => {
                    outbox.shutdown(std::net::Shutdown::Both);
                    return Sent::Done;
                }
            }
        }
        if pending.is_empty() {
            *slot = None;
            return Sent::Done;
        }
        // The rest waits for a later sync.
        Sent::Stalled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies `a` (waits for seq 5), `b` (no sync of its own), `c` (waits for seq 9), `d`.
    fn four() -> Pending {
        let mut pending = Pending::new(5, Some(Value::from(1)), 2, b"a\n".to_vec());
        pending.plain().extend_from_slice(b"b\n");
        pending.push_waiting(9, Some(Value::from(3)), 0, b"c\n");
        pending.plain().extend_from_slice(b"d\n");
        pending
    }

    #[test]
    fn replies_are_writable_up_to_the_first_that_waits_for_a_later_sync() {
        let mut pending = four();
        assert_eq!(pending.seq(), 9);
        assert_eq!(pending.writable(4), 0, "nothing before seq 5 is durable");
        assert_eq!(pending.writable(5), 4, "a and b, not c");
        assert_eq!(pending.writable(8), 4);
        assert_eq!(pending.writable(9), 8, "everything");
        assert_eq!(pending.seq(), 0, "no reply waits any more");
    }

    #[test]
    fn more_replies_go_behind_those_partly_written() {
        let mut pending = four();
        pending.writable(5);
        pending.sent = 3;
        let mut more = Pending::new(12, Some(Value::from(4)), 0, b"e\n".to_vec());
        more.plain().extend_from_slice(b"f\n");
        pending.append(more);
        assert_eq!(pending.rest(), b"\nc\nd\ne\nf\n", "what was written is dropped");
        assert_eq!(pending.writable(9), 5, "c and d, up to e");
        assert_eq!(pending.writable(12), pending.bytes.len());
        assert_eq!(pending.unsent(), 9);
    }

    #[test]
    fn after_a_failed_sync_the_durable_replies_are_written_and_the_first_other_fails() {
        let pending = four();
        let stopped = pending.stopped(6);
        assert_eq!(stopped.durable, b"a\nb\n");
        assert_eq!(stopped.failed, Some((Some(Value::from(3)), 0)));
        let stopped = pending.stopped(0);
        assert_eq!(stopped.durable, b"");
        assert_eq!(stopped.failed, Some((Some(Value::from(1)), 2)));
        let stopped = pending.stopped(9);
        assert_eq!(stopped.durable, b"a\nb\nc\nd\n");
        assert_eq!(stopped.failed, None);
    }
}
