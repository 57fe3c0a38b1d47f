//! `NativeTask`: one task of a store, behind the package's `Task` (`lib/index.ts`). Events
//! cross as the protocol's JSON (`format-spec/protocol.md`), parsed and checked by the
//! library's protocol module exactly as a line sent to `factlog emit` (one implementation of
//! every rule: types, holders, compare-and-set, request keys, durability floors).
//!
//! The hot path, a delta, is `Inner::delta`, reached through the task's delta function
//! (`hot.rs`: raw Node-API, no per-call allocation). The takeover of a task (which may write
//! and sync) happens at its first call, on the pool for every asynchronous call.

use std::sync::Arc;

use factlog::protocol::op::{Op, RequestedDurability};
use factlog::protocol::{self, Reply, Request, views};
use napi::Env;
use napi::bindgen_prelude::{AsyncTask, Unknown};
use napi_derive::napi;
use parking_lot::Mutex;
use serde_json::{Map, Value};

use crate::jobs::{self, Job, Outcome};
use crate::store::{self, Access, Shared, TaskSlot};

/// A handle on one task of a store.
#[napi]
pub struct NativeTask {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    shared: Arc<Shared>,
    id: String,
    /// The library's handle, once the task was taken over (in process only); emptied by the
    /// store's `close`.
    local: Arc<TaskSlot>,
    /// Held while the task is taken over, so that racing first calls take it over once.
    takeover: Mutex<()>,
}

/// Where one call of a task goes.
enum Handle {
    Local(factlog::Task, factlog::Store),
    Remote(Arc<crate::remote::Remote>),
}

impl NativeTask {
    /// A handle on task `id` of `shared`, not yet taken over.
    pub fn new(shared: Arc<Shared>, id: String) -> NativeTask {
        let local = shared.task_slot();
        NativeTask { inner: Arc::new(Inner { shared, id, local, takeover: Mutex::new(()) }) }
    }
}

impl Inner {
    /// The handle of one call: the library's task (taking it over at the first call), or
    /// the connection.
    fn handle(&self) -> Outcome<Handle> {
        if self.shared.closing() {
            return Err(jobs::closed());
        }
        match self.shared.access()? {
            Access::Remote(remote) => Ok(Handle::Remote(remote)),
            Access::Local(store) => {
                if let Some(task) = self.local.load_full() {
                    return Ok(Handle::Local((*task).clone(), store));
                }
                // The first call: one takeover, however many calls race to it.
                let _taking_over = self.takeover.lock();
                if let Some(task) = self.local.load_full() {
                    return Ok(Handle::Local((*task).clone(), store));
                }
                let task = store.task(&self.id).map_err(|e| jobs::from_error(&e))?;
                // `close` sets `closing` before it empties the slots: a handle put here after
                // that would keep the store open.
                if self.shared.closing() {
                    return Err(jobs::closed());
                }
                self.local.store(Some(Arc::new(task.clone())));
                Ok(Handle::Local(task, store))
            }
        }
    }

    /// Appends one streamed fragment (the hot path): its seq, or `None` through a served
    /// store (fragments are pipelined there). One lock-free read of the task's slot (emptied
    /// by the store's `close`), then the library's `Task::delta`, whose lock is the only one.
    pub(crate) fn delta(&self, text: &str) -> Outcome<Option<u64>> {
        if let Some(task) = &*self.local.load()
            && !self.shared.closing()
        {
            return task.delta(text).map(|seq| Some(seq.0)).map_err(|e| jobs::from_error(&e));
        }
        // The first call of a task, or a client of a served store.
        match self.handle()? {
            Handle::Local(task, _) => {
                task.delta(text).map(|seq| Some(seq.0)).map_err(|e| jobs::from_error(&e))
            }
            Handle::Remote(remote) => {
                let id = self.id.as_str();
                remote.delta(id, text).map(|()| None)
            }
        }
    }

    /// The request object of `event` (protocol JSON text) on this task, with the envelope
    /// keys given (each refused if the event gives another value).
    fn object(
        &self,
        event: &str,
        expected_revision: Option<u64>,
        durability: Option<&str>,
    ) -> Result<Map<String, Value>, Reply> {
        let mut object =
            protocol::request::parse_object(event.as_bytes()).map_err(|r| r.into_reply())?;
        protocol::set_envelope(&mut object, &self.id, expected_revision, durability)?;
        Ok(object)
    }

    /// Appends one event; the reply object, or the error reply.
    fn append(
        &self,
        event: &str,
        expected_revision: Option<u64>,
        durability: Option<&str>,
    ) -> Outcome<Map<String, Value>> {
        let object = match self.object(event, expected_revision, durability) {
            Ok(object) => object,
            Err(reply) => return Err(reply.into_object()),
        };
        match self.handle()? {
            Handle::Local(task, _) => {
                let reply = match Request::from_object(object) {
                    Ok(request) => protocol::execute_on(&task, request, true),
                    Err(refusal) => refusal.into_reply(),
                };
                answer(reply)
            }
            // Checked as the embedded store checks it before it is sent: an object the socket
            // would read as another request (an `op` without `type`) is refused here.
            Handle::Remote(remote) => match Request::from_object(object.clone()) {
                Ok(_) => remote.request(Some(&self.id), object),
                Err(refusal) => answer(refusal.into_reply()),
            },
        }
    }

