//! The per-task lazy fold: opening a store reads only the envelope of each event after the
//! snapshot, and a task's other events are folded when the task is first touched.
//!
//! At open ([`scan`]), every record after the snapshot is read and CRC-checked, its envelope
//! peeked: an `assistant/delta` is counted from its bytes as [`crate::harness::fold::Replay`]
//! counts it (deltas commute with every other effect, so they need no order), and every other
//! event only moves its task's revision and last seq, and widens the task's *pending range*:
//! the seqs of its first and last event not folded yet. A task's memory is that one range,
//! whatever the count of its events. Nothing else is decoded, except a body that an upcast
//! may refuse (an older `tool/result` schema), so that such a store still fails to open
//! naming the event, as an eager fold makes it.
//!
//! A task is folded ([`Store::fold_pending`]) before its state is read or changed:
//! [`Store::task`], [`Store::task_state`], [`Store::state`], the history, recovery and
//! takeover, [`Store::plan_recovery`], and before segments are reclaimed. Folding reads the
//! log once over the pending ranges asked for and decodes only those tasks' events. One
//! task at a time, each fold scans its range again; once the scans of single tasks add up to
//! more records than every pending range spans, the next fold folds every pending task in one
//! scan, so that touching every task one by one costs at most about twice an eager fold.
//!
//! [`Store::recover`] must take every task over, but a task whose pending events leave
//! nothing open needs no repair and its report is known without folding it
//! ([`Store::quiet_tasks`]): it is marked held and stays pending. What that needs of the
//! pending events ([`Tail`]) is gathered by the same scan at open, from the envelopes' type
//! tags and the call ids `tool/call` and `tool/result` bodies start with, so `recover` reads
//! nothing more.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Store, TaskCell};
use crate::engine::reader::Reader;
use crate::error::Result;
use crate::harness::codec;
use crate::harness::event::{EventType, Risk, Scope};
use crate::harness::fold;
use crate::harness::ids::TaskId;
use crate::harness::state::{ApprovalStatus, CallStatus, State, TaskState};
use crate::limits::RECOVERY_SCAN_OPEN_CALLS_MAX;
use crate::types::Seq;

/// The seqs of the first and last event of a task that are not folded into its state yet
/// (deltas are always counted at once): every event of the task between them that is not a
/// delta is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) from: u64,
    pub(crate) to: u64,
    /// Whether these events end with a `turn/end`, hold no `task/contract`,
    /// `approval/grant`, `tool/outcome_unknown` nor `recovery/restored`, and answer every
    /// `tool/call` among them with a later `tool/result` of the same call id: then they leave
    /// nothing open that the task's folded part did not ([`Store::quiet_tasks`]).
    pub(crate) quiet_tail: bool,
}

/// What [`scan`] gathers of a task's pending events for [`Pending::quiet_tail`].
#[derive(Debug, Default)]
struct Tail {
    /// Something among them keeps the task from being quiet.
    ruled_out: bool,
    /// The type tag of the last of them.
    last_tag: u16,
    /// The call ids dispatched without a result yet; at most
    /// [`RECOVERY_SCAN_OPEN_CALLS_MAX`], else the task is ruled out.
    open_calls: HashSet<String>,
}

impl Tail {
    /// Takes the event of `envelope` (not a delta) into account.
    fn add(&mut self, envelope: &codec::EnvelopeRef<'_>) {
        self.last_tag = envelope.tag;
        if self.ruled_out {
            return;
        }
        let call_id = || leading_call_id(envelope.body);
        match EventType::from_tag(envelope.tag) {
            Some(
                EventType::Contract
                | EventType::ApprovalGrant
                | EventType::ToolOutcomeUnknown
                | EventType::ToolNotRun
                | EventType::Restored,
            ) => self.rule_out(),
            Some(EventType::ToolCall) if envelope.schema == codec::SCHEMA_VERSION => {
                match call_id() {
                    Some(id) if self.open_calls.len() < RECOVERY_SCAN_OPEN_CALLS_MAX => {
                        self.open_calls.insert(id.to_owned());
                    }
                    _ => self.rule_out(),
                }
            }
            Some(EventType::ToolResult) if envelope.schema == codec::TOOL_RESULT_SCHEMA => {
                match call_id() {
                    Some(id) => {
                        self.open_calls.remove(id);
                    }
                    None => self.rule_out(),
                }
            }
            Some(EventType::ToolCall | EventType::ToolResult) => self.rule_out(),
            _ => {}
        }
    }

    fn rule_out(&mut self) {
        self.ruled_out = true;
        self.open_calls = HashSet::new();
    }

    fn quiet(&self) -> bool {
        !self.ruled_out && self.open_calls.is_empty() && self.last_tag == EventType::TurnEnd.tag()
    }
}

