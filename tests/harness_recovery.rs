//! Harness recovery (R11, R12, R16; `format-spec/harness-recovery.md`):
//! - every open call is classified (not started, completed with its receipt, outcome unknown
//!   with the plan its effect class and key give), and the log is repaired with one
//!   `tool/outcome_unknown` per dispatched call without a result and the open step and turn
//!   closed as interrupted (`repair: true`), after which a scan of the events finds every
//!   dispatched call answered and nothing open;
//! - a second `recover()` writes nothing and reports the same decisions, also after a reopen;
//!   the dry run reports them without writing, on a read-only store too;
//! - after a power loss on the simulated disk, every acknowledged `Synced` event survives and
//!   is classified;
//! - the repair batch is atomic: crashing at every I/O operation of `recover()` under every
//!   crash model leaves each task's whole repair or none of it, and a second recovery then
//!   writes exactly the events a crash-free recovery writes;
//! - `once` (unconsumed) and `run` grants expire with `approval/expired` events and are listed
//!   in the report, `persistent` grants survive, one past its `expires_at_us` is refused at
//!   dispatch, a consumed `once` grant cannot be used twice, a pending cancel expires;
//! - a high-risk task comes back `needs_confirmation`: side-effecting calls are refused with
//!   `NeedsConfirmation` (read-only ones are allowed) until a `control/resume` is recorded;
//! - the decision table is exhaustive (all 40 combinations of `CallFacts` match exactly one
//!   row), `classify` gives issue 4's plan for each, and `format-spec/harness-recovery.md`
//!   lists the same rows as `DECISION_TABLE`.

use crate::common;

use std::collections::BTreeMap;

use common::harness::{
    NOW_US, append, approval_request, approved_call, assistant, call, cancel, contract, crash,
    err_of, events, grant, is_recovery_event, last_seq, open, open_sim, options,
    protocol_violation, result, resume, step_start, task_events, turn_end, turn_start, type_names,
    user,
};
use factlog::fs::sim::{CrashModel, SimFs};
use factlog::harness::event::{ApprovalDeny, Effect, Risk, Scope};
use factlog::harness::recovery::{
    CallFacts, CallReport, DECISION_TABLE, RecoveryReport, TaskRecovery, classify,
};
use factlog::harness::state::{ApprovalStatus, CallStatus};
use factlog::harness::{Body, Event, Outcome, Plan, Resume, request_key};
use factlog::{Appended, ErrorKind, Store};
use serde_json::json;

fn task_report<'a>(report: &'a RecoveryReport, task: &str) -> &'a TaskRecovery {
    report.tasks.iter().find(|t| t.task.as_str() == task).expect("the task is reported")
}

fn decisions(report: &RecoveryReport) -> Vec<(String, Vec<CallReport>, Vec<String>, Resume)> {
    report
        .tasks
        .iter()
        .map(|t| {
            let expired = t.expired.iter().map(|a| a.0.clone()).collect();
            (t.task.0.clone(), t.calls.clone(), expired, t.resume)
        })
        .collect()
}

/// The open work of `t1` when the process dies: one call of every kind.
fn write_open_work(store: &Store) {
    let key = |op: &str| request_key::derive(&"t1".into(), op, 1);
    append(store, "t1", contract("publish the report", Risk::Low));
    append(store, "t1", turn_start());
    append(store, "t1", step_start());
    append(
        store,
        "t1",
        assistant(
            "working",
            &[
                ("c-later", "notify"),
                ("c-done", "create_ticket"),
                ("c-read", "fetch"),
                ("c-idem-key", "publish"),
                ("c-idem", "publish"),
                ("c-query", "pay"),
                ("c-unsafe", "send_mail"),
            ],
        ),
    );
    append(store, "t1", call("c-done", "create_ticket", Effect::Unsafe, Some(&key("ticket"))));
    append(store, "t1", result("c-done", Some(json!({"ticket": 7, "url": "https://t/7"}))));
    append(store, "t1", call("c-read", "fetch", Effect::ReadOnly, None));
    append(store, "t1", call("c-idem-key", "publish", Effect::Idempotent, Some(&key("publish"))));
    append(store, "t1", call("c-idem", "publish", Effect::Idempotent, None));
    append(store, "t1", call("c-query", "pay", Effect::Queryable, Some(&key("pay"))));
    append(store, "t1", call("c-unsafe", "send_mail", Effect::Unsafe, Some(&key("mail"))));
    // A call no message asked for.
    append(store, "t1", call("c-direct", "shell", Effect::Unsafe, None));
    store.task("t1").expect("task").delta("cut off mid-stream").expect("delta");
}

