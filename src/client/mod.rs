//! A client of a served store (`format-spec/server.md`): a process that does not hold the
//! store appends to it and reads from it through the socket of the process that does
//! ([`crate::Store::serve`], `factlog serve DIR`).
//!
//! Every call sends one request line and waits for its reply (`history` one per page): the
//! replies are those of `format-spec/protocol.md`, turned into the library's types. An error
//! reply is a [`ClientError::Refused`] (or [`ClientError::StaleRevision`]) and means nothing
//! was written ([`ClientError::PipelinedRefused`] says which request still ran). Fragments
//! ([`Client::delta`]) and buffered events ([`Client::append_pipelined`]) are pipelined:
//! buffered and sent without waiting, their replies read in bulk. A server that goes away is
//! a [`ClientError::Disconnected`] at once, never a hang (a server that is alive but stopped,
//! say by `SIGSTOP`, is waited for, as an embedded store waits for a stalled disk, unless
//! [`Client::set_read_timeout`] says how long); the
//! request it was running may or may not have been written: re-read the task. [`Client::task`]
//! gives a [`RemoteTask`], a handle with the methods of an embedded [`crate::Task`].
//!
//! ```no_run
//! use factlog::client::Client;
//! use factlog::harness::Body;
//! use factlog::harness::event::TurnStart;
//! use factlog::AppendOptions;
//!
//! let mut client = Client::connect("/var/lib/agent/store").expect("a server");
//! let revision = client.revision("t1").expect("revision");
//! let body = Body::TurnStart(TurnStart::default());
//! client.append("t1", &body, AppendOptions::expecting(revision)).expect("appended");
//! ```

pub mod answer;
mod follow;
mod line;
mod reply;
pub mod served;
mod task;

pub use crate::protocol::op::EventsPage;
pub use follow::Follow;
pub use task::RemoteTask;

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::harness::PurgeReport;
use crate::harness::codec;
use crate::harness::recovery::RecoveryReport;
use crate::harness::socket_path;
use crate::harness::{Body, CallId, TaskState};
use crate::limits::{CLIENT_DELTA_BUFFER_BYTES, CLIENT_REPLY_SPIN_US, SERVER_LINE_BYTES_MAX};
use crate::protocol::acks::{self, AckMode, KEY_COVERS};
use crate::protocol::delta_line;
use crate::protocol::op::{
    self, CheckpointReply, ClientsReply, HistoryPage, Op, RecoverReply, RequestedDurability,
    RevisionReply, StateReply, TasksPage,
};
use crate::protocol::reply::error_object;
use crate::protocol::request::{KEY_DURABILITY, KEY_EXPECTED_REVISION, KEY_ID, KEY_TASK, KEY_TYPE};
use crate::protocol::session::SERVER_PROTOCOL_VERSION;
use crate::protocol::session::{KEY_ACKS, KEY_HELLO, KEY_TEXTS, KEY_VERSION};
use crate::{AppendOptions, Appended, Durability, Seq};
use line::{Head, ReplyRead};

