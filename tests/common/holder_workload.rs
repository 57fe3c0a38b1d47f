//! A workload of harness events over three tasks run on the simulated file system by a chain
//! of holders (store handles), and the checker of what a new holder must see after it takes
//! each task over (`Store::task`), whatever crashes and restarts came before:
//! 1. no `once`/`run` approval is `Granted`; citing one granted by an earlier holder in a
//!    `tool/call` is refused (`ApprovalRefused` for a read-only call; `ApprovalRefused`,
//!    `NeedsConfirmation` or `NeedsRecovery` for one with side effects) and writes nothing; the
//!    log holds an `approval/expired` after each acknowledged grant that no call consumed;
//!    acknowledged `persistent` grants stay granted;
//! 2. no call is `Dispatched`: every acknowledged call is completed or has an unknown outcome,
//!    and one without a `tool/result` in the log has an unknown outcome;
//! 3. no cancel is pending; the log answers each acknowledged cancel (`control/expired` or a
//!    later `turn/end`);
//! 4. a task whose contract is `risk: high` (every acknowledged one is) needs confirmation: a
//!    side-effecting call is refused with `NeedsConfirmation` until a `control/resume`;
//! 5. a fresh side-effecting call is refused with `NeedsRecovery`, naming exactly the
//!    unresolved unknown outcomes that are not read-only, while there are any.
//!
//! A scenario crashes the first holder at a chosen I/O operation (or lets it close cleanly),
//! checks a new holder on a copy of the disk, then runs a second holder that confirms the
//! high-risk tasks (`control/resume`), checks again and appends more, crashed at a second
//! operation (which may fall in its open or its takeover's own repair batch), and checks a
//! third holder. Only appends that returned are acknowledged; authority is judged from the
//! state after takeover, never assumed. Shared by `tests/crash_sweep_holders.rs` and the
//! `holder_crash` fuzz target.

#![allow(dead_code, reason = "each user takes a different subset")]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use factlog::fs::sim::{CrashModel, SimFs};
use factlog::harness::event::{
    ApprovalGrant, ApprovalRequest, Contract, Effect, Risk, Scope, Signal, StepEnd, StepStart,
    ToolCall, ToolResult, TurnEnd, TurnStart,
};
use factlog::harness::state::{ApprovalStatus, CallStatus};
use factlog::harness::{Body, Event, RequestKey, TaskState};
use factlog::{Appended, Durability, Error, ErrorKind, Options, Seq, Store, StoreOptions};

/// The store directory inside the simulated machine.
pub const DIR: &str = "/store";

/// The tasks of every workload.
pub const TASKS: [&str; 3] = ["t1", "t2", "t3"];

fn fixed_clock() -> u64 {
    1_700_000_000_000_000
}

/// Store options on `fs`: a fixed clock, small segments and buffer so that workloads roll and
/// flush, frequent snapshots so that holders also open from one, and no background threads so
/// that the sequence of I/O operations is deterministic.
pub fn options(fs: &SimFs) -> StoreOptions {
    StoreOptions::new().clock(fixed_clock).snapshot_every_events(48).log(
        Options::new()
            .segment_bytes(16 * 1024)
            .buffer_bytes(4096)
            .background_threads(false)
            .fs(Arc::new(fs.clone())),
    )
}

/// One operation of a workload. Tasks are indexes into [`TASKS`]; call `n` of a task is
/// `c{n}`, approval `n` is `a{n}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `task/contract` (the first operation on each task).
    Contract {
        task: usize,
        high: bool,
    },
    TurnStart(usize),
    TurnEnd(usize),
    StepStart(usize),
    StepEnd(usize),
    /// `approval/request`.
    Request {
        task: usize,
        approval: u32,
    },
    /// `approval/grant`; each approval is granted at most once in a workload.
    Grant {
        task: usize,
        approval: u32,
        scope: Scope,
    },
    /// `control/cancel`.
    Cancel(usize),
    /// `tool/call`; the tool is named after the effect, the key (if any) after the call.
    Call {
        task: usize,
        call: u32,
        effect: Effect,
        key: bool,
        approval: Option<u32>,
    },
    /// `tool/result`.
    Result {
        task: usize,
        call: u32,
    },
    /// `assistant/delta`.
    Delta(usize),
    /// `control/resume`.
    Resume(usize),
    /// A synced flush.
    Flush,
    /// Close the store cleanly and open it again: a new holder.
    Reopen,
}

