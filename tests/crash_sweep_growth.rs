//! The crash sweep of `crash_sweep.rs` on segments that grow in steps
//! (`format-spec/segment.md`, "Capacity and growth"): 72 KiB segments, whose files start at
//! their first 4 KiB step and are extended by synced steps of zeros as records arrive, so the
//! workload's operations include many growth steps (a zero write and its `fdatasync`), rolls
//! that retire a grown segment, and reopens of a segment shorter than its capacity. Every
//! operation is a crash point under each crash model: a crash in the middle of a growth step
//! must lose nothing acknowledged and replay nothing that was not appended (the four
//! invariants of `common/crash_workload.rs`).
//!
//! `cargo test --test integration crash_sweep_growth::` runs one seed; `FACTLOG_SWEEP_SEEDS=16` more.

use crate::fuzz_corpus::bodies::crash_workload;

use std::sync::Arc;

use crash_workload::{Acks, DIR, Rng, SEGMENT_BYTES, Step, generate, run, scenario};
use factlog::fs::sim::{CrashModel, SimFs};
use factlog::limits::growth_step_bytes_first;
use factlog::{Log, Options};

/// Larger than the whole-segment limit, so the segment grows in 4 KiB steps; small enough
/// that the workload rolls.
const GROWING_SEGMENT_BYTES: u64 = 72 * 1024;

fn seeds() -> u64 {
    std::env::var("FACTLOG_SWEEP_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}

fn workload(seed: u64) -> Vec<Step> {
    SEGMENT_BYTES.set(GROWING_SEGMENT_BYTES);
    generate(seed, 700)
}

#[test]
fn the_workload_grows_segments_in_steps_and_rolls() {
    let steps = workload(0);
    let fs = SimFs::new(0);
    let mut acks = Acks::default();
    run(&fs, &steps, &mut acks);
    assert_eq!(acks.synced as usize, acks.attempted.len(), "a clean run ends synced");
    let segments: Vec<_> =
        fs.files().into_iter().filter(|p| p.extension().is_some_and(|e| e == "seg")).collect();
    assert!(segments.len() >= 2, "the workload rolls: {segments:?}");
    let step = growth_step_bytes_first(GROWING_SEGMENT_BYTES);
    assert_eq!(step, 4096);
    for path in &segments {
        let len = fs.read_file(path).unwrap().len() as u64;
        assert!(len <= GROWING_SEGMENT_BYTES, "{path:?}: {len}");
    }
    let active = fs.read_file(segments.last().unwrap()).unwrap().len() as u64;
    assert!(active < GROWING_SEGMENT_BYTES, "the active segment is not preallocated whole");
    // Count the growth steps of one open: appends after a reopen grow the segment again.
    let options = Options::new()
        .segment_bytes(GROWING_SEGMENT_BYTES)
        .buffer_bytes(4096)
        .background_threads(false)
        .fs(Arc::new(fs.clone()));
    let log = Log::open(DIR, options).unwrap();
    for i in 0..200u32 {
        log.append(&[i as u8; 300], factlog::Durability::Synced).unwrap();
    }
    let stats = log.prealloc_stats();
    assert!(stats.growth_steps >= 10, "{stats:?}");
    assert_eq!(stats.growth_bytes, stats.growth_steps * step, "{stats:?}");
    log.close().unwrap();
}

#[test]
fn every_crash_point_of_a_growing_workload_recovers_every_acknowledged_record() {
    let mut scenarios = 0u64;
    let mut violations = Vec::new();
    for seed in 0..seeds() {
        let steps = workload(seed);
        let after = generate(seed + 1000, 60);
        let total = scenario(&steps, &after, None, None, CrashModel::ProcessCrash, seed)
            .unwrap_or_else(|e| panic!("seed {seed} without a crash: {e}"));
        assert!(total > 300, "the workload must do real I/O ({total} operations)");
        let mut rng = Rng(seed ^ 0x6120);
        for crash_at in 0..total {
            for model in CrashModel::ALL {
                let again = Some(rng.below(60));
                let torn_seed = rng.next();
                scenarios += 1;
                if let Err(e) = scenario(&steps, &after, Some(crash_at), again, model, torn_seed) {
                    violations.push(format!("seed {seed}, crash at op {crash_at}, {model:?}: {e}"));
                }
            }
        }
        println!("seed {seed}: {total} operations");
    }
    println!("{scenarios} crash scenarios, {} violations", violations.len());
    assert!(scenarios >= 900, "the sweep must cover at least 900 scenarios");
    assert!(
        violations.is_empty(),
        "{} violations, first ones:\n{}",
        violations.len(),
        violations[..violations.len().min(10)].join("\n")
    );
}
