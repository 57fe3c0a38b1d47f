//! The agent-session workload (`/work/shared/mission/workload.md`) as typed harness events,
//! the one workload of every bench and of `factlog bench`: per turn `turn/start`, a ~400-byte
//! `user/message`, then per step `step/start`, streamed ~24-byte `assistant/delta`s, a
//! ~200-byte `tool/call`, a ~1 KiB `tool/result` and `step/end`; then `turn/end`. With the
//! default [`Shape`]: 40,950 events, of which 40,000 deltas and 450 critical ones
//! (`tool/call`, `tool/result`, `turn/end`). The baselines write the same events as JSON lines
//! ([`jsonl_lines`]).
//!
//! The text is pseudo-random from a seed (xorshift64*), so every run writes the same events;
//! with a fixed store clock ([`FIXED_CLOCK_US`]) the same record bytes.

use std::ops::Range;

use factlog::harness::event::{
    AssistantDelta, Effect, StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart,
    UserMessage,
};
use factlog::harness::{Body, codec};
use factlog::{AppendOptions, Appended, Task};
use serde_json::{Value, json};

/// Bytes of text of each streamed `assistant/delta` (the default [`Shape::delta_bytes`]).
pub const DELTA_TEXT_BYTES: usize = 24;

/// Bytes of text of each `user/message`: with its envelope and JSON about 400 bytes.
const USER_MESSAGE_TEXT_BYTES: usize = 360;

/// Bytes of the query argument of each `tool/call`: with the call id, the tool name, the
/// effect, the argument digest the store adds and the envelope, about 200 bytes.
const TOOL_QUERY_BYTES: usize = 24;

/// What a `tool/result` adds to its output text (envelope, call id, JSON):
/// [`Shape::result_bytes`] minus this is the output text.
pub const TOOL_RESULT_OVERHEAD_BYTES: usize = 64;

/// The store clock of the benches, so that records are byte-for-byte the same in every run.
pub const FIXED_CLOCK_US: u64 = 1_750_000_000_000_000;

/// The fixed clock, as [`factlog::StoreOptions::clock`] takes it.
pub fn fixed_clock() -> u64 {
    FIXED_CLOCK_US
}

/// The size of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Turns per session.
    pub turns: u32,
    /// Steps per turn.
    pub steps: u32,
    /// Streamed deltas per step.
    pub tokens: u32,
    /// Bytes of text of each delta.
    pub delta_bytes: usize,
    /// Approximate bytes of each `tool/result` (its output text is
    /// [`TOOL_RESULT_OVERHEAD_BYTES`] less).
    pub result_bytes: usize,
}

impl Shape {
    /// The workload's defaults: 50 turns x 4 steps x 200 deltas of 24 bytes, ~1 KiB results.
    pub const DEFAULT: Shape = Shape {
        turns: 50,
        steps: 4,
        tokens: 200,
        delta_bytes: DELTA_TEXT_BYTES,
        result_bytes: 1024,
    };

    /// Events of one session.
    pub fn events(self) -> u64 {
        u64::from(self.turns) * (3 + u64::from(self.steps) * (u64::from(self.tokens) + 4))
    }

    /// Streamed deltas of one session.
    pub fn deltas(self) -> u64 {
        u64::from(self.turns) * u64::from(self.steps) * u64::from(self.tokens)
    }

    /// Critical events of one session: per step a `tool/call` and a `tool/result`, per turn a
    /// `turn/end`.
    pub fn critical_events(self) -> u64 {
        u64::from(self.turns) * (2 * u64::from(self.steps) + 1)
    }

    /// The same shape with at most `turns` turns.
    pub fn with_turns_max(self, turns: u32) -> Shape {
        Shape { turns: self.turns.min(turns), ..self }
    }
}

/// Deterministic pseudo-random text: lower-case words separated by spaces.
#[derive(Debug, Clone)]
pub struct Text {
    state: u64,
}

