//! Proves the schema change of `tool/result` (`format-spec/events.md`, "Schema changes"):
//! the upcast table from schema 1 to 2 (absent, `ok`, `error`, free text, the `error` field,
//! unknown fields kept), the round trips both ways (schema 2 → downcast → upcast is the
//! identity; a schema-1 body that upcasts comes back from the downcast as the same JSON), that
//! a store of segment format 1 writes schema-1 `tool/result` bytes and one of format 2 writes
//! schema 2 (the raw envelope read with `codec::peek`), that both fold the same events to the
//! same state, and that an un-upcastable schema-1 event written raw stops `Store::open` with
//! `CannotUpcast` naming its seq, without writing anything.

use crate::common;

use common::harness::{append, call, files_under, options, turn_start};
use factlog::harness::codec::{self, ENCODING_JSON};
use factlog::harness::event::{Effect, OperatorMark, ResultOutcome, ToolResult};
use factlog::harness::upcast::{self, ToolResultV1};
use factlog::harness::{Body, CallId, EventType, TaskId};
use factlog::{Durability, ErrorKind, Log, Options, Seq, Store, StoreOptions};
use serde_json::{Map, Value, json};

/// A schema-1 body from its JSON.
fn v1(value: Value) -> ToolResultV1 {
    serde_json::from_value(value).expect("a valid schema-1 tool/result")
}

/// The upcast of a schema-1 JSON body.
fn up(value: Value) -> Result<ToolResult, upcast::Refusal> {
    upcast::tool_result_1_to_2(v1(value))
}

/// The reason of the upcast's refusal of a schema-1 JSON body.
#[track_caller]
fn refused(value: Value) -> String {
    let refusal = up(value).expect_err("the upcast must refuse");
    assert_eq!((refusal.event_type, refusal.from, refusal.to), (EventType::ToolResult, 1, 2));
    refusal.reason
}

/// The log options of [`options`]: 1 MiB segments.
fn log_options() -> Options {
    Options::new().segment_bytes(1024 * 1024)
}

/// Store options whose new log is of segment format `format_version`.
fn options_in(format_version: u16) -> StoreOptions {
    options().log(log_options().new_log_format_version(format_version))
}

#[test]
fn an_absent_or_ok_status_upcasts_to_ok() {
    for body in [json!({"call_id": "c1"}), json!({"call_id": "c1", "status": "ok"})] {
        let result = up(body.clone()).expect("upcasts");
        assert_eq!(result.outcome, ResultOutcome::Ok, "{body}");
        assert_eq!(result.error, None, "{body}");
        assert_eq!(result.call_id.as_str(), "c1");
    }
}

#[test]
fn an_error_status_upcasts_to_error() {
    let result = up(json!({"call_id": "c1", "status": "error"})).expect("upcasts");
    assert_eq!(result.outcome, ResultOutcome::Error);
    assert_eq!(result.error, None);
}

#[test]
fn a_free_text_status_is_refused_not_guessed() {
    for status in ["timeout", "OK", "failed", ""] {
        let reason = refused(json!({"call_id": "c1", "status": status}));
        assert!(reason.contains(&format!("{status:?}")), "{reason}");
    }
}

#[test]
fn a_string_error_field_becomes_error_and_any_other_value_is_refused() {
    let result =
        up(json!({"call_id": "c1", "status": "error", "error": "rate limited"})).expect("upcasts");
    assert_eq!(result.outcome, ResultOutcome::Error);
    assert_eq!(result.error.as_deref(), Some("rate limited"));
    assert!(result.extra.is_empty(), "the error field left extra: {:?}", result.extra);
    for value in [json!(null), json!(429), json!({"code": 429}), json!(["x"]), json!(false)] {
        let reason = refused(json!({"call_id": "c1", "status": "error", "error": value}));
        assert!(reason.contains("\"error\""), "{reason}");
    }
}

