//! `NativeStore`: an open store, embedded or a client of a served one, behind the package's
//! `Store` (`lib/index.ts`). Opening follows the library's rule for a store another process
//! holds (`factlog::client::served`), as `factlog emit` and the Python package do: served, it
//! connects; held and not served, `LOCKED` says how to serve it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use factlog::client::Client;
use factlog::client::served::{self, Held};
use factlog::protocol::op::EventsPage;
use factlog::protocol::pages;
use factlog::replica::{ReplicateOptions, Replication};
use factlog::server::{ServeOptions, Server};
use factlog::{Durability, StoreOptions};
use napi::bindgen_prelude::AsyncTask;
use napi::{CleanupEnvHook, Env};
use napi_derive::napi;
use parking_lot::{Condvar, Mutex, RwLock};
use serde_json::{Map, Value};

use crate::jobs::{self, Job, Outcome};
use crate::remote::Remote;
use crate::task::NativeTask;

thread_local! {
    /// The exit hooks of the stores opened on this (JavaScript) thread and not closed yet, by
    /// the address of their shared state: `close` removes its store's.
    static EXIT_HOOKS: RefCell<HashMap<usize, CleanupEnvHook<Weak<Shared>>>> =
        RefCell::new(HashMap::new());
}

/// The options of `Store.open` (`lib/index.ts` documents each).
#[napi(object)]
#[derive(Default)]
pub struct OpenOptions {
    /// Share the store with the other processes of the machine over `DIR/factlog.sock`.
    pub share: Option<bool>,
    /// Also serve the processes of this primary group (with `share`).
    pub allow_group: Option<u32>,
    /// The most clients served at once (with `share`).
    pub clients_max: Option<u32>,
    /// Only connect to a served store; never open it.
    pub connect: Option<bool>,
    /// Through a served store: the longest a reply is waited for, in milliseconds.
    pub timeout_ms: Option<u32>,
    /// Refuse a body holding an unmarked credential-shaped value.
    pub refuse_unmarked_secrets: Option<bool>,
    /// Snapshot after this many events (0: never).
    pub snapshot_every_events: Option<i64>,
    /// Snapshot after this many bytes of log (0: never).
    pub snapshot_every_bytes: Option<i64>,
    /// Snapshot at every `turn/end`.
    pub snapshot_at_turn_end: Option<bool>,
    /// Replicate to this location (`file:///...`) while open; `Replicated` appends wait for it.
    pub replicate_to: Option<String>,
}

/// An open store.
#[napi]
pub struct NativeStore {
    shared: Arc<Shared>,
}

/// What a store's handles share.
pub struct Shared {
    path: PathBuf,
    backend: RwLock<Option<Backend>>,
    /// Set by `close`: waiting follows end, tasks refuse.
    closing: AtomicBool,
    /// The library's task handles given out (each holds the store open), emptied by `close`
    /// so that the store is closed, and its directory free, once `close` resolves.
    tasks: Mutex<Vec<Weak<TaskSlot>>>,
    /// How many follows are waiting on the store in process; `close` waits for none.
    following: Mutex<usize>,
    followed: Condvar,
}

/// Where a task keeps the library's handle once it took the task over: read by every delta
/// without a lock (`arc_swap`), emptied by `close`.
pub type TaskSlot = ArcSwapOption<factlog::Task>;

/// Where a store's calls go.
enum Backend {
    /// The store, open in this process; its server while shared; its replication.
    Local { store: factlog::Store, server: Option<Server>, replication: Option<Replication> },
    /// A client of the store another process serves.
    Remote(Arc<Remote>),
}

/// A backend's handle for one call, cloned out of the lock.
#[derive(Clone)]
pub enum Access {
    /// The store open in this process.
    Local(factlog::Store),
    /// The connection to a served store.
    Remote(Arc<Remote>),
}

