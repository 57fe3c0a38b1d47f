//! A served store: a process that has a [`Store`] open shares it with other processes of the
//! same machine over a Unix domain socket, `DIR/factlog.sock` (`format-spec/server.md`).
//!
//! [`Store::serve`] starts a listener thread and returns a [`Server`] handle; dropping the
//! handle (or [`Server::stop`]) stops it: no new connection is taken, every connection
//! finishes the request it is running, gets its reply, and is closed. `factlog serve DIR` is
//! the same as a process of its own. Clients connect with [`crate::client::Client`].
//!
//! Every request runs through the library's protocol module ([`crate::protocol`]) on the
//! very `Store` of the sharing process, as `factlog emit` runs it: the same checks, the same
//! replies, one compare-and-set per task and one group commit for every client.
//!
//! - **Security.** The socket file is created mode 0600 (0660 with
//!   [`ServeOptions::allow_group`]) in the store directory, which must not be writable by
//!   group or others. Each peer's credentials (`SO_PEERCRED`) are checked at accept: the
//!   server's own user, or the allowed group (the peer's primary group), else it is answered
//!   `PERMISSION_DENIED` naming the reason and closed.
//! - **Event loops.** One thread a core serves its share of the connections ([`event_loop`]):
//!   it runs the lines of each connection whose socket is readable, without a thread to wake
//!   per request. A connection whose next line could keep it waiting (a read, `follow`, an
//!   operator request) or whose client is slow to read goes on in a thread of its own.
//! - **Bounds.** At most [`ServeOptions::clients_max`] connections (the next is answered
//!   `SERVER_BUSY`); one request in flight per connection (the others wait in the socket,
//!   which pushes back on the client); bounded line, input and reply buffers, and a budget of
//!   memory for long requests that all connections share ([`lines`]); a client that stops
//!   reading is disconnected once a reply waits [`ServeOptions::write_timeout`] for it, and
//!   never holds a lock meanwhile.
//! - **Holders.** Each connection is a holder of the tasks it appends to: when the last
//!   connection that touched a task is gone, the task is handed over at once
//!   ([`Store::release_task`]): the calls it left open get `tool/outcome_unknown`, its
//!   one-time authority expires.

pub mod conn;
mod deliver;
mod event_loop;
mod heap;
pub mod lines;
mod socket;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::limits::{
    SERVER_CLIENTS_MAX, SERVER_EVENT_LOOPS_MAX, SERVER_HELLO_TIMEOUT_MS_DEFAULT,
    SERVER_IDLE_TIMEOUT_MS_DEFAULT, SERVER_REQUEST_BYTES_SHARED, SERVER_SLOTS_SHARE_DENOMINATOR,
    SERVER_SLOTS_SHARE_NUMERATOR, SERVER_WRITE_TIMEOUT_MS_DEFAULT,
};
use crate::protocol::reply::error_object;
use crate::{Durability, Store};
use parking_lot::Mutex;

use conn::{End, Holds};
use deliver::{Deliverer, Outbox};
use event_loop::{Arrival, Seat};
use lines::RequestBudget;
use socket::Deadline;

pub use crate::fs::lock_holder;
pub use crate::harness::{SOCKET_FILE, socket_path};

pub use crate::protocol::session::{
    CODE_PERMISSION_DENIED, CODE_SERVER_BUSY, SERVER_PROTOCOL_VERSION,
};

/// Options of a served store.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    allow_group: Option<u32>,
    clients_max: usize,
    write_timeout: Duration,
    hello_timeout: Duration,
    idle_timeout: Duration,
    log: fn(&str),
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions::new()
    }
}

impl ServeOptions {
    /// The defaults: the server's own user only, [`SERVER_CLIENTS_MAX`] clients, a write
    /// timeout of [`SERVER_WRITE_TIMEOUT_MS_DEFAULT`] ms, no log.
    #[must_use]
    pub fn new() -> ServeOptions {
        ServeOptions {
            allow_group: None,
            clients_max: SERVER_CLIENTS_MAX,
            write_timeout: Duration::from_millis(SERVER_WRITE_TIMEOUT_MS_DEFAULT),
            hello_timeout: Duration::from_millis(SERVER_HELLO_TIMEOUT_MS_DEFAULT),
            idle_timeout: Duration::from_millis(SERVER_IDLE_TIMEOUT_MS_DEFAULT),
            log: |_| {},
        }
    }