/// A field `operator` of schema 1 is where the downcast writes a schema-2 operator mark: an
/// operator mark becomes the mark; anything else is refused, never kept as an unknown field
/// under a name schema 2 gives a meaning (found by the `event_decode` fuzz target: kept, it
/// was re-encoded as a schema-2 `operator` that did not decode).
#[test]
fn a_schema_1_operator_field_is_read_as_the_mark_or_refused() {
    let mark = json!({"name": "ann", "note": "checked the order", "key": "k1"});
    let result = up(json!({"call_id": "c1", "status": "ok", "operator": mark})).expect("upcasts");
    let operator = result.operator.expect("the mark");
    assert_eq!((operator.name.as_str(), operator.key.as_str()), ("ann", "k1"));
    assert_eq!(operator.note.as_deref(), Some("checked the order"));
    assert!(result.extra.is_empty(), "{:?}", result.extra);
    for value in [json!({"kept": true}), json!({"name": "ann"}), json!("ann"), json!(null)] {
        let reason = refused(json!({"call_id": "c1", "operator": value}));
        assert!(reason.contains("\"operator\""), "{reason}");
    }
}

#[test]
fn a_schema_1_outcome_field_is_refused() {
    let reason = refused(json!({"call_id": "c1", "outcome": "ok"}));
    assert!(reason.contains("\"outcome\""), "{reason}");
}

#[test]
fn receipt_output_and_unknown_fields_are_kept_in_their_order() {
    let result = up(json!({
        "call_id": "c1", "status": "ok", "receipt": {"id": 7}, "output": [1, "two"],
        "zz_later": true, "error": "partial page", "aa_first": {"nested": null}
    }))
    .expect("upcasts");
    assert_eq!(result.receipt, Some(json!({"id": 7})));
    assert_eq!(result.output, Some(json!([1, "two"])));
    assert_eq!(result.error.as_deref(), Some("partial page"));
    let keys: Vec<&str> = result.extra.keys().map(String::as_str).collect();
    assert_eq!(keys, ["zz_later", "aa_first"]);
    assert_eq!(result.extra["aa_first"], json!({"nested": null}));
}

/// Schema-2 bodies covering every field alone and together.
fn v2_bodies() -> Vec<ToolResult> {
    let mut extra = Map::new();
    extra.insert("trace".to_owned(), json!({"span": 3}));
    extra.insert("retry_after_ms".to_owned(), json!(1500));
    let base = ToolResult { call_id: "c1".into(), ..Default::default() };
    vec![
        base.clone(),
        ToolResult { outcome: ResultOutcome::Error, ..base.clone() },
        ToolResult { outcome: ResultOutcome::Error, error: Some("boom".into()), ..base.clone() },
        ToolResult { error: Some("a warning".into()), ..base.clone() },
        ToolResult {
            receipt: Some(json!({"article": 7})),
            output: Some(json!("text")),
            extra: extra.clone(),
            ..base.clone()
        },
        ToolResult {
            operator: Some(OperatorMark {
                name: "ann".into(),
                note: Some("by phone".into()),
                key: "k1".into(),
                extra: Map::new(),
            }),
            error: Some("kept".into()),
            ..base.clone()
        },
        ToolResult {
            outcome: ResultOutcome::Error,
            error: Some("é ✓ \n".into()),
            receipt: Some(json!({"id": "r-1"})),
            output: Some(json!([1, 2.5])),
            extra,
            ..base
        },
    ]
}

#[test]
fn schema_2_downcast_then_upcast_is_the_identity() {
    for body in v2_bodies() {
        let down = upcast::tool_result_2_to_1(&body).expect("downcasts");
        // Through JSON, as a format-1 log stores it and an old build reads it.
        let stored = serde_json::to_value(&down).expect("JSON");
        assert!(matches!(stored["status"].as_str(), Some("ok" | "error")), "{stored}");
        let back = up(stored).expect("upcasts");
        assert_eq!(back, body);
    }
}

