//! Proves that readers, which map a segment one window at a time
//! (`limits::READ_WINDOW_BYTES`), read every record exactly: frames that straddle a window
//! boundary, frames and batches larger than a window, across a roll, by owned and borrowed
//! reads and from a sequence number in the middle, on the real file system (real memory maps
//! of file ranges) and the simulated one.

use std::sync::Arc;

use factlog::fs::sim::SimFs;
use factlog::limits::READ_WINDOW_BYTES;
use factlog::{Durability, Log, Options, Seq};

fn records() -> Vec<Vec<u8>> {
    let sizes =
        [10usize, 1000, 70_000, 3 * READ_WINDOW_BYTES / 2, 5, 333_333, 2 * READ_WINDOW_BYTES];
    (0..120u64)
        .map(|i| {
            let len = sizes[(i as usize * 3) % sizes.len()] + i as usize;
            (0..len).map(|j| (i as usize * 31 + j / 7) as u8).collect()
        })
        .collect()
}

fn check(options: Options, dir: &std::path::Path) {
    let records = records();
    let log = Log::open(dir, options.clone()).unwrap();
    let mut i = 0;
    while i < records.len() {
        if i % 9 == 4 {
            log.append_batch(&records[i..i + 3], Durability::Buffered).unwrap();
            i += 3;
        } else {
            log.append(&records[i], Durability::Buffered).unwrap();
            i += 1;
        }
    }
    assert!(log.info().unwrap().segments.len() >= 2, "the log rolls");
    let read: Vec<Vec<u8>> =
        log.read_from(Seq(1)).unwrap().map(|r| r.unwrap().payload.to_vec()).collect();
    assert!(read == records, "owned reads");
    log.close().unwrap();
    let log = Log::open_read_only(dir, options).unwrap();
    let mut reader = log.read_from(Seq(50)).unwrap();
    let mut seq = 50;
    while let Some(record) = reader.next_ref() {
        let (at, bytes) = record.unwrap();
        assert_eq!(at, Seq(seq));
        assert!(bytes == &records[seq as usize - 1][..], "borrowed read of {seq}");
        seq += 1;
    }
    assert_eq!(seq as usize, records.len() + 1);
}

#[test]
fn windows_read_every_record_on_the_real_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    check(Options::new().segment_bytes(16 * 1024 * 1024), tmp.path());
}

#[test]
fn windows_read_every_record_on_the_simulated_file_system() {
    let fs = SimFs::new(3);
    let options = Options::new()
        .segment_bytes(16 * 1024 * 1024)
        .background_threads(false)
        .fs(Arc::new(fs.clone()));
    check(options, std::path::Path::new("/log"));
}
