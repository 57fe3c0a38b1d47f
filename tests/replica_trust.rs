//! A restore is exact or refused (`format-spec/replication.md`, "Identity", "Retention",
//! "Restore"): two restores into one directory never both succeed and never touch each
//! other's files; an object of another replica is refused by name; a history that does not
//! begin at seq 1, or where the newest retention record says, is a gap; a stray, forged or
//! damaged retention record is refused; retention removes superseded leases; a dry run and a
//! scrub check the same without writing.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::replica;
use common::{arg, factlog, harness};
use factlog::replica::retain::{self, RetentionRecord};
use factlog::replica::{DirRemote, Remote, RestoreOptions, inspect, restore};
use factlog::{ErrorKind, Options, Store};
use serde_json::Value;

fn url(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

fn remote(dir: &Path) -> DirRemote {
    DirRemote::create(&url(dir), dir).expect("remote")
}

/// A store of several 16 KiB segments and a few snapshots, shipped by `factlog replicate`
/// after each checkpoint. Returns its last seq.
fn replicated(store_dir: &Path, replica_dir: &Path, rounds: usize) -> u64 {
    let options = harness::options().log(Options::new().segment_bytes(16 * 1024));
    let store = Store::open(store_dir, options).expect("open");
    for round in 0..rounds {
        replica::session(&store, &format!("t{round}"), 4);
        store.checkpoint().expect("checkpoint");
        let to = url(replica_dir);
        factlog(&["replicate", arg(store_dir), "--to", &to, "--once"], b"").assert_success();
    }
    let last = harness::last_seq(&store);
    store.close().expect("close");
    last
}

fn restored_last_seq(dir: &Path) -> (u64, u64) {
    let log = factlog::Log::open_read_only(dir, Options::new()).expect("open the restored log");
    let info = log.info().expect("info");
    (info.first_seq.map_or(0, |s| s.0), info.last_seq.map_or(0, |s| s.0))
}

fn refused(replica_dir: &Path, target: &Path) -> factlog::Error {
    let error = restore(&remote(replica_dir), target, RestoreOptions::new())
        .expect_err("the restore is refused");
    assert!(!target.exists(), "a refused restore writes nothing: {error}");
    error
}

#[test]
fn two_restores_into_one_directory_never_both_win_nor_touch_each_others_files() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let last = replicated(store_dir.path(), replica_dir.path(), 3);
    let to = url(replica_dir.path());
    let parent = tempfile::tempdir().unwrap();
    let bin = &*common::FACTLOG;
    let (mut wins, mut refusals) = (0, 0);
    for round in 0..25 {
        let target = parent.path().join(format!("r{round}"));
        let children: Vec<_> = (0..2)
            .map(|_| {
                Command::new(bin)
                    .args(["restore", &to, arg(&target)])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn a restore")
            })
            .collect();
        let outcomes: Vec<_> =
            children.into_iter().map(|c| c.wait_with_output().expect("wait")).collect();
        let won = outcomes.iter().filter(|o| o.status.success()).count();
        assert_eq!(won, 1, "round {round}: exactly one restore wins: {outcomes:?}");
        for outcome in outcomes.iter().filter(|o| !o.status.success()) {
            let stderr = String::from_utf8_lossy(&outcome.stderr);
            assert_eq!(outcome.status.code(), Some(1), "round {round}: {stderr}");
            assert!(
                stderr.contains("another factlog restore (pid ")
                    || stderr.contains("exists and is not empty"),
                "round {round}: {stderr}"
            );
            refusals += 1;
        }
        if won == 1 {
            wins += 1;
            // The winner's store is whole: nothing of it was removed by the loser.
            assert_eq!(restored_last_seq(&target), (1, last), "round {round}");
        }
        let left: Vec<_> = std::fs::read_dir(parent.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().into_string().expect("UTF-8"))
            .filter(|name| name.contains(".restore-"))
            .collect();
        assert!(left.is_empty(), "round {round}: staging directories left: {left:?}");
    }
    assert_eq!((wins, refusals), (25, 25), "every round one restore wins, the other is refused");
}