    /// Appends events as one atomic batch.
    fn append_batch(
        &self,
        events: &str,
        expected_revision: Option<u64>,
        durability: Option<&str>,
    ) -> Outcome<Map<String, Value>> {
        // A bad durability is refused as the protocol refuses it: an invalid event.
        let requested = durability
            .map(|name| serde_json::from_value::<RequestedDurability>(Value::from(name)))
            .transpose()
            .map_err(|_| Reply::from_refusal_message(None, DURABILITY_NAMES).into_object())?;
        let options = RequestedDurability::options(requested, expected_revision);
        let members: Vec<Value> = serde_json::from_str(events).map_err(|error| {
            Reply::from_refusal_message(
                None,
                &format!("a batch is a JSON array of events: {error}"),
            )
            .into_object()
        })?;
        let mut objects = Vec::with_capacity(members.len());
        for member in members {
            let text = member.to_string();
            objects.push(self.object(&text, None, None).map_err(Reply::into_object)?);
        }
        match self.handle()? {
            Handle::Local(task, _) => {
                let mut requests = Vec::with_capacity(objects.len());
                for object in objects {
                    match Request::from_object(object) {
                        Ok(request) => requests.push(request),
                        Err(refusal) => return answer(refusal.into_reply()),
                    }
                }
                answer(protocol::execute_batch(&task, requests, options, true))
            }
            Handle::Remote(remote) => {
                let batch = Op::batch(self.id.as_str(), objects, options).to_object();
                remote.request(Some(&self.id), batch)
            }
        }
    }
}

/// What a durability must be, as the protocol says it.
const DURABILITY_NAMES: &str =
    r#""durability" must be "buffered", "flushed", "synced" or "replicated""#;

/// A protocol reply as the outcome of a call.
fn answer(reply: Reply) -> Outcome<Map<String, Value>> {
    if reply.is_error() { Err(reply.into_object()) } else { Ok(reply.into_object()) }
}

/// A count given from JavaScript (a revision), refused when negative.
fn revision(value: Option<i64>) -> Outcome<Option<u64>> {
    value
        .map(|value| {
            u64::try_from(value).map_err(|_| {
                jobs::invalid_options(&format!("expectedRevision must be 0 or more, not {value}"))
            })
        })
        .transpose()
}

#[napi]
impl NativeTask {
    /// The task's id.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id.clone()
    }

    /// The task's delta function, the hot path (`hot.rs`): `delta(text)` appends one
    /// streamed fragment and returns its seq (0 through a served store).
    #[napi(ts_return_type = "(text: string) => number")]
    pub fn delta_function<'env>(&self, env: &'env Env) -> napi::Result<Unknown<'env>> {
        crate::hot::function(env, Arc::clone(&self.inner))
    }

    /// Appends one event given as protocol JSON (without `task`); the reply as JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn append(
        &self,
        event: String,
        expected_revision: Option<i64>,
        durability: Option<String>,
    ) -> AsyncTask<Job<String>> {
        let inner = Arc::clone(&self.inner);
        jobs::spawn(move || {
            let revision = revision(expected_revision)?;
            let reply = inner.append(&event, revision, durability.as_deref())?;
            jobs::to_json(&reply)
        })
    }

    /// Appends a JSON array of events as one atomic batch; the batch's reply as JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn append_batch(
        &self,
        events: String,
        expected_revision: Option<i64>,
        durability: Option<String>,
    ) -> AsyncTask<Job<String>> {
        let inner = Arc::clone(&self.inner);
        jobs::spawn(move || {
            let revision = revision(expected_revision)?;
            let reply = inner.append_batch(&events, revision, durability.as_deref())?;
            jobs::to_json(&reply)
        })
    }

    /// The task's revision: the count of its events.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn revision(&self) -> AsyncTask<Job<i64>> {
        let inner = Arc::clone(&self.inner);
        jobs::spawn(move || {
            let revision = match inner.handle()? {
                Handle::Local(task, _) => task.revision(),
                Handle::Remote(remote) => {
                    remote.call(Some(&inner.id), |client| client.revision(&inner.id))?
                }
            };
            Ok(i64::try_from(revision).unwrap_or(i64::MAX))
        })
    }

    /// The task's folded state as JSON (the object under `tasks.ID` of `factlog state`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn state(&self) -> AsyncTask<Job<String>> {
        let inner = Arc::clone(&self.inner);
        jobs::spawn(move || {
            let value = match inner.handle()? {
                Handle::Local(task, _) => views::task_state_value(&task.state())
                    .map_err(|e| jobs::failed(&format!("cannot format the state as JSON: {e}")))?,
                Handle::Remote(remote) => {
                    let object = Op::State { task: inner.id.clone() }.to_object();
                    let mut reply = remote.request(Some(&inner.id), object)?;
                    match reply.shift_remove("state") {
                        Some(Value::Null) | None => store::empty_state(),
                        Some(state) => state,
                    }
                }
            };
            jobs::to_json(&value)
        })
    }

    /// The model-visible history as JSON (the entries of `factlog history --json`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn history(&self) -> AsyncTask<Job<String>> {
        let inner = Arc::clone(&self.inner);
        jobs::spawn(move || match inner.handle()? {
            Handle::Local(_, store) => {
                let entries = store.history(&inner.id).map_err(|e| jobs::from_error(&e))?;
                jobs::to_json(&entries)
            }
            Handle::Remote(remote) => {
                let entries = remote.call(Some(&inner.id), |client| client.history(&inner.id))?;
                jobs::to_json(&entries)
            }
        })
    }
}
