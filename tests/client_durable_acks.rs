//! A served store's connection with durable-only acknowledgements (`format-spec/server.md`,
//! "Acknowledgements"): the written replies of buffered events are skipped, every reply says
//! which lines it covers, a reply that cannot vouch for the skipped lines comes after a
//! covering reply of a sync; the client streams fragments without waiting, its requests and
//! its flush vouch for them, a refused fragment still comes back, and a server that does not
//! say the option back is spoken to line by line.

use crate::common;

use common::schema::assert_valid;
use common::server::{FAKE_HELLO_REPLY, delta_texts, fake_server, fake_written_reply, store_dir};
use factlog::client::{Client, ClientError};
use factlog::harness::Body;
use factlog::harness::event::{StepStart, TurnStart, UserMessage};
use factlog::limits::CLIENT_DELTA_BUFFER_BYTES;
use factlog::protocol::acks::AckMode;
use factlog::server::conn::{NoHolds, serve_stream};
use factlog::server::{ServeOptions, Server};
use factlog::{AppendOptions, Durability, Seq, Store, StoreOptions};
use serde_json::{Map, Value, json};

/// A served store and a client of it with durable-only acknowledgements.
fn durable_client() -> (tempfile::TempDir, Store, Server, Client) {
    let (temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let client = Client::connect_acks(&dir, AckMode::DurableOnly).expect("connect");
    (temp, store, server, client)
}

fn replies(output: &[u8]) -> Vec<Map<String, Value>> {
    output
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| match serde_json::from_slice(line).expect("a JSON reply") {
            Value::Object(object) => object,
            other => panic!("not an object: {other}"),
        })
        .collect()
}

/// The lines and replies of `format-spec/server.md`'s example, exactly, each reply checked
/// against its schema.
#[test]
fn buffered_replies_are_skipped_and_every_reply_says_what_it_covers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
    let input = [
        r#"{"hello":"factlog","version":1,"acks":"durable-only"}"#,
        r#"{"task":"t","type":"assistant/delta","text":"a"}"#,
        r#"{"id":5,"task":"t","type":"assistant/delta","text":"b"}"#,
        r#"{"task":"t","type":"turn/start"}"#,
        "",
        r#"{"id":1,"task":"t","type":"user/message","text":"m"}"#,
        r#"{"task":"t","type":"assistant/delta","text":"c"}"#,
        r#"{"task":"t","type":"no/such"}"#,
        r#"{"task":"t","type":"assistant/delta","text":"d"}"#,
        r#"{"id":2,"op":"revision","task":"t"}"#,
        r#"{"task":"t","type":"assistant/delta","text":"e"}"#,
        r#"{"id":3,"op":"sync"}"#,
        r#"{"task":"t","type":"assistant/delta","text":"f"}"#,
    ]
    .join("\n")
        + "\n";
    let mut output = Vec::new();
    let _ = serve_stream(&store, &NoHolds, 7, input.as_bytes(), &mut output);
    let replies = replies(&output);
    let expected = [
        json!({"hello":"factlog","version":1,"protocol":1,"pid":7,"acks":"durable-only"}),
        json!({"id":1,"seq":4,"task":"t","revision":4,"durability":"flushed","covers":4}),
        json!({"covers":1,"durability":"synced"}),
        json!({"error":"INVALID_EVENT","covers":1}),
        json!({"covers":1,"durability":"synced"}),
        json!({"id":2,"task":"t","revision":6,"covers":1}),
        json!({"id":3,"durability":"synced","covers":2}),
    ];
    assert_eq!(replies.len(), expected.len(), "{replies:?}");
    for (reply, expected) in replies.iter().zip(&expected) {
        for (key, value) in expected.as_object().expect("an object") {
            assert_eq!(reply.get(key), Some(value), "{key} of {reply:?}");
        }
        // Key order on the wire: `id` first, `covers` last (after a covering reply's own).
        if reply.contains_key("id") {
            assert_eq!(reply.keys().next().map(String::as_str), Some("id"), "{reply:?}");
        }
        if reply.len() > 2 && reply.contains_key("covers") {
            assert_eq!(reply.keys().next_back().map(String::as_str), Some("covers"), "{reply:?}");
        }
    }
    assert_valid("server-line.json", &Value::Object(replies[0].clone()));
    for reply in &replies[1..5] {
        assert_valid("emit-reply.json", &Value::Object(reply.clone()));
    }
    // A read's and a sync's replies are server-line.json's, with `covers` at the end.
    for reply in &replies[5..] {
        assert_valid("server-line.json", &Value::Object(reply.clone()));
    }
    assert_eq!(delta_texts(&store, "t"), ["a", "b", "c", "d", "e", "f"]);
    store.close().expect("close");
}

