//! Restoring is not resuming, through the library (R11, R12, R13, R16): a store handle that
//! opens a task an earlier holder wrote (crashed, killed, or closed cleanly) never inherits its
//! temporary authority or its in-flight calls, whether or not the harness calls `recover`:
//! the first handle on the task records the expiries and unknown outcomes; a pre-restart `once`
//! approval is refused; a side-effecting call waits until the unknown outcomes are resolved
//! (`NeedsRecovery`); a high-risk task waits for a confirmation. A call id that already names
//! one request is never taken for a duplicate of another (`CallIdReused`). Each case checks
//! that a refusal writes nothing. Crashes are simulated by `SimFs` (lost unsynced data).

use crate::common;

use common::harness::{
    append, approval_request, approved_call, assistant, call, contract, crash, err_of, events,
    grant, last_seq, open, open_sim, result, resume, turn_start,
};
use factlog::fs::sim::{CrashModel, SimFs};
use factlog::harness::Body;
use factlog::harness::event::{Effect, Risk, Scope, ToolCall};
use factlog::harness::state::{ApprovalStatus, CallStatus};
use factlog::{Appended, ErrorKind, Store};
use serde_json::json;

/// The scenario: a high-risk task with a `once` approval and a read-only call in
/// flight when the writer stops.
fn high_risk_with_open_work(store: &Store) {
    append(store, "t1", contract("move money", Risk::High));
    append(store, "t1", turn_start());
    append(store, "t1", approval_request("a1"));
    append(store, "t1", grant("a1", Scope::Once, None));
    append(store, "t1", call("c1", "balance", Effect::ReadOnly, None));
}

fn type_names_of(store: &Store) -> Vec<String> {
    events(store).iter().map(|e| e.body.type_name()).collect()
}

#[test]
fn a_crash_does_not_pass_a_once_approval_or_an_in_flight_call_to_the_next_holder() {
    let fs = SimFs::new(7);
    let store = open_sim(&fs).expect("open");
    high_risk_with_open_work(&store);
    let fs = crash(&fs, store, CrashModel::LoseUnsynced);
    // No `recover`: the next holder writes at once.
    let store = open_sim(&fs).expect("reopen");
    let before = last_seq(&store);
    let task = store.task("t1").expect("the first handle takes the task over");
    let names = type_names_of(&store);
    assert_eq!(
        names[before as usize..],
        ["tool/outcome_unknown", "approval/expired", "turn/end", "recovery/restored"],
        "the takeover is recorded"
    );
    let state = task.state();
    assert_eq!(state.control.approvals["a1"].status, ApprovalStatus::Expired);
    assert_eq!(state.session.calls["c1"].status, CallStatus::OutcomeUnknown);
    assert!(state.control.needs_confirmation, "a high-risk task waits for a confirmation");

    let written = last_seq(&store);
    let e = err_of(task.append(approved_call("c2", Effect::Unsafe, "a1")));
    assert!(matches!(e.kind(), ErrorKind::NeedsConfirmation { .. }), "{e}");
    append(&store, "t1", resume());
    let written = written + 1;
    let e = err_of(task.append(approved_call("c2", Effect::Unsafe, "a1")));
    assert!(
        matches!(e.kind(), ErrorKind::ApprovalRefused { approval_id, .. } if approval_id == "a1"),
        "{e}"
    );
    assert!(e.to_string().contains("expired at a restart"), "{e}");
    assert_eq!(last_seq(&store), written, "a refusal writes nothing");
    // The in-flight call's result now resolves a recorded unknown outcome.
    append(&store, "t1", result("c1", Some(json!({"balance": 10}))));
    assert_eq!(task.state().session.calls["c1"].status, CallStatus::Completed);
}