/// A source of choices: a seeded generator for the sweep, fuzz bytes for the target.
pub trait Choices {
    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64;
}

/// A tiny deterministic generator (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Choices for Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const EFFECTS: [Effect; 4] =
    [Effect::ReadOnly, Effect::Idempotent, Effect::Queryable, Effect::Unsafe];
const SCOPES: [Scope; 3] = [Scope::Once, Scope::Run, Scope::Persistent];

/// Builds workloads that are mostly protocol-valid (so that they reach deep states) with some
/// refused operations mixed in. One generator continues across the phases of a scenario, so
/// that the second holder retries, completes and cites what the first one left.
#[derive(Debug, Clone, Default)]
pub struct Gen {
    contracted: [bool; 3],
    turn_open: [bool; 3],
    step_open: [bool; 3],
    /// Per task: `(call, effect, key)` of each dispatched call.
    calls: [Vec<(u32, Effect, bool)>; 3],
    /// Per task: approvals granted.
    granted: [Vec<u32>; 3],
    next_call: u32,
    next_approval: u32,
}

impl Gen {
    /// The next operations (one to three), chosen by `c`.
    pub fn next(&mut self, c: &mut impl Choices) -> Vec<Op> {
        let task = c.below(3) as usize;
        let mut out = Vec::new();
        if !self.contracted[task] {
            self.contracted[task] = true;
            let high = task == 1 || (task == 2 && c.below(2) == 0);
            out.push(Op::Contract { task, high });
        }
        match c.below(100) {
            0..=7 => {
                self.turn_open[task] = !self.turn_open[task];
                self.step_open[task] = false;
                out.push(if self.turn_open[task] {
                    Op::TurnStart(task)
                } else {
                    Op::TurnEnd(task)
                });
            }
            8..=13 => {
                self.step_open[task] = !self.step_open[task];
                out.push(if self.step_open[task] {
                    Op::StepStart(task)
                } else {
                    Op::StepEnd(task)
                });
            }
            14..=25 => {
                let approval = self.next_approval;
                self.next_approval += 1;
                if c.below(2) == 0 {
                    out.push(Op::Request { task, approval });
                }
                let scope = SCOPES[c.below(3) as usize];
                self.granted[task].push(approval);
                out.push(Op::Grant { task, approval, scope });
            }
            26..=30 => out.push(Op::Cancel(task)),
            31..=58 => out.push(self.call(task, c)),
            59..=74 => {
                let calls = &self.calls[task];
                if calls.is_empty() {
                    out.push(Op::Delta(task));
                } else {
                    let (call, _, _) = calls[c.below(calls.len() as u64) as usize];
                    out.push(Op::Result { task, call });
                }
            }
            75..=84 => out.push(Op::Delta(task)),
            85..=89 => out.push(Op::Resume(task)),
            90..=95 => out.push(Op::Flush),
            _ => out.push(Op::Reopen),
        }
        out
    }

