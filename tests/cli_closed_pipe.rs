//! Proves that every command ends quietly when the reader of its standard output goes away:
//! each one runs as the real binary on a store with enough events for many lines of output,
//! with its standard output a pipe whose read end is closed before it writes (and, for the
//! long outputs, closed after one line, like `| head -1`). It must not panic (exit code 101,
//! "panicked" on standard error), and must exit 0 without a message. Writing commands then
//! leave a store that opens.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::cli::{emit, event, input};
use common::{FACTLOG, arg};
use serde_json::json;

/// Tasks in the store: each is a line or a block of `info`, `state`, `recover` and `dump`.
const TASKS: usize = 300;
/// User messages of task `t0`, for `history`.
const MESSAGES: usize = 300;

/// The store every test copies: many tasks, each with an unanswered call, and a snapshot.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<tempfile::TempDir> = OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let tmp = tempfile::tempdir().expect("tempdir");
            let dir = tmp.path().join("store");
            let mut lines = Vec::new();
            for t in 0..TASKS {
                let task = format!("t{t}");
                lines.push(event(&task, "task/contract", json!({ "goal": "g", "risk": "low" })));
                lines.push(event(&task, "turn/start", json!({})));
                let call = json!({ "call_id": "c1", "tool": "fetch", "effect": "read_only" });
                lines.push(event(&task, "tool/call", call));
            }
            for m in 0..MESSAGES {
                lines.push(event("t0", "user/message", json!({ "text": format!("message {m}") })));
            }
            emit(&dir, &lines);
            let checkpoint = Command::new(&*FACTLOG).args(["checkpoint", arg(&dir)]).output();
            assert!(checkpoint.expect("checkpoint").status.success());
            tmp
        })
        .path()
}

/// A private copy of the template store, so that writing commands do not meet each other.
fn store_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    copy_dir(&template().join("store"), &dir);
    (tmp, dir)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// How much the test reads before it closes its end of the pipe.
#[derive(Clone, Copy)]
enum Reader {
    /// Closed before the command writes anything.
    Gone,
    /// One line read, then closed (`| head -1`).
    OneLine,
}

/// Runs `factlog ARGS` with `stdin` as input and the read end of standard output closed as
/// `reader` says; returns the exit code and standard error.
fn run_closed(args: &[&str], stdin: &[u8], reader: Reader) -> (Option<i32>, String) {
    let mut child = Command::new(&*FACTLOG)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn factlog");
    let mut child_stdin = child.stdin.take().expect("stdin");
    let input = stdin.to_vec();
    // A command that stops reading closes its input early: not an error here.
    let writer = std::thread::spawn(move || {
        let _ = child_stdin.write_all(&input);
    });
    let stdout = child.stdout.take().expect("stdout");
    if let Reader::OneLine = reader {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
    } else {
        drop(stdout);
    }
    let output = child.wait_with_output().expect("wait");
    writer.join().expect("stdin writer");
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Asserts no panic; with `owned`, also exit 0 and nothing on standard error.
fn check(args: &[&str], stdin: &[u8], owned: bool) {
    for reader in [Reader::Gone, Reader::OneLine] {
        let (code, stderr) = run_closed(args, stdin, reader);
        assert_ne!(code, Some(101), "{args:?} panicked: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(code.is_some(), "{args:?} was killed by a signal: {stderr}");
        if owned {
            assert_eq!((code, stderr.as_str()), (Some(0), ""), "{args:?} ends quietly");
        }
    }
}

/// Runs the command on a private copy of the store (`DIR` in `args` names it).
fn on_store(args: &[&str], owned: bool) {
    let (_tmp, dir) = store_copy();
    let args: Vec<&str> = args.iter().map(|a| if *a == "DIR" { arg(&dir) } else { a }).collect();
    check(&args, b"", owned);
    factlog::Store::open_read_only(&dir, factlog::StoreOptions::new()).expect("the store opens");
}

#[test]
fn info() {
    on_store(&["info", "DIR"], true);
    on_store(&["info", "DIR", "--json"], true);
}

#[test]
fn state() {
    on_store(&["state", "DIR"], true);
    on_store(&["state", "DIR", "--json"], true);
}

#[test]
fn history() {
    on_store(&["history", "DIR", "--task", "t0"], true);
}

#[test]
fn recover() {
    on_store(&["recover", "DIR", "--dry-run"], true);
    on_store(&["recover", "DIR"], true);
    on_store(&["recover", "DIR", "--json"], true);
}

#[test]
fn purge() {
    on_store(&["purge", "DIR", "--before-snapshot", "--dry-run"], true);
    on_store(&["purge", "DIR", "--before-snapshot"], true);
}

#[test]
fn migrate() {
    on_store(&["migrate", "DIR", "--to", "2", "--dry-run"], true);
    on_store(&["migrate", "DIR", "--to", "2"], true);
}

#[test]
fn checkpoint() {
    on_store(&["checkpoint", "DIR"], true);
}

#[test]
fn tail() {
    on_store(&["tail", "DIR"], true);
    on_store(&["tail", "DIR", "--json"], true);
}

#[test]
fn dump_export_verify_salvage() {
    on_store(&["dump", "DIR"], true);
    on_store(&["dump", "DIR", "--json"], true);
    on_store(&["dump", "DIR", "--json", "--raw"], true);
    on_store(&["export", "DIR"], true);
    on_store(&["export", "DIR", "--json"], true);
    on_store(&["verify", "DIR"], true);
    on_store(&["verify", "DIR", "--json"], true);
    on_store(&["verify", "DIR", "--deep", "--json"], true);
    on_store(&["salvage", "DIR", "--to", "/nonexistent-factlog-pipe-target", "--dry-run"], true);
}

/// A real salvage into a closed pipe still writes the new store: it prints only afterwards.
#[test]
fn salvage_writes_its_store_before_it_prints() {
    for reader in [Reader::Gone, Reader::OneLine] {
        let (_tmp, dir) = store_copy();
        let target = dir.with_file_name("saved");
        let args = ["salvage", arg(&dir), "--to", arg(&target), "--json"];
        let (code, stderr) = run_closed(&args, b"", reader);
        assert_eq!((code, stderr.as_str()), (Some(0), ""), "{args:?} ends quietly");
        assert!(target.join("00000000000000000001.seg").exists(), "salvage wrote before printing");
    }
}

#[test]
fn append() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("log");
    let lines: String = (0..2000).map(|i| format!("record {i}\n")).collect();
    check(&["append", arg(&dir), "--durability", "flushed"], lines.as_bytes(), true);
    let log = factlog::Log::open_read_only(&dir, factlog::Options::new()).expect("log opens");
    assert!(log.last_seq().is_some(), "the first records were appended");
}

#[test]
fn emit_replies() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    let lines: Vec<_> = (0..2000)
        .map(|i| event("t1", "user/message", json!({ "text": format!("message {i}") })))
        .collect();
    check(&["emit", arg(&dir)], &input(&lines), true);
    factlog::Store::open_read_only(&dir, factlog::StoreOptions::new()).expect("the store opens");
}

#[test]
fn bench() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let args = ["bench", "--turns", "1", "--steps", "1", "--tokens", "2", "--runs", "1"];
    let mut args = args.to_vec();
    args.extend(["--every-turns", "1", "--dir", arg(tmp.path())]);
    check(&args, b"", true);
}

#[test]
fn demo() {
    check(&["demo", "--seed", "1"], b"", true);
    check(&["demo", "--seed", "1", "--json"], b"", true);
}
