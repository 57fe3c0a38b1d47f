//! Target `ops_crash`: a random workload of appends (all three tiers, single records, batches,
//! records larger than the writer's buffer), flushes and reopens on the simulated file
//! system, crashed at a chosen I/O operation under a chosen crash model, recovered, appended
//! to, crashed again and recovered again. The run and the checks are the crash sweep's
//! (`tests/common/crash_workload.rs`): every acknowledged record survives as its tier
//! promises, the log is an exact prefix of what was appended with no torn batch, and a second
//! open agrees. Any violation panics with the whole case.
//!
//! Input: the crash model (1 byte), the crash point (2 bytes, taken modulo the operations of
//! the uncrashed run; 0xFFFF for no crash in the first run), the second crash point
//! (1 byte, 0 for none), the seed of the simulated machine (8 bytes), how many of the steps run
//! after the first recovery (1 byte), then one step per tag byte.

use factlog::Durability;
use factlog::fs::sim::{CrashModel, SimFs};

use super::crash_workload::{self, Acks, Step};
use super::input::Input;

/// Steps one input may describe: bounds the work and the memory of one case.
const STEPS_MAX: usize = 256;

/// Records in one batch step, at most.
const BATCH_RECORDS_MAX: u8 = 8;

/// Scales a length byte into a record larger than the workload's 4 KiB buffer but within an
/// 8 KiB segment: 255 * 31 + 24 bytes of frame header fit in 8192 - 64.
const BIG_RECORD_SCALE: usize = 31;

/// What one input led to, so the corpus replay can check that the seeds reach deep paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// I/O operations of the uncrashed run.
    pub ops: u64,
    /// Whether the first run was crashed before it ended.
    pub crashed: bool,
    /// Steps of the workload, before and after the first crash.
    pub steps: usize,
}

/// The body of the target.
pub fn run(data: &[u8]) -> Outcome {
    let mut input = Input::new(data);
    let model = CrashModel::ALL[usize::from(input.u8() % 3)];
    let crash_choice = input.u16();
    let again_choice = input.u8();
    let seed = input.u64();
    let after_count = usize::from(input.u8() % 16);
    let mut steps = Vec::new();
    while !input.is_empty() && steps.len() < STEPS_MAX {
        steps.push(step(&mut input, steps.len()));
    }
    let after = steps.split_off(steps.len().saturating_sub(after_count));

    // The simulated machine is deterministic from its seed: an uncrashed run counts the
    // operations the crashed run will go through.
    let fs = SimFs::new(seed);
    crash_workload::run(&fs, &steps, &mut Acks::default());
    let ops = fs.ops();
    let crash_at =
        if crash_choice == u16::MAX { ops } else { u64::from(crash_choice) % ops.max(1) };
    let crash_again = again_choice.checked_sub(1).map(u64::from);
    if let Err(violation) =
        crash_workload::scenario(&steps, &after, Some(crash_at), crash_again, model, seed)
    {
        panic!(
            "{violation}\n{model:?}, crash at operation {crash_at} of {ops}, second crash \
             {crash_again:?}, seed {seed:#x}\nsteps: {steps:?}\nafter: {after:?}"
        );
    }
    Outcome { ops, crashed: crash_at < ops, steps: steps.len() + after.len() }
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

/// A record that names its step and its place in a batch, so that no two records of a
/// workload are equal and a reordering cannot go unseen; `len` bytes long, at least the name.
fn record(index: usize, part: u8, len: usize) -> Vec<u8> {
    let mut bytes = format!("s{index}.{part}:").into_bytes();
    let fill = len.saturating_sub(bytes.len());
    bytes.extend((0..fill).map(|i| (i as u8).wrapping_mul(13).wrapping_add(part)));
    bytes
}
