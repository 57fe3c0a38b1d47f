//! Harness recovery (R11, R12, R16; `format-spec/harness-recovery.md`): after a restart, find
//! every open turn, step and tool call of every task, classify each call by the decision
//! table, and repair the log with explicit synced events so that every dispatched call has a
//! result or a recorded unknown outcome, every open step and turn is closed as interrupted,
//! and no one-time authority survives the restart.
//!
//! Planning is pure ([`plan_task`]); [`crate::Store::recover`] appends each task's repair
//! events as one atomic batch. A task with no event after its last `recovery/restored` needs
//! no repair, so running recovery twice writes nothing the second time.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::harness::event::{
    ApprovalExpired, Body, CallDecision, Effect, Restored, Risk, Scope, SignalExpired, StepEnd,
    ToolOutcomeUnknown, TurnEnd,
};
use crate::harness::ids::{ApprovalId, CallId, TaskId};
use crate::harness::state::{ApprovalStatus, Call, CallStatus, TaskState};
use crate::limits::{RESTORED_CALL_OVERHEAD_BYTES, RESTORED_CALLS_BYTES_MAX};

/// What a call turned out to be after the restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Asked for by the model, never dispatched.
    NotStarted,
    /// Dispatched and answered: its receipt is the fact.
    Completed,
    /// Dispatched, no result: it may or may not have run.
    OutcomeUnknown,
}

/// What the harness should do about a call. The library never acts on a plan by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    /// Dispatch it now, as if for the first time.
    Reschedule,
    /// Use the recorded receipt; never run it again.
    ReuseReceipt,
    /// Read-only: run it again.
    Retry,
    /// Idempotent with a request key: run it again with the same key.
    RetrySameKey,
    /// Queryable: ask the outside system whether it ran before doing anything.
    Verify,
    /// Cannot be checked or deduplicated: ask the user before any retry.
    AskUser,
}

impl Outcome {
    /// The name in JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::NotStarted => "not_started",
            Outcome::Completed => "completed",
            Outcome::OutcomeUnknown => "outcome_unknown",
        }
    }
}

impl Plan {
    /// The name in JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Reschedule => "reschedule",
            Plan::ReuseReceipt => "reuse_receipt",
            Plan::Retry => "retry",
            Plan::RetrySameKey => "retry_same_key",
            Plan::Verify => "verify",
            Plan::AskUser => "ask_user",
        }
    }
}

/// What a call looks like to the decision table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallFacts {
    /// Where it stands in the folded state.
    pub status: CallStatus,
    /// Its effect class, if it was dispatched.
    pub effect: Option<Effect>,
    /// Whether it was dispatched with a request key.
    pub has_key: bool,
}

/// One row of the decision table: a pattern over [`CallFacts`] and its outcome and plan.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The row's number in `format-spec/harness-recovery.md`.
    pub number: u8,
    /// Which statuses it matches.
    pub statuses: &'static [CallStatus],
    /// Which effect classes it matches (`None`: any, including none).
    pub effects: Option<&'static [Option<Effect>]>,
    /// Which key presence it matches (`None`: either).
    pub has_key: Option<bool>,
    /// The outcome.
    pub outcome: Outcome,
    /// The plan.
    pub plan: Plan,
}

const OPEN: &[CallStatus] = &[CallStatus::Dispatched, CallStatus::OutcomeUnknown];

