//! `factlog migrate`: rewriting a store into a newer format version (`format-spec/migration.md`).
//!
//! The procedure, in order; each step either completes or leaves the store as it was:
//! 1. Open the store read-only and check in memory, streaming: every event decodes (upcast
//!    where needed), and the events rewritten for the new version fold into the same state,
//!    task by task, with the same recovery plan. An event that cannot be upcast stops here
//!    with its error, and nothing at all has been written.
//! 2. Open the store for writing (its lock is held to the end; a torn tail is cut, as by any
//!    writable open). If the log changed between the two opens, check again under the lock.
//! 3. Copy a backup of the segments and snapshots, and record where.
//! 4. Stage one new segment per old one ([`crate::engine::rewrite`]), with one `state/migrated`
//!    audit event per task appended at the end, and read the staged files back: same events
//!    per task, same state digests, same recovery plans, or nothing is switched.
//! 5. Commit (the marker) and switch (renames), then open the store again to report.
//!
//! A failure in steps 3 and 4 removes the staged files and the backup again.
//!
//! Running it on a store already at the version is a no-op. A crash at any point leaves a
//! store that opens as wholly old or wholly new (the next writable open completes a committed
//! switch).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::engine::rewrite::{self, Marker};
use crate::engine::segment::{FORMAT_VERSION, FORMAT_VERSION_MIN};
use crate::engine::segments;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::{Fs, OpenMode};
use crate::harness::codec;
use crate::harness::event::{Body, EventType, Migrated};
use crate::harness::fold;
use crate::harness::ids::TaskId;
use crate::harness::recovery::{TaskRecovery, plan_task};
use crate::harness::snapshot::SNAPSHOT_DIR_NAME;
use crate::harness::state::{State, TaskState};
use crate::harness::store::{Store, StoreOptions};
use crate::types::Seq;

/// How to migrate.
#[derive(Debug, Clone)]
pub struct MigrateOptions {
    /// The format version to migrate to.
    pub to: u16,
    /// Check and report only: write nothing (the store is opened read-only).
    pub dry_run: bool,
    /// Where to copy the backup. Default: the store's directory name with
    /// `.backup-v{from}` appended (then `-2`, `-3`, ... if taken), beside it.
    pub backup: Option<PathBuf>,
}

/// One task's figures, before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskMigration {
    /// The task.
    pub task: TaskId,
    /// Its events before the migration (the audit event not counted).
    pub events: u64,
    /// Its events whose records were rewritten.
    pub rewritten: u64,
    /// SHA-256 of its folded state (canonical JSON), in hex: equal before and after.
    pub state_digest: String,
}

/// What a migration did (or would do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrationReport {
    /// The store.
    pub dir: PathBuf,
    /// Its format version before.
    pub from: u16,
    /// The version asked for.
    pub to: u16,
    /// True when the store was already at `to`: nothing was done.
    pub already_current: bool,
    /// True for a dry run: nothing was written.
    pub dry_run: bool,
    /// Events in the store before the migration.
    pub events: u64,
    /// Records rewritten (the others were copied byte for byte).
    pub rewritten: u64,
    /// Segments rewritten.
    pub segments: usize,
    /// Per task, sorted by id.
    pub tasks: Vec<TaskMigration>,
    /// Where the backup was copied (none for a dry run or a no-op).
    pub backup: Option<PathBuf>,
}

