//! A `file://` replica goes through the engine's I/O seam (`format-spec/replication.md`,
//! "Locations and the seam"), so the fault-injecting file systems reach it: an object create
//! that fails at any operation (`ENOSPC`, `EIO`, a short write) or crashes there (under every
//! crash model) leaves the object absent or whole, never partial, and a failed create is a
//! typed `Remote` error; a replication round over a file system whose syncs fail reports the
//! failure, and a later round catches up byte for byte.

use crate::common;

use crate::common::faulty_fs;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::harness;
use common::replica;
use factlog::fs::RealFs;
use factlog::fs::sim::{CrashModel, Fault, SimFs};
use factlog::replica::{DirRemote, Remote, Replicator, ShipOptions};
use factlog::{ErrorKind, Store};
use faulty_fs::FaultyFs;

const ROOT: &str = "/replica";
const URL: &str = "file:///replica";
const NAME: &str = "segments/one/part.bin";

/// An object larger than a sector, so a short write stores a strict prefix of it.
fn object() -> Vec<u8> {
    (0..3000u32).map(|i| u8::try_from(i % 251).expect("small")).collect()
}

fn sim_remote(sim: &SimFs) -> DirRemote {
    DirRemote::create_with_fs(Arc::new(sim.clone()), URL, Path::new(ROOT)).expect("remote")
}

/// The object is absent or holds exactly its bytes, and no temporary file is listed.
fn absent_or_whole(remote: &DirRemote, context: &str) -> bool {
    let listed = remote.list("").expect("list");
    let got = remote.get(NAME).expect("get");
    match got {
        None => {
            assert!(listed.is_empty(), "{context}: nothing but the object is listed: {listed:?}");
            false
        }
        Some(bytes) => {
            assert!(bytes == object(), "{context}: a listed object is whole");
            assert_eq!(listed, [NAME], "{context}");
            true
        }
    }
}

/// The state-changing operations of one create into a fresh replica, as the simulated file
/// system numbers them: `(first, count)`.
fn create_ops() -> (u64, u64) {
    let sim = SimFs::new(7);
    let remote = sim_remote(&sim);
    let first = sim.ops();
    assert!(remote.put_new(NAME, &object()).expect("put"));
    (first, sim.ops() - first)
}

#[test]
fn a_create_failing_at_any_operation_leaves_no_partial_object_and_a_retry_completes() {
    let (first, count) = create_ops();
    assert!(count >= 6, "directories, temporary, write, sync, link, remove, directory sync");
    let mut refused = 0;
    for fault in [Fault::NoSpace, Fault::Eio, Fault::ShortWrite] {
        for at in first..first + count {
            let context = format!("{fault:?} at operation {at}");
            let sim = SimFs::new(7);
            let remote = sim_remote(&sim);
            sim.inject(at, fault);
            let outcome = remote.put_new(NAME, &object());
            // Only a failed removal of the temporary after the link leaves it (unlisted).
            let left_temporary = outcome.is_ok();
            match outcome {
                Ok(created) => assert!(created, "{context}: the create went through"),
                Err(error) => {
                    refused += 1;
                    assert!(
                        matches!(error.kind(), ErrorKind::Remote { op: "put", .. }),
                        "{context}: {error}"
                    );
                    assert!(error.to_string().contains(URL), "{context}: {error}");
                }
            }
            let present = absent_or_whole(&remote, &context);
            // The retry creates what the failure left absent and finds what it left whole.
            assert_eq!(remote.put_new(NAME, &object()).expect("retry"), !present, "{context}");
            assert!(absent_or_whole(&remote, &context), "{context}: whole after the retry");
            let temporaries =
                sim.files().iter().filter(|p| p.to_string_lossy().contains(".tmp-")).count();
            assert!(temporaries <= usize::from(left_temporary), "{context}: {temporaries}");
        }
    }
    assert!(refused >= 2 * (count - 2), "most faults reach the caller ({refused})");
}

#[test]
fn a_crash_at_any_operation_of_a_create_leaves_the_object_absent_or_whole() {
    let (first, count) = create_ops();
    for model in CrashModel::ALL {
        for at in first..=first + count {
            let context = format!("{model:?} crash at operation {at}");
            let sim = SimFs::new(11);
            let remote = sim_remote(&sim);
            sim.crash_at(at);
            let outcome = remote.put_new(NAME, &object());
            if at < first + count {
                let error = outcome.expect_err("the machine went down");
                assert!(matches!(error.kind(), ErrorKind::Remote { .. }), "{context}: {error}");
            }
            for seed in 0..4 {
                let rebooted = sim.reboot(model, seed);
                absent_or_whole(&sim_remote(&rebooted), &context);
            }
        }
    }
    // Once its directory sync returned, the object survives a power loss.
    let sim = SimFs::new(13);
    sim_remote(&sim).put_new(NAME, &object()).expect("put");
    let rebooted = sim.reboot(CrashModel::LoseUnsynced, 0);
    assert!(absent_or_whole(&sim_remote(&rebooted), "after a completed create"));
}

#[test]
fn a_round_over_failing_syncs_reports_the_failure_and_a_later_round_catches_up() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = format!("file://{}", replica_dir.path().display());
    let faulty = FaultyFs::new();
    let remote = DirRemote::create_with_fs(Arc::new(faulty.clone()), &url, replica_dir.path())
        .expect("remote");
    let store = Store::open(store_dir.path(), harness::options()).expect("open");
    replica::session(&store, "before", 2);
    let options = ShipOptions::new();
    let mut replicator =
        Replicator::start(Arc::new(RealFs), store_dir.path(), Box::new(remote), options, 1)
            .expect("start");
    replicator.round().expect("a healthy round");
    let shipped_before = replicator.status().shipped_seq;

    replica::session(&store, "during", 2);
    faulty.faults.fail_sync.store(true, Ordering::SeqCst);
    let error = replicator.round().expect_err("every sync of the replica fails");
    assert!(matches!(error.kind(), ErrorKind::Remote { op: "put", .. }), "{error}");
    assert_eq!(replicator.status().shipped_seq, shipped_before, "nothing counted as shipped");
    assert!(replicator.status().last_error.is_some());
    let temporaries = walk(replica_dir.path()).into_iter().filter(|p| p.contains(".tmp-"));
    assert_eq!(temporaries.count(), 0, "a failed create removes its temporary file");

    faulty.faults.fail_sync.store(false, Ordering::SeqCst);
    replicator.round().expect("the round after the fault");
    let last = harness::last_seq(&store);
    assert_eq!(replicator.status().shipped_seq, last, "caught up");
    assert_eq!(replicator.status().last_error, None);
    store.close().expect("close");
    replicator.finish().expect("finish");
    let plain = DirRemote::create(&url, replica_dir.path()).expect("remote");
    assert_eq!(replica::segments_in(&plain), replica::segments_of(store_dir.path()));
}

/// Every file path under `dir`.
fn walk(dir: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            paths.extend(walk(&path));
        } else {
            paths.push(path.display().to_string());
        }
    }
    paths
}
