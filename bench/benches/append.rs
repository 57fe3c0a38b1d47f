//! Append benchmarks of issue 2 ("Performance"), each against a baseline measured in the same
//! run:
//! - `append/buffered_append_32b`: one thread, `Buffered` appends of 32 bytes (target: median
//!   <= 100 ns per record).
//! - `synced/synced_append_128b` against `synced/raw_floor_write_fdatasync_128b`, a raw
//!   `pwrite` of the same 152-byte frame plus `fdatasync` into a preallocated, synced file beside
//!   the log directory (target: <= 1.15x the floor).
//! - `group_commit/synced_append_8_threads` against `group_commit/synced_append_1_thread`:
//!   aggregate records/s of `Synced` 128-byte appends through one `Arc<Log>` (target: >= 5x).
//!
//! Every log lives in a directory on the real disk (`target/tmp`) and never rolls during a
//! measurement. Run with `cargo bench --bench append`.

use std::fs::File;
use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_main};
use factlog::engine::frame::frame_bytes;
use factlog::limits::{SEGMENT_BYTES_DEFAULT, SEGMENT_HEADER_BYTES};
use factlog::{Durability, Log, Options};
use tempfile::TempDir;

use factlog_bench::settle;

/// Segment capacity of the buffered log: room for about 19 million 32-byte records, more than
/// the warm-up and measurement append.
const BUFFERED_SEGMENT_BYTES: u64 = 1 << 30;

/// Payload of the buffered bench.
const BUFFERED_PAYLOAD_BYTES: usize = 32;

/// Payload of the synced benches; its frame is 152 bytes.
const SYNCED_PAYLOAD_BYTES: usize = 128;

/// Threads of the group-commit bench.
const GROUP_THREADS: u64 = 8;

/// Opens a fresh log in `dir` with `options` and waits for its preallocation to settle.
fn open_settled(dir: &Path, options: Options, segment_bytes: u64) -> Log {
    let log = Log::open(dir, options).expect("open the bench log");
    settle::wait_for_prealloc(dir, segment_bytes);
    log
}

/// Records of `payload_bytes` that fit in one segment of `segment_bytes`.
fn records_per_segment(segment_bytes: u64, payload_bytes: usize) -> u64 {
    (segment_bytes - SEGMENT_HEADER_BYTES as u64) / frame_bytes(payload_bytes) as u64
}

/// The log of the buffered bench and how many more records its segment holds. When a sample
/// would not fit, the log is replaced by a fresh one before the sample, outside the timing.
struct BufferedLog {
    log: Option<Log>,
    room: u64,
    dir: Option<TempDir>,
}

impl BufferedLog {
    fn new() -> BufferedLog {
        let mut log = BufferedLog { log: None, room: 0, dir: None };
        log.reopen();
        log
    }

    fn reopen(&mut self) {
        if let Some(log) = self.log.take() {
            log.close().expect("close the buffered log");
        }
        drop(self.dir.take());
        let dir = factlog_bench::temp_dir!("buffered");
        let options = Options::new().segment_bytes(BUFFERED_SEGMENT_BYTES);
        self.log = Some(open_settled(dir.path(), options, BUFFERED_SEGMENT_BYTES));
        self.room = records_per_segment(BUFFERED_SEGMENT_BYTES, BUFFERED_PAYLOAD_BYTES);
        self.dir = Some(dir);
    }

    /// The log, with room reserved for `records` more appends.
    fn reserve(&mut self, records: u64) -> &Log {
        if records > self.room {
            eprintln!("buffered_append_32b: the segment is nearly full, starting a fresh log");
            self.reopen();
        }
        assert!(records <= self.room, "one sample of {records} records exceeds a segment");
        self.room -= records;
        self.log.as_ref().expect("the buffered log is open")
    }
}

fn buffered(c: &mut Criterion) {
    let payload = [0x5a_u8; BUFFERED_PAYLOAD_BYTES];
    let mut state = BufferedLog::new();
    let mut group = c.benchmark_group("append");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(600))
        .throughput(Throughput::Elements(1));
    group.bench_function("buffered_append_32b", |b| {
        b.iter_custom(|iters| {
            let log = state.reserve(iters);
            let start = Instant::now();
            for _ in 0..iters {
                black_box(log.append(black_box(&payload), Durability::Buffered).expect("append"));
            }
            start.elapsed()
        });
    });
    group.finish();
    // Closing syncs the buffered records, so that their writeback is over before the synced
    // benches measure fdatasync latency.
    state.log.take().expect("the buffered log is open").close().expect("close");
}

