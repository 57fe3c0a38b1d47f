//! `factlog bench`: the persistence cost per token of the agent-session workload
//! (`/work/shared/mission/workload.md`) under each durability policy, beside plain-file
//! baselines and the physical floor measured in the same run.
//!
//! Each run measures every policy once, in an order rotated from run to run, so a slow spell
//! of the shared disk does not fall on one policy only. Before the runs, one untimed session
//! of the `factlog` policy (the reference, also a warm-up) gives `all-buffered` its records.
//! The `floor` is measured right after each run's `factlog` session and replays that very
//! session's `fdatasync`s, each after one `pwrite` of the bytes written before it: the same
//! number of syncs the policy performed in that run. With several tasks the group commit
//! decides how many that is, and it varies from run to run, so no other run's count would do.
//!
//! With `--sessions LIST` the command runs the many-session form instead (`sessions.rs`, its
//! report in `sessions_report.rs`): other policies, the same workload and runners. With
//! `--clients LIST` it runs the many-process form ([`clients`]): client processes of a served
//! store against threads, stores of their own and (in a build with SQLite) a shared SQLite.

pub mod clients;
mod policies;
mod report;
mod sessions;
mod sessions_report;

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::workload::{self, Line, Session, Shape};
use crate::{Failure, Observer, print};
use policies::{JsonlFiles, JsonlSync, Measured, Reference, StoreMode};
use report::{PolicyReport, Workload};

