//! Target `damaged_tail`: damage at the end of a closed or crashed log, judged by the rule of
//! the log mark's damage sweep (`tests/mark_damage_sweep.rs`, `format-spec/mark.md`): a
//! writer open either refuses the damage or recovers every record it owes, never less.
//!
//! The input chooses a workload (appends in all three tiers, records larger than the writer's
//! buffer, batches, flushes, reopens) run on the simulated file system without background
//! threads, how it ends (a clean close then a power loss, or a crash under a chosen model), how
//! often the mark moves (at every group commit, or only at an open's first write, a roll and a
//! clean close: then the synced records after the mark's durable seq are the documented
//! window), and up to three damages: bit flips, garbage bytes, zeroed runs, stale bytes from an
//! earlier copy of the file and truncations, at offsets relative to the end of the active
//! segment's valid frames (its last part and its zero tail), and flips or truncations of
//! `MARK`. Then a writer open must either
//! - refuse with a corruption error naming one of the damaged files, leaving every file byte
//!   for byte as it found it; or
//! - open a gap-free log from seq 1 whose every record is the one appended at its seq, holding
//!   every record after a clean close and every record acknowledged `Synced` after a crash,
//!   unless the mark only moves at rolls and the lost records follow its durable seq: then the
//!   cut must be reported at the first lost seq (or nothing was left to cut: only zeros, the
//!   limit `format-spec/mark.md` states). Every byte the open changed lies in the reported cut, a cut with valid
//!   frames after its hole was kept aside byte for byte, there is no cut after a clean close
//!   unless `MARK` was damaged (or the log was never written to, so has none), and a second
//!   open cuts nothing and ends at the same seq.
//!
//! Any violation panics with the whole case. The undamaged image must itself recover every
//! acknowledged record (after a process crash, every `Flushed` one too).
//!
//! Input: a control byte (bit 0: crash rather than clean close; bits 1-2: the crash model;
//! bit 3: the mark moves only at rolls), the seed of the simulated machine (8 bytes), the step
//! count (1 byte) and one step per tag byte with its operands (as `ops_crash`), then the damage
//! count (1 byte) and each damage: its kind (1 byte), a position (2 bytes: a signed offset from
//! the end of the frames, or for `MARK` and absolute truncations an offset from the start) and
//! a value (1 byte), garbage damages followed by their bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use factlog::engine::mark::{MARK_FILE_NAME, MarkState};
use factlog::fs::sim::{CrashModel, SimFs};
use factlog::{Durability, Error, ErrorKind, Log, Options, Seq, TailCut};

use super::input::Input;

/// The log directory inside the simulated machine.
pub const DIR: &str = "/log";

/// Steps one input may describe.
const STEPS_MAX: u8 = 64;

/// Records in one batch step, at most.
const BATCH_RECORDS_MAX: u8 = 6;

/// Scales a length byte into a record larger than the 4 KiB buffer that fits an 8 KiB
/// segment: 255 * 24 + 24 bytes of frame header fit in 8192 - 64.
const BIG_RECORD_SCALE: usize = 24;

/// Damages one input may describe.
const DAMAGES_MAX: u8 = 3;

/// Garbage bytes one damage writes, at most.
const GARBAGE_MAX: u8 = 16;

/// A zeroed run or a stale copy spans `1 + value` units of this many bytes: up to 4 KiB.
const RUN_UNIT_BYTES: usize = 16;

/// What one input led to, so the corpus replay can check that the seeds reach every verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// The workload ended in a crash (else a clean close).
    pub crashed: bool,
    /// The damages changed the image.
    pub damaged: bool,
    /// The writer open refused the damaged image.
    pub refused: bool,
    /// It opened it.
    pub opened: bool,
    /// It cut a torn tail.
    pub cut: bool,
    /// The cut had valid frames after its hole, kept aside.
    pub kept: bool,
    /// Synced records after the mark's durable seq were lost (in its window), reported or
    /// not.
    pub window_loss: bool,
    /// Records the open recovered.
    pub records: u64,
}