const EXPECTED: [(&str, Outcome, Plan); 8] = [
    ("c-later", Outcome::NotStarted, Plan::Reschedule),
    ("c-done", Outcome::Completed, Plan::ReuseReceipt),
    ("c-read", Outcome::OutcomeUnknown, Plan::Retry),
    ("c-idem-key", Outcome::OutcomeUnknown, Plan::RetrySameKey),
    ("c-idem", Outcome::OutcomeUnknown, Plan::AskUser),
    ("c-query", Outcome::OutcomeUnknown, Plan::Verify),
    ("c-unsafe", Outcome::OutcomeUnknown, Plan::AskUser),
    ("c-direct", Outcome::OutcomeUnknown, Plan::AskUser),
];

#[test]
fn each_call_is_classified_and_the_log_is_repaired_into_a_protocol_valid_state() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let store = open(dir.path());
        write_open_work(&store);
        // The process dies: the store is dropped without `close`.
    }
    let store = open(dir.path());
    let before = task_events(&store, "t1");
    assert!(protocol_violation(&before).is_some(), "the crash left open work");
    let report = store.recover().expect("recover");
    let t1 = task_report(&report, "t1");

    // (The order of calls asked for by one message is tested below with separate messages.)
    let mut got: Vec<(&str, Outcome, Plan)> =
        t1.calls.iter().map(|c| (c.call_id.as_str(), c.outcome, c.plan)).collect();
    got.sort_by_key(|(id, ..)| *id);
    let mut expected = EXPECTED.to_vec();
    expected.sort_by_key(|(id, ..)| *id);
    assert_eq!(got, expected);
    let by_id: BTreeMap<&str, &CallReport> =
        t1.calls.iter().map(|c| (c.call_id.as_str(), c)).collect();
    assert_eq!(by_id["c-done"].receipt, Some(json!({"ticket": 7, "url": "https://t/7"})));
    assert_eq!(by_id["c-read"].receipt, None, "only a completed call has a receipt");
    assert_eq!(
        by_id["c-idem-key"].request_key,
        Some(request_key::derive(&"t1".into(), "publish", 1)),
        "the key to retry with"
    );
    assert_eq!(by_id["c-later"].tool, "notify");
    assert_eq!(t1.interrupted_step, Some(1));
    assert_eq!(t1.interrupted_turn, Some(1));
    assert_eq!(t1.resume, Resume::Ready);
    assert!(t1.expired.is_empty() && t1.expired_signals.is_empty());

    // The repair: one unknown outcome per dispatched call without a result, then the step and
    // the turn closed as interrupted, then the restart boundary.
    let after = task_events(&store, "t1");
    let repair: Vec<&Event> = after[before.len()..].iter().collect();
    assert!(repair.iter().all(|e| is_recovery_event(e)), "{:?}", type_names(&after));
    let mut unknown: Vec<(&str, &str)> = repair
        .iter()
        .filter_map(|e| match &e.body {
            Body::ToolOutcomeUnknown(u) => Some((u.call_id.as_str(), u.plan.as_str())),
            _ => None,
        })
        .collect();
    let mut expected_unknown: Vec<(&str, &str)> = EXPECTED
        .iter()
        .filter(|(_, outcome, _)| *outcome == Outcome::OutcomeUnknown)
        .map(|(id, _, plan)| (*id, plan.as_str()))
        .collect();
    unknown.sort_unstable();
    expected_unknown.sort_unstable();
    assert_eq!(unknown, expected_unknown);
    let tail: Vec<String> = type_names(&after[after.len() - 3..]);
    assert_eq!(tail, ["step/end", "turn/end", "recovery/restored"]);
    for event in &repair {
        match &event.body {
            Body::StepEnd(e) => assert!(e.repair && e.status() == "interrupted"),
            Body::TurnEnd(e) => assert!(e.repair && e.status() == "interrupted"),
            Body::Restored(r) => {
                assert_eq!(r.resume, "ready");
                let calls: Vec<(&str, &str, &str)> = r
                    .calls
                    .iter()
                    .map(|c| (c.call_id.as_str(), c.outcome.as_str(), c.plan.as_str()))
                    .collect();
                let reported: Vec<(&str, &str, &str)> = t1
                    .calls
                    .iter()
                    .map(|c| (c.call_id.as_str(), c.outcome.as_str(), c.plan.as_str()))
                    .collect();
                assert_eq!(calls, reported, "the stored decisions are the reported ones");
            }
            _ => {}
        }
    }
    assert_eq!(t1.events_written, repair.len() as u64);
    assert_eq!(report.events_written, repair.len() as u64);
    assert_eq!(protocol_violation(&after), None, "protocol-valid after the repair");

    let state = store.task_state("t1").expect("t1");
    for (id, outcome, plan) in EXPECTED {
        let call = &state.session.calls[id];
        match outcome {
            Outcome::OutcomeUnknown => {
                assert_eq!(call.status, CallStatus::OutcomeUnknown, "{id}");
                assert_eq!(call.unknown_plan.as_deref(), Some(plan.as_str()), "{id}");
            }
            Outcome::Completed => assert_eq!(call.status, CallStatus::Completed),
            Outcome::NotStarted => assert_eq!(call.status, CallStatus::NotStarted),
        }
    }
    assert_eq!(state.execution.open_turn, None);
    assert_eq!(state.execution.open_step, None);
    // The model-visible history pairs every dispatched call with its outcome.
    let history = store.history("t1").expect("history");
    let outcomes: BTreeMap<String, &str> = history
        .iter()
        .filter_map(|e| match e {
            factlog::harness::Entry::Tool { call_id, outcome, .. } => {
                Some((call_id.0.clone(), *outcome))
            }
            _ => None,
        })
        .collect();
    assert_eq!(outcomes["c-done"], "completed");
    assert_eq!(outcomes["c-read"], "outcome_unknown");
    assert_eq!(outcomes["c-later"], "not_started");
}

