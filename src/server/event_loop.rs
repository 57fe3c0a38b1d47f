//! The served store's event loops (`format-spec/server.md`, "One event loop"): each loop's
//! thread waits with `epoll` on the sockets of its share of the connections and runs the
//! lines each readable connection has sent, a turn of at most [`super::conn`]'s
//! `LINES_PER_TURN` lines at a time, without a thread to wake per request. Fragments, appends
//! and batches run on the loop; their `Synced` replies go through the delivering thread as
//! before ([`super::deliver`]).
//!
//! A connection that could keep the loop waiting goes on in a thread of its own for the rest
//! of its life, running the same connection code with reads and writes that block: when its
//! next line is anything but an append or a batch (a read, `follow`, an operator request, a
//! `sync`), an append that may wait for a replica or for its own sync (no deliverer), a line
//! that is not a whole request while its replies wait for a sync (or once a reply buffer's
//! worth of them waits), or when its socket did not take all of its replies (a client slow to
//! read). The whole request lines a client streams while its replies wait run on the loop,
//! their replies behind the waiting ones ([`super::deliver::Pending`]). The line it stopped at runs first in the thread. A
//! connection that ends on the loop while a reply waits for its sync, with replies its socket
//! has not taken, or with tasks to hand over (which may sync), is ended by a thread too.
//!
//! The loop keeps each connection's hello and idle bounds ([`super::socket::Deadline`]): it
//! waits no longer than the nearest one and ends the connections whose bound passed. A panic
//! while one connection is served ends that connection (its slot given back, its tasks handed
//! over) and the loop goes on. At stop it hands every connection it holds to a thread of its
//! own, which runs the lines it has sent (its input was shut down) and ends it, and waits for
//! them.

use std::collections::{HashMap, VecDeque};
use std::os::unix::net::UnixStream;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustix::event::epoll;
use rustix::fd::OwnedFd;

use super::conn::{Connection, End, Step};
use super::socket::{ClientInput, ClientOutput, Deadline};
use super::{ClientHolds, Shared, finish_client};

/// The key of the loop's own wake-up in its `epoll` set; connections are keyed by number
/// (from 1).
const WAKE_KEY: u64 = 0;

/// The longest the loop sleeps when no bound is near (it looks at the stop flag then).
const NAP: Duration = Duration::from_secs(1);

/// A connection accepted and not yet taken by its loop.
#[derive(Debug)]
pub(super) struct Arrival {
    /// The connection's number (its log name, and its key in the loop).
    pub(super) number: u64,
    /// The peer's user (its slot).
    pub(super) uid: u32,
    /// The socket, with its read timeout at the hello bound and its write timeout set.
    pub(super) stream: UnixStream,
    /// When it was accepted: its hello bound runs from then.
    pub(super) accepted: Instant,
    /// Its outbox for the deliverer (a handle of its own on the socket), when it has one.
    pub(super) outbox: Option<Arc<super::deliver::Outbox>>,
}

/// One event loop's place in the server, made when the server starts (so that a loop that
/// cannot be made fails the start): its `epoll` set, its wake-up (an `eventfd`, written when a
/// connection arrives and at stop) and the connections handed to it and not yet taken.
#[derive(Debug)]
pub(super) struct Seat {
    poll: OwnedFd,
    wake: OwnedFd,
    arrivals: Mutex<Vec<Arrival>>,
}

impl Seat {
    /// A loop's `epoll` set with its wake-up in it.
    pub(super) fn new() -> std::io::Result<Seat> {
        let poll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let flags = rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK;
        let wake = rustix::event::eventfd(0, flags)?;
        epoll::add(&poll, &wake, epoll::EventData::new_u64(WAKE_KEY), epoll::EventFlags::IN)?;
        Ok(Seat { poll, wake, arrivals: Mutex::new(Vec::new()) })
    }

    /// Hands a connection to the loop.
    pub(super) fn hand(&self, arrival: Arrival) {
        self.arrivals.lock().push(arrival);
        self.wake();
    }

