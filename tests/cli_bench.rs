//! `factlog bench` runs a tiny agent-session workload under every policy and reports it as a
//! table, as one JSON object and as an SVG chart; bad arguments exit 2. Each test runs the
//! binary on a workload of 2 turns x 2 steps x 10 tokens; no timing is checked, only the
//! shape of the report and the counts that follow from the workload.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

const POLICIES: [&str; 6] =
    ["factlog", "all-synced", "all-buffered", "jsonl-every", "jsonl-critical", "floor"];

const TINY: [&str; 8] = ["--turns", "2", "--steps", "2", "--tokens", "10", "--runs", "1"];

fn bench(dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_factlog"))
        .arg("bench")
        .args(TINY)
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .output()
        .expect("run factlog bench")
}

fn success(output: &Output) -> String {
    assert!(
        output.status.success(),
        "bench failed: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

/// The scratch directory is removed at the end: nothing is left in `--dir`.
fn assert_empty(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir).expect("list --dir").collect();
    assert!(left.is_empty(), "bench left {left:?} behind");
}

#[test]
fn table_has_a_row_per_policy() {
    let dir = TempDir::new().expect("tempdir");
    let text = success(&bench(dir.path(), &[]));
    for policy in POLICIES {
        assert!(
            text.lines().any(|line| line.split_whitespace().next() == Some(policy)),
            "no row for {policy}:\n{text}"
        );
    }
    assert!(text.contains("ns/token") && text.contains("x floor"), "{text}");
    assert_empty(dir.path());
}

#[test]
fn json_has_every_policy_and_the_workload_counts() {
    let dir = TempDir::new().expect("tempdir");
    let text = success(&bench(dir.path(), &["--json"]));
    assert_eq!(text.lines().count(), 1, "one JSON object: {text}");
    let report: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(report["workload"]["turns"], 2);
    assert_eq!(report["workload"]["events_per_session"], 2 * (3 + 2 * (10 + 4)));
    let rows = report["policies"].as_array().expect("a policies array");
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().expect("a name")).collect();
    assert_eq!(names, POLICIES);
    for row in rows {
        let name = &row["name"];
        for field in ["median", "min", "max"] {
            assert!(row["ns_per_token"][field].as_f64().is_some_and(|v| v > 0.0), "{name}");
            assert!(row["ratio_to_floor"][field].as_f64().is_some_and(|v| v > 0.0), "{name}");
        }
        assert!(row["bytes_per_token"].as_f64().is_some_and(|v| v > 0.0), "{name}");
        assert!(row["fsyncs_per_turn"].as_f64().is_some_and(|v| v > 0.0), "{name}");
        assert!(row["synced_latency_us"]["p50"].as_f64().is_some(), "{name}");
        assert!(row["synced_latency_us"]["p99"].as_f64().is_some(), "{name}");
        assert_eq!(row["tokens"], 2 * 2 * 10, "{name}");
    }
    let row = |name: &str| &rows[POLICIES.iter().position(|&p| p == name).expect("a policy")];
    // With each step closed by one batch: per step a tool/call and the batch, per turn a
    // turn/end, so 2*steps+1 = 5 fdatasyncs per turn by the appending thread; the background
    // flusher may add a few of its own, counted apart.
    let factlog = row("factlog");
    let appender = factlog["fsyncs_per_turn"].as_f64().expect("fsyncs")
        - factlog["fsyncs_per_turn_by_flusher"].as_f64().expect("flusher fsyncs");
    assert!((appender - 5.0).abs() < 1e-9, "{factlog}");
    assert_eq!(factlog["synced_appends_per_run"], 10.0);
    // Every event of the session is synced on its own: 31 per turn.
    assert_eq!(row("jsonl-every")["fsyncs_per_turn"], 31.0);
    assert_eq!(row("jsonl-critical")["fsyncs_per_turn"], 5.0);
    assert_eq!(row("all-synced")["synced_appends_per_run"], 62.0);
    // The floor replays the same run's factlog session: its fdatasyncs, with its bytes.
    assert_eq!(row("floor")["fsyncs_per_turn"], factlog["fsyncs_per_turn"]);
    assert_eq!(row("floor")["bytes_per_token"], factlog["bytes_per_token"]);
    assert_empty(dir.path());
}

