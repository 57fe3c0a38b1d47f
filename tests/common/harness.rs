//! Helpers shared by the `harness_*` tests: stores with a fixed clock (in a temporary
//! directory or on the simulated file system), builders for the bodies the tests append,
//! reading a store's events back, folding events into a fresh state, walking a directory's
//! raw bytes, and a tiny deterministic generator.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use factlog::fs::sim::{CrashModel, SimFs};
use factlog::harness::event::{
    ApprovalGrant, ApprovalRequest, AssistantMessage, Contract, Effect, Phase, RequestedCall, Risk,
    Scope, Signal, StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart, UserMessage,
};
use factlog::harness::{Body, Event, EventType, RequestKey, State, apply};
use factlog::{Appended, Error, ErrorKind, Options, Seq, Store, StoreOptions};
use serde_json::Value;

/// The time every test store stamps its events with: 2023-11-14T22:13:20Z.
pub const NOW_US: u64 = 1_700_000_000_000_000;

/// The store directory inside a simulated machine.
pub const SIM_DIR: &str = "/store";

/// The fixed clock of every test store.
pub fn fixed_clock() -> u64 {
    NOW_US
}

/// Store options with the fixed clock and 1 MiB segments (the default 32 MiB segment and
/// its zero-filled, synced preallocation would make every open of a test store slow).
pub fn options() -> StoreOptions {
    StoreOptions::new().clock(fixed_clock).log(Options::new().segment_bytes(1024 * 1024))
}

/// Opens the store in `dir` with [`options`].
pub fn open(dir: &Path) -> Store {
    Store::open(dir, options()).expect("open the store")
}

/// Store options on the simulated file system `fs`: the fixed clock, small segments (so the
/// simulated machine does not hold 32 MiB preallocations) and no background threads (so
/// the sequence of I/O operations is deterministic and a `Buffered` event stays in the
/// writer's buffer until something flushes it).
pub fn sim_options(fs: &SimFs) -> StoreOptions {
    options().log(sim_log_options(fs))
}

/// The log options of [`sim_options`].
pub fn sim_log_options(fs: &SimFs) -> Options {
    Options::new()
        .segment_bytes(64 * 1024)
        .buffer_bytes(16 * 1024)
        .background_threads(false)
        .fs(Arc::new(fs.clone()))
}

/// Opens the store in [`SIM_DIR`] on `fs`.
pub fn open_sim(fs: &SimFs) -> factlog::Result<Store> {
    Store::open(SIM_DIR, sim_options(fs))
}

/// Crashes the simulated machine under the open `store` and returns the machine after a
/// reboot under `model`: the store is dropped while the machine is down, so nothing it
/// would write on the way out reaches the disk.
pub fn crash(fs: &SimFs, store: Store, model: CrashModel) -> SimFs {
    fs.halt();
    drop(store);
    fs.reboot(model, 7)
}

/// The sequence number and revision of a written append; panics on a duplicate.
#[track_caller]
pub fn written(appended: Appended) -> (Seq, u64) {
    match appended {
        Appended::Written { seq, revision } => (seq, revision),
        Appended::Duplicate { .. } => panic!("expected a write, got {appended:?}"),
    }
}

/// Appends `body` to task `task` of `store` and returns its sequence number.
#[track_caller]
pub fn append(store: &Store, task: &str, body: Body) -> Seq {
    let appended = store.task(task).expect("task").append(body.clone());
    match appended {
        Ok(appended) => written(appended).0,
        Err(e) => panic!("appending {body:?} to {task}: {e}"),
    }
}

/// Every event of the store, decoded, in log order.
pub fn events(store: &Store) -> Vec<Event> {
    store
        .events(Seq(1))
        .expect("read events")
        .collect::<factlog::Result<Vec<Event>>>()
        .expect("decode events")
}

/// The events of task `task`, in log order.
pub fn task_events(store: &Store, task: &str) -> Vec<Event> {
    events(store).into_iter().filter(|e| e.task.as_str() == task).collect()
}

/// The fold of `events` into a fresh state.
pub fn fold<'a>(events: impl IntoIterator<Item = &'a Event>) -> State {
    let mut state = State::default();
    for event in events {
        apply(&mut state, event);
    }
    state
}

/// The type names of `events`, in order.
pub fn type_names(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.body.type_name()).collect()
}

/// The last sequence number of the store's log (0 when empty).
pub fn last_seq(store: &Store) -> u64 {
    store.log().last_seq().map_or(0, |s| s.0)
}

/// Every regular file under `dir`, recursively, with its raw bytes, sorted by path.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).expect("read a directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read a file");
                out.push((path, bytes));
            }
        }
    }
    out.sort();
    out
}

/// True if `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The error of a failed result; panics on success.
#[track_caller]
pub fn err_of<T: std::fmt::Debug>(result: factlog::Result<T>) -> Error {
    match result {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(e) => e,
    }
}

/// True if `e` is an `InvalidEvent` for the type named `event_type`.
pub fn is_invalid_event(e: &Error, event_type: &str) -> bool {
    matches!(e.kind(), ErrorKind::InvalidEvent { event_type: t, .. } if t == event_type)
}

/// A tiny deterministic generator (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A number from the environment variable `name`, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

// Body builders.

/// `task/contract` with `goal` and `risk`.
pub fn contract(goal: &str, risk: Risk) -> Body {
    Body::Contract(Contract { goal: goal.to_owned(), risk, ..Default::default() })
}

/// `task/phase`.
pub fn phase(name: &str) -> Body {
    Body::Phase(Phase { phase: name.to_owned(), ..Default::default() })
}

/// `turn/start`.
pub fn turn_start() -> Body {
    Body::TurnStart(TurnStart::default())
}

