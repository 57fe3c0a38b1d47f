//! `factlog bench --emit-clients LIST`: N `factlog emit` processes writing through one served
//! store against N writing stores of their own, on a tiny workload (`format-spec/schema/
//! bench-emit-clients.json` is checked in `schema_outputs.rs`).

use crate::common;

use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

/// Events of one session of 1 turn x 1 step x 2 tokens: 3 a turn, 4 + 2 tokens a step.
const EVENTS_PER_SESSION: u64 = 3 + 4 + 2;

/// Runs `factlog bench --emit-clients 1,3` on the tiny workload with `--dir DIR` and `extra`;
/// asserts success, an empty standard error and nothing left in `--dir`.
fn bench(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["--emit-clients", "1,3", "--turns", "1", "--steps", "1"];
    args.extend(["--tokens", "2", "--runs", "2"]);
    args.extend(extra);
    common::cli::bench_in(dir, &args)
}

#[test]
fn every_count_is_measured_under_both_policies_and_compared() {
    let dir = TempDir::new().expect("tempdir");
    let text = bench(dir.path(), &[]);
    for n in ["1", "3"] {
        for policy in ["emit-served", "emit-own-stores"] {
            let rows = text
                .lines()
                .filter(|line| {
                    let words: Vec<&str> = line.split_whitespace().collect();
                    words.first() == Some(&n) && words.get(1) == Some(&policy)
                })
                .count();
            assert_eq!(rows, 1, "rows for N = {n}, {policy}:\n{text}");
        }
    }
    assert!(text.contains("emit-served / emit-own-stores"), "{text}");
}

#[test]
fn json_has_a_result_per_count_and_policy_and_a_ratio_per_count() {
    let dir = TempDir::new().expect("tempdir");
    let report: Value = serde_json::from_str(&bench(dir.path(), &["--json"])).expect("JSON");
    assert_eq!(report["workload"]["events_per_session"], EVENTS_PER_SESSION);
    assert_eq!(report["workload"]["runs"], 2);
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "{report}");
    for (result, (n, policy)) in results.iter().zip([
        (1, "emit-served"),
        (1, "emit-own-stores"),
        (3, "emit-served"),
        (3, "emit-own-stores"),
    ]) {
        assert_eq!(result["clients"], n, "{result}");
        assert_eq!(result["policy"], policy, "{result}");
        assert_eq!(result["events_per_run"], n * EVENTS_PER_SESSION, "{result}");
        let wall = &result["wall_ms"];
        let at = |key: &str| wall[key].as_f64().unwrap_or_else(|| panic!("{key}: {result}"));
        assert!(0.0 < at("min") && at("min") <= at("median") && at("median") <= at("max"));
    }
    let ratios = report["ratios"].as_array().expect("ratios");
    assert_eq!(ratios.len(), 2, "{report}");
    for (ratio, n) in ratios.iter().zip([1, 3]) {
        assert_eq!(ratio["clients"], n, "{ratio}");
        let median = ratio["emit_served_over_emit_own_stores"]["median"].as_f64();
        assert!(median.is_some_and(|v| v > 0.0), "{ratio}");
    }
}

#[test]
fn emit_clients_with_clients_or_sessions_exit_2() {
    for other in [["--clients", "2"], ["--sessions", "2"]] {
        let run =
            common::factlog(&[&["bench", "--emit-clients", "2"][..], &other[..]].concat(), b"");
        run.assert_one_line_error(2);
        assert!(run.stderr.contains("--emit-clients"), "{run:?}");
    }
}
