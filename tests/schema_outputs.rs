//! The `--json` output of every command, run as the real binary on a realistic store (a
//! workload with tool calls of every effect class, approvals, a cancel, a high-risk task, left
//! as a crash leaves it, then recovered), is valid against its schema in
//! `format-spec/schema/`: state, history, recover (dry run and real), info, verify (clean,
//! deep, torn, corrupt), checkpoint, purge, dump and tail lines (events, raw records of
//! `factlog append`, payloads that are not UTF-8), export lines, bench (also `--sessions` and
//! `--clients`), salvage, restore, migrate, request-key and demo.

use crate::common;

use std::path::Path;

use common::cli::{crashed_store, emit, event, json_lines, json_of};
use common::damage::{flip_byte, frame_of, result_inside_segment, store_with_calls};
use common::fixtures::copy_of;
use common::schema::{assert_invalid, assert_lines_valid, assert_valid};
use common::{Run, arg, factlog};
use serde_json::{Value, json};

/// A store as a crash leaves it (`common::cli::crashed_store`), plus a finished exchange in
/// task `t3`: messages, deltas, a tool call with its result, usage and a compaction.
fn store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    emit(
        dir.path(),
        &[
            event(
                "t3",
                "task/contract",
                json!({ "goal": "answer", "done_criteria": ["answered"] }),
            ),
            event("t3", "task/todo", json!({ "todo_id": "1", "text": "look up" })),
            event("t3", "turn/start", json!({})),
            event("t3", "user/message", json!({ "text": "how many?" })),
            event("t3", "step/start", json!({})),
            event("t3", "assistant/delta", json!({ "text": "Let me " })),
            event("t3", "assistant/delta", json!({ "text": "check." })),
            event(
                "t3",
                "assistant/message",
                json!({ "text": "Let me check.", "tool_calls": [{ "call_id": "q1", "tool": "count", "args": { "of": "rows" } }] }),
            ),
            event(
                "t3",
                "tool/call",
                json!({ "call_id": "q1", "tool": "count", "effect": "read_only", "args": { "of": "rows" } }),
            ),
            event(
                "t3",
                "tool/result",
                json!({ "call_id": "q1", "outcome": "error", "error": "timeout", "output": null }),
            ),
            event("t3", "step/end", json!({})),
            event("t3", "budget/usage", json!({ "input_tokens": 10, "output_tokens": 3 })),
            event("t3", "context/compacted", json!({ "summary": "asked how many" })),
            event("t3", "assistant/message", json!({ "text": "42." })),
            event("t3", "turn/end", json!({})),
        ],
    );
    dir
}

/// Runs `factlog ARGS` and returns its standard output lines as JSON, asserting `code`.
fn lines_of(args: &[&str], stdin: &[u8], code: i32) -> Vec<Value> {
    let run: Run = factlog(args, stdin);
    assert_eq!(run.code, Some(code), "{args:?}: {run:?}");
    json_lines(&run)
}

#[test]
fn state_without_task_is_valid_before_and_after_recovery() {
    let dir = store();
    let before = json_of("state", dir.path(), &[]);
    assert_valid("state.json", &before);
    json_of("recover", dir.path(), &[]);
    let after = json_of("state", dir.path(), &[]);
    assert_valid("state.json", &after);
    assert!(after["tasks"]["t1"]["control"]["last_recovery"].is_object(), "{after}");
    // The schema is strict: an unknown key or a wrong enum is refused.
    let mut bad = after.clone();
    bad["tasks"]["t1"]["session"]["calls"]["c1"]["status"] = json!("running");
    assert_invalid("state.json", &bad);
    let mut bad = after;
    bad["tasks"]["t1"]["surprise"] = json!(1);
    assert_invalid("state.json", &bad);
}

#[test]
fn history_lines_are_valid() {
    let dir = store();
    let mut count = 0;
    for task in ["t1", "t2", "t3"] {
        count += assert_lines_valid(
            "history-entry.json",
            &lines_of(&["history", arg(dir.path()), "--task", task, "--json"], b"", 0),
        );
    }
    json_of("recover", dir.path(), &[]);
    let lines = lines_of(&["history", arg(dir.path()), "--task", "t1", "--json"], b"", 0);
    assert_lines_valid("history-entry.json", &lines);
    assert!(lines.iter().any(|l| l["outcome"] == "outcome_unknown" && l["result_seq"].is_u64()));
    assert!(count > 10, "{count} entries");
}

