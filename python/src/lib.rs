//! `factlog._native`: the PyO3 extension module under the `factlog` Python package.
//!
//! A thin layer: every request goes through the library's protocol module
//! (`factlog::protocol`), so a dict appended from Python is parsed, checked, answered and
//! refused exactly as a line sent to `factlog emit` (`format-spec/protocol.md`). The
//! pure-Python package beside it (`python/factlog/`) holds the exception classes, the
//! `asyncio` variants and the type stubs.
//!
//! The GIL: every call that may wait for the disk (open, takeover, an append that waits for
//! its durability, recover, close) runs detached from the interpreter (`Python::detach`,
//! formerly `allow_threads`), after its arguments were converted and before its result is;
//! no Python object is touched while detached. `Task.delta` stays attached: it is buffered,
//! waits for nothing, and detaching would cost more than the append. Through a served store
//! every call that talks to the socket (`Task.delta` included) runs detached.
//!
//! A `Store` is one of two backends: the embedded store (optionally shared with other
//! processes, `share=True`: `factlog::Store::serve`), or a client of a store another process
//! shares (`remote.rs`), chosen at open by the library's rule (`factlog::served`). Every
//! method of `Store`, `Task` and `Events` dispatches on it (`flush` of a client is the socket's
//! `sync` request).

mod convert;
mod errors;
mod events;
mod remote;

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use factlog::client::served::Held;
use factlog::harness::request_key as key;
use factlog::harness::{Body, TaskId, codec};
use factlog::protocol::op::Op;
use factlog::protocol::{self, Reply, Request, views};
use factlog::replica::{ReplicateOptions, Replication};
use factlog::server::{ServeOptions, Server};
use factlog::{AppendOptions, Durability, StoreOptions};
use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::{Map, Value};

use crate::convert::{RAW_BYTES_KEY, WithRaw, event_from_py, object_to_py, value_to_py};
use crate::events::Events;
use crate::remote::Remote;

/// An open store: one directory, many tasks (`factlog::Store`).
#[pyclass(frozen, module = "factlog._native")]
struct Store {
    inner: Mutex<Open>,
    path: PathBuf,
}

/// What a [`Store`] holds until it is closed.
struct Open {
    backend: Option<Backend>,
    /// The slots of the task handles given out, emptied by `close`.
    tasks: Vec<Weak<Slot>>,
}

/// Where a [`Store`]'s calls go.
enum Backend {
    /// The store, open in this process, its server while it is shared, and its replication
    /// while it replicates (`replicate_to`).
    Local { server: Option<Server>, replication: Option<Replication>, store: factlog::Store },
    /// A client of the store another process serves.
    Remote(Arc<Remote>),
}

/// A [`Backend`]'s handle for one call, cloned out of the lock.
#[derive(Clone)]
enum Access {
    Local(factlog::Store),
    Remote(Arc<Remote>),
}

/// The library's task handle behind a Python `Task` (and its store, for reads), or the
/// connection of a client-backed store; taken away when the store closes.
struct Slot {
    task: RwLock<Option<Handle>>,
}

/// What a [`Slot`] holds.
#[derive(Clone)]
enum Handle {
    Local(factlog::Task, factlog::Store),
    Remote(Arc<Remote>),
}

/// A handle on one task of a store (`factlog::Task`).
#[pyclass(frozen, module = "factlog._native")]
struct Task {
    slot: Arc<Slot>,
    id: String,
}

fn to_py_err(error: &factlog::Error) -> PyErr {
    Python::attach(|py| errors::from_error(py, error))
}

/// What a durability must be, as the protocol says it.
const DURABILITY_NAMES: &str =
    "\"durability\" must be \"buffered\", \"flushed\", \"synced\" or \"replicated\"";

fn durability_from_py(durability: Option<&str>) -> PyResult<Option<Durability>> {
    durability.map(str::parse::<Durability>).transpose().map_err(PyValueError::new_err)
}

/// The reply of an append as a dict, or the exception of an error reply.
fn reply_to_py(py: Python<'_>, reply: Reply) -> PyResult<Py<PyAny>> {
    if reply.is_error() {
        return Err(errors::from_reply(py, reply.object()));
    }
    Ok(object_to_py(py, reply.object())?.into_any().unbind())
}