/// How many records the folds of single tasks have read since open, against the budget
/// after which one fold folds every pending task.
#[derive(Debug, Default)]
pub(crate) struct FoldBudget {
    /// Records read by folds so far.
    pub(crate) scanned: u64,
    /// Records the pending ranges spanned at open.
    pub(crate) budget: u64,
}

/// One task's effects counted by [`scan`].
#[derive(Debug, Default)]
struct Counted {
    revision: u64,
    last_seq: u64,
    last_time_us: u64,
    deltas: u64,
    delta_bytes: u64,
    pending: Option<(Pending, Tail)>,
}

/// What [`scan`] read: the records and each task's pending range.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    /// Records read.
    pub(crate) records: u64,
    /// The tasks with events not folded yet.
    pub(crate) pending: HashMap<TaskId, Pending>,
}

/// Reads the records of `reader` through `through` into `state` without decoding the bodies
/// of events other than deltas: deltas are counted, every other event moves its task's
/// revision and last seq and is left pending (module docs). Errors are those an eager fold
/// gives for the envelopes, the deltas, and the bodies an upcast may refuse.
pub(crate) fn scan(state: &mut State, reader: &mut Reader, through: u64) -> Result<Scanned> {
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut counted: Vec<(String, Counted)> = Vec::new();
    let mut current = usize::MAX;
    let mut records = 0;
    while let Some(record) = reader.next_ref() {
        let (seq, payload) = record?;
        if seq.0 > through {
            break;
        }
        records += 1;
        let envelope = codec::peek(seq, payload)?;
        // Tasks write in runs: the task of the previous record is checked before the map.
        if current == usize::MAX || counted[current].0 != envelope.task {
            current = match ids.get(envelope.task) {
                Some(&index) => index,
                None => {
                    counted.push((envelope.task.to_owned(), Counted::default()));
                    ids.insert(envelope.task.to_owned(), counted.len() - 1);
                    counted.len() - 1
                }
            };
        }
        let task = &mut counted[current].1;
        task.revision = task.revision.max(envelope.revision);
        task.last_seq = task.last_seq.max(seq.0);
        task.last_time_us = task.last_time_us.max(envelope.timestamp_us);
        if let Some(text) = codec::delta_text(seq, &envelope)? {
            task.deltas += 1;
            task.delta_bytes += text.len() as u64;
            continue;
        }
        if envelope.tag == EventType::ToolResult.tag()
            && envelope.schema < codec::TOOL_RESULT_SCHEMA
        {
            // Decoded now only to fail the open as an eager fold would, naming the event.
            codec::decode(seq, payload)?;
        }
        let (pending, tail) = task.pending.get_or_insert_with(|| {
            (Pending { from: seq.0, to: seq.0, quiet_tail: false }, Tail::default())
        });
        pending.to = seq.0;
        tail.add(&envelope);
    }
    let mut scanned = Scanned { records, pending: HashMap::new() };
    for (id, counted) in counted {
        state.last_seq = state.last_seq.max(counted.last_seq);
        let id = TaskId(id);
        if let Some((pending, tail)) = counted.pending {
            let quiet_tail = tail.quiet();
            scanned.pending.insert(id.clone(), Pending { quiet_tail, ..pending });
        }
        let task = state.tasks.entry(id).or_default();
        task.revision = task.revision.max(counted.revision);
        task.last_seq = task.last_seq.max(counted.last_seq);
        task.last_time_us = task.last_time_us.max(counted.last_time_us);
        task.execution.deltas += counted.deltas;
        task.execution.delta_bytes += counted.delta_bytes;
    }
    Ok(scanned)
}

/// The smallest range of seqs holding every range of `ranges`, and the records it spans.
pub(crate) fn span<'a>(ranges: impl Iterator<Item = &'a Pending>) -> Option<(u64, u64)> {
    ranges.fold(None, |acc, p| match acc {
        None => Some((p.from, p.to)),
        Some((from, to)) => Some((from.min(p.from), to.max(p.to))),
    })
}

/// Finds the entry of `task` among `ids`, trying `current` (the previous record's) first.
fn lookup(ids: &HashMap<&str, usize>, names: &[&str], current: &mut usize, task: &str) -> usize {
    if *current != usize::MAX && names[*current] == task {
        return *current;
    }
    *current = ids.get(task).copied().unwrap_or(usize::MAX);
    *current
}