#[test]
fn recovering_twice_writes_nothing_and_reports_the_same_decisions() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let store = open(dir.path());
        write_open_work(&store);
        append(&store, "t2", contract("a second task", Risk::High));
        append(&store, "t2", grant("a1", Scope::Run, None));
    }
    // A read-only store plans the recovery but cannot write it.
    let read_only = Store::open_read_only(dir.path(), options()).expect("read-only open");
    let planned = read_only.plan_recovery();
    let e = err_of(read_only.recover());
    assert!(matches!(e.kind(), ErrorKind::ReadOnly), "{e}");
    drop(read_only);
    let store = open(dir.path());
    let dry = store.plan_recovery();
    assert_eq!(decisions(&planned), decisions(&dry));
    assert!(dry.dry_run);
    assert_eq!(dry.events_written, 0);
    assert_eq!(last_seq(&store), 15, "a dry run writes nothing");
    let first = store.recover().expect("recover");
    assert!(first.events_written > 0);
    assert_eq!(decisions(&dry), decisions(&first), "the dry run decides the same");
    let written = last_seq(&store);

    let second = store.recover().expect("recover again");
    assert_eq!(second.events_written, 0);
    assert!(second.tasks.iter().all(|t| t.events_written == 0));
    assert_eq!(last_seq(&store), written, "nothing was written");
    assert_eq!(decisions(&second), decisions(&first));
    drop(store);

    // After a reopen (another restart without new events), still nothing to write.
    let store = open(dir.path());
    let third = store.recover().expect("recover after reopen");
    assert_eq!(third.events_written, 0);
    assert_eq!(last_seq(&store), written);
    assert_eq!(decisions(&third), decisions(&first));
    drop(store);
    let read_only = Store::open_read_only(dir.path(), options()).expect("read-only open");
    assert_eq!(decisions(&read_only.plan_recovery()), decisions(&first));
}

#[test]
fn calls_are_reported_in_the_order_they_were_asked_for_then_dispatched() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let store = open(dir.path());
        append(&store, "t1", turn_start());
        append(&store, "t1", assistant("first", &[("c-first", "fetch")]));
        append(&store, "t1", assistant("second", &[("c-second", "fetch")]));
        append(&store, "t1", assistant("third", &[("c-third", "fetch")]));
        append(&store, "t1", call("c-direct", "shell", Effect::Unsafe, None));
        append(&store, "t1", call("c-third", "fetch", Effect::ReadOnly, None));
        append(&store, "t1", call("c-first", "fetch", Effect::ReadOnly, None));
        append(&store, "t1", result("c-first", None));
        append(&store, "t1", call("c-direct-2", "shell", Effect::Unsafe, None));
    }
    let store = open(dir.path());
    let report = store.recover().expect("recover");
    let order: Vec<&str> =
        task_report(&report, "t1").calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(order, ["c-first", "c-second", "c-third", "c-direct", "c-direct-2"]);
}