/// What went wrong talking to a served store.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// No server answers at the socket.
    Connect {
        /// The socket.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The server refused the connection at its start (`PERMISSION_DENIED`, `SERVER_BUSY`,
    /// `UNSUPPORTED_VERSION`, `HELLO_REQUIRED`).
    Handshake {
        /// The error code.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The request was refused and nothing was written: its error code and message
    /// (`format-spec/protocol.md`, "Replies"), and the whole reply for the extra keys.
    Refused {
        /// The error code, such as `INVALID_EVENT`.
        code: String,
        /// The server's message, saying what to do.
        message: String,
        /// The reply object.
        reply: Map<String, Value>,
    },
    /// A compare-and-set failed: the task's revision is `actual`, not `expected`; nothing
    /// was written. Re-read the task and decide.
    StaleRevision {
        /// The revision the request expected.
        expected: u64,
        /// The task's revision.
        actual: u64,
    },
    /// A fragment ([`Client::delta`]) or pipelined append ([`Client::append_pipelined`]) sent
    /// before the request that returned this was refused (its code and message: it was not
    /// written). That request was still sent and run: `request_reply` is its own reply (a
    /// written reply, or an error reply), so nothing it did is hidden. Re-read the task.
    PipelinedRefused {
        /// The refused fragment's error code.
        code: String,
        /// The server's message for the fragment.
        message: String,
        /// The fragment's whole error reply (the fields of its code).
        reply: Box<Map<String, Value>>,
        /// The reply to the request that returned this error.
        request_reply: Box<Map<String, Value>>,
    },
    /// The server went away (killed, stopped, or it closed the connection); the request
    /// in flight may or may not have been written.
    Disconnected {
        /// The socket.
        path: PathBuf,
        /// What was seen.
        detail: String,
    },
    /// No reply came within the timeout set with [`Client::set_read_timeout`] (a server that
    /// is alive but stopped, or a stalled disk). The request may or may not have been written,
    /// and its reply may still come: this client is abandoned (every later call fails with
    /// [`ClientError::Disconnected`]); connect again and re-read the task.
    TimedOut {
        /// The socket.
        path: PathBuf,
        /// The timeout that passed.
        waited: std::time::Duration,
    },
    /// A reply that this client cannot read.
    Protocol {
        /// What is wrong with it.
        what: String,
    },
}

impl ClientError {
    /// The protocol error code, for an error the server replied.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Handshake { code, .. }
            | ClientError::Refused { code, .. }
            | ClientError::PipelinedRefused { code, .. } => Some(code),
            ClientError::StaleRevision { .. } => Some("STALE_REVISION"),
            _ => None,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect { path, source } => write!(
                f,
                "no served store answers at {} ({source}): share the store from the process \
                 that holds it (Store::serve) or run `factlog serve DIR`",
                path.display()
            ),
            ClientError::Handshake { code, message } => {
                write!(f, "the server refused the connection ({code}): {message}")
            }
            ClientError::Refused { code, message, .. } => write!(f, "{code}: {message}"),
            ClientError::PipelinedRefused { code, message, request_reply, .. } => {
                let answered =
                    request_reply.get("error").and_then(Value::as_str).unwrap_or("written");
                write!(
                    f,
                    "{code}: {message} (a pipelined assistant/delta fragment or append, not \
                     written; the request sent after it still ran and was answered {answered}: \
                     its reply is in request_reply; re-read the task)"
                )
            }
            ClientError::StaleRevision { expected, actual } => write!(
                f,
                "STALE_REVISION: expected revision {expected}, the task is at {actual}; nothing \
                 was written: re-read the task and decide"
            ),
            ClientError::Disconnected { path, detail } => write!(
                f,
                "the served store at {} went away ({detail}): the request in flight may or may \
                 not have been written; reconnect once it is served again and re-read the task",
                path.display()
            ),
            ClientError::TimedOut { path, waited } => write!(
                f,
                "the served store at {} did not answer within {waited:?}: the request may or may \
                 not have been written; this connection is abandoned: connect again and re-read \
                 the task",
                path.display()
            ),
            ClientError::Protocol { what } => {
                write!(f, "unreadable reply from the served store: {what}")
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// A connection to a served store.
///
/// [`Client::delta`] is pipelined: fragments are written into a buffer of this client and
/// sent without waiting for their replies, which are read (and checked) in bulk when the
/// buffer is full and before any other request; dropping the client sends what is buffered.
#[derive(Debug)]
pub struct Client {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    server_pid: u64,
    line: Vec<u8>,
    /// Delta request lines not sent yet (at most [`CLIENT_DELTA_BUFFER_BYTES`] and a line).
    deltas: Vec<u8>,
    /// Deltas sent or buffered whose replies are not read yet.
    pending: u64,
    /// The server offers fragments lines (its hello's `texts`).
    texts: bool,
    /// The length of `deltas` when its last line is a fragments line of `texts_task`, which
    /// the next fragment of that task joins.
    texts_end: Option<usize>,
    texts_task: String,
    /// A fragment refused, read with the replies before a request's: returned by that
    /// request once its own reply is read.
    delta_error: Option<ClientError>,
    /// How long a read waits for a reply ([`Client::set_read_timeout`]); `None`: no limit.
    read_timeout: Option<std::time::Duration>,
    /// Set when a read timed out: the replies are out of step, every later call fails.
    abandoned: bool,
    /// The acknowledgements the server granted this connection at its hello.
    acks: AckMode,
}

impl Client {
    /// Connects to the store served from directory `dir` (its socket `DIR/factlog.sock`)
    /// and says hello.
    ///
    /// # Errors
    ///
    /// [`ClientError::Connect`] when nothing is served there, [`ClientError::Handshake`]
    /// when the server refuses this client.
    pub fn connect(dir: impl AsRef<Path>) -> Result<Client, ClientError> {
        Client::connect_socket(socket_path(dir.as_ref()))
    }

    /// Connects to the socket at `path` and says hello.
    ///
    /// # Errors
    ///
    /// As [`Client::connect`].
    pub fn connect_socket(path: impl Into<PathBuf>) -> Result<Client, ClientError> {
        Client::connect_socket_timeout(path, None)
    }

    /// [`Client::connect`] with a read timeout ([`Client::set_read_timeout`]) that also
    /// bounds the wait for the server's hello.
    ///
    /// # Errors
    ///
    /// As [`Client::connect`]; [`ClientError::TimedOut`] when the hello does not come in time.
    pub fn connect_timeout(
        dir: impl AsRef<Path>,
        timeout: Option<std::time::Duration>,
    ) -> Result<Client, ClientError> {
        Client::connect_socket_timeout(socket_path(dir.as_ref()), timeout)
    }

    /// [`Client::connect`] asking the server for the acknowledgements `acks`
    /// (`format-spec/server.md`, "Acknowledgements"). Under [`AckMode::DurableOnly`] the
    /// fragments and pipelined appends get no reply when they are written: a full buffer of
    /// them is sent without waiting, [`Client::flush`] makes them durable (the `sync`
    /// operation), and the next request's reply vouches for them. A server that does not
    /// know the option answers every line, and [`Client::acks`] then says
    /// [`AckMode::Every`].
    ///
    /// # Errors
    ///
    /// As [`Client::connect`].
    pub fn connect_acks(dir: impl AsRef<Path>, acks: AckMode) -> Result<Client, ClientError> {
        Client::connect_socket_with(socket_path(dir.as_ref()), None, acks)
    }

    /// The acknowledgements of this connection: what the server granted of what
    /// [`Client::connect_acks`] asked ([`AckMode::Every`] otherwise).
    #[must_use]
    pub fn acks(&self) -> AckMode {
        self.acks
    }

    fn connect_socket_timeout(
        path: impl Into<PathBuf>,
        timeout: Option<std::time::Duration>,
    ) -> Result<Client, ClientError> {
        Client::connect_socket_with(path, timeout, AckMode::Every)
    }

    fn connect_socket_with(
        path: impl Into<PathBuf>,
        timeout: Option<std::time::Duration>,
        acks: AckMode,
    ) -> Result<Client, ClientError> {
        let path = path.into();
        let stream = UnixStream::connect(&path)
            .map_err(|source| ClientError::Connect { path: path.clone(), source })?;
        stream
            .set_read_timeout(timeout)
            .map_err(|source| ClientError::Connect { path: path.clone(), source })?;
        let writer = stream
            .try_clone()
            .map_err(|source| ClientError::Connect { path: path.clone(), source })?;
        let mut client = Client {
            path,
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
            server_pid: 0,
            line: Vec::new(),
            deltas: Vec::new(),
            pending: 0,
            texts: false,
            texts_end: None,
            texts_task: String::new(),
            delta_error: None,
            read_timeout: timeout,
            abandoned: false,
            acks: AckMode::Every,
        };
        let hello = json!({ KEY_HELLO: "factlog", KEY_VERSION: SERVER_PROTOCOL_VERSION });
        let Value::Object(mut hello) = hello else { unreachable!("a JSON object") };
        if acks != AckMode::Every {
            hello.insert(KEY_ACKS.to_owned(), json!(acks.as_str()));
        }
        // A server that refuses the connection (busy, another user) answers and closes at
        // once: the hello may fail to send while the refusal is waiting to be read.
        let mut line = serde_json::to_vec(&hello).expect("a JSON object serialises");
        line.push(b'\n');
        let sent = client.send_line(&line);
        let reply = match (client.receive_own::<Map<String, Value>>(), sent) {
            (Ok(reply), _) => reply,
            (Err(_), Err(error)) | (Err(error), Ok(())) => return Err(error),
        };
        if let Some(code) = reply.get("error").and_then(Value::as_str) {
            let message = reply.get("message").and_then(Value::as_str).unwrap_or_default();
            return Err(ClientError::Handshake {
                code: code.to_owned(),
                message: message.to_owned(),
            });
        }
        client.server_pid = reply.get("pid").and_then(Value::as_u64).unwrap_or(0);
        // Only what the server said back holds: an older server ignores the key.
        let granted = reply.get(KEY_ACKS).and_then(Value::as_str).and_then(AckMode::from_name);
        client.acks = granted.unwrap_or(AckMode::Every);
        client.texts = reply.get(KEY_TEXTS) == Some(&Value::Bool(true));
        Ok(client)
    }

    /// Sets how long a call waits for a reply (`None`, the default: as long as it takes, as
    /// an embedded store waits for its disk). A read that times out returns
    /// [`ClientError::TimedOut`] and abandons this client, since the late reply would be
    /// taken for the next request's.
    ///
    /// # Errors
    ///
    /// [`ClientError::Disconnected`] when the socket refuses the option (it is closed).
    pub fn set_read_timeout(
        &mut self,
        timeout: Option<std::time::Duration>,
    ) -> Result<(), ClientError> {
        self.reader.get_ref().set_read_timeout(timeout).map_err(|error| self.gone(&error))?;
        self.read_timeout = timeout;
        Ok(())
    }

    /// Whether [`Client::delta`] joins a task's consecutive fragments into one fragments line
    /// (`format-spec/server.md`, "Fragments lines"): when the server's hello offers them, as
    /// a server of this release does; otherwise each fragment is a line of its own.
    #[must_use]
    pub fn joins_fragments(&self) -> bool {
        self.texts
    }

    /// The process id of the server, from its hello.
    #[must_use]
    pub fn server_pid(&self) -> u64 {
        self.server_pid
    }

    /// Sends one request object (an `id` is added when it has none) and returns its reply.
    /// Under durable-only acknowledgements an append or batch whose durability would be
    /// `buffered` is sent asking for `flushed`, so that it gets a reply.
    ///
    /// # Errors
    ///
    /// An error reply as [`ClientError::Refused`] or [`ClientError::StaleRevision`];
    /// `LIMIT_EXCEEDED` ([`ClientError::Refused`]) at once, nothing sent, for a request line
    /// longer than [`SERVER_LINE_BYTES_MAX`], which the server would answer by ending the
    /// connection; [`ClientError::Disconnected`] when the server went away.
    pub fn request(
        &mut self,
        mut object: Map<String, Value>,
    ) -> Result<Map<String, Value>, ClientError> {
        if !object.contains_key(KEY_ID) {
            let mut with_id = Map::new();
            with_id.insert(KEY_ID.to_owned(), json!(self.next_id));
            self.next_id += 1;
            with_id.extend(object);
            object = with_id;
        }
        let id = match object.get(KEY_ID) {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => {
                let message = "\"id\" must be a string or a number; nothing was sent";
                return Err(refused(error_object(None, "INVALID_EVENT", message)));
            }
        };
        if self.acks == AckMode::DurableOnly {
            ask_for_a_reply(&mut object);
        }
        self.exchange(&request_line(&object)?, &id)
    }

    /// Sends request `line` (newline included) and reads its reply, as `R`: the replies before
    /// it counted off, a fragment refused before it returned, an error reply as the error.
    fn exchange<R: ReplyRead>(&mut self, line: &[u8], id: &Value) -> Result<R, ClientError> {
        if let Err(error) = self.send_line(line) {
            // A refusal read while sending that ended the stream says why it failed.
            return Err(self.delta_error.take().unwrap_or(error));
        }
        let reply = match self.receive_own::<R>() {
            Ok(reply) => reply,
            // A refusal that ended the stream came first: it says why the connection closed.
            Err(error) => return Err(self.delta_error.take().unwrap_or(error)),
        };
        if self.delta_error.is_some() {
            let reply = self.reply_read_whole()?;
            let error = self.delta_error.take().expect("a refusal kept");
            return Err(after_request(error, reply));
        }
        if reply.id() != Some(id) {
            // The replies are out of step with the requests: nothing later can be trusted.
            self.abandoned = true;
            return Err(ClientError::Protocol {
                what: "a reply whose id is not the request's".to_owned(),
            });
        }
        if reply.is_error() { Err(refused(self.reply_read_whole()?)) } else { Ok(reply) }
    }

    /// Appends `bodies` to `task` (with `batch`, as one `batch` operation) with a request line
    /// written straight from them, its reply read by its head (`line.rs`).
    fn append_bodies(
        &mut self,
        task: &str,
        bodies: &[Body],
        batch: bool,
        options: AppendOptions,
    ) -> Result<Appended, ClientError> {
        let id = self.next_id;
        let Some(line) = line::append_line(Some(id), task, bodies, batch, options, self.acks)?
        else {
            // A body's own fields name a key of the request: the object path merges them.
            return appended(&self.request(append_object(task, bodies, batch, options)?)?);
        };
        self.next_id += 1;
        let head: Head = self.exchange(&line, &Value::from(id))?;
        match (head.seq, head.revision) {
            (Some(seq), Some(revision)) if head.is_plain() => {
                Ok(Appended::Written { seq: Seq(seq), revision })
            }
            _ => appended(&self.reply_read_whole()?),
        }
    }

    /// The reply last read, whole (its `covers` taken out under durable-only acks).
    fn reply_read_whole(&self) -> Result<Map<String, Value>, ClientError> {
        let mut reply = Map::parse(&self.line)?;
        if self.acks == AckMode::DurableOnly {
            reply.take_covers();
        }
        Ok(reply)
    }

    /// Sends one operation ([`Client::request`] of its object) and reads its reply as the
    /// operation's typed reply `T`.
    ///
    /// # Errors
    ///
    /// As [`Client::request`]; [`ClientError::Protocol`] when the reply lacks a key of `T`.
    fn call<T: DeserializeOwned>(&mut self, op: &Op) -> Result<T, ClientError> {
        let reply = self.request(op.to_object())?;
        op::read_reply(reply).map_err(|error| ClientError::Protocol {
            what: format!("a {} reply: {error}", op.name()),
        })
    }

    /// Appends one streamed `assistant/delta` fragment to `task`, `Buffered`, as
    /// [`crate::Task::delta`] does in the serving process, **pipelined**: the request line is
    /// written into this client's buffer, and no reply is waited for, so a fragment makes no
    /// syscall unless the buffer is due. The buffer is sent when it is full
    /// ([`CLIENT_DELTA_BUFFER_BYTES`]) or at [`Client::flush`] (which then read the replies),
    /// in the same write as the next other request (whose call reads them), or when the
    /// client is dropped. The server runs the lines of a connection in order, so every
    /// fragment is in the log before whatever this client sends after it.
    ///
    /// # Errors
    ///
    /// At once, without sending: a text longer than `DELTA_TEXT_BYTES_MAX` or an invalid task
    /// id ([`ClientError::Refused`], `LIMIT_EXCEEDED` or `INVALID_EVENT`, made by the same
    /// checks as the store's). A fragment that passed them is refused by the server only when
    /// the store failed (the reply ends the connection) or the connection touched more than
    /// `SERVER_TASKS_PER_CLIENT_MAX` tasks; that refusal is returned by the call that reads
    /// it: this one when it sends a full buffer, [`Client::flush`], or the next request, which
    /// was sent with the fragments and still ran: [`ClientError::PipelinedRefused`], which
    /// carries that request's own reply. [`ClientError::Disconnected`] when the server went
    /// away.
    pub fn delta(&mut self, task: &str, text: &str) -> Result<(), ClientError> {
        Client::check_delta(task, text)?;
        if self.texts {
            if self.texts_end == Some(self.deltas.len()) && self.texts_task == task {
                delta_line::add_text(&mut self.deltas, text);
            } else {
                delta_line::start_texts(&mut self.deltas, task, text);
                self.texts_task.clear();
                self.texts_task.push_str(task);
                self.pending += 1;
            }
            self.texts_end = Some(self.deltas.len());
        } else {
            delta_line::write_line(&mut self.deltas, task, text);
            self.pending += 1;
        }
        if self.deltas.len() >= CLIENT_DELTA_BUFFER_BYTES {
            self.buffer_full()?;
        }
        Ok(())
    }

    /// The store's own checks of a fragment, as [`Client::delta`] runs them before it buffers
    /// one, so that a fragment the store would refuse is not sent: for a caller that queues
    /// fragments before they reach the client.
    ///
    /// # Errors
    ///
    /// [`ClientError::Refused`]: `LIMIT_EXCEEDED` for a text longer than
    /// `DELTA_TEXT_BYTES_MAX`, `INVALID_EVENT` for an invalid task id.
    pub fn check_delta(task: &str, text: &str) -> Result<(), ClientError> {
        crate::harness::ids::check_task_id(task)
            .and_then(|()| crate::harness::check_delta_text(text))
            .map_err(|error| local_refusal(&error))
    }

    /// Appends one event whose type is `Buffered` by default (`turn/start`, `step/start`,
    /// `task/phase`, `task/plan`, `task/todo`) to `task`, **pipelined** as [`Client::delta`]
    /// is: the line is buffered with the fragments and no reply is waited for; the store
    /// checks it against the task's state when it runs it, in order, and a refusal is
    /// returned as a fragment's is. Use [`Client::append`] to have the event's seq and
    /// revision, a compare-and-set, or a stronger durability.
    ///
    /// # Errors
    ///
    /// At once, without sending: an event type that is not `Buffered` by default, or an
    /// opaque body ([`ClientError::Refused`], `INVALID_EVENT`); a line longer than
    /// [`SERVER_LINE_BYTES_MAX`] (`LIMIT_EXCEEDED`). Later: as [`Client::delta`].
    pub fn append_pipelined(&mut self, task: &str, body: &Body) -> Result<(), ClientError> {
        let buffered =
            body.event_type().is_some_and(|t| t.default_durability() == Durability::Buffered);
        if !buffered {
            let name = body.event_type().map_or("an opaque body", |t| t.name());
            let error = crate::error::Error::from(crate::ErrorKind::InvalidEvent {
                event_type: name.to_owned(),
                reason: "only events that are buffered by default can be pipelined: append it \
                         with Client::append, which waits for its durability"
                    .to_owned(),
            });
            return Err(local_refusal(&error));
        }
        let one = std::slice::from_ref(body);
        let options = AppendOptions::default();
        let line = match line::append_line(None, task, one, false, options, self.acks)? {
            Some(line) => line,
            // A body's own fields name a key of the request: the object path merges them.
            None => request_line(&append_object(task, one, false, options)?)?,
        };
        check_line_length(line.len())?;
        self.deltas.extend_from_slice(&line);
        self.pending += 1;
        if self.deltas.len() >= CLIENT_DELTA_BUFFER_BYTES {
            self.buffer_full()?;
        }
        Ok(())
    }

    /// Sends the buffered deltas and reads their replies: afterwards every delta appended so
    /// far is in the serving process's log with `Buffered` durability; under durable-only
    /// acknowledgements ([`Client::connect_acks`]) with `Synced` durability (a `sync`
    /// request answers them).
    ///
    /// # Errors
    ///
    /// The first error reply among the fragments ([`ClientError::Refused`]; the fragments
    /// before it were appended), or [`ClientError::Disconnected`]. Under durable-only
    /// acknowledgements the first refusal is also one read earlier, while fragments were
    /// sent; the fragments buffered after it are still sent and synced first.
    pub fn flush(&mut self) -> Result<(), ClientError> {
        if self.acks == AckMode::DurableOnly {
            // A refusal already read while fragments were sent is the first one.
            let kept = self.delta_error.take();
            if self.pending == 0 {
                return kept.map_or(Ok(()), Err);
            }
            // Nothing answers a buffered line: a sync does, and makes them durable.
            let synced = self.sync();
            return kept.map_or(synced, Err);
        }
        if self.pending == 0 {
            return Ok(());
        }
        self.write_deltas()?;
        self.read_delta_replies()
    }

    /// The buffer of fragments is full: sent and answered ([`Client::flush`]), or under
    /// durable-only acknowledgements sent without waiting, the replies already there read.
    fn buffer_full(&mut self) -> Result<(), ClientError> {
        if self.acks == AckMode::Every {
            return self.flush();
        }
        self.write_deltas()?;
        self.drain_replies()
    }

    /// Under durable-only acknowledgements: writes `self.deltas` whole without ever waiting
    /// for room in the socket while replies wait to be read: when the socket is full, the
    /// replies that arrived are read (a refusal kept for the next call), so that a server
    /// blocked writing them to this client always gets room, and the two never wait for
    /// each other.
    fn send_draining(&mut self) -> Result<(), ClientError> {
        let bytes = std::mem::take(&mut self.deltas);
        let mut rest = &bytes[..];
        let flags = rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT;
        let mut result = Ok(());
        while !rest.is_empty() {
            match rustix::net::send(&self.writer, rest, flags) {
                Ok(0) => {
                    let gone = self.gone(&io::ErrorKind::WriteZero.into());
                    result = Err(self.delta_error.take().unwrap_or(gone));
                    break;
                }
                Ok(sent) => rest = &rest[sent..],
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    if let Err(error) = self.wait_to_send() {
                        result = Err(error);
                        break;
                    }
                }
                Err(errno) => {
                    // A refusal read meanwhile that ended the stream says why it is gone.
                    let gone = self.gone(&errno.into());
                    result = Err(self.delta_error.take().unwrap_or(gone));
                    break;
                }
            }
        }
        // The buffer's memory is kept for the next lines.
        self.deltas = bytes;
        self.deltas.clear();
        self.texts_end = None;
        result
    }

    /// The socket is full: waits until it has room or a reply arrived, and reads the replies
    /// that did.
    fn wait_to_send(&mut self) -> Result<(), ClientError> {
        use rustix::event::{PollFd, PollFlags, poll};
        if self.reader.buffer().is_empty() {
            let reader = self.reader.get_ref();
            let mut fds = [PollFd::new(reader, PollFlags::IN | PollFlags::OUT)];
            match poll(&mut fds, None) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(errno) => return Err(self.gone(&errno.into())),
            }
            let ready = fds[0].revents();
            if !ready.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
                return Ok(());
            }
        }
        let reply = match self.read_counted::<Head>() {
            Ok(reply) => reply,
            Err(error) => return Err(self.delta_error.take().unwrap_or(error)),
        };
        self.keep_refusal(&reply)
    }

    /// Under durable-only acknowledgements, between requests: reads the replies that have
    /// arrived (covering replies, refused fragments) without waiting for more, so that the
    /// server never waits for room to write them. A refusal is kept for the next request.
    fn drain_replies(&mut self) -> Result<(), ClientError> {
        loop {
            if self.reader.buffer().is_empty() && !readable_now(self.reader.get_ref()) {
                return Ok(());
            }
            let reply = match self.read_counted::<Head>() {
                Ok(reply) => reply,
                Err(error) => {
                    self.pending = 0;
                    return Err(self.delta_error.take().unwrap_or(error));
                }
            };
            self.keep_refusal(&reply)?;
        }
    }

    /// Keeps a refusal read before the reply that returns it (the first one only).
    fn keep_refusal(&mut self, reply: &impl ReplyRead) -> Result<(), ClientError> {
        if reply.is_error() && self.delta_error.is_none() {
            self.delta_error = Some(refused(self.reply_read_whole()?));
        }
        Ok(())
    }

    /// Under durable-only acknowledgements: the reply to the last line sent, read after
    /// the replies before it (covering replies, and refused fragments, the first kept for
    /// the caller); `covers` is taken out of it. Under every acknowledgement: the next reply.
    fn receive_own<R: ReplyRead>(&mut self) -> Result<R, ClientError> {
        if self.acks == AckMode::Every {
            self.read_line()?;
            return R::parse(&self.line);
        }
        loop {
            let reply = self.read_counted::<R>()?;
            if self.pending == 0 {
                return Ok(reply);
            }
            self.keep_refusal(&reply)?;
        }
    }

    /// One reply under durable-only acknowledgements, its `covers` taken out and counted
    /// off the lines sent.
    fn read_counted<R: ReplyRead>(&mut self) -> Result<R, ClientError> {
        self.read_line()?;
        let mut reply = R::parse(&self.line).inspect_err(|_| {
            // Its `covers` is unknown: the replies are out of step with the lines sent.
            self.abandoned = true;
        })?;
        match reply.take_covers() {
            Some(covers) if covers >= 1 && covers <= self.pending => {
                self.pending -= covers;
                Ok(reply)
            }
            _ => {
                // The replies are out of step with the requests: nothing later can be trusted.
                self.abandoned = true;
                Err(ClientError::Protocol {
                    what: format!(
                        "a reply whose \"covers\" is not a count of the {} lines sent \
                         unanswered",
                        self.pending
                    ),
                })
            }
        }
    }

    /// Writes the buffered delta lines (and whatever else was put after them) in one write.
    fn write_deltas(&mut self) -> Result<(), ClientError> {
        self.check_abandoned()?;
        if self.acks == AckMode::DurableOnly {
            return self.send_draining().inspect_err(|_| self.pending = 0);
        }
        let sent = send_all(&self.writer, &self.deltas);
        self.deltas.clear();
        self.texts_end = None;
        sent.map_err(|error| {
            self.pending = 0;
            self.gone(&error)
        })
    }

    /// Reads the replies of the fragments sent: the first error among them, if any. When the
    /// connection ends before all of them (after a refusal that ends the stream), that
    /// refusal is returned, not the end.
    fn read_delta_replies(&mut self) -> Result<(), ClientError> {
        let mut first_error = None;
        while self.pending > 0 {
            if let Err(error) = self.read_line() {
                self.pending = 0;
                return Err(first_error.unwrap_or(error));
            }
            self.pending -= 1;
            let line = &self.line[..self.line.len() - 1];
            if delta_line::is_written_reply(line) || first_error.is_some() {
                continue;
            }
            match serde_json::from_slice::<Value>(line) {
                // A written reply with more keys (a pipelined append's warnings).
                Ok(Value::Object(reply)) if !reply.contains_key("error") => {}
                Ok(Value::Object(reply)) => first_error = Some(refused(reply)),
                _ => {
                    first_error = Some(ClientError::Protocol {
                        what: "an unreadable reply to a pipelined request".to_owned(),
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Appends one event to `task`, as [`crate::Task::append_with`] does in the serving
    /// process. Under durable-only acknowledgements ([`Client::connect_acks`]) an event that
    /// would meet only `buffered` durability is appended `flushed`, since only a durable
    /// reply comes (use [`Client::append_pipelined`] to send it without waiting).
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn append(
        &mut self,
        task: &str,
        body: &Body,
        options: AppendOptions,
    ) -> Result<Appended, ClientError> {
        self.append_bodies(task, std::slice::from_ref(body), false, options)
    }

    /// Appends `bodies` to `task` as one atomic batch, as [`crate::Task::append_batch_with`]
    /// (under durable-only acknowledgements, a batch that would meet only `buffered` durability
    /// is appended `flushed`, as [`Client::append`] says).
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn append_batch(
        &mut self,
        task: &str,
        bodies: &[Body],
        options: AppendOptions,
    ) -> Result<Appended, ClientError> {
        self.append_bodies(task, bodies, true, options)
    }

    /// The task's revision (0 when it has no event).
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn revision(&mut self, task: &str) -> Result<u64, ClientError> {
        let reply: RevisionReply = self.call(&Op::Revision { task: task.to_owned() })?;
        Ok(reply.revision)
    }

    /// The task's folded state, `None` when it has no event.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn state(&mut self, task: &str) -> Result<Option<TaskState>, ClientError> {
        let reply: StateReply = self.call(&Op::State { task: task.to_owned() })?;
        match reply.state {
            Value::Null => Ok(None),
            state => serde_json::from_value(state)
                .map(Some)
                .map_err(|error| ClientError::Protocol { what: format!("a task state: {error}") }),
        }
    }

    /// One page of events from `from_seq` on (of `task` only, when given), as `factlog dump
    /// --json` prints them, and the seq to ask from for the next page (past the last event
    /// when the page is empty).
    ///
    /// # Errors
    ///
    /// As [`Client::request`]; `RECLAIMED` when `from_seq` is below what the store holds.
    pub fn events(
        &mut self,
        from_seq: u64,
        task: Option<&str>,
    ) -> Result<(Vec<Map<String, Value>>, u64), ClientError> {
        self.events_page(from_seq, task).map(|page| (page.events, page.next_seq))
    }

    /// [`Client::events`], with where the log ended when the page was read
    /// ([`EventsPage::last_seq`]): a reader that wants the events that existed when it
    /// began, as [`crate::Store::events`] gives them, stops there.
    ///
    /// # Errors
    ///
    /// As [`Client::events`].
    pub fn events_page(
        &mut self,
        from_seq: u64,
        task: Option<&str>,
    ) -> Result<EventsPage, ClientError> {
        let task = task.map(str::to_owned);
        self.call(&Op::Events { from_seq: Some(from_seq), task, limit: None })
    }

    /// The ids of the served store's tasks that have events, sorted ([`crate::Store::task_ids`]),
    /// read page by page.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn task_ids(&mut self) -> Result<Vec<String>, ClientError> {
        let mut ids = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page: TasksPage = self.call(&Op::Tasks { after: after.clone() })?;
            ids.extend(page.tasks);
            match page.next {
                Some(next) if after.as_ref() != Some(&next) => after = Some(next),
                _ => return Ok(ids),
            }
        }
    }

    /// Runs [`crate::Store::recover`] in the serving process (with `dry_run`,
    /// [`crate::Store::plan_recovery`]): the tasks no holder holds yet are taken over; the
    /// tasks its clients or the serving process hold are reported, not touched.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn recover(&mut self, dry_run: bool) -> Result<RecoveryReport, ClientError> {
        let reply: RecoverReply = self.call(&Op::Recover { dry_run })?;
        Ok(reply.report)
    }

    /// Writes a snapshot in the serving process ([`crate::Store::checkpoint`]): its path
    /// and the last seq it covers.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn checkpoint(&mut self) -> Result<(PathBuf, u64), ClientError> {
        let reply: CheckpointReply = self.call(&Op::Checkpoint)?;
        Ok((PathBuf::from(reply.path), reply.covered_seq))
    }

    /// Makes everything the served store holds durable (`Synced`) in the serving process:
    /// this client's buffered fragments are sent first, and the events of every client and of
    /// the serving process appended before the `sync` request ran are synced
    /// (`format-spec/server.md`, the `sync` request).
    ///
    /// # Errors
    ///
    /// As [`Client::request`]; a fragment refused before it as [`Client::flush`] returns it.
    pub fn sync(&mut self) -> Result<(), ClientError> {
        // Always sent: a refusal read earlier comes back with the sync's reply.
        match self.request(Op::Sync.to_object()) {
            Ok(_) => Ok(()),
            Err(ClientError::PipelinedRefused { code, message, reply, .. }) => {
                Err(ClientError::Refused { code, message, reply: *reply })
            }
            Err(error) => Err(error),
        }
    }

    /// How many clients the serving process serves now (this one included) and at most.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn clients(&mut self) -> Result<(u64, u64), ClientError> {
        let reply: ClientsReply = self.call(&Op::Clients)?;
        Ok((reply.clients, reply.clients_max))
    }

    /// Runs [`crate::Store::purge`] in the serving process (with `dry_run`,
    /// [`crate::Store::plan_purge`]): the report of `factlog purge --json`.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn purge(&mut self, dry_run: bool) -> Result<PurgeReport, ClientError> {
        self.call(&Op::Purge { dry_run })
    }

    /// The task's whole model-visible history (the entries of `factlog history --json`),
    /// read page by page.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn history(&mut self, task: &str) -> Result<Vec<Value>, ClientError> {
        let mut entries = Vec::new();
        let mut from = 0;
        loop {
            let page: HistoryPage = self.call(&Op::History { task: task.to_owned(), from })?;
            entries.extend(page.entries);
            match page.next {
                Some(next) if next > from => from = next,
                _ => return Ok(entries),
            }
        }
    }

    /// Relays request lines from `input` to the server and its replies to `output`, as
    /// `factlog emit` does over a served store: each line is sent as it is (a last line
    /// without its newline gets one), replies are copied in order and `output` is flushed
    /// whenever no further reply is buffered. Sending runs on a thread of its own, so that
    /// replies flow while input is read. Ends when the server closes the connection after
    /// the end of `input`, or after a reply whose code ends the stream. Unlike an `emit` that
    /// holds the store, a relay whose `output` stops being read (a stalled pipe downstream)
    /// stops reading replies, and the server disconnects it after its write timeout
    /// ([`ClientError::Disconnected`]).
    ///
    /// Under durable-only acknowledgements ([`Client::connect_acks`]) the replies are those of
    /// `factlog emit --ack durable-only` too: the server skips the replies of buffered events
    /// and says what each reply `covers`; at the end of `input` a `sync` is sent, and its reply
    /// is written as emit's final `{"end":true,"covers":N,"durability":"synced"}` (a failed
    /// sync as its error reply, covering the lines left, which ends the stream).
    ///
    /// # Errors
    ///
    /// [`ClientError::Disconnected`] when the server went away before the end of the
    /// replies; an I/O error of `output` as [`ClientError::Protocol`].
    pub fn relay(
        mut self,
        input: impl Read + Send + 'static,
        output: &mut impl Write,
    ) -> Result<Relayed, ClientError> {
        self.flush()?;
        let durable_only = self.acks == AckMode::DurableOnly;
        let path = self.path.clone();
        let mut reader =
            BufReader::new(self.reader.get_ref().try_clone().map_err(|e| self.gone(&e))?);
        let mut writer = self.writer.try_clone().map_err(|e| self.gone(&e))?;
        drop(self);
        // Set by the sender once every line is written, before it ends its side: a server
        // that closes before that went away; one that closes after it must have answered
        // every non-blank line the sender counted.
        let input_done = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&input_done);
        // Under durable-only acknowledgements: the lines sent with the final `sync`, known
        // once the input ended (`u64::MAX` until then), and the lines the replies covered.
        let lines_sent = Arc::new(AtomicU64::new(u64::MAX));
        let sent = durable_only.then(|| Arc::clone(&lines_sent));
        let sender = std::thread::Builder::new()
            .name("factlog-relay".to_owned())
            .spawn(move || send_lines(input, &mut writer, &done, sent.as_deref()))
            .map_err(|source| ClientError::Connect { path: path.clone(), source })?;
        let mut relayed = Relayed { replies: 0, ending: None };
        let mut covered = 0_u64;
        let mut ended = false;
        let mut line = Vec::new();
        loop {
            if !reader.buffer().contains(&b'\n') {
                output.flush().map_err(|e| ClientError::Protocol { what: e.to_string() })?;
            }
            line.clear();
            let read = (&mut reader)
                .take(SERVER_LINE_BYTES_MAX as u64)
                .read_until(b'\n', &mut line)
                .map_err(|e| ClientError::Disconnected {
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
            if read == 0 {
                break;
            }
            if line.last() != Some(&b'\n') {
                return Err(ClientError::Disconnected {
                    path,
                    detail: "the connection closed in the middle of a reply".to_owned(),
                });
            }
            let parsed = match serde_json::from_slice::<Value>(&line) {
                Ok(Value::Object(reply)) => Some(reply),
                _ => None,
            };
            if durable_only
                && let Some(end) = final_reply(parsed.as_ref(), &mut covered, &lines_sent)?
            {
                line.clear();
                serde_json::to_writer(&mut line, &end)
                    .map_err(|e| ClientError::Protocol { what: e.to_string() })?;
                line.push(b'\n');
                ended = true;
            }
            output.write_all(&line).map_err(|e| ClientError::Protocol { what: e.to_string() })?;
            relayed.replies += 1;
            if let Some(reply) = &parsed
                && let Some(code) = reply.get("error").and_then(Value::as_str)
                && crate::protocol::reply::code_ends_stream(code)
            {
                let message = reply.get("message").and_then(Value::as_str).unwrap_or_default();
                relayed.ending = Some((code.to_owned(), message.to_owned()));
                break;
            }
        }
        output.flush().map_err(|e| ClientError::Protocol { what: e.to_string() })?;
        if relayed.ending.is_some() {
            // The sender may wait for input that no longer matters: it is left behind.
            return Ok(relayed);
        }
        if !input_done.load(Ordering::Acquire) {
            // The server closed before the end of input; the sender may be waiting for input
            // that never comes, so it is not joined.
            return Err(ClientError::Disconnected {
                path,
                detail: "the server closed the connection before the end of input".to_owned(),
            });
        }
        let lines = match sender.join() {
            Ok(Ok(lines)) => lines,
            Ok(Err(error)) => {
                return Err(ClientError::Disconnected { path, detail: error.to_string() });
            }
            Err(_) => {
                return Err(ClientError::Protocol {
                    what: "the sending thread panicked".to_owned(),
                });
            }
        };
        if durable_only && !ended {
            return Err(ClientError::Disconnected {
                path,
                detail: format!(
                    "the connection closed after replies covering {covered} of {lines} request \
                     lines, before the final reply"
                ),
            });
        }
        if !durable_only && relayed.replies < lines {
            return Err(ClientError::Disconnected {
                path,
                detail: format!(
                    "the connection closed after {} replies to {lines} request lines",
                    relayed.replies
                ),
            });
        }
        Ok(relayed)
    }

    /// Sends one request line. Buffered deltas go first, in the same write, and their
    /// replies are read here: a fragment refused is kept in `delta_error` for
    /// [`Client::request`] to return once the request's own reply is read.
    /// A line over [`SERVER_LINE_BYTES_MAX`] is refused here, nothing sent (the server would
    /// answer it `LIMIT_EXCEEDED` and end the connection).
    fn send_line(&mut self, line: &[u8]) -> Result<(), ClientError> {
        self.check_abandoned()?;
        check_line_length(line.len())?;
        if self.acks == AckMode::DurableOnly {
            // The request is one more line unanswered; the replies are read by the caller.
            self.deltas.extend_from_slice(line);
            self.pending += 1;
            return self.write_deltas();
        }
        if self.pending == 0 {
            return send_all(&self.writer, line).map_err(|error| self.gone(&error));
        }
        self.deltas.extend_from_slice(line);
        self.write_deltas()?;
        if let Err(error) = self.read_delta_replies() {
            self.delta_error = Some(error);
        }
        Ok(())
    }

    /// Reads one reply line, newline included, into `self.line`.
    fn read_line(&mut self) -> Result<(), ClientError> {
        self.check_abandoned()?;
        self.line.clear();
        if !self.reader.buffer().contains(&b'\n')
            && !wait_for_input(self.reader.get_ref(), self.read_timeout)
        {
            self.abandoned = true;
            let waited = self.read_timeout.unwrap_or_default();
            return Err(ClientError::TimedOut { path: self.path.clone(), waited });
        }
        let read = match (&mut self.reader)
            .take(SERVER_LINE_BYTES_MAX as u64)
            .read_until(b'\n', &mut self.line)
        {
            Ok(read) => read,
            Err(error)
                if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
            {
                self.abandoned = true;
                let waited = self.read_timeout.unwrap_or_default();
                return Err(ClientError::TimedOut { path: self.path.clone(), waited });
            }
            Err(error) => return Err(self.gone(&error)),
        };
        if read == 0 || self.line.last() != Some(&b'\n') {
            return Err(ClientError::Disconnected {
                path: self.path.clone(),
                detail: "the connection closed before the reply".to_owned(),
            });
        }
        Ok(())
    }

    /// Fails once a read timed out: the replies are out of step with the requests.
    fn check_abandoned(&self) -> Result<(), ClientError> {
        if self.abandoned {
            return Err(ClientError::Disconnected {
                path: self.path.clone(),
                detail: "this connection was abandoned after a read timed out; connect again"
                    .to_owned(),
            });
        }
        Ok(())
    }

    fn gone(&self, error: &io::Error) -> ClientError {
        ClientError::Disconnected { path: self.path.clone(), detail: error.to_string() }
    }
}

