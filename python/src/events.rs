//! `factlog._native.Events`: an iterator over the events of a store (or of one task of it),
//! as dicts of the `factlog dump --json` shape: read from the log of the store open in this
//! process, or page by page (`{"op":"events"}`) from a served store.

use std::collections::VecDeque;
use std::sync::Arc;

use factlog::harness::codec;
use factlog::protocol::views;
use factlog::{Reader, Seq};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::{Map, Value};

use crate::convert::{RAW_BYTES_KEY, object_to_py};
use crate::remote::{self, Remote};
use crate::{Access, errors, to_py_err};

/// An iterator over the events of a store (or of one task of it), as dicts.
#[pyclass(module = "factlog._native")]
pub(crate) struct Events {
    source: Option<Source>,
    /// Only this task's events, when set: the others are skipped by their envelope, their
    /// bodies never decoded nor converted.
    task: Option<String>,
}

/// Where an [`Events`] reads.
enum Source {
    /// The log of the store open in this process.
    Local(Reader),
    /// Pages of `{"op":"events"}` replies of a served store, up to `until`: the last seq the
    /// log held at the first page (what a local reader made then would give).
    Remote {
        remote: Arc<Remote>,
        next_seq: u64,
        until: Option<u64>,
        page: VecDeque<Map<String, Value>>,
    },
}

impl Events {
    pub(crate) fn new(access: &Access, from_seq: u64, task: Option<String>) -> PyResult<Events> {
        let source = match access {
            Access::Local(store) => Source::Local(
                store.log().read_from(Seq(from_seq.max(1))).map_err(|e| to_py_err(&e))?,
            ),
            Access::Remote(remote) => Source::Remote {
                remote: Arc::clone(remote),
                next_seq: from_seq.max(1),
                until: None,
                page: VecDeque::new(),
            },
        };
        Ok(Events { source: Some(source), task })
    }
}

#[pymethods]
impl Events {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        let task = self.task.as_deref();
        let next = match &mut self.source {
            None => return Ok(None),
            Some(Source::Local(reader)) => {
                return match next_local(py, reader, task)? {
                    None => {
                        self.source = None;
                        Ok(None)
                    }
                    Some((event, raw)) => Ok(Some(event_to_py(py, &event, raw)?.unbind())),
                };
            }
            Some(Source::Remote { remote, next_seq, until, page }) => {
                if page.is_empty() && until.is_none_or(|until| *next_seq <= until) {
                    let from = *next_seq;
                    let fetched = remote
                        .call(py, |client| client.events_page(from, task))
                        .map_err(|failed| remote::to_py_err(py, failed, task, false))?;
                    let until = *until.get_or_insert(fetched.last_seq);
                    let within = |event: &Map<String, Value>| {
                        event.get("seq").and_then(Value::as_u64).is_some_and(|seq| seq <= until)
                    };
                    page.extend(fetched.events.into_iter().filter(within));
                    *next_seq = fetched.next_seq;
                }
                page.pop_front()
            }
        };
        match next {
            None => {
                self.source = None;
                Ok(None)
            }
            Some(event) => {
                // A record/blob from a served store carries its bytes in base64: given back
                // as a bytes object, as from an embedded store.
                let raw = match (event.get("type"), event.get(RAW_BYTES_KEY)) {
                    (Some(Value::String(t)), Some(Value::String(text))) if t == BLOB_TYPE => {
                        codec::blob_bytes_from_base64(text).map(|bytes| PyBytes::new(py, &bytes))
                    }
                    _ => None,
                };
                Ok(Some(event_to_py(py, &event, raw)?.unbind()))
            }
        }
    }
}

/// The type name of a `record/blob`.
const BLOB_TYPE: &str = "record/blob";

/// An event object as a dict; `raw`, the bytes of a record/blob, as a `bytes` object under
/// `"bytes"`.
fn event_to_py<'py>(
    py: Python<'py>,
    event: &Map<String, Value>,
    raw: Option<Bound<'py, PyBytes>>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = object_to_py(py, event)?;
    if let Some(raw) = raw {
        dict.set_item(RAW_BYTES_KEY, raw)?;
    }
    Ok(dict)
}

/// An event as a dump-line object, and the bytes of a record/blob as a bytes object.
type WithBytes<'py> = (Map<String, Value>, Option<Bound<'py, PyBytes>>);

/// The next event of a local reader (of `task` only, when given), as a dump-line object, and
/// the bytes of a record/blob as a bytes object, kept out of it (the object's `bytes` is then
/// empty).
fn next_local<'py>(
    py: Python<'py>,
    reader: &mut Reader,
    task: Option<&str>,
) -> PyResult<Option<WithBytes<'py>>> {
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
        None => Ok(None),
        Some(record) => {
            let record = record.map_err(|error| errors::from_error(py, &error))?;
            // A blob's bytes go from the log's map straight into their bytes object.
            let (event, lent) = codec::decode_lending_blob(record.seq, &record.payload)
                .map_err(|error| errors::from_error(py, &error))?;
            Ok(Some((
                views::event_object(&event, false),
                lent.map(|bytes| PyBytes::new(py, bytes)),
            )))
        }
    }
}
