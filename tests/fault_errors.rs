//! Proves the error paths on the simulated file system, enumerated rather than sampled. A
//! fixed workload (all three tiers, batches, four segment rolls, a reopen) is run once on a
//! tracing wrapper to learn each I/O operation and where it happens, then re-run once per
//! operation with `EIO` injected there, and once per write with `ENOSPC` and with a short
//! write: the failing call returns the error (`DiskFull` for `ENOSPC`) and performs nothing
//! after the failed operation but removals (an open that created the log removes what it
//! created, a preallocation out of space removes its file); a failure on the append path poisons the handle, so every
//! later call fails with `Poisoned` without a single further operation (no fsync is retried);
//! a failure while preparing the next segment file fails only the append that needed it; a
//! failure inside open fails that open and the next one succeeds; and after a reboot under
//! every crash model, and after reopening in place, the log opens, is an exact prefix of what
//! was appended and holds every acknowledged record byte for byte. It then damages synced data
//! before the tail (one bit in every field of every frame, every sector zeroed), in sealed
//! segments and early in the active one, and checks that `verify`, the readers and both
//! recovery modes report `Corruption` at the damaged frame and change nothing; and that
//! `TolerateTornTail` never cuts before the end of the last acknowledged synced frame.

use crate::fuzz_corpus::bodies::crash_workload;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use crash_workload::{Acks, DIR, Rng, Step, check, options};
use factlog::fs::sim::{CrashModel, Fault, SECTOR_BYTES, SimFs};
use factlog::fs::{DirLock, Fs, FsFile, OpenMode};
use factlog::{
    Durability, Error, ErrorKind, Log, Options, RecoveryMode, SegmentId, Seq, TailCut,
    VerifyOutcome,
};

/// Seed of the simulated machine and of the workload.
const SEED: u64 = 0xFA17;

/// The state-changing operations, as the simulated file system counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum OpKind {
    CreateDir,
    Create,
    Write,
    SyncData,
    Rename,
    Link,
    Remove,
    SyncDir,
}

/// A pass-through file system that records every state-changing operation, in the order the
/// simulated file system numbers them.
#[derive(Debug, Clone)]
struct Traced {
    sim: SimFs,
    trace: Arc<Mutex<Vec<(OpKind, PathBuf)>>>,
}

impl Traced {
    fn note(&self, kind: OpKind, path: &Path) {
        self.trace.lock().expect("trace").push((kind, path.to_path_buf()));
    }
}

#[derive(Debug)]
struct TracedFile {
    file: Box<dyn FsFile>,
    /// The name the file was opened under (a segment keeps its `prealloc.tmp` name here).
    path: PathBuf,
    fs: Traced,
}

impl Fs for Traced {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.note(OpKind::CreateDir, path);
        self.sim.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.sim.list_dir(path)
    }
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        if mode == OpenMode::CreateNew {
            self.note(OpKind::Create, path);
        }
        let file = self.sim.open(path, mode)?;
        Ok(Box::new(TracedFile { file, path: path.to_path_buf(), fs: self.clone() }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.note(OpKind::Rename, to);
        self.sim.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.note(OpKind::Link, to);
        self.sim.hard_link(from, to)
    }
    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        self.sim.is_dir(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.note(OpKind::Remove, path);
        self.sim.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.note(OpKind::Remove, path);
        self.sim.remove_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.note(OpKind::SyncDir, path);
        self.sim.sync_dir(path)
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        self.sim.lock_dir(dir)
    }
    fn map(&self, path: &Path) -> io::Result<Bytes> {
        self.sim.map(path)
    }
    fn random_u64(&self) -> u64 {
        self.sim.random_u64()
    }

    fn space(&self, path: &Path) -> io::Result<factlog::fs::Space> {
        self.sim.space(path)
    }
}

impl FsFile for TracedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.fs.note(OpKind::Write, &self.path);
        self.file.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.fs.note(OpKind::SyncData, &self.path);
        self.file.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
}

/// Non-zero bytes (so that a zeroed sector always changes the frames it overlaps).
fn payload(tag: u64, len: usize) -> Vec<u8> {
    let mut bytes = format!("r{tag}:").into_bytes();
    bytes.extend((0..len).map(|i| b'a' + u8::try_from((tag as usize + i) % 26).expect("small")));
    bytes
}

