//! The operator's view of a store (`format-spec/events.md`, "Operator answers"): which tasks
//! wait for a person and for what, read from the folded state alone (no scan of the log), and
//! the events that carry a person's answer.
//!
//! A task waits for a person when its state says so: a restart left it waiting for a
//! confirmation, a call's outcome is unknown and blocks its side effects
//! ([`crate::harness::check::unresolved_calls`], the rule every append obeys), an approval
//! was requested and not answered, or it is paused. An answer is one event of an existing
//! type (or `tool/not_run`) that carries an [`OperatorMark`]: who answered, their note, and a
//! key derived from the answer itself, so that the same command repeated finds its answer
//! recorded and writes nothing. Whether there is anything to answer is checked by the store
//! under the task's lock, as every rule (`harness/check.rs`); the doors that take a person's
//! answer to a store, embedded or served, are in `crate::client::answer`.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::harness::check::unresolved_calls;
use crate::harness::event::{
    ApprovalDeny, ApprovalGrant, Body, OperatorMark, Scope, Signal, ToolNotRun, ToolResult,
};
use crate::harness::ids::{ApprovalId, CallId, TaskId};
use crate::harness::request_key::canonical_json;
use crate::harness::state::{ApprovalStatus, State, TaskState};

/// Why a task waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A restart left a high-risk task waiting for a `control/resume`.
    NeedsConfirmation,
    /// A call's outcome is unknown, and it blocks the task's side effects.
    OutcomeUnknown,
    /// An approval was requested and not answered.
    ApprovalPending,
    /// The task is paused.
    Paused,
}

impl Reason {
    /// The name used in JSON: `needs_confirmation`, `outcome_unknown`, `approval_pending`,
    /// `paused`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NeedsConfirmation => "needs_confirmation",
            Reason::OutcomeUnknown => "outcome_unknown",
            Reason::ApprovalPending => "approval_pending",
            Reason::Paused => "paused",
        }
    }
}

/// One thing a task waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attention {
    /// Why it waits.
    pub reason: Reason,
    /// The sequence number of the event the wait began with (0: not known, in a state read
    /// from a schema-1 snapshot).
    pub since_seq: u64,
    /// The call, for [`Reason::OutcomeUnknown`].
    pub call_id: Option<String>,
    /// The call's tool, for [`Reason::OutcomeUnknown`].
    pub tool: Option<String>,
    /// The plan recovery recorded for the call, for [`Reason::OutcomeUnknown`].
    pub plan: Option<String>,
    /// The approval, for [`Reason::ApprovalPending`].
    pub approval_id: Option<String>,
}

impl Attention {
    fn new(reason: Reason, since_seq: u64) -> Attention {
        Attention { reason, since_seq, call_id: None, tool: None, plan: None, approval_id: None }
    }

    /// The JSON of `factlog tasks --json` (`format-spec/schema/tasks-line.json`): `reason`,
    /// `since_seq`, and the fields of its reason.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut item = json!({ "reason": self.reason.as_str(), "since_seq": self.since_seq });
        let fields = [
            ("call_id", &self.call_id),
            ("tool", &self.tool),
            ("plan", &self.plan),
            ("approval_id", &self.approval_id),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                item[name] = Value::String(value.clone());
            }
        }
        item
    }
}

/// One task as the operator's list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSummary {
    /// The task.
    pub task: String,
    /// Its current phase, if one was recorded.
    pub phase: Option<String>,
    /// Its revision: the count of its events.
    pub revision: u64,
    /// The sequence number of its last event.
    pub last_seq: u64,
    /// The append time of its last event, microseconds since the Unix epoch (0: not known).
    pub last_time_us: u64,
    /// What it waits for, if anything: confirmation first, then calls, approvals, a pause.
    pub attention: Vec<Attention>,
}

impl TaskSummary {
    /// The sequence number at which its oldest wait began, if it waits.
    #[must_use]
    pub fn waiting_since(&self) -> Option<u64> {
        self.attention.iter().map(|a| a.since_seq).min()
    }
}

