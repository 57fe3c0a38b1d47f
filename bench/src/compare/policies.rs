//! One timed session of each policy. Every runner writes into a fresh directory (the floors
//! into their preallocated files), runs one thread per task started together, and returns the
//! wall time from the start until every thread is done and the policy's last sync returned.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use factlog::harness::Body;
use factlog::harness::codec;
use factlog::harness::event::AssistantDelta;
use factlog::{AppendOptions, Appended, Durability, Log, Options, Seq, Store, StoreOptions, Task};
use parking_lot::Mutex;

use crate::workload::{Action, Line, Session};
use factlog::engine::counting_fs::{CountingFs, FsCounters, FsCounts};

/// The longest the bench waits for a fresh log's background preallocation.
const PREALLOC_WAIT_MAX: Duration = Duration::from_secs(120);

/// Name of the file the preallocator fills (`format-spec/segment.md`, "Preallocation").
const PREALLOC_FILE_NAME: &str = "prealloc.tmp";

/// What one timed session cost.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Wall time of the session.
    pub elapsed: Duration,
    /// `fdatasync`s issued during it.
    pub syncs: u64,
    /// Those issued by the store's background flusher (also in `syncs`).
    pub syncs_by_flusher: u64,
    /// `fdatasync`s of the log mark (`format-spec/mark.md`), not in `syncs`.
    pub mark_syncs: u64,
    /// Bytes written (for a JSONL file: its length).
    pub bytes: u64,
    /// The duration of every synced append, in nanoseconds.
    pub synced_latencies_ns: Vec<u64>,
    /// Bytes written before each `fdatasync`, one entry per sync (store policies only): what
    /// the floor replays.
    pub chunks: Vec<u64>,
}

impl Measured {
    /// A store policy's session: what the counting file system saw of it.
    fn counted(
        elapsed: Duration,
        counts: &FsCounts,
        latencies: Vec<u64>,
        chunks: Vec<u64>,
    ) -> Self {
        Measured {
            elapsed,
            syncs: counts.record_syncs(),
            syncs_by_flusher: counts.record_syncs_by_flusher(),
            mark_syncs: counts.mark_syncs(),
            bytes: counts.record_write_bytes(),
            synced_latencies_ns: latencies,
            chunks,
        }
    }
}

/// How the store policies append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// The store's defaults per event type; each step closed by one batch of `tool/result` +
    /// `step/end`.
    Tiers,
    /// Every event alone with `durability: Some(Synced)`.
    AllSynced,
}

/// What a reference run of the tiered store leaves for the other policies.
pub struct Reference {
    /// Each task's records, as the store encoded them.
    pub records: Vec<Vec<Vec<u8>>>,
    /// Bytes written between consecutive `fdatasync`s.
    pub chunks: Vec<u64>,
}

type Failed = String;

fn store_error(what: &str) -> impl Fn(factlog::Error) -> Failed + '_ {
    move |error| format!("{what}: {error}")
}

