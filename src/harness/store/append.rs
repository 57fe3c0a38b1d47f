//! The append path: a task handle ([`Store::task`]), then each event checked against its
//! task's state (`format-spec/events.md`, "What the store refuses"), its secrets replaced by
//! references, encoded in the log's schemas, written atomically with the batch under a
//! compare-and-set gate, waited on for its durability (and its replica), and folded in.
//! Streamed `assistant/delta` fragments take a path of their own: one lock, no allocation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::harness::check::{self, Verdict};
use crate::harness::codec;
use crate::harness::event::{Body, Event, EventType, ToolCall};
use crate::harness::fold;
use crate::harness::ids::{CallId, TaskId, check_task_id};
use crate::harness::replication_progress::Progress;
use crate::harness::request_key;
use crate::harness::secret;
use crate::harness::secret_shapes;
use crate::harness::state::TaskState;
use crate::limits::{DELTA_TEXT_BYTES_MAX, EVENT_BATCH_MAX};
use crate::types::{Durability, Seq};

use super::{AppendOptions, Store, Task, TaskCell};

/// What an append did.
#[derive(Debug, Clone, PartialEq)]
pub enum Appended {
    /// The event (or batch) was written and meets its durability.
    Written {
        /// Its (first) sequence number.
        seq: Seq,
        /// The task's revision after it (after the last event of a batch).
        revision: u64,
    },
    /// A `tool/call` whose request key (or call id) already has a result: nothing was
    /// written; this is the first result's receipt. Do not run the tool again.
    Duplicate {
        /// The call whose result it is.
        call_id: CallId,
        /// Its receipt.
        receipt: Option<Value>,
        /// The sequence number of that result.
        result_seq: Seq,
        /// The task's current revision.
        revision: u64,
    },
}

impl Store {
    /// A handle on task `id`, which need not exist yet (its first event creates it).
    ///
    /// On a writable store, the first handle on a task that an earlier holder wrote (a store
    /// opened before this one: another process, a crashed one, or one closed cleanly) takes
    /// the task over first: it appends and syncs the task's repair batch, as
    /// [`Store::recover`] does, so that no one-time authority, pending cancel or in-flight
    /// call of the earlier holder is inherited (`format-spec/harness-recovery.md`,
    /// "Holders"). Later handles find the task held and write nothing.
    pub fn task(&self, id: &str) -> Result<Task> {
        let task = self.client_task(id)?;
        task.cell.local.store(true, Ordering::Release);
        Ok(task)
    }

    /// [`Store::task`] for a served client: the task is held by the client's connection, and
    /// handed over when the last connection that touched it ends ([`Store::release_task`]),
    /// unless this process's own code holds it too.
    pub(crate) fn client_task(&self, id: &str) -> Result<Task> {
        check_task_id(id)?;
        let existing = self.inner.cells.read().get(id).map(Arc::clone);
        let cell = match existing {
            Some(cell) => cell,
            None => {
                let mut cells = self.inner.cells.write();
                let cell = cells.entry(TaskId(id.to_owned())).or_insert_with(|| {
                    Arc::new(TaskCell::new(TaskId(id.to_owned()), TaskState::default()))
                });
                Arc::clone(cell)
            }
        };
        self.fold_pending(std::slice::from_ref(&cell))?;
        if !cell.held.load(Ordering::Acquire) && !self.inner.log.is_read_only() {
            self.take_over(&cell, Durability::Synced)?;
        }
        Ok(Task { store: self.clone(), cell })
    }

    /// Makes every event appended so far meet `durability`.
    pub fn flush(&self, durability: Durability) -> Result<()> {
        self.inner.log.flush(durability)
    }
}

impl Task {
    /// The task's id.
    #[must_use]
    pub fn id(&self) -> &TaskId {
        &self.cell.id
    }

    /// Whether this process holds the task (it took it over, or created it): false after
    /// [`Store::release_task`] until a new handle takes it over again.
    pub(crate) fn is_held(&self) -> bool {
        self.cell.held.load(Ordering::Acquire)
    }