#[test]
fn a_running_restore_is_named_by_pid_and_a_killed_one_is_reported_not_removed() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replicated(store_dir.path(), replica_dir.path(), 1);
    let parent = tempfile::tempdir().unwrap();
    let target = parent.path().join("store");
    // Another restore of the same target holds its staging directory's lock; its name sorts
    // before this restore's (a restore that began later gives way: see the next test).
    let staging = parent.path().join(".store.restore-1-00000000000000aa");
    std::fs::create_dir(&staging).expect("create");
    let lock = std::fs::File::create(staging.join("LOCK")).expect("create the lock file");
    lock.lock().expect("lock");
    let error = refused(replica_dir.path(), &target);
    assert!(matches!(error.kind(), ErrorKind::RestoreInProgress { pid: 1, .. }), "{error}");
    assert!(error.to_string().contains("(pid 1)"), "{error}");
    assert!(staging.join("LOCK").exists(), "the other restore's files are untouched");
    // Once it is gone (killed: its lock released), its directory is reported, not removed.
    drop(lock);
    let report = restore(&remote(replica_dir.path()), &target, RestoreOptions::new())
        .expect("the restore runs");
    assert_eq!(report.stale_staging, std::slice::from_ref(&staging));
    assert!(staging.join("LOCK").exists(), "a directory of another restore is never removed");
}

#[test]
fn a_running_restore_whose_name_sorts_later_gives_way() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replicated(store_dir.path(), replica_dir.path(), 1);
    let parent = tempfile::tempdir().unwrap();
    let target = parent.path().join("store");
    // A restore that began after this one: its staging name sorts after any this process
    // makes ('~' after every digit). This restore goes on; that one is refused when it looks,
    // or loses the final rename.
    let later = parent.path().join(".store.restore-~later");
    std::fs::create_dir(&later).expect("create");
    let lock = std::fs::File::create(later.join("LOCK")).expect("create the lock file");
    lock.lock().expect("lock");
    let report = restore(&remote(replica_dir.path()), &target, RestoreOptions::new())
        .expect("the earlier restore goes on");
    assert!(report.stale_staging.is_empty(), "{:?}", report.stale_staging);
    assert!(later.join("LOCK").exists(), "the other restore's files are untouched");
}

#[test]
fn a_restore_never_writes_into_another_restores_directory() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replicated(store_dir.path(), replica_dir.path(), 1);
    let parent = tempfile::tempdir().unwrap();
    let target = parent.path().join("store");
    // A staging directory without a lock file (left by something other than a running
    // restore, which locks its directory before giving it that name), and a directory another
    // restore is creating (not yet locked, under a name no restore looks at).
    let lockless = parent.path().join(".store.restore-4343-00000000000000bb");
    std::fs::create_dir(&lockless).expect("create");
    let creating = parent.path().join(".store.restore~4444-00000000000000cc");
    std::fs::create_dir(&creating).expect("create");
    let report = restore(&remote(replica_dir.path()), &target, RestoreOptions::new())
        .expect("the restore runs");
    assert_eq!(report.stale_staging, std::slice::from_ref(&lockless));
    for other in [&lockless, &creating] {
        let files: Vec<_> = std::fs::read_dir(other).expect("still there").collect();
        assert!(files.is_empty(), "{}: nothing written into it: {files:?}", other.display());
    }
    // The restore's own directories are gone: the target holds the store, nothing else is left.
    let mut left: Vec<String> = std::fs::read_dir(parent.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [".store.restore-4343-00000000000000bb", ".store.restore~4444-00000000000000cc", "store"]
    );
}

