//! Holders and recovery (`format-spec/harness-recovery.md`, "Holders"): a store handle takes
//! each task over from the holder that wrote it before, by appending the repair that
//! [`crate::harness::recovery::plan_task`] plans, on the task's first handle or for every
//! task at once ([`Store::recover`]); [`Store::release_task`] ends a hold;
//! [`Store::plan_recovery`] is the dry run.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::harness::event::Body;
use crate::harness::ids::ApprovalId;
use crate::harness::recovery::{
    RecoveryReport, Resume, TaskRecovery, plan_task, plan_task_after, report_last,
};
use crate::limits::EVENT_BATCH_MAX;
use crate::types::Durability;

use super::{AppendOptions, Store, TaskCell};

impl Store {
    /// Ends this handle's hold on task `id` and takes the task over again at once, as a new
    /// holder would (`format-spec/harness-recovery.md`, "Holders"): the calls dispatched
    /// without a result get `tool/outcome_unknown`, `once`/`run` approvals and pending
    /// cancels expire, the open turn and step are closed. A served store calls it when the
    /// last client that touched the task leaves, so that a client's authority and open calls
    /// do not outlive it (`format-spec/server.md`, "Holders"). A task without events, one
    /// this process's own code holds ([`Store::task`]: the sharing harness), or a read-only
    /// store, is left alone.
    ///
    /// # Errors
    ///
    /// When the repair cannot be written (as [`Store::task`]).
    pub fn release_task(&self, id: &str) -> Result<()> {
        let Some(cell) = self.inner.cells.read().get(id).map(Arc::clone) else {
            return Ok(());
        };
        if self.inner.log.is_read_only() || cell.local.load(Ordering::Acquire) {
            return Ok(());
        }
        {
            let _guard = cell.takeover.lock();
            if cell.revision.load(Ordering::Acquire) == 0 {
                return Ok(());
            }
            cell.held.store(false, Ordering::Release);
        }
        self.take_over(&cell, Durability::Synced).map(|_| ())
    }

    /// The recovery procedure, for every task this store handle does not hold yet: classifies
    /// its open calls, closes its open step and turn as interrupted, records unknown outcomes,
    /// expires one-time and per-run approvals and pending cancels, and marks it restored, as
    /// one atomic batch per task; then syncs. A task's first append through this handle does
    /// the same for that task by itself (`format-spec/harness-recovery.md`, "Holders"), so
    /// calling this is not required for safety; it is how a harness gets the whole report
    /// before it resumes. A task already held is reported from its last recovery and gets no
    /// new event: running it again writes nothing.
    pub fn recover(&self) -> Result<RecoveryReport> {
        self.recover_after(false)
    }

    /// [`Store::recover`]; with `after_loss`, for a store whose log lost events (a salvaged
    /// store), every task not held yet is repaired and asks for a confirmation.
    pub(crate) fn recover_after(&self, after_loss: bool) -> Result<RecoveryReport> {
        if self.log().is_read_only() {
            return Err(crate::error::ErrorKind::ReadOnly.into());
        }
        let mut report = RecoveryReport {
            dry_run: false,
            tasks: Vec::new(),
            events_written: 0,
            restored: crate::harness::restored::read(self.inner.fs.as_ref(), self.dir()),
        };
        let cells = self.cells();
        // Tasks not folded since open are folded only if they may need repair
        // (`harness/store/lazy.rs`); the others are taken over as they are.
        let quiet = if after_loss { HashSet::new() } else { self.quiet_tasks(&cells) };
        let unquiet: Vec<_> = cells.iter().filter(|c| !quiet.contains(&c.id)).cloned().collect();
        self.fold_pending(&unquiet)?;
        for cell in cells {
            if cell.revision.load(Ordering::Acquire) == 0 {
                continue;
            }
            let recovery = if quiet.contains(&cell.id) {
                self.take_over_quiet(&cell)?
            } else {
                self.take_over_after(&cell, Durability::Buffered, after_loss)?
            };
            report.events_written += recovery.events_written;
            report.tasks.push(recovery);
        }
        if report.events_written > 0 {
            self.flush(Durability::Synced)?;
        }
        Ok(report)
    }

    /// Takes the task of `cell` over from the holder that wrote it before this store handle
    /// was opened: appends its repair ([`plan_task`]) at `durability` and marks it held. A
    /// task already held gets no event and is reported from its last recovery.
    pub(crate) fn take_over(
        &self,
        cell: &Arc<TaskCell>,
        durability: Durability,
    ) -> Result<TaskRecovery> {
        self.take_over_after(cell, durability, false)
    }