    /// Appends one streamed `assistant/delta` fragment, `Buffered`: no allocation, one lock,
    /// and no syscall unless the log's buffer is due for a write.
    pub fn delta(&self, text: &str) -> Result<Seq> {
        self.delta_revision(text).map(|(seq, _)| seq)
    }

    /// [`Task::delta`], also returning the task's revision after the fragment: exact even
    /// while other threads append to the task (it is assigned under the log's lock).
    pub fn delta_revision(&self, text: &str) -> Result<(Seq, u64)> {
        self.delta_revision_at(text, self.store.now_us())
    }

    /// [`Task::delta_revision`] stamped `now` (the store's clock, read once for fragments
    /// that arrived together: a served fragments line's).
    pub(crate) fn delta_revision_at(&self, text: &str, now: u64) -> Result<(Seq, u64)> {
        check_delta_text(text)?;
        let task = self.cell.id.as_str();
        let len = codec::record_bytes(task, text.len());
        let cell = &*self.cell;
        let inner = &*self.store.inner;
        let mut assigned = 0;
        let seq = inner.log.append_with(len, Durability::Buffered, |seq, out| {
            let revision = cell.revision.load(Ordering::Relaxed) + 1;
            assigned = revision;
            codec::write_delta(out, task, revision, now, text);
            // Every writer of these counters holds the log's lock: a load and a store suffice.
            cell.revision.store(revision, Ordering::Release);
            cell.last_seq.store(seq.0, Ordering::Release);
            cell.last_time_us.store(now, Ordering::Release);
            bump(&cell.deltas, 1);
            bump(&cell.delta_bytes, text.len() as u64);
            bump(&inner.appended_bytes, len as u64);
            Ok(())
        })?;
        Ok((seq, assigned))
    }

    /// Appends one event with its type's default durability.
    pub fn append(&self, body: Body) -> Result<Appended> {
        self.append_with(body, AppendOptions::default())
    }

    /// Appends one event: checks it against the task's state (`format-spec/events.md`, "What
    /// the store refuses"), replaces secrets by references, writes it, waits for its
    /// durability and folds it in.
    pub fn append_with(&self, body: Body, options: AppendOptions) -> Result<Appended> {
        self.append_batch_with(vec![body], options)
    }

    /// Appends `bodies` as one atomic batch: after a crash all of them are in the log or none
    /// is. With `options.expected_revision` the whole batch is a compare-and-set. The batch
    /// waits for the strongest durability among its events.
    pub fn append_batch_with(&self, bodies: Vec<Body>, options: AppendOptions) -> Result<Appended> {
        self.store.append_events(&self.cell, bodies, options, false, None)
    }

    /// As [`Task::append_batch_with`], and also returns the unmarked credential-shaped values
    /// the bodies hold, in order (what `format-spec/protocol.md`, "Warnings", warns about),
    /// found in the bytes the append encodes anyway: a door that warns pays one pass over
    /// them, not a second encoding. Empty when the append is refused.
    pub fn append_batch_warned(
        &self,
        bodies: Vec<Body>,
        options: AppendOptions,
    ) -> Result<(Appended, Vec<secret_shapes::Finding>)> {
        let mut findings = Vec::new();
        let appended =
            self.store.append_events(&self.cell, bodies, options, false, Some(&mut findings))?;
        Ok((appended, findings))
    }
}

impl Store {
    /// Whether some event types wait for a replica ([`StoreOptions::replicated_types`]): an
    /// append may then wait for a shipment (a served store runs appends in a connection's own
    /// thread).
    pub(crate) fn replicates_by_type(&self) -> bool {
        !self.inner.options.replicated_types.is_empty()
    }

