//! The folded state of the store: the five kinds of state of R8 for every task. It is only
//! ever built by [`crate::harness::fold::apply`], so it can always be rebuilt from the events;
//! a snapshot is this structure, serialised.
//!
//! Maps are ordered (`BTreeMap`) so that the same events give the same bytes in a snapshot.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::harness::event::{CallDecision, Effect, Risk, Scope};
use crate::harness::ids::{ApprovalId, CallId, RequestKey, TaskId};

/// Schema version of the serialised state inside a snapshot (`format-spec/snapshot.md`),
/// the one this build writes. Schema 2 added the fields the operator's view needs
/// ([`TaskState::last_time_us`], [`Call::unknown_seq`], [`Approval::requested_seq`],
/// [`Control::paused_seq`], [`Control::answers`]).
pub const STATE_SCHEMA: u16 = 2;

/// The oldest state schema this build reads: a schema-1 state has none of the fields schema
/// 2 added, and reads with each at its default (0 or empty: not known), until the task's
/// next events set them.
pub const STATE_SCHEMA_OLDEST: u16 = 1;

/// The folded state of every task in a store.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct State {
    /// The last log sequence number folded in (0: none).
    pub last_seq: u64,
    /// Every task, by id.
    pub tasks: BTreeMap<TaskId, TaskState>,
}

impl State {
    /// This state as a snapshot of state schema `schema` holds it: for schema 1, without the
    /// fields schema 2 added (each at its default, as a schema-1 snapshot reads). A state read
    /// from an older snapshot compares equal to a fold of the same events only this way:
    /// the events before that snapshot never set the newer fields.
    #[must_use]
    pub fn as_schema(&self, schema: u16) -> State {
        let mut state = self.clone();
        if schema < 2 {
            for task in state.tasks.values_mut() {
                task.last_time_us = 0;
                task.control.paused_seq = 0;
                task.control.answers.clear();
                for call in task.session.calls.values_mut() {
                    call.unknown_seq = 0;
                }
                for approval in task.control.approvals.values_mut() {
                    approval.requested_seq = 0;
                }
            }
        }
        state
    }
}

/// The folded state of one task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskState {
    /// The count of the task's events.
    pub revision: u64,
    /// The sequence number of its last event.
    pub last_seq: u64,
    /// The append time of its last event, in microseconds since the Unix epoch (0: not
    /// known, in a state read from a schema-1 snapshot before the task's next event).
    #[serde(default)]
    pub last_time_us: u64,
    /// Goal, phase, plan, todos, criteria.
    pub task: TaskFacts,
    /// Messages and tool calls.
    pub session: Session,
    /// Turn, step, budget, retries.
    pub execution: Execution,
    /// Side effects by request key.
    pub side_effects: BTreeMap<RequestKey, SideEffect>,
    /// Approvals, cancels, pause, resume.
    pub control: Control,
    /// Events of a type or schema this build does not know, counted.
    pub opaque_events: u64,
}

/// The task part of the state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskFacts {
    /// The goal of the contract, once one was recorded.
    pub goal: Option<String>,
    /// The done criteria.
    pub done_criteria: Vec<String>,
    /// The risk level.
    pub risk: Risk,
    /// The current phase.
    pub phase: Option<String>,
    /// The current plan.
    pub plan: Vec<String>,
    /// Todo items by id.
    pub todos: BTreeMap<String, TodoItem>,
}

/// One todo item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TodoItem {
    /// Its text.
    pub text: String,
    /// Its status.
    pub status: String,
}

/// The session part of the state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Session {
    /// User messages recorded.
    pub user_messages: u64,
    /// Assistant messages recorded.
    pub assistant_messages: u64,
    /// Every tool call announced or dispatched, by call id.
    pub calls: BTreeMap<CallId, Call>,
    /// The sequence number of the last `context/compacted` event (0: none).
    pub compacted_seq: u64,
}

