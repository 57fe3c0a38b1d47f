//! The deterministic fold: `apply(&mut State, &Event)` (R10). Pure: no clock, no I/O, no
//! randomness; the same events in the same order always give the same state.
//!
//! `apply` is total: it accepts any event a log may hold, including ones the store would have
//! refused (a result for an unknown call is recorded as a call of its own). The checks that
//! refuse bad events before they are written live in `harness/check.rs`, run by the store.
//!
//! An `assistant/delta` only touches the task's revision, last sequence number and delta
//! counters, which commute with every other event's effect. That is what lets the store
//! append deltas under the log's one lock without folding them in order.

use crate::error::Result;
use crate::harness::codec;
use crate::harness::event::{
    ApprovalGrant, AssistantMessage, Body, BudgetUsage, Contract, Event, Restored, Scope, Todo,
    ToolCall, ToolOutcomeUnknown, ToolResult,
};
use crate::harness::ids::{ApprovalId, CallId, TaskId};
use crate::harness::state::{Approval, ApprovalStatus, CallStatus, LastRecovery, State, TaskState};
use crate::types::Seq;

/// Folds `event` into `state`.
pub fn apply(state: &mut State, event: &Event) {
    state.last_seq = state.last_seq.max(event.seq.0);
    apply_to_task(task_entry(state, event.task.as_str()), event);
}

/// Folds encoded events in log order into a state, as [`apply`] of each one's decoding
/// would, with the same errors. Replay after a snapshot goes through it.
///
/// An `assistant/delta`, most of a session's events, is counted from the record's bytes
/// without building an [`Event`], and a run of deltas of one task is added to that task's
/// state in one step when the run ends (at another task's event, a non-delta, or
/// [`Replay::finish`]): deltas commute with every other effect (module docs), so the state
/// is the same, without a map lookup per delta.
#[derive(Debug)]
pub struct Replay<'s> {
    state: &'s mut State,
    run: DeltaRun,
}

/// Deltas of one task counted since the last time they were added to its state.
#[derive(Debug, Default)]
struct DeltaRun {
    /// The task; its buffer is reused from run to run.
    task: String,
    deltas: u64,
    delta_bytes: u64,
    revision: u64,
    last_seq: u64,
    last_time_us: u64,
}

impl<'s> Replay<'s> {
    /// A replay into `state`.
    pub fn new(state: &'s mut State) -> Replay<'s> {
        Replay { state, run: DeltaRun::default() }
    }

    /// Folds the encoded event `record` of sequence number `seq`.
    pub fn apply_record(&mut self, seq: Seq, record: &[u8]) -> Result<()> {
        let envelope = codec::peek(seq, record)?;
        let Some(text) = codec::delta_text(seq, &envelope)? else {
            let event = codec::decode(seq, record)?;
            self.end_run();
            apply(self.state, &event);
            return Ok(());
        };
        if self.run.deltas > 0 && self.run.task != envelope.task {
            self.end_run();
        }
        let run = &mut self.run;
        if run.deltas == 0 {
            run.task.clear();
            run.task.push_str(envelope.task);
        }
        run.deltas += 1;
        run.delta_bytes += text.len() as u64;
        run.revision = run.revision.max(envelope.revision);
        run.last_seq = run.last_seq.max(seq.0);
        run.last_time_us = run.last_time_us.max(envelope.timestamp_us);
        Ok(())
    }

    /// Adds the deltas counted last to their task's state.
    pub fn finish(mut self) {
        self.end_run();
    }

    fn end_run(&mut self) {
        let run = std::mem::take(&mut self.run.deltas);
        if run == 0 {
            return;
        }
        let DeltaRun { task: id, delta_bytes, revision, last_seq, last_time_us, .. } =
            &mut self.run;
        self.state.last_seq = self.state.last_seq.max(*last_seq);
        let task = task_entry(self.state, id);
        task.revision = task.revision.max(*revision);
        task.last_seq = task.last_seq.max(*last_seq);
        task.last_time_us = task.last_time_us.max(std::mem::take(last_time_us));
        task.execution.deltas += run;
        task.execution.delta_bytes += std::mem::take(delta_bytes);
        *revision = 0;
        *last_seq = 0;
    }
}

/// The state of task `id`, added empty if the state has none yet; the id is copied only then.
fn task_entry<'s>(state: &'s mut State, id: &str) -> &'s mut TaskState {
    if !state.tasks.contains_key(id) {
        state.tasks.insert(TaskId(id.to_owned()), TaskState::default());
    }
    state.tasks.get_mut(id).expect("the task was just added")
}