/// Waits until the log in `dir` has its next segment preallocated and on disk, so its zeros
/// are not written back during the measurement.
pub fn wait_for_prealloc(dir: &Path) -> Result<(), Failed> {
    let path = dir.join(PREALLOC_FILE_NAME);
    let started = Instant::now();
    loop {
        // Empty when the file system is short of space: nothing is preallocated then.
        let expected =
            factlog::prepared_prealloc_bytes(dir, factlog::limits::SEGMENT_BYTES_DEFAULT);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == expected) {
            break;
        }
        if started.elapsed() > PREALLOC_WAIT_MAX {
            return Err(format!(
                "{} did not reach {expected} bytes within {PREALLOC_WAIT_MAX:?}",
                path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    File::open(&path)
        .and_then(|file| file.sync_data())
        .map_err(|error| format!("sync {}: {error}", path.display()))?;
    std::thread::sleep(Duration::from_millis(20));
    Ok(())
}

/// Runs `work(i)` on one thread per task, all released together; returns the wall time from
/// the release until every thread is done, and what each returned.
fn parallel<T: Send>(
    tasks: usize,
    work: impl Fn(usize) -> Result<T, Failed> + Sync,
) -> Result<(Duration, Vec<T>), Failed> {
    let barrier = Barrier::new(tasks + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..tasks)
            .map(|i| {
                let barrier = &barrier;
                let work = &work;
                scope.spawn(move || {
                    barrier.wait();
                    work(i)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut out = Vec::with_capacity(tasks);
        let mut failure = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(value)) => out.push(value),
                Ok(Err(error)) => failure = failure.or(Some(error)),
                Err(_) => failure = failure.or(Some("a bench thread panicked".to_owned())),
            }
        }
        let elapsed = start.elapsed();
        failure.map_or(Ok((elapsed, out)), Err)
    })
}

fn written(outcome: factlog::Result<Appended>) -> Result<(), Failed> {
    match outcome.map_err(store_error("append"))? {
        Appended::Written { .. } => Ok(()),
        Appended::Duplicate { call_id, .. } => Err(format!("call {call_id} taken for a duplicate")),
    }
}

/// Appends `body` with `options`, timing it into `latencies` when `synced`.
fn timed_append(
    task: &Task,
    bodies: Vec<Body>,
    options: AppendOptions,
    synced: bool,
    latencies: &mut Vec<u64>,
) -> Result<(), Failed> {
    let start = Instant::now();
    written(task.append_batch_with(bodies, options))?;
    if synced {
        latencies.push(start.elapsed().as_nanos() as u64);
    }
    Ok(())
}

fn default_synced(body: &Body) -> bool {
    body.event_type().is_some_and(|t| t.default_durability() == Durability::Synced)
}

/// One session on `task` through the typed API, appending as `mode` says: the latency of each
/// synced append, in nanoseconds.
pub(super) fn perform(task: &Task, session: Session, mode: StoreMode) -> Result<Vec<u64>, Failed> {
    let mut latencies = Vec::new();
    let synced = AppendOptions { durability: Some(Durability::Synced), ..Default::default() };
    for action in session.actions {
        match (action, mode) {
            (Action::Delta(range), StoreMode::Tiers) => {
                task.delta(&session.deltas[range]).map_err(store_error("delta"))?;
            }
            (Action::Delta(range), StoreMode::AllSynced) => {
                let text = session.deltas[range].to_owned();
                let body = Body::AssistantDelta(AssistantDelta { text });
                timed_append(task, vec![body], synced, true, &mut latencies)?;
            }
            (Action::Append(body), StoreMode::Tiers) => {
                let is_synced = default_synced(&body);
                timed_append(
                    task,
                    vec![*body],
                    AppendOptions::default(),
                    is_synced,
                    &mut latencies,
                )?;
            }
            (Action::Append(body), StoreMode::AllSynced) => {
                timed_append(task, vec![*body], synced, true, &mut latencies)?;
            }
            (Action::CloseStep(bodies), StoreMode::Tiers) => {
                let bodies = Vec::from(*bodies);
                timed_append(task, bodies, AppendOptions::default(), true, &mut latencies)?;
            }
            (Action::CloseStep(bodies), StoreMode::AllSynced) => {
                for body in *bodies {
                    timed_append(task, vec![body], synced, true, &mut latencies)?;
                }
            }
        }
    }
    Ok(latencies)
}

/// A fresh store in `dir` on a counting file system (default options otherwise), its first
/// preallocation on disk; the counters of every file operation it makes.
pub(super) fn open_store(dir: &Path) -> Result<(Store, Arc<FsCounters>), Failed> {
    let (fs, counters) = CountingFs::new();
    let options = StoreOptions::new().log(Options::new().fs(fs));
    let store = Store::open(dir, options)
        .map_err(|error| format!("cannot open a store in {}: {error}", dir.display()))?;
    wait_for_prealloc(dir)?;
    Ok((store, counters))
}

/// The sessions through a fresh store in `dir`; with `reference`, also what the reference
/// gives the other policies (read back from the store before it is closed).
fn store_session(
    dir: &Path,
    sessions: Vec<Session>,
    mode: StoreMode,
    reference: bool,
) -> Result<(Measured, Option<Reference>), Failed> {
    let (store, counters) = open_store(dir)?;
    let tasks: Vec<Task> = sessions
        .iter()
        .map(|s| store.task(&s.task).map_err(store_error("task")))
        .collect::<Result<_, _>>()?;
    let slots: Vec<Mutex<Option<Session>>> =
        sessions.into_iter().map(|s| Mutex::new(Some(s))).collect();
    counters.reset_chunks();
    let before = counters.read();
    let (elapsed, latencies) = parallel(tasks.len(), |i| {
        let session = slots[i].lock().take().ok_or("a session ran twice")?;
        perform(&tasks[i], session, mode)
    })?;
    let counts = counters.read().since(&before);
    let chunks = counters.chunks();
    let reference = if reference {
        store.flush(Durability::Synced).map_err(store_error("flush"))?;
        let mut records: Vec<Vec<Vec<u8>>> = vec![Vec::new(); tasks.len()];
        let reader = store.log().read_from(Seq(1)).map_err(store_error("read back"))?;
        for record in reader {
            let record = record.map_err(store_error("read back"))?;
            let envelope = codec::peek(record.seq, &record.payload).map_err(store_error("peek"))?;
            let index = tasks.iter().position(|t| t.id().as_str() == envelope.task);
            if let Some(index) = index {
                records[index].push(record.payload.to_vec());
            }
        }
        Some(Reference { records, chunks: chunks.clone() })
    } else {
        None
    };
    drop(tasks);
    store.close().map_err(store_error("close the store"))?;
    let measured = Measured::counted(elapsed, &counts, latencies.concat(), chunks);
    Ok((measured, reference))
}

/// The untimed reference run of the tiered store (also a warm-up).
pub fn reference(dir: &Path, sessions: Vec<Session>) -> Result<Reference, Failed> {
    let (_, reference) = store_session(dir, sessions, StoreMode::Tiers, true)?;
    reference.ok_or_else(|| "no reference".to_owned())
}

/// One timed session of a store policy.
pub fn store(dir: &Path, sessions: Vec<Session>, mode: StoreMode) -> Result<Measured, Failed> {
    Ok(store_session(dir, sessions, mode, false)?.0)
}

/// A fresh log in `dir` on a counting file system, its preallocation settled.
fn open_log(dir: &Path) -> Result<(Log, Arc<FsCounters>), Failed> {
    let (fs, counters) = CountingFs::new();
    let log = Log::open(dir, Options::new().fs(fs))
        .map_err(|error| format!("cannot open a log in {}: {error}", dir.display()))?;
    wait_for_prealloc(dir)?;
    Ok((log, counters))
}

/// The reference's records through `Log::append`, `Buffered`, then one `flush(Synced)`.
pub fn raw_buffered(dir: &Path, reference: &Reference) -> Result<Measured, Failed> {
    let (log, counters) = open_log(dir)?;
    let before = counters.read();
    let (elapsed, ()) = {
        let (threads, _) = parallel(reference.records.len(), |i| {
            for record in &reference.records[i] {
                log.append(record, Durability::Buffered).map_err(store_error("append"))?;
            }
            Ok(())
        })?;
        (threads, ())
    };
    let flush_started = Instant::now();
    log.flush(Durability::Synced).map_err(store_error("flush"))?;
    let flush = flush_started.elapsed();
    let counts = counters.read().since(&before);
    log.close().map_err(store_error("close the log"))?;
    Ok(Measured::counted(elapsed + flush, &counts, vec![flush.as_nanos() as u64], Vec::new()))
}

/// Which JSONL lines are followed by an `fdatasync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonlSync {
    /// Every line.
    Every,
    /// Only the lines of critical events.
    Critical,
}

/// Where the JSONL policies write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonlFiles {
    /// One file, `session.jsonl`, shared by every task under one lock.
    Shared,
    /// One file per task, `session-I.jsonl`, each under its own (uncontended) lock.
    PerSession,
}