/// The floor of a synced append: `pwrite` of one frame's bytes at increasing offsets plus
/// `fdatasync`, into a file preallocated with real zeros and synced, as factlog's segments are.
struct RawFloor {
    file: File,
    frame: Vec<u8>,
    offset: u64,
    capacity: u64,
}

impl RawFloor {
    fn new(path: &Path, capacity: u64, frame_len: usize) -> RawFloor {
        let file = settle::preallocated_file(path, capacity);
        let offset = SEGMENT_HEADER_BYTES as u64;
        RawFloor { file, frame: vec![0xa5; frame_len], offset, capacity }
    }

    fn write_sync(&mut self) {
        if self.offset + self.frame.len() as u64 > self.capacity {
            self.offset = SEGMENT_HEADER_BYTES as u64;
        }
        self.file.write_all_at(&self.frame, self.offset).expect("pwrite");
        self.file.sync_data().expect("fdatasync");
        self.offset += self.frame.len() as u64;
    }
}

fn synced(c: &mut Criterion) {
    // The log directory and the floor file sit side by side in one directory, on one disk.
    let dir = factlog_bench::temp_dir!("synced");
    let log_dir = dir.path().join("log");
    let log = open_settled(&log_dir, Options::new(), SEGMENT_BYTES_DEFAULT);
    let frame_len = frame_bytes(SYNCED_PAYLOAD_BYTES);
    assert_eq!(frame_len, 152, "24-byte header + 128-byte payload");
    let mut floor = RawFloor::new(&dir.path().join("floor.bin"), SEGMENT_BYTES_DEFAULT, frame_len);
    let payload = [0x3c_u8; SYNCED_PAYLOAD_BYTES];
    let mut group = c.benchmark_group("synced");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Elements(1));
    group.bench_function("raw_floor_write_fdatasync_128b", |b| b.iter(|| floor.write_sync()));
    group.bench_function("synced_append_128b", |b| {
        b.iter(|| log.append(black_box(&payload), Durability::Synced).expect("append"));
    });
    group.finish();
    // No records when a filter skipped the group.
    let last = log.last_seq().map_or(0, |seq| seq.0);
    assert!(
        last < records_per_segment(SEGMENT_BYTES_DEFAULT, SYNCED_PAYLOAD_BYTES),
        "the synced log rolled during the measurement"
    );
    log.close().expect("close the synced log");
}

/// Runs `threads` threads that each append `iters` synced records to `log`; returns the wall
/// time from their common start until the last one finished.
fn run_appenders(log: &Arc<Log>, threads: u64, iters: u64) -> Duration {
    let start_line = Arc::new(Barrier::new(threads as usize + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let log = Arc::clone(log);
            let start_line = Arc::clone(&start_line);
            std::thread::spawn(move || {
                let payload = [0x77_u8; SYNCED_PAYLOAD_BYTES];
                start_line.wait();
                for _ in 0..iters {
                    black_box(log.append(&payload, Durability::Synced).expect("append"));
                }
            })
        })
        .collect();
    start_line.wait();
    let start = Instant::now();
    for handle in handles {
        handle.join().expect("an appender panicked");
    }
    start.elapsed()
}

/// Segment capacity of the group-commit log: 8 threads append ~1.7 M records before it rolls.
const GROUP_SEGMENT_BYTES: u64 = 256 * 1024 * 1024;

fn group_commit(c: &mut Criterion) {
    let dir = factlog_bench::temp_dir!("group-commit");
    let options = Options::new().segment_bytes(GROUP_SEGMENT_BYTES);
    let log = Arc::new(open_settled(dir.path(), options, GROUP_SEGMENT_BYTES));
    let mut group = c.benchmark_group("group_commit");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    for (name, threads) in
        [("synced_append_1_thread", 1), ("synced_append_8_threads", GROUP_THREADS)]
    {
        // One iteration is one append on each thread, so elements/s is the aggregate rate.
        group.throughput(Throughput::Elements(threads));
        group.bench_function(name, |b| b.iter_custom(|iters| run_appenders(&log, threads, iters)));
    }
    group.finish();
    let last = log.last_seq().map_or(0, |seq| seq.0);
    assert!(
        last < records_per_segment(GROUP_SEGMENT_BYTES, SYNCED_PAYLOAD_BYTES),
        "the group-commit log rolled during the measurement"
    );
    Arc::into_inner(log).expect("the appenders are gone").close().expect("close");
}

/// The benches, in a private module: `criterion_group!` declares an undocumented `pub fn`.
mod suite {
    use super::{buffered, group_commit, synced};

    criterion::criterion_group!(benches, buffered, synced, group_commit);
}

criterion_main!(suite::benches);