/// One step of the workload.
#[derive(Clone)]
enum Step {
    Append(Vec<u8>, Durability),
    Batch(Vec<Vec<u8>>, Durability),
    Flush(Durability),
    Reopen,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Append(record, tier) => write!(f, "append {} bytes {tier:?}", record.len()),
            Step::Batch(records, tier) => {
                let lens: Vec<usize> = records.iter().map(Vec::len).collect();
                write!(f, "batch of {lens:?} bytes {tier:?}")
            }
            Step::Flush(tier) => write!(f, "flush {tier:?}"),
            Step::Reopen => f.write_str("reopen"),
        }
    }
}

/// One damage.
#[derive(Debug, Clone)]
enum Damage {
    /// Flip bit `bit` of the byte at the offset from the end of the frames.
    Flip(i64, u8),
    /// Write bytes there.
    Garbage(i64, Vec<u8>),
    /// Zero this many bytes there.
    Zero(i64, usize),
    /// Put back this many bytes of the earlier copy `copy` of the file there.
    Stale(i64, usize, u8),
    /// Truncate the active segment there.
    Truncate(i64),
    /// Truncate the active segment to this many bytes.
    TruncateTo(usize),
    /// Flip bit `bit` of this byte of `MARK`.
    MarkFlip(usize, u8),
    /// Truncate `MARK` to this many bytes.
    MarkTruncate(usize),
}

/// The body of the target.
pub fn run(data: &[u8]) -> Outcome {
    let mut input = Input::new(data);
    let control = input.u8();
    let crashed = control & 1 == 1;
    let model = CrashModel::ALL[usize::from(control >> 1 & 3) % 3];
    let lazy_mark = control & 8 != 0;
    let seed = input.u64();
    let count = input.u8() % (STEPS_MAX + 1);
    let steps: Vec<Step> = (0..count).map(|i| step(&mut input, usize::from(i))).collect();
    let damages: Vec<Damage> =
        (0..1 + input.u8() % DAMAGES_MAX).map(|_| damage(&mut input)).collect();
    let case = Case { crashed, model, lazy_mark, seed, steps, damages };
    match case.check() {
        Ok(outcome) => outcome,
        Err(violation) => panic!("{violation}\ncase: {case:#?}"),
    }
}

fn step(input: &mut Input<'_>, index: usize) -> Step {
    let tag = input.u8();
    let tier = match (tag >> 3) % 3 {
        0 => Durability::Buffered,
        1 => Durability::Flushed,
        _ => Durability::Synced,
    };
    match tag & 7 {
        0..=3 => Step::Append(record(index, 0, usize::from(input.u8())), tier),
        4 => Step::Append(record(index, 0, usize::from(input.u8()) * BIG_RECORD_SCALE), tier),
        5 => {
            let count = 1 + input.u8() % BATCH_RECORDS_MAX;
            let records =
                (0..count).map(|i| record(index, i + 1, usize::from(input.u8()))).collect();
            Step::Batch(records, tier)
        }
        6 => Step::Flush(tier),
        _ => Step::Reopen,
    }
}

/// A record that names its step and its place in a batch, `len` bytes long (at least the
/// name), so that no two records of a workload are equal.
pub fn record(index: usize, part: u8, len: usize) -> Vec<u8> {
    let mut bytes = format!("s{index}.{part}:").into_bytes();
    let fill = len.saturating_sub(bytes.len());
    bytes.extend((0..fill).map(|i| (i as u8).wrapping_mul(13).wrapping_add(part)));
    bytes
}

fn damage(input: &mut Input<'_>) -> Damage {
    let kind = input.u8();
    let position = input.u16();
    let value = input.u8();
    let relative = i64::from(position as i16);
    let run = (1 + usize::from(value)) * RUN_UNIT_BYTES;
    match kind % 8 {
        0 => Damage::Flip(relative, value % 8),
        1 => {
            let garbage = input.bytes(usize::from(1 + value % GARBAGE_MAX)).to_vec();
            Damage::Garbage(relative, garbage)
        }
        2 => Damage::Zero(relative, run),
        3 => Damage::Stale(relative, run, value),
        4 => Damage::Truncate(relative),
        5 => Damage::TruncateTo(usize::from(position)),
        6 => Damage::MarkFlip(usize::from(position), value % 8),
        _ => Damage::MarkTruncate(usize::from(position)),
    }
}

