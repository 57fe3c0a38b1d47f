//! Proves the `follow` request of a served store (`format-spec/server.md`), against a real
//! `factlog serve` process through raw socket lines and in process through
//! `factlog::client::Client`: it answers at once, like `events`, when events exist; it waits
//! and wakes when another client appends (skipping other tasks' events when it follows one
//! task); it ends with an empty page at its timeout; out-of-range `timeout_ms` and `limit`
//! are refused `INVALID_EVENT` and the connection goes on; and stopping the server
//! (`Server::stop`, SIGTERM) ends a waiting follow at once instead of after its timeout. The
//! only clock comparisons are against the request's own timeout: a reply that came before
//! it did not wait it out.

use crate::common;

use std::time::{Duration, Instant};

use common::server::{Conn, Served, store_dir};
use factlog::client::{Client, ClientError};
use factlog::limits::SERVER_FOLLOW_TIMEOUT_MS_MAX;
use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};
use serde_json::{Map, Value, json};

const WAIT_MS: u64 = SERVER_FOLLOW_TIMEOUT_MS_MAX;

fn message(task: &str, text: &str) -> Value {
    json!({"task": task, "type": "user/message", "text": text})
}

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

fn seqs(reply: &Value) -> Vec<u64> {
    let events = reply["events"].as_array().unwrap_or_else(|| panic!("a page: {reply}"));
    events.iter().map(|event| event["seq"].as_u64().expect("seq")).collect()
}

#[test]
fn follow_answers_at_once_like_events_when_events_exist() {
    let (_temp, dir) = store_dir();
    let _served = Served::start(&dir, &[]);
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    for i in 0..3 {
        assert_eq!(conn.call(&message("t", &i.to_string()))["seq"], i + 1);
    }
    let events = conn.call(&json!({"id": 1, "op": "events", "from_seq": 2}));
    let started = Instant::now();
    let followed =
        conn.call(&json!({"id": 1, "op": "follow", "from_seq": 2, "timeout_ms": WAIT_MS}));
    assert!(started.elapsed() < Duration::from_millis(WAIT_MS), "it did not wait its timeout");
    assert_eq!(followed, events, "the same reply as events");
    assert_eq!(seqs(&followed), [2, 3]);
    assert_eq!(followed["next_seq"], 4);
}

#[test]
fn follow_waits_and_wakes_when_another_client_appends_to_its_task() {
    let (_temp, dir) = store_dir();
    let _served = Served::start(&dir, &[]);
    let mut writer = Conn::connect(&dir).expect("connect");
    writer.hello();
    assert_eq!(writer.call(&message("t", "before"))["seq"], 1);

    let mut follower = Conn::connect(&dir).expect("connect");
    follower.hello();
    let started = Instant::now();
    follower.send(
        &json!({"id": "f", "op": "follow", "from_seq": 2, "task": "t", "timeout_ms": WAIT_MS}),
    );
    // An event of another task wakes the follower, which skips it and waits on.
    assert_eq!(writer.call(&message("other", "skipped"))["seq"], 2);
    assert_eq!(writer.call(&message("t", "after"))["seq"], 3);
    let reply = follower.read().expect("the follow reply");
    assert!(started.elapsed() < Duration::from_millis(WAIT_MS), "woken, not timed out");
    assert_eq!(reply["id"], "f");
    assert_eq!(seqs(&reply), [3], "{reply}");
    assert_eq!(reply["events"][0]["text"], "after");
    assert_eq!(reply["next_seq"], 4);
}

#[test]
fn follow_times_out_with_an_empty_page() {
    let (_temp, dir) = store_dir();
    let _served = Served::start(&dir, &[]);
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    conn.call(&message("t", "one"));
    conn.call(&message("u", "two"));
    for timeout_ms in [0, 20] {
        let reply =
            conn.call(&json!({"id": 2, "op": "follow", "from_seq": 3, "timeout_ms": timeout_ms}));
        assert_eq!(reply, json!({"id": 2, "events": [], "next_seq": 3, "last_seq": 2}));
    }
    // Following one task past the other's events: the empty page moves past them.
    let reply =
        conn.call(&json!({"id": 3, "op": "follow", "from_seq": 1, "task": "u2", "timeout_ms": 20}));
    assert_eq!(reply, json!({"id": 3, "events": [], "next_seq": 3, "last_seq": 2}));
}