#[test]
fn acknowledged_synced_events_survive_a_power_loss_and_are_classified() {
    let fs = SimFs::new(11);
    let store = open_sim(&fs).expect("open");
    append(&store, "t1", turn_start());
    append(&store, "t1", step_start());
    append(&store, "t1", assistant("", &[("c1", "publish"), ("c2", "notify")]));
    let key = request_key::derive(&"t1".into(), "publish", 3);
    append(&store, "t1", call("c1", "publish", Effect::Idempotent, Some(&key)));
    // Acknowledged as Synced: everything up to here survives a power loss.
    let synced = task_events(&store, "t1");
    for _ in 0..5 {
        store.task("t1").expect("task").delta("tok").expect("delta");
    }
    let rebooted = crash(&fs, store, CrashModel::LoseUnsynced);
    let store = open_sim(&rebooted).expect("reopen");
    let survived = task_events(&store, "t1");
    assert_eq!(&survived[..synced.len()], &synced[..], "every synced event, byte for byte");
    let report = store.recover().expect("recover");
    let calls: Vec<(&str, Outcome, Plan)> = task_report(&report, "t1")
        .calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.outcome, c.plan))
        .collect();
    assert_eq!(
        calls,
        [
            ("c1", Outcome::OutcomeUnknown, Plan::RetrySameKey),
            ("c2", Outcome::NotStarted, Plan::Reschedule)
        ]
    );
    assert_eq!(protocol_violation(&task_events(&store, "t1")), None);
    // The repair is synced before `recover` returns: it survives the next power loss.
    let repaired = task_events(&store, "t1");
    let again = crash(&rebooted, store, CrashModel::LoseUnsynced);
    let store = open_sim(&again).expect("reopen");
    assert_eq!(task_events(&store, "t1"), repaired);
    assert_eq!(store.recover().expect("recover").events_written, 0);
}

/// The tasks of the atomicity sweep.
const SWEEP_TASKS: [&str; 6] = ["ta", "tb", "tc", "td", "te", "tf"];

/// Opens the sweep's store: the smallest writer buffer, so that recovery's repairs reach
/// the disk in several writes and a crash can fall between two tasks' repairs.
fn open_sweep(fs: &SimFs) -> Store {
    let log = common::harness::sim_log_options(fs).buffer_bytes(4096);
    Store::open(common::harness::SIM_DIR, options().log(log)).expect("open")
}

/// The work the atomicity sweep recovers: tasks with open work (enough that their repairs
/// fill the writer's buffer and reach the disk in several writes), closed cleanly.
fn atomicity_setup(fs: &SimFs) {
    let store = open_sweep(fs);
    for task in SWEEP_TASKS {
        append(&store, task, contract("goal", Risk::High));
        append(&store, task, turn_start());
        append(&store, task, step_start());
        append(&store, task, grant("g1", Scope::Once, None));
        append(&store, task, grant("g2", Scope::Run, None));
        append(&store, task, cancel());
        for i in 0..8 {
            let effect = Effect::ALL[i % 4];
            let id = format!("call-with-a-long-identifier-{i:02}");
            append(&store, task, call(&id, "publish", effect, None));
        }
    }
    store.close().expect("close");
}

