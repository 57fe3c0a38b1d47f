//! Benchmarks of issue 4 (the harness API on top of the log), each against a baseline measured
//! in the same run.
//!
//! - `harness_delta`: one thread streaming `assistant/delta`s, `Buffered`, with the store's
//!   flusher running as by default. `typed_delta_24b` is `Task::delta` of a 24-byte fragment
//!   (a 57-byte record: 24-byte envelope, 9-byte task id, text; an 88-byte frame);
//!   `raw_log_append_57b` is `Log::append(record, Buffered)` of the same encoded record, so
//!   `typed / raw` is the typed API's overhead; `system_clock_now` is the `SystemTime::now()`
//!   that stamps every typed event and that the raw append does not pay. Time per element is
//!   time per token (target: typed <= 150 ns). Each log has a 512 MiB segment, settled
//!   before it is measured, and is replaced outside the timing before a sample that would not
//!   fit, so no measurement includes a roll or the writing of a new segment's zeros.
//! - `harness_session`: one whole agent session of `/work/shared/mission/workload.md` (50
//!   turns x 4 steps x 200 deltas, 40,950 events, text from a fixed seed, fixed store clock)
//!   through the typed API into a fresh store with default options, on the real disk. One
//!   element is one session: per token is the median / 40,000.
//!   - `typed_step_batch`: each step's `tool/result` and `step/end` are appended as one atomic
//!     batch (`Task::append_batch_with`), the natural way for a harness to close a step: the
//!     450 `fdatasync`s the workload asks for. The headline figure.
//!   - `typed_defaults`: every event appended alone with its default durability; `step/end`
//!     is `Synced` by default, so 650 `fdatasync`s.
//!   - `raw_log_step_batch`: the frames of a `typed_step_batch` run replayed through
//!     `Log::append` / `Log::append_batch`, each with the durability its strongest event asks
//!     for: the same bytes and syncs without the typed layer, so `typed_step_batch /
//!     raw_log_step_batch` is the typed layer's share and `raw_log_step_batch / floor` the
//!     log's.
//!   - `floor_450_write_fdatasync` and `floor_650_write_fdatasync`: the physical floor, 450
//!     (650) `pwrite`+`fdatasync` pairs of exactly the frames the store wrote (read back from
//!     a reference run's segment), at the same offsets, into a file preallocated with zeros
//!     and synced, cut after each frame holding a synced event.
//!
//!   Each store iteration also runs its floor (450 with batched steps, 650 by default) on the
//!   same disk just before or after it, alternately; the bench prints the paired medians, the
//!   median of the per-session ratios, and the `fdatasync`s counted through a counting file
//!   system (split into those of the appending thread and of the background flusher), and
//!   writes them to `target/criterion/harness-stats/<bench>.json`. The store's set-up (its
//!   32 MiB segment, the next segment's preallocation) is outside the timing.
//! - `harness_open`: `Store::open` (background threads off, so only the open itself is timed)
//!   of a store of 5 sessions (204,750 events: 200,000 deltas, 2,250 critical events), a
//!   snapshot of it (`Store::checkpoint`), and K = 1k, 10k, 100k more events after the
//!   snapshot (`snapshot_plus_*`); against `full_replay_*`, the same logs with the snapshot
//!   removed, and `log_only_*`, `Log::open` of the same directories (the log's own scan of its
//!   active segment, which every store open pays). The `big_*` store holds 1,603,800 events
//!   (four sessions of 2,000 deltas a step) in five segments before its snapshot and 1k after
//!   it: its open should cost about what `snapshot_plus_1k` costs, whatever the log's length.
//!   All in one 32 MiB segment but the big store; page cache warm. The claim holds if
//!   `snapshot_plus_1k` is far below `full_replay_206k`, grows with K, and
//!   `big_snapshot_plus_1k` is far below `big_full_replay_1605k`.
//!
//! Run with `cargo bench --bench harness` (about a minute and a half; one group with e.g.
//! `cargo bench --bench harness -- harness_session`), then `python3 benches/medians.py` for
//! the medians and ratios (`--record FILE` after each of several runs, `--summary FILE` for
//! the medians over them). Smoke test: `cargo bench --bench harness -- --test`.