/// Migrates the store in `dir` to `options.to` (see the module docs for the procedure).
///
/// # Errors
/// [`ErrorKind::InvalidOptions`] for a version this build cannot write or a downgrade;
/// [`ErrorKind::NotALog`] for a directory that holds no store (none is created);
/// [`ErrorKind::CannotUpcast`] (from decoding) for an event the new version cannot represent;
/// [`ErrorKind::MigrationRefused`] when the rewritten store would not mean the same; the
/// errors of opening the store; I/O errors. Before the commit point every failure leaves the
/// store as it was and removes the backup it made; a refusal found by the first check writes
/// nothing at all. [`ErrorKind::MigrationIncomplete`] when the switch was committed but could
/// not be finished: the next writable open completes it.
pub fn migrate(
    dir: impl AsRef<Path>,
    store_options: StoreOptions,
    options: &MigrateOptions,
) -> Result<MigrationReport> {
    let dir = dir.as_ref();
    let to = options.to;
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&to) {
        return Err(Error::invalid_options(format!(
            "--to {to}: this build writes format versions {FORMAT_VERSION_MIN} to \
             {FORMAT_VERSION}; name one of them (a newer version needs a newer factlog)"
        )));
    }
    // Everything that can refuse the migration is checked on a read-only open first, so that
    // a refusal writes nothing at all: no lock file, no preallocated segment, no cut tail.
    let probe = open_probe(dir, &store_options)?;
    let (report, planned) = plan_migration(&probe, dir, options)?;
    let Some(planned) = planned.filter(|_| !options.dry_run) else { return Ok(report) };
    let seen = position(&probe)?;
    drop(probe);
    let store = Store::open(dir, store_options.clone())?;
    // The rewrite reads every segment whole: the torn tail this open found goes first.
    store.log().cut_torn_tail_now()?;
    if position(&store)? == seen {
        return switch(store, store_options, options, report, planned);
    }
    // Another process appended, reclaimed or migrated between the two opens: plan again, now
    // under the lock.
    let (report, planned) = plan_migration(&store, dir, options)?;
    match planned {
        Some(planned) => switch(store, store_options, options, report, planned),
        None => Ok(report),
    }
}

/// The store opened read-only. A switch that was committed but not finished (a crash during
/// an earlier migration) is first completed by a writable open, as any writable open would.
fn open_probe(dir: &Path, store_options: &StoreOptions) -> Result<Store> {
    match Store::open_read_only(dir, store_options.clone()) {
        Err(e) if matches!(e.kind(), ErrorKind::RewritePending { .. }) => {
            Store::open(dir, store_options.clone())?.close()?;
            Store::open_read_only(dir, store_options.clone())
        }
        other => other,
    }
}

/// What identifies the records a plan was made from: the format, the first and the last seq.
fn position(store: &Store) -> Result<(u16, u64, u64)> {
    let log = store.log();
    Ok((log.format_version(), log.first_seq()?.0, log.last_seq().map_or(0, |s| s.0)))
}

/// The report of a migration of `store` as it is now, and the checked plan (`None` when the
/// store is already at the version asked for).
fn plan_migration(
    store: &Store,
    dir: &Path,
    options: &MigrateOptions,
) -> Result<(MigrationReport, Option<Planned>)> {
    let to = options.to;
    let from = store.log().format_version();
    let mut report = MigrationReport {
        dir: dir.to_path_buf(),
        from,
        to,
        already_current: from == to,
        dry_run: options.dry_run,
        events: 0,
        rewritten: 0,
        segments: 0,
        tasks: Vec::new(),
        backup: None,
    };
    if from == to {
        return Ok((report, None));
    }
    if to < from {
        return Err(Error::invalid_options(format!(
            "--to {to}: the store is at format {from}, and migrating to an older version is not \
             supported; restore the backup a migration made instead"
        )));
    }
    let last = store.log().last_seq().map_or(0, |s| s.0);
    let planned = check_in_memory(store, to, last)?;
    report.events = planned.events;
    report.rewritten = planned.rewritten.values().sum();
    report.tasks = task_figures(&planned, &store.state());
    report.segments = segments::list(&*store.inner.fs, dir)?.segments.len();
    Ok((report, Some(planned)))
}

