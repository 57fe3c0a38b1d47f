//! Crash-point enumeration: a seeded workload with several segment rolls and reopens is run
//! once on the simulated file system to count its I/O operations, then re-run crashing at
//! every operation under each crash model (process crash, power loss losing unsynced data,
//! power loss keeping torn sectors in any order), recovered and checked (see
//! `common/crash_workload.rs` for the four invariants); after each recovery the log is
//! appended to, crashed again and checked again.
//!
//! `cargo test --test integration crash_sweep::` runs the bounded CI sweep (one seed). The full sweep:
//! `FACTLOG_SWEEP_SEEDS=16 cargo test --release --test integration crash_sweep:: -- --nocapture`.

use crate::fuzz_corpus::bodies::crash_workload;

use crash_workload::{Rng, generate, scenario};
use factlog::fs::sim::CrashModel;

fn seeds() -> u64 {
    std::env::var("FACTLOG_SWEEP_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}

#[test]
fn every_crash_point_of_the_workload_recovers_every_acknowledged_record() {
    let mut scenarios = 0u64;
    let mut violations = Vec::new();
    for seed in 0..seeds() {
        let steps = generate(seed, 500);
        let after = generate(seed + 1000, 30);
        let total = scenario(&steps, &after, None, None, CrashModel::ProcessCrash, seed)
            .unwrap_or_else(|e| panic!("seed {seed} without a crash: {e}"));
        assert!(total > 200, "the workload must do real I/O ({total} operations)");
        let mut rng = Rng(seed);
        for crash_at in 0..total {
            for model in CrashModel::ALL {
                let again = Some(rng.below(40));
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
    assert!(scenarios >= 1000, "the sweep must cover at least 1000 scenarios");
    assert!(
        violations.is_empty(),
        "{} violations, first ones:\n{}",
        violations.len(),
        violations[..violations.len().min(10)].join("\n")
    );
}

#[test]
fn the_workload_rolls_segments_and_reopens() {
    let steps = generate(0, 500);
    let reopens = steps.iter().filter(|s| matches!(s, crash_workload::Step::Reopen)).count();
    assert!(reopens >= 2, "{reopens} reopens");
    let fs = factlog::fs::sim::SimFs::new(0);
    let mut acks = crash_workload::Acks::default();
    crash_workload::run(&fs, &steps, &mut acks);
    let segments = fs.files().iter().filter(|p| p.extension().is_some_and(|e| e == "seg")).count();
    assert!(segments >= 4, "at least three rolls, found {segments} segments");
    assert_eq!(acks.synced as usize, acks.attempted.len(), "a clean run ends synced");
}

#[test]
fn the_checker_catches_a_lost_acknowledged_record() {
    // A checker that cannot fail proves nothing: damage the last synced frame of a clean run
    // and remove the log mark that vouches for it (a log without a mark: recovery then cuts
    // the damage as a torn tail, so an acknowledged record is lost) and expect a violation.
    // With the mark in place the open refuses instead (`tests/mark_damage.rs`).
    let fs = factlog::fs::sim::SimFs::new(7);
    let mut acks = crash_workload::Acks::default();
    crash_workload::run(&fs, &generate(7, 100), &mut acks);
    let rebooted = fs.reboot(CrashModel::LoseUnsynced, 0);
    let last = rebooted
        .files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .max()
        .unwrap();
    let verdict = factlog::verify(crash_workload::DIR, crash_workload::options(&rebooted)).unwrap();
    let used = verdict.segments.last().unwrap().used_bytes;
    assert!(rebooted.flip_bit(&last, (used - 30) * 8));
    let mark =
        std::path::Path::new(crash_workload::DIR).join(factlog::engine::mark::MARK_FILE_NAME);
    factlog::fs::Fs::remove_file(&rebooted, &mark).unwrap();
    let err = crash_workload::check(&rebooted, CrashModel::LoseUnsynced, &acks).unwrap_err();
    assert!(err.contains("lost acknowledged records"), "{err}");
}