use std::collections::BTreeMap;
use std::fs::File;
use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, SamplingMode, Throughput, criterion_main};
use factlog::engine::frame::{self, Decoded};
use factlog::harness::{EventType, codec};
use factlog::limits::{SEGMENT_BYTES_DEFAULT, SEGMENT_HEADER_BYTES};
use factlog::{Durability, Log, Options, Seq, Store, StoreOptions, Task};
use serde_json::json;
use tempfile::TempDir;

use factlog::engine::counting_fs::{CountingFs, FileKind, FsCounts, Issuer};
use workload::{DELTA_TEXT_BYTES, Shape, StepClose};

use factlog_bench::settle;
use factlog_bench::workload;

/// The task of the delta and session benches: 9 bytes, repeated in every record.
const TASK_ID: &str = "session-0";

/// Segment capacity of the delta benches: room for about 6.1 million 88-byte frames, more than
/// a warm-up and a measurement append at 100 ns a token.
const DELTA_SEGMENT_BYTES: u64 = 512 * 1024 * 1024;

/// Distinct delta fragments the delta benches cycle through (a power of two).
const DELTA_FRAGMENTS: usize = 1024;

/// Seed of the session text.
const SESSION_SEED: u64 = 4;

/// Size of the floor's preallocated file: more than one session's frames.
const FLOOR_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Sessions in the store of the open bench before its snapshot.
const OPEN_BASE_SESSIONS: u64 = 5;

/// Events appended after the snapshot in the open bench.
const OPEN_EXTRA_EVENTS: [u64; 3] = [1_000, 10_000, 100_000];

/// The sessions of the big store of the open bench: 10x the deltas, 400,950 events each.
const OPEN_BIG_SHAPE: Shape = Shape { turns: 50, steps: 4, tokens: 2_000, ..Shape::DEFAULT };

/// Sessions in the big store: 1,603,800 events, about 141 MB of frames in five segments.
const OPEN_BIG_SESSIONS: u64 = 4;

// ---------------------------------------------------------------------------------------------
// harness_delta

/// Bytes of the record of one delta of [`TASK_ID`].
fn delta_record_bytes() -> usize {
    codec::record_bytes(TASK_ID, DELTA_TEXT_BYTES)
}

/// A log (or store) in a fresh directory, with the number of delta records its segment still
/// holds. Before a sample that would not fit, it is replaced by a fresh one, outside the timing.
struct Roomy<T> {
    name: &'static str,
    open: fn(&Path) -> T,
    close: fn(T),
    open_now: Option<(T, TempDir)>,
    room: u64,
}

impl<T> Roomy<T> {
    fn new(name: &'static str, open: fn(&Path) -> T, close: fn(T)) -> Roomy<T> {
        Roomy { name, open, close, open_now: None, room: 0 }
    }

    /// The log, with room reserved for `records` more delta records.
    fn reserve(&mut self, records: u64) -> &T {
        if self.open_now.is_none() || records > self.room {
            if self.open_now.is_some() {
                eprintln!("{}: the segment is nearly full, starting a fresh log", self.name);
            }
            self.finish();
            let dir = factlog_bench::temp_dir!(self.name);
            let log = (self.open)(dir.path());
            settle::wait_for_prealloc(dir.path(), DELTA_SEGMENT_BYTES);
            self.room = (DELTA_SEGMENT_BYTES - SEGMENT_HEADER_BYTES as u64)
                / frame::frame_bytes(delta_record_bytes()) as u64;
            self.open_now = Some((log, dir));
        }
        assert!(
            records <= self.room,
            "{}: one sample of {records} records exceeds a segment",
            self.name
        );
        self.room -= records;
        &self.open_now.as_ref().expect("open").0
    }

    /// Closes the log (syncing what it buffered) and removes its directory.
    fn finish(&mut self) {
        if let Some((log, dir)) = self.open_now.take() {
            (self.close)(log);
            drop(dir);
        }
    }
}

fn open_delta_log(dir: &Path) -> Log {
    Log::open(dir, Options::new().segment_bytes(DELTA_SEGMENT_BYTES)).expect("open the raw log")
}

fn open_delta_store(dir: &Path) -> (Store, Task) {
    let options = StoreOptions::new().log(Options::new().segment_bytes(DELTA_SEGMENT_BYTES));
    let store = Store::open(dir, options).expect("open the delta store");
    let task = store.task(TASK_ID).expect("task");
    (store, task)
}