/// The `Locked` exception of `error` with another message.
fn locked_err(py: Python<'_>, error: &factlog::Error, message: String) -> PyErr {
    let mut reply = protocol::error_reply(error, None);
    reply.insert("message".to_owned(), Value::from(message));
    errors::from_reply(py, &reply)
}

/// The `InvalidOptions` exception with `message`.
fn invalid_options(py: Python<'_>, message: &str) -> PyErr {
    errors::from_reply(py, &protocol::reply::error_object(None, "INVALID_OPTIONS", message))
}

/// The options of `factlog.Store` that only the process holding the store can apply.
#[derive(Clone, Copy, Default)]
struct HolderOptions {
    refuse_unmarked_secrets: bool,
    snapshot_every_events: Option<u64>,
    snapshot_every_bytes: Option<u64>,
    snapshot_at_turn_end: bool,
}

impl HolderOptions {
    /// The first option given that a client cannot apply: the serving process's own apply.
    fn refused_by_client(self) -> Option<&'static str> {
        if self.refuse_unmarked_secrets {
            Some("refuse_unmarked_secrets")
        } else if self.snapshot_every_events.is_some() {
            Some("snapshot_every_events")
        } else if self.snapshot_every_bytes.is_some() {
            Some("snapshot_every_bytes")
        } else if self.snapshot_at_turn_end {
            Some("snapshot_at_turn_end")
        } else {
            None
        }
    }
}

impl Store {
    fn with_backend(path: PathBuf, backend: Backend) -> Store {
        Store { inner: Mutex::new(Open { backend: Some(backend), tasks: Vec::new() }), path }
    }

    /// Connects to the store served from `path`; the `Locked` error of the open, when there
    /// was one, is named beside a failure to connect (as `factlog emit` does).
    fn connect_to(
        py: Python<'_>,
        path: PathBuf,
        locked: Option<&factlog::Error>,
        options: HolderOptions,
        timeout: Option<std::time::Duration>,
    ) -> PyResult<Store> {
        if let Some(option) = options.refused_by_client() {
            return Err(invalid_options(
                py,
                &format!(
                    "{} is served by another process: {option} is an option of the process that \
                     holds the store (give it there, to factlog.Store(..., share=True) or \
                     `factlog serve`), not of a client; connect without it",
                    path.display()
                ),
            ));
        }
        match (Remote::connect(py, &path, timeout), locked) {
            (Ok(remote), _) => Ok(Store::with_backend(path, Backend::Remote(Arc::new(remote)))),
            // A socket nobody answers at (its server was killed) behind a holder that does
            // not share the store: the open's Locked, with the failed connection.
            (Err(error @ factlog::client::ClientError::Connect { .. }), Some(locked)) => {
                let message = format!("cannot open {}: {locked}; {error}", path.display());
                Err(locked_err(py, locked, message))
            }
            (Err(error), _) => {
                Err(remote::to_py_err(py, remote::Failed::Client(error), None, false))
            }
        }
    }
}

