//! Stable idempotency keys and the side-effect ledger (R13; `format-spec/events.md`,
//! "Request keys" and "What the store refuses"):
//! - `request_key::derive` is stable: the same inputs give the same key, a changed revision,
//!   operation or task a new one; three known keys are pinned as literals (checked once
//!   against the spec's formula with an independent SHA-256 in Python) and recomputed here
//!   from the formula with `sha2`;
//! - a `tool/call` whose key (or call id) already has a receipt returns
//!   `Appended::Duplicate` with the first receipt and writes nothing, also after a reopen and
//!   after a snapshot; inside a batch it is refused and the batch writes nothing;
//! - after a restart left a call `outcome_unknown`, dispatching it again with the same key is
//!   allowed and counted as a retry (`execution.retries`), and its result completes the key;
//! - a result for a call never dispatched, and a second result, are refused with
//!   `InvalidEvent` and write nothing.

use crate::common;

use common::harness::{
    append, assistant, call, err_of, events, is_invalid_event, last_seq, open, result, task_events,
};
use factlog::harness::event::Effect;
use factlog::harness::recovery::Plan;
use factlog::harness::state::CallStatus;
use factlog::harness::{Body, RequestKey, TaskId, request_key};
use factlog::{AppendOptions, Appended, Seq, Store};
use serde_json::json;
use sha2::{Digest, Sha256};

fn key(task: &str, operation: &str, revision: u64) -> RequestKey {
    request_key::derive(&TaskId::from(task), operation, revision)
}

/// The key as `format-spec/events.md` defines it, computed here without the library.
fn key_by_the_spec(task: &str, operation: &str, revision: u64) -> String {
    let mut input = b"factlog/request-key/v1\0".to_vec();
    input.extend_from_slice(&(task.len() as u32).to_le_bytes());
    input.extend_from_slice(task.as_bytes());
    input.extend_from_slice(&(operation.len() as u32).to_le_bytes());
    input.extend_from_slice(operation.as_bytes());
    input.extend_from_slice(&revision.to_le_bytes());
    let digest = Sha256::digest(&input);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("rk1_{hex}")
}

/// Known keys: the compatibility promise (also for `format-spec/vectors/`).
const PINNED: [(&str, &str, u64, &str); 3] = [
    ("t1", "publish_article:draft-7", 12, "rk1_f4cf89a6ba3af15dd9d34f8e57bc00d1"),
    ("session-1", "publish:weekly-report", 7, "rk1_bc69a2e12f8b8edc40d3190f657a50a2"),
    ("任务-β", "pay:invoice-42", 0, "rk1_11a7259c2be0270588083ab9e8d855cb"),
];

