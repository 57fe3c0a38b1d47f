//! The rules a new event must meet before the store writes it (`format-spec/events.md`,
//! "What the store refuses"). Pure: the store calls [`check`] under the task's lock with the
//! task's folded state and the append time.

use serde_json::Value;

use crate::error::{Error, ErrorKind, Result, UnresolvedCall};
use crate::harness::event::{
    AssistantMessage, Body, Effect, EventType, RecordRemoved, Scope, ToolCall,
};
use crate::harness::ids::{CallId, TaskId};
use crate::harness::state::{ApprovalStatus, Call, CallStatus, TaskState};
use crate::limits::{RECORD_KIND_BYTES_MAX, RECORD_REMOVED_SEQS_MAX};

/// What the store does with a checked event.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Write it.
    Write,
    /// A dispatch of a request that already completed: write nothing, return its receipt.
    Duplicate {
        /// The call that completed it.
        call_id: CallId,
        /// Its receipt.
        receipt: Option<Value>,
        /// The sequence number of its result.
        result_seq: u64,
    },
}

fn invalid(event_type: EventType, reason: impl Into<String>) -> Error {
    ErrorKind::InvalidEvent { event_type: event_type.name().to_owned(), reason: reason.into() }
        .into()
}

/// Checks `body`, about to be appended to task `task_id` whose state is `task`, at
/// `now_us`. `by_recovery` allows the types only recovery writes.
pub fn check(
    task_id: &TaskId,
    task: &TaskState,
    body: &Body,
    now_us: u64,
    by_recovery: bool,
) -> Result<Verdict> {
    let Some(event_type) = body.event_type() else {
        return Err(ErrorKind::InvalidEvent {
            event_type: body.type_name(),
            reason: "an opaque event is only ever read, never appended".to_owned(),
        }
        .into());
    };
    if event_type.is_recovery_only() && !by_recovery {
        return Err(invalid(event_type, "this type is written only by recovery"));
    }
    if body.operator().is_some() {
        check_operator_answer(task, body, event_type)?;
    }
    let execution = &task.execution;
    match body {
        Body::TurnStart(_) => {
            if let Some(turn) = execution.open_turn {
                return Err(invalid(
                    event_type,
                    format!("turn {turn} is still open: end it first"),
                ));
            }
        }
        Body::TurnEnd(_) if execution.open_turn.is_none() => {
            return Err(invalid(event_type, "no turn is open"));
        }
        Body::StepStart(_) => {
            if let Some(step) = execution.open_step {
                return Err(invalid(
                    event_type,
                    format!("step {step} is still open: end it first"),
                ));
            }
        }
        Body::StepEnd(_) if execution.open_step.is_none() => {
            return Err(invalid(event_type, "no step is open"));
        }
        Body::AssistantMessage(m) => check_announced(task_id, task, m)?,
        Body::ToolCall(c) => return check_dispatch(task_id, task, c, now_us),
        Body::ToolResult(r) => {
            let status = task.session.calls.get(&r.call_id).map(|c| c.status);
            match status {
                None | Some(CallStatus::NotStarted) => {
                    return Err(invalid(
                        event_type,
                        format!("call {:?} was never dispatched (no tool/call)", r.call_id.0),
                    ));
                }
                Some(CallStatus::Completed) => {
                    return Err(invalid(
                        event_type,
                        format!("call {:?} already has a result", r.call_id.0),
                    ));
                }
                Some(CallStatus::Dispatched | CallStatus::OutcomeUnknown) => {}
            }
        }
        Body::ApprovalGrant(g) if g.scope != Scope::Persistent && g.expires_at_us.is_some() => {
            return Err(invalid(event_type, "only a persistent grant takes expires_at_us"));
        }
        Body::RecordPut(r) => check_record_kind(event_type, &r.kind)?,
        Body::RecordBlob(r) => check_record_kind(event_type, &r.kind)?,
        Body::RecordRemoved(r) => {
            check_record_kind(event_type, &r.kind)?;
            check_removed(task, r)?;
        }
        _ => {}
    }
    Ok(Verdict::Write)
}

