//! Proves that `factlog emit DIR` finds a served store by itself: with the store held by a
//! process that shares it (`Store::serve` in this test process), emit's lines go through the
//! socket and its replies are those of an emit that opened the store (an `id` echoed, a
//! refusal that lets the stream go on, the events in the sharing process's store at once);
//! held by a process that does not share it, emit exits 1 with one line naming that
//! process's pid and saying how to share it; and `--ack durable-only` over a socket prints,
//! byte for byte, what it prints on a store emit opened.

use crate::common;

use common::factlog;
use common::server::store_dir;
use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};

const LINES: &str = concat!(
    "{\"id\":1,\"task\":\"t1\",\"type\":\"user/message\",\"text\":\"a\"}\n",
    "{\"id\":2,\"task\":\"t1\",\"type\":\"no/such\"}\n",
    "\n",
    "{\"id\":3,\"task\":\"t1\",\"type\":\"user/message\",\"text\":\"b\"}",
);

#[test]
fn emit_writes_through_the_socket_of_a_process_that_shares_the_store() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let run = factlog(&["emit", dir.to_str().unwrap()], LINES.as_bytes());
    run.assert_success();
    let replies: Vec<serde_json::Value> =
        run.stdout_text().lines().map(|l| serde_json::from_str(l).expect("a JSON reply")).collect();
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert_eq!((replies[0]["id"].clone(), replies[0]["revision"].clone()), (1.into(), 1.into()));
    assert_eq!(replies[1]["error"], "INVALID_EVENT");
    assert_eq!((replies[2]["id"].clone(), replies[2]["revision"].clone()), (3.into(), 2.into()));
    // The sharing process sees them at once, in its own store.
    assert_eq!(store.task_state("t1").expect("t1").revision, 2);

    drop(server);
    store.close().expect("close");
}

/// `--ack durable-only` through a served store's socket: the same replies, byte for byte, as
/// from an emit that opened a store of its own (skipped buffered replies, `covers`, the
/// covering reply before a refusal, the final reply), and the same events.
#[test]
fn emit_durable_only_through_a_socket_prints_what_it_prints_on_its_own_store() {
    const STREAM: &str = concat!(
        "{\"task\":\"t1\",\"type\":\"turn/start\"}\n",
        "{\"task\":\"t1\",\"type\":\"assistant/delta\",\"text\":\"a\"}\n",
        "{\"id\":1,\"task\":\"t1\",\"type\":\"user/message\",\"text\":\"m\"}\n",
        "{\"task\":\"t1\",\"type\":\"assistant/delta\",\"text\":\"b\"}\n",
        "\n",
        "{\"id\":2,\"task\":\"t1\",\"type\":\"no/such\"}\n",
        "{\"task\":\"t1\",\"type\":\"assistant/delta\",\"text\":\"c\"}\n",
        "{\"task\":\"t1\",\"type\":\"assistant/delta\",\"text\":\"d\"}",
    );
    let args = |dir: &std::path::Path| {
        [
            "emit".to_owned(),
            dir.display().to_string(),
            "--ack".to_owned(),
            "durable-only".to_owned(),
        ]
    };
    let (_own_temp, own) = store_dir();
    let alone =
        factlog(&args(&own).iter().map(String::as_str).collect::<Vec<_>>(), STREAM.as_bytes());
    alone.assert_success();
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let relayed =
        factlog(&args(&dir).iter().map(String::as_str).collect::<Vec<_>>(), STREAM.as_bytes());
    relayed.assert_success();
    assert_eq!(relayed.stdout_text(), alone.stdout_text());
    let stdout = relayed.stdout_text();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[0].ends_with(",\"covers\":3}"), "{lines:?}");
    assert_eq!(lines[1], "{\"covers\":1,\"durability\":\"synced\"}");
    assert_eq!(lines[3], "{\"end\":true,\"covers\":2,\"durability\":\"synced\"}");
    let deltas: Vec<String> = store
        .events(factlog::Seq(1))
        .expect("events")
        .filter_map(|event| match event.expect("event").body {
            factlog::harness::Body::AssistantDelta(delta) => Some(delta.text),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["a", "b", "c", "d"]);
    drop(server);
    store.close().expect("close");
}

#[test]
fn emit_on_a_store_held_by_a_process_that_does_not_share_it_says_how_to_share() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let run = factlog(&["emit", dir.to_str().unwrap()], LINES.as_bytes());
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("does not share it"), "{}", run.stderr);
    // The holder is this test process, named by its pid (from /proc/locks).
    let holder = format!("process {}, holding it", std::process::id());
    assert!(run.stderr.contains(&holder), "{}", run.stderr);
    assert!(run.stderr.contains("factlog serve"), "{}", run.stderr);
    // recover, checkpoint and purge, which go through a served store's socket, say the same.
    for command in ["recover", "checkpoint", "purge"] {
        let run = factlog(&[command, dir.to_str().unwrap()], b"");
        run.assert_one_line_error(1);
        assert!(run.stderr.contains(&holder), "{command}: {}", run.stderr);
        assert!(run.stderr.contains("factlog serve"), "{command}: {}", run.stderr);
    }
    store.close().expect("close");
}
