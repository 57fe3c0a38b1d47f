//! A `factlog append` child killed with SIGKILL mid-stream loses no acknowledged record: after
//! reopening, every seq it printed for `synced` and `flushed` is present with the exact bytes
//! sent, and the log is an exact prefix of the input (for `buffered` too, which only promises
//! the prefix). Proved by feeding a real child from a writer thread, collecting its acks, and
//! killing it after a few hundred of them, over several rounds (`FACTLOG_SIGKILL_ROUNDS`,
//! default 5).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{FACTLOG, arg, temp_log};
use factlog::{Log, Options, Seq};

/// Longest wait for the next acknowledgement before the test gives up on a hung child.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a `buffered` child keeps appending after its acks reached the target.
const BUFFERED_RUN_TIME: Duration = Duration::from_millis(50);

/// The writer stops after this many lines even if the child never stops reading.
const LINES_MAX: u64 = 10_000_000;

fn rounds() -> u64 {
    std::env::var("FACTLOG_SIGKILL_ROUNDS")
        .ok()
        .map_or(5, |value| value.parse().expect("FACTLOG_SIGKILL_ROUNDS is a number"))
}

/// The payload of line `index` (0-based, so it should get seq `index + 1`): varied lengths so
/// frames land at many offsets, and an occasional byte that is not UTF-8.
fn payload(round: u64, index: u64) -> Vec<u8> {
    let mut bytes = format!("round {round} line {index:08} ").into_bytes();
    let padding = usize::try_from((index * 37 + round * 11) % 301).expect("small");
    bytes.extend(std::iter::repeat_n(b'a' + u8::try_from(index % 26).expect("small"), padding));
    if index % 7 == 3 {
        bytes.push(0xfe);
    }
    bytes
}

/// Acknowledgements to wait for before the kill: a few hundred, different in every round.
fn kill_after(round: u64) -> u64 {
    200 + (round * 137) % 400
}

struct Outcome {
    acked: u64,
    sent: u64,
}

/// Runs one child until `kill_after` acks, kills it, and returns what it acknowledged.
fn run_and_kill(dir: &std::path::Path, durability: &str, round: u64) -> Outcome {
    let mut child = Command::new(FACTLOG)
        .args(["append", arg(dir), "--durability", durability])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn factlog append");

    let mut stdin = child.stdin.take().expect("piped stdin");
    // Returns how many lines were handed to the pipe completely; the write that fails after
    // the kill (EPIPE) ends it.
    let writer = std::thread::spawn(move || {
        let mut sent = 0;
        while sent < LINES_MAX {
            let mut line = payload(round, sent);
            line.push(b'\n');
            if stdin.write_all(&line).is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });

    let stdout = child.stdout.take().expect("piped stdout");
    let (ack_sender, acks) = mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let seq = line.parse().unwrap_or_else(|_| panic!("ack is a decimal seq: {line:?}"));
            if ack_sender.send(seq).is_err() {
                break;
            }
        }
    });

    let target = kill_after(round);
    let mut acked = 0;
    while acked < target {
        match acks.recv_timeout(ACK_TIMEOUT) {
            Ok(seq) => {
                assert_eq!(seq, acked + 1, "acks are consecutive seqs from 1");
                acked = seq;
            }
            Err(error) => {
                let _ = child.kill();
                panic!("{durability} round {round}: no ack after {acked} ({error})");
            }
        }
    }
    if durability == "buffered" {
        // Buffered appends outrun the flush delay: without a pause the kill lands before the
        // first background flush and the surviving prefix is always empty.
        std::thread::sleep(BUFFERED_RUN_TIME);
    }
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("wait for the killed child");
    assert!(!status.success(), "the child was killed, not finished: {status}");

    // Acks already in the pipe were printed after their append returned: they count too.
    for seq in &acks {
        assert_eq!(seq, acked + 1, "acks are consecutive seqs from 1");
        acked = seq;
    }
    reader.join().expect("stdout reader");
    let sent = writer.join().expect("stdin writer");
    Outcome { acked, sent }
}

/// Reopens the log (a writer open, which runs recovery) and checks it against what was sent.
fn check_log(dir: &std::path::Path, durability: &str, round: u64, outcome: &Outcome) -> u64 {
    let log = Log::open(dir, Options::new()).expect("the log opens after a SIGKILL");
    let mut count = 0;
    for record in log.read_from(Seq(1)).expect("read_from") {
        let record = record.expect("every record reads back");
        count += 1;
        assert_eq!(record.seq, Seq(count), "{durability} round {round}: gap-free seqs");
        assert!(
            record.payload.as_ref() == payload(round, count - 1).as_slice(),
            "{durability} round {round}: record {count} differs from line {count} sent"
        );
    }
    assert!(count <= outcome.sent, "{durability} round {round}: more records than lines sent");
    if durability != "buffered" {
        assert!(
            count >= outcome.acked,
            "{durability} round {round}: {} acknowledged but only {count} survived",
            outcome.acked
        );
    }
    assert_eq!(log.last_seq().map(|seq| seq.0), (count > 0).then_some(count));
    log.close().expect("close");
    count
}

fn kill_rounds(durability: &str) {
    for round in 0..rounds() {
        let (_temp, dir) = temp_log();
        let outcome = run_and_kill(&dir, durability, round);
        assert!(outcome.acked >= kill_after(round));
        let survived = check_log(&dir, durability, round, &outcome);
        eprintln!(
            "{durability} round {round}: {} acknowledged, {survived} survived, {} sent",
            outcome.acked, outcome.sent
        );
    }
}

#[test]
fn sigkill_loses_no_acknowledged_synced_record() {
    kill_rounds("synced");
}

#[test]
fn sigkill_loses_no_acknowledged_flushed_record() {
    kill_rounds("flushed");
}

#[test]
fn sigkill_leaves_a_prefix_of_buffered_records() {
    kill_rounds("buffered");
}