#[test]
fn recover_reports_are_valid() {
    let dir = store();
    let dry = json_of("recover", dir.path(), &["--dry-run"]);
    assert_valid("recover.json", &dry);
    assert_eq!(dry["dry_run"], true);
    let real = json_of("recover", dir.path(), &[]);
    assert_valid("recover.json", &real);
    assert!(real["events_written"].as_u64().expect("events_written") > 0, "{real}");
    assert_valid("recover.json", &json_of("recover", dir.path(), &[]));
}

#[test]
fn info_verify_checkpoint_and_purge_are_valid() {
    let dir = store();
    assert_valid("info.json", &json_of("info", dir.path(), &[]));
    assert_valid("verify.json", &json_of("verify", dir.path(), &[]));
    let checkpoint = json_of("checkpoint", dir.path(), &[]);
    assert_valid("checkpoint.json", &checkpoint);
    let deep = json_of("verify", dir.path(), &["--deep"]);
    assert_valid("verify.json", &deep);
    assert_eq!(deep["deep"]["ok"], true, "{deep}");
    assert_valid("purge.json", &json_of("purge", dir.path(), &["--dry-run"]));
    assert_valid("purge.json", &json_of("purge", dir.path(), &[]));
    let info = json_of("info", dir.path(), &[]);
    assert_valid("info.json", &info);
    assert_eq!(info["snapshots"].as_array().map(Vec::len), Some(1), "{info}");
    // A directory that holds no log: exit 1 and one line on standard error, no JSON (the
    // `error` outcome is for a log that is there and cannot be read).
    let empty = tempfile::tempdir().expect("tempdir");
    let lines = lines_of(&["verify", arg(empty.path()), "--json"], b"", 1);
    assert!(lines.is_empty(), "{lines:?}");
}

#[test]
fn raw_dump_lines_are_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let mut records = b"plain text\n{\"json\":\"but raw\"}\n".to_vec();
    records.extend_from_slice(b"bytes \xff\xfe not UTF-8\n\n");
    let run = factlog(&["append", arg(&log)], &records);
    run.assert_success();
    let lines = lines_of(&["dump", arg(&log), "--json"], b"", 0);
    assert_lines_valid("dump-line.json", &lines);
    assert!(lines.iter().any(|line| line.get("payload_b64").is_some()), "{lines:?}");
    assert_lines_valid("dump-line.json", &lines_of(&["tail", arg(&log), "--json"], b"", 0));
    // A store read raw.
    let store = store();
    let raw = lines_of(&["dump", arg(store.path()), "--raw", "--json"], b"", 0);
    assert!(raw.len() > 30);
    assert_lines_valid("dump-line.json", &raw);
}

#[test]
fn bench_report_is_valid() {
    let lines = lines_of(
        &["bench", "--turns", "1", "--steps", "1", "--tokens", "2", "--runs", "1", "--json"],
        b"",
        0,
    );
    assert_eq!(lines.len(), 1);
    assert_valid("bench.json", &lines[0]);
    let args = ["--turns", "1", "--steps", "1", "--tokens", "2", "--runs", "1", "--json"];
    let sessions = lines_of(&[&["bench", "--sessions", "1,2"][..], &args[..]].concat(), b"", 0);
    assert_eq!(sessions.len(), 1);
    assert_valid("bench-sessions.json", &sessions[0]);
    assert_eq!(sessions[0]["results"].as_array().map(Vec::len), Some(8), "2 N x 4 policies");
    assert_invalid("bench.json", &sessions[0]);
    let clients = lines_of(&[&["bench", "--clients", "1,2"][..], &args[..]].concat(), b"", 0);
    assert_eq!(clients.len(), 1);
    assert_valid("bench-clients.json", &clients[0]);
    assert_invalid("bench-sessions.json", &clients[0]);
    let emit = lines_of(&[&["bench", "--emit-clients", "1,2"][..], &args[..]].concat(), b"", 0);
    assert_eq!(emit.len(), 1);
    assert_valid("bench-emit-clients.json", &emit[0]);
    assert_eq!(emit[0]["results"].as_array().map(Vec::len), Some(4), "2 N x 2 policies");
    assert_invalid("bench-clients.json", &emit[0]);
}

