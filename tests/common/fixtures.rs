//! Helpers for the frozen fixture stores of `tests/fixtures/`: their paths, writable copies,
//! their expectations, the stored form of every record, and a digest of a directory tree.

#![allow(dead_code, reason = "each test file uses a different subset of these helpers")]

use std::fs;
use std::path::{Path, PathBuf};

use factlog::harness::codec;
use factlog::{Options, Seq, Store, StoreOptions};
use serde_json::{Value, json};

/// The fixtures every release must open (the free-text one must be refused).
pub const OPENABLE: [&str; 4] =
    ["v1-clean-multi-task", "v1-torn-tail", "v1-open-call", "v1-unknown-data"];

/// The folder of fixture `name`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Copies the file or directory tree `from` to `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        fs::copy(from, to).unwrap();
    }
}

/// A temporary directory holding a writable copy of the fixture's store in `store/`.
pub fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    copy_tree(&fixture(name).join("store"), &dir);
    (tmp, dir)
}

/// The options the fixtures were written with (8 KiB segments, no background threads).
pub fn options() -> StoreOptions {
    StoreOptions::new().log(Options::new().segment_bytes(8192).background_threads(false))
}

/// `expected/FILE` of fixture `name`, as JSON.
pub fn expected(name: &str, file: &str) -> Value {
    let text = fs::read_to_string(fixture(name).join("expected").join(file)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A folded state's JSON without the fields state schema 2 added (`last_time_us`,
/// `unknown_seq`, `requested_seq`, `paused_seq`, `answers`: `format-spec/snapshot.md`), to
/// compare with what the release that wrote a fixture folded.
pub fn state_as_v1(mut state: Value) -> Value {
    if let Some(Value::Object(tasks)) = state.get_mut("tasks") {
        for task in tasks.values_mut() {
            let Value::Object(task) = task else { continue };
            task.remove("last_time_us");
            if let Some(Value::Object(calls)) =
                task.get_mut("session").and_then(|s| s.get_mut("calls"))
            {
                for call in calls.values_mut() {
                    if let Value::Object(call) = call {
                        call.remove("unknown_seq");
                    }
                }
            }
            if let Some(Value::Object(control)) = task.get_mut("control") {
                control.remove("paused_seq");
                control.remove("answers");
                if let Some(Value::Object(approvals)) = control.get_mut("approvals") {
                    for approval in approvals.values_mut() {
                        if let Value::Object(approval) = approval {
                            approval.remove("requested_seq");
                        }
                    }
                }
            }
        }
    }
    state
}

/// `expected/events.jsonl` of fixture `name`.
pub fn expected_events(name: &str) -> Vec<Value> {
    let text = fs::read_to_string(fixture(name).join("expected/events.jsonl")).unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// Every record of the store as stored, in the form of `expected/events.jsonl`.
pub fn stored_events(store: &Store) -> Vec<Value> {
    let mut out = Vec::new();
    let mut reader = store.log().read_from(Seq(1)).unwrap();
    while let Some(record) = reader.next_ref() {
        let (seq, payload) = record.unwrap();
        let env = codec::peek(seq, payload).unwrap();
        let body = if env.encoding == codec::ENCODING_JSON {
            json!({ "json": serde_json::from_slice::<Value>(env.body).unwrap() })
        } else {
            json!({ "hex": env.body.iter().map(|b| format!("{b:02x}")).collect::<String>() })
        };
        out.push(json!({
            "seq": seq.0,
            "tag": env.tag,
            "schema": env.schema,
            "encoding": env.encoding,
            "task": env.task,
            "revision": env.revision,
            "timestamp_us": env.timestamp_us,
            "body": body,
        }));
    }
    out
}

/// Every record's bytes, in order.
pub fn raw_records(store: &Store) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut reader = store.log().read_from(Seq(1)).unwrap();
    while let Some(record) = reader.next_ref() {
        out.push(record.unwrap().1.to_vec());
    }
    out
}

/// What open found, in the form of `expected/open.json`.
pub fn open_report(store: &Store) -> Value {
    let report = store.open_report();
    json!({
        "snapshot_covered_seq": report.snapshot.as_ref().map(|m| m.covered_seq.0),
        "replayed_events": report.replayed_events,
        "tasks": report.tasks,
        "last_seq": report.log.last_seq.map(|s| s.0),
        "tail_cut": report.log.tail_cut.as_ref().map(|c| json!({"offset": c.offset, "bytes": c.bytes})),
    })
}

/// Every file under `dir` with the CRC-32 of its bytes, sorted by path.
pub fn digest_tree(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else {
            out.push((path.clone(), crc32fast::hash(&fs::read(&path).unwrap())));
        }
    }
    out.sort();
    out
}

/// [`digest_tree`] of the store's data only: segments and snapshots, not `LOCK` or
/// `prealloc.tmp`, which opening recreates.
pub fn digest_data(dir: &Path) -> Vec<(PathBuf, u32)> {
    digest_tree(dir)
        .into_iter()
        .filter(|(p, _)| {
            let name = p.file_name().unwrap().to_string_lossy();
            name != "LOCK" && name != "prealloc.tmp"
        })
        .collect()
}
