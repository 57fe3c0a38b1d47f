//! Proves what SIGKILL of the serving process does to its clients: four client threads,
//! each with its own connection (`factlog::client::Client`), append synced events until
//! their call fails; the server is killed meanwhile. Every client gets
//! `ClientError::Disconnected` (an error at once, not a hang), every event whose reply came
//! back is in the store after reopen, and a restarted server takes clients again. The same
//! with clients on durable-only acknowledgements streaming fragments between their synced
//! appends: every fragment a reply covered is in the store after reopen, in order.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use common::server::delta_texts;
use common::server::{Served, store_dir};
use factlog::client::{Client, ClientError};
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::protocol::acks::AckMode;
use factlog::{AppendOptions, Appended, Durability, Seq, Store, StoreOptions};

const CLIENTS: usize = 4;

fn message() -> Body {
    Body::UserMessage(UserMessage { text: "m".to_owned(), extra: Default::default() })
}

/// Starts `factlog serve DIR` and runs `session` on [`CLIENTS`] threads (thread `i` on task
/// `t{i}`; each connects, waits at `started` and counts its acknowledged appends in
/// `acknowledged`), SIGKILLs the server once `kill_after` appends were acknowledged (no
/// clock), and returns what each session returned.
fn kill_during<R: Send + 'static>(
    dir: &Path,
    kill_after: u64,
    session: fn(&Path, String, &AtomicU64, &Barrier) -> R,
) -> Vec<R> {
    let served = Served::start(dir, &[]);
    let acknowledged = Arc::new(AtomicU64::new(0));
    let started = Arc::new(Barrier::new(CLIENTS + 1));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (dir, acknowledged, started) =
                (dir.to_path_buf(), Arc::clone(&acknowledged), Arc::clone(&started));
            std::thread::spawn(move || session(&dir, format!("t{i}"), &acknowledged, &started))
        })
        .collect();
    started.wait();
    while acknowledged.load(Ordering::Relaxed) < kill_after {
        std::thread::yield_now();
    }
    served.kill();
    threads.into_iter().map(|t| t.join().expect("a client thread")).collect()
}

fn synced() -> AppendOptions {
    AppendOptions { durability: Some(Durability::Synced), ..AppendOptions::default() }
}

#[test]
fn clients_of_a_killed_server_fail_at_once_and_nothing_acknowledged_is_lost() {
    let (_temp, dir) = store_dir();
    // Kill once every client has had replies.
    let results = kill_during(&dir, 20 * CLIENTS as u64, |dir, task, acknowledged, started| {
        let mut client = Client::connect(dir).expect("connect");
        let mut acked = Vec::new();
        started.wait();
        loop {
            match client.append(&task, &message(), synced()) {
                Ok(Appended::Written { seq, .. }) => {
                    acked.push(seq);
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                Err(error @ ClientError::Disconnected { .. }) => {
                    assert!(error.to_string().contains("went away"), "{error}");
                    return (task, acked);
                }
                other => panic!("unexpected: {other:?}"),
            }
        }
    });

    // Nothing acknowledged was lost.
    {
        let store = Store::open_read_only(&dir, StoreOptions::new()).expect("reopen");
        let present: std::collections::HashSet<u64> =
            store.events(Seq(1)).expect("events").map(|e| e.expect("an event").seq.0).collect();
        for (task, acked) in &results {
            assert!(!acked.is_empty(), "{task} had replies");
            for seq in acked {
                assert!(present.contains(&seq.0), "{task}: acknowledged seq {} lost", seq.0);
            }
        }
    }
    // A restarted server serves again; the killed one's stale socket file is replaced.
    let served = Served::start(&dir, &[]);
    let mut client = Client::connect(&dir).expect("reconnect");
    let revision = client.revision("t0").expect("revision");
    assert!(revision >= results[0].1.len() as u64);
    client.append("t0", &message(), AppendOptions::expecting(revision)).expect("append again");
    drop(client);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
}

/// Durable-only acknowledgements under SIGKILL: a fragment gets no reply of its own, and the
/// reply of the synced append after it covers it. Every fragment sent before an acknowledged
/// append is in the store after the kill, in the order sent; the acknowledged appends too.
#[test]
fn fragments_a_durable_reply_covered_survive_a_killed_server() {
    let (_temp, dir) = store_dir();
    let results = kill_during(&dir, 10 * CLIENTS as u64, |dir, task, acknowledged, started| {
        let mut client = Client::connect_acks(dir, AckMode::DurableOnly).expect("connect");
        assert_eq!(client.acks(), AckMode::DurableOnly);
        let (mut sent, mut covered, mut acked) = (0_u64, 0_u64, Vec::new());
        started.wait();
        loop {
            for _ in 0..300 {
                match client.delta(&task, &format!("f{sent}")) {
                    Ok(()) => sent += 1,
                    Err(ClientError::Disconnected { .. }) => return (task, acked, covered),
                    Err(other) => panic!("unexpected: {other:?}"),
                }
            }
            match client.append(&task, &message(), synced()) {
                Ok(Appended::Written { seq, .. }) => {
                    acked.push(seq);
                    covered = sent;
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                Err(ClientError::Disconnected { .. }) => return (task, acked, covered),
                other => panic!("unexpected: {other:?}"),
            }
        }
    });

    let store = Store::open_read_only(&dir, StoreOptions::new()).expect("reopen");
    let present: std::collections::HashSet<u64> =
        store.events(Seq(1)).expect("events").map(|e| e.expect("an event").seq.0).collect();
    for (task, acked, covered) in &results {
        assert!(*covered > 0, "{task} had fragments covered");
        for seq in acked {
            assert!(present.contains(&seq.0), "{task}: acknowledged seq {} lost", seq.0);
        }
        let texts = delta_texts(&store, task);
        let covered = usize::try_from(*covered).expect("a count");
        assert!(texts.len() >= covered, "{task}: {} of {covered} covered fragments", texts.len());
        for (index, text) in texts.iter().take(covered).enumerate() {
            assert_eq!(text, &format!("f{index}"), "{task}: fragment {index}");
        }
    }
}
