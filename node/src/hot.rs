//! The hot path in raw Node-API: a task's delta function, `delta(text)`, one streamed
//! fragment.
//!
//! napi-rs's generated glue is safe and general, and so it pays per call for it: a method
//! call registers a borrow of its receiver in a global table under a mutex, and its external
//! values are looked up in another. For a call made once per token that costs more than the
//! append itself, so this one function is written against Node-API directly:
//!
//! - each task gets a JavaScript function of its own ([`function`]) whose callback data is
//!   one `Arc` of the task's state, released by a finalizer of the function: the callback
//!   reads its task from its own data, so no argument has to be unwrapped or checked, and no
//!   other value can be taken for a task;
//! - the text is copied by V8 straight into a scratch buffer of this thread, reused from call
//!   to call (`napi_get_value_string_utf8`; grown only for a longer fragment): no allocation,
//!   no JavaScript-side encoding;
//! - the append is `Inner::delta` (`task.rs`): one read of the task's slot, then the
//!   library's `Task::delta` (its one lock; no syscall unless a flush is due);
//! - the seq comes back as a number; a failure is thrown as the error reply's JSON, as every
//!   other call of the addon throws (`jobs.rs`).
//!
//! This is the only unsafe code of the binding: each function that calls Node-API is under
//! `#[expect(unsafe_code, ...)]`, and each call states what makes it sound.

use std::cell::RefCell;
use std::ffi::{CString, c_void};
use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::Unknown;
use napi::{Env, sys};
use serde_json::{Map, Value};

use crate::jobs;
use crate::task::Inner;

/// The most UTF-8 bytes the scratch buffer grows to: twice the library's bound on a delta's
/// text (`limits::DELTA_TEXT_BYTES_MAX`), so every fragment it takes fits; a longer one is
/// read into a buffer of its own, only to be refused, and the scratch buffer stays bounded.
const SCRATCH_MAX: usize = 2 * factlog::limits::DELTA_TEXT_BYTES_MAX;

thread_local! {
    /// The text of the fragment being appended, reused by every call on this thread.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; 4096]);
}

/// The delta function of a task: a JavaScript function whose data owns one `Arc` of its state.
#[expect(unsafe_code, reason = "Node-API functions are raw C calls")]
pub fn function<'env>(env: &'env Env, inner: Arc<Inner>) -> napi::Result<Unknown<'env>> {
    let raw = env.raw();
    let data = Arc::into_raw(inner).cast_mut().cast::<c_void>();
    let mut value = ptr::null_mut();
    // SAFETY: a function of `delta` whose data is a leaked `Arc<Inner>`, named by a
    // NUL-terminated string.
    let status = unsafe {
        sys::napi_create_function(raw, c"delta".as_ptr(), -1, Some(delta), data, &mut value)
    };
    if status != sys::Status::napi_ok {
        // SAFETY: no function was made: this is the `Arc` leaked above, still ours.
        drop(unsafe { Arc::from_raw(data.cast::<Inner>()) });
        return Err(napi::Error::from_reason("cannot make a task's delta function"));
    }
    // SAFETY: the finalizer releases the `Arc` once, when the function is collected, and the
    // function (its only user) can no longer be called then.
    let status = unsafe {
        sys::napi_add_finalizer(raw, value, data, Some(finalize), ptr::null_mut(), ptr::null_mut())
    };
    if status != sys::Status::napi_ok {
        // The function exists and may be called: its `Arc` is leaked rather than freed.
        return Err(napi::Error::from_reason("cannot make a task's delta function"));
    }
    // SAFETY: `value` is a live value of `env`'s current scope.
    Ok(unsafe { Unknown::from_raw_unchecked(raw, value) })
}

/// The finalizer of a delta function: releases its `Arc`.
#[expect(unsafe_code, reason = "a Node-API finalizer releases a leaked Arc")]
unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the pointer `function` leaked, and Node calls a finalizer once.
    drop(unsafe { Arc::from_raw(data.cast::<Inner>()) });
}