const WORDS: [&str; 32] = [
    "the", "agent", "reads", "file", "and", "then", "calls", "tool", "with", "query", "result",
    "token", "stream", "model", "plan", "step", "user", "asks", "for", "report", "data", "rows",
    "table", "search", "found", "three", "matches", "in", "log", "segment", "write", "sync",
];

impl Text {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Text {
        // xorshift needs a non-zero state; mixing also spreads nearby seeds apart.
        Text { state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1 }
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Exactly `bytes` bytes of ASCII words.
    pub fn words(&mut self, bytes: usize) -> String {
        let mut out = String::with_capacity(bytes + 8);
        while out.len() < bytes {
            let word = WORDS[(self.next_u64() >> 59) as usize];
            out.push_str(word);
            out.push(' ');
        }
        out.truncate(bytes);
        out
    }
}

/// One thing a harness does to the store. Bodies are boxed so that the 40,000 deltas of a
/// session take 24 bytes each, not the size of the largest body.
#[derive(Debug, Clone)]
pub enum Action {
    /// Appends one event with its type's default durability.
    Append(Box<Body>),
    /// Streams one `assistant/delta`: its text is this range of [`Session::deltas`].
    Delta(Range<usize>),
    /// Closes a step: its `tool/result` and then its `step/end`.
    CloseStep(Box<[Body; 2]>),
}

/// How a harness appends a step's `tool/result` and `step/end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepClose {
    /// Two appends with the default durabilities: two `fdatasync`s, as both types are
    /// `Synced` by default.
    Separate,
    /// One atomic batch (`Task::append_batch_with`): one `fdatasync`.
    Batch,
}

/// One session's actions. The delta texts live in one string, so that streaming them frees
/// nothing.
#[derive(Debug, Clone)]
pub struct Session {
    /// The task's id: `session-SEED`.
    pub task: String,
    /// Every delta text, one after the other.
    pub deltas: String,
    /// The actions, in order.
    pub actions: Vec<Action>,
}

/// The actions of one session of `shape`, with text from `seed` (and the task id
/// `session-SEED`).
pub fn session(shape: Shape, seed: u64) -> Session {
    let mut text = Text::new(seed);
    let mut deltas = String::with_capacity(shape.deltas() as usize * shape.delta_bytes);
    let output_bytes = shape.result_bytes.saturating_sub(TOOL_RESULT_OVERHEAD_BYTES);
    let mut actions = Vec::with_capacity(shape.events() as usize);
    for turn in 0..shape.turns {
        actions.push(append(Body::TurnStart(TurnStart::default())));
        actions.push(append(Body::UserMessage(UserMessage {
            text: text.words(USER_MESSAGE_TEXT_BYTES),
            ..Default::default()
        })));
        for step in 0..shape.steps {
            actions.push(append(Body::StepStart(StepStart::default())));
            for _ in 0..shape.tokens {
                let at = deltas.len();
                deltas.push_str(&text.words(shape.delta_bytes));
                actions.push(Action::Delta(at..deltas.len()));
            }
            let call_id = format!("call-{seed}-{turn}-{step}");
            actions.push(append(Body::ToolCall(ToolCall {
                call_id: call_id.as_str().into(),
                tool: "search".into(),
                effect: Effect::ReadOnly,
                args: Some(json!({ "query": text.words(TOOL_QUERY_BYTES) })),
                ..Default::default()
            })));
            let result = Body::ToolResult(ToolResult {
                call_id: call_id.as_str().into(),
                output: Some(json!({ "text": text.words(output_bytes) })),
                ..Default::default()
            });
            let step_end = Body::StepEnd(StepEnd::default());
            actions.push(Action::CloseStep(Box::new([result, step_end])));
        }
        actions.push(append(Body::TurnEnd(TurnEnd::default())));
    }
    assert_eq!(
        actions.iter().map(Action::events).sum::<u64>(),
        shape.events(),
        "the session has the workload's shape"
    );
    Session { task: format!("session-{seed}"), deltas, actions }
}