/// The fixed workload: 150 steps of 100-400-byte records in all three tiers, batches and
/// flushes, with a reopen in the middle; about 40 KB, so four rolls of 8 KiB segments.
fn workload() -> Vec<Step> {
    let mut rng = Rng(SEED);
    let mut steps = Vec::new();
    for tag in 0..150u64 {
        if tag == 75 {
            steps.push(Step::Reopen);
        }
        let tier = match rng.below(4) {
            0 | 1 => Durability::Buffered,
            2 => Durability::Flushed,
            _ => Durability::Synced,
        };
        let step = match rng.below(20) {
            0 | 1 => {
                let n = 1 + rng.below(4);
                let records =
                    (0..n).map(|i| payload(tag * 10 + i, 20 + rng.below(120) as usize)).collect();
                Step::Batch(records, tier)
            }
            2 => Step::Flush(tier),
            _ => Step::Append(payload(tag, 100 + rng.below(300) as usize), tier),
        };
        steps.push(step);
    }
    steps
}

/// The options of `crash_workload::options` on any file system.
fn options_on(fs: Arc<dyn Fs>) -> Options {
    Options::new().segment_bytes(8192).buffer_bytes(4096).background_threads(false).fs(fs)
}

/// One call the application makes.
#[derive(Debug, Clone, Copy)]
enum Call<'a> {
    Open,
    Step(&'a Step),
    Close,
}

/// A short description of `call` for failure messages.
fn describe(call: Call<'_>) -> String {
    match call {
        Call::Open => "open".into(),
        Call::Close => "close".into(),
        Call::Step(Step::Append(record, tier)) => {
            format!("{tier:?} append of {} bytes", record.len())
        }
        Call::Step(Step::Batch(records, tier)) => format!("{tier:?} batch of {}", records.len()),
        Call::Step(Step::Flush(tier)) => format!("{tier:?} flush"),
        Call::Step(Step::Reopen) => "reopen".into(),
    }
}

/// The workload as calls: open, the steps (a reopen is a close and an open), close.
fn calls(steps: &[Step]) -> Vec<Call<'_>> {
    let mut calls = vec![Call::Open];
    for step in steps {
        match step {
            Step::Reopen => calls.extend([Call::Close, Call::Open]),
            other => calls.push(Call::Step(other)),
        }
    }
    calls.push(Call::Close);
    calls
}

fn acknowledge(acks: &mut Acks, through: u64, tier: Durability) {
    if tier >= Durability::Flushed {
        acks.flushed = acks.flushed.max(through);
    }
    if tier == Durability::Synced {
        acks.synced = acks.synced.max(through);
    }
}

/// Performs `call`, recording in `acks` what was attempted and what was acknowledged.
fn perform(
    call: Call<'_>,
    fs: &Arc<dyn Fs>,
    log: &mut Option<Log>,
    acks: &mut Acks,
) -> factlog::Result<()> {
    let next = acks.attempted.len() as u64 + 1;
    let handle = || log.as_ref().expect("an open log");
    match call {
        Call::Open => {
            *log = Some(Log::open(DIR, options_on(Arc::clone(fs)))?);
        }
        Call::Close => {
            log.take().expect("an open log").close()?;
            acknowledge(acks, next - 1, Durability::Synced);
        }
        Call::Step(Step::Append(record, tier)) => {
            acks.attempted.push(record.clone());
            let seq = handle().append(record, *tier)?;
            assert_eq!(seq, Seq(next), "seqs are handed out in order, none consumed by errors");
            acknowledge(acks, next, *tier);
        }
        Call::Step(Step::Batch(records, tier)) => {
            acks.attempted.extend(records.iter().cloned());
            let last = next + records.len() as u64 - 1;
            acks.batches.push((next, last));
            let seq = handle().append_batch(records, *tier)?;
            assert_eq!(seq, Seq(next));
            acknowledge(acks, last, *tier);
        }
        Call::Step(Step::Flush(tier)) => {
            handle().flush(*tier)?;
            acknowledge(acks, next - 1, (*tier).max(Durability::Flushed));
        }
        Call::Step(Step::Reopen) => unreachable!("a reopen is split into close and open"),
    }
    Ok(())
}

/// Where an operation happens, which decides what its failure must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Context {
    /// Inside `Log::open`: that open fails, the next one succeeds.
    Open,
    /// On the append path (writes, syncs, sealing and installing a segment): poisons.
    Writer,
    /// Preparing the next segment file during a roll: fails that append only.
    Prealloc,
    /// Inside `Log::close`: the close fails.
    Close,
}

