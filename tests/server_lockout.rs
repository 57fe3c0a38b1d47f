//! Proves that hostile local connections cannot lock a served store (issue 25, item 4):
//! - 100 connections that open the socket and never say hello take the free slots, but a
//!   client already connected keeps writing meanwhile, and each silent connection is closed
//!   after the hello timeout, so a new client is served again without anyone leaving;
//! - a connection that said hello and then sends nothing is closed after the idle timeout,
//!   and its tasks are handed over as when it leaves;
//! - a connection that trickles bytes (part of a hello, then blank lines after one) is closed
//!   all the same: the bounds are deadlines, not gaps between reads;
//! - when another group is admitted, one user holds at most three quarters of the slots, so
//!   it cannot take every slot from the other admitted user;
//! - a second `factlog serve` on a served store names the serving process and what to do.

use crate::common;

use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::server::{Conn, Served, store_dir};
use factlog::client::Client;
use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};
use serde_json::json;

/// Long enough for any scheduler: the waits below are for a condition, not a measurement.
const PATIENCE: Duration = Duration::from_secs(60);

fn message(text: &str) -> serde_json::Value {
    json!({"task": "t", "type": "user/message", "text": text})
}

#[test]
fn connections_that_never_say_hello_are_closed_and_do_not_stop_a_writer() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let options = ServeOptions::new().hello_timeout(Duration::from_millis(300));
    let server = store.serve(options).expect("serve");
    let mut writer = Conn::connect(&dir).expect("connect");
    writer.hello();
    let silent: Vec<UnixStream> = (0..100)
        .map(|_| UnixStream::connect(factlog::server::socket_path(&dir)).expect("connect"))
        .collect();
    // The connected client keeps writing while the silent ones hold the other slots.
    for i in 0..20 {
        let reply = writer.call(&message(&format!("m{i}")));
        assert!(reply.get("seq").is_some(), "{reply}");
    }
    // Every silent connection is closed by the server: refused at once when every slot was
    // taken, or after the hello timeout. Each is read to its end, since connections still
    // waiting in the listen queue are admitted (and take a slot) as earlier ones are closed:
    // the client count alone can drop to 1 for a moment while some are not yet accepted.
    for mut stream in silent {
        stream.set_read_timeout(Some(PATIENCE)).expect("a read timeout");
        let mut rest = Vec::new();
        let read = std::io::Read::read_to_end(&mut stream, &mut rest);
        assert!(read.is_ok(), "a silent connection was not closed by the server: {read:?}");
    }
    let deadline = Instant::now() + PATIENCE;
    while server.clients() > 1 {
        assert!(Instant::now() < deadline, "{} clients still connected", server.clients());
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut client = Client::connect(&dir).expect("served again, nobody having left");
    assert_eq!(client.revision("t").expect("revision"), 20);
    drop((client, writer));
    drop(server);
    store.close().expect("close");
}

#[test]
fn an_idle_connection_is_closed_and_its_tasks_handed_over() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let options = ServeOptions::new().idle_timeout(Duration::from_millis(200));
    let server = store.serve(options).expect("serve");
    let mut idle = Conn::connect(&dir).expect("connect");
    idle.hello();
    let call = json!({"task": "t", "type": "tool/call", "call_id": "c1", "tool": "pay",
        "effect": "unsafe"});
    assert!(idle.call(&call).get("seq").is_some());
    // A bound on the test's own wait, so that a server that never closes it fails the test.
    idle.stream.set_read_timeout(Some(PATIENCE)).expect("a read timeout");
    // Nothing more from it: the server closes the connection and hands the task over.
    assert!(idle.read().is_none(), "the idle connection was closed");
    let deadline = Instant::now() + PATIENCE;
    while server.clients() > 0 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let state = store.task_state("t").expect("task");
    let status = state.session.calls[&factlog::harness::CallId::from("c1")].status;
    assert_eq!(status, factlog::harness::state::CallStatus::OutcomeUnknown);
    drop(server);
    store.close().expect("close");
}

/// Writes `byte` every `every` until the server closes the connection (a write fails), for at
/// most `PATIENCE`; returns how many it wrote.
fn trickle(stream: &mut UnixStream, byte: u8, every: Duration) -> usize {
    use std::io::Write;
    let deadline = Instant::now() + PATIENCE;
    let mut written = 0;
    while Instant::now() < deadline {
        if stream.write_all(&[byte]).and_then(|()| stream.flush()).is_err() {
            return written;
        }
        written += 1;
        std::thread::sleep(every);
    }
    panic!("the server kept a trickling connection open for {PATIENCE:?} ({written} bytes)");
}

#[test]
fn a_connection_that_trickles_bytes_is_closed_all_the_same() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let bound = Duration::from_millis(300);
    let options = ServeOptions::new().hello_timeout(bound).idle_timeout(bound);
    let server = store.serve(options).expect("serve");
    // Part of a hello, one byte every 50 ms: each read gets a byte long before the bound.
    let mut before_hello =
        UnixStream::connect(factlog::server::socket_path(&dir)).expect("connect");
    let written = trickle(&mut before_hello, b' ', Duration::from_millis(50));
    assert!(written >= 2, "the server closed it before the bound: {written} bytes");
    // After a hello, blank lines are not requests: the idle bound runs on.
    let mut after_hello = Conn::connect(&dir).expect("connect");
    after_hello.hello();
    let written = trickle(&mut after_hello.stream, b'\n', Duration::from_millis(50));
    assert!(written >= 2, "the server closed it before the bound: {written} bytes");
    let deadline = Instant::now() + PATIENCE;
    while server.clients() > 0 {
        assert!(Instant::now() < deadline, "{} clients still connected", server.clients());
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(server);
    store.close().expect("close");
}

#[test]
fn with_another_group_admitted_one_user_holds_at_most_its_share_of_the_slots() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let gid = rustix::process::getegid().as_raw();
    let options = ServeOptions::new().clients_max(8).allow_group(Some(gid + 1));
    let server = store.serve(options).expect("serve");
    let mut held = Vec::new();
    for _ in 0..6 {
        let mut conn = Conn::connect(&dir).expect("connect");
        conn.hello();
        held.push(conn);
    }
    // Six of eight slots is this user's share: the seventh connection is refused, naming it,
    // and two slots stay free for the other admitted user.
    let mut refused = Conn::connect(&dir).expect("connect");
    let reply = refused.read().expect("a refusal");
    assert_eq!(reply["error"], "SERVER_BUSY", "{reply}");
    assert!(reply["message"].as_str().unwrap().contains("its share"), "{reply}");
    assert_eq!(server.clients(), 6);
    drop((held, refused));
    drop(server);
    store.close().expect("close");
}

#[test]
fn a_second_serve_names_the_serving_process() {
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &[]);
    let run = common::factlog(&["serve", dir.to_str().unwrap()], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("already served"), "{run:?}");
    assert!(run.stderr.contains(&served.child.id().to_string()), "{run:?}");
    let (code, _) = served.terminate();
    assert_eq!(code, Some(0));
}
