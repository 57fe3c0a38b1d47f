//! The demo's writer process (`factlog demo DIR --seed N --child`, hidden): it runs the agent
//! harness up to the side-effecting `publish` call and is killed there by its parent.
//!
//! It talks to the parent over standard output, one JSON object per line: first
//! `{"acknowledged": SEQ, ..}` once the `tool/call` of `publish` is synced, then
//! `{"publishing": true, "landed": BOOL, ..}` once it has started publishing (and, when the
//! seed says so, the article has reached the service). Then it waits on standard input for
//! the SIGKILL; if its standard input closes instead (the parent died) it exits with code 3,
//! still without a result, so it never outlives its parent.

use std::io::{Read, Write};
use std::path::Path;

use factlog::harness::event::{
    ApprovalGrant, ApprovalRequest, AssistantMessage, BudgetUsage, Contract, Effect, Plan,
    RequestedCall, Risk, Scope, StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart,
    UserMessage,
};
use factlog::harness::{Body, request_key};
use factlog::{Appended, Store, Task};
use serde_json::json;

use super::external::{Dedup, Service};
use super::scenario::{
    APPROVAL_NOTIFY, APPROVAL_PUBLISH, CALL_NOTIFY, CALL_PUBLISH, CALL_SEARCH, PUBLISH_OPERATION,
    Scenario, TASK, store_options,
};

/// Exit code when standard input closed before the kill came.
pub const EXIT_ORPHANED: i32 = 3;

