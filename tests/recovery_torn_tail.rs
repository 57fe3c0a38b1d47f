//! Proves that open cuts exactly a torn tail of the active segment (garbage, a half-written
//! frame, frames after a hole that nothing proves durable), reports segment, offset and
//! length, zeroes it so that a second open finds nothing to cut, and keeps appending; that
//! `Strict` refuses instead and changes nothing; and that a read-only open reports without
//! writing. These logs have no mark (it is removed after each close), so the witness rule of
//! `format-spec/recovery.md` alone decides, as after a crash before any mark covered the tail;
//! with the mark of a clean close the same damage is refused (`tests/mark_damage.rs`).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use factlog::{Durability, ErrorKind, Log, Options, RecoveryMode, Seq, VerifyOutcome};

fn options() -> Options {
    Options::new().segment_bytes(64 * 1024).background_threads(false)
}

/// Writes `n` synced records and returns the active segment's path and the end of the last
/// frame.
fn log_with(dir: &Path, n: u64) -> (PathBuf, u64) {
    let log = Log::open(dir, options()).unwrap();
    for i in 1..=n {
        log.append(format!("record {i}").as_bytes(), Durability::Synced).unwrap();
    }
    let info = log.info().unwrap();
    log.close().unwrap();
    forget_mark(dir);
    let active = info.segments.last().unwrap().path.clone();
    let report = factlog::verify(dir, options()).unwrap();
    let end = report.segments.last().unwrap().used_bytes;
    (active, end)
}

/// Removes the log mark: the log is judged as one without a mark (`format-spec/mark.md`, M1).
fn forget_mark(dir: &Path) {
    std::fs::remove_file(dir.join(factlog::engine::mark::MARK_FILE_NAME)).unwrap();
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    let file = OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, offset).unwrap();
}

fn records(log: &Log) -> Vec<Vec<u8>> {
    log.read_from(Seq(1)).unwrap().map(|r| r.unwrap().payload.to_vec()).collect()
}

#[test]
fn garbage_after_the_last_frame_is_cut_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (active, end) = log_with(dir.path(), 20);
    write_at(&active, end, &[0xAB; 100]);
    write_at(&active, end + 300, &[0x01]);
    let log = Log::open(dir.path(), options()).unwrap();
    let cut = log.recovery_report().tail_cut.clone().expect("a torn tail");
    assert_eq!((cut.path, cut.offset, cut.bytes), (active.clone(), end, 301));
    assert_eq!(log.recovery_report().last_seq, Some(Seq(20)));
    assert_eq!(records(&log).len(), 20);
    assert_eq!(log.append(b"after", Durability::Synced).unwrap(), Seq(21));
    log.close().unwrap();
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.recovery_report().tail_cut, None, "the cut is durable");
    assert_eq!(records(&log).last().unwrap(), b"after");
}

#[test]
fn a_half_written_frame_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (active, end) = log_with(dir.path(), 5);
    // Write a complete 6th record, then tear it: keep only its first 20 bytes.
    {
        let log = Log::open(dir.path(), options()).unwrap();
        log.append(b"the sixth record, torn", Durability::Synced).unwrap();
        log.close().unwrap();
        forget_mark(dir.path());
    }
    write_at(&active, end + 20, &[0u8; 40]);
    let log = Log::open(dir.path(), options()).unwrap();
    let cut = log.recovery_report().tail_cut.clone().expect("a torn tail");
    // Bytes are counted up to the last non-zero one: the 20th byte (flags) is zero.
    assert_eq!((cut.offset, cut.bytes), (end, 19));
    assert_eq!(log.last_seq(), Some(Seq(5)));
}

#[test]
fn strict_mode_refuses_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (active, end) = log_with(dir.path(), 3);
    write_at(&active, end, b"torn bytes");
    let before = std::fs::read(&active).unwrap();
    let err = Log::open(dir.path(), options().recovery_mode(RecoveryMode::Strict)).unwrap_err();
    match err.kind() {
        ErrorKind::TornTail { offset, bytes, .. } => assert_eq!((*offset, *bytes), (end, 10)),
        other => panic!("expected TornTail, got {other:?}"),
    }
    assert_eq!(std::fs::read(&active).unwrap(), before);
}

#[test]
fn read_only_open_reports_the_tail_without_cutting_it() {
    let dir = tempfile::tempdir().unwrap();
    let (active, end) = log_with(dir.path(), 3);
    write_at(&active, end, b"torn bytes");
    let before = std::fs::read(&active).unwrap();
    let log = Log::open_read_only(dir.path(), options()).unwrap();
    let cut = log.recovery_report().tail_cut.clone().expect("reported");
    assert_eq!((cut.offset, cut.bytes), (end, 10));
    assert_eq!(records(&log).len(), 3);
    drop(log);
    assert_eq!(std::fs::read(&active).unwrap(), before);
    assert!(matches!(
        factlog::verify(dir.path(), options()).unwrap().outcome,
        VerifyOutcome::TornTail(_)
    ));
}

#[test]
fn unsynced_frames_after_a_hole_are_cut_with_the_hole() {
    let dir = tempfile::tempdir().unwrap();
    let (active, end) = log_with(dir.path(), 2);
    // Three records written in one write and never synced; the first one's bytes are lost.
    {
        let log = Log::open(dir.path(), options()).unwrap();
        for i in 0..3 {
            log.append(format!("unsynced {i}").as_bytes(), Durability::Buffered).unwrap();
        }
        log.flush(Durability::Flushed).unwrap();
        drop(log);
        forget_mark(dir.path());
    }
    write_at(&active, end, &[0u8; 24]);
    let log = Log::open(dir.path(), options()).unwrap();
    let cut = log.recovery_report().tail_cut.clone().expect("torn");
    assert_eq!(cut.offset, end);
    // Two valid frames followed the hole: their bytes were kept aside before the cut.
    assert_eq!((cut.first_seq_cut, cut.frames), (Seq(3), 2));
    let kept = cut.kept.clone().expect("kept aside");
    assert_eq!(
        factlog::engine::torn::list(&factlog::fs::RealFs, dir.path()).unwrap(),
        vec![kept.clone()]
    );
    let bytes = std::fs::read(&kept).unwrap();
    let tail = factlog::engine::torn::decode(&bytes, &kept).unwrap();
    assert_eq!((tail.offset, tail.bytes.len() as u64), (end, cut.bytes));
    assert_eq!(log.last_seq(), Some(Seq(2)));
    // The stale frames are gone: new records take their sequence numbers without confusion.
    log.append(b"new 3", Durability::Synced).unwrap();
    log.close().unwrap();
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(records(&log), vec![b"record 1".to_vec(), b"record 2".to_vec(), b"new 3".to_vec()]);
}