fn options(fs: &SimFs, lazy_mark: bool) -> Options {
    let interval = if lazy_mark { Duration::from_secs(60) } else { Duration::from_nanos(1) };
    Options::new()
        .segment_bytes(8192)
        .buffer_bytes(4096)
        .background_threads(false)
        .mark_interval(interval)
        .fs(Arc::new(fs.clone()))
}

/// One case: the workload, its end and the damages.
#[derive(Debug)]
struct Case {
    crashed: bool,
    model: CrashModel,
    lazy_mark: bool,
    seed: u64,
    steps: Vec<Step>,
    damages: Vec<Damage>,
}

/// What the workload appended and was promised, and copies of the active segment taken
/// after each step.
#[derive(Default)]
struct Acks {
    written: Vec<Vec<u8>>,
    synced: u64,
    flushed: u64,
    history: Vec<(PathBuf, Vec<u8>)>,
}

impl Acks {
    fn acknowledge(&mut self, through: u64, tier: Durability) {
        if tier >= Durability::Flushed {
            self.flushed = self.flushed.max(through);
        }
        if tier == Durability::Synced {
            self.synced = self.synced.max(through);
        }
    }
}

fn segments(fs: &SimFs) -> Vec<PathBuf> {
    let is_segment = |p: &PathBuf| {
        p.parent() == Some(Path::new(DIR))
            && p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| factlog::engine::segment::parse_file_name(n).is_some())
    };
    let mut segs: Vec<PathBuf> = fs.files().into_iter().filter(is_segment).collect();
    segs.sort();
    segs
}

/// Every file of `fs` with its bytes.
fn files_of(fs: &SimFs) -> BTreeMap<PathBuf, Vec<u8>> {
    fs.files().into_iter().filter_map(|p| fs.read_file(&p).map(|bytes| (p, bytes))).collect()
}