#[test]
fn the_repair_batch_is_atomic_at_every_crash_point_of_recover() {
    // A crash-free recovery, for the operation count and the expected final events.
    let fs = SimFs::new(21);
    atomicity_setup(&fs);
    let store = open_sweep(&fs);
    let setup_events = events(&store);
    let start = fs.ops();
    let report = store.recover().expect("recover");
    let end = fs.ops();
    assert!(end > start, "recovery does I/O");
    let expected = events(&store);
    let repair_of = |task: &str, events: &[Event]| -> Vec<String> {
        let names: Vec<Event> = events
            .iter()
            .filter(|e| e.task.as_str() == task && e.seq.0 > setup_events.len() as u64)
            .cloned()
            .collect();
        type_names(&names)
    };
    let full: BTreeMap<&str, Vec<String>> =
        SWEEP_TASKS.into_iter().map(|t| (t, repair_of(t, &expected))).collect();
    assert_eq!(full["ta"].len() as u64, task_report(&report, "ta").events_written);
    assert!(full["ta"].len() >= 6, "{:?}", full["ta"]);
    drop(store);

    let mut scenarios = 0;
    let mut partial_runs = 0;
    let models = CrashModel::ALL.into_iter().flat_map(|model| {
        let seeds = if model == CrashModel::TornSectors { 0..16 } else { 0..1 };
        seeds.map(move |seed| (model, seed))
    });
    let models: Vec<(CrashModel, u64)> = models.collect();
    for crash_at in start..end {
        for &(model, seed) in &models {
            let fs = SimFs::new(21);
            atomicity_setup(&fs);
            let store = open_sweep(&fs);
            assert_eq!(fs.ops(), start, "the setup is deterministic");
            fs.crash_at(crash_at);
            let outcome = store.recover();
            assert!(outcome.is_err(), "op {crash_at}: the crash must surface as an error");
            fs.halt();
            drop(store);
            let rebooted = fs.reboot(model, seed);
            let store = open_sweep(&rebooted);
            let survived = events(&store);
            assert_eq!(&survived[..setup_events.len()], &setup_events[..], "op {crash_at}");
            let mut repaired = 0;
            for task in SWEEP_TASKS {
                let repair = repair_of(task, &survived);
                repaired += usize::from(!repair.is_empty());
                assert!(
                    repair.is_empty() || repair == full[task],
                    "op {crash_at}, {model:?}, {task}: a partial repair {repair:?}"
                );
            }
            partial_runs += usize::from(repaired > 0 && repaired < SWEEP_TASKS.len());
            let second = store.recover().expect("the second recovery");
            let done = events(&store);
            assert_eq!(done, expected, "op {crash_at}, {model:?}: the same repair in the end");
            assert_eq!(decisions(&second), decisions(&report), "op {crash_at}, {model:?}");
            for task in SWEEP_TASKS {
                let task_events: Vec<Event> =
                    done.iter().filter(|e| e.task.as_str() == task).cloned().collect();
                assert_eq!(protocol_violation(&task_events), None);
            }
            scenarios += 1;
        }
    }
    println!(
        "{scenarios} crash scenarios over {} operations, {partial_runs} left some tasks repaired",
        end - start
    );
    assert!(scenarios >= 18, "{scenarios} crash scenarios");
    assert!(partial_runs > 0, "some crash must fall between two tasks' repairs");
}

#[test]
fn once_and_run_grants_expire_at_recovery_and_persistent_ones_survive() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let store = open(dir.path());
        append(&store, "t1", grant("a-once", Scope::Once, None));
        append(&store, "t1", grant("a-run", Scope::Run, None));
        append(&store, "t1", grant("a-persistent", Scope::Persistent, None));
        append(&store, "t1", grant("a-later", Scope::Persistent, Some(NOW_US + 60_000_000)));
        append(&store, "t1", grant("a-past", Scope::Persistent, Some(NOW_US - 1)));
        append(&store, "t1", grant("a-used", Scope::Once, None));
        append(&store, "t1", approved_call("c0", Effect::Unsafe, "a-used"));
        append(&store, "t1", result("c0", None));
        append(&store, "t1", approval_request("a-asked"));
    }
    let store = open(dir.path());
    let report = store.recover().expect("recover");
    let t1 = task_report(&report, "t1");
    let expired: Vec<&str> = t1.expired.iter().map(|a| a.as_str()).collect();
    assert_eq!(expired, ["a-once", "a-run"], "in approval-id order");
    let expired_events: Vec<(String, String)> = task_events(&store, "t1")
        .into_iter()
        .filter_map(|e| match e.body {
            Body::ApprovalExpired(x) => Some((x.approval_id.0, x.reason)),
            _ => None,
        })
        .collect();
    assert_eq!(
        expired_events,
        [("a-once".to_owned(), "restart".to_owned()), ("a-run".to_owned(), "restart".to_owned())]
    );
    let state = store.task_state("t1").expect("t1");
    let status = |id: &str| state.control.approvals[id].status;
    assert_eq!(status("a-once"), ApprovalStatus::Expired);
    assert_eq!(status("a-run"), ApprovalStatus::Expired);
    assert_eq!(status("a-persistent"), ApprovalStatus::Granted);
    assert_eq!(status("a-used"), ApprovalStatus::Consumed);

    let task = store.task("t1").expect("task");
    let refused = |approval: &str, call_id: &str| {
        let before = last_seq(&store);
        let e = err_of(task.append(approved_call(call_id, Effect::Unsafe, approval)));
        assert!(
            matches!(e.kind(), ErrorKind::ApprovalRefused { approval_id, .. } if approval_id == approval),
            "{approval}: {e}"
        );
        assert_eq!(last_seq(&store), before, "{approval}: a refusal writes nothing");
    };
    refused("a-once", "c1");
    refused("a-run", "c1");
    refused("a-past", "c1");
    refused("a-used", "c1");
    refused("a-asked", "c1");
    refused("a-unknown", "c1");
    task.append(approved_call("c1", Effect::Unsafe, "a-persistent")).expect("persistent");
    task.append(approved_call("c2", Effect::Unsafe, "a-later")).expect("not yet ended");
    // A persistent grant authorises every call, not just one.
    task.append(result("c1", None)).expect("result");
    task.append(approved_call("c3", Effect::Unsafe, "a-persistent")).expect("again");
}