fn append(body: Body) -> Action {
    Action::Append(Box::new(body))
}

impl Action {
    /// Events the action appends.
    pub fn events(&self) -> u64 {
        match self {
            Action::Append(_) | Action::Delta(_) => 1,
            Action::CloseStep(_) => 2,
        }
    }
}

/// Performs the actions of `session` on `task`, closing steps as `close` says. Panics on any
/// refusal: the workload is valid by construction.
pub fn run(task: &Task, session: Session, close: StepClose) {
    let Session { deltas, actions, .. } = session;
    for action in actions {
        perform(task, &deltas, action, close);
    }
}

/// Performs one action of a session whose delta texts are `deltas`.
pub fn perform(task: &Task, deltas: &str, action: Action, close: StepClose) {
    match action {
        Action::Append(body) => written(task.append(*body)),
        Action::Delta(range) => {
            task.delta(&deltas[range]).expect("append a delta");
        }
        Action::CloseStep(bodies) => {
            let [result, step_end] = *bodies;
            match close {
                StepClose::Separate => {
                    written(task.append(result));
                    written(task.append(step_end));
                }
                StepClose::Batch => {
                    let batch = vec![result, step_end];
                    written(task.append_batch_with(batch, AppendOptions::default()));
                }
            }
        }
    }
}

fn written(outcome: factlog::Result<Appended>) {
    match outcome.expect("append an event") {
        Appended::Written { .. } => {}
        Appended::Duplicate { call_id, .. } => panic!("call {call_id} was taken for a duplicate"),
    }
}

/// `session` with every [`Action::CloseStep`] split into its two appends, so that any prefix
/// of its actions is a whole number of events.
pub fn separate(session: Session) -> Session {
    let mut actions = Vec::with_capacity(session.actions.len() + session.actions.len() / 100);
    for action in session.actions {
        match action {
            Action::CloseStep(bodies) => {
                let [result, step_end] = *bodies;
                actions.push(append(result));
                actions.push(append(step_end));
            }
            other => actions.push(other),
        }
    }
    Session { task: session.task, deltas: session.deltas, actions }
}

/// Every event of `session` as a body, in order (deltas as `assistant/delta` bodies).
pub fn bodies(session: &Session) -> Vec<Body> {
    let mut out = Vec::with_capacity(session.actions.len() + session.actions.len() / 50);
    for action in &session.actions {
        match action {
            Action::Append(body) => out.push((**body).clone()),
            Action::Delta(range) => out.push(Body::AssistantDelta(AssistantDelta {
                text: session.deltas[range.clone()].to_owned(),
            })),
            Action::CloseStep(bodies) => out.extend(bodies.iter().cloned()),
        }
    }
    out
}

/// One line of a JSONL baseline.
pub struct Line {
    /// The JSON object and its "\n".
    pub bytes: Vec<u8>,
    /// Whether the event is critical (`tool/call`, `tool/result`, `turn/end`).
    pub critical: bool,
}

/// The JSONL lines of `session`: `{"task":..,"type":..,"timestamp_us":..,..body fields}`,
/// each with the fixed timestamp [`FIXED_CLOCK_US`], so each run writes the same bytes.
pub fn jsonl_lines(session: &Session) -> Vec<Line> {
    bodies(session)
        .iter()
        .map(|body| {
            let mut object = serde_json::Map::new();
            object.insert("task".into(), Value::from(session.task.as_str()));
            object.insert("type".into(), Value::from(body.type_name()));
            object.insert("timestamp_us".into(), Value::from(FIXED_CLOCK_US));
            if let Value::Object(fields) = codec::body_to_value(body) {
                object.extend(fields);
            }
            let mut bytes = Value::Object(object).to_string().into_bytes();
            bytes.push(b'\n');
            let critical =
                matches!(body, Body::ToolCall(_) | Body::ToolResult(_) | Body::TurnEnd(_));
            Line { bytes, critical }
        })
        .collect()
}
