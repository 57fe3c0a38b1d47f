//! Proves that a bit flip in the grown-but-unused region of a segment (the synced zeros a
//! growth step appended after the last frame, `format-spec/segment.md`, "Capacity and
//! growth") never changes or invents a record. A log of 72 KiB segments growing in 4 KiB steps
//! (one sealed, one active, every record `Synced`) is copied once per flipped bit; then:
//! - in the active segment of the cleanly closed log, every open refuses the flip as damage
//!   after the end its mark vouches for (`DamagedAfterClose`, `format-spec/mark.md`) and
//!   changes nothing; without the mark (a log written before marks), a writable open cuts the
//!   flip as a torn tail (reported in `tail_cut`, at or after the last frame's end), keeps every
//!   record identical, and a second open cuts nothing; a `Strict` open refuses with `TornTail`
//!   and changes nothing;
//! - in the sealed segment, a full read yields every record identical, or stops with
//!   `Corruption` in that segment at the end of its frames (a flip right where a reader looks
//!   for the next frame), never a different record.
//!
//! Every bit of the first 64 bytes after the frames is flipped, and one bit of every 64-bit
//! word of the rest of the file (a different position in each word).

use std::path::PathBuf;
use std::sync::Arc;

use factlog::fs::sim::{CrashModel, SimFs};
use factlog::{CorruptionReason, Durability, ErrorKind, Log, Options, RecoveryMode, Seq};

const DIR: &str = "/log";
const SEGMENT_BYTES: u64 = 72 * 1024;

fn options(fs: &SimFs) -> Options {
    Options::new()
        .segment_bytes(SEGMENT_BYTES)
        .buffer_bytes(4096)
        .background_threads(false)
        .fs(Arc::new(fs.clone()))
}

fn payload(i: u64) -> Vec<u8> {
    let len = 40 + (i * 37 % 400) as usize;
    (0..len).map(|j| (i as usize * 13 + j) as u8 | 1).collect()
}

/// The log, its records, and each segment with the offset where its frames end.
fn grown_log() -> (SimFs, Vec<Vec<u8>>, Vec<(PathBuf, usize)>) {
    let fs = SimFs::new(11);
    let log = Log::open(DIR, options(&fs)).unwrap();
    let mut records = Vec::new();
    let mut i = 0;
    while log.info().unwrap().segments.len() < 2 || i < 260 {
        let record = payload(i);
        log.append(&record, Durability::Synced).unwrap();
        records.push(record);
        i += 1;
    }
    assert!(log.prealloc_stats().growth_steps >= 3, "{:?}", log.prealloc_stats());
    log.close().unwrap();
    let reader = Log::open_read_only(DIR, options(&fs)).unwrap();
    let segments = reader.info().unwrap().segments;
    let mut ends = Vec::new();
    for segment in &segments {
        let bytes = fs.read_file(&segment.path).unwrap();
        // The frames end where the zeros begin: every frame holds a non-zero payload byte in
        // its last eight bytes before the padding, so scanning back finds the last frame.
        let last = bytes.iter().rposition(|&b| b != 0).unwrap();
        let end = (last + 1).div_ceil(8) * 8;
        assert!(end < bytes.len(), "{:?}: a grown-but-unused region exists", segment.path);
        ends.push((segment.path.clone(), end));
    }
    (fs, records, ends)
}

fn bits(end: usize, len: usize) -> Vec<u64> {
    let dense = (end * 8) as u64..((end + 64).min(len) * 8) as u64;
    let sparse = ((end + 64) / 8..len / 8).map(|word| word as u64 * 64 + (word as u64 * 29) % 64);
    dense.chain(sparse).collect()
}

fn read_all(fs: &SimFs) -> Result<Vec<Vec<u8>>, factlog::Error> {
    let log = Log::open_read_only(DIR, options(fs))?;
    log.read_from(Seq(1))?.map(|r| r.map(|r| r.payload.to_vec())).collect()
}

#[test]
fn a_flip_in_the_grown_zeros_of_the_active_segment_is_refused_or_without_a_mark_cut() {
    let (fs, records, ends) = grown_log();
    let (path, end) = ends.last().unwrap().clone();
    let len = fs.read_file(&path).unwrap().len();
    let flips = bits(end, len);
    assert!(flips.len() > 500, "{} flips", flips.len());
    for bit in flips {
        let copy = fs.reboot(CrashModel::ProcessCrash, 0);
        assert!(copy.flip_bit(&path, bit));
        let damaged = copy.read_file(&path).unwrap();
        let refused = Log::open(DIR, options(&copy)).expect_err("the mark vouches for every byte");
        assert!(
            matches!(
                refused.kind(),
                ErrorKind::Corruption { reason: CorruptionReason::DamagedAfterClose { .. }, .. }
            ),
            "bit {bit}: {refused}"
        );
        assert_eq!(copy.read_file(&path).unwrap(), damaged, "bit {bit}: refused, unchanged");
        let mark = std::path::Path::new(DIR).join(factlog::engine::mark::MARK_FILE_NAME);
        factlog::fs::Fs::remove_file(&copy, &mark).unwrap();
        let strict = Log::open(DIR, options(&copy).recovery_mode(RecoveryMode::Strict));
        let error = strict.expect_err("a strict open refuses a torn tail");
        assert!(matches!(error.kind(), ErrorKind::TornTail { .. }), "bit {bit}: {error}");
        assert_eq!(copy.read_file(&path).unwrap(), damaged, "bit {bit}: strict changed nothing");
        let log = Log::open(DIR, options(&copy)).unwrap();
        let cut = log.recovery_report().tail_cut.clone().expect("the flip is cut");
        assert!(cut.offset as usize >= end && cut.offset as usize <= (bit / 8) as usize);
        log.close().unwrap();
        assert_eq!(read_all(&copy).unwrap(), records, "bit {bit}");
        let again = Log::open(DIR, options(&copy)).unwrap();
        assert_eq!(again.recovery_report().tail_cut, None, "bit {bit}: the cut is durable");
    }
}

#[test]
fn a_flip_in_the_unused_zeros_of_a_sealed_segment_never_changes_a_record() {
    let (fs, records, ends) = grown_log();
    let (path, end) = ends.first().unwrap().clone();
    let len = fs.read_file(&path).unwrap().len();
    let (mut intact, mut refused) = (0, 0);
    for bit in bits(end, len) {
        let copy = fs.reboot(CrashModel::ProcessCrash, 0);
        assert!(copy.flip_bit(&path, bit));
        match read_all(&copy) {
            Ok(read) => {
                assert_eq!(read, records, "bit {bit}");
                intact += 1;
            }
            Err(error) => {
                let ErrorKind::Corruption { path: at, offset, .. } = error.kind() else {
                    panic!("bit {bit}: {error}");
                };
                assert_eq!((at, *offset as usize), (&path, end), "bit {bit}: {error}");
                refused += 1;
            }
        }
    }
    assert!(intact > 0 && refused > 0, "{intact} intact, {refused} refused");
}
