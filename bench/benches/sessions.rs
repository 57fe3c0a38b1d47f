//! Many sessions at once against peers (issue 14, "Many sessions";
//! `/work/shared/mission/workload.md`, "Many sessions"): for each N, N threads of one process
//! each run one agent session (`benches/common/workload.rs`, text seeded by the session's
//! number) on a task of their own, on the real disk (`target/tmp`), under four policies:
//!
//! - `factlog`: one typed `Store` (default options, fixed clock) shared by the N threads, each
//!   step closed by one batch of `tool/result` + `step/end`; every `fdatasync` is counted
//!   through a counting file system (after a segment roll the rolled-in segment counts as
//!   "other", so both are added: the preallocator's one sync per new segment is in the count).
//! - `sqlite`: one SQLite database (rusqlite, bundled) in WAL mode with one connection per
//!   session, `synchronous=FULL`, a busy timeout of 60 s; a session opens its transaction with
//!   `BEGIN IMMEDIATE` at its first event after a commit, inserts every event into it and
//!   commits at each critical event (`tool/call`, `tool/result`, `turn/end`), as
//!   `benches/peers.rs` does for one session. Its syncs are not counted.
//! - `jsonl_per_session`: one JSONL file per session written through a `BufWriter`, flushed and
//!   `fdatasync`ed at each critical event.
//! - `floor`: one preallocated, synced file per session, `pwrite` + `fdatasync` of the session's
//!   JSON lines cut after each critical event (the per-session-file floor).
//!
//! Every N and policy is measured once a run, the N in an order rotated from run to run and the
//! policies rotated within each N. Reported per N and policy: aggregate events/s (median and
//! min-max over runs), `fdatasync`s per critical event, the p50/p99/max latency of the synced
//! appends (the critical events' appends; for SQLite from the start of the event, its `BEGIN
//! IMMEDIATE` included, to its commit) pooled over sessions and runs, the longest wait of any
//! append (buffered ones included), and the ratio of the time to the floor's at the same N in
//! the same run (median of the runs' ratios). Opening the stores, creating the files and
//! encoding the baselines' bytes are outside the timing; factlog encodes inside it.
//!
//! Run with `cargo bench --bench sessions` (N = 1, 8, 32, 128; 10 turns a session; 3 runs).
//! Environment: `FACTLOG_SESSIONS` (a list such as `1,8`), `FACTLOG_TURNS`, `FACTLOG_RUNS`,
//! and `FACTLOG_POLICIES` (a list of policy names, to profile one alone; without `floor` no
//! ratio is printed).
//! Smoke test: `cargo bench --bench sessions -- --test` (N = 1 and 3, one tiny turn, one run).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use events::{Workload, median};
use workload::Shape;

use factlog_bench::events;
use factlog_bench::many;
use factlog_bench::settle;
use factlog_bench::sqlite;
use factlog_bench::workload;

/// The counts of sessions measured unless `FACTLOG_SESSIONS` says otherwise.
const SESSIONS_DEFAULT: [usize; 4] = [1, 8, 32, 128];

/// The most sessions at once: one thread, one connection and one file each.
const SESSIONS_MAX: usize = 1024;

/// Turns per session unless `FACTLOG_TURNS` says otherwise, as the issue's own measurement.
const TURNS_DEFAULT: u32 = 10;

/// Interleaved runs unless `FACTLOG_RUNS` says otherwise.
const RUNS_DEFAULT: usize = 3;

/// The smoke test's sizes (`-- --test`).
const TEST_SESSIONS: [usize; 2] = [1, 3];
const TEST_SHAPE: Shape = Shape { turns: 1, steps: 1, tokens: 2, ..Shape::DEFAULT };

/// Capacity of each JSONL writer's `BufWriter`.
const JSONL_BUFFER_BYTES: usize = 64 * 1024;

/// The policies, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Factlog,
    Sqlite,
    JsonlPerSession,
    Floor,
}

const POLICIES: [Policy; 4] =
    [Policy::Factlog, Policy::Sqlite, Policy::JsonlPerSession, Policy::Floor];

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::Factlog => "factlog",
            Policy::Sqlite => "sqlite",
            Policy::JsonlPerSession => "jsonl_per_session",
            Policy::Floor => "floor",
        }
    }
}

/// What the bench measures.
struct Config {
    sessions: Vec<usize>,
    shape: Shape,
    runs: usize,
    /// The policies measured, in report order: every one unless `FACTLOG_POLICIES` names
    /// some (to profile one alone).
    policies: Vec<Policy>,
}

