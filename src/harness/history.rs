//! The model-visible history of a task: a projection of its events (R10). Deltas are
//! assembled into assistant text, an `assistant/message` supersedes the deltas streamed
//! before it, every tool call is paired with its result or an explicit unknown outcome, and a
//! `context/compacted` summary replaces everything before it.

use serde::Serialize;
use serde_json::Value;

use crate::engine::reader::Reader;
use crate::error::Result;
use crate::harness::codec;
use crate::harness::event::{Body, EventType, ResultOutcome};
use crate::harness::ids::CallId;

#[cfg(doc)]
use crate::harness::store::Store;

/// One entry of the model-visible history.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
#[expect(clippy::large_enum_variant, reason = "a history is short-lived and read once")]
pub enum Entry {
    /// A user message.
    User {
        /// Its event.
        seq: u64,
        /// The text.
        text: String,
    },
    /// Model output: an assembled message, or streamed deltas.
    Assistant {
        /// The event that completed it (the message, or the last delta).
        seq: u64,
        /// The text.
        text: String,
        /// True when it was streamed and cut off by an interruption.
        partial: bool,
    },
    /// A tool call and what became of it.
    Tool {
        /// The event it came from: the `assistant/message` that asked for the call, or its
        /// `tool/call` when no message did.
        seq: u64,
        /// The event that answered it: its `tool/result`, or the `tool/outcome_unknown` a
        /// recovery recorded; absent while it has neither.
        #[serde(skip_serializing_if = "Option::is_none")]
        result_seq: Option<u64>,
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// Its arguments, if recorded.
        #[serde(skip_serializing_if = "Option::is_none")]
        args: Option<Value>,
        /// `not_started`, `pending`, `completed` or `outcome_unknown`.
        outcome: &'static str,
        /// The result's outcome (`ok` or `error`), once completed.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<ResultOutcome>,
        /// What went wrong, if the result said.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The receipt, once completed.
        #[serde(skip_serializing_if = "Option::is_none")]
        receipt: Option<Value>,
        /// The output, once completed.
        #[serde(skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
    },
    /// An answer a person gave through an operator command (`factlog resolve`, `confirm`,
    /// `approve`, `deny`, `cancel`, or the console's buttons): who, and to what.
    Operator {
        /// The event that carried the answer.
        seq: u64,
        /// Its type: `tool/result`, `tool/not_run`, `approval/grant`, `approval/deny`,
        /// `control/resume` or `control/cancel`.
        event: &'static str,
        /// Who answered.
        by: String,
        /// What they added.
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// The call answered, for `tool/result` and `tool/not_run`.
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<CallId>,
        /// The approval answered, for `approval/grant` and `approval/deny`.
        #[serde(skip_serializing_if = "Option::is_none")]
        approval_id: Option<String>,
    },
    /// The summary that replaced the history before it.
    Summary {
        /// Its event.
        seq: u64,
        /// The summary.
        text: String,
    },
}

#[derive(Default)]
struct Projection {
    entries: Vec<Entry>,
    streamed: String,
    streamed_seq: u64,
}

impl Projection {
    fn flush_stream(&mut self, partial: bool) {
        if !self.streamed.is_empty() {
            let text = std::mem::take(&mut self.streamed);
            self.entries.push(Entry::Assistant { seq: self.streamed_seq, text, partial });
        }
    }

    fn call_mut(&mut self, call_id: &CallId) -> Option<&mut Entry> {
        self.entries
            .iter_mut()
            .rev()
            .find(|e| matches!(e, Entry::Tool { call_id: c, .. } if c == call_id))
    }