#[test]
fn a_schema_1_body_that_upcasts_downcasts_to_the_same_json() {
    let bodies = [
        json!({"call_id": "c1", "status": "ok"}),
        json!({"call_id": "c1", "status": "error", "error": "boom"}),
        json!({"call_id": "c1", "status": "ok", "receipt": {"id": 1}, "output": 3, "x": [1]}),
        json!({"call_id": "c1", "status": "error", "x_before": 1, "error": "e", "x_after": 2}),
        json!({"call_id": "c1", "status": "ok", "error": "e", "operator": {"name": "a", "key": "k"}}),
    ];
    for body in bodies {
        let down = upcast::tool_result_2_to_1(&up(body.clone()).expect("upcasts")).expect("down");
        assert_eq!(serde_json::to_value(&down).expect("JSON"), body);
    }
    // An absent status means ok in schema 1; the downcast writes it out.
    let down =
        upcast::tool_result_2_to_1(&up(json!({"call_id": "c1"})).expect("upcasts")).expect("down");
    assert_eq!(
        serde_json::to_value(&down).expect("JSON"),
        json!({"call_id": "c1", "status": "ok"})
    );
}

#[test]
fn the_downcast_refuses_unknown_fields_that_schema_1_would_misread() {
    for name in ["status", "outcome", "error", "operator"] {
        let mut body = ToolResult { call_id: "c1".into(), ..Default::default() };
        body.extra.insert(name.to_owned(), json!("x"));
        let refusal = upcast::tool_result_2_to_1(&body).expect_err("refused");
        assert_eq!((refusal.from, refusal.to), (2, 1));
        assert!(refusal.reason.contains(&format!("{name:?}")), "{}", refusal.reason);
        // Encoding for a format-1 log refuses it too; a format-2 log takes it.
        let e = codec::encode_body(&Body::ToolResult(body.clone()), 1).expect_err("refused");
        assert!(matches!(e.kind(), ErrorKind::InvalidEvent { .. }), "{e}");
    }
}

/// Writes a call and an erroring result to task `t1` of a new store of `format_version`;
/// returns the store's directory.
fn store_with_a_result(format_version: u16) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(dir.path(), options_in(format_version)).expect("open");
    assert_eq!(store.log().format_version(), format_version);
    append(&store, "t1", turn_start());
    append(&store, "t1", call("c1", "fetch", Effect::ReadOnly, None));
    let mut extra = Map::new();
    extra.insert("retry_after_ms".to_owned(), json!(1500));
    append(
        &store,
        "t1",
        Body::ToolResult(ToolResult {
            call_id: "c1".into(),
            outcome: ResultOutcome::Error,
            error: Some("rate limited".into()),
            output: Some(json!({"partial": true})),
            extra,
            ..Default::default()
        }),
    );
    store.close().expect("close");
    dir
}

/// The envelope schema and the body JSON of the record at `seq`, read raw.
fn raw_record(dir: &std::path::Path, seq: u64) -> (u16, Value) {
    let log = Log::open_read_only(dir, Options::new()).expect("open the log");
    let record = log.read_from(Seq(seq)).expect("read").next().expect("a record").expect("ok");
    let env = codec::peek(record.seq, &record.payload).expect("an event");
    assert_eq!((env.tag, env.encoding), (EventType::ToolResult.tag(), ENCODING_JSON));
    (env.schema, serde_json::from_slice(env.body).expect("a JSON body"))
}

#[test]
fn a_format_1_store_writes_schema_1_tool_result_bytes() {
    let dir = store_with_a_result(1);
    let (schema, body) = raw_record(dir.path(), 3);
    assert_eq!(schema, 1);
    assert_eq!(
        serde_json::to_string(&body).expect("JSON"),
        r#"{"call_id":"c1","status":"error","output":{"partial":true},"error":"rate limited","retry_after_ms":1500}"#
    );
}

#[test]
fn a_format_2_store_writes_schema_2_tool_result_bytes() {
    let dir = store_with_a_result(2);
    let (schema, body) = raw_record(dir.path(), 3);
    assert_eq!(schema, 2);
    assert_eq!(
        serde_json::to_string(&body).expect("JSON"),
        r#"{"call_id":"c1","outcome":"error","error":"rate limited","output":{"partial":true},"retry_after_ms":1500}"#
    );
}

