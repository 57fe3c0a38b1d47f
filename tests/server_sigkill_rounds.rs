//! Proves, over many rounds of SIGKILL at seeded random points, that a served store loses
//! nothing acknowledged and applies the holder rules at every restart. Each round starts
//! `factlog serve`, three client processes (this executable re-run) dispatch read-only tool
//! calls and their results on tasks of their own, and after a random number of replies the
//! test SIGKILLs one client, then (in most rounds) the server. After each round every event
//! whose reply was received is in the reopened store; at the end, once every task has been
//! taken over, no call is left `dispatched`: each call cut off by a killed client or server
//! got `tool/outcome_unknown`, by the server's hand-over or by the next holder's takeover.

use crate::common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::sync::mpsc;

use common::server::{Served, child_role, spawn_child, store_dir};
use factlog::client::{Client, ClientError};
use factlog::harness::state::CallStatus;
use factlog::{Seq, Store, StoreOptions};
use serde_json::{Map, Value, json};

const ROUNDS: u64 = 20;
const WORKERS: usize = 3;

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(object) => object,
        _ => unreachable!("an object"),
    }
}

/// The client process: call, result, call, result, ... on its task until the server goes
/// away or it is killed; prints `RESULT acked SEQ` for every reply received.
fn worker(dir: &str, task: &str, round: &str) {
    let Ok(mut client) = Client::connect(dir) else { return };
    for k in 0.. {
        let call_id = format!("r{round}-c{k}");
        let call = json!({"task": task, "type": "tool/call", "call_id": call_id,
            "tool": "search", "effect": "read_only"});
        let result = json!({"task": task, "type": "tool/result", "call_id": call_id,
            "outcome": "ok"});
        for request in [call, result] {
            match client.request(object(request)) {
                Ok(reply) => println!("RESULT acked {}", reply["seq"]),
                Err(ClientError::Disconnected { .. }) => return,
                Err(error) => panic!("unexpected: {error}"),
            }
        }
    }
}

#[test]
fn child_entry() {
    if let Some((role, args)) = child_role() {
        assert_eq!(role, "worker");
        worker(&args[0], &args[1], &args[2]);
    }
}

/// A small deterministic generator (xorshift64*), so that a failing round can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn sigkill_of_clients_and_server_over_rounds_loses_nothing_acknowledged() {
    if child_role().is_some() {
        return;
    }
    let seed = 0x5eed_0016;
    let mut rng = Rng(seed);
    let (_temp, dir) = store_dir();
    let dir_arg = dir.to_str().expect("UTF-8").to_owned();
    let mut acked: HashSet<u64> = HashSet::new();
    for round in 0..ROUNDS {
        let served = Served::start(&dir, &[]);
        let (sender, replies) = mpsc::channel::<Option<u64>>();
        let mut children = Vec::new();
        for i in 0..WORKERS {
            let args = [dir_arg.clone(), format!("w{i}"), round.to_string()];
            let mut child =
                spawn_child(&common::test_path(module_path!(), "child_entry"), "worker", &args);
            let stdout = child.stdout.take().expect("stdout");
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some((_, seq)) = line.split_once("RESULT acked ") {
                        let _ = sender.send(seq.parse().ok());
                    }
                }
            });
            children.push(child);
        }
        drop(sender);
        // Kill a client after a random number of replies, then the server after more.
        let kill_client_after = 1 + rng.below(30);
        let kill_server_after = kill_client_after + rng.below(30);
        let victim = rng.below(WORKERS as u64) as usize;
        let kill_server = rng.below(4) != 0;
        let mut received = 0;
        let mut server = Some(served);
        while let Ok(seq) = replies.recv() {
            acked.insert(seq.expect("a seq in the reply"));
            received += 1;
            if received == kill_client_after {
                children[victim].kill().expect("SIGKILL a client");
            }
            if received == kill_server_after {
                if kill_server {
                    server.take().expect("the server").kill();
                } else {
                    let (code, stderr) = server.take().expect("the server").terminate();
                    assert_eq!(code, Some(0), "round {round} (seed {seed:#x}): {stderr}");
                }
            }
        }
        drop(server);
        for mut child in children {
            child.wait().expect("reap a client");
        }
        let store = Store::open_read_only(&dir, StoreOptions::new()).expect("reopen");
        let present: HashSet<u64> =
            store.events(Seq(1)).expect("events").map(|e| e.expect("an event").seq.0).collect();
        let lost: Vec<&u64> = acked.difference(&present).collect();
        assert!(
            lost.is_empty(),
            "round {round} (seed {seed:#x}): acknowledged seqs lost: {lost:?}"
        );
    }
    // Every task taken over once more: no call is left dispatched.
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    for i in 0..WORKERS {
        let task = store.task(&format!("w{i}")).expect("take the task over");
        for (call_id, call) in &task.state().session.calls {
            assert_ne!(call.status, CallStatus::Dispatched, "w{i}: {call_id} left dispatched");
        }
    }
    store.close().expect("close");
}