impl Drop for Client {
    /// Sends the buffered deltas without waiting for their replies. Best effort: the server
    /// handles what it reads before it sees the connection end, but a refusal goes unseen and
    /// a server that fails to write a reply to the closed socket may drop the lines after
    /// it. Call [`Client::flush`] before dropping to know every fragment was appended.
    fn drop(&mut self) {
        if !self.deltas.is_empty() {
            let _ = send_all(&self.writer, &self.deltas);
        }
    }
}

/// The error of a fragment refused before a request that was still run: the fragment's code
/// and message, and the request's own reply.
fn after_request(error: ClientError, reply: Map<String, Value>) -> ClientError {
    match error {
        ClientError::Refused { code, message, reply: refusal } => ClientError::PipelinedRefused {
            code,
            message,
            reply: Box::new(refusal),
            request_reply: Box::new(reply),
        },
        other => other,
    }
}

/// Under durable-only acknowledgements a written reply that met only `buffered` durability is
/// not sent: a request that waits for its reply (an append, a batch) whose durability would be
/// `buffered` (asked for, or the default of every event it holds) asks for `flushed` instead,
/// so that its reply comes and vouches for it (`format-spec/server.md`, "Acknowledgements").
fn ask_for_a_reply(object: &mut Map<String, Value>) {
    let buffered_by_default = |event: &Map<String, Value>| {
        event
            .get(KEY_TYPE)
            .and_then(Value::as_str)
            .and_then(crate::harness::EventType::from_name)
            .is_some_and(|t| t.default_durability() == Durability::Buffered)
    };
    // `null` is read as no durability (the event's default), as the server reads it.
    let asked_buffered = match object.get(KEY_DURABILITY).filter(|asked| !asked.is_null()) {
        Some(Value::String(asked)) => Some(asked == Durability::Buffered.as_str()),
        Some(_) => Some(false),
        None => None,
    };
    let by_default = || {
        if object.contains_key(KEY_TYPE) {
            return buffered_by_default(object);
        }
        match object.get("events") {
            Some(Value::Array(events))
                if object.get(crate::protocol::session::KEY_OP).and_then(Value::as_str)
                    == Some("batch") =>
            {
                !events.is_empty()
                    && events.iter().all(|event| event.as_object().is_some_and(buffered_by_default))
            }
            _ => false,
        }
    };
    if line::asks_flushed(asked_buffered, by_default) {
        object.insert(KEY_DURABILITY.to_owned(), json!(Durability::Flushed.as_str()));
    }
}