#[test]
fn a_format_1_store_folds_to_the_state_of_a_format_2_store() {
    let old = store_with_a_result(1);
    let new = store_with_a_result(2);
    let old = Store::open(old.path(), options()).expect("reopen the format-1 store");
    let new = Store::open(new.path(), options()).expect("reopen the format-2 store");
    assert_eq!((old.log().format_version(), new.log().format_version()), (1, 2));
    assert_eq!(old.state(), new.state());
    let state = old.state();
    let call = &state.tasks[&TaskId::from("t1")].session.calls[&CallId::from("c1")];
    assert_eq!(call.result_status.as_deref(), Some("error"));
    // The decoded events are the same too: the schema-1 result reads as schema 2.
    let events = |store: &Store| -> Vec<_> {
        store.events(Seq(1)).expect("read").map(|e| e.expect("decodes")).collect()
    };
    assert_eq!(events(&old), events(&new));
    assert!(events(&old).iter().any(|e| matches!(e.body, Body::ToolResult(_)) && e.schema == 2));
}

/// A format-1 store whose third event is a schema-1 `tool/result` with the free-text status
/// `timeout`, written raw, as factlog 0.1.0 allowed.
fn store_with_a_free_text_status() -> tempfile::TempDir {
    let dir = store_with_a_result(1);
    let store = Store::open(dir.path(), options()).expect("open");
    append(&store, "t1", call("c2", "fetch", Effect::ReadOnly, None));
    let revision = store.task("t1").expect("task").revision();
    store.close().expect("close");
    let body = br#"{"call_id":"c2","status":"timeout"}"#.to_vec();
    let encoded = codec::EncodedBody {
        tag: EventType::ToolResult.tag(),
        schema: 1,
        encoding: ENCODING_JSON,
        bytes: body,
    };
    let record = codec::encode_parts("t1", revision + 1, 1_700_000_000_000_001, &encoded);
    let log = Log::open(dir.path(), log_options()).expect("open the log");
    // Seq 7: the reopened store took t1 over first (its open turn closed as interrupted, then
    // `recovery/restored`), and c2 is seq 6.
    assert_eq!(log.append(&record, Durability::Synced).expect("append"), Seq(7));
    log.close().expect("close the log");
    dir
}

#[test]
fn an_event_that_cannot_be_upcast_stops_the_open_naming_its_seq() {
    let dir = store_with_a_free_text_status();
    let error = Store::open(dir.path(), options()).expect_err("the open must stop");
    let message = error.to_string();
    match error.into_kind() {
        ErrorKind::CannotUpcast { seq, event_type, from, to, reason } => {
            assert_eq!((seq, event_type.as_str(), from, to), (7, "tool/result", 1, 2));
            assert!(reason.contains("\"timeout\""), "{reason}");
        }
        other => panic!("expected CannotUpcast, got {other:?}"),
    }
    for part in ["event 7", "tool/result", "schema 1", "schema 2", "--raw --from 7"] {
        assert!(message.contains(part), "{part:?} missing from {message:?}");
    }
    // A read-only open stops the same way.
    let again = Store::open_read_only(dir.path(), options()).expect_err("stops");
    assert!(matches!(again.kind(), ErrorKind::CannotUpcast { seq: 7, .. }), "{again}");
}

#[test]
fn a_refused_open_writes_nothing() {
    let dir = store_with_a_free_text_status();
    let before = files_under(dir.path());
    for _ in 0..2 {
        Store::open(dir.path(), options()).expect_err("the open must stop");
    }
    let after = files_under(dir.path());
    let names = |files: &[(std::path::PathBuf, Vec<u8>)]| -> Vec<String> {
        files
            .iter()
            .map(|(path, bytes)| format!("{} ({} bytes)", path.display(), bytes.len()))
            .collect()
    };
    assert_eq!(names(&after), names(&before), "a refused open added or resized a file");
    for ((path, a), (_, b)) in after.iter().zip(&before) {
        let at = a.iter().zip(b).position(|(x, y)| x != y);
        assert!(at.is_none(), "a refused open changed {} at offset {at:?}", path.display());
    }
}
