//! Proves that salvaging a log without damage gives an identical copy: no gap, every record
//! with its seq, and (for a log of raw records, which no recovery writes to) every segment
//! file byte for byte, with no gap file.

use crate::common;

use common::damage::{SMALL_SEGMENT_BYTES, segment_files};
use factlog::{Durability, Log, Options, SalvageOptions, StoreOptions};

#[test]
fn an_intact_log_salvages_to_an_identical_copy() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("log");
    let options = Options::new().segment_bytes(SMALL_SEGMENT_BYTES);
    let log = Log::open(&dir, options.clone()).expect("open");
    for i in 0..300u32 {
        let record = format!("record {i} {}", "y".repeat((i % 50) as usize));
        log.append(record.as_bytes(), Durability::Flushed).expect("append");
    }
    log.append_batch(&[b"batch a".as_slice(), b"batch b"], Durability::Synced).expect("batch");
    log.close().expect("close");
    assert!(segment_files(&dir).len() >= 3);

    let target = temp.path().join("copy");
    let salvage = SalvageOptions::new().store(StoreOptions::new().log(options));
    let report = factlog::salvage(&dir, &target, salvage).expect("salvage");
    assert!(report.damage.is_empty() && report.gaps.is_empty(), "{report:?}");
    assert!(!report.store && report.recovery.is_none(), "raw records are not a store");
    assert_eq!(report.records_kept, 302);

    let names = |d: &std::path::Path| -> Vec<String> {
        segment_files(d).iter().map(|p| p.file_name().unwrap().to_string_lossy().into()).collect()
    };
    assert_eq!(names(&target), names(&dir));
    for (old, new) in segment_files(&dir).iter().zip(segment_files(&target)) {
        assert_eq!(std::fs::read(old).unwrap(), std::fs::read(&new).unwrap(), "{}", new.display());
    }
    assert!(!target.join("GAPS").exists());
}