    /// Wakes the loop (a connection arrived, or the server stops).
    pub(super) fn wake(&self) {
        let _ = rustix::io::write(&self.wake, &1_u64.to_ne_bytes());
    }
}

type LoopConnection<'a> = Connection<'a, ClientInput, ClientOutput, ClientHolds<'a>>;

/// A connection the loop serves.
struct Client<'a> {
    number: u64,
    uid: u32,
    stream: Arc<UnixStream>,
    deadline: Arc<Deadline>,
    connection: LoopConnection<'a>,
    /// In the queue of connections to run.
    queued: bool,
}

/// One loop's state: its seat and its connections.
struct Loop<'a> {
    shared: &'a Shared,
    seat: &'a Seat,
    clients: HashMap<u64, Client<'a>>,
    /// Connections to run: readable, or with lines read ahead when their turn ended.
    queue: VecDeque<u64>,
    /// No connection's bound passes before this.
    next_expiry: Instant,
}

/// The body of loop `index`: serves the connections handed to it until the server closes.
pub(super) fn run(shared: &Shared, index: usize) {
    let seat = &shared.loops[index];
    std::thread::scope(|scope| {
        let mut state = Loop {
            shared,
            seat,
            clients: HashMap::new(),
            queue: VecDeque::new(),
            next_expiry: Instant::now() + NAP,
        };
        let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
        loop {
            // Set after the listener ended, before the loops are woken: no connection is
            // handed to this loop after it is seen.
            let closing = shared.closing.load(Ordering::SeqCst);
            state.wait(&mut events, closing);
            for event in &events {
                match event.data.u64() {
                    WAKE_KEY => state.admit(),
                    number => state.enqueue(number),
                }
            }
            state.run_queue(scope);
            state.expire(Instant::now(), scope);
            if closing {
                state.stop(scope);
                return;
            }
        }
    });
}

