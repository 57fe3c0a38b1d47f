//! A store that is a client of a store another process serves (`format-spec/server.md`):
//! every call goes through the library's client (`factlog::client::Client`) over
//! `DIR/factlog.sock`, on a pool thread. The replies are the server's, which runs the same
//! protocol code on its `Store` as the embedded binding does; the client's own failures
//! become error replies through `ClientError::into_reply`, as in the Python binding.
//!
//! Deltas never wait for the connection on the JavaScript thread. A delta is pipelined anyway
//! (sent with the next request, its refusal reported by a later call): when another call holds
//! the connection (a pool thread waiting for a synced reply, say), the delta is queued in
//! [`Pending`], a buffer of its own under a lock held only to copy bytes in or out, and
//! whoever takes the connection next sends the queued deltas first, in order, before anything
//! else. The queue is bounded ([`PENDING_BYTES_MAX`]): past it a delta waits for the
//! connection, the back-pressure of a server that does not keep up.

use std::path::Path;
use std::time::Duration;

use factlog::client::{Client, ClientError};
use factlog::protocol::request::KEY_ID;
use parking_lot::{Mutex, MutexGuard};
use serde_json::{Map, Value};

use crate::jobs::{self, Outcome};

/// The most bytes of deltas queued while the connection is busy (1 MiB): past it a delta
/// waits for the connection.
const PENDING_BYTES_MAX: usize = 1 << 20;

/// The connection of a client-backed store, shared by its tasks; `None` once closed.
pub struct Remote {
    client: Mutex<Option<Client>>,
    pending: Mutex<Pending>,
    server_pid: u64,
    /// The read timeout the connection was opened with, for the connections of tails.
    timeout: Option<Duration>,
}

/// Deltas queued while the connection was busy: `(task, text)` pairs, each as its two lengths
/// (`u32`, little-endian) and bytes, in the order they were made. Its buffer is reused.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
}

impl Pending {
    fn push(&mut self, task: &str, text: &str) {
        for part in [task, text] {
            let length = u32::try_from(part.len()).unwrap_or(u32::MAX);
            self.bytes.extend_from_slice(&length.to_le_bytes());
            self.bytes.extend_from_slice(part.as_bytes());
        }
    }
}

/// The next `(task, text)` of a queue's bytes, and the rest.
fn next_pair(bytes: &[u8]) -> Option<(&str, &str, &[u8])> {
    let (task, rest) = next_part(bytes)?;
    let (text, rest) = next_part(rest)?;
    Some((task, text, rest))
}

fn next_part(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let (length, rest) = bytes.split_first_chunk::<4>()?;
    let length = usize::try_from(u32::from_le_bytes(*length)).ok()?;
    let (part, rest) = rest.split_at_checked(length)?;
    Some((std::str::from_utf8(part).ok()?, rest))
}

impl Remote {
    /// Connects to the store served from `dir`; with `timeout`, no read of a reply (the
    /// hello's included) waits longer (`Client::set_read_timeout`).
    pub fn connect(dir: &Path, timeout: Option<Duration>) -> Result<Remote, ClientError> {
        let client = Client::connect_timeout(dir, timeout)?;
        Ok(Remote {
            server_pid: client.server_pid(),
            client: Mutex::new(Some(client)),
            pending: Mutex::new(Pending::default()),
            timeout,
        })
    }

    /// The serving process's id, from its hello.
    pub fn server_pid(&self) -> u64 {
        self.server_pid
    }

    /// The timeout this connection was opened with.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Sends the queued deltas and the fragments still buffered, reads their replies
    /// (`Client::flush`), then ends the connection; later calls get the closed error.
    pub fn close(&self) -> Outcome<()> {
        let mut guard = self.client.lock();
        let Some(client) = guard.as_mut() else { return Ok(()) };
        let sent = self.send_pending(client);
        let mut client = guard.take().ok_or_else(jobs::closed)?;
        sent.and_then(|()| client.flush().map_err(|e| e.into_reply(None, false)))
    }

    /// The connection, with the queued deltas sent first.
    fn connection(&self) -> Outcome<MutexGuard<'_, Option<Client>>> {
        let mut guard = self.client.lock();
        let client = guard.as_mut().ok_or_else(jobs::closed)?;
        self.send_pending(client)?;
        Ok(guard)
    }

    /// Hands the queued deltas to the client (pipelined: buffered, sent with what comes next).
    fn send_pending(&self, client: &mut Client) -> Outcome<()> {
        let mut queued = std::mem::take(&mut self.pending.lock().bytes);
        if queued.is_empty() {
            return Ok(());
        }
        // Every queued delta passed `Client::check_delta`: a failure here is the connection's
        // (a refusal read back, or the server gone), and the first one is reported once every
        // delta was handed over.
        let mut rest = queued.as_slice();
        let mut sent = Ok(());
        while let Some((task, text, after)) = next_pair(rest) {
            if let Err(error) = client.delta(task, text)
                && sent.is_ok()
            {
                sent = Err(error.into_reply(Some(task), false));
            }
            rest = after;
        }
        // The buffer goes back for reuse, unless deltas were queued meanwhile.
        queued.clear();
        let mut pending = self.pending.lock();
        if pending.bytes.is_empty() {
            pending.bytes = queued;
        }
        sent
    }

    /// Appends one streamed fragment, pipelined, without waiting for the connection while
    /// another call holds it (it is queued then, up to [`PENDING_BYTES_MAX`]).
    pub fn delta(&self, task: &str, text: &str) -> Outcome<()> {
        if let Some(mut guard) = self.client.try_lock() {
            let client = guard.as_mut().ok_or_else(jobs::closed)?;
            self.send_pending(client)?;
            return client.delta(task, text).map_err(|e| e.into_reply(Some(task), false));
        }
        // Checked now, as the client checks it: the refusal of a queued delta would come to a
        // later call.
        Client::check_delta(task, text).map_err(|e| e.into_reply(Some(task), false))?;
        {
            let mut pending = self.pending.lock();
            if pending.bytes.len() + task.len() + text.len() + 8 <= PENDING_BYTES_MAX {
                pending.push(task, text);
                return Ok(());
            }
        }
        let mut guard = self.connection()?;
        let client = guard.as_mut().ok_or_else(jobs::closed)?;
        client.delta(task, text).map_err(|e| e.into_reply(Some(task), false))
    }

    /// Runs `call` on the client, after the queued deltas; a failure as the error reply of its
    /// code (`task` names the task of an append for a stale revision's message).
    pub fn call<T>(
        &self,
        task: Option<&str>,
        call: impl FnOnce(&mut Client) -> Result<T, ClientError>,
    ) -> Outcome<T> {
        let mut guard = self.connection()?;
        let client = guard.as_mut().ok_or_else(jobs::closed)?;
        call(client).map_err(|error| error.into_reply(task, false))
    }

    /// Sends one request object and returns the reply object (the `id` the client adds is
    /// removed unless the caller gave one), or the error reply.
    pub fn request(
        &self,
        task: Option<&str>,
        object: Map<String, Value>,
    ) -> Outcome<Map<String, Value>> {
        let own_id = object.contains_key(KEY_ID);
        let mut guard = self.connection()?;
        let client = guard.as_mut().ok_or_else(jobs::closed)?;
        match client.request(object) {
            Ok(mut reply) => {
                if !own_id {
                    reply.shift_remove(KEY_ID);
                }
                Ok(reply)
            }
            Err(error) => Err(error.into_reply(task, own_id)),
        }
    }
}