/// A hello that asks for acknowledgements the server does not have is refused, and the
/// connection ends there.
#[test]
fn an_unknown_acknowledgement_is_refused_at_the_hello() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
    for asked in [json!("sometimes"), json!(true)] {
        let hello = json!({"hello": "factlog", "version": 1, "acks": asked});
        let input = format!("{hello}\n{{\"task\":\"t\",\"type\":\"turn/start\"}}\n");
        let mut output = Vec::new();
        let _ = serve_stream(&store, &NoHolds, 1, input.as_bytes(), &mut output);
        let replies = replies(&output);
        assert_eq!(replies.len(), 1, "{replies:?}");
        assert_eq!(replies[0]["error"], "UNSUPPORTED_VERSION");
        let message = replies[0]["message"].as_str().expect("message");
        assert!(message.contains("\"durable-only\""), "{message}");
        assert_valid("server-line.json", &Value::Object(replies[0].clone()));
    }
    // Asked for explicitly, `every` is said back and every line is answered.
    let input = "{\"hello\":\"factlog\",\"version\":1,\"acks\":\"every\"}\n\
                 {\"task\":\"t\",\"type\":\"turn/start\"}\n";
    let mut output = Vec::new();
    let _ = serve_stream(&store, &NoHolds, 1, input.as_bytes(), &mut output);
    let replies = replies(&output);
    assert_eq!(replies[0]["acks"], "every");
    assert_eq!(replies[1]["durability"], "buffered");
    assert!(!replies[1].contains_key("covers"));
    assert_eq!(store.task_state("t").expect("t").revision, 1);
    store.close().expect("close");
}

/// Many buffers of fragments, requests between them, a refused pipelined append: everything
/// arrives in order, the refusal comes back from the next request (which still ran), and
/// `flush` makes every fragment durable.
#[test]
fn a_durable_only_client_streams_without_waiting_and_its_requests_vouch_for_the_fragments() {
    let (_temp, store, server, mut client) = durable_client();
    assert_eq!(client.acks(), AckMode::DurableOnly);
    let count = 4 * CLIENT_DELTA_BUFFER_BYTES / 20;
    let mut expected = Vec::new();
    let message = Body::UserMessage(UserMessage { text: "m".into(), extra: Default::default() });
    for i in 0..count {
        let text = format!("fragment {i} \"é\"\n");
        client.delta("t1", &text).expect("delta");
        expected.push(text);
        if i % 1000 == 999 {
            assert_eq!(client.revision("t1").expect("revision"), i as u64 + 1);
            let synced =
                AppendOptions { durability: Some(Durability::Synced), ..Default::default() };
            let appended = client.append("t2", &message, synced).expect("append");
            assert!(matches!(appended, factlog::Appended::Written { .. }), "{appended:?}");
        }
    }
    client.append_pipelined("t1", &Body::TurnStart(TurnStart::default())).expect("turn");
    client.append_pipelined("t1", &Body::StepStart(StepStart::default())).expect("step");
    // A second step while one is open: refused when the store runs it.
    client.append_pipelined("t1", &Body::StepStart(StepStart::default())).expect("buffered");
    client.delta("t1", "after the refusal").expect("delta");
    let error = client.append("t2", &message, AppendOptions::default()).expect_err("refusal");
    assert_eq!(error.code(), Some("INVALID_EVENT"), "{error}");
    let ClientError::PipelinedRefused { request_reply, .. } = &error else {
        panic!("not PipelinedRefused: {error:?}");
    };
    assert_eq!(request_reply["durability"], "flushed", "the request still ran: {error}");
    assert!(!request_reply.contains_key("covers"), "the count is the client's");
    expected.push("after the refusal".to_owned());
    client.delta("t1", "last").expect("delta");
    expected.push("last".to_owned());
    client.flush().expect("flush");
    assert_eq!(delta_texts(&store, "t1"), expected);
    let revision = store.task_state("t1").expect("t1").revision;
    assert_eq!(revision, count as u64 + 4, "the fragments, a turn, a step and two more");
    assert_eq!(client.revision("t1").expect("revision"), revision, "still in step");
    drop(client);
    drop(server);
    store.close().expect("close");
}