fn close_delta_store((store, task): (Store, Task)) {
    drop(task);
    store.close().expect("close the delta store");
}

fn delta(c: &mut Criterion) {
    let mut text = workload::Text::new(SESSION_SEED);
    let fragments: Vec<String> =
        (0..DELTA_FRAGMENTS).map(|_| text.words(DELTA_TEXT_BYTES)).collect();
    // The raw bench appends the very records the typed one encodes (revision and time aside).
    let records: Vec<Vec<u8>> = fragments
        .iter()
        .enumerate()
        .map(|(i, fragment)| {
            let mut record = vec![0; delta_record_bytes()];
            codec::write_delta(
                &mut record,
                TASK_ID,
                i as u64 + 1,
                workload::FIXED_CLOCK_US,
                fragment,
            );
            record
        })
        .collect();
    let mask = DELTA_FRAGMENTS - 1;
    let mut raw = Roomy::new("delta-raw", open_delta_log, |log| log.close().expect("close"));
    let mut typed = Roomy::new("delta-typed", open_delta_store, close_delta_store);
    let mut group = c.benchmark_group("harness_delta");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(600))
        .throughput(Throughput::Elements(1));
    // Each log is opened before its first `iter_custom`: criterion's warm-up counts the wall
    // time of those calls, and a log's set-up in it would leave samples of a few records only.
    group.bench_function("raw_log_append_57b", |b| {
        raw.reserve(0);
        b.iter_custom(|iters| {
            let log = raw.reserve(iters);
            let start = Instant::now();
            for i in 0..iters as usize {
                let record = &records[i & mask];
                black_box(log.append(black_box(record), Durability::Buffered).expect("append"));
            }
            start.elapsed()
        });
    });
    // Closing syncs the buffered records, so their writeback is over before the next bench.
    raw.finish();
    group.bench_function("typed_delta_24b", |b| {
        typed.reserve(0);
        b.iter_custom(|iters| {
            let (_, task) = typed.reserve(iters);
            let start = Instant::now();
            for i in 0..iters as usize {
                black_box(task.delta(black_box(&fragments[i & mask])).expect("delta"));
            }
            start.elapsed()
        });
    });
    typed.finish();
    group.bench_function("system_clock_now", |b| b.iter(|| black_box(SystemTime::now())));
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// harness_session

/// One `pwrite` of the floor, followed by an `fdatasync`.
struct Chunk {
    offset: u64,
    bytes: Vec<u8>,
}

/// One frame a store wrote: its records and the durability its strongest event asks for.
struct FrameRecords {
    records: Vec<Vec<u8>>,
    durability: Durability,
}

/// The bytes a store wrote for one session, cut where it synced.
struct Reference {
    chunks: Vec<Chunk>,
    frames: Vec<FrameRecords>,
    /// Frame bytes of the session: the segment's data after its header.
    data_bytes: u64,
    /// Records and record bytes by event type name.
    records: BTreeMap<&'static str, (u64, u64)>,
}

/// Reads the one segment of the store in `dir` and cuts its frames after each frame that
/// holds an event synced by default.
fn reference_of(dir: &Path) -> Reference {
    let segments: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list the store")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "seg"))
        .collect();
    assert_eq!(segments.len(), 1, "the session fits in one segment");
    let bytes = std::fs::read(&segments[0]).expect("read the segment");
    let header =
        factlog::engine::segment::decode_header(&bytes, &segments[0]).expect("segment header");
    let salt_crc = header.salt_crc();
    let mut chunks = Vec::new();
    let mut frames = Vec::new();
    let mut records = BTreeMap::new();
    let mut start = SEGMENT_HEADER_BYTES;
    let mut offset = start;
    loop {
        match frame::decode(&bytes, offset, salt_crc) {
            Decoded::Frame(f) => {
                let mut durability = Durability::Buffered;
                for (i, record) in f.records().enumerate() {
                    let envelope = codec::peek(Seq(f.seq + i as u64), record).expect("an event");
                    let event_type = EventType::from_tag(envelope.tag).expect("a known type");
                    durability = durability.max(event_type.default_durability());
                    let entry = records.entry(event_type.name()).or_insert((0, 0));
                    *entry = (entry.0 + 1, entry.1 + record.len() as u64);
                }
                let frame_records = f.records().map(<[u8]>::to_vec).collect();
                frames.push(FrameRecords { records: frame_records, durability });
                offset += f.frame_bytes;
                if durability == Durability::Synced {
                    let bytes = bytes[start..offset].to_vec();
                    chunks.push(Chunk { offset: start as u64, bytes });
                    start = offset;
                }
            }
            Decoded::End => break,
            Decoded::Invalid(fault) => panic!("the reference segment has a bad frame: {fault:?}"),
        }
    }
    assert_eq!(start, offset, "the session ends with a synced event");
    Reference { chunks, frames, data_bytes: (offset - SEGMENT_HEADER_BYTES) as u64, records }
}

