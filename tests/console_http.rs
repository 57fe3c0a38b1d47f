//! The console's HTTP API (`factlog::console`, feature `console`) refuses what it must and
//! serves what it should: requests without the token, with a wrong one, from another host or
//! origin, and actions of a read-only console are refused with their codes; the pages are
//! served without the token and carry a content security policy; a live stream delivers an
//! event appended by another writer after it opened; an answer posted with the token is
//! recorded with the operator's name. How: a console on a temporary store, spoken to with
//! plain HTTP/1.1 over a `TcpStream` (no client library), the store written in process. The
//! command `factlog ui` refuses an address that is not loopback without `--allow-remote`, and
//! warns with it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use crate::common::{self, arg};
use factlog::console::{ConsoleError, ConsoleOptions};
use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};
use serde_json::Value;

/// How long a test waits for a reply before it fails instead of hanging (not a threshold
/// of how fast the console is).
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Appends `lines` (request lines of `format-spec/protocol.md`) to the store in `dir`, opened
/// for writing and closed again.
fn append(dir: &Path, lines: &[&str]) {
    let store = Store::open(dir, StoreOptions::new()).expect("open");
    for line in lines {
        let reply = factlog::protocol::handle_line(&store, line.as_bytes());
        assert!(!reply.is_error(), "{line}: {reply:?}");
    }
    store.close().expect("close");
}

/// A store whose task `t2` has an unsafe call recovery marked `outcome_unknown`, and a task
/// `t1` that waits for nobody.
fn crashed_store(dir: &Path) {
    append(
        dir,
        &[
            r#"{"task":"t1","type":"user/message","text":"hello"}"#,
            r#"{"task":"t2","type":"turn/start"}"#,
            r#"{"task":"t2","type":"tool/call","call_id":"p1","tool":"wire","effect":"unsafe"}"#,
        ],
    );
    let store = Store::open(dir, StoreOptions::new()).expect("open");
    store.recover().expect("recover");
    store.close().expect("close");
}

struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_default().to_owned()
    }
}

/// One request with `Connection: close`; `headers` beside `Host` (unless it is given).
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(HANG_GUARD)).expect("timeout");
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(text.as_bytes()).expect("send");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read");
    let (head, body) = reply.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok()).expect("a status");
    Reply { status, head: head.to_ascii_lowercase(), body: body.to_owned() }
}

fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Reply {
    match token {
        Some(token) => request(addr, "GET", path, &[("x-factlog-token", token)], ""),
        None => request(addr, "GET", path, &[], ""),
    }
}

fn answer(addr: SocketAddr, token: &str, task: &str, body: &str) -> Reply {
    let path = format!("/api/tasks/{task}/answer");
    let headers = [("x-factlog-token", token), ("content-type", "application/json")];
    request(addr, "POST", &path, &headers, body)
}

#[test]
fn requests_without_the_token_or_from_elsewhere_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let console = factlog::console::serve(dir.path(), ConsoleOptions::new()).expect("serve");
    let (addr, token) = (console.addr(), console.token().to_owned());
    assert!(console.url().starts_with(&format!("http://{addr}/?token=")), "{}", console.url());

    let missing = get(addr, "/api/overview", None);
    assert_eq!(
        (missing.status, missing.code().as_str()),
        (401, "token_missing"),
        "{}",
        missing.body
    );
    let wrong = get(addr, "/api/overview", Some(&"0".repeat(64)));
    assert_eq!((wrong.status, wrong.code().as_str()), (403, "token_invalid"));
    let ok = get(addr, "/api/overview", Some(&token));
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["tasks"], 2);
    assert_eq!(ok.json()["attention"], 1);
    let in_query = get(addr, &format!("/api/attention?token={token}"), None);
    assert_eq!(in_query.status, 200, "a GET may carry the token in its query");
    assert_eq!(in_query.json()["tasks"][0]["task"], "t2");

    // An action takes the token from the header only: no link or form can carry it.
    let path = format!("/api/tasks/t2/answer?token={token}");
    let body = r#"{"action":"cancel","operator":"ann"}"#;
    let posted = request(addr, "POST", &path, &[("content-type", "application/json")], body);
    assert_eq!((posted.status, posted.code().as_str()), (401, "token_missing"));

    let rebound = request(
        addr,
        "GET",
        "/api/overview",
        &[("Host", "evil.example:80"), ("x-factlog-token", &token)],
        "",
    );
    assert_eq!((rebound.status, rebound.code().as_str()), (403, "host"));
    let foreign = request(
        addr,
        "GET",
        "/api/overview",
        &[("Origin", "http://evil.example"), ("x-factlog-token", &token)],
        "",
    );
    assert_eq!((foreign.status, foreign.code().as_str()), (403, "origin"));
    let cross = request(
        addr,
        "POST",
        "/api/tasks/t2/answer",
        &[("Sec-Fetch-Site", "cross-site"), ("x-factlog-token", &token)],
        body,
    );
    assert_eq!((cross.status, cross.code().as_str()), (403, "origin"));
    let localhost = format!("localhost:{}", addr.port());
    let named = request(
        addr,
        "GET",
        "/api/overview",
        &[("Host", &localhost), ("x-factlog-token", &token)],
        "",
    );
    assert_eq!(named.status, 200, "{}", named.body);
    let same_origin = format!("http://{addr}");
    let own = request(
        addr,
        "GET",
        "/api/overview",
        &[("Origin", &same_origin), ("x-factlog-token", &token)],
        "",
    );
    assert_eq!(own.status, 200, "{}", own.body);
    console.shutdown();
}

