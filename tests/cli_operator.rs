//! The operator commands of issue 5 keep their CLI contract: `info` shows a store's snapshots
//! and tasks, `dump --task/--type/--to` select exactly the matching events, `tail` prints like
//! `dump` and with `-f` follows events another process appends, `export` writes one
//! parseable line per event with its envelope, and `purge --before-snapshot --dry-run` lists
//! exactly the segments a real purge then removes, while `purge` alone is refused. Proved by
//! running the real binary on stores fed through `emit` or the library.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::cli::{dump_records, emit, event, json_lines, json_of};
use common::harness::streamed_turn;
use common::{FACTLOG, append_lines, append_raw, arg, factlog, temp_log};
use factlog::{Options, Store, StoreOptions};
use serde_json::{Value, json};

/// Two tasks, interleaved: seqs 1..=6 as listed.
fn two_task_store(dir: &Path) {
    emit(
        dir,
        &[
            event("t1", "user/message", json!({ "text": "hello" })),
            event("t2", "user/message", json!({ "text": "other" })),
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c1", "tool": "fetch", "effect": "read_only" }),
            ),
            event("t1", "tool/result", json!({ "call_id": "c1", "output": { "rows": 1 } })),
            event(
                "t2",
                "tool/call",
                json!({ "call_id": "c2", "tool": "fetch", "effect": "read_only" }),
            ),
            event("t1", "user/message", json!({ "text": "thanks" })),
        ],
    );
}

fn seqs(records: &[Value]) -> Vec<u64> {
    records.iter().map(|record| record["seq"].as_u64().expect("seq")).collect()
}

#[test]
fn info_shows_snapshots_and_tasks() {
    let (_temp, dir) = temp_log();
    two_task_store(&dir);
    factlog(&["checkpoint", arg(&dir)], b"").assert_success();

    let info = json_of("info", &dir, &[]);
    assert_eq!(info["last_seq"], 6);
    let snapshots = info["snapshots"].as_array().expect("snapshots");
    assert_eq!(snapshots.len(), 1, "{info}");
    assert_eq!(snapshots[0]["covered_seq"], 6);
    assert_eq!(snapshots[0]["valid"], true);
    assert!(snapshots[0]["file_bytes"].as_u64().expect("file_bytes") > 0);
    assert_eq!(
        info["tasks"],
        json!([
            { "id": "t1", "revision": 4, "last_seq": 6 },
            { "id": "t2", "revision": 2, "last_seq": 5 },
        ])
    );
    assert_eq!(info["segments"][0]["last_seq"], 6);
    assert_eq!(info["reclaimed_through"], Value::Null);

    let run = factlog(&["info", arg(&dir)], b"");
    run.assert_success();
    let text = run.stdout_text();
    assert!(text.contains("seqs: 1..=6"), "{text}");
    assert!(text.contains("snapshots: 1"), "{text}");
    assert!(text.contains("covers seq 6"), "{text}");
    assert!(text.contains("task t1: revision 4, last seq 6"), "{text}");
    assert!(text.contains("task t2: revision 2, last seq 5"), "{text}");

    // A raw log has no tasks: skipped with a note, still exit 0 and nothing on stderr.
    let (_raw_temp, raw) = temp_log();
    append_lines(&raw, "synced", b"one\ntwo\n");
    let info = json_of("info", &raw, &[]);
    assert_eq!(info["tasks"], Value::Null);
    assert!(info["tasks_skipped"].as_str().expect("a note").contains("raw records"), "{info}");
    assert_eq!(info["snapshots"], json!([]));
    let run = factlog(&["info", arg(&raw)], b"");
    run.assert_success();
    assert!(run.stdout_text().contains("tasks: skipped"), "{run:?}");
}