/// `turn/end`, completed.
pub fn turn_end() -> Body {
    Body::TurnEnd(TurnEnd::default())
}

/// `step/start`.
pub fn step_start() -> Body {
    Body::StepStart(StepStart::default())
}

/// `step/end`, completed.
pub fn step_end() -> Body {
    Body::StepEnd(StepEnd::default())
}

/// `user/message`.
pub fn user(text: &str) -> Body {
    Body::UserMessage(UserMessage { text: text.to_owned(), ..Default::default() })
}

/// `assistant/message` asking for the calls `(call id, tool)`.
pub fn assistant(text: &str, calls: &[(&str, &str)]) -> Body {
    Body::AssistantMessage(AssistantMessage {
        text: text.to_owned(),
        tool_calls: calls
            .iter()
            .map(|(id, tool)| RequestedCall {
                call_id: (*id).into(),
                tool: (*tool).to_owned(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

/// A `tool/call` body of `call_id` running `tool` with `effect`, without key or arguments.
pub fn call_body(call_id: &str, tool: &str, effect: Effect) -> ToolCall {
    ToolCall { call_id: call_id.into(), tool: tool.to_owned(), effect, ..Default::default() }
}

/// `tool/call` of `call_id` running `tool` with `effect` and an optional request key.
pub fn call(call_id: &str, tool: &str, effect: Effect, key: Option<&RequestKey>) -> Body {
    Body::ToolCall(ToolCall { request_key: key.cloned(), ..call_body(call_id, tool, effect) })
}

/// `tool/call` of `call_id` authorised by approval `approval`.
pub fn approved_call(call_id: &str, effect: Effect, approval: &str) -> Body {
    Body::ToolCall(ToolCall {
        approval_id: Some(approval.into()),
        ..call_body(call_id, "send_mail", effect)
    })
}

/// `tool/result` of `call_id` with an optional receipt.
pub fn result(call_id: &str, receipt: Option<Value>) -> Body {
    Body::ToolResult(ToolResult { call_id: call_id.into(), receipt, ..Default::default() })
}

/// `approval/request` of `id`.
pub fn approval_request(id: &str) -> Body {
    Body::ApprovalRequest(ApprovalRequest { approval_id: id.into(), ..Default::default() })
}

/// `approval/grant` of `id` with `scope` and an optional end of validity.
pub fn grant(id: &str, scope: Scope, expires_at_us: Option<u64>) -> Body {
    Body::ApprovalGrant(ApprovalGrant {
        approval_id: id.into(),
        scope,
        expires_at_us,
        ..Default::default()
    })
}

/// `control/cancel`.
pub fn cancel() -> Body {
    Body::Cancel(Signal::default())
}

/// `control/resume`.
pub fn resume() -> Body {
    Body::Resume(Signal { reason: Some("user confirmed".to_owned()), ..Default::default() })
}

/// True for an event only recovery writes.
pub fn is_recovery_event(event: &Event) -> bool {
    event.body.event_type().is_some_and(EventType::is_recovery_only)
        || matches!(&event.body, Body::StepEnd(e) if e.repair)
        || matches!(&event.body, Body::TurnEnd(e) if e.repair)
}

/// Checks that the events of one task are protocol-valid after recovery: every dispatched
/// call has a `tool/result` or a `tool/outcome_unknown` after its latest dispatch, and no
/// turn or step is left open. Returns the first violation.
pub fn protocol_violation(events: &[Event]) -> Option<String> {
    use std::collections::BTreeMap;
    let mut open: BTreeMap<String, u64> = BTreeMap::new();
    let mut turn_open = false;
    let mut step_open = false;
    for event in events {
        match &event.body {
            Body::ToolCall(c) => {
                open.insert(c.call_id.0.clone(), event.seq.0);
            }
            Body::ToolResult(r) => {
                open.remove(&r.call_id.0);
            }
            Body::ToolOutcomeUnknown(u) => {
                open.remove(&u.call_id.0);
            }
            Body::TurnStart(_) => turn_open = true,
            Body::TurnEnd(_) => {
                turn_open = false;
                step_open = false;
            }
            Body::StepStart(_) => step_open = true,
            Body::StepEnd(_) => step_open = false,
            _ => {}
        }
    }
    if let Some((call, seq)) = open.iter().next() {
        return Some(format!("call {call} dispatched at seq {seq} has no result"));
    }
    if turn_open {
        return Some("a turn is still open".to_owned());
    }
    if step_open {
        return Some("a step is still open".to_owned());
    }
    None
}

/// One turn of task t1 with 100 streamed deltas and a read-only tool call, enough that a few
/// turns roll 16 KiB segments (for tests of reclaiming and purging).
pub fn streamed_turn(store: &Store, n: usize) {
    let task = store.task("t1").expect("task");
    task.append(Body::TurnStart(TurnStart::default())).expect("append");
    task.append(Body::UserMessage(UserMessage { text: format!("turn {n}"), ..Default::default() }))
        .expect("append");
    for i in 0..100 {
        task.delta(&format!("token {i} of turn {n}")).expect("delta");
    }
    let call_id = format!("c{n}");
    task.append(Body::ToolCall(ToolCall {
        call_id: call_id.as_str().into(),
        tool: "fetch".into(),
        effect: Effect::ReadOnly,
        ..Default::default()
    }))
    .expect("append");
    task.append(Body::ToolResult(ToolResult {
        call_id: call_id.as_str().into(),
        receipt: Some(serde_json::json!({ "n": n })),
        ..Default::default()
    }))
    .expect("append");
    task.append(Body::TurnEnd(TurnEnd::default())).expect("append");
}
