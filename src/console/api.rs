//! The console's JSON API, under `/api/`: the lists of tasks (those waiting for a person, and
//! all of them with filters), one task, a page of its events, its export, the store's health,
//! and the operator's answers. Every list and page is bounded ([`CONSOLE_LIST_TASKS_MAX`],
//! [`CONSOLE_PAGE_EVENTS_MAX`]); the tasks' summaries and what waits for a person are the
//! library's ([`crate::harness::operator`]), never decided here; an answer is recorded by
//! [`answer::answer`], the rules every writer follows.
//!
//! Errors are `{"error": {"code", "message"}}` with a status: 400 for a request the console
//! cannot read, 404 for a task the store does not have, 403 for an action of a read-only
//! console, 409 for an answer the store refuses or cannot take now (with the library's code
//! and message: nothing to answer, a holder that does not serve the store), 500 for a store
//! that cannot be read.

use std::path::Path;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::client::answer::{self, AnswerError, Answered};
use crate::harness::event::Scope;
use crate::harness::operator::{Answer, Operator, TaskSummary};
use crate::limits::{
    CONSOLE_EXPORT_CHUNKS_QUEUED_MAX, CONSOLE_LIST_TASKS_MAX, CONSOLE_OPERATOR_TEXT_BYTES_MAX,
    CONSOLE_PAGE_EVENTS_MAX,
};
use crate::protocol::views;
use crate::protocol::views::task_summary_value;
use crate::{Log, Options};

use super::reads::{self, ReadError};
use super::routes::App;

/// The tasks one list request returns when it does not say.
const LIST_LIMIT_DEFAULT: usize = 100;

/// The events one page request returns when it does not say.
const PAGE_LIMIT_DEFAULT: usize = 500;

/// An error reply.
pub fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({ "error": { "code": code, "message": message.into() } });
    (status, Json(body)).into_response()
}

/// `offset` and `limit` of a list.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    offset: Option<usize>,
    limit: Option<usize>,
    /// Only tasks in this phase (`none`: tasks without one).
    phase: Option<String>,
    /// Only tasks whose id, phase or awaited call or tool contains this text (any case).
    q: Option<String>,
}

fn page_of(summaries: &[&TaskSummary], query: &ListQuery) -> Value {
    let offset = query.offset.unwrap_or(0).min(summaries.len());
    let limit = query.limit.unwrap_or(LIST_LIMIT_DEFAULT).clamp(1, CONSOLE_LIST_TASKS_MAX);
    let tasks: Vec<Value> = summaries
        .iter()
        .skip(offset)
        .take(limit)
        .map(|summary| task_summary_value(summary))
        .collect();
    json!({ "total": summaries.len(), "offset": offset, "limit": limit, "tasks": tasks })
}

/// `GET /api/overview`: the store, the counts, the phases with their task counts.
pub async fn overview(State(app): State<App>) -> Response {
    let summaries = app.mirror.summaries();
    let mut phases = std::collections::BTreeMap::<String, u64>::new();
    for summary in summaries.iter() {
        *phases.entry(summary.phase.clone().unwrap_or_else(|| "none".to_owned())).or_default() += 1;
    }
    let (source, last_seq, last_error) = app.mirror.status();
    Json(json!({
        "dir": app.mirror.dir().display().to_string(),
        "read_only": app.read_only,
        "last_seq": last_seq,
        "tasks": summaries.len(),
        "attention": app.mirror.attention().len(),
        "phases": phases,
        "source": source.as_str(),
        "last_error": last_error,
    }))
    .into_response()
}

/// `GET /api/attention`: the tasks waiting for a person, oldest wait first, one page.
pub async fn attention(State(app): State<App>, Query(query): Query<ListQuery>) -> Response {
    let waiting = app.mirror.attention();
    let refs: Vec<&TaskSummary> = waiting.iter().collect();
    Json(page_of(&refs, &query)).into_response()
}

/// `GET /api/tasks`: every task in task-id order, filtered by phase and text, one page.
pub async fn tasks(State(app): State<App>, Query(query): Query<ListQuery>) -> Response {
    let summaries = app.mirror.summaries();
    let text = query.q.as_deref().map(str::to_lowercase).filter(|text| !text.is_empty());
    let phase = query.phase.as_deref().filter(|phase| !phase.is_empty());
    let kept: Vec<&TaskSummary> = summaries
        .iter()
        .filter(|summary| {
            phase.is_none_or(|phase| summary.phase.as_deref().unwrap_or("none") == phase)
        })
        .filter(|summary| text.as_deref().is_none_or(|text| matches_text(summary, text)))
        .collect();
    Json(page_of(&kept, &query)).into_response()
}

