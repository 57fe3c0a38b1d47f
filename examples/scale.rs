//! Open and replay at scale (issue 14): a store with many tasks and many events, a snapshot,
//! then more events of a few tasks after it. Measures, in one run, the time of a writable
//! `Store::open`, a read-only open, `factlog info`, `factlog state --task T` (a task the
//! later events do not touch) and `factlog recover`, on the store and on a copy of it to
//! which those later events were appended (each run on one beside the same run on the other,
//! so that the machine's load weighs on both alike), and the raw replay rate of the same log (every record read and CRC-checked through
//! `Reader::next_ref`, as `bench/benches/replay.rs` does). The increase each command shows per
//! later event is set beside the time a raw scan takes per record: an open may replay what
//! follows its snapshot, but no slower than it can be read.
//!
//! Run: `cargo build --release && cargo run --release --example scale -- [TASKS [EVENTS
//! [LATER [DIR]]]]` (defaults: 10,000 tasks, 10,000,000 events, 1,000,000 later events
//! spread over 10 tasks, a scratch directory under `target/`, removed at the end; a DIR
//! given is kept, with its copy `DIR.later`, for a profiler; about 1.4 GB of disk). The
//! `factlog` binary is looked up beside the example's own directory (`target/release`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use factlog::harness::Body;
use factlog::harness::event::{AssistantDelta, Effect, UserMessage};
use factlog::harness::event::{StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart};
use factlog::{AppendOptions, Durability, Seq, Store, StoreOptions};

/// Deltas a task writes per block of its events (one turn: start, message, step, deltas,
/// call, result, step end, turn end).
const DELTAS_PER_TURN: u64 = 92;
/// Events of one turn.
const EVENTS_PER_TURN: u64 = DELTAS_PER_TURN + 8;
/// How often each measurement is repeated (the median is reported).
const REPEATS: usize = 5;

fn main() -> factlog::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |index: usize, default: u64| -> u64 {
        args.get(index).map_or(default, |text| text.replace('_', "").parse().expect("a number"))
    };
    let tasks = number(0, 10_000).max(11);
    let events = number(1, 10_000_000);
    let later = number(2, 1_000_000);
    // A DIR given is kept at the end, for a profiler; the default scratch store is removed.
    let keep = args.get(3).is_some();
    let dir = args.get(3).map_or_else(|| PathBuf::from("target/scale-store"), PathBuf::from);
    let binary = factlog_binary();
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("remove the old scratch store");
    }

    println!("scale: {tasks} tasks, {events} events, then {later} events of 10 tasks");
    let started = Instant::now();
    {
        let store = Store::open(&dir, StoreOptions::new().snapshot_every_bytes(u64::MAX))?;
        write_turns(&store, "first", 0..tasks, events)?;
        let meta = store.checkpoint()?;
        println!(
            "written in {:.1} s; snapshot covers seq {} ({} bytes)",
            started.elapsed().as_secs_f64(),
            meta.covered_seq.0,
            meta.file_bytes
        );
        store.close()?;
    }
    // The task `state --task` asks for: never written after the snapshot.
    let quiet = format!("task-{}", tasks / 2);
    // The later events go to a copy, so that both stores are measured side by side, each
    // measurement interleaved with its twin's (the machine's load then weighs on both alike).
    let later_dir = dir.with_extension("later");
    copy_dir(&dir, &later_dir);
    {
        let store = Store::open(&later_dir, StoreOptions::new().snapshot_every_bytes(u64::MAX))?;
        write_turns(&store, "later", 0..10, later)?;
        store.close()?;
    }
    let (before, after, scan) = measure(&dir, &later_dir, &binary, &quiet)?;
    let records = scan.1;
    let scan_ns_per_record = scan.0.as_nanos() as f64 / records as f64;
    println!(
        "raw scan of all {records} records: {:.1} ms ({scan_ns_per_record:.1} ns a record)",
        ms(scan.0)
    );
    println!(
        "\n| measure | with 0 later events | with {later} later events | ns per later event | x raw scan per record |"
    );
    println!("|---|---|---|---|---|");
    for ((name, first), (_, second)) in before.iter().zip(&after) {
        let per_event = (second.as_nanos() as f64 - first.as_nanos() as f64) / later as f64;
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {per_event:.0} | {:.2} |",
            ms(*first),
            ms(*second),
            per_event / scan_ns_per_record
        );
    }
    if !keep {
        std::fs::remove_dir_all(&dir).expect("remove the scratch store");
        std::fs::remove_dir_all(&later_dir).expect("remove the scratch store");
    }
    Ok(())
}

/// Turns written as one batch (one `fdatasync`), within `limits::EVENT_BATCH_MAX` events.
const TURNS_PER_BATCH: u64 = 10;

