//! The replicator (`format-spec/replication.md`, "Shipping", "The lease"): a store written
//! while it ships ends up in the replica byte for byte, a remote that fails or loses answers
//! costs nothing and duplicates nothing, one run holds a replica at a time, and a replica
//! that is not the store's is refused.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::harness;
use common::replica::{self, Fault, FaultyRemote};
use factlog::fs::RealFs;
use factlog::replica::{DirRemote, Remote, ReplicateOptions, Replicator, ShipOptions};
use factlog::{AppendOptions, ErrorKind, Options, Store, StoreOptions};

/// Options with small segments, so that a short session spans several.
fn small_segments() -> StoreOptions {
    harness::options().log(Options::new().segment_bytes(16 * 1024))
}

fn remote(dir: &Path) -> DirRemote {
    DirRemote::create(&format!("file://{}", dir.display()), dir).expect("remote")
}

fn start(
    store_dir: &Path,
    remote: impl Remote + 'static,
    takeover: bool,
) -> factlog::Result<Replicator> {
    let options = ShipOptions::new().takeover(takeover);
    Replicator::start(Arc::new(RealFs), store_dir, Box::new(remote), options, 1)
}

/// Every segment the store holds is in the replica as the same bytes, and the snapshots.
fn assert_replicated(store_dir: &Path, replica_dir: &Path) {
    let local = replica::segments_of(store_dir);
    let shipped = replica::segments_in(&remote(replica_dir));
    assert_eq!(local.keys().collect::<Vec<_>>(), shipped.keys().collect::<Vec<_>>());
    for (first_seq, bytes) in &local {
        assert!(shipped[first_seq] == *bytes, "segment {first_seq} differs");
    }
    let snapshots = remote(replica_dir).list("snapshots/").expect("list");
    let Ok(files) = std::fs::read_dir(store_dir.join("snapshots")) else { return };
    for file in files {
        let name = file.expect("entry").file_name().into_string().expect("UTF-8");
        if name.ends_with(".snap") {
            assert!(snapshots.contains(&format!("snapshots/{name}")), "{name} shipped");
        }
    }
}

#[test]
fn a_store_written_while_it_ships_is_in_the_replica_byte_for_byte() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    let mut replicator = start(store_dir.path(), remote(replica_dir.path()), false).expect("start");
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for round in 0..6 {
                replica::session(&store, &format!("task-{round}"), 4);
                store.checkpoint().expect("checkpoint");
            }
        });
        while !writer.is_finished() {
            replicator.round().expect("a round");
        }
        writer.join().expect("the writer");
    });
    let last = harness::last_seq(&store);
    store.close().expect("close");
    let status = replicator.finish().expect("finish");
    assert_eq!((status.shipped_seq, status.local_seq, status.lag()), (last, last, 0));
    assert!(replica::segments_of(store_dir.path()).len() >= 3, "the session spans segments");
    assert!(status.parts > 3 && status.snapshots >= 1, "{status:?}");
    assert_replicated(store_dir.path(), replica_dir.path());

    // Restored elsewhere from the replica alone: the same events, state and recovery plan.
    let target = tempfile::tempdir().unwrap();
    let restored_dir = target.path().join("store");
    let options = factlog::replica::RestoreOptions::new();
    factlog::replica::restore(&remote(replica_dir.path()), &restored_dir, options)
        .expect("restore");
    let open = |dir: &Path| Store::open_read_only(dir, harness::options()).expect("open");
    let (source, restored) = (open(store_dir.path()), open(&restored_dir));
    assert_eq!(harness::events(&restored), harness::events(&source));
    assert_eq!(restored.state(), source.state());
    let (mut plan, original) = (restored.plan_recovery(), source.plan_recovery());
    assert!(plan.restored.take().is_some(), "the restored store names its replica");
    assert_eq!(plan, original);
    drop((source, restored));

    // A later run goes on where this one stopped: nothing new, nothing shipped again.
    let again = start(store_dir.path(), remote(replica_dir.path()), false).expect("restart");
    assert_eq!(again.status().shipped_seq, last);
    let status = again.finish().expect("finish");
    assert_eq!((status.parts, status.snapshots, status.bytes), (0, 0, 0));
}