#[test]
fn request_keys_are_stable_and_pinned() {
    for (task, operation, revision, expected) in PINNED {
        assert_eq!(key(task, operation, revision).as_str(), expected, "{task} {operation}");
        assert_eq!(key_by_the_spec(task, operation, revision), expected, "the spec's formula");
    }
    let base = key("t1", "publish_article:draft-7", 12);
    assert_eq!(base, key("t1", "publish_article:draft-7", 12), "same inputs, same key");
    let same_in_another_thread =
        std::thread::spawn(|| key("t1", "publish_article:draft-7", 12)).join().expect("thread");
    assert_eq!(base, same_in_another_thread);
    assert_ne!(base, key("t1", "publish_article:draft-7", 13), "a new revision");
    assert_ne!(base, key("t1", "publish_article:draft-8", 12), "a new operation");
    assert_ne!(base, key("t2", "publish_article:draft-7", 12), "another task");
    assert_ne!(key("ab", "c", 1), key("a", "bc", 1), "lengths keep the fields apart");
    assert_ne!(key("t1", "op", 1 << 32), key("t1", "op", 1), "all 64 revision bits count");
    for revision in [0, 1, u64::MAX] {
        let k = key("t1", "op", revision);
        assert_eq!(k.as_str(), key_by_the_spec("t1", "op", revision));
        assert!(k.as_str().starts_with("rk1_") && k.as_str().len() == 36, "{k}");
        assert!(k.as_str()[4..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }
}

/// Dispatches `c1` with `k` and records its result; returns the result's seq.
fn complete_once(store: &Store, k: &RequestKey) -> Seq {
    append(store, "t1", call("c1", "publish", Effect::Idempotent, Some(k)));
    append(store, "t1", result("c1", Some(json!({"article_id": 7, "url": "https://ex/7"}))))
}

#[track_caller]
fn assert_duplicate(store: &Store, body: Body, result_seq: Seq) {
    let task = store.task("t1").expect("task");
    let (before, revision) = (last_seq(store), task.revision());
    let appended = task.append(body).expect("a duplicate is not an error");
    assert_eq!(
        appended,
        Appended::Duplicate {
            call_id: "c1".into(),
            receipt: Some(json!({"article_id": 7, "url": "https://ex/7"})),
            result_seq,
            revision,
        }
    );
    assert_eq!(last_seq(store), before, "a duplicate writes nothing");
    assert_eq!(task.revision(), revision);
}

#[test]
fn a_known_key_returns_the_first_receipt_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let k = key("t1", "publish:report", 0);
    let result_seq = complete_once(&store, &k);
    // A second logical dispatch of the same request, under a new call id.
    assert_duplicate(&store, call("c2", "publish", Effect::Idempotent, Some(&k)), result_seq);
    // The same call id again, with or without its key.
    assert_duplicate(&store, call("c1", "publish", Effect::Idempotent, Some(&k)), result_seq);
    assert_duplicate(&store, call("c1", "publish", Effect::Idempotent, None), result_seq);
    let state = store.task_state("t1").expect("t1");
    assert_eq!(state.side_effects[&k].status, CallStatus::Completed);
    assert!(!state.session.calls.contains_key("c2"), "the duplicate left no trace");
    assert_eq!(state.execution.retries, 0);

    // A changed request (new revision) gets a new key and a new side effect.
    let changed = key("t1", "publish:report", store.task("t1").expect("task").revision());
    assert_ne!(changed, k);
    let appended = store
        .task("t1")
        .expect("task")
        .append(call("c3", "publish", Effect::Idempotent, Some(&changed)))
        .expect("a new request");
    assert!(matches!(appended, Appended::Written { .. }), "{appended:?}");

    // Across a reopen.
    store.close().expect("close");
    let store = open(dir.path());
    assert_duplicate(&store, call("c4", "publish", Effect::Idempotent, Some(&k)), result_seq);
    assert_eq!(store.recover().expect("recover").tasks[0].calls.len(), 2, "c1 and c3");
    assert_duplicate(&store, call("c5", "publish", Effect::Idempotent, Some(&k)), result_seq);
}

#[test]
fn the_ledger_survives_a_snapshot() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let k = key("t1", "publish:report", 0);
    let result_seq = complete_once(&store, &k);
    store.checkpoint().expect("checkpoint");
    store.close().expect("close");
    let store = open(dir.path());
    assert!(store.open_report().snapshot.is_some(), "the state came from the snapshot");
    assert_eq!(store.open_report().replayed_events, 0);
    assert_duplicate(&store, call("c2", "publish", Effect::Idempotent, Some(&k)), result_seq);
}

#[test]
fn a_duplicate_dispatch_inside_a_batch_is_refused_and_the_batch_writes_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let k = key("t1", "publish:report", 0);
    complete_once(&store, &k);
    let before = last_seq(&store);
    let batch = vec![
        common::harness::user("publishing again"),
        call("c2", "publish", Effect::Idempotent, Some(&k)),
    ];
    let e =
        err_of(store.task("t1").expect("task").append_batch_with(batch, AppendOptions::default()));
    assert!(is_invalid_event(&e, "tool/call"), "{e}");
    assert_eq!(last_seq(&store), before, "nothing of the batch was written");
}

#[test]
fn a_retry_with_the_same_key_after_an_unknown_outcome_is_allowed_and_counted() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let k = key("t1", "publish:report", 0);
    {
        let store = open(dir.path());
        append(&store, "t1", assistant("", &[("c1", "publish")]));
        append(&store, "t1", call("c1", "publish", Effect::Idempotent, Some(&k)));
        // Dispatched again in the same run, before any result: refused, it is in flight.
        let e = err_of(store.task("t1").expect("task").append(call(
            "c1",
            "publish",
            Effect::Idempotent,
            Some(&k),
        )));
        assert!(is_invalid_event(&e, "tool/call"), "{e}");
        assert_eq!(last_seq(&store), 2);
        // The process dies while the tool runs.
    }
    let store = open(dir.path());
    let report = store.recover().expect("recover");
    let c1 = &report.tasks[0].calls[0];
    assert_eq!((c1.plan, c1.request_key.as_ref()), (Plan::RetrySameKey, Some(&k)));
    assert_eq!(
        store.task_state("t1").expect("t1").side_effects[&k].status,
        CallStatus::OutcomeUnknown
    );

    let task = store.task("t1").expect("task");
    let appended = task.append(call("c1", "publish", Effect::Idempotent, Some(&k))).expect("retry");
    assert!(matches!(appended, Appended::Written { .. }), "{appended:?}");
    let state = task.state();
    assert_eq!(state.execution.retries, 1, "the retry is counted");
    assert_eq!(state.session.calls["c1"].dispatches, 2);
    assert_eq!(state.session.calls["c1"].status, CallStatus::Dispatched);
    let result_seq = common::harness::written(
        task.append(result("c1", Some(json!({"article_id": 7, "url": "https://ex/7"}))))
            .expect("result"),
    )
    .0;
    let state = task.state();
    assert_eq!(state.side_effects[&k].status, CallStatus::Completed);
    assert_eq!(state.side_effects[&k].result_seq, result_seq.0);
    assert_duplicate(&store, call("c9", "publish", Effect::Idempotent, Some(&k)), result_seq);
    // The log shows both dispatches, the unknown outcome between them, and one result.
    let names: Vec<String> = task_events(&store, "t1")
        .iter()
        .filter(|e| {
            matches!(&e.body, Body::ToolCall(_) | Body::ToolResult(_) | Body::ToolOutcomeUnknown(_))
        })
        .map(|e| e.body.type_name())
        .collect();
    assert_eq!(names, ["tool/call", "tool/outcome_unknown", "tool/call", "tool/result"]);
}