    /// Whether one of `bodies` is of a type of [`StoreOptions::replicated_types`] (none by
    /// default: then nothing is looked at).
    fn replicated_by_type(&self, bodies: &[Body]) -> bool {
        let types = &self.inner.options.replicated_types;
        !types.is_empty()
            && bodies.iter().any(|b| b.event_type().is_some_and(|t| types.contains(&t)))
    }

    /// The checked, atomic append of `bodies` to the task of `cell`: the batch is bounded,
    /// each body prepared and encoded, all checked against the task's state under its lock,
    /// written through the compare-and-set gate and folded in; a `Replicated` append then
    /// waits for its replica. `by_recovery` marks a takeover's repair, which skips the caller's
    /// durability and secret policies and the checks recovery itself makes true.
    pub(crate) fn append_events(
        &self,
        cell: &TaskCell,
        mut bodies: Vec<Body>,
        options: AppendOptions,
        by_recovery: bool,
        findings: Option<&mut Vec<secret_shapes::Finding>>,
    ) -> Result<Appended> {
        check_batch_len(bodies.len())?;
        let replica = self.replica_to_wait_for(&bodies, options, by_recovery)?;
        let (encoded, durability) = self.encode_batch(
            cell,
            &mut bodies,
            options,
            by_recovery,
            replica.is_some(),
            findings,
        )?;
        // A `Task` exists only once `Store::task` took its task over (on a writable store).
        debug_assert!(
            by_recovery || cell.held.load(Ordering::Acquire) || self.inner.log.is_read_only()
        );
        let now = self.now_us();
        let mut locked = cell.state.lock();
        if let Some(duplicate) = check_batch(cell, &locked, &bodies, now, by_recovery)? {
            return Ok(duplicate);
        }
        let (first, first_revision) =
            self.write_batch(cell, &encoded, now, options.expected_revision, durability)?;
        // Fold in log order, the task lock still held: the events are durable as asked, or,
        // in a served connection's deferral scope, their sync is owed before any reply.
        let (revision, turn_ended) =
            fold_written(cell, &mut locked, bodies, &encoded, first, first_revision, now);
        drop(locked);
        let last = Seq(first.0 + encoded.len() as u64 - 1);
        self.after_append(last, turn_ended);
        if let Some(progress) = replica {
            // Shipped means synced first, even when a served connection deferred the sync.
            self.inner.log.sync_through(last.0)?;
            progress.wait_shipped(last.0)?;
        }
        Ok(Appended::Written { seq: first, revision })
    }

    /// The replication a `Replicated` append waits for (asked for, or by its event types;
    /// never for recovery's repair): `None` when it is not one; refused when this store is
    /// not replicating, before anything is written.
    fn replica_to_wait_for(
        &self,
        bodies: &[Body],
        options: AppendOptions,
        by_recovery: bool,
    ) -> Result<Option<Arc<Progress>>> {
        let replicated = !by_recovery && (options.replicated || self.replicated_by_type(bodies));
        if !replicated {
            return Ok(None);
        }
        let progress = self.inner.replication.lock().clone();
        let Some(progress) = progress else {
            return Err(ErrorKind::NotReplicated {
                seq: 0,
                reason: "this store is not replicating".to_owned(),
            }
            .into());
        };
        Ok(Some(progress))
    }

    /// Prepares and encodes each body ([`prepare`]) and the durability the batch waits for:
    /// the strongest its events ask for, at least `Synced` when `replicated`; for recovery's
    /// repair, the one it passes (`Synced` if none), as it batches every task's repair and
    /// syncs once at the end.
    fn encode_batch(
        &self,
        cell: &TaskCell,
        bodies: &mut [Body],
        options: AppendOptions,
        by_recovery: bool,
        replicated: bool,
        mut findings: Option<&mut Vec<secret_shapes::Finding>>,
    ) -> Result<(Vec<codec::EncodedBody>, Durability)> {
        let mut durability = if replicated { Durability::Synced } else { Durability::Buffered };
        let mut encoded = Vec::with_capacity(bodies.len());
        // Bodies are written in the schemas of the log's format, so that a format-1 log stays
        // readable by the release that wrote it (`format-spec/events.md`, "Schema versions").
        let format_version = self.inner.log.format_version();
        let refuse_unmarked = (!by_recovery && self.inner.options.refuse_unmarked_secrets)
            .then_some(cell.id.as_str());
        for body in bodies {
            if !by_recovery {
                durability = durability.max(resolve_durability(body, options.durability)?);
            }
            encoded.push(prepare(body, format_version, refuse_unmarked, findings.as_deref_mut())?);
        }
        if by_recovery {
            durability = options.durability.unwrap_or(Durability::Synced);
        }
        Ok((encoded, durability))
    }

