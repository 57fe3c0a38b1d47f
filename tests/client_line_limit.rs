//! Proves that the Rust client refuses a request line the server would not read (longer than
//! `SERVER_LINE_BYTES_MAX`, newline included) with `LIMIT_EXCEEDED` before sending it, so
//! the connection goes on and nothing is written, as an embedded store goes on after an
//! over-long event; a line of exactly the limit is sent and answered. Checked for a request
//! and for a pipelined append, on an in-process server.

use crate::common;

use common::server::store_dir;
use factlog::client::{Client, ClientError};
use factlog::harness::Body;
use factlog::harness::event::{Plan, UserMessage};
use factlog::limits::SERVER_LINE_BYTES_MAX;
use factlog::server::ServeOptions;
use factlog::{AppendOptions, Appended, Store, StoreOptions};
use serde_json::{Map, Value, json};

/// A `state` request of task `t` whose line (newline included) is `bytes` long, padded by an
/// extra key the server ignores.
fn state_request(bytes: usize) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("id".to_owned(), json!(1));
    object.insert("op".to_owned(), json!("state"));
    object.insert("task".to_owned(), json!("t"));
    object.insert("pad".to_owned(), json!(""));
    let empty = serde_json::to_vec(&object).expect("encode").len() + 1;
    object.insert("pad".to_owned(), json!("x".repeat(bytes - empty)));
    assert_eq!(serde_json::to_vec(&object).expect("encode").len() + 1, bytes);
    object
}

fn message(text: String) -> Body {
    Body::UserMessage(UserMessage { text, extra: Default::default() })
}

fn assert_line_refused(result: Result<impl std::fmt::Debug, ClientError>) {
    match result {
        Err(ClientError::Refused { code, message, .. }) => {
            assert_eq!(code, "LIMIT_EXCEEDED", "{message}");
            assert!(message.contains("nothing was sent"), "{message}");
        }
        other => panic!("expected a LIMIT_EXCEEDED refusal, got {other:?}"),
    }
}

#[test]
fn an_over_long_request_is_refused_unsent_and_the_connection_goes_on() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");

    // The limit itself is read by the server: the request is answered.
    let reply = client.request(state_request(SERVER_LINE_BYTES_MAX)).expect("a line at the limit");
    assert!(reply.contains_key("state"), "{reply:?}");

    // One byte more is refused here; the same client goes on.
    assert_line_refused(client.request(state_request(SERVER_LINE_BYTES_MAX + 1)));
    let text = "x".repeat(SERVER_LINE_BYTES_MAX);
    assert_line_refused(client.append("t", &message(text.clone()), AppendOptions::default()));
    let plan = Body::Plan(Plan { steps: vec![text], extra: Default::default() });
    assert_line_refused(client.append_pipelined("t", &plan));
    client.flush().expect("nothing pending");

    let appended = client
        .append("t", &message("after".to_owned()), AppendOptions::default())
        .expect("the connection goes on");
    let Appended::Written { revision, .. } = appended else { panic!("{appended:?}") };
    assert_eq!(revision, 1, "nothing of the refused requests was written");
    drop(client);
    server.stop().expect("stop");
    assert_eq!(store.task_ids().len(), 1);
    store.close().expect("close");
}
