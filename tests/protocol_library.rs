//! `factlog::protocol` as a library: a request parsed from a line and the same request given
//! as an already parsed object get the same reply (refusals included, `id` echoed first), so
//! every door (emit, the Python binding) answers alike; the error codes and whether each
//! ends a stream are the spec's table; a batch is all or nothing.

use factlog::protocol::reply::ERROR_CODES;
use factlog::protocol::{self, Reply, Request};
use factlog::{AppendOptions, Store, StoreOptions};
use serde_json::Value;

/// The reply to a request given as an object, run as `execute` does.
fn from_object(store: &Store, line: &str) -> Reply {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(line) else {
        panic!("test lines are JSON objects")
    };
    match Request::from_object(object) {
        Ok(request) => protocol::execute(store, request, true),
        Err(refusal) => refusal.into_reply(),
    }
}

#[test]
fn a_line_and_an_object_get_the_same_reply() {
    let lines = [
        r#"{"id":"r1","task":"t1","type":"turn/start"}"#,
        r#"{"id":2,"task":"t1","type":"no/such"}"#,
        r#"{"id":"r3","task":"t1","type":"turn/start"}"#,
        r#"{"id":"r4","task":"","type":"turn/start"}"#,
        r#"{"id":"r5","task":"t1","type":"user/message","text":"hi","expected_revision":0}"#,
        r#"{"id":"r6","task":"t1","type":"tool/call","call_id":"c1","tool":"x","effect":"unsafe","durability":"buffered"}"#,
        r#"{"id":"r7","task":"t1","type":"tool/call","call_id":"c1","tool":"x","effect":"idempotent","request_key":"k"}"#,
        r#"{"id":"r8","task":"t1","type":"tool/result","call_id":"c1","outcome":"ok","receipt":{"n":1}}"#,
        r#"{"id":"r9","task":"t1","type":"tool/call","call_id":"c1","tool":"x","effect":"idempotent","request_key":"k"}"#,
    ];
    let by_line = tempfile::tempdir().expect("temporary directory");
    let by_object = tempfile::tempdir().expect("temporary directory");
    let clock = || 1_700_000_000_000_000;
    let options = || StoreOptions::new().clock(clock);
    let line_store = Store::open(by_line.path(), options()).expect("open");
    let object_store = Store::open(by_object.path(), options()).expect("open");
    for line in lines {
        let a = protocol::handle_line(&line_store, line.as_bytes());
        let b = from_object(&object_store, line);
        assert_eq!(a.object(), b.object(), "{line}");
        assert_eq!(a.is_error(), b.is_error());
        assert!(a.object().keys().next().is_some_and(|key| key == "id"), "{line}");
    }
    let last = protocol::handle_line(&line_store, lines[8].as_bytes());
    assert!(matches!(last, Reply::Duplicate { .. }));
    line_store.close().expect("close");
    object_store.close().expect("close");
}

#[test]
fn codes_go_on_or_end_the_stream_as_the_spec_says() {
    let goes_on = &ERROR_CODES[..9];
    assert_eq!(
        goes_on,
        [
            "INVALID_EVENT",
            "STALE_REVISION",
            "NEEDS_CONFIRMATION",
            "APPROVAL_REFUSED",
            "NEEDS_RECOVERY",
            "CALL_ID_REUSED",
            "UNMARKED_SECRET",
            "LIMIT_EXCEEDED",
            "RECLAIMED"
        ]
    );
    let spec = include_str!("../format-spec/protocol.md");
    for code in ERROR_CODES {
        assert!(spec.contains(&format!("`{code}`")), "{code} is not in protocol.md");
    }
    let stale = factlog::ErrorKind::StaleRevision { task: "t".into(), expected: 1, actual: 2 };
    assert_eq!(protocol::error_code(&stale), ("STALE_REVISION", false));
    let poisoned = factlog::ErrorKind::Poisoned { cause: String::new() };
    assert_eq!(protocol::error_code(&poisoned), ("POISONED", true));
}

#[test]
fn a_batch_warns_of_unmarked_credentials_only_when_asked_to_scan() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
    let task = store.task("t1").expect("task");
    let parse = |line: &str| Request::parse(line.as_bytes()).expect("valid request");
    let batch = |n: u32| {
        vec![
            parse(&format!(
                r#"{{"task":"t1","type":"record/put","kind":"k","key":"{n}","value":"AKIAIOSFODNN7EXAMPLE"}}"#
            )),
            parse(&format!(
                r#"{{"task":"t1","type":"record/put","kind":"k","key":"{n}b","value":1}}"#
            )),
        ]
    };
    let scanned = protocol::execute_batch(&task, batch(1), AppendOptions::default(), true);
    assert_eq!(
        scanned.object().get("warnings").map(|w| &w[0]["shape"]),
        Some(&"aws_access_key_id".into()),
        "{:?}",
        scanned.object()
    );
    let unscanned = protocol::execute_batch(&task, batch(2), AppendOptions::default(), false);
    assert_eq!(unscanned.object()["count"], 2, "{:?}", unscanned.object());
    assert!(unscanned.object().get("warnings").is_none(), "{:?}", unscanned.object());
    drop(task);
    store.close().expect("close");
}

#[test]
fn a_batch_is_all_or_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(dir.path(), StoreOptions::new()).expect("open");
    let task = store.task("t1").expect("task");
    let parse = |line: &str| Request::parse(line.as_bytes()).expect("valid request");
    let refused = protocol::execute_batch(
        &task,
        vec![
            parse(r#"{"task":"t1","type":"turn/start"}"#),
            parse(r#"{"task":"t1","type":"turn/start"}"#),
        ],
        AppendOptions::default(),
        true,
    );
    assert_eq!(refused.object()["error"], "INVALID_EVENT");
    assert_eq!(task.revision(), 0);
    let written = protocol::execute_batch(
        &task,
        vec![
            parse(r#"{"task":"t1","type":"turn/start"}"#),
            parse(r#"{"task":"t1","type":"turn/end"}"#),
        ],
        AppendOptions::default(),
        true,
    );
    assert_eq!(
        serde_json::to_string(written.object()).expect("json"),
        r#"{"seq":1,"task":"t1","revision":2,"durability":"synced","count":2}"#
    );
    drop(task);
    store.close().expect("close");
}