#[test]
fn a_consumed_once_approval_cannot_be_used_twice() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    append(&store, "t1", approval_request("a1"));
    append(&store, "t1", grant("a1", Scope::Once, None));
    let task = store.task("t1").expect("task");
    task.append(approved_call("c1", Effect::Unsafe, "a1")).expect("first use");
    let before = last_seq(&store);
    // Still in flight, and after its result: the grant is spent either way.
    let e = err_of(task.append(approved_call("c2", Effect::Unsafe, "a1")));
    assert!(matches!(e.kind(), ErrorKind::ApprovalRefused { .. }), "{e}");
    task.append(result("c1", None)).expect("result");
    let e = err_of(task.append(approved_call("c3", Effect::Unsafe, "a1")));
    assert!(matches!(e.kind(), ErrorKind::ApprovalRefused { .. }), "{e}");
    assert_eq!(last_seq(&store), before + 1, "only the result was written");
    assert_eq!(
        store.task_state("t1").expect("t1").control.approvals["a1"].status,
        ApprovalStatus::Consumed
    );
    // A denial and a grant with an expiry on a non-persistent scope.
    append(
        &store,
        "t1",
        Body::ApprovalDeny(ApprovalDeny { approval_id: "a2".into(), ..Default::default() }),
    );
    let e = err_of(task.append(approved_call("c4", Effect::Unsafe, "a2")));
    assert!(matches!(e.kind(), ErrorKind::ApprovalRefused { .. }), "{e}");
    let e = err_of(task.append(grant("a3", Scope::Once, Some(NOW_US + 1))));
    assert!(matches!(e.kind(), ErrorKind::InvalidEvent { .. }), "{e}");
}

#[test]
fn a_pending_cancel_expires_at_recovery() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (answered, pending) = {
        let store = open(dir.path());
        append(&store, "t1", turn_start());
        let answered = append(&store, "t1", cancel());
        append(&store, "t1", turn_end());
        append(&store, "t1", turn_start());
        let pending = append(&store, "t1", cancel());
        (answered, pending)
    };
    let store = open(dir.path());
    assert_eq!(store.task_state("t1").expect("t1").control.pending_cancels, [pending.0]);
    let report = store.recover().expect("recover");
    assert_eq!(task_report(&report, "t1").expired_signals, [pending.0]);
    let expired: Vec<(String, u64)> = task_events(&store, "t1")
        .into_iter()
        .filter_map(|e| match e.body {
            Body::SignalExpired(s) => Some((s.signal, s.signal_seq)),
            _ => None,
        })
        .collect();
    assert_eq!(expired, [("control/cancel".to_owned(), pending.0)]);
    assert_ne!(answered, pending);
    assert!(store.task_state("t1").expect("t1").control.pending_cancels.is_empty());
}