    fn call(&mut self, task: usize, c: &mut impl Choices) -> Op {
        let approval = match self.granted[task].len() as u64 {
            0 => None,
            n if c.below(5) < 2 => Some(self.granted[task][c.below(n) as usize]),
            _ => None,
        };
        let calls = &self.calls[task];
        if !calls.is_empty() && c.below(10) < 3 {
            // A retry of the same request (it resolves an unknown outcome), or now and then a
            // reuse of its id for another request (`CallIdReused`).
            let (call, mut effect, key) = calls[c.below(calls.len() as u64) as usize];
            if c.below(10) == 0 {
                effect = EFFECTS[c.below(4) as usize];
            }
            return Op::Call { task, call, effect, key, approval };
        }
        let call = self.next_call;
        self.next_call += 1;
        let effect = EFFECTS[c.below(4) as usize];
        let key = c.below(2) == 0;
        self.calls[task].push((call, effect, key));
        Op::Call { task, call, effect, key, approval }
    }

    /// `count` operations or more (a step may give up to three).
    pub fn ops(&mut self, c: &mut impl Choices, count: usize) -> Vec<Op> {
        let mut out = Vec::new();
        while out.len() < count {
            out.extend(self.next(c));
        }
        out
    }
}

/// What the holders were promised: appends that returned `Written`. Every type recorded here
/// is `Synced` by default, so each must survive any crash after it returned.
#[derive(Debug, Clone, Default)]
pub struct Acks {
    /// Task index -> whether its acknowledged contract is high-risk.
    pub contracts: BTreeMap<usize, bool>,
    /// `(task, approval, scope, seq)` of each acknowledged grant.
    pub grants: Vec<(usize, u32, Scope, u64)>,
    /// `(task, call, seq)` of each acknowledged dispatch.
    pub calls: Vec<(usize, u32, u64)>,
    /// `(task, seq)` of each acknowledged cancel.
    pub cancels: Vec<(usize, u64)>,
    /// Takeovers checked (for the tests' coverage figures).
    pub checks: u64,
}

fn call_id(call: u32) -> String {
    format!("c{call}")
}

fn approval_id(approval: u32) -> String {
    format!("a{approval}")
}

fn tool_of(effect: Effect) -> &'static str {
    match effect {
        Effect::ReadOnly => "fetch",
        Effect::Idempotent => "put",
        Effect::Queryable => "order",
        Effect::Unsafe => "send_mail",
    }
}

fn body_of(op: &Op) -> Option<(usize, Body)> {
    let body = match *op {
        Op::Contract { task, high } => {
            let risk = if high { Risk::High } else { Risk::Low };
            (task, Body::Contract(Contract { goal: "g".into(), risk, ..Default::default() }))
        }
        Op::TurnStart(task) => (task, Body::TurnStart(TurnStart::default())),
        Op::TurnEnd(task) => (task, Body::TurnEnd(TurnEnd::default())),
        Op::StepStart(task) => (task, Body::StepStart(StepStart::default())),
        Op::StepEnd(task) => (task, Body::StepEnd(StepEnd::default())),
        Op::Request { task, approval } => (
            task,
            Body::ApprovalRequest(ApprovalRequest {
                approval_id: approval_id(approval).as_str().into(),
                ..Default::default()
            }),
        ),
        Op::Grant { task, approval, scope } => (
            task,
            Body::ApprovalGrant(ApprovalGrant {
                approval_id: approval_id(approval).as_str().into(),
                scope,
                ..Default::default()
            }),
        ),
        Op::Cancel(task) => (task, Body::Cancel(Signal::default())),
        Op::Call { task, call, effect, key, approval } => (
            task,
            Body::ToolCall(ToolCall {
                call_id: call_id(call).as_str().into(),
                tool: tool_of(effect).to_owned(),
                effect,
                request_key: key.then(|| RequestKey::from(format!("rk-{call}").as_str())),
                approval_id: approval.map(|a| approval_id(a).as_str().into()),
                ..Default::default()
            }),
        ),
        Op::Result { task, call } => (
            task,
            Body::ToolResult(ToolResult {
                call_id: call_id(call).as_str().into(),
                ..Default::default()
            }),
        ),
        Op::Resume(task) => (task, Body::Resume(Signal::default())),
        Op::Delta(_) | Op::Flush | Op::Reopen => return None,
    };
    Some(body)
}