#[test]
fn salvage_reports_are_valid() {
    let dir = store();
    let target = tempfile::tempdir().expect("tempdir");
    let to = target.path().join("saved");
    let dry = json_of("salvage", dir.path(), &["--to", arg(&to), "--dry-run"]);
    assert_valid("salvage.json", &dry);
    assert!(dry["recovery"].is_null(), "{dry}");
    let real = json_of("salvage", dir.path(), &["--to", arg(&to)]);
    assert_valid("salvage.json", &real);
    assert!(real["recovery"].is_object(), "{real}");
}

#[test]
fn restore_reports_are_valid() {
    let temp = tempfile::tempdir().expect("tempdir");
    let source = temp.path().join("store");
    common::replica_fixture::source_store(&source);
    let replica = common::replica_fixture::Replica::new(&temp.path().join("replica"));
    common::replica_fixture::ship(&source, &replica, 2);
    // The fixture's clock stamps every event 2023-11-14T22:13:20Z: a time that day before
    // it restores no events and names the first record after it.
    let cases = [
        ("whole", vec![]),
        ("at-40", vec!["--seq", "40"]),
        ("at-time", vec!["--time", "2023-11-14T22:13:20Z"]),
        ("before-time", vec!["--time", "2023-11-14"]),
    ];
    for (name, extra) in cases {
        let target = temp.path().join(name);
        let mut args = vec!["restore", replica.url.as_str(), arg(&target), "--json"];
        args.extend(extra);
        let run = factlog(&args, b"");
        run.assert_success();
        let report: Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
        assert_valid("restore.json", &report);
    }
}

#[test]
fn migrate_reports_are_valid() {
    let (_keep, v1) = copy_of("v1-clean-multi-task");
    let dry = json_of("migrate", &v1, &["--dry-run"]);
    assert_valid("migrate.json", &dry);
    assert_eq!(dry["from"], 1, "{dry}");
    let real = json_of("migrate", &v1, &[]);
    assert_valid("migrate.json", &real);
    assert!(real["backup"].is_string(), "{real}");
    let current = json_of("migrate", &v1, &["--dry-run"]);
    assert_valid("migrate.json", &current);
    assert_eq!(current["already_current"], true, "{current}");
}

#[test]
fn request_key_is_valid() {
    let lines = lines_of(&["request-key", "t1", "send_email:draft-7", "12", "--json"], b"", 0);
    assert_eq!(lines.len(), 1);
    assert_valid("request-key.json", &lines[0]);
}

#[test]
fn demo_summary_is_valid() {
    for seed in ["1", "2"] {
        let lines = lines_of(&["demo", "--seed", seed, "--json"], b"", 0);
        assert_eq!(lines.len(), 1);
        assert_valid("demo.json", &lines[0]);
    }
}

/// `timestamp_us` as RFC 3339 (UTC, microseconds, `Z`), the `time` of an event line.
fn rfc3339(timestamp_us: u64) -> String {
    let seconds = timestamp_us / 1_000_000;
    let (days, second_of_day) = (seconds / 86_400, seconds % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days.cast_signed() + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
        timestamp_us % 1_000_000
    )
}

#[test]
fn rfc3339_is_the_time_of_the_spec_example() {
    assert_eq!(rfc3339(1_796_309_441_104_362), "2026-12-03T14:50:41.104362Z");
    assert_eq!(rfc3339(4_102_444_800_000_000), "2100-01-01T00:00:00.000000Z");
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000Z");
}