/// The request line of `object`: it serialised, newline included.
fn request_line(object: &Map<String, Value>) -> Result<Vec<u8>, ClientError> {
    let mut line = serde_json::to_vec(object)
        .map_err(|error| ClientError::Protocol { what: error.to_string() })?;
    line.push(b'\n');
    Ok(line)
}

/// Waits until `stream` has input (a reply, or its end or an error, which the read after it
/// reports), at most `timeout`; `false` when the time passed first.
///
/// For the first [`CLIENT_REPLY_SPIN_US`] (at most `timeout`) it looks at the socket without
/// waiting, giving the processor up between looks, then sleeps in `poll` for input. A reply
/// the server writes without a sync can come in that time and be read without a sleep and a
/// wake-up. Measured on this project's 2-core virtual machine, looking first for every reply
/// shortened the served policy's wall by about a tenth at 8 and 32 clients, and looking only
/// for the replies that wait for no sync did not (`docs/performance.md`, "Looking for a reply
/// before sleeping for it"). A read blocked on the socket would wait the same, but the kernel also
/// wakes a stream socket's sleepers each time its peer reads what it sent (its send space
/// freed): a client blocked in `recv` for its reply is woken, and switched to and from, once
/// more per request when the server reads the request. `poll` for input sleeps through those.
fn wait_for_input(stream: &UnixStream, timeout: Option<std::time::Duration>) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let start = std::time::Instant::now();
    // A timeout too long to add to the clock is no deadline.
    let deadline = timeout.and_then(|timeout| start.checked_add(timeout));
    let spin = start + std::time::Duration::from_micros(CLIENT_REPLY_SPIN_US);
    let spin = deadline.map_or(spin, |deadline| deadline.min(spin));
    while std::time::Instant::now() < spin {
        if readable_now(stream) {
            return true;
        }
        std::thread::yield_now();
    }
    loop {
        let left = deadline.map(|deadline| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            }
        });
        let mut fds = [PollFd::new(stream, PollFlags::IN)];
        match poll(&mut fds, left.as_ref()) {
            Ok(0) => return false,
            Err(rustix::io::Errno::INTR) => {}
            // Input, the end, an error: the read says which.
            Ok(_) | Err(_) => return true,
        }
    }
}

