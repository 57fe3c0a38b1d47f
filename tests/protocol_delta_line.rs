//! The fast path of bare `assistant/delta` lines (`src/protocol/delta_line.rs`) answers
//! exactly as the general path: the same lines go through a served connection (which takes
//! the fast path) and through `protocol::handle_line` (which never does), on two stores with
//! the same clock, and the replies and the stored events must be identical byte for byte.

use factlog::protocol::{self, delta_line};
use factlog::server::conn::{NoHolds, serve_stream};
use factlog::{Store, StoreOptions};

const HELLO: &[u8] = b"{\"hello\":\"factlog\",\"version\":1}\n";

fn clock() -> u64 {
    1_700_000_000_000_000
}

fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, StoreOptions::new().clock(clock)).expect("open")
}

/// Lines that take the fast path, lines that look like it and must not, and refusals.
fn lines() -> Vec<String> {
    let long = "x".repeat(factlog::limits::DELTA_TEXT_BYTES_MAX + 1);
    let mut lines = vec![
        r#"{"task":"t1","type":"turn/start"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"Hello"}"#.to_owned(),
        r#"{"id":7,"task":"t1","type":"assistant/delta","text":" world"}"#.to_owned(),
        r#"{"text":"order","type":"assistant/delta","task":"t1","id":0}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"esc \" \\ \n \u00e9 \ud83d\ude00"}"#
            .to_owned(),
        r#"{"task":"t\u0031","type":"assistant/delta","text":"escaped task"}"#.to_owned(),
        r#"{"task":"tâche","type":"assistant/delta","text":"ünïcödé"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":""}"#.to_owned(),
        // Not the fast path: other ids, options, extra or duplicate keys, wrong types.
        r#"{"id":"s","task":"t1","type":"assistant/delta","text":"string id"}"#.to_owned(),
        r#"{"id":null,"task":"t1","type":"assistant/delta","text":"null id"}"#.to_owned(),
        r#"{"id":-1,"task":"t1","type":"assistant/delta","text":"negative id"}"#.to_owned(),
        r#"{"id":1.5,"task":"t1","type":"assistant/delta","text":"fraction id"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"synced","durability":"synced"}"#
            .to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"cas","expected_revision":1}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"extra","model":"m"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"a","text":"b"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":5}"#.to_owned(),
        r#"{"task":"","type":"assistant/delta","text":"empty task"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta"}"#.to_owned(),
        format!(r#"{{"task":"t1","type":"assistant/delta","text":"{long}"}}"#),
        format!(r#"{{"task":"{}","type":"assistant/delta","text":"long task"}}"#, "t".repeat(129)),
        // The spelling clients send, read without a parser, and near misses of it.
        "{\"task\":\"t1\",\"type\":\"assistant/delta\",\"text\":\"raw \u{1} control\"}".to_owned(),
        "{\"task\":\"t1\",\"type\":\"assistant/delta\",\"text\":\"raw \t tab\"}".to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"trailing space"} "#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"two braces"}}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"unterminated}"#.to_owned(),
        r#"{"task":"t1" ,"type":"assistant/delta","text":"spaced"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"quote " inside"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant\/delta","text":"escaped type"}"#.to_owned(),
        r#"{"task":"t2","type":"assistant/delta","text":"another task"}"#.to_owned(),
        r#"{"task":"t1","type":"assistant/delta","text":"back"}"#.to_owned(),
    ];
    for i in 0..50 {
        lines.push(format!(
            r#"{{"id":{i},"task":"t{}","type":"assistant/delta","text":"f{i}"}}"#,
            i % 3
        ));
    }
    lines
}

#[test]
fn fast_path_answers_as_the_general_path() {
    let lines = lines();
    assert!(lines.iter().filter(|l| delta_line::parse(l.as_bytes()).is_some()).count() > 50);

    let served_dir = tempfile::tempdir().expect("tempdir");
    let served = open(served_dir.path());
    let mut input = HELLO.to_vec();
    for line in &lines {
        input.extend_from_slice(line.as_bytes());
        input.push(b'\n');
    }
    let mut output = Vec::new();
    let _ = serve_stream(&served, &NoHolds, 1, &input[..], &mut output);
    let replies: Vec<&[u8]> = output.split(|&b| b == b'\n').skip(1).collect();

    let general_dir = tempfile::tempdir().expect("tempdir");
    let general = open(general_dir.path());
    for (i, line) in lines.iter().enumerate() {
        let reply = protocol::handle_line(&general, line.as_bytes());
        let expected = serde_json::to_vec(reply.object()).expect("json");
        assert_eq!(
            String::from_utf8_lossy(replies[i]),
            String::from_utf8_lossy(&expected),
            "line {i}: {line}"
        );
    }
    let dump = |store: &Store| -> Vec<String> {
        store
            .events(factlog::Seq(1))
            .expect("events")
            .map(|event| format!("{:?}", event.expect("event")))
            .collect()
    };
    assert_eq!(dump(&served), dump(&general));
    assert_eq!(served.task_revision("t1"), general.task_revision("t1"));
}

#[test]
fn the_client_line_parses_back_and_the_reply_is_recognised() {
    for text in ["", "plain", "quote \" backslash \\ newline \n tab \t", "é😀", "\u{1}"] {
        let mut out = Vec::new();
        delta_line::write_line(&mut out, "tâsk \"1\"", text);
        assert_eq!(out.last(), Some(&b'\n'));
        let line = delta_line::parse(&out[..out.len() - 1]).expect("a bare delta line");
        assert_eq!(line.task, "tâsk \"1\"");
        assert_eq!(line.text, text);
        assert_eq!(line.id, delta_line::Id(None));
    }
    let mut reply = Vec::new();
    delta_line::write_reply(&mut reply, delta_line::Id(None), 3, "t", 2).expect("write");
    assert!(delta_line::is_written_reply(&reply[..reply.len() - 1]));
    assert!(!delta_line::is_written_reply(br#"{"error":"INVALID_EVENT","message":"m"}"#));
}

/// A connection remembers only valid task ids as touched: invalid ones (too long, empty) are
/// refused before, so a client cannot grow the server's bookkeeping with them.
#[test]
fn invalid_task_ids_are_refused_before_they_are_remembered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let mut input = HELLO.to_vec();
    for i in 0..100 {
        let long = format!("{i}-{}", "x".repeat(200));
        input.extend_from_slice(
            format!("{{\"task\":\"{long}\",\"type\":\"assistant/delta\",\"text\":\"t\"}}\n")
                .as_bytes(),
        );
        input.extend_from_slice(
            format!("{{\"task\":\"{long}\",\"type\":\"turn/start\"}}\n").as_bytes(),
        );
    }
    input.extend_from_slice(b"{\"task\":\"ok\",\"type\":\"turn/start\"}\n");
    let mut output = Vec::new();
    let (_, touched) = serve_stream(&store, &NoHolds, 1, &input[..], &mut output);
    assert_eq!(touched.into_iter().collect::<Vec<_>>(), ["ok"]);
    let refusals = output.split(|&b| b == b'\n').filter(|l| l.starts_with(b"{\"error\"")).count();
    assert_eq!(refusals, 200);
}
