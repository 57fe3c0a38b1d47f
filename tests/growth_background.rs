//! Proves that the background growth of segments (`format-spec/segment.md`, "Capacity and
//! growth") never writes its zeros over records: four threads append records of varied sizes
//! and tiers into segments of 256 KiB that grow in 16 KiB to 64 KiB steps on the preallocator
//! thread, racing it at every step and across rolls; every record then reads back byte for byte,
//! after a close and, on the simulated file system, after a power loss that keeps only synced
//! data (every acknowledged `Synced` record present, the rest an exact prefix). Run on the real
//! file system (where the steps are asserted only if it has more free space than the
//! preallocator's margin) and on `SimFs`; steps and the writer's waits are counted, not timed.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use factlog::fs::sim::{CrashModel, SimFs};
use factlog::fs::{Fs, RealFs};
use factlog::limits::prealloc_free_bytes_min;
use factlog::{Durability, Log, Options, Seq};

use crate::common::faulty_fs::FaultyFs;

const SEGMENT_BYTES: u64 = 256 * 1024;
const THREADS: usize = 4;
const PER_THREAD: usize = 1500;

fn record(thread: usize, i: usize) -> Vec<u8> {
    let len = 16 + (i * 97 + thread * 31) % 700;
    let mut bytes = format!("t{thread}:{i}:").into_bytes();
    bytes.extend((0..len).map(|j| (thread * 7 + i + j) as u8 | 1));
    bytes
}

/// Appends from four threads; returns the highest seq acknowledged as `Synced`.
fn append_concurrently(log: &Log) -> u64 {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|thread| {
                scope.spawn(move || {
                    let mut synced = 0;
                    for i in 0..PER_THREAD {
                        let durability = match i % 10 {
                            0 => Durability::Synced,
                            1..=3 => Durability::Flushed,
                            _ => Durability::Buffered,
                        };
                        let seq = log.append(&record(thread, i), durability).unwrap();
                        if durability == Durability::Synced {
                            synced = seq.0;
                        }
                    }
                    synced
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).max().unwrap_or(0)
    })
}

/// Every record read back is one of the appended ones, each thread's in order, none twice.
fn check(log: &Log) -> usize {
    let mut next = [0usize; THREADS];
    let mut count = 0;
    for read in log.read_from(Seq(1)).unwrap() {
        let read = read.unwrap();
        let text = String::from_utf8_lossy(&read.payload[..read.payload.len().min(16)]).to_string();
        let thread: usize =
            text[1..2].parse().unwrap_or_else(|_| panic!("seq {}: {text}", read.seq));
        assert_eq!(&read.payload[..], &record(thread, next[thread])[..], "seq {}", read.seq);
        next[thread] += 1;
        count += 1;
    }
    count
}

fn options() -> Options {
    Options::new().segment_bytes(SEGMENT_BYTES).buffer_bytes(16 * 1024)
}

#[test]
fn background_growth_never_overwrites_records_on_the_real_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let log = Log::open(tmp.path(), options()).unwrap();
    append_concurrently(&log);
    let stats = log.prealloc_stats();
    // The preallocator leaves a file system with less than its margin alone: then the
    // writer grows its files itself and there is no race to check, only the records.
    let space = RealFs.space(tmp.path()).unwrap();
    let margin = prealloc_free_bytes_min(SEGMENT_BYTES, space.total_bytes);
    if space.available_bytes > margin + SEGMENT_BYTES {
        assert!(stats.growth_steps >= 10, "{stats:?}");
    } else {
        println!("less free space than the margin: no growth steps to race ({stats:?})");
    }
    assert!(log.info().unwrap().segments.len() >= 3, "the log rolls");
    assert_eq!(check(&log), THREADS * PER_THREAD);
    log.close().unwrap();
    let log = Log::open(tmp.path(), options()).unwrap();
    assert_eq!(log.recovery_report().tail_cut, None);
    assert_eq!(check(&log), THREADS * PER_THREAD);
    println!("{stats:?}");
}

#[test]
fn background_growth_never_overwrites_records_on_the_simulated_file_system() {
    let fs = SimFs::new(9);
    let dir = Path::new("/log");
    let log = Log::open(dir, options().fs(Arc::new(fs.clone()))).unwrap();
    let synced = append_concurrently(&log);
    let stats = log.prealloc_stats();
    assert!(stats.growth_steps >= 10, "{stats:?}");
    // A power loss now keeps only what was synced: every acknowledged record, in order.
    let lost = fs.reboot(CrashModel::LoseUnsynced, 1);
    drop(log);
    let recovered = Log::open(dir, options().fs(Arc::new(lost))).unwrap();
    let count = check(&recovered);
    assert!(count as u64 >= synced, "{count} records, {synced} acknowledged as synced");
    recovered.close().unwrap();
    let log = Log::open(dir, options().fs(Arc::new(fs))).unwrap();
    assert_eq!(check(&log), THREADS * PER_THREAD);
}

