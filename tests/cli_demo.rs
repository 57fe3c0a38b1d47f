//! `factlog demo` really crashes its writer in the middle of the side-effecting `publish`
//! call and recovers without publishing twice: the writer is a child process killed by
//! SIGKILL after its `tool/call` was synced (the log holds the call and no result until
//! recovery writes the unknown outcome), recovery reports the completed search with its
//! receipt, the unknown publish with its plan, the unused `once` approval as expired and a
//! resume that needs confirmation, and the task then finishes with exactly one article in the
//! simulated service, for every kind of seed. Without DIR nothing is left in the temporary
//! directory; a seed always gives the same run. Proved by running the real binary and
//! reading what it left through `factlog state` and `factlog dump`.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::cli::{dump_records, json_of};
use common::{FACTLOG, Run, arg, factlog, temp_log};
use serde_json::{Value, json};

const TASK: &str = "publish-article";
const PUBLISH: &str = "call-publish-1";

/// `factlog demo ARGS.. --json`, asserting success; the summary.
fn demo_json(extra: &[&str]) -> Value {
    let mut args = vec!["demo"];
    args.extend_from_slice(extra);
    args.push("--json");
    let run = factlog(&args, b"");
    run.assert_success();
    let text = run.stdout_text();
    assert_eq!(text.lines().count(), 1, "one JSON line: {run:?}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The articles the simulated service holds in the store `dir`.
fn articles(dir: &Path) -> Vec<Value> {
    let bytes = std::fs::read(dir.join("external").join("articles.json")).expect("articles file");
    let value: Value = serde_json::from_slice(&bytes).expect("articles JSON");
    value["articles"].as_array().expect("articles").clone()
}

#[test]
fn the_default_seed_verifies_the_landed_article_instead_of_publishing_twice() {
    let (_temp, dir) = temp_log();
    let summary = demo_json(&[arg(&dir)]);

    // The writer was killed by SIGKILL right after its publish call was synced.
    assert_eq!(summary["crash"]["signal"], 9, "{summary}");
    assert_eq!(summary["crash"]["killed"], true);
    assert_eq!(summary["crash"]["external_effect_landed"], true);
    assert_eq!(summary["before_recovery"]["publish_status"], "dispatched");
    assert_eq!(summary["before_recovery"]["publish_has_result"], false);

    // Recovery's findings.
    assert_eq!(summary["publish_effect"], "queryable");
    let unknown = summary["unknown_calls"].as_array().expect("unknown_calls");
    assert_eq!(unknown.len(), 1, "{summary}");
    assert_eq!(unknown[0]["call_id"], PUBLISH);
    assert_eq!(unknown[0]["plan"], "verify");
    let key = unknown[0]["request_key"].as_str().expect("request key").to_owned();
    assert!(key.starts_with("rk1_"), "{key}");
    assert_eq!(
        summary["completed_calls"],
        json!([{ "call_id": "call-search-1", "tool": "search",
                 "receipt": { "query_id": "q-1", "hits": 3 } }])
    );
    assert_eq!(summary["not_started_calls"][0]["call_id"], "call-notify-1");
    assert_eq!(summary["expired_approvals"], json!(["approval-notify-1"]));
    assert_eq!(summary["resume"], "needs_confirmation");
    assert_eq!(summary["refused_before_confirmation"], true);

    // Resolved by asking the service: no second dispatch, one article.
    assert_eq!(summary["resolution"]["plan"], "verify");
    assert_eq!(summary["resolution"]["redispatched"], false);
    assert_eq!(summary["external_effects"], 1);
    let published = articles(&dir);
    assert_eq!(published.len(), 1, "{published:?}");
    assert_eq!(published[0]["request_key"], key.as_str());
    assert_eq!(summary["resolution"]["receipt"]["article_id"], published[0]["article_id"]);
    assert_eq!(summary["task_finished"], true);
    assert!(summary["bytes_on_disk"].as_u64().expect("bytes") > 0);
    assert!(summary["fsyncs"].as_u64().expect("fsyncs") > 0);

    // The log: the killed writer's last event is the publish call; the next events are
    // recovery's, so no tool/result was written before the crash.
    let records = dump_records(&dir, &[]);
    assert_eq!(records.len() as u64, summary["events"].as_u64().expect("events"));
    let acknowledged = summary["crash"]["acknowledged_seq"].as_u64().expect("seq");
    let at = |seq: u64| &records[usize::try_from(seq - 1).expect("index")];
    assert_eq!(at(acknowledged)["type"], "tool/call");
    assert_eq!(at(acknowledged)["call_id"], PUBLISH);
    assert_eq!(at(acknowledged + 1)["type"], "tool/outcome_unknown");
    assert_eq!(at(acknowledged + 1)["call_id"], PUBLISH);
    assert_eq!(at(acknowledged + 1)["plan"], "verify");
    let results: Vec<u64> = records
        .iter()
        .filter(|r| r["type"] == "tool/result" && r["call_id"] == PUBLISH)
        .map(|r| r["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(results.len(), 1, "one result for publish");
    assert!(results[0] > acknowledged + 1);
    assert_eq!(records.iter().filter(|r| r["type"] == "control/resume").count(), 1);
    let secret_free = records.iter().all(|r| !r.to_string().contains("demo-token"));
    assert!(secret_free, "a secret reached the log");

    // The task's state as `factlog state` reads it.
    let state = &json_of("state", &dir, &["--task", TASK])["tasks"][TASK];
    assert_eq!(state["task"]["phase"], "done");
    assert_eq!(state["task"]["risk"], "high");
    assert_eq!(state["execution"]["open_turn"], Value::Null);
    assert_eq!(state["control"]["needs_confirmation"], false);
    assert_eq!(state["control"]["approvals"]["approval-notify-1"]["status"], "expired");
    assert_eq!(state["control"]["approvals"]["approval-publish-1"]["status"], "consumed");
    let calls = state["session"]["calls"].as_object().expect("calls");
    assert!(calls.values().all(|c| c["status"] == "completed"), "{calls:?}");
    assert_eq!(state["side_effects"][key.as_str()]["status"], "completed");
}

#[test]
fn every_kind_of_seed_ends_with_exactly_one_article() {
    // (seed, effect, landed before the crash, plan, dispatched again, deduplicated by key)
    let cases = [
        (0, "idempotent", true, "retry_same_key", true, true),
        (1, "idempotent", false, "retry_same_key", true, false),
        (6, "queryable", false, "verify", true, false),
    ];
    for (seed, effect, landed, plan, redispatched, deduplicated) in cases {
        let (_temp, dir) = temp_log();
        let summary = demo_json(&[arg(&dir), "--seed", &seed.to_string()]);
        let context = format!("seed {seed}: {summary}");
        assert_eq!(summary["publish_effect"], effect, "{context}");
        assert_eq!(summary["crash"]["signal"], 9, "{context}");
        assert_eq!(summary["crash"]["external_effect_landed"], landed, "{context}");
        assert_eq!(summary["before_recovery"]["external_effects"], u64::from(landed));
        assert_eq!(summary["unknown_calls"][0]["call_id"], PUBLISH, "{context}");
        assert_eq!(summary["unknown_calls"][0]["plan"], plan, "{context}");
        assert_eq!(summary["expired_approvals"], json!(["approval-notify-1"]), "{context}");
        assert_eq!(summary["resolution"]["redispatched"], redispatched, "{context}");
        assert_eq!(summary["resolution"]["service_deduplicated"], deduplicated, "{context}");
        assert_eq!(summary["external_effects"], 1, "{context}");
        assert_eq!(articles(&dir).len(), 1, "{context}");
        assert_eq!(summary["task_finished"], true, "{context}");
        let state = json_of("state", &dir, &["--task", TASK]);
        assert_eq!(state["tasks"][TASK]["task"]["phase"], "done", "{context}");
    }
}

#[test]
fn without_dir_the_demo_leaves_nothing_behind() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let output = Command::new(&*FACTLOG)
        .arg("demo")
        .env("TMPDIR", temp.path())
        .output()
        .expect("run factlog demo");
    let run = Run {
        code: output.status.code(),
        stdout: output.stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    run.assert_success();
    let text = run.stdout_text();
    for section in ["== 1.", "== 2.", "== 3.", "== 4."] {
        assert!(text.contains(section), "{text}");
    }
    assert!(text.contains("signal 9"), "{text}");
    assert!(text.contains("plan verify"), "{text}");
    assert!(text.contains("approval expired: approval-notify-1"), "{text}");
    assert!(text.contains("needs_confirmation"), "{text}");
    assert!(text.contains("task finished"), "{text}");
    // The temporary store was under TMPDIR, and it is gone.
    assert!(text.contains(temp.path().to_str().expect("UTF-8")), "{text}");
    let left: Vec<_> = std::fs::read_dir(temp.path()).expect("read TMPDIR").collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_seed_always_gives_the_same_run() {
    let without_run_details = |mut summary: Value| {
        let crash = summary["crash"].as_object_mut().expect("crash");
        crash.remove("writer_pid");
        let object = summary.as_object_mut().expect("summary");
        object.remove("wall_ms");
        object.remove("dir");
        summary
    };
    let (_first_temp, first) = temp_log();
    let (_second_temp, second) = temp_log();
    let a = without_run_details(demo_json(&[arg(&first), "--seed", "5"]));
    let b = without_run_details(demo_json(&[arg(&second), "--seed", "5"]));
    assert_eq!(a, b);
    assert_eq!(articles(&first), articles(&second));
}

#[test]
fn a_directory_that_is_not_empty_is_refused() {
    let (_temp, dir) = temp_log();
    std::fs::create_dir_all(&dir).expect("create");
    std::fs::write(dir.join("notes.txt"), b"keep me").expect("write");
    let run = factlog(&["demo", arg(&dir)], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("not empty"), "{run:?}");
    assert_eq!(std::fs::read(dir.join("notes.txt")).expect("read"), b"keep me");
}