#[test]
fn pages_are_served_with_a_policy_and_bad_requests_get_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let console = factlog::console::serve(dir.path(), ConsoleOptions::new()).expect("serve");
    let (addr, token) = (console.addr(), console.token().to_owned());
    let page = get(addr, "/", None);
    assert_eq!(page.status, 200);
    assert!(page.head.contains("content-type: text/html"), "{}", page.head);
    assert!(page.head.contains("content-security-policy: default-src 'none'"), "{}", page.head);
    assert!(page.head.contains("referrer-policy: no-referrer"), "{}", page.head);
    assert!(page.body.contains("/assets/app.js"));
    for asset in ["/assets/app.js", "/assets/style.css"] {
        assert_eq!(get(addr, asset, None).status, 200, "{asset}");
    }
    assert_eq!(get(addr, "/assets/nothing.js", None).status, 404);

    let unknown = get(addr, "/api/tasks/nobody", Some(&token));
    assert_eq!((unknown.status, unknown.code().as_str()), (404, "unknown_task"));
    let task = get(addr, "/api/tasks/t2", Some(&token));
    assert_eq!(task.status, 200, "{}", task.body);
    assert_eq!(task.json()["summary"]["attention"][0]["reason"], "outcome_unknown");
    let events = get(addr, "/api/tasks/t2/events?from=1&limit=2", Some(&token));
    let events = events.json();
    assert_eq!(events["events"].as_array().map(Vec::len), Some(2));
    assert_eq!(events["events"][0]["type"], "turn/start");
    assert_eq!(events["done"], false);
    let filtered = get(addr, "/api/tasks?phase=none&q=T2", Some(&token)).json();
    assert_eq!(filtered["total"], 1, "{filtered}");
    let health = get(addr, "/api/health", Some(&token)).json();
    assert!(health["segments"].as_array().is_some_and(|segments| !segments.is_empty()), "{health}");
    assert_eq!(health["holder"], Value::Null, "the console holds nothing: {health}");

    let not_json = answer(addr, &token, "t2", "{not json");
    assert_eq!((not_json.status, not_json.code().as_str()), (400, "bad_request"));
    let unknown_action = answer(addr, &token, "t2", r#"{"action":"launch","operator":"ann"}"#);
    assert_eq!(unknown_action.status, 400);
    assert!(
        unknown_action.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not one of"))
    );
    let nameless = answer(addr, &token, "t2", r#"{"action":"cancel","operator":" "}"#);
    assert_eq!(nameless.status, 400);
    let bad_scope = answer(
        addr,
        &token,
        "t2",
        r#"{"action":"approve","operator":"ann","approval_id":"a","scope":"forever"}"#,
    );
    assert_eq!(bad_scope.status, 400);
    let nothing =
        answer(addr, &token, "t1", r#"{"action":"not_run","operator":"ann","call_id":"zz"}"#);
    assert_eq!(nothing.status, 409, "nothing to answer: {}", nothing.body);
    console.shutdown();
}

#[test]
fn a_read_only_console_refuses_actions_and_a_remote_address_needs_consent() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let console =
        factlog::console::serve(dir.path(), ConsoleOptions::new().read_only(true)).expect("serve");
    let refused =
        answer(console.addr(), console.token(), "t2", r#"{"action":"cancel","operator":"ann"}"#);
    assert_eq!((refused.status, refused.code().as_str()), (403, "read_only"));
    assert_eq!(
        get(console.addr(), "/api/overview", Some(console.token())).json()["read_only"],
        true
    );
    console.shutdown();

    // Any loopback address: its URL's host is accepted.
    let other: SocketAddr = "127.0.0.2:0".parse().expect("addr");
    let console = factlog::console::serve(dir.path(), ConsoleOptions::new().addr(other))
        .expect("serve on 127.0.0.2");
    assert!(console.url().starts_with("http://127.0.0.2:"), "{}", console.url());
    assert_eq!(get(console.addr(), "/api/overview", Some(console.token())).status, 200);
    console.shutdown();

    let remote: SocketAddr = "0.0.0.0:0".parse().expect("addr");
    match factlog::console::serve(dir.path(), ConsoleOptions::new().addr(remote)) {
        Err(error @ ConsoleError::NotLoopback { .. }) => {
            assert!(error.to_string().contains("--allow-remote"), "{error}");
        }
        other => panic!("a remote address without consent: {other:?}"),
    }
    let empty = tempfile::tempdir().expect("tempdir");
    match factlog::console::serve(empty.path(), ConsoleOptions::new()) {
        Err(error @ ConsoleError::NotAStore { .. }) => {
            assert!(error.to_string().contains("no factlog store"))
        }
        other => panic!("no store: {other:?}"),
    }
}

/// Opens `/api/live` for `task`; returns the stream and what it sent through `hello`.
fn live_stream(addr: SocketAddr, token: &str, task: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(HANG_GUARD)).expect("timeout");
    let path = format!("/api/live?task={task}&token={token}");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n")
        .expect("send");
    let mut seen = String::new();
    read_until(&mut stream, "event: hello", &mut seen);
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    (stream, seen)
}

/// Reads `stream` into `seen` until it holds `needle`.
fn read_until(stream: &mut TcpStream, needle: &str, seen: &mut String) {
    let mut buffer = [0_u8; 4096];
    while !seen.contains(needle) {
        let n = stream.read(&mut buffer).expect("the stream goes on");
        assert!(n > 0, "the stream ended before {needle:?}: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
}

#[test]
fn through_a_served_store_the_console_follows_its_server_and_answers_by_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let console = factlog::console::serve(dir.path(), ConsoleOptions::new()).expect("console");
    let (addr, token) = (console.addr(), console.token().to_owned());
    let (mut stream, mut seen) = live_stream(addr, &token, "t1");
    let line = r#"{"task":"t1","type":"assistant/delta","text":"through-the-server"}"#;
    assert!(!factlog::protocol::handle_line(&store, line.as_bytes()).is_error());
    read_until(&mut stream, "through-the-server", &mut seen);
    let health = get(addr, "/api/health", Some(&token)).json();
    assert_eq!(health["console"]["source"], "served", "{health}");
    assert_eq!(health["holder"]["served"], true, "{health}");
    let events = get(addr, "/api/tasks/t1/events?from=1", Some(&token)).json();
    let last = events["events"].as_array().and_then(|events| events.last().cloned());
    assert_eq!(last.map(|event| event["text"].clone()), Some("through-the-server".into()));

    let body = r#"{"action":"not_run","operator":"ann","call_id":"p1"}"#;
    let recorded = answer(addr, &token, "t2", body);
    assert_eq!(recorded.status, 200, "{}", recorded.body);
    assert!(store.task_state("t2").is_some_and(|task| task.control.answers.len() == 1));
    console.shutdown();
    drop(server);
    store.close().expect("close");
}

#[test]
fn an_answer_to_a_store_held_by_a_writer_that_does_not_serve_it_says_how_to_serve_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
    let console = factlog::console::serve(dir.path(), ConsoleOptions::new()).expect("console");
    let body = r#"{"action":"not_run","operator":"ann","call_id":"p1"}"#;
    let refused = answer(console.addr(), console.token(), "t2", body);
    assert_eq!((refused.status, refused.code().as_str()), (409, "NOT_SERVED"), "{}", refused.body);
    let message = refused.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("factlog serve"), "{message}");
    console.shutdown();
    store.close().expect("close");
}

