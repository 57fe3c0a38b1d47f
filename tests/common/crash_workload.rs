//! A seeded workload of appends (all three tiers, batches, flushes, reopens, segment rolls)
//! run on the simulated file system, and the checker of what must hold after any crash:
//! 1. every record acknowledged as `Synced` (or covered by a synced flush or a clean close)
//!    is present, byte-identical and in order;
//! 2. after a process crash (no power loss), every `Flushed` acknowledgement survives too;
//! 3. the recovered log is an exact prefix of what was appended: no gap, no reordering, no
//!    record never written, no torn batch;
//! 4. opening again gives the same records and cuts nothing more.
//!
//! Shared by the crash-sweep test and the operations fuzz target.

#![allow(dead_code, reason = "each user takes a different subset")]

use std::path::Path;
use std::sync::Arc;

use factlog::fs::sim::{CrashModel, SimFs};
use factlog::{Durability, Log, Options, Seq};

/// The log directory inside the simulated machine.
pub const DIR: &str = "/log";

/// One step of a workload.
#[derive(Debug, Clone)]
pub enum Step {
    /// Append one record.
    Append(Vec<u8>, Durability),
    /// Append a batch frame.
    Batch(Vec<Vec<u8>>, Durability),
    /// Make everything appended meet a tier.
    Flush(Durability),
    /// Close the log and open it again.
    Reopen,
}

thread_local! {
    /// The segment capacity of the workloads run on this thread: 8 KiB (preallocated whole)
    /// unless a test sets another, as the growth sweep does to make segments grow in steps.
    /// Per thread, not per process: the tests of one executable run side by side.
    pub static SEGMENT_BYTES: std::cell::Cell<u64> = const { std::cell::Cell::new(8192) };
}

/// Options of every workload: small segments so that a few hundred records roll several
/// times, no background threads so that the sequence of I/O operations is deterministic.
pub fn options(fs: &SimFs) -> Options {
    Options::new()
        .segment_bytes(SEGMENT_BYTES.get())
        .buffer_bytes(4096)
        .background_threads(false)
        .fs(Arc::new(fs.clone()))
}

/// A tiny deterministic generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn durability(n: u64) -> Durability {
    match n % 10 {
        0..=4 => Durability::Buffered,
        5..=7 => Durability::Flushed,
        _ => Durability::Synced,
    }
}

fn payload(rng: &mut Rng, tag: u64) -> Vec<u8> {
    let len = 1 + rng.below(180) as usize;
    let mut bytes = format!("r{tag}:").into_bytes();
    bytes.extend((0..len).map(|i| (tag as usize * 7 + i) as u8));
    bytes
}

/// `steps` random steps from `seed`.
pub fn generate(seed: u64, steps: usize) -> Vec<Step> {
    let mut rng = Rng(seed);
    (0..steps as u64)
        .map(|tag| match rng.below(100) {
            0..=79 => Step::Append(payload(&mut rng, tag), durability(rng.next())),
            80..=91 => {
                let n = 1 + rng.below(6);
                let records = (0..n).map(|i| payload(&mut rng, tag * 10 + i)).collect();
                Step::Batch(records, durability(rng.next()))
            }
            92..=97 => Step::Flush(durability(rng.next())),
            _ => Step::Reopen,
        })
        .collect()
}

/// What a run appended and what it was promised.
#[derive(Debug, Default, Clone)]
pub struct Acks {
    /// Every record whose append was attempted, in sequence order (index = seq - 1). The
    /// last ones may not have been acknowledged.
    pub attempted: Vec<Vec<u8>>,
    /// Sequence-number ranges `[first, last]` of batch frames.
    pub batches: Vec<(u64, u64)>,
    /// Every record up to this seq was acknowledged as on stable storage.
    pub synced: u64,
    /// Every record up to this seq was acknowledged as in the kernel.
    pub flushed: u64,
}

/// Runs `steps` against the log in [`DIR`] on `fs`, starting at `acks` (records already in
/// the log), until the steps end or an operation fails (the crash point).
pub fn run(fs: &SimFs, steps: &[Step], acks: &mut Acks) {
    let Ok(mut log) = Log::open(DIR, options(fs)) else { return };
    for step in steps {
        let next = acks.attempted.len() as u64 + 1;
        match step {
            Step::Append(record, tier) => {
                acks.attempted.push(record.clone());
                match log.append(record, *tier) {
                    Ok(seq) => {
                        assert_eq!(seq, Seq(next), "seqs are handed out in order");
                        acknowledge(acks, next, *tier);
                    }
                    Err(_) => return,
                }
            }
            Step::Batch(records, tier) => {
                acks.attempted.extend(records.iter().cloned());
                let last = next + records.len() as u64 - 1;
                acks.batches.push((next, last));
                match log.append_batch(records, *tier) {
                    Ok(seq) => {
                        assert_eq!(seq, Seq(next));
                        acknowledge(acks, last, *tier);
                    }
                    Err(_) => return,
                }
            }
            Step::Flush(tier) => match log.flush(*tier) {
                Ok(()) => acknowledge(acks, next - 1, (*tier).max(Durability::Flushed)),
                Err(_) => return,
            },
            Step::Reopen => {
                if log.close().is_err() {
                    return;
                }
                acknowledge(acks, next - 1, Durability::Synced);
                match Log::open(DIR, options(fs)) {
                    Ok(reopened) => log = reopened,
                    Err(_) => return,
                }
            }
        }
    }
    if log.close().is_ok() {
        acknowledge(acks, acks.attempted.len() as u64, Durability::Synced);
    }
}