/// The configuration from the arguments (`--test`) and the environment.
fn config() -> Config {
    if std::env::args().any(|arg| arg == "--test") {
        let policies = POLICIES.to_vec();
        return Config { sessions: TEST_SESSIONS.to_vec(), shape: TEST_SHAPE, runs: 1, policies };
    }
    let sessions = match std::env::var("FACTLOG_SESSIONS") {
        Ok(list) => {
            let mut counts: Vec<usize> = list
                .split(',')
                .map(|entry| match entry.trim().parse::<usize>() {
                    Ok(n) if (1..=SESSIONS_MAX).contains(&n) => n,
                    _ => panic!("FACTLOG_SESSIONS={list:?}: counts of 1 to {SESSIONS_MAX}"),
                })
                .collect();
            counts.sort_unstable();
            counts.dedup();
            counts
        }
        Err(_) => SESSIONS_DEFAULT.to_vec(),
    };
    let turns = many::env_number("FACTLOG_TURNS", TURNS_DEFAULT);
    let runs = many::env_number("FACTLOG_RUNS", RUNS_DEFAULT);
    let policies = match std::env::var("FACTLOG_POLICIES") {
        Ok(list) => {
            let named: Vec<&str> = list.split(',').map(str::trim).collect();
            for name in &named {
                assert!(
                    POLICIES.iter().any(|p| p.name() == *name),
                    "FACTLOG_POLICIES={list:?}: {name:?} is none of factlog, sqlite, \
                     jsonl_per_session, floor"
                );
            }
            POLICIES.into_iter().filter(|p| named.contains(&p.name())).collect()
        }
        Err(_) => POLICIES.to_vec(),
    };
    Config { sessions, shape: Shape { turns, ..Shape::DEFAULT }, runs, policies }
}

/// One timed measurement of one policy at one N.
struct Run {
    elapsed: Duration,
    /// `fdatasync`s, where counted.
    syncs: Option<u64>,
    /// The latency of every synced append, in nanoseconds.
    synced_ns: Vec<u64>,
    /// The longest any single append took, in nanoseconds.
    max_any_ns: u64,
}

impl Run {
    fn new(elapsed: Duration, syncs: Option<u64>, timings: many::Timings) -> Run {
        Run { elapsed, syncs, synced_ns: timings.synced_ns, max_any_ns: timings.max_any_ns }
    }
}

fn sqlite_run(sessions: &[Workload]) -> Run {
    let dir = factlog_bench::temp_dir!("sessions-sqlite");
    let path = dir.path().join("events.db");
    let setup = sqlite::create(&path);
    let connections: Vec<Mutex<Option<rusqlite::Connection>>> =
        sessions.iter().map(|_| Mutex::new(Some(sqlite::connect(&path)))).collect();
    let (elapsed, timings) = many::parallel(sessions.len(), |i| {
        let conn = connections[i].lock().take().expect("each connection runs once");
        sqlite::session(&conn, &sessions[i])
    });
    drop(connections);
    setup.close().expect("close the database");
    Run::new(elapsed, None, timings)
}

fn jsonl_run(sessions: &[Workload]) -> Run {
    let dir = factlog_bench::temp_dir!("sessions-jsonl");
    let files: Vec<Mutex<Option<File>>> = (0..sessions.len())
        .map(|i| {
            let path = dir.path().join(format!("session-{i}.jsonl"));
            Mutex::new(Some(File::create_new(path).expect("create a JSONL file")))
        })
        .collect();
    let (elapsed, timings) = many::parallel(sessions.len(), |i| {
        let file = files[i].lock().take().expect("each file is written once");
        let mut out = BufWriter::with_capacity(JSONL_BUFFER_BYTES, file);
        let mut timings = many::Timings::default();
        for event in &sessions[i].events {
            let start = Instant::now();
            out.write_all(&event.line).expect("write");
            if event.critical {
                out.flush().expect("flush");
                out.get_ref().sync_data().expect("fdatasync");
            }
            timings.record(start, event.critical);
        }
        out.into_inner().map_err(|_| "a final flush").expect("nothing left to flush");
        timings
    });
    let syncs = sessions.iter().map(|w| w.chunks.len() as u64).sum();
    Run::new(elapsed, Some(syncs), timings)
}

fn floor_run(sessions: &[Workload], files: &[File]) -> Run {
    let (elapsed, timings) = many::parallel(sessions.len(), |i| {
        let mut timings = many::Timings::default();
        events::pwrite_chunks(&files[i], &sessions[i].chunks, |took| {
            let ns = took.as_nanos() as u64;
            timings.max_any_ns = timings.max_any_ns.max(ns);
            timings.synced_ns.push(ns);
        });
        timings
    });
    let syncs = sessions.iter().map(|w| w.chunks.len() as u64).sum();
    Run::new(elapsed, Some(syncs), timings)
}

/// The sessions of one N, and the floor's files.
struct Prepared {
    sessions: Vec<Workload>,
    floor_files: Vec<File>,
    /// Holds the floor's files; removed on drop.
    _floor_dir: tempfile::TempDir,
}

