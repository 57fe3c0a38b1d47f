//! What a log pays for syncs nobody waits for (`format-spec/segment.md`, "Capacity and
//! growth"; `docs/durability.md`, `Buffered`): the growth writes zeros ahead of the writer only
//! once a caller has waited for an `fdatasync`, and the flusher, woken by a filling buffer,
//! writes it out without syncing until the flush delay is up, yet still syncs within it while
//! appends keep waking it. Counted, not timed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use factlog::engine::counting_fs::CountingFs;
use factlog::fs::sim::SimFs;
use factlog::{Durability, Log, Options, Seq};

const SEGMENT_BYTES: u64 = 256 * 1024;

/// A liveness bound, not a timing claim: what the tests below wait for happens at once unless
/// the engine is wrong.
const PATIENCE: Duration = Duration::from_secs(120);

fn record(i: usize) -> Vec<u8> {
    let mut bytes = format!("record {i}:").into_bytes();
    bytes.resize(600, (i % 250) as u8 | 1);
    bytes
}

fn read_all(log: &Log) -> Vec<Vec<u8>> {
    log.read_from(Seq(1)).unwrap().map(|r| r.unwrap().payload.to_vec()).collect()
}

/// Without a sync waited for, the writes extend the segment past its first step and no step
/// of zeros is written; the first `Synced` append starts the growth, and every record reads
/// back in order, before and after a reopen.
#[test]
fn a_log_nobody_syncs_grows_no_zeros_until_somebody_waits_for_a_sync() {
    let fs = SimFs::new(7);
    let options = || {
        Options::new()
            .segment_bytes(SEGMENT_BYTES)
            .buffer_bytes(16 * 1024)
            .background_threads(false)
            .fs(Arc::new(fs.clone()))
    };
    let log = Log::open("/store", options()).unwrap();
    let mut records = Vec::new();
    // About 120 KiB of frames: far past the 16 KiB first step of a 256 KiB segment.
    for i in 0..200 {
        records.push(record(i));
        let tier = if i % 2 == 0 { Durability::Buffered } else { Durability::Flushed };
        log.append(records.last().unwrap(), tier).unwrap();
    }
    log.flush(Durability::Flushed).unwrap();
    let stats = log.prealloc_stats();
    assert_eq!((stats.growth_steps, stats.growth_bytes), (0, 0), "no zeros without a sync");
    let file_bytes = log.info().unwrap().segments.last().unwrap().file_bytes;
    assert!(file_bytes > 100 * 1024, "the writes extended the file: {file_bytes}");

    records.push(b"a synced record".to_vec());
    log.append(records.last().unwrap(), Durability::Synced).unwrap();
    for i in 200..400 {
        records.push(record(i));
        log.append(records.last().unwrap(), Durability::Flushed).unwrap();
    }
    log.flush(Durability::Synced).unwrap();
    let stats = log.prealloc_stats();
    assert!(stats.growth_steps > 0, "a waited sync starts the growth: {stats:?}");
    assert_eq!(read_all(&log), records);
    log.close().unwrap();

    let log = Log::open("/store", options()).unwrap();
    assert_eq!(read_all(&log), records);
    log.close().unwrap();
}

/// A burst of `Buffered` records many buffers long is written out by the flusher a quarter
/// buffer at a time without a sync for each (the flush delay here is far longer than the
/// burst), and is synced once the delay is up: by the timer after the burst, and while appends
/// keep waking the flusher.
#[test]
fn a_buffered_burst_is_written_out_without_a_sync_per_quarter_buffer_and_synced_within_the_delay() {
    let tmp = tempfile::tempdir().unwrap();
    let (fs, counters) = CountingFs::new();
    let options = Options::new().buffer_bytes(64 * 1024).flush_delay(Duration::from_secs(10));
    let log = Log::open(tmp.path().join("long-delay"), options.fs(fs)).unwrap();
    let before = counters.read();
    // 2 MiB of frames: 128 quarters of the 64 KiB buffer.
    for i in 0..3500 {
        log.append(&record(i), Durability::Buffered).unwrap();
    }
    let started = Instant::now();
    while counters.read().since(&before).record_write_bytes() < 1024 * 1024 {
        assert!(started.elapsed() < PATIENCE, "the flusher never wrote the buffers out");
        std::thread::sleep(Duration::from_millis(1));
    }
    let counts = counters.read().since(&before);
    // At most a couple, if the machine stalled for the whole 10 s delay; one per quarter (about
    // 30 by now) before the flusher stopped syncing what nobody waited for.
    assert!(counts.record_syncs() <= 2, "{} syncs for a buffered burst", counts.record_syncs());
    log.close().unwrap();

    // One segment of 1 GiB, so that no roll (whose seal syncs) makes anything durable.
    let options = Options::new()
        .buffer_bytes(64 * 1024)
        .flush_delay(Duration::from_millis(20))
        .segment_bytes(1 << 30);
    let log = Log::open(tmp.path().join("short-delay"), options).unwrap();
    // Appends that keep waking the flusher: it still syncs once the delay is up. Bounded by
    // PATIENCE and by 256 MiB, whichever comes first.
    let started = Instant::now();
    let mut appended = 0usize;
    while log.durable_seq().is_none() {
        assert!(
            started.elapsed() < PATIENCE && appended < 256 * 1024 * 1024,
            "nothing became durable while appends kept waking the flusher"
        );
        log.append(&record(appended), Durability::Buffered).unwrap();
        appended += 600;
    }
    // Then the timer alone: the last record becomes durable without another append.
    let last = log.append(b"the last", Durability::Buffered).unwrap();
    while log.durable_seq() < Some(last) {
        assert!(started.elapsed() < PATIENCE, "the flush delay passed without a sync");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(log.info().unwrap().segments.len(), 1, "no roll synced it");
    log.close().unwrap();
}

/// A `Buffered` record appended while the flusher waits only for the log mark to be due
/// (here a minute after a sync) is synced within the flush delay, not when the mark is due:
/// the append wakes the flusher. The bound is half the mark interval: a liveness bound far
/// above the 20 ms delay.
#[test]
fn a_buffered_record_appended_while_the_flusher_waits_for_the_mark_is_synced_within_the_delay() {
    let tmp = tempfile::tempdir().unwrap();
    let options = Options::new()
        .flush_delay(Duration::from_millis(20))
        .mark_interval(Duration::from_secs(60))
        .segment_bytes(1 << 30);
    let log = Log::open(tmp.path(), options).unwrap();
    // A synced record: durable, and the mark now lags it until the interval is up.
    log.append(b"synced", Durability::Synced).unwrap();
    // Let the flusher settle into its wait for the mark.
    std::thread::sleep(Duration::from_millis(50));
    let last = log.append(b"buffered", Durability::Buffered).unwrap();
    let started = Instant::now();
    while log.durable_seq() < Some(last) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "a buffered record waited for the mark's interval, not the flush delay"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    log.close().unwrap();
}