#[test]
fn a_failing_remote_loses_nothing_and_duplicates_nothing() {
    for fault in [Fault::Fail, Fault::LoseAnswer] {
        let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = Store::open(store_dir.path(), small_segments()).expect("open");
        let faulty = FaultyRemote::new(remote(replica_dir.path()), 3, fault);
        let mut replicator = start(store_dir.path(), faulty, false).expect("start");
        let mut failures = 0;
        for round in 0..5 {
            replica::session(&store, &format!("task-{round}"), 3);
            store.checkpoint().expect("checkpoint");
            while let Err(error) = replicator.round() {
                assert!(matches!(error.kind(), ErrorKind::Remote { .. }), "{error}");
                assert!(replicator.status().last_error.is_some());
                failures += 1;
                // The store grows before the retry: the failed part is shipped as it was, not
                // a longer one overlapping it.
                replica::session(&store, &format!("between-{round}-{failures}"), 1);
            }
            assert_eq!(replicator.status().last_error, None);
        }
        store.close().expect("close");
        while replicator.round().is_err() {}
        assert!(failures > 3, "{fault:?}: the remote failed {failures} times");
        assert_eq!(replicator.status().lag(), 0);
        // Each part follows the one before it (`segments_in` checks): no gap, no overlap.
        assert_replicated(store_dir.path(), replica_dir.path());
    }
}

#[test]
fn one_run_holds_a_replica_and_a_takeover_stops_the_other() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    replica::session(&store, "t", 1);
    let mut first = start(store_dir.path(), remote(replica_dir.path()), false).expect("first");
    first.round().expect("round");

    let held = start(store_dir.path(), remote(replica_dir.path()), false).unwrap_err();
    assert!(matches!(held.kind(), ErrorKind::LeaseHeld { .. }), "{held}");
    assert!(held.to_string().contains("--takeover"), "{held}");

    let second = start(store_dir.path(), remote(replica_dir.path()), true).expect("takeover");
    assert!(second.status().takeover);
    replica::session(&store, "t", 1);
    let lost = first.round().unwrap_err();
    assert!(matches!(lost.kind(), ErrorKind::LeaseLost { epoch: 1, .. }), "{lost}");
    store.close().expect("close");
    second.finish().expect("the new holder ships and releases");
    assert_replicated(store_dir.path(), replica_dir.path());
}

#[test]
fn a_replica_of_another_store_is_refused() {
    let (first_dir, second_dir, replica_dir) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for dir in [first_dir.path(), second_dir.path()] {
        let store = Store::open(dir, small_segments()).expect("open");
        replica::session(&store, "t", 2);
        store.close().expect("close");
    }
    start(first_dir.path(), remote(replica_dir.path()), false)
        .and_then(Replicator::finish)
        .expect("the first store ships");
    let refused = start(second_dir.path(), remote(replica_dir.path()), false).unwrap_err();
    assert!(matches!(refused.kind(), ErrorKind::ReplicaDiverged { segment: 1, .. }), "{refused}");
    assert!(refused.is_damaged_or_refused_data());
    // The refusal gave the lease back: the first store goes on.
    start(first_dir.path(), remote(replica_dir.path()), false)
        .and_then(Replicator::finish)
        .expect("the first store again");
}

#[test]
fn segments_purged_from_the_store_stay_in_the_replica() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    replica::session(&store, "t", 12);
    let shipped = replica::segments_of(store_dir.path());
    start(store_dir.path(), remote(replica_dir.path()), false)
        .and_then(Replicator::finish)
        .expect("ship");
    store.checkpoint().expect("checkpoint");
    let purged = store.purge().expect("purge");
    assert!(replica::segments_of(store_dir.path()).len() < shipped.len(), "{purged:?}");
    replica::session(&store, "t", 2);
    store.close().expect("close");
    start(store_dir.path(), remote(replica_dir.path()), false)
        .and_then(Replicator::finish)
        .expect("ship after a purge");
    let in_replica = replica::segments_in(&remote(replica_dir.path()));
    for (first_seq, bytes) in shipped.iter().chain(&replica::segments_of(store_dir.path())) {
        assert!(in_replica[first_seq].starts_with(bytes), "segment {first_seq}");
    }
}