#[pymethods]
impl Store {
    /// Opens (or creates) the store in `path`; see `factlog.Store` in `__init__.pyi`.
    #[new]
    #[pyo3(signature = (
        path,
        *,
        refuse_unmarked_secrets = false,
        snapshot_every_events = None,
        snapshot_every_bytes = None,
        snapshot_at_turn_end = false,
        share = false,
        allow_group = None,
        clients_max = None,
        replicate_to = None,
    ))]
    #[expect(clippy::too_many_arguments, reason = "the keyword arguments of factlog.Store")]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        refuse_unmarked_secrets: bool,
        snapshot_every_events: Option<u64>,
        snapshot_every_bytes: Option<u64>,
        snapshot_at_turn_end: bool,
        share: bool,
        allow_group: Option<u32>,
        clients_max: Option<usize>,
        replicate_to: Option<String>,
    ) -> PyResult<Store> {
        if !share && (allow_group.is_some() || clients_max.is_some()) {
            return Err(PyValueError::new_err(
                "allow_group and clients_max are options of a shared store: give share=True too",
            ));
        }
        let holder = HolderOptions {
            refuse_unmarked_secrets,
            snapshot_every_events,
            snapshot_every_bytes,
            snapshot_at_turn_end,
        };
        // A store another process serves now is reached through its socket at once, without
        // first waiting out the open's retries of its busy lock (`served_now`). With options
        // only a holder applies, or a socket that does not answer, it is decided below.
        if !share
            && replicate_to.is_none()
            && holder.refused_by_client().is_none()
            && factlog::client::served::served_now(&path).is_some()
            && let Ok(remote) = Remote::connect(py, &path, None)
        {
            return Ok(Store::with_backend(path, Backend::Remote(Arc::new(remote))));
        }
        let mut options = StoreOptions::new()
            .refuse_unmarked_secrets(refuse_unmarked_secrets)
            .snapshot_at_turn_end(snapshot_at_turn_end);
        if let Some(events) = snapshot_every_events {
            options = options.snapshot_every_events(events);
        }
        if let Some(bytes) = snapshot_every_bytes {
            options = options.snapshot_every_bytes(bytes);
        }
        let opened = py.detach(|| factlog::Store::open(&path, options));
        let store = match opened {
            Ok(store) => store,
            Err(error) => {
                return match factlog::client::served::held_by_another(&path, &error) {
                    Some(Held::Served { .. }) if replicate_to.is_some() => {
                        let message = format!(
                            "cannot replicate {}: {error}; the process holding it serves it, \
                             and replicates it if it was started so (factlog serve \
                             --replicate-to, replicate_to= there): open it without \
                             replicate_to to connect to it",
                            path.display()
                        );
                        Err(locked_err(py, &error, message))
                    }
                    Some(Held::Served { .. }) if !share => {
                        Store::connect_to(py, path, Some(&error), holder, None)
                    }
                    Some(Held::Served { .. }) => {
                        let message = format!(
                            "cannot share {}: {error}; the process holding it shares it \
                             already: open it without share=True to connect to it",
                            path.display()
                        );
                        Err(locked_err(py, &error, message))
                    }
                    Some(Held::NotServed { pid }) => {
                        let then = "factlog.Store connects to it";
                        let message =
                            factlog::client::served::not_served_message(&path, &error, pid, then);
                        Err(locked_err(py, &error, message))
                    }
                    None => Err(errors::from_error(py, &error)),
                };
            }
        };
        // Started before serving, so a client's replicated append never finds it missing.
        let replication = match &replicate_to {
            None => None,
            Some(url) => {
                let started = py.detach(|| {
                    factlog::replica::remote::open(url)
                        .and_then(|remote| store.replicate(remote, ReplicateOptions::new()))
                });
                match started {
                    Ok(replication) => Some(replication),
                    Err(error) => {
                        let _ = py.detach(|| store.close());
                        return Err(errors::from_error(py, &error));
                    }
                }
            }
        };
        let server = if share {
            let mut serve = ServeOptions::new().allow_group(allow_group);
            if let Some(clients) = clients_max {
                serve = serve.clients_max(clients);
            }
            match store.serve(serve) {
                Ok(server) => Some(server),
                Err(error) => {
                    let _ = py.detach(|| {
                        if let Some(replication) = replication {
                            let _ = replication.stop();
                        }
                        store.close()
                    });
                    return Err(errors::from_error(py, &error));
                }
            }
        } else {
            None
        };
        Ok(Store::with_backend(path, Backend::Local { server, replication, store }))
    }

    /// Connects to the store another process serves from `path`; see `__init__.pyi`.
    #[staticmethod]
    #[pyo3(signature = (path, *, timeout = None))]
    fn connect(py: Python<'_>, path: PathBuf, timeout: Option<f64>) -> PyResult<Store> {
        let timeout = match timeout {
            None => None,
            Some(seconds) if seconds.is_finite() && seconds > 0.0 => {
                Some(std::time::Duration::from_secs_f64(seconds))
            }
            Some(_) => {
                return Err(PyValueError::new_err("timeout must be a positive number of seconds"));
            }
        };
        Store::connect_to(py, path, None, HolderOptions::default(), timeout)
    }

    /// The store's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().backend.is_none()
    }

    /// Whether this handle shares its store with other processes (`share=True`).
    #[getter]
    fn sharing(&self) -> bool {
        matches!(self.inner.lock().backend, Some(Backend::Local { server: Some(_), .. }))
    }

    /// What opening the store found and did, for a handle that opened it (None for a client
    /// of a served store: the serving process opened it): see `open_report` in
    /// `_native.pyi`.
    #[getter]
    fn open_report<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let report = match &self.inner.lock().backend {
            Some(Backend::Local { store, .. }) => store.open_report().to_json(),
            _ => return Ok(None),
        };
        convert::value_to_py(py, &report).map(Some)
    }

    /// The pid of the process serving the store when this handle is its client, else None.
    #[getter]
    fn served_by(&self) -> Option<u64> {
        match &self.inner.lock().backend {
            Some(Backend::Remote(remote)) => Some(remote.server_pid()),
            _ => None,
        }
    }

    /// A handle on task `id`, taking the task over from an earlier holder first.
    fn task(&self, py: Python<'_>, id: String) -> PyResult<Task> {
        let handle = match self.access()? {
            Access::Local(store) => {
                let task = py
                    .detach(|| store.task(&id))
                    .map_err(|error| errors::from_error(py, &error))?;
                Handle::Local(task, store)
            }
            // The serving process takes the task over at this connection's first append.
            Access::Remote(remote) => Handle::Remote(remote),
        };
        let slot = Arc::new(Slot { task: RwLock::new(Some(handle)) });
        let mut inner = self.inner.lock();
        if inner.backend.is_none() {
            return Err(errors::closed());
        }
        if inner.tasks.len() >= 64 && inner.tasks.len().is_power_of_two() {
            inner.tasks.retain(|slot| slot.strong_count() > 0);
        }
        inner.tasks.push(Arc::downgrade(&slot));
        Ok(Task { slot, id })
    }

    /// Takes every task over and reports what recovery decided, as `factlog recover --json`.
    fn recover(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let report = match self.access()? {
            Access::Local(store) => {
                py.detach(|| store.recover()).map_err(|error| errors::from_error(py, &error))?
            }
            Access::Remote(remote) => remote
                .call(py, |client| client.recover(false))
                .map_err(|failed| remote::to_py_err(py, failed, None, false))?,
        };
        let value = serde_json::to_value(&report)
            .map_err(|error| PyValueError::new_err(format!("cannot format the report: {error}")))?;
        Ok(value_to_py(py, &value)?.unbind())
    }

    /// The ids of the tasks that have events, sorted.
    fn task_ids(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        match self.access()? {
            Access::Local(store) => Ok(store.task_ids().into_iter().map(|id| id.0).collect()),
            Access::Remote(remote) => remote
                .call(py, |client| client.task_ids())
                .map_err(|failed| remote::to_py_err(py, failed, None, false)),
        }
    }

    /// The events from `from_seq` on, as dicts (the shape of `factlog dump --json`); with
    /// `task`, only that task's events.
    #[pyo3(signature = (from_seq = 1, task = None))]
    fn events(&self, from_seq: u64, task: Option<String>) -> PyResult<Events> {
        Events::new(&self.access()?, from_seq, task)
    }

    /// Makes every event appended so far meet `durability` (default `"synced"`).
    #[pyo3(signature = (durability = "synced"))]
    fn flush(&self, py: Python<'_>, durability: &str) -> PyResult<()> {
        let durability = durability_from_py(Some(durability))?.unwrap_or(Durability::Synced);
        match self.access()? {
            Access::Local(store) => py
                .detach(|| store.flush(durability))
                .map_err(|error| errors::from_error(py, &error)),
            // The socket's `sync` request: synced, which meets every durability.
            Access::Remote(remote) => remote
                .call(py, factlog::client::Client::sync)
                .map_err(|failed| remote::to_py_err(py, failed, None, false)),
        }
    }

    /// Stops sharing (when shared), then syncs and closes the store, or ends the connection
    /// of a client; its tasks and iterators stop working. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let (backend, tasks) = {
            let mut inner = self.inner.lock();
            (inner.backend.take(), std::mem::take(&mut inner.tasks))
        };
        for slot in tasks.iter().filter_map(Weak::upgrade) {
            slot.task.write().take();
        }
        match backend {
            None => Ok(()),
            Some(Backend::Remote(remote)) => {
                // Waits for a call of another thread to get its reply first; the fragments
                // still buffered are sent and their replies read, so a refusal is raised here.
                py.detach(|| remote.close()).map_err(|error| {
                    remote::to_py_err(py, remote::Failed::Client(error), None, false)
                })
            }
            Some(Backend::Local { server, replication, store }) => {
                let stopped = match server {
                    Some(server) => py.detach(|| server.stop()),
                    None => Ok(()),
                };
                let replicated = match replication {
                    Some(replication) => py.detach(|| replication.stop().map(|_| ())),
                    None => Ok(()),
                };
                let closed = py.detach(|| store.close());
                stopped.and(replicated).and(closed).map_err(|error| errors::from_error(py, &error))
            }
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = match &self.inner.lock().backend {
            None => "closed".to_owned(),
            Some(Backend::Local { server: None, .. }) => "open".to_owned(),
            Some(Backend::Local { server: Some(_), .. }) => "open, shared".to_owned(),
            Some(Backend::Remote(remote)) => {
                format!("client of the store served by process {}", remote.server_pid())
            }
        };
        format!("<factlog.Store {:?} ({state})>", self.path.display().to_string())
    }
}