/// The decision table (`format-spec/harness-recovery.md`, "Decision table"). Every
/// combination of facts matches exactly one row; `tests/harness_recovery.rs` proves it.
pub const DECISION_TABLE: &[Row] = &[
    Row {
        number: 1,
        statuses: &[CallStatus::NotStarted],
        effects: None,
        has_key: None,
        outcome: Outcome::NotStarted,
        plan: Plan::Reschedule,
    },
    Row {
        number: 2,
        statuses: &[CallStatus::Completed],
        effects: None,
        has_key: None,
        outcome: Outcome::Completed,
        plan: Plan::ReuseReceipt,
    },
    Row {
        number: 3,
        statuses: OPEN,
        effects: Some(&[Some(Effect::ReadOnly)]),
        has_key: None,
        outcome: Outcome::OutcomeUnknown,
        plan: Plan::Retry,
    },
    Row {
        number: 4,
        statuses: OPEN,
        effects: Some(&[Some(Effect::Idempotent)]),
        has_key: Some(true),
        outcome: Outcome::OutcomeUnknown,
        plan: Plan::RetrySameKey,
    },
    Row {
        number: 5,
        statuses: OPEN,
        effects: Some(&[Some(Effect::Idempotent)]),
        has_key: Some(false),
        outcome: Outcome::OutcomeUnknown,
        plan: Plan::AskUser,
    },
    Row {
        number: 6,
        statuses: OPEN,
        effects: Some(&[Some(Effect::Queryable)]),
        has_key: None,
        outcome: Outcome::OutcomeUnknown,
        plan: Plan::Verify,
    },
    Row {
        number: 7,
        statuses: OPEN,
        effects: Some(&[Some(Effect::Unsafe), None]),
        has_key: None,
        outcome: Outcome::OutcomeUnknown,
        plan: Plan::AskUser,
    },
];

impl Row {
    /// True if the row applies to `facts`.
    #[must_use]
    pub fn matches(&self, facts: &CallFacts) -> bool {
        self.statuses.contains(&facts.status)
            && self.effects.is_none_or(|effects| effects.contains(&facts.effect))
            && self.has_key.is_none_or(|k| k == facts.has_key)
    }
}

/// The outcome and plan of a call with `facts`: the first (and only) matching row.
#[must_use]
pub fn classify(facts: &CallFacts) -> (Outcome, Plan) {
    let row = DECISION_TABLE
        .iter()
        .find(|row| row.matches(facts))
        .expect("the decision table covers every combination of facts");
    (row.outcome, row.plan)
}

fn facts_of(call: &Call) -> CallFacts {
    CallFacts { status: call.status, effect: call.effect, has_key: call.request_key.is_some() }
}

/// One call that needed a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallReport {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// What it turned out to be.
    pub outcome: Outcome,
    /// What to do.
    pub plan: Plan,
    /// Its request key, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_key: Option<crate::harness::ids::RequestKey>,
    /// The receipt to reuse, for a completed call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Value>,
}

/// Whether a task may go on by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resume {
    /// It may.
    Ready,
    /// High-risk: show the state and record a `control/resume` confirmation first.
    NeedsConfirmation,
}

/// The recovery of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecovery {
    /// The task.
    pub task: TaskId,
    /// The calls that needed a decision.
    pub calls: Vec<CallReport>,
    /// Approvals expired by the restart.
    pub expired: Vec<ApprovalId>,
    /// Sequence numbers of the pending cancel signals expired by the restart.
    pub expired_signals: Vec<u64>,
    /// The step closed as interrupted, if one was open.
    pub interrupted_step: Option<u64>,
    /// The turn closed as interrupted, if one was open.
    pub interrupted_turn: Option<u64>,
    /// Whether it may go on by itself.
    pub resume: Resume,
    /// Repair events written for it (0 in a dry run or when nothing was needed).
    pub events_written: u64,
}

/// What recovery did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// Whether this was a dry run (nothing written).
    pub dry_run: bool,
    /// Every task with events, sorted by id.
    pub tasks: Vec<TaskRecovery>,
    /// Repair events written in all.
    pub events_written: u64,
    /// Where the store came from, when `factlog restore` built it from a replica
    /// (`DIR/RESTORED.json`): this holder is on a new device, so nothing temporary carried
    /// over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<crate::harness::restored::Restored>,
}

/// The recovery of one task and the repair events it needs (empty when the task had no
/// event since its last `recovery/restored`: its last decisions are reported again).
#[must_use]
pub fn plan_task(id: &TaskId, task: &TaskState) -> (TaskRecovery, Vec<Body>) {
    plan_task_after(id, task, false)
}