fn matches_text(summary: &TaskSummary, text: &str) -> bool {
    let contains = |field: &str| field.to_lowercase().contains(text);
    contains(&summary.task)
        || summary.phase.as_deref().is_some_and(contains)
        || summary.attention.iter().any(|wait| {
            contains(wait.reason.as_str())
                || [&wait.call_id, &wait.tool, &wait.approval_id]
                    .into_iter()
                    .any(|field| field.as_deref().is_some_and(contains))
        })
}

/// `GET /api/tasks/{task}`: the task's summary and folded state.
pub async fn task(State(app): State<App>, UrlPath(task): UrlPath<String>) -> Response {
    let summaries = app.mirror.summaries();
    let Ok(at) = summaries.binary_search_by(|summary| summary.task.as_str().cmp(&task)) else {
        return unknown_task(&task);
    };
    let state = app.mirror.with_state(|state| {
        let id = crate::harness::TaskId::new(&task).ok()?;
        state.tasks.get(&id).map(views::task_state_value)
    });
    match state {
        Some(Ok(state)) => {
            Json(json!({ "summary": task_summary_value(&summaries[at]), "state": state }))
                .into_response()
        }
        Some(Err(failure)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "state",
            format!("cannot format the task's state: {failure}"),
        ),
        None => unknown_task(&task),
    }
}

fn unknown_task(task: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "unknown_task",
        format!("the store has no task {task:?}; pick one from the task list"),
    )
}

/// `from` and `limit` of a page of events.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    from: Option<u64>,
    limit: Option<usize>,
}

/// `GET /api/tasks/{task}/events`: one page of the task's events from `from`, with where the
/// next starts and the last seq in the store's files (the last durable fact a reader sees).
pub async fn events(
    State(app): State<App>,
    UrlPath(task): UrlPath<String>,
    Query(query): Query<EventsQuery>,
) -> Response {
    let dir = app.mirror.dir().to_path_buf();
    let from = query.from.unwrap_or(1);
    let limit = query.limit.unwrap_or(PAGE_LIMIT_DEFAULT);
    let read = tokio::task::spawn_blocking(move || {
        let page = reads::task_page(&dir, &task, from, limit)?;
        let durable_seq = page.durable_seq.or_else(|| durable_seq(&dir));
        Ok::<_, ReadError>((page, durable_seq))
    })
    .await;
    match read {
        Ok(Ok((page, durable_seq))) => Json(json!({
            "events": page.events,
            "next_seq": page.next_seq,
            "last_seq": page.last_seq,
            "first_seq": page.first_seq,
            "durable_seq": durable_seq,
            "done": page.next_seq > page.last_seq,
        }))
        .into_response(),
        Ok(Err(failure)) => error(StatusCode::INTERNAL_SERVER_ERROR, "read", failure.to_string()),
        Err(_) => {
            error(StatusCode::INTERNAL_SERVER_ERROR, "read", "the read was interrupted; try again")
        }
    }
}

/// The last record in the store's files: a read-only open's durable seq.
fn durable_seq(dir: &Path) -> Option<u64> {
    Log::open_read_only(dir, Options::new()).ok()?.durable_seq().map(|seq| seq.0)
}

/// `GET /api/tasks/{task}/export`: every event of the task as JSON lines (a download), read
/// page by page while it is sent: never held whole.
pub async fn export(State(app): State<App>, UrlPath(task): UrlPath<String>) -> Response {
    let dir = app.mirror.dir().to_path_buf();
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(
        CONSOLE_EXPORT_CHUNKS_QUEUED_MAX,
    );
    let filename = format!(
        "factlog-{}.jsonl",
        task.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_', "_")
    );
    tokio::task::spawn_blocking(move || {
        let mut from = 1;
        loop {
            let page = match reads::task_page(&dir, &task, from, CONSOLE_PAGE_EVENTS_MAX) {
                Ok(page) => page,
                Err(failure) => {
                    let _ = sender.blocking_send(Err(std::io::Error::other(failure.to_string())));
                    return;
                }
            };
            let mut chunk = Vec::new();
            for event in &page.events {
                if serde_json::to_writer(&mut chunk, event).is_err() {
                    return;
                }
                chunk.push(b'\n');
            }
            if !chunk.is_empty() && sender.blocking_send(Ok(chunk)).is_err() {
                return; // The download was cancelled.
            }
            if page.next_seq > page.last_seq {
                return;
            }
            from = page.next_seq;
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .header(header::CONTENT_DISPOSITION, format!("attachment; filename=\"{filename}\""))
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| {
            error(StatusCode::INTERNAL_SERVER_ERROR, "export", "cannot start the export")
        })
}

/// `GET /api/health`: the store's health ([`super::health::health`]).
pub async fn health(State(app): State<App>) -> Response {
    let mirror = Arc::clone(&app.mirror);
    match tokio::task::spawn_blocking(move || super::health::health(&mirror)).await {
        Ok(value) => Json(value).into_response(),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "health",
            "the read was interrupted; try again",
        ),
    }
}

/// The body of `POST /api/tasks/{task}/answer`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerRequest {
    /// `resolve`, `not_run`, `confirm`, `approve`, `deny` or `cancel`.
    action: String,
    /// Who answers (required).
    operator: String,
    /// Why, optionally.
    note: Option<String>,
    call_id: Option<String>,
    result: Option<Value>,
    receipt: Option<Value>,
    approval_id: Option<String>,
    scope: Option<String>,
}