impl Shared {
    /// The handle of the next call, or the closed error.
    pub fn access(&self) -> Outcome<Access> {
        match &*self.backend.read() {
            None => Err(jobs::closed()),
            Some(Backend::Local { store, .. }) => Ok(Access::Local(store.clone())),
            Some(Backend::Remote(remote)) => Ok(Access::Remote(Arc::clone(remote))),
        }
    }

    /// The store's directory.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Whether `close` began.
    pub fn closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}

/// The options only the process holding the store can apply, the first given.
fn holder_option(options: &OpenOptions) -> Option<&'static str> {
    if options.refuse_unmarked_secrets == Some(true) {
        Some("refuseUnmarkedSecrets")
    } else if options.snapshot_every_events.is_some() {
        Some("snapshotEveryEvents")
    } else if options.snapshot_every_bytes.is_some() {
        Some("snapshotEveryBytes")
    } else if options.snapshot_at_turn_end == Some(true) {
        Some("snapshotAtTurnEnd")
    } else if options.replicate_to.is_some() {
        Some("replicateTo")
    } else if options.share == Some(true) {
        Some("share")
    } else {
        None
    }
}

/// A count option as a `u64`, refused when negative.
fn count(name: &str, value: Option<i64>) -> Outcome<Option<u64>> {
    value
        .map(|value| {
            u64::try_from(value).map_err(|_| {
                jobs::invalid_options(&format!("{name} must be a count (0 or more), not {value}"))
            })
        })
        .transpose()
}

/// Connects to the store served from `path`; `locked` is the open's refusal, named beside a
/// failure to connect (a socket nobody answers at: its server was killed).
fn connect_to(
    path: PathBuf,
    locked: Option<&factlog::Error>,
    options: &OpenOptions,
) -> Outcome<Shared> {
    if let Some(option) = holder_option(options) {
        return Err(jobs::invalid_options(&format!(
            "{} is served by another process: {option} is an option of the process that holds \
             the store (give it there: Store.open(dir, {{ share: true }}) or `factlog serve`), \
             not of a client; connect without it",
            path.display()
        )));
    }
    let timeout = options.timeout_ms.map(|ms| Duration::from_millis(u64::from(ms)));
    match (Remote::connect(&path, timeout), locked) {
        (Ok(remote), _) => Ok(Shared::with(path, Backend::Remote(Arc::new(remote)))),
        (Err(error @ factlog::client::ClientError::Connect { .. }), Some(locked)) => {
            let mut reply = jobs::from_error(locked);
            let message = format!("cannot open {}: {locked}; {error}", path.display());
            reply.insert("message".to_owned(), Value::from(message));
            Err(reply)
        }
        (Err(error), _) => Err(error.into_reply(None, false)),
    }
}

impl Shared {
    fn with(path: PathBuf, backend: Backend) -> Shared {
        Shared {
            path,
            backend: RwLock::new(Some(backend)),
            closing: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
            following: Mutex::new(0),
            followed: Condvar::new(),
        }
    }

    /// Stops sharing and replicating, then syncs and closes the store (or ends the
    /// connection of a client): wakes the follows waiting in process and waits for them, and
    /// empties the task slots, so that the directory is free once it returns. Idempotent.
    fn close(&self) -> Outcome<()> {
        self.closing.store(true, Ordering::SeqCst);
        if let Ok(Access::Local(store)) = self.access() {
            store.wake_waiters();
            let mut following = self.following.lock();
            while *following > 0 {
                self.followed.wait(&mut following);
            }
        }
        for slot in std::mem::take(&mut *self.tasks.lock()).iter().filter_map(Weak::upgrade) {
            slot.store(None);
        }
        let backend = self.backend.write().take();
        match backend {
            None => Ok(()),
            Some(Backend::Remote(remote)) => remote.close(),
            Some(Backend::Local { store, server, replication }) => {
                let stopped = server.map_or(Ok(()), Server::stop);
                let replicated = replication.map_or(Ok(()), |r| r.stop().map(|_| ()));
                let closed = store.close();
                stopped.and(replicated).and(closed).map_err(|e| jobs::from_error(&e))
            }
        }
    }

