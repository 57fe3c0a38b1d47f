//! A store replicated to a real S3-protocol server and restored from it
//! (`format-spec/replication.md`): a session written while `Store::replicate` ships it to
//! `s3://`, restored into another directory with the same events and state, also at a seq in
//! the middle; the server killed in the middle of the uploads and restarted: the replication
//! reports the failure, appends go on, and it catches up without a gap or a duplicate (the
//! restore checks every part follows the one before it); a `Replicated` append returns only
//! once its part exists on the server; wrong credentials: replicating is refused with a clear
//! error and the store appends as before; a second writer of the replica is refused. Proved
//! with `s3s-fs` started on loopback for each test (`tests/common/s3.rs`, `.ci/s3-server`).

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::s3::{S3Server, quick};
use common::{harness, replica};
use factlog::replica::{ReplicateOptions, RestoreOptions, restore};
use factlog::{AppendOptions, ErrorKind, Options, Seq, Store, StoreOptions};

fn small_segments() -> StoreOptions {
    harness::options().log(Options::new().segment_bytes(16 * 1024))
}

/// Waits (a generous deadline, a hang guard, not a performance bound) until `done()`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every event of the store in `dir`, as dump lines.
fn dump(dir: &Path) -> Vec<String> {
    let store = Store::open_read_only(dir, harness::options()).expect("open read-only");
    let events = store.events(Seq(1)).expect("events").map(|e| format!("{:?}", e.expect("event")));
    events.collect()
}

#[test]
fn a_session_replicated_to_s3_restores_the_same_store_even_across_a_server_crash() {
    let Some(mut server) = S3Server::start("s3 session") else { return };
    let (store_dir, restored_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    let remote = server.remote("agents/one", quick());
    let options = ReplicateOptions::new().interval(Duration::from_millis(50));
    let replication = store.replicate(Box::new(remote), options).expect("replicate");
    replica::session(&store, "t1", 4);
    store.checkpoint().expect("checkpoint");
    let first = harness::last_seq(&store);
    eventually("the first half shipped", || replication.status().shipped_seq >= first);

    // The server dies in the middle of the uploads: appends go on, rounds fail and say so.
    server.kill();
    replica::session(&store, "t2", 4);
    eventually("a failed round is reported", || replication.status().last_error.is_some());
    replica::session(&store, "t2", 2);
    server.restart();
    let last = harness::last_seq(&store);
    eventually("caught up after the restart", || replication.status().shipped_seq == last);
    let status = replication.stop().expect("stop");
    assert_eq!((status.shipped_seq, status.lag()), (last, 0));
    store.close().expect("close");

    // Restored elsewhere from the server alone: the same events; the parts followed each
    // other without a gap or an overlap, or the restore would have refused them.
    let remote = server.remote("agents/one", quick());
    let target = restored_dir.path().join("store");
    let report = restore(&remote, &target, RestoreOptions::new()).expect("restore");
    assert_eq!(report.through_seq, Seq(last));
    assert_eq!(dump(&target), dump(store_dir.path()));

    // Point in time: the first half.
    let half = restored_dir.path().join("half");
    let report = restore(&remote, &half, RestoreOptions::new().seq(Seq(first))).expect("restore");
    assert!(report.through_seq.0 <= first && report.through_seq.0 + 2 >= first, "{report:?}");
    let all = dump(store_dir.path());
    assert_eq!(dump(&half), all[..report.through_seq.0 as usize]);
}

#[test]
fn a_replicated_append_on_s3_returns_once_its_part_exists() {
    let Some(server) = S3Server::start("s3 replicated") else { return };
    let store_dir = tempfile::tempdir().unwrap();
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    let options = ReplicateOptions::new().interval(Duration::from_secs(3600));
    let replication = store
        .replicate(Box::new(server.remote("agents/two", quick())), options)
        .expect("replicate");
    let task = store.task("t").expect("task");
    task.append(harness::turn_start()).expect("buffered");
    let appended = task.append_with(harness::user("pay"), AppendOptions::default().replicated());
    let seq = harness::written(appended.expect("replicated")).0;
    // Another client of the server sees a part holding the seq at once.
    let observer = server.remote("agents/two", quick());
    let shipped = replica::segments_in(&observer);
    let bytes = shipped.values().last().expect("a segment");
    let header =
        factlog::engine::segment::decode_header(&bytes[..64], Path::new("s3")).expect("header");
    let scan = factlog::engine::segment::scan(bytes, &header, None, |_, _| {});
    assert!(scan.next_seq.0 > seq.0, "the part holding seq {} exists", seq.0);
    drop(task);
    replication.stop().expect("stop");
    store.close().expect("close");
}

#[test]
fn wrong_credentials_refuse_replicating_and_leave_appends_alone() {
    let Some(server) = S3Server::start("s3 credentials") else { return };
    let store_dir = tempfile::tempdir().unwrap();
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    let wrong = server.remote_with_secret("agents/three", "not-the-secret", quick()).expect("open");
    let refused = store.replicate(Box::new(wrong), ReplicateOptions::new()).unwrap_err();
    assert!(matches!(refused.kind(), ErrorKind::Remote { .. }), "{refused}");
    assert!(refused.to_string().contains("credentials"), "{refused}");
    replica::session(&store, "t", 1);
    assert!(harness::last_seq(&store) > 0);

    // The right credentials work, and a second writer of that replica is refused.
    let replication = store
        .replicate(Box::new(server.remote("agents/three", quick())), ReplicateOptions::new())
        .expect("replicate");
    let other_dir = tempfile::tempdir().unwrap();
    let other = Store::open(other_dir.path(), small_segments()).expect("open");
    let second = other
        .replicate(Box::new(server.remote("agents/three", quick())), ReplicateOptions::new())
        .unwrap_err();
    assert!(matches!(second.kind(), ErrorKind::LeaseHeld { .. }), "{second}");
    replication.stop().expect("stop");
    store.close().expect("close");
    other.close().expect("close");
}
