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
//! waits for nothing, and detaching would cost more than the append.

mod convert;
mod errors;

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use factlog::harness::request_key as key;
use factlog::harness::{TaskId, codec};
use factlog::protocol::request::{KEY_DURABILITY, KEY_EXPECTED_REVISION, KEY_TASK};
use factlog::protocol::{self, Reply, Request, views};
use factlog::{AppendOptions, Durability, Reader, Seq, StoreOptions};
use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyDict, PyList};
use serde_json::{Map, Value};

use crate::convert::{object_from_py, object_to_py, value_to_py};

/// An open store: one directory, many tasks (`factlog::Store`).
#[pyclass(frozen, module = "factlog._native")]
struct Store {
    inner: Mutex<Open>,
    path: PathBuf,
}

/// What a [`Store`] holds until it is closed.
struct Open {
    store: Option<factlog::Store>,
    /// The slots of the task handles given out, emptied by `close`.
    tasks: Vec<Weak<Slot>>,
}

/// The library's task handle behind a Python `Task` (and its store, for reads), taken away
/// when the store closes.
struct Slot {
    task: RwLock<Option<(factlog::Task, factlog::Store)>>,
}

/// A handle on one task of a store (`factlog::Task`).
#[pyclass(frozen, module = "factlog._native")]
struct Task {
    slot: Arc<Slot>,
    id: String,
}

/// An iterator over the events of a store (or of one task of it), as dicts.
#[pyclass(module = "factlog._native")]
struct Events {
    reader: Option<Reader>,
    /// Only this task's events, when set: the others are skipped by their envelope, their
    /// bodies never decoded nor converted.
    task: Option<String>,
}

impl Events {
    fn new(store: &factlog::Store, from_seq: u64, task: Option<String>) -> PyResult<Events> {
        let reader = store.log().read_from(Seq(from_seq.max(1))).map_err(|e| to_py_err(&e))?;
        Ok(Events { reader: Some(reader), task })
    }
}

fn to_py_err(error: &factlog::Error) -> PyErr {
    Python::attach(|py| errors::from_error(py, error))
}

/// What a durability must be, as the protocol says it.
const DURABILITY_NAMES: &str = "\"durability\" must be \"buffered\", \"flushed\" or \"synced\"";

fn durability_from_py(durability: Option<&str>) -> PyResult<Option<Durability>> {
    match durability {
        None => Ok(None),
        Some("buffered") => Ok(Some(Durability::Buffered)),
        Some("flushed") => Ok(Some(Durability::Flushed)),
        Some("synced") => Ok(Some(Durability::Synced)),
        Some(_) => {
            Err(PyValueError::new_err("durability must be \"buffered\", \"flushed\" or \"synced\""))
        }
    }
}

/// The reply of an append as a dict, or the exception of an error reply.
fn reply_to_py(py: Python<'_>, reply: Reply) -> PyResult<Py<PyAny>> {
    if reply.is_error() {
        return Err(errors::from_reply(py, reply.object()));
    }
    Ok(object_to_py(py, reply.object())?.into_any().unbind())
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
    ))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        refuse_unmarked_secrets: bool,
        snapshot_every_events: Option<u64>,
        snapshot_every_bytes: Option<u64>,
        snapshot_at_turn_end: bool,
    ) -> PyResult<Store> {
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
        let store = opened.map_err(|error| errors::from_error(py, &error))?;
        Ok(Store { inner: Mutex::new(Open { store: Some(store), tasks: Vec::new() }), path })
    }

    /// The store's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().store.is_none()
    }

    /// A handle on task `id`, taking the task over from an earlier holder first.
    fn task(&self, py: Python<'_>, id: String) -> PyResult<Task> {
        let store = self.store()?;
        let task = py.detach(|| store.task(&id)).map_err(|error| errors::from_error(py, &error))?;
        let slot = Arc::new(Slot { task: RwLock::new(Some((task, store))) });
        let mut inner = self.inner.lock();
        if inner.store.is_none() {
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
        let store = self.store()?;
        let report =
            py.detach(|| store.recover()).map_err(|error| errors::from_error(py, &error))?;
        let value = serde_json::to_value(&report)
            .map_err(|error| PyValueError::new_err(format!("cannot format the report: {error}")))?;
        Ok(value_to_py(py, &value)?.unbind())
    }

    /// The ids of the tasks that have events, sorted.
    fn task_ids(&self) -> PyResult<Vec<String>> {
        Ok(self.store()?.task_ids().into_iter().map(|id| id.0).collect())
    }

    /// The events from `from_seq` on, as dicts (the shape of `factlog dump --json`); with
    /// `task`, only that task's events.
    #[pyo3(signature = (from_seq = 1, task = None))]
    fn events(&self, from_seq: u64, task: Option<String>) -> PyResult<Events> {
        Events::new(&self.store()?, from_seq, task)
    }

    /// Makes every event appended so far meet `durability` (default `"synced"`).
    #[pyo3(signature = (durability = "synced"))]
    fn flush(&self, py: Python<'_>, durability: &str) -> PyResult<()> {
        let durability = durability_from_py(Some(durability))?.unwrap_or(Durability::Synced);
        let store = self.store()?;
        py.detach(|| store.flush(durability)).map_err(|error| errors::from_error(py, &error))
    }

    /// Syncs and closes the store; its tasks and iterators stop working. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let (store, tasks) = {
            let mut inner = self.inner.lock();
            (inner.store.take(), std::mem::take(&mut inner.tasks))
        };
        for slot in tasks.iter().filter_map(Weak::upgrade) {
            slot.task.write().take();
        }
        match store {
            None => Ok(()),
            Some(store) => {
                py.detach(|| store.close()).map_err(|error| errors::from_error(py, &error))
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
        let state = if self.closed() { "closed" } else { "open" };
        format!("<factlog.Store {:?} ({state})>", self.path.display().to_string())
    }
}