/// Arguments of `factlog bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Turns per session. Default: 50; 10 with --sessions or --clients.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    turns: Option<u32>,
    /// Steps per turn.
    #[arg(long, default_value_t = Shape::DEFAULT.steps,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    steps: u32,
    /// Streamed tokens (assistant/delta events) per step.
    #[arg(long, default_value_t = Shape::DEFAULT.tokens,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    tokens: u32,
    /// Bytes of text of each token.
    #[arg(long, default_value_t = Shape::DEFAULT.delta_bytes as u32,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    delta_bytes: u32,
    /// Approximate bytes of each tool/result (its output text is 64 bytes less).
    #[arg(long, default_value_t = Shape::DEFAULT.result_bytes as u32,
          value_parser = clap::value_parser!(u32).range(64..=65_536))]
    result_bytes: u32,
    /// Tasks run in parallel, one thread each, all in one store (or one JSONL file).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64),
          conflicts_with = "sessions")]
    tasks: u32,
    /// The many-session form instead: for each N of LIST (comma-separated, e.g. 1,8,32,128;
    /// each 1 to 1024), N sessions at once, one thread and one task each, under the policies
    /// factlog, log, jsonl-per-session and floor.
    ///
    /// factlog is one typed Store shared by the N threads, default tiers, each step closed by
    /// one batch of tool/result + step/end; log is one raw Log given the records the store
    /// encoded, each append with the durability the store gave it; jsonl-per-session is one
    /// JSONL file per session, one write per line and an fdatasync after tool/call,
    /// tool/result and turn/end; floor is one preallocated, synced file per session, a
    /// pwrite+fdatasync at each of those critical events of the bytes the log framed for the
    /// session since the previous one. Every N and policy is measured once a run, in an order
    /// rotated from run to run; --tasks and --every-turns do not apply.
    ///
    /// Reports per N and policy: aggregate events/s (median, min-max over runs), fdatasyncs
    /// per critical event, p50/p99/max latency of the synced appends (every session and run
    /// pooled) and the ratio of the time to the floor's of the same N in the same run (median
    /// of per-run ratios). --json prints one object: {"workload":{"turns","steps","tokens",
    /// "delta_bytes","result_bytes","runs","sessions":[N..],"events_per_session",
    /// "critical_events_per_session"},"results":[{"sessions","policy","note","events_per_run",
    /// "critical_events_per_run","events_per_s":{"median","min","max"},
    /// "fdatasyncs_per_critical_event","fdatasyncs_per_critical_event_by_flusher",
    /// "synced_appends_per_run","synced_latency_us":{"p50","p99","max"},
    /// "ratio_to_floor":{"median","min","max"}}]} with one result per N and policy. --svg FILE
    /// draws, per N, one line across the policies: events/s and the synced p99.
    #[arg(long, value_name = "LIST", value_parser = sessions::parse_counts)]
    sessions: Option<sessions::SessionCounts>,
    /// The many-process form instead: for each N of LIST (comma-separated, e.g. 1,8,32; each
    /// 1 to the most clients a served store serves at once), N sessions at once under the
    /// policies served, served-every, threads, own-stores (and sqlite in a build with the
    /// feature bench-sqlite).
    ///
    /// served is N client processes (this command re-executed) of one store this process
    /// serves, each running its session through factlog::client::Client with durable-only
    /// acknowledgements: deltas and the Buffered events pipelined, every other event awaited,
    /// a step closed by one batch of tool/result + step/end; served-every is the same with
    /// every line answered (each full buffer of pipelined lines waits for its replies);
    /// threads is the same sessions on N threads of this process
    /// sharing one Store; own-stores is N processes each writing its session into a Store of
    /// its own; sqlite is one SQLite database in WAL mode (synchronous=FULL) shared by N
    /// processes, BEGIN IMMEDIATE and a COMMIT at each critical event. Clients connect (or
    /// open their store) before the clock starts and are released together. After each
    /// measurement every acknowledged event must be found in the store: a run that lost one
    /// fails. Every N and policy is measured once a run, rotated from run to run; --tasks and
    /// --every-turns do not apply.
    ///
    /// Reports per N and policy: wall time and aggregate events/s (median, min-max over
    /// runs), fdatasyncs per critical event, p50/p99/max latency of the synced appends (every
    /// session and run pooled), processor time and context switches per event; per N the
    /// ratios of wall times served / threads, served / own-stores, sqlite / served and
    /// served-every / served (median of per-run ratios). --json prints one object (format-spec/schema/bench-clients.json).
    #[arg(long, value_name = "LIST", value_parser = clients::parse_counts,
          conflicts_with_all = ["sessions", "tasks", "svg"])]
    clients: Option<clients::ClientCounts>,
    /// N `factlog emit` processes as a user starts them, for each N of LIST (as --clients):
    /// emit-served, N `factlog emit --ack durable-only DIR` processes relaying their sessions
    /// through one store this process serves, against emit-own-stores, N such processes each
    /// creating and writing a store of its own. Each process reads its session (the
    /// many-session workload, 10 turns by default) from a file of JSON lines written before
    /// the clock, and must exit 0 with replies covering every line; afterwards every event
    /// must be in the stores, or the run fails. The wall time runs from the first process
    /// started to the last one ended (starting, opening or connecting, writing, closing).
    ///
    /// Reports per N and policy the wall time (median, min-max over runs) and events/s, and
    /// per N the ratio emit-served / emit-own-stores (median of per-run ratios). --json prints
    /// one object (format-spec/schema/bench-emit-clients.json). Only `factlog bench` has it:
    /// the processes are this command run as `emit`.
    #[arg(long, value_name = "LIST", value_parser = clients::parse_counts,
          conflicts_with_all = ["sessions", "clients", "tasks", "svg"])]
    emit_clients: Option<clients::ClientCounts>,
    /// Runs as one client process of --clients, its role in the environment (how the
    /// command starts its clients).
    #[arg(long, hide = true)]
    client_process: bool,
    /// Interleaved runs of every policy.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: u32,
    /// Turns per session of the policies that sync every event (all-synced, jsonl-every):
    /// at most this many, reported per token like the others.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    every_turns: u32,
    /// Scratch directory on the disk to measure: a fresh subdirectory is made in it and
    /// removed at the end. Default: the system temporary directory.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write a standalone SVG chart to FILE.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// The policies measured in turn, in a rotated order; each `factlog` session is followed at
/// once by the `floor` of its syncs.
const ROTATED: [Policy; 5] = [
    Policy::Factlog,
    Policy::AllSynced,
    Policy::AllBuffered,
    Policy::JsonlEvery,
    Policy::JsonlCritical,
];