/// A server that answers the hello without saying `acks` back (one of an earlier release)
/// answers every line: the client speaks to it line by line.
#[test]
fn a_server_that_does_not_say_the_option_back_is_answered_line_by_line() {
    let (_temp, dir) = store_dir();
    let mut n = 0;
    let server = fake_server(&dir.join("factlog.sock"), FAKE_HELLO_REPLY, move |request| {
        n += 1;
        Some(fake_written_reply(request, n))
    });
    let mut client = Client::connect_acks(&dir, AckMode::DurableOnly).expect("connect");
    assert_eq!(client.acks(), AckMode::Every, "not granted");
    client.delta("t", "a").expect("delta");
    client.delta("t", "b").expect("delta");
    client.flush().expect("flush reads the two replies");
    assert_eq!(client.revision("t").expect("revision"), 3);
    drop(client);
    let (hello, lines) = server.join().expect("the fake server");
    assert!(hello.contains("\"acks\":\"durable-only\""), "{hello}");
    assert_eq!(lines.len(), 3);
}

/// An awaited append (or batch) of events that are buffered by default gets a reply under
/// durable-only acknowledgements: the client asks for `flushed`, since a `buffered` reply is
/// never sent.
#[test]
fn an_awaited_buffered_append_is_asked_flushed_and_answered() {
    let (_temp, store, server, mut client) = durable_client();
    // A hang would end here with an error instead.
    client.set_read_timeout(Some(std::time::Duration::from_secs(60))).expect("timeout");
    let turn = Body::TurnStart(TurnStart::default());
    let appended = client.append("t", &turn, AppendOptions::default()).expect("a reply");
    assert!(matches!(appended, factlog::Appended::Written { seq: Seq(1), revision: 1 }));
    let buffered = AppendOptions { durability: Some(Durability::Buffered), ..Default::default() };
    let step = Body::StepStart(StepStart::default());
    client.append("t", &step, buffered).expect("asked buffered, answered");
    client.delta("t", "x").expect("delta");
    let end = Body::StepEnd(Default::default());
    client.append("t", &end, AppendOptions::default()).expect("step end");
    // Every member buffered by default.
    let delta = Body::AssistantDelta(factlog::harness::event::AssistantDelta { text: "z".into() });
    let batch = [Body::StepStart(StepStart::default()), delta];
    let appended = client.append_batch("t", &batch, AppendOptions::default()).expect("a batch");
    assert!(matches!(appended, factlog::Appended::Written { revision: 6, .. }), "{appended:?}");
    // Through the task handle too.
    client.task("t").delta("y").expect("delta");
    assert_eq!(client.revision("t").expect("revision"), 7);
    // A raw request whose `durability` is null (the event's default, as the server reads it).
    let raw = json!({"task": "u", "type": "turn/start", "durability": null});
    let Value::Object(raw) = raw else { unreachable!() };
    let reply = client.request(raw).expect("a reply");
    assert_eq!(reply["durability"], "flushed", "{reply:?}");
    drop(client);
    drop(server);
    store.close().expect("close");
}

/// Many refused pipelined appends in a row: their error replies (about 4 MB, five times the
/// lines sent) come while the client is still sending, and the client reads them as it sends
/// (between buffers, and whenever the socket is full); the first refusal is what `flush`
/// returns, every line was run, and the connection goes on in step.
#[test]
fn refusals_while_streaming_are_read_as_the_client_sends_and_returned_by_flush() {
    let (_temp, store, server, mut client) = durable_client();
    client.append_pipelined("t", &Body::TurnStart(TurnStart::default())).expect("turn");
    client.append_pipelined("t", &Body::StepStart(StepStart::default())).expect("step");
    // Each one a step while a step is open: refused by the store when it runs it.
    for _ in 0..20_000 {
        client.append_pipelined("t", &Body::StepStart(StepStart::default())).expect("buffered");
    }
    client.delta("t", "after").expect("delta");
    let error = client.flush().expect_err("the first refusal");
    assert_eq!(error.code(), Some("INVALID_EVENT"), "{error}");
    // Everything was sent and run; the later refusals were read and dropped.
    client.flush().expect("the delta is synced");
    assert_eq!(client.revision("t").expect("in step"), 3);
    assert_eq!(delta_texts(&store, "t"), ["after"]);
    drop(client);
    drop(server);
    store.close().expect("close");
}
