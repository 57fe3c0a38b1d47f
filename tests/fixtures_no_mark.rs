//! A store written before log marks existed (`tests/fixtures/v2-no-mark-torn`, frozen: written
//! by commit 9fdb0e9, segment format 2, no `MARK`, 12 synced messages, then a torn tail of 12
//! bytes after them) opens as it did then: its tail judged by the frames alone (cut, and the
//! report says the log had no mark); the first write gives it a mark, and from then on the
//! same damage is refused (`format-spec/versions.md`, `format-spec/mark.md`, row M1).

use std::path::Path;

use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::{Store, StoreOptions};

fn copy_fixture(to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2-no-mark-torn/store");
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
}

#[test]
fn a_store_without_a_mark_opens_as_before_and_gains_one_on_its_first_write() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("store");
    copy_fixture(&dir);
    let mark = dir.join(factlog::engine::mark::MARK_FILE_NAME);
    assert!(!mark.exists());

    // A read-only open and verify judge it by the frames: a torn tail, and no mark.
    let report = factlog::verify(&dir, factlog::Options::new()).unwrap();
    assert!(matches!(report.outcome, factlog::VerifyOutcome::TornTail(_)), "{report:?}");
    assert_eq!(report.mark, None);

    let store = Store::open(&dir, StoreOptions::new()).unwrap();
    let log = &store.open_report().log;
    assert_eq!(log.mark, None, "the report says the log had no mark");
    let cut = log.tail_cut.clone().expect("the torn tail is cut as before");
    assert_eq!((cut.offset, cut.bytes, cut.first_seq_cut.0, cut.kept), (928, 12, 13, None));
    assert_eq!(log.last_seq.map(|s| s.0), Some(12));
    assert!(!mark.exists(), "an open without a write leaves the store as it was");
    let task = store.task("t").unwrap();
    let message = UserMessage { text: "after".into(), extra: Default::default() };
    task.append(Body::UserMessage(message)).unwrap();
    drop(task);
    store.close().unwrap();

    // The first write gave it a mark; a clean close made the mark vouch for every byte.
    let found = factlog::engine::mark::read(&factlog::fs::RealFs, &dir).unwrap();
    let found = *found.mark().expect("a mark after the first write");
    assert!(found.clean);
    assert_eq!(found.durable_seq, 13);
    let segment = dir.join("00000000000000000001.seg");
    let bytes = std::fs::read(&segment).unwrap();
    let end = found.durable_offset as usize;
    let mut damaged = bytes.clone();
    damaged[end - 9] ^= 0x20;
    std::fs::write(&segment, damaged).unwrap();
    let refused = Store::open(&dir, StoreOptions::new()).map(drop).expect_err("now refused");
    assert!(refused.is_corruption(), "{refused}");
}