/// Whether a reply waits in the socket now: a byte peeked without waiting (a closed
/// connection counts, so that its end is read and reported).
fn readable_now(stream: &UnixStream) -> bool {
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    let mut byte = [0_u8; 1];
    match rustix::net::recv(stream, &mut byte[..], flags) {
        Ok(_) => true,
        Err(errno) => errno != rustix::io::Errno::AGAIN && errno != rustix::io::Errno::INTR,
    }
}

/// Writes all of `bytes` to the socket without raising `SIGPIPE` when the server is gone
/// (`MSG_NOSIGNAL`): a host process that does not ignore the signal gets
/// [`ClientError::Disconnected`] instead of dying.
fn send_all(stream: &UnixStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::net::send(stream, bytes, rustix::net::SendFlags::NOSIGNAL) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(sent) => bytes = &bytes[sent..],
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    Ok(())
}

/// The `LIMIT_EXCEEDED` refusal of a request line of `bytes` (newline included) that the
/// server would not read: over [`SERVER_LINE_BYTES_MAX`], the server's own bound, which it
/// answers by ending the connection. Refused before sending, so the connection goes on, as
/// the embedded store goes on after refusing an over-long event.
fn check_line_length(bytes: usize) -> Result<(), ClientError> {
    if bytes <= SERVER_LINE_BYTES_MAX {
        return Ok(());
    }
    let error = crate::error::Error::from(crate::ErrorKind::LimitExceeded {
        what: "server request line bytes (nothing was sent; the connection goes on)",
        value: bytes as u64,
        limit: SERVER_LINE_BYTES_MAX as u64,
    });
    Err(local_refusal(&error))
}

