//! `factlog retain URL` (`format-spec/replication.md`, "Retention"): removes the snapshot
//! objects older than the newest three and the segments the oldest kept snapshot covers,
//! leaves a marker so that a replicator does not ship them again, plans without removing with
//! `--dry-run`, and removes no segment on account of a damaged snapshot.

use crate::common;

use std::path::Path;

use common::replica;
use common::{arg, factlog, harness};
use factlog::Options;
use factlog::replica::{DirRemote, Remote};
use serde_json::Value;

fn url(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

/// A store of several 16 KiB segments shipped after each of five checkpoints, so that the
/// replica holds five snapshots.
fn replicated(store_dir: &Path, replica_dir: &Path) {
    let options = harness::options().log(Options::new().segment_bytes(16 * 1024));
    let store = factlog::Store::open(store_dir, options).expect("open");
    for round in 0..5 {
        replica::session(&store, &format!("t{round}"), 4);
        store.checkpoint().expect("checkpoint");
        let to = url(replica_dir);
        factlog(&["replicate", arg(store_dir), "--to", &to, "--once"], b"").assert_success();
    }
    replica::session(&store, "tail", 1);
    store.close().expect("close");
    let to = url(replica_dir);
    factlog(&["replicate", arg(store_dir), "--to", &to, "--once"], b"").assert_success();
}

fn retain(replica_dir: &Path, extra: &[&str]) -> Value {
    let to = url(replica_dir);
    let mut args = vec!["retain", &to, "--json"];
    args.extend_from_slice(extra);
    let run = factlog(&args, b"");
    run.assert_success();
    serde_json::from_slice(&run.stdout).expect("one JSON object")
}

#[test]
fn retention_removes_what_the_oldest_kept_snapshot_covers_and_nothing_is_shipped_again() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replicated(store_dir.path(), replica_dir.path());
    let remote = DirRemote::create(&url(replica_dir.path()), replica_dir.path()).expect("remote");
    let before = remote.list("").expect("list");

    let plan = retain(replica_dir.path(), &["--dry-run"]);
    assert_eq!(remote.list("").expect("list"), before, "a dry run removes nothing");
    assert_eq!(plan["snapshots"].as_array().map(Vec::len), Some(2), "{plan}");
    assert!(plan["segments"].as_array().is_some_and(|s| !s.is_empty()), "{plan}");

    let done = retain(replica_dir.path(), &[]);
    assert_eq!(
        (done["segments"].clone(), done["dry_run"].clone()),
        (plan["segments"].clone(), Value::Bool(false))
    );
    let covered = done["covered_seq"].as_u64().expect("covered_seq");
    let after = remote.list("").expect("list");
    assert!(after.contains(&format!("retained/{covered:020}")), "{after:?}");
    for segment in done["segments"].as_array().expect("segments") {
        let prefix = format!("segments/{:020}/", segment.as_u64().expect("a seq"));
        assert!(!after.iter().any(|n| n.starts_with(&prefix)), "{prefix} removed");
    }
    assert_eq!(remote.list("snapshots/").expect("list").len(), 3);
    // The replica still holds everything after the covered seq, and no segment is shipped
    // again by the next run.
    let rerun = factlog(
        &["replicate", arg(store_dir.path()), "--to", &url(replica_dir.path()), "--once", "--json"],
        b"",
    );
    rerun.assert_success();
    let status: Value = serde_json::from_slice(&rerun.stdout).expect("JSON");
    assert_eq!(status["parts"], 0, "{status}");
    // Nothing more to remove.
    let again = retain(replica_dir.path(), &[]);
    assert!(again["segments"].as_array().is_some_and(Vec::is_empty), "{again}");
}

#[test]
fn a_damaged_snapshot_covers_nothing() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replicated(store_dir.path(), replica_dir.path());
    let remote = DirRemote::create(&url(replica_dir.path()), replica_dir.path()).expect("remote");
    let snapshots = remote.list("snapshots/").expect("list");
    // The oldest of the three kept: flip a byte of its body.
    let oldest_kept = &snapshots[snapshots.len() - 3];
    let path = replica_dir.path().join(oldest_kept);
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).expect("write");
    let plan = retain(replica_dir.path(), &["--dry-run"]);
    assert_eq!(plan["covered_seq"], 0, "{plan}");
    assert!(plan["segments"].as_array().is_some_and(Vec::is_empty), "{plan}");
}

#[test]
fn a_retention_cut_off_half_way_restores_and_replicates_the_same() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    replicated(store_dir.path(), replica_dir.path());
    let remote = DirRemote::create(&url(replica_dir.path()), replica_dir.path()).expect("remote");
    let plan = factlog::replica::retain::plan(&remote, 1).expect("plan");
    assert!(plan.parts.len() >= 2, "{plan:?}");
    // The record and the first part only, as if the retention stopped there.
    let record = plan.record.as_ref().expect("a record");
    let name = factlog::replica::retain::record_name(plan.covered_seq);
    remote.put_new(&name, &record.encode()).expect("record");
    remote.delete(&plan.parts[0]).expect("delete");
    let target = tempfile::tempdir().unwrap();
    let restored = target.path().join("store");
    let to = url(replica_dir.path());
    factlog(&["restore", &to, arg(&restored)], b"").assert_success();
    factlog(&["replicate", arg(store_dir.path()), "--to", &to, "--once"], b"").assert_success();
    // Running the retention again finishes it.
    let again = retain(replica_dir.path(), &[]);
    assert_eq!(again["covered_seq"].as_u64(), Some(plan.covered_seq), "{again}");
    factlog(&["restore", &to, arg(&target.path().join("again"))], b"").assert_success();
}