/// Why a holder stopped early: the machine went down (expected at a crash point) or an
/// invariant failed.
enum Stop {
    Down,
    Violation(String),
}

/// `Stop::Down` if the machine is down (any error is then the crash's), else the violation.
fn stop(fs: &SimFs, what: String) -> Stop {
    if fs.is_down() { Stop::Down } else { Stop::Violation(what) }
}

/// One holder: opens the store in [`DIR`] on `fs`; if `confirm`, checks every task as a new
/// holder and then confirms each high-risk one (`control/resume`, checking the gates again);
/// then runs `ops` and closes. Stops quietly where the machine goes down; `Err` is a
/// violation.
pub fn run(fs: &SimFs, ops: &[Op], acks: &mut Acks, confirm: bool) -> Result<(), String> {
    match run_inner(fs, ops, acks, confirm) {
        Ok(()) | Err(Stop::Down) => Ok(()),
        Err(Stop::Violation(v)) => Err(v),
    }
}

fn run_inner(fs: &SimFs, ops: &[Op], acks: &mut Acks, confirm: bool) -> Result<(), Stop> {
    let mut store = Store::open(DIR, options(fs)).map_err(|e| stop(fs, format!("open: {e}")))?;
    if confirm {
        check_holder(&store, acks, true).map_err(|v| stop(fs, v))?;
    }
    for op in ops {
        match op {
            Op::Flush => {
                store.flush(Durability::Synced).map_err(|e| stop(fs, format!("flush: {e}")))?;
            }
            Op::Reopen => {
                store.close().map_err(|e| stop(fs, format!("close: {e}")))?;
                store = Store::open(DIR, options(fs))
                    .map_err(|e| stop(fs, format!("reopen after a clean close: {e}")))?;
                // A clean close is a restart too: the new holder must not inherit authority.
                check_holder(&store, acks, false).map_err(|v| stop(fs, v))?;
            }
            Op::Delta(task) => {
                let handle = store.task(TASKS[*task]).map_err(|e| stop(fs, e.to_string()))?;
                if handle.delta("tok").is_err() && fs.is_down() {
                    return Err(Stop::Down);
                }
            }
            op => {
                let (task, body) = body_of(op).expect("an event operation");
                let handle = store.task(TASKS[task]).map_err(|e| stop(fs, e.to_string()))?;
                match handle.append(body) {
                    Ok(Appended::Written { seq, .. }) => acknowledge(acks, op, seq.0),
                    Ok(Appended::Duplicate { .. }) => {}
                    // A refusal (the workload is random) writes nothing; a failure is a crash.
                    Err(_) if fs.is_down() => return Err(Stop::Down),
                    Err(_) => {}
                }
            }
        }
    }
    store.close().map_err(|e| stop(fs, format!("close: {e}")))
}

fn acknowledge(acks: &mut Acks, op: &Op, seq: u64) {
    match *op {
        Op::Contract { task, high } => {
            acks.contracts.insert(task, high);
        }
        Op::Grant { task, approval, scope } => acks.grants.push((task, approval, scope, seq)),
        Op::Call { task, call, .. } => acks.calls.push((task, call, seq)),
        Op::Cancel(task) => acks.cancels.push((task, seq)),
        _ => {}
    }
}

/// Opens the store on `fs` as a new holder and checks every task ([`check_holder`]).
pub fn check(fs: &SimFs, acks: &mut Acks) -> Result<(), String> {
    let store = Store::open(DIR, options(fs)).map_err(|e| format!("open: {e}"))?;
    check_holder(&store, acks, false)?;
    acks.checks += 1;
    store.close().map_err(|e| format!("close: {e}"))
}