/// Waits (up to a generous deadline, not a performance bound) until `done()`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn a_store_replicating_in_process_ships_a_synced_append_at_once() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    // An hour between rounds: only a sync can make one due.
    let options = ReplicateOptions::new().interval(Duration::from_secs(3600));
    let replication =
        store.replicate(Box::new(remote(replica_dir.path())), options).expect("start");
    let task = store.task("t").expect("task");
    task.append(harness::turn_start()).expect("buffered");
    task.delta("not synced").expect("delta");
    let call = harness::call("c1", "search", factlog::harness::event::Effect::ReadOnly, None);
    let seq = harness::written(task.append(call).expect("a synced tool/call")).0;
    eventually("the synced append is in the replica", || replication.status().shipped_seq >= seq.0);
    task.delta("after").expect("delta");
    drop(task);
    let last = harness::last_seq(&store);
    let status = replication.stop().expect("stop");
    assert_eq!(status.shipped_seq, last, "the last round shipped the buffered tail");
    store.close().expect("close");
    assert_replicated(store_dir.path(), replica_dir.path());
}

#[test]
fn an_unreachable_remote_does_not_stop_appends_and_the_replica_catches_up() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    let faulty = FaultyRemote::new(remote(replica_dir.path()), u64::MAX, Fault::Fail);
    let every = Arc::clone(&faulty.every);
    let options = ReplicateOptions::new().interval(Duration::from_millis(20));
    let replication = store.replicate(Box::new(faulty), options).expect("start");
    every.store(1, Ordering::Relaxed); // every request fails from now on
    replica::session(&store, "t", 3);
    eventually("a failed round is reported", || replication.status().last_error.is_some());
    let error = replication.status().last_error.expect("an error");
    assert!(error.contains("injected") && error.contains("retries"), "{error}");
    replica::session(&store, "t", 3);
    let last = harness::last_seq(&store);
    every.store(u64::MAX, Ordering::Relaxed); // reachable again
    eventually("the replica caught up", || replication.status().shipped_seq == last);
    assert_eq!(replication.status().last_error, None);
    replication.stop().expect("stop");
    store.close().expect("close");
    assert_replicated(store_dir.path(), replica_dir.path());
}

/// The last seq of the valid frames in the replica's newest segment (0 for none).
fn last_seq_in_replica(replica_dir: &Path) -> u64 {
    let segments = replica::segments_in(&remote(replica_dir));
    let Some(bytes) = segments.values().last() else { return 0 };
    let header = factlog::engine::segment::decode_header(&bytes[..64], Path::new("replica"))
        .expect("header");
    factlog::engine::segment::scan(bytes, &header, None, |_, _| {}).next_seq.0 - 1
}

#[test]
fn a_replicated_append_returns_once_the_replica_holds_it() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = small_segments().replicated_types(&[factlog::harness::EventType::ToolResult]);
    let store = Store::open(store_dir.path(), options).expect("open");
    let task = store.task("t").expect("task");
    let replicated = factlog::AppendOptions::default().replicated();

    // Not replicating: refused, nothing written.
    let refused = task.append_with(harness::turn_start(), replicated).unwrap_err();
    assert!(matches!(refused.kind(), ErrorKind::NotReplicated { seq: 0, .. }), "{refused}");
    assert_eq!(harness::last_seq(&store), 0);

    // An hour between rounds: only the replicated append's own sync makes one run.
    let options = ReplicateOptions::new().interval(Duration::from_secs(3600));
    let replication =
        store.replicate(Box::new(remote(replica_dir.path())), options).expect("start");
    task.append(harness::turn_start()).expect("buffered");
    let seq =
        harness::written(task.append_with(harness::user("pay"), replicated).expect("replicated")).0;
    assert!(last_seq_in_replica(replica_dir.path()) >= seq.0, "in the replica when it returned");
    // A type of `replicated_types` is replicated without asking.
    let call = harness::call("c1", "pay", factlog::harness::event::Effect::Unsafe, None);
    task.append(call).expect("tool/call");
    let result = harness::written(task.append(harness::result("c1", None)).expect("tool/result")).0;
    assert!(last_seq_in_replica(replica_dir.path()) >= result.0, "the result too");

    // Through the protocol: "durability":"replicated".
    let line = br#"{"task":"t","type":"user/message","text":"via the protocol","durability":"replicated"}"#;
    let reply = factlog::protocol::handle_line(&store, line);
    let written = reply.object()["seq"].as_u64().expect("written");
    assert!(last_seq_in_replica(replica_dir.path()) >= written);
    // The acknowledgement says what it waited for.
    assert_eq!(reply.object()["durability"], "replicated");
    drop(task);
    replication.stop().expect("stop");
    store.close().expect("close");
}

