//! One agent session ([`crate::workload`]) as the baselines write it: each event's
//! encoded body (what SQLite stores), its JSON line (what a JSONL file holds) and whether it
//! is critical, plus the floor's chunks (the JSON lines cut after each critical event) and
//! their replay into a preallocated file. Shared by `benches/peers.rs` (one session) and
//! `benches/sessions.rs` (N at once), both in this crate.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use factlog::harness::event::AssistantDelta;
use factlog::harness::{Body, codec};

use crate::workload::{self, Action, Session, Shape};

/// One event as the baselines store it.
pub struct Event {
    /// The event type's name (`assistant/delta`, `tool/call`, ...).
    pub type_name: &'static str,
    /// The body factlog would store: JSON, or the raw text of a delta.
    pub body: Vec<u8>,
    /// The event's JSON line, newline included.
    pub line: Vec<u8>,
    /// Whether the event must be on stable storage before its append returns.
    pub critical: bool,
}

/// One session of `shape` for every writer: the typed actions for factlog, the encoded events
/// for the baselines, and the floor's chunks (the JSON lines, cut after each critical event).
pub struct Workload {
    /// The session's size.
    pub shape: Shape,
    /// The task every event belongs to.
    pub task: String,
    /// The typed actions, as factlog performs them.
    pub session: Session,
    /// Every event as the baselines store it, in order.
    pub events: Vec<Event>,
    /// The floor's chunks: the JSON lines, cut after each critical event.
    pub chunks: Vec<Vec<u8>>,
}

impl Workload {
    /// The session of `shape` with text from `seed`, on task `task`.
    pub fn new(shape: Shape, seed: u64, task: &str) -> Workload {
        let session = workload::session(shape, seed);
        let mut events = Vec::with_capacity(shape.events() as usize);
        let mut push = |body: &Body| {
            let event_type = body.event_type().expect("a typed event");
            let codec::EncodedBody { bytes, .. } =
                codec::encode_body(body, factlog::engine::segment::FORMAT_VERSION)
                    .expect("encode the body");
            let seq = events.len() as u64 + 1;
            let line = serde_json::json!({
                "seq": seq,
                "task": task,
                "type": event_type.name(),
                "body": codec::body_to_value(body),
            });
            let mut line = serde_json::to_vec(&line).expect("a JSON line");
            line.push(b'\n');
            let critical =
                matches!(body, Body::ToolCall(_) | Body::ToolResult(_) | Body::TurnEnd(_));
            events.push(Event { type_name: event_type.name(), body: bytes, line, critical });
        };
        for action in &session.actions {
            match action {
                Action::Append(body) => push(body),
                Action::Delta(range) => {
                    let text = session.deltas[range.clone()].to_owned();
                    push(&Body::AssistantDelta(AssistantDelta { text }));
                }
                Action::CloseStep(bodies) => bodies.iter().for_each(&mut push),
            }
        }
        assert_eq!(events.len() as u64, shape.events(), "the workload's events");
        let mut chunks = Vec::new();
        let mut chunk = Vec::new();
        for event in &events {
            chunk.extend_from_slice(&event.line);
            if event.critical {
                chunks.push(std::mem::take(&mut chunk));
            }
        }
        assert!(chunk.is_empty(), "the session ends with a critical event");
        assert_eq!(chunks.len() as u64, shape.critical_events(), "the critical events");
        Workload { shape, task: task.to_owned(), session, events, chunks }
    }

    /// Bytes of the session's JSON lines.
    pub fn line_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.len() as u64).sum()
    }
}

/// The preallocated floor: `pwrite` + `fdatasync` of each chunk at its offset in `file`,
/// calling `each` with the time of every pair.
pub fn pwrite_chunks(file: &File, chunks: &[Vec<u8>], mut each: impl FnMut(Duration)) {
    let mut offset = 0;
    for chunk in chunks {
        let start = Instant::now();
        file.write_all_at(chunk, offset).expect("pwrite");
        file.sync_data().expect("fdatasync");
        each(start.elapsed());
        offset += chunk.len() as u64;
    }
}

/// The median of `values`, at least one.
pub fn median(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty(), "a median of nothing");
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 }
}