/// Steps 3 to 5 on the store opened for writing, whose records `planned` was checked from.
fn switch(
    store: Store,
    store_options: StoreOptions,
    options: &MigrateOptions,
    mut report: MigrationReport,
    planned: Planned,
) -> Result<MigrationReport> {
    let fs = store.inner.fs.clone();
    let dir = report.dir.clone();
    let (from, to) = (report.from, report.to);
    let last = store.log().last_seq().map_or(0, |s| s.0);
    let listing = segments::list(&*fs, &dir)?;
    let backup = match &options.backup {
        Some(path) => path.clone(),
        None => default_backup(&*fs, &dir, from)?,
    };
    if fs.list_dir(&backup).is_ok_and(|names| !names.is_empty()) {
        return Err(Error::invalid_options(format!(
            "the backup directory {} exists and is not empty: name another with --backup",
            backup.display()
        )));
    }
    // From here on, everything in the backup directory was made by this migration.
    let existed = fs.list_dir(&backup).is_ok();
    let staged = copy_backup(&*fs, &dir, &backup, &listing.segments).and_then(|()| {
        report.backup = Some(backup.clone());
        let audit = audit_records(&store, &report, (store_options.clock)())?;
        stage(&*fs, &listing.segments, to, &audit)?;
        check_staged(&*fs, &dir, to, last, &planned, audit.len())
    });
    if let Err(e) = staged {
        // Nothing was switched: take back what this attempt made. A cleanup that fails
        // leaves only copies and staged files, which the next writable open or migration
        // removes or refuses to overwrite.
        let _ = rewrite::clear_staged(&*fs, &dir);
        remove_backup(&*fs, &backup, existed);
        return Err(e);
    }
    let segments = u32::try_from(listing.segments.len()).unwrap_or(u32::MAX);
    rewrite::commit(&*fs, &dir, Marker { from, to, segments })?;
    let incomplete =
        |e: Error| -> Error { ErrorKind::MigrationIncomplete { reason: e.to_string() }.into() };
    rewrite::finish(&*fs, &dir).map_err(incomplete)?;
    // The open store still maps the old files; it writes nothing on the way out.
    drop(store);
    let reopened = Store::open(&dir, store_options).map_err(incomplete)?;
    let reopened_at = reopened.log().format_version();
    if reopened_at != to {
        return Err(incomplete(refused(format!("the store reopened at format {reopened_at}"))));
    }
    reopened.close().map_err(incomplete)?;
    Ok(report)
}

fn refused(reason: String) -> Error {
    ErrorKind::MigrationRefused { reason }.into()
}

/// The folded states and figures of the old events and of their rewritten records, from the
/// first event the log still holds (all of them unless segments were reclaimed).
struct Planned {
    events: u64,
    per_task: BTreeMap<TaskId, u64>,
    rewritten: BTreeMap<TaskId, u64>,
    old: State,
    new: State,
}

/// The record `payload` becomes at format `to`, or `None` if its bytes stay: only event
/// bodies whose schema differs between the versions are re-encoded.
fn map_record(seq: Seq, payload: &[u8], to: u16) -> Result<Option<Vec<u8>>> {
    let Ok(env) = codec::peek(seq, payload) else { return Ok(None) };
    let Some(event_type) = EventType::from_tag(env.tag) else { return Ok(None) };
    let written = codec::schema_written(event_type, to);
    if env.schema >= written {
        return Ok(None);
    }
    let event = codec::decode(seq, payload)?;
    let body = codec::encode_body(&event.body, to)?;
    Ok(Some(codec::encode_parts(env.task, env.revision, env.timestamp_us, &body)))
}

fn check_in_memory(store: &Store, to: u16, last: u64) -> Result<Planned> {
    let mut planned = Planned {
        events: 0,
        per_task: BTreeMap::new(),
        rewritten: BTreeMap::new(),
        old: State::default(),
        new: State::default(),
    };
    if last > 0 {
        let mut reader = store.log().read_from(store.log().first_seq()?)?;
        while let Some(record) = reader.next_ref() {
            let (seq, payload) = record?;
            if seq.0 > last {
                break;
            }
            let old = codec::decode(seq, payload)?;
            let mapped = map_record(seq, payload, to)?;
            let new = match &mapped {
                Some(bytes) => codec::decode(seq, bytes)?,
                None => old.clone(),
            };
            planned.events += 1;
            *planned.per_task.entry(old.task.clone()).or_default() += 1;
            if mapped.is_some() {
                *planned.rewritten.entry(old.task.clone()).or_default() += 1;
            }
            fold::apply(&mut planned.old, &old);
            fold::apply(&mut planned.new, &new);
        }
    }
    compare(&planned.old, &planned.new, "the rewritten events")?;
    Ok(planned)
}

/// Fails unless `new` means what `old` means: the same tasks, the same state digest and the
/// same recovery plan for each.
fn compare(old: &State, new: &State, what: &str) -> Result<()> {
    if old.tasks.len() != new.tasks.len() {
        return Err(refused(format!(
            "{what} hold {} where the store holds {}",
            crate::error::counted(new.tasks.len() as u64, "task"),
            old.tasks.len()
        )));
    }
    for (id, task) in &old.tasks {
        let Some(other) = new.tasks.get(id) else {
            return Err(refused(format!("{what} lack task {id}")));
        };
        if digest(task) != digest(other) {
            return Err(refused(format!("{what} fold task {id} into another state")));
        }
        if plan(id, task) != plan(id, other) {
            return Err(refused(format!("{what} give task {id} another recovery plan")));
        }
    }
    Ok(())
}