/// `delta(text)`: appends `text` to the function's task; its seq, or 0 through a served store.
#[expect(unsafe_code, reason = "a Node-API callback reads its arguments and data")]
unsafe extern "C" fn delta(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let mut argc = 1;
    let mut text = ptr::null_mut();
    let mut data = ptr::null_mut();
    // SAFETY: room for one argument (`undefined` when missing) and the function's data.
    let status = unsafe {
        sys::napi_get_cb_info(env, info, &mut argc, &mut text, ptr::null_mut(), &mut data)
    };
    if status != sys::Status::napi_ok || data.is_null() {
        return throw(env, &jobs::invalid_options("delta: cannot read its arguments"));
    }
    // SAFETY: `data` is the `Arc<Inner>` of this function, alive while the function is (and
    // it is being called).
    let inner = unsafe { &*data.cast::<Inner>() };
    let appended = SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        match read_text(env, text, &mut scratch) {
            Ok(Text::Scratch(length)) => match std::str::from_utf8(&scratch[..length]) {
                Ok(text) => inner.delta(text),
                Err(_) => Err(jobs::invalid_options("a delta's text is not valid UTF-8")),
            },
            Ok(Text::Owned(text)) => inner.delta(&text),
            Err(reply) => Err(reply),
        }
    });
    match appended {
        Ok(seq) => number(env, seq.unwrap_or(0)),
        Err(reply) => throw(env, &reply),
    }
}

/// Where [`read_text`] put the text.
enum Text {
    /// The first bytes of the scratch buffer.
    Scratch(usize),
    /// A fragment longer than [`SCRATCH_MAX`], in a string of its own.
    Owned(String),
}

/// Copies the JavaScript string `value` as UTF-8 into `scratch` (grown when it is longer,
/// up to [`SCRATCH_MAX`]).
#[expect(unsafe_code, reason = "V8 copies a string through a raw C call")]
fn read_text(
    env: sys::napi_env,
    value: sys::napi_value,
    scratch: &mut Vec<u8>,
) -> Result<Text, Map<String, Value>> {
    let not_text = || jobs::invalid_options("a delta's text must be a string");
    let mut length = 0;
    // SAFETY: `scratch` has room for `scratch.len()` bytes, the terminating NUL included; V8
    // writes at most that many and reports how many it wrote, without the NUL.
    let status = unsafe {
        sys::napi_get_value_string_utf8(
            env,
            value,
            scratch.as_mut_ptr().cast(),
            scratch.len(),
            &mut length,
        )
    };
    if status != sys::Status::napi_ok {
        return Err(not_text());
    }
    // V8 writes whole characters only (up to 4 bytes each): with room for one more left over,
    // the text was all of it.
    if length + 1 + 4 <= scratch.len() {
        return Ok(Text::Scratch(length));
    }
    // It may not have fitted: ask for the whole length, and read it again if it did not.
    // SAFETY: a null buffer asks for the length only.
    let status =
        unsafe { sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut length) };
    if status != sys::Status::napi_ok {
        return Err(not_text());
    }
    if length < scratch.len() {
        // It fitted after all (the scratch buffer holds it).
        return Ok(Text::Scratch(length));
    }
    let mut owned;
    let buffer = if length < SCRATCH_MAX {
        scratch.resize((length + 1).next_power_of_two(), 0);
        scratch
    } else {
        owned = vec![0; length + 1];
        &mut owned
    };
    // SAFETY: as the first read, into a buffer with room for the whole text and its NUL.
    let status = unsafe {
        sys::napi_get_value_string_utf8(
            env,
            value,
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            &mut length,
        )
    };
    if status != sys::Status::napi_ok {
        return Err(not_text());
    }
    if length < SCRATCH_MAX {
        return Ok(Text::Scratch(length));
    }
    buffer.truncate(length);
    String::from_utf8(std::mem::take(buffer))
        .map(Text::Owned)
        .map_err(|_| jobs::invalid_options("a delta's text is not valid UTF-8"))
}

/// The JavaScript number of a seq.
#[expect(unsafe_code, reason = "Node-API functions are raw C calls")]
fn number(env: sys::napi_env, seq: u64) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: creating a number has no precondition; seqs stay far below 2^53.
    unsafe { sys::napi_create_double(env, seq as f64, &mut value) };
    value
}

/// Throws the error of `reply` (its JSON as the message, as `jobs::rejection`) and returns
/// the null value Node-API expects from a callback that threw.
#[expect(unsafe_code, reason = "Node-API functions are raw C calls")]
fn throw(env: sys::napi_env, reply: &Map<String, Value>) -> sys::napi_value {
    let text = serde_json::to_string(reply)
        .unwrap_or_else(|_| r#"{"error":"ERROR","message":"an unprintable error"}"#.to_owned());
    let message = CString::new(text.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a NUL-terminated message; a null code.
    unsafe { sys::napi_throw_error(env, ptr::null(), message.as_ptr()) };
    ptr::null_mut()
}
