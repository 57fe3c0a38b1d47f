//! Proves that a flood of oversized request lines cannot take a served store's memory
//! (issue 25, item 5): 63 connections of a `factlog serve` process (every slot but a writer's)
//! each send one line at once, of three kinds: a request just under `SERVER_LINE_BYTES_MAX`
//! (16 MiB) holding one long string, a line over it, and a 4 MiB batch of two million tiny
//! values (a JSON tree a hundred times its size). Meanwhile a normal client appends synced
//! events. Then:
//! - every flooding connection got `LIMIT_EXCEEDED` naming what to do (or `SERVER_BUSY` at
//!   its hello), and the writer's every append was acknowledged, none refused;
//! - the server's peak resident memory (`VmHWM`) stayed within the bound of
//!   `format-spec/server.md`, "Memory", above its resident memory before the flood;
//! - once the server has ended every flooding connection (it serves only the writer and the
//!   client that asks), its resident memory is back within `RETURNED_BYTES_MAX` of what it
//!   was before;
//! - after the server stops, every acknowledged event is in the store.
//!
//! Bytes, never time: the waits are for conditions, bounded only by a generous patience.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::server::{Served, store_dir};
use factlog::client::Client;
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::limits::{
    SERVER_CLIENTS_MAX, SERVER_INPUT_BUFFER_BYTES, SERVER_LINE_BYTES_MAX,
    SERVER_REPLY_BUFFER_BYTES, SERVER_REQUEST_BYTES_PER_CLIENT, SERVER_REQUEST_BYTES_SHARED,
};
use factlog::{AppendOptions, Appended, Durability, Seq, Store, StoreOptions};
use serde_json::Value;

const MIB: u64 = 1024 * 1024;

/// Every slot but the writer's.
const FLOODERS: usize = SERVER_CLIENTS_MAX - 1;

/// The bound of `format-spec/server.md`, "Memory": each connection's own allowance and its
/// input and reply buffers, and the budget the connections share.
const REQUESTS_BYTES_MAX: u64 = (SERVER_CLIENTS_MAX
    * (SERVER_REQUEST_BYTES_PER_CLIENT + SERVER_INPUT_BUFFER_BYTES + SERVER_REPLY_BUFFER_BYTES)
    + SERVER_REQUEST_BYTES_SHARED) as u64;

/// What the bound does not count: the stack pages and arena bookkeeping of a thread for each
/// connection (measured at about 100 KiB a thread in a debug build), 512 KiB a connection; the
/// event loops' connections have no thread, one moved to a thread of its own has.
const THREADS_BYTES_MAX: u64 = SERVER_CLIENTS_MAX as u64 * 512 * 1024;

/// What may stay resident once the flood is gone: glibc keeps up to 128 KiB free at the top
/// of each arena (at most 8 per core), the first pages of the arenas the connection threads
/// created, and a little of each freed thread stack; the store grew by the writer's events.
/// An eighth of the shared budget, which must have gone back whole.
const RETURNED_BYTES_MAX: u64 = (SERVER_REQUEST_BYTES_SHARED / 8) as u64;

/// Long enough for any scheduler: the waits below are for a condition, not a measurement.
const PATIENCE: Duration = Duration::from_secs(120);

/// A field of `/proc/PID/status` in bytes (`VmRSS`, `VmHWM`), or a count (`Threads`).
fn status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = text
        .lines()
        .find(|line| line.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let value: u64 = line.split_whitespace().nth(1).expect("a value").parse().expect("a number");
    if line.ends_with("kB") { value * 1024 } else { value }
}

/// The connections the server serves, the one asking included (`Client::clients`).
fn connections(dir: &std::path::Path) -> u64 {
    let mut client = Client::connect(dir).expect("connect to count");
    client.clients().expect("the count of connections").0
}

/// The three lines of the flood.
fn lines() -> [Arc<Vec<u8>>; 3] {
    // One request of exactly SERVER_LINE_BYTES_MAX bytes, newline included: its body is too
    // large for an event, so the store refuses it if the server runs it at all.
    let head = br#"{"task":"flood","type":"user/message","text":""#;
    let tail = b"\"}\n";
    let mut under = head.to_vec();
    under.resize(SERVER_LINE_BYTES_MAX - tail.len(), b'x');
    under.extend_from_slice(tail);
    assert_eq!(under.len(), SERVER_LINE_BYTES_MAX);
    // No newline within the limit: the server answers and disconnects.
    let mut over = vec![b'x'; SERVER_LINE_BYTES_MAX + 1];
    over.push(b'\n');
    // Two million values of two bytes each: more than a gigabyte as a tree.
    let mut dense = br#"{"op":"batch","task":"flood","events":["#.to_vec();
    for _ in 0..2 * 1024 * 1024 {
        dense.extend_from_slice(b"0,");
    }
    dense.extend_from_slice(b"0]}\n");
    [Arc::new(under), Arc::new(over), Arc::new(dense)]
}

/// How one flooding connection was answered.
#[derive(Debug)]
enum Answer {
    /// `SERVER_BUSY` at its hello: no slot was free.
    Busy,
    /// The reply to its line.
    Refused(Value),
}