    /// A new slot for a task's handle, emptied by `close`.
    pub fn task_slot(&self) -> Arc<TaskSlot> {
        let slot = Arc::new(ArcSwapOption::empty());
        let mut tasks = self.tasks.lock();
        if tasks.len() >= 64 && tasks.len().is_power_of_two() {
            tasks.retain(|slot| slot.strong_count() > 0);
        }
        tasks.push(Arc::downgrade(&slot));
        slot
    }

    /// Opens the store in `path`, or connects to it when another process serves it.
    fn open(path: PathBuf, options: &OpenOptions) -> Outcome<Shared> {
        let share = options.share == Some(true);
        if !share && (options.allow_group.is_some() || options.clients_max.is_some()) {
            return Err(jobs::invalid_options(
                "allowGroup and clientsMax are options of a shared store: give share: true too",
            ));
        }
        if options.connect == Some(true) {
            return connect_to(path, None, options);
        }
        // A store another process serves now is reached through its socket at once, without
        // first waiting out the open's retries of its busy lock (`served_now`). With options
        // only a holder applies, or a socket that does not answer, it is decided below.
        if !share && holder_option(options).is_none() && served::served_now(&path).is_some() {
            let timeout = options.timeout_ms.map(|ms| Duration::from_millis(u64::from(ms)));
            if let Ok(remote) = Remote::connect(&path, timeout) {
                return Ok(Shared::with(path, Backend::Remote(Arc::new(remote))));
            }
        }
        let mut store_options = StoreOptions::new()
            .refuse_unmarked_secrets(options.refuse_unmarked_secrets == Some(true))
            .snapshot_at_turn_end(options.snapshot_at_turn_end == Some(true));
        if let Some(events) = count("snapshotEveryEvents", options.snapshot_every_events)? {
            store_options = store_options.snapshot_every_events(events);
        }
        if let Some(bytes) = count("snapshotEveryBytes", options.snapshot_every_bytes)? {
            store_options = store_options.snapshot_every_bytes(bytes);
        }
        let store = match factlog::Store::open(&path, store_options) {
            Ok(store) => store,
            Err(error) => {
                return match served::held_by_another(&path, &error) {
                    Some(Held::Served { .. }) if !share => connect_to(path, Some(&error), options),
                    Some(Held::Served { .. }) => {
                        let mut reply = jobs::from_error(&error);
                        let message = format!(
                            "cannot share {}: {error}; the process holding it shares it \
                             already: open it without share: true to connect to it",
                            path.display()
                        );
                        reply.insert("message".to_owned(), Value::from(message));
                        Err(reply)
                    }
                    Some(Held::NotServed { pid }) => {
                        let then = "Store.open connects to it";
                        let message = served::not_served_message(&path, &error, pid, then);
                        let mut reply = jobs::from_error(&error);
                        reply.insert("message".to_owned(), Value::from(message));
                        Err(reply)
                    }
                    None => Err(jobs::from_error(&error)),
                };
            }
        };
        // What fails after the open closes the store again before it is reported.
        let fail = |store: factlog::Store, error: &factlog::Error| {
            let _ = store.close();
            jobs::from_error(error)
        };
        let replication = match &options.replicate_to {
            None => None,
            Some(url) => {
                let started = factlog::replica::remote::open(url)
                    .and_then(|remote| store.replicate(remote, ReplicateOptions::new()));
                match started {
                    Ok(replication) => Some(replication),
                    Err(error) => return Err(fail(store, &error)),
                }
            }
        };
        let server = if share {
            let mut serve = ServeOptions::new().allow_group(options.allow_group);
            if let Some(clients) = options.clients_max {
                serve = serve.clients_max(clients as usize);
            }
            match store.serve(serve) {
                Ok(server) => Some(server),
                Err(error) => {
                    if let Some(replication) = replication {
                        let _ = replication.stop();
                    }
                    return Err(fail(store, &error));
                }
            }
        } else {
            None
        };
        Ok(Shared::with(path, Backend::Local { store, server, replication }))
    }
}