#[test]
fn dump_filters_select_exactly_the_matching_events() {
    let (_temp, dir) = temp_log();
    two_task_store(&dir);
    // A raw record after the events: never selected by --task or --type.
    append_raw(&dir, &[b"raw line"]);

    assert_eq!(seqs(&dump_records(&dir, &["--task", "t1"])), [1, 3, 4, 6]);
    assert_eq!(seqs(&dump_records(&dir, &["--task", "t2"])), [2, 5]);
    assert_eq!(seqs(&dump_records(&dir, &["--type", "tool/call"])), [3, 5]);
    assert_eq!(seqs(&dump_records(&dir, &["--type", "user/message", "--task", "t1"])), [1, 6]);
    assert_eq!(seqs(&dump_records(&dir, &["--to", "3"])), [1, 2, 3]);
    assert_eq!(seqs(&dump_records(&dir, &["--from", "2", "--to", "5", "--task", "t1"])), [3, 4]);
    assert_eq!(seqs(&dump_records(&dir, &[])), [1, 2, 3, 4, 5, 6, 7]);
    factlog(&["dump", arg(&dir), "--task", "nobody"], b"").assert_one_line_error(1);
    for record in dump_records(&dir, &["--type", "tool/call"]) {
        assert_eq!(record["type"], "tool/call", "{record}");
    }

    let text = factlog(&["dump", arg(&dir), "--type", "tool/result"], b"");
    text.assert_success();
    assert_eq!(text.stdout_text().lines().count(), 1, "{text:?}");
    let fields: Vec<String> = text.stdout_text().split('\t').map(str::to_owned).collect();
    assert_eq!(fields[0], "4", "{text:?}");
    assert!(fields[1].ends_with('Z'), "the time in RFC 3339: {text:?}");
    assert_eq!(fields[2..5], ["tool/result", "t1", "3"], "{text:?}");

    for bad in [&["--type", "tool/nothing"][..], &["--from", "5", "--to", "4"]] {
        let mut args = vec!["dump", arg(&dir)];
        args.extend_from_slice(bad);
        let run = factlog(&args, b"");
        run.assert_one_line_error(2);
        assert!(run.stdout.is_empty(), "{bad:?}: {run:?}");
    }
}

#[test]
fn tail_without_follow_prints_every_record_like_dump() {
    let (_temp, dir) = temp_log();
    two_task_store(&dir);
    let tail = factlog(&["tail", arg(&dir)], b"");
    tail.assert_success();
    let dump = factlog(&["dump", arg(&dir)], b"");
    dump.assert_success();
    assert_eq!(tail.stdout_text(), dump.stdout_text());
    assert_eq!(tail.stdout_text().lines().count(), 6);

    let json = factlog(&["tail", arg(&dir), "--json", "--from", "5"], b"");
    json.assert_success();
    assert_eq!(seqs(&json_lines(&json)), [5, 6]);
    assert_eq!(json_lines(&json), dump_records(&dir, &["--from", "5"]));

    let (_missing_temp, missing) = temp_log();
    factlog(&["tail", arg(&missing)], b"").assert_one_line_error(1);
    factlog(&["tail", arg(&missing), "-f"], b"").assert_one_line_error(1);
}