impl Store {
    fn store(&self) -> PyResult<factlog::Store> {
        self.inner.lock().store.clone().ok_or_else(errors::closed)
    }
}

impl Task {
    /// The library's handle, cloned (an `Arc`), or the closed error.
    fn task(&self) -> PyResult<factlog::Task> {
        self.handles().map(|(task, _)| task)
    }

    /// The library's task and store handles, cloned, or the closed error.
    fn handles(&self) -> PyResult<(factlog::Task, factlog::Store)> {
        self.slot.task.read().clone().ok_or_else(errors::closed)
    }

    /// A request object for `event` on this task, with the keyword arguments as envelope
    /// keys (each refused if the dict gives another value). An `event` that is not a dict
    /// is a `TypeError`; a value inside it without a JSON form is an invalid event.
    fn request(
        &self,
        event: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
        durability: Option<&str>,
    ) -> PyResult<Result<Request, Reply>> {
        let event = event
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err("an event is a dict of the protocol's JSON shape"))?;
        Ok(self.request_from_dict(event, expected_revision, durability))
    }

    fn request_from_dict(
        &self,
        event: &Bound<'_, PyDict>,
        expected_revision: Option<u64>,
        durability: Option<&str>,
    ) -> Result<Request, Reply> {
        let mut object: Map<String, Value> = object_from_py(event.as_any())
            .map_err(|error| refusal(&error.value(event.py()).to_string()))?;
        let mut set = |key: &str, value: Value| {
            protocol::set_envelope_key(&mut object, key, value).map_err(|r| r.into_reply())
        };
        set(KEY_TASK, Value::from(self.id.as_str()))?;
        if let Some(revision) = expected_revision {
            set(KEY_EXPECTED_REVISION, Value::from(revision))?;
        }
        if let Some(durability) = durability {
            set(KEY_DURABILITY, Value::from(durability))?;
        }
        Request::from_object(object).map_err(protocol::Refusal::into_reply)
    }
}

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
        let guard = self.slot.task.read();
        let Some((_, store)) = &*guard else { return Err(errors::closed()) };
        Events::new(store, from_seq, Some(self.id.clone()))
    }

    /// The task's current revision: the count of its events.
    #[getter]
    fn revision(&self) -> PyResult<u64> {
        match &*self.slot.task.read() {
            Some((task, _)) => Ok(task.revision()),
            None => Err(errors::closed()),
        }
    }

    /// Appends one streamed `assistant/delta` fragment, buffered; returns its seq.
    fn delta(&self, text: PyBackedStr) -> PyResult<u64> {
        let guard = self.slot.task.read();
        let Some((task, _)) = &*guard else { return Err(errors::closed()) };
        match task.delta(&text) {
            Ok(seq) => Ok(seq.0),
            Err(error) => {
                drop(guard);
                Err(to_py_err(&error))
            }
        }
    }

    /// Appends one event given as a dict of the protocol's shape; returns the reply dict.
    #[pyo3(signature = (event, *, expected_revision = None, durability = None))]
    fn append(
        &self,
        py: Python<'_>,
        event: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
        durability: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let task = self.task()?;
        let reply = match self.request(event, expected_revision, durability.as_deref())? {
            Ok(request) => py.detach(|| protocol::execute_on(&task, request, true)),
            Err(reply) => reply,
        };
        reply_to_py(py, reply)
    }

    /// Appends events as one atomic batch; returns the batch's reply dict.
    #[pyo3(signature = (events, *, expected_revision = None, durability = None))]
    fn append_batch(
        &self,
        py: Python<'_>,
        events: &Bound<'_, PyAny>,
        expected_revision: Option<u64>,
        durability: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let task = self.task()?;
        // A bad durability is refused as the protocol refuses it: an invalid event.
        let Ok(durability) = durability_from_py(durability.as_deref()) else {
            return reply_to_py(py, refusal(DURABILITY_NAMES));
        };
        let options = AppendOptions { expected_revision, durability };
        let mut requests = Vec::new();
        for event in events.try_iter()? {
            match self.request(&event?, None, None)? {
                Ok(request) => requests.push(request),
                Err(reply) => return reply_to_py(py, reply),
            }
        }
        let reply = py.detach(|| protocol::execute_batch(&task, requests, options));
        reply_to_py(py, reply)
    }

    /// The task's folded state: the object under `tasks.ID` of `factlog state --task ID --json`.
    fn state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let state = self.task()?.state();
        let value = views::task_state_value(&state)
            .map_err(|error| PyValueError::new_err(format!("cannot format the state: {error}")))?;
        Ok(value_to_py(py, &value)?.unbind())
    }

    /// The model-visible history of the task (the shape of `factlog history --json`).
    fn history(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (_, store) = self.handles()?;
        let entries = py
            .detach(|| store.history(&self.id))
            .map_err(|error| errors::from_error(py, &error))?;
        let list = PyList::empty(py);
        for entry in &entries {
            let value = serde_json::to_value(entry).map_err(|error| {
                PyValueError::new_err(format!("cannot format an entry: {error}"))
            })?;
            list.append(value_to_py(py, &value)?)?;
        }
        Ok(list.into_any().unbind())
    }

    fn __repr__(&self) -> String {
        format!("<factlog.Task {:?}>", self.id)
    }
}

