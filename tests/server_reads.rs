//! Proves the read requests of a served store through `factlog::client::Client`: `events`
//! pages (of all tasks and of one) join up to exactly the events `Store::events` reads, in
//! order, as `dump --json` prints them; `history` equals `Store::history` serialised; and
//! `revision`/`state` agree with the sharing process's own `Store`.

use crate::common;

use common::server::store_dir;
use factlog::client::Client;
use factlog::protocol::views;
use factlog::server::ServeOptions;
use factlog::{Seq, Store, StoreOptions};
use serde_json::{Map, Value, json};

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

#[test]
fn events_history_revision_and_state_agree_with_the_store() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    for i in 0..30 {
        let task = if i % 3 == 0 { "a" } else { "b" };
        client
            .request(object(json!({"task": task, "type": "user/message", "text": format!("m{i}")})))
            .expect("append");
    }
    client
        .request(object(json!({"task": "a", "type": "assistant/delta", "text": "x"})))
        .expect("delta");

    // All events in one page (a page holds up to 1000), then an empty page past the end.
    let expected: Vec<Map<String, Value>> = store
        .events(Seq(1))
        .expect("events")
        .map(|e| views::event_object(&e.expect("event"), false))
        .collect();
    let (all, next) = client.events(1, None).expect("events");
    assert_eq!(all, expected);
    assert_eq!(next, expected.len() as u64 + 1);
    let (none, after) = client.events(next, None).expect("past the end");
    assert!(none.is_empty());
    assert_eq!(after, next);
    let mut paged = Vec::new();
    let mut from = 1;
    loop {
        let reply = client
            .request(object(json!({"op": "events", "from_seq": from, "task": "a", "limit": 2})))
            .expect("a page");
        let page = reply["events"].as_array().expect("events").clone();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2);
        paged.extend(page.into_iter().map(object));
        from = reply["next_seq"].as_u64().expect("next_seq");
    }
    let of_a: Vec<_> = expected.iter().filter(|e| e["task"] == "a").cloned().collect();
    assert_eq!(paged, of_a);

    let history = client.history("b").expect("history");
    let direct: Vec<Value> = store
        .history("b")
        .expect("history")
        .iter()
        .map(|entry| serde_json::to_value(entry).expect("json"))
        .collect();
    assert_eq!(history, direct);
    assert_eq!(history.len(), 20);

    assert_eq!(client.revision("a").expect("revision"), store.task_state("a").unwrap().revision);
    assert_eq!(client.state("b").expect("state"), store.task_state("b"));
    assert_eq!(client.state("none").expect("state"), None);
    drop(client);
    drop(server);
    store.close().expect("close");
}

/// `tasks` pages (1,000 ids a page) join up to exactly `Store::task_ids`.
#[test]
fn task_ids_through_the_socket_equal_the_stores_across_pages() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    for i in 0..1200 {
        let task = store.task(&format!("task-{i:05}")).expect("task");
        task.append(factlog::harness::Body::TurnStart(Default::default())).expect("append");
    }
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    let expected: Vec<String> = store.task_ids().into_iter().map(|id| id.0).collect();
    assert_eq!(client.task_ids().expect("task ids"), expected);
    let first = client.request(object(json!({"op": "tasks"}))).expect("a page");
    assert_eq!(first["tasks"].as_array().map(Vec::len), Some(1000));
    assert_eq!(first["next"], "task-00999");
    drop(client);
    drop(server);
    store.close().expect("close");
}
