//! `factlog state`: the folded state of every task, or of one, through a read-only open (no
//! lock, nothing written).
//!
//! JSON has one shape with or without `--task`: `{"last_seq":N,"tasks":{ID: TaskState}}`, the
//! library's serialisation, with `--task` holding only that task. Each approval's
//! `expires_at_us` is followed by `expires_at`, the same instant in RFC 3339
//! (`factlog::protocol::views`, the view every door prints). The text form is a summary per task. Values are
//! printed as stored, where secrets are already references.

use std::fmt::Write as _;
use std::process::ExitCode;

use factlog::harness::state::{Call, State, TaskState};
use factlog::harness::{ApprovalId, CallId, TaskId};
use factlog::protocol::time::format_rfc3339;
use factlog::protocol::views;
use factlog::{Store, StoreOptions};
use serde::Serialize;
use serde_json::Value;

use crate::{
    EXIT_FAILURE, Failure, Outcome, StateArgs, open_failure, open_read_only, print_out,
    require_store, tasks,
};
use factlog::error::counted;

/// `state`: folds the store read-only and prints every task, or the one of `--task`.
///
/// With `--task` only that task's events are decoded and folded ([`Store::read_task`]): the
/// other tasks' events after the snapshot are only read.
pub fn run(args: &StateArgs) -> Outcome {
    let state = match &args.task {
        None => open_read_only(&args.dir)?
            .try_state()
            .map_err(|error| open_failure(&args.dir, &error))?,
        Some(id) => {
            require_store(&args.dir)?;
            let read = Store::read_task(&args.dir, StoreOptions::new(), id)
                .map_err(|error| open_failure(&args.dir, &error))?;
            let Some(task) = read.state else {
                return Err(tasks::unknown_store_task(id, &read.task_ids));
            };
            let mut state = State { last_seq: read.last_seq, ..State::default() };
            state
                .tasks
                .insert(TaskId::new(id).map_err(|error| open_failure(&args.dir, &error))?, task);
            state
        }
    };
    let text = if args.json {
        state_json(&state)?
    } else if args.task.is_some() {
        state.tasks.iter().map(|(id, task)| task_text(id.as_str(), task)).collect()
    } else {
        state_text(&state)
    };
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `{"last_seq":N,"tasks":{..}}` and a newline: the library's view
/// ([`views::state_value`]), which every door prints, each approval's `expires_at_us`
/// followed by its RFC 3339 `expires_at`.
fn state_json(state: &State) -> Result<String, Failure> {
    let value = views::state_value(state).map_err(|error| {
        Failure::new(EXIT_FAILURE, format_args!("cannot format the state: {error}"))
    })?;
    let mut text = value.to_string();
    text.push('\n');
    Ok(text)
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
        "  deltas: {} ({}); retries: {}; budget: {}, {}, {} cost micros",
        execution.deltas,
        counted(execution.delta_bytes, "byte"),
        execution.retries,
        counted(execution.budget.input_tokens, "input token"),
        counted(execution.budget.output_tokens, "output token"),
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
            let _ = write!(line, ", expires at {}", format_rfc3339(end));
        }
        out.push_str(&line);
        out.push('\n');
    }
}
