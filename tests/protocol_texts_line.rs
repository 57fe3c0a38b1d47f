//! Fragments lines (`format-spec/server.md`, "Fragments lines"): one line holding a task's
//! consecutive `assistant/delta` fragments appends exactly what the same fragments as bare
//! delta lines append (the same events, revisions and times, on two stores with the same
//! clock) and is answered as its last fragment's line; a line that is not exactly one goes
//! the general way and is refused there, appending nothing; a refused fragment keeps the ones
//! before it; a client joins a task's fragments into one line only for a server whose hello
//! offers them, and its fragments reach the log in order either way.

use crate::common;

use common::server::{FAKE_HELLO_REPLY, delta_texts, fake_server, fake_written_reply, store_dir};
use factlog::client::Client;
use factlog::limits::DELTA_TEXT_BYTES_MAX;
use factlog::protocol::acks::AckMode;
use factlog::protocol::{self, delta_line};
use factlog::server::ServeOptions;
use factlog::server::conn::{NoHolds, serve_stream};
use factlog::{Store, StoreOptions};
use serde_json::Value;

const HELLO: &[u8] = b"{\"hello\":\"factlog\",\"version\":1}\n";

fn clock() -> u64 {
    1_700_000_000_000_000
}

fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, StoreOptions::new().clock(clock)).expect("open")
}

/// The replies (hello's first) and the events a stream of lines leaves in a fresh store.
fn serve(lines: &[String]) -> (Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let mut input = HELLO.to_vec();
    for line in lines {
        input.extend_from_slice(line.as_bytes());
        input.push(b'\n');
    }
    let mut output = Vec::new();
    let _ = serve_stream(&store, &NoHolds, 1, &input[..], &mut output);
    let replies = String::from_utf8(output).expect("utf-8");
    let replies = replies.lines().map(str::to_owned).collect();
    let events = store
        .events(factlog::Seq(1))
        .expect("events")
        .map(|event| format!("{:?}", event.expect("event")))
        .collect();
    (replies, events)
}

/// The bare delta line of each fragment of a fragments line (the `id` on the last).
fn bare_lines(id: Option<u64>, task: &str, texts: &[&str]) -> Vec<String> {
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut line = serde_json::Map::new();
            if let (Some(id), true) = (id, i + 1 == texts.len()) {
                line.insert("id".to_owned(), id.into());
            }
            line.insert("task".to_owned(), task.into());
            line.insert("type".to_owned(), "assistant/delta".into());
            line.insert("text".to_owned(), (*text).into());
            Value::Object(line).to_string()
        })
        .collect()
}

