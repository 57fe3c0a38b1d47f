//! Replies that wait for a group commit without a thread sleeping for each
//! (`format-spec/server.md`, "Group commit").
//!
//! A connection's `Synced` append returns as soon as its records are written
//! ([`crate::engine::writer::DeferredSyncs`]); the connection puts its encoded reply in its
//! [`Outbox`], hands the outbox to the server's [`Deliverer`] and goes back to reading its
//! socket. The deliverer's thread leads one `fdatasync` for every reply handed to it since
//! the last one, then writes each reply to its socket without blocking. A connection thread
//! is thus woken once per request (by its client's next line), not also by the sync.
//!
//! Rules:
//! - A reply is written only once `durable_seq` covers what its request deferred.
//! - A connection's replies stay in order: before it writes anything else, a connection
//!   takes its own reply back if the deliverer has not written it whole, waits for the sync
//!   itself and writes the rest ([`Outbox::take`]). The deliverer writes under the outbox's
//!   lock, so the two never interleave.
//! - A client that leaves a reply unread for the server's write timeout is disconnected, as
//!   a connection thread's own blocked write would be: its socket is shut down, and its thread
//!   ends the connection.
//! - When the sync fails, the connections waiting for it are woken (their input is shut
//!   down): each takes its reply back and answers the store's error instead.

use std::os::unix::net::UnixStream;
use std::sync::Arc;
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
    /// The reply's bytes (with the covering count it carries).
    pub(crate) bytes: Vec<u8>,
    /// How many of them the deliverer wrote.
    pub(crate) sent: usize,
    /// When the socket was first found full.
    stalled_since: Option<Instant>,
}

impl Pending {
    /// A reply of `bytes` to wait for `seq`, none of it written.
    pub fn new(seq: u64, id: Option<Value>, bytes: Vec<u8>) -> Pending {
        Pending { seq, id, bytes, sent: 0, stalled_since: None }
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
}

/// How one attempt to write a waiting reply went.
enum Sent {
    /// Written whole, or taken back by its connection.
    Done,
    /// The socket is full: try again later.
    Stalled,
}

impl Deliverer {
    /// A deliverer whose clients must read a reply within `write_timeout`.
    pub fn new(write_timeout: Duration) -> Deliverer {
        Deliverer { queue: Mutex::new(Queue::default()), wake: Condvar::new(), write_timeout }
    }

    /// Puts `pending` in `outbox` (which holds none) and hands it to the thread.
    pub fn hand(&self, outbox: &Arc<Outbox>, pending: Pending) {
        let previous = outbox.pending.lock().replace(pending);
        debug_assert!(previous.is_none(), "one reply waits per connection");
        self.queue.lock().handed.push(Arc::clone(outbox));
        self.wake.notify_one();
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
            let through = batch
                .iter()
                .filter_map(|outbox| outbox.pending.lock().as_ref().map(|pending| pending.seq))
                .max()
                .unwrap_or(0);
            if let Err(error) = store.log().sync_through(through) {
                log(&format!("a group commit failed: {error}"));
                // Each connection takes its reply back and answers the error.
                for outbox in batch.iter().chain(&stalled) {
                    let _ = outbox.stream.shutdown(std::net::Shutdown::Read);
                }
                stalled.clear();
                continue;
            }
            batch.append(&mut stalled);
            for outbox in batch {
                if let Sent::Stalled = self.send(&outbox) {
                    stalled.push(outbox);
                }
            }
        }
    }

    /// Writes what `outbox` holds without blocking, if its seq is durable.
    fn send(&self, outbox: &Outbox) -> Sent {
        let mut slot = outbox.pending.lock();
        let Some(pending) = slot.as_mut() else { return Sent::Done };
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
                    let _ = outbox.stream.shutdown(std::net::Shutdown::Both);
                    return Sent::Done;
                }
                // Gone: the connection's thread finds out as it reads or writes.
                Err(_) => return Sent::Done,
            }
        }
        *slot = None;
        Sent::Done
    }
}
