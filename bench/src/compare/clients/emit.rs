//! `factlog bench --emit-clients LIST`: N `factlog emit` processes, as a user starts them, each
//! writing one session of the many-session workload from a file of JSON lines, either all
//! into one served store or each into a store of its own. For each N of the list:
//!
//! - `emit-served`: this process opens a store and serves it (`Store::serve`, as `factlog
//!   serve` does); N processes `factlog emit --ack durable-only DIR` relay their session
//!   through `DIR/factlog.sock`.
//! - `emit-own-stores`: N processes `factlog emit --ack durable-only DIR-i`, each creating and
//!   writing a store of its own.
//!
//! The processes are this executable (the `factlog` command) run as `emit`; every session's
//! lines are written to a file before the clock starts, and each process reads its file as
//! its standard input and writes its replies to a file. The wall time runs from the first
//! process started to the last one ended, so it holds what a user's processes pay: starting,
//! opening or connecting, writing, closing. Each process must exit 0 with its final
//! `{"end":true,..}` reply covering every line of its session, and afterwards every event must
//! be in the store (the served store read back, each own store opened and read back), or the
//! run fails. Every N and policy is measured once a run, the N rotated from run to run and
//! the two policies alternated.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use factlog::client::event_object;
use factlog::harness::Body;
use factlog::protocol::delta_line;
use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};
use serde_json::{Value, json};

use super::super::report::Spread;
use super::super::{BenchArgs, Scratch, failed};
use super::{ClientCounts, stored_events};

use crate::workload::{self, Action, Session, Shape};
use crate::{Failure, Observer, print};

/// The two policies, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitPolicy {
    /// N `emit` processes relaying through one served store.
    Served,
    /// N `emit` processes, each with a store of its own.
    OwnStores,
}

/// Both policies, in report order.
pub const EMIT_POLICIES: [EmitPolicy; 2] = [EmitPolicy::Served, EmitPolicy::OwnStores];

impl EmitPolicy {
    /// The policy's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            EmitPolicy::Served => "emit-served",
            EmitPolicy::OwnStores => "emit-own-stores",
        }
    }

    /// What the policy does, in one line.
    pub fn note(self) -> &'static str {
        match self {
            EmitPolicy::Served => {
                "N `factlog emit --ack durable-only DIR` processes relaying their sessions \
                 through one store this process serves (DIR/factlog.sock)"
            }
            EmitPolicy::OwnStores => {
                "N `factlog emit --ack durable-only DIR-i` processes, each creating and writing \
                 a store of its own"
            }
        }
    }
}

/// Runs `factlog bench --emit-clients`: measures every N under both policies and prints the
/// report.
pub(in super::super) fn run(
    args: &BenchArgs,
    counts: &ClientCounts,
    shape: Shape,
    observer: &dyn Observer,
) -> Result<(), Failure> {
    let program = std::env::current_exe().map_err(|error| {
        Failure::failed(format_args!("cannot find this executable to start emit: {error}"))
    })?;
    let scratch = Scratch::new(args.dir.as_deref())?;
    let runs = args.runs as usize;
    let counts = counts.counts();
    observer.start("bench: emit clients", (counts.len() * runs * EMIT_POLICIES.len()) as u64);
    let mut walls = vec![[Vec::with_capacity(runs), Vec::with_capacity(runs)]; counts.len()];
    for run in 0..runs {
        for i in 0..counts.len() {
            let which = (i + run) % counts.len();
            let n = counts[which];
            let inputs = write_inputs(shape, n, &scratch.path.join(format!("run{run}-n{n}")))
                .map_err(failed)?;
            for k in 0..EMIT_POLICIES.len() {
                let index = (k + run + i) % EMIT_POLICIES.len();
                let policy = EMIT_POLICIES[index];
                observer.relabel(&format!(
                    "bench run {}/{runs}: {n} emit processes, {}",
                    run + 1,
                    policy.name()
                ));
                let at = scratch.path.join(format!("run{run}-n{n}-{}", policy.name()));
                let measured = measure(policy, &program, &inputs, shape, &at);
                // Each store holds a segment and its preallocation: removed at once.
                let _ = std::fs::remove_dir_all(&at);
                let wall = measured.map_err(|error| {
                    failed(format!("{n} emit processes, {}: {error}", policy.name()))
                })?;
                walls[which][index].push(wall);
                observer.advance();
            }
        }
    }
    let report = EmitReport { shape, runs, counts: counts.to_vec(), walls };
    let text = if args.json { format!("{}\n", report.json()) } else { report.table() };
    print(&text)
}

/// One session's input file and its task.
struct Input {
    path: PathBuf,
    task: String,
}

