//! Proves that a deep verify of a store whose first segments were reclaimed rebuilds the state
//! from the oldest valid snapshot the kept log continues plus the events after it, instead of
//! failing for the reclaimed events: the library reports that base and finds the snapshots and
//! the live state equal to the rebuild (or not, for a forged snapshot), and `factlog verify
//! --deep` after `checkpoint` and `purge --before-snapshot` exits 0 and names the base in text
//! and JSON. Only when no valid snapshot covers the reclaimed events is it an error (exit 3).
//! Proved on stores with 16 KiB segments written through the library, checked through the
//! library and by running the real binary.

use crate::common;

use std::path::Path;

use common::cli::json_of;
use common::harness::streamed_turn;
use common::{arg, factlog, temp_log};
use factlog::harness::snapshot::{self, SnapshotMeta};
use factlog::harness::state::STATE_SCHEMA;
use factlog::{ErrorKind, Options, Store, StoreOptions};
use serde_json::{Value, json};

/// Small segments, so that a few turns roll several of them and a purge has some to remove.
fn options() -> StoreOptions {
    StoreOptions::new().log(Options::new().segment_bytes(16 * 1024))
}

fn turns(store: &Store, range: std::ops::Range<usize>) {
    for n in range {
        streamed_turn(store, n);
    }
}

/// A store with two snapshots, turns after the newest, and the segments before the oldest
/// reclaimed; returns the open store and the two snapshots, oldest first.
fn reclaimed_store(dir: &Path) -> (Store, SnapshotMeta, SnapshotMeta) {
    let store = Store::open(dir, options()).expect("open");
    turns(&store, 0..10);
    let oldest = store.checkpoint().expect("checkpoint");
    turns(&store, 10..20);
    let newest = store.checkpoint().expect("checkpoint");
    turns(&store, 20..23);
    let (removed, _) = store.reclaim().expect("reclaim");
    assert!(removed > 0, "the workload rolls segments before the oldest snapshot");
    let first = store.log().first_seq().expect("first seq");
    assert!(first.0 > 1 && first.0 <= oldest.covered_seq.0 + 1, "{first:?} vs {oldest:?}");
    (store, oldest, newest)
}

/// Flips the last byte of a snapshot file, so that its body checksum fails.
fn damage(path: &Path) {
    let mut bytes = std::fs::read(path).expect("read the snapshot");
    *bytes.last_mut().expect("a non-empty file") ^= 0xFF;
    std::fs::write(path, bytes).expect("write the snapshot");
}

#[test]
fn a_reclaimed_store_is_rebuilt_from_the_oldest_snapshot() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let (store, oldest, newest) = reclaimed_store(temp.path());
    let last = store.log().last_seq().expect("events").0;
    let reopened = Store::open_read_only(temp.path(), options()).expect("read-only open");
    for store in [&store, &reopened] {
        let deep = store.verify_deep().expect("verify_deep");
        assert_eq!(deep.rebuilt_from.as_ref(), Some(&oldest), "{deep:?}");
        assert_eq!(deep.snapshot.as_ref(), Some(&newest), "{deep:?}");
        assert_eq!(deep.snapshot_matches, Some(true), "{deep:?}");
        assert!(deep.live_matches, "{deep:?}");
        assert_eq!(deep.events, last - oldest.covered_seq.0);
        assert!(deep.skipped_snapshots.is_empty(), "{deep:?}");
    }
}

#[test]
fn a_store_never_reclaimed_is_still_folded_from_the_first_event() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(temp.path(), options()).expect("open");
    turns(&store, 0..10);
    let snapshot = store.checkpoint().expect("checkpoint");
    turns(&store, 10..12);
    let deep = store.verify_deep().expect("verify_deep");
    assert_eq!(deep.rebuilt_from, None);
    assert_eq!(deep.snapshot, Some(snapshot));
    assert_eq!((deep.snapshot_matches, deep.live_matches), (Some(true), true));
    assert_eq!(deep.events, store.log().last_seq().expect("events").0);
}