/// Writes `events` events as whole turns, batches of turns round-robin over `tasks`, so that
/// every task's events are spread over the log. A batch of turns costs one `fdatasync`
/// instead of three a turn: the store is built in seconds, not minutes.
fn write_turns(
    store: &Store,
    phase: &str,
    tasks: std::ops::Range<u64>,
    events: u64,
) -> factlog::Result<()> {
    let handles: Vec<_> =
        tasks.map(|n| store.task(&format!("task-{n}"))).collect::<factlog::Result<_>>()?;
    let batches = events / (EVENTS_PER_TURN * TURNS_PER_BATCH);
    for batch in 0..batches {
        let task = &handles[(batch % handles.len() as u64) as usize];
        let mut bodies = Vec::with_capacity((EVENTS_PER_TURN * TURNS_PER_BATCH) as usize);
        for turn in 0..TURNS_PER_BATCH {
            let call = format!("{phase}-{batch}-{turn}");
            bodies.push(Body::TurnStart(TurnStart::default()));
            bodies.push(Body::UserMessage(UserMessage {
                text: "summarise the next file".into(),
                ..Default::default()
            }));
            bodies.push(Body::StepStart(StepStart::default()));
            for _ in 0..DELTAS_PER_TURN {
                bodies.push(Body::AssistantDelta(AssistantDelta {
                    text: "a streamed token of text".into(),
                }));
            }
            bodies.push(Body::ToolCall(ToolCall {
                call_id: call.as_str().into(),
                tool: "read_file".into(),
                effect: Effect::ReadOnly,
                ..Default::default()
            }));
            bodies.push(Body::ToolResult(ToolResult {
                call_id: call.as_str().into(),
                output: Some(serde_json::json!({"bytes": 512})),
                ..Default::default()
            }));
            bodies.push(Body::StepEnd(StepEnd::default()));
            bodies.push(Body::TurnEnd(TurnEnd::default()));
        }
        task.append_batch_with(bodies, AppendOptions::default())?;
    }
    store.flush(Durability::Synced)
}

/// The operations measured on each store.
const OPERATIONS: &[&str] = &[
    "Store::open (writable)",
    "Store::open_read_only",
    "factlog info",
    "factlog state --task T",
    "factlog recover",
];

/// The median time of each measured operation on `first` and on `second`, every run on one
/// beside the same run on the other, and the median raw scan of `second`.
type Measured = (Vec<(String, Duration)>, Vec<(String, Duration)>, (Duration, u64));

fn measure(first: &Path, second: &Path, binary: &Path, task: &str) -> factlog::Result<Measured> {
    let mut samples: Vec<[Vec<Duration>; 2]> = vec![[Vec::new(), Vec::new()]; OPERATIONS.len()];
    let mut scans = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        for (op, name) in OPERATIONS.iter().enumerate() {
            for (which, dir) in [first, second].into_iter().enumerate() {
                let dir_text = dir.to_str().expect("a UTF-8 path");
                let took = match *name {
                    "Store::open (writable)" => timed_open(dir, false)?.0,
                    "Store::open_read_only" => timed_open(dir, true)?.0,
                    "factlog info" => run(binary, &["info", dir_text]),
                    "factlog state --task T" => run(binary, &["state", dir_text, "--task", task]),
                    _ => run(binary, &["recover", dir_text]),
                };
                samples[op][which].push(took);
            }
        }
        scans.push(scan_all(second)?);
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut rows = [Vec::new(), Vec::new()];
    for (name, [a, b]) in OPERATIONS.iter().zip(samples) {
        rows[0].push(((*name).to_owned(), median(a)));
        rows[1].push(((*name).to_owned(), median(b)));
    }
    scans.sort();
    let [before, after] = rows;
    Ok((before, after, scans[scans.len() / 2]))
}

/// Copies the store in `from` (files and the snapshot directory) to `to`, made anew.
fn copy_dir(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).expect("remove the old copy");
    }
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("list the store") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy a file");
        }
    }
}

fn timed_open(dir: &Path, read_only: bool) -> factlog::Result<(Duration, u64)> {
    let started = Instant::now();
    let store = if read_only {
        Store::open_read_only(dir, StoreOptions::new())?
    } else {
        Store::open(dir, StoreOptions::new())?
    };
    let elapsed = started.elapsed();
    let replayed = store.open_report().replayed_events;
    if !read_only {
        store.close()?;
    }
    Ok((elapsed, replayed))
}

fn scan_all(dir: &Path) -> factlog::Result<(Duration, u64)> {
    let log = factlog::Log::open_read_only(dir, factlog::Options::default())?;
    let started = Instant::now();
    let mut reader = log.read_from(Seq(1))?;
    let mut records = 0u64;
    while let Some(record) = reader.next_ref() {
        record?;
        records += 1;
    }
    Ok((started.elapsed(), records))
}

/// Runs `binary` with `args`, which must succeed, and returns how long it took.
fn run(binary: &Path, args: &[&str]) -> Duration {
    let started = Instant::now();
    let output = Command::new(binary).args(args).output().expect("run factlog");
    let elapsed = started.elapsed();
    assert!(
        output.status.success(),
        "factlog {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// `target/release/factlog` (or debug) beside this example's directory.
fn factlog_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the example's own path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/PROFILE/examples");
    let binary = profile_dir.join("factlog");
    assert!(binary.exists(), "build the CLI first: cargo build --release ({})", binary.display());
    binary
}