impl Store {
    fn access(&self) -> PyResult<Access> {
        match &self.inner.lock().backend {
            None => Err(errors::closed()),
            Some(Backend::Local { store, .. }) => Ok(Access::Local(store.clone())),
            Some(Backend::Remote(remote)) => Ok(Access::Remote(Arc::clone(remote))),
        }
    }
}

impl Task {
    /// The library's handle or the connection, cloned, or the closed error.
    fn handle(&self) -> PyResult<Handle> {
        self.slot.task.read().clone().ok_or_else(errors::closed)
    }

    /// The exception of a failed call of a client-backed task.
    fn remote_err(&self, py: Python<'_>, failed: remote::Failed, own_id: bool) -> PyErr {
        remote::to_py_err(py, failed, Some(&self.id), own_id)
    }

    /// A request object for `event` on this task, with the keyword arguments as envelope
    /// keys (each refused if the dict gives another value). An `event` that is not a dict
    /// is a `TypeError`; a value inside it without a JSON form is an invalid event.
    fn object(
        &self,
        event: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
        durability: Option<&str>,
    ) -> PyResult<Result<Map<String, Value>, Reply>> {
        // To a served store the bytes of a record/blob travel in the JSON form: base64.
        Ok(self.object_from_dict(event, expected_revision, durability)?.and_then(
            |(mut object, raw)| {
                if let Some(raw) = raw {
                    if object.get("type").and_then(Value::as_str) != Some(BLOB_TYPE) {
                        return Err(refusal(BYTES_ONLY_FOR_BLOBS));
                    }
                    let text = codec::blob_bytes_to_base64(&raw);
                    object.insert(RAW_BYTES_KEY.to_owned(), Value::String(text));
                }
                Ok(object)
            },
        ))
    }

