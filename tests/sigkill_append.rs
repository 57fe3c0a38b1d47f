//! A `factlog append` child killed with SIGKILL at a random moment loses no acknowledged
//! record, and the log it leaves can be reopened and appended to, again and again. Each tier
//! (`synced`, `flushed`, `buffered`) keeps one log for all its rounds: every round starts a
//! new child on it (which recovers what the previous kill left, and may itself be killed in
//! the middle of that recovery), feeds it lines from a writer thread, collects its acks and
//! kills it after a seeded-random number of acks plus a random delay, or in about one round in
//! ten at a random time after spawning, before any ack. After every kill a read-only open
//! reads the whole log and proves it is exactly the records kept from the earlier rounds
//! followed by a prefix of this round's lines that holds every seq acknowledged for `synced`
//! and `flushed` (`buffered` only promises the prefix); at the end a writer open runs recovery
//! and must keep exactly the same records. 50 rounds per tier by default
//! (`FACTLOG_SIGKILL_ROUNDS` overrides), seeded by `FACTLOG_SIGKILL_SEED`.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{FACTLOG, arg, temp_log};
use factlog::{Log, Options, Seq};

/// Longest wait for the next acknowledgement before the test gives up on a hung child.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);

/// The writer stops after this many lines even if the child never stops reading.
const LINES_MAX: u64 = 10_000_000;

/// Capacity of the log's first segment, created through the library before the first round.
/// The children open with the default options (32 MiB segments), but a segment keeps the
/// capacity it was created with, and every open scans the active segment to its end: a small
/// one keeps each round cheap in a debug build. The default rounds stay well inside it.
const FIRST_SEGMENT_BYTES: u64 = 4 << 20;

/// Rounds per tier unless `FACTLOG_SIGKILL_ROUNDS` says otherwise.
const ROUNDS_DEFAULT: u64 = 50;

fn rounds() -> u64 {
    std::env::var("FACTLOG_SIGKILL_ROUNDS")
        .ok()
        .map_or(ROUNDS_DEFAULT, |value| value.parse().expect("FACTLOG_SIGKILL_ROUNDS is a number"))
}

fn seed() -> u64 {
    std::env::var("FACTLOG_SIGKILL_SEED")
        .ok()
        .map_or(0x5197_C111, |value| value.parse().expect("FACTLOG_SIGKILL_SEED is a number"))
}

/// A tiny deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// The payload of line `index` of round `round` (0-based): varied lengths so frames land at
/// many offsets, and an occasional byte that is not UTF-8.
fn payload(round: u64, index: u64) -> Vec<u8> {
    let mut bytes = format!("round {round} line {index:08} ").into_bytes();
    let padding = usize::try_from((index * 37 + round * 11) % 151).expect("small");
    bytes.extend(std::iter::repeat_n(b'a' + u8::try_from(index % 26).expect("small"), padding));
    if index % 7 == 3 {
        bytes.push(0xfe);
    }
    bytes
}

/// When to kill the child: after `acks` acknowledgements (0: without waiting for any), then
/// after `delay`.
#[derive(Debug, Clone, Copy)]
struct Plan {
    acks: u64,
    delay: Duration,
}

fn plan(rng: &mut Rng, durability: &str) -> Plan {
    if rng.below(10) == 0 {
        // Lands anywhere from process start-up through open and recovery to the first appends.
        return Plan { acks: 0, delay: Duration::from_micros(rng.below(60_000)) };
    }
    let (acks_max, delay_us_max) = match durability {
        "synced" => (40, 4_000),
        // Buffered records reach the file only when the flusher runs, every few ms.
        "buffered" => (200, 6_000),
        _ => (150, 1_000),
    };
    Plan { acks: 1 + rng.below(acks_max), delay: Duration::from_micros(rng.below(delay_us_max)) }
}

struct Outcome {
    acked: u64,
    sent: u64,
}

/// Runs one child on the log in `dir`, which holds `base` records, kills it as `plan` says,
/// and returns what it acknowledged and what it was sent.
fn run_and_kill(dir: &Path, durability: &str, round: u64, base: u64, plan: Plan) -> Outcome {
    let mut child = Command::new(&*FACTLOG)
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

    let mut acked = 0;
    let take_ack = |seq: u64, acked: &mut u64| {
        assert_eq!(seq, base + *acked + 1, "{durability} round {round}: acks continue the log");
        *acked += 1;
    };
    while acked < plan.acks {
        match acks.recv_timeout(ACK_TIMEOUT) {
            Ok(seq) => take_ack(seq, &mut acked),
            Err(error) => {
                let _ = child.kill();
                panic!("{durability} round {round}: no ack after {acked} ({error})");
            }
        }
    }
    std::thread::sleep(plan.delay);
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("wait for the killed child");
    assert!(!status.success(), "the child was killed, not finished: {status}");

    // Acks already in the pipe were printed after their append returned: they count too.
    for seq in &acks {
        take_ack(seq, &mut acked);
    }
    reader.join().expect("stdout reader");
    let sent = writer.join().expect("stdin writer");
    Outcome { acked, sent }
}