#[test]
fn the_event_line_schema_refuses_a_missing_or_malformed_time() {
    // Without its time an event line is refused.
    let mut line =
        json!({ "seq": 1, "task": "t", "revision": 1, "timestamp_us": 5, "type": "turn/start" });
    assert_invalid("dump-line.json", &line);
    line["time"] = json!(rfc3339(5));
    assert_valid("dump-line.json", &line);
    // The time is an RFC 3339 date-time (the format is asserted, not only its pattern).
    let mut bad = line.clone();
    bad["time"] = json!("2026-13-03T14:50:41.104362Z");
    assert_invalid("dump-line.json", &bad);
    bad["time"] = json!("2026-12-03T14:50:41Z");
    assert_invalid("dump-line.json", &bad);
    // A body the type does not allow is refused.
    let mut bad = line;
    bad["type"] = json!("tool/call");
    assert_invalid("dump-line.json", &bad);
}

#[test]
fn damaged_old_and_unusual_stores_give_valid_output() {
    // A record that starts like an event and does not decode: a raw line with corrupt_event.
    let (_keep, free_text) = copy_of("v1-free-text-status");
    let lines = lines_of(&["dump", arg(&free_text), "--json"], b"", 0);
    assert!(lines.iter().any(|line| line.get("corrupt_event").is_some()), "{lines:?}");
    assert_lines_valid("dump-line.json", &lines);
    // Events of types and schemas this build does not read: opaque/0xTAG lines.
    let (_keep, unknown) = copy_of("v1-unknown-data");
    let lines = lines_of(&["dump", arg(&unknown), "--json"], b"", 0);
    assert!(
        lines.iter().any(|line| line["type"].as_str().is_some_and(|t| t.starts_with("opaque/")))
    );
    assert_lines_valid("dump-line.json", &lines);
    let export = lines_of(&["export", arg(&unknown), "--json"], b"", 0);
    assert_lines_valid("export-line.json", &export);
    assert_valid("state.json", &json_of("state", &unknown, &[]));
    // A torn tail: verify exits 0 (an open cuts it) and says so, info reports it.
    let (_keep, torn) = copy_of("v1-torn-tail");
    let lines = lines_of(&["verify", arg(&torn), "--json"], b"", 0);
    assert_lines_valid("verify.json", &lines);
    assert_eq!(lines[0]["outcome"], "torn_tail");
    let info = json_of("info", &torn, &[]);
    assert_valid("info.json", &info);
    assert!(info["torn_tail"].is_object(), "{info}");
    // A flipped byte inside a sealed segment: corruption, and a salvage with a gap.
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("store");
    let results = store_with_calls(&dir, 70);
    let (_, lost) = result_inside_segment(&dir, &results, 1);
    let (path, offset, _) = frame_of(&dir, lost);
    flip_byte(&path, offset + 40);
    for extra in [&[][..], &["--deep"][..]] {
        let mut args = vec!["verify", arg(&dir), "--json"];
        args.extend_from_slice(extra);
        let lines = lines_of(&args, b"", 3);
        assert_lines_valid("verify.json", &lines);
        assert_eq!(lines[0]["outcome"], "corrupt", "{}", lines[0]);
    }
    let to = temp.path().join("saved");
    for extra in [&["--dry-run"][..], &[][..]] {
        let mut args = vec!["salvage", arg(&dir), "--to", arg(&to), "--json"];
        args.extend_from_slice(extra);
        let lines = lines_of(&args, b"", 0);
        assert_lines_valid("salvage.json", &lines);
        assert_eq!(lines[0]["gaps"].as_array().map(Vec::len), Some(1), "{}", lines[0]);
    }
}

// The shapes of the CLI convention: one `state` shape, `expires_at`, `time`, `append --json`.

/// A persistent approval with an end of validity, in task `t4`.
fn expiring_approval(dir: &Path) {
    emit(
        dir,
        &[
            event("t4", "approval/request", json!({ "approval_id": "p1" })),
            event(
                "t4",
                "approval/grant",
                json!({ "approval_id": "p1", "scope": "persistent", "expires_at_us": 4_102_444_800_000_000_u64 }),
            ),
        ],
    );
}