    /// [`Store::take_over`], with `after_loss` as in [`plan_task_after`].
    ///
    /// The repair is one atomic batch unless it holds more than [`EVENT_BATCH_MAX`] events;
    /// then it is written in batches of at most that many, `recovery/restored` last. A crash
    /// between them leaves each batch's repairs recorded, and the next holder plans the rest.
    fn take_over_after(
        &self,
        cell: &Arc<TaskCell>,
        durability: Durability,
        after_loss: bool,
    ) -> Result<TaskRecovery> {
        self.fold_pending(std::slice::from_ref(cell))?;
        let _guard = cell.takeover.lock();
        let mut written = 0;
        let mut expired: Vec<ApprovalId> = Vec::new();
        let mut expired_signals: Vec<u64> = Vec::new();
        let recovery = loop {
            let mut state = cell.state.lock().clone();
            state.revision = cell.revision.load(Ordering::Acquire);
            if cell.held.load(Ordering::Acquire) {
                return Ok(report_last(&cell.id, &state));
            }
            let (mut recovery, mut bodies) = plan_task_after(&cell.id, &state, after_loss);
            merge_expired(&mut recovery, &mut bodies, &expired, &expired_signals);
            if bodies.is_empty() {
                recovery.events_written = written;
                break recovery;
            }
            let last_batch = bodies.len() <= EVENT_BATCH_MAX;
            if !last_batch {
                bodies.truncate(EVENT_BATCH_MAX);
            }
            let count = bodies.len() as u64;
            let (batch_expired, batch_signals) = expired_by(&bodies);
            // A compare-and-set on the revision planned from: a delta appended meanwhile
            // makes it stale, and the task is planned again.
            let options = AppendOptions {
                expected_revision: Some(state.revision),
                durability: Some(durability),
                replicated: false,
            };
            match self.append_events(cell, bodies, options, true, None) {
                Ok(_) if last_batch => {
                    recovery.events_written = written + count;
                    break recovery;
                }
                Ok(_) => {
                    written += count;
                    expired.extend(batch_expired);
                    expired_signals.extend(batch_signals);
                }
                Err(e) if matches!(e.kind(), crate::error::ErrorKind::StaleRevision { .. }) => {}
                Err(e) => return Err(e),
            }
        };
        cell.held.store(true, Ordering::Release);
        Ok(recovery)
    }

    /// Takes over a task that [`Store::quiet_tasks`] found needs no repair, without folding
    /// it: its recovery is empty and `ready`, what [`plan_task`] would say of it folded. A
    /// task held or folded meanwhile is taken over as usual.
    fn take_over_quiet(&self, cell: &Arc<TaskCell>) -> Result<TaskRecovery> {
        {
            let _guard = cell.takeover.lock();
            if !cell.held.load(Ordering::Acquire) && cell.pending.lock().is_some() {
                cell.held.store(true, Ordering::Release);
                return Ok(TaskRecovery {
                    task: cell.id.clone(),
                    calls: Vec::new(),
                    expired: Vec::new(),
                    expired_signals: Vec::new(),
                    interrupted_step: None,
                    interrupted_turn: None,
                    resume: Resume::Ready,
                    events_written: 0,
                });
            }
        }
        self.take_over_after(cell, Durability::Buffered, false)
    }

    /// What [`Store::recover`] would do, without writing anything (works on a read-only
    /// store). Tasks not folded since open are folded first; on a decoding error, as
    /// [`Store::task_state`] says.
    #[must_use]
    pub fn plan_recovery(&self) -> RecoveryReport {
        // An error is returned by the calls that can return one ([`Store::task_state`]).
        let _ = self.fold_all_pending();
        let mut report = RecoveryReport {
            dry_run: true,
            tasks: Vec::new(),
            events_written: 0,
            restored: crate::harness::restored::read(self.inner.fs.as_ref(), self.dir()),
        };
        for cell in self.cells() {
            let revision = cell.revision.load(Ordering::Acquire);
            if revision == 0 {
                continue;
            }
            let mut state = cell.state.lock().clone();
            state.revision = revision;
            // A task this store holds is not taken over by `recover` either: the same report.
            let planned = if cell.held.load(Ordering::Acquire) {
                report_last(&cell.id, &state)
            } else {
                plan_task(&cell.id, &state).0
            };
            report.tasks.push(planned);
        }
        report
    }
}

/// Adds to a plan what earlier batches of the same takeover expired, which is no longer in
/// it: to the report, and to the `recovery/restored` that ends `bodies`.
fn merge_expired(
    recovery: &mut TaskRecovery,
    bodies: &mut [Body],
    expired: &[ApprovalId],
    expired_signals: &[u64],
) {
    if expired.is_empty() && expired_signals.is_empty() {
        return;
    }
    recovery.expired = [expired.to_vec(), std::mem::take(&mut recovery.expired)].concat();
    recovery.expired_signals =
        [expired_signals.to_vec(), std::mem::take(&mut recovery.expired_signals)].concat();
    if let Some(Body::Restored(restored)) = bodies.last_mut() {
        restored.expired.clone_from(&recovery.expired);
    }
}

/// The approvals and the cancel signals that the repair events `bodies` expire.
fn expired_by(bodies: &[Body]) -> (Vec<ApprovalId>, Vec<u64>) {
    let approvals = bodies
        .iter()
        .filter_map(|b| match b {
            Body::ApprovalExpired(e) => Some(e.approval_id.clone()),
            _ => None,
        })
        .collect();
    let signals = bodies
        .iter()
        .filter_map(|b| match b {
            Body::SignalExpired(e) => Some(e.signal_seq),
            _ => None,
        })
        .collect();
    (approvals, signals)
}
