//! `factlog state`: the folded state of every task, or of one, through a read-only open (no
//! lock, nothing written).
//!
//! JSON is the library's `State` serialised as it is, or with `--task` one `TaskState` with
//! the id under `"task"` (and the state's own `task` part, the goal and plan, under
//! `"facts"`); the text form is a summary per task. Values are printed as stored, where secrets
//! are already references.

use std::fmt::Write as _;
use std::process::ExitCode;

use factlog::harness::state::{Call, State, TaskState};
use factlog::harness::{ApprovalId, CallId, TaskId};
use factlog::protocol::views;
use serde::Serialize;
use serde_json::Value;

use crate::{Failure, Outcome, StateArgs, open_read_only, print_out};

/// Exit code for every runtime failure of `state`.
const EXIT_FAILURE: u8 = 1;

pub fn run(args: &StateArgs) -> Outcome {
    let store = open_read_only(&args.dir, EXIT_FAILURE)?;
    let text = match &args.task {
        Some(id) => {
            let task = store.task_state(id).ok_or_else(|| unknown_task(id, &store.task_ids()))?;
            if args.json { task_json(id, &task)? } else { task_text(id, &task) }
        }
        None => {
            let state = store.state();
            if args.json { to_json(&state)? } else { state_text(&state) }
        }
    };
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The message for a task without events, listing the ones there are.
pub fn unknown_task(id: &str, known: &[TaskId]) -> Failure {
    let known = if known.is_empty() {
        "the store has no tasks".to_owned()
    } else {
        let ids: Vec<&str> = known.iter().map(TaskId::as_str).collect();
        format!("its tasks are: {}", ids.join(", "))
    };
    Failure::new(EXIT_FAILURE, format_args!("task {id:?} has no events in this store ({known})"))
}

fn to_json(value: &impl Serialize) -> Result<String, Failure> {
    let mut text = serde_json::to_string(value).map_err(|error| {
        Failure::new(EXIT_FAILURE, format_args!("cannot format the state: {error}"))
    })?;
    text.push('\n');
    Ok(text)
}

/// The task's state object with `"task": id` first and the state's own `task` part under
/// `"facts"`: the library's (`factlog::protocol::views`), which every door prints.
fn task_json(id: &str, task: &TaskState) -> Result<String, Failure> {
    let object = views::task_state_object(id, task).map_err(|error| {
        Failure::new(EXIT_FAILURE, format_args!("cannot format the state: {error}"))
    })?;
    to_json(&object)
}

/// The snake-case name a state enum serialises to.
fn name(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

fn optional(value: Option<&Value>) -> String {
    value.map_or_else(|| "none".to_owned(), Value::to_string)
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// Writing into a `String` cannot fail, so the `write!` results are dropped.
fn state_text(state: &State) -> String {
    let mut out = String::new();
    let tasks = state.tasks.len();
    let plural = if tasks == 1 { "" } else { "s" };
    let _ = writeln!(out, "store: {tasks} task{plural}, last seq {}", state.last_seq);
    for (id, task) in &state.tasks {
        out.push_str(&task_text(id.as_str(), task));
    }
    out
}

fn task_text(id: &str, task: &TaskState) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "task {id} (revision {}, last seq {})", task.revision, task.last_seq);
    let facts = &task.task;
    let _ = writeln!(out, "  goal: {}", facts.goal.as_deref().unwrap_or("none"));
    let _ = writeln!(out, "  risk: {}", name(&facts.risk));
    let _ = writeln!(out, "  phase: {}", facts.phase.as_deref().unwrap_or("none"));
    let execution = &task.execution;
    let open = |n: Option<u64>| n.map_or_else(|| "none open".to_owned(), |n| format!("{n} open"));
    let _ = writeln!(
        out,
        "  turns: {} ({}); steps: {} ({})",
        execution.turns,
        open(execution.open_turn),
        execution.steps,
        open(execution.open_step)
    );
    let _ = writeln!(
        out,
        "  deltas: {} ({} bytes); retries: {}; budget: {} input tokens, {} output tokens, {} \
         cost micros",
        execution.deltas,
        execution.delta_bytes,
        execution.retries,
        execution.budget.input_tokens,
        execution.budget.output_tokens,
        execution.budget.cost_micros
    );
    calls_text(&mut out, &task.session.calls);
    for (key, effect) in &task.side_effects {
        let _ = writeln!(
            out,
            "  side effect {key}: {} by call {}, receipt {}",
            name(&effect.status),
            effect.call_id,
            optional(effect.receipt.as_ref())
        );
    }
    approvals_text(&mut out, &task.control.approvals);
    let control = &task.control;
    let _ = writeln!(
        out,
        "  paused: {}; pending cancels: {}; needs_confirmation: {}",
        yes_no(control.paused),
        control.pending_cancels.len(),
        yes_no(control.needs_confirmation)
    );
    out
}

fn calls_text(out: &mut String, calls: &std::collections::BTreeMap<CallId, Call>) {
    for (id, call) in calls {
        let mut line = format!("  call {id} ({}): {}", call.tool, call.status.as_str());
        if let Some(effect) = call.effect {
            let _ = write!(line, ", {}", effect.as_str());
        }
        if let Some(key) = &call.request_key {
            let _ = write!(line, ", request key {key}");
        }
        if let Some(plan) = &call.unknown_plan {
            let _ = write!(line, ", plan {plan}");
        }
        if let Some(status) = &call.result_status {
            let _ = write!(line, ", result {status}, receipt {}", optional(call.receipt.as_ref()));
        }
        out.push_str(&line);
        out.push('\n');
    }
}

fn approvals_text(
    out: &mut String,
    approvals: &std::collections::BTreeMap<ApprovalId, factlog::harness::state::Approval>,
) {
    for (id, approval) in approvals {
        let mut line = format!("  approval {id}: {}", name(&approval.status));
        if let Some(scope) = &approval.scope {
            let _ = write!(line, ", scope {}", name(scope));
        }
        if let Some(end) = approval.expires_at_us {
            let _ = write!(line, ", expires at {end} us");
        }
        out.push_str(&line);
        out.push('\n');
    }
}