/// What the run without faults did, operation by operation.
struct Learned {
    ops: Vec<(OpKind, Context)>,
    /// The call each operation belongs to.
    call_of: Vec<usize>,
}

fn learn(calls: &[Call<'_>]) -> Learned {
    let sim = SimFs::new(SEED);
    let traced = Traced { sim: sim.clone(), trace: Arc::default() };
    let fs: Arc<dyn Fs> = Arc::new(traced.clone());
    let mut log = None;
    let mut acks = Acks::default();
    let mut ops = Vec::new();
    let mut call_of = Vec::new();
    let mut preparing = false;
    for (c, &call) in calls.iter().enumerate() {
        let start = traced.trace.lock().expect("trace").len();
        perform(call, &fs, &mut log, &mut acks).expect("the workload runs without faults");
        let trace = traced.trace.lock().expect("trace");
        for (kind, path) in &trace[start..] {
            let prealloc = path.file_name().is_some_and(|n| n == "prealloc.tmp");
            let context = match call {
                Call::Open => Context::Open,
                Call::Close => Context::Close,
                Call::Step(_) => {
                    if prealloc && matches!(kind, OpKind::Remove | OpKind::Create) {
                        preparing = true;
                    }
                    if preparing {
                        preparing = *kind != OpKind::SyncData;
                        Context::Prealloc
                    } else {
                        Context::Writer
                    }
                }
            };
            ops.push((*kind, context));
            call_of.push(c);
        }
    }
    assert_eq!(ops.len() as u64, sim.ops(), "the trace sees every counted operation");
    let segments = sim.files().iter().filter(|p| p.extension().is_some_and(|e| e == "seg")).count();
    assert!(segments >= 5, "the workload rolls at least four times ({segments} segments)");
    assert_eq!(acks.synced as usize, acks.attempted.len(), "a clean run ends synced");
    Learned { ops, call_of }
}

fn expect_fault_error(error: &Error, fault: Fault) -> Result<(), String> {
    let fine = match (fault, error.kind()) {
        (Fault::NoSpace, ErrorKind::DiskFull { .. }) => true,
        (Fault::Eio | Fault::ShortWrite, ErrorKind::Io { source, .. }) => {
            source.raw_os_error() == Some(5)
        }
        _ => false,
    };
    if fine { Ok(()) } else { Err(format!("{fault:?} surfaced as {error:?}")) }
}

/// Runs the workload with `fault` injected at operation `index` and checks everything the
/// module documentation promises. Returns how many later calls were refused as `Poisoned`,
/// or a description of the first broken promise.
/// With `directory`, also checks that the log directory is still there after a power loss (the
/// simulated file system keeps a lost directory's files reachable once it is created again,
/// so recovery alone does not notice its loss).
fn fault_scenario(
    calls: &[Call<'_>],
    learned: &Learned,
    index: u64,
    fault: Fault,
    directory: bool,
) -> Result<u64, String> {
    let i = usize::try_from(index).expect("small");
    let (_, context) = learned.ops[i];
    let failing = learned.call_of[i];
    let fs = SimFs::new(SEED);
    fs.inject(index, fault);
    let traced = Traced { sim: fs.clone(), trace: Arc::default() };
    let shared: Arc<dyn Fs> = Arc::new(traced.clone());
    let mut log = None;
    let mut acks = Acks::default();
    let mut poisoned = false;
    let mut refused = 0;
    let mut c = 0;
    while c < calls.len() {
        let call = calls[c];
        let (attempted, batches, ops) = (acks.attempted.len(), acks.batches.len(), fs.ops());
        let result = perform(call, &shared, &mut log, &mut acks);
        if poisoned {
            // Every call after a poisoning failure fails at once and touches nothing.
            match result {
                Err(e) if matches!(e.kind(), ErrorKind::Poisoned { .. }) => {}
                other => {
                    return Err(format!(
                        "call {c} ({}) after poisoning: {other:?}",
                        describe(call)
                    ));
                }
            }
            if fs.ops() != ops {
                return Err(format!("call {c} after poisoning performed {} ops", fs.ops() - ops));
            }
            acks.attempted.truncate(attempted);
            acks.batches.truncate(batches);
            refused += 1;
            if matches!(call, Call::Close) {
                break;
            }
            c += 1;
            continue;
        }
        if c != failing {
            result.map_err(|e| {
                format!("call {c} ({}) failed, fault at {index}: {e}", describe(call))
            })?;
            c += 1;
            continue;
        }
        let Err(error) = result else {
            return Err(format!("call {c} ({}) hit the fault and succeeded", describe(call)));
        };
        expect_fault_error(&error, fault)?;
        let trace = traced.trace.lock().expect("trace");
        let after = trace.get(i + 1..).unwrap_or_default();
        if let Some((kind, path)) = after.iter().find(|(kind, _)| *kind != OpKind::Remove) {
            let path = path.display();
            return Err(format!("{kind:?} of {path} after the failed operation (only removals)"));
        }
        drop(trace);
        match context {
            Context::Writer => poisoned = true,
            Context::Close => break,
            Context::Open | Context::Prealloc => {
                // Nothing was consumed: the same call succeeds when tried again.
                acks.attempted.truncate(attempted);
                acks.batches.truncate(batches);
                perform(call, &shared, &mut log, &mut acks)
                    .map_err(|e| format!("retrying call {c} ({}) failed: {e}", describe(call)))?;
            }
        }
        c += 1;
    }
    let ops = fs.ops();
    drop(log);
    if poisoned && fs.ops() != ops {
        return Err("dropping the poisoned handle performed operations".into());
    }
    for model in CrashModel::ALL {
        let rebooted = fs.reboot(model, index.wrapping_mul(31) ^ SEED);
        if directory && acks.synced > 0 {
            directory_survives(&rebooted, Path::new(DIR))?;
        }
        check(&rebooted, model, &acks).map_err(|e| format!("after a reboot ({model:?}): {e}"))?;
    }
    // Reopening in place (the process goes on) recovers what was written, and appends.
    let records = check(&fs, CrashModel::ProcessCrash, &acks)
        .map_err(|e| format!("reopening in place: {e}"))?;
    let log = Log::open(DIR, options(&fs)).map_err(|e| format!("reopen in place: {e}"))?;
    let seq = log.append(b"after the fault", Durability::Synced).map_err(|e| e.to_string())?;
    if seq.0 != records.len() as u64 + 1 {
        return Err(format!("append after reopening got {seq}, expected {}", records.len() + 1));
    }
    log.close().map_err(|e| e.to_string())?;
    Ok(refused)
}

/// Every ancestor of `dir` is a directory on the rebooted machine `fs`.
fn directory_survives(fs: &SimFs, dir: &Path) -> Result<(), String> {
    match dir.ancestors().find(|a| fs.list_dir(a).is_err()) {
        Some(lost) => Err(format!("directory {} did not survive the power loss", lost.display())),
        None => Ok(()),
    }
}

/// The faults to inject at an operation of `kind`, with their names.
fn faults_for(kind: OpKind) -> &'static [(Fault, &'static str)] {
    if kind == OpKind::Write {
        &[(Fault::Eio, "EIO"), (Fault::NoSpace, "ENOSPC"), (Fault::ShortWrite, "short write")]
    } else {
        &[(Fault::Eio, "EIO")]
    }
}

