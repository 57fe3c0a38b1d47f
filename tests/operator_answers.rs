//! The operator's commands (`format-spec/events.md`, "Operator answers"), run as a person
//! would: `factlog tasks` lists what each task waits for from the folded state, the oldest
//! wait first; `resolve`, `confirm`, `approve`, `deny` and `cancel` record the answer with who
//! gave it, once (the same command again writes nothing), through a served store's socket or
//! a handle of their own, and refuse with a clear message when there is nothing to answer or
//! when the store is held by a process that does not serve it.

use crate::common;

use std::path::Path;

use common::cli::{crashed_store, emit, event, json_lines, written};
use common::server::{Served, store_dir};
use common::{arg, factlog};
use factlog::client::answer::{self, Answered};
use factlog::harness::operator::{Answer, Operator};
use factlog::{Store, StoreOptions};
use serde_json::{Value, json};

/// A crashed store, recovered: `t2` (high risk) waits for a confirmation and for the unsafe
/// call `p1`; `t1` for its side-effecting calls whose outcome is unknown.
fn recovered_store() -> (tempfile::TempDir, std::path::PathBuf) {
    let (temp, dir) = store_dir();
    crashed_store(&dir);
    factlog(&["recover", arg(&dir)], b"").assert_success();
    (temp, dir)
}

fn tasks(dir: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["tasks", arg(dir), "--json"];
    args.extend_from_slice(extra);
    let run = factlog(&args, b"");
    run.assert_success();
    json_lines(&run)
}

fn answer_json(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let run = factlog(&args, b"");
    run.assert_success();
    let lines = json_lines(&run);
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    lines[0].clone()
}

fn history(dir: &Path, task: &str) -> Vec<Value> {
    let run = factlog(&["history", arg(dir), "--task", task, "--json"], b"");
    run.assert_success();
    json_lines(&run)
}

fn waits(task: &Value) -> Vec<(String, Option<String>)> {
    task["attention"]
        .as_array()
        .expect("attention")
        .iter()
        .map(|a| {
            let target = a.get("call_id").or_else(|| a.get("approval_id"));
            (a["reason"].as_str().unwrap().to_owned(), target.map(|t| t.as_str().unwrap().into()))
        })
        .collect()
}

#[test]
fn tasks_lists_what_each_task_waits_for_and_attention_puts_the_oldest_wait_first() {
    let (_temp, dir) = recovered_store();
    let all = tasks(&dir, &[]);
    let names: Vec<&str> = all.iter().map(|t| t["task"].as_str().unwrap()).collect();
    assert_eq!(names, ["t1", "t2"], "every task, in id order");
    let t2 = &all[1];
    assert_eq!(
        waits(t2),
        [
            ("needs_confirmation".to_owned(), None),
            ("outcome_unknown".to_owned(), Some("p1".to_owned()))
        ]
    );
    assert_eq!(t2["attention"][1]["tool"], "wire");
    assert_eq!(t2["attention"][1]["plan"], "ask_user");
    assert!(t2["last_time"].as_str().is_some_and(|t| t.ends_with('Z')), "{t2}");
    // t1 waits for its unknown side effects; its read-only call does not block anything.
    let t1_calls: Vec<String> = waits(&all[0]).into_iter().filter_map(|(_, c)| c).collect();
    assert!(t1_calls.contains(&"c5".to_owned()) && !t1_calls.contains(&"c1".to_owned()));
    // --attention: the waiting tasks, the one whose oldest wait began first on top.
    let waiting = tasks(&dir, &["--attention"]);
    let since = |t: &Value| {
        t["attention"].as_array().unwrap().iter().map(|a| a["since_seq"].as_u64().unwrap()).min()
    };
    assert_eq!(waiting.len(), 2);
    assert!(since(&waiting[0]) <= since(&waiting[1]), "{waiting:?}");
    // The text form names the holder and each wait.
    let text = factlog(&["tasks", arg(&dir), "--attention"], b"").stdout_text();
    assert!(text.starts_with("holder: none\n"), "{text}");
    assert!(text.contains("waits: outcome_unknown call p1 (wire), plan ask_user"), "{text}");
}

#[test]
fn resolve_records_who_answered_and_the_same_command_again_writes_nothing() {
    let (_temp, dir) = recovered_store();
    let args = [
        "resolve",
        arg(&dir),
        "--task",
        "t2",
        "--call",
        "p1",
        "--result",
        r#"{"wired":40}"#,
        "--receipt",
        r#"{"transfer":"tx-9"}"#,
        "--as",
        "alice",
        "--note",
        "checked the bank",
    ];
    let first = answer_json(&args);
    assert_eq!(first["recorded"], true, "{first}");
    assert_eq!(first["by"], "alice");
    let seq = first["seq"].as_u64().unwrap();
    let again = answer_json(&args);
    assert_eq!(
        again,
        json!({"command": "resolve", "task": "t2", "recorded": false, "seq": seq, "by": "alice"})
    );
    // The history shows the result, and who gave it with the note.
    let entries = history(&dir, "t2");
    let operator = entries.iter().find(|e| e["role"] == "operator").expect("an operator entry");
    assert_eq!(
        *operator,
        json!({"role": "operator", "seq": seq, "event": "tool/result", "by": "alice",
               "note": "checked the bank", "call_id": "p1"})
    );
    let tool = entries.iter().find(|e| e["role"] == "tool" && e["call_id"] == "p1").unwrap();
    assert_eq!(tool["outcome"], "completed");
    assert_eq!(tool["receipt"], json!({"transfer": "tx-9"}));
    // The call no longer waits; the confirmation still does.
    let t2 = tasks(&dir, &[]).into_iter().find(|t| t["task"] == "t2").unwrap();
    assert_eq!(waits(&t2), [("needs_confirmation".to_owned(), None)]);
    // A different answer to the same call now has nothing to answer.
    let run = factlog(&["resolve", arg(&dir), "--task", "t2", "--call", "p1", "--not-run"], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("nothing to answer: call \"p1\" is completed"), "{}", run.stderr);
}

