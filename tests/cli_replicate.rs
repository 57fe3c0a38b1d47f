//! `factlog replicate DIR --to URL` (`format-spec/replication.md`): one round with `--once`
//! (its `--json` checked against `schema/replicate.json`), a run beside a process that writes
//! the store until SIGTERM, the refusals with their exit codes, and the lag `factlog info`
//! shows from the store's shipped file ("The shipped file").

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::replica;
use common::{FACTLOG, arg, factlog, harness, schema};
use factlog::replica::DirRemote;
use serde_json::Value;

fn url(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

fn once(store: &Path, replica: &Path, extra: &[&str]) -> common::Run {
    let to = url(replica);
    let mut args = vec!["replicate", arg(store), "--to", &to, "--once"];
    args.extend_from_slice(extra);
    factlog(&args, b"")
}

fn written_store(dir: &Path, turns: usize) -> u64 {
    let store = harness::open(dir);
    replica::session(&store, "t", turns);
    store.checkpoint().expect("checkpoint");
    let last = harness::last_seq(&store);
    store.close().expect("close");
    last
}

#[test]
fn once_ships_everything_and_reports_it() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let last = written_store(store_dir.path(), 3);
    let run = once(store_dir.path(), replica_dir.path(), &["--json"]);
    run.assert_success();
    let status: Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    schema::assert_valid("replicate.json", &status);
    assert_eq!(status["shipped_seq"], last);
    assert_eq!((status["lag"].as_u64(), status["epoch"].as_u64()), (Some(0), Some(1)));
    assert!(status["parts"].as_u64() >= Some(1) && status["snapshots"] == 1, "{status}");

    let again = once(store_dir.path(), replica_dir.path(), &["--json"]);
    again.assert_success();
    let status: Value = serde_json::from_slice(&again.stdout).expect("one JSON object");
    assert_eq!((status["epoch"].as_u64(), status["parts"].as_u64()), (Some(2), Some(0)));

    let text = once(store_dir.path(), replica_dir.path(), &[]);
    text.assert_success();
    assert!(text.stdout_text().starts_with(&format!("replicated through seq {last}")));
}

