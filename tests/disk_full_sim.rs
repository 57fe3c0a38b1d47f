//! Proves, on the simulated file system with a limited capacity, that the preallocator never
//! takes the last free space: it preallocates only while the margin of
//! `limits::prealloc_free_bytes_min` stays free, gives up quietly when space is short (appends
//! go on, growing their segment), and preallocates again once space is back; that a full
//! disk is `DiskFull` and loses nothing acknowledged; and that a log or store whose creation
//! fails on a full disk leaves nothing behind.

use std::path::Path;
use std::sync::Arc;

use factlog::engine::segments::PREALLOC_FILE_NAME;
use factlog::fs::Fs;
use factlog::fs::sim::SimFs;
use factlog::limits::prealloc_free_bytes_min;
use factlog::{Durability, ErrorKind, Log, Options, Seq, Store, StoreOptions};

const SEGMENT_BYTES: u64 = 8192;
const MIB: u64 = 1024 * 1024;
const CAPACITY_BYTES: u64 = 80 * MIB;
const DIR: &str = "/data/log";
const FILLER: &str = "/filler";

fn options(fs: &SimFs) -> Options {
    Options::new().segment_bytes(SEGMENT_BYTES).background_threads(false).fs(Arc::new(fs.clone()))
}

fn margin() -> u64 {
    prealloc_free_bytes_min(SEGMENT_BYTES, CAPACITY_BYTES)
}

fn available(fs: &SimFs) -> u64 {
    fs.space(Path::new("/")).unwrap().available_bytes
}

/// Fills the disk with a file so that exactly `left` bytes stay free.
fn leave_free(fs: &SimFs, left: u64) {
    fs.write_file(Path::new(FILLER), &[]);
    let filler = CAPACITY_BYTES - fs.used_bytes() - left;
    fs.write_file(Path::new(FILLER), &vec![0u8; filler as usize]);
    assert_eq!(available(fs), left);
}

fn len_of(fs: &SimFs, path: &Path) -> Option<u64> {
    fs.read_file(path).map(|bytes| bytes.len() as u64)
}

fn active_segment_len(fs: &SimFs, log: &Log) -> u64 {
    let info = log.info().unwrap();
    len_of(fs, &info.segments.last().unwrap().path).unwrap()
}

/// Appends records of 1000 bytes until the log has rolled `rolls` more times.
fn append_through_rolls(log: &Log, rolls: usize, acked: &mut Vec<Seq>) {
    let target = log.info().unwrap().segments.len() + rolls;
    while log.info().unwrap().segments.len() < target {
        acked.push(log.append(&[7u8; 1000], Durability::Synced).unwrap());
    }
}

fn read_all(fs: &SimFs) -> Vec<Seq> {
    let log = Log::open_read_only(DIR, options(fs)).unwrap();
    log.read_from(Seq(1)).unwrap().map(|r| r.unwrap().seq).collect()
}

#[test]
fn the_preallocator_keeps_the_margin_gives_up_quietly_and_resumes_when_space_is_back() {
    let fs = SimFs::new(1);
    fs.set_capacity(Some(CAPACITY_BYTES));
    let prealloc = Path::new(DIR).join(PREALLOC_FILE_NAME);
    let log = Log::open(DIR, options(&fs)).unwrap();
    let mut acked = Vec::new();

    // Plenty of room: every new segment is preallocated to its full size.
    append_through_rolls(&log, 2, &mut acked);
    assert_eq!(active_segment_len(&fs, &log), SEGMENT_BYTES, "preallocated");
    assert!(available(&fs) >= margin());

    // Just less than a segment above the margin: the next roll gets an empty file, quietly.
    leave_free(&fs, margin() + SEGMENT_BYTES - 1);
    let before = available(&fs);
    append_through_rolls(&log, 3, &mut acked);
    assert!(active_segment_len(&fs, &log) < SEGMENT_BYTES, "not preallocated: it grows");
    assert!(len_of(&fs, &prealloc).is_none_or(|len| len == 0), "no file was reserved");
    let appended_bytes = 3 * SEGMENT_BYTES;
    assert!(before - available(&fs) <= appended_bytes, "only appended bytes used space");
    for segment in &log.info().unwrap().segments[3..] {
        assert!(segment.file_bytes <= SEGMENT_BYTES, "{segment:?}");
    }

    // Space is back: the next roll preallocates again, and the margin still stays free.
    fs.remove_file(Path::new(FILLER)).unwrap();
    append_through_rolls(&log, 2, &mut acked);
    assert_eq!(active_segment_len(&fs, &log), SEGMENT_BYTES, "preallocated again");
    assert!(available(&fs) >= margin());
    log.close().unwrap();
    assert_eq!(read_all(&fs), acked);
}