/// Folds `event` into the state of its task, `task`: the per-task part of [`apply`].
pub fn apply_to_task(task: &mut TaskState, event: &Event) {
    task.revision = task.revision.max(event.revision);
    task.last_seq = task.last_seq.max(event.seq.0);
    task.last_time_us = task.last_time_us.max(event.timestamp_us);
    apply_body(task, event);
}

/// Counts one delta of `text_bytes` bytes: the part of [`apply`] for `assistant/delta`.
pub fn count_delta(task: &mut TaskState, text_bytes: usize) {
    task.execution.deltas += 1;
    task.execution.delta_bytes += text_bytes as u64;
}

/// The decision table of the fold: each body type and the change it makes to its task.
fn apply_body(task: &mut TaskState, event: &Event) {
    let seq = event.seq.0;
    if let Some(operator) = event.body.operator() {
        task.control.answers.insert(operator.key.clone(), seq);
    }
    match &event.body {
        Body::AssistantDelta(d) => count_delta(task, d.text.len()),
        Body::Contract(c) => set_contract(task, c),
        Body::Phase(p) => task.task.phase = Some(p.phase.clone()),
        Body::Plan(p) => task.task.plan.clone_from(&p.steps),
        Body::Todo(t) => update_todo(task, t),
        Body::TurnStart(_) => start_turn(task),
        Body::TurnEnd(_) => end_turn(task, seq),
        Body::StepStart(_) => start_step(task),
        Body::StepEnd(_) => task.execution.open_step = None,
        Body::UserMessage(_) => task.session.user_messages += 1,
        Body::AssistantMessage(m) => announce_calls(task, m, seq),
        Body::ToolCall(c) => dispatch_call(task, c, seq),
        Body::ToolResult(r) => complete_call(task, r, seq),
        Body::ToolOutcomeUnknown(u) => mark_outcome_unknown(task, u, seq),
        Body::ToolNotRun(n) => mark_not_run(task, &n.call_id),
        Body::ApprovalRequest(a) => {
            let approval = task.control.approvals.entry(a.approval_id.clone()).or_default();
            if approval.status == ApprovalStatus::Requested && approval.requested_seq == 0 {
                approval.requested_seq = seq;
            }
        }
        Body::ApprovalGrant(g) => grant_approval(task, g),
        Body::ApprovalDeny(d) => set_approval_status(task, &d.approval_id, ApprovalStatus::Denied),
        Body::ApprovalExpired(e) => {
            set_approval_status(task, &e.approval_id, ApprovalStatus::Expired);
        }
        Body::Cancel(_) => task.control.pending_cancels.push(seq),
        Body::Pause(_) => {
            if !task.control.paused {
                task.control.paused_seq = seq;
            }
            task.control.paused = true;
        }
        Body::Resume(_) => {
            task.control.paused = false;
            task.control.paused_seq = 0;
            task.control.needs_confirmation = false;
        }
        Body::SignalExpired(s) => task.control.pending_cancels.retain(|&c| c != s.signal_seq),
        Body::BudgetUsage(b) => add_budget_usage(task, b),
        Body::ContextCompacted(_) => task.session.compacted_seq = seq,
        Body::Restored(r) => record_restore(task, r, seq, event.revision),
        // An audit record: it moves the revision and the last sequence number, nothing else.
        Body::StateMigrated(_) => {}
        // An adapter's records: the adapter folds them; the store keeps only the revision.
        Body::RecordPut(_) | Body::RecordRemoved(_) | Body::RecordBlob(_) => {}
        Body::Opaque(_) => task.opaque_events += 1,
    }
}

