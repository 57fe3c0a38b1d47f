//! The operator's commands: `tasks` (which tasks wait for a person, from the folded state)
//! and `resolve`, `confirm`, `approve`, `deny`, `cancel` (a person's answer, recorded as a
//! fact with who gave it). The rules are the library's: `factlog::harness::operator` plans
//! and `factlog::client::answer` takes the answer to the store, embedded or served.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use factlog::client::answer::{self, AnswerError, Answered};
use factlog::client::served::{Held, holder_of};
use factlog::harness::event::Scope;
use factlog::harness::operator::{self, Answer, Operator, Reason, TaskSummary};
use factlog::protocol::time::format_rfc3339;
use factlog::protocol::views::task_summary_value;
use serde_json::Value;

use crate::{EXIT_FAILURE, EXIT_USAGE, Failure, Outcome, open_read_only, print_out, require_store};

/// `factlog tasks`.
#[derive(Debug, clap::Args)]
pub(crate) struct TasksArgs {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// Only the tasks that wait for a person, the oldest wait first.
    #[arg(long)]
    pub(crate) attention: bool,
    /// Print one JSON object per task instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Who answers, shared by the answer commands.
#[derive(Debug, clap::Args)]
pub(crate) struct AnswerBy {
    /// Store directory.
    pub(crate) dir: PathBuf,
    /// The task.
    #[arg(long, value_name = "TASK")]
    pub(crate) task: String,
    /// Who answers (default: the user running the command).
    #[arg(long = "as", value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// A note recorded with the answer.
    #[arg(long, value_name = "TEXT")]
    pub(crate) note: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `factlog resolve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResolveArgs {
    #[command(flatten)]
    pub(crate) by: AnswerBy,
    /// The call whose outcome is unknown.
    #[arg(long, value_name = "CALL")]
    pub(crate) call: String,
    /// The call ran, and returned this JSON (recorded as its tool/result's output).
    #[arg(long, value_name = "JSON", required_unless_present = "not_run")]
    pub(crate) result: Option<String>,
    /// What proves the call's effect (JSON), with --result.
    #[arg(long, value_name = "JSON", requires = "result")]
    pub(crate) receipt: Option<String>,
    /// The call never ran: it may be dispatched again.
    #[arg(long, conflicts_with = "result")]
    pub(crate) not_run: bool,
}

/// `factlog confirm` and `factlog cancel`.
#[derive(Debug, clap::Args)]
pub(crate) struct TaskAnswerArgs {
    #[command(flatten)]
    pub(crate) by: AnswerBy,
}

/// `factlog approve` and `factlog deny`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApprovalArgs {
    #[command(flatten)]
    pub(crate) by: AnswerBy,
    /// The requested approval.
    #[arg(long, value_name = "APPROVAL")]
    pub(crate) approval: String,
    /// How long a grant authorises calls (approve only; default once).
    #[arg(long, value_enum)]
    pub(crate) scope: Option<ScopeArg>,
}

/// The `--scope` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ScopeArg {
    /// One call; expires at a restart if unused.
    Once,
    /// Until the harness process ends.
    Run,
    /// Survives restarts.
    Persistent,
}

/// `tasks`: every task (or those that wait, `--attention`) from the folded state.
pub fn tasks(args: &TasksArgs) -> Outcome {
    let store = open_read_only(&args.dir)?;
    let state = store.try_state().map_err(|error| crate::open_failure(&args.dir, &error))?;
    drop(store);
    let list =
        if args.attention { operator::attention(&state) } else { operator::summaries(&state) };
    let mut out = String::new();
    if args.json {
        for summary in &list {
            out.push_str(&task_summary_value(summary).to_string());
            out.push('\n');
        }
    } else {
        let holder = match holder_of(&args.dir) {
            None => "none".to_owned(),
            Some(Held::Served { .. }) => "a process that serves it (factlog.sock)".to_owned(),
            Some(Held::NotServed { pid: Some(pid) }) => format!("process {pid}, not served"),
            Some(Held::NotServed { pid: None }) => "a process, not served".to_owned(),
        };
        let _ = writeln!(out, "holder: {holder}");
        for summary in &list {
            summary_text(&mut out, summary);
        }
        if list.is_empty() {
            out.push_str(if args.attention {
                "no task waits for a person\n"
            } else {
                "the store has no tasks\n"
            });
        }
    }
    print_out(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// `TASK  phase P  seq N  TIME` and one indented line per wait.
fn summary_text(out: &mut String, summary: &TaskSummary) {
    let time = if summary.last_time_us == 0 {
        "time unknown".to_owned()
    } else {
        format_rfc3339(summary.last_time_us)
    };
    let phase = summary.phase.as_deref().unwrap_or("-");
    let _ = writeln!(out, "{}  phase {phase}  seq {}  {time}", summary.task, summary.last_seq);
    for wait in &summary.attention {
        let _ = write!(out, "  waits: {}", wait.reason.as_str());
        match wait.reason {
            Reason::OutcomeUnknown => {
                let _ = write!(
                    out,
                    " call {} ({}), plan {}",
                    wait.call_id.as_deref().unwrap_or("?"),
                    wait.tool.as_deref().unwrap_or("?"),
                    wait.plan.as_deref().unwrap_or("?")
                );
            }
            Reason::ApprovalPending => {
                let _ = write!(out, " approval {}", wait.approval_id.as_deref().unwrap_or("?"));
            }
            Reason::NeedsConfirmation | Reason::Paused => {}
        }
        let _ = writeln!(out, " since seq {}", wait.since_seq);
    }
}

/// `resolve`: what happened to a call whose outcome is unknown.
pub fn resolve(args: &ResolveArgs) -> Outcome {
    let answer = if args.not_run {
        Answer::NotRun { call_id: args.call.clone() }
    } else {
        let output = json_arg("--result", args.result.as_deref().unwrap_or("null"))?;
        let receipt = args.receipt.as_deref().map(|r| json_arg("--receipt", r)).transpose()?;
        Answer::Resolve { call_id: args.call.clone(), output, receipt }
    };
    give(&args.by, &answer)
}

/// `confirm`: the control/resume a task waits for.
pub fn confirm(args: &TaskAnswerArgs) -> Outcome {
    give(&args.by, &Answer::Confirm)
}

/// `cancel`: cancel the task's running turn.
pub fn cancel(args: &TaskAnswerArgs) -> Outcome {
    give(&args.by, &Answer::Cancel)
}

/// `approve`: grant a requested approval.
pub fn approve(args: &ApprovalArgs) -> Outcome {
    let scope = match args.scope.unwrap_or(ScopeArg::Once) {
        ScopeArg::Once => Scope::Once,
        ScopeArg::Run => Scope::Run,
        ScopeArg::Persistent => Scope::Persistent,
    };
    give(&args.by, &Answer::Approve { approval_id: args.approval.clone(), scope })
}

/// `deny`: deny a requested approval.
pub fn deny(args: &ApprovalArgs) -> Outcome {
    if args.scope.is_some() {
        return Err(Failure::new(EXIT_USAGE, "--scope is for approve, not deny"));
    }
    give(&args.by, &Answer::Deny { approval_id: args.approval.clone() })
}

fn json_arg(flag: &str, text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|error| {
        Failure::new(
            EXIT_USAGE,
            format_args!("{flag} is not JSON ({error}): quote a string as '\"text\"'"),
        )
    })
}

/// Gives `answer` and prints what became of it.
fn give(by: &AnswerBy, answer: &Answer) -> Outcome {
    if by.name.as_deref().is_some_and(|name| name.trim().is_empty()) {
        return Err(Failure::new(EXIT_USAGE, "--as is empty: name who answers"));
    }
    require_store(&by.dir)?;
    let operator = Operator::named_or_current(by.name.clone(), by.note.clone());
    let answered = answer::answer(&by.dir, &by.task, answer, &operator)
        .map_err(|error| answer_failure(&error))?;
    let command = answer.command();
    let text = match (answered, by.json) {
        (Answered::Recorded { seq, revision }, true) => format!(
            "{}\n",
            serde_json::json!({"command": command, "task": by.task, "recorded": true,
                "seq": seq, "revision": revision, "by": operator.name})
        ),
        (Answered::Already { seq }, true) => format!(
            "{}\n",
            serde_json::json!({"command": command, "task": by.task, "recorded": false,
                "seq": seq, "by": operator.name})
        ),
        (Answered::Recorded { seq, .. }, false) => {
            format!("{command}: recorded at seq {seq} for task {} by {}\n", by.task, operator.name)
        }
        (Answered::Already { seq }, false) => format!(
            "{command}: already recorded at seq {seq} for task {}: nothing written\n",
            by.task
        ),
    };
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// An answer not taken: exit 3 for damaged data, else 1, with the library's message.
fn answer_failure(error: &AnswerError) -> Failure {
    let exit = match error {
        AnswerError::Open(factlog::client::served::OpenError::Store(e))
            if e.is_damaged_or_refused_data() =>
        {
            crate::EXIT_DAMAGED
        }
        _ => EXIT_FAILURE,
    };
    Failure::new(exit, error)
}
