//! Adapter records (`record/put`, `record/removed`, `format-spec/events.md`): a put keeps its
//! value whole through a reopen and a snapshot, moves the task's revision and nothing else in
//! the folded state, and stays out of the model-visible history; a removal is an event that
//! names only earlier events, and the store refuses one that names none, seq 0, a later seq, an
//! empty or over-long kind, or too many seqs, writing nothing.

use crate::common;

use common::harness::{append, err_of, is_invalid_event, open, task_events, turn_start, user};
use factlog::harness::Body;
use factlog::harness::event::{RecordPut, RecordRemoved};
use factlog::limits::{RECORD_KIND_BYTES_MAX, RECORD_REMOVED_SEQS_MAX};
use factlog::{ErrorKind, Store};
use serde_json::json;

fn put(kind: &str, key: Option<&str>, value: serde_json::Value) -> Body {
    Body::RecordPut(RecordPut {
        kind: kind.to_owned(),
        key: key.map(str::to_owned),
        value,
        extra: serde_json::Map::new(),
    })
}

fn removed(kind: &str, seqs: Vec<u64>, through_seq: Option<u64>) -> Body {
    Body::RecordRemoved(RecordRemoved {
        kind: kind.to_owned(),
        seqs,
        through_seq,
        extra: serde_json::Map::new(),
    })
}

/// Asserts `body` is refused with `what` and that nothing was written.
#[track_caller]
fn assert_refused(store: &Store, task: &str, body: Body, what: impl Fn(&factlog::Error) -> bool) {
    let before = store.task(task).expect("task").revision();
    let error = err_of(store.task(task).expect("task").append(body));
    assert!(what(&error), "unexpected error: {error}");
    assert_eq!(store.task(task).expect("task").revision(), before, "nothing written");
}

#[test]
fn a_put_is_kept_whole_moves_only_the_revision_and_stays_out_of_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let value = json!({"type": "reasoning", "summary": [{"text": "é ✓"}], "n": [1, 2.5, null]});
    {
        let store = open(dir.path());
        append(&store, "t", turn_start());
        append(&store, "t", user("hello"));
        let before = store.task_state("t").expect("state");
        append(&store, "t", put("agents/item", Some("rs_1"), value.clone()));
        let after = store.task_state("t").expect("state");
        assert_eq!(after.revision, before.revision + 1);
        let mut same = after.clone();
        same.revision = before.revision;
        same.last_seq = before.last_seq;
        assert_eq!(same, before, "a put changes nothing in the state but the revision");
        let history = store.history("t").expect("history");
        assert_eq!(history.len(), 1, "only the user message: {history:?}");
        store.checkpoint().expect("snapshot");
        append(&store, "t", put("agents/item", None, serde_json::Value::Null));
        store.close().expect("close");
    }
    let store = open(dir.path());
    let events = task_events(&store, "t");
    let Body::RecordPut(first) = &events[2].body else { panic!("{:?}", events[2]) };
    assert_eq!((first.kind.as_str(), first.key.as_deref()), ("agents/item", Some("rs_1")));
    assert_eq!(first.value, value);
    let Body::RecordPut(second) = &events[3].body else { panic!("{:?}", events[3]) };
    assert_eq!((second.key.as_ref(), &second.value), (None, &serde_json::Value::Null));
    assert_eq!(store.task_state("t").expect("state").revision, 4);
}

#[test]
fn a_removal_names_only_earlier_events_and_bad_ones_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    // A task with no events has nothing to remove.
    assert_refused(&store, "t", removed("agents/item", vec![], Some(1)), |e| {
        is_invalid_event(e, "record/removed")
    });
    let first = append(&store, "t", put("agents/item", Some("a"), json!(1))).0;
    let second = append(&store, "t", put("agents/item", Some("b"), json!(2))).0;
    append(&store, "t", removed("agents/item", vec![second], None));
    append(&store, "t", removed("agents/item", vec![first, second], Some(second)));
    let last = store.task_state("t").expect("state").last_seq;
    for body in [
        removed("agents/item", vec![], None),
        removed("agents/item", vec![0], None),
        removed("agents/item", vec![first, last + 1], None),
        removed("agents/item", vec![], Some(last + 1)),
        removed("", vec![first], None),
        put("", None, json!(null)),
    ] {
        assert_refused(&store, "t", body, |e| {
            is_invalid_event(e, "record/removed") || is_invalid_event(e, "record/put")
        });
    }
    let too_long = "k".repeat(RECORD_KIND_BYTES_MAX + 1);
    let too_many = vec![first; RECORD_REMOVED_SEQS_MAX + 1];
    for body in [put(&too_long, None, json!(null)), removed("agents/item", too_many, None)] {
        assert_refused(&store, "t", body, |e| matches!(e.kind(), ErrorKind::LimitExceeded { .. }));
    }
    // The longest kind and the most seqs are accepted.
    append(&store, "t", put(&"k".repeat(RECORD_KIND_BYTES_MAX), None, json!(null)));
    append(&store, "t", removed("agents/item", vec![first; RECORD_REMOVED_SEQS_MAX], None));
    let names: Vec<String> = task_events(&store, "t").iter().map(|e| e.body.type_name()).collect();
    assert_eq!(
        names,
        [
            "record/put",
            "record/put",
            "record/removed",
            "record/removed",
            "record/put",
            "record/removed"
        ]
    );
}