#[test]
fn state_with_task_has_the_same_shape() {
    let dir = store();
    for task in ["t1", "t2", "t3"] {
        let state = json_of("state", dir.path(), &["--task", task]);
        assert_valid("state.json", &state);
        let tasks = state["tasks"].as_object().expect("tasks");
        assert_eq!(tasks.keys().collect::<Vec<_>>(), [task], "{state}");
    }
}

#[test]
fn state_approval_expires_at() {
    let dir = store();
    expiring_approval(dir.path());
    let state = json_of("state", dir.path(), &[]);
    assert_valid("state.json", &state);
    assert_eq!(
        state["tasks"]["t4"]["control"]["approvals"]["p1"]["expires_at"],
        "2100-01-01T00:00:00.000000Z",
        "{state}"
    );
}

#[test]
fn dump_and_tail_event_lines_have_time() {
    let dir = store();
    expiring_approval(dir.path());
    json_of("recover", dir.path(), &[]);
    let lines = lines_of(&["dump", arg(dir.path()), "--json"], b"", 0);
    assert!(lines.len() > 40);
    assert_lines_valid("dump-line.json", &lines);
    let types: std::collections::BTreeSet<&str> =
        lines.iter().filter_map(|l| l["type"].as_str()).collect();
    for expected in
        ["tool/outcome_unknown", "approval/expired", "control/expired", "recovery/restored"]
    {
        assert!(types.contains(expected), "{expected} in {types:?}");
    }
    assert_lines_valid("dump-line.json", &lines_of(&["tail", arg(dir.path()), "--json"], b"", 0));
    // `time` comes right after `timestamp_us`.
    for line in &lines {
        let keys: Vec<&str> =
            line.as_object().expect("object").keys().map(String::as_str).collect();
        assert_eq!(
            keys[..6],
            ["seq", "task", "revision", "timestamp_us", "time", "type"],
            "{line}"
        );
    }
}

#[test]
fn export_lines_are_valid() {
    let dir = store();
    json_of("recover", dir.path(), &[]);
    let lines = lines_of(&["export", arg(dir.path()), "--json"], b"", 0);
    assert!(lines.len() > 40);
    assert_lines_valid("export-line.json", &lines);
    let (_keep, migrated) = copy_of("v1-clean-multi-task");
    json_of("migrate", &migrated, &[]);
    assert_lines_valid(
        "export-line.json",
        &lines_of(&["export", arg(&migrated), "--json"], b"", 0),
    );
}

#[test]
fn append_json_lines_are_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = lines_of(&["append", arg(dir.path()), "--json"], b"a\nb\n\xff\n", 0);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_lines_valid("append-line.json", &lines);
}

#[test]
fn event_lines_keep_every_body_field_and_name_every_timestamp() {
    let dir = store();
    expiring_approval(dir.path());
    // Body fields named like envelope keys, and one named like their escaped form.
    emit(
        dir.path(),
        &[event(
            "t5",
            "user/message",
            json!({ "text": "x", "seq": 99, "time": "noon", "body.seq": 3 }),
        )],
    );
    for command in ["dump", "export"] {
        let lines = lines_of(&[command, arg(dir.path()), "--json"], b"", 0);
        assert_lines_valid(
            if command == "dump" { "dump-line.json" } else { "export-line.json" },
            &lines,
        );
        let message = lines.iter().find(|line| line["task"] == "t5").expect("t5's message");
        assert_eq!(message["body.seq"], 99, "{message}");
        assert_eq!(message["body.time"], "noon", "{message}");
        assert_eq!(message["body.body.seq"], 3, "{message}");
        let grant =
            lines.iter().find(|line| line.get("expires_at_us").is_some()).expect("the grant");
        assert_eq!(grant["expires_at"], "2100-01-01T00:00:00.000000Z", "{grant}");
        let keys: Vec<&str> = grant.as_object().unwrap().keys().map(String::as_str).collect();
        let at = keys.iter().position(|k| *k == "expires_at_us").expect("expires_at_us");
        assert_eq!(keys[at + 1], "expires_at", "{grant}");
    }
}