#[test]
fn a_run_beside_the_writer_ships_as_it_writes_and_stops_on_sigterm() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = harness::open(store_dir.path());
    replica::session(&store, "t", 1);
    let child = Command::new(&*FACTLOG)
        .args(["replicate", arg(store_dir.path()), "--to", &url(replica_dir.path())])
        .args(["--interval-ms", "200", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start factlog replicate");
    let remote = DirRemote::create(&url(replica_dir.path()), replica_dir.path()).expect("remote");
    for round in 0..3 {
        replica::session(&store, "t", 2);
        // The replica catches up with what the store's files hold (it looks every 100 ms).
        let local = replica::segments_of(store_dir.path());
        let deadline = Instant::now() + Duration::from_secs(120);
        while replica::segments_in(&remote) != local {
            assert!(Instant::now() < deadline, "round {round}: the replica never caught up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let last = harness::last_seq(&store);
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(kill.expect("kill").success());
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let status: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(status["shipped_seq"], last);
    // The lease was given back: the next run needs no --takeover.
    store.close().expect("close");
    once(store_dir.path(), replica_dir.path(), &[]).assert_success();
}

#[test]
fn refusals_say_what_to_do() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    written_store(store_dir.path(), 1);

    let relative =
        factlog(&["replicate", arg(store_dir.path()), "--to", "file://x", "--once"], b"");
    relative.assert_one_line_error(1);
    assert!(relative.stderr.contains("absolute path"), "{}", relative.stderr);
    // A bucket-less object-store URL: refused before any request (no network here).
    let s3 = factlog(&["replicate", arg(store_dir.path()), "--to", "s3://", "--once"], b"");
    s3.assert_one_line_error(1);
    assert!(s3.stderr.contains("bucket"), "{}", s3.stderr);

    let no_store = tempfile::tempdir().unwrap();
    once(no_store.path(), replica_dir.path(), &[]).assert_one_line_error(1);

    // A lease left by a run that did not stop cleanly: refused, then taken over.
    let remote = DirRemote::create(&url(replica_dir.path()), replica_dir.path()).expect("remote");
    factlog::replica::ensure_identity(&remote, 1, Path::new("/elsewhere"), 7).expect("identity");
    factlog::replica::lease::take(&remote, Path::new("/elsewhere"), false, 7).expect("a lease");
    let held = once(store_dir.path(), replica_dir.path(), &[]);
    held.assert_one_line_error(1);
    assert!(
        held.stderr.contains("--takeover") && held.stderr.contains("/elsewhere"),
        "{}",
        held.stderr
    );
    let taken = once(store_dir.path(), replica_dir.path(), &["--takeover"]);
    assert_eq!(taken.code, Some(0), "{taken:?}");
    assert!(taken.stderr.contains("took the lease") && taken.stderr.contains("recorded"));

    // Another store's replica: exit 3, nothing shipped.
    let other = tempfile::tempdir().unwrap();
    written_store(other.path(), 1);
    let diverged = once(other.path(), replica_dir.path(), &[]);
    diverged.assert_one_line_error(3);
    assert!(diverged.stderr.contains("new location"), "{}", diverged.stderr);
}

#[test]
fn a_run_whose_lease_is_taken_over_ends_and_says_so() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = harness::open(store_dir.path());
    replica::session(&store, "t", 1);
    let mut child = Command::new(&*FACTLOG)
        .args(["replicate", arg(store_dir.path()), "--to", &url(replica_dir.path())])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start factlog replicate");
    let remote = DirRemote::create(&url(replica_dir.path()), replica_dir.path()).expect("remote");
    let local = replica::segments_of(store_dir.path());
    let deadline = Instant::now() + Duration::from_secs(120);
    while replica::segments_in(&remote) != local {
        assert!(Instant::now() < deadline, "the replica never caught up");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another run takes the lease over; the store grows, so the first run tries to ship.
    factlog::replica::lease::take(&remote, Path::new("/elsewhere"), true, 9).expect("takeover");
    replica::session(&store, "t", 1);
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the run whose lease was lost never ended");
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("taken over"), "{stderr}");
    store.close().expect("close");
}

#[test]
fn info_shows_how_far_each_replica_is_behind() {
    let (store_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let info = |dir: &Path| {
        let run = factlog(&["info", arg(dir), "--json"], b"");
        run.assert_success();
        let info: Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
        schema::assert_valid("info.json", &info);
        info
    };
    let last = written_store(store_dir.path(), 2);
    assert_eq!(info(store_dir.path())["replicas"], Value::Array(vec![]), "never replicated");
    once(store_dir.path(), replica_dir.path(), &[]).assert_success();
    let replicas = info(store_dir.path())["replicas"].clone();
    assert_eq!(replicas.as_array().map(Vec::len), Some(1), "{replicas}");
    let shipped = &replicas[0];
    assert_eq!((shipped["shipped_seq"].as_u64(), shipped["lag"].as_u64()), (Some(last), Some(0)));
    assert_eq!(shipped["running"], false, "--once stopped cleanly: {shipped}");
    assert_eq!(shipped["location"], url(replica_dir.path()));

    // The store grows; the replica does not until the next run.
    let store = harness::open(store_dir.path());
    replica::session(&store, "u", 1);
    let grown = harness::last_seq(&store);
    store.close().expect("close");
    let behind = info(store_dir.path())["replicas"][0].clone();
    assert_eq!(behind["lag"].as_u64(), Some(grown - last), "{behind}");
    let text = factlog(&["info", arg(store_dir.path())], b"");
    text.assert_success();
    let line = format!(
        "replica {} ({}): holds seqs through {last}, {} records behind this store (stopped",
        url(replica_dir.path()),
        shipped["replica_id"].as_str().expect("an id"),
        grown - last
    );
    assert!(text.stdout_text().contains(&line), "{}", text.stdout_text());

    // A file cut by a crash is named, not guessed at.
    let id = shipped["replica_id"].as_str().expect("an id");
    std::fs::write(store_dir.path().join("replicas").join(format!("{id}.json")), b"").unwrap();
    let cut = info(store_dir.path())["replicas"][0].clone();
    assert!(cut["unreadable"].as_str().is_some_and(|r| r.contains("cut by a crash")), "{cut}");
}