fn plan(id: &TaskId, task: &TaskState) -> (TaskRecovery, usize) {
    let (recovery, bodies) = plan_task(id, task);
    (recovery, bodies.len())
}

/// SHA-256 of the canonical JSON of a task's state, in hex.
#[must_use]
pub fn digest(task: &TaskState) -> String {
    let bytes = serde_json::to_vec(task).unwrap_or_default();
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The figures of every task; the digest is of the store's state (its snapshot and the events
/// after it), which equals the fold of all its events.
fn task_figures(planned: &Planned, state: &State) -> Vec<TaskMigration> {
    state
        .tasks
        .iter()
        .map(|(id, task)| TaskMigration {
            task: id.clone(),
            events: planned.per_task.get(id).copied().unwrap_or(0),
            rewritten: planned.rewritten.get(id).copied().unwrap_or(0),
            state_digest: digest(task),
        })
        .collect()
}

/// One `state/migrated` record per task, revisions following the task's last.
fn audit_records(store: &Store, report: &MigrationReport, now_us: u64) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for figures in &report.tasks {
        let revision = store.task_state(figures.task.as_str()).map_or(0, |t| t.revision) + 1;
        let body = Body::StateMigrated(Migrated {
            from: report.from,
            to: report.to,
            events: figures.events,
            rewritten: figures.rewritten,
            state_digest: figures.state_digest.clone(),
            backup: report.backup.as_ref().map(|p| p.display().to_string()),
            ..Migrated::default()
        });
        out.push(codec::encode(figures.task.as_str(), revision, now_us, &body, report.to)?);
    }
    Ok(out)
}

fn stage(
    fs: &dyn Fs,
    segments: &[segments::SegmentMeta],
    to: u16,
    audit: &[Vec<u8>],
) -> Result<()> {
    for (i, meta) in segments.iter().enumerate() {
        let bytes = fs.map(&meta.path).map_err(|e| Error::io("map", &meta.path, e))?;
        let append = if i + 1 == segments.len() { audit } else { &[] };
        rewrite::stage_segment(fs, meta, &bytes, to, &mut |seq, p| map_record(seq, p, to), append)?;
    }
    Ok(())
}

fn check_staged(
    fs: &dyn Fs,
    dir: &Path,
    to: u16,
    last: u64,
    planned: &Planned,
    audits: usize,
) -> Result<()> {
    let mut state = State::default();
    let mut per_task: BTreeMap<TaskId, u64> = BTreeMap::new();
    let mut audit_seen = 0;
    rewrite::read_staged(fs, dir, to, &mut |seq, payload| {
        let event = codec::decode(seq, payload)?;
        if seq.0 > last {
            let env = codec::peek(seq, payload)?;
            if env.tag != EventType::Migrated.tag() {
                return Err(refused(format!("staged event {} is not an audit event", seq.0)));
            }
            audit_seen += 1;
            return Ok(());
        }
        *per_task.entry(event.task.clone()).or_default() += 1;
        fold::apply(&mut state, &event);
        Ok(())
    })?;
    if per_task != planned.per_task {
        return Err(refused("the staged segments hold other event counts per task".into()));
    }
    if audit_seen != audits {
        return Err(refused(format!(
            "{} staged of {audits}",
            crate::error::counted(audit_seen as u64, "audit event")
        )));
    }
    compare(&planned.old, &state, "the staged segments")
}

fn default_backup(fs: &dyn Fs, dir: &Path, from: u16) -> Result<PathBuf> {
    let name = dir.file_name().map_or_else(|| "store".into(), |n| n.to_string_lossy().into_owned());
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let taken = fs.list_dir(parent).map_err(|e| Error::io("list directory", parent, e))?;
    let base = format!("{name}.backup-v{from}");
    let mut candidate = base.clone();
    let mut n = 1;
    while taken.contains(&candidate) {
        n += 1;
        candidate = format!("{base}-{n}");
    }
    Ok(parent.join(candidate))
}