/// A `task/contract`: the goal, the done criteria and the risk.
fn set_contract(task: &mut TaskState, contract: &Contract) {
    task.task.goal = Some(contract.goal.clone());
    task.task.done_criteria.clone_from(&contract.done_criteria);
    task.task.risk = contract.risk;
}

/// A `task/todo`: the item's text (if given) and status.
fn update_todo(task: &mut TaskState, todo: &Todo) {
    let item = task.task.todos.entry(todo.todo_id.clone()).or_default();
    if let Some(text) = &todo.text {
        item.text.clone_from(text);
    }
    todo.status().clone_into(&mut item.status);
}

/// A `turn/start` opens the next turn, with no step open in it.
fn start_turn(task: &mut TaskState) {
    task.execution.turns += 1;
    task.execution.open_turn = Some(task.execution.turns);
    task.execution.open_step = None;
}

/// A `turn/end` closes the turn and its step; the cancels pending in it end with it.
fn end_turn(task: &mut TaskState, seq: u64) {
    task.execution.last_turn_end_seq = seq;
    task.execution.open_turn = None;
    task.execution.open_step = None;
    task.control.pending_cancels.clear();
}

/// A `step/start` opens the next step.
fn start_step(task: &mut TaskState) {
    task.execution.steps += 1;
    task.execution.open_step = Some(task.execution.steps);
}

/// An `assistant/message` counts, and announces the calls it asks for: a call keeps the
/// first message that asked for it.
fn announce_calls(task: &mut TaskState, message: &AssistantMessage, seq: u64) {
    task.session.assistant_messages += 1;
    let turn = task.execution.open_turn.unwrap_or(0);
    for (index, requested) in message.tool_calls.iter().enumerate() {
        let call = task.session.calls.entry(requested.call_id.clone()).or_default();
        if call.announced_seq == 0 {
            call.announced_seq = seq;
            call.announced_index = u32::try_from(index).unwrap_or(u32::MAX);
            call.tool.clone_from(&requested.tool);
            call.turn = turn;
        }
    }
}

/// A `tool/call`: the call is dispatched (a second dispatch is a retry), unless it already
/// completed; so is its side effect, by request key; it consumes a `once` approval it names.
fn dispatch_call(task: &mut TaskState, dispatched: &ToolCall, seq: u64) {
    let turn = task.execution.open_turn.unwrap_or(0);
    let call = task.session.calls.entry(dispatched.call_id.clone()).or_default();
    if call.dispatches > 0 {
        task.execution.retries += 1;
    }
    call.dispatches += 1;
    call.dispatched_seq = seq;
    call.tool.clone_from(&dispatched.tool);
    call.effect = Some(dispatched.effect);
    call.request_key.clone_from(&dispatched.request_key);
    call.args_digest.clone_from(&dispatched.args_digest);
    call.turn = turn;
    if call.status != CallStatus::Completed {
        call.status = CallStatus::Dispatched;
        call.unknown_plan = None;
    }
    if let Some(key) = &dispatched.request_key {
        let effect = task.side_effects.entry(key.clone()).or_default();
        if effect.status != CallStatus::Completed {
            effect.call_id = dispatched.call_id.clone();
            effect.status = CallStatus::Dispatched;
        }
    }
    if let Some(id) = &dispatched.approval_id
        && let Some(approval) = task.control.approvals.get_mut(id)
        && approval.status == ApprovalStatus::Granted
        && approval.scope == Some(Scope::Once)
    {
        approval.status = ApprovalStatus::Consumed;
    }
}

