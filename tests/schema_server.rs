//! Every line a real served store writes, and every line its clients send in
//! `format-spec/server.md`'s examples, is valid against `format-spec/schema/server-line.json`
//! (hello, hello reply, `revision`/`state`/`events`/`follow`/`history`/`recover`/`checkpoint`/`purge`/`batch`
//! requests and replies, HELLO_REQUIRED, UNSUPPORTED_VERSION), while its append replies stay valid against `emit-reply.json`; the
//! schema also refuses what no line looks like.

use crate::common;

use common::schema::{assert_invalid, assert_valid};
use common::server::{Conn, Served, store_dir};
use factlog::limits::SERVER_FOLLOW_TIMEOUT_MS_MAX;
use serde_json::json;

const SCHEMA: &str = "server-line.json";

#[test]
fn the_lines_of_a_real_server_are_valid() {
    let (_temp, dir) = store_dir();
    let _served = Served::start(&dir, &[]);
    let mut conn = Conn::connect(&dir).expect("connect");
    let hello = json!({"hello": "factlog", "version": 1});
    assert_valid(SCHEMA, &hello);
    let reply = conn.call(&hello);
    assert_valid(SCHEMA, &reply);

    let append = json!({"id": "a", "task": "t1", "type": "task/contract", "goal": "g"});
    assert_valid("emit-reply.json", &conn.call(&append));
    let requests = [
        json!({"id": 1, "op": "revision", "task": "t1"}),
        json!({"id": 2, "op": "state", "task": "t1"}),
        json!({"id": 3, "op": "state", "task": "none"}),
        json!({"id": 4, "op": "revision", "task": "none"}),
        json!({"id": 5, "op": "batch", "task": "t1", "expected_revision": 1,
            "events": [{"type": "turn/start"}, {"type": "user/message", "text": "hi"}]}),
        json!({"id": 6, "op": "events"}),
        json!({"id": 7, "op": "events", "from_seq": 2, "task": "t1", "limit": 1}),
        json!({"id": 8, "op": "events", "from_seq": 99}),
        json!({"id": 9, "op": "history", "task": "t1"}),
        json!({"id": 10, "op": "history", "task": "none", "from": 0}),
        json!({"id": 12, "op": "recover", "dry_run": true}),
        json!({"id": 13, "op": "recover"}),
        json!({"id": 14, "op": "checkpoint"}),
        json!({"id": 15, "op": "follow", "from_seq": 1, "timeout_ms": 0}),
        json!({"id": 16, "op": "follow", "from_seq": 99, "task": "t1", "limit": 5,
            "timeout_ms": 1}),
        json!({"id": 17, "op": "purge", "dry_run": true}),
        json!({"id": 18, "op": "purge"}),
        json!({"id": 19, "op": "tasks"}),
        json!({"id": 20, "op": "tasks", "after": "t1"}),
    ];
    for request in &requests {
        assert_valid(SCHEMA, request);
        let reply = conn.call(request);
        assert!(reply.get("error").is_none(), "{reply}");
        assert_valid(SCHEMA, &reply);
    }
    // A refused batch is an error reply of emit-reply.json.
    let stale = conn.call(&json!({"id": 11, "op": "batch", "task": "t1", "expected_revision": 1,
        "events": [{"type": "user/message", "text": "late"}]}));
    assert_eq!(stale["error"], "STALE_REVISION", "{stale}");
    assert_valid("emit-reply.json", &stale);

    for bad_hello in [json!({"task": "t1"}), json!({"hello": "factlog", "version": 7})] {
        let mut conn = Conn::connect(&dir).expect("connect");
        let reply = conn.call(&bad_hello);
        assert_valid(SCHEMA, &reply);
    }
}

#[test]
fn the_schema_refuses_what_no_line_looks_like() {
    assert_invalid(SCHEMA, &json!({"hello": "other", "version": 1}));
    assert_invalid(SCHEMA, &json!({"hello": "factlog", "version": 1, "protocol": 1, "pid": 0}));
    // The schema's bound is the server's.
    assert_valid(SCHEMA, &json!({"op": "follow", "timeout_ms": SERVER_FOLLOW_TIMEOUT_MS_MAX}));
    assert_invalid(
        SCHEMA,
        &json!({"op": "follow", "timeout_ms": SERVER_FOLLOW_TIMEOUT_MS_MAX + 1}),
    );
    assert_invalid(SCHEMA, &json!({"op": "purge", "dry_run": "yes"}));
    assert_invalid(SCHEMA, &json!({"op": "tail"}));
    assert_invalid(SCHEMA, &json!({"dry_run": true, "snapshot": null}));
    assert_invalid(SCHEMA, &json!({"events": [], "next_seq": 0}));
    assert_invalid(
        SCHEMA,
        &json!({"op": "batch", "task": "t1",
        "events": [{"type": "turn/start", "expected_revision": 3}]}),
    );
    assert_invalid(SCHEMA, &json!({"error": "SERVER_BUSY"}));
    assert_invalid(SCHEMA, &json!({"task": "t1", "revision": -1}));
}
