//! Target `holder_crash`: a harness workload over three tasks (contracts, turns, steps,
//! grants of every scope, cancels, calls of every effect with and without keys and approvals,
//! results, deltas, clean reopens) whose every choice comes from the input, run on the
//! simulated file system by a first holder crashed at a chosen I/O operation under a chosen
//! crash model; then a new holder is checked, a second holder confirms high-risk tasks and
//! appends more, crashed at a second operation (possibly inside its own takeover), and a third
//! holder is checked. The run and the checks are the holder sweep's
//! (`tests/common/holder_workload.rs`): no `once`/`run` grant, dispatched call or pending cancel
//! of an earlier holder survives a takeover, high-risk tasks wait for confirmation, unresolved
//! unknown outcomes block new side effects, and every refused call writes nothing. Any
//! violation panics with the whole case.
//!
//! Input: the crash model (1 byte), the crash point (2 bytes, taken modulo the operations of
//! the uncrashed run plus one, the last meaning a clean close; 0xFFFF for no crash), the second
//! crash point (1 byte, 0 for none), the seed of the simulated machine (8 bytes), how many of
//! the operations the second holder runs (1 byte), then the workload generator's choices, one
//! byte each (zeros once the input ends; the workload ends with the input).

use factlog::fs::sim::{CrashModel, SimFs};

use super::holder_workload::{self, Acks, Choices, Gen, Op};
use super::input::Input;

/// Operations one input may describe: bounds the work and the memory of one case.
const OPS_MAX: usize = 160;

/// What one input led to, so the corpus replay can check that the seeds reach deep paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// I/O operations of the uncrashed first holder.
    pub ops: u64,
    /// Whether the first holder was crashed before it closed.
    pub crashed: bool,
    /// Whether the second holder was crashed.
    pub crashed_again: bool,
    /// Operations of the workload, both holders.
    pub steps: usize,
    /// Grants acknowledged by the uncrashed run.
    pub grants: usize,
}

/// Fuzz bytes as the generator's choices.
struct Bytes<'a, 'b>(&'b mut Input<'a>);

impl Choices for Bytes<'_, '_> {
    fn below(&mut self, n: u64) -> u64 {
        u64::from(self.0.u8()) % n
    }
}

/// The body of the target.
pub fn run(data: &[u8]) -> Outcome {
    let mut input = Input::new(data);
    let model = CrashModel::ALL[usize::from(input.u8() % 3)];
    let crash_choice = input.u16();
    let again_choice = input.u8();
    let seed = input.u64();
    let after_count = usize::from(input.u8() % 32);
    let mut generator = Gen::default();
    let mut ops: Vec<Op> = Vec::new();
    while !input.is_empty() && ops.len() < OPS_MAX {
        ops.extend(generator.next(&mut Bytes(&mut input)));
    }
    let after = ops.split_off(ops.len().saturating_sub(after_count));

    // The simulated machine is deterministic from its seed: an uncrashed run counts the
    // operations the crashed run will go through.
    let fs = SimFs::new(seed);
    let mut acks = Acks::default();
    if let Err(violation) = holder_workload::run(&fs, &ops, &mut acks, false) {
        panic!("{violation}\nuncrashed first holder, seed {seed:#x}\nops: {ops:?}");
    }
    let total = fs.ops();
    let crash_at =
        if crash_choice == u16::MAX { None } else { Some(u64::from(crash_choice) % (total + 1)) };
    let crash_again = again_choice.checked_sub(1).map(u64::from);
    if let Err(violation) =
        holder_workload::scenario(&ops, &after, crash_at, crash_again, model, seed)
    {
        panic!(
            "{violation}\n{model:?}, crash at operation {crash_at:?} of {total}, second crash \
             {crash_again:?}, seed {seed:#x}\nops: {ops:?}\nafter: {after:?}"
        );
    }
    Outcome {
        ops: total,
        crashed: crash_at.is_some_and(|at| at < total),
        crashed_again: crash_again.is_some(),
        steps: ops.len() + after.len(),
        grants: acks.grants.len(),
    }
}

/// Builds an input: model, crash point, second crash point, operations of the second holder,
/// then the generator's choices.
fn input(model: u8, crash_at: u16, again: u8, after: u8, choices: &[u8]) -> Vec<u8> {
    let mut out = vec![model];
    out.extend_from_slice(&crash_at.to_le_bytes());
    out.push(again);
    out.extend_from_slice(&0x5EED_u64.to_le_bytes());
    out.push(after);
    out.extend_from_slice(choices);
    out
}

/// The generator's choices of the sweep's seeded workload, `count` of them: what a random
/// byte string would rarely give (a grant cited by a later call, a result for a dispatched
/// one, a clean reopen between them).
fn choices(seed: u64, count: usize) -> Vec<u8> {
    let mut rng = holder_workload::Rng(seed);
    (0..count).map(|_| rng.next() as u8).collect()
}

/// The seeds of `fuzz/corpus/holder_crash/`.
#[must_use]
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("no-crash", input(0, u16::MAX, 0, 8, &choices(1, 200))),
        ("clean-close-then-crash-in-takeover", input(1, u16::MAX, 3, 10, &choices(2, 200))),
        ("process-crash-mid-workload", input(0, 60, 12, 12, &choices(3, 240))),
        ("lose-unsynced-mid-workload", input(1, 95, 6, 8, &choices(4, 240))),
        ("torn-sectors-late", input(2, 170, 20, 16, &choices(5, 300))),
        ("torn-sectors-early", input(2, 20, 1, 6, &choices(6, 160))),
    ]
}
