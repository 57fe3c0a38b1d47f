//! One session, one process (issue 29, "The single-session path"): the agent-session workload
//! (`/work/shared/mission/workload.md`, 40,950 events) through the typed store, through the raw
//! `Log` (the very records the typed store wrote, each at the tier the store gave it: synced
//! where the store syncs, written out where it writes out) and through the floor (the same
//! bytes into a preallocated file: one `pwrite` a MiB, one at each point the store writes out
//! and one `fdatasync` at each sync point), each with its syncs and without them, every
//! measurement in a fresh process of its own (this executable again) so that no run inherits
//! another's page cache, heap or threads. Policies rotate from run to run; ratios are taken
//! within a run.
//!
//! Per policy: wall time of the appends (the final write of what is buffered included), ns per
//! event, the appending thread's own time on a CPU over the same span (user and system: where a
//! wall time above the floor's is work rather than waiting), and the resident memory the store
//! adds to its process: the peak during the open, the appends and the close (`VmHWM`, its mark
//! reset before the open) minus the resident size before the open, with the workload already
//! in memory.
//!
//! Run with `cargo bench --bench single` (11 runs; `FACTLOG_RUNS` to change). Smoke test:
//! `cargo bench --bench single -- --test` (one run of a one-turn session).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use factlog::harness::codec;
use factlog::harness::event::EventType;
use factlog::{Durability, Log, Options, Seq, Store, StoreOptions};
use factlog_bench::many::Usage;
use factlog_bench::workload::{self, Shape, StepClose};

const RUNS_DEFAULT: usize = 11;
const CHILD_ENV: &str = "FACTLOG_SINGLE_CHILD";
const SHAPE_ENV: &str = "FACTLOG_SINGLE_TURNS";
const TEST_TURNS: u32 = 1;
/// What the floor copies into before each `pwrite`: the store's write buffer.
const FLOOR_BUFFER_BYTES: usize = factlog::limits::BUFFER_BYTES_DEFAULT;
/// The floor's file: zeros written and synced before the clock starts.
const FLOOR_FILE_BYTES: u64 = 16 << 20;
/// Time for a fresh log's preallocator to prepare its next file before the clock starts.
const SETTLE: Duration = Duration::from_millis(300);

const POLICIES: [&str; 5] = ["store", "log", "floor", "log-nosync", "floor-nosync"];

fn main() {
    if let Ok(policy) = std::env::var(CHILD_ENV) {
        let mut args = std::env::args().skip(1);
        let dir = PathBuf::from(args.next().expect("the child's directory"));
        let records = PathBuf::from(args.next().expect("the records' file"));
        let turns = std::env::var(SHAPE_ENV).ok().and_then(|t| t.parse().ok());
        child(&policy, &dir, &records, turns.unwrap_or(Shape::DEFAULT.turns));
        return;
    }
    let test = std::env::args().any(|a| a == "--test");
    let runs = if test {
        1
    } else {
        std::env::var("FACTLOG_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(RUNS_DEFAULT)
    };
    let turns = if test { TEST_TURNS } else { Shape::DEFAULT.turns };
    let scratch = factlog_bench::temp_dir!("single");
    let records_file = scratch.path().join("records");
    save(
        &records_file,
        &records(&scratch.path().join("reference"), Shape { turns, ..Shape::DEFAULT }),
    );
    let mut results: Vec<Vec<Measured>> = vec![Vec::new(); POLICIES.len()];
    for run in 0..runs {
        for k in 0..POLICIES.len() {
            let index = (run + k) % POLICIES.len();
            let dir = scratch.path().join(format!("{run}-{}", POLICIES[index]));
            let output = Command::new(std::env::current_exe().expect("this executable"))
                .arg(&dir)
                .arg(&records_file)
                .env(CHILD_ENV, POLICIES[index])
                .env(SHAPE_ENV, turns.to_string())
                .output()
                .expect("run a measurement");
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{}: {}",
                POLICIES[index],
                String::from_utf8_lossy(&output.stderr)
            );
            results[index].push(Measured::parse(&text));
            let _ = std::fs::remove_dir_all(&dir);
        }
        eprintln!("run {} of {runs} done", run + 1);
    }
    report(&results, turns);
}

/// One measurement, as a child prints it: `events wall_ns cpu_ns rss_added_kib`.
#[derive(Debug, Clone, Copy)]
struct Measured {
    events: u64,
    wall_ns: u64,
    /// The appending thread's time on a CPU while the clock ran.
    cpu_ns: u64,
    rss_added_kib: i64,
}

