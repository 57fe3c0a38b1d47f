//! Proves that `factlog recover DIR` works while the store is served: it runs in the serving
//! process through the socket and prints the same report. A task an earlier process left
//! with a call in flight is taken over (`tool/outcome_unknown`, repair events written); a
//! task a connected client holds, with its own call in flight, is left alone: its call is
//! still `dispatched`. The report validates against `recover.json`.

use crate::common;

use common::factlog;
use common::schema::assert_valid;
use common::server::store_dir;
use factlog::client::Client;
use factlog::harness::CallId;
use factlog::harness::state::CallStatus;
use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};
use serde_json::{Map, Value, json};

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

fn call(task: &str) -> Map<String, Value> {
    object(json!({"task": task, "type": "tool/call", "call_id": "c1", "tool": "pay",
        "effect": "unsafe"}))
}

#[test]
fn recover_runs_in_the_serving_process_and_leaves_held_tasks_alone() {
    let (_temp, dir) = store_dir();
    {
        // An earlier holder leaves a call in flight.
        let store = Store::open(&dir, StoreOptions::new()).expect("open");
        let reply =
            factlog::protocol::handle_line(&store, &serde_json::to_vec(&call("old")).unwrap());
        assert!(!reply.is_error(), "{:?}", reply.object());
        store.close().expect("close");
    }
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    client.request(call("live")).expect("the live call");

    let run = factlog(&["recover", dir.to_str().unwrap(), "--json"], b"");
    run.assert_success();
    let report: Value = serde_json::from_str(&run.stdout_text()).expect("a JSON report");
    assert_valid("recover.json", &report);
    assert_eq!(report["dry_run"], false);
    let old = report["tasks"].as_array().unwrap().iter().find(|t| t["task"] == "old").expect("old");
    assert_eq!(old["calls"][0]["outcome"], "outcome_unknown", "{report}");
    assert!(report["events_written"].as_u64().unwrap() > 0, "{report}");

    let status = |task: &str| {
        store.task_state(task).expect("task").session.calls[&CallId::from("c1")].status
    };
    assert_eq!(status("old"), CallStatus::OutcomeUnknown);
    assert_eq!(status("live"), CallStatus::Dispatched, "a held task's call is not touched");
    drop(client);
    drop(server);
    store.close().expect("close");
}