#[test]
fn a_high_risk_task_needs_a_recorded_confirmation_before_side_effects() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let store = open(dir.path());
        append(&store, "risky", contract("pay the invoice", Risk::High));
        append(&store, "calm", contract("summarise", Risk::Low));
    }
    let store = open(dir.path());
    let report = store.recover().expect("recover");
    assert_eq!(task_report(&report, "risky").resume, Resume::NeedsConfirmation);
    assert_eq!(task_report(&report, "calm").resume, Resume::Ready);
    let restored = task_events(&store, "risky").into_iter().rev().find_map(|e| match e.body {
        Body::Restored(r) => Some(r.resume),
        _ => None,
    });
    assert_eq!(restored.as_deref(), Some("needs_confirmation"));
    drop(store);

    // The confirmation requirement is a stored fact: it survives a reopen.
    let store = open(dir.path());
    assert!(store.task_state("risky").expect("risky").control.needs_confirmation);
    let task = store.task("risky").expect("task");
    for (i, effect) in
        [Effect::Unsafe, Effect::Idempotent, Effect::Queryable].into_iter().enumerate()
    {
        let before = last_seq(&store);
        let e = err_of(task.append(call(&format!("c{i}"), "pay", effect, None)));
        assert!(
            matches!(e.kind(), ErrorKind::NeedsConfirmation { task } if task == "risky"),
            "{effect:?}: {e}"
        );
        assert_eq!(last_seq(&store), before, "{effect:?}: nothing written");
    }
    task.append(call("c-read", "fetch", Effect::ReadOnly, None)).expect("read-only is allowed");
    store
        .task("calm")
        .expect("task")
        .append(call("c1", "pay", Effect::Unsafe, None))
        .expect("calm");
    // Other events are allowed meanwhile; then the user confirms.
    task.append(user("what is the state?")).expect("message");
    task.append(resume()).expect("confirm");
    assert!(!store.task_state("risky").expect("risky").control.needs_confirmation);
    task.append(call("c0", "pay", Effect::Unsafe, None)).expect("confirmed");
    // A later restart asks again.
    drop(task);
    drop(store);
    let store = open(dir.path());
    let report = store.recover().expect("recover");
    assert_eq!(task_report(&report, "risky").resume, Resume::NeedsConfirmation);
}

// The decision table.

fn all_statuses() -> [CallStatus; 4] {
    // A new status breaks this match, and with it this test, until it is added here.
    let every = |status: CallStatus| match status {
        CallStatus::NotStarted
        | CallStatus::Dispatched
        | CallStatus::Completed
        | CallStatus::OutcomeUnknown => status,
    };
    [
        every(CallStatus::NotStarted),
        every(CallStatus::Dispatched),
        every(CallStatus::Completed),
        every(CallStatus::OutcomeUnknown),
    ]
}

fn all_facts() -> Vec<CallFacts> {
    let mut facts = Vec::new();
    for status in all_statuses() {
        for effect in std::iter::once(None).chain(Effect::ALL.into_iter().map(Some)) {
            for has_key in [false, true] {
                facts.push(CallFacts { status, effect, has_key });
            }
        }
    }
    facts
}

/// Issue 4's rule, written independently of the table.
fn expected_decision(facts: &CallFacts) -> (Outcome, Plan) {
    match facts.status {
        CallStatus::NotStarted => (Outcome::NotStarted, Plan::Reschedule),
        CallStatus::Completed => (Outcome::Completed, Plan::ReuseReceipt),
        CallStatus::Dispatched | CallStatus::OutcomeUnknown => {
            let plan = match (facts.effect, facts.has_key) {
                (Some(Effect::ReadOnly), _) => Plan::Retry,
                (Some(Effect::Idempotent), true) => Plan::RetrySameKey,
                (Some(Effect::Queryable), _) => Plan::Verify,
                _ => Plan::AskUser,
            };
            (Outcome::OutcomeUnknown, plan)
        }
    }
}

#[test]
fn every_combination_of_call_facts_matches_exactly_one_row() {
    let facts = all_facts();
    assert_eq!(facts.len(), 40);
    let mut used = vec![0; DECISION_TABLE.len()];
    for f in &facts {
        let matching: Vec<u8> =
            DECISION_TABLE.iter().filter(|row| row.matches(f)).map(|row| row.number).collect();
        assert_eq!(matching.len(), 1, "{f:?} matches rows {matching:?}");
        let row = DECISION_TABLE.iter().position(|r| r.matches(f)).expect("a row");
        used[row] += 1;
        assert_eq!(classify(f), expected_decision(f), "{f:?}");
        assert_eq!((DECISION_TABLE[row].outcome, DECISION_TABLE[row].plan), classify(f));
    }
    assert!(used.iter().all(|&n| n > 0), "every row is reachable: {used:?}");
    let numbers: Vec<u8> = DECISION_TABLE.iter().map(|r| r.number).collect();
    let consecutive: Vec<u8> = (1..=DECISION_TABLE.len() as u8).collect();
    assert_eq!(numbers, consecutive, "rows are numbered 1, 2, ... in order");
}