/// Copies the segments and snapshot files of `dir` into `backup`, a new or empty directory,
/// every file and directory synced.
fn copy_backup(
    fs: &dyn Fs,
    dir: &Path,
    backup: &Path,
    segments: &[segments::SegmentMeta],
) -> Result<()> {
    fs.create_dir_all(backup).map_err(|e| Error::io("create directory", backup, e))?;
    for meta in segments {
        let name = meta.path.file_name().unwrap_or_default();
        copy_file(fs, &meta.path, &backup.join(name))?;
    }
    let snapshots = dir.join(SNAPSHOT_DIR_NAME);
    if let Ok(names) = fs.list_dir(&snapshots) {
        let to = backup.join(SNAPSHOT_DIR_NAME);
        fs.create_dir_all(&to).map_err(|e| Error::io("create directory", &to, e))?;
        for name in names {
            copy_file(fs, &snapshots.join(&name), &to.join(&name))?;
        }
        fs.sync_dir(&to).map_err(|e| Error::io("fsync directory", &to, e))?;
    }
    fs.sync_dir(backup).map_err(|e| Error::io("fsync directory", backup, e))?;
    if let Some(parent) = backup.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs.sync_dir(parent).map_err(|e| Error::io("fsync directory", parent, e))?;
    }
    Ok(())
}

/// Removes the backup of a migration that did not switch: every file in `backup` and its
/// snapshot directory (all made by [`copy_backup`], which started from an empty directory),
/// and `backup` itself unless it existed before (`existed`). Best effort: what is left behind
/// holds only copies.
fn remove_backup(fs: &dyn Fs, backup: &Path, existed: bool) {
    let snapshots = backup.join(SNAPSHOT_DIR_NAME);
    if let Ok(names) = fs.list_dir(&snapshots) {
        for name in names {
            let _ = fs.remove_file(&snapshots.join(name));
        }
        let _ = fs.remove_dir(&snapshots);
    }
    if let Ok(names) = fs.list_dir(backup) {
        for name in names {
            let _ = fs.remove_file(&backup.join(name));
        }
    }
    if !existed {
        let _ = fs.remove_dir(backup);
    }
    if let Some(parent) = backup.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = fs.sync_dir(parent);
    }
}

fn copy_file(fs: &dyn Fs, from: &Path, to: &Path) -> Result<()> {
    const CHUNK_BYTES: u64 = 1 << 20;
    let src = fs.open(from, OpenMode::Read).map_err(|e| Error::io("open", from, e))?;
    let len = src.len().map_err(|e| Error::io("stat", from, e))?;
    let dst = fs.open(to, OpenMode::CreateNew).map_err(|e| Error::io("create", to, e))?;
    let mut buf = vec![0u8; usize::try_from(len.min(CHUNK_BYTES)).unwrap_or(0)];
    let mut at = 0;
    while at < len {
        let n = usize::try_from((len - at).min(CHUNK_BYTES)).unwrap_or(0);
        src.read_exact_at(&mut buf[..n], at).map_err(|e| Error::io("read", from, e))?;
        dst.write_all_at(&buf[..n], at).map_err(|e| Error::io("write", to, e))?;
        at += n as u64;
    }
    dst.sync_data().map_err(|e| Error::io("fdatasync", to, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::state::TaskState;

    fn state_of(tasks: &[(&str, u64)]) -> State {
        let mut state = State::default();
        for &(id, revision) in tasks {
            let task = TaskState { revision, ..TaskState::default() };
            state.tasks.insert(TaskId(id.to_owned()), task);
        }
        state
    }

    #[test]
    fn a_rewrite_that_folds_into_another_state_is_refused_with_the_task_named() {
        let old = state_of(&[("a", 3), ("b", 5)]);
        assert!(compare(&old, &old.clone(), "x").is_ok());
        let kind = |e: Error| match e.into_kind() {
            ErrorKind::MigrationRefused { reason } => reason,
            other => panic!("{other:?}"),
        };
        let changed = state_of(&[("a", 3), ("b", 6)]);
        let reason = kind(compare(&old, &changed, "the staged segments").unwrap_err());
        assert!(reason.contains("task b") && reason.contains("another state"), "{reason}");
        let missing = state_of(&[("a", 3), ("c", 5)]);
        assert!(kind(compare(&old, &missing, "x").unwrap_err()).contains("lack task b"));
        let fewer = state_of(&[("a", 3)]);
        assert!(kind(compare(&old, &fewer, "x").unwrap_err()).contains("hold 1 task where"));
    }
}
