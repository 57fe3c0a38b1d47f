//! Policy snapshots are written off the append path: the append that makes one due only asks
//! the store's snapshot thread for it. A snapshot still due when the store closes is written
//! before `close` returns, so the next open starts from it; a store dropped without `close`
//! while one is due ends its thread without hanging; while one is being written, only the
//! last handle dropped waits for it.

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

/// How long a test waits for what must happen before it calls it a hang: a liveness bound,
/// not a timing claim.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Lets every held sync go when dropped, also when the test fails.
struct Release(Arc<faulty_fs::Faults>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.hold_syncs.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A handle dropped while the snapshot thread writes a snapshot returns at once unless it is
/// the last one. Every drop used to wait for the snapshot: a served store's connections drop
/// a task handle per request, so all of them stopped for the whole snapshot (about 90 ms of a
/// million events at 128 clients, `docs/performance.md`). The last handle still waits for the
/// snapshot, also when the last two are dropped at once, and its drop ends the thread and
/// releases the directory.
#[test]
fn a_handle_dropped_while_a_snapshot_is_written_waits_only_if_it_is_the_last() {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::mpsc::channel;
    let dir = tempfile::tempdir().expect("temporary directory");
    let fs = FaultyFs::new();
    let faults = Arc::clone(&fs.faults);
    // The snapshot's temporary file (`NAME.snap.tmp`): its fdatasync stalls while held.
    *faults.hold_suffix.lock() = format!("{SNAPSHOT_SUFFIX}.tmp");
    let store = Store::open(dir.path(), options(&fs)).expect("open");
    let task = store.task("t1").expect("task");
    faults.hold_syncs.store(true, SeqCst);
    // Declared after the store: dropped first when the test fails, so that the store's own
    // drop does not wait forever for the stalled snapshot.
    let _release = Release(Arc::clone(&faults));
    for i in 0..45 {
        task.append(user(&format!("m{i}"))).expect("message");
    }
    let stalled = std::time::Instant::now();
    while faults.held.load(SeqCst) == 0 {
        assert!(stalled.elapsed() < PATIENCE, "the snapshot's sync never started");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Other handles, dropped on another thread while the snapshot waits for its sync.
    let (done, dropped) = channel();
    let (clone, task_clone) = (store.clone(), store.task("t1").expect("task"));
    let dropper = std::thread::spawn(move || {
        drop(task_clone);
        drop(clone);
        done.send(()).expect("send");
    });
    assert!(
        dropped.recv_timeout(PATIENCE).is_ok(),
        "a handle that is not the last waited for the snapshot being written"
    );
    dropper.join().expect("dropper");
    assert_eq!(faults.held.load(SeqCst), 1, "the snapshot is still being written");
    // The last two handles, dropped at once on two threads: whichever is the last waits for
    // the snapshot, then ends the thread.
    let (done, dropped) = channel();
    let together = Arc::new(std::sync::Barrier::new(2));
    let droppers: Vec<_> = [Box::new(store) as Box<dyn Send>, Box::new(task)]
        .into_iter()
        .map(|handle| {
            let (done, together) = (done.clone(), Arc::clone(&together));
            std::thread::spawn(move || {
                together.wait();
                drop(handle);
                done.send(()).expect("send");
            })
        })
        .collect();
    drop(done);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let returned = dropped.try_iter().count();
    assert!(returned < 2, "the last handle did not wait for the snapshot being written");
    faults.hold_syncs.store(false, SeqCst);
    for _ in returned..2 {
        assert!(dropped.recv_timeout(PATIENCE).is_ok(), "a handle's drop never returned");
    }
    for dropper in droppers {
        dropper.join().expect("dropper");
    }
    // The directory is free, and the snapshot was written whole.
    let store = Store::open(dir.path(), options(&FaultyFs::new())).expect("reopen");
    let meta = store.open_report().snapshot.clone().expect("the snapshot written");
    assert!(meta.covered_seq.0 >= 40, "{meta:?}");
    assert_eq!(store.state(), fold(&events(&store)));
    store.close().expect("close");
}
