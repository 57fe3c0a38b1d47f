//! `factlog migrate` on the frozen stores of factlog 0.1.0: each one is rewritten into format 2
//! and means exactly what it meant (events per task, folded state, recovery plan); records that
//! do not change are copied byte for byte; the backup is the old store; running it again, or as a
//! dry run, writes nothing; an event that cannot be upcast stops it before anything changes; and
//! versions this build does not know are refused before anything is written.

use crate::common;

use std::fs;
use std::path::Path;

use common::fixtures::{OPENABLE, copy_of, digest_data, digest_tree, options};
use factlog::harness::codec;
use factlog::harness::migrate::{MigrateOptions, migrate};
use factlog::harness::{Body, EventType, State, apply};
use factlog::{ErrorKind, Seq, Store};
use serde_json::Value;

fn to_2() -> MigrateOptions {
    MigrateOptions { to: 2, dry_run: false, backup: None }
}

/// Every event of the store, decoded, with its raw record.
fn events(store: &Store) -> Vec<(factlog::harness::Event, Vec<u8>)> {
    let raw = common::fixtures::raw_records(store);
    let decoded: Vec<_> = store.events(Seq(1)).unwrap().map(Result::unwrap).collect();
    assert_eq!(raw.len(), decoded.len());
    decoded.into_iter().zip(raw).collect()
}

fn tasks_json(state: &State) -> Value {
    serde_json::to_value(&state.tasks).unwrap()
}

#[test]
fn every_v1_fixture_migrates_to_2_and_means_what_it_meant() {
    for name in OPENABLE {
        let (tmp, dir) = copy_of(name);
        let before = Store::open(&dir, options()).unwrap();
        let old_events = events(&before);
        let old_state = before.state();
        let old_plan = serde_json::to_value(before.plan_recovery()).unwrap();
        before.close().unwrap();
        let data_before = digest_data(&dir);

        let report = migrate(&dir, options(), &to_2()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((report.from, report.to, report.already_current), (1, 2, false), "{name}");
        assert_eq!(report.events, old_events.len() as u64, "{name}");
        assert_eq!(report.tasks.len(), old_state.tasks.len(), "{name}");

        // The backup is the old store, byte for byte.
        let backup = report.backup.clone().unwrap();
        assert_eq!(backup, tmp.path().join("store.backup-v1"), "{name}");
        let strip = |tree: Vec<(std::path::PathBuf, u32)>, root: &Path| {
            tree.into_iter()
                .map(|(p, c)| (p.strip_prefix(root).unwrap().to_path_buf(), c))
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(digest_tree(&backup), &backup), strip(data_before, &dir), "{name}");
        let old = Store::open_read_only(&backup, options()).unwrap();
        assert_eq!(old.log().format_version(), 1);
        drop(old);

        let after = Store::open(&dir, options()).unwrap();
        assert_eq!(after.log().format_version(), 2, "{name}");
        let new_events = events(&after);
        assert_eq!(new_events.len(), old_events.len() + old_state.tasks.len(), "{name}");
        let mut rewritten = 0;
        let mut replayed = State::default();
        for ((old, old_raw), (new, new_raw)) in old_events.iter().zip(&new_events) {
            assert_eq!(old, new, "{name}: seq {} reads the same", old.seq.0);
            let env = codec::peek(new.seq, new_raw).unwrap();
            if env.tag == EventType::ToolResult.tag() {
                assert_eq!(env.schema, 2, "{name}: seq {} is rewritten at schema 2", new.seq.0);
                rewritten += 1;
            } else {
                assert_eq!(old_raw, new_raw, "{name}: seq {} is copied byte for byte", new.seq.0);
            }
            apply(&mut replayed, new);
        }
        assert_eq!(tasks_json(&replayed), tasks_json(&old_state), "{name}: same state");
        assert_eq!(report.rewritten, rewritten, "{name}");
        // One audit event per task, after the old events.
        for (audit, _) in &new_events[old_events.len()..] {
            let Body::StateMigrated(_) = &audit.body else {
                panic!("{name}: {audit:?} is not an audit event");
            };
            let figures = report.tasks.iter().find(|t| t.task == audit.task).unwrap();
            let body = codec::body_to_value(&audit.body);
            assert_eq!(body["from"], 1);
            assert_eq!(body["to"], 2);
            assert_eq!(body["events"], figures.events);
            assert_eq!(body["state_digest"], figures.state_digest.as_str());
            assert_eq!(body["backup"], backup.display().to_string());
        }
        let mut plan = serde_json::to_value(after.plan_recovery()).unwrap();
        let mut old_plan = old_plan.clone();
        for p in [&mut plan, &mut old_plan] {
            for task in p["tasks"].as_array_mut().unwrap() {
                task.as_object_mut().unwrap().remove("events_written");
            }
        }
        assert_eq!(plan, old_plan, "{name}: same recovery plan");
    }
}

#[test]
fn migrating_again_is_a_no_op_and_a_dry_run_writes_nothing() {
    let (_tmp, dir) = copy_of("v1-clean-multi-task");
    let tree = digest_tree(&dir);
    let dry = migrate(&dir, options(), &MigrateOptions { dry_run: true, ..to_2() }).unwrap();
    assert!(dry.dry_run && dry.backup.is_none());
    assert_eq!(dry.events, 140);
    assert!(dry.rewritten > 0);
    assert_eq!(digest_tree(&dir), tree, "a dry run writes nothing");
    let first = migrate(&dir, options(), &to_2()).unwrap();
    assert!(!first.already_current);
    let settled = digest_data(&dir);
    let again = migrate(&dir, options(), &to_2()).unwrap();
    assert!(again.already_current);
    assert_eq!(again.backup, None);
    assert_eq!(digest_data(&dir), settled, "running it again changes nothing");
    let parent = dir.parent().unwrap();
    let backups = fs::read_dir(parent)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("backup"));
    assert_eq!(backups.count(), 1);
}

