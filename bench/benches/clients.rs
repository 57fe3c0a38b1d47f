//! Several processes, one store (issue 16, "Benchmark"; `/work/shared/mission/workload.md`,
//! "Many sessions"): for each N, N sessions of the agent-session workload
//! (`benches/common/workload.rs`, text seeded by the session's number), each on a task of its
//! own, on the real disk (`target/tmp`), in three forms:
//!
//! - `processes`: one process holds the typed store (default options, fixed clock, every
//!   `fdatasync` counted through a counting file system) and shares it (`Store::serve`); N
//!   client processes (this executable again) each run one session through
//!   `factlog::client::Client`: fragments with `Client::delta` and the other events that are
//!   `Buffered` by default (`turn/start`, `step/start`) with `Client::append_pipelined` (both
//!   pipelined: sent with the next request, their replies read in bulk), every other event
//!   with `Client::append`, which waits for its reply, and each step closed by one
//!   `Client::append_batch` of `tool/result` + `step/end`; every event at its type's default
//!   durability.
//! - `threads`: the same sessions as N threads of this process on one typed store, as the
//!   `factlog` policy of `benches/sessions.rs`.
//! - `sqlite`: one SQLite database (WAL, `synchronous=FULL`) and N client processes, each with
//!   its own connection: `BEGIN IMMEDIATE` at the first event after a commit, a commit at each
//!   critical event, a busy timeout of 60 s (as `benches/sessions.rs` does with threads).
//!
//! Client processes are started, connected and given their session before the clock starts;
//! they all start at once (a line on their standard input) and the wall time ends when the
//! last has reported. Every N and form is measured once a run, the N in an order rotated from
//! run to run and the forms rotated within each N. Reported per N and form: median wall time
//! and aggregate events/s (min-max over runs), the processor time and the context switches
//! per event of all the form's processes while the sessions ran (`getrusage`; medians; for
//! `threads` the one process, otherwise the serving or setup process and every client),
//! `fdatasync`s per critical event (not counted for SQLite), p50/p99/max latency of the synced appends pooled over sessions and runs, and
//! the ratios `processes / threads` (wall time) and `sqlite / processes` (wall time), medians
//! of the per-run ratios.
//!
//! Run with `cargo bench --bench clients` (N = 1, 8, 32; 10 turns a session; 3 runs).
//! Environment: `FACTLOG_CLIENTS` (a list such as `1,8`, each at most the server's client
//! bound), `FACTLOG_TURNS`, `FACTLOG_TOKENS` (fragments a step, to tell their cost from the
//! round trips'), `FACTLOG_RUNS`, and `FACTLOG_FORMS` (a list of form names, to
//! profile one alone; the ratios are printed only when all three run).
//! Smoke test: `cargo bench --bench clients -- --test` (N = 1 and 3, one tiny turn, one run).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use factlog::client::Client;
use factlog::limits::{SEGMENT_BYTES_DEFAULT, SERVER_CLIENTS_MAX};
use factlog::server::ServeOptions;
use factlog::{AppendOptions, Options, Store, StoreOptions};

use events::{Workload, median};
use factlog::engine::counting_fs::CountingFs;
use many::{Timings, Usage};
use workload::{Action, Shape};

use factlog_bench::events;
use factlog_bench::many;
use factlog_bench::settle;
use factlog_bench::sqlite;
use factlog_bench::workload;

/// The environment variable that makes this executable a client process: `FORM DIR INDEX
/// TURNS STEPS TOKENS`.
const ROLE: &str = "FACTLOG_CLIENTS_ROLE";

const CLIENTS_DEFAULT: [usize; 3] = [1, 8, 32];
const TURNS_DEFAULT: u32 = 10;
const RUNS_DEFAULT: usize = 3;
const TEST_CLIENTS: [usize; 2] = [1, 3];
const TEST_SHAPE: Shape = Shape { turns: 1, steps: 1, tokens: 2, ..Shape::DEFAULT };

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Processes,
    Threads,
    Sqlite,
}

const FORMS: [Form; 3] = [Form::Processes, Form::Threads, Form::Sqlite];

