//! What a process that cannot open a store because another process holds it does next
//! (`format-spec/server.md`): when the holder serves the store (`DIR/factlog.sock` exists),
//! connect to it with [`crate::client::Client`]; otherwise say which process holds it and how
//! to share it.
//!
//! One decision for every door that falls back to a client: `factlog emit`, `recover` and
//! `checkpoint`, and the Python package's `factlog.Store`. The socket file is the sign of a
//! served store: a server creates it when it starts and removes it when it stops; one left by
//! a server that was killed makes the connection fail with [`crate::client::ClientError::Connect`],
//! which each caller reports beside the `Locked` error.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind};
use crate::server::{lock_holder, socket_path};

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

#[cfg(test)]
mod tests {
    use super::*;

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