/// Each task's lines into new JSONL files in `dir` (laid out as `files` says), one `write` per
/// line, followed (under the same lock) by an `fdatasync` as `sync` says.
pub fn jsonl(
    dir: &Path,
    lines: &[Vec<Line>],
    sync: JsonlSync,
    files: JsonlFiles,
) -> Result<Measured, Failed> {
    let paths: Vec<PathBuf> = match files {
        JsonlFiles::Shared => vec![dir.join("session.jsonl")],
        JsonlFiles::PerSession => {
            (0..lines.len()).map(|i| dir.join(format!("session-{i}.jsonl"))).collect()
        }
    };
    let files: Vec<Mutex<File>> = paths
        .iter()
        .map(|path| {
            OpenOptions::new()
                .append(true)
                .create_new(true)
                .open(path)
                .map(Mutex::new)
                .map_err(|error| format!("cannot create {}: {error}", path.display()))
        })
        .collect::<Result<_, _>>()?;
    let (elapsed, results) = parallel(lines.len(), |i| {
        let slot = i % files.len();
        let io = |error: std::io::Error| format!("write {}: {error}", paths[slot].display());
        let mut latencies = Vec::new();
        let mut syncs = 0u64;
        for line in &lines[i] {
            let synced = sync == JsonlSync::Every || line.critical;
            let start = Instant::now();
            let mut file = files[slot].lock();
            file.write_all(&line.bytes).map_err(io)?;
            if synced {
                file.sync_data().map_err(io)?;
                drop(file);
                latencies.push(start.elapsed().as_nanos() as u64);
                syncs += 1;
            }
        }
        Ok((latencies, syncs))
    })?;
    let mut bytes = 0;
    for (file, path) in files.iter().zip(&paths) {
        let metadata = file.lock().metadata();
        bytes += metadata.map_err(|error| format!("stat {}: {error}", path.display()))?.len();
    }
    let syncs = results.iter().map(|r| r.1).sum();
    let latencies = results.into_iter().flat_map(|r| r.0).collect();
    Ok(Measured {
        elapsed,
        syncs,
        syncs_by_flusher: 0,
        mark_syncs: 0,
        bytes,
        synced_latencies_ns: latencies,
        chunks: Vec::new(),
    })
}