#[test]
fn the_newest_snapshot_as_the_base_is_only_checked_for_integrity() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let (store, oldest, newest) = reclaimed_store(temp.path());
    // With the oldest snapshot damaged, the newest is the only one the kept log continues.
    damage(&oldest.path);
    let deep = store.verify_deep().expect("verify_deep");
    assert_eq!(deep.rebuilt_from.as_ref(), Some(&newest), "{deep:?}");
    assert_eq!(deep.snapshot.as_ref(), Some(&newest), "{deep:?}");
    assert_eq!(deep.snapshot_matches, None, "nothing to compare it with: {deep:?}");
    assert!(deep.live_matches, "{deep:?}");
}

#[test]
fn a_forged_newest_snapshot_differs_from_the_rebuild() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(temp.path(), options()).expect("open");
    turns(&store, 0..10);
    let oldest = store.checkpoint().expect("checkpoint");
    turns(&store, 10..20);
    let newest = store.checkpoint().expect("checkpoint");
    store.reclaim().expect("reclaim");
    // A well-formed snapshot whose state is not the fold of the events it claims to cover.
    let mut state = store.state();
    assert_eq!(state.last_seq, newest.covered_seq.0);
    state.tasks.values_mut().for_each(|task| task.task.goal = Some("forged".to_owned()));
    let body = serde_json::to_vec(&state).expect("serialise");
    snapshot::write(&factlog::fs::RealFs, temp.path(), newest.covered_seq, STATE_SCHEMA, &body)
        .expect("write the snapshot");
    store.close().expect("close");

    let reopened = Store::open_read_only(temp.path(), options()).expect("read-only open");
    let deep = reopened.verify_deep().expect("verify_deep");
    assert_eq!(deep.rebuilt_from, Some(oldest), "{deep:?}");
    assert_eq!(deep.snapshot_matches, Some(false), "{deep:?}");
    assert!(!deep.live_matches, "the open loaded the forged state: {deep:?}");
}

#[test]
fn reclaimed_events_that_no_valid_snapshot_covers_are_an_error() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let (store, oldest, newest) = reclaimed_store(temp.path());
    let first = store.log().first_seq().expect("first seq").0;
    damage(&oldest.path);
    damage(&newest.path);
    // The deep check and an open are refused naming the damaged snapshot that was the only
    // record of them.
    let deep = store.verify_deep().expect_err("the reclaimed events are lost");
    let open = Store::open_read_only(temp.path(), options()).map(drop).expect_err("no open");
    for error in [deep, open] {
        match error.kind() {
            ErrorKind::Corruption {
                path,
                reason: factlog::CorruptionReason::BaseSnapshotLost { first_seq, .. },
                ..
            } => assert_eq!((path, *first_seq), (&newest.path, first), "{error}"),
            other => panic!("expected BaseSnapshotLost, got {other:?}"),
        }
    }
}

/// `factlog verify DIR --deep --json`, with its exit code.
fn verify_deep_json(dir: &Path) -> (Option<i32>, Value) {
    let run = factlog(&["verify", arg(dir), "--deep", "--json"], b"");
    // Damage is also named in one line on standard error.
    if run.code != Some(3) {
        assert_eq!(run.stderr, "", "{run:?}");
    }
    let report = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    (run.code, report)
}