fn prepare(n: usize, shape: Shape) -> Prepared {
    let sessions: Vec<Workload> =
        (0..n).map(|i| Workload::new(shape, i as u64 + 1, &format!("session-{i}"))).collect();
    let floor_dir = factlog_bench::temp_dir!("sessions-floor");
    let floor_files = sessions
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let path = floor_dir.path().join(format!("session-{i}.bin"));
            settle::preallocated_file(&path, w.line_bytes().next_multiple_of(1 << 16))
        })
        .collect();
    Prepared { sessions, floor_files, _floor_dir: floor_dir }
}

fn measure(policy: Policy, prepared: &Prepared) -> Run {
    match policy {
        Policy::Factlog => {
            let dir = factlog_bench::temp_dir!("sessions-factlog");
            let (elapsed, syncs, timings) = many::factlog_threads(&prepared.sessions, dir.path());
            Run::new(elapsed, Some(syncs), timings)
        }
        Policy::Sqlite => sqlite_run(&prepared.sessions),
        Policy::JsonlPerSession => jsonl_run(&prepared.sessions),
        Policy::Floor => floor_run(&prepared.sessions, &prepared.floor_files),
    }
}

/// Prints the row of `policy` at the N of `prepared`.
fn report(prepared: &Prepared, policy: Policy, runs: &[Run], floor: Option<&[Duration]>) {
    let n = prepared.sessions.len();
    let events = prepared.sessions.iter().map(|w| w.shape.events()).sum::<u64>() as f64;
    let critical = prepared.sessions.iter().map(|w| w.shape.critical_events()).sum::<u64>() as f64;
    let rates: Vec<f64> = runs.iter().map(|r| events / r.elapsed.as_secs_f64()).collect();
    let (low, high) =
        rates.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let ratio = floor.map_or_else(
        || "-".to_owned(),
        |floor| {
            let ratios =
                runs.iter().zip(floor).map(|(r, f)| r.elapsed.as_secs_f64() / f.as_secs_f64());
            format!("{:.2}", median(ratios.collect()))
        },
    );
    let syncs = runs
        .iter()
        .map(|r| r.syncs.map(|s| s as f64))
        .collect::<Option<Vec<f64>>>()
        .map_or_else(|| "-".to_owned(), |s| format!("{:.3}", median(s) / critical));
    let mut latencies: Vec<u64> = runs.iter().flat_map(|r| r.synced_ns.iter().copied()).collect();
    latencies.sort_unstable();
    let max_any = runs.iter().map(|r| r.max_any_ns).max().unwrap_or(0) as f64 / 1e3;
    println!(
        "sessions: {n:>5} {:<18} {:>10.0} {:>21} {:>10} {:>8.0} {:>8.0} {:>9.0} {:>10.0} {:>8}",
        policy.name(),
        median(rates),
        format!("({low:.0}-{high:.0})"),
        syncs,
        many::percentile_us(&latencies, 50.0),
        many::percentile_us(&latencies, 99.0),
        many::percentile_us(&latencies, 100.0),
        max_any,
        ratio,
    );
}

fn main() {
    let config = config();
    let shape = config.shape;
    println!(
        "sessions: N = {:?}; each session {} turns x {} steps x {} tokens ({} events, {} \
         critical); {} interleaved run(s)",
        config.sessions,
        shape.turns,
        shape.steps,
        shape.tokens,
        shape.events(),
        shape.critical_events(),
        config.runs
    );
    let prepared: Vec<Prepared> = config.sessions.iter().map(|&n| prepare(n, shape)).collect();
    let count = config.sessions.len();
    // Per N, per policy (report order), one run each.
    let policies = &config.policies;
    let mut runs: Vec<Vec<Vec<Run>>> =
        (0..count).map(|_| policies.iter().map(|_| Vec::new()).collect()).collect();
    for run in 0..config.runs {
        for i in 0..count {
            let which = (i + run) % count;
            for k in 0..policies.len() {
                let index = (k + run) % policies.len();
                let measured = measure(policies[index], &prepared[which]);
                runs[which][index].push(measured);
            }
        }
    }
    println!(
        "sessions: {:>5} {:<18} {:>10} {:>21} {:>10} {:>8} {:>8} {:>9} {:>10} {:>8}",
        "N",
        "policy",
        "events/s",
        "(min-max)",
        "fsync/crit",
        "p50 us",
        "p99 us",
        "max us",
        "max any us",
        "x floor"
    );
    let floor_index = policies.iter().position(|&p| p == Policy::Floor);
    for (prepared, per_policy) in prepared.iter().zip(&runs) {
        let floor: Option<Vec<Duration>> =
            floor_index.map(|i| per_policy[i].iter().map(|r| r.elapsed).collect());
        for (&policy, measured) in policies.iter().zip(per_policy) {
            report(prepared, policy, measured, floor.as_deref());
        }
    }
    println!(
        "sessions: events/s is N x events / wall time (median, min-max over runs); fsync/crit \
         the fdatasyncs per critical event (median; - where not counted); p50/p99/max the \
         latency of the synced appends, pooled; max any the longest single append; x floor \
         the time over the floor's at the same N in the same run (median of the runs' ratios)"
    );
}
