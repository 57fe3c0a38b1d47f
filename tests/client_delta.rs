//! `Client::delta` pipelines fragments: many of them, across several sends of the client's
//! buffer and interleaved with requests that wait, all reach the log in order with the right
//! revisions; a fragment the store would refuse is refused at once, without being sent; a
//! client dropped with fragments still buffered sends them.

use crate::common;

use std::time::{Duration, Instant};

use common::server::{delta_texts, store_dir};
use factlog::client::Client;
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::limits::{CLIENT_DELTA_BUFFER_BYTES, DELTA_TEXT_BYTES_MAX};
use factlog::server::ServeOptions;
use factlog::{AppendOptions, Durability, Store, StoreOptions};

#[test]
fn pipelined_fragments_arrive_in_order_around_waiting_requests() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    // Enough fragments to send the buffer many times over.
    let count = 4 * CLIENT_DELTA_BUFFER_BYTES / 20;
    let mut expected = Vec::new();
    for i in 0..count {
        let text = format!("fragment {i} \"é\"\n");
        client.delta("t1", &text).expect("delta");
        expected.push(text);
        if i % 1000 == 999 {
            // A request that waits: every fragment before it is appended first.
            let revision = client.revision("t1").expect("revision");
            assert_eq!(revision, i as u64 + 1, "revision after {} fragments", i + 1);
            let synced =
                AppendOptions { durability: Some(Durability::Synced), ..Default::default() };
            let body =
                Body::UserMessage(UserMessage { text: "m".into(), extra: Default::default() });
            client.append("t2", &body, synced).expect("append");
        }
    }
    client.flush().expect("flush");
    assert_eq!(store.task_revision("t1").map(|(revision, _)| revision), Some(count as u64));
    assert_eq!(delta_texts(&store, "t1"), expected);
    drop(client);
    drop(server);
    store.close().expect("close");
}

#[test]
fn a_fragment_the_store_would_refuse_is_refused_without_sending() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    client.delta("t1", "before").expect("delta");
    let long = "x".repeat(DELTA_TEXT_BYTES_MAX + 1);
    let error = client.delta("t1", &long).expect_err("too long");
    assert_eq!(error.code(), Some("LIMIT_EXCEEDED"), "{error}");
    let error = client.delta("", "no task").expect_err("empty task");
    assert_eq!(error.code(), Some("INVALID_EVENT"), "{error}");
    let error = client.delta(&"t".repeat(200), "long task").expect_err("long task");
    assert_eq!(error.code(), Some("LIMIT_EXCEEDED"), "{error}");
    client.delta("t1", "after").expect("delta");
    client.flush().expect("flush");
    assert_eq!(delta_texts(&store, "t1"), ["before", "after"]);
    drop(client);
    drop(server);
    store.close().expect("close");
}

#[test]
fn a_dropped_client_sends_its_buffered_fragments() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    for i in 0..3 {
        client.delta("t1", &format!("f{i}")).expect("delta");
    }
    drop(client);
    // The server handles the fragments before it sees the connection end; wait for that
    // (a liveness bound, not a measurement).
    let deadline = Instant::now() + Duration::from_secs(30);
    while delta_texts(&store, "t1").len() < 3 {
        assert!(Instant::now() < deadline, "the buffered fragments never arrived");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(delta_texts(&store, "t1"), ["f0", "f1", "f2"]);
    drop(server);
    store.close().expect("close");
}

/// A fake server of an earlier release on a socket of its own ([`common::server::fake_server`]).
fn fake_server(
    temp: &tempfile::TempDir,
    answer: impl FnMut(&serde_json::Value) -> Option<String> + Send + 'static,
) -> (std::path::PathBuf, std::thread::JoinHandle<(String, Vec<String>)>) {
    let socket = temp.path().join("fake.sock");
    let server = common::server::fake_server(&socket, common::server::FAKE_HELLO_REPLY, answer);
    (socket, server)
}