impl Case {
    fn check(&self) -> Result<Outcome, String> {
        let mut outcome = Outcome { crashed: self.crashed, ..Outcome::default() };
        let (image, acks) = self.image();
        let owed = if self.crashed { acks.synced } else { acks.written.len() as u64 };
        // The undamaged image (on a copy: a process-crash reboot keeps every byte).
        let baseline = open_and_read(&image.reboot(CrashModel::ProcessCrash, 0), self.lazy_mark)
            .map_err(|e| format!("the undamaged image does not open: {e}"))?;
        let promised = match (self.crashed, self.model) {
            (true, CrashModel::ProcessCrash) => owed.max(acks.flushed),
            _ => owed,
        };
        self.check_records(&acks, &baseline.records)?;
        if (baseline.records.len() as u64) < promised {
            return Err(format!(
                "the undamaged image holds {} records, {promised} were acknowledged",
                baseline.records.len()
            ));
        }
        // A log never written to has no mark (it is written before the first write).
        let (vouched, marked) = match factlog::engine::mark::read(&image, Path::new(DIR)) {
            Ok(MarkState::Found(mark)) => (mark.durable_seq, true),
            Ok(MarkState::Absent) if acks.written.is_empty() => (0, false),
            other => return Err(format!("the undamaged image's mark: {other:?}")),
        };

        let undamaged = files_of(&image);
        let names = self.damage(&image, &acks.history);
        let before = files_of(&image);
        outcome.damaged = before != undamaged;
        let log = match Log::open(DIR, options(&image, self.lazy_mark)) {
            Ok(log) => log,
            Err(e) => {
                outcome.refused = true;
                if !outcome.damaged {
                    return Err(format!("an undamaged image was refused: {e}"));
                }
                check_refusal(&e, &names)?;
                if files_of(&image) != before {
                    return Err(format!("the refused open ({e}) changed the image"));
                }
                return Ok(outcome);
            }
        };
        outcome.opened = true;
        let report = log.recovery_report().clone();
        let cut = report.tail_cut.clone();
        outcome.cut = cut.is_some();
        outcome.kept = cut.as_ref().is_some_and(|c| c.kept.is_some());
        super::changes::check_changes(&before, &files_of(&image), cut.as_ref())?;
        let first = log.first_seq().map_err(|e| format!("first seq: {e}"))?;
        if first != Seq(1) {
            return Err(format!("silent loss: the log now starts at {first}"));
        }
        let mut records = Vec::new();
        for record in log.read_from(Seq(1)).map_err(|e| format!("read: {e}"))? {
            let record = record.map_err(|e| format!("read: {e}"))?;
            if record.seq.0 != records.len() as u64 + 1 {
                return Err(format!("a gap before seq {}", record.seq));
            }
            records.push(record.payload.to_vec());
        }
        self.check_records(&acks, &records)?;
        let last = records.len() as u64;
        outcome.records = last;
        if report.last_seq.map_or(0, |s| s.0) != last {
            return Err(format!("read through {last}, the report says {:?}", report.last_seq));
        }
        if let Some(cut) = &cut
            && cut.first_seq_cut.0 != last + 1
        {
            return Err(format!("the cut reports seq {} first lost, the log ends at {last}", {
                cut.first_seq_cut
            }));
        }
        if last < owed {
            // Only in the window the mark leaves open, with the cut reported at the first lost
            // seq (checked above), or nothing left to cut (only zeros: the limit
            // `format-spec/mark.md` states).
            // With `MARK` damaged too, what its lost slot vouched for is unknown: a second
            // damage to the log there reads as a window loss (`format-spec/mark.md`, "Reading").
            let mark_hit = names.iter().any(|p| p.ends_with(MARK_FILE_NAME));
            let in_window = (self.crashed && self.lazy_mark && last >= vouched) || mark_hit;
            if !in_window {
                return Err(format!(
                    "silent loss: records {}..={owed} were acknowledged, the open kept through \
                     {last} (mark vouched through {vouched}, cut {cut:?})",
                    last + 1
                ));
            }
            outcome.window_loss = true;
        }
        if !outcome.damaged && records != baseline.records {
            return Err("the damages changed nothing, yet the open read other records".into());
        }
        let mark_damaged = names.iter().any(|p| p.ends_with(MARK_FILE_NAME));
        if !self.crashed && cut.is_some() && marked && !mark_damaged {
            return Err(format!("a tail cut after a clean close: {cut:?}"));
        }
        log.close().map_err(|e| format!("close after the open: {e}"))?;
        let again = open_and_read(&image, self.lazy_mark)
            .map_err(|e| format!("a second open failed: {e}"))?;
        if again.cut.is_some() || again.records != records {
            return Err(format!("a second open disagrees: cut {:?}", again.cut));
        }
        Ok(outcome)
    }

    /// Runs the workload and returns the image it left, and what it was promised.
    fn image(&self) -> (SimFs, Acks) {
        let fs = SimFs::new(self.seed);
        let mut acks = Acks::default();
        let mut log = Log::open(DIR, options(&fs, self.lazy_mark)).expect("a new log opens");
        let last = |log: &Log| log.last_seq().map_or(0, |s| s.0);
        for step in &self.steps {
            match step {
                Step::Append(record, tier) => {
                    log.append(record, *tier).expect("append");
                    acks.written.push(record.clone());
                    acks.acknowledge(last(&log), *tier);
                }
                Step::Batch(records, tier) => {
                    log.append_batch(records, *tier).expect("append a batch");
                    acks.written.extend(records.iter().cloned());
                    acks.acknowledge(last(&log), *tier);
                }
                Step::Flush(tier) => {
                    log.flush(*tier).expect("flush");
                    acks.acknowledge(last(&log), (*tier).max(Durability::Flushed));
                }
                Step::Reopen => {
                    let through = last(&log);
                    log.close().expect("close");
                    acks.acknowledge(through, Durability::Synced);
                    log = Log::open(DIR, options(&fs, self.lazy_mark)).expect("reopen");
                }
            }
            let durable = log.durable_seq().map_or(0, |s| s.0);
            acks.synced = acks.synced.max(durable);
            if let Some(active) = segments(&fs).pop() {
                let bytes = fs.read_file(&active).expect("the active segment");
                if acks.history.last().is_none_or(|(p, b)| *p != active || *b != bytes) {
                    acks.history.push((active, bytes));
                }
            }
        }
        let image = if self.crashed {
            fs.halt();
            drop(log);
            fs.reboot(self.model, self.seed ^ 0x7E57)
        } else {
            let through = last(&log);
            log.close().expect("a clean close");
            acks.acknowledge(through, Durability::Synced);
            fs.reboot(CrashModel::LoseUnsynced, self.seed)
        };
        (image, acks)
    }

