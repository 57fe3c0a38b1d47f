//! Policy snapshots are written off the append path: the append that makes one due only asks
//! the store's snapshot thread for it. A snapshot still due when the store closes is written
//! before `close` returns, so the next open starts from it; a store dropped without `close`
//! while one is due ends its thread without hanging.

use crate::common;
use crate::common::faulty_fs;

use std::sync::Arc;

use common::harness::{events, fold, user};
use factlog::harness::snapshot::SNAPSHOT_SUFFIX;
use factlog::{Options, Store, StoreOptions};
use faulty_fs::FaultyFs;

fn options(fs: &FaultyFs) -> StoreOptions {
    common::harness::options()
        .snapshot_every_events(40)
        .log(Options::new().fs(Arc::new(fs.clone())))
}

/// The threads that renamed a file into a `.snap` name.
fn snapshot_writers(fs: &FaultyFs) -> Vec<Option<String>> {
    let renames = fs.faults.renames.lock();
    renames.iter().filter(|(to, _)| to.ends_with(SNAPSHOT_SUFFIX)).map(|(_, t)| t.clone()).collect()
}

#[test]
fn policy_snapshots_are_written_by_the_snapshot_thread_and_a_due_one_by_close() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let fs = FaultyFs::new();
    let store = Store::open(dir.path(), options(&fs)).expect("open");
    let task = store.task("t1").expect("task");
    for i in 0..100 {
        task.append(user(&format!("m{i}"))).expect("message");
    }
    let folded = fold(&events(&store));
    drop(task);
    store.close().expect("close");

    let writers = snapshot_writers(&fs);
    assert!(!writers.is_empty(), "the policy wrote snapshots");
    for writer in &writers {
        assert_eq!(writer.as_deref(), Some("factlog-snapshot"), "{writers:?}");
    }
    let store = Store::open(dir.path(), options(&fs)).expect("reopen");
    let meta = store.open_report().snapshot.clone().expect("a policy snapshot");
    // Fewer than 40 events after the newest snapshot: one still due at close was written.
    assert!(meta.covered_seq.0 > 100 - 40, "{meta:?}");
    assert_eq!(store.state(), folded);
    store.close().expect("close");
}

#[test]
fn a_store_dropped_while_a_snapshot_is_due_ends_its_thread() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let fs = FaultyFs::new();
    for round in 0..8 {
        let store = Store::open(dir.path(), options(&fs)).expect("open");
        let task = store.task("t1").expect("task");
        for i in 0..45 {
            task.append(user(&format!("r{round} m{i}"))).expect("message");
        }
        // No close: the drop stops the thread (joins it), and the directory lock is released
        // for the next round's open.
        drop(task);
        drop(store);
    }
    let store = Store::open(dir.path(), options(&fs)).expect("reopen");
    assert_eq!(store.state(), fold(&events(&store)));
}