#[test]
fn verify_of_a_log_that_cannot_be_read_gives_the_error_object() {
    // A directory where a segment file should be: the name passes the store check, reading
    // it fails.
    let temp = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(temp.path().join("00000000000000000001.seg")).expect("mkdir");
    let lines = lines_of(&["verify", arg(temp.path()), "--json"], b"", 1);
    assert_lines_valid("verify.json", &lines);
    assert_eq!(lines[0]["outcome"], "error", "{}", lines[0]);
    assert_eq!(lines[0]["exit_code"], 1, "{}", lines[0]);
}

#[test]
fn replicate_status_is_valid() {
    let dir = store();
    let replica = tempfile::tempdir().expect("tempdir");
    let to = format!("file://{}", replica.path().display());
    let run = factlog(&["replicate", arg(dir.path()), "--to", &to, "--once", "--json"], b"");
    run.assert_success();
    let status: Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    assert_valid("replicate.json", &status);
    assert!(status["shipped_seq"].as_u64() > Some(0), "{status}");
    let mut wrong = status.clone();
    wrong["lag"] = Value::from(-1);
    assert_invalid("replicate.json", &wrong);
}

#[test]
fn recover_of_a_restored_store_names_its_replica() {
    let dir = store();
    let restored = factlog::harness::restored::Restored {
        version: 1,
        from: "file:///replicas/a".to_owned(),
        through_seq: 7,
        source_device: Some("machine-a".to_owned()),
        restored_us: 1,
        device: "machine-b".to_owned(),
    };
    factlog::harness::restored::write(&factlog::fs::RealFs, dir.path(), &restored).expect("write");
    let report = json_of("recover", dir.path(), &["--dry-run"]);
    assert_valid("recover.json", &report);
    assert_eq!(report["restored"]["from"], "file:///replicas/a", "{report}");
    assert_eq!(report["restored"]["through_seq"], 7);
    let text = factlog(&["recover", arg(dir.path())], b"");
    assert!(text.stdout_text().starts_with("restored from file:///replicas/a through seq 7"));
    let plain = store();
    assert!(json_of("recover", plain.path(), &[]).get("restored").is_none());
}

#[test]
fn retain_plan_is_valid() {
    let replica = tempfile::tempdir().expect("tempdir");
    let to = format!("file://{}", replica.path().display());
    factlog(&["replicate", arg(store().path()), "--to", &to, "--once"], b"").assert_success();
    let run = factlog(&["retain", &to, "--dry-run", "--json"], b"");
    run.assert_success();
    let plan: Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    assert_valid("retain.json", &plan);
    assert_eq!(plan["dry_run"], true);
}

#[test]
fn replicas_list_verify_and_a_dry_run_restore_are_valid() {
    let replica = tempfile::tempdir().expect("tempdir");
    let to = format!("file://{}", replica.path().display());
    let dir = store();
    factlog(&["replicate", arg(dir.path()), "--to", &to, "--once"], b"").assert_success();

    let listed = factlog(&["replicas", "list", &to, "--store", arg(dir.path()), "--json"], b"");
    listed.assert_success();
    let listed: Value = serde_json::from_slice(&listed.stdout).expect("one JSON object");
    assert_valid("replicas-list.json", &listed);
    assert_eq!(listed["lag"]["records"], 0, "{listed}");
    // Without a store there is no lag to report.
    let bare = factlog(&["replicas", "list", &to, "--json"], b"");
    bare.assert_success();
    let bare: Value = serde_json::from_slice(&bare.stdout).expect("one JSON object");
    assert_valid("replicas-list.json", &bare);
    assert!(bare["lag"].is_null(), "{bare}");

    let scrub = factlog(&["replicas", "verify", &to, "--json"], b"");
    scrub.assert_success();
    let scrub: Value = serde_json::from_slice(&scrub.stdout).expect("one JSON object");
    assert_valid("replicas-verify.json", &scrub);
    let mut wrong = scrub.clone();
    wrong["replica_id"] = Value::from("not hex");
    assert_invalid("replicas-verify.json", &wrong);

    let target = replica.path().join("never-written");
    let run = factlog(&["restore", &to, arg(&target), "--dry-run", "--json"], b"");
    run.assert_success();
    let dry: Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    assert_valid("restore.json", &dry);
    assert_eq!(dry["dry_run"], true);
}