    /// Also accepts peers whose primary group is `gid` (the socket file is then mode 0660
    /// and owned by that group). Default: none.
    #[must_use]
    pub fn allow_group(mut self, gid: Option<u32>) -> ServeOptions {
        self.allow_group = gid;
        self
    }

    /// The most clients served at once, at least 1 and at most [`SERVER_CLIENTS_MAX`].
    #[must_use]
    pub fn clients_max(mut self, clients: usize) -> ServeOptions {
        self.clients_max = clients.clamp(1, SERVER_CLIENTS_MAX);
        self
    }

    /// How long a reply may wait for a client that does not read before the client is
    /// disconnected (at least 1 ms). Default: [`SERVER_WRITE_TIMEOUT_MS_DEFAULT`] ms.
    #[must_use]
    pub fn write_timeout(mut self, timeout: Duration) -> ServeOptions {
        self.write_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long a new connection may take to send its hello before it is closed (at least
    /// 1 ms). Default: [`SERVER_HELLO_TIMEOUT_MS_DEFAULT`] ms.
    #[must_use]
    pub fn hello_timeout(mut self, timeout: Duration) -> ServeOptions {
        self.hello_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long a connection may stay without sending a request before it is closed and its
    /// tasks handed over (at least 1 ms). Default: [`SERVER_IDLE_TIMEOUT_MS_DEFAULT`] ms.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Duration) -> ServeOptions {
        self.idle_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Where the server writes one line per connection event (accepted, refused, ended and
    /// how). Default: nowhere.
    #[must_use]
    pub fn log(mut self, log: fn(&str)) -> ServeOptions {
        self.log = log;
        self
    }
}

/// The bookkeeping shared by the listener and every connection.
struct Shared {
    store: Store,
    options: ServeOptions,
    path: PathBuf,
    stopping: AtomicBool,
    clients: AtomicUsize,
    /// Open connections per peer user, for the fair share of slots.
    per_user: Mutex<HashMap<u32, usize>>,
    next_client: AtomicU64,
    /// Each open connection's outbox (a handle of its own on its socket), to shut its input
    /// down at stop.
    outboxes: Mutex<HashMap<u64, Arc<Outbox>>>,
    /// The event loops' places: each one's `epoll` set, wake-up and arrivals.
    loops: Vec<Seat>,
    /// Set at stop once the listener has ended: the loops end their connections and return.
    closing: AtomicBool,
    /// How many open connections touched each task.
    holders: Mutex<HashMap<String, usize>>,
    /// The memory for long requests that the connections share.
    budget: RequestBudget,
    /// The thread that leads the group commits of the connections' `Synced` appends and
    /// writes their replies.
    deliverer: Deliverer,
    uid: u32,
    pid: u32,
}

/// A running served store: stops on drop ([`Server::stop`]).
pub struct Server {
    shared: Arc<Shared>,
    listener: Option<JoinHandle<()>>,
    delivering: Option<JoinHandle<()>>,
    looping: Vec<JoinHandle<()>>,
    /// The listening socket, to wake the blocked `accept` at stop.
    waker: UnixListener,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("path", &self.shared.path).finish_non_exhaustive()
    }
}

impl Store {
    /// Shares this store with other processes of the machine over `DIR/factlog.sock`
    /// (`format-spec/server.md`) until the returned [`Server`] is dropped. The server holds
    /// a clone of this handle: drop (or [`Server::stop`]) it before [`Store::close`], or the
    /// store stays open (and locked) for the server. A socket file left
    /// by a server that was killed is replaced (this handle holds the directory lock, so no
    /// other server can be using it). With glibc, serving fixes the allocator's mmap and trim
    /// thresholds for the whole process at their defaults (128 KiB each), so that the memory
    /// of long requests goes back to the system once they are answered
    /// (`format-spec/server.md`, "Memory").
    ///
    /// # Errors
    ///
    /// [`crate::ErrorKind::ReadOnly`] for a read-only store;
    /// [`crate::ErrorKind::InvalidOptions`] when the store directory is writable by group
    /// or others (another user could replace the socket: `chmod go-w DIR`); an I/O error
    /// when the socket cannot be created.
    pub fn serve(&self, options: ServeOptions) -> Result<Server> {
        Server::start(self, options)
    }
}

impl Server {
    fn start(store: &Store, options: ServeOptions) -> Result<Server> {
        if store.log().is_read_only() {
            return Err(crate::ErrorKind::ReadOnly.into());
        }
        let dir = store.dir();
        let meta = std::fs::metadata(dir).map_err(|e| Error::io("stat", dir, e))?;
        let mode = meta.permissions().mode();
        if mode & 0o022 != 0 {
            return Err(Error::invalid_options(format!(
                "the store directory {} is writable by group or others (mode {:o}): another \
                 user could replace its socket; run `chmod go-w {}` and serve again",
                dir.display(),
                mode & 0o7777,
                dir.display()
            )));
        }
        let path = socket_path(dir);
        // The socket is bound and restricted under a name of its own, then renamed to its
        // place: a client that finds `factlog.sock` finds it listening and with its final
        // mode, never in the moment between bind and listen (refused) or before its mode is
        // set. The store's lock keeps a second server from using the same name meanwhile; a
        // stale socket of a server that died is replaced by the rename.
        let binding = path.with_extension("sock.new");
        match std::fs::remove_file(&binding) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(Error::io("remove a stale socket", &binding, error)),
        }
        let listener = UnixListener::bind(&binding).map_err(|e| Error::io("bind", &binding, e))?;
        // The memory of long requests goes back to the system once they are answered.
        heap::return_large_blocks();
        if let Err(error) = restrict_socket(&binding, options.allow_group) {
            let _ = std::fs::remove_file(&binding);
            return Err(error);
        }
        if let Err(error) = std::fs::rename(&binding, &path) {
            let _ = std::fs::remove_file(&binding);
            return Err(Error::io("move the socket into place", &path, error));
        }
        let write_timeout = options.write_timeout;
        // One event loop a core: each runs its connections' lines on one thread.
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let loops = match (0..cores.clamp(1, SERVER_EVENT_LOOPS_MAX))
            .map(|_| Seat::new())
            .collect::<std::io::Result<Vec<Seat>>>()
        {
            Ok(loops) => loops,
            Err(error) => {
                let _ = std::fs::remove_file(&path);
                return Err(Error::io("create the event loops' epoll sets", &path, error));
            }
        };
        let shared = Arc::new(Shared {
            store: store.clone(),
            options,
            path,
            stopping: AtomicBool::new(false),
            clients: AtomicUsize::new(0),
            per_user: Mutex::new(HashMap::new()),
            next_client: AtomicU64::new(1),
            outboxes: Mutex::new(HashMap::new()),
            loops,
            closing: AtomicBool::new(false),
            holders: Mutex::new(HashMap::new()),
            budget: RequestBudget::new(SERVER_REQUEST_BYTES_SHARED),
            deliverer: Deliverer::new(write_timeout),
            uid: rustix::process::geteuid().as_raw(),
            pid: std::process::id(),
        });
        let waker =
            listener.try_clone().map_err(|e| Error::io("dup the socket", &shared.path, e))?;
        let delivering = Arc::clone(&shared);
        let delivering = std::thread::Builder::new()
            .name("factlog-deliver".to_owned())
            .spawn(move || deliver(&delivering))
            .map_err(|e| Error::io("spawn the delivering thread", &shared.path, e))?;
        let mut looping = Vec::new();
        for index in 0..shared.loops.len() {
            let serving = Arc::clone(&shared);
            match std::thread::Builder::new()
                .name("factlog-loop".to_owned())
                .spawn(move || event_loop::run(&serving, index))
            {
                Ok(handle) => looping.push(handle),
                Err(e) => {
                    abandon_start(&shared, looping, delivering);
                    return Err(Error::io("spawn an event loop's thread", &shared.path, e));
                }
            }
        }
        let accepting = Arc::clone(&shared);
        let listener = match std::thread::Builder::new()
            .name("factlog-serve".to_owned())
            .spawn(move || accept_loop(&accepting, &listener))
        {
            Ok(listener) => listener,
            Err(e) => {
                abandon_start(&shared, looping, delivering);
                return Err(Error::io("spawn the listener thread", &shared.path, e));
            }
        };
        (shared.options.log)(&format!(
            "serving {} at {}",
            shared.store.dir().display(),
            shared.path.display()
        ));
        Ok(Server {
            shared,
            listener: Some(listener),
            delivering: Some(delivering),
            looping,
            waker,
        })
    }

    /// The socket's path (`DIR/factlog.sock`).
    #[must_use]
    pub fn socket_path(&self) -> &Path {
        &self.shared.path
    }

    /// The number of clients connected now.
    #[must_use]
    pub fn clients(&self) -> usize {
        self.shared.clients.load(Ordering::Acquire)
    }

    /// Stops serving: takes no new connection, lets each connection finish the request it
    /// is running and write its reply, closes them, hands their tasks over, removes the
    /// socket file and syncs the store. The store stays open for the caller.
    ///
    /// # Errors
    ///
    /// When the final sync fails.
    pub fn stop(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        let Some(listener) = self.listener.take() else { return Ok(()) };
        let shared = &self.shared;
        shared.stopping.store(true, Ordering::SeqCst);
        // A connection waiting in `follow` sees `stopping` and answers its (empty) page.
        shared.store.log().wake_waiters();
        // Wake the accept: shutting a listening socket down makes a blocked `accept` fail on
        // Linux; a connection of our own does it elsewhere. The loop then sees `stopping`.
        let _ = rustix::net::shutdown(&self.waker, rustix::net::Shutdown::Read);
        drop(UnixStream::connect(&shared.path));
        let _ = listener.join();
        // Every connection ends after the request it is running: its input is shut down.
        for outbox in shared.outboxes.lock().values() {
            outbox.shutdown(std::net::Shutdown::Read);
        }
        // The loops end their connections, and wait for those they moved to threads.
        close_loops(shared, std::mem::take(&mut self.looping));
        // Every connection wrote its own waiting reply as it ended.
        shared.deliverer.stop();
        if let Some(delivering) = self.delivering.take() {
            let _ = delivering.join();
        }
        let _ = std::fs::remove_file(&shared.path);
        (shared.options.log)("stopped serving");
        shared.store.flush(Durability::Synced)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// The delivering thread's body. Should it panic, every connection is woken to write its
/// own waiting reply, and from then on connections wait for their syncs themselves.
fn deliver(shared: &Shared) {
    let run = || shared.deliverer.run(&shared.store, shared.options.log);
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).is_err() {
        (shared.options.log)("the delivering thread failed: connections sync for themselves");
        shared.deliverer.died();
        for outbox in shared.outboxes.lock().values() {
            outbox.shutdown(std::net::Shutdown::Read);
        }
    }
}

/// Undoes a start that failed after its threads began: the loops and the delivering thread
/// end, and the socket file goes.
fn abandon_start(shared: &Shared, looping: Vec<JoinHandle<()>>, delivering: JoinHandle<()>) {
    close_loops(shared, looping);
    shared.deliverer.stop();
    let _ = delivering.join();
    let _ = std::fs::remove_file(&shared.path);
}

/// Ends the event loops (once no connection can be handed to them any more): each ends its
/// connections and waits for those it moved to threads.
fn close_loops(shared: &Shared, looping: Vec<JoinHandle<()>>) {
    shared.closing.store(true, Ordering::SeqCst);
    for seat in &shared.loops {
        seat.wake();
    }
    for handle in looping {
        let _ = handle.join();
    }
}

/// Mode 0600, or 0660 owned by the allowed group (the serving user must be a member).
fn restrict_socket(path: &Path, allow_group: Option<u32>) -> Result<()> {
    let file_mode = if allow_group.is_some() { 0o660 } else { 0o600 };
    if let Some(gid) = allow_group {
        let group = rustix::fs::Gid::from_raw(gid);
        rustix::fs::chown(path, None, Some(group)).map_err(|e| {
            Error::invalid_options(format!(
                "the socket {} cannot be given to group {gid} ({e}): the serving user must be \
                 a member of the group given to --allow-group",
                path.display()
            ))
        })?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(file_mode))
        .map_err(|e| Error::io("chmod socket", path, e))
}

fn accept_loop(shared: &Arc<Shared>, listener: &UnixListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let stream = match stream {
            Ok(stream) => stream,
            Err(_) if shared.stopping.load(Ordering::Acquire) => return,
            Err(error) => {
                (shared.options.log)(&format!("accept failed: {error}"));
                // Out of descriptors, most likely: let connections end before trying again.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        accept(shared, stream);
    }
}

/// Checks the peer and the client count, then hands the connection to an event loop.
fn accept(shared: &Arc<Shared>, mut stream: UnixStream) {
    let accepted = Instant::now();
    let _ = stream.set_write_timeout(Some(shared.options.write_timeout));
    // A connection that says nothing holds a slot for nothing: closed after the hello bound.
    let _ = stream.set_read_timeout(Some(shared.options.hello_timeout));
    let uid = match check_peer(shared, &stream) {
        Ok(uid) => uid,
        Err(reason) => {
            (shared.options.log)(&format!("refused a client: {reason}"));
            refuse(&mut stream, CODE_PERMISSION_DENIED, &reason);
            return;
        }
    };
    if let Err(reason) = take_slot(shared, uid) {
        (shared.options.log)(&format!("refused a client: {reason}"));
        refuse(&mut stream, CODE_SERVER_BUSY, &reason);
        return;
    }
    let number = shared.next_client.fetch_add(1, Ordering::Relaxed);
    // A handle of its own on the socket: for the stop to shut its input down, and for the
    // delivering thread to write its replies. Without one (out of descriptors) the
    // connection waits for its syncs itself.
    let outbox = stream.try_clone().ok().map(|clone| Arc::new(Outbox::new(clone)));
    if let Some(outbox) = &outbox {
        shared.outboxes.lock().insert(number, Arc::clone(outbox));
    }
    let seat = &shared.loops[number as usize % shared.loops.len()];
    seat.hand(Arrival { number, uid, stream, accepted, outbox });
}

/// The most connections one user may hold: every slot when only the server's user is
/// admitted, a share of them when another group is (`limits::SERVER_SLOTS_SHARE_*`).
fn slots_per_user(shared: &Shared) -> usize {
    let max = shared.options.clients_max;
    if shared.options.allow_group.is_none() {
        return max;
    }
    (max * SERVER_SLOTS_SHARE_NUMERATOR / SERVER_SLOTS_SHARE_DENOMINATOR).max(1)
}

/// Takes a client slot for a connection of user `uid`, or says why there is none.
fn take_slot(shared: &Shared, uid: u32) -> std::result::Result<(), String> {
    let mut per_user = shared.per_user.lock();
    let held = per_user.get(&uid).copied().unwrap_or(0);
    let share = slots_per_user(shared);
    // With one user admitted its share is every slot: the server's limit says it below.
    if share < shared.options.clients_max && held >= share {
        return Err(format!(
            "user {uid} holds {held} connections, its share of the server's {} slots: retry once \
             one of them has closed (a connection that sends no hello within {} ms, or no request \
             within {} ms, is closed)",
            shared.options.clients_max,
            shared.options.hello_timeout.as_millis(),
            shared.options.idle_timeout.as_millis()
        ));
    }
    let clients = shared.clients.fetch_add(1, Ordering::AcqRel);
    if clients >= shared.options.clients_max {
        shared.clients.fetch_sub(1, Ordering::AcqRel);
        let higher = if shared.options.clients_max < SERVER_CLIENTS_MAX {
            format!(", or serve with a higher --clients-max (at most {SERVER_CLIENTS_MAX})")
        } else {
            format!(" ({SERVER_CLIENTS_MAX} clients is the most a server serves at once)")
        };
        return Err(format!(
            "the server serves {} already, its limit: retry once one has closed its \
             connection (a connection that sends no hello within {} ms is closed){higher}",
            crate::error::counted(shared.options.clients_max as u64, "client"),
            shared.options.hello_timeout.as_millis()
        ));
    }
    *per_user.entry(uid).or_insert(0) += 1;
    Ok(())
}

fn give_slot_back(shared: &Shared, uid: u32) {
    let mut per_user = shared.per_user.lock();
    if let Some(held) = per_user.get_mut(&uid) {
        *held -= 1;
        if *held == 0 {
            per_user.remove(&uid);
        }
    }
    shared.clients.fetch_sub(1, Ordering::AcqRel);
}

/// Whether the peer may use the store (its own user, or the allowed group): its user.
fn check_peer(shared: &Shared, stream: &UnixStream) -> std::result::Result<u32, String> {
    let cred = rustix::net::sockopt::socket_peercred(stream)
        .map_err(|error| format!("its credentials cannot be read ({error})"))?;
    let (uid, gid, pid) = (cred.uid.as_raw(), cred.gid.as_raw(), cred.pid.as_raw_nonzero());
    if uid == shared.uid || shared.options.allow_group == Some(gid) {
        return Ok(uid);
    }
    Err(format!(
        "process {pid} runs as user {uid} (group {gid}) and the store is served to user {} \
         {}: connect as that user, or serve with --allow-group naming the client's group",
        shared.uid,
        shared
            .options
            .allow_group
            .map_or_else(|| "only".to_owned(), |group| format!("and group {group} only")),
    ))
}

fn refuse(stream: &mut UnixStream, code: &str, reason: &str) {
    let reply = error_object(None, code, reason);
    if let Ok(mut line) = serde_json::to_vec(&reply) {
        line.push(b'\n');
        let _ = stream.write_all(&line);
    }
}

/// A served connection's part of the server's bookkeeping: the tasks it touches, its bounds
/// ([`Deadline`]), and its outbox for the replies that wait for a group commit (none when its
/// socket could not be duplicated).
struct ClientHolds<'a> {
    shared: &'a Shared,
    deadline: Arc<Deadline>,
    outbox: Option<Arc<Outbox>>,
}

impl Holds for ClientHolds<'_> {
    fn touch(&self, task: &str) {
        *self.shared.holders.lock().entry(task.to_owned()).or_insert(0) += 1;
    }

    fn clients(&self) -> Option<(usize, usize)> {
        Some((self.shared.outboxes.lock().len(), self.shared.options.clients_max))
    }

    fn holders(&self, task: &str) -> Option<usize> {
        Some(self.shared.holders.lock().get(task).copied().unwrap_or(0))
    }

    fn stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::SeqCst)
    }

