//! Revision compare-and-set (R15; `format-spec/events.md`, "What the store refuses"):
//! - an append or batch based on a stale (or future) revision fails with
//!   `StaleRevision { task, expected, actual }` and writes nothing;
//! - a batch is atomic: an invalid event anywhere in it writes none of it, a valid one is
//!   contiguous in the log with consecutive revisions, and a crash at every I/O operation of a
//!   synced batch append, under every crash model, leaves all of it or none;
//! - a race of 8 threads, each reading the task's revision and appending a batch of 2-3
//!   tagged events expecting it (with a ninth thread streaming deltas into the same task):
//!   the final revision is the sum of the successful batches' events plus the deltas, the
//!   task's revisions run 1, 2, ... in log order, every successful batch is contiguous with
//!   consecutive revisions, no failed batch's marker is in the log, and a reopen sees the same.
//!
//! `FACTLOG_HARNESS_CAS_ITERATIONS=500 cargo test --release --test integration harness_cas::` races longer.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};

use common::harness::{
    append, env_u64, err_of, is_invalid_event, last_seq, open, open_sim, phase, task_events,
    turn_end, turn_start, user,
};
use factlog::fs::sim::{CrashModel, SimFs};
use factlog::harness::{Body, Event};
use factlog::{AppendOptions, Appended, Durability, ErrorKind, Seq, Store};

#[track_caller]
fn assert_stale(e: &factlog::Error, expected: u64, actual: u64) {
    match e.kind() {
        ErrorKind::StaleRevision { task, expected: x, actual: a } => {
            assert_eq!((task.as_str(), *x, *a), ("t1", expected, actual), "{e}");
        }
        other => panic!("expected StaleRevision, got {other:?}"),
    }
}

#[test]
fn a_stale_revision_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let task = store.task("t1").expect("task");
    // A task's first event may expect revision 0.
    let appended = task.append_with(phase("a"), AppendOptions::expecting(0)).expect("first");
    assert!(matches!(appended, Appended::Written { seq: Seq(1), revision: 1 }), "{appended:?}");
    append(&store, "t1", phase("b"));
    task.delta("tok").expect("a delta counts as a revision too");
    assert_eq!(task.revision(), 3);
    let state = store.task_state("t1").expect("t1");
    for expected in [0, 1, 2, 4, 100] {
        let e = err_of(task.append_with(phase("stale"), AppendOptions::expecting(expected)));
        assert_stale(&e, expected, 3);
        let bodies = vec![phase("x"), user("y")];
        let e = err_of(task.append_batch_with(bodies, AppendOptions::expecting(expected)));
        assert_stale(&e, expected, 3);
    }
    assert_eq!(last_seq(&store), 3, "nothing was written");
    assert_eq!(store.task_state("t1").expect("t1"), state, "the state is unchanged");
    let appended = task.append_with(phase("c"), AppendOptions::expecting(3)).expect("fresh");
    assert!(matches!(appended, Appended::Written { seq: Seq(4), revision: 4 }), "{appended:?}");
    // Another task's revision is its own.
    let other = store.task("t2").expect("task");
    other.append_with(phase("t2"), AppendOptions::expecting(0)).expect("t2's first event");
    let e = err_of(task.append_with(phase("c"), AppendOptions::expecting(3)));
    assert_stale(&e, 3, 4);
}

