//! A Python `Store` that is a client of a store served by another process
//! (`format-spec/server.md`): every call goes through the library's client
//! (`factlog::client::Client`) over `DIR/factlog.sock`, detached from the interpreter while it
//! waits for the socket.
//!
//! The replies are the server's, which runs the same protocol code on its `Store` as the
//! embedded binding does: a reply dict or an error of the same class with the same fields.
//! Client-side failures have classes of their own (`factlog/errors.py`): `Disconnected` (the
//! server went away; the request in flight may or may not have been written), `NotServed`
//! (nothing answers at the socket) and `BadReply`.

use std::path::Path;

use factlog::client::{Client, ClientError};
use factlog::harness::TaskState;
use factlog::protocol::request::KEY_ID;
use factlog::protocol::views;
use parking_lot::Mutex;
use pyo3::prelude::*;
use serde_json::{Map, Value};

use crate::errors;

/// The connection of a client-backed store, shared by its tasks and iterators; `None` once
/// the store is closed.
pub struct Remote {
    client: Mutex<Option<Client>>,
    server_pid: u64,
}

/// Why a call on a [`Remote`] failed.
pub enum Failed {
    /// The store was closed.
    Closed,
    /// The client's error.
    Client(ClientError),
}

impl From<ClientError> for Failed {
    fn from(error: ClientError) -> Failed {
        Failed::Client(error)
    }
}

impl Remote {
    /// Connects to the store served from `dir` (detached); with `timeout`, no read of a
    /// reply (the hello's included) waits longer (`Client::set_read_timeout`).
    pub fn connect(
        py: Python<'_>,
        dir: &Path,
        timeout: Option<std::time::Duration>,
    ) -> Result<Remote, ClientError> {
        let client = py.detach(|| Client::connect_timeout(dir, timeout))?;
        Ok(Remote { server_pid: client.server_pid(), client: Mutex::new(Some(client)) })
    }

    /// The serving process's id, from its hello.
    pub fn server_pid(&self) -> u64 {
        self.server_pid
    }

    /// Sends the fragments still buffered and reads their replies (`Client::flush`), then
    /// ends the connection; later calls raise the closed error.
    pub fn close(&self) -> Result<(), ClientError> {
        match self.client.lock().take() {
            Some(mut client) => client.flush(),
            None => Ok(()),
        }
    }

    /// Runs `call` on the client, detached from the interpreter (the lock is taken detached
    /// too: another thread's call may hold it while it waits for the socket).
    pub fn call<T: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&mut Client) -> Result<T, ClientError> + Send,
    ) -> Result<T, Failed> {
        py.detach(|| {
            let mut guard = self.client.lock();
            let client = guard.as_mut().ok_or(Failed::Closed)?;
            call(client).map_err(Failed::Client)
        })
    }

    /// Sends one request object (the `id` the client adds is removed from the reply unless
    /// the caller gave one) and returns the reply object.
    pub fn request(
        &self,
        py: Python<'_>,
        object: Map<String, Value>,
    ) -> Result<Map<String, Value>, Failed> {
        let own_id = object.contains_key(KEY_ID);
        let mut reply = self.call(py, |client| client.request(object))?;
        if !own_id {
            reply.shift_remove(KEY_ID);
        }
        Ok(reply)
    }
}

/// Appends one streamed fragment through the client, pipelined (`Client::delta`): buffered
/// and sent with the next request, without waiting for its reply. The one place a delta is
/// sent.
pub fn client_delta(client: &mut Client, task: &str, text: &str) -> Result<(), ClientError> {
    client.delta(task, text)
}

/// The state dict of a task the server has no event of: what the embedded `Task.state`
/// gives for it.
pub fn empty_state() -> Result<Value, serde_json::Error> {
    views::task_state_value(&TaskState::default())
}

/// The exception of a failed call. `task` names the task of an append, for the message of a
/// stale revision (the same message as the embedded store's); `own_id` keeps the `id` of a
/// refusal's reply (the caller gave it).
pub fn to_py_err(py: Python<'_>, failed: Failed, task: Option<&str>, own_id: bool) -> PyErr {
    let error = match failed {
        Failed::Closed => return errors::closed(),
        Failed::Client(error) => error,
    };
    errors::from_reply(py, &error.into_reply(task, own_id))
}
