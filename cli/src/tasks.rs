//! The one answer to a `--task` that names no task of the store, shared by `dump`, `export`,
//! `tail`, `state` and `history`: exit 1 and the same message, listing the tasks there are.
//!
//! A task is known when the store has it in its task list: [`factlog::Store::task_ids`] for
//! the commands that open a store, or, for the commands that read the raw log (`dump`,
//! `export`), a task that has an event in the log (or, after a purge, in the store's state).
//! A known task with no event in the selected range (`--from`, `--to`, `--since`) is not
//! unknown: the command prints nothing and exits 0.

use std::collections::BTreeSet;
use std::path::Path;

use factlog::harness::{TaskId, codec};
use factlog::{Log, Seq};

use crate::{EXIT_FAILURE, Failure};

/// The failure for a `--task` the store has no task of, listing its tasks.
pub fn unknown_task<'a>(id: &str, known: impl IntoIterator<Item = &'a str>) -> Failure {
    let known: Vec<&str> = known.into_iter().collect();
    let known = if known.is_empty() {
        "the store has no tasks".to_owned()
    } else {
        format!("its tasks are: {}", known.join(", "))
    };
    Failure::new(EXIT_FAILURE, format_args!("no task {id:?} in this store ({known}; check --task)"))
}

/// [`unknown_task`] for a store's task list.
pub fn unknown_store_task(id: &str, known: &[TaskId]) -> Failure {
    unknown_task(id, known.iter().map(TaskId::as_str))
}

/// Refuses `task` when no event of the log in `dir` belongs to it. The log is scanned by
/// envelope until the task is found; a scan that meets damage or a read error first says
/// nothing (the command's own read reports the damage). After a purge the reclaimed tasks are
/// looked up in the store's state.
pub fn require_task_in_log(dir: &Path, log: &Log, task: &str) -> Result<(), Failure> {
    let Ok(first) = log.first_seq() else { return Ok(()) };
    let Ok(mut reader) = log.read_from(first) else { return Ok(()) };
    let mut seen = BTreeSet::new();
    while let Some(record) = reader.next_ref() {
        let Ok((seq, payload)) = record else { return Ok(()) };
        if let Ok(envelope) = codec::peek(seq, payload) {
            if envelope.task == task {
                return Ok(());
            }
            if !seen.contains(envelope.task) {
                seen.insert(envelope.task.to_owned());
            }
        }
    }
    if first > Seq(1) {
        // Records were reclaimed: a task may live on only in the snapshot.
        if let Ok(store) = factlog::Store::open_read_only(dir, factlog::StoreOptions::new()) {
            let ids = store.task_ids();
            if ids.iter().any(|id| id.as_str() == task) {
                return Ok(());
            }
            return Err(unknown_store_task(task, &ids));
        }
    }
    Err(unknown_task(task, seen.iter().map(String::as_str)))
}