#[test]
fn a_full_disk_is_disk_full_loses_nothing_acknowledged_and_the_store_works_once_space_is_free() {
    let fs = SimFs::new(2);
    fs.set_capacity(Some(CAPACITY_BYTES));
    let log = Log::open(DIR, options(&fs)).unwrap();
    let mut acked = Vec::new();
    append_through_rolls(&log, 1, &mut acked);
    leave_free(&fs, 3000);
    let error = loop {
        match log.append(&[9u8; 1000], Durability::Synced) {
            Ok(seq) => acked.push(seq),
            Err(error) => break error,
        }
    };
    assert!(matches!(error.kind(), ErrorKind::DiskFull { .. }), "{error}");
    let error = log.append(b"later", Durability::Synced).unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::Poisoned { .. }), "{error}");
    drop(log);
    assert_eq!(read_all(&fs), acked, "every acknowledged record, nothing else");

    // Some space is freed, less than the margin: the store works and leaves it to others.
    leave_free(&fs, 4 * SEGMENT_BYTES);
    let log = Log::open(DIR, options(&fs)).unwrap();
    append_through_rolls(&log, 2, &mut acked);
    assert!(available(&fs) >= SEGMENT_BYTES, "no preallocation took the freed space");
    log.close().unwrap();
    assert_eq!(read_all(&fs), acked);
}

#[test]
fn a_log_or_store_whose_creation_fails_on_a_full_disk_leaves_nothing_behind() {
    let fs = SimFs::new(3);
    fs.set_capacity(Some(CAPACITY_BYTES));
    leave_free(&fs, 0);
    let files_before = fs.files();
    let error = Log::open("/a/b/log", options(&fs)).unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::DiskFull { .. }), "{error}");
    assert_eq!(fs.files(), files_before);
    assert!(fs.list_dir(Path::new("/a")).is_err(), "the created directories are removed");

    let store_options = StoreOptions::new().log(options(&fs));
    let error = Store::open("/store", store_options).unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::DiskFull { .. }), "{error}");
    assert_eq!(fs.files(), files_before);
    assert!(fs.list_dir(Path::new("/store")).is_err());

    // An existing empty directory stays, emptied of what the open put in it.
    fs.create_dir_all(Path::new("/empty")).unwrap();
    Log::open("/empty", options(&fs)).unwrap_err();
    assert_eq!(fs.list_dir(Path::new("/empty")).unwrap(), Vec::<String>::new());

    // Room for records but not for a preallocation: the log is created with a header-only
    // segment, which still takes records after a reopen, growing as they come.
    leave_free(&fs, 4 * SEGMENT_BYTES);
    Log::open("/short", options(&fs)).unwrap().close().unwrap();
    assert_eq!(len_of(&fs, &Path::new("/short").join("00000000000000000001.seg")), Some(64));
    let log = Log::open("/short", options(&fs)).unwrap();
    for _ in 0..20 {
        log.append(&[1u8; 1000], Durability::Synced).unwrap();
    }
    log.close().unwrap();

    // Once there is room the same open succeeds.
    fs.remove_file(Path::new(FILLER)).unwrap();
    let log = Log::open("/a/b/log", options(&fs)).unwrap();
    log.append(b"x", Durability::Synced).unwrap();
    log.close().unwrap();
}