fn flood(dir: &std::path::Path, line: &[u8], start: &Barrier) -> Answer {
    let mut stream = UnixStream::connect(factlog::server::socket_path(dir)).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).expect("a read timeout");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    stream.write_all(b"{\"hello\":\"factlog\",\"version\":1}\n").expect("hello");
    let mut hello = String::new();
    reader.read_line(&mut hello).expect("a hello reply");
    let hello: Value = serde_json::from_str(&hello).expect("JSON");
    start.wait();
    if hello["error"] == "SERVER_BUSY" {
        return Answer::Busy;
    }
    assert_eq!(hello["hello"], "factlog", "{hello}");
    // A line over the limit is answered, and the connection closed, before it is all sent.
    let _ = stream.write_all(line);
    let mut reply = String::new();
    reader.read_line(&mut reply).expect("a reply to the line");
    Answer::Refused(serde_json::from_str(&reply).expect("a JSON reply"))
}

fn message(n: usize) -> Body {
    Body::UserMessage(UserMessage { text: format!("w{n}"), extra: Default::default() })
}

#[test]
fn a_flood_of_oversized_lines_stays_within_the_bound_and_its_memory_returns() {
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &[]);
    let pid = served.child.id();
    let synced = AppendOptions { durability: Some(Durability::Synced), ..Default::default() };
    let mut writer = Client::connect(&dir).expect("connect the writer");
    let mut acknowledged: Vec<(Seq, usize)> = Vec::new();
    for n in 0..20 {
        match writer.append("writer", &message(n), synced) {
            Ok(Appended::Written { seq, .. }) => acknowledged.push((seq, n)),
            other => panic!("the writer's append {n}: {other:?}"),
        }
    }
    let before = status(pid, "VmRSS");

    // The writer goes on while the flood runs, and until it is over.
    let flood_over = Arc::new(AtomicBool::new(false));
    let writing = {
        let flood_over = Arc::clone(&flood_over);
        std::thread::spawn(move || {
            let mut n = acknowledged.len();
            while !flood_over.load(Ordering::Acquire) || n < 60 {
                match writer.append("writer", &message(n), synced) {
                    Ok(Appended::Written { seq, .. }) => acknowledged.push((seq, n)),
                    other => panic!("the writer's append {n} during the flood: {other:?}"),
                }
                n += 1;
            }
            (writer, acknowledged)
        })
    };
    let lines = lines();
    let start = Arc::new(Barrier::new(FLOODERS));
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|i| {
            let (dir, start) = (dir.clone(), Arc::clone(&start));
            let line = Arc::clone(&lines[i % lines.len()]);
            std::thread::spawn(move || flood(&dir, &line, &start))
        })
        .collect();
    let answers: Vec<Answer> =
        flooders.into_iter().map(|f| f.join().expect("a flooding client")).collect();
    drop(lines);
    let peak = status(pid, "VmHWM");

    // Every flooding connection is gone from the server before the memory is read again;
    // the writer's connection stays (and the one that asks).
    let deadline = Instant::now() + PATIENCE;
    loop {
        let served = connections(&dir);
        if served <= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{served} connections still served");
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = status(pid, "VmRSS");
    flood_over.store(true, Ordering::Release);
    let (writer, acknowledged) = writing.join().expect("the writer");
    drop(writer);

    eprintln!(
        "resident before {} MiB, peak {} MiB, after {} MiB; bound {} MiB above before",
        before / MIB,
        peak / MIB,
        after / MIB,
        (REQUESTS_BYTES_MAX + THREADS_BYTES_MAX) / MIB
    );
    assert!(
        peak <= before + REQUESTS_BYTES_MAX + THREADS_BYTES_MAX,
        "peak resident {} MiB, {} MiB before the flood: above the bound of {} MiB for requests",
        peak / MIB,
        before / MIB,
        REQUESTS_BYTES_MAX / MIB
    );
    assert!(
        after <= before + RETURNED_BYTES_MAX,
        "resident {} MiB after the flood left, {} MiB before it: the memory did not return",
        after / MIB,
        before / MIB
    );

    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for answer in &answers {
        let reply = match answer {
            Answer::Busy => {
                *seen.entry("SERVER_BUSY at hello".to_owned()).or_default() += 1;
                continue;
            }
            Answer::Refused(reply) => reply,
        };
        assert_eq!(reply["error"], "LIMIT_EXCEEDED", "{reply}");
        let text = reply["message"].as_str().expect("a message");
        let what_to_do = ["send it again", "split it", "make it smaller"];
        assert!(what_to_do.iter().any(|says| text.contains(says)), "{reply}");
        let words: String = text.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
        *seen.entry(words).or_default() += 1;
    }
    eprintln!("the flooding connections were answered: {seen:?}");
    // The flood reached the server: most flooders got in and sent their line (a test where
    // every one was turned away at the door would prove nothing about the bound).
    let refused = answers.iter().filter(|a| matches!(a, Answer::Refused(_))).count();
    assert!(refused >= FLOODERS / 2, "only {refused} of {FLOODERS} flooders reached the server");

    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    let store = Store::open_read_only(&dir, StoreOptions::new()).expect("reopen");
    let stored: std::collections::HashMap<u64, String> = store
        .events(Seq(1))
        .expect("events")
        .filter_map(|event| {
            let event = event.expect("an event");
            match event.body {
                Body::UserMessage(message) => Some((event.seq.0, message.text)),
                _ => None,
            }
        })
        .collect();
    assert!(acknowledged.len() >= 60);
    for (seq, n) in &acknowledged {
        assert_eq!(stored.get(&seq.0), Some(&format!("w{n}")), "acknowledged seq {} lost", seq.0);
    }
}