impl<'a> Loop<'a> {
    /// Waits for readable sockets, no longer than the nearest bound (not at all when
    /// connections are queued or the server closes).
    fn wait(&self, events: &mut Vec<epoll::Event>, closing: bool) {
        events.clear();
        let timeout = if self.queue.is_empty() && !closing {
            self.next_expiry.saturating_duration_since(Instant::now()).min(NAP)
        } else {
            Duration::ZERO
        };
        let timeout = rustix::time::Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let buffer = rustix::buffer::spare_capacity(events);
        match epoll::wait(&self.seat.poll, buffer, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(error) => {
                (self.shared.options.log)(&format!("an event loop's wait failed: {error}"));
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Takes the connections the listener handed over.
    fn admit(&mut self) {
        let mut count = [0_u8; 8];
        let _ = rustix::io::read(&self.seat.wake, &mut count);
        let arrivals = std::mem::take(&mut *self.seat.arrivals.lock());
        for arrival in arrivals {
            let shared = self.shared;
            let options = &shared.options;
            let stream = Arc::new(arrival.stream);
            let deadline = Arc::new(Deadline::new(
                arrival.accepted,
                options.hello_timeout,
                options.idle_timeout,
            ));
            let holds =
                ClientHolds { shared, deadline: Arc::clone(&deadline), outbox: arrival.outbox };
            let input =
                ClientInput::new(Arc::clone(&stream), Arc::clone(&deadline), options.hello_timeout);
            let connection = Connection::nonblocking(
                &shared.store,
                holds,
                &shared.budget,
                input,
                ClientOutput::new(Arc::clone(&stream)),
                ClientOutput::backlog,
            );
            let number = arrival.number;
            let client =
                Client { number, uid: arrival.uid, stream, deadline, connection, queued: false };
            let added = epoll::add(
                &self.seat.poll,
                &*client.stream,
                epoll::EventData::new_u64(number),
                epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
            );
            self.next_expiry = self.next_expiry.min(client.deadline.at(Instant::now()));
            self.clients.insert(number, client);
            match added {
                // A line may already wait (sent with the hello).
                Ok(()) => self.enqueue(number),
                Err(error) => {
                    (shared.options.log)(&format!(
                        "client {number}: the event loop cannot watch its socket ({error}): it \
                         is closed"
                    ));
                    self.end_here(number, End::ReadFailed(error.into()));
                }
            }
        }
    }

    fn enqueue(&mut self, number: u64) {
        if let Some(client) = self.clients.get_mut(&number)
            && !client.queued
        {
            client.queued = true;
            self.queue.push_back(number);
        }
    }

    /// Gives each queued connection one turn.
    fn run_queue<'scope>(&mut self, scope: &'scope std::thread::Scope<'scope, '_>)
    where
        'a: 'scope,
    {
        for _ in 0..self.queue.len() {
            let Some(number) = self.queue.pop_front() else { break };
            let Some(client) = self.clients.get_mut(&number) else { continue };
            client.queued = false;
            let pid = self.shared.pid;
            let turn = catch_unwind(AssertUnwindSafe(|| client.connection.resume(pid)));
            // The idle bound may have moved nearer (the hello was answered).
            self.next_expiry = self.next_expiry.min(client.deadline.at(Instant::now()));
            match turn {
                Ok(Step::Suspended { more }) => {
                    if client.connection.backlog() > 0 {
                        // A client slow to read: it goes on in a thread, whose writes wait.
                        self.hand_to_thread(number, Then::Run, scope);
                    } else if more {
                        self.enqueue(number);
                    }
                }
                Ok(Step::Promote) => self.hand_to_thread(number, Then::Run, scope),
                Ok(Step::Ended(end)) => self.end(number, end, scope),
                Err(_) => self.failed(number, scope),
            }
        }
    }

    /// Ends the connections whose hello or idle bound passed by `now`.
    fn expire<'scope>(&mut self, now: Instant, scope: &'scope std::thread::Scope<'scope, '_>)
    where
        'a: 'scope,
    {
        if now < self.next_expiry {
            return;
        }
        let mut next = now + NAP;
        let mut passed = Vec::new();
        for (number, client) in &self.clients {
            let at = client.deadline.at(now);
            if at <= now {
                passed.push(*number);
            } else {
                next = next.min(at);
            }
        }
        self.next_expiry = next;
        for number in passed {
            let Some(client) = self.clients.get_mut(&number) else { continue };
            match catch_unwind(AssertUnwindSafe(|| client.connection.expire())) {
                Ok(end) => self.end(number, end, scope),
                Err(_) => self.failed(number, scope),
            }
        }
    }

    /// A connection has ended: it is closed here, unless its last reply waits for its sync, its
    /// socket has not taken its last replies or it has tasks to hand over (which may sync): a
    /// thread does that.
    fn end<'scope>(&mut self, number: u64, end: End, scope: &'scope std::thread::Scope<'scope, '_>)
    where
        'a: 'scope,
    {
        let Some(client) = self.clients.get(&number) else { return };
        if client.connection.unsettled() || client.connection.touched_any() {
            self.hand_to_thread(number, Then::Finish(end), scope);
        } else {
            self.end_here(number, end);
        }
    }