/// Writes and syncs `chunks` into `file`; returns the time taken.
fn floor_session(file: &File, chunks: &[Chunk]) -> Duration {
    let start = Instant::now();
    for chunk in chunks {
        file.write_all_at(&chunk.bytes, chunk.offset).expect("pwrite");
        file.sync_data().expect("fdatasync");
    }
    start.elapsed()
}

/// What writes a session.
#[derive(Clone, Copy)]
enum Writer<'a> {
    /// The typed API, closing steps as given.
    Typed(StepClose),
    /// `Log::append` (`append_batch` for a batch frame) of a reference run's records, each
    /// frame with the durability its strongest event asks for: the same frames and syncs
    /// without the typed layer.
    RawLog(&'a Reference),
}

/// One timed session.
struct SessionRun {
    elapsed: Duration,
    counts: FsCounts,
    dir: TempDir,
}

/// Writes one session into a fresh store (or log) with default options and a counting file
/// system; only the session itself is timed.
fn session_run(writer: Writer<'_>) -> SessionRun {
    let dir = factlog_bench::temp_dir!("session");
    let (fs, counters) = CountingFs::new();
    let log_options = Options::new().fs(fs);
    let (elapsed, counts) = match writer {
        Writer::Typed(close) => {
            let options = StoreOptions::new().clock(workload::fixed_clock).log(log_options);
            let store = Store::open(dir.path(), options).expect("open the session store");
            settle::wait_for_prealloc(dir.path(), SEGMENT_BYTES_DEFAULT);
            let task = store.task(TASK_ID).expect("task");
            let session = workload::session(Shape::DEFAULT, SESSION_SEED);
            let before = counters.read();
            let start = Instant::now();
            workload::run(&task, session, close);
            let elapsed = start.elapsed();
            let after = counters.read();
            drop(task);
            store.close().expect("close the session store");
            (elapsed, after.since(&before))
        }
        Writer::RawLog(reference) => {
            let log = Log::open(dir.path(), log_options).expect("open the session log");
            settle::wait_for_prealloc(dir.path(), SEGMENT_BYTES_DEFAULT);
            let before = counters.read();
            let start = Instant::now();
            for frame in &reference.frames {
                if let [record] = frame.records.as_slice() {
                    log.append(record, frame.durability).expect("append");
                } else {
                    log.append_batch(&frame.records, frame.durability).expect("append a batch");
                }
            }
            let elapsed = start.elapsed();
            let after = counters.read();
            log.close().expect("close the session log");
            (elapsed, after.since(&before))
        }
    };
    SessionRun { elapsed, counts, dir }
}

/// What the session benches share: the floor file and the reference runs.
struct SessionSetup {
    floor_file: File,
    batch: Reference,
    defaults: Reference,
    _dir: TempDir,
}

impl SessionSetup {
    fn new() -> SessionSetup {
        let batch = reference_of(session_run(Writer::Typed(StepClose::Batch)).dir.path());
        let defaults = reference_of(session_run(Writer::Typed(StepClose::Separate)).dir.path());
        let turns = u64::from(Shape::DEFAULT.turns);
        assert_eq!(
            batch.chunks.len() as u64,
            Shape::DEFAULT.critical_events(),
            "450 synced frames with batched steps: one per critical event"
        );
        assert_eq!(defaults.chunks.len() as u64, turns * 13, "650 synced frames by default");
        assert!(batch.data_bytes.max(defaults.data_bytes) < FLOOR_FILE_BYTES - 4096);
        eprintln!(
            "harness_session: one session is {} frame bytes with batched steps, {} by default",
            batch.data_bytes, defaults.data_bytes
        );
        for (name, (count, bytes)) in &defaults.records {
            eprintln!(
                "harness_session:   {count:>6} x {name}, {} record bytes each",
                bytes / count
            );
        }
        let dir = factlog_bench::temp_dir!("session-floor");
        let floor_file = settle::preallocated_file(&dir.path().join("floor.bin"), FLOOR_FILE_BYTES);
        SessionSetup { floor_file, batch, defaults, _dir: dir }
    }

