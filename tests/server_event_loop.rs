//! The served store's event loops (`format-spec/server.md`, "One event loop"): many
//! connections are served without a thread each, and a connection whose next line could block
//! a loop (a read) goes on in a thread of its own; a client that sends a long stream and reads
//! its replies as they come gets every reply, in order, whether or not its socket kept up.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::server::{Served, delta_texts, store_dir};
use factlog::client::Client;
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::server::ServeOptions;
use factlog::{AppendOptions, Durability, Seq, Store, StoreOptions};
use serde_json::Value;

/// Long enough for any scheduler: the waits below are for a condition, not a measurement.
const PATIENCE: Duration = Duration::from_secs(60);

/// The threads of process `pid` whose name starts with `prefix` (cut to 15 bytes).
fn threads(pid: u32, prefix: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[test]
fn connections_are_served_by_the_loops_and_a_read_moves_one_to_a_thread() {
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &[]);
    let pid = served.child.id();
    let synced = AppendOptions { durability: Some(Durability::Synced), ..Default::default() };
    let mut clients: Vec<Client> =
        (0..40).map(|_| Client::connect(&dir).expect("connect")).collect();
    for (i, client) in clients.iter_mut().enumerate() {
        let task = format!("t{i}");
        let message = UserMessage { text: format!("m{i}"), extra: Default::default() };
        client.append(&task, &Body::UserMessage(message), synced).expect("append");
        for n in 0..100 {
            client.delta(&task, &format!("{i}-{n}")).expect("delta");
        }
        client.flush().expect("flush");
    }
    // Forty connections, and no thread of their own: the loops serve them.
    assert_eq!(threads(pid, "factlog-client"), 0, "every connection is on an event loop");
    assert!(threads(pid, "factlog-loop") >= 1);
    // A read may wait for a sync: its connection goes on in a thread of its own.
    assert_eq!(clients[0].revision("t0").expect("revision"), 101);
    assert_eq!(threads(pid, "factlog-client"), 1, "the reading connection has a thread");
    // It still appends, from its thread.
    clients[0].delta("t0", "after").expect("delta");
    clients[0].flush().expect("flush");
    drop(clients);
    let deadline = Instant::now() + PATIENCE;
    while threads(pid, "factlog-client") > 0 {
        assert!(Instant::now() < deadline, "the promoted connection's thread did not end");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    let store = Store::open_read_only(&dir, StoreOptions::new()).expect("reopen");
    for i in 0..40 {
        let mut expected: Vec<String> = (0..100).map(|n| format!("{i}-{n}")).collect();
        if i == 0 {
            expected.push("after".to_owned());
        }
        assert_eq!(delta_texts(&store, &format!("t{i}")), expected, "task t{i}");
    }
}

/// A client that sends a long stream of fragments, answered line by line, and half-closes
/// its socket, while another thread reads the replies: every reply comes, in order, the last
/// ones after the end of its input, whether its socket took them at once or a thread had to
/// write them.
#[test]
fn a_client_that_sends_a_long_stream_and_half_closes_gets_every_reply() {
    const LINES: u64 = 20_000;
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let stream = UnixStream::connect(factlog::server::socket_path(&dir)).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).expect("read timeout");
    let reader = {
        let stream = stream.try_clone().expect("clone");
        std::thread::spawn(move || {
            let mut replies = Vec::new();
            for line in BufReader::new(stream).lines() {
                replies.push(line.expect("a reply line"));
            }
            replies
        })
    };
    let mut input = b"{\"hello\":\"factlog\",\"version\":1}\n".to_vec();
    for n in 0..LINES {
        input.extend_from_slice(
            format!("{{\"task\":\"t\",\"type\":\"assistant/delta\",\"text\":\"{n}\"}}\n")
                .as_bytes(),
        );
    }
    (&stream).write_all(&input).expect("send");
    stream.shutdown(std::net::Shutdown::Write).expect("half-close");
    let replies = reader.join().expect("the reader");
    assert_eq!(replies.len() as u64, LINES + 1, "the hello's reply and one a line");
    for (n, reply) in replies[1..].iter().enumerate() {
        let reply: Value = serde_json::from_str(reply).expect("JSON");
        assert_eq!(reply["revision"], n as u64 + 1, "{reply}");
    }
    drop(server);
    assert_eq!(store.task_state("t").expect("t").revision, LINES);
    assert_eq!(store.events(Seq(1)).expect("events").count() as u64, LINES);
    store.close().expect("close");
}

/// A line whose reply is far larger than a socket takes at once (a plan of twenty thousand
/// steps, each shaped like a credential, warned about one by one), sent with the end of the
/// input, and nothing read until the plan is in the store: the rest of the reply waits in the
/// server (in a thread, whether its connection was moved there while it ran or ended on the
/// loop) until the client reads. The whole reply comes.
#[test]
fn a_reply_the_socket_cannot_take_at_once_comes_whole_after_the_input_ended() {
    const STEPS: usize = 20_000;
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let stream = UnixStream::connect(factlog::server::socket_path(&dir)).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).expect("read timeout");
    let steps: Vec<String> =
        (0..STEPS).map(|n| format!("step {n} uses AKIAIOSFODNN7EXAMPLE")).collect();
    let plan = serde_json::json!({"id": 1, "task": "t", "type": "task/plan", "steps": steps});
    let mut input = b"{\"hello\":\"factlog\",\"version\":1}\n".to_vec();
    input.extend_from_slice(format!("{plan}\n").as_bytes());
    (&stream).write_all(&input).expect("send");
    stream.shutdown(std::net::Shutdown::Write).expect("half-close");
    // Nothing is read until the plan is in the store: its reply waits in the server.
    let deadline = Instant::now() + PATIENCE;
    while store.task_state("t").is_none_or(|state| state.revision < 1) {
        assert!(Instant::now() < deadline, "the plan was not appended");
        std::thread::sleep(Duration::from_millis(2));
    }
    let replies: Vec<String> =
        BufReader::new(&stream).lines().map(|line| line.expect("a reply line")).collect();
    assert_eq!(replies.len(), 2, "the hello's reply and the plan's");
    let reply: Value = serde_json::from_str(&replies[1]).expect("the whole reply");
    assert_eq!(reply["id"], 1);
    let warnings = reply["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), STEPS, "one warning a step");
    assert!(replies[1].len() > 256 * 1024, "larger than a socket takes: {}", replies[1].len());
    drop(server);
    store.close().expect("close");
}
