//! A salvaged store keeps the holder rules although the gap may have taken the facts they rest
//! on: when the lost record is a `tool/call` whose result survived, its call id is no longer
//! taken for a duplicate of anything (`CallIdReused`); every task of a store with a gap asks
//! for a confirmation before a side effect (its lost contract may have said `risk: high`). And
//! a salvage that fails while writing (a full disk, injected by `FaultyFs`) removes everything
//! it wrote, leaving no partial store, with an error that says so.

use crate::common;

use crate::common::faulty_fs;

use std::sync::atomic::Ordering;

use common::damage::{flip_byte, frame_of, result_inside_segment, small_options, store_with_calls};
use common::harness::{err_of, files_under, resume};
use factlog::harness::event::Effect;
use factlog::harness::{Body, Resume};
use factlog::{ErrorKind, SalvageOptions, Store, StoreOptions};
use faulty_fs::FaultyFs;

#[test]
fn a_lost_dispatch_makes_its_call_id_no_duplicate_and_every_task_waits_for_a_confirmation() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    let results = store_with_calls(&dir, 60);
    let (call_id, result_seq) = result_inside_segment(&dir, &results, 1);
    // The frame before the result holds the call's dispatch.
    let (path, offset, _) = frame_of(&dir, result_seq - 1);
    flip_byte(&path, offset + 40);
    let target = temp.path().join("saved");
    let report = factlog::salvage(&dir, &target, SalvageOptions::new().store(small_options()))
        .expect("salvage");
    assert_eq!(report.seqs_lost(), 1);
    let recovery = report.recovery.expect("recovered");
    assert_eq!(recovery.tasks[0].resume, Resume::NeedsConfirmation, "a low-risk task too");

    let store = Store::open(&target, small_options()).expect("open the salvaged store");
    let task = store.task("t1").expect("task");
    let unsafe_call =
        |id: &str, tool: &str| Body::ToolCall(common::harness::call_body(id, tool, Effect::Unsafe));
    let e = err_of(task.append(unsafe_call("fresh", "wire")));
    assert!(matches!(e.kind(), ErrorKind::NeedsConfirmation { .. }), "{e}");
    task.append(resume()).expect("confirmed");
    // The call's result survived, its dispatch did not: nothing is known to be its request.
    for tool in ["delete_repo", "fetch"] {
        let e = err_of(task.append(unsafe_call(&call_id, tool)));
        assert!(
            matches!(e.kind(), ErrorKind::CallIdReused { call_id: id, .. } if *id == call_id),
            "{tool}: {e}"
        );
    }
    store.close().expect("close");
}

#[test]
fn a_salvage_that_fails_while_writing_leaves_nothing_behind() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    let results = store_with_calls(&dir, 60);
    let (_, result_seq) = result_inside_segment(&dir, &results, 0);
    let (path, offset, _) = frame_of(&dir, result_seq);
    flip_byte(&path, offset + 40);
    let image = files_under(&dir);

    let fs = FaultyFs::new();
    *fs.faults.write_filter.lock() = ".seg".to_owned();
    fs.faults.disk_full.store(true, Ordering::SeqCst);
    let options = StoreOptions::new().log(factlog::Options::new().fs(std::sync::Arc::new(fs)));
    let target = temp.path().join("saved");
    let e = err_of(factlog::salvage(&dir, &target, SalvageOptions::new().store(options)));
    let ErrorKind::SalvageFailed { target: named, source } = e.kind() else { panic!("{e}") };
    assert_eq!(named, &target);
    assert!(matches!(source.kind(), ErrorKind::DiskFull { .. }), "{source}");
    assert!(e.to_string().contains("run factlog salvage again"), "{e}");
    assert!(!target.exists(), "the partial store was removed");
    assert_eq!(files_under(&dir), image, "the damaged store is never written");

    // Into an empty directory that existed: it is emptied, and kept.
    std::fs::create_dir(&target).expect("mkdir");
    let fs = FaultyFs::new();
    *fs.faults.write_filter.lock() = ".seg".to_owned();
    fs.faults.disk_full.store(true, Ordering::SeqCst);
    let options = StoreOptions::new().log(factlog::Options::new().fs(std::sync::Arc::new(fs)));
    err_of(factlog::salvage(&dir, &target, SalvageOptions::new().store(options)));
    assert_eq!(std::fs::read_dir(&target).expect("list").count(), 0, "emptied");
}
