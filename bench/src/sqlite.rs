//! The SQLite baseline of the many-session benches (`benches/sessions.rs`, `benches/clients.rs`):
//! one WAL database, a connection per session with `synchronous=FULL`, each event one insert.
//! Behind the feature `sqlite` (which the benches enable), so that the `factlog` command,
//! which links this crate for `bench` and `demo`, does not build SQLite.

use std::time::{Duration, Instant};

use crate::events::Workload;
use crate::many::Timings;

/// How long a SQLite connection waits for the write lock before it gives up: long enough that
/// no session of these benches ever fails, so its waits show in the latencies instead.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Creates the SQLite database at `path` in WAL mode with its one table; the connection
/// returned keeps it open.
pub fn create(path: &std::path::Path) -> rusqlite::Connection {
    let setup = rusqlite::Connection::open(path).expect("open the database");
    let mode: String =
        setup.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0)).expect("WAL mode");
    assert_eq!(mode, "wal");
    setup
        .execute_batch(
            "CREATE TABLE events(seq INTEGER PRIMARY KEY, task TEXT, type TEXT, body BLOB);",
        )
        .expect("create the table");
    setup
}

/// One session's connection: `synchronous=FULL` and a long busy timeout.
pub fn connect(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("open a connection");
    conn.busy_timeout(BUSY_TIMEOUT).expect("busy timeout");
    conn.execute_batch("PRAGMA synchronous=FULL;").expect("synchronous=FULL");
    conn
}

/// One session through its own connection: `BEGIN IMMEDIATE` at its first event after a
/// commit, every event inserted, a commit at each critical event.
pub fn session(conn: &rusqlite::Connection, w: &Workload) -> Timings {
    let mut begin = conn.prepare("BEGIN IMMEDIATE").expect("prepare BEGIN");
    let mut commit = conn.prepare("COMMIT").expect("prepare COMMIT");
    let mut insert = conn
        .prepare("INSERT INTO events(task, type, body) VALUES (?1, ?2, ?3)")
        .expect("prepare the insert");
    let mut timings = Timings::default();
    let mut open = false;
    for event in &w.events {
        let start = Instant::now();
        if !open {
            begin.execute([]).expect("BEGIN IMMEDIATE");
            open = true;
        }
        insert.execute(rusqlite::params![w.task, event.type_name, event.body]).expect("insert");
        if event.critical {
            commit.execute([]).expect("COMMIT");
            open = false;
        }
        timings.record(start, event.critical);
    }
    assert!(!open, "the session ends with a commit");
    timings
}