fn acknowledge(acks: &mut Acks, through: u64, tier: Durability) {
    if tier >= Durability::Flushed {
        acks.flushed = acks.flushed.max(through);
    }
    if tier == Durability::Synced {
        acks.synced = acks.synced.max(through);
    }
}

/// Opens the log on the rebooted machine `fs` and checks invariants 1-4 against `acks` for a
/// crash under `model`. Returns the records recovered, or a description of the violation.
pub fn check(fs: &SimFs, model: CrashModel, acks: &Acks) -> Result<Vec<Vec<u8>>, String> {
    if fs.files().iter().all(|p| !p.starts_with(DIR)) && acks.synced == 0 {
        return Ok(Vec::new()); // Nothing of the log survived and nothing was promised.
    }
    let records = recover(fs)?;
    let required = match model {
        CrashModel::ProcessCrash => acks.flushed.max(acks.synced),
        CrashModel::LoseUnsynced | CrashModel::TornSectors => acks.synced,
    };
    if (records.len() as u64) < required {
        return Err(format!(
            "lost acknowledged records: recovered {} but {required} were acknowledged ({model:?})",
            records.len()
        ));
    }
    if records.len() > acks.attempted.len() {
        return Err(format!(
            "recovered {} records but only {} were ever appended",
            records.len(),
            acks.attempted.len()
        ));
    }
    for (i, record) in records.iter().enumerate() {
        if record != &acks.attempted[i] {
            return Err(format!("record {} differs from what was appended", i + 1));
        }
    }
    let n = records.len() as u64;
    if let Some((first, last)) = acks.batches.iter().find(|(f, l)| *f <= n && n < *l) {
        return Err(format!("batch {first}..={last} recovered in part (through {n})"));
    }
    let again = recover(fs)?;
    if again != records {
        return Err("a second open recovered different records".into());
    }
    Ok(records)
}

fn recover(fs: &SimFs) -> Result<Vec<Vec<u8>>, String> {
    let log = Log::open(Path::new(DIR), options(fs)).map_err(|e| format!("open failed: {e}"))?;
    let mut records = Vec::new();
    for record in log.read_from(Seq(1)).map_err(|e| format!("read failed: {e}"))? {
        let record = record.map_err(|e| format!("read failed: {e}"))?;
        if record.seq.0 != records.len() as u64 + 1 {
            return Err(format!("gap before seq {}", record.seq));
        }
        records.push(record.payload.to_vec());
    }
    log.close().map_err(|e| format!("close failed: {e}"))?;
    Ok(records)
}

/// One crash scenario: run `steps` on a fresh machine crashing at operation `crash_at`,
/// reboot under `model`, check; then append `after` on the recovered log, crashing at
/// `crash_again` (if any), reboot and check again. Returns the total operations of the
/// first run (to learn how many crash points a workload has) or the violation.
pub fn scenario(
    steps: &[Step],
    after: &[Step],
    crash_at: Option<u64>,
    crash_again: Option<u64>,
    model: CrashModel,
    seed: u64,
) -> Result<u64, String> {
    let fs = SimFs::new(seed);
    if let Some(at) = crash_at {
        fs.crash_at(at);
    }
    let mut acks = Acks::default();
    run(&fs, steps, &mut acks);
    let ops = fs.ops();
    let rebooted = fs.reboot(model, seed ^ 0x5EED);
    let records = check(&rebooted, model, &acks).map_err(|e| format!("first crash: {e}"))?;
    let mut acks = Acks {
        attempted: records.clone(),
        batches: Vec::new(),
        synced: records.len() as u64,
        flushed: records.len() as u64,
    };
    if let Some(at) = crash_again {
        rebooted.crash_at(rebooted.ops() + at);
    }
    run(&rebooted, after, &mut acks);
    let again = rebooted.reboot(model, seed ^ 0xA9A1);
    check(&again, model, &acks).map_err(|e| format!("second crash: {e}"))?;
    Ok(ops)
}