#[test]
fn every_failed_operation_is_reported_and_loses_nothing_acknowledged() {
    let steps = workload();
    let calls = calls(&steps);
    let learned = learn(&calls);
    let mut counts: BTreeMap<(Context, OpKind, &str), u64> = BTreeMap::new();
    let mut violations = Vec::new();
    let mut refused = 0;
    for (index, &(kind, context)) in learned.ops.iter().enumerate() {
        for &(fault, name) in faults_for(kind) {
            *counts.entry((context, kind, name)).or_default() += 1;
            match fault_scenario(&calls, &learned, index as u64, fault, false) {
                Ok(n) => refused += n,
                Err(e) => {
                    violations.push(format!("op {index} ({kind:?} in {context:?}), {name}: {e}"));
                }
            }
        }
    }
    println!("{} operations in the workload; scenarios:", learned.ops.len());
    for ((context, kind, fault), n) in &counts {
        println!("  {context:?} {kind:?} {fault}: {n}");
    }
    let total: u64 = counts.values().sum();
    println!(
        "{total} fault scenarios, {refused} later calls refused as Poisoned, {} violations",
        violations.len()
    );
    let writer_ops = |k: OpKind| counts.keys().any(|(c, o, _)| *c == Context::Writer && *o == k);
    assert!(
        writer_ops(OpKind::SyncData) && writer_ops(OpKind::SyncDir) && writer_ops(OpKind::Write)
    );
    assert!(
        violations.is_empty(),
        "{} violations, first ones:\n{}",
        violations.len(),
        violations[..violations.len().min(10)].join("\n")
    );
}