impl Measured {
    fn parse(text: &str) -> Measured {
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(fields.len(), 4, "a child printed {text:?}");
        Measured {
            events: fields[0].parse().expect("events"),
            wall_ns: fields[1].parse().expect("wall"),
            cpu_ns: fields[2].parse().expect("cpu"),
            rss_added_kib: fields[3].parse().expect("memory"),
        }
    }

    fn ns_per_event(self) -> f64 {
        self.wall_ns as f64 / self.events as f64
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

fn report(results: &[Vec<Measured>], turns: u32) {
    let runs = results[0].len();
    println!("one session of {turns} turns, {runs} runs, medians (min-max):");
    println!("| policy | wall ms | ns per event | appending thread CPU ms | store RSS added |");
    println!("|---|---|---|---|---|");
    for (policy, measured) in POLICIES.iter().zip(results) {
        let wall: Vec<f64> = measured.iter().map(|m| m.wall_ns as f64 / 1e6).collect();
        let ns: Vec<f64> = measured.iter().map(|m| m.ns_per_event()).collect();
        let rss: Vec<f64> = measured.iter().map(|m| m.rss_added_kib as f64 / 1024.0).collect();
        let cpu: Vec<f64> = measured.iter().map(|m| m.cpu_ns as f64 / 1e6).collect();
        println!(
            "| {policy} | {:.1} ({:.1}-{:.1}) | {:.0} | {:.1} | {:.2} MiB ({:.2}-{:.2}) |",
            median(wall.clone()),
            wall.iter().copied().fold(f64::MAX, f64::min),
            wall.iter().copied().fold(0.0, f64::max),
            median(ns),
            median(cpu),
            median(rss.clone()),
            rss.iter().copied().fold(f64::MAX, f64::min),
            rss.iter().copied().fold(f64::MIN, f64::max),
        );
    }
    let of = |name: &str| &results[POLICIES.iter().position(|p| *p == name).expect("a policy")];
    let ratio = |a: &str, b: &str| {
        let per_run: Vec<f64> =
            of(a).iter().zip(of(b)).map(|(x, y)| x.wall_ns as f64 / y.wall_ns as f64).collect();
        let (lo, hi) = (
            per_run.iter().copied().fold(f64::MAX, f64::min),
            per_run.iter().copied().fold(0.0, f64::max),
        );
        println!(
            "{a} / {b}: {:.2}x ({lo:.2}-{hi:.2}), median of the per-run ratios",
            median(per_run)
        );
    };
    ratio("store", "log");
    ratio("store", "floor");
    ratio("log", "floor");
    ratio("log-nosync", "floor-nosync");
}

/// The resident set now, in KiB.
fn rss_kib() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: i64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("statm");
    pages * 4
}

/// The peak resident set since the last [`reset_peak`], in KiB.
fn peak_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM")
}

fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak resident set");
}

/// The records the typed store writes for the session, each with the tier the store gives it
/// (its type's default; a `tool/result` closing a step with its `step/end` in one batch is
/// written with the batch, which takes the stronger tier at its end), from an untimed run in
/// `scratch`.
fn records(scratch: &Path, shape: Shape) -> Vec<(Vec<u8>, Durability)> {
    let store = Store::open(scratch, StoreOptions::new()).expect("open the reference store");
    let session = workload::session(shape, 1);
    let task = store.task(&session.task).expect("a task");
    workload::run(&task, session, StepClose::Batch);
    store.flush(Durability::Synced).expect("flush");
    let mut records = Vec::new();
    for record in store.log().read_from(Seq(1)).expect("read back") {
        let record = record.expect("a record");
        let tag = codec::peek(record.seq, &record.payload).expect("an event").tag;
        let tier =
            EventType::from_tag(tag).map_or(Durability::Buffered, |t| t.default_durability());
        records.push((record.payload.to_vec(), tier));
    }
    drop(task);
    store.close().expect("close the reference store");
    for i in 1..records.len() {
        let step_end = codec::peek(Seq(0), &records[i].0).map(|e| e.tag).ok()
            == Some(EventType::StepEnd.tag());
        if step_end {
            records[i].1 = records[i].1.max(records[i - 1].1);
            records[i - 1].1 = Durability::Buffered;
        }
    }
    records
}

/// A tier as one byte of the records' file.
const TIERS: [Durability; 3] = [Durability::Buffered, Durability::Flushed, Durability::Synced];

