//! Proves that churn leaves a served store healthy: a thousand connect/disconnect cycles
//! (half of them after a hello), ten half-open connections that never say hello, garbage
//! before a hello and a client gone in the middle of its hello. Afterwards the server's
//! client count returns to the half-open ones and then to zero, and a new client is served.

use crate::common;

use std::io::Write;
use std::os::unix::net::UnixStream;

use common::server::{Conn, store_dir};
use factlog::server::{ServeOptions, Server, socket_path};
use factlog::{Store, StoreOptions};
use serde_json::json;

fn wait_for_clients(server: &Server, clients: usize) {
    while server.clients() != clients {
        std::thread::yield_now();
    }
}

#[test]
fn connect_disconnect_cycles_garbage_and_half_open_connections_leave_the_server_healthy() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let half_open: Vec<UnixStream> =
        (0..10).map(|_| UnixStream::connect(socket_path(&dir)).expect("connect")).collect();
    for cycle in 0..1000 {
        let mut conn = Conn::connect(&dir).expect("connect");
        if cycle % 2 == 0 {
            conn.hello();
        }
    }
    let mut garbage = Conn::connect(&dir).expect("connect");
    let reply = garbage.call(&json!([1, 2]));
    assert_eq!(reply["error"], "HELLO_REQUIRED", "{reply}");
    assert!(garbage.read().is_none());
    let mut mid_hello = UnixStream::connect(socket_path(&dir)).expect("connect");
    mid_hello.write_all(b"{\"hello\":\"fac").expect("write");
    drop(mid_hello);

    wait_for_clients(&server, half_open.len());
    drop(half_open);
    wait_for_clients(&server, 0);
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    let reply = conn.call(&json!({"id": 1, "task": "t", "type": "user/message", "text": "ok"}));
    assert_eq!(reply["revision"], 1, "{reply}");
    drop(conn);
    drop(server);
    store.close().expect("close");
}
