//! Proves that damage a crash cannot explain is refused, never skipped and never cut: a bad
//! frame in the active segment that a later synced frame proves was durable, a bad frame or a
//! zeroed region in a sealed segment, a bad segment header, a future format version; each
//! error names the segment and offset, and `verify` agrees.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use factlog::{CorruptionReason, Durability, ErrorKind, Log, Options, Seq, VerifyOutcome};

fn options() -> Options {
    Options::new().segment_bytes(8192).background_threads(false)
}

fn build(dir: &Path, n: u64) -> Vec<std::path::PathBuf> {
    let log = Log::open(dir, options()).unwrap();
    for i in 1..=n {
        log.append(format!("record number {i:04}").as_bytes(), Durability::Synced).unwrap();
    }
    let paths = log.info().unwrap().segments.into_iter().map(|s| s.path).collect();
    log.close().unwrap();
    paths
}

fn flip(path: &Path, offset: u64) {
    let file = OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8];
    file.read_exact_at(&mut b, offset).unwrap();
    file.write_all_at(&[b[0] ^ 0x10], offset).unwrap();
}

fn read_error(dir: &Path) -> factlog::Error {
    let log = Log::open(dir, options()).unwrap();
    let result: factlog::Result<Vec<_>> = log.read_from(Seq(1)).unwrap().collect();
    result.unwrap_err()
}

#[test]
fn a_synced_frame_damaged_before_the_tail_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let paths = build(dir.path(), 5);
    assert_eq!(paths.len(), 1);
    // Frame 2 starts at 64 + 48 (each frame: 24 + 17 bytes, padded to 48).
    flip(&paths[0], 64 + 48 + 30);
    let before = std::fs::read(&paths[0]).unwrap();
    let err = Log::open(dir.path(), options()).unwrap_err();
    match err.kind() {
        ErrorKind::Corruption {
            offset, reason: CorruptionReason::DurableRecordDamaged(_), ..
        } => {
            assert_eq!(*offset, 64 + 48);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert_eq!(std::fs::read(&paths[0]).unwrap(), before, "nothing was cut");
    let verdict = factlog::verify(dir.path(), options()).unwrap();
    assert!(matches!(verdict.outcome, VerifyOutcome::Corrupt(_)));
}

#[test]
fn a_bad_frame_in_a_sealed_segment_is_reported_by_readers_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let paths = build(dir.path(), 400);
    assert!(paths.len() >= 3);
    flip(&paths[0], 64 + 48 * 3 + 27);
    let err = read_error(dir.path());
    match err.kind() {
        ErrorKind::Corruption { segment, offset, .. } => {
            assert_eq!((segment.map(|s| s.0), *offset), (Some(1), 64 + 48 * 3));
        }
        other => panic!("{other:?}"),
    }
    let verdict = factlog::verify(dir.path(), options()).unwrap();
    let VerifyOutcome::Corrupt(e) = verdict.outcome else { panic!("{:?}", verdict.outcome) };
    assert!(e.to_string().contains("segment 1"), "{e}");
}

#[test]
fn a_zeroed_sector_in_a_sealed_segment_is_a_sequence_gap() {
    let dir = tempfile::tempdir().unwrap();
    let paths = build(dir.path(), 400);
    let file = OpenOptions::new().write(true).open(&paths[1]).unwrap();
    file.write_all_at(&[0u8; 512], 512).unwrap();
    let err = read_error(dir.path());
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Corruption {
                reason: CorruptionReason::SequenceGap { .. } | CorruptionReason::BadFrame(_),
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        factlog::verify(dir.path(), options()).unwrap().outcome,
        VerifyOutcome::Corrupt(_)
    ));
}

#[test]
fn bad_headers_and_future_versions_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let paths = build(dir.path(), 400);
    flip(&paths[1], 36);
    let err = Log::open(dir.path(), options()).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Corruption { reason: CorruptionReason::BadHeaderChecksum, .. }
        ),
        "{err}"
    );
    flip(&paths[1], 36);
    let file = OpenOptions::new().write(true).open(&paths[1]).unwrap();
    file.write_all_at(&3u16.to_le_bytes(), 8).unwrap();
    let err = Log::open(dir.path(), options()).unwrap_err();
    match err.kind() {
        ErrorKind::UnsupportedVersion { found, supported, .. } => {
            assert_eq!((*found, *supported), (3, 2))
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("newer factlog"), "{err}");
    let err = Log::open_read_only(dir.path(), options()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::UnsupportedVersion { .. }));
}

#[test]
fn a_missing_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let paths = build(dir.path(), 400);
    std::fs::remove_file(&paths[1]).unwrap();
    let err = Log::open(dir.path(), options()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Corruption { reason: CorruptionReason::SegmentOrder, .. }),
        "{err}"
    );
}
