//! `factlog info`: the segments, sequence range and durable sequence number of a log, read
//! through a read-only open (no lock, nothing written; works on a full disk).
//!
//! A read-only open runs the same recovery analysis as a writer open, so `info` also says what
//! a writer open would cut from a torn tail.
//!
//! For a store it also shows the snapshot files (each decoded to say whether it is valid) and
//! the tasks (id, revision, last seq) through a read-only store open. The newest snapshot is
//! the one that open loads and decodes when it is usable, so it is not decoded twice; the
//! older ones are decoded on other threads meanwhile. The tasks' revisions and last seqs are
//! read without folding their states (`Store::task_revision`). A log whose first record
//! is not an event (written by `factlog append`) has no tasks: they are skipped with a note,
//! and the exit code is 0. A store that cannot be folded because it is damaged is reported
//! the same way, then the exit code is 3 (damaged data) with one line on standard error
//! pointing to `factlog salvage`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use factlog::fs::RealFs;
use factlog::harness::codec;
use factlog::harness::snapshot::{self, SnapshotFile};
use factlog::protocol::time::format_rfc3339;
use factlog::replica::shipped::{self, Found, Shipped};
use factlog::{Log, LogInfo, Options, Seq, Store, StoreOptions, TailCut};
use serde_json::{Value, json};

use crate::progress::{Progress, Unit};
use crate::purge::{CheckedSnapshot, check_snapshot};
use crate::{
    EXIT_DAMAGED, Failure, InfoArgs, Outcome, Output, exit_code_of, library_failure, open_failure,
    require_store,
};
use factlog::engine::counting_fs::CountingFs;
use factlog::error::counted;

/// One task of a store, as `info` shows it.
struct TaskLine {
    id: String,
    revision: u64,
    last_seq: u64,
}

/// The tasks of the store, or why there are none to show.
type Tasks = Result<Vec<TaskLine>, String>;

/// Why a store shows no tasks: the note, and the error behind it if any.
type NoTasks = (String, Option<factlog::Error>);

