//! `factlog migrate` is crash-safe: on the simulated file system a migration of a format-1 store
//! (several segments, a snapshot, rewritten and untouched records) is crashed at every I/O
//! operation under each crash model, and failed at every operation with each fault (EIO,
//! ENOSPC, a short write). Every time, the store then opens as wholly old (format 1, the same
//! records byte for byte) or wholly new (format 2, the same events, one audit event per task),
//! never mixed, and migrating again completes it.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use common::harness::{NOW_US, fixed_clock};
use factlog::fs::sim::{CrashModel, Fault, SimFs};
use factlog::harness::codec;
use factlog::harness::event::{
    Effect, ResultOutcome, StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart,
};
use factlog::harness::migrate::{MigrateOptions, migrate};
use factlog::harness::{Body, Event, EventType};
use factlog::{Options, Seq, Store, StoreOptions};

const DIR: &str = "/data/store";

fn options(fs: &SimFs, format: u16) -> StoreOptions {
    StoreOptions::new().clock(fixed_clock).log(
        Options::new()
            .segment_bytes(8192)
            .buffer_bytes(4096)
            .background_threads(false)
            .new_log_format_version(format)
            .fs(Arc::new(fs.clone())),
    )
}

fn to_2() -> MigrateOptions {
    MigrateOptions { to: 2, dry_run: false, backup: None }
}

/// A closed format-1 store: three tasks, tool results ok and failed, a snapshot, several
/// segments.
fn base() -> SimFs {
    let fs = SimFs::new(11);
    let store = Store::open(DIR, options(&fs, 1)).unwrap();
    for round in 0..6 {
        for task in ["a", "b", "c"] {
            let t = store.task(task).unwrap();
            t.append(Body::TurnStart(TurnStart::default())).unwrap();
            t.append(Body::StepStart(StepStart::default())).unwrap();
            for word in ["some", " streamed", " tokens"] {
                t.delta(word).unwrap();
            }
            let call_id = format!("{task}-{round}");
            t.append(Body::ToolCall(ToolCall {
                call_id: call_id.as_str().into(),
                tool: "search".into(),
                effect: Effect::ReadOnly,
                ..Default::default()
            }))
            .unwrap();
            let failed = round % 2 == 1;
            t.append(Body::ToolResult(ToolResult {
                call_id: call_id.as_str().into(),
                outcome: if failed { ResultOutcome::Error } else { ResultOutcome::Ok },
                error: failed.then(|| "rate limited".to_owned()),
                output: Some(serde_json::json!({"hits": round, "text": "result ".repeat(40)})),
                ..Default::default()
            }))
            .unwrap();
            t.append(Body::StepEnd(StepEnd::default())).unwrap();
            t.append(Body::TurnEnd(TurnEnd::default())).unwrap();
        }
        if round == 1 {
            store.checkpoint().unwrap();
        }
    }
    store.close().unwrap();
    fs
}

/// A fresh machine holding exactly what `fs` holds.
fn copy(fs: &SimFs) -> SimFs {
    fs.reboot(CrashModel::ProcessCrash, 0)
}

struct Before {
    events: Vec<Event>,
    raw: Vec<Vec<u8>>,
    tasks: usize,
}

fn read(store: &Store) -> (Vec<Event>, Vec<Vec<u8>>) {
    let events = store.events(Seq(1)).unwrap().map(Result::unwrap).collect();
    let mut raw = Vec::new();
    let mut reader = store.log().read_from(Seq(1)).unwrap();
    while let Some(record) = reader.next_ref() {
        raw.push(record.unwrap().1.to_vec());
    }
    (events, raw)
}

/// Opens the store on `fs` and checks that it is wholly old or wholly new; returns its format.
fn check_whole(fs: &SimFs, before: &Before, context: &str) -> u16 {
    let store = Store::open(DIR, options(fs, 1)).unwrap_or_else(|e| panic!("{context}: {e}"));
    let names = fs.files();
    assert!(
        !names.iter().any(|p| p.starts_with(DIR) && {
            let n = p.file_name().unwrap().to_string_lossy();
            n.ends_with(".new") || n.starts_with("REWRITE")
        }),
        "{context}: leftovers after a writable open: {names:?}"
    );
    let (events, raw) = read(&store);
    let format = store.log().format_version();
    match format {
        1 => {
            assert_eq!(raw, before.raw, "{context}: an old store is the old bytes");
        }
        2 => {
            let n = before.events.len();
            assert_eq!(events.len(), n + before.tasks, "{context}: events and one audit per task");
            assert_eq!(&events[..n], &before.events[..], "{context}: the same events");
            for (i, record) in raw[..n].iter().enumerate() {
                let env = codec::peek(Seq(i as u64 + 1), record).unwrap();
                if env.tag == EventType::ToolResult.tag() {
                    assert_eq!(env.schema, 2, "{context}: seq {} at schema 2", i + 1);
                } else {
                    assert_eq!(record, &before.raw[i], "{context}: seq {} kept", i + 1);
                }
            }
        }
        other => panic!("{context}: format {other}"),
    }
    store.close().unwrap();
    format
}

