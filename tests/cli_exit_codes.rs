//! Proves the one exit-code table of the command line (0 done, 1 operational error, 2 usage,
//! 3 damaged or refused data) by running the real binary: every command on a missing path, on
//! a plain file, with an unknown flag, the read commands on a damaged store, an unknown
//! `--task` in every command that takes one (same code, same message), a raw record where an
//! event is required; and that every command's `--help` prints the same table, which the
//! README states too, and an example of the command.

use crate::common;

use std::fs;
use std::path::Path;

use common::cli::{emit, event};
use common::damage::{flip_byte, frame_of, result_inside_segment, segment_files, store_with_calls};
use common::{Run, arg, factlog};
use serde_json::json;

/// Every subcommand of `factlog`.
const SUBCOMMANDS: [&str; 26] = [
    "append",
    "bench",
    "dump",
    "verify",
    "info",
    "tail",
    "export",
    "purge",
    "emit",
    "recover",
    "state",
    "history",
    "checkpoint",
    "demo",
    "migrate",
    "salvage",
    "restore",
    "request-key",
    "completions",
    "tasks",
    "resolve",
    "confirm",
    "approve",
    "deny",
    "cancel",
    "ui",
];

/// The commands that read an existing store, with their arguments after the directory
/// (`TARGET`: a path that must stay missing).
const STORE_COMMANDS: [(&str, &[&str]); 14] = [
    ("dump", &[]),
    ("export", &[]),
    ("verify", &[]),
    ("info", &[]),
    ("tail", &[]),
    ("state", &[]),
    ("history", &["--task", "t1"]),
    ("recover", &[]),
    ("purge", &[]),
    ("checkpoint", &[]),
    ("migrate", &[]),
    ("salvage", &["--to", "TARGET"]),
    ("recover", &["--dry-run"]),
    ("tasks", &["--attention"]),
];

/// The operator's answer commands, with their arguments after the directory: on a missing
/// directory or a file they fail as the reading commands do.
const ANSWER_COMMANDS: [(&str, &[&str]); 6] = [
    ("resolve", &["--task", "t1", "--call", "c1", "--not-run"]),
    ("confirm", &["--task", "t1"]),
    ("approve", &["--task", "t1", "--approval", "a1"]),
    ("deny", &["--task", "t1", "--approval", "a1"]),
    ("cancel", &["--task", "t1"]),
    ("ui", &["--read-only"]),
];

fn run_on(command: &str, dir: &Path, extra: &[&str], target: &Path) -> Run {
    let mut args = vec![command, arg(dir)];
    args.extend(extra.iter().map(|a| if *a == "TARGET" { arg(target) } else { a }));
    factlog(&args, b"")
}

/// A store of 70 calls over several segments with one byte flipped in its second segment.
fn damaged_store(dir: &Path) {
    let results = store_with_calls(dir, 70);
    let (_, lost) = result_inside_segment(dir, &results, 1);
    let (path, offset, _) = frame_of(dir, lost);
    flip_byte(&path, offset + 40);
    assert!(segment_files(dir).len() > 2);
}