#[test]
fn out_of_range_timeouts_and_limits_are_refused_and_the_connection_goes_on() {
    let (_temp, dir) = store_dir();
    let _served = Served::start(&dir, &[]);
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    for bad in [
        json!({"id": 1, "op": "follow", "timeout_ms": WAIT_MS + 1}),
        json!({"id": 1, "op": "follow", "timeout_ms": -1}),
        json!({"id": 1, "op": "follow", "timeout_ms": "10"}),
        json!({"id": 1, "op": "follow", "timeout_ms": 0, "limit": 0}),
        json!({"id": 1, "op": "follow", "timeout_ms": 0, "from_seq": "1"}),
        json!({"id": 1, "op": "follow", "timeout_ms": 0, "task": 5}),
    ] {
        let reply = conn.call(&bad);
        assert_eq!(reply["error"], "INVALID_EVENT", "{bad} -> {reply}");
        assert_eq!(reply["id"], 1);
    }
    let reply = conn.call(&json!({"op": "follow", "timeout_ms": WAIT_MS + 1}));
    assert!(reply["message"].as_str().unwrap().contains(&WAIT_MS.to_string()), "{reply}");
    assert_eq!(conn.call(&message("t", "still served"))["seq"], 1);
}

#[test]
fn sigterm_ends_a_waiting_follow_and_the_server_exits_0() {
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &[]);
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    let started = Instant::now();
    conn.send(&json!({"id": 9, "op": "follow", "from_seq": 1, "timeout_ms": WAIT_MS}));
    // A request on another connection is answered while the follow waits: it holds no lock.
    let mut other = Conn::connect(&dir).expect("connect");
    other.hello();
    assert_eq!(other.call(&json!({"op": "revision", "task": "t"}))["revision"], 0);
    drop(other);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_millis(WAIT_MS), "stopped before the timeout");
    // The follow got its empty page (or, stopped before it was read, no reply), then the end.
    if let Some(reply) = conn.read() {
        assert_eq!(reply, json!({"id": 9, "events": [], "next_seq": 1, "last_seq": 0}));
    }
    assert!(conn.read().is_none(), "the connection ends");
}

#[test]
fn server_stop_ends_a_waiting_follow_of_the_client() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    let started = Instant::now();
    let follower = std::thread::spawn(move || {
        client.follow(1, None, Duration::from_millis(SERVER_FOLLOW_TIMEOUT_MS_MAX))
    });
    while server.clients() == 0 {
        std::thread::yield_now();
    }
    server.stop().expect("stop");
    match follower.join().expect("the follower") {
        Ok((events, next)) => assert_eq!((events.len(), next), (0, 1)),
        Err(ClientError::Disconnected { .. }) => {}
        Err(error) => panic!("{error}"),
    }
    assert!(started.elapsed() < Duration::from_millis(WAIT_MS), "stopped before the timeout");
    store.close().expect("close");
}

#[test]
fn the_client_follows_events_as_they_are_appended() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut writer = Client::connect(&dir).expect("connect");
    for i in 0..3 {
        writer.request(object(message("t", &format!("m{i}")))).expect("append");
    }
    let mut reader = Client::connect(&dir).expect("connect");
    let (page, next) = reader.follow(1, Some("t"), Duration::ZERO).expect("a page");
    assert_eq!((page.len(), next), (3, 4));
    let (empty, next) = reader.follow(next, None, Duration::from_millis(1)).expect("empty");
    assert_eq!((empty.len(), next), (0, 4));

    let appender = std::thread::spawn(move || {
        for i in 3..6 {
            writer.request(object(message("t", &format!("m{i}")))).expect("append");
        }
    });
    let mut follow = reader.follow_events(1, Some("t"));
    let texts: Vec<String> = follow
        .by_ref()
        .take(6)
        .map(|event| event.expect("an event")["text"].as_str().expect("text").to_owned())
        .collect();
    assert_eq!(texts, ["m0", "m1", "m2", "m3", "m4", "m5"]);
    assert!(follow.next_seq() >= 7);
    appender.join().expect("the appender");
    drop(reader);
    server.stop().expect("stop");
    store.close().expect("close");
}
