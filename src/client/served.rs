//! What a process that cannot open a store because another process holds it does next
//! (`format-spec/server.md`): when the holder serves the store (`DIR/factlog.sock` exists),
//! connect to it with [`crate::client::Client`]; otherwise say which process holds it and how
//! to share it.
//!
//! One decision for every door that falls back to a client: `factlog emit`, `recover`,
//! `checkpoint` and `purge`, the Python package's `factlog.Store`, and Rust callers through
//! [`open_or_connect`]. The socket file is the sign of a
//! served store: a server creates it when it starts and removes it when it stops; one left by
//! a server that was killed makes the connection fail with [`crate::client::ClientError::Connect`],
//! which each caller reports beside the `Locked` error.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind};
use crate::fs::lock_holder;
use crate::harness::socket_path;

/// Another process holds a store: whether it serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The holder shares the store: connect to `socket` ([`crate::client::Client::connect`]).
    Served {
        /// `DIR/factlog.sock`.
        socket: PathBuf,
    },
    /// The holder does not share the store.
    NotServed {
        /// The holding process, when the system tells ([`lock_holder`]).
        pid: Option<u32>,
    },
}

/// What to do about `error`, returned by opening the store in `dir`: `None` when it is not
/// [`ErrorKind::Locked`] (another failure, reported as it is), else whether the process
/// holding the store serves it.
#[must_use]
pub fn held_by_another(dir: &Path, error: &Error) -> Option<Held> {
    if !matches!(error.kind(), ErrorKind::Locked { .. }) {
        return None;
    }
    let socket = socket_path(dir);
    if socket.exists() {
        return Some(Held::Served { socket });
    }
    Some(Held::NotServed { pid: lock_holder(dir) })
}

/// The socket of the store in `dir` when another process holds it and serves it now: the
/// socket exists and a process holds the store's lock (as the system tells, [`lock_holder`]).
/// A door that falls back to a client connects at once then, rather than opening first:
/// opening tries a busy lock again for about 100 ms ([`crate::limits::LOCK_RETRIES`] times
/// [`crate::limits::LOCK_RETRY_MS`], for a lock whose holder is letting it go) before it says
/// the store is locked. `None` when either is missing or the system cannot tell (open, then
/// ask [`held_by_another`]); a socket that does not answer falls back to opening too.
#[must_use]
pub fn served_now(dir: &Path) -> Option<PathBuf> {
    let socket = socket_path(dir);
    (socket.exists() && lock_holder(dir).is_some()).then_some(socket)
}

/// A client of the store in `dir` when another process serves it now ([`served_now`]) and its
/// socket answers: an operator's command (`factlog checkpoint`, `purge`, `recover`) asks it at
/// once instead of opening first. `None` otherwise: open, then ask [`held_by_another`], which
/// says why a socket that did not answer failed.
#[must_use]
pub fn connect_now(dir: &Path) -> Option<crate::client::Client> {
    served_now(dir).and_then(|socket| crate::client::Client::connect_socket(socket).ok())
}

/// Who holds the store in `dir` now, told without opening it (for read-only commands that must
/// answer as the holder would: `factlog recover --dry-run`): `None` when no process holds its
/// lock (or the system cannot tell), else whether the holder shares it.
#[must_use]
pub fn holder_of(dir: &Path) -> Option<Held> {
    let pid = lock_holder(dir)?;
    let socket = socket_path(dir);
    if socket.exists() {
        return Some(Held::Served { socket });
    }
    Some(Held::NotServed { pid: Some(pid) })
}

/// The message of a store that cannot be opened because a process that does not share it
/// holds it: `locked` (the open's error), the holder (its pid when known) and how to share
/// the store; `then` says what the caller does once it is shared ("emit connects to it").
#[must_use]
pub fn not_served_message(dir: &Path, locked: &Error, pid: Option<u32>, then: &str) -> String {
    NotServed { dir, locked, pid, then }.to_string()
}

struct NotServed<'a> {
    dir: &'a Path,
    locked: &'a Error,
    pid: Option<u32>,
    then: &'a str,
}

impl fmt::Display for NotServed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let holder = self.pid.map_or_else(
            || "the process holding it".to_owned(),
            |pid| format!("process {pid}, holding it,"),
        );
        write!(
            f,
            "cannot open {}: {}; {holder} does not share it: share it from that process \
             (Store::serve) or run `factlog serve {}` instead of it, and {}",
            self.dir.display(),
            self.locked,
            self.dir.display(),
            self.then
        )
    }
}

/// A store opened by this process, or a client of the process that holds and serves it
/// ([`open_or_connect`]).
#[derive(Debug)]
pub enum Opened {
    /// This process opened the store and holds it.
    Store(crate::Store),
    /// Another process holds the store and serves it: this is a connection to it.
    Client(Box<crate::client::Client>),
}

/// Why [`open_or_connect`] has neither a store nor a client.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// Opening failed for another reason than a holder (the store's own error).
    Store(Error),
    /// Another process holds the store and does not share it; the message names it (its pid
    /// when the system tells) and says how to share the store.
    NotServed {
        /// The open's `Locked` error.
        error: Error,
        /// The holding process, when known.
        pid: Option<u32>,
        /// What happened and what to do.
        message: String,
    },
    /// The holder serves the store, but connecting to its socket failed (a socket left by a
    /// server that was killed, a refusal).
    Connect {
        /// The open's error: `Locked`, or why the store could not be opened after its socket
        /// did not answer.
        error: Error,
        /// Why the connection failed.
        client: Box<crate::client::ClientError>,
    },
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Store(error) => write!(f, "{error}"),
            OpenError::NotServed { message, .. } => f.write_str(message),
            OpenError::Connect { error, client } => write!(f, "{error}; {client}"),
        }
    }
}