    fn reference(&self, close: StepClose) -> &Reference {
        match close {
            StepClose::Batch => &self.batch,
            StepClose::Separate => &self.defaults,
        }
    }
}

/// One session through the store and the floor run beside it.
struct Paired {
    store: Duration,
    floor: Duration,
    counts: FsCounts,
}

fn median(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty(), "a median of nothing");
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 }
}

/// Prints and saves the paired figures of one bench.
fn report_pairs(name: &str, floor_name: &str, pairs: &[Paired], reference: &Reference) {
    if pairs.is_empty() {
        return;
    }
    let shape = Shape::DEFAULT;
    let deltas = shape.deltas() as f64;
    let turns = f64::from(shape.turns);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let store_ms = median(pairs.iter().map(|p| ms(p.store)).collect());
    let floor_ms = median(pairs.iter().map(|p| ms(p.floor)).collect());
    let ratio =
        median(pairs.iter().map(|p| p.store.as_secs_f64() / p.floor.as_secs_f64()).collect());
    let by = |f: fn(&FsCounts) -> u64| median(pairs.iter().map(|p| f(&p.counts) as f64).collect());
    let appender_syncs = by(|c| c.syncs(FileKind::Segment, Issuer::Appender));
    let flusher_syncs = by(|c| c.syncs(FileKind::Segment, Issuer::Flusher));
    let syncs = by(FsCounts::segment_syncs);
    let writes = by(FsCounts::segment_writes);
    let written = by(FsCounts::segment_write_bytes);
    assert_eq!(written, reference.data_bytes as f64, "{name}: every run writes the same frames");
    eprintln!(
        "{name}: {n} sessions, paired with {floor_name}: median {store_ms:.1} ms vs floor \
         {floor_ms:.1} ms, median ratio {ratio:.3}; {ns:.0} ns/token; {bpt:.1} bytes/token; \
         fdatasyncs/session {syncs} ({appender_syncs} by the appender, {flusher_syncs} by the \
         flusher) = {per_turn:.2}/turn; {writes} writes",
        n = pairs.len(),
        ns = store_ms * 1e6 / deltas,
        bpt = written / deltas,
        per_turn = syncs / turns,
    );
    let stats = json!({
        "bench": format!("harness_session/{name}"),
        "paired_with": format!("harness_session/{floor_name}"),
        "sessions": pairs.len(),
        "store_ms": pairs.iter().map(|p| ms(p.store)).collect::<Vec<_>>(),
        "floor_ms": pairs.iter().map(|p| ms(p.floor)).collect::<Vec<_>>(),
        "median_store_ms": store_ms,
        "median_floor_ms": floor_ms,
        "median_ratio": ratio,
        "deltas": shape.deltas(),
        "turns": shape.turns,
        "events": shape.events(),
        "frame_bytes": reference.data_bytes,
        "floor_fdatasyncs": reference.chunks.len(),
        "fdatasyncs": syncs,
        "fdatasyncs_by_appender": appender_syncs,
        "fdatasyncs_by_flusher": flusher_syncs,
        "segment_writes": writes,
    });
    if std::env::args().any(|arg| arg == "--test") {
        // A smoke test's single session is no figure to keep.
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../criterion/harness-stats");
    std::fs::create_dir_all(&dir).expect("create the stats directory");
    let text = serde_json::to_string_pretty(&stats).expect("stats as JSON");
    std::fs::write(dir.join(format!("{name}.json")), text).expect("write the stats");
}

/// The session benches through the store: name, the floor each is paired with, how steps are
/// closed, and whether the typed layer is bypassed.
const SESSION_BENCHES: [(&str, &str, StepClose, bool); 3] = [
    ("raw_log_step_batch", "floor_450_write_fdatasync", StepClose::Batch, true),
    ("typed_step_batch", "floor_450_write_fdatasync", StepClose::Batch, false),
    ("typed_defaults", "floor_650_write_fdatasync", StepClose::Separate, false),
];

fn session(c: &mut Criterion) {
    let mut setup: Option<SessionSetup> = None;
    let mut group = c.benchmark_group("harness_session");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(1));
    for (name, close) in [
        ("floor_450_write_fdatasync", StepClose::Batch),
        ("floor_650_write_fdatasync", StepClose::Separate),
    ] {
        group.bench_function(name, |b| {
            let setup = setup.get_or_insert_with(SessionSetup::new);
            let chunks = &setup.reference(close).chunks;
            b.iter_custom(|iters| {
                (0..iters).map(|_| floor_session(&setup.floor_file, chunks)).sum()
            });
        });
    }
    for (name, floor_name, close, raw) in SESSION_BENCHES {
        let mut pairs: Vec<Paired> = Vec::new();
        group.bench_function(name, |b| {
            let setup = setup.get_or_insert_with(SessionSetup::new);
            let reference = setup.reference(close);
            let writer = if raw { Writer::RawLog(reference) } else { Writer::Typed(close) };
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Alternate the order, so that neither side always runs on a disk the
                    // other has just left busy.
                    let floor_first = pairs.len().is_multiple_of(2);
                    let chunks = &reference.chunks;
                    let before = floor_first.then(|| floor_session(&setup.floor_file, chunks));
                    let run = session_run(writer);
                    let floor = before.unwrap_or_else(|| floor_session(&setup.floor_file, chunks));
                    total += run.elapsed;
                    pairs.push(Paired { store: run.elapsed, floor, counts: run.counts });
                }
                total
            });
        });
        if let Some(setup) = &setup {
            report_pairs(name, floor_name, &pairs, setup.reference(close));
        }
    }
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// harness_open