#[test]
fn a_clean_close_ends_the_holder_too() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    append(&store, "t1", contract("write", Risk::Low));
    append(&store, "t1", approval_request("a1"));
    append(&store, "t1", grant("a1", Scope::Run, None));
    append(&store, "t1", approval_request("a2"));
    append(&store, "t1", grant("a2", Scope::Persistent, None));
    // The holder's own approval authorises its own calls.
    append(&store, "t1", approved_call("c1", Effect::Unsafe, "a1"));
    append(&store, "t1", result("c1", None));
    // `recover` in the same holder repairs nothing of its own.
    assert_eq!(store.recover().expect("recover").events_written, 0);
    store.close().expect("close");

    let store = open(dir.path());
    let task = store.task("t1").expect("task");
    let state = task.state();
    assert_eq!(state.control.approvals["a1"].status, ApprovalStatus::Expired, "run scope");
    assert_eq!(state.control.approvals["a2"].status, ApprovalStatus::Granted, "persistent");
    let e = err_of(task.append(approved_call("c2", Effect::Unsafe, "a1")));
    assert!(matches!(e.kind(), ErrorKind::ApprovalRefused { .. }), "{e}");
    let appended = task.append(approved_call("c3", Effect::Unsafe, "a2")).expect("persistent");
    assert!(matches!(appended, Appended::Written { .. }));
    // `recover` after the takeover reports it and writes nothing more.
    let report = store.recover().expect("recover");
    assert_eq!(report.events_written, 0);
    assert_eq!(report.tasks[0].expired.len(), 1);
}

#[test]
fn a_side_effect_waits_until_the_earlier_holders_calls_have_outcomes() {
    let fs = SimFs::new(3);
    let store = open_sim(&fs).expect("open");
    append(&store, "t1", turn_start());
    append(&store, "t1", call("p1", "pay", Effect::Unsafe, None));
    append(&store, "t1", call("q1", "order", Effect::Queryable, None));
    append(&store, "t1", call("r1", "look", Effect::ReadOnly, None));
    let fs = crash(&fs, store, CrashModel::ProcessCrash);
    let store = open_sim(&fs).expect("reopen");
    let task = store.task("t1").expect("task");
    let written = last_seq(&store);

    let e = err_of(task.append(call("p2", "pay", Effect::Unsafe, None)));
    let ErrorKind::NeedsRecovery { task: name, calls } = e.kind() else { panic!("{e}") };
    assert_eq!(name, "t1");
    let named: Vec<(&str, &str)> =
        calls.iter().map(|c| (c.call_id.as_str(), c.plan.as_str())).collect();
    assert_eq!(named, [("p1", "ask_user"), ("q1", "verify")], "read-only r1 does not block");
    assert!(e.to_string().contains("tool/result"), "{e}");
    assert_eq!(last_seq(&store), written, "a refusal writes nothing");

    // Read-only work goes on meanwhile.
    append(&store, "t1", call("r2", "look", Effect::ReadOnly, None));
    // The user says p1 went through; q1 is dispatched again (verify found it did not run).
    append(&store, "t1", result("p1", Some(json!({"payment": 9}))));
    let e = err_of(task.append(call("p2", "pay", Effect::Unsafe, None)));
    assert!(matches!(e.kind(), ErrorKind::NeedsRecovery { calls, .. } if calls.len() == 1));
    append(&store, "t1", call("q1", "order", Effect::Queryable, None));
    append(&store, "t1", call("p2", "pay", Effect::Unsafe, None));
}

#[test]
fn a_retry_with_the_same_request_key_resolves_an_unknown_outcome() {
    let fs = SimFs::new(4);
    let store = open_sim(&fs).expect("open");
    let key = factlog::harness::request_key::derive(&"t1".into(), "publish:draft", 1);
    append(&store, "t1", call("c1", "publish", Effect::Idempotent, Some(&key)));
    let fs = crash(&fs, store, CrashModel::ProcessCrash);
    let store = open_sim(&fs).expect("reopen");
    let task = store.task("t1").expect("task");
    let e = err_of(task.append(call("c9", "mail", Effect::Unsafe, None)));
    assert!(matches!(e.kind(), ErrorKind::NeedsRecovery { .. }), "{e}");
    // The harness numbers calls afresh: the retry carries the same key under a new call id.
    append(&store, "t1", call("c2", "publish", Effect::Idempotent, Some(&key)));
    append(&store, "t1", call("c9", "mail", Effect::Unsafe, None));
}

