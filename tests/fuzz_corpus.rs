//! Replays every committed fuzz input (`fuzz/corpus/TARGET/*` and the minimised crashers kept
//! in `fuzz/regressions/TARGET/*`) through the fuzz targets' own bodies (`fuzz/src/`, included
//! here), so `cargo test` catches a regression without libFuzzer; checks that the seeds reach
//! each target's deep paths and are exactly what `fuzz/src/seeds.rs` generates from the
//! library's encoders and from the format vectors, and runs every vector through the bodies.
//!
//! Regenerate the seeds after a deliberate format change:
//! `cargo test --test integration -- --ignored fuzz_corpus::write_seed_corpus`.

#[path = "../fuzz/src/lib.rs"]
pub(crate) mod bodies;

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use bodies::{
    damaged_tail, event_decode, frame_decode, holder_crash, ops_crash, seeds, segment_header,
    snapshot_decode, tail_recovery,
};

const TARGETS: [&str; 8] = [
    "frame_decode",
    "segment_header",
    "tail_recovery",
    "ops_crash",
    "snapshot_decode",
    "event_decode",
    "holder_crash",
    "damaged_tail",
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `fuzz/KIND/TARGET/`, sorted, without libFuzzer's hidden files.
fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| {
            p.is_file() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("a corpus file");
            (p, bytes)
        })
        .collect()
}

/// Runs `body` on every input, and fails naming every input that panicked.
fn replay<T>(inputs: &[(PathBuf, Vec<u8>)], body: fn(&[u8]) -> T) -> Vec<T> {
    let mut outcomes = Vec::new();
    let mut failures = Vec::new();
    for (path, bytes) in inputs {
        match catch_unwind(AssertUnwindSafe(|| body(bytes))) {
            Ok(outcome) => outcomes.push(outcome),
            Err(_) => failures.push(path.display().to_string()),
        }
    }
    assert!(
        failures.is_empty(),
        "fuzz inputs that fail (panic messages above):\n{}",
        failures.join("\n")
    );
    outcomes
}

fn corpus<T>(target: &str, body: fn(&[u8]) -> T) -> Vec<T> {
    let files = inputs("corpus", target);
    assert!(!files.is_empty(), "fuzz/corpus/{target} holds the committed seeds");
    replay(&files, body)
}

/// The format vectors, `(stem, bytes)`, in order.
fn vectors() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("format-spec").join("vectors");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.map(|e| e.expect("a directory entry").path()).collect())
        .unwrap_or_default();
    paths.retain(|p| p.extension().is_some_and(|e| e == "bin"));
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let stem = p.file_stem().expect("a file name").to_string_lossy().into_owned();
            (stem, std::fs::read(&p).expect("a vector"))
        })
        .collect()
}

/// Every generated corpus file: the seeds and the inputs derived from each format vector.
fn generated() -> Vec<seeds::Seed> {
    let mut all = seeds::all();
    for (stem, bytes) in vectors() {
        all.extend(seeds::from_vector(&stem, &bytes));
    }
    all
}

#[test]
fn frame_decode_corpus_replays_and_holds_valid_frames() {
    let valid = corpus("frame_decode", frame_decode::run);
    assert!(valid.iter().any(|&n| n >= 3), "a seed with several valid frames: {valid:?}");
}

#[test]
fn segment_header_corpus_replays_and_holds_valid_and_invalid_headers() {
    let valid = corpus("segment_header", segment_header::run);
    assert!(valid.contains(&true) && valid.contains(&false), "{valid:?}");
}

#[test]
fn tail_recovery_corpus_replays_and_reaches_every_verdict() {
    let outcomes = corpus("tail_recovery", tail_recovery::run);
    let reached = |what: &str, f: fn(&tail_recovery::Outcome) -> bool| {
        assert!(outcomes.iter().any(f), "no seed reaches {what}: {outcomes:#?}");
    };
    reached("a clean log with records", |o| o.verify_clean && o.records > 0);
    reached("a torn tail cut at open", |o| o.verify_torn && o.cut);
    reached("corruption", |o| o.verify_corrupt && !o.opened);
    reached("an append after recovery", |o| o.appended);
}

#[test]
fn ops_crash_corpus_replays_and_crashes_mid_workload() {
    let outcomes = corpus("ops_crash", ops_crash::run);
    assert!(outcomes.iter().any(|o| o.crashed && o.ops > 50), "{outcomes:?}");
    assert!(outcomes.iter().any(|o| !o.crashed), "{outcomes:?}");
}

#[test]
fn snapshot_decode_corpus_replays_and_holds_valid_and_invalid_files() {
    let valid = corpus("snapshot_decode", snapshot_decode::run);
    assert!(valid.contains(&true) && valid.contains(&false), "{valid:?}");
}

#[test]
fn event_decode_corpus_replays_and_reaches_every_path() {
    let outcomes = corpus("event_decode", event_decode::run);
    let reached = |what: &str, f: fn(&event_decode::Outcome) -> bool| {
        assert!(outcomes.iter().any(f), "no seed reaches {what}: {outcomes:?}");
    };
    reached("a typed event", |o| o.decoded && !o.opaque);
    reached("an opaque event", |o| o.opaque);
    reached("a refused body", |o| o.envelope && !o.decoded);
    reached("a refused envelope", |o| !o.envelope);
    reached("an accepted JSON body", |o| o.json_body);
}