    fn hello_done(&self) {
        // From now on the bound is the idle one.
        self.deadline.restart(self.shared.options.idle_timeout);
    }

    fn request_done(&self) {
        self.deadline.request_done();
    }

    fn budget(&self) -> &RequestBudget {
        &self.shared.budget
    }

    fn outbox(&self) -> Option<(&Deliverer, &Arc<Outbox>)> {
        self.outbox.as_ref().map(|outbox| (&self.shared.deliverer, outbox))
    }
}

/// Ends a connection that has ended: its socket is closed, the tasks no other connection
/// holds are handed over, its end is logged and its slot given back.
fn finish_client(
    shared: &Shared,
    number: u64,
    uid: u32,
    stream: &UnixStream,
    end: &End,
    touched: HashSet<String>,
) {
    let _ = stream.shutdown(std::net::Shutdown::Both);
    shared.outboxes.lock().remove(&number);
    // Its slot goes back whatever happens to the hand-over below.
    let _slot = SlotBack(shared, uid);
    // The tasks no other connection holds are handed over now: what this client left open
    // gets explicit outcomes, its one-time authority expires.
    let mut released = 0;
    for task in touched {
        // The hand-over runs under the holders' lock: a connection touching the task now
        // waits for it and appends after the repair, never before it.
        let mut holders = shared.holders.lock();
        match holders.get_mut(&task) {
            Some(count) if *count > 1 => {
                *count -= 1;
                continue;
            }
            _ => {
                holders.remove(&task);
            }
        }
        // A panic here fails this task's hand-over only: the others are still handed over.
        let release = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.store.release_task(&task)
        }));
        match release {
            Ok(Ok(())) => released += 1,
            Ok(Err(error)) => {
                (shared.options.log)(&format!(
                    "client {number}: handing task {task:?} over failed: {error}"
                ));
            }
            Err(_) => {
                (shared.options.log)(&format!(
                    "client {number}: handing task {task:?} over failed"
                ));
            }
        }
        drop(holders);
    }
    let how = match end {
        End::Closed => "closed".to_owned(),
        End::PartialLineDiscarded { bytes } => {
            format!(
                "its input ended mid-line ({} discarded)",
                crate::error::counted(*bytes as u64, "byte")
            )
        }
        End::HelloRefused => "its hello was refused".to_owned(),
        End::HelloTimedOut => {
            format!("it sent no hello within {} ms", shared.options.hello_timeout.as_millis())
        }
        End::IdleTimedOut => {
            format!("it sent no request for {} ms", shared.options.idle_timeout.as_millis())
        }
        End::LineTooLong => "it sent a line over the limit".to_owned(),
        End::Fatal { message } => format!("the store failed: {message}"),
        End::ReadFailed(error) => format!("reading failed: {error}"),
        End::WriteFailed(error) => {
            format!("writing a reply failed (it stopped reading or left): {error}")
        }
    };
    (shared.options.log)(&format!(
        "client {number} disconnected: {how}; {released} task(s) handed over"
    ));
}

/// Gives a connection's slot back when dropped (also when the hand-over of its tasks panics).
struct SlotBack<'a>(&'a Shared, u32);

impl Drop for SlotBack<'_> {
    fn drop(&mut self) {
        give_slot_back(self.0, self.1);
    }
}