#[test]
fn two_tasks_in_parallel_double_the_tokens_and_keep_the_floor_honest() {
    let dir = TempDir::new().expect("tempdir");
    let output = bench(dir.path(), &["--tasks", "2", "--json"]);
    let text = success(&output);
    // Standard error is a pipe here, not a terminal: no progress line, however long the run.
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(report["workload"]["tasks"], 2);
    let rows = report["policies"].as_array().expect("a policies array");
    let row = |name: &str| &rows[POLICIES.iter().position(|&p| p == name).expect("a policy")];
    for row in rows {
        let name = &row["name"];
        // Twice the one-task count of 2 turns x 2 steps x 10 tokens.
        assert_eq!(row["tokens"], 2 * 2 * 2 * 10, "{name}");
        assert!(row["fsyncs_per_turn"].as_f64().is_some_and(|v| v > 0.0), "{name}");
        for field in ["median", "min", "max"] {
            assert!(row["ratio_to_floor"][field].as_f64().is_some_and(|v| v > 0.0), "{name}");
        }
    }
    // Each task's turns are counted: per turn of a task the same syncs as with one task.
    assert_eq!(row("jsonl-every")["fsyncs_per_turn"], 31.0);
    assert_eq!(row("jsonl-critical")["fsyncs_per_turn"], 5.0);
    assert_eq!(row("all-synced")["synced_appends_per_run"], 124.0);
    assert_eq!(row("factlog")["synced_appends_per_run"], 20.0);
    // The group commit may merge the two tasks' syncs, so there are at most 5 a turn plus
    // the flusher's; the floor replays exactly the syncs and bytes of the same run's session.
    let factlog = row("factlog");
    let appender = factlog["fsyncs_per_turn"].as_f64().expect("fsyncs")
        - factlog["fsyncs_per_turn_by_flusher"].as_f64().expect("flusher fsyncs");
    assert!(appender > 0.0 && appender <= 5.0 + 1e-9, "{factlog}");
    assert_eq!(row("floor")["fsyncs_per_turn"], factlog["fsyncs_per_turn"]);
    assert_eq!(row("floor")["bytes_per_token"], factlog["bytes_per_token"]);
    assert_eq!(row("floor")["ratio_to_floor"]["median"], 1.0);
    assert_empty(dir.path());
}

/// Checks that every element opened in `svg` is closed, in order.
fn assert_balanced(svg: &str) {
    let mut open: Vec<String> = Vec::new();
    let mut rest = svg;
    while let Some(at) = rest.find('<') {
        let end = rest[at..].find('>').expect("an unterminated tag") + at;
        let tag = &rest[at + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.pop().as_deref(), Some(name.trim()), "misnested </{name}>");
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().expect("a tag name");
            open.push(name.to_owned());
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "unclosed elements {open:?}");
}

#[test]
fn svg_is_a_balanced_chart_naming_every_policy() {
    let dir = TempDir::new().expect("tempdir");
    let out = TempDir::new().expect("tempdir");
    let path = out.path().join("bench.svg");
    let path_arg = path.to_str().expect("a UTF-8 path");
    success(&bench(dir.path(), &["--svg", path_arg]));
    let svg = std::fs::read_to_string(&path).expect("the SVG was written");
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_balanced(&svg);
    for policy in POLICIES {
        let text = format!(">{policy}</text>");
        assert!(svg.matches(&text).count() >= 1, "no <text> for {policy}");
    }
    assert_empty(dir.path());
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    for args in [
        vec!["bench", "--turns", "0"],
        vec!["bench", "--runs", "many"],
        vec!["bench", "--tasks", "0"],
        vec!["bench", "--no-such-flag"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_factlog")).args(&args).output().expect("run");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("factlog: "), "{stderr}");
    }
}