/// The refusal the store would give a request that is not sent: its error reply, made by
/// the library's own checks.
fn local_refusal(error: &crate::error::Error) -> ClientError {
    refused(crate::protocol::error_reply(error, None))
}

/// The error of an error reply.
fn refused(reply: Map<String, Value>) -> ClientError {
    match reply.get("error").and_then(Value::as_str) {
        Some("STALE_REVISION") => ClientError::StaleRevision {
            expected: reply.get("expected").and_then(Value::as_u64).unwrap_or(0),
            actual: reply.get("actual").and_then(Value::as_u64).unwrap_or(0),
        },
        code => ClientError::Refused {
            code: code.unwrap_or("UNKNOWN").to_owned(),
            message: reply.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
            reply,
        },
    }
}

/// One reply of a relay under durable-only acknowledgements, its `covers` counted: for the
/// reply of the final `sync` (the one whose `covers` reach every line sent), what the relay
/// prints instead: `emit --ack durable-only`'s final reply ([`acks::end_reply`]), or the
/// sync's error reply covering the lines before it; `None` for any other reply.
fn final_reply(
    reply: Option<&Map<String, Value>>,
    covered: &mut u64,
    sent: &AtomicU64,
) -> Result<Option<Map<String, Value>>, ClientError> {
    let covers =
        reply.and_then(|r| r.get(KEY_COVERS)).and_then(Value::as_u64).ok_or_else(|| {
            ClientError::Protocol {
                what: "a reply without a \"covers\" count under durable-only acknowledgements"
                    .to_owned(),
            }
        })?;
    *covered += covers;
    if *covered != sent.load(Ordering::SeqCst) {
        return Ok(None);
    }
    // The sync's own line is not one of the input's.
    let lines = covers.saturating_sub(1);
    match reply {
        Some(reply) if reply.contains_key("error") => {
            let mut error = reply.clone();
            error.insert(KEY_COVERS.to_owned(), json!(lines));
            Ok(Some(error))
        }
        _ => Ok(Some(acks::end_reply(lines))),
    }
}