/// The policies, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Factlog,
    AllSynced,
    AllBuffered,
    JsonlEvery,
    JsonlCritical,
    Floor,
}

const POLICIES: [Policy; 6] = [
    Policy::Factlog,
    Policy::AllSynced,
    Policy::AllBuffered,
    Policy::JsonlEvery,
    Policy::JsonlCritical,
    Policy::Floor,
];

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::Factlog => "factlog",
            Policy::AllSynced => "all-synced",
            Policy::AllBuffered => "all-buffered",
            Policy::JsonlEvery => "jsonl-every",
            Policy::JsonlCritical => "jsonl-critical",
            Policy::Floor => "floor",
        }
    }

    fn note(self) -> &'static str {
        match self {
            Policy::Factlog => {
                "Store with each type's default tier; each step closed by one batch of \
                 tool/result + step/end (2*steps+1 fdatasyncs per turn)"
            }
            Policy::AllSynced => {
                "Store, every event alone with durability Synced (deltas via append_with)"
            }
            Policy::AllBuffered => {
                "raw Log::append(Buffered) of the factlog policy's encoded records, one final \
                 flush(Synced); bypasses the store (it refuses Buffered for Synced-default types)"
            }
            Policy::JsonlEvery => "JSONL file, one write per line, fdatasync after every line",
            Policy::JsonlCritical => {
                "JSONL file, one write per line, fdatasync after tool/call, tool/result, turn/end"
            }
            Policy::Floor => {
                "pwrite+fdatasync into a preallocated, synced file, right after each factlog \
                 session: that session's fdatasyncs, each after the bytes it wrote before it"
            }
        }
    }

    /// Whether the policy syncs every event, and so runs only `--every-turns` turns.
    fn syncs_every_event(self) -> bool {
        matches!(self, Policy::AllSynced | Policy::JsonlEvery)
    }
}

/// A scratch directory, removed on drop.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new(parent: Option<&Path>) -> Result<Scratch, Failure> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = parent.join(format!("factlog-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|error| {
            Failure::failed(format_args!("cannot create {}: {error}", path.display()))
        })?;
        Ok(Scratch { path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // A scratch directory that cannot be removed is left behind; nothing depends on it.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What the runs share.
struct Inputs {
    full: Vec<Session>,
    every: Vec<Session>,
    full_lines: Vec<Vec<Line>>,
    every_lines: Vec<Vec<Line>>,
    reference: Reference,
    floor_file: File,
}

/// The `--svg` file, opened before the runs so that a path that cannot be written fails at
/// once, as a bad argument, instead of after minutes of measuring. It is emptied only when
/// the chart is written, so a run that fails leaves an earlier chart as it was; a file this
/// run created and never wrote is removed again.
struct SvgFile {
    path: PathBuf,
    file: File,
    /// Whether this run created the file (and so may remove it).
    created: bool,
    /// Whether the chart was written into it.
    written: bool,
}

impl SvgFile {
    fn open(path: &Path) -> Result<SvgFile, Failure> {
        let cannot = |error: std::io::Error| {
            Failure::usage(format_args!(
                "cannot write the chart to {}: {error}; give --svg a file in an existing, \
                     writable directory",
                path.display()
            ))
        };
        let (file, created) = match OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(file) => (file, true),
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                (OpenOptions::new().write(true).open(path).map_err(cannot)?, false)
            }
            Err(error) => return Err(cannot(error)),
        };
        Ok(SvgFile { path: path.to_path_buf(), file, created, written: false })
    }

    /// Replaces the file's content with `chart`.
    fn write(mut self, chart: &str) -> Result<(), Failure> {
        // Only a regular file can be emptied; a device or a pipe given as --svg is written on.
        let regular = self.file.metadata().is_ok_and(|m| m.is_file());
        let emptied = if regular { self.file.set_len(0) } else { Ok(()) };
        emptied.and_then(|()| self.file.write_all(chart.as_bytes())).map_err(|error| {
            Failure::failed(format_args!(
                "cannot write the chart to {}: {error}; the report on standard output is \
                     complete",
                self.path.display()
            ))
        })?;
        self.written = true;
        Ok(())
    }
}

