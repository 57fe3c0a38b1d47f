//! Read-side benchmarks of issue 2 ("Performance"):
//! - `replay/replay_32b` and `replay/replay_32b_records`: one pass of `Log::read_from(Seq(1))`
//!   over 3 million 32-byte records, CRC checked, page cache warm; reported as payload bytes/s
//!   (target >= 1 GB/s) and records/s (target >= 10 M/s); `replay/replay_32b_borrowed` is the
//!   same pass through `Reader::next_ref`, which borrows payloads instead of sharing them.
//! - `open/open_1gib_sealed` against `open/open_one_segment`: `Log::open` + `close` of a log
//!   holding more than 1 GiB of sealed segments and of a log holding one segment filled like
//!   the first one's active segment (target: within 2x).
//!
//! The logs live in directories on the real disk (`target/tmp`), removed at the end. Run with
//! `cargo bench --bench replay`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_main};
use factlog::engine::frame::frame_bytes;
use factlog::limits::{SEGMENT_BYTES_DEFAULT, SEGMENT_HEADER_BYTES};
use factlog::{Durability, Log, Options, Seq};

/// Records of the replay log.
const REPLAY_RECORDS: u64 = 3_000_000;

/// Payload of each replayed record.
const REPLAY_PAYLOAD_BYTES: usize = 32;

/// Payload of the records that fill the logs of the open bench.
const BIG_RECORD_BYTES: usize = 64 * 1024;

/// Sealed segments of the large log: 33 x 32 MiB, a little over 1 GiB.
const SEALED_SEGMENTS: u64 = 33;

/// Reads every record of `log` from seq 1, touching each payload; returns (records, bytes).
fn replay_all(log: &Log) -> (u64, u64) {
    let mut records = 0u64;
    let mut bytes = 0u64;
    for record in log.read_from(Seq(1)).expect("read_from") {
        let record = record.expect("a valid record");
        records += 1;
        bytes += black_box(record.payload.len()) as u64;
    }
    (records, bytes)
}

/// The same pass through [`factlog::Reader::next_ref`], which borrows each payload from the
/// memory map instead of sharing it (no reference count per record).
fn replay_all_borrowed(log: &Log) -> (u64, u64) {
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut reader = log.read_from(Seq(1)).expect("read_from");
    while let Some(record) = reader.next_ref() {
        let (_, payload) = record.expect("a valid record");
        records += 1;
        bytes += black_box(payload.len()) as u64;
    }
    (records, bytes)
}

fn replay(c: &mut Criterion) {
    let dir = factlog_bench::temp_dir!("replay");
    let started = Instant::now();
    {
        let log = Log::open(dir.path(), Options::new()).expect("open the replay log");
        let mut payload = [0u8; REPLAY_PAYLOAD_BYTES];
        for i in 0..REPLAY_RECORDS {
            payload[..8].copy_from_slice(&i.to_le_bytes());
            payload[8..16].copy_from_slice(&(!i).to_le_bytes());
            log.append(&payload, Durability::Buffered).expect("append");
        }
        log.close().expect("close the replay log");
    }
    eprintln!("replay: wrote {REPLAY_RECORDS} records in {:?}", started.elapsed());
    let log = Log::open_read_only(dir.path(), Options::new()).expect("open read-only");
    // The first pass also warms the page cache.
    let expected = (REPLAY_RECORDS, REPLAY_RECORDS * REPLAY_PAYLOAD_BYTES as u64);
    assert_eq!(replay_all(&log), expected);

    let mut group = c.benchmark_group("replay");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::BytesDecimal(expected.1));
    group.bench_function("replay_32b", |b| b.iter(|| assert_eq!(replay_all(&log), expected)));
    group.bench_function("replay_32b_borrowed", |b| {
        b.iter(|| assert_eq!(replay_all_borrowed(&log), expected));
    });
    group.throughput(Throughput::Elements(expected.0));
    group.bench_function("replay_32b_records", |b| {
        b.iter(|| assert_eq!(replay_all(&log), expected));
    });
    group.finish();
}

/// Appends `records` records of [`BIG_RECORD_BYTES`] to a new log in `dir` and closes it.
fn fill(dir: &Path, records: u64) {
    let log = Log::open(dir, Options::new()).expect("open the log to fill");
    let mut payload = vec![0u8; BIG_RECORD_BYTES];
    for i in 0..records {
        payload[..8].copy_from_slice(&i.to_le_bytes());
        log.append(&payload, Durability::Buffered).expect("append");
    }
    log.close().expect("close the filled log");
}

/// Opens the log in `dir` as the bench does and returns (segments, records scanned at open).
fn shape(dir: &Path) -> (usize, u64) {
    let log = Log::open(dir, Options::new().background_threads(false)).expect("open");
    let report = log.recovery_report();
    let shape = (report.segments, report.records_scanned);
    log.close().expect("close");
    shape
}

fn open(c: &mut Criterion) {
    let per_segment = (SEGMENT_BYTES_DEFAULT - SEGMENT_HEADER_BYTES as u64)
        / frame_bytes(BIG_RECORD_BYTES) as u64;
    // The active segment is half full in both logs, so both opens scan the same bytes.
    let active_records = per_segment / 2;
    let big = factlog_bench::temp_dir!("open-big");
    let one = factlog_bench::temp_dir!("open-one");
    let started = Instant::now();
    fill(big.path(), SEALED_SEGMENTS * per_segment + active_records);
    fill(one.path(), active_records);
    eprintln!(
        "open: wrote {} segments of {SEGMENT_BYTES_DEFAULT} bytes in {:?}",
        SEALED_SEGMENTS + 2,
        started.elapsed()
    );
    assert_eq!(shape(big.path()), (SEALED_SEGMENTS as usize + 1, active_records));
    assert_eq!(shape(one.path()), (1, active_records));

    let mut group = c.benchmark_group("open");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for (name, dir) in [("open_1gib_sealed", big.path()), ("open_one_segment", one.path())] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let log = Log::open(dir, Options::new().background_threads(false)).expect("open");
                black_box(log.recovery_report().records_scanned);
                log.close().expect("close");
            });
        });
    }
    group.finish();
}

/// The benches, in a private module: `criterion_group!` declares an undocumented `pub fn`.
mod suite {
    use super::{open, replay};

    criterion::criterion_group!(benches, replay, open);
}

criterion_main!(suite::benches);