/// What [`Client::relay`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayed {
    /// The replies copied.
    pub replies: u64,
    /// The code and message of a reply that ended the stream, if one did.
    pub ending: Option<(String, String)>,
}

/// Copies `input` to the server, a newline added after a last line without one; sets `done`
/// once all of it is written, then shuts the socket's sending side so that the server sees
/// the end of input. Returns the number of non-blank lines sent (each gets one reply).
/// With `sync_after` (durable-only acknowledgements), a `sync` request follows the last line,
/// the count of lines with it stored there first.
fn send_lines(
    input: impl Read,
    writer: &mut UnixStream,
    done: &AtomicBool,
    sync_after: Option<&AtomicU64>,
) -> io::Result<u64> {
    let mut input = BufReader::new(input);
    let mut lines = 0;
    let mut blank = true;
    let mut last = b'\n';
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        send_all(writer, buffer)?;
        for &byte in buffer {
            if byte == b'\n' {
                lines += u64::from(!blank);
                blank = true;
            } else if !byte.is_ascii_whitespace() {
                blank = false;
            }
        }
        last = buffer[buffer.len() - 1];
        let len = buffer.len();
        input.consume(len);
    }
    if last != b'\n' {
        send_all(writer, b"\n")?;
        lines += u64::from(!blank);
    }
    if let Some(sent) = sync_after {
        // Stored before the line goes: its reply is read only after the server read it.
        sent.store(lines + 1, Ordering::SeqCst);
        let mut sync = serde_json::to_vec(&Op::Sync.to_object()).map_err(io::Error::from)?;
        sync.push(b'\n');
        send_all(writer, &sync)?;
    }
    done.store(true, Ordering::Release);
    writer.shutdown(std::net::Shutdown::Write)?;
    Ok(lines)
}