/// Writes turns through the library (small segments), snapshots and purges through the CLI, as
/// a maintenance job would; returns the oldest snapshot's path and covered seq, the newest's
/// covered seq and the log's first seq after the purge.
fn purged_by_the_cli(dir: &Path) -> (String, u64, u64, u64) {
    let store = Store::open(dir, options()).expect("open");
    turns(&store, 0..10);
    store.close().expect("close");
    let oldest = json_of("checkpoint", dir, &[]);
    let store = Store::open(dir, options()).expect("open");
    turns(&store, 10..20);
    store.close().expect("close");
    let newest = json_of("checkpoint", dir, &[]);
    let store = Store::open(dir, options()).expect("open");
    turns(&store, 20..22);
    store.close().expect("close");
    let purged = json_of("purge", dir, &["--before-snapshot"]);
    assert!(purged["removed_segments"].as_u64().expect("removed_segments") > 0, "{purged}");
    (
        oldest["path"].as_str().expect("path").to_owned(),
        oldest["covered_seq"].as_u64().expect("covered_seq"),
        newest["covered_seq"].as_u64().expect("covered_seq"),
        purged["first_seq"].as_u64().expect("first_seq"),
    )
}

#[test]
fn cli_verify_deep_after_checkpoint_and_purge_exits_0_and_names_the_base() {
    let (_temp, dir) = temp_log();
    let (base_path, base_seq, newest_seq, first_seq) = purged_by_the_cli(&dir);
    assert!(first_seq > 1, "the purge reclaimed seqs 1..{first_seq}");

    let run = factlog(&["verify", arg(&dir), "--deep"], b"");
    run.assert_success();
    let text = run.stdout_text();
    let base_line = format!(
        "deep: rebuilt from snapshot {base_path} (covers seq {base_seq}; the segments before it \
         were reclaimed) + "
    );
    assert!(text.contains(&base_line), "{text}");
    assert!(text.contains(&format!("seqs {}..=", base_seq + 1)), "{text}");
    assert!(text.contains(&format!("(events through seq {newest_seq}) equals")), "{text}");
    assert!(text.contains("the state an open builds equals the rebuild"), "{text}");
    assert!(!text.contains("cannot be folded"), "{text}");

    let (code, report) = verify_deep_json(&dir);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!((&report["outcome"], &report["exit_code"]), (&json!("clean"), &json!(0)));
    let deep = &report["deep"];
    assert_eq!(deep["ok"], true, "{report}");
    assert_eq!(deep["rebuilt_from"], json!({ "path": base_path, "covered_seq": base_seq }));
    assert_eq!(deep["snapshot"]["covered_seq"], newest_seq, "{report}");
    assert_eq!(deep["snapshot_matches"], true, "{report}");
    assert_eq!(deep["live_matches"], true, "{report}");
    assert_eq!(deep["error"], Value::Null, "{report}");
    let last_seq = report["last_seq"].as_u64().expect("last_seq");
    assert_eq!(deep["events"], last_seq - base_seq, "{report}");
}

#[test]
fn cli_verify_deep_without_a_snapshot_for_the_reclaimed_events_exits_3() {
    let (_temp, dir) = temp_log();
    let (_, _, _, first_seq) = purged_by_the_cli(&dir);
    for file in snapshot::list(&factlog::fs::RealFs, &dir).expect("list the snapshots") {
        damage(&file.path);
    }
    // The segments themselves are intact, but verify checks the snapshots too: the events
    // before the first segment exist nowhere else, so the store is damaged (exit 3), and the
    // damaged snapshot that held them is named.
    let run = factlog(&["verify", arg(&dir)], b"");
    assert_eq!(run.code, Some(3), "{run:?}");
    let expected = format!("the segments before seq {first_seq} were reclaimed");
    assert!(run.stdout_text().contains(&expected), "{run:?}");
    assert!(run.stdout_text().contains(".snap"), "{run:?}");

    let (code, report) = verify_deep_json(&dir);
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["exit_code"], 3, "{report}");
    assert_eq!(report["outcome"], "corrupt", "{report}");
    let reason = report["corruption"]["reason"].as_str().expect("a reason");
    assert!(reason.contains(&expected), "{report}");
    assert!(report["snapshots"].as_array().is_some_and(|s| !s.is_empty()), "{report}");
    assert!(report["snapshots"][0]["damage"].is_string(), "{report}");
    // The deep check is not run on a store already found damaged.
    assert_eq!(report["deep"], Value::Null, "{report}");
}