    /// Every record read is the one appended at its seq.
    fn check_records(&self, acks: &Acks, records: &[Vec<u8>]) -> Result<(), String> {
        for (i, record) in records.iter().enumerate() {
            match acks.written.get(i) {
                Some(written) if written == record => {}
                Some(_) => return Err(format!("record {} differs from what was appended", i + 1)),
                None => return Err(format!("record {} was never appended", i + 1)),
            }
        }
        Ok(())
    }

    /// Applies the damages to `image`; returns the files they touched.
    fn damage(&self, image: &SimFs, history: &[(PathBuf, Vec<u8>)]) -> Vec<PathBuf> {
        let active = segments(image).pop().expect("a segment");
        let mark = Path::new(DIR).join(MARK_FILE_NAME);
        let bytes = image.read_file(&active).expect("the active segment");
        let frames_end = factlog::engine::segment::decode_header(&bytes, &active)
            .map(|header| factlog::engine::recovery::analyze_tail(&bytes, &header).end_offset)
            .unwrap_or(64) as i64;
        let copies: Vec<&Vec<u8>> =
            history.iter().filter(|(p, _)| *p == active).map(|(_, b)| b).collect();
        let mut names = Vec::new();
        for damage in &self.damages {
            let path = match damage {
                Damage::MarkFlip(..) | Damage::MarkTruncate(_) => &mark,
                _ => &active,
            };
            let Some(mut file) = image.read_file(path) else { continue };
            let here = match damage {
                Damage::Flip(relative, _)
                | Damage::Garbage(relative, _)
                | Damage::Zero(relative, _)
                | Damage::Stale(relative, ..)
                | Damage::Truncate(relative) => at_offset(&file, frames_end, *relative),
                _ => 0,
            };
            match damage {
                Damage::MarkFlip(at, bit) => flip(&mut file, *at, *bit),
                Damage::MarkTruncate(len) | Damage::TruncateTo(len) => {
                    file.truncate(len % (file.len() + 1));
                }
                Damage::Flip(_, bit) => flip(&mut file, here, *bit),
                Damage::Garbage(_, garbage) => overwrite(&mut file, here, garbage),
                Damage::Zero(_, len) => overwrite(&mut file, here, &vec![0; *len]),
                Damage::Stale(_, len, copy) => {
                    let Some(old) = copies.get(usize::from(*copy) % copies.len().max(1)) else {
                        continue;
                    };
                    let end = (here + len).min(old.len());
                    overwrite(&mut file, here, old.get(here..end).unwrap_or_default());
                }
                Damage::Truncate(_) => file.truncate(here),
            }
            image.write_file(path, &file);
            names.push(path.clone());
        }
        names
    }
}

/// The offset `relative` bytes from the end of the frames, inside `bytes` (or at its end).
fn at_offset(bytes: &[u8], frames_end: i64, relative: i64) -> usize {
    usize::try_from((frames_end + relative).max(0)).unwrap_or(0).min(bytes.len())
}

fn flip(bytes: &mut [u8], at: usize, bit: u8) {
    let len = bytes.len();
    if let Some(byte) = bytes.get_mut(at.min(len.saturating_sub(1))) {
        *byte ^= 1 << bit;
    }
}

fn overwrite(bytes: &mut [u8], at: usize, with: &[u8]) {
    let end = (at + with.len()).min(bytes.len());
    if at < end {
        bytes[at..end].copy_from_slice(&with[..end - at]);
    }
}

/// What an open read, and the tail it cut.
struct Read {
    records: Vec<Vec<u8>>,
    cut: Option<TailCut>,
}