/// A request line's object for `body` of `task` (`task`, `type`, then the body fields): what
/// [`Client::append`] sends, and what a line of `factlog emit` holds.
///
/// # Errors
///
/// [`ClientError::Protocol`] for an opaque body, which has no event type to send.
pub fn event_object(task: &str, body: &Body) -> Result<Map<String, Value>, ClientError> {
    let Some(event_type) = body.event_type() else {
        return Err(ClientError::Protocol { what: "an opaque body cannot be sent".to_owned() });
    };
    let mut object = Map::new();
    object.insert(KEY_TASK.to_owned(), json!(task));
    object.insert(KEY_TYPE.to_owned(), json!(event_type.name()));
    match codec::body_to_value(body) {
        Value::Object(fields) => object.extend(fields),
        _ => return Err(ClientError::Protocol { what: "a body that is not an object".to_owned() }),
    }
    Ok(object)
}

/// The request object appending `bodies` to `task` (with `batch`, one `batch` operation of
/// them), without an `id`: [`event_object`] with the options, or the batch of the events'
/// objects without their `task`.
fn append_object(
    task: &str,
    bodies: &[Body],
    batch: bool,
    options: AppendOptions,
) -> Result<Map<String, Value>, ClientError> {
    if batch {
        let mut events = Vec::with_capacity(bodies.len());
        for body in bodies {
            let mut event = event_object(task, body)?;
            event.shift_remove(KEY_TASK);
            events.push(event);
        }
        return Ok(Op::batch(task, events, options).to_object());
    }
    let mut object = Map::new();
    for body in bodies {
        object.extend(event_object(task, body)?);
    }
    if let Some(revision) = options.expected_revision {
        object.insert(KEY_EXPECTED_REVISION.to_owned(), json!(revision));
    }
    if let Some(durability) = RequestedDurability::of(options) {
        object.insert(KEY_DURABILITY.to_owned(), json!(durability));
    }
    Ok(object)
}

/// The [`Appended`] of a written or duplicate reply.
fn appended(reply: &Map<String, Value>) -> Result<Appended, ClientError> {
    let number = |key: &str| {
        reply
            .get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| ClientError::Protocol { what: format!("a reply without {key:?}") })
    };
    let (seq, revision) = (Seq(number("seq")?), number("revision")?);
    if reply.get("duplicate") == Some(&Value::Bool(true)) {
        let call_id = reply.get("call_id").and_then(Value::as_str).unwrap_or_default();
        let receipt = reply.get("receipt").cloned().filter(|r| !r.is_null());
        return Ok(Appended::Duplicate {
            call_id: CallId(call_id.to_owned()),
            receipt,
            result_seq: seq,
            revision,
        });
    }
    Ok(Appended::Written { seq, revision })
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Duration;

    use super::*;

    #[test]
    fn waiting_for_input_sees_it_and_bounds_the_wait() {
        let (mut near, far) = UnixStream::pair().expect("a socket pair");
        // Nothing sent: a short bound passes.
        assert!(!wait_for_input(&far, Some(Duration::from_millis(1))));
        // A bound shorter than the look without waiting ends it.
        assert!(!wait_for_input(&far, Some(Duration::ZERO)));
        near.write_all(b"{}\n").expect("write");
        // Input waiting: at once, whatever the bound, one too long for the clock too.
        assert!(wait_for_input(&far, Some(Duration::MAX)));
        assert!(wait_for_input(&far, None));
        // The peer gone counts as input: the read after it reports the end.
        let (near, far) = UnixStream::pair().expect("a socket pair");
        drop(near);
        assert!(wait_for_input(&far, Some(Duration::from_secs(60))));
        // Input that comes while it looks without waiting, and input that comes once it
        // sleeps, are both seen.
        for after in [Duration::ZERO, Duration::from_millis(20)] {
            let (mut near, far) = UnixStream::pair().expect("a socket pair");
            let writer = std::thread::spawn(move || {
                std::thread::sleep(after);
                near.write_all(b"{}\n").expect("write");
                near
            });
            assert!(wait_for_input(&far, None), "input {after:?} later");
            drop(writer.join().expect("the writer"));
        }
    }
}