#[test]
fn a_replicated_append_the_replica_does_not_take_fails_but_stays_written() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    let faulty = FaultyRemote::new(remote(replica_dir.path()), u64::MAX, Fault::Fail);
    let every = Arc::clone(&faulty.every);
    let options = ReplicateOptions::new().replicated_wait(Duration::from_millis(300));
    let replication = store.replicate(Box::new(faulty), options).expect("start");
    every.store(1, Ordering::Relaxed);
    let task = store.task("t").expect("task");
    let replicated = factlog::AppendOptions::default().replicated();
    let failed = task.append_with(harness::user("receipt"), replicated).unwrap_err();
    let ErrorKind::NotReplicated { seq, .. } = failed.kind() else { panic!("{failed}") };
    assert_eq!(*seq, harness::last_seq(&store), "written and synced: {failed}");
    assert!(failed.to_string().contains("do not report it as replicated"), "{failed}");
    every.store(u64::MAX, Ordering::Relaxed);
    let seq = *seq;
    eventually("shipped once reachable", || replication.status().shipped_seq >= seq);
    // A stopped replication fails waiting appends at once.
    replication.stop().expect("stop");
    let ended = task.append_with(harness::user("after"), replicated).unwrap_err();
    assert!(matches!(ended.kind(), ErrorKind::NotReplicated { seq: 0, .. }), "{ended}");
    drop(task);
    store.close().expect("close");
}

#[test]
fn segments_purged_before_they_were_shipped_stop_the_replicator_instead_of_a_gap() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    replica::session(&store, "t", 2);
    start(store_dir.path(), remote(replica_dir.path()), false)
        .and_then(Replicator::finish)
        .expect("ship the beginning");
    // The replicator is not running: the store grows by many segments and purges them.
    replica::session(&store, "t", 12);
    store.checkpoint().expect("checkpoint");
    store.purge().expect("purge");
    replica::session(&store, "t", 1);
    let mut replicator = start(store_dir.path(), remote(replica_dir.path()), false).expect("start");
    let gap = replicator.round().unwrap_err();
    assert!(matches!(gap.kind(), ErrorKind::ReplicaGap { .. }), "{gap}");
    assert!(gap.to_string().contains("purge") && gap.to_string().contains("new location"), "{gap}");
    store.close().expect("close");
}

#[test]
fn only_synced_frames_are_shipped_in_process() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // `Flushed` appends reach the file at once and are synced only 10 s later.
    let log = Options::new().segment_bytes(16 * 1024).flush_delay(Duration::from_secs(10));
    let store = Store::open(store_dir.path(), harness::options().log(log)).expect("open");
    let options = ReplicateOptions::new().interval(Duration::from_millis(10));
    let replication =
        store.replicate(Box::new(remote(replica_dir.path())), options).expect("start");
    let task = store.task("t").expect("task");
    let call = harness::call("c1", "search", factlog::harness::event::Effect::ReadOnly, None);
    let synced = harness::written(task.append(call).expect("synced")).0;
    eventually("the synced call shipped", || replication.status().shipped_seq >= synced.0);
    // Whatever the replica holds is durable in the store at every moment.
    for i in 0..200 {
        task.delta(&format!("fragment {i}")).expect("delta");
        let shipped = replication.status().shipped_seq;
        let durable = store.log().durable_seq().map_or(0, |s| s.0);
        assert!(shipped <= durable.max(synced.0), "shipped {shipped} beyond durable {durable}");
    }
    // Written to the file but not synced: rounds see them (the store's files hold them) and
    // ship none of them.
    let flushed = AppendOptions {
        durability: Some(factlog::Durability::Flushed),
        ..AppendOptions::default()
    };
    let mut last = 0;
    for i in 0..5 {
        last = harness::written(
            task.append_with(harness::user(&format!("m{i}")), flushed).expect("flushed"),
        )
        .0
        .0;
    }
    let durable = store.log().durable_seq().map_or(0, |s| s.0);
    assert!(durable < last, "the flushed events are not synced yet ({durable} < {last})");
    eventually("a round saw the flushed events", || replication.status().local_seq >= last);
    let shipped = replication.status().shipped_seq;
    assert!(shipped <= durable, "shipped {shipped}, beyond the durable seq {durable}");
    drop(task);
    let status = replication.stop().expect("stop");
    assert_eq!(status.shipped_seq, last, "the last round syncs, then ships everything");
    store.close().expect("close");
    assert_replicated(store_dir.path(), replica_dir.path());
}
