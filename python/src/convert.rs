//! Python values to JSON values and back: the binding speaks the protocol's JSON shapes as
//! plain dicts, lists, strings, numbers, booleans and `None`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Deepest nesting accepted from Python, as serde_json's own parser allows: it also stops a
/// dict that contains itself.
const DEPTH_MAX: usize = 128;

/// A Python event dict as a JSON object, with the raw bytes of a `record/blob` given as a
/// `bytes` object under `"bytes"` kept aside (copied once, never through base64).
pub fn event_from_py(value: &Bound<'_, PyAny>) -> PyResult<WithRaw> {
    let dict = value
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("an event is a dict of the protocol's JSON shape"))?;
    let mut object = Map::with_capacity(dict.len());
    let mut raw = None;
    for (key, item) in dict.iter() {
        let key = key.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err("a dict key of an event must be a str (JSON object keys are)")
        })?;
        let key = key.to_cow()?;
        if key == RAW_BYTES_KEY
            && let Ok(bytes) = item.cast::<PyBytes>()
        {
            raw = Some(bytes.as_bytes().to_vec());
            continue;
        }
        object.insert(key.into_owned(), value_from_py(&item, 1)?);
    }
    Ok((object, raw))
}

/// An event object and the raw bytes of a `record/blob`, kept out of it.
pub type WithRaw = (Map<String, Value>, Option<Vec<u8>>);

/// The field of a `record/blob` that holds its bytes.
pub const RAW_BYTES_KEY: &str = "bytes";

fn dict_from_py(dict: &Bound<'_, PyDict>, depth: usize) -> PyResult<Map<String, Value>> {
    let mut object = Map::with_capacity(dict.len());
    for (key, item) in dict.iter() {
        let key = key.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err("a dict key of an event must be a str (JSON object keys are)")
        })?;
        object.insert(key.to_cow()?.into_owned(), value_from_py(&item, depth + 1)?);
    }
    Ok(object)
}

/// Any JSON-shaped Python value as a JSON value.
pub fn value_from_py(value: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > DEPTH_MAX {
        return Err(PyValueError::new_err(format!(
            "an event nests deeper than {DEPTH_MAX} levels (or contains itself)"
        )));
    }
    if value.is_none() {
        return Ok(Value::Null);
    }
    // bool before int: a Python bool is an int.
    if let Ok(boolean) = value.cast::<PyBool>() {
        return Ok(Value::Bool(boolean.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        if let Ok(n) = value.extract::<i64>() {
            return Ok(Value::from(n));
        }
        if let Ok(n) = value.extract::<u64>() {
            return Ok(Value::from(n));
        }
        return Err(PyValueError::new_err("an integer of an event must fit in 64 bits"));
    }
    if let Ok(float) = value.cast::<PyFloat>() {
        return Number::from_f64(float.value()).map(Value::Number).ok_or_else(|| {
            PyValueError::new_err("a float of an event must be finite (JSON has no NaN)")
        });
    }
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(Value::String(text.to_cow()?.into_owned()));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        return dict_from_py(dict, depth).map(Value::Object);
    }
    if let Ok(list) = value.cast::<PyList>() {
        return list.iter().map(|item| value_from_py(&item, depth + 1)).collect();
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return tuple.iter().map(|item| value_from_py(&item, depth + 1)).collect();
    }
    Err(PyTypeError::new_err(format!(
        "a value of type {} has no JSON form (use dict, list, str, int, float, bool or None)",
        value.get_type().name()?
    )))
}

/// A JSON value as a Python value.
pub fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(object) => object_to_py(py, object)?.into_any(),
    })
}

/// A JSON object as a Python dict (insertion order kept).
pub fn object_to_py<'py>(
    py: Python<'py>,
    object: &Map<String, Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, item) in object {
        dict.set_item(key, value_to_py(py, item)?)?;
    }
    Ok(dict)
}
