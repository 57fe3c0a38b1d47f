//! Values that look like credentials are never written silently (`format-spec/events.md`,
//! "Credential shapes"). Each shape of `secret_shapes::SHAPES` matches a made-up value of its
//! shape and misses its near-misses; hex digests, UUIDs, request keys, words and URLs match
//! nothing; findings name the JSON path through objects and arrays; values marked
//! `{"$secret": ...}` are skipped. A store with `refuse_unmarked_secrets` refuses such a body
//! (alone or in a batch) with `UnmarkedSecret` and writes nothing, not a byte on disk; the
//! default store writes it and `find_in_body` reports it. The spec's table lists exactly the
//! code's shape names, in order.

use crate::common;

use common::harness::{err_of, events, files_under, last_seq, options, user};
use factlog::harness::event::{Effect, ToolCall};
use factlog::harness::secret_shapes::{
    Finding, SHAPES, find_in_body, find_in_json, find_in_value, shapes_in,
};
use factlog::harness::{Body, EventType, codec};
use factlog::{AppendOptions, ErrorKind, Store};
use serde_json::{Value, json};

/// `unit` repeated until `len` characters: made-up key material of a chosen length.
fn fill(unit: &str, len: usize) -> String {
    unit.chars().cycle().take(len).collect()
}

const MIXED: &str = "aB3dE5gH7jK9mN1pQ2";

fn bearer() -> String {
    format!("Bearer {}", fill(MIXED, 32))
}

const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\
                   eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.\
                   SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";

fn pem(label: &str) -> String {
    format!(
        "-----BEGIN {label}-----\n{}\n{}\n-----END {label}-----\n",
        fill("MIIEowIBAAKCAQEA7x", 64),
        fill("q9Zr+/w1", 40)
    )
}

/// Asserts the shapes `text` holds, alone and inside prose.
#[track_caller]
fn assert_shapes(text: &str, expected: &[&str]) {
    assert_eq!(shapes_in(text), expected, "{text:?}");
    let in_prose = format!("my key: {text}, keep it safe");
    assert_eq!(shapes_in(&in_prose), expected, "{in_prose:?}");
    // The store's path: the prefilter on the JSON text, then the walk.
    let json = serde_json::to_vec(&json!({ "v": text })).expect("json");
    let found: Vec<&str> = find_in_json(&json).iter().map(|f| f.shape).collect();
    assert_eq!(found, expected, "{text:?} as JSON");
}

#[track_caller]
fn assert_matches(shape: &str, text: &str) {
    assert_shapes(text, &[shape]);
}

#[track_caller]
fn assert_no_match(text: &str) {
    assert_shapes(text, &[]);
}

#[test]
fn anthropic_api_key() {
    assert_matches("anthropic_api_key", &format!("sk-ant-api03-{}AA", fill(MIXED, 93)));
    assert_matches("anthropic_api_key", &format!("sk-ant-{}", fill(MIXED, 32)));
    assert_no_match(&format!("sk-ant-{}", fill(MIXED, 31)));
    assert_no_match(&format!("sk-ant-{}", fill("0123456789abcdef", 64)));
    assert_no_match("the sk-ant- prefix names Anthropic keys");
}

#[test]
fn openai_api_key() {
    assert_matches("openai_api_key", &format!("sk-proj-{}", fill(MIXED, 156)));
    assert_matches("openai_api_key", &format!("sk-{}", fill("T3BlbkFJ9x", 48)));
    assert_matches("openai_api_key", &format!("sk-svcacct-{}", fill(MIXED, 60)));
    assert_no_match(&format!("sk-{}", fill(MIXED, 31)));
    assert_no_match("sk-learn-is-a-python-library-for-machine-learning-tasks");
    assert_no_match(&format!("disk-{}", fill(MIXED, 48)));
    assert_no_match(&format!("task_sk-{}", fill(MIXED, 48)));
}

#[test]
fn aws_access_key_id() {
    assert_matches("aws_access_key_id", "AKIAIOSFODNN7EXAMPLE");
    assert_matches("aws_access_key_id", "ASIAQ3EGUCHOVZ2XJ5KV");
    assert_no_match("AKIAIOSFODNN7EXAMPL");
    assert_no_match("AKIAIOSFODNN7EXAMPLE1");
    assert_no_match("AKIAiosfodnn7example");
    assert_no_match("ASIAN MARKETS OPENED HIGHER");
    assert_no_match("XAKIAIOSFODNN7EXAMPLE");
}

#[test]
fn github_token() {
    for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
        assert_matches("github_token", &format!("{prefix}{}", fill(MIXED, 36)));
        assert_no_match(&format!("{prefix}{}", fill(MIXED, 35)));
    }
    assert_no_match(&format!("ghx_{}", fill(MIXED, 36)));
    assert_no_match("tokens start with ghp_ or gho_");
}

#[test]
fn github_fine_grained_token() {
    let token = format!("github_pat_11{}_{}", fill(MIXED, 20), fill(MIXED, 59));
    assert_matches("github_fine_grained_token", &token);
    assert_no_match(&format!("github_pat_{}", fill(MIXED, 49)));
    assert_no_match("see github_pat_ tokens in the docs");
}

