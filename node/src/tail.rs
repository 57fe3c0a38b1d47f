//! `NativeTail`: the store's events as they are appended, page by page (`Store.tail`, an
//! async iterator in `lib/index.ts`). Each page is a long poll (`factlog::protocol::pages`
//! in process, the `follow` request through a served store) on a thread of its own, not on
//! the libuv pool: a follow may wait for its whole timeout, and a few of them would otherwise
//! hold every pool thread and stall the appends. Through a served store a tail has a
//! connection of its own, so its waits never hold up the store's other calls.

use std::sync::Arc;
use std::time::Duration;

use factlog::client::Client;
use factlog::limits::SERVER_FOLLOW_TIMEOUT_MS_MAX;
use napi::Env;
use napi::bindgen_prelude::Object;
use napi_derive::napi;
use parking_lot::Mutex;

use crate::jobs::{self, Outcome};
use crate::store::{self, Shared};

/// A follower of a store's events (of one task, when given).
#[napi]
pub struct NativeTail {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// Through a served store: the read timeout of the tail's connection.
    remote: Option<Option<Duration>>,
    task: Option<String>,
    /// Through a served store: the tail's own connection, made at its first page.
    client: Mutex<Option<Client>>,
}

impl NativeTail {
    /// A tail of the store `shared` (a served store's when `remote` gives the timeout of its
    /// connection); it holds no handle of the store between its pages.
    pub fn new(
        shared: Arc<Shared>,
        remote: Option<Option<Duration>>,
        task: Option<String>,
    ) -> NativeTail {
        NativeTail { inner: Arc::new(Inner { shared, remote, task, client: Mutex::new(None) }) }
    }
}

impl Inner {
    /// The first page from `from` that holds an event, waiting up to `timeout` for one; an
    /// empty page once the timeout passed or the store is closing.
    fn page(&self, from: u64, timeout: Duration) -> Outcome<String> {
        if self.shared.closing() {
            return Err(jobs::closed());
        }
        let task = self.task.as_deref();
        let page = match self.remote {
            None => store::follow_local(&self.shared, from, task, timeout)?,
            Some(read_timeout) => {
                let mut guard = self.client.lock();
                if guard.is_none() {
                    // A follow's reply may come only after its whole wait: the store's reply
                    // timeout counts from there.
                    let longest = Duration::from_millis(SERVER_FOLLOW_TIMEOUT_MS_MAX);
                    let read_timeout = read_timeout.map(|timeout| timeout + longest);
                    let client = Client::connect_timeout(self.shared.path(), read_timeout)
                        .map_err(|e| e.into_reply(task, false))?;
                    *guard = Some(client);
                }
                let client = guard.as_mut().ok_or_else(jobs::closed)?;
                let (events, next_seq) =
                    client.follow(from, task, timeout).map_err(|e| e.into_reply(task, false))?;
                factlog::protocol::op::EventsPage { events, next_seq, last_seq: 0 }
            }
        };
        jobs::to_json(&page)
    }
}

#[napi]
impl NativeTail {
    /// The next page from `fromSeq` as JSON (`{"events", "next_seq", ...}`), waiting up to
    /// `timeoutMs` for an event; its `events` is empty when none came.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn next<'env>(
        &self,
        env: &'env Env,
        from_seq: i64,
        timeout_ms: u32,
    ) -> napi::Result<Object<'env>> {
        let (deferred, promise) = env.create_deferred()?;
        let inner = Arc::clone(&self.inner);
        let from = u64::try_from(from_seq).unwrap_or(0).max(1);
        let timeout = Duration::from_millis(u64::from(timeout_ms));
        std::thread::Builder::new()
            .name("factlog-tail".to_owned())
            .spawn(move || match inner.page(from, timeout) {
                Ok(text) => deferred.resolve(move |_env| Ok(text)),
                Err(reply) => deferred.reject(jobs::rejection(&reply)),
            })
            .map_err(|error| napi::Error::from_reason(format!("cannot start a thread: {error}")))?;
        Ok(promise)
    }

    /// Ends the tail's own connection (through a served store).
    #[napi]
    pub fn close(&self) {
        if let Some(mut guard) = self.inner.client.try_lock() {
            guard.take();
        }
    }
}