impl Drop for SvgFile {
    fn drop(&mut self) {
        // An empty or partial file would pass for a chart; one that was there before this run
        // is left alone. One that cannot be removed is left behind: the failure that stopped
        // the run is the one worth reporting.
        if self.created && !self.written {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn failed(message: String) -> Failure {
    Failure::failed(message)
}

impl BenchArgs {
    /// Whether these arguments make this process a client of `--clients` (run it with
    /// [`clients::client_process`], without a progress line: its output is its parent's).
    pub fn is_client_process(&self) -> bool {
        self.client_process
    }
}

/// Runs `factlog bench`: measures every policy (telling `observer` how far it is), prints the
/// report on standard output, then writes the chart.
pub fn run(args: &BenchArgs, observer: &dyn Observer) -> Result<(), Failure> {
    if args.client_process {
        return clients::client_process();
    }
    if let Some(counts) = &args.clients {
        let turns = args.turns.unwrap_or(clients::TURNS_DEFAULT);
        return clients::run(args, counts, shape(args, turns), observer);
    }
    if let Some(counts) = &args.emit_clients {
        let turns = args.turns.unwrap_or(clients::TURNS_DEFAULT);
        return clients::emit::run(args, counts, shape(args, turns), observer);
    }
    if let Some(counts) = &args.sessions {
        let turns = args.turns.unwrap_or(sessions::TURNS_DEFAULT);
        return sessions::run(args, counts, shape(args, turns), observer);
    }
    let shape = shape(args, args.turns.unwrap_or(Shape::DEFAULT.turns));
    let every_shape = shape.with_turns_max(args.every_turns);
    let tasks = args.tasks as usize;
    let svg_file = args.svg.as_deref().map(SvgFile::open).transpose()?;
    let scratch = Scratch::new(args.dir.as_deref())?;
    let measurements = 1 + u64::from(args.runs) * POLICIES.len() as u64;
    observer.start("bench: reference run", measurements);
    let measured = measure_all(args, shape, every_shape, &scratch, observer)?;

    let floor_tokens = shape.deltas() * tasks as u64;
    let floor_ns: Vec<f64> = measured[index_of(Policy::Floor)]
        .iter()
        .map(|m| m.elapsed.as_nanos() as f64 / floor_tokens as f64)
        .collect();
    let reports: Vec<PolicyReport> = POLICIES
        .iter()
        .zip(measured)
        .map(|(&policy, runs)| {
            let s = if policy.syncs_every_event() { every_shape } else { shape };
            let mut note = policy.note().to_owned();
            if policy.syncs_every_event() && s.turns < shape.turns {
                note.push_str(&format!(" [only {} of {} turns, per token]", s.turns, shape.turns));
            }
            PolicyReport {
                name: policy.name(),
                note,
                turns: s.turns,
                tokens: s.deltas() * tasks as u64,
                turns_total: u64::from(s.turns) * tasks as u64,
                runs,
                floor_ns_per_token: floor_ns.clone(),
            }
        })
        .collect();
    let workload = Workload {
        turns: shape.turns,
        steps: shape.steps,
        tokens: shape.tokens,
        delta_bytes: shape.delta_bytes,
        result_bytes: shape.result_bytes,
        tasks,
        runs: args.runs as usize,
        every_turns: args.every_turns,
        events_per_session: shape.events(),
    };
    let text = if args.json {
        format!("{}\n", report::json(&workload, &reports))
    } else {
        report::table(&workload, &reports)
    };
    // The report goes out first: the figures took the whole run to get, and a chart that
    // cannot be written must not take them with it.
    let printed = print(&text);
    let charted = match svg_file {
        Some(file) => file.write(&report::svg(&workload, &reports)),
        None => Ok(()),
    };
    printed.and(charted)
}

/// The session of `args` with `turns` turns.
fn shape(args: &BenchArgs, turns: u32) -> Shape {
    Shape {
        turns,
        steps: args.steps,
        tokens: args.tokens,
        delta_bytes: args.delta_bytes as usize,
        result_bytes: args.result_bytes as usize,
    }
}

/// The index of `policy` in [`POLICIES`].
fn index_of(policy: Policy) -> usize {
    POLICIES.iter().position(|&p| p == policy).unwrap_or(0)
}

/// The reference session, then every run of every policy; per policy (in [`POLICIES`] order)
/// one measurement per run; `observer` is told of each measurement done.
fn measure_all(
    args: &BenchArgs,
    shape: Shape,
    every_shape: Shape,
    scratch: &Scratch,
    observer: &dyn Observer,
) -> Result<Vec<Vec<Measured>>, Failure> {
    let tasks = args.tasks as usize;
    let sessions =
        |shape: Shape| (0..tasks).map(|i| workload::session(shape, i as u64 + 1)).collect();
    let full: Vec<Session> = sessions(shape);
    let every: Vec<Session> = sessions(every_shape);
    let reference =
        policies::reference(&scratch.path.join("reference"), full.clone()).map_err(failed)?;
    observer.advance();
    // Twice the reference's bytes: a run with several tasks may group (and so frame) its
    // writes differently; the floor replays the bytes of each run's own session.
    let floor_bytes = reference.chunks.iter().sum::<u64>() * 2;
    let floor_file = policies::preallocated_file(
        &scratch.path.join("floor.bin"),
        floor_bytes.next_multiple_of(1 << 20) + (1 << 20),
    )
    .map_err(failed)?;
    let inputs = Inputs {
        full_lines: full.iter().map(workload::jsonl_lines).collect(),
        every_lines: every.iter().map(workload::jsonl_lines).collect(),
        full,
        every,
        reference,
        floor_file,
    };
    let mut measured: Vec<Vec<Measured>> = vec![Vec::new(); POLICIES.len()];
    for run in 0..args.runs as usize {
        for k in 0..ROTATED.len() {
            let policy = ROTATED[(k + run) % ROTATED.len()];
            observer.relabel(&format!("bench run {}/{}: {}", run + 1, args.runs, policy.name()));
            let dir = scratch.path.join(format!("run{run}-{}", policy.name()));
            let m = measure(policy, &dir, &inputs).map_err(failed)?;
            observer.advance();
            if policy == Policy::Factlog {
                observer.relabel(&format!("bench run {}/{}: floor", run + 1, args.runs));
                let floor = policies::floor(&inputs.floor_file, &m.chunks).map_err(failed)?;
                measured[index_of(Policy::Floor)].push(floor);
                observer.advance();
            }
            measured[index_of(policy)].push(m);
        }
    }
    Ok(measured)
}

/// One timed session of `policy`, in the fresh directory `dir` when it needs one.
fn measure(policy: Policy, dir: &Path, inputs: &Inputs) -> Result<Measured, String> {
    match policy {
        Policy::Factlog => policies::store(dir, inputs.full.clone(), StoreMode::Tiers),
        Policy::AllSynced => policies::store(dir, inputs.every.clone(), StoreMode::AllSynced),
        Policy::AllBuffered => policies::raw_buffered(dir, &inputs.reference),
        Policy::JsonlEvery | Policy::JsonlCritical => {
            std::fs::create_dir_all(dir)
                .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
            let (lines, sync) = if policy == Policy::JsonlEvery {
                (&inputs.every_lines, JsonlSync::Every)
            } else {
                (&inputs.full_lines, JsonlSync::Critical)
            };
            policies::jsonl(dir, lines, sync, JsonlFiles::Shared)
        }
        Policy::Floor => Err("the floor is measured with its factlog session".to_owned()),
    }
    .inspect(|_| {
        // Each store directory holds a 32 MiB segment and a 32 MiB preallocation: remove it
        // at once, so a long bench does not fill the scratch disk.
        let _ = std::fs::remove_dir_all(dir);
    })
}
