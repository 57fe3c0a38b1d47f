//! Live updates: `GET /api/live` is a stream of server-sent events fed by the reader's
//! [`Update`]s ([`super::mirror`]). Every update sends `changed` (`{"last_seq", "tasks",
//! "more"}`: the tasks whose state changed, at most [`CONSOLE_CHANGED_TASKS_MAX`] named); with
//! `?task=T` the events of that task are also sent as `events` (`{"events": [...]}`), as
//! `factlog dump --json` prints them. `hello` (`{"last_seq"}`) opens the stream, so a page
//! can read what it missed between its first read and the stream; `resync` says the page
//! should read everything again (the store reclaimed records, or this stream fell further
//! behind than the reader keeps updates for). The stream ends when the console stops. At most
//! [`CONSOLE_LIVE_STREAMS_MAX`] streams are open at once.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, watch};

use super::mirror::Update;
use super::routes::App;
use crate::limits::{CONSOLE_CHANGED_TASKS_MAX, CONSOLE_LIVE_STREAMS_MAX};

/// How often an idle stream sends a comment, so proxies and the browser keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The query of `/api/live`.
#[derive(Debug, Deserialize)]
pub struct LiveQuery {
    /// Also send this task's events.
    task: Option<String>,
}

/// What one stream holds between messages.
struct Listener {
    updates: broadcast::Receiver<Arc<Update>>,
    stopping: watch::Receiver<bool>,
    task: Option<String>,
    /// Messages ready to send, in order.
    ready: std::collections::VecDeque<Event>,
    /// Released when the stream ends.
    #[expect(dead_code, reason = "held for its Drop")]
    counted: Counted,
}

/// Counts an open stream while it lives.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `GET /api/live`: the stream, or 503 `busy` when [`CONSOLE_LIVE_STREAMS_MAX`] are open.
pub async fn live(State(app): State<App>, Query(query): Query<LiveQuery>) -> Response {
    let open = app.live_streams.fetch_add(1, Ordering::SeqCst);
    let counted = Counted(Arc::clone(&app.live_streams));
    if open >= CONSOLE_LIVE_STREAMS_MAX {
        drop(counted);
        return super::api::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "{CONSOLE_LIVE_STREAMS_MAX} pages of this console are open already: close some"
            ),
        );
    }
    let updates = app.mirror.subscribe();
    let (_, last_seq, _) = app.mirror.status();
    let mut ready = std::collections::VecDeque::new();
    ready.push_back(
        Event::default().event("hello").data(json!({ "last_seq": last_seq }).to_string()),
    );
    let listener =
        Listener { updates, stopping: app.stopping.clone(), task: query.task, ready, counted };
    let stream = futures_util::stream::unfold(listener, |mut listener| async move {
        loop {
            if let Some(event) = listener.ready.pop_front() {
                return Some((Ok::<_, Infallible>(event), listener));
            }
            if *listener.stopping.borrow() {
                return None;
            }
            tokio::select! {
                _ = listener.stopping.changed() => return None,
                received = listener.updates.recv() => match received {
                    Ok(update) => messages(&update, listener.task.as_deref(), &mut listener.ready),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        listener.ready.push_back(Event::default().event("resync").data("{}"));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}

/// The messages of one update for a stream of `task` (or of none).
fn messages(update: &Update, task: Option<&str>, ready: &mut std::collections::VecDeque<Event>) {
    if update.resync {
        ready.push_back(Event::default().event("resync").data("{}"));
        return;
    }
    if let Some(task) = task {
        let events: Vec<_> = update
            .events
            .iter()
            .filter(|event| event.get("task").and_then(|id| id.as_str()) == Some(task))
            .collect();
        if !events.is_empty() {
            ready.push_back(
                Event::default().event("events").data(json!({ "events": events }).to_string()),
            );
        }
    }
    let tasks: Vec<&String> = update.tasks.iter().take(CONSOLE_CHANGED_TASKS_MAX).collect();
    let changed = json!({
        "last_seq": update.last_seq,
        "tasks": tasks,
        "more": update.tasks.len() > CONSOLE_CHANGED_TASKS_MAX,
    });
    ready.push_back(Event::default().event("changed").data(changed.to_string()));
}