#[test]
fn an_invalid_event_anywhere_in_a_batch_writes_none_of_it() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let task = store.task("t1").expect("task");
    append(&store, "t1", user("hi"));
    let state = task.state();
    let bad_batches: Vec<Vec<Body>> = vec![
        // The second turn/start is checked against the state the first leaves.
        vec![turn_start(), phase("p"), turn_start()],
        vec![phase("p"), turn_end()],
        vec![turn_start(), common::harness::result("nope", None)],
    ];
    for bodies in bad_batches {
        let e = err_of(task.append_batch_with(bodies, AppendOptions::default()));
        assert!(matches!(e.kind(), ErrorKind::InvalidEvent { .. }), "{e}");
        assert_eq!(last_seq(&store), 1, "nothing of the batch was written");
        assert_eq!(task.state(), state);
    }
    // Too many events in one batch.
    let e = err_of(task.append_batch_with(vec![phase("p"); 1025], AppendOptions::default()));
    assert!(matches!(e.kind(), ErrorKind::LimitExceeded { .. }), "{e}");
    let e = err_of(task.append_batch_with(Vec::new(), AppendOptions::default()));
    assert!(matches!(e.kind(), ErrorKind::LimitExceeded { .. }), "{e}");
    assert!(is_invalid_event(
        &err_of(task.append_batch_with(vec![turn_end()], AppendOptions::default())),
        "turn/end"
    ));
    // A valid batch: contiguous, consecutive revisions, and it waits for its strongest event.
    let bodies = vec![turn_start(), phase("p"), common::harness::step_start(), turn_end()];
    let appended = task.append_batch_with(bodies, AppendOptions::default()).expect("batch");
    assert_eq!(appended, Appended::Written { seq: Seq(2), revision: 5 });
    assert!(store.log().durable_seq() >= Some(Seq(5)), "turn/end is Synced: the batch is too");
    let events = task_events(&store, "t1");
    let tail: Vec<(u64, u64)> = events[1..].iter().map(|e| (e.seq.0, e.revision)).collect();
    assert_eq!(tail, [(2, 2), (3, 3), (4, 4), (5, 5)]);
}

fn big_batch() -> Vec<Body> {
    (0..8).map(|i| user(&format!("{i}:{}", "x".repeat(300)))).collect()
}

#[test]
fn a_synced_batch_is_whole_or_absent_after_a_crash_at_any_operation() {
    let setup = || {
        let fs = SimFs::new(31);
        let store = open_sim(&fs).expect("open");
        append(&store, "t1", phase("before"));
        store.flush(Durability::Synced).expect("sync");
        (fs, store)
    };
    let (fs, store) = setup();
    let start = fs.ops();
    let options =
        AppendOptions { durability: Some(Durability::Synced), ..AppendOptions::default() };
    store.task("t1").expect("task").append_batch_with(big_batch(), options).expect("batch");
    let end = fs.ops();
    assert!(end > start);
    drop(store);
    let mut scenarios = 0;
    for crash_at in start..end {
        for model in CrashModel::ALL {
            for seed in 0..if model == CrashModel::TornSectors { 16 } else { 1 } {
                let (fs, store) = setup();
                fs.crash_at(crash_at);
                let outcome =
                    store.task("t1").expect("task").append_batch_with(big_batch(), options);
                assert!(outcome.is_err(), "op {crash_at}: the crash surfaces");
                fs.halt();
                drop(store);
                let store = open_sim(&fs.reboot(model, seed)).expect("reopen");
                let events = task_events(&store, "t1");
                assert!(
                    events.len() == 1 || events.len() == 1 + big_batch().len(),
                    "op {crash_at}, {model:?}, seed {seed}: {} events",
                    events.len()
                );
                if events.len() > 1 {
                    let bodies: Vec<Body> = events[1..].iter().map(|e| e.body.clone()).collect();
                    assert_eq!(bodies, big_batch());
                }
                scenarios += 1;
            }
        }
    }
    assert!(scenarios >= 18, "{scenarios}");
}

/// The marker a racing batch puts in its events: `thread-X-iter-Y-Z`.
fn marker(thread: u64, iteration: u64, index: usize) -> String {
    format!("thread-{thread}-iter-{iteration}-{index}")
}

#[derive(Default)]
struct RaceLog {
    /// (thread, iteration) -> events in the batch.
    succeeded: BTreeMap<(u64, u64), usize>,
    failed: BTreeSet<(u64, u64)>,
}