    fn apply(&mut self, seq: u64, body: Body) {
        if let Some(operator) = body.operator() {
            let (call_id, approval_id) = match &body {
                Body::ToolResult(r) => (Some(r.call_id.clone()), None),
                Body::ToolNotRun(n) => (Some(n.call_id.clone()), None),
                Body::ApprovalGrant(g) => (None, Some(g.approval_id.0.clone())),
                Body::ApprovalDeny(d) => (None, Some(d.approval_id.0.clone())),
                _ => (None, None),
            };
            self.flush_stream(false);
            self.entries.push(Entry::Operator {
                seq,
                event: body.event_type().map_or("", EventType::name),
                by: operator.name.clone(),
                note: operator.note.clone(),
                call_id,
                approval_id,
            });
        }
        match body {
            Body::UserMessage(m) => {
                self.flush_stream(false);
                self.entries.push(Entry::User { seq, text: m.text });
            }
            Body::AssistantDelta(d) => {
                self.streamed.push_str(&d.text);
                self.streamed_seq = seq;
            }
            Body::AssistantMessage(m) => {
                // The assembled message supersedes the fragments streamed before it.
                self.streamed.clear();
                if !m.text.is_empty() || m.tool_calls.is_empty() {
                    self.entries.push(Entry::Assistant { seq, text: m.text, partial: false });
                }
                for call in m.tool_calls {
                    self.entries.push(tool_entry(
                        seq,
                        call.call_id,
                        call.tool,
                        call.args,
                        "not_started",
                    ));
                }
            }
            Body::ToolCall(c) => {
                self.flush_stream(false);
                match self.call_mut(&c.call_id) {
                    Some(Entry::Tool { outcome, args, .. }) => {
                        *outcome = "pending";
                        if c.args.is_some() {
                            *args = c.args;
                        }
                    }
                    _ => self.entries.push(tool_entry(seq, c.call_id, c.tool, c.args, "pending")),
                }
            }
            Body::ToolResult(r) => {
                if let Some(Entry::Tool {
                    outcome,
                    result,
                    error,
                    receipt,
                    output,
                    result_seq,
                    ..
                }) = self.call_mut(&r.call_id)
                {
                    *outcome = "completed";
                    *result_seq = Some(seq);
                    *result = Some(r.outcome);
                    *error = r.error;
                    *receipt = r.receipt;
                    *output = r.output;
                }
            }
            Body::ToolNotRun(n) => {
                if let Some(Entry::Tool { outcome, result_seq, .. }) = self.call_mut(&n.call_id)
                    && *outcome == "outcome_unknown"
                {
                    *outcome = "not_started";
                    *result_seq = None;
                }
            }
            Body::ToolOutcomeUnknown(u) => {
                if let Some(Entry::Tool { outcome, result_seq, .. }) = self.call_mut(&u.call_id)
                    && *outcome != "completed"
                {
                    *outcome = "outcome_unknown";
                    *result_seq = Some(seq);
                }
            }
            Body::StepEnd(e) => self.flush_stream(e.status() == "interrupted"),
            Body::TurnEnd(e) => self.flush_stream(e.status() == "interrupted"),
            Body::ContextCompacted(c) => {
                self.streamed.clear();
                self.entries.clear();
                self.entries.push(Entry::Summary { seq, text: c.summary });
            }
            _ => {}
        }
    }
}

fn tool_entry(
    seq: u64,
    call_id: CallId,
    tool: String,
    args: Option<Value>,
    outcome: &'static str,
) -> Entry {
    Entry::Tool {
        seq,
        result_seq: None,
        call_id,
        tool,
        args,
        outcome,
        result: None,
        error: None,
        receipt: None,
        output: None,
    }
}

/// The entries of `task`'s events read by `reader` (the whole log after `from`, where the
/// caller starts the history): what [`Store::history`] returns.
pub(crate) fn project(reader: &mut Reader, task: &str) -> Result<Vec<Entry>> {
    let mut projection = Projection::default();
    while let Some(record) = reader.next_ref() {
        let (seq, payload) = record?;
        if codec::peek(seq, payload)?.task != task {
            continue;
        }
        projection.apply(seq.0, codec::decode(seq, payload)?.body);
    }
    // Streamed text without a closing event was cut off (or is still streaming).
    projection.flush_stream(true);
    Ok(projection.entries)
}