    /// Writes the events `encoded` of the task of `cell`, stamped `now`, as one atomic batch at
    /// `durability`, and returns the first one's seq and revision. Under the log's lock, the
    /// gate refuses a revision other than `expected_revision` (compare-and-set), numbers the
    /// records and moves the task's counters, so that revisions follow log order. A single
    /// event is built in the log's buffer itself; a batch's records are built first.
    fn write_batch(
        &self,
        cell: &TaskCell,
        encoded: &[codec::EncodedBody],
        now: u64,
        expected_revision: Option<u64>,
        durability: Durability,
    ) -> Result<(Seq, u64)> {
        let task = cell.id.as_str();
        let bytes: usize =
            encoded.iter().map(|body| codec::record_bytes(task, body.bytes.len())).sum();
        let count = encoded.len() as u64;
        // The first revision of the batch, once the gate let it through.
        let gate = |seq: Seq| -> Result<u64> {
            let current = cell.revision.load(Ordering::Acquire);
            if let Some(expected) = expected_revision
                && expected != current
            {
                return Err(ErrorKind::StaleRevision {
                    task: task.to_owned(),
                    expected,
                    actual: current,
                }
                .into());
            }
            cell.revision.store(current + count, Ordering::Release);
            cell.last_seq.store(seq.0 + count - 1, Ordering::Release);
            bump(&self.inner.appended_bytes, bytes as u64);
            Ok(current + 1)
        };
        let mut first_revision = 0;
        let first = if let [body] = encoded {
            self.inner.log.append_with(bytes, durability, |seq, out| {
                debug_assert_eq!(out.len(), bytes, "the log hands the record's exact length");
                first_revision = gate(seq)?;
                codec::write_parts(out, task, first_revision, now, body);
                Ok(())
            })?
        } else {
            let mut records: Vec<Vec<u8>> =
                encoded.iter().map(|body| codec::encode_parts(task, 0, now, body)).collect();
            self.inner.log.append_batch_with(&mut records, durability, |seq, records| {
                first_revision = gate(seq)?;
                for (i, record) in records.iter_mut().enumerate() {
                    codec::set_revision(record, first_revision + i as u64);
                }
                Ok(())
            })?
        };
        Ok((first, first_revision))
    }

    /// The snapshot policy: counts what was appended and writes a snapshot when one is due.
    fn after_append(&self, last: Seq, turn_ended: bool) {
        let inner = &self.inner;
        if turn_ended && inner.options.snapshot_at_turn_end {
            inner.turn_ended_since_snapshot.store(true, Ordering::Release);
        }
        if inner.snapshot_due(last.0) {
            match &inner.snapshotter {
                Some(snapshotter) => snapshotter.request(),
                None => {
                    inner.write_policy_snapshot(false);
                }
            }
        }
    }
}

/// Checks the text of an `assistant/delta` fragment against its bound: what
/// [`Task::delta`] refuses, and what a client of a served store refuses before sending.
pub(crate) fn check_delta_text(text: &str) -> Result<()> {
    if text.len() > DELTA_TEXT_BYTES_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "assistant/delta text bytes",
            value: text.len() as u64,
            limit: DELTA_TEXT_BYTES_MAX as u64,
        }
        .into());
    }
    Ok(())
}