/// [`plan_task`], and with `after_loss` (the log lost events, as after a salvage: the task's
/// contract or its risk may be among them) every task needs repair and asks for a
/// confirmation, whatever its known risk.
///
/// The repair, in this order: a `tool/outcome_unknown` for each call dispatched without a
/// result, an `approval/expired` for each `once` or `run` grant, a `signal/expired` for each
/// pending cancel, the open step and turn closed as interrupted, and a `recovery/restored`
/// recording the decisions, unless there is nothing to record.
#[must_use]
pub fn plan_task_after(
    id: &TaskId,
    task: &TaskState,
    after_loss: bool,
) -> (TaskRecovery, Vec<Body>) {
    let resume = if task.task.risk == Risk::High || after_loss {
        Resume::NeedsConfirmation
    } else {
        Resume::Ready
    };
    if let Some(last) = &task.control.last_recovery
        && last.revision == task.revision
        && !after_loss
    {
        return (report_last(id, task), Vec::new());
    }
    let mut bodies = Vec::new();
    let calls = decide_open_calls(task, &mut bodies);
    let expired = expire_approvals(task, &mut bodies);
    let expired_signals = expire_signals(task, &mut bodies);
    let (interrupted_step, interrupted_turn) = interrupt_step_and_turn(task, &mut bodies);
    let recovery = TaskRecovery {
        task: id.clone(),
        calls,
        expired,
        expired_signals,
        interrupted_step,
        interrupted_turn,
        resume,
        events_written: 0,
    };
    // Nothing open, nothing to expire, no call to decide and no confirmation to ask for: a
    // `recovery/restored` would record nothing, so none is written.
    if bodies.is_empty() && recovery.calls.is_empty() && resume == Resume::Ready {
        return (recovery, bodies);
    }
    bodies.push(restored_body(&recovery));
    (recovery, bodies)
}

/// The calls of the work the restart interrupted (since the last closed turn or restart),
/// each classified by the decision table, in the order the model asked for them (calls no
/// message asked for, by dispatch). A call dispatched without a result gets a
/// `tool/outcome_unknown` in `bodies`.
fn decide_open_calls(task: &TaskState, bodies: &mut Vec<Body>) -> Vec<CallReport> {
    let closed = task
        .execution
        .last_turn_end_seq
        .max(task.control.last_recovery.as_ref().map_or(0, |l| l.seq));
    let mut open_calls: Vec<(&CallId, &Call)> = task
        .session
        .calls
        .iter()
        .filter(|(_, c)| match c.status {
            CallStatus::Dispatched | CallStatus::OutcomeUnknown => true,
            CallStatus::NotStarted => c.announced_seq > closed,
            CallStatus::Completed => c.dispatched_seq > closed,
        })
        .collect();
    open_calls.sort_by_key(|(_, c)| {
        if c.announced_seq > 0 {
            (c.announced_seq, c.announced_index)
        } else {
            (c.dispatched_seq, 0)
        }
    });
    let mut calls = Vec::new();
    for (call_id, call) in open_calls {
        let report = report_call(call_id, call);
        if call.status == CallStatus::Dispatched {
            bodies.push(Body::ToolOutcomeUnknown(ToolOutcomeUnknown {
                call_id: call_id.clone(),
                plan: report.plan.as_str().to_owned(),
                ..Default::default()
            }));
        }
        calls.push(report);
    }
    calls
}

/// The granted `once` and `run` approvals, which no restart keeps: each gets an
/// `approval/expired` in `bodies`.
fn expire_approvals(task: &TaskState, bodies: &mut Vec<Body>) -> Vec<ApprovalId> {
    let expired: Vec<ApprovalId> = task
        .control
        .approvals
        .iter()
        .filter(|(_, a)| {
            a.status == ApprovalStatus::Granted && matches!(a.scope, Some(Scope::Once | Scope::Run))
        })
        .map(|(id, _)| id.clone())
        .collect();
    for approval_id in &expired {
        bodies.push(Body::ApprovalExpired(ApprovalExpired {
            approval_id: approval_id.clone(),
            reason: "restart".to_owned(),
            ..Default::default()
        }));
    }
    expired
}