/// An operator's answer (`format-spec/events.md`, "Operator answers") names who gave it, has
/// a key the task has not taken yet, and answers what the task waits for: an unknown outcome
/// (`tool/result`, `tool/not_run`), a pending approval (`approval/grant`, `approval/deny`), a
/// confirmation or a pause (`control/resume`), a running turn and no pending cancel
/// (`control/cancel`).
fn check_operator_answer(task: &TaskState, body: &Body, event_type: EventType) -> Result<()> {
    let operator = body.operator().expect("called for an operator's answer");
    if operator.name.trim().is_empty() {
        return Err(invalid(event_type, "an operator's answer names who gave it: name is empty"));
    }
    if operator.key.is_empty() {
        return Err(invalid(event_type, "an operator's answer has a key: key is empty"));
    }
    if let Some(seq) = task.control.answers.get(&operator.key) {
        return Err(invalid(
            event_type,
            format!("the answer {:?} was already recorded at seq {seq}", operator.key),
        ));
    }
    let nothing = |what: String| invalid(event_type, format!("nothing to answer: {what}"));
    match body {
        Body::ToolResult(r) => call_awaits_answer(task, &r.call_id).map_err(nothing),
        Body::ToolNotRun(n) => call_awaits_answer(task, &n.call_id).map_err(nothing),
        Body::ApprovalGrant(g) => approval_awaits_answer(task, &g.approval_id).map_err(nothing),
        Body::ApprovalDeny(d) => approval_awaits_answer(task, &d.approval_id).map_err(nothing),
        Body::Resume(_) if !task.control.needs_confirmation && !task.control.paused => {
            Err(nothing("the task waits for no confirmation and is not paused".to_owned()))
        }
        Body::Cancel(_) => match (task.execution.open_turn, task.control.pending_cancels.last()) {
            (None, _) => Err(nothing("the task has no running turn to cancel".to_owned())),
            (Some(_), Some(seq)) => {
                Err(nothing(format!("a cancel is already pending (seq {seq})")))
            }
            (Some(_), None) => Ok(()),
        },
        Body::Pause(_) if task.control.paused => Err(nothing("the task is paused".to_owned())),
        _ => Ok(()),
    }
}

/// Whether a person may say what happened to call `id`: only when its outcome is unknown.
fn call_awaits_answer(task: &TaskState, id: &CallId) -> std::result::Result<(), String> {
    match task.session.calls.get(id) {
        None => Err(format!("the task has no call {:?}", id.0)),
        Some(call) if call.status == CallStatus::OutcomeUnknown => Ok(()),
        Some(call) => Err(format!(
            "call {:?} is {}, not outcome_unknown: only an unknown outcome is answered by a person",
            id.0,
            call.status.as_str()
        )),
    }
}

/// Whether a person may grant or deny approval `id`: only when it was requested and not
/// answered.
fn approval_awaits_answer(
    task: &TaskState,
    id: &crate::harness::ids::ApprovalId,
) -> std::result::Result<(), String> {
    match task.control.approvals.get(id) {
        None => Err(format!("approval {:?} was never requested", id.0)),
        Some(a) if a.status == ApprovalStatus::Requested => Ok(()),
        Some(a) => Err(format!("approval {:?} is {}, not requested", id.0, a.status.as_str())),
    }
}

/// A record's kind: 1 to [`RECORD_KIND_BYTES_MAX`] bytes.
fn check_record_kind(event_type: EventType, kind: &str) -> Result<()> {
    if kind.is_empty() {
        return Err(invalid(event_type, "kind is empty: name the adapter's record type"));
    }
    if kind.len() > RECORD_KIND_BYTES_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "record kind bytes",
            value: kind.len() as u64,
            limit: RECORD_KIND_BYTES_MAX as u64,
        }
        .into());
    }
    Ok(())
}

/// A removal names only events the task already has: sequence numbers from 1 to the task's
/// last one (so never itself nor a later event), at most [`RECORD_REMOVED_SEQS_MAX`] of them.
fn check_removed(task: &TaskState, removed: &RecordRemoved) -> Result<()> {
    let event_type = EventType::RecordRemoved;
    if removed.seqs.len() > RECORD_REMOVED_SEQS_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "sequence numbers in one record/removed",
            value: removed.seqs.len() as u64,
            limit: RECORD_REMOVED_SEQS_MAX as u64,
        }
        .into());
    }
    let mut named = removed.seqs.iter().chain(removed.through_seq.iter());
    if let Some(&bad) = named.find(|&&seq| seq == 0 || seq > task.last_seq) {
        return Err(invalid(
            event_type,
            format!(
                "seq {bad} is not an earlier event of this task (its events end at seq {}): \
                 a removal names events already appended",
                task.last_seq
            ),
        ));
    }
    if removed.seqs.is_empty() && removed.through_seq.is_none() {
        return Err(invalid(event_type, "it names no event: give seqs or through_seq"));
    }
    Ok(())
}