/// Checks invariants 1-5 on `store`, a holder that has not written yet: takes a handle on
/// every task (its takeover) and probes its gates with calls that must be refused. With
/// `confirm`, then records a `control/resume` on each task that needs confirmation and
/// checks the gates that remain.
pub fn check_holder(store: &Store, acks: &Acks, confirm: bool) -> Result<(), String> {
    let present: BTreeSet<String> = store.task_ids().into_iter().map(|t| t.0).collect();
    for task in acks.contracts.keys() {
        if !present.contains(TASKS[*task]) {
            return Err(format!("task {} with an acknowledged contract is gone", TASKS[*task]));
        }
    }
    let handles = present
        .iter()
        .map(|id| store.task(id).map_err(|e| format!("taking over {id}: {e}")))
        .collect::<Result<Vec<_>, String>>()?;
    let events: Vec<Event> = store
        .events(Seq(1))
        .map_err(|e| format!("read: {e}"))?
        .collect::<factlog::Result<Vec<Event>>>()
        .map_err(|e| format!("decode: {e}"))?;
    for handle in &handles {
        let id = handle.id().as_str();
        let index = TASKS.iter().position(|t| *t == id).ok_or(format!("unknown task {id}"))?;
        let task_events: Vec<&Event> = events.iter().filter(|e| e.task.as_str() == id).collect();
        let at = |what: &str| format!("task {id}: {what}");
        check_task(store, handle, index, &task_events, acks).map_err(|v| at(&v))?;
        if confirm && handle.state().control.needs_confirmation {
            match handle.append(Body::Resume(Signal::default())) {
                Ok(Appended::Written { .. }) => {}
                other => return Err(at(&format!("control/resume: {other:?}"))),
            }
            let state = handle.state();
            if state.control.needs_confirmation {
                return Err(at("control/resume left it needing confirmation"));
            }
            check_gates(store, handle, index, acks, &state).map_err(|v| at(&v))?;
        }
    }
    Ok(())
}

fn check_task(
    store: &Store,
    handle: &factlog::Task,
    index: usize,
    events: &[&Event],
    acks: &Acks,
) -> Result<(), String> {
    let state = handle.state();
    for (id, approval) in &state.control.approvals {
        if approval.status == ApprovalStatus::Granted && approval.scope != Some(Scope::Persistent) {
            return Err(format!(
                "approval {} ({:?}) of an earlier holder is still granted",
                id.0, approval.scope
            ));
        }
    }
    for (id, call) in &state.session.calls {
        if call.status == CallStatus::Dispatched {
            return Err(format!("call {} of an earlier holder is still dispatched", id.0));
        }
    }
    if !state.control.pending_cancels.is_empty() {
        return Err(format!("cancels still pending: {:?}", state.control.pending_cancels));
    }
    if acks.contracts.get(&index) == Some(&true) && state.task.risk != Risk::High {
        return Err("its acknowledged high-risk contract is lost".into());
    }
    if state.task.risk == Risk::High && !state.control.needs_confirmation {
        return Err("high-risk, taken over, and not waiting for confirmation".into());
    }
    for &(task, approval, scope, seq) in &acks.grants {
        if task != index {
            continue;
        }
        let id = approval_id(approval);
        let status = state.control.approvals.get(id.as_str()).map(|a| a.status);
        match scope {
            Scope::Persistent if status != Some(ApprovalStatus::Granted) => {
                return Err(format!("acknowledged persistent grant {id} is {status:?}"));
            }
            Scope::Persistent => {}
            Scope::Once | Scope::Run => {
                if !matches!(status, Some(ApprovalStatus::Expired | ApprovalStatus::Consumed)) {
                    return Err(format!("acknowledged {scope:?} grant {id} is {status:?}"));
                }
                let expired = events.iter().any(|e| {
                    e.seq.0 > seq
                        && matches!(&e.body, Body::ApprovalExpired(x) if x.approval_id.0 == id)
                });
                if status == Some(ApprovalStatus::Expired) && !expired {
                    return Err(format!("no approval/expired after acknowledged grant {id}"));
                }
            }
        }
    }
    for &(task, call, _) in &acks.calls {
        if task != index {
            continue;
        }
        let id = call_id(call);
        let Some(state_call) = state.session.calls.get(id.as_str()) else {
            return Err(format!("acknowledged call {id} is gone"));
        };
        let last_dispatch = events
            .iter()
            .filter(|e| matches!(&e.body, Body::ToolCall(c) if c.call_id.0 == id))
            .map(|e| e.seq.0)
            .max()
            .unwrap_or(0);
        let answered = events.iter().any(|e| {
            matches!(&e.body, Body::ToolResult(r) if r.call_id.0 == id)
                || (e.seq.0 > last_dispatch
                    && matches!(&e.body, Body::ToolOutcomeUnknown(u) if u.call_id.0 == id))
        });
        if !answered {
            return Err(format!("acknowledged call {id} has neither result nor unknown outcome"));
        }
        let has_result =
            events.iter().any(|e| matches!(&e.body, Body::ToolResult(r) if r.call_id.0 == id));
        if !has_result && state_call.status != CallStatus::OutcomeUnknown {
            return Err(format!("call {id} has no result but is {:?}", state_call.status));
        }
    }
    for &(task, seq) in &acks.cancels {
        if task != index {
            continue;
        }
        let answered = events.iter().any(|e| match &e.body {
            Body::SignalExpired(s) => s.signal_seq == seq,
            Body::TurnEnd(_) => e.seq.0 > seq,
            _ => false,
        });
        if !answered {
            return Err(format!("acknowledged cancel at seq {seq} neither expired nor answered"));
        }
    }
    check_gates(store, handle, index, acks, &state)
}

