//! Proves the error paths through the I/O seam: a failed `fdatasync` or a full disk during a
//! write poisons the handle (every later append fails with `Poisoned`, nothing is retried)
//! and reopening recovers every acknowledged record; a full disk while preparing the next
//! segment fails only the append that needed it; a second writer gets `Locked`.

use crate::common::faulty_fs;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use factlog::{Durability, ErrorKind, Log, Options, Seq};
use faulty_fs::FaultyFs;

fn options(fs: &FaultyFs) -> Options {
    Options::new().segment_bytes(8192).background_threads(false).fs(Arc::new(fs.clone()))
}

fn read_all(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let log = Log::open(dir, Options::new().segment_bytes(8192)).unwrap();
    log.read_from(Seq(1)).unwrap().map(|r| r.unwrap().payload.to_vec()).collect()
}

#[test]
fn a_failed_fsync_poisons_until_reopen_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFs::new();
    let log = Log::open(dir.path(), options(&fs)).unwrap();
    for i in 0..10 {
        log.append(format!("acked {i}").as_bytes(), Durability::Synced).unwrap();
    }
    fs.faults.fail_sync.store(true, Ordering::SeqCst);
    let err = log.append(b"not acked", Durability::Synced).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Io { op: "fdatasync", .. }), "{err}");
    fs.faults.fail_sync.store(false, Ordering::SeqCst);
    let syncs = fs.faults.syncs.load(Ordering::SeqCst);
    for durability in [Durability::Buffered, Durability::Flushed, Durability::Synced] {
        let err = log.append(b"later", durability).unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Poisoned { .. }), "{err}");
    }
    assert!(log.close().is_err(), "close reports the poisoned state");
    assert_eq!(fs.faults.syncs.load(Ordering::SeqCst), syncs, "fsync is never retried");
    let records = read_all(dir.path());
    assert!(records.len() >= 10, "acknowledged records survive");
    for (i, record) in records.iter().take(10).enumerate() {
        assert_eq!(record, format!("acked {i}").as_bytes());
    }
    assert!(records.len() <= 11 && records.get(10).is_none_or(|r| r == b"not acked"));
}

#[test]
fn a_full_disk_during_a_write_is_a_clear_error_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFs::new();
    let log = Log::open(dir.path(), options(&fs)).unwrap();
    log.append(b"acked", Durability::Flushed).unwrap();
    fs.faults.disk_full.store(true, Ordering::SeqCst);
    let err = log.append(b"refused", Durability::Flushed).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::DiskFull { .. }), "{err}");
    assert!(err.to_string().contains("disk full"), "{err}");
    let err = log.append(b"later", Durability::Buffered).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Poisoned { .. }), "{err}");
    drop(log);
    fs.faults.disk_full.store(false, Ordering::SeqCst);
    assert_eq!(read_all(dir.path()), vec![b"acked".to_vec()]);
}

#[test]
fn a_full_disk_while_preparing_a_segment_fails_only_that_append() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFs::new();
    *fs.faults.write_filter.lock() = "prealloc".into();
    let log = Log::open(dir.path(), options(&fs)).unwrap();
    let record = [5u8; 1000];
    for _ in 0..7 {
        log.append(&record, Durability::Synced).unwrap();
    }
    fs.faults.disk_full.store(true, Ordering::SeqCst);
    let err = log.append(&record, Durability::Synced).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::DiskFull { .. }), "{err}");
    fs.faults.disk_full.store(false, Ordering::SeqCst);
    assert_eq!(log.append(&record, Durability::Synced).unwrap(), Seq(8), "no seq was consumed");
    assert_eq!(log.info().unwrap().segments.len(), 2);
    log.close().unwrap();
    assert_eq!(read_all(dir.path()).len(), 8);
}

#[test]
fn a_second_writer_is_locked_out_and_a_reader_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let first = Log::open(dir.path(), Options::new()).unwrap();
    let err = Log::open(dir.path(), Options::new()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Locked { .. }), "{err}");
    assert!(err.to_string().contains("locked"), "{err}");
    first.append(b"x", Durability::Flushed).unwrap();
    let reader = Log::open_read_only(dir.path(), Options::new()).unwrap();
    assert_eq!(reader.last_seq(), Some(Seq(1)));
    first.close().unwrap();
    Log::open(dir.path(), Options::new()).unwrap().close().unwrap();
}
