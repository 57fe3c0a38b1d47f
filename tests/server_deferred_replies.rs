//! A served connection's `Synced` append hands its reply to the server's deliverer instead of
//! sleeping through the group commit (`format-spec/server.md`, "Group commit"). The promises
//! stay those of a reply written by the connection itself:
//! - the reply comes only once the record is durable, and no other connection's reply tells
//!   of the record before then (a read of its task waits too);
//! - a failed sync is answered with the store's error, never with the written reply;
//! - a connection's replies stay in request order when the client sends on without waiting.

use crate::common;
use crate::common::faulty_fs;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use common::server::store_dir;
use factlog::client::Client;
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::server::ServeOptions;
use factlog::{AppendOptions, Durability, Options, Store, StoreOptions};
use faulty_fs::{Faults, FaultyFs};
use serde_json::Value;

/// A liveness bound, never a timing claim.
const PATIENCE: Duration = Duration::from_secs(60);
/// How long a reply that must not come yet is watched for (a reply that came early would
/// be seen; a slow machine can only make this pass, never fail).
const NOT_YET: Duration = Duration::from_millis(300);

fn synced() -> AppendOptions {
    AppendOptions { durability: Some(Durability::Synced), ..Default::default() }
}

fn message(text: &str) -> Body {
    Body::UserMessage(UserMessage { text: text.into(), extra: Default::default() })
}

fn served_on(fs: &FaultyFs) -> (tempfile::TempDir, std::path::PathBuf, Store) {
    let (temp, dir) = store_dir();
    let options = StoreOptions::new().log(Options::new().fs(Arc::new(fs.clone())));
    let store = Store::open(&dir, options).expect("open");
    (temp, dir, store)
}

/// Lets every held sync go when dropped, also when the test fails.
struct Release(Arc<Faults>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.hold_syncs.store(false, Ordering::SeqCst);
    }
}

/// A served store on `fs` whose task `t` was taken over (its first append synced), and a raw
/// connection to it: its input and its replies.
struct RawClient {
    _temp: tempfile::TempDir,
    server: factlog::server::Server,
    input: UnixStream,
    replies: BufReader<UnixStream>,
    store: Store,
}

fn raw_client_after_a_first_append(fs: &FaultyFs) -> RawClient {
    let (temp, dir, store) = served_on(fs);
    let server = store.serve(ServeOptions::new()).expect("serve");
    Client::connect(&dir)
        .expect("connect")
        .append("t", &message("first"), synced())
        .expect("first append");
    let input = UnixStream::connect(server.socket_path()).expect("connect");
    let replies = BufReader::new(input.try_clone().expect("clone"));
    RawClient { _temp: temp, server, input, replies, store }
}

/// Reads `count` reply lines on a thread of its own, each sent as it comes (so that a test can
/// watch for a reply that must not come yet).
fn read_replies(
    mut replies: BufReader<UnixStream>,
    count: usize,
) -> (std::thread::JoinHandle<()>, mpsc::Receiver<String>) {
    let (read, lines) = mpsc::channel();
    let reading = std::thread::spawn(move || {
        for _ in 0..count {
            let mut line = String::new();
            replies.read_line(&mut line).expect("reply");
            read.send(line).expect("send");
        }
    });
    (reading, lines)
}