#[test]
fn results_for_undispatched_calls_and_second_results_are_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let task = store.task("t1").expect("task");
    let refused = |call_id: &str| {
        let before = last_seq(&store);
        let e = err_of(task.append(result(call_id, Some(json!({"id": 1})))));
        assert!(is_invalid_event(&e, "tool/result"), "{call_id}: {e}");
        assert_eq!(last_seq(&store), before, "{call_id}: nothing written");
    };
    refused("never-heard-of");
    append(&store, "t1", assistant("", &[("c-asked", "fetch")]));
    refused("c-asked");
    append(&store, "t1", call("c1", "fetch", Effect::ReadOnly, None));
    append(&store, "t1", result("c1", Some(json!({"rows": 3}))));
    refused("c1");
    assert_eq!(events(&store).len(), 3);
    let state = store.task_state("t1").expect("t1");
    assert_eq!(
        state.session.calls["c1"].receipt,
        Some(json!({"rows": 3})),
        "the first result stands"
    );
    assert_eq!(state.session.calls["c-asked"].status, CallStatus::NotStarted);
}

#[test]
fn a_result_after_an_unknown_outcome_completes_the_call() {
    // The `verify` plan: the harness asked the service, which says the payment went through.
    let dir = tempfile::tempdir().expect("temporary directory");
    let k = key("t1", "pay:invoice-42", 0);
    {
        let store = open(dir.path());
        append(&store, "t1", call("c1", "pay", Effect::Queryable, Some(&k)));
    }
    let store = open(dir.path());
    store.recover().expect("recover");
    append(&store, "t1", result("c1", Some(json!({"payment": "p-9"}))));
    let state = store.task_state("t1").expect("t1");
    assert_eq!(state.session.calls["c1"].status, CallStatus::Completed);
    assert_eq!(state.side_effects[&k].receipt, Some(json!({"payment": "p-9"})));
    assert_eq!(state.execution.retries, 0, "verifying is not a retry");
}

#[test]
fn a_key_in_flight_under_another_call_id_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::harness::open(dir.path());
    let key = factlog::harness::request_key::derive(&"t1".into(), "pay:invoice-9", 1);
    common::harness::append(
        &store,
        "t1",
        common::harness::call("p1", "pay", Effect::Idempotent, Some(&key)),
    );
    let before = common::harness::last_seq(&store);
    let task = store.task("t1").unwrap();
    let e = common::harness::err_of(task.append(common::harness::call(
        "p2",
        "pay",
        Effect::Idempotent,
        Some(&key),
    )));
    assert!(common::harness::is_invalid_event(&e, "tool/call"), "{e}");
    assert!(e.to_string().contains("in flight"), "{e}");
    assert_eq!(common::harness::last_seq(&store), before);
}

/// A digest sent with the arguments must be theirs: the call-id and duplicate checks compare
/// digests, so a wrong one would pass a changed request off as the same one.
#[test]
fn a_tool_call_whose_args_digest_is_not_the_digest_of_its_args_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let task = store.task("t").unwrap();
    let args = json!({"to": "ops@example.com", "body": "hello"});
    let with = |call_id: &str, digest: Option<String>| {
        let Body::ToolCall(mut body) = call(call_id, "send_mail", Effect::Unsafe, None) else {
            unreachable!("call() builds a tool/call")
        };
        body.args = Some(args.clone());
        body.args_digest = digest;
        Body::ToolCall(body)
    };
    let wrong = "0".repeat(64);
    let refused = err_of(task.append(with("c1", Some(wrong))));
    assert!(is_invalid_event(&refused, "tool/call"), "{refused}");
    assert!(refused.to_string().contains("args_digest"), "{refused}");
    assert!(task_events(&store, "t").is_empty(), "nothing written for a refused call");

    let right = request_key::args_digest(&args);
    task.append(with("c1", Some(right.clone()))).unwrap();
    task.append(with("c2", None)).unwrap();
    let digests: Vec<_> = task_events(&store, "t")
        .into_iter()
        .filter_map(|event| match event.body {
            Body::ToolCall(c) => c.args_digest,
            _ => None,
        })
        .collect();
    assert_eq!(digests, [right.clone(), right], "a given right digest and a computed one agree");
}