impl Form {
    fn name(self) -> &'static str {
        match self {
            Form::Processes => "processes",
            Form::Threads => "threads",
            Form::Sqlite => "sqlite",
        }
    }
}

/// One timed measurement of one form at one N.
struct Run {
    elapsed: Duration,
    syncs: Option<u64>,
    timings: Timings,
}

fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        client_process(&role);
        return;
    }
    let test = std::env::args().any(|arg| arg == "--test");
    let (counts, shape, runs) = if test {
        (TEST_CLIENTS.to_vec(), TEST_SHAPE, 1)
    } else {
        let counts = match std::env::var("FACTLOG_CLIENTS") {
            Ok(list) => list
                .split(',')
                .map(|entry| match entry.trim().parse::<usize>() {
                    Ok(n) if (1..=SERVER_CLIENTS_MAX).contains(&n) => n,
                    _ => panic!("FACTLOG_CLIENTS={list:?}: counts of 1 to {SERVER_CLIENTS_MAX}"),
                })
                .collect(),
            Err(_) => CLIENTS_DEFAULT.to_vec(),
        };
        let turns = many::env_number("FACTLOG_TURNS", TURNS_DEFAULT);
        let tokens = many::env_number("FACTLOG_TOKENS", Shape::DEFAULT.tokens);
        (
            counts,
            Shape { turns, tokens, ..Shape::DEFAULT },
            many::env_number("FACTLOG_RUNS", RUNS_DEFAULT),
        )
    };
    println!(
        "clients: N = {counts:?}, {} turns x {} steps x {} tokens a session, {runs} runs",
        shape.turns, shape.steps, shape.tokens
    );
    let mut results: Vec<Vec<Vec<Run>>> =
        counts.iter().map(|_| FORMS.iter().map(|_| Vec::new()).collect()).collect();
    for run in 0..runs {
        for k in 0..counts.len() {
            let c = (k + run) % counts.len();
            let sessions: Vec<Workload> =
                (0..counts[c]).map(|i| Workload::new(shape, i as u64 + 1, &task_name(i))).collect();
            for f in 0..FORMS.len() {
                let form = (f + run + k) % FORMS.len();
                if !wanted(FORMS[form]) {
                    continue;
                }
                let measured = measure(FORMS[form], &sessions, shape);
                results[c][form].push(measured);
            }
        }
        eprintln!("run {} of {runs} done", run + 1);
    }
    for (c, &n) in counts.iter().enumerate() {
        let events = shape.events() as f64 * n as f64;
        let critical = shape.critical_events() as f64 * n as f64;
        println!("\nN = {n} ({} events, {} critical)", events, critical);
        println!(
            "{:<10} {:>10} {:>8} {:>9} {:>12} {:>22} {:>10} {:>9} {:>9} {:>9}",
            "form",
            "wall ms",
            "cpu ms",
            "sw/event",
            "events/s",
            "(min-max)",
            "sync/crit",
            "p50 us",
            "p99 us",
            "max us"
        );
        for (form, runs) in FORMS.iter().zip(&results[c]) {
            if runs.is_empty() {
                continue;
            }
            let walls: Vec<f64> = runs.iter().map(|r| r.elapsed.as_secs_f64()).collect();
            let rates: Vec<f64> = walls.iter().map(|w| events / w).collect();
            let (lo, hi) =
                rates.iter().fold((f64::INFINITY, 0.0_f64), |(l, h), &v| (l.min(v), h.max(v)));
            let syncs = runs
                .iter()
                .map(|r| r.syncs.map(|s| s as f64 / critical))
                .collect::<Option<Vec<f64>>>()
                .map_or_else(|| "-".to_owned(), |s| format!("{:.3}", median(s)));
            let mut synced: Vec<u64> =
                runs.iter().flat_map(|r| r.timings.synced_ns.iter().copied()).collect();
            synced.sort_unstable();
            let max = runs.iter().map(|r| r.timings.max_any_ns).max().unwrap_or(0);
            let cpus: Vec<f64> = runs.iter().map(|r| r.timings.usage.cpu_ns as f64 / 1e6).collect();
            let switches: Vec<f64> =
                runs.iter().map(|r| r.timings.usage.switches as f64 / events).collect();
            println!(
                "{:<10} {:>10.1} {:>8.1} {:>9.3} {:>12.0} {:>22} {:>10} {:>9.0} {:>9.0} {:>9.0}",
                form.name(),
                median(walls.clone()) * 1e3,
                median(cpus),
                median(switches),
                median(rates),
                format!("({lo:.0}-{hi:.0})"),
                syncs,
                many::percentile_us(&synced, 50.0),
                many::percentile_us(&synced, 99.0),
                max as f64 / 1e3,
            );
        }
        if results[c].iter().any(Vec::is_empty) {
            continue;
        }
        let ratio = |a: usize, b: usize| {
            let ratios = results[c][a]
                .iter()
                .zip(&results[c][b])
                .map(|(x, y)| x.elapsed.as_secs_f64() / y.elapsed.as_secs_f64())
                .collect();
            median(ratios)
        };
        println!(
            "processes / threads (wall): {:.2}x    sqlite / processes (wall): {:.2}x",
            ratio(0, 1),
            ratio(2, 0)
        );
    }
}

