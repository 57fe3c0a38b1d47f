//! The outputs of the operator's commands against their schemas: `factlog tasks --json`
//! (`tasks-line.json`), the answer commands' `--json` line (`answer.json`), the operator
//! entries of `factlog history --json` (`history-entry.json`) and the state after answers
//! (`state.json`, schema 2), with lines that break each schema refused.

use crate::common;

use common::cli::{crashed_store, json_lines, json_of};
use common::schema::{assert_invalid, assert_valid};
use common::server::store_dir;
use common::{arg, factlog};
use serde_json::{Value, json};

fn lines(args: &[&str]) -> Vec<Value> {
    let run = factlog(args, b"");
    run.assert_success();
    json_lines(&run)
}

#[test]
fn tasks_answers_history_and_state_match_their_schemas() {
    let (_temp, dir) = store_dir();
    crashed_store(&dir);
    factlog(&["recover", arg(&dir)], b"").assert_success();
    let d = arg(&dir);
    let listed = lines(&["tasks", d, "--json"]);
    assert_eq!(listed.len(), 2);
    for line in listed.iter().chain(&lines(&["tasks", d, "--attention", "--json"])) {
        assert_valid("tasks-line.json", line);
    }
    let answered = [
        lines(&["resolve", d, "--task", "t2", "--call", "p1", "--not-run", "--json", "--as", "a"]),
        lines(&["resolve", d, "--task", "t2", "--call", "p1", "--not-run", "--json"]),
        lines(&["resolve", d, "--task", "t1", "--call", "c5", "--result", "{\"ok\":1}", "--json"]),
    ];
    for line in answered.iter().flatten() {
        assert_valid("answer.json", line);
    }
    assert_eq!(answered[1][0]["recorded"], false);
    let history = lines(&["history", d, "--task", "t2", "--json"]);
    let operator = history.iter().find(|e| e["role"] == "operator").expect("an operator entry");
    assert_valid("history-entry.json", operator);
    assert_valid("state.json", &json_of("state", &dir, &[]));
    // The line `resolve --not-run` appends, as a client would send it.
    let not_run = json!({"task": "t2", "type": "tool/not_run", "call_id": "p1",
                         "operator": {"name": "alice", "note": "outbox empty", "key": "op-1"}});
    assert_valid("event.json", &not_run);
    let mut bad = not_run.clone();
    bad.as_object_mut().unwrap().remove("operator");
    assert_invalid("event.json", &bad);
    let mut bad = not_run.clone();
    bad["operator"].as_object_mut().unwrap().remove("key");
    assert_invalid("event.json", &bad);

    // What the schemas refuse.
    let mut bad = listed[1].clone();
    bad["attention"][1].as_object_mut().unwrap().remove("call_id");
    assert_invalid("tasks-line.json", &bad);
    let mut bad = listed[0].clone();
    bad["last_time"] = json!("yesterday");
    assert_invalid("tasks-line.json", &bad);
    let mut bad = answered[0][0].clone();
    bad.as_object_mut().unwrap().remove("revision");
    assert_invalid("answer.json", &bad);
    let mut bad = operator.clone();
    bad.as_object_mut().unwrap().remove("by");
    assert_invalid("history-entry.json", &bad);
}
