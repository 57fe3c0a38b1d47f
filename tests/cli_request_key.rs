//! `factlog request-key` prints the key of every request-key line of vector 024 exactly (text
//! and `--json`), refuses a task id out of bounds with exit 2, and `factlog completions`
//! prints a completion script naming every command for bash, zsh and fish.

use crate::common;

use common::factlog;
use serde_json::json;

/// The `task, operation, source_revision, key` lines of vector 024.
fn key_lines() -> Vec<(String, String, String, String)> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("format-spec/vectors/024-request-keys.txt"),
    )
    .expect("vector 024");
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.starts_with("args-canonical"))
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 4, "{line:?}");
            (fields[0].into(), fields[1].into(), fields[2].into(), fields[3].into())
        })
        .collect()
}

#[test]
fn every_key_of_vector_024_is_printed_exactly() {
    let lines = key_lines();
    assert!(lines.len() >= 6, "vector 024 has its key lines");
    for (task, operation, revision, key) in lines {
        let run = factlog(&["request-key", &task, &operation, &revision], b"");
        run.assert_success();
        assert_eq!(run.stdout_text(), format!("{key}\n"), "{task} {operation} {revision}");
        let run = factlog(&["request-key", &task, &operation, &revision, "--json"], b"");
        run.assert_success();
        let value: serde_json::Value = serde_json::from_str(&run.stdout_text()).expect("JSON");
        let revision: u64 = revision.parse().expect("revision");
        assert_eq!(
            value,
            json!({ "task": task, "operation": operation, "revision": revision,
                    "request_key": key })
        );
    }
}

#[test]
fn a_task_id_out_of_bounds_or_a_bad_revision_is_a_usage_error() {
    let long = "t".repeat(factlog::limits::TASK_ID_BYTES_MAX + 1);
    for args in [
        ["request-key", "", "op", "1"],
        ["request-key", &long, "op", "1"],
        ["request-key", "t1", "op", "-1"],
    ] {
        let run = factlog(&args, b"");
        run.assert_one_line_error(2);
        assert!(run.stdout_text().is_empty());
    }
}

#[test]
fn completions_name_every_command_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let run = factlog(&["completions", shell], b"");
        run.assert_success();
        let script = run.stdout_text();
        for command in ["emit", "recover", "salvage", "request-key", "completions"] {
            assert!(script.contains(command), "{shell}: {command}");
        }
    }
    assert_eq!(factlog(&["completions", "tcsh"], b"").code, Some(2));
}
