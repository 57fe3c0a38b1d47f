//! Salvage of a store whose early segments were reclaimed (`Store::reclaim`, `factlog purge`):
//! the valid snapshots of the old store that the kept log continues are copied byte for byte,
//! so the new store opens (instead of failing with `Reclaimed`) and holds the facts of the
//! reclaimed events; a damaged snapshot is not copied; a dry run only names them.

use crate::common;

use common::damage::{flip_byte, frame_of, segment_files, small_options, store_with_calls};
use common::harness::files_under;
use factlog::{SalvageOptions, Store};

#[test]
fn a_reclaimed_store_salvages_to_a_store_that_opens_from_its_snapshot() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    store_with_calls(&dir, 40);
    let store = Store::open(&dir, small_options()).expect("open");
    let covered = store.checkpoint().expect("checkpoint").covered_seq;
    let (removed, _) = store.reclaim().expect("reclaim");
    assert!(removed > 0, "segments were reclaimed");
    store.close().expect("close");
    store_with_calls_more(&dir);
    // Damage in the last segment, after the snapshot.
    let last = segment_files(&dir).last().cloned().expect("a segment");
    let log = factlog::Log::open_read_only(&dir, factlog::Options::new()).expect("read");
    let seq_in_last = log.last_seq().expect("records").0;
    drop(log);
    let (path, offset, _) = frame_of(&dir, seq_in_last - 2);
    assert_eq!(path, last);
    flip_byte(&path, offset + 40);
    let image = files_under(&dir);

    let dry = factlog::salvage(
        &dir,
        temp.path().join("dry"),
        SalvageOptions::new().dry_run(true).store(small_options()),
    )
    .expect("dry run");
    assert_eq!(dry.snapshots, [covered]);
    assert!(!temp.path().join("dry").exists());

    let target = temp.path().join("saved");
    let report = factlog::salvage(&dir, &target, SalvageOptions::new().store(small_options()))
        .expect("salvage");
    assert_eq!(report.snapshots, [covered]);
    assert_eq!(files_under(&dir), image, "the damaged store is never written");
    let store = Store::open(&target, small_options()).expect("the salvaged store opens");
    assert_eq!(store.open_report().snapshot.as_ref().map(|m| m.covered_seq), Some(covered));
    let state = store.task_state("t1").expect("t1");
    assert!(state.session.calls.contains_key("c0"), "the reclaimed events' facts are kept");
    store.close().expect("close");
}

/// A few more calls in a second task, so the log goes on past the snapshot.
fn store_with_calls_more(dir: &std::path::Path) {
    let store = Store::open(dir, small_options()).expect("reopen");
    let task = store.task("t2").expect("task");
    for i in 0..10 {
        task.append(common::harness::user(&format!("more {i}"))).expect("append");
    }
    store.close().expect("close");
}