/// The unresolved unknown outcomes that are not read-only, in call-id order. Keys in these
/// workloads belong to one call id each, so no dispatch under another id resolves one.
fn unresolved(state: &TaskState) -> Vec<String> {
    state
        .session
        .calls
        .iter()
        .filter(|(_, c)| {
            c.status == CallStatus::OutcomeUnknown && c.effect != Some(Effect::ReadOnly)
        })
        .map(|(id, _)| id.0.clone())
        .collect()
}

/// Probes the gates of a task with calls that must be refused and write nothing: every
/// `once`/`run` approval of an earlier holder, cited by a read-only call and by a
/// side-effecting one, and a fresh side-effecting call while the task needs confirmation or
/// has unresolved unknown outcomes.
fn check_gates(
    store: &Store,
    handle: &factlog::Task,
    index: usize,
    acks: &Acks,
    state: &TaskState,
) -> Result<(), String> {
    let mut cited: BTreeSet<String> = state
        .control
        .approvals
        .iter()
        .filter(|(_, a)| a.scope != Some(Scope::Persistent))
        .map(|(id, _)| id.0.clone())
        .collect();
    cited.extend(
        acks.grants
            .iter()
            .filter(|g| g.0 == index && g.2 != Scope::Persistent)
            .map(|g| approval_id(g.1)),
    );
    let needs_confirmation = state.control.needs_confirmation;
    let unresolved = unresolved(state);
    for id in &cited {
        let refused = probe(store, handle, Effect::ReadOnly, Some(id))?;
        if !matches!(refused.kind(), ErrorKind::ApprovalRefused { .. }) {
            return Err(format!("a read-only call citing {id} was refused with {refused}"));
        }
        let refused = probe(store, handle, Effect::Unsafe, Some(id))?;
        let expected = match refused.kind() {
            ErrorKind::ApprovalRefused { .. } => !needs_confirmation && unresolved.is_empty(),
            ErrorKind::NeedsConfirmation { .. } => needs_confirmation,
            ErrorKind::NeedsRecovery { .. } => !needs_confirmation && !unresolved.is_empty(),
            _ => false,
        };
        if !expected {
            return Err(format!("a side-effecting call citing {id} was refused with {refused}"));
        }
    }
    if needs_confirmation {
        let refused = probe(store, handle, Effect::Idempotent, None)?;
        if !matches!(refused.kind(), ErrorKind::NeedsConfirmation { .. }) {
            return Err(format!("a side-effecting call before confirmation: {refused}"));
        }
    } else if !unresolved.is_empty() {
        let refused = probe(store, handle, Effect::Unsafe, None)?;
        match refused.kind() {
            ErrorKind::NeedsRecovery { calls, .. } => {
                let named: Vec<String> = calls.iter().map(|c| c.call_id.clone()).collect();
                if named != unresolved {
                    return Err(format!("NeedsRecovery names {named:?}, expected {unresolved:?}"));
                }
            }
            _ => return Err(format!("a side-effecting call past {unresolved:?}: {refused}")),
        }
    }
    Ok(())
}