fn before(fs: &SimFs) -> Before {
    let store = Store::open(DIR, options(fs, 1)).unwrap();
    let (events, raw) = read(&store);
    let tasks = store.task_ids().len();
    drop(store);
    Before { events, raw, tasks }
}

/// The operations a clean migration of the base store makes.
fn migration_ops(base: &SimFs) -> u64 {
    let fs = copy(base);
    let start = fs.ops();
    let report = migrate(DIR, options(&fs, 1), &to_2()).unwrap();
    assert!(report.segments >= 2, "{report:?}");
    assert_eq!(report.rewritten, 18, "every tool/result is rewritten: {report:?}");
    assert!(fs.files().iter().any(|p| p.starts_with("/data/store/snapshots")));
    fs.ops() - start
}

#[test]
fn a_crash_at_any_operation_leaves_a_store_that_is_wholly_old_or_wholly_new() {
    let base = base();
    let before = before(&copy(&base));
    let ops = migration_ops(&base);
    assert!(ops > 25, "{ops} operations");
    let mut outcomes = [0u64; 3];
    for model in [CrashModel::ProcessCrash, CrashModel::LoseUnsynced, CrashModel::TornSectors] {
        for k in 0..ops {
            let fs = copy(&base);
            fs.crash_at(fs.ops() + k);
            let result = migrate(DIR, options(&fs, 1), &to_2());
            assert!(fs.is_down() || result.is_ok(), "{model:?} at {k}: {result:?}");
            let rebooted = fs.reboot(model, k);
            let context = format!("{model:?}, crash at operation {k} of {ops}");
            let format = check_whole(&rebooted, &before, &context);
            outcomes[usize::from(format)] += 1;
            // Migrating again completes it (or finds it done).
            let again = migrate(DIR, options(&rebooted, 1), &to_2())
                .unwrap_or_else(|e| panic!("{context}: migrating again: {e}"));
            assert_eq!(again.already_current, format == 2, "{context}");
            assert_eq!(check_whole(&rebooted, &before, &context), 2, "{context}");
        }
    }
    // Both outcomes happen: crashes before the commit point and after it.
    assert!(outcomes[1] > 0 && outcomes[2] > 0, "{outcomes:?}");
    eprintln!("{ops} operations x 3 models: {} old, {} new", outcomes[1], outcomes[2]);
}

#[test]
fn a_failed_operation_at_any_point_leaves_a_whole_store_and_a_clear_error() {
    let base = base();
    let before = before(&copy(&base));
    let ops = migration_ops(&base);
    for fault in [Fault::Eio, Fault::NoSpace, Fault::ShortWrite] {
        for k in 0..ops {
            let fs = copy(&base);
            fs.inject(fs.ops() + k, fault);
            let context = format!("{fault:?} at operation {k} of {ops}");
            if let Err(e) = migrate(DIR, options(&fs, 1), &to_2()) {
                let message = e.to_string();
                assert!(!message.is_empty() && !message.contains("panicked"), "{context}");
            }
            // The process goes on (or restarts): the store is whole either way.
            check_whole(&fs, &before, &context);
            check_whole(&copy(&fs), &before, &format!("{context}, after a restart"));
            migrate(DIR, options(&fs, 1), &to_2())
                .unwrap_or_else(|e| panic!("{context}: migrating again: {e}"));
            assert_eq!(check_whole(&fs, &before, &context), 2, "{context}");
        }
    }
}

#[test]
fn the_backup_holds_the_old_store() {
    let fs = copy(&base());
    let before = before(&copy(&fs));
    let report = migrate(DIR, options(&fs, 1), &to_2()).unwrap();
    let backup = report.backup.unwrap();
    assert_eq!(backup, Path::new("/data/store.backup-v1"));
    let old = Store::open_read_only(&backup, options(&fs, 1)).unwrap();
    assert_eq!(old.log().format_version(), 1);
    assert_eq!(read(&old).1, before.raw);
    let _ = NOW_US;
}