#[test]
fn the_log_directory_survives_a_power_loss_after_any_failed_operation() {
    let steps = workload();
    let calls = calls(&steps);
    let learned = learn(&calls);
    let mut violations = Vec::new();
    for (index, &(kind, context)) in learned.ops.iter().enumerate() {
        for &(fault, name) in faults_for(kind) {
            if let Err(e) = fault_scenario(&calls, &learned, index as u64, fault, true) {
                violations.push(format!("op {index} ({kind:?} in {context:?}), {name}: {e}"));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn a_log_in_new_nested_directories_survives_a_power_loss() {
    let fs = SimFs::new(SEED);
    let dir = Path::new("/data/app/log");
    let log = Log::open(dir, options(&fs)).expect("open");
    log.append(b"synced", Durability::Synced).expect("append");
    log.close().expect("close");
    let rebooted = fs.reboot(CrashModel::LoseUnsynced, 0);
    directory_survives(&rebooted, dir).unwrap();
}

/// One frame of an undamaged segment.
#[derive(Debug, Clone, Copy)]
struct Span {
    offset: usize,
    /// End of the bytes the checksum covers (the padding after it is not checked).
    covered_end: usize,
    records_before: usize,
}

/// One segment of an undamaged log.
#[derive(Debug, Clone)]
struct SegmentImage {
    path: PathBuf,
    id: u64,
    bytes: Vec<u8>,
    frames: Vec<Span>,
}

/// A log on the simulated machine and the layout of its frames.
struct Image {
    fs: SimFs,
    records: Vec<Vec<u8>>,
    segments: Vec<SegmentImage>,
}

impl Image {
    fn of(fs: SimFs, records: Vec<Vec<u8>>) -> Image {
        let mut segments = Vec::new();
        let mut seen = 0;
        for path in fs.files().into_iter().filter(|p| p.extension().is_some_and(|e| e == "seg")) {
            let bytes = fs.read_file(&path).expect("segment");
            let header = factlog::engine::segment::decode_header(&bytes, &path).expect("header");
            let mut frames = Vec::new();
            factlog::engine::segment::scan(&bytes, &header, None, |offset, frame| {
                let covered_end = offset + 24 + frame.payload.len();
                frames.push(Span { offset, covered_end, records_before: seen });
                seen += usize::from(frame.count);
            });
            segments.push(SegmentImage { path, id: header.id.0, bytes, frames });
        }
        assert_eq!(seen, records.len(), "the image holds every record");
        Image { fs, records, segments }
    }

    fn active(&self) -> &SegmentImage {
        self.segments.last().expect("a segment")
    }

    /// A fresh machine holding a copy of the log's files.
    fn copy(&self) -> SimFs {
        let fs = SimFs::new(SEED);
        fs.create_dir_all(Path::new(DIR)).expect("directory");
        for segment in &self.segments {
            fs.write_file(&segment.path, &segment.bytes);
        }
        fs
    }
}

/// Appends `Synced` records of 30-400 bytes (every seventh frame a batch) until the log has
/// four segments and eight frames in the last one.
fn synced_log() -> Image {
    let fs = SimFs::new(SEED ^ 0xD00D);
    let log = Log::open(DIR, options(&fs)).expect("open");
    let mut rng = Rng(SEED);
    let mut records = Vec::new();
    let mut frames_in_last = 0;
    for tag in 0.. {
        let frame: Vec<Vec<u8>> = if tag % 7 == 3 {
            (0..2 + rng.below(2))
                .map(|i| payload(tag * 10 + i, 30 + rng.below(100) as usize))
                .collect()
        } else {
            vec![payload(tag, 30 + rng.below(370) as usize)]
        };
        if frame.len() == 1 {
            log.append(&frame[0], Durability::Synced).expect("append");
        } else {
            log.append_batch(&frame, Durability::Synced).expect("batch");
        }
        records.extend(frame);
        if log.info().expect("info").segments.len() == 4 {
            frames_in_last += 1;
            if frames_in_last == 8 {
                break;
            }
        }
    }
    log.close().expect("close");
    Image::of(fs, records)
}

/// The error names `segment` (or no segment, for its header) at `offset`.
fn at(error: &Error, segment: &SegmentImage, offset: usize) -> Result<(), String> {
    match error.kind() {
        ErrorKind::Corruption { segment: found, path, offset: o, .. }
            if *path == segment.path
                && *o as usize == offset
                && *found == (offset > 0).then_some(SegmentId(segment.id)) =>
        {
            Ok(())
        }
        _ => Err(format!("expected corruption in segment {} at {offset}: {error:?}", segment.id)),
    }
}

/// Reads the whole log through `log`: the records up to the first error, and the error.
fn read_all(log: &Log) -> (Vec<Vec<u8>>, Option<Error>) {
    let mut records = Vec::new();
    let reader = match log.read_from(Seq(1)) {
        Ok(reader) => reader,
        Err(e) => return (records, Some(e)),
    };
    for record in reader {
        match record {
            Ok(record) => records.push(record.payload.to_vec()),
            Err(e) => return (records, Some(e)),
        }
    }
    (records, None)
}

/// The damaged copy `fs` of `image` holds damage that starts in the frame at `offset` of
/// segment `file` (0: the header). Checks that `verify`, a read-only open and a full read,
/// and writer opens in both recovery modes all report it there, never yield a record other
/// than those before it, and change no byte of any segment.
fn expect_reported(image: &Image, fs: &SimFs, file: usize, offset: usize) -> Result<(), String> {
    let segment = &image.segments[file];
    let header = offset == 0;
    let active = file + 1 == image.segments.len();
    let before = if header {
        0
    } else {
        segment.frames.iter().find(|f| f.offset == offset).expect("a frame").records_before
    };
    let damaged: Vec<Option<Vec<u8>>> =
        image.segments.iter().map(|s| fs.read_file(&s.path)).collect();
    let report = factlog::verify(DIR, options(fs)).map_err(|e| format!("verify: {e}"))?;
    match &report.outcome {
        VerifyOutcome::Corrupt(e) => at(e, segment, offset).map_err(|e| format!("verify: {e}"))?,
        other => return Err(format!("verify: {other:?}")),
    }
    for name in ["read-only", "tolerant", "strict"] {
        let opened = match name {
            "read-only" => Log::open_read_only(DIR, options(fs)),
            "tolerant" => Log::open(DIR, options(fs)),
            _ => Log::open(DIR, options(fs).recovery_mode(RecoveryMode::Strict)),
        };
        let error = match opened {
            // Open reads only the headers of sealed segments: a reader meets the damage.
            Ok(log) if !header && !active => {
                if log.recovery_report().tail_cut.is_some() {
                    return Err(format!("{name} open cut a tail: {:?}", log.recovery_report()));
                }
                let (records, error) = read_all(&log);
                if records[..] != image.records[..before] {
                    return Err(format!(
                        "{name}: read {} records, not the {before} before the damage",
                        records.len()
                    ));
                }
                error.ok_or_else(|| format!("{name}: a full read met no damage"))?
            }
            Ok(log) => return Err(format!("{name} open succeeded: {:?}", log.recovery_report())),
            Err(e) => e,
        };
        at(&error, segment, offset).map_err(|e| format!("{name}: {e}"))?;
    }
    for (s, bytes) in image.segments.iter().zip(&damaged) {
        if fs.read_file(&s.path) != *bytes {
            return Err(format!("opening changed {}", s.path.display()));
        }
    }
    Ok(())
}

/// Where damage that changed `original` into `damaged` must be reported: the header (0) or
/// the first frame whose checked bytes changed; `None` if no checked byte changed.
fn first_damaged(segment: &SegmentImage, damaged: &[u8]) -> Option<usize> {
    let changed = |from: usize, to: usize| segment.bytes[from..to] != damaged[from..to];
    if changed(0, 64) {
        return Some(0);
    }
    segment.frames.iter().find(|f| changed(f.offset, f.covered_end)).map(|f| f.offset)
}

#[test]
fn a_flipped_bit_in_any_field_of_a_synced_frame_before_the_tail_is_reported_there() {
    let image = synced_log();
    let mut scenarios = 0;
    let mut violations = Vec::new();
    for (file, segment) in image.segments.iter().enumerate() {
        let active = file + 1 == image.segments.len();
        // The last frame of the active segment has no later frame to witness it: the known
        // limit of format-spec/recovery.md, pinned by the next test.
        let frames =
            if active { &segment.frames[..segment.frames.len() - 1] } else { &segment.frames[..] };
        for frame in frames {
            // crc, len, seq, count, kind, flags, durable lag, first and last payload byte.
            let fields = [0, 4, 8, 16, 18, 19, 20, 24, frame.covered_end - frame.offset - 1];
            for (k, field) in fields.into_iter().enumerate() {
                let bit = ((frame.offset + field) * 8 + k % 8) as u64;
                let fs = image.copy();
                assert!(fs.flip_bit(&segment.path, bit));
                scenarios += 1;
                if let Err(e) = expect_reported(&image, &fs, file, frame.offset) {
                    violations.push(format!("segment {} bit {bit}: {e}", segment.id));
                }
            }
        }
    }
    println!("{scenarios} bit flips in synced frames, {} violations", violations.len());
    assert!(violations.is_empty(), "{}", violations[..violations.len().min(10)].join("\n"));
}

#[test]
fn a_zeroed_sector_of_synced_data_before_the_tail_is_reported_at_its_first_frame() {
    let image = synced_log();
    let mut scenarios = 0;
    let mut violations = Vec::new();
    for (file, segment) in image.segments.iter().enumerate() {
        let active = file + 1 == image.segments.len();
        let witness = segment.frames.last().expect("frames").offset;
        for sector in 0..(segment.bytes.len() / SECTOR_BYTES) as u64 {
            let end = (sector as usize + 1) * SECTOR_BYTES;
            if active && end > witness {
                break; // Later frames must be left to witness the damage.
            }
            let fs = image.copy();
            assert!(fs.zero_sector(&segment.path, sector));
            let damaged = fs.read_file(&segment.path).expect("segment");
            let Some(offset) = first_damaged(segment, &damaged) else { continue };
            scenarios += 1;
            if let Err(e) = expect_reported(&image, &fs, file, offset) {
                violations.push(format!("segment {} sector {sector}: {e}", segment.id));
            }
        }
    }
    println!("{scenarios} zeroed sectors of synced data, {} violations", violations.len());
    assert!(scenarios >= 40, "only {scenarios} sectors held synced frames");
    assert!(violations.is_empty(), "{}", violations[..violations.len().min(10)].join("\n"));
}

#[test]
fn damage_to_the_last_synced_frame_alone_is_cut_as_a_torn_tail_the_known_limit() {
    let image = synced_log();
    let active = image.active();
    let last = active.frames.last().expect("frames");
    let fs = image.copy();
    assert!(fs.flip_bit(&active.path, (last.offset as u64 + 30) * 8));
    let log = Log::open(DIR, options(&fs)).expect("a torn tail opens");
    let cut = log.recovery_report().tail_cut.clone().expect("a cut");
    assert_eq!((cut.segment, cut.offset as usize), (SegmentId(active.id), last.offset));
    let (records, error) = read_all(&log);
    assert!(error.is_none());
    assert_eq!(records[..], image.records[..last.records_before]);
}

/// The synced log reopened with unsynced frames appended (`Flushed` singles and a batch),
/// on a machine that then lost power: its image before the loss, the records, and the offset
/// of the active segment after the last synced frame.
fn log_with_unsynced_tail() -> (SimFs, Image, Acks, usize) {
    let image = synced_log();
    let synced = image.records.len();
    let synced_end = {
        let last = image.active().frames.last().expect("frames");
        let bytes = &image.active().bytes;
        (last.covered_end..bytes.len()).find(|&o| o % 8 == 0).expect("end")
    };
    let fs = image.fs.clone();
    let log = Log::open(DIR, options(&fs)).expect("reopen");
    let mut records = image.records.clone();
    let mut batches = Vec::new();
    for i in 0..6u64 {
        let record = payload(9000 + i, 40 + 50 * i as usize);
        log.append(&record, Durability::Flushed).expect("append");
        records.push(record);
    }
    let batch = [payload(9100, 60), payload(9101, 70)];
    log.append_batch(&batch, Durability::Flushed).expect("batch");
    batches.push((records.len() as u64 + 1, records.len() as u64 + 2));
    records.extend(batch);
    fs.halt();
    drop(log);
    let acks = Acks {
        attempted: records.clone(),
        batches,
        synced: synced as u64,
        flushed: records.len() as u64,
    };
    let written = fs.reboot(CrashModel::ProcessCrash, 0);
    let tail = Image::of(written, records);
    assert_eq!(tail.segments.len(), 4, "the unsynced frames are in the active segment");
    (fs, tail, acks, synced_end)
}

/// A cut, if any, starts at or after `synced_end` in the active segment.
fn cut_is_after(
    cut: Option<&TailCut>,
    active: &SegmentImage,
    synced_end: usize,
) -> Result<(), String> {
    match cut {
        Some(cut) if cut.path != active.path || (cut.offset as usize) < synced_end => Err(format!(
            "cut {cut:?} reaches before the end of the last synced frame ({synced_end})"
        )),
        _ => Ok(()),
    }
}

#[test]
fn tolerate_torn_tail_cuts_only_after_the_last_acknowledged_synced_frame() {
    let (fs, image, acks, synced_end) = log_with_unsynced_tail();
    let active = image.active();
    let mut cuts = 0;
    let mut scenarios = 0;
    for seed in 0..300u64 {
        let model = match seed {
            0 => CrashModel::ProcessCrash,
            1 => CrashModel::LoseUnsynced,
            _ => CrashModel::TornSectors,
        };
        let rebooted = fs.reboot(model, seed);
        scenarios += 1;
        let report = factlog::verify(DIR, options(&rebooted)).expect("verify");
        let verified = match &report.outcome {
            VerifyOutcome::Clean => None,
            VerifyOutcome::TornTail(cut) => Some(cut.clone()),
            VerifyOutcome::Corrupt(e) => panic!("seed {seed}: a torn write is not corruption: {e}"),
        };
        cut_is_after(verified.as_ref(), active, synced_end)
            .unwrap_or_else(|e| panic!("verify, seed {seed}: {e}"));
        let log = Log::open(DIR, options(&rebooted)).expect("open");
        let cut = log.recovery_report().tail_cut.clone();
        // Only a writer open keeps the cut bytes aside; verify reports the rest exactly.
        let unkept = cut.clone().map(|c| factlog::TailCut { kept: None, ..c });
        assert_eq!(unkept, verified, "seed {seed}: open cuts what verify reports");
        if let Some(c) = &cut {
            assert_eq!(c.kept.is_some(), c.frames > 0, "seed {seed}: kept when frames follow");
        }
        cut_is_after(cut.as_ref(), active, synced_end)
            .unwrap_or_else(|e| panic!("open, seed {seed}: {e}"));
        cuts += usize::from(cut.is_some());
        drop(log);
        check(&rebooted, model, &acks).unwrap_or_else(|e| panic!("seed {seed} ({model:?}): {e}"));
    }
    println!("{scenarios} power losses over an unsynced tail, {cuts} torn tails cut");
    assert!(cuts > 50, "the torn-sector model produced only {cuts} torn tails");
}

#[test]
fn damage_before_a_torn_tail_is_still_corruption_and_nothing_is_cut() {
    let (fs, image, _, synced_end) = log_with_unsynced_tail();
    let file = image.segments.len() - 1;
    let active = image.active();
    let mut scenarios = 0;
    for (n, frame) in active.frames.iter().enumerate().filter(|(_, f)| f.covered_end < synced_end) {
        // Every synced frame but the last has a later synced frame that witnesses it.
        let last_synced = active.frames.iter().rev().find(|f| f.covered_end < synced_end);
        if last_synced.is_some_and(|l| l.offset == frame.offset) {
            continue;
        }
        for seed in 0..8u64 {
            let rebooted = fs.reboot(CrashModel::TornSectors, seed * 1000 + n as u64);
            assert!(rebooted.flip_bit(&active.path, ((frame.offset + 24) * 8) as u64));
            scenarios += 1;
            let report = factlog::verify(DIR, options(&rebooted)).expect("verify");
            match &report.outcome {
                VerifyOutcome::Corrupt(e) => at(e, &image.segments[file], frame.offset).unwrap(),
                other => panic!("frame at {}, seed {seed}: {other:?}", frame.offset),
            }
            let before = rebooted.read_file(&active.path);
            let err = Log::open(DIR, options(&rebooted)).expect_err("damage is refused");
            at(&err, &image.segments[file], frame.offset).unwrap();
            assert_eq!(rebooted.read_file(&active.path), before, "nothing was cut");
        }
    }
    println!("{scenarios} damaged synced frames before a torn tail");
    assert!(scenarios >= 40);
}
