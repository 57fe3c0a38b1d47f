//! Helpers for the tests of the store commands of the CLI (`emit`, `recover`, `state`,
//! `history`, `checkpoint`, typed `dump`): feeding JSON lines, parsing JSON replies, taking a
//! byte image of a store directory, and a store left as a crash leaves it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Run, arg, factlog};

/// One input line of `factlog emit`: `{"task": task, "type": event_type, ..fields}`.
pub fn event(task: &str, event_type: &str, fields: Value) -> Value {
    let mut line = json!({ "task": task, "type": event_type });
    if let Value::Object(fields) = fields {
        for (key, value) in fields {
            line[key] = value;
        }
    }
    line
}

/// The lines as `factlog emit` input: one compact JSON object per line.
pub fn input(lines: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for line in lines {
        bytes.extend_from_slice(line.to_string().as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// Every standard output line of `run` parsed as JSON.
pub fn json_lines(run: &Run) -> Vec<Value> {
    run.stdout_text()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect()
}

/// `factlog emit DIR` fed `lines`, asserting exit 0 and one reply per line.
pub fn emit(dir: &Path, lines: &[Value]) -> Vec<Value> {
    let run = factlog(&["emit", arg(dir)], &input(lines));
    run.assert_success();
    let replies = json_lines(&run);
    assert_eq!(replies.len(), lines.len(), "one reply per line: {run:?}");
    replies
}

/// `factlog emit DIR` fed one line, returning its reply.
pub fn emit_one(dir: &Path, line: Value) -> Value {
    emit(dir, &[line]).remove(0)
}

/// Asserts a written reply, `{"seq","task","revision","durability"}` exactly (protocol v1,
/// `format-spec/protocol.md`), its durability one of the three; returns `(seq, revision)`.
pub fn written(reply: &Value) -> (u64, u64) {
    let object = reply.as_object().unwrap_or_else(|| panic!("an object: {reply}"));
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    assert_eq!(keys, ["seq", "task", "revision", "durability"], "a written reply: {reply}");
    let durability = reply["durability"].as_str().expect("durability");
    assert!(["buffered", "flushed", "synced"].contains(&durability), "{reply}");
    (reply["seq"].as_u64().expect("seq"), reply["revision"].as_u64().expect("revision"))
}

/// Asserts an error reply `{"error": code, "message": ..}` exactly (plus the fields of the
/// codes that carry some: `STALE_REVISION` both revisions, `NEEDS_RECOVERY` its task and
/// calls, `CALL_ID_REUSED` its task, call id and the earlier call); returns the message.
pub fn refused(reply: &Value, code: &str) -> String {
    let object = reply.as_object().unwrap_or_else(|| panic!("an object: {reply}"));
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    let expected: &[&str] = match code {
        "STALE_REVISION" => &["error", "message", "expected", "actual"],
        "NEEDS_RECOVERY" => &["error", "message", "task", "calls"],
        "CALL_ID_REUSED" => &["error", "message", "task", "call_id", "earlier"],
        "UNMARKED_SECRET" => &["error", "message", "task", "path", "shape"],
        _ => &["error", "message"],
    };
    assert_eq!(keys, expected, "an error reply: {reply}");
    assert_eq!(reply["error"], code, "{reply}");
    let message = reply["message"].as_str().expect("message").to_owned();
    assert!(!message.is_empty() && !message.contains('\n'), "{reply}");
    message
}

/// `factlog CMD DIR ARGS.. --json`, asserting exit 0 and a single JSON object.
pub fn json_of(command: &str, dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec![command, arg(dir)];
    args.extend_from_slice(extra);
    args.push("--json");
    let run = factlog(&args, b"");
    run.assert_success();
    let lines = json_lines(&run);
    assert_eq!(lines.len(), 1, "one JSON object: {run:?}");
    lines.into_iter().next().expect("one line")
}

/// `factlog dump DIR --json` parsed, one value per record.
pub fn dump_records(dir: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["dump", arg(dir), "--json"];
    args.extend_from_slice(extra);
    let run = factlog(&args, b"");
    run.assert_success();
    json_lines(&run)
}

/// The revision of `task` as `factlog state` reports it.
pub fn revision(dir: &Path, task: &str) -> u64 {
    json_of("state", dir, &["--task", task])["tasks"][task]["revision"].as_u64().expect("revision")
}

/// Every file under `dir`, recursively, with its bytes.
pub fn dir_image(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut image = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        for entry in std::fs::read_dir(&path).expect("read directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                image.insert(path.clone(), std::fs::read(&path).expect("read file"));
            }
        }
    }
    image
}

/// The bytes of every segment file of the store, by path.
pub fn segments_image(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    dir_image(dir)
        .into_iter()
        .filter(|(path, _)| path.extension().is_some_and(|ext| ext == "seg"))
        .collect()
}

/// True if `needle` occurs in `haystack`.
pub fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// The approval request and grant of `id` with `scope`.
pub fn grant(task: &str, id: &str, scope: &str) -> [Value; 2] {
    [
        event(task, "approval/request", json!({ "approval_id": id })),
        event(task, "approval/grant", json!({ "approval_id": id, "scope": scope })),
    ]
}

/// A store as a crash leaves it: task `t1` (low risk) stopped in the middle of a step with
/// one call of every effect class dispatched and unanswered, one answered, one never
/// dispatched, approvals of every scope, one used, and a pending cancel; task `t2` (high
/// risk) with an unsafe call in flight. Returns the seq of `t1`'s cancel.
pub fn crashed_store(dir: &Path) -> u64 {
    let call = |id: &str, tool: &str, effect: &str| {
        event("t1", "tool/call", json!({ "call_id": id, "tool": tool, "effect": effect }))
    };
    let requested = |id: &str, tool: &str| json!({ "call_id": id, "tool": tool });
    let mut lines = vec![
        event("t1", "task/contract", json!({ "goal": "weekly report", "risk": "low" })),
        event("t1", "turn/start", json!({})),
        event("t1", "step/start", json!({})),
        event(
            "t1",
            "assistant/message",
            json!({
                "text": "fetching, then publishing",
                "tool_calls": [
                    requested("c0", "fetch"), requested("c1", "fetch"),
                    requested("c2", "publish"), requested("c3", "publish"),
                    requested("c4", "order"), requested("c5", "wire"),
                    requested("c6", "lookup"),
                ],
            }),
        ),
    ];
    lines.extend(grant("t1", "a1", "once"));
    lines.extend(grant("t1", "a2", "run"));
    lines.extend(grant("t1", "a3", "persistent"));
    lines.extend(grant("t1", "a4", "once"));
    lines.push(event(
        "t1",
        "tool/call",
        json!({ "call_id": "c5", "tool": "wire", "effect": "unsafe", "approval_id": "a4" }),
    ));
    lines.push(call("c1", "fetch", "read_only"));
    lines.push(event(
        "t1",
        "tool/call",
        json!({
            "call_id": "c2", "tool": "publish", "effect": "idempotent",
            "request_key": "k-publish",
        }),
    ));
    lines.push(call("c3", "publish", "idempotent"));
    lines.push(call("c4", "order", "queryable"));
    lines.push(call("c6", "lookup", "read_only"));
    lines.push(event("t1", "tool/result", json!({ "call_id": "c6", "receipt": { "rows": 42 } })));
    lines.push(event("t1", "control/cancel", json!({ "reason": "user pressed stop" })));
    lines.extend([
        event("t2", "task/contract", json!({ "goal": "move money", "risk": "high" })),
        event("t2", "turn/start", json!({})),
        event("t2", "tool/call", json!({ "call_id": "p1", "tool": "wire", "effect": "unsafe" })),
    ]);
    let replies = emit(dir, &lines);
    for reply in &replies {
        written(reply);
    }
    let cancel = lines.iter().position(|line| line["type"] == "control/cancel").expect("cancel");
    replies[cancel]["seq"].as_u64().expect("seq")
}

/// The decisions of a recovery report, without what differs between a dry run, a first run
/// and a second one: per task its calls, expired approvals and resume.
pub fn decisions(report: &Value) -> Vec<Value> {
    report["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|task| {
            json!({
                "task": task["task"],
                "calls": task["calls"],
                "expired": task["expired"],
                "resume": task["resume"],
            })
        })
        .collect()
}

/// The call `call_id` of task `task` in a recovery report.
pub fn report_call<'a>(report: &'a Value, task: &str, call_id: &str) -> &'a Value {
    let task = report_task(report, task);
    task["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .find(|c| c["call_id"] == call_id)
        .unwrap_or_else(|| panic!("call {call_id} in {task}"))
}

/// The task `task` of a recovery report.
pub fn report_task<'a>(report: &'a Value, task: &str) -> &'a Value {
    report["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["task"] == task)
        .unwrap_or_else(|| panic!("task {task} in {report}"))
}

/// Runs `factlog bench ARGS --dir DIR`: asserts success, an empty standard error (a pipe, so
/// no progress line; client processes say nothing there) and that the scratch directory was
/// removed from `dir`; returns standard output.
pub fn bench_in(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["bench"];
    all.extend(args);
    all.extend(["--dir", super::arg(dir)]);
    let run = super::factlog(&all, b"");
    run.assert_success();
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let left: Vec<_> = std::fs::read_dir(dir).expect("list --dir").collect();
    assert!(left.is_empty(), "bench left {left:?} behind");
    run.stdout_text()
}
