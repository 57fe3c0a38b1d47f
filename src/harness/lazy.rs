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
//! ([`quiet_tasks`]): it is marked held and stays pending.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::Result;
use crate::harness::codec;
use crate::harness::event::{EventType, Risk, Scope};
use crate::harness::fold;
use crate::harness::ids::TaskId;
use crate::harness::state::{ApprovalStatus, CallStatus, State, TaskState};
use crate::harness::store::{Store, TaskCell};
use crate::limits::RECOVERY_SCAN_OPEN_CALLS_MAX;
use crate::reader::Reader;
use crate::types::Seq;

/// The seqs of the first and last event of a task that are not folded into its state yet
/// (deltas are always counted at once): every event of the task between them that is not a
/// delta is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) from: u64,
    pub(crate) to: u64,
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
    deltas: u64,
    delta_bytes: u64,
    pending: Option<Pending>,
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
        let pending = task.pending.get_or_insert(Pending { from: seq.0, to: seq.0 });
        pending.to = seq.0;
    }
    let mut scanned = Scanned { records, pending: HashMap::new() };
    for (id, counted) in counted {
        state.last_seq = state.last_seq.max(counted.last_seq);
        let id = TaskId(id);
        if let Some(pending) = counted.pending {
            scanned.pending.insert(id.clone(), pending);
        }
        let task = state.tasks.entry(id).or_default();
        task.revision = task.revision.max(counted.revision);
        task.last_seq = task.last_seq.max(counted.last_seq);
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
    /// nothing, known without folding them: in one read of their pending ranges, envelopes
    /// only. Such a task, folded, would have no open turn, step, call, one-time or per-run
    /// approval, pending cancel or high risk, and its last recovery would not be its last
    /// event; so [`crate::harness::recovery::plan_task`] would write nothing and report an
    /// empty recovery, `ready`. The test is conservative: a task it cannot prove quiet is
    /// folded and planned as usual.
    ///
    /// A task is quiet when its folded part (its state as of the snapshot) has no call
    /// dispatched or of unknown outcome, no granted `once` or `run` approval, and low risk;
    /// and its pending events end with a `turn/end`, hold no `task/contract`, `approval/grant`,
    /// `tool/outcome_unknown` nor `recovery/restored`, and every `tool/call` among them is
    /// followed by a `tool/result` of the same call id (read from the start of the body, as
    /// this build writes it; any other shape is not quiet).
    pub(crate) fn quiet_tasks(&self, cells: &[Arc<TaskCell>]) -> Result<HashSet<TaskId>> {
        #[derive(Default)]
        struct Watch {
            pending: Option<Pending>,
            ruled_out: bool,
            last_tag: u16,
            open_calls: HashSet<String>,
        }
        let mut watched: Vec<(&TaskId, Watch)> = Vec::new();
        for cell in cells {
            let Some(pending) = *cell.pending.lock() else { continue };
            if !settled(&cell.state.lock()) {
                continue;
            }
            watched.push((&cell.id, Watch { pending: Some(pending), ..Watch::default() }));
        }
        let Some((from, to)) = span(watched.iter().filter_map(|(_, w)| w.pending.as_ref())) else {
            return Ok(HashSet::new());
        };
        let names: Vec<&str> = watched.iter().map(|(id, _)| id.as_str()).collect();
        let ids: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut reader = self.inner.log.read_from(Seq(from))?;
        let mut current = usize::MAX;
        while let Some(record) = reader.next_ref() {
            let (seq, payload) = record?;
            if seq.0 > to {
                break;
            }
            let envelope = codec::peek(seq, payload)?;
            let index = lookup(&ids, &names, &mut current, envelope.task);
            let Some((_, watch)) = watched.get_mut(index) else { continue };
            let Some(pending) = watch.pending else { continue };
            if watch.ruled_out || seq.0 < pending.from || seq.0 > pending.to {
                continue;
            }
            if codec::delta_text(seq, &envelope)?.is_some() {
                continue;
            }
            watch.last_tag = envelope.tag;
            let call_id = || leading_call_id(envelope.body);
            let tag = EventType::from_tag(envelope.tag);
            match tag {
                Some(
                    EventType::Contract
                    | EventType::ApprovalGrant
                    | EventType::ToolOutcomeUnknown
                    | EventType::Restored,
                ) => watch.ruled_out = true,
                Some(EventType::ToolCall) if envelope.schema == codec::SCHEMA_VERSION => {
                    match call_id() {
                        Some(id) if watch.open_calls.len() < RECOVERY_SCAN_OPEN_CALLS_MAX => {
                            watch.open_calls.insert(id.to_owned());
                        }
                        _ => watch.ruled_out = true,
                    }
                }
                Some(EventType::ToolResult) if envelope.schema == codec::TOOL_RESULT_SCHEMA => {
                    match call_id() {
                        Some(id) => {
                            watch.open_calls.remove(id);
                        }
                        None => watch.ruled_out = true,
                    }
                }
                Some(EventType::ToolCall | EventType::ToolResult) => watch.ruled_out = true,
                _ => {}
            }
        }
        Ok(watched
            .into_iter()
            .filter(|(_, w)| {
                !w.ruled_out && w.open_calls.is_empty() && w.last_tag == EventType::TurnEnd.tag()
            })
            .map(|(id, _)| id.clone())
            .collect())
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