    /// Running a connection's line panicked: the connection ends, its slot given back and its
    /// tasks handed over.
    fn failed<'scope>(&mut self, number: u64, scope: &'scope std::thread::Scope<'scope, '_>)
    where
        'a: 'scope,
    {
        let message = "the server failed while it ran this connection's line";
        (self.shared.options.log)(&format!("client {number}: {message}"));
        self.end(number, End::Fatal { message: message.to_owned() }, scope);
    }

    /// Ends a connection on the loop: its socket closed, its tasks handed over, its slot given
    /// back.
    fn end_here(&mut self, number: u64, end: End) {
        let Some(client) = self.clients.remove(&number) else { return };
        let _ = epoll::delete(&self.seat.poll, &*client.stream);
        finish(self.shared, client, &end);
    }

    /// Moves a connection to a thread of its own, whose reads and writes block, to do `then`.
    /// Out of threads, it is closed: no connection is served to its end on the loop.
    fn hand_to_thread<'scope>(
        &mut self,
        number: u64,
        then: Then,
        scope: &'scope std::thread::Scope<'scope, '_>,
    ) where
        'a: 'scope,
    {
        let Some(client) = self.clients.remove(&number) else { return };
        let _ = epoll::delete(&self.seat.poll, &*client.stream);
        let shared = self.shared;
        let slot = Arc::new(Mutex::new(Some((client, then))));
        let taken = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name(format!("factlog-client-{number}"))
            .spawn_scoped(scope, move || {
                let handed = taken.lock().take();
                if let Some((client, then)) = handed {
                    then.run(shared, client);
                }
            });
        if let Err(error) = spawned {
            let handed = slot.lock().take();
            if let Some((client, then)) = handed {
                let message = format!(
                    "the server could not start a thread for this connection ({error}): \
                     connect again later"
                );
                (shared.options.log)(&format!("client {number}: {message}"));
                let end = match then {
                    Then::Finish(end) => end,
                    Then::Run => End::Fatal { message },
                };
                finish(shared, client, &end);
            }
        }
    }

    /// The server closes: every connection the loop holds goes to a thread of its own, which
    /// runs the lines it has sent (its input is shut down) and ends it; the scope of the loop
    /// waits for them.
    fn stop<'scope>(&mut self, scope: &'scope std::thread::Scope<'scope, '_>)
    where
        'a: 'scope,
    {
        self.admit();
        let numbers: Vec<u64> = self.clients.keys().copied().collect();
        for number in numbers {
            if let Some(client) = self.clients.get(&number) {
                let _ = client.stream.shutdown(std::net::Shutdown::Read);
            }
            self.hand_to_thread(number, Then::Run, scope);
        }
    }
}

/// What a connection handed to a thread does there.
enum Then {
    /// Runs to its end, its reads and writes blocking, the line it stopped at first.
    Run,
    /// Writes its reply that waits for a sync and those its socket has not taken yet, hands
    /// its tasks over, then ends as it ended on the loop.
    Finish(End),
}

impl Then {
    fn run(self, shared: &Shared, mut client: Client<'_>) {
        let ran = catch_unwind(AssertUnwindSafe(|| match self {
            Then::Run => run_blocking(&mut client.connection, shared.pid),
            Then::Finish(end) => {
                let (_, output) = client.connection.streams();
                output.set_blocking();
                client.connection.settle(end)
            }
        }));
        let end = ran.unwrap_or_else(|_| {
            let message = "the server failed while it ran this connection's line";
            (shared.options.log)(&format!("client {}: {message}", client.number));
            End::Fatal { message: message.to_owned() }
        });
        finish(shared, client, &end);
    }
}

/// Closes an ended connection: its socket, its tasks handed over, its slot given back (also
/// when the hand-over panics: that is logged, and the loop goes on).
fn finish(shared: &Shared, client: Client<'_>, end: &End) {
    let Client { number, uid, stream, connection, .. } = client;
    let touched = connection.into_touched();
    let finished = catch_unwind(AssertUnwindSafe(|| {
        finish_client(shared, number, uid, &stream, end, touched)
    }));
    if finished.is_err() {
        (shared.options.log)(&format!("client {number}: handing its tasks over failed"));
    }
}

/// Runs a connection with reads and writes that block, the line it stopped at first, until
/// it ends.
fn run_blocking(connection: &mut LoopConnection<'_>, pid: u32) -> End {
    connection.set_blocking();
    let (input, output) = connection.streams();
    input.set_blocking();
    output.set_blocking();
    match connection.resume(pid) {
        Step::Ended(end) => end,
        // Not reached: a connection that blocks neither suspends nor is promoted.
        Step::Suspended { .. } | Step::Promote => End::Closed,
    }
}