/// `POST /api/tasks/{task}/answer`: records the operator's answer through
/// [`answer::answer`]: `{"recorded": {"seq", "revision"}}`, or `{"already": {"seq"}}` when
/// the same answer was recorded before.
pub async fn answer(
    State(app): State<App>,
    UrlPath(task): UrlPath<String>,
    body: Result<Json<AnswerRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    if app.read_only {
        return error(
            StatusCode::FORBIDDEN,
            "read_only",
            "this console was started with --read-only: it records no answer; answer with the \
             factlog commands, or start `factlog ui` without --read-only",
        );
    }
    let request = match body {
        Ok(Json(request)) => request,
        Err(rejection) => {
            return error(StatusCode::BAD_REQUEST, "bad_request", rejection.body_text());
        }
    };
    let (answer, operator) = match parse_answer(request) {
        Ok(parsed) => parsed,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_request", message),
    };
    let dir = app.mirror.dir().to_path_buf();
    let answered =
        tokio::task::spawn_blocking(move || answer::answer(&dir, &task, &answer, &operator)).await;
    match answered {
        Ok(Ok(Answered::Recorded { seq, revision })) => {
            Json(json!({ "recorded": { "seq": seq, "revision": revision } })).into_response()
        }
        Ok(Ok(Answered::Already { seq })) => {
            Json(json!({ "already": { "seq": seq } })).into_response()
        }
        Ok(Err(refused)) => {
            let status = match refused {
                AnswerError::NoTask { .. } => StatusCode::NOT_FOUND,
                AnswerError::Failed { .. } => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::CONFLICT,
            };
            error(status, refused.code(), refused.to_string())
        }
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "answer",
            "the answer was interrupted; look at the task's timeline before trying again",
        ),
    }
}

fn required(field: Option<String>, name: &str, action: &str) -> Result<String, String> {
    field.filter(|value| !value.is_empty()).ok_or_else(|| format!("{action} needs {name}"))
}

fn parse_answer(request: AnswerRequest) -> Result<(Answer, Operator), String> {
    let name = request.operator.trim().to_owned();
    if name.is_empty() {
        return Err("an answer needs the operator's name (who answers)".to_owned());
    }
    let note = request.note.filter(|note| !note.trim().is_empty());
    if name.len() > CONSOLE_OPERATOR_TEXT_BYTES_MAX
        || note.as_ref().is_some_and(|note| note.len() > CONSOLE_OPERATOR_TEXT_BYTES_MAX)
    {
        return Err(format!(
            "the operator's name and note are at most {CONSOLE_OPERATOR_TEXT_BYTES_MAX} bytes each"
        ));
    }
    let action = request.action.as_str();
    let answer = match action {
        "resolve" => Answer::Resolve {
            call_id: required(request.call_id, "call_id", action)?,
            output: request
                .result
                .ok_or("resolve needs result (what the call returned, as JSON)")?,
            receipt: request.receipt.filter(|receipt| !receipt.is_null()),
        },
        "not_run" => Answer::NotRun { call_id: required(request.call_id, "call_id", action)? },
        "confirm" => Answer::Confirm,
        "approve" => {
            let scope = request.scope.unwrap_or_else(|| "once".to_owned());
            let scope: Scope = serde_json::from_value(Value::String(scope.clone()))
                .map_err(|_| format!("scope {scope:?} is not one of once, run, persistent"))?;
            Answer::Approve {
                approval_id: required(request.approval_id, "approval_id", action)?,
                scope,
            }
        }
        "deny" => {
            Answer::Deny { approval_id: required(request.approval_id, "approval_id", action)? }
        }
        "cancel" => Answer::Cancel,
        other => {
            return Err(format!(
                "action {other:?} is not one of resolve, not_run, confirm, approve, deny, cancel"
            ));
        }
    };
    Ok((answer, Operator { name, note }))
}