pub fn run(args: &InfoArgs) -> Outcome {
    let (fs, counters) = CountingFs::new();
    let progress = Progress::new("info: reading the store", None, Unit::Bytes, false);
    let gathered = progress.while_running(|| counters.mapped_bytes_done(), || gather(args, &fs));
    progress.finish();
    let (info, tail_cut, snapshots, (tasks, damage)) = gathered?;
    let tail_cut = tail_cut.as_ref();
    let mut out = Output::new();
    if args.json {
        writeln!(out, "{}", info_json(&info, tail_cut, &snapshots, &tasks));
    } else {
        print_text(&mut out, &info, tail_cut);
        print_store_text(&mut out, &info, &snapshots, &tasks);
        print_replicas_text(&mut out, &info);
    }
    out.finish()?;
    match damage {
        Some(error) => Err(Failure::new(
            EXIT_DAMAGED,
            format_args!(
                "{} is damaged: {error}; copy every intact record into a new store with \
                 `factlog salvage {} --to NEWDIR`",
                args.dir.display(),
                args.dir.display()
            ),
        )),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// What `info` shows, read through `fs`.
type Gathered = (LogInfo, Option<TailCut>, Vec<CheckedSnapshot>, (Tasks, Option<factlog::Error>));

fn gather(args: &InfoArgs, fs: &Arc<CountingFs>) -> Result<Gathered, Failure> {
    require_store(&args.dir)?;
    let log = Log::open_read_only(&args.dir, Options::new().fs(fs.clone()))
        .map_err(|error| open_failure(&args.dir, &error))?;
    let info = log.info().map_err(|error| library_failure("info", &error))?;
    let tail_cut = log.recovery_report().tail_cut.clone();
    let mut files = snapshot::list(&RealFs, &args.dir)
        .map_err(|error| library_failure("cannot list the snapshots", &error))?;
    // Every snapshot is decoded to say whether it is valid, as `Store::purge` judges them; the
    // older ones on other threads while the store opens, and the newest by that open, which
    // loads and decodes it in full when it is usable (else it is decoded here).
    let newest = files.pop();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len());
    let (older, (tasks, loaded)) = std::thread::scope(|scope| {
        let mut shares: Vec<Vec<SnapshotFile>> = vec![Vec::new(); threads];
        for (i, file) in files.into_iter().enumerate() {
            shares[i % threads].push(file);
        }
        let workers: Vec<_> = shares
            .into_iter()
            .map(|share| scope.spawn(|| share.into_iter().map(check_snapshot).collect::<Vec<_>>()))
            .collect();
        let tasks = tasks(&args.dir, &log, &info, fs);
        let mut older: Vec<CheckedSnapshot> = workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a snapshot check does not panic"))
            .collect();
        older.sort_by_key(|checked| checked.file.covered_seq);
        (older, tasks)
    });
    let mut snapshots = older;
    if let Some(newest) = newest {
        snapshots.push(if loaded.as_deref() == Some(newest.path.as_path()) {
            CheckedSnapshot { file: newest, error: None }
        } else {
            check_snapshot(newest)
        });
    }
    Ok((info, tail_cut, snapshots, tasks))
}

/// The tasks, through a read-only store open, if the log holds events; and the damage that
/// kept the store from opening, if that was why. Also the snapshot file that open loaded.
fn tasks(
    dir: &Path,
    log: &Log,
    info: &LogInfo,
    fs: &Arc<CountingFs>,
) -> ((Tasks, Option<factlog::Error>), Option<PathBuf>) {
    match store_tasks(dir, log, info, fs) {
        Ok((tasks, loaded)) => ((Ok(tasks), None), loaded),
        Err((note, error)) => {
            let damage = error.filter(|error| exit_code_of(error) == EXIT_DAMAGED);
            ((Err(note), damage), None)
        }
    }
}

/// [`tasks`]: the task lines and the snapshot file the open loaded, or the note saying why
/// there are none and the error behind it.
fn store_tasks(
    dir: &Path,
    log: &Log,
    info: &LogInfo,
    fs: &Arc<CountingFs>,
) -> Result<(Vec<TaskLine>, Option<PathBuf>), NoTasks> {
    let Some(first) = info.first_seq else { return Ok((Vec::new(), None)) };
    let mut reader =
        log.read_from(first).map_err(|error| (format!("cannot read the log: {error}"), None))?;
    match reader.next() {
        None => return Ok((Vec::new(), None)),
        Some(Err(error)) => return Err((format!("cannot read the log: {error}"), Some(error))),
        Some(Ok(record)) if codec::peek(record.seq, &record.payload).is_err() => {
            let note = "the log holds raw records, not events: it is not a store";
            return Err((note.to_owned(), None));
        }
        Some(Ok(_)) => {}
    }
    let options = StoreOptions::new().log(Options::new().fs(fs.clone()));
    let store = Store::open_read_only(dir, options)
        .map_err(|error| (format!("cannot open the store: {error}"), Some(error)))?;
    let loaded = store.open_report().snapshot.as_ref().map(|meta| meta.path.clone());
    let tasks = store
        .task_ids()
        .into_iter()
        .filter_map(|id| {
            // Without folding the task: the open counted both from the envelopes.
            let (revision, last_seq) = store.task_revision(id.as_str())?;
            Some(TaskLine { id: id.as_str().to_owned(), revision, last_seq })
        })
        .collect();
    Ok((tasks, loaded))
}

/// The last seq of each segment (`None` for an empty one): the next one's first seq - 1, or the
/// log's last seq for the active one.
fn segment_last_seqs(info: &LogInfo) -> Vec<Option<u64>> {
    let log_last = info.last_seq.map_or(0, |seq| seq.0);
    (0..info.segments.len())
        .map(|i| {
            let first = info.segments[i].first_seq.0;
            let end = info.segments.get(i + 1).map_or(log_last, |next| next.first_seq.0 - 1);
            (end >= first).then_some(end)
        })
        .collect()
}

fn print_store_text(
    out: &mut Output,
    info: &LogInfo,
    snapshots: &[CheckedSnapshot],
    tasks: &Tasks,
) {
    let segment_bytes: u64 = info.segments.iter().map(|segment| segment.file_bytes).sum();
    writeln!(out, "segment bytes: {segment_bytes}");
    if let Some(first) = info.segments.first().map(|segment| segment.first_seq)
        && first.0 > 1
    {
        writeln!(out, "reclaimed: seqs 1..={} (the log starts at seq {})", first.0 - 1, first.0);
    }
    let snapshot_bytes: u64 = snapshots.iter().map(|s| s.file.file_bytes).sum();
    writeln!(out, "snapshots: {} ({snapshot_bytes} bytes)", snapshots.len());
    for checked in snapshots {
        let validity = checked
            .error
            .as_deref()
            .map_or_else(|| "valid".to_owned(), |reason| format!("not valid: {reason}"));
        writeln!(
            out,
            "  snapshot {}: covers seq {}, {} bytes, {validity}",
            checked.file.path.display(),
            checked.file.covered_seq.0,
            checked.file.file_bytes
        );
    }
    match tasks {
        Ok(tasks) => {
            writeln!(out, "tasks: {}", tasks.len());
            for task in tasks {
                writeln!(
                    out,
                    "  task {}: revision {}, last seq {}",
                    task.id, task.revision, task.last_seq
                );
            }
        }
        Err(note) => writeln!(out, "tasks: skipped ({note})"),
    }
}

fn seq_text(seq: Option<Seq>) -> String {
    seq.map_or_else(|| "none".to_owned(), |seq| seq.0.to_string())
}

fn print_text(out: &mut Output, info: &LogInfo, tail_cut: Option<&TailCut>) {
    writeln!(out, "dir: {}", info.dir.display());
    writeln!(out, "format version: {}", info.format_version);
    writeln!(out, "segments: {}", info.segments.len());
    for segment in &info.segments {
        let state = if segment.sealed { "sealed" } else { "active" };
        writeln!(
            out,
            "  segment {} {}: first seq {}, {} bytes, {state}",
            segment.id.0,
            segment.path.display(),
            segment.first_seq.0,
            segment.file_bytes
        );
    }
    match (info.first_seq, info.last_seq) {
        (Some(first), Some(last)) => writeln!(out, "seqs: {}..={}", first.0, last.0),
        _ => writeln!(out, "seqs: none"),
    }
    writeln!(out, "durable seq: {}", seq_text(info.durable_seq));
    for kept in kept_tails(info) {
        writeln!(out, "kept tail: {kept} (bytes an open cut; `factlog salvage` reads them back)");
    }
    if let Some(cut) = tail_cut {
        writeln!(
            out,
            "torn tail: segment {} ({}) at offset {}: {}, which a writer open would cut",
            cut.segment.0,
            cut.path.display(),
            cut.offset,
            counted(cut.bytes, "byte")
        );
    }
}

/// The torn tails an open kept aside before cutting them (`format-spec/mark.md`).
fn kept_tails(info: &LogInfo) -> Vec<String> {
    let kept = factlog::engine::torn::list(&RealFs, &info.dir).unwrap_or_default();
    kept.iter().map(|path| path.display().to_string()).collect()
}

fn info_json(
    info: &LogInfo,
    tail_cut: Option<&TailCut>,
    snapshots: &[CheckedSnapshot],
    tasks: &Tasks,
) -> Value {
    let segments: Vec<Value> = info
        .segments
        .iter()
        .zip(segment_last_seqs(info))
        .map(|(segment, last_seq)| {
            json!({
                "id": segment.id.0,
                "path": segment.path.display().to_string(),
                "first_seq": segment.first_seq.0,
                "last_seq": last_seq,
                "file_bytes": segment.file_bytes,
                "sealed": segment.sealed,
            })
        })
        .collect();
    let snapshot_values: Vec<Value> = snapshots
        .iter()
        .map(|checked| {
            json!({
                "path": checked.file.path.display().to_string(),
                "covered_seq": checked.file.covered_seq.0,
                "file_bytes": checked.file.file_bytes,
                "valid": checked.error.is_none(),
                "error": checked.error,
            })
        })
        .collect();
    let (task_values, tasks_note) = match tasks {
        Ok(tasks) => {
            let values: Vec<Value> = tasks
                .iter()
                .map(|task| {
                    json!({ "id": task.id, "revision": task.revision, "last_seq": task.last_seq })
                })
                .collect();
            (Value::from(values), Value::Null)
        }
        Err(note) => (Value::Null, Value::from(note.as_str())),
    };
    let reclaimed_through =
        info.segments.first().map(|segment| segment.first_seq.0 - 1).filter(|through| *through > 0);
    let torn_tail = tail_cut.map_or(Value::Null, |cut| {
        json!({
            "segment": cut.segment.0,
            "path": cut.path.display().to_string(),
            "offset": cut.offset,
            "bytes": cut.bytes,
        })
    });
    json!({
        "dir": info.dir.display().to_string(),
        "format_version": info.format_version,
        "segments": segments,
        "first_seq": info.first_seq.map(|seq| seq.0),
        "last_seq": info.last_seq.map(|seq| seq.0),
        "durable_seq": info.durable_seq.map(|seq| seq.0),
        "torn_tail": torn_tail,
        "kept_tails": kept_tails(info),
        "reclaimed_through": reclaimed_through,
        "segment_bytes": info.segments.iter().map(|segment| segment.file_bytes).sum::<u64>(),
        "snapshots": snapshot_values,
        "snapshot_bytes": snapshots.iter().map(|s| s.file.file_bytes).sum::<u64>(),
        "tasks": task_values,
        "tasks_skipped": tasks_note,
        "replicas": replicas_json(info),
    })
}

/// The records the store holds past what a replica holds.
fn lag(info: &LogInfo, shipped: &Shipped) -> u64 {
    info.last_seq.map_or(0, |seq| seq.0).saturating_sub(shipped.shipped_seq)
}

/// What each replication of the store last said it shipped (`format-spec/replication.md`,
/// "The shipped file"), with its lag behind this store's last seq.
fn replicas_json(info: &LogInfo) -> Value {
    let found = shipped::read_all(&RealFs, &info.dir);
    let values: Vec<Value> = found
        .iter()
        .map(|found| match found {
            Found::Read(shipped) => json!({
                "replica_id": shipped.replica_id,
                "location": shipped.location,
                "shipped_seq": shipped.shipped_seq,
                "lag": lag(info, shipped),
                "updated_us": shipped.updated_us,
                "pid": shipped.pid,
                "running": shipped.running,
                "last_error": shipped.last_error,
            }),
            Found::Unreadable { path, reason } => json!({
                "path": path.display().to_string(),
                "unreadable": reason,
            }),
        })
        .collect();
    Value::from(values)
}

fn print_replicas_text(out: &mut Output, info: &LogInfo) {
    for found in shipped::read_all(&RealFs, &info.dir) {
        match found {
            Found::Read(shipped) => {
                let state = if shipped.running {
                    format!("replicating in pid {}", shipped.pid)
                } else {
                    "stopped".to_owned()
                };
                let error = shipped
                    .last_error
                    .as_deref()
                    .map_or_else(String::new, |error| format!("; its last round failed: {error}"));
                writeln!(
                    out,
                    "replica {} ({}): holds seqs through {}, {} behind this store ({state}, as \
                     of {}){error}",
                    shipped.location,
                    shipped.replica_id,
                    shipped.shipped_seq,
                    counted(lag(info, &shipped), "record"),
                    format_rfc3339(shipped.updated_us)
                );
            }
            Found::Unreadable { path, reason } => {
                writeln!(out, "replica status {}: {reason}", path.display());
            }
        }
    }
}