    /// The event as a request object, and the raw bytes of a record/blob given as `bytes`.
    fn object_from_dict(
        &self,
        event: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
        durability: Option<&str>,
    ) -> PyResult<Result<WithRaw, Reply>> {
        if event.cast::<PyDict>().is_err() {
            return Err(PyTypeError::new_err("an event is a dict of the protocol's JSON shape"));
        }
        let (mut object, raw) = match event_from_py(event) {
            Ok(converted) => converted,
            Err(error) => return Ok(Err(refusal(&error.value(event.py()).to_string()))),
        };
        if let Err(reply) =
            protocol::set_envelope(&mut object, &self.id, expected_revision, durability)
        {
            return Ok(Err(reply));
        }
        Ok(Ok((object, raw)))
    }

    /// [`Task::object`] checked as a request, as the embedded store runs it.
    fn request(
        &self,
        event: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
        durability: Option<&str>,
    ) -> PyResult<Result<Request, Reply>> {
        let (object, raw) = match self.object_from_dict(event, expected_revision, durability)? {
            Ok(converted) => converted,
            Err(reply) => return Ok(Err(reply)),
        };
        let mut request = match Request::from_object(object) {
            Ok(request) => request,
            Err(refusal) => return Ok(Err(refusal.into_reply())),
        };
        // The raw bytes go straight into the body: no base64 on the way.
        if let Some(raw) = raw {
            let Body::RecordBlob(blob) = &mut request.body else {
                return Ok(Err(refusal(BYTES_ONLY_FOR_BLOBS)));
            };
            blob.bytes = raw;
        }
        Ok(Ok(request))
    }