/// Whether `FACTLOG_FORMS` (a list of form names, to profile one alone) lets `form` run.
fn wanted(form: Form) -> bool {
    std::env::var("FACTLOG_FORMS")
        .map_or(true, |list| list.split(',').any(|f| f.trim() == form.name()))
}

fn task_name(i: usize) -> String {
    format!("session-{i}")
}

fn measure(form: Form, sessions: &[Workload], shape: Shape) -> Run {
    match form {
        Form::Threads => {
            let dir = factlog_bench::temp_dir!("clients-threads");
            let (elapsed, syncs, timings) = many::factlog_threads(sessions, dir.path());
            Run { elapsed, syncs: Some(syncs), timings }
        }
        Form::Processes => {
            let dir = factlog_bench::temp_dir!("clients-served");
            let (fs, counters) = CountingFs::new();
            let options =
                StoreOptions::new().clock(workload::fixed_clock).log(Options::new().fs(fs));
            let store = Store::open(dir.path(), options).expect("open the store");
            settle::wait_for_prealloc(dir.path(), SEGMENT_BYTES_DEFAULT);
            let server = store.serve(ServeOptions::new()).expect("serve the store");
            let before = counters.read();
            let (elapsed, timings) = clients(Form::Processes, dir.path(), sessions.len(), shape);
            let counts = counters.read().since(&before);
            drop(server);
            store.close().expect("close the store");
            Run { elapsed, syncs: Some(counts.segment_syncs() + counts.other_syncs()), timings }
        }
        Form::Sqlite => {
            let dir = factlog_bench::temp_dir!("clients-sqlite");
            let path = dir.path().join("events.db");
            let setup = sqlite::create(&path);
            let (elapsed, timings) = clients(Form::Sqlite, &path, sessions.len(), shape);
            setup.close().expect("close the database");
            Run { elapsed, syncs: None, timings }
        }
    }
}

/// A started client process, ready to go.
struct Started {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// Starts `n` client processes of `form` on `path`, waits until each is ready, releases them
/// together and returns the wall time until the last reported, with their timings.
fn clients(form: Form, path: &Path, n: usize, shape: Shape) -> (Duration, Timings) {
    let exe = std::env::current_exe().expect("this executable");
    let mut started: Vec<Started> = (0..n)
        .map(|i| {
            let role = format!(
                "{} {} {i} {} {} {}",
                form.name(),
                path.display(),
                shape.turns,
                shape.steps,
                shape.tokens
            );
            let mut child = Command::new(&exe)
                .env(ROLE, role)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a client process");
            let stdin = child.stdin.take().expect("stdin");
            let stdout = BufReader::new(child.stdout.take().expect("stdout"));
            Started { child, stdin, stdout }
        })
        .collect();
    let mut line = String::new();
    for client in &mut started {
        line.clear();
        client.stdout.read_line(&mut line).expect("read ready");
        assert_eq!(line.trim(), "ready", "a client process did not start");
    }
    let start = Instant::now();
    let before = Usage::now();
    for client in &mut started {
        client.stdin.write_all(b"go\n").expect("release a client");
        client.stdin.flush().expect("release a client");
    }
    let mut all = Timings::default();
    let mut lines = Vec::with_capacity(n);
    for client in &mut started {
        let mut line = String::new();
        client.stdout.read_line(&mut line).expect("read a report");
        lines.push(line);
    }
    let elapsed = start.elapsed();
    all.usage = Usage::now().since(before);
    for (client, line) in started.iter_mut().zip(lines) {
        all.merge(parse_report(&line));
        assert!(client.child.wait().expect("wait").success(), "a client process failed");
    }
    (elapsed, all)
}

/// `done MAX_NS CPU_NS SWITCHES SYNCED_NS,SYNCED_NS,...`
fn parse_report(line: &str) -> Timings {
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("done"), "a client's report: {line:?}");
    let max_any_ns = words.next().and_then(|w| w.parse().ok()).expect("max ns");
    let cpu_ns = words.next().and_then(|w| w.parse().ok()).expect("cpu ns");
    let switches = words.next().and_then(|w| w.parse().ok()).expect("switches");
    let synced_ns = words
        .next()
        .map(|list| list.split(',').map(|w| w.parse().expect("ns")).collect())
        .unwrap_or_default();
    Timings { synced_ns, max_any_ns, usage: Usage { cpu_ns, switches } }
}

