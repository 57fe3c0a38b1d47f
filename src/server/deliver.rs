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
//! - A connection's replies stay in order: before it writes anything else, a connection
//!   takes its own reply back if the deliverer has not written it whole, waits for the sync
//!   itself and writes the rest ([`Outbox::take`]). The deliverer writes under the outbox's
//!   lock, so the two never interleave.
//! - A client that leaves a reply unread for the server's write timeout is disconnected, as
//!   a connection's own blocked write would be: its socket is shut down, and its connection
//!   ends.
//! - When the sync fails, the connections waiting for it are woken (their input is shut
//!   down): each takes its reply back and answers the store's error instead.

use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use serde_json::Value;

use crate::Store;

/// How long the deliverer waits before it tries a stalled socket again.
const STALLED_RETRY: Duration = Duration::from_millis(2);

/// A reply written once its request's deferred records are durable.
#[derive(Debug)]
pub struct Pending {
    /// The seq that must be durable first.
    pub(crate) seq: u64,
    /// The request's id, for the error reply when the sync fails.
    pub(crate) id: Option<Value>,
    /// The lines its connection had left unanswered before it (durable-only
    /// acknowledgements), which the error reply covers when the sync fails.
    pub(crate) unanswered: u64,
    /// The reply's bytes (with the covering count it carries).
    pub(crate) bytes: Vec<u8>,
    /// How many of them the deliverer wrote.
    pub(crate) sent: usize,
    /// When the socket was first found full.
    stalled_since: Option<Instant>,
}

impl Pending {
    /// A reply of `bytes` to wait for `seq`, none of it written; `unanswered` lines came
    /// before it.
    pub fn new(seq: u64, id: Option<Value>, unanswered: u64, bytes: Vec<u8>) -> Pending {
        Pending { seq, id, unanswered, bytes, sent: 0, stalled_since: None }
    }

    /// The bytes not written yet.
    pub fn rest(&self) -> &[u8] {
        &self.bytes[self.sent..]
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

    /// Puts `pending` in `outbox` (which holds none) and hands it to the thread.
    pub fn hand(&self, outbox: &Arc<Outbox>, pending: Pending) {
        let previous = outbox.pending.lock().replace(pending);
        debug_assert!(previous.is_none(), "one reply waits per connection");
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
            let through = batch
                .iter()
                .filter_map(|outbox| outbox.pending.lock().as_ref().map(|pending| pending.seq))
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

    /// Writes what `outbox` holds without blocking, if its seq is within `durable`.
    fn send(&self, outbox: &Outbox, durable: u64) -> Sent {
        let mut slot = outbox.pending.lock();
        let Some(pending) = slot.as_mut() else { return Sent::Done };
        if pending.seq > durable {
            return Sent::Stalled;
        }
        let flags = rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT;
        while pending.sent < pending.bytes.len() {
            match rustix::net::send(&outbox.stream, pending.rest(), flags) {
                Ok(written) => pending.sent += written,
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
        *slot = None;
        Sent::Done
    }
}