/// `records` as `[u32 length][u8 tier][bytes]...`, the tier an index into [`TIERS`].
fn save(path: &Path, records: &[(Vec<u8>, Durability)]) {
    let mut bytes = Vec::new();
    for (record, tier) in records {
        bytes.extend_from_slice(&(record.len() as u32).to_le_bytes());
        bytes.push(TIERS.iter().position(|t| t == tier).expect("a tier the store uses") as u8);
        bytes.extend_from_slice(record);
    }
    std::fs::write(path, bytes).expect("save the records");
}

fn load(path: &Path) -> Vec<(Vec<u8>, Durability)> {
    let bytes = std::fs::read(path).expect("load the records");
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        records.push((bytes[at + 5..at + 5 + len].to_vec(), TIERS[usize::from(bytes[at + 4])]));
        at += 5 + len;
    }
    records
}

fn child(policy: &str, dir: &Path, records_file: &Path, turns: u32) {
    let shape = Shape { turns, ..Shape::DEFAULT };
    std::fs::create_dir_all(dir).expect("the measurement's directory");
    let (events, wall, cpu, added) = match policy {
        "store" => {
            let session = workload::session(shape, 1);
            let events = shape.events();
            let before = rss_kib();
            reset_peak();
            let store = Store::open(dir.join("store"), StoreOptions::new()).expect("open");
            std::thread::sleep(SETTLE);
            let task = store.task(&session.task).expect("a task");
            let cpu0 = Usage::thread_cpu_ns();
            let started = Instant::now();
            workload::run(&task, session, StepClose::Batch);
            store.flush(Durability::Flushed).expect("write out");
            let (wall, cpu) = (started.elapsed(), Usage::thread_cpu_ns() - cpu0);
            drop(task);
            store.close().expect("close");
            (events, wall, cpu, peak_kib() - before)
        }
        "log" | "log-nosync" => {
            let records = load(records_file);
            let syncs = policy == "log";
            let before = rss_kib();
            reset_peak();
            let log = Log::open(dir.join("log"), Options::new()).expect("open");
            std::thread::sleep(SETTLE);
            let cpu0 = Usage::thread_cpu_ns();
            let started = Instant::now();
            for (record, tier) in &records {
                let tier = if syncs { *tier } else { Durability::Buffered };
                log.append(record, tier).expect("append");
            }
            log.flush(Durability::Flushed).expect("write out");
            let (wall, cpu) = (started.elapsed(), Usage::thread_cpu_ns() - cpu0);
            log.close().expect("close");
            (records.len() as u64, wall, cpu, peak_kib() - before)
        }
        "floor" | "floor-nosync" => {
            let records = load(records_file);
            let file = preallocated(&dir.join("floor"));
            let cpu0 = Usage::thread_cpu_ns();
            let started = Instant::now();
            floor(&file, &records, policy == "floor");
            (records.len() as u64, started.elapsed(), Usage::thread_cpu_ns() - cpu0, 0)
        }
        other => panic!("no policy {other}"),
    };
    println!("{events} {} {cpu} {added}", wall.as_nanos());
}

fn preallocated(path: &Path) -> File {
    let file =
        OpenOptions::new().read(true).write(true).create_new(true).open(path).expect("floor");
    let zeros = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < FLOOR_FILE_BYTES {
        file.write_all_at(&zeros, at).expect("zeros");
        at += zeros.len() as u64;
    }
    file.sync_all().expect("sync the floor file");
    file
}

/// The records' bytes into `file` as a store's buffer would write them: copied into a buffer,
/// written when it is full, at each record of a tier above `Buffered` (then synced at a
/// `Synced` one), with `syncs`, and at the end.
fn floor(file: &File, records: &[(Vec<u8>, Durability)], syncs: bool) {
    let mut buffer = Vec::with_capacity(FLOOR_BUFFER_BYTES);
    let mut offset = 0u64;
    let mut write = |buffer: &mut Vec<u8>| {
        file.write_all_at(buffer, offset).expect("floor write");
        offset += buffer.len() as u64;
        buffer.clear();
    };
    for (record, tier) in records {
        if buffer.len() + record.len() > FLOOR_BUFFER_BYTES {
            write(&mut buffer);
        }
        buffer.extend_from_slice(record);
        if syncs && *tier > Durability::Buffered {
            write(&mut buffer);
            if *tier == Durability::Synced {
                file.sync_data().expect("floor sync");
            }
        }
    }
    write(&mut buffer);
}