impl std::error::Error for OpenError {}

/// Opens the store in `dir` for writing (default options) or, when another process holds
/// it and serves it, connects to that process: what `factlog emit` and the Python package's
/// `factlog.Store` do, through the same decisions: a store served now ([`served_now`]) is
/// connected to at once; otherwise it is opened, and a `Locked` error is decided by
/// [`held_by_another`]. The options of a
/// store (secrets, snapshots, the clock) are the holder's: a caller that needs its own opens
/// with [`crate::Store::open`] and asks [`held_by_another`] about the error, so that it never
/// connects to a store that would not apply them.
///
/// # Errors
///
/// [`OpenError::NotServed`] when the holder does not share the store, [`OpenError::Connect`]
/// when its socket does not answer, [`OpenError::Store`] for any other failure to open.
pub fn open_or_connect(dir: impl AsRef<Path>) -> Result<Opened, OpenError> {
    let dir = dir.as_ref();
    let mut first_connect = None;
    if let Some(socket) = served_now(dir) {
        match crate::client::Client::connect_socket(socket) {
            Ok(client) => return Ok(Opened::Client(Box::new(client))),
            Err(client) => first_connect = Some(client),
        }
    }
    let error = match crate::Store::open(dir, crate::StoreOptions::new()) {
        Ok(store) => return Ok(Opened::Store(store)),
        Err(error) => error,
    };
    match held_by_another(dir, &error) {
        // Opening failed for another reason after the socket did not answer: both say why.
        None => match first_connect {
            Some(client) => Err(OpenError::Connect { error, client: Box::new(client) }),
            None => Err(OpenError::Store(error)),
        },
        Some(Held::Served { socket }) => match crate::client::Client::connect_socket(socket) {
            Ok(client) => Ok(Opened::Client(Box::new(client))),
            Err(client) => Err(OpenError::Connect { error, client: Box::new(client) }),
        },
        Some(Held::NotServed { pid }) => {
            let message = not_served_message(dir, &error, pid, "open it again to connect");
            Err(OpenError::NotServed { error, pid, message })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_now_only_while_a_holder_serves() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(served_now(dir.path()), None, "no store");
        let store = crate::Store::open(dir.path(), crate::StoreOptions::new()).expect("open");
        assert_eq!(served_now(dir.path()), None, "held, not served");
        let server = store.serve(crate::server::ServeOptions::new()).expect("serve");
        if crate::fs::lock_holder(dir.path()).is_some() {
            assert_eq!(served_now(dir.path()), Some(socket_path(dir.path())));
        }
        server.stop().expect("stop");
        assert_eq!(served_now(dir.path()), None, "held, no longer served");
        store.close().expect("close");
        assert_eq!(served_now(dir.path()), None, "closed");
    }

    #[test]
    fn connect_now_only_to_a_store_served_now() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(connect_now(dir.path()).is_none(), "no store");
        let store = crate::Store::open(dir.path(), crate::StoreOptions::new()).expect("open");
        assert!(connect_now(dir.path()).is_none(), "held, not served");
        let server = store.serve(crate::server::ServeOptions::new()).expect("serve");
        if crate::fs::lock_holder(dir.path()).is_some() {
            let mut client = connect_now(dir.path()).expect("served now");
            assert_eq!(client.revision("t1").expect("revision"), 0);
        }
        server.stop().expect("stop");
        assert!(connect_now(dir.path()).is_none(), "no longer served");
        store.close().expect("close");
    }

    #[test]
    fn open_or_connect_opens_connects_or_names_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = match open_or_connect(dir.path()) {
            Ok(Opened::Store(store)) => store,
            other => panic!("a free store opens: {other:?}"),
        };
        match open_or_connect(dir.path()) {
            Err(OpenError::NotServed { message, .. }) => {
                assert!(message.contains("does not share it"), "{message}");
                assert!(message.contains("factlog serve"), "{message}");
            }
            other => panic!("held and not served: {other:?}"),
        }
        let server = store.serve(crate::server::ServeOptions::new()).expect("serve");
        match open_or_connect(dir.path()) {
            Ok(Opened::Client(mut client)) => {
                assert_eq!(client.revision("t1").expect("revision"), 0);
            }
            other => panic!("held and served: {other:?}"),
        }
        drop(server);
        store.close().expect("close");
    }

    #[test]
    fn only_a_locked_store_falls_back_and_the_socket_decides() {
        let dir = tempfile::tempdir().expect("tempdir");
        let other = Error::from(ErrorKind::ReadOnly);
        assert_eq!(held_by_another(dir.path(), &other), None);
        let locked = Error::from(ErrorKind::Locked { dir: dir.path().to_path_buf() });
        assert!(matches!(held_by_another(dir.path(), &locked), Some(Held::NotServed { .. })));
        std::fs::write(socket_path(dir.path()), b"").expect("socket stand-in");
        assert_eq!(
            held_by_another(dir.path(), &locked),
            Some(Held::Served { socket: socket_path(dir.path()) })
        );
        let message = not_served_message(dir.path(), &locked, Some(42), "emit connects to it");
        assert!(message.contains("process 42, holding it,"), "{message}");
        assert!(message.ends_with("and emit connects to it"), "{message}");
    }
}