#[test]
fn not_run_lets_the_call_be_dispatched_again() {
    let (_temp, dir) = recovered_store();
    let not_run = answer_json(&["resolve", arg(&dir), "--task", "t2", "--call", "p1", "--not-run"]);
    assert_eq!(not_run["recorded"], true);
    // The harness comes back: it takes t2 over, confirms, and dispatches p1 again: it never
    // ran.
    let replies = emit(
        &dir,
        &[
            event("t2", "control/resume", json!({})),
            event("t2", "tool/call", json!({"call_id": "p1", "tool": "wire", "effect": "unsafe"})),
        ],
    );
    for reply in &replies {
        written(reply);
    }
    let state = common::cli::json_of("state", &dir, &["--task", "t2"]);
    let p1 = &state["tasks"]["t2"]["session"]["calls"]["p1"];
    assert_eq!(p1["status"], "dispatched");
    assert_eq!(p1["dispatches"], 2, "{p1}");
}

#[test]
fn approvals_confirmations_and_cancels_are_answered_once_and_refused_when_nothing_waits() {
    let (_temp, dir) = store_dir();
    for reply in emit(
        &dir,
        &[
            event("t1", "turn/start", json!({})),
            event("t1", "approval/request", json!({"approval_id": "a1", "action": "publish"})),
            event("t1", "approval/request", json!({"approval_id": "a2"})),
        ],
    ) {
        written(&reply);
    }
    let t1 = &tasks(&dir, &["--attention"])[0];
    assert_eq!(
        waits(t1),
        [
            ("approval_pending".to_owned(), Some("a1".to_owned())),
            ("approval_pending".to_owned(), Some("a2".to_owned()))
        ]
    );
    let d = arg(&dir);
    // No process holds the store: authority of the holder (a once or run grant, a
    // confirmation, a cancel) would expire with the command, and is refused; facts are not.
    for args in [
        &["approve", d, "--task", "t1", "--approval", "a1", "--scope", "run"][..],
        &["cancel", d, "--task", "t1"],
    ] {
        let run = factlog(args, b"");
        run.assert_one_line_error(1);
        assert!(run.stderr.contains("no process holds"), "{}", run.stderr);
        assert!(run.stderr.contains("serves it"), "{}", run.stderr);
    }
    // What has nothing to answer says so first.
    let run = factlog(&["confirm", d, "--task", "t1"], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("waits for no confirmation and is not paused"), "{}", run.stderr);
    let persistent = ["approve", d, "--task", "t1", "--approval", "a1", "--scope", "persistent"];
    let granted = answer_json(&persistent);
    assert_eq!(granted["recorded"], true);
    let denied = answer_json(&["deny", d, "--task", "t1", "--approval", "a2", "--note", "no"]);
    assert_eq!(denied["recorded"], true);
    // The same command again writes nothing; a different answer is refused.
    let again = answer_json(&persistent);
    assert_eq!(again["recorded"], false);
    assert_eq!(again["seq"], granted["seq"]);
    let run =
        factlog(&["approve", d, "--task", "t1", "--approval", "a2", "--scope", "persistent"], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("approval \"a2\" is denied, not requested"), "{}", run.stderr);
    let run = factlog(&["deny", d, "--task", "t1", "--approval", "a9"], b"");
    assert!(run.stderr.contains("approval \"a9\" was never requested"), "{}", run.stderr);
    let run = factlog(&["deny", d, "--task", "t9", "--approval", "a1"], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("no task \"t9\""), "{}", run.stderr);
    // Served by a harness that holds t1: a confirmation with nothing to confirm is refused,
    // a cancel is recorded once while it is pending, and outlives the answering client.
    let store = Store::open(&dir, StoreOptions::new()).expect("the harness");
    let task = store.task("t1").expect("the harness holds t1");
    let server = store.serve(factlog::server::ServeOptions::new()).expect("serve");
    let run = factlog(&["confirm", d, "--task", "t1"], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("waits for no confirmation and is not paused"), "{}", run.stderr);
    // Taking t1 over ended its turn: nothing runs to cancel until the harness starts one.
    let run = factlog(&["cancel", d, "--task", "t1"], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("no running turn to cancel"), "{}", run.stderr);
    task.append(factlog::harness::Body::TurnStart(Default::default())).expect("turn/start");
    let cancel = answer_json(&["cancel", d, "--task", "t1", "--as", "carol"]);
    assert_eq!(cancel["recorded"], true);
    assert_eq!(answer_json(&["cancel", d, "--task", "t1"])["recorded"], false);
    drop(server);
    let control = task.state().control;
    assert_eq!(control.pending_cancels.len(), 1, "the cancel is the harness's to answer");
    assert_eq!(control.answers.len(), 3);
    drop(task);
    store.close().expect("close");
    assert_eq!(tasks(&dir, &["--attention"]).len(), 0, "nothing waits for a person");
}

