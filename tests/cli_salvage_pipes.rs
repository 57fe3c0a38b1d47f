//! Proves that `dump`, `export`, `verify` and `salvage` end quietly when their standard output
//! is closed before they write (as `factlog verify DIR | head -1` closes it): no panic, no
//! message, exit 0.

mod common;

use std::process::{Command, Stdio};

use common::damage::store_with_calls;
use common::{FACTLOG, arg};

/// Runs `factlog ARGS` with a standard output whose reader is gone from the start.
fn run_into_closed_pipe(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(FACTLOG)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn factlog");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn a_closed_standard_output_ends_each_command_quietly() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    store_with_calls(&dir, 30);
    let target = temp.path().join("saved");
    let commands: [Vec<&str>; 6] = [
        vec!["dump", arg(&dir)],
        vec!["dump", arg(&dir), "--format", "json", "--raw"],
        vec!["export", arg(&dir), "--jsonl"],
        vec!["verify", arg(&dir)],
        vec!["verify", arg(&dir), "--json"],
        vec!["salvage", arg(&dir), "--to", arg(&target), "--json"],
    ];
    for args in &commands {
        let (code, stderr) = run_into_closed_pipe(args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
    assert!(target.join("00000000000000000001.seg").exists(), "salvage wrote before printing");
}