/// A file of `bytes` zeros, written and synced, as factlog's segments are preallocated.
pub fn preallocated_file(path: &Path, bytes: u64) -> Result<File, Failed> {
    let io = |error: std::io::Error| format!("floor file {}: {error}", path.display());
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(path).map_err(io)?;
    let zeros = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < bytes {
        let n = (bytes - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at).map_err(io)?;
        at += n as u64;
    }
    file.sync_all().map_err(io)?;
    Ok(file)
}

/// Bytes to `pwrite` for chunks of at most `largest` bytes: letters, not zeros, so the disk
/// cannot skip them.
pub fn floor_content(largest: u64) -> Vec<u8> {
    (0..largest).map(|i| b'a' + (i % 26) as u8).collect()
}

/// For each chunk, one `pwrite` of that many bytes of `content` right after the previous one
/// and an `fdatasync`, into the preallocated `file`; the latency of each pair.
fn replay(file: &File, chunks: &[u64], content: &[u8]) -> Result<Vec<u64>, Failed> {
    let io = |error: std::io::Error| format!("floor write: {error}");
    let mut latencies = Vec::with_capacity(chunks.len());
    let mut offset = 0u64;
    for &chunk in chunks {
        let began = Instant::now();
        if chunk > 0 {
            let bytes = content.get(..chunk as usize).ok_or("a floor chunk beyond its content")?;
            file.write_all_at(bytes, offset).map_err(io)?;
        }
        file.sync_data().map_err(io)?;
        latencies.push(began.elapsed().as_nanos() as u64);
        offset += chunk;
    }
    Ok(latencies)
}

/// The floor: for each chunk of a factlog session, one `pwrite` of that many bytes right after the
/// previous one and an `fdatasync`, into the preallocated `file`.
pub fn floor(file: &File, chunks: &[u64]) -> Result<Measured, Failed> {
    let content = floor_content(chunks.iter().copied().max().unwrap_or(0));
    let start = Instant::now();
    let latencies = replay(file, chunks, &content)?;
    let elapsed = start.elapsed();
    Ok(Measured {
        elapsed,
        syncs: chunks.len() as u64,
        syncs_by_flusher: 0,
        mark_syncs: 0,
        bytes: chunks.iter().sum(),
        synced_latencies_ns: latencies,
        chunks: Vec::new(),
    })
}

/// The per-session-file floor: one thread per file, each replaying its own `chunks` (as
/// [`floor`] does) into its own preallocated file, all released together.
pub fn floor_per_session(files: &[File], chunks: &[Vec<u64>]) -> Result<Measured, Failed> {
    let largest = chunks.iter().flatten().copied().max().unwrap_or(0);
    let content = floor_content(largest);
    let (elapsed, latencies) = parallel(files.len(), |i| replay(&files[i], &chunks[i], &content))?;
    Ok(Measured {
        elapsed,
        syncs: chunks.iter().map(|c| c.len() as u64).sum(),
        syncs_by_flusher: 0,
        mark_syncs: 0,
        bytes: chunks.iter().flatten().sum(),
        synced_latencies_ns: latencies.concat(),
        chunks: Vec::new(),
    })
}