/// The part of `task` that checking `bodies` in order can look at: the execution and
/// control flags, and only the calls, request keys and approvals the bodies name. A batch is
/// checked against this view, folded forward event by event, so its cost follows the size of
/// the batch and not the length of the task's history.
#[must_use]
pub fn batch_view(task: &TaskState, bodies: &[Body]) -> TaskState {
    let mut view = TaskState {
        execution: task.execution.clone(),
        revision: task.revision,
        last_seq: task.last_seq,
        ..TaskState::default()
    };
    view.control.needs_confirmation = task.control.needs_confirmation;
    view.control.paused = task.control.paused;
    // The gate on unresolved unknown outcomes looks at every such call, named or not.
    for (id, call) in &task.session.calls {
        if call.status == CallStatus::OutcomeUnknown {
            view.session.calls.insert(id.clone(), call.clone());
            if let Some(key) = &call.request_key
                && let Some(effect) = task.side_effects.get(key)
            {
                view.side_effects.insert(key.clone(), effect.clone());
            }
        }
    }
    let take_call = |view: &mut TaskState, id: &CallId| {
        if let Some(call) = task.session.calls.get(id) {
            view.session.calls.entry(id.clone()).or_insert_with(|| call.clone());
            if let Some(key) = &call.request_key
                && let Some(effect) = task.side_effects.get(key)
            {
                view.side_effects.entry(key.clone()).or_insert_with(|| effect.clone());
            }
        }
    };
    for body in bodies {
        match body {
            Body::AssistantMessage(m) => {
                m.tool_calls.iter().for_each(|c| take_call(&mut view, &c.call_id));
            }
            Body::ToolCall(c) => {
                take_call(&mut view, &c.call_id);
                if let Some(key) = &c.request_key
                    && let Some(effect) = task.side_effects.get(key)
                {
                    view.side_effects.entry(key.clone()).or_insert_with(|| effect.clone());
                }
                if let Some(id) = &c.approval_id
                    && let Some(approval) = task.control.approvals.get(id)
                {
                    view.control.approvals.insert(id.clone(), approval.clone());
                }
            }
            Body::ToolResult(r) => take_call(&mut view, &r.call_id),
            Body::ToolOutcomeUnknown(u) => take_call(&mut view, &u.call_id),
            Body::ToolNotRun(n) => take_call(&mut view, &n.call_id),
            Body::ApprovalRequest(a) => copy_approval(task, &mut view, &a.approval_id),
            Body::ApprovalGrant(g) => copy_approval(task, &mut view, &g.approval_id),
            Body::ApprovalDeny(d) => copy_approval(task, &mut view, &d.approval_id),
            Body::ApprovalExpired(e) => copy_approval(task, &mut view, &e.approval_id),
            _ => {}
        }
    }
    view
}

fn copy_approval(task: &TaskState, view: &mut TaskState, id: &crate::harness::ids::ApprovalId) {
    if let Some(approval) = task.control.approvals.get(id) {
        view.control.approvals.insert(id.clone(), approval.clone());
    }
}

fn check_dispatch(
    task_id: &TaskId,
    task: &TaskState,
    call: &ToolCall,
    now_us: u64,
) -> Result<Verdict> {
    let event_type = EventType::ToolCall;
    if let Some(key) = &call.request_key
        && let Some(effect) = task.side_effects.get(key)
        && effect.status == CallStatus::Completed
    {
        return Ok(Verdict::Duplicate {
            call_id: effect.call_id.clone(),
            receipt: effect.receipt.clone(),
            result_seq: effect.result_seq,
        });
    }
    if let Some(key) = &call.request_key
        && let Some(effect) = task.side_effects.get(key)
        && effect.status == CallStatus::Dispatched
        && effect.call_id != call.call_id
    {
        return Err(invalid(
            event_type,
            format!(
                "request key {:?} is in flight with call {:?}: record its tool/result first",
                key.0, effect.call_id.0
            ),
        ));
    }
    if let Some(existing) = task.session.calls.get(&call.call_id) {
        if !same_request(existing, call) {
            return Err(call_id_reused(task_id, &call.call_id, existing));
        }
        match existing.status {
            CallStatus::Completed => {
                return Ok(Verdict::Duplicate {
                    call_id: call.call_id.clone(),
                    receipt: existing.receipt.clone(),
                    result_seq: existing.result_seq,
                });
            }
            CallStatus::Dispatched => {
                return Err(invalid(
                    event_type,
                    format!(
                        "call {:?} is already in flight: record its tool/result first",
                        call.call_id.0
                    ),
                ));
            }
            CallStatus::NotStarted | CallStatus::OutcomeUnknown => {}
        }
    }
    if task.control.needs_confirmation && call.effect != Effect::ReadOnly {
        return Err(ErrorKind::NeedsConfirmation { task: task_id.0.clone() }.into());
    }
    if call.effect != Effect::ReadOnly {
        let blocking = unresolved_calls(task, Some(call));
        if !blocking.is_empty() {
            return Err(
                ErrorKind::NeedsRecovery { task: task_id.0.clone(), calls: blocking }.into()
            );
        }
    }
    if let Some(id) = &call.approval_id {
        let refused = |reason: &'static str| -> Error {
            ErrorKind::ApprovalRefused {
                task: task_id.0.clone(),
                approval_id: id.0.clone(),
                reason,
            }
            .into()
        };
        let Some(approval) = task.control.approvals.get(id) else {
            return Err(refused("no such approval was requested or granted"));
        };
        match approval.status {
            ApprovalStatus::Granted => {
                if approval.expires_at_us.is_some_and(|end| end <= now_us) {
                    return Err(refused("its validity ended (expires_at_us)"));
                }
            }
            ApprovalStatus::Requested => return Err(refused("it was requested but not granted")),
            ApprovalStatus::Denied => return Err(refused("it was denied")),
            ApprovalStatus::Consumed => return Err(refused("it was granted once and is used")),
            ApprovalStatus::Expired => return Err(refused("it expired at a restart")),
        }
    }
    Ok(Verdict::Write)
}