fn check_race(events: &[Event], race: &RaceLog, deltas: u64) {
    let batch_events: usize = race.succeeded.values().sum();
    assert_eq!(events.len(), batch_events + deltas as usize, "every event is accounted for");
    let revisions: Vec<u64> = events.iter().map(|e| e.revision).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(revisions, expected, "revisions run 1, 2, ... in log order");
    let mut positions: BTreeMap<String, usize> = BTreeMap::new();
    for (i, event) in events.iter().enumerate() {
        if let Body::Phase(p) = &event.body {
            assert!(positions.insert(p.phase.clone(), i).is_none(), "{} twice", p.phase);
        }
    }
    assert_eq!(positions.len(), batch_events);
    for (&(thread, iteration), &n) in &race.succeeded {
        let first = positions[&marker(thread, iteration, 0)];
        for index in 0..n {
            let at = positions[&marker(thread, iteration, index)];
            assert_eq!(at, first + index, "batch {thread}/{iteration} is contiguous");
            assert_eq!(events[at].seq.0, events[first].seq.0 + index as u64);
            assert_eq!(events[at].revision, events[first].revision + index as u64);
        }
    }
    for &(thread, iteration) in &race.failed {
        for index in 0..3 {
            assert!(!positions.contains_key(&marker(thread, iteration, index)), "a failed batch");
        }
    }
}

#[test]
fn racing_compare_and_set_batches_never_interleave_or_half_apply() {
    const THREADS: u64 = 8;
    const DELTAS: u64 = 300;
    let iterations = env_u64("FACTLOG_HARNESS_CAS_ITERATIONS", 100);
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let barrier = Arc::new(Barrier::new(THREADS as usize + 1));
    let mut handles = Vec::new();
    for thread in 0..THREADS {
        let store: Store = store.clone();
        let barrier = Arc::clone(&barrier);
        handles.push(std::thread::spawn(move || {
            let task = store.task("t1").expect("task");
            let mut race = RaceLog::default();
            barrier.wait();
            for iteration in 0..iterations {
                let revision = task.revision();
                // The caller "decides" between reading and writing: others may write meanwhile.
                std::thread::yield_now();
                let n = 2 + ((thread + iteration) % 2) as usize;
                let bodies = (0..n).map(|i| phase(&marker(thread, iteration, i))).collect();
                match task.append_batch_with(bodies, AppendOptions::expecting(revision)) {
                    Ok(Appended::Written { revision: after, .. }) => {
                        assert_eq!(after, revision + n as u64, "the batch came right after");
                        race.succeeded.insert((thread, iteration), n);
                    }
                    Ok(other) => panic!("{other:?}"),
                    Err(e) => match e.kind() {
                        ErrorKind::StaleRevision { expected, actual, .. } => {
                            assert_eq!(*expected, revision);
                            assert!(*actual > revision, "revisions only grow: {e}");
                            race.failed.insert((thread, iteration));
                        }
                        _ => panic!("unexpected error: {e}"),
                    },
                }
            }
            race
        }));
    }
    let streamer = {
        let store = store.clone();
        std::thread::spawn(move || {
            let task = store.task("t1").expect("task");
            // In bursts, as a model streams: a burst makes every batch based on a revision
            // before it stale.
            for _ in 0..DELTAS / 10 {
                for _ in 0..10 {
                    task.delta("tok").expect("delta");
                }
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        })
    };
    barrier.wait();
    let mut race = RaceLog::default();
    for handle in handles {
        let one = handle.join().expect("racing thread");
        race.succeeded.extend(one.succeeded);
        race.failed.extend(one.failed);
    }
    streamer.join().expect("delta thread");
    println!(
        "{} batches succeeded, {} were stale, {DELTAS} deltas",
        race.succeeded.len(),
        race.failed.len()
    );
    assert_eq!(race.succeeded.len() + race.failed.len(), (THREADS * iterations) as usize);
    assert!(!race.succeeded.is_empty(), "some batch must win");
    assert!(!race.failed.is_empty(), "the race must have contention to prove anything");
    let batch_events: u64 = race.succeeded.values().map(|&n| n as u64).sum();
    let task = store.task("t1").expect("task");
    assert_eq!(task.revision(), batch_events + DELTAS, "revision = events of successful batches");
    check_race(&task_events(&store, "t1"), &race, DELTAS);
    drop(task);
    store.close().expect("close");

    let store = open(dir.path());
    assert_eq!(store.task_state("t1").expect("t1").revision, batch_events + DELTAS);
    check_race(&task_events(&store, "t1"), &race, DELTAS);
    assert_eq!(store.task_state("t1").expect("t1").execution.deltas, DELTAS);
}