/// Refuses an empty batch or one of more than [`EVENT_BATCH_MAX`] events.
fn check_batch_len(len: usize) -> Result<()> {
    if len == 0 || len > EVENT_BATCH_MAX {
        return Err(ErrorKind::LimitExceeded {
            what: "events in one batch (at least 1)",
            value: len as u64,
            limit: EVENT_BATCH_MAX as u64,
        }
        .into());
    }
    Ok(())
}

/// Checks each of `bodies` against the task's state `locked` as the batch's earlier events
/// leave it (`harness/check.rs`). A lone `tool/call` whose call already completed is not
/// written: its first result is returned as [`Appended::Duplicate`]; in a batch of more, such
/// a call is refused.
fn check_batch(
    cell: &TaskCell,
    locked: &TaskState,
    bodies: &[Body],
    now: u64,
    by_recovery: bool,
) -> Result<Option<Appended>> {
    let mut scratch: Option<TaskState> = None;
    for (i, body) in bodies.iter().enumerate() {
        let view = scratch.as_ref().unwrap_or(locked);
        match check::check(&cell.id, view, body, now, by_recovery)? {
            Verdict::Write => {}
            Verdict::Duplicate { call_id, receipt, result_seq } if bodies.len() == 1 => {
                return Ok(Some(Appended::Duplicate {
                    call_id,
                    receipt,
                    result_seq: Seq(result_seq),
                    revision: cell.revision.load(Ordering::Acquire),
                }));
            }
            Verdict::Duplicate { call_id, .. } => {
                return Err(ErrorKind::InvalidEvent {
                    event_type: EventType::ToolCall.name().to_owned(),
                    reason: format!(
                        "call {:?} already completed; a batch cannot hold a duplicate \
                         dispatch: send it alone to get its receipt",
                        call_id.0
                    ),
                }
                .into());
            }
        }
        if bodies.len() > 1 && i + 1 < bodies.len() {
            let state = scratch.get_or_insert_with(|| check::batch_view(locked, bodies));
            fold::apply_to_task(state, &probe_event(&cell.id, body.clone(), now));
        }
    }
    Ok(None)
}

/// Folds the events just written (`encoded`, from seq `first` and revision `first_revision`)
/// into the task's state `locked`, in log order; returns the task's revision after them and
/// whether one ended a turn.
fn fold_written(
    cell: &TaskCell,
    locked: &mut TaskState,
    bodies: Vec<Body>,
    encoded: &[codec::EncodedBody],
    first: Seq,
    first_revision: u64,
    now: u64,
) -> (u64, bool) {
    let mut revision = 0;
    let mut turn_ended = false;
    for (i, (body, codec::EncodedBody { schema, .. })) in
        bodies.into_iter().zip(encoded).enumerate()
    {
        revision = first_revision + i as u64;
        turn_ended |= matches!(body, Body::TurnEnd(_));
        let event = Event {
            seq: Seq(first.0 + i as u64),
            task: cell.id.clone(),
            revision,
            timestamp_us: now,
            schema: *schema,
            body,
        };
        fold::apply_to_task(locked, &event);
    }
    (revision, turn_ended)
}

/// Adds `n` to a counter whose every writer holds the log's writer lock.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Release);
}

fn probe_event(task: &TaskId, body: Body, now: u64) -> Event {
    Event { seq: Seq(0), task: task.clone(), revision: 0, timestamp_us: now, schema: 1, body }
}

/// The durability of `body`: the type's default, or the caller's if it is not less than
/// `Synced` for a high-risk type.
fn resolve_durability(body: &Body, asked: Option<Durability>) -> Result<Durability> {
    let Some(event_type) = body.event_type() else { return Ok(Durability::Synced) };
    let default = event_type.default_durability();
    match asked {
        None => Ok(default),
        Some(asked) if event_type.is_high_risk() && asked < default => {
            Err(ErrorKind::InvalidEvent {
                event_type: event_type.name().to_owned(),
                reason: format!(
                    "a {} event is high-risk and must be synced; {asked} was asked for",
                    event_type.name()
                ),
            }
            .into())
        }
        Some(asked) => Ok(asked),
    }
}