#[test]
fn a_live_stream_delivers_an_event_appended_by_another_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let console = factlog::console::serve(dir.path(), ConsoleOptions::new()).expect("serve");
    let (mut stream, mut seen) = live_stream(console.addr(), console.token(), "t1");
    append(
        dir.path(),
        &[r#"{"task":"t1","type":"assistant/delta","text":"streamed-fragment-42"}"#],
    );
    read_until(&mut stream, "streamed-fragment-42", &mut seen);
    assert!(seen.contains("event: events"), "{seen}");
    read_until(&mut stream, "event: changed", &mut seen);
    console.shutdown();
}

#[test]
fn live_streams_are_bounded_and_an_export_holds_every_event_of_the_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let console = factlog::console::serve(dir.path(), ConsoleOptions::new()).expect("serve");
    let (addr, token) = (console.addr(), console.token().to_owned());
    let streams: Vec<_> = (0..factlog::limits::CONSOLE_LIVE_STREAMS_MAX)
        .map(|_| live_stream(addr, &token, "t1"))
        .collect();
    let refused = get(addr, "/api/live", Some(&token));
    assert_eq!((refused.status, refused.code().as_str()), (503, "busy"));
    drop(streams);

    let export = get(addr, "/api/tasks/t2/export", Some(&token));
    assert_eq!(export.status, 200);
    assert!(export.head.contains("content-disposition: attachment"), "{}", export.head);
    // The body is chunked: its lines are the task's events among the chunk sizes.
    let types: Vec<String> = export
        .body
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| event["type"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("turn/start"), "{}", export.body);
    assert!(types.iter().any(|kind| kind == "tool/outcome_unknown"), "{types:?}");
    console.shutdown();
}

