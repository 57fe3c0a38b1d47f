//! The guard every request of the console passes first, in order:
//! 1. `Host` must name the console as it was bound (its address, `localhost:PORT`,
//!    `127.0.0.1:PORT`, `[::1]:PORT`) when it listens on loopback: a page of another site
//!    that rebinds its name to 127.0.0.1 is refused (403 `host`).
//! 2. Under `/api/`: a request a browser marks as cross-site (`Sec-Fetch-Site: cross-site`),
//!    or whose `Origin` is not this console's, is refused (403 `origin`).
//! 3. Under `/api/`: the token ([`super::token`]) must be given: in the `x-factlog-token`
//!    header, or for a `GET` in the `token` query parameter (an `EventSource` cannot set a
//!    header). Missing: 401 `token_missing`; wrong: 403 `token_invalid`. A `POST` takes it
//!    from the header only, which no cross-site form can set.
//!
//! The pages themselves (`/`, `/assets/..`) hold no data and need no token. Every reply
//! carries a content security policy that allows nothing from elsewhere, no referrer (the
//! token is in the page's URL) and no framing.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::api;
use super::routes::App;
use super::token::TOKEN_HEADER;

const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The guard (module docs), then the security headers on whatever the route replies.
pub async fn guard(State(app): State<App>, request: Request, next: Next) -> Response {
    if let Some(refusal) = refusal(&app, &request) {
        return with_headers(refusal);
    }
    with_headers(next.run(request).await)
}

fn with_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers
        .insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn header_text(request: &Request, name: impl header::AsHeaderName) -> Option<&str> {
    request.headers().get(name).and_then(|value| value.to_str().ok())
}

/// Why `request` is refused, if it is.
fn refusal(app: &App, request: &Request) -> Option<Response> {
    let host = header_text(request, header::HOST).unwrap_or("");
    if !app.hosts.is_empty() && !app.hosts.iter().any(|allowed| allowed.eq_ignore_ascii_case(host))
    {
        return Some(api::error(
            StatusCode::FORBIDDEN,
            "host",
            format!("this console answers to {} only (Host was {host:?})", app.hosts.join(", ")),
        ));
    }
    if !request.uri().path().starts_with("/api/") {
        return None;
    }
    let cross_site = header_text(request, "sec-fetch-site") == Some("cross-site");
    let foreign_origin = header_text(request, header::ORIGIN)
        .is_some_and(|origin| !origin.eq_ignore_ascii_case(&format!("http://{host}")));
    if cross_site || foreign_origin {
        return Some(api::error(
            StatusCode::FORBIDDEN,
            "origin",
            "a request from another site is refused; open the console's own URL",
        ));
    }
    let from_header = header_text(request, TOKEN_HEADER);
    let from_query = (request.method() == Method::GET)
        .then(|| request.uri().query())
        .flatten()
        .and_then(|query| query.split('&').find_map(|pair| pair.strip_prefix("token=")));
    match from_header.or(from_query) {
        None if request.method() == Method::POST => Some(api::error(
            StatusCode::UNAUTHORIZED,
            "token_missing",
            format!("an action needs the console's token in the {TOKEN_HEADER} header"),
        )),
        None => Some(api::error(
            StatusCode::UNAUTHORIZED,
            "token_missing",
            format!(
                "this request needs the console's token (the {TOKEN_HEADER} header or ?token=): \
                 open the URL `factlog ui` printed"
            ),
        )),
        Some(given) if !app.token.matches(given) => Some(api::error(
            StatusCode::FORBIDDEN,
            "token_invalid",
            "the token is not this console's: open the URL `factlog ui` printed (a restarted \
             console has a new token)",
        )),
        Some(_) => None,
    }
}