/// The store directories the open bench opens.
struct OpenSetup {
    dirs: Vec<OpenDir>,
    _root: TempDir,
}

struct OpenDir {
    name: String,
    path: PathBuf,
    /// Whether the directory holds the snapshot.
    snapshot: bool,
    /// Events an open replays.
    replayed: u64,
}

/// Copies the store in `from` to `to`, without its lock and preallocation files, and with its
/// snapshots only if `snapshots`.
fn copy_store(from: &Path, to: &Path, snapshots: bool) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("list the store") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        let path = entry.path();
        if path.is_dir() {
            if snapshots {
                copy_store(&path, &to.join(&name), true);
            }
        } else if name != "LOCK" && name != "prealloc.tmp" {
            std::fs::copy(&path, to.join(&name)).expect("copy a file");
        }
    }
}

/// A store of `sessions` sessions of `shape` (tasks `{prefix}session-N`), a snapshot of it, then
/// each of `extras` events in total after it (from further sessions of the default shape, each
/// event appended alone): copies `{prefix}snapshot_plus_{K}k` of the store as it stands after
/// K of them, and for the first and last K also the copies without the snapshot.
fn build_store(
    root: &Path,
    prefix: &str,
    shape: Shape,
    sessions: u64,
    extras: &[u64],
) -> Vec<OpenDir> {
    let build = root.join(format!("{prefix}build"));
    // Snapshots only when asked, so the one snapshot is the checkpoint below.
    let options = StoreOptions::new()
        .clock(workload::fixed_clock)
        .snapshot_every_events(0)
        .snapshot_every_bytes(0);
    let store = Store::open(&build, options).expect("open the store to build");
    for i in 0..sessions {
        let task = store.task(&format!("{prefix}session-{i}")).expect("task");
        workload::run(&task, workload::session(shape, i), StepClose::Separate);
    }
    let base = sessions * shape.events();
    let checkpoint_started = Instant::now();
    let meta = store.checkpoint().expect("checkpoint");
    eprintln!(
        "harness_open: {prefix}store of {base} events; checkpoint took {:?}, snapshot {} bytes",
        checkpoint_started.elapsed(),
        meta.file_bytes
    );
    assert_eq!(meta.covered_seq, Seq(base));
    let last = *extras.last().expect("at least one count of extra events");
    let mut extra = Vec::new();
    let mut i = sessions;
    while (extra.len() as u64) < last {
        let task = store.task(&format!("{prefix}session-{i}")).expect("task");
        let session = workload::separate(workload::session(Shape::DEFAULT, i));
        let deltas = Arc::new(session.deltas);
        extra.extend(session.actions.into_iter().map(|a| (task.clone(), Arc::clone(&deltas), a)));
        i += 1;
    }
    let mut dirs = Vec::new();
    let mut done = 0u64;
    let mut actions = extra.into_iter();
    for &k in extras {
        for (task, deltas, action) in actions.by_ref().take((k - done) as usize) {
            workload::perform(&task, &deltas, action, StepClose::Separate);
        }
        done = k;
        store.flush(Durability::Synced).expect("sync");
        let name = format!("{prefix}snapshot_plus_{}k", k / 1000);
        let with = root.join(&name);
        copy_store(&build, &with, true);
        dirs.push(OpenDir { name, path: with, snapshot: true, replayed: k });
        if k == extras[0] || k == last {
            let events = base + k;
            let label = (events + 500) / 1000;
            let without = root.join(format!("{prefix}full_replay_{label}k"));
            copy_store(&build, &without, false);
            let info = store.log().info().expect("log info");
            let active = info.segments.last().expect("a segment").first_seq.0;
            eprintln!(
                "harness_open: {prefix}{events} events in {} segments, {} in the active one",
                info.segments.len(),
                events + 1 - active
            );
            dirs.push(OpenDir {
                name: format!("{prefix}full_replay_{label}k"),
                path: without.clone(),
                snapshot: false,
                replayed: events,
            });
            dirs.push(OpenDir {
                name: format!("{prefix}log_only_{label}k"),
                path: without,
                snapshot: false,
                replayed: 0,
            });
        }
    }
    // The unused actions hold task handles, which keep the store from closing.
    drop(actions);
    store.close().expect("close the built store");
    std::fs::remove_dir_all(&build).expect("remove the built store");
    dirs
}