/// A `tool/result` completes the call and its side effect, with the receipt.
fn complete_call(task: &mut TaskState, result: &ToolResult, seq: u64) {
    let call = task.session.calls.entry(result.call_id.clone()).or_default();
    call.status = CallStatus::Completed;
    call.result_seq = seq;
    // The state keeps the outcome's name, so the state schema did not change with it.
    call.result_status = Some(result.outcome.as_str().to_owned());
    call.receipt.clone_from(&result.receipt);
    call.unknown_plan = None;
    if let Some(key) = call.request_key.clone() {
        let effect = task.side_effects.entry(key).or_default();
        effect.call_id = result.call_id.clone();
        effect.status = CallStatus::Completed;
        effect.receipt.clone_from(&result.receipt);
        effect.result_seq = seq;
    }
}

/// A `tool/outcome_unknown` marks a call (and its side effect) that has not completed.
fn mark_outcome_unknown(task: &mut TaskState, unknown: &ToolOutcomeUnknown, seq: u64) {
    let call = task.session.calls.entry(unknown.call_id.clone()).or_default();
    if call.status == CallStatus::Completed {
        return;
    }
    call.status = CallStatus::OutcomeUnknown;
    call.unknown_plan = Some(unknown.plan.clone());
    call.unknown_seq = seq;
    if let Some(key) = call.request_key.clone()
        && let Some(effect) = task.side_effects.get_mut(&key)
        && effect.status != CallStatus::Completed
    {
        effect.status = CallStatus::OutcomeUnknown;
    }
}

/// A `tool/not_run`: a person says the call whose outcome was unknown never ran, so it stands
/// as never dispatched (its dispatch count stays), and so does its side effect.
fn mark_not_run(task: &mut TaskState, call_id: &CallId) {
    let Some(call) = task.session.calls.get_mut(call_id) else { return };
    if call.status != CallStatus::OutcomeUnknown {
        return;
    }
    call.status = CallStatus::NotStarted;
    call.unknown_plan = None;
    call.unknown_seq = 0;
    if let Some(key) = call.request_key.clone()
        && let Some(effect) = task.side_effects.get_mut(&key)
        && effect.status == CallStatus::OutcomeUnknown
    {
        effect.status = CallStatus::NotStarted;
    }
}

/// An `approval/grant` replaces whatever the approval was.
fn grant_approval(task: &mut TaskState, grant: &ApprovalGrant) {
    let approval = task.control.approvals.entry(grant.approval_id.clone()).or_default();
    *approval = Approval {
        status: ApprovalStatus::Granted,
        scope: Some(grant.scope),
        expires_at_us: grant.expires_at_us,
        requested_seq: approval.requested_seq,
    };
}

/// An `approval/deny` or `approval/expired`: the approval's new status.
fn set_approval_status(task: &mut TaskState, id: &ApprovalId, status: ApprovalStatus) {
    task.control.approvals.entry(id.clone()).or_default().status = status;
}

/// A `budget/usage` adds to the task's totals, saturating.
fn add_budget_usage(task: &mut TaskState, usage: &BudgetUsage) {
    let budget = &mut task.execution.budget;
    budget.input_tokens = budget.input_tokens.saturating_add(usage.input_tokens);
    budget.output_tokens = budget.output_tokens.saturating_add(usage.output_tokens);
    budget.cost_micros = budget.cost_micros.saturating_add(usage.cost_micros);
}

/// A `recovery/restored`: whether the task needs a confirmation, and what recovery decided.
fn record_restore(task: &mut TaskState, restored: &Restored, seq: u64, revision: u64) {
    task.control.needs_confirmation = restored.resume == "needs_confirmation";
    task.control.last_recovery = Some(LastRecovery {
        seq,
        revision,
        calls: restored.calls.clone(),
        expired: restored.expired.clone(),
    });
}