/// What task `id`, whose folded state is `task`, shows in the operator's list.
#[must_use]
pub fn summarize(id: &TaskId, task: &TaskState) -> TaskSummary {
    let control = &task.control;
    let mut attention = Vec::new();
    if control.needs_confirmation {
        let since = control.last_recovery.as_ref().map_or(0, |r| r.seq);
        attention.push(Attention::new(Reason::NeedsConfirmation, since));
    }
    for call in unresolved_calls(task, None) {
        let since = task
            .session
            .calls
            .get(call.call_id.as_str())
            .map_or(0, |c| if c.unknown_seq > 0 { c.unknown_seq } else { c.dispatched_seq });
        attention.push(Attention {
            call_id: Some(call.call_id),
            tool: Some(call.tool),
            plan: Some(call.plan),
            ..Attention::new(Reason::OutcomeUnknown, since)
        });
    }
    for (approval_id, approval) in &control.approvals {
        if approval.status == ApprovalStatus::Requested {
            attention.push(Attention {
                approval_id: Some(approval_id.0.clone()),
                ..Attention::new(Reason::ApprovalPending, approval.requested_seq)
            });
        }
    }
    if control.paused {
        attention.push(Attention::new(Reason::Paused, control.paused_seq));
    }
    TaskSummary {
        task: id.0.clone(),
        phase: task.task.phase.clone(),
        revision: task.revision,
        last_seq: task.last_seq,
        last_time_us: task.last_time_us,
        attention,
    }
}

/// Every task of `state`, in task id order.
#[must_use]
pub fn summaries(state: &State) -> Vec<TaskSummary> {
    state.tasks.iter().map(|(id, task)| summarize(id, task)).collect()
}

/// The tasks of `state` that wait for a person, the oldest wait first (ties in task id
/// order).
#[must_use]
pub fn attention(state: &State) -> Vec<TaskSummary> {
    let mut waiting: Vec<TaskSummary> =
        summaries(state).into_iter().filter(|s| !s.attention.is_empty()).collect();
    waiting.sort_by_key(|s| s.waiting_since().unwrap_or(0));
    waiting
}

/// Who answers, and what they add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// Their name (`--as`).
    pub name: String,
    /// Their note (`--note`).
    pub note: Option<String>,
}

impl Operator {
    /// `name`, or when `None` the user running this process (`$USER`, `$LOGNAME`, else
    /// `uid N`), with `note`.
    #[must_use]
    pub fn named_or_current(name: Option<String>, note: Option<String>) -> Operator {
        let name = name.unwrap_or_else(|| {
            ["USER", "LOGNAME"]
                .iter()
                .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
                .unwrap_or_else(|| format!("uid {}", rustix::process::getuid().as_raw()))
        });
        Operator { name, note }
    }
}

/// A person's answer to what a task waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The call whose outcome was unknown ran, with this result: a `tool/result` (outcome
    /// `ok`) with `output` and, if given, `receipt`.
    Resolve {
        /// The call.
        call_id: String,
        /// What the call returned.
        output: Value,
        /// What proves its effect, if known.
        receipt: Option<Value>,
    },
    /// The call whose outcome was unknown never ran: a `tool/not_run`.
    NotRun {
        /// The call.
        call_id: String,
    },
    /// The confirmation a restarted high-risk task (or a paused one) waits for: a
    /// `control/resume`.
    Confirm,
    /// The requested approval is granted: an `approval/grant` with `scope`.
    Approve {
        /// The approval.
        approval_id: String,
        /// How long it authorises calls.
        scope: Scope,
    },
    /// The requested approval is denied: an `approval/deny`.
    Deny {
        /// The approval.
        approval_id: String,
    },
    /// Cancel the running turn: a `control/cancel`.
    Cancel,
}

