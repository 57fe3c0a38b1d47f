//! Proves that segments are deleted only by the explicit reclaim operations: writing
//! snapshots never deletes a segment; `Store::reclaim` deletes only segments wholly covered by
//! the oldest valid snapshot kept, the state after reopen is unchanged, and reading from
//! before the first kept record is refused with `Reclaimed` instead of silently skipping.

use std::path::Path;

use factlog::harness::Body;
use factlog::harness::event::{ToolCall, ToolResult, TurnEnd, TurnStart, UserMessage};
use factlog::{Durability, ErrorKind, Log, Options, Seq, Store, StoreOptions};

fn options() -> StoreOptions {
    StoreOptions::new().log(Options::new().segment_bytes(16 * 1024))
}

fn segment_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".seg"))
        .count()
}

fn turn(store: &Store, n: usize) {
    let task = store.task("t1").unwrap();
    task.append(Body::TurnStart(TurnStart::default())).unwrap();
    task.append(Body::UserMessage(UserMessage { text: format!("turn {n}"), ..Default::default() }))
        .unwrap();
    for i in 0..100 {
        task.delta(&format!("token {i} of turn {n}")).unwrap();
    }
    let call_id = format!("c{n}");
    task.append(Body::ToolCall(ToolCall {
        call_id: call_id.as_str().into(),
        tool: "fetch".into(),
        effect: factlog::harness::event::Effect::ReadOnly,
        ..Default::default()
    }))
    .unwrap();
    task.append(Body::ToolResult(ToolResult {
        call_id: call_id.as_str().into(),
        receipt: Some(serde_json::json!({ "n": n })),
        ..Default::default()
    }))
    .unwrap();
    task.append(Body::TurnEnd(TurnEnd::default())).unwrap();
}

#[test]
fn checkpoints_never_delete_and_reclaim_keeps_what_snapshots_need() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), options()).unwrap();
    for n in 0..20 {
        turn(&store, n);
    }
    let before = segment_files(dir.path());
    assert!(before > 4, "the workload rolls several segments: {before}");
    let first = store.checkpoint().unwrap();
    for n in 20..40 {
        turn(&store, n);
    }
    store.checkpoint().unwrap();
    let after_checkpoints = segment_files(dir.path());
    assert!(after_checkpoints >= before, "a checkpoint deleted a segment");

    let state = store.state();
    let (removed, bytes) = store.reclaim().unwrap();
    assert!(removed > 0 && bytes > 0, "reclaim removed {removed} segments, {bytes} bytes");
    assert_eq!(segment_files(dir.path()), after_checkpoints - removed);
    // Only segments before the oldest snapshot's events are gone.
    let first_kept = store.log().first_seq().unwrap();
    assert!(first_kept.0 <= first.covered_seq.0 + 1, "{first_kept:?} vs {:?}", first.covered_seq);
    let err = store.log().read_from(Seq(1)).map(|_| ()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Reclaimed { requested: 1, first_available } if *first_available == first_kept.0),
        "{err}"
    );
    store.close().unwrap();

    let reopened = Store::open(dir.path(), options()).unwrap();
    assert_eq!(reopened.state(), state);
    assert!(reopened.open_report().snapshot.is_some());
    let history = reopened.history("t1").unwrap();
    assert!(!history.is_empty());
}

#[test]
fn log_reclaim_never_removes_the_active_segment_or_later_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), Options::new().segment_bytes(8192)).unwrap();
    for i in 0..2000u32 {
        log.append(&i.to_le_bytes(), Durability::Buffered).unwrap();
    }
    log.flush(Durability::Synced).unwrap();
    let (removed, _) = log.reclaim_before(Seq(1000)).unwrap();
    assert!(removed > 0);
    let first = log.first_seq().unwrap();
    assert!(first.0 <= 1000, "record 1000 must be kept, first is {first:?}");
    let records: Vec<_> = log.read_from(first).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(records.last().unwrap().seq, Seq(2000));
    // Reclaiming everything keeps the active segment and its records.
    log.reclaim_before(Seq(u64::MAX)).unwrap();
    assert_eq!(segment_files(dir.path()), 1);
    log.append(b"after", Durability::Synced).unwrap();
    log.close().unwrap();
    let log = Log::open(dir.path(), Options::new().segment_bytes(8192)).unwrap();
    assert_eq!(log.last_seq(), Some(Seq(2001)));
}