/// The input files of `n` sessions of `shape` in `dir`, one JSON line per event: what a
/// harness would give `factlog emit` (each event at its type's default durability, a step's
/// `tool/result` and `step/end` as two lines).
fn write_inputs(shape: Shape, n: usize, dir: &Path) -> Result<Vec<Input>, String> {
    std::fs::create_dir_all(dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    (0..n)
        .map(|i| {
            let path = dir.join(format!("session-{i}.jsonl"));
            let session = workload::session(shape, i as u64 + 1);
            write_session(&session, &path)
                .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
            Ok(Input { path, task: session.task })
        })
        .collect()
}

/// Writes `session`'s events to `path` as `emit` lines: each the request line a client of a
/// served store sends for it ([`event_object`], [`delta_line::write_line`]).
fn write_session(session: &Session, path: &Path) -> std::io::Result<()> {
    let task = session.task.as_str();
    let mut bytes = Vec::new();
    let event = |bytes: &mut Vec<u8>, body: &Body| -> std::io::Result<()> {
        let object = event_object(task, body).map_err(std::io::Error::other)?;
        serde_json::to_writer(&mut *bytes, &object)?;
        bytes.push(b'\n');
        Ok(())
    };
    for action in &session.actions {
        match action {
            Action::Append(body) => event(&mut bytes, body)?,
            Action::Delta(range) => {
                delta_line::write_line(&mut bytes, task, &session.deltas[range.clone()])
            }
            Action::CloseStep(bodies) => {
                for body in bodies.iter() {
                    event(&mut bytes, body)?;
                }
            }
        }
    }
    std::fs::write(path, bytes)
}

/// One timed measurement of `policy`: the wall time from the first process started to the
/// last one ended, once every event is found stored.
fn measure(
    policy: EmitPolicy,
    program: &Path,
    inputs: &[Input],
    shape: Shape,
    dir: &Path,
) -> Result<Duration, String> {
    std::fs::create_dir_all(dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    let tasks: Vec<String> = inputs.iter().map(|input| input.task.clone()).collect();
    let expected = shape.events();
    match policy {
        EmitPolicy::Served => {
            let store_dir = dir.join("store");
            let store = Store::open(&store_dir, StoreOptions::new())
                .map_err(|error| format!("open the store: {error}"))?;
            let server = store
                .serve(ServeOptions::new().clients_max(inputs.len()))
                .map_err(|error| format!("serve the store: {error}"))?;
            let elapsed = emit_all(program, inputs, dir, expected, |_| store_dir.clone())?;
            let stored = stored_events(&store, &tasks)?;
            server.stop().map_err(|error| format!("stop serving: {error}"))?;
            store.close().map_err(|error| format!("close the store: {error}"))?;
            check_stored(stored, expected * inputs.len() as u64)?;
            Ok(elapsed)
        }
        EmitPolicy::OwnStores => {
            let store_of = |i: usize| dir.join(format!("store-{i}"));
            let elapsed = emit_all(program, inputs, dir, expected, store_of)?;
            let mut stored = 0;
            for (i, task) in tasks.iter().enumerate() {
                let store = Store::open(store_of(i), StoreOptions::new())
                    .map_err(|error| format!("open store {i} to count: {error}"))?;
                stored += stored_events(&store, std::slice::from_ref(task))?;
                store.close().map_err(|error| format!("close store {i}: {error}"))?;
            }
            check_stored(stored, expected * inputs.len() as u64)?;
            Ok(elapsed)
        }
    }
}

fn check_stored(stored: u64, expected: u64) -> Result<(), String> {
    if stored == expected {
        return Ok(());
    }
    Err(format!(
        "the stores hold {stored} of the {expected} events the processes were acknowledged"
    ))
}

/// Starts one `emit` per input (the `i`th into `store(i)`), waits for all of them, and checks
/// that each exited 0 with its final reply covering every line: the wall time from the first
/// start to the last end.
fn emit_all(
    program: &Path,
    inputs: &[Input],
    dir: &Path,
    lines: u64,
    store: impl Fn(usize) -> PathBuf,
) -> Result<Duration, String> {
    let mut files = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let path = &input.path;
        let stdin =
            File::open(path).map_err(|error| format!("open {}: {error}", path.display()))?;
        let replies = dir.join(format!("replies-{i}.jsonl"));
        let stdout = File::create(&replies)
            .map_err(|error| format!("create {}: {error}", replies.display()))?;
        files.push((stdin, stdout, replies));
    }
    let start = Instant::now();
    let mut children = Running(Vec::with_capacity(inputs.len()));
    for (i, (stdin, stdout, _)) in files.iter().enumerate() {
        let child = Command::new(program)
            .args(["emit", "--ack", "durable-only"])
            .arg(store(i))
            .stdin(Stdio::from(stdin.try_clone().map_err(|e| e.to_string())?))
            .stdout(Stdio::from(stdout.try_clone().map_err(|e| e.to_string())?))
            .spawn()
            .map_err(|error| format!("cannot start factlog emit: {error}"))?;
        children.0.push(child);
    }
    let mut statuses = Vec::with_capacity(inputs.len());
    for child in &mut children.0 {
        statuses.push(child.wait().map_err(|error| format!("wait for emit: {error}"))?);
    }
    let elapsed = start.elapsed();
    children.0.clear();
    for (i, (status, (_, _, replies))) in statuses.iter().zip(&files).enumerate() {
        if !status.success() {
            return Err(format!("emit process {i} ended with {status}"));
        }
        let text = std::fs::read_to_string(replies)
            .map_err(|error| format!("read {}: {error}", replies.display()))?;
        let last = text.lines().last().unwrap_or_default();
        let reply: Value = serde_json::from_str(last).unwrap_or(Value::Null);
        let covered: u64 = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|reply| reply.get("covers").and_then(Value::as_u64))
            .sum();
        if reply.get("end") != Some(&Value::Bool(true)) || covered != lines {
            return Err(format!(
                "emit process {i}: its replies cover {covered} of {lines} lines, the last \
                 {last:?}"
            ));
        }
    }
    Ok(elapsed)
}