/// A liveness bound, not a timing claim: what the tests below wait for happens at once unless
/// the engine is wrong.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits for `condition`, failing the test with `what` after [`PATIENCE`].
fn wait_until(condition: impl Fn() -> bool, what: &str) {
    let started = std::time::Instant::now();
    while !condition() {
        assert!(started.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A fresh directory on the real file system and a fault-injecting file system over it, or
/// `None` (said on standard output) when the file system has less free space than the
/// preallocator's margin: it then takes no growth steps, and there is none to stall or fail.
fn faulty_dir_with_room() -> Option<(tempfile::TempDir, FaultyFs)> {
    let tmp = tempfile::tempdir().unwrap();
    let space = RealFs.space(tmp.path()).unwrap();
    if space.available_bytes <= prealloc_free_bytes_min(SEGMENT_BYTES, space.total_bytes) * 2 {
        println!("less free space than the preallocator's margin: no growth steps to test");
        return None;
    }
    Some((tmp, FaultyFs::new()))
}

/// A writer that catches up with a growth step waits for the step's next chunk of zeros,
/// never for the step's `fdatasync` (`format-spec/segment.md`, "Capacity and growth", step 3):
/// with every sync of the growth stalled, appends go on into the zeros the step has written,
/// the step is counted only once its sync is released, and every record reads back.
#[test]
fn a_writer_never_waits_for_the_sync_of_a_growth_step() {
    let Some((tmp, fs)) = faulty_dir_with_room() else { return };
    let faults = Arc::clone(&fs.faults);
    // Every sync of the segment (`*.seg`) stalls from after the first, `Synced`, append on:
    // the growth's, on a handle of its own, and the writer's (its `Flushed` appends need none).
    *faults.hold_suffix.lock() = ".seg".to_owned();
    let log = Arc::new(Log::open(tmp.path(), options().fs(Arc::new(fs))).unwrap());
    // Growth starts once a caller waits for a sync, and that first waited sync asks for a
    // step at once: one `Synced` record, and its step done, before the stall.
    let mut records = vec![b"synced first".to_vec()];
    log.append(&records[0], Durability::Synced).unwrap();
    wait_until(|| log.prealloc_stats().growth_steps >= 1, "the first growth step");
    let steps = log.prealloc_stats().growth_steps;
    faults.hold_syncs.store(true, Ordering::SeqCst);
    // A failed assertion below must not leave the log's threads stalled in a sync forever.
    let _release = Release(Arc::clone(&faults));
    // The file now holds its 16 KiB first step and a second 16 KiB step; the writer asks for
    // the next 16 KiB step halfway through the second: 66 records of 600 bytes (about 40 KiB
    // of frames) go past the second step and stay within the third.
    records.extend((0..66u8).map(|i| vec![i | 1; 600]));
    let (done, appended) = std::sync::mpsc::channel();
    let appender = {
        let (log, records) = (Arc::clone(&log), records.clone());
        std::thread::spawn(move || {
            for record in &records[1..] {
                log.append(record, Durability::Flushed).unwrap();
            }
            done.send(()).unwrap();
        })
    };
    // A liveness bound, not a timing claim: a writer that waited for the stalled sync would
    // never get there.
    let finished = appended.recv_timeout(PATIENCE);
    assert!(finished.is_ok(), "the appends waited for the growth step's stalled fdatasync");
    appender.join().unwrap();
    wait_until(|| faults.held.load(Ordering::SeqCst) > 0, "a sync of the segment to stall");
    let file_bytes = log.info().unwrap().segments.last().unwrap().file_bytes;
    assert!(file_bytes >= 48 * 1024, "the third step's zeros were written: {file_bytes}");
    assert_eq!(log.prealloc_stats().growth_steps, steps, "a step is done only after its sync");
    faults.hold_syncs.store(false, Ordering::SeqCst);
    let log = Arc::into_inner(log).expect("the appender is gone");
    log.close().unwrap();
    let log = Log::open(tmp.path(), options()).unwrap();
    let read: Vec<Vec<u8>> =
        log.read_from(Seq(1)).unwrap().map(|r| r.unwrap().payload.to_vec()).collect();
    assert_eq!(read, records);
    log.close().unwrap();
}

/// Lets every held sync go when dropped, also when the test fails.
struct Release(Arc<crate::common::faulty_fs::Faults>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.hold_syncs.store(false, Ordering::SeqCst);
    }
}

/// A growth step whose `fdatasync` fails leaves its zeros unsynced and its error on the
/// growth's own handle; a clean close must then sync the segment on the writer's handle even
/// though every record is durable already (`format-spec/segment.md`, "Capacity and growth",
/// step 2), so the close vouches only for synced bytes, or reports the error.
#[test]
fn a_failed_growth_sync_is_synced_again_by_the_clean_close() {
    let Some((tmp, fs)) = faulty_dir_with_room() else { return };
    let faults = Arc::clone(&fs.faults);
    let log = Log::open(tmp.path(), options().fs(Arc::new(fs))).unwrap();
    let record = |i: u32| vec![(i % 250) as u8 | 1; 600];
    let mut i = 0;
    // Past the first roll, the writer's handle on the active segment is the one it opened as
    // `prealloc.tmp`; only the growth's handle has the segment's own name (`*.seg`).
    while log.info().unwrap().segments.len() < 2 {
        log.append(&record(i), Durability::Flushed).unwrap();
        i += 1;
    }
    *faults.fail_sync_suffix.lock() = ".seg".to_owned();
    faults.fail_sync.store(true, Ordering::SeqCst);
    // The first growth step of the new segment is asked for halfway through its first 16 KiB.
    for _ in 0..100 {
        log.append(&record(i), Durability::Synced).unwrap();
        i += 1;
    }
    wait_until(|| faults.failed_syncs.load(Ordering::SeqCst) > 0, "a growth step's sync to fail");
    log.append(&record(i), Durability::Synced).unwrap();
    i += 1;
    faults.synced_names.lock().clear();
    log.close().unwrap();
    let synced = faults.synced_names.lock().clone();
    assert!(
        synced.iter().any(|name| name == "prealloc.tmp"),
        "the close did not sync the segment on the writer's handle: {synced:?}"
    );
    let log = Log::open(tmp.path(), options()).unwrap();
    assert_eq!(log.read_from(Seq(1)).unwrap().count(), i as usize);
    log.close().unwrap();
}