fn wait_until(condition: impl Fn() -> bool, what: &str) {
    let start = std::time::Instant::now();
    while !condition() {
        assert!(start.elapsed() < PATIENCE, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_synced_reply_and_a_read_of_its_task_wait_for_the_sync() {
    let fs = FaultyFs::new();
    let faults = Arc::clone(&fs.faults);
    let (_temp, dir, store) = served_on(&fs);
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut writer = Client::connect(&dir).expect("connect");
    let mut reader = Client::connect(&dir).expect("connect");
    // The task's first append takes it over (a sync of its own), before the stall.
    writer.append("t", &message("first"), synced()).expect("first append");
    let mut follower = Client::connect(&dir).expect("connect");
    let next = store.log().last_seq().expect("a record").0 + 1;
    let (paged, page) = mpsc::channel();
    let following = std::thread::spawn(move || {
        paged.send(follower.follow(next, Some("t"), PATIENCE)).expect("send");
    });
    *faults.hold_suffix.lock() = ".seg".to_owned();
    faults.hold_syncs.store(true, Ordering::SeqCst);
    let release = Release(Arc::clone(&faults));
    let (wrote, written) = mpsc::channel();
    let appending = std::thread::spawn(move || {
        let appended = writer.append("t", &message("second"), synced());
        wrote.send(appended).expect("send");
    });
    // The second record is written (it is in the task's state in the serving process) and
    // a sync is held: not another file's sync that came first (a segment prepared ahead).
    wait_until(
        || {
            faults.held.load(Ordering::SeqCst) > 0
                && store.task_revision("t").is_some_and(|(revision, _)| revision == 2)
        },
        "the second append to be written and its group commit to stall",
    );
    let (read, state) = mpsc::channel();
    let reading = std::thread::spawn(move || {
        read.send(reader.revision("t")).expect("send");
    });
    assert!(written.recv_timeout(NOT_YET).is_err(), "a synced reply came before its sync");
    assert!(state.recv_timeout(NOT_YET).is_err(), "a read told of a record before its sync");
    assert!(page.recv_timeout(NOT_YET).is_err(), "a follow told of a record before its sync");
    drop(release);
    let appended = written.recv_timeout(PATIENCE).expect("the reply after the sync");
    let appended = appended.expect("appended");
    let factlog::Appended::Written { seq, revision } = appended else {
        panic!("not written: {appended:?}")
    };
    assert_eq!(revision, 2);
    assert!(store.log().durable_seq().is_some_and(|durable| durable >= seq), "acked undurable");
    assert_eq!(state.recv_timeout(PATIENCE).expect("the read").expect("revision"), 2);
    let (events, _) = page.recv_timeout(PATIENCE).expect("the page").expect("follow");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["seq"], seq.0);
    following.join().expect("following thread");
    appending.join().expect("appending thread");
    reading.join().expect("reading thread");
    server.stop().expect("stop");
}

#[test]
fn a_failed_group_commit_is_answered_with_the_error() {
    let fs = FaultyFs::new();
    let faults = Arc::clone(&fs.faults);
    let (_temp, dir, store) = served_on(&fs);
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut client = Client::connect(&dir).expect("connect");
    client.append("t", &message("first"), synced()).expect("first append");
    *faults.fail_sync_suffix.lock() = ".seg".to_owned();
    faults.fail_sync.store(true, Ordering::SeqCst);
    let failed = client.append("t", &message("second"), synced());
    let error = failed.expect_err("a failed sync acknowledged");
    assert_eq!(error.code(), Some("POISONED"), "{error}");
    assert!(error.to_string().contains("fdatasync failed"), "{error}");
    assert!(faults.failed_syncs.load(Ordering::SeqCst) > 0);
    faults.fail_sync.store(false, Ordering::SeqCst);
    drop(server);
}

/// Reads the next reply: the store's `POISONED` error for request `id`, covering `covers`
/// lines (`what` they are).
fn assert_poisoned_reply(replies: &mut BufReader<UnixStream>, id: u64, covers: u64, what: &str) {
    let mut line = String::new();
    replies.read_line(&mut line).expect("a reply");
    let reply: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(reply["error"], "POISONED", "{line}");
    assert_eq!(reply["id"], id, "{line}");
    assert_eq!(reply["covers"], covers, "{what}: {line}");
}

#[test]
fn a_failed_group_commit_answers_the_lines_its_reply_would_have_covered() {
    let fs = FaultyFs::new();
    let faults = Arc::clone(&fs.faults);
    let RawClient { _temp, server, mut input, mut replies, .. } =
        raw_client_after_a_first_append(&fs);
    let mut lines =
        String::from("{\"hello\":\"factlog\",\"version\":1,\"acks\":\"durable-only\"}\n");
    // Fragments get no reply of their own: the synced append's reply would cover them.
    for text in ["a", "b", "c"] {
        lines.push_str(&format!(
            "{{\"task\":\"t\",\"type\":\"assistant/delta\",\"text\":\"{text}\"}}\n"
        ));
    }
    lines.push_str(
        "{\"id\":7,\"task\":\"t\",\"type\":\"user/message\",\"text\":\"m\",\
         \"durability\":\"synced\"}\n",
    );
    *faults.fail_sync_suffix.lock() = ".seg".to_owned();
    faults.fail_sync.store(true, Ordering::SeqCst);
    input.write_all(lines.as_bytes()).expect("send");
    let mut line = String::new();
    replies.read_line(&mut line).expect("hello reply");
    assert_poisoned_reply(&mut replies, 7, 4, "the fragments and the append");
    faults.fail_sync.store(false, Ordering::SeqCst);
    drop(input);
    drop(server);
}

/// With the store's syncs held, a client sends a synced append and a read of its task in one
/// write: the read's line is waiting when the append's reply is handed over, so the
/// connection takes that reply back and writes it first, after the sync.
#[test]
fn a_reply_taken_back_for_a_waiting_line_still_waits_for_its_sync_and_comes_first() {
    let fs = FaultyFs::new();
    let faults = Arc::clone(&fs.faults);
    let RawClient { _temp, server, mut input, mut replies, .. } =
        raw_client_after_a_first_append(&fs);
    input.write_all(b"{\"hello\":\"factlog\",\"version\":1}\n").expect("hello");
    let mut line = String::new();
    replies.read_line(&mut line).expect("hello reply");
    *faults.hold_suffix.lock() = ".seg".to_owned();
    faults.hold_syncs.store(true, Ordering::SeqCst);
    let release = Release(Arc::clone(&faults));
    input
        .write_all(
            b"{\"id\":1,\"task\":\"t\",\"type\":\"user/message\",\"text\":\"m\",\
              \"durability\":\"synced\"}\n{\"id\":2,\"op\":\"revision\",\"task\":\"t\"}\n",
        )
        .expect("send both lines at once");
    let (reading, lines) = read_replies(replies, 2);
    wait_until(|| faults.held.load(Ordering::SeqCst) > 0, "the group commit to stall");
    assert!(lines.recv_timeout(NOT_YET).is_err(), "a reply came before the sync");
    drop(release);
    for id in [1, 2] {
        let line = lines.recv_timeout(PATIENCE).expect("a reply after the sync");
        let reply: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(reply["id"], id, "replies out of order: {line}");
        assert_eq!(reply["revision"], 2, "{line}");
    }
    reading.join().expect("reading thread");
    drop(input);
    server.stop().expect("stop");
}

#[test]
fn replies_stay_in_order_when_the_client_sends_on_without_waiting() {
    let (_temp, dir) = store_dir();
    let store = Store::open(&dir, StoreOptions::new()).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let stream = UnixStream::connect(server.socket_path()).expect("connect");
    let mut replies = BufReader::new(stream.try_clone().expect("clone"));
    let mut input = stream;
    let mut lines = String::from("{\"hello\":\"factlog\",\"version\":1}\n");
    for round in 0..20 {
        let (append, read) = (2 * round + 1, 2 * round + 2);
        lines.push_str(&format!(
            "{{\"id\":{append},\"task\":\"t\",\"type\":\"user/message\",\"text\":\"m\",\
             \"durability\":\"synced\"}}\n{{\"id\":{read},\"op\":\"revision\",\"task\":\"t\"}}\n"
        ));
    }
    input.write_all(lines.as_bytes()).expect("send every line at once");
    let mut line = String::new();
    replies.read_line(&mut line).expect("hello reply");
    for round in 0..20u64 {
        for (id, key) in [(2 * round + 1, "revision"), (2 * round + 2, "revision")] {
            line.clear();
            replies.read_line(&mut line).expect("reply");
            let reply: Value = serde_json::from_str(&line).expect("JSON");
            assert_eq!(reply["id"], id, "replies out of order: {line}");
            assert_eq!(reply[key], round + 1, "{line}");
        }
    }
    drop(input);
    server.stop().expect("stop");
    assert_eq!(store.task_state("t").expect("t").revision, 20);
}

/// The hello of a raw connection with durable-only acknowledgements, and its reply read.
fn durable_only_hello(input: &mut UnixStream, replies: &mut BufReader<UnixStream>) {
    input
        .write_all(b"{\"hello\":\"factlog\",\"version\":1,\"acks\":\"durable-only\"}\n")
        .expect("hello");
    let mut line = String::new();
    replies.read_line(&mut line).expect("hello reply");
}

/// A synced append, fragments, a flushed append and a second synced append, sent at once.
const STREAMED: &[u8] = b"{\"id\":1,\"task\":\"t\",\"type\":\"tool/call\",\"call_id\":\"c1\",\
      \"tool\":\"fetch\",\"effect\":\"read_only\"}\n\
      {\"task\":\"t\",\"type\":\"assistant/delta\",\"text\":\"a\"}\n\
      {\"task\":\"t\",\"type\":\"assistant/delta\",\"text\":\"b\"}\n\
      {\"id\":2,\"task\":\"t\",\"type\":\"user/message\",\"text\":\"m\"}\n\
      {\"id\":3,\"task\":\"t\",\"type\":\"tool/result\",\"call_id\":\"c1\",\"outcome\":\"ok\"}\n";

/// Holds the store's syncs and sends `lines` at once: the syncs go when the result is dropped.
fn stream_with_syncs_held(faults: &Arc<Faults>, input: &mut UnixStream, lines: &[u8]) -> Release {
    *faults.hold_suffix.lock() = ".seg".to_owned();
    faults.hold_syncs.store(true, Ordering::SeqCst);
    let release = Release(Arc::clone(faults));
    input.write_all(lines).expect("send every line at once");
    release
}

/// Waits until task `t` is at `revision` (every line sent is in it) while a sync is held:
/// none of them waited for the first one's sync.
fn wait_for_every_line(faults: &Faults, store: &Store, revision: u64) {
    wait_until(
        || {
            faults.held.load(Ordering::SeqCst) > 0
                && store.task_revision("t").is_some_and(|(at, _)| at == revision)
        },
        "the lines after a synced append to run while its sync is held",
    );
}

/// A client that streams its lines without waiting for their replies (as `factlog emit`
/// does over a served store): the lines after a synced append run while its reply waits
/// for its sync, and their replies come after it, in order, once each may.
#[test]
fn lines_sent_on_run_while_a_reply_waits_for_its_sync_and_are_answered_after_it() {
    let fs = FaultyFs::new();
    let faults = Arc::clone(&fs.faults);
    let RawClient { _temp, server, mut input, mut replies, store } =
        raw_client_after_a_first_append(&fs);
    durable_only_hello(&mut input, &mut replies);
    let release = stream_with_syncs_held(&faults, &mut input, STREAMED);
    let (reading, lines) = read_replies(replies, 3);
    wait_for_every_line(&faults, &store, 6);
    assert!(lines.recv_timeout(NOT_YET).is_err(), "a reply came before the sync");
    drop(release);
    let expected = [(1, 1, 2), (2, 3, 5), (3, 1, 6)];
    for (id, covers, revision) in expected {
        let line = lines.recv_timeout(PATIENCE).expect("a reply after the sync");
        let reply: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(reply["id"], id, "replies out of order: {line}");
        assert_eq!(reply["covers"], covers, "{line}");
        assert_eq!(reply["revision"], revision, "{line}");
    }
    let durable = store.log().durable_seq().expect("durable").0;
    assert!(durable >= store.log().last_seq().expect("a record").0, "a reply before its sync");
    reading.join().expect("reading thread");
    drop(input);
    server.stop().expect("stop");
}

/// The same stream whose group commit fails: the first reply that waited for it is answered
/// with the store's error, covering its lines, and the stream ends; no later reply tells of a
/// record written after it.
#[test]
fn a_failed_group_commit_behind_lines_sent_on_answers_the_first_and_ends_the_stream() {
    let fs = FaultyFs::new();
    let faults = Arc::clone(&fs.faults);
    let RawClient { _temp, server, mut input, mut replies, store } =
        raw_client_after_a_first_append(&fs);
    durable_only_hello(&mut input, &mut replies);
    let release = stream_with_syncs_held(&faults, &mut input, STREAMED);
    wait_for_every_line(&faults, &store, 6);
    *faults.fail_sync_suffix.lock() = ".seg".to_owned();
    faults.fail_sync.store(true, Ordering::SeqCst);
    drop(release);
    assert_poisoned_reply(&mut replies, 1, 1, "its own line");
    let mut line = String::new();
    let read = replies.read_line(&mut line).expect("the end of the stream");
    assert_eq!(read, 0, "a reply after the failed one: {line}");
    faults.fail_sync.store(false, Ordering::SeqCst);
    drop(input);
    drop(server);
}

/// A refusal among streamed lines waits behind the reply that waits for its sync, and its
/// loop does not wait for that sync: the lines after it run while the sync is held. The
/// fragment before it, whose reply was skipped, is covered first, once it is durable.
#[test]
fn a_refusal_among_lines_sent_on_waits_behind_the_synced_reply_without_stopping_its_loop() {
    let fs = FaultyFs::new();
    let faults = Arc::clone(&fs.faults);
    let RawClient { _temp, server, mut input, mut replies, store } =
        raw_client_after_a_first_append(&fs);
    durable_only_hello(&mut input, &mut replies);
    let lines = b"{\"id\":1,\"task\":\"t\",\"type\":\"tool/call\",\"call_id\":\"c1\",\
          \"tool\":\"fetch\",\"effect\":\"read_only\"}\n\
          {\"task\":\"t\",\"type\":\"assistant/delta\",\"text\":\"x\"}\n\
          {\"id\":2,\"task\":\"t\",\"type\":\"no/such\"}\n\
          {\"task\":\"t\",\"type\":\"assistant/delta\",\"text\":\"a\"}\n\
          {\"id\":3,\"task\":\"t\",\"type\":\"user/message\",\"text\":\"m\"}\n";
    let release = stream_with_syncs_held(&faults, &mut input, lines);
    let (reading, lines) = read_replies(replies, 4);
    wait_for_every_line(&faults, &store, 5);
    assert!(lines.recv_timeout(NOT_YET).is_err(), "a reply came before the sync");
    drop(release);
    // The covering reply answers the fragment before the refusal; the last reply the
    // fragment after it and its own line.
    let expected = [(Value::from(1), "revision", 1), (Value::Null, "durability", 1)];
    let expected =
        expected.into_iter().chain([(Value::from(2), "error", 1), (3.into(), "revision", 2)]);
    for (id, key, covers) in expected {
        let line = lines.recv_timeout(PATIENCE).expect("a reply after the sync");
        let reply: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(reply["id"], id, "replies out of order: {line}");
        assert!(reply.get(key).is_some(), "{line}");
        assert_eq!(reply["covers"], covers, "{line}");
    }
    reading.join().expect("reading thread");
    drop(input);
    server.stop().expect("stop");
}
