//! `factlog bench` runs a tiny agent-session workload under every policy and reports it as a
//! table, as one JSON object and as an SVG chart; bad arguments exit 2. Each test runs the
//! binary on a workload of 2 turns x 2 steps x 10 tokens; no timing is checked, only the
//! shape of the report and the counts that follow from the workload.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

const POLICIES: [&str; 6] =
    ["factlog", "all-synced", "all-buffered", "jsonl-every", "jsonl-critical", "floor"];

const TINY: [&str; 8] = ["--turns", "2", "--steps", "2", "--tokens", "10", "--runs", "1"];

fn bench(dir: &Path, extra: &[&str]) -> Output {
    Command::new(&*common::FACTLOG)
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

const SVG_NS: &str = "http://www.w3.org/2000/svg";

/// The numeric attributes of the chart's shapes: every one is a coordinate or a size inside
/// the view box, so none is negative (the chart is drawn from its top left corner).
const NUMERIC: [&str; 10] = ["x", "y", "width", "height", "x1", "x2", "y1", "y2", "cx", "cy"];

/// The element with id `id`, or a failure naming it.
fn by_id<'a, 'input>(
    doc: &'a roxmltree::Document<'input>,
    id: &str,
) -> roxmltree::Node<'a, 'input> {
    doc.descendants()
        .find(|node| node.attribute("id") == Some(id))
        .unwrap_or_else(|| panic!("no element with id {id:?}"))
}

/// The texts of the `<text>` elements under `node`.
fn texts(node: roxmltree::Node) -> Vec<String> {
    node.descendants()
        .filter(|n| n.has_tag_name((SVG_NS, "text")))
        .map(|n| n.text().unwrap_or("").to_owned())
        .collect()
}

/// Parses a number of the chart, which must be finite, non-negative and inside `limit`.
fn coordinate(what: &str, text: &str, limit: f64) -> f64 {
    let value: f64 =
        text.trim().parse().unwrap_or_else(|_| panic!("{what}={text:?}: not a number"));
    assert!(value.is_finite(), "{what}={text:?}: not finite");
    assert!(value >= 0.0, "{what}={text:?}: negative");
    assert!(value <= limit, "{what}={text:?}: beyond the {limit} of the view box");
    value
}

#[test]
fn svg_is_valid_xml_with_both_panels_and_every_policy() {
    let dir = TempDir::new().expect("tempdir");
    let out = TempDir::new().expect("tempdir");
    let path = out.path().join("bench.svg");
    let path_arg = path.to_str().expect("a UTF-8 path");
    success(&bench(dir.path(), &["--svg", path_arg]));
    let svg = std::fs::read_to_string(&path).expect("the SVG was written");
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    let root = doc.root_element();
    assert!(root.has_tag_name((SVG_NS, "svg")), "root {:?}", root.tag_name());
    let view_box: Vec<f64> = root
        .attribute("viewBox")
        .expect("a viewBox")
        .split_whitespace()
        .map(|v| v.parse().expect("a viewBox number"))
        .collect();
    assert_eq!(view_box.len(), 4, "{view_box:?}");
    let (width, height) = (view_box[2], view_box[3]);
    assert!(width > 0.0 && height > 0.0, "{view_box:?}");
    coordinate("width", root.attribute("width").expect("a width"), width);
    coordinate("height", root.attribute("height").expect("a height"), height);

    // The cost panel names every policy and labels its logarithmic decades.
    let cost = texts(by_id(&doc, "cost"));
    for policy in POLICIES {
        assert!(cost.iter().any(|t| t == policy), "no {policy} in the cost panel: {cost:?}");
    }
    // Decades in whatever unit the run's times fall in: a loaded machine reaches milliseconds.
    let units = [" ns", " µs", " ms", " s"];
    let decades = cost.iter().filter(|t| units.iter().any(|u| t.ends_with(u))).count();
    assert!(decades >= 2, "no decade labels in the cost panel: {cost:?}");
    let bars = by_id(&doc, "cost").descendants().filter(|n| n.attribute("class") == Some("bar"));
    assert_eq!(bars.count(), POLICIES.len());

    // The latency panel draws the distribution of every policy: each has synced appends.
    let latency = by_id(&doc, "latency");
    let names = texts(latency);
    for policy in POLICIES {
        assert!(names.iter().any(|t| t == policy), "no {policy} in the latency panel: {names:?}");
    }
    let curves: Vec<_> =
        latency.descendants().filter(|n| n.has_tag_name((SVG_NS, "polyline"))).collect();
    assert_eq!(curves.len(), POLICIES.len());

    for node in doc.descendants().filter(roxmltree::Node::is_element) {
        let tag = node.tag_name().name();
        for name in NUMERIC {
            if let Some(text) = node.attribute(name) {
                let horizontal = matches!(name, "x" | "x1" | "x2" | "cx" | "width");
                let limit = if horizontal { width } else { height };
                coordinate(&format!("<{tag}> {name}"), text, limit);
            }
        }
        if let Some(points) = node.attribute("points") {
            let numbers: Vec<&str> = points.split([' ', ',']).filter(|p| !p.is_empty()).collect();
            assert!(numbers.len() >= 4 && numbers.len().is_multiple_of(2), "points {points:?}");
            for pair in numbers.chunks(2) {
                coordinate("points x", pair[0], width);
                coordinate("points y", pair[1], height);
            }
        }
    }
    assert_empty(dir.path());
}

/// Waits at most `limit` for `child`; kills it (and fails) if it is still running then.
fn wait_at_most(mut child: std::process::Child, limit: std::time::Duration) -> Output {
    let started = std::time::Instant::now();
    while child.try_wait().expect("poll the bench").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bench still running after {limit:?}: it measures before checking --svg");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect the bench's output")
}

#[test]
fn svg_that_cannot_be_created_fails_before_measuring() {
    let dir = TempDir::new().expect("tempdir");
    let out = TempDir::new().expect("tempdir");
    let path = out.path().join("no-such-directory").join("bench.svg");
    // A workload of minutes: the bench must refuse the path before it starts measuring.
    let child = Command::new(&*common::FACTLOG)
        .args(["bench", "--turns", "2000", "--runs", "100", "--dir"])
        .arg(dir.path())
        .arg("--svg")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run factlog bench");
    let output = wait_at_most(child, std::time::Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty(), "{}", String::from_utf8_lossy(&output.stdout));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("factlog: ") && stderr.contains("--svg"), "{stderr}");
    assert!(!path.exists());
    assert_empty(dir.path());
}

#[test]
fn svg_that_cannot_be_written_keeps_the_report() {
    // A device that takes any open and refuses every write: the chart fails after the runs.
    let full = Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    let dir = TempDir::new().expect("tempdir");
    let output = bench(dir.path(), &["--json", "--svg", "/dev/full"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = String::from_utf8(output.stdout).expect("UTF-8 output");
    let report: Value = serde_json::from_str(&text).expect("the report was printed");
    assert_eq!(report["policies"].as_array().expect("a policies array").len(), POLICIES.len());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("factlog: ") && stderr.contains("/dev/full"), "{stderr}");
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
        let output = Command::new(&*common::FACTLOG).args(&args).output().expect("run");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("factlog: "), "{stderr}");
    }
}