/// A durability tier by its name (`Durability`'s own parsing), refused as `INVALID_OPTIONS`.
pub fn durability(name: Option<&str>) -> Outcome<Option<Durability>> {
    name.map(str::parse::<Durability>)
        .transpose()
        .map_err(|message| jobs::invalid_options(&message))
}

#[napi]
impl NativeStore {
    /// Opens (or creates) the store in `path`, or connects to the process that serves it.
    #[napi(ts_return_type = "Promise<NativeStore>")]
    pub fn open(path: String, options: Option<OpenOptions>) -> AsyncTask<Job<NativeStore>> {
        let open = move || {
            let shared = Shared::open(PathBuf::from(path), &options.unwrap_or_default())?;
            Ok(NativeStore { shared: Arc::new(shared) })
        };
        // A store the program did not close is closed when Node exits normally (the event
        // loop ran out of work): what it buffered is synced and its directory freed.
        jobs::spawn_then(open, |env, store| {
            let key = Arc::as_ptr(&store.shared) as usize;
            let shared = Arc::downgrade(&store.shared);
            let hook = env.add_env_cleanup_hook(shared, |shared: Weak<Shared>| {
                if let Some(shared) = shared.upgrade() {
                    let _ = shared.close();
                }
            });
            if let Ok(hook) = hook {
                EXIT_HOOKS.with(|hooks| hooks.borrow_mut().insert(key, hook));
            }
        })
    }