    /// Sends `object` to the served store; the reply dict (without its `warnings` unless
    /// `warnings`: the serving store searches anyway) or the exception of its error.
    fn send(
        &self,
        py: Python<'_>,
        remote: &Remote,
        object: Map<String, Value>,
        warnings: bool,
    ) -> PyResult<Py<PyAny>> {
        let own_id = object.contains_key(protocol::request::KEY_ID);
        let mut reply =
            remote.request(py, object).map_err(|failed| self.remote_err(py, failed, own_id))?;
        if !warnings {
            reply.shift_remove("warnings");
        }
        Ok(object_to_py(py, &reply)?.into_any().unbind())
    }
}

/// The type of the one event whose `bytes` may be a `bytes` object.
const BLOB_TYPE: &str = "record/blob";

/// The refusal of a `bytes` object in any other event.
const BYTES_ONLY_FOR_BLOBS: &str =
    "a bytes object is taken only as the bytes of a record/blob event";

/// The `INVALID_EVENT` reply for a Python value with no JSON form.
fn refusal(what: &str) -> Reply {
    Reply::from_refusal_message(None, what)
}

#[pymethods]
impl Task {
    /// The task's id.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// This task's events from `from_seq` on, as dicts (the shape of `factlog dump --json`).
    #[pyo3(signature = (from_seq = 1))]
    fn events(&self, from_seq: u64) -> PyResult<Events> {
        let access = match self.handle()? {
            Handle::Local(_, store) => Access::Local(store),
            Handle::Remote(remote) => Access::Remote(remote),
        };
        Events::new(&access, from_seq, Some(self.id.clone()))
    }

    /// The task's current revision: the count of its events.
    #[getter]
    fn revision(&self, py: Python<'_>) -> PyResult<u64> {
        match self.handle()? {
            Handle::Local(task, _) => Ok(task.revision()),
            Handle::Remote(remote) => remote
                .call(py, |client| client.revision(&self.id))
                .map_err(|failed| self.remote_err(py, failed, false)),
        }
    }

    /// Appends one streamed `assistant/delta` fragment, buffered; returns its seq (None
    /// through a served store).
    fn delta(&self, py: Python<'_>, text: PyBackedStr) -> PyResult<Option<u64>> {
        let guard = self.slot.task.read();
        match &*guard {
            None => Err(errors::closed()),
            Some(Handle::Local(task, _)) => match task.delta(&text) {
                Ok(seq) => Ok(Some(seq.0)),
                Err(error) => {
                    drop(guard);
                    Err(to_py_err(&error))
                }
            },
            Some(Handle::Remote(remote)) => {
                let remote = Arc::clone(remote);
                drop(guard);
                let text: &str = &text;
                remote
                    .call(py, |client| remote::client_delta(client, &self.id, text))
                    .map(|()| None)
                    .map_err(|failed| self.remote_err(py, failed, false))
            }
        }
    }

