//! Work off the event loop. Every call that may wait (for the disk, a sync, the socket of a
//! served store) runs as a [`Job`] on the libuv thread pool (`napi::AsyncTask`) and returns
//! a promise; the event loop never blocks on `fdatasync`. A long poll (`follow`) has threads of
//! its own instead (`store.rs`): it may wait for seconds, and the pool is small.
//!
//! Failures cross the boundary as the protocol's error replies: a rejected promise (or a thrown
//! error) whose message is the reply object as JSON (`{"error": CODE, "message": ..., ...}`),
//! which the package's JavaScript (`lib/errors.ts`) turns into the `FactlogError` subclass of
//! its code. One shape for every door: the embedded store, a served store's refusals and the
//! client's own failures.

use napi::bindgen_prelude::{AsyncTask, ToNapiValue, TypeName};
use napi::{Env, Error, Status, Task};
use serde_json::{Map, Value};

use factlog::protocol::reply::{error_object, error_reply};

/// What a job gives back: its value, or the error reply to reject with.
pub type Outcome<T> = Result<T, Map<String, Value>>;

/// What a job runs on the JavaScript thread with its value, before its promise resolves.
type Then<T> = Box<dyn FnOnce(&Env, &T) + Send>;

/// One call's work, run once on a pool thread.
pub struct Job<T: Send + 'static> {
    work: Option<Box<dyn FnOnce() -> Outcome<T> + Send>>,
    /// Run on the JavaScript thread with the value, before the promise resolves.
    then: Option<Then<T>>,
}

impl<T: Send + ToNapiValue + TypeName + 'static> Task for Job<T> {
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<T> {
        let work = self.work.take().ok_or_else(|| Error::from_reason("a job ran twice"))?;
        work().map_err(|reply| rejection(&reply))
    }

    fn resolve(&mut self, env: Env, output: T) -> napi::Result<T> {
        if let Some(then) = self.then.take() {
            then(&env, &output);
        }
        Ok(output)
    }
}

/// `work` as a promise: run on the libuv pool, resolved with its value or rejected with its
/// error reply.
pub fn spawn<T: Send + ToNapiValue + TypeName + 'static>(
    work: impl FnOnce() -> Outcome<T> + Send + 'static,
) -> AsyncTask<Job<T>> {
    AsyncTask::new(Job { work: Some(Box::new(work)), then: None })
}

/// [`spawn`], then `then` on the JavaScript thread with the value before the promise resolves.
pub fn spawn_then<T: Send + ToNapiValue + TypeName + 'static>(
    work: impl FnOnce() -> Outcome<T> + Send + 'static,
    then: impl FnOnce(&Env, &T) + Send + 'static,
) -> AsyncTask<Job<T>> {
    AsyncTask::new(Job { work: Some(Box::new(work)), then: Some(Box::new(then)) })
}

/// The JavaScript error of an error reply: its message is the reply as JSON.
pub fn rejection(reply: &Map<String, Value>) -> Error {
    let text = serde_json::to_string(reply)
        .unwrap_or_else(|_| r#"{"error":"ERROR","message":"an unprintable error"}"#.to_owned());
    Error::new(Status::GenericFailure, text)
}

/// The error reply of a library error.
pub fn from_error(error: &factlog::Error) -> Map<String, Value> {
    error_reply(error, None)
}

/// The error reply of a call on a closed store or one of its tasks.
pub fn closed() -> Map<String, Value> {
    error_object(None, "CLOSED", "the store is closed: open it again to go on")
}

/// The error reply of bad arguments (`INVALID_OPTIONS`).
pub fn invalid_options(message: &str) -> Map<String, Value> {
    error_object(None, "INVALID_OPTIONS", message)
}

/// The error reply of a failure that is nobody's input (`ERROR`).
pub fn failed(message: &str) -> Map<String, Value> {
    error_object(None, "ERROR", message)
}

/// A value as JSON text (the replies, states and pages the package parses).
pub fn to_json(value: &impl serde::Serialize) -> Outcome<String> {
    serde_json::to_string(value)
        .map_err(|error| failed(&format!("cannot format a reply as JSON: {error}")))
}
