//! The `Replicated` tier through every door of the command (`format-spec/replication.md`,
//! "Replicated appends"): `factlog emit --replicate-to URL` and a client process of
//! `factlog serve --replicate-to URL` get `"durability":"replicated"` only once the replica
//! holds the event (read back from the replica while the writer still runs), a store that does
//! not replicate refuses the line with `NOT_REPLICATED` and writes nothing, and `emit` refuses
//! `--replicate-to` on a store another process serves (that process replicates).

use crate::common;

use std::path::Path;

use common::cli::{event, input, json_lines};
use common::server::{Served, store_dir};
use common::{arg, factlog};
use factlog::client::Client;
use factlog::harness::Body;
use factlog::harness::event::ToolCall;
use factlog::{AppendOptions, Appended};
use serde_json::{Value, json};

fn replica_last_seq(url: &str) -> u64 {
    let run = factlog(&["replicas", "list", url, "--json"], b"");
    run.assert_success();
    let listed: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    listed["last_seq"].as_u64().unwrap_or(0)
}

fn url_of(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

fn pay(call_id: &str) -> Value {
    event(
        "t1",
        "tool/call",
        json!({"call_id": call_id, "tool": "pay", "effect": "unsafe",
                                     "durability": "replicated"}),
    )
}

#[test]
fn emit_with_a_replica_acknowledges_replicated_lines_once_the_replica_holds_them() {
    let (_temp, dir) = store_dir();
    let replica = tempfile::tempdir().expect("replica dir");
    let url = url_of(replica.path());
    let lines = [event("t1", "user/message", json!({"text": "pay the invoice"})), pay("c1")];
    let run = factlog(&["emit", arg(&dir), "--replicate-to", &url], &input(&lines));
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies[1]["durability"], "replicated", "{replies:?}");
    assert!(replica_last_seq(&url) >= replies[1]["seq"].as_u64().unwrap());
    // Without a replica the line is refused, and nothing is written.
    let run = factlog(&["emit", arg(&dir)], &input(&[pay("c2")]));
    let reply = &json_lines(&run)[0];
    assert_eq!(reply["error"], "NOT_REPLICATED", "{reply}");
    assert!(reply["message"].as_str().unwrap().contains("--replicate-to"), "{reply}");
    let state = common::cli::json_of("state", &dir, &["--task", "t1"]);
    assert!(state["tasks"]["t1"]["session"]["calls"].get("c2").is_none());
}

#[test]
fn a_client_process_of_a_replicating_server_gets_replicated_acks() {
    let (_temp, dir) = store_dir();
    let replica = tempfile::tempdir().expect("replica dir");
    let url = url_of(replica.path());
    let served = Served::start(&dir, &["--replicate-to", &url]);
    // A client process (the command) through the socket.
    let run = factlog(&["emit", arg(&dir)], &input(&[pay("c1")]));
    run.assert_success();
    let reply = &json_lines(&run)[0];
    assert_eq!(reply["durability"], "replicated", "{reply}");
    let acked = reply["seq"].as_u64().unwrap();
    // The replica holds it while the server still runs.
    assert!(replica_last_seq(&url) >= acked);
    // This test process is a client too: the Rust client asks for the tier.
    let mut client = Client::connect(&dir).expect("connect");
    let body = Body::ToolCall(ToolCall {
        call_id: "c2".into(),
        tool: "pay".to_owned(),
        effect: factlog::harness::event::Effect::Unsafe,
        ..ToolCall::default()
    });
    let appended = client.append("t2", &body, AppendOptions::default().replicated());
    let Ok(Appended::Written { seq, .. }) = appended else { panic!("{appended:?}") };
    assert!(replica_last_seq(&url) >= seq.0);
    // emit refuses to replicate a store another process serves.
    let run = factlog(&["emit", arg(&dir), "--replicate-to", &url], &input(&[pay("c3")]));
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("is that process's to run"), "{}", run.stderr);
    drop(client);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
}