/// Runs the writer in the store `dir`; returns only on an error (the parent kills it).
pub fn run(dir: &Path, scenario: &Scenario) -> Result<(), String> {
    let (options, counters) = store_options();
    let store = Store::open(dir, options).map_err(|e| format!("cannot open the store: {e}"))?;
    let task = store.task(TASK).map_err(|e| e.to_string())?;
    let append = |body: Body| -> Result<u64, String> {
        match task.append(body) {
            Ok(Appended::Written { seq, .. }) => Ok(seq.0),
            Ok(Appended::Duplicate { .. }) => Err("unexpected duplicate".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    };
    first_turn(&task, scenario, &append)?;
    let draft_revision = second_turn(&task, scenario, &append)?;
    // The key names the request, not the attempt: the same draft always gets the same key.
    let key = request_key::derive(task.id(), PUBLISH_OPERATION, draft_revision);
    let seq = append(Body::ToolCall(ToolCall {
        call_id: CALL_PUBLISH.into(),
        tool: "publish".into(),
        effect: scenario.publish_effect,
        request_key: Some(key.clone()),
        args: Some(json!({ "title": scenario.title(), "api_token": { "$secret": "demo-token" } })),
        approval_id: Some(APPROVAL_PUBLISH.into()),
        ..Default::default()
    }))?;
    tell(&json!({ "acknowledged": seq, "call_id": CALL_PUBLISH, "pid": std::process::id() }))?;

    // The tool runs: the request goes out to the service.
    let service = Service::new(dir);
    if scenario.lands_before_crash {
        let dedup = match scenario.publish_effect {
            Effect::Idempotent => Dedup::ByKey,
            _ => Dedup::None,
        };
        service
            .publish(&scenario.title(), key.as_str(), dedup)
            .map_err(|e| format!("the publishing service failed: {e}"))?;
    }
    let events = store.log().last_seq().map_or(0, |s| s.0);
    tell(&json!({
        "publishing": true,
        "landed": scenario.lands_before_crash,
        "events": events,
        "syncs": counters.read().record_and_dir_syncs(),
    }))?;
    // Wait for the kill. Reading returns only if the parent went away.
    let mut byte = [0u8; 1];
    let _ = std::io::stdin().read(&mut byte);
    std::process::exit(EXIT_ORPHANED);
}

/// Turn 1: the contract, the plan, the user's request and a streamed question.
fn first_turn(
    task: &Task,
    scenario: &Scenario,
    append: &dyn Fn(Body) -> Result<u64, String>,
) -> Result<(), String> {
    append(Body::Contract(Contract {
        goal: format!("Write and publish an article about {}", scenario.topic),
        done_criteria: vec![
            "the article is live exactly once".into(),
            "#newsroom has the link".into(),
        ],
        risk: Risk::High,
        ..Default::default()
    }))?;
    append(Body::Plan(Plan {
        steps: vec!["research".into(), "draft".into(), "publish".into(), "notify".into()],
        ..Default::default()
    }))?;
    append(Body::TurnStart(TurnStart::default()))?;
    append(Body::UserMessage(UserMessage {
        text: format!("Please write a short article about {} and publish it.", scenario.topic),
        ..Default::default()
    }))?;
    append(Body::StepStart(StepStart::default()))?;
    let question = "I will research, draft, and ask for your approval before publishing. \
                    How long should it be?";
    stream(task, question)?;
    append(Body::AssistantMessage(AssistantMessage {
        text: question.into(),
        ..Default::default()
    }))?;
    append(Body::StepEnd(StepEnd::default()))?;
    append(Body::BudgetUsage(BudgetUsage {
        input_tokens: 600,
        output_tokens: 40,
        cost_micros: 2_100,
        ..Default::default()
    }))?;
    append(Body::TurnEnd(TurnEnd::default()))?;
    Ok(())
}

/// Turn 2 up to the publish call: a read-only search, a streamed draft that asks for publish
/// and notify, and the user's `once` approvals for both. Returns the task's revision after
/// the draft: the content the publish request key is derived from.
fn second_turn(
    task: &Task,
    scenario: &Scenario,
    append: &dyn Fn(Body) -> Result<u64, String>,
) -> Result<u64, String> {
    append(Body::TurnStart(TurnStart::default()))?;
    append(Body::UserMessage(UserMessage {
        text: "About 600 words. Publish it when it is ready, then tell the team.".into(),
        ..Default::default()
    }))?;
    append(Body::StepStart(StepStart::default()))?;
    stream(task, "Looking up recent sources first.")?;
    append(Body::AssistantMessage(AssistantMessage {
        text: "Looking up recent sources first.".into(),
        tool_calls: vec![requested(CALL_SEARCH, "search", json!({ "query": scenario.topic }))],
        ..Default::default()
    }))?;
    append(Body::ToolCall(ToolCall {
        call_id: CALL_SEARCH.into(),
        tool: "search".into(),
        effect: Effect::ReadOnly,
        args: Some(json!({ "query": scenario.topic })),
        ..Default::default()
    }))?;
    append(Body::ToolResult(ToolResult {
        call_id: CALL_SEARCH.into(),
        receipt: Some(json!({ "query_id": "q-1", "hits": 3 })),
        output: Some(json!({ "results": [
            { "title": "Crash consistency in practice", "url": "https://papers.example/1" },
            { "title": "At-least-once, with keys", "url": "https://blog.example/2" },
            { "title": "fdatasync and you", "url": "https://blog.example/3" },
        ] })),
        ..Default::default()
    }))?;
    append(Body::StepEnd(StepEnd::default()))?;
    append(Body::StepStart(StepStart::default()))?;
    let draft = format!(
        "Draft-1, \"{}\", is ready: three sources, 600 words. Publishing it, then \
         notifying #newsroom.",
        scenario.title()
    );
    stream(task, &draft)?;
    append(Body::AssistantMessage(AssistantMessage {
        text: draft,
        tool_calls: vec![
            requested(CALL_PUBLISH, "publish", json!({ "draft": "draft-1" })),
            requested(CALL_NOTIFY, "notify", json!({ "channel": "#newsroom" })),
        ],
        ..Default::default()
    }))?;
    let draft_revision = task.revision();
    for (approval, action) in [
        (APPROVAL_PUBLISH, "publish draft-1 to news.example"),
        (APPROVAL_NOTIFY, "post the link in #newsroom"),
    ] {
        append(Body::ApprovalRequest(ApprovalRequest {
            approval_id: approval.into(),
            action: Some(action.into()),
            ..Default::default()
        }))?;
        append(Body::ApprovalGrant(ApprovalGrant {
            approval_id: approval.into(),
            scope: Scope::Once,
            ..Default::default()
        }))?;
    }
    Ok(draft_revision)
}

/// Streams `text` as `assistant/delta` fragments, one per word.
pub fn stream(task: &Task, text: &str) -> Result<(), String> {
    for (i, word) in text.split(' ').enumerate() {
        let fragment = if i == 0 { word.to_owned() } else { format!(" {word}") };
        task.delta(&fragment).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A call the model asks for.
pub fn requested(call_id: &str, tool: &str, args: serde_json::Value) -> RequestedCall {
    RequestedCall {
        call_id: call_id.into(),
        tool: tool.into(),
        args: Some(args),
        ..Default::default()
    }
}

/// One line to the parent, flushed.
fn tell(message: &serde_json::Value) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{message}").and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
}
