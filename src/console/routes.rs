//! The console's routes, and what every handler shares ([`App`]). Every request passes the
//! guard ([`super::guard`]) first.

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::middleware;
use axum::routing::{get, post};
use tokio::sync::watch;

use super::mirror::Mirror;
use super::token::Token;
use super::{api, assets, guard, live};

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct App {
    /// The store's picture.
    pub mirror: Arc<Mirror>,
    /// The token every API request carries.
    pub token: Arc<Token>,
    /// Whether actions are refused.
    pub read_only: bool,
    /// The `Host` values a loopback console accepts; empty when it accepts any.
    pub hosts: Arc<Vec<String>>,
    /// Becomes true when the console stops (ends the live streams).
    pub stopping: watch::Receiver<bool>,
    /// The live streams open now ([`crate::limits::CONSOLE_LIVE_STREAMS_MAX`] at most).
    pub live_streams: Arc<std::sync::atomic::AtomicUsize>,
}

/// The console's router.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::file))
        .route("/api/overview", get(api::overview))
        .route("/api/attention", get(api::attention))
        .route("/api/tasks", get(api::tasks))
        .route("/api/tasks/{task}", get(api::task))
        .route("/api/tasks/{task}/events", get(api::events))
        .route("/api/tasks/{task}/export", get(api::export))
        .route("/api/tasks/{task}/answer", post(api::answer))
        .route("/api/health", get(api::health))
        .route("/api/live", get(live::live))
        .fallback(|| async { api::error(StatusCode::NOT_FOUND, "not_found", "no such page") })
        .layer(middleware::from_fn_with_state(app.clone(), guard::guard))
        .with_state(app)
}
