//! `factlog bench --clients LIST` runs the many-session workload with N client processes of one
//! served store, N threads of one process, N processes with stores of their own (and, in a build
//! with SQLite, N processes sharing a SQLite database) for every N, and reports it as a table
//! and as one JSON object with the wall ratios per N; every acknowledged event is in the store
//! afterwards; bad lists exit 2. Each test runs the binary on N = 1 and 3 with sessions of
//! 1 turn x 1 step x 2 tokens; no timing is checked, only the shape of the report and the
//! counts that follow from the workload.

use crate::common;

use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

/// The policies every build measures; `sqlite` comes after them in a build with SQLite.
const POLICIES: [&str; 4] = ["served", "served-every", "threads", "own-stores"];

const COUNTS: [u64; 2] = [1, 3];

const TINY: [&str; 10] =
    ["--clients", "1,3", "--turns", "1", "--steps", "1", "--tokens", "2", "--runs", "1"];

/// Critical events (tool/call, tool/result, turn/end) of one session of 1 turn x 1 step.
const CRITICAL_PER_SESSION: u64 = 3;

/// Events of one session of 1 turn x 1 step x 2 tokens: 3 a turn, 4 + 2 tokens a step.
const EVENTS_PER_SESSION: u64 = 3 + 4 + 2;

/// Runs `factlog bench` on the tiny workload with `--dir DIR` and `extra`
/// ([`common::cli::bench_in`]).
fn bench(dir: &Path, extra: &[&str]) -> String {
    common::cli::bench_in(dir, &[&TINY[..], extra].concat())
}

#[test]
fn table_has_a_row_per_count_and_policy_and_the_ratios() {
    let dir = TempDir::new().expect("tempdir");
    let text = bench(dir.path(), &[]);
    let row = |first: &str, second: &str| {
        text.lines()
            .filter(|line| {
                let mut words = line.split_whitespace();
                words.next() == Some(first) && words.next() == Some(second)
            })
            .count()
    };
    for n in COUNTS {
        for policy in POLICIES {
            assert_eq!(row(&n.to_string(), policy), 1, "rows for N = {n}, {policy}:\n{text}");
        }
    }
    assert!(text.contains("served / threads") && text.contains("served / own-stores"), "{text}");
    assert!(text.contains("served-every / served"), "{text}");
    assert!(text.contains("events/s") && text.contains("fsync/crit"), "{text}");
}

#[test]
fn json_counts_follow_from_the_workload_and_every_acknowledged_event_is_stored() {
    let dir = TempDir::new().expect("tempdir");
    let text = bench(dir.path(), &["--json"]);
    assert_eq!(text.lines().count(), 1, "one JSON object: {text}");
    let report: Value = serde_json::from_str(&text).expect("valid JSON");
    let workload = &report["workload"];
    assert_eq!(workload["clients"], serde_json::json!(COUNTS));
    assert_eq!(workload["events_per_session"], EVENTS_PER_SESSION);
    assert_eq!(workload["critical_events_per_session"], CRITICAL_PER_SESSION);
    assert_eq!(workload["runs"], 1);
    let policies: Vec<&str> = workload["policies"]
        .as_array()
        .expect("policies")
        .iter()
        .map(|p| p.as_str().expect("a name"))
        .collect();
    let sqlite = policies.len() == POLICIES.len() + 1;
    assert_eq!(&policies[..POLICIES.len()], POLICIES, "{policies:?}");
    if sqlite {
        assert_eq!(policies[POLICIES.len()], "sqlite");
    }
    let results = report["results"].as_array().expect("a results array");
    assert_eq!(results.len(), COUNTS.len() * policies.len());
    for (i, result) in results.iter().enumerate() {
        let n = COUNTS[i / policies.len()];
        let policy = policies[i % policies.len()];
        assert_eq!(result["clients"], n, "{result}");
        assert_eq!(result["policy"], policy, "{result}");
        assert!(result["note"].as_str().is_some_and(|note| !note.is_empty()), "{result}");
        assert_eq!(result["events_per_run"], n * EVENTS_PER_SESSION, "{result}");
        assert_eq!(result["critical_events_per_run"], n * CRITICAL_PER_SESSION, "{result}");
        // No acknowledged event is missing from the store afterwards.
        assert_eq!(result["events_stored_per_run"], n * EVENTS_PER_SESSION, "{result}");
        for field in ["median", "min", "max"] {
            assert!(result["events_per_s"][field].as_f64().is_some_and(|v| v > 0.0), "{result}");
            assert!(result["wall_ms"][field].as_f64().is_some_and(|v| v > 0.0), "{result}");
        }
        let latency = &result["synced_latency_us"];
        let at = |p: &str| latency[p].as_f64().unwrap_or_else(|| panic!("{p}: {result}"));
        assert!(0.0 < at("p50") && at("p50") <= at("p99") && at("p99") <= at("max"), "{result}");
        // One synced append per critical event (a step's tool/result and step/end are one
        // batch): N x 3 of them.
        assert_eq!(result["synced_appends_per_run"], (n * CRITICAL_PER_SESSION) as f64);
        assert!(result["cpu_us_per_event"].as_f64().is_some_and(|v| v > 0.0), "{result}");
        let server_cpu = result["server_cpu_us_per_event"].as_f64();
        assert_eq!(server_cpu.is_some(), policy.starts_with("served"), "{result}");
        if policy == "sqlite" {
            assert!(result["fdatasyncs_per_critical_event"].is_null(), "{result}");
            continue;
        }
        // The group commit may merge the syncs of several sessions, never add one; the
        // background flusher may add syncs of its own, counted apart.
        let syncs = result["fdatasyncs_per_critical_event"].as_f64().expect("syncs");
        let by_flusher =
            result["fdatasyncs_per_critical_event_by_flusher"].as_f64().expect("flusher syncs");
        assert!(syncs - by_flusher > 0.0 && syncs - by_flusher <= 1.0 + 1e-9, "{result}");
    }
    let comparisons = report["comparisons"].as_array().expect("comparisons");
    assert_eq!(comparisons.len(), COUNTS.len());
    for (comparison, n) in comparisons.iter().zip(COUNTS) {
        assert_eq!(comparison["clients"], n, "{comparison}");
        for ratio in ["served_to_threads", "served_to_own_stores", "served_every_to_served"] {
            let median = comparison[ratio]["median"].as_f64();
            assert!(median.is_some_and(|v| v > 0.0), "{ratio}: {comparison}");
        }
        assert_eq!(comparison["sqlite_to_served"].is_null(), !sqlite, "{comparison}");
    }
}

#[test]
fn bad_lists_exit_2_with_one_line() {
    for (list, says) in [
        ("0", "1 to "),
        ("1,,2", "empty entry"),
        ("abc", "not a count"),
        ("100000", "the most clients a served store serves at once"),
        ("4,4", "twice"),
    ] {
        let run = common::factlog(&["bench", "--clients", list], b"");
        run.assert_one_line_error(2);
        assert!(run.stdout.is_empty(), "{list}");
        assert!(run.stderr.contains("--clients") && run.stderr.contains(says), "{run:?}");
    }
}

#[test]
fn clients_with_sessions_or_tasks_exit_2() {
    for other in [["--sessions", "2"], ["--tasks", "2"]] {
        let run = common::factlog(&[&["bench", "--clients", "2"][..], &other[..]].concat(), b"");
        run.assert_one_line_error(2);
        assert!(run.stderr.contains("--clients") && run.stderr.contains(other[0]), "{run:?}");
    }
}