/// Every record of the log through `log`, checking that seqs run from 1 without a gap.
fn records_of(log: &Log) -> Vec<Vec<u8>> {
    let mut records = Vec::new();
    for record in log.read_from(Seq(1)).expect("read_from") {
        let record = record.expect("every record reads back");
        assert_eq!(record.seq, Seq(records.len() as u64 + 1), "gap-free seqs");
        records.push(record.payload.to_vec());
    }
    assert_eq!(
        log.last_seq().map(|seq| seq.0),
        (!records.is_empty()).then_some(records.len() as u64)
    );
    records
}

/// Reads the log read-only (changing nothing, so that the next child does the recovery) and
/// checks it is `kept` followed by a prefix of this round's lines holding every ack. Returns
/// how many of this round's lines survived.
fn check_round(
    dir: &Path,
    durability: &str,
    round: u64,
    kept: &[Vec<u8>],
    outcome: &Outcome,
) -> u64 {
    let log = Log::open_read_only(dir, Options::new())
        .unwrap_or_else(|e| panic!("{durability} round {round}: the log does not open: {e}"));
    let records = records_of(&log);
    assert!(
        records.len() >= kept.len() && records[..kept.len()] == *kept,
        "{durability} round {round}: the records kept from earlier rounds changed or vanished"
    );
    let new = &records[kept.len()..];
    for (index, record) in (0..).zip(new) {
        assert!(
            *record == payload(round, index),
            "{durability} round {round}: record {} differs from line {index} sent",
            kept.len() as u64 + index + 1
        );
    }
    let survived = new.len() as u64;
    assert!(survived <= outcome.sent, "{durability} round {round}: more records than lines sent");
    if durability != "buffered" {
        assert!(
            survived >= outcome.acked,
            "{durability} round {round}: {} acknowledged but only {survived} survived",
            outcome.acked
        );
    }
    survived
}

fn kill_rounds(durability: &str, tier_seed: u64) {
    let started = Instant::now();
    let (_temp, dir) = temp_log();
    Log::open(&dir, Options::new().segment_bytes(FIRST_SEGMENT_BYTES))
        .and_then(Log::close)
        .expect("create the log");
    let mut rng = Rng(seed() ^ tier_seed);
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let (mut acked_total, mut before_any_ack) = (0, 0);
    for round in 0..rounds() {
        let plan = plan(&mut rng, durability);
        let outcome = run_and_kill(&dir, durability, round, kept.len() as u64, plan);
        assert!(outcome.acked >= plan.acks);
        let survived = check_round(&dir, durability, round, &kept, &outcome);
        kept.extend((0..survived).map(|index| payload(round, index)));
        acked_total += outcome.acked;
        before_any_ack += u64::from(outcome.acked == 0);
        eprintln!(
            "{durability} round {round}: kill after {} acks + {:?}: {} acknowledged, {survived} \
             survived, {} sent; log holds {}",
            plan.acks,
            plan.delay,
            outcome.acked,
            outcome.sent,
            kept.len()
        );
    }
    // A writer open runs recovery (cutting what the last kill left) and keeps every record.
    let log = Log::open(&dir, Options::new()).expect("the log opens after the last SIGKILL");
    assert!(records_of(&log) == kept, "{durability}: recovery changed the records");
    let segments = log.info().expect("info").segments.len();
    log.close().expect("close");
    println!(
        "{durability}: {} rounds in {:.1?}, {acked_total} acks, {} records kept in {segments} \
         segments, {before_any_ack} kills before any ack",
        rounds(),
        started.elapsed(),
        kept.len()
    );
}

#[test]
fn sigkill_loses_no_acknowledged_synced_record() {
    kill_rounds("synced", 1);
}

#[test]
fn sigkill_loses_no_acknowledged_flushed_record() {
    kill_rounds("flushed", 2);
}

#[test]
fn sigkill_leaves_a_prefix_of_buffered_records() {
    kill_rounds("buffered", 3);
}