/// The client process: connects, says `ready`, waits for `go`, runs its session, reports.
fn client_process(role: &str) {
    let words: Vec<&str> = role.split(' ').collect();
    let [form, path, index, turns, steps, tokens] = words[..] else {
        panic!("{ROLE}={role:?}: FORM PATH INDEX TURNS STEPS TOKENS");
    };
    let number = |w: &str| w.parse::<u32>().expect("a number");
    let index = number(index) as usize;
    let shape = Shape {
        turns: number(turns),
        steps: number(steps),
        tokens: number(tokens),
        ..Shape::DEFAULT
    };
    let task = task_name(index);
    let mut stdout = std::io::stdout().lock();
    let mut go = String::new();
    let before;
    let timings = match form {
        "processes" => {
            let session = workload::session(shape, index as u64 + 1);
            let mut client = Client::connect(path).expect("connect to the served store");
            writeln!(stdout, "ready").and_then(|()| stdout.flush()).expect("ready");
            std::io::stdin().read_line(&mut go).expect("go");
            before = Usage::now();
            served_session(&mut client, &task, session)
        }
        "sqlite" => {
            let w = Workload::new(shape, index as u64 + 1, &task);
            let conn = sqlite::connect(Path::new(path));
            writeln!(stdout, "ready").and_then(|()| stdout.flush()).expect("ready");
            std::io::stdin().read_line(&mut go).expect("go");
            before = Usage::now();
            sqlite::session(&conn, &w)
        }
        other => panic!("unknown form {other:?}"),
    };
    let usage = Usage::now().since(before);
    let synced: Vec<String> = timings.synced_ns.iter().map(u64::to_string).collect();
    let (max, cpu, switches) = (timings.max_any_ns, usage.cpu_ns, usage.switches);
    writeln!(stdout, "done {max} {cpu} {switches} {}", synced.join(",")).expect("report");
}

/// Whether `body`'s type is `Buffered` by default (what `Client::append_pipelined` takes).
fn buffered(body: &factlog::harness::Body) -> bool {
    body.event_type().is_some_and(|t| t.default_durability() == factlog::Durability::Buffered)
}

/// One session through a client of the served store.
fn served_session(client: &mut Client, task: &str, session: workload::Session) -> Timings {
    let mut timings = Timings::default();
    for action in session.actions {
        let synced = many::synced_action(&action);
        let start = Instant::now();
        match action {
            Action::Delta(range) => client.delta(task, &session.deltas[range]).expect("delta"),
            Action::Append(body) if !synced && buffered(&body) => {
                client.append_pipelined(task, &body).expect("pipelined append");
            }
            Action::Append(body) => {
                client.append(task, &body, AppendOptions::default()).expect("append");
            }
            Action::CloseStep(bodies) => {
                client.append_batch(task, &bodies[..], AppendOptions::default()).expect("batch");
            }
        }
        timings.record(start, synced);
    }
    client.flush().expect("flush the last fragments");
    timings
}