#[test]
fn a_reused_call_id_for_another_request_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    let task = store.task("t1").expect("task");
    let paid = |tool: &str, amount: u64| {
        Body::ToolCall(ToolCall {
            args: Some(json!({"amount": amount})),
            ..common::harness::call_body("c1", tool, Effect::Unsafe)
        })
    };
    let dispatched = append(&store, "t1", paid("pay", 5));
    append(&store, "t1", result("c1", Some(json!({"receipt": 1}))));
    let written = last_seq(&store);

    let e = err_of(task.append(paid("delete_repo", 5)));
    let ErrorKind::CallIdReused { call_id, earlier_seq, tool, args_digest, .. } = e.kind() else {
        panic!("{e}")
    };
    assert_eq!((call_id.as_str(), *earlier_seq, tool.as_str()), ("c1", dispatched.0, "pay"));
    let digest = task.state().session.calls["c1"].args_digest.clone();
    assert_eq!(args_digest, &digest);
    assert!(e.to_string().contains("call id of its own"), "{e}");
    let e = err_of(task.append(paid("pay", 6)));
    assert!(matches!(e.kind(), ErrorKind::CallIdReused { .. }), "other arguments: {e}");
    let e = err_of(task.append(assistant("again", &[("c1", "delete_repo")])));
    assert!(matches!(e.kind(), ErrorKind::CallIdReused { .. }), "a message reusing it: {e}");
    let e = err_of(task.append(assistant("twice", &[("c7", "a"), ("c7", "a")])));
    assert!(matches!(e.kind(), ErrorKind::InvalidEvent { .. }), "{e}");
    assert_eq!(last_seq(&store), written, "no refusal wrote anything");

    // The same request again is a duplicate: the first receipt, nothing written.
    let appended = task.append(paid("pay", 5)).expect("a duplicate");
    assert!(matches!(appended, Appended::Duplicate { receipt: Some(_), .. }), "{appended:?}");
    assert_eq!(last_seq(&store), written);

    // An in-flight call id for another tool is refused the same way.
    append(&store, "t1", call("c2", "fetch", Effect::ReadOnly, None));
    let e = err_of(task.append(call("c2", "wire", Effect::Unsafe, None)));
    assert!(matches!(e.kind(), ErrorKind::CallIdReused { .. }), "{e}");
}

#[test]
fn a_takeover_larger_than_one_batch_is_written_in_batches_restored_last() {
    let fs = SimFs::new(11);
    let store = open_sim(&fs).expect("open");
    let calls = factlog::limits::EVENT_BATCH_MAX - 4;
    for i in 0..10 {
        append(&store, "t1", approval_request(&format!("a{i}")));
        append(&store, "t1", grant(&format!("a{i}"), Scope::Once, None));
    }
    for i in 0..calls {
        append(&store, "t1", call(&format!("c{i}"), "look", Effect::ReadOnly, None));
    }
    let fs = crash(&fs, store, CrashModel::ProcessCrash);
    let store = open_sim(&fs).expect("reopen");
    let before = last_seq(&store);
    let report = store.recover().expect("recover: more repairs than one batch holds");
    let task = &report.tasks[0];
    assert_eq!(task.events_written, calls as u64 + 10 + 1);
    assert_eq!(task.calls.len(), calls);
    assert_eq!(task.expired.len(), 10, "the expiries of every batch are reported");
    let events = events(&store);
    assert_eq!(events.len() as u64, before + task.events_written);
    let Body::Restored(restored) = &events.last().expect("events").body else {
        panic!("recovery/restored is last")
    };
    assert_eq!(restored.expired.len(), 10);
    assert_eq!(restored.calls.len(), calls);
    let state = store.task_state("t1").expect("t1");
    assert!(state.session.calls.values().all(|c| c.status == CallStatus::OutcomeUnknown));
    append(&store, "t1", call("next", "wire", Effect::Unsafe, None));
}
