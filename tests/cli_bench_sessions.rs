//! `factlog bench --sessions LIST` runs the many-session workload (N sessions at once, one
//! thread and one task each) under every policy for every N and reports it as a table, as one
//! JSON object and as an SVG chart with one line per N; bad lists exit 2. Each test runs the
//! binary on N = 1 and 3 with sessions of 1 turn x 1 step x 2 tokens; no timing is checked,
//! only the shape of the report and the counts that follow from the workload.

use crate::common;

use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

const POLICIES: [&str; 4] = ["factlog", "log", "jsonl-per-session", "floor"];

const COUNTS: [u64; 2] = [1, 3];

const TINY: [&str; 10] =
    ["--sessions", "1,3", "--turns", "1", "--steps", "1", "--tokens", "2", "--runs", "1"];

/// Critical events (tool/call, tool/result, turn/end) of one session of 1 turn x 1 step.
const CRITICAL_PER_SESSION: u64 = 3;

/// Events of one session of 1 turn x 1 step x 2 tokens: 3 a turn, 4 + 2 tokens a step.
const EVENTS_PER_SESSION: u64 = 3 + 4 + 2;

/// Runs `factlog bench` on the tiny many-session workload with `--dir DIR` and `extra`;
/// asserts success and an empty standard error (a pipe, so no progress line), and returns
/// standard output.
fn bench(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["bench"];
    args.extend(TINY);
    args.extend(["--dir", common::arg(dir)]);
    args.extend(extra);
    let run = common::factlog(&args, b"");
    run.assert_success();
    // The scratch directory is removed at the end: nothing is left in `--dir`.
    let left: Vec<_> = std::fs::read_dir(dir).expect("list --dir").collect();
    assert!(left.is_empty(), "bench left {left:?} behind");
    run.stdout_text()
}

#[test]
fn table_has_a_row_per_count_and_policy() {
    let dir = TempDir::new().expect("tempdir");
    let text = bench(dir.path(), &[]);
    for n in COUNTS {
        for policy in POLICIES {
            let rows = text
                .lines()
                .filter(|line| {
                    let mut words = line.split_whitespace();
                    words.next() == Some(&n.to_string()) && words.next() == Some(policy)
                })
                .count();
            assert_eq!(rows, 1, "rows for N = {n}, {policy}:\n{text}");
        }
    }
    assert!(text.contains("events/s") && text.contains("x floor"), "{text}");
}

#[test]
fn json_has_one_result_per_count_and_policy_with_the_workload_counts() {
    let dir = TempDir::new().expect("tempdir");
    let text = bench(dir.path(), &["--json"]);
    assert_eq!(text.lines().count(), 1, "one JSON object: {text}");
    let report: Value = serde_json::from_str(&text).expect("valid JSON");
    let workload = &report["workload"];
    assert_eq!(workload["sessions"], serde_json::json!(COUNTS));
    assert_eq!(workload["events_per_session"], EVENTS_PER_SESSION);
    assert_eq!(workload["critical_events_per_session"], CRITICAL_PER_SESSION);
    assert_eq!(workload["runs"], 1);
    let results = report["results"].as_array().expect("a results array");
    assert_eq!(results.len(), COUNTS.len() * POLICIES.len());
    for (i, result) in results.iter().enumerate() {
        let n = COUNTS[i / POLICIES.len()];
        let policy = POLICIES[i % POLICIES.len()];
        assert_eq!(result["sessions"], n, "{result}");
        assert_eq!(result["policy"], policy, "{result}");
        assert!(result["note"].as_str().is_some_and(|note| !note.is_empty()), "{result}");
        assert_eq!(result["events_per_run"], n * EVENTS_PER_SESSION, "{result}");
        assert_eq!(result["critical_events_per_run"], n * CRITICAL_PER_SESSION, "{result}");
        for field in ["median", "min", "max"] {
            assert!(result["events_per_s"][field].as_f64().is_some_and(|v| v > 0.0), "{result}");
            assert!(result["ratio_to_floor"][field].as_f64().is_some_and(|v| v > 0.0), "{result}");
        }
        let latency = &result["synced_latency_us"];
        let at = |p: &str| latency[p].as_f64().unwrap_or_else(|| panic!("{p}: {result}"));
        assert!(0.0 < at("p50") && at("p50") <= at("p99") && at("p99") <= at("max"), "{result}");
        // Every session makes one synced append per critical event (a step's tool/result
        // and step/end are one batch): N x 3 of them.
        assert_eq!(result["synced_appends_per_run"], (n * CRITICAL_PER_SESSION) as f64);
        let syncs = result["fdatasyncs_per_critical_event"].as_f64().expect("syncs");
        let by_flusher =
            result["fdatasyncs_per_critical_event_by_flusher"].as_f64().expect("flusher syncs");
        match policy {
            // The group commit may merge the syncs of several sessions, never add one; the
            // background flusher may add syncs of its own, counted apart.
            "factlog" | "log" => {
                assert!(syncs - by_flusher > 0.0 && syncs - by_flusher <= 1.0 + 1e-9, "{result}");
            }
            _ => {
                assert_eq!(syncs, 1.0, "{result}");
                assert_eq!(by_flusher, 0.0, "{result}");
            }
        }
        if policy == "floor" {
            assert_eq!(result["ratio_to_floor"]["median"], 1.0, "{result}");
        }
    }
}

