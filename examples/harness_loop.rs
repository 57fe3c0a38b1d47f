//! A harness loop on a factlog store: open, contract, turn, streamed deltas, a tool call with
//! a request key, its result, a crash in the middle of the next call, reopen, the recovery
//! report, and the resume. Run with `cargo run --example harness_loop`.

use factlog::harness::event::{
    AssistantMessage, Contract, Effect, RequestedCall, Risk, Signal, StepStart, ToolCall,
    ToolResult, TurnStart,
};
use factlog::harness::{Body, Outcome, Plan, Resume, request_key};
use factlog::{Appended, Store, StoreOptions};
use serde_json::json;

/// Runs the loop in a temporary directory; panics if the store does not behave as described.
pub fn main() -> factlog::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");

    // The first process: it crashes while `publish` runs.
    {
        let store = Store::open(dir.path(), StoreOptions::new())?;
        let task = store.task("session-1")?;
        task.append(Body::Contract(Contract {
            goal: "publish the weekly report".into(),
            risk: Risk::High,
            ..Default::default()
        }))?;
        task.append(Body::TurnStart(TurnStart::default()))?;
        task.append(Body::StepStart(StepStart::default()))?;
        for token in ["Drafting", " the", " report", "..."] {
            task.delta(token)?;
        }
        let call = |id: &str, tool: &str| RequestedCall {
            call_id: id.into(),
            tool: tool.into(),
            ..Default::default()
        };
        task.append(Body::AssistantMessage(AssistantMessage {
            text: "I will fetch the data, then publish.".into(),
            tool_calls: vec![call("c1", "fetch"), call("c2", "publish"), call("c3", "notify")],
            ..Default::default()
        }))?;
        task.append(Body::ToolCall(ToolCall {
            call_id: "c1".into(),
            tool: "fetch".into(),
            effect: Effect::ReadOnly,
            ..Default::default()
        }))?;
        task.append(Body::ToolResult(ToolResult {
            call_id: "c1".into(),
            output: Some(json!({"rows": 42})),
            ..Default::default()
        }))?;
        // The key depends on the task, the operation and the revision it was derived from.
        let key = request_key::derive(task.id(), "publish:weekly-report", task.revision());
        task.append(Body::ToolCall(ToolCall {
            call_id: "c2".into(),
            tool: "publish".into(),
            effect: Effect::Idempotent,
            request_key: Some(key),
            args: Some(json!({"title": "Weekly report", "token": {"$secret": "s3cr3t"}})),
            ..Default::default()
        }))?;
        // The process dies here: `publish` may or may not have run. (Dropping the store
        // without closing it leaves exactly what a crash leaves: the synced events.)
    }

    // The next process: restore, but do not resume by itself.
    let store = Store::open(dir.path(), StoreOptions::new())?;
    let report = store.recover()?;
    let task_report = &report.tasks[0];
    for call in &task_report.calls {
        println!("{}: {} -> {}", call.call_id, call.outcome.as_str(), call.plan.as_str());
    }
    let by_id = |id: &str| task_report.calls.iter().find(|c| c.call_id.as_str() == id).unwrap();
    assert_eq!((by_id("c1").outcome, by_id("c1").plan), (Outcome::Completed, Plan::ReuseReceipt));
    assert_eq!(
        (by_id("c2").outcome, by_id("c2").plan),
        (Outcome::OutcomeUnknown, Plan::RetrySameKey)
    );
    assert_eq!((by_id("c3").outcome, by_id("c3").plan), (Outcome::NotStarted, Plan::Reschedule));
    assert_eq!(task_report.resume, Resume::NeedsConfirmation);

    // A high-risk task needs a recorded confirmation before any side effect.
    let task = store.task("session-1")?;
    let c2 = store.task_state("session-1").unwrap().session.calls["c2"].clone();
    let retry = Body::ToolCall(ToolCall {
        call_id: "c2".into(),
        tool: "publish".into(),
        effect: Effect::Idempotent,
        request_key: c2.request_key.clone(),
        ..Default::default()
    });
    assert!(task.append(retry.clone()).is_err());
    task.append(Body::Resume(Signal {
        reason: Some("user confirmed".into()),
        ..Default::default()
    }))?;
    task.append(Body::TurnStart(TurnStart::default()))?;
    task.append(retry)?;
    task.append(Body::ToolResult(ToolResult {
        call_id: "c2".into(),
        receipt: Some(json!({"article_id": 7, "url": "https://example.com/a/7"})),
        ..Default::default()
    }))?;
    // Dispatching the same request again returns the first receipt; nothing runs twice.
    let again = task.append(Body::ToolCall(ToolCall {
        call_id: "c2-again".into(),
        tool: "publish".into(),
        effect: Effect::Idempotent,
        request_key: c2.request_key,
        ..Default::default()
    }))?;
    assert!(matches!(again, Appended::Duplicate { .. }));
    for entry in store.history("session-1")? {
        println!("{}", serde_json::to_string(&entry).unwrap());
    }
    store.close()
}