fn open_and_read(fs: &SimFs, lazy_mark: bool) -> factlog::Result<Read> {
    let log = Log::open(DIR, options(fs, lazy_mark))?;
    let mut records = Vec::new();
    for record in log.read_from(Seq(1))? {
        records.push(record?.payload.to_vec());
    }
    let cut = log.recovery_report().tail_cut.clone();
    log.close()?;
    Ok(Read { records, cut })
}

/// A refusal: a corruption error naming one of the damaged files.
fn check_refusal(e: &Error, names: &[PathBuf]) -> Result<(), String> {
    let path = match e.kind() {
        ErrorKind::Corruption { path, .. } | ErrorKind::UnsupportedVersion { path, .. } => path,
        _ => return Err(format!("refused with an error that is not corruption: {e:?}")),
    };
    if !path.starts_with(DIR) || !e.to_string().contains(&path.display().to_string()) {
        return Err(format!("the refusal does not name a file of the log: {e}"));
    }
    if !names.contains(path) {
        return Err(format!("the refusal names {}, not a damaged file: {e}", path.display()));
    }
    Ok(())
}

/// Builds a `damaged_tail` input (see [`run`] for the layout).
#[derive(Debug, Clone)]
pub struct SeedInput {
    bytes: Vec<u8>,
    steps: u8,
    steps_at: usize,
}

/// Step tags: the operation in the low three bits, the tier above them.
pub mod tag {
    /// `Buffered`.
    pub const BUFFERED: u8 = 0;
    /// `Flushed`.
    pub const FLUSHED: u8 = 1 << 3;
    /// `Synced`.
    pub const SYNCED: u8 = 2 << 3;
    /// One record of the length byte that follows.
    pub const APPEND: u8 = 0;
    /// One record of 24 times the length byte that follows.
    pub const APPEND_BIG: u8 = 4;
    /// A batch: the count minus one, then a length byte per record.
    pub const BATCH: u8 = 5;
    /// A flush to the tier.
    pub const FLUSH: u8 = 6;
    /// A clean close and a reopen.
    pub const REOPEN: u8 = 7;
}

/// Damage kinds (the kind byte).
pub mod kind {
    /// Flip a bit at an offset from the end of the frames.
    pub const FLIP: u8 = 0;
    /// Write garbage bytes there.
    pub const GARBAGE: u8 = 1;
    /// Zero `(1 + value) * 16` bytes there.
    pub const ZERO: u8 = 2;
    /// Put back bytes of an earlier copy of the file there.
    pub const STALE: u8 = 3;
    /// Truncate the active segment there.
    pub const TRUNCATE: u8 = 4;
    /// Truncate the active segment to an absolute length.
    pub const TRUNCATE_TO: u8 = 5;
    /// Flip a bit of `MARK`.
    pub const MARK_FLIP: u8 = 6;
    /// Truncate `MARK`.
    pub const MARK_TRUNCATE: u8 = 7;
}

impl SeedInput {
    /// A case: crashed under `model` (`None`: a clean close), the mark moving only at rolls
    /// when `lazy_mark`, on the machine of `seed`.
    #[must_use]
    pub fn new(model: Option<CrashModel>, lazy_mark: bool, seed: u64) -> SeedInput {
        let model_bits = match model {
            None | Some(CrashModel::ProcessCrash) => 0,
            Some(CrashModel::LoseUnsynced) => 1,
            Some(CrashModel::TornSectors) => 2,
        };
        let control = u8::from(model.is_some()) | model_bits << 1 | u8::from(lazy_mark) << 3;
        let mut bytes = vec![control];
        bytes.extend_from_slice(&seed.to_le_bytes());
        let steps_at = bytes.len();
        bytes.push(0);
        SeedInput { bytes, steps: 0, steps_at }
    }

    /// A step: its tag and operands.
    #[must_use]
    pub fn step(mut self, tag: u8, operands: &[u8]) -> SeedInput {
        self.bytes.push(tag);
        self.bytes.extend_from_slice(operands);
        self.steps += 1;
        self.bytes[self.steps_at] = self.steps;
        self
    }