/// A server that refuses the first fragment it gets and writes everything else: the
/// client returns the refusal from the request it sent after the fragments, as
/// `PipelinedRefused` with that request's own reply, and the connection stays in step.
#[test]
fn a_refused_fragment_is_returned_by_the_next_request_which_still_ran() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (mut refused_one, mut seq) = (false, 0);
    let (socket, server) = fake_server(&temp, move |request| {
        seq += 1;
        Some(if request["type"] == "assistant/delta" {
            if refused_one {
                format!(
                    "{{\"seq\":{seq},\"task\":\"t\",\"revision\":{seq},\"durability\":\"buffered\"}}"
                )
            } else {
                refused_one = true;
                "{\"error\":\"LIMIT_EXCEEDED\",\"message\":\"too many tasks\"}".to_owned()
            }
        } else {
            format!(
                "{{\"id\":{},\"seq\":{seq},\"task\":\"t\",\"revision\":{seq},\"durability\":\"synced\"}}",
                request["id"]
            )
        })
    });
    let mut client = Client::connect_socket(&socket).expect("connect");
    for text in ["a", "b", "c"] {
        client.delta("t", text).expect("buffered");
    }
    let body = Body::UserMessage(UserMessage { text: "m".into(), extra: Default::default() });
    let error = client.append("t", &body, AppendOptions::default()).expect_err("the refusal");
    assert_eq!(error.code(), Some("LIMIT_EXCEEDED"), "{error}");
    assert!(error.to_string().contains("still ran and was answered written"), "{error}");
    let factlog::client::ClientError::PipelinedRefused { request_reply, .. } = &error else {
        panic!("not PipelinedRefused: {error:?}");
    };
    assert_eq!(request_reply["durability"], "synced", "the request's own reply is kept");
    // In step: the next request gets its own reply.
    client.append("t", &body, AppendOptions::default()).expect("the next request");
    drop(client);
    server.join().expect("the fake server");
}

/// `append_pipelined` takes only events that are buffered by default, sends them in order
/// with the fragments, and a refusal by the store's checks comes back from the next request.
#[test]
fn pipelined_appends_are_buffered_events_checked_in_order() {
    use factlog::harness::event::{StepStart, TurnStart};

    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    let message = Body::UserMessage(UserMessage { text: "m".into(), extra: Default::default() });
    let error = client.append_pipelined("t1", &message).expect_err("flushed by default");
    assert_eq!(error.code(), Some("INVALID_EVENT"), "{error}");

    client.append_pipelined("t1", &Body::TurnStart(TurnStart::default())).expect("turn");
    client.append_pipelined("t1", &Body::StepStart(StepStart::default())).expect("step");
    client.delta("t1", "x").expect("delta");
    assert_eq!(client.revision("t1").expect("revision"), 3);

    // A step while one is open: the store refuses it when it runs it, and the next request
    // (which still ran) returns that refusal.
    client.append_pipelined("t1", &Body::StepStart(StepStart::default())).expect("buffered");
    let error = client.revision("t1").expect_err("the refused step");
    assert_eq!(error.code(), Some("INVALID_EVENT"), "{error}");
    assert!(error.to_string().contains("still ran"), "{error}");
    assert_eq!(client.revision("t1").expect("revision"), 3, "nothing more was written");
    drop(client);
    drop(server);
    store.close().expect("close");
}

/// A refusal that ends the stream (the server answers, then closes) is what the client
/// returns, not the end of the connection it causes.
#[test]
fn a_refusal_that_ends_the_stream_is_returned_not_hidden_by_the_end() {
    let temp = tempfile::tempdir().expect("tempdir");
    let mut answered = false;
    let (socket, server) = fake_server(&temp, move |_| {
        // The store failed: the server answers the first fragment and closes.
        (!std::mem::replace(&mut answered, true))
            .then(|| "{\"error\":\"DISK_FULL\",\"message\":\"the disk is full\"}".to_owned())
    });
    let mut client = Client::connect_socket(&socket).expect("connect");
    client.delta("t", "a").expect("buffered");
    client.delta("t", "b").expect("buffered");
    let error = client.revision("t").expect_err("the store failed");
    assert_eq!(error.code(), Some("DISK_FULL"), "{error}");
    server.join().expect("the fake server");
    let error = client.revision("t").expect_err("gone");
    assert!(matches!(error, factlog::client::ClientError::Disconnected { .. }), "{error}");
}

/// A server that is alive but never answers: with a read timeout the call returns
/// `TimedOut` instead of waiting forever, and the client is abandoned (its later calls fail
/// at once, nothing more is sent).
#[test]
fn a_read_timeout_ends_the_wait_and_abandons_the_client() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let (socket, server) = fake_server(&temp, move |request| {
        let _ = seen_tx.send(request.clone());
        // Never answer: hold the connection open (the test process ends first).
        std::thread::sleep(Duration::from_secs(3600));
        None
    });
    let mut client = Client::connect_socket(&socket).expect("connect");
    client.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
    let error = client.revision("t").expect_err("no answer");
    assert!(matches!(error, factlog::client::ClientError::TimedOut { .. }), "{error}");
    assert!(error.to_string().contains("abandoned"), "{error}");
    let error = client.delta("t", "x").and_then(|()| client.flush()).expect_err("abandoned");
    assert!(matches!(error, factlog::client::ClientError::Disconnected { .. }), "{error}");
    assert_eq!(seen_rx.recv().expect("the request")["op"], "revision");
    assert!(seen_rx.try_recv().is_err(), "nothing more was sent");
    drop(client);
    drop(server); // the fake server's thread sleeps on; the process ends with the test
}