/// What is known about one tool call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Call {
    /// The tool.
    pub tool: String,
    /// Where the call stands.
    pub status: CallStatus,
    /// Its effect class, once dispatched.
    pub effect: Option<Effect>,
    /// Its request key, if dispatched with one.
    pub request_key: Option<RequestKey>,
    /// The digest of its arguments, if dispatched with them.
    pub args_digest: Option<String>,
    /// The turn it belongs to (0: outside any turn).
    pub turn: u64,
    /// The sequence number of the `assistant/message` that asked for it (0: none).
    pub announced_seq: u64,
    /// Its position among that message's `tool_calls`.
    pub announced_index: u32,
    /// The sequence number of its latest `tool/call` (0: never dispatched).
    pub dispatched_seq: u64,
    /// How many times it was dispatched.
    pub dispatches: u32,
    /// The sequence number of its `tool/result` (0: none).
    pub result_seq: u64,
    /// The result's status.
    pub result_status: Option<String>,
    /// The receipt of its result.
    pub receipt: Option<Value>,
    /// The plan recovery recorded for an unknown outcome.
    pub unknown_plan: Option<String>,
    /// The sequence number of the `tool/outcome_unknown` that marked its outcome unknown (0:
    /// none, or not known in a state read from a schema-1 snapshot).
    #[serde(default)]
    pub unknown_seq: u64,
}

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Asked for by the model, never dispatched.
    #[default]
    NotStarted,
    /// Dispatched, no result yet (in flight in the running process).
    Dispatched,
    /// Dispatched and answered by a `tool/result`.
    Completed,
    /// Dispatched before a restart, no result: it may or may not have run.
    OutcomeUnknown,
}

impl CallStatus {
    /// The name used in JSON and in the recovery report.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::NotStarted => "not_started",
            CallStatus::Dispatched => "dispatched",
            CallStatus::Completed => "completed",
            CallStatus::OutcomeUnknown => "outcome_unknown",
        }
    }
}

/// The execution part of the state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Execution {
    /// Turns started.
    pub turns: u64,
    /// The open turn's number, if one is open.
    pub open_turn: Option<u64>,
    /// The sequence number of the last `turn/end` (0: none).
    pub last_turn_end_seq: u64,
    /// Steps started in all turns.
    pub steps: u64,
    /// The open step's number (counted over all turns), if one is open.
    pub open_step: Option<u64>,
    /// `assistant/delta` events.
    pub deltas: u64,
    /// Bytes of `assistant/delta` text.
    pub delta_bytes: u64,
    /// Dispatches of a call that had been dispatched before.
    pub retries: u64,
    /// Budget counters.
    pub budget: Budget,
}

/// Budget counters (sums of `budget/usage`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Budget {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cost in millionths of the account currency.
    pub cost_micros: u64,
}

/// One side effect, by request key.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SideEffect {
    /// The call that carries the key (the latest one).
    pub call_id: CallId,
    /// Where it stands.
    pub status: CallStatus,
    /// Its receipt, once completed.
    pub receipt: Option<Value>,
    /// The sequence number of the result that completed it (0: none).
    pub result_seq: u64,
}

/// The control part of the state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Control {
    /// Approvals by id.
    pub approvals: BTreeMap<ApprovalId, Approval>,
    /// Sequence numbers of `control/cancel` events not yet answered by a `turn/end`.
    pub pending_cancels: Vec<u64>,
    /// Whether the task is paused.
    pub paused: bool,
    /// The sequence number of the `control/pause` that paused it (0: not paused, or not known
    /// in a state read from a schema-1 snapshot).
    #[serde(default)]
    pub paused_seq: u64,
    /// Whether a restart left the task waiting for a resume confirmation.
    pub needs_confirmation: bool,
    /// The last recovery's decisions (from its `recovery/restored` event).
    pub last_recovery: Option<LastRecovery>,
    /// The operator answers recorded (`format-spec/events.md`, "Operator answers"): the
    /// sequence number of the event that carried each answer key.
    #[serde(default)]
    pub answers: BTreeMap<String, u64>,
}

/// One approval.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Approval {
    /// Where it stands.
    pub status: ApprovalStatus,
    /// Its scope, once granted.
    pub scope: Option<Scope>,
    /// For persistent grants: the end of validity.
    pub expires_at_us: Option<u64>,
    /// The sequence number of its `approval/request` (0: granted without a request, or not
    /// known in a state read from a schema-1 snapshot).
    #[serde(default)]
    pub requested_seq: u64,
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Asked for, not answered.
    #[default]
    Requested,
    /// Granted and usable.
    Granted,
    /// Denied.
    Denied,
    /// A `once` grant used by a call.
    Consumed,
    /// Expired by a restart.
    Expired,
}

impl ApprovalStatus {
    /// The name used in JSON: `requested`, `granted`, `denied`, `consumed` or `expired`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Requested => "requested",
            ApprovalStatus::Granted => "granted",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Consumed => "consumed",
            ApprovalStatus::Expired => "expired",
        }
    }
}

/// The decisions of the last recovery of a task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LastRecovery {
    /// The `recovery/restored` event.
    pub seq: u64,
    /// The task's revision after it.
    pub revision: u64,
    /// The calls that needed a decision.
    pub calls: Vec<CallDecision>,
    /// The approvals it expired.
    pub expired: Vec<ApprovalId>,
}
