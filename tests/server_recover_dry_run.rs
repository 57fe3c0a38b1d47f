//! Proves that `factlog recover DIR --dry-run` on a served store previews exactly the plan
//! `factlog recover DIR` then carries out: both run in the serving process, so a task a
//! connected client holds (its call in flight) is left alone by both, and a task an earlier
//! process left is taken over by both. A read-only plan made beside the server instead would
//! have taken the held task over too. On a store held by a process that does not share it,
//! the preview is refused as the run is, naming the holder.

use crate::common;

use common::factlog;
use common::server::store_dir;
use factlog::client::Client;
use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};
use serde_json::{Map, Value, json};

fn call(task: &str) -> Map<String, Value> {
    json!({"task": task, "type": "tool/call", "call_id": "c1", "tool": "pay", "effect": "unsafe"})
        .as_object()
        .cloned()
        .expect("an object")
}

/// Each task with the outcome and plan of each of its calls.
fn decisions(report: &Value) -> Vec<(String, Vec<(String, String)>)> {
    let mut tasks: Vec<(String, Vec<(String, String)>)> = report["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|task| {
            let calls = task["calls"].as_array().cloned().unwrap_or_default();
            let calls =
                calls.iter().map(|c| (c["outcome"].to_string(), c["plan"].to_string())).collect();
            (task["task"].as_str().expect("a task id").to_owned(), calls)
        })
        .collect();
    tasks.sort();
    tasks
}

fn recover_json(dir: &std::path::Path, dry_run: bool) -> Value {
    let mut args = vec!["recover", dir.to_str().unwrap(), "--json"];
    if dry_run {
        args.push("--dry-run");
    }
    let run = factlog(&args, b"");
    run.assert_success();
    serde_json::from_str(&run.stdout_text()).expect("a JSON report")
}

#[test]
fn the_preview_on_a_served_store_is_the_plan_recover_carries_out() {
    let (_temp, dir) = store_dir();
    {
        let store = Store::open(&dir, StoreOptions::new()).expect("open");
        let line = serde_json::to_vec(&call("old")).unwrap();
        assert!(!factlog::protocol::handle_line(&store, &line).is_error());
        store.close().expect("close");
    }
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    client.request(call("live")).expect("the live call");

    let preview = recover_json(&dir, true);
    assert_eq!(preview["dry_run"], true, "{preview}");
    let run = recover_json(&dir, false);
    assert_eq!(decisions(&preview), decisions(&run), "{preview}\n{run}");
    let live = decisions(&run).into_iter().find(|(t, _)| t == "live").expect("live");
    assert!(!live.1.iter().any(|(outcome, _)| outcome.contains("unknown")), "{run}");

    drop(client);
    drop(server);
    store.close().expect("close");
}

#[test]
fn the_preview_on_a_store_held_without_sharing_is_refused_like_the_run() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    for dry_run in [false, true] {
        let mut args = vec!["recover", dir.to_str().unwrap()];
        if dry_run {
            args.push("--dry-run");
        }
        let run = factlog(&args, b"");
        run.assert_one_line_error(1);
        assert!(run.stderr.contains(&std::process::id().to_string()), "{run:?}");
    }
    store.close().expect("close");
}