/// Writes 8 bytes of garbage just after the last record of the store's active segment: a torn
/// tail that a writable open would cut.
fn tear_tail(dir: &Path) {
    let mut segments: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segments.sort();
    let active = segments.last().unwrap();
    let mut bytes = fs::read(active).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    let at = end.div_ceil(8) * 8;
    bytes[at..at + 8].copy_from_slice(&[0xAB; 8]);
    fs::write(active, bytes).unwrap();
}

#[test]
fn an_event_that_cannot_be_upcast_stops_migration_before_anything_is_written() {
    // With a torn tail too: a writable open would cut it, so migrate must refuse first.
    let (tmp, dir) = copy_of("v1-free-text-status");
    tear_tail(&dir);
    let whole = digest_tree(tmp.path());
    let err = migrate(&dir, options(), &to_2()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::CannotUpcast { seq: 3, .. }), "{err}");
    assert_eq!(digest_tree(tmp.path()), whole, "no lock, no cut tail, no backup: nothing");
    let torn = factlog::verify(&dir, factlog::Options::new()).unwrap();
    assert!(
        matches!(torn.outcome, factlog::VerifyOutcome::TornTail(_)),
        "the torn tail is still there: {:?}",
        torn.outcome
    );
}

#[test]
fn an_event_that_cannot_be_upcast_stops_open_and_migration_and_changes_nothing() {
    let (tmp, dir) = copy_of("v1-free-text-status");
    let data = digest_data(&dir);
    let err = Store::open(&dir, options()).unwrap_err();
    let message = err.to_string();
    match err.into_kind() {
        ErrorKind::CannotUpcast { seq, .. } => assert_eq!(seq, 3),
        other => panic!("{other:?}"),
    }
    assert!(message.contains("timeout") && message.contains('3'), "{message}");
    let err = migrate(&dir, options(), &to_2()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::CannotUpcast { seq: 3, .. }), "{err}");
    assert_eq!(digest_data(&dir), data);
    let names: Vec<_> = fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "no backup was made: {names:?}");
}