#[test]
fn holder_crash_corpus_replays_and_crashes_holders() {
    let outcomes = corpus("holder_crash", holder_crash::run);
    assert!(outcomes.iter().any(|o| o.crashed && o.ops > 50), "{outcomes:?}");
    assert!(outcomes.iter().any(|o| !o.crashed), "a clean close: {outcomes:?}");
    assert!(outcomes.iter().any(|o| o.crashed_again), "{outcomes:?}");
    assert!(outcomes.iter().all(|o| o.grants > 0), "every seed grants: {outcomes:?}");
}

#[test]
fn damaged_tail_corpus_replays_and_reaches_every_verdict() {
    let outcomes = corpus("damaged_tail", damaged_tail::run);
    let reached = |what: &str, f: fn(&damaged_tail::Outcome) -> bool| {
        assert!(outcomes.iter().any(f), "no seed reaches {what}: {outcomes:#?}");
    };
    reached("a refusal after a clean close", |o| o.refused && o.damaged && !o.crashed);
    reached("a refusal after a crash", |o| o.refused && o.crashed);
    reached("a torn tail cut after a crash", |o| o.opened && o.cut && o.records > 0);
    reached("a cut tail kept aside", |o| o.kept);
    reached("a loss in the mark's window", |o| o.window_loss);
    reached("an open of a damaged clean log", |o| o.opened && o.damaged && !o.crashed);
}

#[test]
fn regressions_stay_fixed() {
    let mut replayed = 0;
    replayed += replay(&inputs("regressions", "frame_decode"), frame_decode::run).len();
    replayed += replay(&inputs("regressions", "segment_header"), segment_header::run).len();
    replayed += replay(&inputs("regressions", "tail_recovery"), tail_recovery::run).len();
    replayed += replay(&inputs("regressions", "ops_crash"), ops_crash::run).len();
    replayed += replay(&inputs("regressions", "snapshot_decode"), snapshot_decode::run).len();
    replayed += replay(&inputs("regressions", "event_decode"), event_decode::run).len();
    replayed += replay(&inputs("regressions", "holder_crash"), holder_crash::run).len();
    replayed += replay(&inputs("regressions", "damaged_tail"), damaged_tail::run).len();
    println!("{replayed} regression inputs replayed");
}

#[test]
fn every_corpus_directory_belongs_to_a_replayed_target() {
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind)) else { continue };
        for entry in entries {
            let name = entry.expect("a directory entry").file_name().to_string_lossy().into_owned();
            assert!(TARGETS.contains(&name.as_str()), "fuzz/{kind}/{name} is not replayed here");
        }
    }
}

#[test]
fn committed_seeds_are_what_the_generator_makes() {
    let mut names = BTreeSet::new();
    for seed in generated() {
        let path = fuzz_dir().join("corpus").join(seed.target).join(&seed.name);
        let Ok(committed) = std::fs::read(&path) else {
            // A format vector added after the corpus was written: replayed whole below anyway.
            assert!(
                seed.name.starts_with("vector-"),
                "{} is missing (run write_seed_corpus)",
                path.display()
            );
            continue;
        };
        assert!(committed == seed.bytes, "{} differs from its generator", path.display());
        assert!(names.insert((seed.target, seed.name)), "seed names are unique");
    }
    for target in TARGETS {
        for (path, _) in inputs("corpus", target) {
            let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
            if name.starts_with("seed-") || name.starts_with("vector-") {
                assert!(names.contains(&(target, name)), "{} has no generator", path.display());
            }
        }
    }
}

/// The segment vectors are real segment files: each goes whole through the header and recovery
/// bodies, and through the frame decoder from offset 64 under its own salt. The snapshot
/// vectors go whole through the snapshot decoder, the event record vectors through the event
/// decoder.
#[test]
fn format_vectors_pass_through_the_fuzz_bodies() {
    let vectors = vectors();
    for (stem, bytes) in &vectors {
        if seeds::is_event_vector(stem) {
            let outcome = catch_unwind(|| event_decode::run(bytes));
            let outcome = outcome.unwrap_or_else(|_| panic!("vector {stem} fails event_decode"));
            // 023 is damaged; 027 is refused by the upcast (`CannotUpcast`).
            let refused = stem.ends_with("-bad-magic") || stem.ends_with("-free-text");
            assert_eq!(outcome.decoded, !refused, "vector {stem}");
            continue;
        }
        if seeds::is_snapshot_vector(stem) {
            let valid = catch_unwind(|| snapshot_decode::run(bytes));
            let valid = valid.unwrap_or_else(|_| panic!("vector {stem} fails snapshot_decode"));
            assert_eq!(valid, stem.ends_with("-valid"), "vector {stem}");
            continue;
        }
        let mut whole = vec![0u8]; // tail_recovery, raw mode, one segment
        whole.extend_from_slice(bytes);
        let mut frames = bytes.get(32..40).unwrap_or_default().to_vec();
        frames.resize(8, 0);
        frames.extend_from_slice(bytes.get(64..).unwrap_or_default());
        let run = catch_unwind(|| {
            segment_header::run(bytes);
            tail_recovery::run(&whole);
            frame_decode::run(&frames);
        });
        assert!(run.is_ok(), "vector {stem} fails a fuzz body (panic message above)");
    }
    println!("{} format vectors replayed", vectors.len());
}

/// Writes the seed corpus from its generator (run by hand after a deliberate format change).
#[test]
#[ignore = "rewrites fuzz/corpus/*/seed-* and vector-*; run by hand"]
fn write_seed_corpus() {
    for seed in generated() {
        let dir = fuzz_dir().join("corpus").join(seed.target);
        std::fs::create_dir_all(&dir).expect("the corpus directory");
        std::fs::write(dir.join(&seed.name), &seed.bytes).expect("a seed file");
    }
}