    /// Appends streamed `assistant/delta` fragments in order, each as `delta` appends one,
    /// in one call; returns the seq of the last (None when empty or through a served store).
    fn deltas(&self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        // A list or tuple is read in place; any other iterable is collected first, so that no
        // Python code (a generator's) runs while the slot's lock is held.
        if texts.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "deltas takes a list of str fragments (for one fragment, call delta)",
            ));
        }
        let collected;
        let items = if let Ok(list) = texts.cast::<PyList>() {
            list.as_sequence().clone()
        } else if let Ok(tuple) = texts.cast::<PyTuple>() {
            tuple.as_sequence().clone()
        } else {
            collected = PyList::new(py, texts.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
            collected.as_sequence().clone()
        };
        let count = items.len()?;
        let guard = self.slot.task.read();
        match &*guard {
            None => Err(errors::closed()),
            Some(Handle::Local(task, _)) => {
                let mut last = None;
                for index in 0..count {
                    let text: PyBackedStr = items.get_item(index)?.extract()?;
                    match task.delta(&text) {
                        Ok(seq) => last = Some(seq.0),
                        Err(error) => {
                            drop(guard);
                            return Err(to_py_err(&error));
                        }
                    }
                }
                Ok(last)
            }
            Some(Handle::Remote(remote)) => {
                let remote = Arc::clone(remote);
                drop(guard);
                let texts = (0..count)
                    .map(|index| items.get_item(index)?.extract::<PyBackedStr>())
                    .collect::<PyResult<Vec<_>>>()?;
                remote
                    .call(py, |client| {
                        texts
                            .iter()
                            .try_for_each(|text| remote::client_delta(client, &self.id, text))
                    })
                    .map(|()| None)
                    .map_err(|failed| self.remote_err(py, failed, false))
            }
        }
    }

    /// Appends one event given as a dict of the protocol's shape; returns the reply dict.
    /// `warnings=False`: no `warnings` in the reply; an embedded store skips the search for
    /// unmarked credential shapes that only feeds them (a served store's process still
    /// searches), and a store that refuses unmarked secrets still refuses them.
    #[pyo3(signature = (event, *, expected_revision = None, durability = None, warnings = true))]
    fn append(
        &self,
        py: Python<'_>,
        event: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
        durability: Option<String>,
        warnings: bool,
    ) -> PyResult<Py<PyAny>> {
        let reply = match self.handle()? {
            Handle::Local(task, _) => {
                match self.request(event, expected_revision, durability.as_deref())? {
                    Ok(request) => py.detach(|| protocol::execute_on(&task, request, warnings)),
                    Err(reply) => reply,
                }
            }
            Handle::Remote(remote) => {
                match self.object(event, expected_revision, durability.as_deref())? {
                    // Checked as the embedded store checks it before it is sent: an object the
                    // socket would read as another request (an `op` without `type`) is refused
                    // here, as an invalid event, never run.
                    Ok(object) => match Request::from_object(object.clone()) {
                        Ok(_) => return self.send(py, &remote, object, warnings),
                        Err(refusal) => refusal.into_reply(),
                    },
                    Err(reply) => reply,
                }
            }
        };
        reply_to_py(py, reply)
    }

    /// Appends events as one atomic batch; returns the batch's reply dict. `warnings` as for
    /// [`Task::append`].
    #[pyo3(signature = (events, *, expected_revision = None, durability = None, warnings = true))]
    fn append_batch(
        &self,
        py: Python<'_>,
        events: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
        durability: Option<String>,
        warnings: bool,
    ) -> PyResult<Py<PyAny>> {
        let handle = self.handle()?;
        // A bad durability is refused as the protocol refuses it: an invalid event.
        let replicated = durability.as_deref() == Some("replicated");
        let durability = if replicated { Some("synced") } else { durability.as_deref() };
        let Ok(durability) = durability_from_py(durability) else {
            return reply_to_py(py, refusal(DURABILITY_NAMES));
        };
        let options = AppendOptions { expected_revision, durability, replicated };
        match handle {
            Handle::Local(task, _) => {
                let mut requests = Vec::new();
                for event in events.try_iter()? {
                    match self.request(&event?, None, None)? {
                        Ok(request) => requests.push(request),
                        Err(reply) => return reply_to_py(py, reply),
                    }
                }
                let reply =
                    py.detach(|| protocol::execute_batch(&task, requests, options, warnings));
                reply_to_py(py, reply)
            }
            Handle::Remote(remote) => {
                let mut members = Vec::new();
                for event in events.try_iter()? {
                    match self.object(&event?, None, None)? {
                        Ok(object) => members.push(object),
                        Err(reply) => return reply_to_py(py, reply),
                    }
                }
                let batch = Op::batch(self.id.as_str(), members, options).to_object();
                self.send(py, &remote, batch, warnings)
            }
        }
    }

    /// The task's folded state: the object under `tasks.ID` of `factlog state --task ID --json`.
    fn state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let value = match self.handle()? {
            Handle::Local(task, _) => views::task_state_value(&task.state()),
            Handle::Remote(remote) => {
                let object = Op::State { task: self.id.clone() }.to_object();
                let mut reply = remote
                    .request(py, object)
                    .map_err(|failed| self.remote_err(py, failed, false))?;
                match reply.shift_remove("state") {
                    Some(Value::Null) | None => remote::empty_state(),
                    Some(state) => Ok(state),
                }
            }
        }
        .map_err(|error| PyValueError::new_err(format!("cannot format the state: {error}")))?;
        Ok(value_to_py(py, &value)?.unbind())
    }

    /// The model-visible history of the task (the shape of `factlog history --json`).
    fn history(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let values = match self.handle()? {
            Handle::Local(_, store) => {
                let entries = py
                    .detach(|| store.history(&self.id))
                    .map_err(|error| errors::from_error(py, &error))?;
                entries
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<Vec<Value>, _>>()
                    .map_err(|error| {
                        PyValueError::new_err(format!("cannot format an entry: {error}"))
                    })?
            }
            Handle::Remote(remote) => remote
                .call(py, |client| client.history(&self.id))
                .map_err(|failed| self.remote_err(py, failed, false))?,
        };
        let list = PyList::empty(py);
        for value in &values {
            list.append(value_to_py(py, value)?)?;
        }
        Ok(list.into_any().unbind())
    }

    fn __repr__(&self) -> String {
        format!("<factlog.Task {:?}>", self.id)
    }
}