const SVG_NS: &str = "http://www.w3.org/2000/svg";

#[test]
fn svg_has_one_line_per_count_in_each_panel() {
    let dir = TempDir::new().expect("tempdir");
    let out = TempDir::new().expect("tempdir");
    let path = out.path().join("sessions.svg");
    bench(dir.path(), &["--svg", common::arg(&path)]);
    let svg = std::fs::read_to_string(&path).expect("the SVG was written");
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    assert!(doc.root_element().has_tag_name((SVG_NS, "svg")));
    for id in ["throughput", "latency"] {
        let panel = doc
            .descendants()
            .find(|node| node.attribute("id") == Some(id))
            .unwrap_or_else(|| panic!("no panel {id}"));
        let lines: Vec<_> =
            panel.descendants().filter(|n| n.has_tag_name((SVG_NS, "polyline"))).collect();
        assert_eq!(lines.len(), COUNTS.len(), "{id}");
        for line in lines {
            let points = line.attribute("points").expect("points");
            let numbers: Vec<f64> =
                points.split([' ', ',']).map(|v| v.parse().expect("a number")).collect();
            // One point per policy, every coordinate a finite place on the chart.
            assert_eq!(numbers.len(), 2 * POLICIES.len(), "{id}: {points}");
            assert!(numbers.iter().all(|v| v.is_finite() && *v >= 0.0), "{id}: {points}");
        }
        let texts: Vec<&str> = panel.descendants().filter_map(|n| n.text()).collect();
        for policy in POLICIES {
            assert!(texts.contains(&policy), "no {policy} in {id}: {texts:?}");
        }
        for n in COUNTS {
            assert!(texts.contains(&format!("N = {n}").as_str()), "no N = {n} in {id}");
        }
    }
}

#[test]
fn bad_lists_exit_2_with_one_line() {
    for (list, says) in [
        ("0", "1 to 1024"),
        ("1,,2", "empty entry"),
        ("abc", "not a count"),
        ("1025", "1 to 1024"),
        ("4,4", "twice"),
    ] {
        let run = common::factlog(&["bench", "--sessions", list], b"");
        run.assert_one_line_error(2);
        assert!(run.stdout.is_empty(), "{list}");
        assert!(run.stderr.contains("--sessions") && run.stderr.contains(says), "{run:?}");
    }
}

#[test]
fn tasks_and_sessions_together_exit_2() {
    let run = common::factlog(&["bench", "--sessions", "2", "--tasks", "2"], b"");
    run.assert_one_line_error(2);
    assert!(run.stderr.contains("--sessions") && run.stderr.contains("--tasks"), "{run:?}");
}