impl Store {
    /// Folds the pending events of the tasks of `cells` (those that have any) into their
    /// state, in one read of the log; past the budget (module docs), of every pending task.
    pub(crate) fn fold_pending(&self, cells: &[Arc<TaskCell>]) -> Result<()> {
        // A task is never pending again once folded: most calls end here, without waiting for
        // a fold of other tasks under way.
        if cells.iter().all(|cell| cell.pending.lock().is_none()) {
            return Ok(());
        }
        let inner = &*self.inner;
        let mut budget = inner.fold_budget.lock();
        let mut todo: Vec<(Arc<TaskCell>, Pending)> = cells
            .iter()
            .filter_map(|cell| cell.pending.lock().map(|p| (Arc::clone(cell), p)))
            .collect();
        let Some((mut from, mut to)) = span(todo.iter().map(|(_, p)| p)) else { return Ok(()) };
        if budget.scanned + (to - from + 1) > budget.budget {
            todo = inner
                .cells
                .read()
                .values()
                .filter_map(|cell| cell.pending.lock().map(|p| (Arc::clone(cell), p)))
                .collect();
            (from, to) = span(todo.iter().map(|(_, p)| p)).unwrap_or((from, to));
        }
        // The states of pending tasks do not change while they are pending: every writer of a
        // task's state folds it first, under this lock.
        let mut states: Vec<TaskState> =
            todo.iter().map(|(cell, _)| cell.state.lock().clone()).collect();
        let names: Vec<&str> = todo.iter().map(|(cell, _)| cell.id.as_str()).collect();
        let ids: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut reader = inner.log.read_from(Seq(from))?;
        let mut current = usize::MAX;
        while let Some(record) = reader.next_ref() {
            let (seq, payload) = record?;
            if seq.0 > to {
                break;
            }
            let envelope = codec::peek(seq, payload)?;
            let index = lookup(&ids, &names, &mut current, envelope.task);
            let Some((_, pending)) = todo.get(index) else { continue };
            if seq.0 < pending.from || seq.0 > pending.to {
                continue;
            }
            if codec::delta_text(seq, &envelope)?.is_none() {
                fold::apply_to_task(&mut states[index], &codec::decode(seq, payload)?);
            }
        }
        budget.scanned += to - from + 1;
        for ((cell, _), state) in todo.iter().zip(states) {
            *cell.state.lock() = state;
            *cell.pending.lock() = None;
        }
        Ok(())
    }

    /// Folds every pending task.
    pub(crate) fn fold_all_pending(&self) -> Result<()> {
        let cells: Vec<Arc<TaskCell>> = self
            .inner
            .cells
            .read()
            .values()
            .filter(|cell| cell.pending.lock().is_some())
            .cloned()
            .collect();
        self.fold_pending(&cells)
    }

    /// Of the pending tasks of `cells`, those whose recovery needs no repair and reports
    /// nothing, known without folding them (and without reading the log): such a task, folded,
    /// would have no open turn, step, call, one-time or per-run approval, pending cancel or
    /// high risk, and its last recovery would not be its last event; so
    /// [`crate::harness::recovery::plan_task`] would write nothing and report an empty
    /// recovery, `ready`. The test is conservative: a task it cannot prove quiet is folded and
    /// planned as usual.
    ///
    /// A task is quiet when its folded part (its state as of the snapshot) has no call
    /// dispatched or of unknown outcome, no granted `once` or `run` approval, and low risk;
    /// and its pending events have a [`Pending::quiet_tail`].
    pub(crate) fn quiet_tasks(&self, cells: &[Arc<TaskCell>]) -> HashSet<TaskId> {
        cells
            .iter()
            .filter(|cell| cell.pending.lock().is_some_and(|p| p.quiet_tail))
            .filter(|cell| settled(&cell.state.lock()))
            .map(|cell| cell.id.clone())
            .collect()
    }
}

/// Whether the folded part of a pending task leaves nothing for recovery to find by itself:
/// no call dispatched or of unknown outcome, no granted `once` or `run` approval, low risk.
fn settled(task: &TaskState) -> bool {
    task.task.risk != Risk::High
        && task
            .session
            .calls
            .values()
            .all(|c| !matches!(c.status, CallStatus::Dispatched | CallStatus::OutcomeUnknown))
        && task.control.approvals.values().all(|a| {
            !(a.status == ApprovalStatus::Granted
                && matches!(a.scope, Some(Scope::Once | Scope::Run)))
        })
}

/// The call id a JSON body starts with, as this build writes a `tool/call` or `tool/result`
/// (`{"call_id":"...`), when it holds no escape; else `None`.
fn leading_call_id(body: &[u8]) -> Option<&str> {
    const PREFIX: &[u8] = b"{\"call_id\":\"";
    let rest = body.strip_prefix(PREFIX)?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    if rest[end] != b'"' {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()
}

#[cfg(test)]
mod tests {
    use super::leading_call_id;

    #[test]
    fn a_call_id_is_read_only_from_the_written_shape() {
        assert_eq!(leading_call_id(br#"{"call_id":"c1","tool":"t"}"#), Some("c1"));
        assert_eq!(leading_call_id(br#"{"call_id":"c\"1","tool":"t"}"#), None);
        assert_eq!(leading_call_id(br#"{"tool":"t","call_id":"c1"}"#), None);
        assert_eq!(leading_call_id(br#"{"call_id":"c1"#), None);
        assert_eq!(leading_call_id(b""), None);
    }
}
