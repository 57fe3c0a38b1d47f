//! Errors as Python exceptions: every failure is turned into the protocol's error reply
//! (`factlog::protocol::error_reply`) and raised as the class of its code, which
//! `factlog/errors.py` defines with its fields. One path for refusals of a request and for
//! failures of the store, so a Python caller sees exactly what a protocol client sees.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::{Map, Value};

use crate::convert::object_to_py;

/// The exception for an error reply object (`{"error": CODE, "message": .., fields}`).
pub fn from_reply(py: Python<'_>, reply: &Map<String, Value>) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let errors = py.import("factlog.errors")?;
        let exception = errors.getattr("_from_reply")?.call1((object_to_py(py, reply)?,))?;
        Ok(PyErr::from_value(exception))
    };
    build().unwrap_or_else(|error| error)
}

/// The exception for a library error.
pub fn from_error(py: Python<'_>, error: &factlog::Error) -> PyErr {
    from_reply(py, &factlog::protocol::error_reply(error, None))
}

/// A call on a store (or a task, or an iterator) whose store was closed: a `ValueError`, as
/// Python's files raise after `close()`.
pub fn closed() -> PyErr {
    PyValueError::new_err("the factlog store is closed")
}
