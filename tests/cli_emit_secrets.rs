//! `factlog emit` and values shaped like credentials (`format-spec/protocol.md`, "Warnings"):
//! by default such a value is written and the reply carries a warning naming its JSON path and
//! shape (never the value); a marked `{"$secret": ..}` value or an ordinary digest gets none;
//! under `--ack durable-only` a warned buffered event still gets its own reply; with
//! `--refuse-unmarked-secrets` the event is refused (`UNMARKED_SECRET`, nothing written) and
//! the stream goes on.

use crate::common;

use common::cli::{event, input, json_lines, refused, revision, written};
use common::{arg, factlog, temp_log};
use serde_json::{Value, json};

const BEARER: &str = "Bearer k9Xr2mQ7vL4pZ8wN3tY6bC1dF5gH0jKs";
const AWS: &str = "AKIAIOSFODNN7EXAMPLE";

fn call_with(call_id: &str, args: Value) -> Value {
    event(
        "t1",
        "tool/call",
        json!({ "call_id": call_id, "tool": "http", "effect": "read_only",
                                      "args": args }),
    )
}

fn emit_with(dir: &std::path::Path, flags: &[&str], lines: &[Value]) -> Vec<Value> {
    let mut args = vec!["emit", arg(dir)];
    args.extend_from_slice(flags);
    let run = factlog(&args, &input(lines));
    run.assert_success();
    json_lines(&run)
}

#[test]
fn a_credential_shaped_value_is_written_with_a_warning_naming_its_path() {
    let (_temp, dir) = temp_log();
    let replies = emit_with(
        &dir,
        &[],
        &[
            call_with("c1", json!({ "headers": { "Authorization": BEARER } })),
            call_with("c2", json!({ "token": { "$secret": BEARER } })),
            call_with(
                "c3",
                json!({ "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" }),
            ),
        ],
    );
    let warned = replies[0].as_object().expect("object");
    let keys: Vec<&str> = warned.keys().map(String::as_str).collect();
    assert_eq!(keys, ["seq", "task", "revision", "durability", "warnings"]);
    let warnings = replies[0]["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0]["path"], "$.args.headers.Authorization");
    assert_eq!(warnings[0]["shape"], "bearer_token");
    let message = warnings[0]["message"].as_str().expect("message");
    assert!(message.contains("$secret"), "{message}");
    assert!(!replies[0].to_string().contains("k9Xr2mQ7"), "the value is never echoed");
    written(&replies[1]);
    written(&replies[2]);
}

#[test]
fn under_durable_only_acks_a_warned_buffered_event_still_gets_its_reply() {
    let (_temp, dir) = temp_log();
    let replies = emit_with(
        &dir,
        &["--ack", "durable-only"],
        &[
            event("t1", "assistant/delta", json!({ "text": "a" })),
            event("t1", "task/plan", json!({ "steps": [format!("use key {AWS}")] })),
            event("t1", "assistant/delta", json!({ "text": "b" })),
        ],
    );
    // The skipped delta is synced and covered first; the warned plan stands alone.
    assert_eq!(replies[0], json!({ "covers": 1, "durability": "synced" }));
    assert_eq!(replies[1]["durability"], "buffered");
    assert_eq!(replies[1]["warnings"][0]["shape"], "aws_access_key_id");
    assert_eq!(replies[1]["warnings"][0]["path"], "$.steps[0]");
    assert_eq!(replies[1]["covers"], 1);
    assert_eq!(replies[2]["end"], true);
    assert_eq!(replies[2]["covers"], 1);
}

#[test]
fn refuse_unmarked_secrets_refuses_and_writes_nothing() {
    let (_temp, dir) = temp_log();
    let replies = emit_with(
        &dir,
        &["--refuse-unmarked-secrets"],
        &[
            event("t1", "user/message", json!({ "text": "hello" })),
            call_with("c1", json!({ "headers": { "Authorization": BEARER } })),
            call_with("c2", json!({ "headers": { "Authorization": { "$secret": BEARER } } })),
        ],
    );
    written(&replies[0]);
    let message = refused(&replies[1], "UNMARKED_SECRET");
    assert!(message.contains("$secret"), "{message}");
    assert_eq!(replies[1]["path"], "$.args.headers.Authorization");
    assert_eq!(replies[1]["shape"], "bearer_token");
    assert!(!replies[1].to_string().contains("k9Xr2mQ7"), "the value is never echoed");
    written(&replies[2]);
    assert_eq!(revision(&dir, "t1"), 2, "the refused call was not written");
}

/// A `record/blob`'s bytes are base64 on the line, where no prefix shows: the line is scanned
/// anyway, and a key in the bytes gets its warning (at `$.bytes`); with
/// `--refuse-unmarked-secrets` it is refused. A head field `bytes` beside the bytes is refused.
#[test]
fn a_key_in_the_raw_bytes_of_a_record_blob_is_warned_of_and_refused() {
    let mut packed = vec![0x81, 0xa4, b'n', b'o', b't', b'e', 0xb4];
    packed.extend_from_slice(AWS.as_bytes());
    let bytes = factlog::harness::codec::blob_bytes_to_base64(&packed);
    let blob = event("t1", "record/blob", json!({ "kind": "app/state", "bytes": bytes }));
    let (_temp, dir) = temp_log();
    let replies = emit_with(&dir, &[], std::slice::from_ref(&blob));
    assert_eq!(replies[0]["warnings"][0]["path"], "$.bytes");
    assert_eq!(replies[0]["warnings"][0]["shape"], "aws_access_key_id");
    let message = replies[0]["warnings"][0]["message"].as_str().expect("message");
    assert!(message.contains("record/blob") && !message.contains(AWS), "{message}");
    let (_temp, dir) = temp_log();
    let replies = emit_with(&dir, &["--refuse-unmarked-secrets"], &[blob]);
    assert_eq!(replies[0]["error"], "UNMARKED_SECRET", "{}", replies[0]);
    assert_eq!(replies[0]["path"], "$.bytes");
    let message = replies[0]["message"].as_str().expect("message");
    assert!(message.contains("its bytes hold") && !message.contains(AWS), "{message}");
    let blob = factlog::harness::event::RecordBlob {
        kind: "app/state".to_owned(),
        extra: [("bytes".to_owned(), json!("x"))].into_iter().collect(),
        ..Default::default()
    };
    let refused =
        factlog::harness::codec::encode("t1", 1, 0, &factlog::harness::Body::RecordBlob(blob), 2)
            .expect_err("a head field named bytes");
    assert!(matches!(refused.kind(), factlog::ErrorKind::InvalidEvent { .. }), "{refused}");
}