#[test]
fn every_command_follows_the_exit_code_table() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let file = tmp.path().join("file");
    fs::write(&file, b"not a store").unwrap();
    let target = tmp.path().join("target");

    // 1: a missing directory, and a file where a directory was expected, for every command
    // that reads a store; a file also for the two that create one.
    for (command, extra) in STORE_COMMANDS {
        let run = run_on(command, &missing, extra, &target);
        run.assert_one_line_error(1);
        assert!(run.stderr.contains("does not exist"), "{command}: {run:?}");
        let run = run_on(command, &file, extra, &target);
        run.assert_one_line_error(1);
        assert!(run.stderr.contains("it is a file, not a directory"), "{command}: {run:?}");
    }
    for (command, extra) in ANSWER_COMMANDS {
        let run = run_on(command, &missing, extra, &target);
        run.assert_one_line_error(1);
        assert!(run.stderr.contains("does not exist"), "{command}: {run:?}");
        let run = run_on(command, &file, extra, &target);
        run.assert_one_line_error(1);
        assert!(run.stderr.contains("it is a file, not a directory"), "{command}: {run:?}");
    }
    for command in ["append", "emit"] {
        let run = factlog(&[command, arg(&file)], b"");
        run.assert_one_line_error(1);
        assert!(run.stderr.contains("it is a file, not a directory"), "{command}: {run:?}");
    }
    assert!(!missing.exists() && !target.exists(), "nothing was created");

    // 2: a flag no command has.
    for command in SUBCOMMANDS {
        let run = factlog(&[command, "--no-such-flag"], b"");
        run.assert_one_line_error(2);
    }

    // 3: a damaged store, for every command that must read all of it.
    let damaged = tmp.path().join("damaged");
    damaged_store(&damaged);
    for (command, extra) in [
        ("dump", &[][..]),
        ("dump", &["--json", "--task", "t1"]),
        ("export", &[]),
        ("verify", &[]),
        ("verify", &["--json", "--deep"]),
        ("info", &[]),
        ("tail", &[]),
        ("state", &[]),
        ("history", &["--task", "t1"]),
        ("recover", &[]),
        ("recover", &["--dry-run"]),
        ("checkpoint", &[]),
        ("purge", &[]),
        ("migrate", &["--dry-run"]),
    ] {
        let run = run_on(command, &damaged, extra, &target);
        assert_eq!(run.code, Some(3), "{command} {extra:?} on a damaged store: {run:?}");
        assert!(!run.stderr.contains("panicked"), "{run:?}");
    }
    // Salvage exists for damaged stores: it is not refused.
    let run = run_on("salvage", &damaged, &["--to", "TARGET", "--dry-run"], &target);
    assert_eq!(run.code, Some(0), "{run:?}");

    // 3: append to a log whose active segment lost a record a later synced frame vouches for.
    let torn = tmp.path().join("damaged-active");
    factlog(&["append", arg(&torn)], b"one\ntwo\nthree\n").assert_success();
    let (path, offset, _) = frame_of(&torn, 1);
    flip_byte(&path, offset + 24);
    let run = factlog(&["append", arg(&torn)], b"four\n");
    run.assert_one_line_error(3);

    // 3: a raw record where an event is required.
    let raw = tmp.path().join("raw");
    factlog(&["append", arg(&raw)], b"a raw line\n").assert_success();
    let run = factlog(&["export", arg(&raw)], b"");
    run.assert_one_line_error(3);
    assert!(run.stderr.contains("record 1 is not an event"), "{run:?}");
    for (command, extra) in [("state", &[][..]), ("history", &["--task", "t1"])] {
        let run = run_on(command, &raw, extra, &target);
        run.assert_one_line_error(3);
    }
    factlog(&["dump", arg(&raw)], b"").assert_success();

    // 0: a good store, for the read commands.
    let store = tmp.path().join("store");
    emit(&store, &[event("t1", "user/message", json!({"text": "hi"}))]);
    for (command, extra) in STORE_COMMANDS {
        if command != "salvage" {
            let run = run_on(command, &store, extra, &target);
            assert_eq!(run.code, Some(0), "{command} {extra:?}: {run:?}");
        }
    }
}

#[test]
fn an_unknown_task_is_exit_1_with_the_same_message_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    emit(
        &store,
        &[
            event("t1", "user/message", json!({"text": "hi"})),
            event("t2", "user/message", json!({"text": "ho"})),
        ],
    );
    let mut messages = Vec::new();
    for (command, extra) in [
        ("dump", &["--task", "nope"][..]),
        ("dump", &["--json", "--task", "nope", "--from", "2"]),
        ("export", &["--task", "nope"]),
        ("tail", &["--task", "nope", "--json"]),
        ("state", &["--task", "nope"]),
        ("state", &["--json", "--task", "nope"]),
        ("history", &["--task", "nope"]),
    ] {
        let mut args = vec![command, arg(&store)];
        args.extend_from_slice(extra);
        let run = factlog(&args, b"");
        run.assert_one_line_error(1);
        assert!(run.stdout.is_empty(), "{command}: {run:?}");
        messages.push(run.stderr);
    }
    assert!(messages[0].contains("no task \"nope\"") && messages[0].contains("t1, t2"));
    assert!(messages.iter().all(|m| *m == messages[0]), "{messages:#?}");

    // A task of the store with no event in the selected range is not unknown.
    for args in [
        &["dump", arg(&store), "--task", "t1", "--from", "2"][..],
        &["dump", arg(&store), "--task", "t1", "--since", "2999-01-01"],
        &["export", arg(&store), "--task", "t2", "--until", "1970-01-02"],
        &["tail", arg(&store), "--task", "t1", "--from", "2"],
    ] {
        let run = factlog(args, b"");
        run.assert_success();
        assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
    }
}

/// The exit-code block of a `--help`: from its heading to the blank line after it.
fn table_of(help: &str) -> String {
    let start = help.find("Exit codes (the same for every command):").expect("the table");
    let block = &help[start..];
    block[..block.find("\n\n").unwrap_or(block.len())].to_owned()
}

#[test]
fn every_help_prints_the_same_exit_code_table_as_the_readme() {
    let top = factlog(&["--help"], b"");
    top.assert_success();
    let table = table_of(&top.stdout_text());
    for code in ["0  done", "1  operational error", "2  usage: bad arguments", "3  damaged"] {
        assert!(table.contains(&format!("\n  {code}")), "{code}: {table}");
    }
    for command in SUBCOMMANDS {
        let help = factlog(&[command, "--help"], b"");
        help.assert_success();
        let help = help.stdout_text();
        assert_eq!(table_of(&help), table, "{command} --help");
        let example = &help[help.find("\nExample:\n").expect("an example")..];
        assert!(example.contains(&format!("factlog {command} ")), "{command}: {example}");
    }
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for row in [
        "| 0 | done |",
        "| 1 | operational error:",
        "| 2 | usage: bad arguments |",
        "| 3 | damaged or refused data:",
    ] {
        assert!(readme.contains(row), "README lacks the row {row:?}");
    }
}