#[test]
fn slack_token() {
    for prefix in ["xoxa-", "xoxb-", "xoxp-", "xoxr-"] {
        let token = format!("{prefix}123456789012-1234567890123-{}", fill(MIXED, 24));
        assert_matches("slack_token", &token);
    }
    assert_no_match("xoxb-1234-5678");
    assert_no_match("xoxb-abcdefghijklmnopqrstuvwxyz");
    assert_no_match(&format!("xoxz-123456789012-{}", fill(MIXED, 24)));
}

#[test]
fn google_api_key() {
    assert_matches("google_api_key", &format!("AIza{}", fill("Sy-_9aB3dE5gH7", 35)));
    assert_no_match(&format!("AIza{}", fill(MIXED, 34)));
    assert_no_match(&format!("AIza{}", fill(MIXED, 36)));
}

#[test]
fn stripe_secret_key() {
    assert_matches("stripe_secret_key", &format!("sk_live_{}", fill(MIXED, 24)));
    assert_matches("stripe_secret_key", &format!("rk_live_{}", fill(MIXED, 99)));
    assert_no_match(&format!("sk_live_{}", fill(MIXED, 23)));
    assert_no_match(&format!("pk_live_{}", fill(MIXED, 24)));
}

#[test]
fn jwt() {
    assert_matches("jwt", JWT);
    assert_no_match("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0");
    assert_no_match("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0NTY3ODkwIn0.");
    assert_no_match("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.short");
    assert_no_match("a JWT starts with eyJ");
}

#[test]
fn bearer_token() {
    assert_matches("bearer_token", &bearer());
    assert_matches("bearer_token", "bearer 2YotnFZFEjr1zCsicMWpAA==");
    // The bearer token consumes the JWT it carries: one finding.
    assert_matches("bearer_token", &format!("Bearer {JWT}"));
    assert_no_match("Bearer token");
    assert_no_match("send a Bearer <token> in the Authorization header");
    assert_no_match("Bearer YOUR_ACCESS_TOKEN_GOES_HERE");
    assert_no_match("Bearer ${API_TOKEN}");
    assert_no_match("Bearer 2YotnFZFEjr1zCsic");
}

#[test]
fn private_key_block() {
    for label in [
        "RSA PRIVATE KEY",
        "PRIVATE KEY",
        "EC PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ] {
        assert_matches("private_key_block", &pem(label));
    }
    assert_no_match(&pem("CERTIFICATE"));
    assert_no_match(&pem("PUBLIC KEY"));
    assert_no_match("paste the -----BEGIN RSA PRIVATE KEY----- block here");
    assert_no_match("-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----");
}

#[test]
fn every_shape_of_the_table_has_a_test_above() {
    let tested = [
        "anthropic_api_key",
        "openai_api_key",
        "aws_access_key_id",
        "github_token",
        "github_fine_grained_token",
        "slack_token",
        "google_api_key",
        "stripe_secret_key",
        "jwt",
        "bearer_token",
        "private_key_block",
    ];
    let names: Vec<&str> = SHAPES.iter().map(|s| s.name).collect();
    assert_eq!(names, tested);
}

#[test]
fn ordinary_values_match_nothing() {
    let sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    for text in [
        sha256,
        &format!("sha256:{sha256}"),
        "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        "123e4567-e89b-12d3-a456-426614174000",
        "F47AC10B-58CC-4372-A567-0E02B2C3D479",
        &format!("rk1_{sha256}"),
        "sec_0123456789abcdef0123456789abcdef",
        "ask a question, then task-1 runs on disk-2 in Asia",
        "The AKIA, sk-, ghp_, xoxb-, AIza and eyJ prefixes are documented.",
        "https://example.com/search?q=secrets&page=2",
        "https://api.github.com/repos/rust-lang/rust/pulls?state=open",
        "Authorization: Bearer",
        "SGVsbG8sIHdvcmxkISBUaGlzIGlzIGJhc2U2NCBlbmNvZGVkIHRleHQu",
        "",
    ] {
        assert_no_match(text);
    }
}

#[test]
fn findings_name_the_path_through_objects_and_arrays() {
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let body = json!({
        "tool": "http",
        "args": {
            "headers": {"Authorization": bearer(), "x-api-key": aws},
            "retries": [1, {"keys": ["none", JWT]}],
            "note": format!("two: {aws} and {JWT}"),
        },
    });
    let found = find_in_value(&body);
    let expected = [
        ("$.args.headers.Authorization", "bearer_token"),
        ("$.args.headers[\"x-api-key\"]", "aws_access_key_id"),
        ("$.args.retries[1].keys[1]", "jwt"),
        ("$.args.note", "aws_access_key_id"),
        ("$.args.note", "jwt"),
    ];
    let found: Vec<(&str, &str)> = found.iter().map(|f| (f.path.as_str(), f.shape)).collect();
    assert_eq!(found, expected);
    assert_eq!(find_in_json(body.to_string().as_bytes()).len(), expected.len());
    assert!(find_in_json(b"not json AKIAIOSFODNN7EXAMPLE").is_empty());
}