/// The pending cancels, which no restart keeps: each gets a `signal/expired` in `bodies`.
fn expire_signals(task: &TaskState, bodies: &mut Vec<Body>) -> Vec<u64> {
    let expired_signals = task.control.pending_cancels.clone();
    for &signal_seq in &expired_signals {
        bodies.push(Body::SignalExpired(SignalExpired {
            signal: "control/cancel".to_owned(),
            signal_seq,
            ..Default::default()
        }));
    }
    expired_signals
}

/// The open step and turn, each closed as interrupted by a repair `step/end` and `turn/end`
/// in `bodies`.
fn interrupt_step_and_turn(task: &TaskState, bodies: &mut Vec<Body>) -> (Option<u64>, Option<u64>) {
    let interrupted_step = task.execution.open_step;
    if interrupted_step.is_some() {
        bodies.push(Body::StepEnd(StepEnd {
            status: Some("interrupted".to_owned()),
            repair: true,
            ..Default::default()
        }));
    }
    let interrupted_turn = task.execution.open_turn;
    if interrupted_turn.is_some() {
        bodies.push(Body::TurnEnd(TurnEnd {
            status: Some("interrupted".to_owned()),
            repair: true,
            ..Default::default()
        }));
    }
    (interrupted_step, interrupted_turn)
}

/// The `recovery/restored` event of `recovery`: whether the task may resume, the approvals
/// expired, and the decisions, within a byte budget so that the event stays far below the
/// body limit however many calls a task left open (the report itself lists them all).
fn restored_body(recovery: &TaskRecovery) -> Body {
    let resume_name = match recovery.resume {
        Resume::Ready => "ready",
        Resume::NeedsConfirmation => "needs_confirmation",
    };
    let mut budget = RESTORED_CALLS_BYTES_MAX;
    Body::Restored(Restored {
        resume: resume_name.to_owned(),
        calls: recovery
            .calls
            .iter()
            .take_while(|c| {
                let cost = c.call_id.as_str().len() + RESTORED_CALL_OVERHEAD_BYTES;
                budget = budget.saturating_sub(cost);
                budget > 0
            })
            .map(|c| CallDecision {
                call_id: c.call_id.clone(),
                outcome: c.outcome.as_str().to_owned(),
                plan: c.plan.as_str().to_owned(),
                ..Default::default()
            })
            .collect(),
        expired: recovery.expired.clone(),
        ..Default::default()
    })
}

/// The report of a task that needs no repair: the decisions of its last recovery (none if it
/// never had one), each call classified again from the current state.
pub(crate) fn report_last(id: &TaskId, task: &TaskState) -> TaskRecovery {
    let (calls, expired) = task.control.last_recovery.as_ref().map_or_else(
        || (Vec::new(), Vec::new()),
        |last| {
            let calls = last
                .calls
                .iter()
                .filter_map(|d| {
                    task.session.calls.get(&d.call_id).map(|c| report_call(&d.call_id, c))
                })
                .collect();
            (calls, last.expired.clone())
        },
    );
    let resume =
        if task.control.needs_confirmation { Resume::NeedsConfirmation } else { Resume::Ready };
    TaskRecovery {
        task: id.clone(),
        calls,
        expired,
        expired_signals: Vec::new(),
        interrupted_step: None,
        interrupted_turn: None,
        resume,
        events_written: 0,
    }
}

fn report_call(call_id: &CallId, call: &Call) -> CallReport {
    let (outcome, plan) = classify(&facts_of(call));
    CallReport {
        call_id: call_id.clone(),
        tool: call.tool.clone(),
        outcome,
        plan,
        request_key: call.request_key.clone(),
        receipt: if outcome == Outcome::Completed { call.receipt.clone() } else { None },
    }
}