#[pymethods]
impl Events {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        let Some(reader) = &mut self.reader else { return Ok(None) };
        let task = self.task.as_deref();
        // Skipping other tasks' records reads the disk: the interpreter is free meanwhile.
        let next = py.detach(|| {
            loop {
                let record = match reader.next()? {
                    Ok(record) => record,
                    Err(error) => return Some(Err(error)),
                };
                let Some(task) = task else { return Some(Ok(record)) };
                match codec::peek(record.seq, &record.payload) {
                    Ok(envelope) if envelope.task != task => {}
                    Ok(_) => return Some(Ok(record)),
                    Err(error) => return Some(Err(error)),
                }
            }
        });
        match next {
            None => {
                self.reader = None;
                Ok(None)
            }
            Some(record) => {
                let event = record
                    .and_then(|record| codec::decode(record.seq, &record.payload))
                    .map_err(|error| errors::from_error(py, &error))?;
                Ok(Some(object_to_py(py, &views::event_object(&event, false))?.unbind()))
            }
        }
    }
}

/// The documented request key of `operation` on `task` at `revision` (as
/// `factlog request-key`).
#[pyfunction]
fn request_key(task: &str, operation: &str, revision: u64) -> String {
    key::derive(&TaskId(task.to_owned()), operation, revision).to_string()
}

/// The protocol version the binding speaks.
const PROTOCOL_VERSION: u32 = protocol::PROTOCOL_VERSION;

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Store>()?;
    module.add_class::<Task>()?;
    module.add_class::<Events>()?;
    module.add_function(wrap_pyfunction!(request_key, module)?)?;
    module.add("PROTOCOL_VERSION", PROTOCOL_VERSION)?;
    module.add("ERROR_CODES", protocol::reply::ERROR_CODES.to_vec())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