/// The documented request key of `operation` on `task` at `revision` (as
/// `factlog request-key`).
#[pyfunction]
fn request_key(task: &str, operation: &str, revision: u64) -> String {
    key::derive(&TaskId(task.to_owned()), operation, revision).to_string()
}

/// Nanoseconds `count` calls of the library's `factlog::Task::delta(text)` take on `task`,
/// called from Rust in one loop: the benchmark's measure of the library beside `Task.delta`
/// called from Python on the same store in the same run (`python/bench/delta.py`). Not API.
#[pyfunction]
fn _delta_loop_ns(task: &Task, text: &str, count: u64) -> PyResult<u64> {
    let Handle::Local(task, _) = task.handle()? else {
        return Err(PyValueError::new_err("the delta loop times an embedded store's task"));
    };
    let start = std::time::Instant::now();
    for _ in 0..count {
        task.delta(text).map_err(|error| to_py_err(&error))?;
    }
    Ok(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// Whether `needle` occurs in `data`, by a vectorized search: the LangGraph saver's scan of each
/// serialized checkpoint for a `$secret` mark (`factlog/_langgraph_values.py`), several times
/// faster than `needle in data` on the megabytes a long conversation's checkpoints reach. Not
/// API.
#[pyfunction]
fn _holds(data: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(data, needle).is_some()
}

/// The protocol version the binding speaks.
const PROTOCOL_VERSION: u32 = protocol::PROTOCOL_VERSION;

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Store>()?;
    module.add_class::<Task>()?;
    module.add_class::<Events>()?;
    module.add_function(wrap_pyfunction!(request_key, module)?)?;
    module.add_function(wrap_pyfunction!(_delta_loop_ns, module)?)?;
    module.add_function(wrap_pyfunction!(_holds, module)?)?;
    module.add("PROTOCOL_VERSION", PROTOCOL_VERSION)?;
    module.add("ERROR_CODES", protocol::reply::ERROR_CODES.to_vec())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