    /// The damages: `(kind, position, value, garbage)`.
    #[must_use]
    pub fn damages(mut self, damages: &[(u8, i16, u8, &[u8])]) -> Vec<u8> {
        let count = u8::try_from(damages.len() - 1).expect("at most three damages");
        self.bytes.push(count);
        for (kind, position, value, garbage) in damages {
            self.bytes.push(*kind);
            self.bytes.extend_from_slice(&position.to_le_bytes());
            self.bytes.push(*value);
            self.bytes.extend_from_slice(garbage);
        }
        self.bytes
    }
}

/// The seeds: each reaches one verdict (`fuzz/src/seeds.rs` writes them).
#[must_use]
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use tag::{APPEND, APPEND_BIG, BATCH, BUFFERED, FLUSH, FLUSHED, REOPEN, SYNCED};
    // Records in every tier, two larger than the buffer (a roll), a reopen, then a synced
    // record and four flushed ones after it (payloads of 60 bytes: 88-byte frames).
    let workload = |model, lazy| {
        SeedInput::new(model, lazy, 0x5EED)
            .step(APPEND | SYNCED, &[120])
            .step(BATCH | BUFFERED, &[2, 30, 40, 50])
            .step(APPEND_BIG | FLUSHED, &[200])
            .step(APPEND_BIG | SYNCED, &[150])
            .step(APPEND | BUFFERED, &[90])
            .step(FLUSH | SYNCED, &[])
            .step(REOPEN, &[])
            .step(APPEND | SYNCED, &[60])
            .step(APPEND | FLUSHED, &[60])
            .step(APPEND | FLUSHED, &[60])
            .step(APPEND | FLUSHED, &[60])
            .step(APPEND | FLUSHED, &[60])
    };
    let frame = i16::try_from(factlog::engine::frame::frame_bytes(60)).expect("a small frame");
    let closed = || workload(None, false);
    let crashed = |model| workload(Some(model), false);
    vec![
        // After a clean close: a flip in the last record is refused (the mark vouches for it).
        ("closed-flip-last-record", closed().damages(&[(kind::FLIP, -40, 3, &[])])),
        // A flip in the zero tail after a clean close: refused, nothing may follow the end.
        ("closed-flip-zero-tail", closed().damages(&[(kind::FLIP, 700, 5, &[])])),
        // `MARK` without a valid slot: refused naming it.
        ("closed-mark-truncated", closed().damages(&[(kind::MARK_TRUNCATE, 0, 0, &[])])),
        // A flip in the mark's newest slot: the older mark judges.
        ("closed-mark-flip", closed().damages(&[(kind::MARK_FLIP, 530, 1, &[])])),
        // After a process crash, the four flushed records were never synced: garbage after
        // them is a torn tail, cut.
        (
            "process-crash-garbage-after-frames",
            crashed(CrashModel::ProcessCrash).damages(&[(kind::GARBAGE, 16, 7, &[0xAB; 8])]),
        ),
        // The second of the four flushed frames zeroed: a hole with valid frames after it that
        // never vouched for it, cut and kept aside.
        (
            "process-crash-hole-in-unsynced-frames",
            crashed(CrashModel::ProcessCrash).damages(&[(kind::ZERO, -3 * frame, 4, &[])]),
        ),
        // A synced record truncated away: refused below the mark's durable end.
        (
            "lose-unsynced-truncate-below-mark",
            crashed(CrashModel::LoseUnsynced).damages(&[(kind::TRUNCATE, -60, 0, &[])]),
        ),
        // The active segment truncated to 100 bytes.
        (
            "torn-sectors-truncate-to-100",
            crashed(CrashModel::TornSectors).damages(&[(kind::TRUNCATE_TO, 100, 0, &[])]),
        ),
        // An earlier copy of the last bytes: stale data where synced records were.
        (
            "process-crash-stale-tail",
            crashed(CrashModel::ProcessCrash).damages(&[(kind::STALE, -5 * frame, 63, &[])]),
        ),
        // The mark moves only at rolls: a lost synced record in its window must be reported.
        (
            "lazy-mark-flip-in-window",
            workload(Some(CrashModel::LoseUnsynced), true)
                .damages(&[(kind::FLIP, -40, 2, &[]), (kind::FLIP, 900, 0, &[])]),
        ),
    ]
}