/// Kills the child when dropped, so that a failed assertion leaves no process behind.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn tail_follow_prints_events_another_process_appends() {
    let (_temp, dir) = temp_log();
    emit(&dir, &[event("t1", "user/message", json!({ "text": "first" }))]);
    let mut child = Command::new(&*FACTLOG)
        .args(["tail", arg(&dir), "-f", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn factlog tail -f");
    let stdout = child.stdout.take().expect("piped stdout");
    let child = KillOnDrop(child);
    let (lines_tx, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let next_line = || -> Value {
        let line = lines.recv_timeout(Duration::from_secs(10)).expect("a line from tail -f");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    let first = next_line();
    assert_eq!((first["seq"].as_u64(), first["text"].as_str()), (Some(1), Some("first")));

    // Appended by a second writer process while tail keeps running.
    emit(
        &dir,
        &[
            event("t1", "user/message", json!({ "text": "second" })),
            event("t2", "user/message", json!({ "text": "third" })),
        ],
    );
    let second = next_line();
    let third = next_line();
    assert_eq!((second["seq"].as_u64(), second["text"].as_str()), (Some(2), Some("second")));
    assert_eq!((third["seq"].as_u64(), third["task"].as_str()), (Some(3), Some("t2")));
    emit(&dir, &[event("t1", "user/message", json!({ "text": "fourth" }))]);
    assert_eq!(next_line()["seq"], 4);
    assert!(lines.recv_timeout(Duration::from_millis(300)).is_err(), "nothing is printed twice");

    drop(child);
    reader.join().expect("reader thread");
}

#[test]
fn export_jsonl_lines_carry_the_envelope() {
    let (_temp, dir) = temp_log();
    two_task_store(&dir);
    let run = factlog(&["export", arg(&dir)], b"");
    run.assert_success();
    let lines = json_lines(&run);
    assert_eq!(seqs(&lines), [1, 2, 3, 4, 5, 6]);
    for (line, dumped) in lines.iter().zip(dump_records(&dir, &[])) {
        let keys: Vec<&str> =
            line.as_object().expect("object").keys().map(String::as_str).collect();
        assert_eq!(
            keys[..7],
            ["seq", "task", "revision", "timestamp_us", "time", "type", "schema"]
        );
        // A new store is of segment format 2, where `tool/result` is written in schema 2.
        let schema = if line["type"] == "tool/result" { 2 } else { 1 };
        assert_eq!(line["schema"], schema, "{line}");
        // The typed JSON of dump, plus the schema.
        let mut without_schema = line.clone();
        without_schema.as_object_mut().expect("object").remove("schema");
        assert_eq!(without_schema, dumped);
    }
    assert_eq!(lines[2]["type"], "tool/call");
    assert_eq!(lines[2]["call_id"], "c1");

    let t2 = factlog(&["export", arg(&dir), "--task", "t2"], b"");
    t2.assert_success();
    assert_eq!(seqs(&json_lines(&t2)), [2, 5]);

    // --json names the only format; --jsonl is its deprecated alias.
    for flag in ["--json", "--jsonl"] {
        let run = factlog(&["export", arg(&dir), flag], b"");
        assert_eq!(run.code, Some(0), "{run:?}");
        assert_eq!(json_lines(&run), lines, "{flag}");
        assert_eq!(run.stderr.contains("--jsonl is deprecated"), flag == "--jsonl", "{run:?}");
    }

    // A record that is not an event stops the export, naming it: refused data.
    append_raw(&dir, &[b"raw line"]);
    let run = factlog(&["export", arg(&dir)], b"");
    run.assert_one_line_error(3);
    assert!(run.stderr.contains("record 7 is not an event"), "{run:?}");
    assert_eq!(seqs(&json_lines(&run)), [1, 2, 3, 4, 5, 6]);
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "seg"))
        .collect();
    files.sort();
    files
}

fn paths(report: &Value) -> Vec<PathBuf> {
    report["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .map(|segment| PathBuf::from(segment["path"].as_str().expect("path")))
        .collect()
}

#[test]
fn purge_dry_run_lists_exactly_what_purge_removes() {
    let (_temp, dir) = temp_log();
    let options = StoreOptions::new().log(Options::new().segment_bytes(16 * 1024));

    // Without a snapshot nothing is removed.
    let store = Store::open(&dir, options.clone()).expect("open");
    for n in 0..10 {
        streamed_turn(&store, n);
    }
    store.close().expect("close");
    let before = segment_files(&dir);
    assert!(before.len() > 3, "the workload rolls several segments: {}", before.len());
    let report = json_of("purge", &dir, &["--before-snapshot"]);
    assert_eq!(
        (report["snapshot"].clone(), report["removed_segments"].clone()),
        (json!(null), json!(0))
    );
    assert_eq!(segment_files(&dir), before);
    let run = factlog(&["purge", arg(&dir), "--before-snapshot"], b"");
    run.assert_success();
    assert!(run.stdout_text().contains("no valid snapshot"), "{run:?}");

    // Two snapshots: the oldest one decides.
    let store = Store::open(&dir, options.clone()).expect("open");
    let oldest = store.checkpoint().expect("checkpoint");
    for n in 10..20 {
        streamed_turn(&store, n);
    }
    store.checkpoint().expect("checkpoint");
    let state = store.state();
    store.close().expect("close");
    let before = segment_files(&dir);

    // `--before-snapshot` is the only mode and the default: with or without it, the same.
    let dry = json_of("purge", &dir, &["--before-snapshot", "--dry-run"]);
    assert_eq!(json_of("purge", &dir, &["--dry-run"]), dry);
    assert_eq!(segment_files(&dir), before, "a dry run removes nothing");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["snapshot"]["covered_seq"], oldest.covered_seq.0);
    let would = paths(&dry);
    assert!(!would.is_empty(), "{dry}");
    assert!(would.len() < before.len(), "the active segment stays: {dry}");
    let text = factlog(&["purge", arg(&dir), "--before-snapshot", "--dry-run"], b"");
    text.assert_success();
    assert!(text.stdout_text().contains("would remove segment"), "{text:?}");

    let done = json_of("purge", &dir, &[]);
    assert_eq!(done["dry_run"], false);
    assert_eq!(paths(&done), would, "purge removes exactly what the dry run listed");
    assert_eq!(done["removed_bytes"], dry["removed_bytes"]);
    assert_eq!(done["first_seq"], dry["first_seq"]);
    let after = segment_files(&dir);
    let expected: Vec<PathBuf> = before.into_iter().filter(|p| !would.contains(p)).collect();
    assert_eq!(after, expected);
    let first_kept = done["first_seq"].as_u64().expect("first_seq");
    assert!(first_kept > 1 && first_kept <= oldest.covered_seq.0 + 1, "{done}");

    let info = json_of("info", &dir, &[]);
    assert_eq!(info["reclaimed_through"], first_kept - 1);
    assert_eq!(info["first_seq"], first_kept);
    let reopened = Store::open_read_only(&dir, options).expect("reopen after purge");
    assert_eq!(reopened.state(), state);

    // Nothing more to remove: a second purge removes nothing.
    let again = json_of("purge", &dir, &["--before-snapshot"]);
    assert_eq!(again["removed_segments"], 0);
}
