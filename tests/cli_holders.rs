//! Restoring is not resuming, through `factlog emit`: each `emit` process is a holder, and
//! whether it ends by SIGKILL or by a clean end of its input, the next `emit` process never
//! honours its `once` approval (refused, the expiry recorded), never lets a side-effecting call
//! through while the earlier process's calls have no outcome (`NEEDS_RECOVERY` until they
//! do), and refuses a reused call id for another tool (`CALL_ID_REUSED`, nothing written).
//! No `factlog recover` is run in between.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use common::cli::{dump_records, emit, event, grant, input, refused, revision, written};
use common::{FACTLOG, arg, temp_log};
use serde_json::{Value, json};

/// The scenario: a high-risk task, an open turn, a `once` approval, a read-only call.
fn first_holder_lines() -> Vec<Value> {
    let mut lines = vec![
        event("t1", "task/contract", json!({ "goal": "move money", "risk": "high" })),
        event("t1", "turn/start", json!({})),
    ];
    lines.extend(grant("t1", "a1", "once"));
    lines.push(event(
        "t1",
        "tool/call",
        json!({ "call_id": "c1", "tool": "balance", "effect": "read_only" }),
    ));
    lines
}

/// Runs `factlog emit DIR`, feeds it `lines`, waits for every reply, then kills it with
/// SIGKILL while its input is still open.
fn emit_then_kill(dir: &Path, lines: &[Value]) {
    let mut child = Command::new(&*FACTLOG)
        .args(["emit", arg(dir)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn factlog emit");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&input(lines)).expect("write the lines");
    stdin.flush().expect("flush");
    let mut replies = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for _ in lines {
        let reply: Value = serde_json::from_str(&replies.next().expect("a reply").expect("read"))
            .expect("a JSON reply");
        written(&reply);
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    drop(stdin);
}

/// The second holder: confirms the high-risk task, then cites the pre-restart approval.
fn second_holder_refuses_the_approval(dir: &Path) {
    let replies = emit(
        dir,
        &[
            event("t1", "control/resume", json!({ "reason": "user looked at the state" })),
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c2", "tool": "wire", "effect": "unsafe",
                        "approval_id": "a1" }),
            ),
        ],
    );
    written(&replies[0]);
    let message = refused(&replies[1], "APPROVAL_REFUSED");
    assert!(message.contains("expired at a restart"), "{message}");
    let types: Vec<Value> = dump_records(dir, &[]).iter().map(|r| r["type"].clone()).collect();
    for expected in ["tool/outcome_unknown", "approval/expired", "turn/end", "recovery/restored"] {
        assert!(types.contains(&json!(expected)), "{expected} recorded: {types:?}");
    }
    let calls = types.iter().filter(|t| **t == "tool/call").count();
    assert_eq!(calls, 1, "the refused c2 was not written");
}

#[test]
fn after_a_sigkill_the_next_emit_refuses_a_pre_restart_once_approval() {
    let (_temp, dir) = temp_log();
    emit_then_kill(&dir, &first_holder_lines());
    second_holder_refuses_the_approval(&dir);
}

#[test]
fn after_a_clean_end_of_input_the_next_emit_refuses_it_too() {
    let (_temp, dir) = temp_log();
    emit(&dir, &first_holder_lines());
    second_holder_refuses_the_approval(&dir);
}

#[test]
fn a_side_effect_waits_for_the_outcomes_of_the_earlier_emits_calls() {
    let (_temp, dir) = temp_log();
    let pay = |call_id: &str| {
        event("t1", "tool/call", json!({ "call_id": call_id, "tool": "pay", "effect": "unsafe" }))
    };
    emit_then_kill(&dir, &[event("t1", "turn/start", json!({})), pay("p1")]);
    let replies = emit(
        &dir,
        &[
            pay("p2"),
            event(
                "t1",
                "tool/result",
                json!({ "call_id": "p1", "outcome": "ok",
                                               "receipt": { "payment": 4 } }),
            ),
            pay("p2"),
        ],
    );
    refused(&replies[0], "NEEDS_RECOVERY");
    assert_eq!(
        replies[0]["calls"],
        json!([{ "call_id": "p1", "tool": "pay", "plan": "ask_user" }])
    );
    assert!(replies[0]["message"].as_str().expect("message").contains("tool/result"));
    written(&replies[1]);
    written(&replies[2]);
}

#[test]
fn a_reused_call_id_for_another_tool_is_refused_and_nothing_is_written() {
    let (_temp, dir) = temp_log();
    let replies = emit(
        &dir,
        &[
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c1", "tool": "pay", "effect": "unsafe",
                        "args": { "amount": 5 } }),
            ),
            event("t1", "tool/result", json!({ "call_id": "c1", "outcome": "ok" })),
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c1", "tool": "delete_repo", "effect": "unsafe",
                        "args": { "repo": "x" } }),
            ),
        ],
    );
    let (call_seq, _) = written(&replies[0]);
    written(&replies[1]);
    let before = 2;
    let reply = &replies[2];
    refused(reply, "CALL_ID_REUSED");
    assert_eq!(reply["call_id"], "c1");
    assert_eq!(reply["earlier"]["seq"], call_seq);
    assert_eq!(reply["earlier"]["tool"], "pay");
    assert!(reply["earlier"]["args_digest"].is_string(), "{reply}");
    assert_eq!(revision(&dir, "t1"), before, "nothing written");
}
