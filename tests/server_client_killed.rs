//! Proves that a client process killed in the middle of a line (SIGKILL after it wrote half
//! a request) affects nothing: the partial line is discarded, never written; the task it
//! touched is handed over (its open call gets `tool/outcome_unknown`, as after any holder's
//! end); and another client's connection, open all along, goes on being served.

use crate::common;

use std::io::{BufRead, BufReader, Write};

use common::server::{Conn, Served, child_role, spawn_child, store_dir};
use serde_json::json;

/// The client process: a hello, one whole call dispatch, then half a line; waits to die.
fn half_line_client(dir: &str) {
    let mut conn = Conn::connect(std::path::Path::new(dir)).expect("connect");
    conn.hello();
    let call = json!({"id": 1, "task": "victim", "type": "tool/call", "call_id": "c1",
        "tool": "publish", "effect": "unsafe", "args": {}});
    let reply = conn.call(&call);
    assert_eq!(reply["revision"], 1, "{reply}");
    conn.send_raw(br#"{"id":2,"task":"victim","type":"user/message","te"#);
    println!("RESULT ready");
    std::io::stdout().flush().expect("flush");
    std::thread::sleep(std::time::Duration::from_secs(3600));
}

#[test]
fn child_entry() {
    if let Some((role, args)) = child_role() {
        assert_eq!(role, "half-line");
        half_line_client(&args[0]);
    }
}

#[test]
fn a_client_killed_mid_line_leaves_its_partial_line_unwritten_and_others_unaffected() {
    if child_role().is_some() {
        return;
    }
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &[]);
    let mut other = Conn::connect(&dir).expect("connect");
    other.hello();
    let first =
        other.call(&json!({"id": "a", "task": "other", "type": "user/message", "text": "x"}));
    assert_eq!(first["revision"], 1, "{first}");

    let mut child = spawn_child(
        &common::test_path(module_path!(), "child_entry"),
        "half-line",
        &[dir.to_str().unwrap().to_owned()],
    );
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert!(lines.any(|l| l.expect("a line").contains("RESULT ready")));
    child.kill().expect("SIGKILL the client");
    child.wait().expect("reap");

    // The other connection goes on; once the server saw the end it handed the task over.
    let second =
        other.call(&json!({"id": "b", "task": "other", "type": "user/message", "text": "y"}));
    assert_eq!(second["revision"], 2, "{second}");
    let state = loop {
        let reply = other.call(&json!({"id": "s", "op": "state", "task": "victim"}));
        if reply["state"]["side_effects"].to_string().contains("outcome_unknown")
            || reply["state"].to_string().contains("outcome_unknown")
        {
            break reply;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    // The call and its hand-over, never the half line (a user/message).
    assert_eq!(state["state"]["session"]["user_messages"], 0, "{state}");
    drop(other);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("its input ended mid-line"), "{stderr}");
}