fn build_open_setup() -> OpenSetup {
    let started = Instant::now();
    let root = factlog_bench::temp_dir!("open");
    let mut dirs =
        build_store(root.path(), "", Shape::DEFAULT, OPEN_BASE_SESSIONS, &OPEN_EXTRA_EVENTS);
    dirs.extend(build_store(root.path(), "big_", OPEN_BIG_SHAPE, OPEN_BIG_SESSIONS, &[1_000]));
    // Check each directory's shape once, outside the timing.
    for dir in dirs.iter().filter(|d| !d.name.contains("log_only")) {
        let store = Store::open(&dir.path, open_options()).expect("open");
        let report = store.open_report();
        assert_eq!(report.snapshot.is_some(), dir.snapshot, "{}", dir.name);
        assert_eq!(report.replayed_events, dir.replayed, "{}", dir.name);
        store.close().expect("close");
    }
    eprintln!("harness_open: built {} directories in {:?}", dirs.len(), started.elapsed());
    OpenSetup { dirs, _root: root }
}

/// The options of a timed open: no background threads, so only the open itself is timed.
fn open_options() -> StoreOptions {
    StoreOptions::new().log(Options::new().background_threads(false))
}

fn open(c: &mut Criterion) {
    let mut setup: Option<OpenSetup> = None;
    let mut group = c.benchmark_group("harness_open");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    let names = [
        "snapshot_plus_1k",
        "snapshot_plus_10k",
        "snapshot_plus_100k",
        "full_replay_206k",
        "full_replay_305k",
        "log_only_206k",
        "log_only_305k",
        "big_snapshot_plus_1k",
        "big_full_replay_1605k",
        "big_log_only_1605k",
    ];
    for name in names {
        group.bench_function(name, |b| {
            let setup = setup.get_or_insert_with(build_open_setup);
            let dir = setup.dirs.iter().find(|d| d.name == name).expect("a built directory");
            let log_only = name.contains("log_only");
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if log_only {
                        let start = Instant::now();
                        let log = Log::open(&dir.path, Options::new().background_threads(false))
                            .expect("open the log");
                        total += start.elapsed();
                        black_box(log.recovery_report().records_scanned);
                        log.close().expect("close");
                    } else {
                        let start = Instant::now();
                        let store = Store::open(&dir.path, open_options()).expect("open");
                        total += start.elapsed();
                        black_box(store.open_report().replayed_events);
                        store.close().expect("close");
                    }
                }
                total
            });
        });
    }
    group.finish();
}

/// The benches, in a private module: `criterion_group!` declares an undocumented `pub fn`.
mod suite {
    use super::{delta, open, session};

    criterion::criterion_group!(benches, delta, session, open);
}

criterion_main!(suite::benches);