    /// The store's directory.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.shared.path.display().to_string()
    }

    /// Whether `close` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.shared.backend.read().is_none()
    }

    /// Whether this handle shares its store with other processes.
    #[napi(getter)]
    pub fn sharing(&self) -> bool {
        matches!(&*self.shared.backend.read(), Some(Backend::Local { server: Some(_), .. }))
    }

    /// Whether this handle replicates its store.
    #[napi(getter)]
    pub fn replicating(&self) -> bool {
        matches!(&*self.shared.backend.read(), Some(Backend::Local { replication: Some(_), .. }))
    }

    /// The pid of the serving process when this handle is a client, else null.
    #[napi(getter)]
    pub fn served_by(&self) -> Option<i64> {
        match &*self.shared.backend.read() {
            Some(Backend::Remote(remote)) => i64::try_from(remote.server_pid()).ok(),
            _ => None,
        }
    }

    /// What the open found and did, as JSON (null for a client: the server opened it).
    #[napi]
    pub fn open_report(&self) -> Option<String> {
        let guard = self.shared.backend.read();
        let Some(Backend::Local { store, .. }) = &*guard else { return None };
        Some(store.open_report().to_json().to_string())
    }

    /// A handle on task `id`; the takeover happens at its first call, off the event loop.
    #[napi]
    pub fn task(&self, id: String) -> napi::Result<NativeTask> {
        if self.shared.backend.read().is_none() {
            return Err(jobs::rejection(&jobs::closed()));
        }
        Ok(NativeTask::new(Arc::clone(&self.shared), id))
    }

    /// Takes every task over; what recovery decided, as JSON (`factlog recover --json`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn recover(&self) -> AsyncTask<Job<String>> {
        let shared = Arc::clone(&self.shared);
        jobs::spawn(move || {
            let report = match shared.access()? {
                Access::Local(store) => store.recover().map_err(|e| jobs::from_error(&e))?,
                Access::Remote(remote) => remote.call(None, |client| client.recover(false))?,
            };
            jobs::to_json(&report)
        })
    }

    /// The ids of the tasks that have events, sorted, as JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn task_ids(&self) -> AsyncTask<Job<String>> {
        let shared = Arc::clone(&self.shared);
        jobs::spawn(move || {
            let ids = match shared.access()? {
                Access::Local(store) => store.task_ids().into_iter().map(|id| id.0).collect(),
                Access::Remote(remote) => remote.call(None, Client::task_ids)?,
            };
            jobs::to_json(&ids)
        })
    }

    /// One page of events from `fromSeq` (of `task` only, when given), as JSON: `{"events",
    /// "next_seq", "last_seq"}` (`format-spec/server.md`, `events`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn events_page(
        &self,
        from_seq: i64,
        task: Option<String>,
        limit: Option<u32>,
    ) -> AsyncTask<Job<String>> {
        let shared = Arc::clone(&self.shared);
        jobs::spawn(move || {
            let from = u64::try_from(from_seq).unwrap_or(0).max(1);
            let page = match shared.access()? {
                Access::Local(store) => {
                    pages::events_page(&store, Some(from), task.as_deref(), limit.map(u64::from))
                        .map_err(|e| jobs::from_error(&e))?
                }
                Access::Remote(remote) => remote
                    .call(task.as_deref(), |client| client.events_page(from, task.as_deref()))?,
            };
            jobs::to_json(&page)
        })
    }

    /// A follower of the store's events as they are appended (`Store.tail`).
    #[napi]
    pub fn follower(&self, task: Option<String>) -> napi::Result<crate::tail::NativeTail> {
        let remote = match self.shared.access().map_err(|reply| jobs::rejection(&reply))? {
            Access::Local(_) => None,
            Access::Remote(remote) => Some(remote.timeout()),
        };
        Ok(crate::tail::NativeTail::new(Arc::clone(&self.shared), remote, task))
    }

    /// Makes every event appended so far meet `durability` (default `"synced"`).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn flush(&self, durability: Option<String>) -> AsyncTask<Job<()>> {
        let shared = Arc::clone(&self.shared);
        jobs::spawn(move || {
            let durability = self::durability(durability.as_deref())?.unwrap_or(Durability::Synced);
            match shared.access()? {
                Access::Local(store) => store.flush(durability).map_err(|e| jobs::from_error(&e)),
                // The socket's `sync` request: synced, which meets every durability.
                Access::Remote(remote) => remote.call(None, factlog::client::Client::sync),
            }
        })
    }

    /// Stops sharing and replicating, then syncs and closes the store (or ends the
    /// connection of a client). Idempotent.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close(&self, env: Env) -> AsyncTask<Job<()>> {
        // Closed here: it needs no closing at exit (and its hook would hold it forever).
        let key = Arc::as_ptr(&self.shared) as usize;
        if let Some(hook) = EXIT_HOOKS.with(|hooks| hooks.borrow_mut().remove(&key)) {
            let _ = env.remove_env_cleanup_hook(hook);
        }
        let shared = Arc::clone(&self.shared);
        jobs::spawn(move || shared.close())
    }

    /// `close`, on the calling thread: for Node's `exit` event, where nothing asynchronous
    /// runs any more.
    #[napi]
    pub fn close_now(&self) -> napi::Result<()> {
        self.shared.close().map_err(|reply| jobs::rejection(&reply))
    }
}

/// Reads one page of a follow from a local store: waits up to `timeout` for an event.
pub fn follow_local(
    shared: &Shared,
    from: u64,
    task: Option<&str>,
    timeout: Duration,
) -> Outcome<EventsPage> {
    // Counted before `closing` is read, and `close` sets `closing` before it waits for the
    // count to fall to zero: either this follow sees `closing`, or `close` waits for it.
    *shared.following.lock() += 1;
    let followed = (|| {
        if shared.closing() {
            return Err(jobs::closed());
        }
        let Access::Local(store) = shared.access()? else {
            return Err(jobs::closed());
        };
        let stop = || shared.closing();
        pages::follow(&store, Some(from), timeout, &stop, |from| {
            pages::events_page(&store, from, task, None)
        })
        .map_err(|e| jobs::from_error(&e))
    })();
    let mut following = shared.following.lock();
    *following -= 1;
    if *following == 0 {
        shared.followed.notify_all();
    }
    followed
}

/// The state object of a task the server has no event of.
pub fn empty_state() -> Value {
    factlog::protocol::views::task_state_value(&factlog::harness::TaskState::default())
        .unwrap_or(Value::Object(Map::new()))
}
