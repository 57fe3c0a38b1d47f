//! Proves the client bound of a served store: with `clients_max(2)`, a third connection is
//! answered `SERVER_BUSY` (saying to retry or raise the limit) and closed while the two
//! others are served; once one of them leaves, a new client is served. The Rust client turns
//! the refusal into `ClientError::Handshake`.

use crate::common;

use common::server::{Conn, store_dir};
use factlog::client::{Client, ClientError};
use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};
use serde_json::json;

#[test]
fn a_connection_over_the_limit_is_answered_server_busy() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new().clients_max(2)).expect("serve");
    let mut first = Conn::connect(&dir).expect("connect");
    first.hello();
    let mut second = Conn::connect(&dir).expect("connect");
    second.hello();
    let mut third = Conn::connect(&dir).expect("connect");
    let reply = third.read().expect("a refusal");
    assert_eq!(reply["error"], "SERVER_BUSY", "{reply}");
    assert!(reply["message"].as_str().unwrap().contains("--clients-max"), "{reply}");
    assert!(third.read().is_none());
    match Client::connect(&dir) {
        Err(ClientError::Handshake { code, .. }) => assert_eq!(code, "SERVER_BUSY"),
        other => panic!("expected SERVER_BUSY: {other:?}"),
    }
    let reply = second.call(&json!({"id": 1, "task": "t", "type": "user/message", "text": "a"}));
    assert_eq!(reply["revision"], 1, "{reply}");

    drop(first);
    while server.clients() != 1 {
        std::thread::yield_now();
    }
    let mut client = Client::connect(&dir).expect("a slot is free again");
    assert_eq!(client.revision("t").expect("revision"), 1);
    drop((client, second, third));
    drop(server);
    store.close().expect("close");
}