/// Replaces secrets by references and fills a `tool/call`'s argument digest.
/// Returns the body's encoding for a log of segment format `format_version`
/// (`codec::encode_body`). With `refuse_unmarked` (the task's id), a body holding an unmarked
/// credential-shaped value is refused ([`ErrorKind::UnmarkedSecret`]); `findings` collects
/// such values instead, for a warning.
fn prepare(
    body: &mut Body,
    format_version: u16,
    refuse_unmarked: Option<&str>,
    findings: Option<&mut Vec<secret_shapes::Finding>>,
) -> Result<codec::EncodedBody> {
    let Some(event_type) = body.event_type() else {
        return codec::encode_body(body, format_version);
    };
    if event_type == EventType::AssistantDelta {
        return codec::encode_body(body, format_version);
    }
    if let Body::ToolCall(call) = body {
        fill_args_digest(call)?;
    }
    let encoded = codec::encode_body(body, format_version)?;
    check_unmarked_secrets(&encoded, event_type, refuse_unmarked, findings)?;
    // Most bodies hold no secret: the JSON text tells without building a tree of values (a
    // blob's marks can be only in its head: its bytes are nobody's JSON).
    if !secret::json_mentions_secret(codec::json_text(&encoded)) {
        return Ok(encoded);
    }
    let mut value = codec::body_to_value(body);
    if secret::redact(&mut value) == 0 {
        return Ok(encoded);
    }
    *body = codec::body_from_value(event_type, value).map_err(|e| {
        Error::from(ErrorKind::InvalidEvent {
            event_type: event_type.name().to_owned(),
            reason: format!("a secret replaced a field of the wrong type: {e}"),
        })
    })?;
    codec::encode_body(body, format_version)
}

/// Fills a `tool/call`'s argument digest from its arguments, or refuses a digest the caller
/// sent that is not theirs.
fn fill_args_digest(call: &mut ToolCall) -> Result<()> {
    let Some(args) = &call.args else { return Ok(()) };
    // Over the arguments with every secret masked: stable across dispatches, and it
    // reveals nothing about a secret.
    let mut masked = args.clone();
    secret::mask(&mut masked);
    let digest = request_key::args_digest(&masked);
    // A digest the caller sent must be the one of its arguments: the call-id and
    // duplicate checks compare digests, so a wrong one would pass a changed request off
    // as the same.
    if let Some(given) = &call.args_digest
        && *given != digest
    {
        return Err(ErrorKind::InvalidEvent {
            event_type: EventType::ToolCall.name().to_owned(),
            reason: format!(
                "args_digest {given:?} is not the digest of args ({digest}); leave \
                 args_digest out and the store computes it"
            ),
        }
        .into());
    }
    call.args_digest = Some(digest);
    Ok(())
}

/// The unmarked credential-shaped values of an encoded body: refused with `refuse_unmarked`
/// (the task's id), else collected into `findings` for a warning, when either is asked for.
fn check_unmarked_secrets(
    encoded: &codec::EncodedBody,
    event_type: EventType,
    refuse_unmarked: Option<&str>,
    findings: Option<&mut Vec<secret_shapes::Finding>>,
) -> Result<()> {
    let found = if refuse_unmarked.is_some() || findings.is_some() {
        secret_shapes::find_in_encoded(encoded)
    } else {
        Vec::new()
    };
    if let Some(task) = refuse_unmarked
        && let Some(finding) = found.first().cloned()
    {
        return Err(ErrorKind::UnmarkedSecret {
            task: task.to_owned(),
            event_type: event_type.name().to_owned(),
            path: finding.path,
            shape: finding.shape,
        }
        .into());
    }
    if let Some(findings) = findings {
        findings.extend(found);
    }
    Ok(())
}