#[test]
fn a_fragments_line_appends_what_its_bare_lines_would() {
    let groups: [(Option<u64>, &str, &[&str]); 4] = [
        (None, "t1", &["Hello", " world", "", "esc \" \\ \n \u{e9} \u{1F600}", "\u{1}"]),
        (Some(7), "t2", &["one"]),
        (Some(0), "tâche", &["ü", "n"]),
        (None, "t1", &["back"]),
    ];
    let mut texts_lines = vec![r#"{"task":"t1","type":"turn/start"}"#.to_owned()];
    let mut bare = texts_lines.clone();
    for (id, task, texts) in groups {
        let mut line = Vec::new();
        delta_line::start_texts(&mut line, task, texts[0]);
        for text in &texts[1..] {
            delta_line::add_text(&mut line, text);
        }
        let mut line = String::from_utf8(line).expect("utf-8").trim_end().to_owned();
        if let Some(id) = id {
            line = line.replacen('{', &format!("{{\"id\":{id},"), 1);
        }
        let parsed = delta_line::parse_texts(line.as_bytes()).expect("a fragments line");
        let read: Vec<&str> = parsed.texts.iter().map(|text| &*text.0).collect();
        assert_eq!(read, texts);
        texts_lines.push(line);
        bare.extend(bare_lines(id, task, texts));
    }
    // Another spelling of the same: keys in another order, spaces.
    texts_lines.push(r#"{ "texts" : ["x", "y"], "type":"assistant/delta", "task":"t2" }"#.into());
    bare.extend(bare_lines(None, "t2", &["x", "y"]));

    let (texts_replies, texts_events) = serve(&texts_lines);
    let (bare_replies, bare_events) = serve(&bare);
    assert_eq!(texts_events, bare_events, "the same events, revisions and times");
    // Each fragments line is answered as the last of its bare lines.
    let mut last_of_each = Vec::new();
    let mut at = 1;
    for count in [1, 5, 1, 2, 1, 2] {
        at += count;
        last_of_each.push(bare_replies[at - 1].clone());
    }
    assert_eq!(texts_replies[1..], last_of_each[..]);
    assert!(texts_replies[3].starts_with("{\"id\":7,"), "{}", texts_replies[3]);
}

#[test]
fn a_line_that_is_not_exactly_a_fragments_line_is_refused_by_the_general_path() {
    let refused = [
        r#"{"task":"t1","type":"assistant/delta","texts":[]}"#,
        r#"{"task":"t1","type":"assistant/delta","texts":["a",5]}"#,
        r#"{"task":"t1","type":"assistant/delta","texts":"a"}"#,
        r#"{"id":"s","task":"t1","type":"assistant/delta","texts":["a"]}"#,
        r#"{"id":-1,"task":"t1","type":"assistant/delta","texts":["a"]}"#,
        r#"{"task":"t1","type":"assistant/delta","texts":["a"],"durability":"synced"}"#,
        r#"{"task":"t1","type":"user/message","texts":["a"]}"#,
        r#"{"task":"","type":"assistant/delta","texts":["a"]}"#,
        r#"{"task":"t1","type":"assistant/delta","texts":["a"]"#,
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let general = open(dir.path());
    let lines: Vec<String> = refused.iter().map(|line| (*line).to_owned()).collect();
    let (replies, events) = serve(&lines);
    assert!(events.is_empty(), "nothing appended: {events:?}");
    for (line, reply) in refused.iter().zip(&replies[1..]) {
        assert!(delta_line::parse_texts(line.as_bytes()).is_none(), "{line}");
        let expected = protocol::handle_line(&general, line.as_bytes());
        let expected = serde_json::to_string(expected.object()).expect("json");
        assert_eq!(reply, &expected, "{line}");
        assert!(reply.contains("\"error\""), "{line}: {reply}");
    }
}

/// The fragments a JSON tree reads off `line` when it is exactly a fragments line without
/// `id` (what `delta_line::parse_texts` must read, however it reads it).
fn texts_by_tree(line: &str) -> Option<(String, Vec<String>)> {
    let Value::Object(object) = serde_json::from_str::<Value>(line).ok()? else { return None };
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    let shaped = keys.len() == 3 && ["task", "type", "texts"].iter().all(|k| keys.contains(k));
    let task = object.get("task")?.as_str().filter(|task| !task.is_empty())?;
    let texts = object.get("texts")?.as_array().filter(|texts| !texts.is_empty())?;
    let texts: Option<Vec<String>> = texts.iter().map(|t| t.as_str().map(str::to_owned)).collect();
    (shaped && object.get("type")?.as_str() == Some("assistant/delta"))
        .then(|| (task.to_owned(), texts))
        .and_then(|(task, texts)| Some((task, texts?)))
}

#[test]
fn a_fragments_line_is_read_as_a_json_tree_reads_it() {
    // As a client writes them: plain and escaped fragments, in every position.
    let texts: &[&str] = &[
        "plain",
        "",
        "quote \" backslash \\ newline \n tab \t",
        "\u{1}\u{1f}",
        "é \u{1F600} ü",
        "\\",
        "\"",
        "ends with a backslash \\",
    ];
    let mut lines = Vec::new();
    for first in 0..texts.len() {
        let mut out = Vec::new();
        delta_line::start_texts(&mut out, "t1", texts[first]);
        for text in texts.iter().cycle().skip(first + 1).take(texts.len()) {
            delta_line::add_text(&mut out, text);
        }
        let line = String::from_utf8(out).expect("utf-8");
        lines.push(line.trim_end_matches('\n').to_owned());
    }
    // Spelled otherwise, or not quite fragments lines.
    lines.extend(
        [
            r#"{"task":"t1","type":"assistant/delta","texts":["\ud83d\ude00","\u00e9\/"]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["lone \ud800"]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["bad \x escape"]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["unterminated \"]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["a" ,"b"]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["a"] }"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["a"]}x"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["a",]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["a"]"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["a\"]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["a"]}}"#,
            r#"{"task":"t\u0031","type":"assistant/delta","texts":["a"]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":[]}"#,
            r#"{"task":"","type":"assistant/delta","texts":["a"]}"#,
            r#"{"type":"assistant/delta","task":"t1","texts":["a"]}"#,
            r#" {"task":"t1","type":"assistant/delta","texts":["a"]}"#,
        ]
        .map(str::to_owned),
    );
    let mut control =
        b"{\"task\":\"t1\",\"type\":\"assistant/delta\",\"texts\":[\"a\x01\"]}".to_vec();
    lines.push(String::from_utf8(control.clone()).expect("utf-8"));
    control[40] = b'\n';
    lines.push(String::from_utf8(control).expect("utf-8"));
    for line in &lines {
        let read = delta_line::parse_texts(line.as_bytes()).map(|parsed| {
            let texts = parsed.texts.iter().map(|text| text.0.to_string()).collect();
            (parsed.task.to_string(), texts)
        });
        assert_eq!(read, texts_by_tree(line), "{line}");
        if line.contains("\"texts\"") {
            assert!(delta_line::parse(line.as_bytes()).is_none(), "not a bare delta: {line}");
        }
    }
    // A tree keeps the last of two keys; a fragments line has each once.
    let twice = r#"{"task":"t1","type":"assistant/delta","texts":["a"],"texts":["b"]}"#;
    assert!(delta_line::parse_texts(twice.as_bytes()).is_none());
    let plain = (0..texts.len()).filter(|&i| texts_by_tree(&lines[i]).is_some()).count();
    assert_eq!(plain, texts.len(), "every line a client writes is a fragments line");
}

#[test]
fn a_refused_fragment_keeps_the_ones_before_it_and_the_stream_goes_on() {
    let long = "x".repeat(DELTA_TEXT_BYTES_MAX + 1);
    let lines = vec![
        format!(r#"{{"id":1,"task":"t1","type":"assistant/delta","texts":["a","{long}","c"]}}"#),
        r#"{"id":2,"task":"t1","type":"assistant/delta","texts":["d"]}"#.to_owned(),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let mut input = HELLO.to_vec();
    for line in &lines {
        input.extend_from_slice(line.as_bytes());
        input.push(b'\n');
    }
    let mut output = Vec::new();
    let _ = serve_stream(&store, &NoHolds, 1, &input[..], &mut output);
    let replies: Vec<Value> = output
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("json"))
        .collect();
    assert_eq!(replies[1]["id"], 1);
    assert_eq!(replies[1]["error"], "LIMIT_EXCEEDED", "{}", replies[1]);
    assert_eq!(replies[2]["id"], 2);
    assert_eq!(replies[2]["revision"], 2, "{}", replies[2]);
    assert_eq!(delta_texts(&store, "t1"), ["a", "d"]);
}

/// The lines a client sent to a fake server whose hello says `hello_extra` after its `pid`
/// ([`common::server::fake_server`]), each answered as a written fragment (or a request with
/// an id).
fn lines_sent_to(hello_extra: &str, send: impl FnOnce(&mut Client)) -> Vec<String> {
    let (_temp, dir) = store_dir();
    let hello = FAKE_HELLO_REPLY.replace("\"pid\":1", &format!("\"pid\":1{hello_extra}"));
    let mut n = 0;
    let server = fake_server(&dir.join("factlog.sock"), &hello, move |request| {
        n += 1;
        Some(fake_written_reply(request, n))
    });
    let mut client = Client::connect(&dir).expect("connect");
    send(&mut client);
    drop(client);
    server.join().expect("the fake server").1
}

#[test]
fn a_client_joins_a_tasks_fragments_only_for_a_server_that_offers_it() {
    let send = |client: &mut Client| {
        client.delta("t1", "a").expect("delta");
        client.delta("t1", "b \"q\"").expect("delta");
        client.delta("t2", "c").expect("delta");
        client.delta("t1", "d").expect("delta");
        client.revision("t1").expect("revision");
        client.delta("t1", "e").expect("delta");
        client.flush().expect("flush");
    };
    let joined = lines_sent_to(",\"texts\":true", send);
    assert_eq!(
        joined,
        [
            r#"{"task":"t1","type":"assistant/delta","texts":["a","b \"q\""]}"#,
            r#"{"task":"t2","type":"assistant/delta","texts":["c"]}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["d"]}"#,
            r#"{"id":1,"op":"revision","task":"t1"}"#,
            r#"{"task":"t1","type":"assistant/delta","texts":["e"]}"#,
        ]
    );
    // A server of an earlier release (no `texts` in its hello) gets a line per fragment.
    let bare = lines_sent_to("", send);
    assert_eq!(bare.len(), 6, "{bare:?}");
    assert_eq!(bare[0], r#"{"task":"t1","type":"assistant/delta","text":"a"}"#);
}

#[test]
fn a_real_server_offers_fragments_lines_and_takes_them_in_order() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut expected = Vec::new();
    for acks in [AckMode::Every, AckMode::DurableOnly] {
        let mut client = Client::connect_acks(&dir, acks).expect("connect");
        assert!(client.joins_fragments(), "the server's hello offers fragments lines");
        for i in 0..20_000 {
            let task = if i % 1000 < 700 { "t1" } else { "t2" };
            let text = format!("{i} \"é\"\n");
            client.delta(task, &text).expect("delta");
            if task == "t1" {
                expected.push(text);
            }
        }
        client.flush().expect("flush");
        assert_eq!(client.revision("t1").expect("revision"), expected.len() as u64);
    }
    assert_eq!(delta_texts(&store, "t1"), expected);
    drop(server);
    store.close().expect("close");
}