#[test]
fn a_store_held_without_being_served_is_refused_with_how_to_serve_it() {
    let (_temp, dir) = recovered_store();
    // The harness restarts: it holds the store, takes t2 over and waits for a confirmation.
    let store = Store::open(&dir, StoreOptions::new()).expect("hold the store");
    let t2 = store.task("t2").expect("take t2 over");
    assert!(t2.state().control.needs_confirmation);
    let run = factlog(&["confirm", arg(&dir), "--task", "t2"], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("does not share it"), "{}", run.stderr);
    assert!(run.stderr.contains("factlog serve"), "{}", run.stderr);
    // Listing needs no lock.
    assert_eq!(tasks(&dir, &["--attention"]).len(), 2);
    // Served by its holder, the same command goes through the socket.
    let server = store.serve(factlog::server::ServeOptions::new()).expect("serve");
    let confirmed = answer_json(&["confirm", arg(&dir), "--task", "t2", "--as", "dana"]);
    assert_eq!(confirmed["recorded"], true);
    // The confirmation is the harness's: it outlives the client that gave it.
    assert!(!t2.state().control.needs_confirmation);
    drop(server);
    assert!(!t2.state().control.needs_confirmation);
    drop(t2);
    store.close().expect("close");
}

#[test]
fn answers_through_a_served_store_are_taken_by_its_holder() {
    let (_temp, dir) = recovered_store();
    let served = Served::start(&dir, &[]);
    let before = common::cli::revision(&dir, "t2");
    let resolved = answer_json(&[
        "resolve",
        arg(&dir),
        "--task",
        "t2",
        "--call",
        "p1",
        "--result",
        "true",
        "--as",
        "erin",
    ]);
    // One event: the serving process already holds the task, nothing is taken over.
    assert_eq!(resolved["revision"], before + 1, "{resolved}");
    let again =
        answer_json(&["resolve", arg(&dir), "--task", "t2", "--call", "p1", "--result", "true"]);
    assert_eq!(again["recorded"], false);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn two_operators_giving_the_same_answer_at_once_record_it_once() {
    let (_temp, dir) = recovered_store();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let give = |name: &str| {
        let operator = Operator { name: name.to_owned(), note: None };
        let answer = Answer::NotRun { call_id: "p1".to_owned() };
        answer::answer_store(&store, "t2", &answer, &operator).expect("answered")
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| give("frank"));
        let b = s.spawn(|| give("grace"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let recorded = [a, b].iter().filter(|x| matches!(x, Answered::Recorded { .. })).count();
    assert_eq!(recorded, 1, "{a:?} {b:?}");
    let seqs: Vec<u64> = [a, b]
        .iter()
        .map(|x| match *x {
            Answered::Recorded { seq, .. } | Answered::Already { seq } => seq,
        })
        .collect();
    assert_eq!(seqs[0], seqs[1], "both name the one event");
    store.close().expect("close");
}

#[test]
fn holder_authority_through_a_served_store_needs_a_harness_that_holds_the_task() {
    let (_temp, dir) = recovered_store();
    let served = Served::start(&dir, &[]);
    // No connection holds t2: the confirmation would expire when the answering client leaves.
    let run = factlog(&["confirm", arg(&dir), "--task", "t2", "--as", "ivy"], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("no harness holds task \"t2\""), "{}", run.stderr);
    // A harness connects and holds t2 (its first event takes the task over: it waits for a
    // confirmation again); the confirmation is its, and lasts while it holds the task.
    let mut harness = factlog::client::Client::connect(&dir).expect("the harness connects");
    let message = factlog::harness::Body::UserMessage(factlog::harness::event::UserMessage {
        text: "back".to_owned(),
        ..Default::default()
    });
    harness.append("t2", &message, factlog::AppendOptions::default()).expect("append");
    assert!(harness.state("t2").unwrap().unwrap().control.needs_confirmation);
    let confirmed = answer_json(&["confirm", arg(&dir), "--task", "t2", "--as", "ivy"]);
    assert_eq!(confirmed["recorded"], true);
    assert!(!harness.state("t2").unwrap().unwrap().control.needs_confirmation);
    assert_eq!(answer_json(&["confirm", arg(&dir), "--task", "t2"])["recorded"], false);
    // A cancel of a task with no running turn has nothing to answer.
    let run = factlog(&["cancel", arg(&dir), "--task", "t1"], b"");
    run.assert_one_line_error(1);
    drop(harness);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
}
