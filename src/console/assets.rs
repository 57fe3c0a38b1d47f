//! The console's pages: plain HTML, CSS and JavaScript from `src/console/assets/`, embedded in
//! the library at build time (also in debug builds): nothing is fetched from elsewhere, and the
//! console works offline. The pages carry no data; they read it from the API with the token of
//! their URL.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

/// The files of `src/console/assets/`.
#[derive(RustEmbed)]
#[folder = "src/console/assets/"]
struct Assets;

/// The content type of an asset, by its name's extension.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, extension)| extension) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

fn asset(name: &str) -> Response {
    match Assets::get(name) {
        Some(file) => ([(header::CONTENT_TYPE, content_type(name))], file.data).into_response(),
        None => (StatusCode::NOT_FOUND, "no such page of the console\n").into_response(),
    }
}

/// `GET /`: the console's one page.
pub async fn index() -> Response {
    asset("index.html")
}

/// `GET /assets/{name}`: a script, a style sheet or an icon.
pub async fn file(Path(name): Path<String>) -> Response {
    asset(&name)
}
