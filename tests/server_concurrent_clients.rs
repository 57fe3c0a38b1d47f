//! Proves that a served store gives several client processes one store: 8 processes (this
//! test executable re-run as clients, through `factlog::client::Client`) append concurrently
//! through `factlog serve`, each to a task of its own and all of them with compare-and-set
//! races on one shared task. Exactly one process wins each revision of the shared task, every
//! loser is refused `STALE_REVISION` with nothing written, and after the server stops the store
//! holds exactly the acknowledged events: every own-task event and one shared event per win.

use crate::common;

use std::collections::BTreeMap;
use std::io::Read;

use common::server::{Served, child_role, spawn_child, store_dir};
use factlog::client::{Client, ClientError};
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::{AppendOptions, Appended, Durability, Store, StoreOptions};

const CLIENTS: usize = 8;
const OWN_EVENTS: u64 = 40;
const CAS_ATTEMPTS: u64 = 40;

fn message(text: &str) -> Body {
    Body::UserMessage(UserMessage { text: text.to_owned(), extra: Default::default() })
}

/// The client process: own-task appends interleaved with compare-and-set attempts on
/// `shared`; prints `RESULT win R` or `RESULT lose R` per attempt.
fn client(dir: &str, me: &str) {
    let mut client = Client::connect(dir).expect("connect");
    let own = format!("own-{me}");
    for i in 0..OWN_EVENTS.max(CAS_ATTEMPTS) {
        if i < OWN_EVENTS {
            let options =
                AppendOptions { durability: Some(Durability::Synced), ..AppendOptions::default() };
            let appended = client.append(&own, &message("own"), options).expect("own append");
            assert!(matches!(appended, Appended::Written { revision, .. } if revision == i + 1));
        }
        if i < CAS_ATTEMPTS {
            let revision = client.revision("shared").expect("revision");
            match client.append("shared", &message(me), AppendOptions::expecting(revision)) {
                Ok(Appended::Written { revision: after, .. }) => {
                    assert_eq!(after, revision + 1);
                    println!("RESULT win {revision}");
                }
                Err(ClientError::StaleRevision { expected, actual }) => {
                    assert_eq!(expected, revision);
                    assert!(actual > revision);
                    println!("RESULT lose {revision}");
                }
                other => panic!("unexpected: {other:?}"),
            }
        }
    }
}

#[test]
fn child_entry() {
    if let Some((role, args)) = child_role() {
        assert_eq!(role, "concurrent");
        client(&args[0], &args[1]);
    }
}

#[test]
fn eight_processes_append_and_race_compare_and_set_through_one_server() {
    if child_role().is_some() {
        return;
    }
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &[]);
    // The shared task exists before the race: its first append is not a race.
    let mut setup = Client::connect(&dir).expect("connect");
    setup.append("shared", &message("setup"), AppendOptions::expecting(0)).expect("setup");
    let dir_arg = dir.to_str().expect("UTF-8").to_owned();
    let children: Vec<_> = (0..CLIENTS)
        .map(|i| {
            spawn_child(
                &common::test_path(module_path!(), "child_entry"),
                "concurrent",
                &[dir_arg.clone(), format!("c{i}")],
            )
        })
        .collect();
    let mut wins: BTreeMap<u64, usize> = BTreeMap::new();
    let mut losses = 0;
    for mut child in children {
        let mut stdout = String::new();
        child.stdout.take().expect("stdout").read_to_string(&mut stdout).expect("read");
        let mut stderr = String::new();
        child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read");
        assert!(child.wait().expect("wait").success(), "a client failed: {stdout}\n{stderr}");
        // The test harness prints `test child_entry ... ` before the first line, unended.
        for line in stdout.lines().filter_map(|l| l.split_once("RESULT ").map(|(_, r)| r)) {
            let (outcome, revision) = line.split_once(' ').expect("outcome revision");
            let revision: u64 = revision.parse().expect("a revision");
            match outcome {
                "win" => *wins.entry(revision).or_insert(0) += 1,
                _ => losses += 1,
            }
        }
    }
    // Exactly one winner per revision, and the revisions won are 1, 2, .. without a gap.
    assert!(wins.values().all(|&n| n == 1), "two winners of one revision: {wins:?}");
    let won: Vec<u64> = wins.keys().copied().collect();
    assert_eq!(won.len() + losses, CLIENTS * CAS_ATTEMPTS as usize);
    drop(setup);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(won, (1..=won.len() as u64).collect::<Vec<_>>());

    let store = Store::open_read_only(&dir, StoreOptions::new()).expect("reopen");
    let shared = store.task_state("shared").expect("shared");
    let messages = |task: &str| {
        store
            .events(factlog::Seq(1))
            .expect("events")
            .map(|e| e.expect("event"))
            .filter(|e| e.task.as_str() == task && matches!(e.body, Body::UserMessage(_)))
            .count()
    };
    // One setup message and one per win: no loser wrote anything.
    assert_eq!(messages("shared"), 1 + won.len());
    assert_eq!(shared.revision, 1 + won.len() as u64, "no hand-over event: nothing was open");
    for i in 0..CLIENTS {
        assert_eq!(messages(&format!("own-c{i}")), OWN_EVENTS as usize);
    }
}
