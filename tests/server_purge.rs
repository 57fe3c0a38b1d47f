//! Proves that `factlog purge DIR` works while the store is served: the serving process
//! (a real `factlog serve`) purges, asked through the socket, and the command prints what a
//! purge of an unserved copy of the same store prints, text and `--json` alike (valid against
//! `purge.json`), removes the same segments, and the store goes on serving. Through
//! `factlog::client::Client`, a `purge` dry run lists exactly what the purge then removes, both
//! equal to the library's `Store::plan_purge`, and a mistyped `dry_run` is refused.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::harness::streamed_turn;
use common::schema::assert_valid;
use common::server::{Conn, Served, store_dir};
use common::{arg, factlog};
use factlog::client::Client;
use factlog::server::ServeOptions;
use factlog::{Options, Store, StoreOptions};
use serde_json::{Map, Value, json};

/// Small segments, so that a few turns roll several.
fn options() -> StoreOptions {
    StoreOptions::new().log(Options::new().segment_bytes(16 * 1024))
}

/// A store with two snapshots and several sealed segments before the oldest.
fn fill(dir: &Path) {
    let store = Store::open(dir, options()).expect("open");
    for n in 0..10 {
        streamed_turn(&store, n);
    }
    store.checkpoint().expect("checkpoint");
    for n in 10..15 {
        streamed_turn(&store, n);
    }
    store.checkpoint().expect("checkpoint");
    store.close().expect("close");
}

/// A copy of the store in `dir`, beside it, under `name`.
fn copy(dir: &Path, name: &str) -> PathBuf {
    let to = dir.with_file_name(name);
    let status = Command::new("cp").arg("-a").arg(dir).arg(&to).status().expect("run cp");
    assert!(status.success(), "cp -a");
    to
}

fn segment_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".seg"))
        .collect();
    names.sort();
    names
}

/// `factlog purge DIR EXTRA..`'s standard output, its directory spelled `DIR`.
fn purge(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["purge", arg(dir)];
    args.extend_from_slice(extra);
    let run = factlog(&args, b"");
    run.assert_success();
    run.stdout_text().replace(arg(dir), "DIR")
}

#[test]
fn purge_on_a_served_store_prints_what_an_unserved_purge_prints() {
    let (_temp, dir) = store_dir();
    fill(&dir);
    let unserved_json = copy(&dir, "unserved-json");
    let unserved_text = copy(&dir, "unserved-text");
    let served_text = copy(&dir, "served-text");
    let before = segment_names(&dir);

    let served = Served::start(&dir, &[]);
    let served_for_text = Served::start(&served_text, &[]);
    // A dry run opens read-only: it needs no socket and agrees with the unserved one.
    let dry = purge(&dir, &["--dry-run", "--json"]);
    assert_eq!(dry, purge(&unserved_json, &["--dry-run", "--json"]));
    assert_eq!(segment_names(&dir), before, "a dry run removes nothing");

    let json_report = purge(&dir, &["--json"]);
    assert_eq!(json_report, purge(&unserved_json, &["--json"]));
    let report: Value = serde_json::from_str(&json_report).expect("a JSON report");
    assert_valid("purge.json", &report);
    assert_eq!(report["dry_run"], false);
    assert!(report["removed_segments"].as_u64().expect("count") > 0, "{report}");
    let dry: Value = serde_json::from_str(&dry).expect("a JSON report");
    assert_eq!(report["segments"], dry["segments"], "the purge removed what the dry run listed");
    assert_eq!(segment_names(&dir), segment_names(&unserved_json));
    assert!(segment_names(&dir).len() < before.len());

    let text = purge(&served_text, &[]);
    assert_eq!(text, purge(&unserved_text, &[]));
    assert!(text.contains("removed segment"), "{text}");

    // The served store goes on: an append, then a clean stop and a reopen.
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    let reply = conn.call(&json!({"task": "t1", "type": "user/message", "text": "after"}));
    assert!(reply.get("error").is_none(), "{reply}");
    drop(conn);
    for served in [served, served_for_text] {
        let (code, stderr) = served.terminate();
        assert_eq!(code, Some(0), "{stderr}");
    }
    let reopened = Store::open_read_only(&dir, options()).expect("reopen after purge");
    let revision = reopened.task_state("t1").expect("t1").revision;
    assert_eq!(reply["revision"], revision);
}

#[test]
fn the_client_purge_dry_run_lists_what_its_purge_removes() {
    let (_temp, dir) = store_dir();
    fill(&dir);
    let store = Store::open(&dir, options()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");

    let planned = client.purge(true).expect("a dry run");
    assert_eq!(planned, store.plan_purge().expect("plan"));
    assert!(planned.dry_run);
    assert!(planned.removed_segments > 0, "{planned:?}");
    let done = client.purge(false).expect("a purge");
    assert!(!done.dry_run);
    assert_eq!((&done.segments, done.first_seq), (&planned.segments, planned.first_seq));
    assert_eq!(store.log().info().expect("info").segments[0].first_seq.0, done.first_seq);
    let again = client.purge(false).expect("a second purge");
    assert_eq!(again.removed_segments, 0, "nothing more to remove");

    let refused = client
        .request(Map::from_iter([
            ("op".to_owned(), json!("purge")),
            ("dry_run".to_owned(), json!("yes")),
        ]))
        .expect_err("a mistyped dry_run");
    assert_eq!(refused.code(), Some("INVALID_EVENT"));
    drop(client);
    server.stop().expect("stop");
    store.close().expect("close");
}

/// A purge while others read: a reader made before it meets the removed segments as
/// `Reclaimed` (not damage), and through the socket an `events` page asked below what the
/// store still holds is refused `RECLAIMED` (naming where to read from) while the
/// connection, its client's tasks and the store go on.
#[test]
fn reads_of_purged_records_are_reclaimed_not_fatal() {
    let (_temp, dir) = store_dir();
    fill(&dir);
    let store = Store::open(&dir, options()).expect("open");
    let early = store.events(factlog::Seq(1)).expect("a reader made before the purge");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    client.delta("held", "a fragment: this connection holds a task").expect("delta");
    client.flush().expect("flush");
    let report = client.purge(false).expect("purge");
    let first = store.log().first_seq().expect("first seq").0;
    assert!(first > 1, "the purge removed segments: {report:?}");

    let error = early.filter_map(Result::err).next().expect("the early reader fails");
    assert!(
        matches!(error.kind(), factlog::ErrorKind::Reclaimed { .. }),
        "a removed segment is reclaimed, not damage: {error}"
    );

    let refused = client.events(1, None).expect_err("below the first seq");
    assert_eq!(refused.code(), Some("RECLAIMED"), "{refused}");
    let factlog::client::ClientError::Refused { reply, .. } = &refused else {
        panic!("a refusal: {refused:?}");
    };
    assert_eq!(reply["first_available"], first);
    assert_valid("emit-reply.json", &Value::Object(reply.clone()));
    // The connection goes on, and its task is still held by it (no hand-over happened).
    let (page, _) = client.events(first, None).expect("from the first seq");
    assert!(!page.is_empty());
    client.delta("held", "still held").expect("delta");
    client.flush().expect("flush");
    let state = client.state("held").expect("state").expect("the task");
    assert_eq!(state.revision, 2, "no repair was written: the task was not handed over");
    drop(client);
    drop(server);
    store.close().expect("close");
}