/// Whether `call` is the same logical request as the `existing` call under its call id: the
/// same request key when both carry one, else the same tool and the same argument digest.
/// An announced call that was never dispatched has no digest yet: only its tool must match.
/// A call the log knows only by its result or unknown outcome (its dispatch was lost, as in a
/// salvaged store) is not known to be any request: nothing matches it.
fn same_request(existing: &Call, call: &ToolCall) -> bool {
    if existing.dispatches == 0 {
        return existing.status == CallStatus::NotStarted && existing.tool == call.tool;
    }
    match (&existing.request_key, &call.request_key) {
        (Some(earlier), Some(new)) => earlier == new,
        _ => existing.tool == call.tool && existing.args_digest == call.args_digest,
    }
}

fn call_id_reused(task_id: &TaskId, call_id: &CallId, existing: &Call) -> Error {
    let earlier_seq =
        if existing.dispatched_seq > 0 { existing.dispatched_seq } else { existing.announced_seq };
    ErrorKind::CallIdReused {
        task: task_id.0.clone(),
        call_id: call_id.0.clone(),
        earlier_seq,
        tool: existing.tool.clone(),
        args_digest: existing.args_digest.clone(),
    }
    .into()
}

/// An `assistant/message` asks for new calls: none of its call ids may name a call the task
/// already knows, nor appear twice in it.
fn check_announced(task_id: &TaskId, task: &TaskState, message: &AssistantMessage) -> Result<()> {
    for (index, requested) in message.tool_calls.iter().enumerate() {
        if let Some(existing) = task.session.calls.get(&requested.call_id) {
            return Err(call_id_reused(task_id, &requested.call_id, existing));
        }
        if message.tool_calls[..index].iter().any(|c| c.call_id == requested.call_id) {
            return Err(invalid(
                EventType::AssistantMessage,
                format!("call id {:?} appears twice in tool_calls", requested.call_id.0),
            ));
        }
    }
    Ok(())
}

/// The calls of `task` whose outcome a recovery recorded as unknown and that nothing resolved
/// since: neither a `tool/result`, nor a new dispatch of the call, nor a dispatch of its request
/// key under another call id. Read-only calls never block. `dispatch` is the call about to be
/// dispatched: the calls it retries do not count (it resolves them). In call-id order.
#[must_use]
pub fn unresolved_calls(task: &TaskState, dispatch: Option<&ToolCall>) -> Vec<UnresolvedCall> {
    task.session
        .calls
        .iter()
        .filter(|(id, call)| {
            call.status == CallStatus::OutcomeUnknown
                && call.effect != Some(Effect::ReadOnly)
                && !call.request_key.as_ref().is_some_and(|key| {
                    task.side_effects.get(key).is_some_and(|e| e.call_id != **id)
                })
                && !dispatch.is_some_and(|d| {
                    d.call_id == **id
                        || (d.request_key.is_some() && d.request_key == call.request_key)
                })
        })
        .map(|(id, call)| UnresolvedCall {
            call_id: id.0.clone(),
            tool: call.tool.clone(),
            plan: call.unknown_plan.clone().unwrap_or_else(|| "ask_user".to_owned()),
        })
        .collect()
}
