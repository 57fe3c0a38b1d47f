//! Proves that a client that stops reading its replies is disconnected and never stalls the
//! others: one connection pipelines `state` requests without reading a reply until the server
//! gives up on it (its write timeout, `--write-timeout-ms`), while another connection's
//! synced appends are all answered meanwhile. Nothing waits on a clock: the test waits for
//! the stalled connection to be closed by the server.

use crate::common;

use std::io::{Read, Write};

use common::server::{Conn, Served, store_dir};
use serde_json::json;

#[test]
fn a_client_that_stops_reading_is_disconnected_while_others_go_on() {
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &["--write-timeout-ms", "50"]);
    let mut setup = Conn::connect(&dir).expect("connect");
    setup.hello();
    // A task whose state reply is large enough to fill socket buffers quickly.
    let text = "y".repeat(8 * 1024);
    for i in 0..4 {
        let reply = setup.call(&json!({"id": i, "task": "big", "type": "task/contract",
            "goal": text, "done_criteria": [text]}));
        assert!(reply.get("error").is_none(), "{reply}");
    }
    let mut stalled = Conn::connect(&dir).expect("connect");
    stalled.hello();
    let mut writer = stalled.stream.try_clone().expect("clone");
    let pipeliner = std::thread::spawn(move || {
        let line = format!("{}\n", json!({"op": "state", "task": "big"}));
        // Until the server closes the connection: it stops reading while a reply waits.
        let mut sent = 0u64;
        while writer.write_all(line.as_bytes()).is_ok() {
            sent += 1;
        }
        sent
    });
    // Meanwhile another client is served as usual.
    let mut other = Conn::connect(&dir).expect("connect");
    other.hello();
    for i in 0..50 {
        let reply = other.call(&json!({"id": i, "task": "other", "type": "user/message",
            "text": "hi", "durability": "synced"}));
        assert_eq!(reply["revision"], i + 1, "{reply}");
    }
    let sent = pipeliner.join().expect("pipeliner");
    assert!(sent > 0);
    // The stalled connection was closed by the server: its input ends after what was sent.
    let mut rest = Vec::new();
    let _ = stalled.reader.read_to_end(&mut rest);
    let reply = other.call(&json!({"id": "last", "op": "revision", "task": "other"}));
    assert_eq!(reply["revision"], 50, "{reply}");
    drop((setup, other, stalled));
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("writing a reply failed"), "{stderr}");
}
