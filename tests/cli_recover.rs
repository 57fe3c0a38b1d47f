//! `factlog recover` keeps the CLI contract of issue 4: after a crash it classifies every
//! open tool call by the decision table (outcome and plan), expires `once` and `run`
//! approvals but not `persistent` or used ones, expires pending cancels, closes the open step
//! and turn, and marks a high-risk task `needs_confirmation`, which then refuses side effects
//! until a `control/resume`. `--dry-run` leaves every byte of the store as it was and prints
//! the same plan; a second run writes nothing and reports the same decisions. Proved by
//! feeding a crashed store through `factlog emit` and running the real binary on it.

use crate::common;

use common::cli::{
    crashed_store, decisions, dir_image, dump_records, emit, emit_one, event, json_of, refused,
    report_call, report_task, revision, segments_image, written,
};
use common::{arg, factlog, temp_log};
use factlog::{Store, StoreOptions};
use serde_json::json;

#[test]
fn recover_classifies_every_call_and_expires_one_time_authority() {
    let (_temp, dir) = temp_log();
    let cancel_seq = crashed_store(&dir);
    let report = json_of("recover", &dir, &[]);
    assert_eq!(report["dry_run"], false);

    let expected = [
        ("c0", "fetch", "not_started", "reschedule"),
        ("c1", "fetch", "outcome_unknown", "retry"),
        ("c2", "publish", "outcome_unknown", "retry_same_key"),
        ("c3", "publish", "outcome_unknown", "ask_user"),
        ("c4", "order", "outcome_unknown", "verify"),
        ("c5", "wire", "outcome_unknown", "ask_user"),
        ("c6", "lookup", "completed", "reuse_receipt"),
    ];
    let t1 = report_task(&report, "t1");
    assert_eq!(t1["calls"].as_array().expect("calls").len(), expected.len(), "{t1}");
    for (call_id, tool, outcome, plan) in expected {
        let call = report_call(&report, "t1", call_id);
        assert_eq!(call["tool"], tool, "{call}");
        assert_eq!(call["outcome"], outcome, "{call}");
        assert_eq!(call["plan"], plan, "{call}");
    }
    assert_eq!(report_call(&report, "t1", "c2")["request_key"], "k-publish");
    assert!(report_call(&report, "t1", "c3").get("request_key").is_none());
    assert_eq!(report_call(&report, "t1", "c6")["receipt"], json!({ "rows": 42 }));
    assert!(report_call(&report, "t1", "c1").get("receipt").is_none());
    // `once` unused and `run` expire; `persistent` and the `once` that c5 used do not.
    assert_eq!(t1["expired"], json!(["a1", "a2"]));
    assert_eq!(t1["expired_signals"], json!([cancel_seq]));
    assert_eq!(t1["interrupted_step"], 1);
    assert_eq!(t1["interrupted_turn"], 1);
    assert_eq!(t1["resume"], "ready");
    // Five unknown outcomes, two approvals, one cancel, the step, the turn, the restore mark.
    assert_eq!(t1["events_written"], 11);

    let t2 = report_task(&report, "t2");
    assert_eq!(report_call(&report, "t2", "p1")["plan"], "ask_user");
    assert_eq!(t2["interrupted_step"], json!(null));
    assert_eq!(t2["interrupted_turn"], 1);
    assert_eq!(t2["resume"], "needs_confirmation");
    assert_eq!(t2["events_written"], 3);
    assert_eq!(report["events_written"], 14);

    // The repair is in the log, typed.
    let types: Vec<String> = dump_records(&dir, &[])
        .iter()
        .map(|record| record["type"].as_str().expect("type").to_owned())
        .collect();
    assert_eq!(types.iter().filter(|t| *t == "tool/outcome_unknown").count(), 6);
    assert_eq!(types.iter().filter(|t| *t == "approval/expired").count(), 2);
    assert_eq!(types.iter().filter(|t| *t == "control/expired").count(), 1);
    assert_eq!(types.iter().filter(|t| *t == "recovery/restored").count(), 2);
    let state = json_of("state", &dir, &[]);
    let approvals = &state["tasks"]["t1"]["control"]["approvals"];
    assert_eq!(approvals["a1"]["status"], "expired");
    assert_eq!(approvals["a2"]["status"], "expired");
    assert_eq!(approvals["a3"]["status"], "granted");
    assert_eq!(approvals["a4"]["status"], "consumed");
}

#[test]
fn dry_run_writes_nothing_and_prints_the_same_plan() {
    let (_temp, dir) = temp_log();
    crashed_store(&dir);
    let before = dir_image(&dir);
    let dry = json_of("recover", &dir, &["--dry-run"]);
    let text = factlog(&["recover", arg(&dir), "--dry-run"], b"");
    text.assert_success();
    assert!(dir_image(&dir) == before, "a dry run changed the store's files");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["events_written"], 0);
    assert!(dry["tasks"].as_array().expect("tasks").iter().all(|t| t["events_written"] == 0));
    assert!(text.stdout_text().contains("nothing written"), "{}", text.stdout_text());

    let real = json_of("recover", &dir, &[]);
    assert_eq!(decisions(&dry), decisions(&real));
    for field in ["expired_signals", "interrupted_step", "interrupted_turn"] {
        assert_eq!(report_task(&dry, "t1")[field], report_task(&real, "t1")[field], "{field}");
    }
}

#[test]
fn a_second_recover_writes_nothing_and_reports_the_same_decisions() {
    let (_temp, dir) = temp_log();
    crashed_store(&dir);
    let first = json_of("recover", &dir, &[]);
    let records = dump_records(&dir, &[]);
    let segments = segments_image(&dir);
    let second = json_of("recover", &dir, &[]);
    assert_eq!(second["events_written"], 0);
    assert!(second["tasks"].as_array().expect("tasks").iter().all(|t| t["events_written"] == 0));
    assert_eq!(decisions(&first), decisions(&second));
    assert_eq!(dump_records(&dir, &[]), records);
    assert!(segments_image(&dir) == segments, "the second recover changed a segment");
}