/// The `emit` processes of a measurement: any still running when it fails are killed.
struct Running(Vec<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The figures of a run: per N and policy the wall time of every run.
struct EmitReport {
    shape: Shape,
    runs: usize,
    counts: Vec<usize>,
    /// Per N (as in `counts`), per policy (as in [`EMIT_POLICIES`]), one wall time a run.
    walls: Vec<[Vec<Duration>; 2]>,
}

impl EmitReport {
    fn wall_ms(walls: &[Duration]) -> Spread {
        let ms: Vec<f64> = walls.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        Spread::of(&ms)
    }

    /// Served over own stores, per run.
    fn ratio(walls: &[Vec<Duration>; 2]) -> Spread {
        let ratios: Vec<f64> = walls[0]
            .iter()
            .zip(&walls[1])
            .map(|(served, own)| served.as_secs_f64() / own.as_secs_f64())
            .collect();
        Spread::of(&ratios)
    }

    fn events_per_s(&self, n: usize, wall_ms: f64) -> f64 {
        (self.shape.events() * n as u64) as f64 / (wall_ms / 1e3)
    }

    fn table(&self) -> String {
        let shape = self.shape;
        let mut out = format!(
            "workload: N `factlog emit` processes at once, each a session of {} turns x {} \
             steps x {} tokens ({} events) from a file; N = {:?}; {} interleaved runs\n",
            shape.turns,
            shape.steps,
            shape.tokens,
            shape.events(),
            self.counts,
            self.runs
        );
        out.push_str(&format!(
            "{:>4} {:<16} {:>10} {:>12} {:>21}\n",
            "N", "policy", "wall ms", "events/s", "(min-max ms)"
        ));
        for (&n, walls) in self.counts.iter().zip(&self.walls) {
            for (policy, walls) in EMIT_POLICIES.iter().zip(walls) {
                let wall = Self::wall_ms(walls);
                out.push_str(&format!(
                    "{n:>4} {:<16} {:>10.1} {:>12.0} {:>21}\n",
                    policy.name(),
                    wall.median,
                    self.events_per_s(n, wall.median),
                    format!("({:.1}-{:.1})", wall.min, wall.max)
                ));
            }
        }
        out.push_str("\n   N emit-served / emit-own-stores\n");
        for (&n, walls) in self.counts.iter().zip(&self.walls) {
            let ratio = Self::ratio(walls);
            out.push_str(&format!(
                "{n:>4} {:.2}x ({:.2}-{:.2})\n",
                ratio.median, ratio.min, ratio.max
            ));
        }
        out.push_str(
            "\nwall ms: from the first emit process started to the last one ended, median \
             (min-max) over runs; events/s: N x events per session over the median wall; \
             ratio: wall over wall in the same run, median (min-max) of the runs.\n",
        );
        for policy in EMIT_POLICIES {
            out.push_str(&format!("  {:<16} {}\n", policy.name(), policy.note()));
        }
        out
    }

    fn json(&self) -> Value {
        let shape = self.shape;
        let mut results = Vec::new();
        let mut ratios = Vec::new();
        for (&n, walls) in self.counts.iter().zip(&self.walls) {
            for (policy, walls) in EMIT_POLICIES.iter().zip(walls) {
                let wall = Self::wall_ms(walls);
                results.push(json!({
                    "clients": n,
                    "policy": policy.name(),
                    "note": policy.note(),
                    "events_per_run": shape.events() * n as u64,
                    "wall_ms": wall.json(),
                    "events_per_s": self.events_per_s(n, wall.median),
                }));
            }
            ratios.push(json!({
                "clients": n,
                "emit_served_over_emit_own_stores": Self::ratio(walls).json(),
            }));
        }
        json!({
            "workload": {
                "turns": shape.turns,
                "steps": shape.steps,
                "tokens": shape.tokens,
                "events_per_session": shape.events(),
                "runs": self.runs,
                "clients": self.counts,
            },
            "results": results,
            "ratios": ratios,
        })
    }
}