#[test]
fn marked_secrets_are_skipped() {
    let body = json!({
        "a": {"$secret": bearer()},
        "b": [{"$secret": {"nested": JWT}}],
        "c": {"$secret": "AKIAIOSFODNN7EXAMPLE", "note": "AKIAIOSFODNN7EXAMPLE"},
        "d": {"$secret_ref": "sec_0123456789abcdef0123456789abcdef"},
    });
    assert_eq!(find_in_value(&body), Vec::<Finding>::new());
}

#[test]
fn a_warning_says_where_and_how_to_mark() {
    let finding = Finding { path: "$.args.token".to_owned(), shape: "github_token" };
    let warning = finding.warning();
    assert!(warning.contains("$.args.token") && warning.contains("github_token"), "{warning}");
    assert!(warning.contains(r#"{"$secret": "..."}"#), "{warning}");
}

fn call_with_header(value: Value) -> Body {
    Body::ToolCall(ToolCall {
        call_id: "c1".into(),
        tool: "http".to_owned(),
        effect: Effect::ReadOnly,
        args: Some(json!({"url": "https://example.com", "headers": {"Authorization": value}})),
        ..Default::default()
    })
}

fn on_disk(dir: &std::path::Path, needle: &str) -> bool {
    files_under(dir)
        .iter()
        .any(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
}

#[test]
fn the_refusing_store_writes_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store =
        Store::open(dir.path(), options().refuse_unmarked_secrets(true)).expect("open the store");
    let task = store.task("t1").expect("task");
    task.append(user("hello")).expect("plain message");
    let before = last_seq(&store);
    let token = bearer();

    let e = err_of(task.append(call_with_header(json!(token))));
    match e.kind() {
        ErrorKind::UnmarkedSecret { task, event_type, path, shape } => {
            assert_eq!(
                (task.as_str(), event_type.as_str(), path.as_str(), *shape),
                ("t1", "tool/call", "$.args.headers.Authorization", "bearer_token")
            );
        }
        other => panic!("expected UnmarkedSecret, got {other:?}"),
    }
    let message = e.to_string();
    assert!(message.contains("$.args.headers.Authorization"), "{message}");
    assert!(message.contains(r#"{"$secret": "..."}"#) && message.contains("nothing was written"));

    // In a batch: none of it is written.
    let leaky = codec::body_from_value(
        EventType::UserMessage,
        json!({"text": format!("my key is AKIAIOSFODNN7EXAMPLE")}),
    )
    .expect("message body");
    let e = err_of(task.append_batch_with(vec![user("first"), leaky], AppendOptions::default()));
    assert!(matches!(e.kind(), ErrorKind::UnmarkedSecret { path, .. } if path == "$.text"));
    assert_eq!(last_seq(&store), before);

    // Marked, it is written as a reference; delta text is not scanned.
    task.append(call_with_header(json!({"$secret": token}))).expect("marked secret");
    task.delta("streamed AKIAIOSFODNN7EXAMPLE").expect("delta");
    assert_eq!(last_seq(&store), before + 2);
    store.close().expect("close");
    assert!(!on_disk(dir.path(), &token), "a refused or marked token reached the disk");
}

#[test]
fn the_default_store_writes_and_reports_the_finding() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = Store::open(dir.path(), options()).expect("open the store");
    let token = bearer();
    let body = call_with_header(json!(token));
    let found = find_in_body(&body);
    assert_eq!(
        found,
        [Finding { path: "$.args.headers.Authorization".to_owned(), shape: "bearer_token" }]
    );
    store.task("t1").expect("task").append(body).expect("written as before");
    let written = events(&store);
    let Body::ToolCall(call) = &written.last().expect("one event").body else {
        panic!("a tool/call");
    };
    assert_eq!(call.args.as_ref().expect("args")["headers"]["Authorization"], json!(token));

    // No finding for the ordinary bodies, a delta or a marked secret.
    assert!(find_in_body(&user("hello, AKIA is a prefix")).is_empty());
    assert!(find_in_body(&call_with_header(json!({"$secret": token}))).is_empty());
    let delta = codec::body_from_value(EventType::AssistantDelta, json!({"text": token}))
        .expect("delta body");
    assert!(find_in_body(&delta).is_empty());
}

#[test]
fn the_spec_lists_the_shapes_of_the_code() {
    let spec = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("format-spec/events.md"),
    )
    .expect("events.md");
    let section = spec
        .split("\n### Credential shapes\n")
        .nth(1)
        .expect("a \"Credential shapes\" section")
        .split("\n#")
        .next()
        .unwrap_or_default();
    let listed: Vec<&str> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .collect();
    let names: Vec<&str> = SHAPES.iter().map(|s| s.name).collect();
    assert_eq!(listed, names, "format-spec/events.md, \"Credential shapes\"");
}
