//! A wrong path is one clear line and creates nothing: every command that needs an existing
//! store is run on a missing path, a file and an empty directory, and each says which of the
//! three it found, exits 1 and leaves the directory empty; `factlog append` refuses a harness
//! store, whose commands would otherwise refuse the raw record it appended.

use crate::common;

use std::fs;

use common::cli::{emit_one, event};
use common::{arg, factlog};
use serde_json::json;

/// Each command that must find a store, with its arguments after the directory (`TARGET`: a
/// path in the test's directory that must stay missing).
const COMMANDS: [(&str, &[&str]); 15] = [
    ("recover", &[]),
    ("checkpoint", &[]),
    ("purge", &[]),
    ("migrate", &[]),
    ("state", &[]),
    ("history", &["--task", "t"]),
    ("dump", &[]),
    ("dump", &["--raw", "--json"]),
    ("export", &[]),
    ("info", &[]),
    ("purge", &["--before-snapshot", "--dry-run"]),
    ("verify", &[]),
    ("verify", &["--deep", "--json"]),
    ("tail", &[]),
    ("salvage", &["--to", "TARGET"]),
];

#[test]
fn a_missing_path_a_file_and_an_empty_directory_are_refused_and_nothing_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let file = tmp.path().join("file");
    fs::write(&file, b"not a store").unwrap();
    let missing = tmp.path().join("missing");
    let cases = [
        (&missing, "the directory does not exist"),
        (&file, "it is a file, not a directory"),
        (&empty, "the directory holds no factlog segments"),
    ];
    for (command, extra) in COMMANDS {
        for (path, says) in cases {
            let target = tmp.path().join("target");
            let mut args = vec![command, arg(path)];
            args.extend(extra.iter().map(|a| if *a == "TARGET" { arg(&target) } else { a }));
            let run = factlog(&args, b"");
            run.assert_one_line_error(1);
            assert!(run.stderr.contains(says), "{command} on {}: {}", path.display(), run.stderr);
            assert!(run.stdout.is_empty(), "{command}: {run:?}");
        }
    }
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0, "nothing was created");
    assert!(!missing.exists());
    assert!(!tmp.path().join("target").exists(), "salvage created nothing");
    assert_eq!(fs::read(&file).unwrap(), b"not a store");
}

#[test]
fn append_refuses_a_harness_store_and_keeps_it_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    emit_one(&store, event("t", "turn/start", json!({})));
    let image = common::cli::dir_image(&store);
    let run = factlog(&["append", arg(&store)], b"a raw line\n");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("is a harness store") && run.stderr.contains("emit"), "{run:?}");
    assert!(run.stdout.is_empty(), "nothing was acknowledged: {run:?}");
    assert_eq!(common::cli::dir_image(&store), image, "nothing was written");
    factlog(&["state", arg(&store)], b"").assert_success();

    // A raw log still takes raw records.
    let raw = tmp.path().join("raw");
    let first = factlog(&["append", arg(&raw)], b"one\n");
    first.assert_success();
    let second = factlog(&["append", arg(&raw)], b"two\n");
    second.assert_success();
    assert_eq!(second.stdout_text(), "2\n");
}