/// Dispatches a fresh call with `effect` citing `approval` and returns its refusal; a call
/// that was written, or a refusal that wrote something, is a violation.
fn probe(
    store: &Store,
    handle: &factlog::Task,
    effect: Effect,
    approval: Option<&str>,
) -> Result<Error, String> {
    let before = (store.log().last_seq(), handle.revision());
    let body = Body::ToolCall(ToolCall {
        call_id: "probe".into(),
        tool: tool_of(effect).to_owned(),
        effect,
        approval_id: approval.map(Into::into),
        ..Default::default()
    });
    let outcome = handle.append(body);
    if (store.log().last_seq(), handle.revision()) != before {
        return Err(format!("a probe ({effect:?}, approval {approval:?}) wrote: {outcome:?}"));
    }
    match outcome {
        Ok(appended) => {
            Err(format!("a probe ({effect:?}, approval {approval:?}) passed: {appended:?}"))
        }
        Err(e) => Ok(e),
    }
}

/// One scenario: the first holder runs `ops` on a fresh machine crashed at operation
/// `crash_at` (`None`: it runs to the end and closes cleanly); after a reboot under `model`
/// a new holder is checked on a copy of the disk; then a second holder confirms the
/// high-risk tasks and runs `after`, crashed at operation `crash_again` counted from its
/// open (if any); after a second reboot a third holder is checked. Returns the I/O
/// operations of the first run, or the violation.
pub fn scenario(
    ops: &[Op],
    after: &[Op],
    crash_at: Option<u64>,
    crash_again: Option<u64>,
    model: CrashModel,
    seed: u64,
) -> Result<u64, String> {
    let mut acks = Acks::default();
    let fs = SimFs::new(seed);
    if let Some(at) = crash_at {
        fs.crash_at(at);
    }
    run(&fs, ops, &mut acks, false).map_err(|e| format!("first holder: {e}"))?;
    let total = fs.ops();
    let rebooted = fs.reboot(model, seed ^ 0x5EED);
    // The copy is the same disk: checking it leaves `rebooted` untouched for the second holder.
    check(&rebooted.reboot(CrashModel::ProcessCrash, 0), &mut acks)
        .map_err(|e| format!("after the first crash: {e}"))?;
    if let Some(at) = crash_again {
        rebooted.crash_at(rebooted.ops() + at);
    }
    run(&rebooted, after, &mut acks, true).map_err(|e| format!("second holder: {e}"))?;
    let again = rebooted.reboot(model, seed ^ 0xA9A1);
    check(&again, &mut acks).map_err(|e| format!("after the second crash: {e}"))?;
    Ok(total)
}

/// The I/O operations of the second holder of the uncrashed scenario: how far a second crash
/// point can reach.
pub fn second_holder_ops(ops: &[Op], after: &[Op], seed: u64) -> u64 {
    let mut acks = Acks::default();
    let fs = SimFs::new(seed);
    let _ = run(&fs, ops, &mut acks, false);
    let rebooted = fs.reboot(CrashModel::ProcessCrash, seed);
    let _ = run(&rebooted, after, &mut acks, true);
    rebooted.ops()
}