impl Answer {
    /// The command that gives this answer: `resolve`, `confirm`, `approve`, `deny`, `cancel`.
    #[must_use]
    pub fn command(&self) -> &'static str {
        match self {
            Answer::Resolve { .. } | Answer::NotRun { .. } => "resolve",
            Answer::Confirm => "confirm",
            Answer::Approve { .. } => "approve",
            Answer::Deny { .. } => "deny",
            Answer::Cancel => "cancel",
        }
    }

    /// The answer's key for task `task`: `op-` and 32 hex digits of the SHA-256 of the
    /// canonical JSON of the task and the answer (not of who gives it: the same answer given
    /// twice, by anyone, is one answer). A `confirm` or `cancel` has no target of its own:
    /// `anchor` names the wait it answers ([`plan`]), so that a later wait of the same kind
    /// takes a new answer while a repeated command finds the first one.
    #[must_use]
    pub fn key(&self, task: &str, anchor: u64) -> String {
        let answer = match self {
            Answer::Resolve { call_id, output, receipt } => {
                json!({"resolve": call_id, "output": output, "receipt": receipt})
            }
            Answer::NotRun { call_id } => json!({ "not_run": call_id }),
            Answer::Confirm => json!({ "confirm": anchor }),
            Answer::Approve { approval_id, scope } => {
                json!({"approve": approval_id, "scope": scope})
            }
            Answer::Deny { approval_id } => json!({ "deny": approval_id }),
            Answer::Cancel => json!({ "cancel": anchor }),
        };
        let canonical = canonical_json(&json!({ "task": task, "answer": answer }));
        let digest = Sha256::digest(canonical.as_bytes());
        let mut key = String::with_capacity(35);
        key.push_str("op-");
        for byte in &digest[..16] {
            key.push_str(&format!("{byte:02x}"));
        }
        key
    }

    /// The event that carries this answer, marked with `mark`.
    #[must_use]
    pub fn body(&self, mark: OperatorMark) -> Body {
        match self {
            Answer::Resolve { call_id, output, receipt } => Body::ToolResult(ToolResult {
                call_id: CallId(call_id.clone()),
                output: Some(output.clone()),
                receipt: receipt.clone(),
                operator: Some(mark),
                ..ToolResult::default()
            }),
            Answer::NotRun { call_id } => Body::ToolNotRun(ToolNotRun {
                call_id: CallId(call_id.clone()),
                operator: mark,
                ..ToolNotRun::default()
            }),
            Answer::Confirm => Body::Resume(Signal { operator: Some(mark), ..Signal::default() }),
            Answer::Approve { approval_id, scope } => Body::ApprovalGrant(ApprovalGrant {
                approval_id: ApprovalId(approval_id.clone()),
                scope: *scope,
                operator: Some(mark),
                ..ApprovalGrant::default()
            }),
            Answer::Deny { approval_id } => Body::ApprovalDeny(ApprovalDeny {
                approval_id: ApprovalId(approval_id.clone()),
                operator: Some(mark),
                ..ApprovalDeny::default()
            }),
            Answer::Cancel => Body::Cancel(Signal { operator: Some(mark), ..Signal::default() }),
        }
    }
}

/// What makes `body`, a person's answer to a task whose folded state is `state`, authority of
/// the task's holder (`format-spec/harness-recovery.md`, "Holders"): the confirmation a
/// restarted task waits for, a cancel of its running turn, a `once` or `run` grant. Such an
/// answer counts only in the holder epoch it is given in, so it must be given while the harness
/// that holds the task holds it; `None` for the facts that last (a result, a call that never
/// ran, a denial, a persistent grant, the resume of a paused task).
#[must_use]
pub fn holder_authority(body: &Body, state: &TaskState) -> Option<&'static str> {
    match body {
        Body::Resume(_) if state.control.needs_confirmation => Some("a confirmation"),
        Body::Cancel(_) if state.execution.open_turn.is_some() => Some("a cancel"),
        Body::ApprovalGrant(g) if matches!(g.scope, Scope::Once | Scope::Run) => {
            Some("a once or run grant")
        }
        _ => None,
    }
}

/// What to do about `answer` to task `task`, whose folded state is `state` (`None`: the task
/// has no event): the event to append with a compare-and-set on the state's revision, or the
/// sequence number of the event that already carries this very answer.
#[derive(Debug, Clone, PartialEq)]
#[expect(clippy::large_enum_variant, reason = "one per answer, never stored")]
pub enum Planned {
    /// Append `body` expecting revision `revision`.
    Append {
        /// The event.
        body: Body,
        /// The task's revision it was decided on.
        revision: u64,
    },
    /// This answer was recorded already, at `seq`: write nothing.
    Already {
        /// The event that carries it.
        seq: u64,
    },
}

/// Plans `answer` by `operator` to task `task`, whose folded state is `state`. The key of a
/// `confirm` names the wait it answers (the seq of the `recovery/restored` that asked for a
/// confirmation, else of the `control/pause`), that of a `cancel` the number of turns started,
/// so the same command repeated maps to the same key as long as the task waits for nothing
/// newer (a confirmation repeated after it resumed a pause finds nothing to answer instead).
#[must_use]
pub fn plan(task: &str, state: &TaskState, answer: &Answer, operator: &Operator) -> Planned {
    let anchor = match answer {
        // The restart the confirmation answers (also once answered, so that the command
        // repeated finds it), else the pause it resumes.
        Answer::Confirm => match (&state.control.last_recovery, state.control.paused) {
            (Some(restored), _) if state.control.needs_confirmation => restored.seq,
            (_, true) => state.control.paused_seq,
            (Some(restored), false) => restored.seq,
            (None, false) => 0,
        },
        Answer::Cancel => state.execution.turns,
        _ => 0,
    };
    let key = answer.key(task, anchor);
    if let Some(&seq) = state.control.answers.get(&key) {
        return Planned::Already { seq };
    }
    let mark = OperatorMark {
        name: operator.name.clone(),
        note: operator.note.clone(),
        key,
        ..OperatorMark::default()
    };
    Planned::Append { body: answer.body(mark), revision: state.revision }
}
