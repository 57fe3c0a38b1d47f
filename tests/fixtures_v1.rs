//! The frozen stores of factlog 0.1.0 (`tests/fixtures/`, segment format 1, bodies at schema 1)
//! open with the current code and mean what they meant: each copy is opened and its stored
//! records, folded state, recovery plan and open report are compared with the expectations the
//! release wrote beside it. The fixtures themselves are never written to.

use crate::common;

use common::fixtures::{
    copy_of, digest_tree, expected, expected_events, fixture, open_report, options, stored_events,
};
use factlog::{Seq, Store};
use serde_json::json;

/// Opens a copy of `name` and checks it against every expectation; returns the open store.
fn check(name: &str) -> (tempfile::TempDir, Store) {
    let (dir, path) = copy_of(name);
    let store = Store::open(&path, options()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(store.log().format_version(), 1, "{name}: a fixture stays in format 1");
    assert_eq!(open_report(&store), expected(name, "open.json"), "{name}: open report");
    let events = stored_events(&store);
    let want = expected_events(name);
    assert_eq!(events.len(), want.len(), "{name}: event count");
    for (got, want) in events.iter().zip(&want) {
        assert_eq!(got, want, "{name}: stored record");
    }
    // Every record decodes: nothing is skipped or refused.
    let decoded = store.events(Seq(1)).unwrap().collect::<factlog::Result<Vec<_>>>().unwrap();
    assert_eq!(decoded.len(), want.len(), "{name}: decoded events");
    let state = common::fixtures::state_as_v1(serde_json::to_value(store.state()).unwrap());
    assert_eq!(state, expected(name, "state.json"), "{name}: folded state");
    let plan = serde_json::to_value(store.plan_recovery()).unwrap();
    assert_eq!(plan, expected(name, "recovery.json"), "{name}: recovery plan");
    (dir, store)
}

/// How many events of the store are kept opaque (unknown types or schemas).
fn opaque_events(store: &Store) -> usize {
    store
        .events(Seq(1))
        .unwrap()
        .map(Result::unwrap)
        .filter(|e| matches!(e.body, factlog::harness::Body::Opaque(_)))
        .count()
}

#[test]
fn a_clean_multi_task_store_with_a_snapshot_opens_as_it_was_written() {
    let (_dir, store) = check("v1-clean-multi-task");
    let report = store.open_report();
    assert!(report.skipped_snapshots.is_empty(), "{:?}", report.skipped_snapshots);
    assert_eq!(store.task_ids().len(), 3);
}

#[test]
fn a_store_with_a_torn_tail_is_cut_where_the_release_cut_it() {
    let (_dir, store) = check("v1-torn-tail");
    assert!(store.open_report().log.tail_cut.is_some());
}

#[test]
fn a_store_with_a_call_in_flight_gets_the_recovery_plan_the_release_gave() {
    let (dir, store) = check("v1-open-call");
    // Recovering for real writes the plan and then reports it again unchanged.
    let done = store.recover().unwrap();
    let mut planned = expected("v1-open-call", "recovery.json");
    planned["dry_run"] = json!(false);
    let written = serde_json::to_value(&done).unwrap();
    assert_eq!(written["tasks"][0]["calls"], planned["tasks"][0]["calls"]);
    assert_eq!(written["tasks"][0]["expired"], planned["tasks"][0]["expired"]);
    store.close().unwrap();
    let again = Store::open(dir.path().join("store"), options()).unwrap();
    assert_eq!(again.plan_recovery().events_written, 0);
}

#[test]
fn unknown_types_schemas_and_fields_are_kept_and_not_folded_as_known() {
    let (_dir, store) = check("v1-unknown-data");
    let opaque = opaque_events(&store);
    assert_eq!(opaque, 3);
}

#[test]
fn unknown_data_survives_a_snapshot_and_an_open_from_it() {
    let (_dir, path) = copy_of("v1-unknown-data");
    let store = Store::open(&path, options()).unwrap();
    let meta = store.checkpoint().unwrap();
    let last = store.log().last_seq().unwrap();
    assert_eq!(meta.covered_seq, last, "the snapshot covers every event");
    store.close().unwrap();

    let store = Store::open(&path, options()).unwrap();
    let report = store.open_report();
    assert_eq!(report.snapshot.as_ref().map(|m| m.covered_seq), Some(last));
    assert_eq!(report.replayed_events, 0, "the state came from the snapshot alone");
    // The state loaded from the snapshot is the fold the release wrote down: unknown events
    // counted, never folded as known ones.
    let state = common::fixtures::state_as_v1(serde_json::to_value(store.state()).unwrap());
    assert_eq!(state, expected("v1-unknown-data", "state.json"));
    // The records, unknown types, schemas and fields included, are still in the log as they
    // were written, and still decode (the opaque ones whole).
    assert_eq!(stored_events(&store), expected_events("v1-unknown-data"));
    let opaque = opaque_events(&store);
    assert_eq!(opaque, 3);
    drop(store);
    let run = common::factlog(&["export", path.to_str().unwrap(), "--json"], b"");
    assert_eq!(run.code, Some(0), "{run:?}");
    let text = String::from_utf8(run.stdout).unwrap();
    assert!(text.contains("\"priority\":\"p1\"") && text.contains("000102feff"), "{text}");
}

#[test]
fn the_fixtures_in_the_repository_are_never_written() {
    // Every test above opens a copy; this one opens the committed stores read-only and checks
    // that nothing in them changed.
    for name in ["v1-clean-multi-task", "v1-torn-tail", "v1-open-call", "v1-unknown-data"] {
        let before = digest_tree(&fixture(name));
        let store = Store::open_read_only(fixture(name).join("store"), options()).unwrap();
        drop(store);
        assert_eq!(digest_tree(&fixture(name)), before, "{name}");
    }
}

#[test]
fn export_keeps_unknown_fields_and_opaque_bodies_whole() {
    let (_dir, path) = copy_of("v1-unknown-data");
    let run = common::factlog(&["export", path.to_str().unwrap(), "--json"], b"");
    assert_eq!(run.code, Some(0), "{run:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["priority"], "p1", "an unknown field of a known type");
    assert_eq!(lines[0]["labels"], json!(["a", "b"]));
    assert_eq!(lines[1]["type"], "opaque/0x7f01");
    assert_eq!(lines[1]["note"], "an event type from the future");
    assert_eq!(lines[2]["opaque_hex"], "000102feff", "a binary opaque body, whole");
    assert_eq!(lines[2]["opaque_encoding"], 7);
    assert_eq!(
        (lines[3]["type"].as_str(), lines[3]["schema"].as_u64()),
        (Some("opaque/0x0401"), Some(9))
    );
    assert_eq!(lines[3]["parts"][0]["text"], "schema 9");
    let result = lines.iter().find(|l| l["type"] == "tool/result").unwrap();
    assert_eq!(result["retry_after_ms"], 1500, "an unknown field of an upcast body");
    assert_eq!(result["outcome"], "error");
}

#[test]
fn a_state_read_from_a_schema_1_snapshot_verifies_deep_against_the_fold() {
    // The release's snapshot holds state schema 1, without the fields schema 2 added for the
    // events before it: the deep check compares it (and the live state loaded from it) with
    // the fold at that schema, and finds them equal, also after new events.
    let (_tmp, path) = copy_of("v1-clean-multi-task");
    let store = Store::open(&path, options()).unwrap();
    let loaded = store.open_report().snapshot.clone().expect("the release's snapshot is used");
    assert_eq!(loaded.state_schema, 1);
    store
        .task("alpha")
        .unwrap()
        .append(factlog::harness::Body::UserMessage(factlog::harness::event::UserMessage {
            text: "after the upgrade".to_owned(),
            ..Default::default()
        }))
        .unwrap();
    let deep = store.verify_deep().unwrap();
    assert_eq!(deep.snapshot_matches, Some(true), "{deep:?}");
    assert!(deep.live_matches, "{deep:?}");
    // A snapshot written now holds schema 2, and the fields it added.
    let meta = store.checkpoint().unwrap();
    assert_eq!(meta.state_schema, factlog::harness::state::STATE_SCHEMA);
    let deep = store.verify_deep().unwrap();
    assert_eq!(deep.snapshot_matches, Some(true), "{deep:?}");
    assert!(deep.live_matches, "{deep:?}");
    store.close().unwrap();
}