/// One row of the table in `format-spec/harness-recovery.md`, as written.
#[derive(Debug, PartialEq)]
struct SpecRow {
    number: u8,
    statuses: Vec<String>,
    effects: Option<Vec<String>>,
    has_key: Option<bool>,
    outcome: String,
    plan: String,
}

fn spec_rows(text: &str) -> Vec<SpecRow> {
    let section = text.split("## Decision table").nth(1).expect("a Decision table section");
    let list = |cell: &str| cell.split(',').map(|s| s.trim().to_owned()).collect::<Vec<_>>();
    section
        .lines()
        .map(str::trim)
        .take_while(|line| !line.starts_with("## "))
        .filter(|line| line.starts_with('|'))
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let number = cells.first()?.parse::<u8>().ok()?;
            assert_eq!(cells.len(), 6, "row {number}: {line}");
            Some(SpecRow {
                number,
                statuses: list(cells[1]),
                effects: (cells[2] != "any").then(|| list(cells[2])),
                has_key: match cells[3] {
                    "any" => None,
                    "yes" => Some(true),
                    "no" => Some(false),
                    other => panic!("row {number}: request key {other:?}"),
                },
                outcome: cells[4].to_owned(),
                plan: cells[5].to_owned(),
            })
        })
        .collect()
}

#[test]
fn the_spec_lists_the_same_decision_table_as_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/format-spec/harness-recovery.md");
    let text = std::fs::read_to_string(path).expect("format-spec/harness-recovery.md");
    let spec = spec_rows(&text);
    let code: Vec<SpecRow> = DECISION_TABLE
        .iter()
        .map(|row| SpecRow {
            number: row.number,
            statuses: row.statuses.iter().map(|s| s.as_str().to_owned()).collect(),
            effects: row.effects.map(|effects| {
                effects.iter().map(|e| e.map_or("none", Effect::as_str).to_owned()).collect()
            }),
            has_key: row.has_key,
            outcome: row.outcome.as_str().to_owned(),
            plan: row.plan.as_str().to_owned(),
        })
        .collect();
    assert_eq!(spec, code, "format-spec/harness-recovery.md and DECISION_TABLE differ");
}

#[test]
fn a_recovery_only_event_from_a_caller_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = open(dir.path());
    append(&store, "t1", call("c1", "fetch", Effect::ReadOnly, None));
    let body = factlog::harness::codec::body_from_value(
        factlog::harness::EventType::ToolOutcomeUnknown,
        json!({"call_id": "c1", "plan": "retry"}),
    )
    .expect("body");
    let e = err_of(store.task("t1").expect("task").append(body));
    assert!(matches!(e.kind(), ErrorKind::InvalidEvent { .. }), "{e}");
    assert_eq!(last_seq(&store), 1);
    let appended = store.task("t1").expect("task").append(result("c1", None)).expect("result");
    assert!(matches!(appended, Appended::Written { .. }));
}

#[test]
fn calls_of_one_message_are_reported_in_the_order_the_model_asked() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::harness::open(dir.path());
    let h = |b| common::harness::append(&store, "t1", b);
    h(common::harness::turn_start());
    h(common::harness::assistant("", &[("z-last", "a"), ("m-middle", "b"), ("a-first", "c")]));
    h(common::harness::call("a-first", "c", Effect::ReadOnly, None));
    h(common::harness::result("a-first", None));
    h(common::harness::call("m-middle", "b", Effect::ReadOnly, None));
    // Recovery repairs what an earlier holder left: this store handle holds t1 until closed.
    assert!(store.recover().unwrap().tasks[0].calls.is_empty(), "nothing of its own");
    store.close().unwrap();
    let store = common::harness::open(dir.path());
    let report = store.recover().unwrap();
    let order: Vec<&str> = report.tasks[0].calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(order, ["z-last", "m-middle", "a-first"]);
}

#[test]
fn recover_on_a_read_only_store_is_refused_even_with_nothing_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::harness::open(dir.path());
    common::harness::append(&store, "t1", common::harness::user("hi"));
    store.recover().unwrap();
    store.close().unwrap();
    let ro = factlog::Store::open_read_only(dir.path(), common::harness::options()).unwrap();
    let e = common::harness::err_of(ro.recover());
    assert!(matches!(e.kind(), factlog::ErrorKind::ReadOnly), "{e}");
    assert!(ro.plan_recovery().events_written == 0);
}