#[test]
fn an_answer_is_recorded_with_the_operator_s_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let console = factlog::console::serve(dir.path(), ConsoleOptions::new()).expect("serve");
    let (addr, token) = (console.addr(), console.token().to_owned());
    let body = r#"{"action":"resolve","operator":"ann","note":"checked the bank","call_id":"p1","result":{"wired":true}}"#;
    let recorded = answer(addr, &token, "t2", body);
    assert_eq!(recorded.status, 200, "{}", recorded.body);
    let seq = recorded.json()["recorded"]["seq"].as_u64().expect("a seq");
    let again = answer(addr, &token, "t2", body);
    assert_eq!(again.json()["already"]["seq"], seq, "a repeated answer is a no-op: {}", again.body);
    console.shutdown();

    let store = Store::open_read_only(dir.path(), StoreOptions::new()).expect("open");
    let event =
        store.events(factlog::Seq(seq)).expect("events").next().expect("one").expect("event");
    let object = factlog::protocol::views::event_object(&event, false);
    let text = Value::Object(object).to_string();
    assert!(text.contains("\"ann\"") && text.contains("checked the bank"), "{text}");
    let state = store.try_state().expect("state");
    assert!(factlog::harness::operator::attention(&state).is_empty(), "t2 no longer waits");
}

#[test]
fn the_command_refuses_a_remote_address_without_consent_and_warns_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    crashed_store(dir.path());
    let refused = common::factlog(&["ui", arg(dir.path()), "--addr", "0.0.0.0:0"], b"");
    refused.assert_one_line_error(2);
    assert!(refused.stderr.contains("--allow-remote"), "{}", refused.stderr);
    let missing = dir.path().join("nothing");
    common::factlog(&["ui", arg(&missing)], b"").assert_one_line_error(1);

    let mut child = std::process::Command::new(&*common::FACTLOG)
        .args(["ui", arg(dir.path()), "--addr", "0.0.0.0:0", "--allow-remote", "--read-only"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn factlog ui");
    let mut warning = String::new();
    BufReader::new(child.stderr.take().expect("stderr")).read_line(&mut warning).expect("read");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut lines = [String::new(), String::new()];
    for line in &mut lines {
        stdout.read_line(line).expect("read");
    }
    child.kill().expect("kill");
    child.wait().expect("wait");
    assert!(warning.contains("WARNING") && warning.contains("other machines"), "{warning}");
    assert!(warning.contains("read this store") && !warning.contains("answer"), "{warning}");
    assert!(lines[0].contains("read-only"), "{lines:?}");
    assert!(lines[1].starts_with("http://0.0.0.0:") && lines[1].contains("/?token="), "{lines:?}");
}