/// One append of the raw-log policy: a run of a session's records, appended alone or (more
/// than one) as one batch frame, with one durability.
#[derive(Debug, Clone)]
pub struct LogOp {
    /// The records, as a range of [`LoggedSession::records`].
    pub records: Range<usize>,
    /// What the append waits for: the default tier of its event types (the strongest of a
    /// batch's), as the typed store chooses it.
    pub durability: Durability,
}

/// One task's records as the typed store encoded them, and the appends that wrote them.
#[derive(Debug, Clone)]
pub struct LoggedSession {
    /// The encoded records, in order.
    pub records: Vec<Vec<u8>>,
    /// The appends, in order, covering every record once.
    pub ops: Vec<LogOp>,
}

impl LoggedSession {
    /// Pairs `session`'s actions with the `records` the typed store wrote for them (one per
    /// event, in order): each action becomes one append of its records, with the durability
    /// the store gave it.
    pub fn new(session: &Session, records: Vec<Vec<u8>>) -> Result<LoggedSession, Failed> {
        let mut ops = Vec::with_capacity(session.actions.len());
        let mut at = 0;
        for action in &session.actions {
            let (count, durability) = match action {
                // `Task::delta` appends Buffered (`src/harness/store/append.rs`).
                Action::Delta(_) => (1, Durability::Buffered),
                Action::Append(body) => (1, durability_of(body)),
                Action::CloseStep(bodies) => (2, strongest(bodies.iter().map(durability_of))),
            };
            ops.push(LogOp { records: at..at + count, durability });
            at += count;
        }
        if at != records.len() {
            return Err(format!(
                "{}: the store wrote {} records for {at} events",
                session.task,
                records.len()
            ));
        }
        Ok(LoggedSession { records, ops })
    }

    /// The bytes the log framed between consecutive synced appends, one entry per synced
    /// append: what the per-session floor writes before each of its `fdatasync`s. A record is
    /// counted as a frame of its own (header, payload, alignment), a close approximation for
    /// the two records of a batch.
    pub fn synced_chunks(&self) -> Vec<u64> {
        let mut chunks = Vec::new();
        let mut pending = 0u64;
        for op in &self.ops {
            for record in &self.records[op.records.clone()] {
                let framed = (factlog::limits::FRAME_HEADER_BYTES + record.len())
                    .next_multiple_of(factlog::limits::FRAME_ALIGN_BYTES);
                pending += framed as u64;
            }
            if op.durability == Durability::Synced {
                chunks.push(std::mem::take(&mut pending));
            }
        }
        chunks
    }
}

/// The default durability of `body`'s type; an opaque body is `Synced`, the strictest.
fn durability_of(body: &Body) -> Durability {
    body.event_type().map_or(Durability::Synced, |t| t.default_durability())
}

/// The strongest of `tiers` (`Buffered` when there is none).
fn strongest(tiers: impl Iterator<Item = Durability>) -> Durability {
    let rank = |d: Durability| match d {
        Durability::Buffered => 0,
        Durability::Flushed => 1,
        Durability::Synced => 2,
    };
    tiers.max_by_key(|&d| rank(d)).unwrap_or(Durability::Buffered)
}

/// The raw-log policy: one thread per session appends its records through `Log::append` (a
/// batch through `Log::append_batch`) with the durability the typed store gave them, into
/// one fresh log in `dir` shared by every thread.
pub fn raw_tiered(dir: &Path, sessions: &[LoggedSession]) -> Result<Measured, Failed> {
    let (log, counters) = open_log(dir)?;
    counters.reset_chunks();
    let before = counters.read();
    let (elapsed, latencies) = parallel(sessions.len(), |i| {
        let session = &sessions[i];
        let mut latencies = Vec::new();
        for op in &session.ops {
            let records = &session.records[op.records.clone()];
            let start = Instant::now();
            match records {
                [record] => log.append(record, op.durability),
                batch => log.append_batch(batch, op.durability),
            }
            .map_err(store_error("append"))?;
            if op.durability == Durability::Synced {
                latencies.push(start.elapsed().as_nanos() as u64);
            }
        }
        Ok(latencies)
    })?;
    let counts = counters.read().since(&before);
    log.close().map_err(store_error("close the log"))?;
    Ok(Measured::counted(elapsed, &counts, latencies.concat(), Vec::new()))
}