#[test]
fn a_snapshot_of_another_replica_is_refused_by_name() {
    let temp = tempfile::tempdir().unwrap();
    let (a, a_replica) = (temp.path().join("a"), temp.path().join("a-replica"));
    let (b, b_replica) = (temp.path().join("b"), temp.path().join("b-replica"));
    replicated(&a, &a_replica, 2);
    replicated(&b, &b_replica, 4);
    // B's snapshot of a seq A's log holds too, in place of A's own of that seq: each is a
    // valid snapshot file, so only the replica id tells them apart.
    let ours = remote(&a_replica).list("snapshots/").expect("list");
    let theirs = remote(&b_replica).list("snapshots/").expect("list");
    let name = ours.iter().find(|n| theirs.contains(n)).expect("a snapshot name both hold");
    std::fs::copy(b_replica.join(name), a_replica.join(name)).expect("copy");
    let error = refused(&a_replica, &temp.path().join("restored"));
    match error.kind() {
        ErrorKind::ReplicaDamaged { object, reason } => {
            assert_eq!(object, name);
            assert!(reason.contains("belongs to replica"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // The scrub names it too, and the CLI exits 3.
    let scrub = inspect::verify(&remote(&a_replica)).expect_err("the scrub refuses it");
    assert!(scrub.to_string().contains(name.as_str()), "{scrub}");
    let run = factlog(&["replicas", "verify", &url(&a_replica)], b"");
    run.assert_one_line_error(3);
    // A part of B in A's replica: refused the same way.
    std::fs::remove_file(a_replica.join(name)).expect("remove");
    let part = remote(&b_replica).list("segments/").expect("list").remove(0);
    let ours = remote(&a_replica).list("segments/").expect("list").remove(0);
    std::fs::copy(b_replica.join(&part), a_replica.join(&ours)).expect("overwrite");
    let error = refused(&a_replica, &temp.path().join("restored"));
    assert!(error.to_string().contains("belongs to replica"), "{error}");
}

#[test]
fn a_missing_oldest_segment_is_a_gap_not_a_shorter_history() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replicated(store_dir.path(), replica_dir.path(), 3);
    let oldest = "segments/00000000000000000001/";
    for name in remote(replica_dir.path()).list(oldest).expect("list") {
        std::fs::remove_file(replica_dir.path().join(name)).expect("remove");
    }
    let error = refused(replica_dir.path(), &tempfile::tempdir().unwrap().path().join("r"));
    match error.kind() {
        ErrorKind::ReplicaGap { missing } => {
            assert!(missing.starts_with("seqs 1..="), "{missing}");
            assert!(missing.contains("no retention record"), "{missing}");
        }
        other => panic!("{other:?}"),
    }
    let run = factlog(&["replicas", "verify", &url(replica_dir.path()), "--json"], b"");
    run.assert_one_line_error(3);
}

#[test]
fn a_stray_forged_or_damaged_retention_record_is_refused() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let last = replicated(store_dir.path(), replica_dir.path(), 5);
    let r = remote(replica_dir.path());
    let target = || tempfile::tempdir().unwrap().path().join("r");

    // A stray empty marker, as the old format wrote: refused, nothing restored.
    let stray = retain::record_name(22);
    assert!(r.put_new(&stray, b"").expect("put"));
    let error = refused(replica_dir.path(), &target());
    match error.kind() {
        ErrorKind::ReplicaDamaged { object, reason } => {
            assert_eq!(object, &stray);
            assert!(reason.contains("empty marker"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    r.delete(&stray).expect("delete");

    // A real retention, then its record altered: a flipped byte, or another replica's.
    let plan = retain::plan(&r, 1).expect("plan");
    retain::apply(&r, &plan).expect("retain");
    let record = plan.record.clone().expect("a record");
    let name = retain::record_name(record.covered_seq);
    let report = restore(&r, &target(), RestoreOptions::new()).expect("a retained replica");
    assert_eq!(report.first_seq.0, record.first_kept_seq);
    assert_eq!(report.through_seq.0, last);
    let mut flipped = record.encode();
    flipped[5] ^= 0x01;
    std::fs::write(replica_dir.path().join(&name), &flipped).expect("write");
    assert!(refused(replica_dir.path(), &target()).to_string().contains("checksum"));
    let foreign = RetentionRecord { replica_id: record.replica_id ^ 1, ..record.clone() };
    std::fs::write(replica_dir.path().join(&name), foreign.encode()).expect("write");
    assert!(refused(replica_dir.path(), &target()).to_string().contains("belongs to replica"));

    // Forged with this replica's id: a history said to begin later than it does is damage;
    // earlier than the replica holds, a gap; a kept snapshot of another checksum, a gap.
    let later = RetentionRecord { first_kept_seq: record.first_kept_seq + 1, ..record.clone() };
    std::fs::write(replica_dir.path().join(&name), later.encode()).expect("write");
    let error = refused(replica_dir.path(), &target());
    assert!(matches!(error.kind(), ErrorKind::ReplicaDamaged { .. }), "{error}");
    let earlier = RetentionRecord { first_kept_seq: 1, ..record.clone() };
    std::fs::write(replica_dir.path().join(&name), earlier.encode()).expect("write");
    let error = refused(replica_dir.path(), &target());
    assert!(matches!(error.kind(), ErrorKind::ReplicaGap { .. }), "{error}");
    let other = RetentionRecord { snapshot_crc: record.snapshot_crc ^ 1, ..record.clone() };
    std::fs::write(replica_dir.path().join(&name), other.encode()).expect("write");
    let error = refused(replica_dir.path(), &target());
    assert!(error.to_string().contains("another checksum"), "{error}");
    // The kept snapshot removed: the seqs before the history are a gap.
    std::fs::write(replica_dir.path().join(&name), record.encode()).expect("write");
    std::fs::remove_file(replica_dir.path().join(&record.snapshot)).expect("remove");
    let error = refused(replica_dir.path(), &target());
    assert!(error.to_string().contains("it is missing"), "{error}");
}

#[test]
fn retention_removes_superseded_leases_and_a_replica_of_a_purged_store_restores() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let last = replicated(store_dir.path(), replica_dir.path(), 5);
    let r = remote(replica_dir.path());
    assert_eq!(r.list("lease/").expect("list").len(), 10, "five runs, each released");
    let run = factlog(&["retain", &url(replica_dir.path()), "--json"], b"");
    run.assert_success();
    let done: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    assert_eq!(done["leases"], 8, "{done}");
    assert_eq!(r.list("lease/").expect("list").len(), 2, "the newest epoch stays");
    // The next run takes the next epoch.
    let to = url(replica_dir.path());
    factlog(&["replicate", arg(store_dir.path()), "--to", &to, "--once"], b"").assert_success();
    assert!(r.list("lease/").expect("list").contains(&"lease/00000000000000000006.json".into()));

    // The store purges its oldest segments, then begins a replica at a new location: the
    // replicator records where its history begins, and the replica restores.
    let store = Store::open(store_dir.path(), harness::options()).expect("open");
    store.checkpoint().expect("checkpoint");
    store.purge().expect("purge");
    store.close().expect("close");
    let fresh = tempfile::tempdir().unwrap();
    let fresh_url = url(fresh.path());
    factlog(&["replicate", arg(store_dir.path()), "--to", &fresh_url, "--once"], b"")
        .assert_success();
    let records = remote(fresh.path()).list("retained/").expect("list");
    assert_eq!(records.len(), 1, "{records:?}");
    let report = restore(&remote(fresh.path()), &fresh.path().join("r"), RestoreOptions::new())
        .expect("restore a replica of a purged store");
    assert!(report.first_seq.0 > 1);
    assert_eq!(report.through_seq.0, last);
}

#[test]
fn a_dry_run_and_the_listing_say_what_a_restore_would_do_and_write_nothing() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let last = replicated(store_dir.path(), replica_dir.path(), 2);
    let to = url(replica_dir.path());
    let target = tempfile::tempdir().unwrap().path().join("r");
    let run = factlog(&["restore", &to, arg(&target), "--dry-run", "--json"], b"");
    run.assert_success();
    let dry: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    assert_eq!(
        (dry["dry_run"].clone(), dry["through_seq"].as_u64()),
        (Value::Bool(true), Some(last))
    );
    assert!(!target.exists(), "a dry run writes nothing");
    let run = factlog(&["restore", &to, arg(&target), "--json"], b"");
    run.assert_success();
    let done: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    assert_eq!(done["segments"], dry["segments"]);

    let run = factlog(&["replicas", "list", &to, "--store", arg(store_dir.path()), "--json"], b"");
    run.assert_success();
    let listed: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    assert_eq!(listed["last_seq"].as_u64(), Some(last), "{listed}");
    assert_eq!(listed["lag"]["records"], 0, "{listed}");
    assert_eq!(listed["replica_id"], done["replica_id"]);
    let run = factlog(&["replicas", "verify", &to, "--json"], b"");
    run.assert_success();
    let scrub: Value = serde_json::from_slice(&run.stdout).expect("JSON");
    assert_eq!(
        (scrub["ok"].clone(), scrub["through_seq"].as_u64()),
        (Value::Bool(true), Some(last))
    );
}