#[test]
fn a_high_risk_task_refuses_side_effects_until_a_resume() {
    let (_temp, dir) = temp_log();
    crashed_store(&dir);
    json_of("recover", &dir, &[]);
    let before = revision(&dir, "t2");
    let call = |call_id: &str, effect: &str| {
        event(
            "t2",
            "tool/call",
            json!({ "call_id": call_id, "tool": "wire", "effect": effect,
                    "request_key": format!("k-{call_id}") }),
        )
    };
    let replies =
        emit(&dir, &[call("p2", "idempotent"), call("p3", "unsafe"), call("p4", "queryable")]);
    for reply in &replies {
        let message = refused(reply, "NEEDS_CONFIRMATION");
        assert!(message.contains("control/resume"), "{message}");
    }
    assert_eq!(revision(&dir, "t2"), before, "a refused call was written");
    assert_eq!(
        json_of("state", &dir, &["--task", "t2"])["tasks"]["t2"]["control"]["needs_confirmation"],
        true
    );

    // A read-only call changes nothing outside: it needs no confirmation.
    let (_, read_only) = written(&emit_one(
        &dir,
        event(
            "t2",
            "tool/call",
            json!({ "call_id": "r1", "tool": "balance", "effect": "read_only" }),
        ),
    ));
    assert_eq!(read_only, before + 1);
    let replies = emit(
        &dir,
        &[
            event("t2", "control/resume", json!({ "reason": "user confirmed" })),
            call("p2", "idempotent"),
            event("t2", "tool/result", json!({ "call_id": "p1", "outcome": "ok" })),
            call("p2", "idempotent"),
        ],
    );
    // A new `emit` process is a new holder: its first write took the task over, recording
    // the unknown outcome of the read-only call r1 left in flight and a `recovery/restored`
    // that asks for confirmation again (before + 3).
    assert_eq!(written(&replies[0]).1, before + 4);
    // The unsafe p1 of the crashed writer is unresolved (ask_user): no new side effect
    // until the harness records what became of it.
    refused(&replies[1], "NEEDS_RECOVERY");
    assert_eq!(
        replies[1]["calls"],
        json!([{ "call_id": "p1", "tool": "wire", "plan": "ask_user" }])
    );
    assert_eq!(written(&replies[2]).1, before + 5);
    assert_eq!(written(&replies[3]).1, before + 6);
    assert_eq!(
        json_of("state", &dir, &["--task", "t2"])["tasks"]["t2"]["control"]["needs_confirmation"],
        false
    );

    // The low-risk task never needed a confirmation, but its unknown outcomes that are not
    // read-only must be resolved before a new side effect; a read-only call may go.
    let replies = emit(
        &dir,
        &[
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c9", "tool": "wire", "effect": "unsafe" }),
            ),
            event(
                "t1",
                "tool/call",
                json!({ "call_id": "c10", "tool": "look", "effect": "read_only" }),
            ),
        ],
    );
    refused(&replies[0], "NEEDS_RECOVERY");
    let blocking: Vec<&str> = replies[0]["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| c["call_id"].as_str().expect("id"))
        .collect();
    assert_eq!(blocking, ["c2", "c3", "c4", "c5"]);
    written(&replies[1]);
}

#[test]
fn recover_text_has_one_block_per_task() {
    let (_temp, dir) = temp_log();
    crashed_store(&dir);
    let run = factlog(&["recover", arg(&dir)], b"");
    run.assert_success();
    let text = run.stdout_text();
    for expected in [
        "task t1: ready",
        "  call c2 (publish): outcome_unknown -> retry_same_key, request key k-publish",
        "  call c6 (lookup): completed -> reuse_receipt, receipt {\"rows\":42}",
        "  call c0 (fetch): not_started -> reschedule",
        "  expired approvals: a1, a2",
        "  step 1 closed as interrupted",
        "  turn 1 closed as interrupted",
        "  11 repair events written",
        "task t2: needs_confirmation",
        "recovered 2 tasks: 14 repair events written",
    ] {
        assert!(text.lines().any(|line| line.starts_with(expected)), "{expected:?} in:\n{text}");
    }
    let t2 = text.find("task t2").expect("t2 block");
    assert!(text[..t2].contains("call c1 "), "t1's calls come in t1's block:\n{text}");
}

#[test]
fn recover_refuses_a_missing_or_locked_store() {
    let (_temp, dir) = temp_log();
    for args in [vec!["recover", arg(&dir)], vec!["recover", arg(&dir), "--dry-run"]] {
        let run = factlog(&args, b"");
        run.assert_one_line_error(1);
        assert!(run.stdout.is_empty());
    }
    assert!(!dir.exists(), "recover must not create a store");

    crashed_store(&dir);
    let writer = Store::open(&dir, StoreOptions::new()).expect("open for writing");
    let run = factlog(&["recover", arg(&dir)], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("locked"), "{}", run.stderr);
    // A dry run previews what the run would do, and the run is refused: so is the preview
    // (a read-only plan beside the holder would not know which tasks it holds).
    let dry = factlog(&["recover", arg(&dir), "--dry-run", "--json"], b"");
    dry.assert_one_line_error(1);
    assert!(dry.stderr.contains("locked"), "{}", dry.stderr);
    writer.close().expect("close");
    // Once nobody holds it, the preview is the read-only plan again.
    factlog(&["recover", arg(&dir), "--dry-run", "--json"], b"").assert_success();
}
