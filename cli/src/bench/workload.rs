//! The agent-session workload of `/work/shared/mission/workload.md`, sized by the command's
//! flags: per turn `turn/start`, a ~400-byte `user/message`, then per step `step/start`,
//! streamed `assistant/delta`s, a ~200-byte `tool/call`, a `tool/result` and `step/end`; then
//! `turn/end`. The text is pseudo-random from a seed (xorshift64*), so every run and every
//! policy writes the same events.

use std::ops::Range;

use factlog::harness::Body;
use factlog::harness::codec;
use factlog::harness::event::{
    AssistantDelta, Effect, StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart,
    UserMessage,
};
use serde_json::{Value, json};

/// Bytes of text of each `user/message`: with its envelope and JSON about 400 bytes.
const USER_MESSAGE_TEXT_BYTES: usize = 360;

/// Bytes of the query argument of each `tool/call`: with the call id, the tool name, the
/// effect, the argument digest the store adds and the envelope, about 200 bytes.
const TOOL_QUERY_BYTES: usize = 24;

/// What a `tool/result` adds to its output text (envelope, call id, JSON): `--result-bytes`
/// minus this is the output text.
pub const TOOL_RESULT_OVERHEAD_BYTES: usize = 64;

/// The timestamp of every JSONL line, so each run writes the same bytes.
const JSONL_TIMESTAMP_US: u64 = 1_750_000_000_000_000;

/// The size of one session.
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
    /// Approximate bytes of each `tool/result`.
    pub result_bytes: usize,
}

impl Shape {
    /// Events of one session.
    pub fn events(self) -> u64 {
        u64::from(self.turns) * (3 + u64::from(self.steps) * (u64::from(self.tokens) + 4))
    }

    /// Streamed deltas of one session.
    pub fn deltas(self) -> u64 {
        u64::from(self.turns) * u64::from(self.steps) * u64::from(self.tokens)
    }

    /// The same shape with at most `turns` turns.
    pub fn with_turns_max(self, turns: u32) -> Shape {
        Shape { turns: self.turns.min(turns), ..self }
    }
}

/// Deterministic pseudo-random text: lower-case words separated by spaces.
struct Text {
    state: u64,
}

const WORDS: [&str; 32] = [
    "the", "agent", "reads", "file", "and", "then", "calls", "tool", "with", "query", "result",
    "token", "stream", "model", "plan", "step", "user", "asks", "for", "report", "data", "rows",
    "table", "search", "found", "three", "matches", "in", "log", "segment", "write", "sync",
];

impl Text {
    fn new(seed: u64) -> Text {
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
    fn words(&mut self, bytes: usize) -> String {
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

/// One thing a harness does to the store.
#[derive(Debug, Clone)]
pub enum Action {
    /// One event with its type's default durability.
    Append(Box<Body>),
    /// One streamed `assistant/delta`: its text is this range of [`Session::deltas`].
    Delta(Range<usize>),
    /// A step's `tool/result` and `step/end`.
    CloseStep(Box<[Body; 2]>),
}

/// One session of one task.
#[derive(Debug, Clone)]
pub struct Session {
    /// The task's id.
    pub task: String,
    /// Every delta text, one after the other.
    pub deltas: String,
    /// The actions, in order.
    pub actions: Vec<Action>,
}

/// The session of task number `index` (its id and text seed).
pub fn session(shape: Shape, index: usize) -> Session {
    let task = format!("session-{index}");
    let mut text = Text::new(index as u64 + 1);
    let mut deltas = String::with_capacity(shape.deltas() as usize * shape.delta_bytes);
    let mut actions = Vec::with_capacity(shape.events() as usize);
    let output_bytes = shape.result_bytes.saturating_sub(TOOL_RESULT_OVERHEAD_BYTES);
    let append = |body: Body| Action::Append(Box::new(body));
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
            let call_id = format!("call-{index}-{turn}-{step}");
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
    Session { task, deltas, actions }
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

/// The JSONL lines of `session`: `{"task":..,"type":..,"timestamp_us":..,..body fields}`.
pub fn jsonl_lines(session: &Session) -> Vec<Line> {
    bodies(session)
        .iter()
        .map(|body| {
            let mut object = serde_json::Map::new();
            object.insert("task".into(), Value::from(session.task.as_str()));
            object.insert("type".into(), Value::from(body.type_name()));
            object.insert("timestamp_us".into(), Value::from(JSONL_TIMESTAMP_US));
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