#[test]
fn versions_this_build_does_not_know_are_refused_before_anything_is_written() {
    // A version to migrate to that this build cannot write.
    let (_tmp, dir) = copy_of("v1-clean-multi-task");
    let err = migrate(&dir, options(), &MigrateOptions { to: 3, ..to_2() }).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::InvalidOptions { .. }), "{err}");
    // A snapshot file of a newer format: the store is refused before its lock is taken.
    let snap = dir.join("snapshots").join("00000000000000000054.snap");
    let mut bytes = fs::read(&snap).unwrap();
    bytes[8] = 2;
    fs::write(&snap, bytes).unwrap();
    let tree = digest_tree(&dir);
    let err = Store::open(&dir, options()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::UnsupportedVersion { found: 2, supported: 1, .. }),
        "{err}"
    );
    assert_eq!(digest_tree(&dir), tree, "nothing written, not even LOCK");
    // A rewrite marker of a newer version.
    let (_tmp, dir) = copy_of("v1-torn-tail");
    let mut marker = vec![0u8; 32];
    marker[..8].copy_from_slice(b"FACTLRWR");
    marker[8] = 9;
    fs::write(dir.join("REWRITE"), marker).unwrap();
    let tree = digest_tree(&dir);
    let err = Store::open(&dir, options()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::UnsupportedVersion { found: 9, .. }), "{err}");
    assert_eq!(digest_tree(&dir), tree);
    // A segment of a newer format: the store and its migration are refused, nothing written.
    let (tmp, dir) = copy_of("v1-clean-multi-task");
    let segment = dir.join("00000000000000000001.seg");
    let mut bytes = fs::read(&segment).unwrap();
    bytes[8] = 3;
    fs::write(&segment, bytes).unwrap();
    let whole = digest_tree(tmp.path());
    for outcome in
        [Store::open(&dir, options()).map(drop), migrate(&dir, options(), &to_2()).map(drop)]
    {
        let err = outcome.unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::UnsupportedVersion { found: 3, supported: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("newer factlog"), "{err}");
    }
    assert_eq!(digest_tree(tmp.path()), whole, "nothing written, not even LOCK");
}

#[test]
fn a_directory_that_holds_no_store_is_not_migrated_and_none_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    for dir in [empty.clone(), tmp.path().join("missing")] {
        let err = migrate(&dir, options(), &to_2()).unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::NotALog { .. }), "{err}");
    }
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0, "no store was created");
    assert!(!tmp.path().join("missing").exists());
}

#[test]
fn a_snapshot_of_an_unknown_state_schema_is_skipped_and_the_report_says_so() {
    let (_tmp, dir) = copy_of("v1-clean-multi-task");
    let full = Store::open(&dir, options()).unwrap().state();
    let snap = dir.join("snapshots").join("00000000000000000054.snap");
    let decoded = factlog::harness::snapshot::decode(&snap, &fs::read(&snap).unwrap()).unwrap();
    let unknown = factlog::harness::state::STATE_SCHEMA + 1;
    let newer = factlog::harness::snapshot::encode(Seq(54), unknown, &decoded.body).unwrap();
    fs::write(&snap, newer).unwrap();
    let store = Store::open(&dir, options()).unwrap();
    let report = store.open_report();
    assert!(report.snapshot.is_none());
    assert_eq!(report.replayed_events, 140);
    assert_eq!(report.skipped_snapshots.len(), 1);
    let (path, reason) = &report.skipped_snapshots[0];
    assert_eq!(path, &snap);
    assert!(
        reason.contains(
            "holds state schema 3, this build folds schema 2: skipped, the state is \
                         rebuilt by replaying the log"
        ),
        "{reason}"
    );
    assert_eq!(tasks_json(&store.state()), tasks_json(&full));
    // The snapshot is not one that reclaiming may rely on: no segment is removed for it.
    assert_eq!(store.reclaim().unwrap(), (0, 0));
    drop(store);
    // `factlog info` says why it is not used.
    let run = common::factlog(&["info", dir.to_str().unwrap()], b"");
    let text = String::from_utf8(run.stdout).unwrap();
    assert!(text.contains("not valid: snapshot") && text.contains("state schema 3"), "{text}");
    assert!(text.contains("format version: 1"), "{text}");
}

#[test]
fn an_empty_format_1_store_migrates_with_nothing_to_rewrite() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let format_1 = options().log(
        factlog::Options::new()
            .segment_bytes(8192)
            .background_threads(false)
            .new_log_format_version(1),
    );
    Store::open(&dir, format_1.clone()).unwrap().close().unwrap();
    let dry = migrate(&dir, options(), &MigrateOptions { dry_run: true, ..to_2() }).unwrap();
    assert_eq!((dry.from, dry.events, dry.tasks.len()), (1, 0, 0));
    let report = migrate(&dir, options(), &to_2()).unwrap();
    assert_eq!((report.from, report.to, report.events, report.rewritten), (1, 2, 0, 0));
    let store = Store::open(&dir, options()).unwrap();
    assert_eq!(store.log().format_version(), 2);
    assert_eq!(store.log().last_seq(), None, "no task, so no audit event");
    drop(store);
    assert!(migrate(&dir, options(), &to_2()).unwrap().already_current);
}
