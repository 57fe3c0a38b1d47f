//! `factlog bench --clients LIST`: the many-session workload (`/work/shared/mission/workload.md`,
//! "Many sessions") run by N processes. For each N of the list, N sessions, each on a task of
//! its own, under these policies:
//!
//! - `served`: one process (this one) holds a typed store and shares it (`Store::serve`); N
//!   client processes each run one session through `factlog::client::Client` on
//!   `DIR/factlog.sock`: fragments with `Client::delta` and the other events `Buffered` by
//!   default (`turn/start`, `step/start`) with `Client::append_pipelined` (both sent with the
//!   next request, their replies read in bulk), every other event with `Client::append`, which
//!   waits for its reply, and each step closed by one `Client::append_batch` of `tool/result` +
//!   `step/end`; every event at its type's default durability.
//! - `threads`: the same sessions as N threads of this process on one typed store, each step
//!   closed by one batch (the `factlog` policy of `--sessions`).
//! - `own-stores`: N processes, each writing its session into a typed store of its own, as N
//!   harnesses that do not share one.
//! - `sqlite` (only in a build with the feature `sqlite` of `factlog-bench`, which the benches
//!   enable and the command's feature `bench-sqlite` passes on): one SQLite database in WAL mode
//!   (`synchronous=FULL`) shared by N processes, a connection each, `BEGIN IMMEDIATE` at the
//!   first event after a commit, a commit at each critical event, a busy timeout of 60 s.
//!
//! The client processes are this executable again ([`Launcher`]): the command re-executes
//! itself as `factlog bench --client-process` (hidden), the bench `clients` re-executes itself;
//! either way the role comes in the environment ([`CLIENT_ROLE_ENV`], [`CLIENT_PATH_ENV`]) and
//! [`client_process`] runs it (`child.rs`). Each client is started, connected (or has opened its
//! store and waited for its preallocation) and given its session before the clock starts; all
//! are released at once by a line on their standard input, and the wall time ends when the
//! last has reported. Only then are they asked how many events their stores hold, so no check
//! runs while another client still writes.
//!
//! Every N and policy is measured once a run, the N in an order rotated from run to run and
//! the policies rotated within each N, so a slow spell of the shared disk does not fall on one
//! of them only. The ratios between policies are taken within each run, between measurements of
//! the same N. After every measurement the events found in the store (the served and threads
//! stores are flushed and read back, each own store in its process, the SQLite table counted)
//! must be every event the sessions were acknowledged: a run that lost one fails.

mod child;
pub mod emit;
mod report;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use factlog::limits::SERVER_CLIENTS_MAX;
use factlog::server::ServeOptions;
use factlog::{Durability, Seq, Store, Task};
use parking_lot::Mutex;

use super::policies::{self, StoreMode};
use super::{BenchArgs, Scratch, failed};
use crate::many::Usage;
use crate::workload::{self, Session, Shape};
use crate::{Failure, Observer, print};
pub use report::{ClientsWorkload, Row, json, table};

pub use child::client_process;

/// The environment variable that makes a re-executed process a client:
/// `POLICY INDEX TURNS STEPS TOKENS DELTA_BYTES RESULT_BYTES`.
pub const CLIENT_ROLE_ENV: &str = "FACTLOG_BENCH_CLIENT_ROLE";

/// The environment variable holding a client's path: the served store's directory, the
/// directory of its own store, or the SQLite database.
pub const CLIENT_PATH_ENV: &str = "FACTLOG_BENCH_CLIENT_PATH";

/// The most entries of a `--clients` list: each is measured once per run under every policy.
pub const CLIENT_COUNTS_MAX: usize = 16;

/// Turns per session with `--clients` unless `--turns` says otherwise: 10, as with
/// `--sessions`, so that the largest N stays within seconds a run.
pub const TURNS_DEFAULT: u32 = 10;

/// The N of a `--clients` list: distinct, each 1 to [`SERVER_CLIENTS_MAX`] (the most clients a
/// served store serves at once), in ascending order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCounts(Vec<usize>);

impl ClientCounts {
    /// The counts, ascending.
    pub fn counts(&self) -> &[usize] {
        &self.0
    }
}

/// Parses a `--clients` list: comma-separated counts of client processes, such as `1,8,32`.
pub fn parse_counts(text: &str) -> Result<ClientCounts, String> {
    let mut counts = Vec::new();
    for entry in text.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(format!(
                "{text:?} has an empty entry; give comma-separated counts such as 1,8,32"
            ));
        }
        let count: usize = entry.parse().map_err(|_| {
            format!("{entry:?} is not a count of clients; give whole numbers such as 1,8,32")
        })?;
        if !(1..=SERVER_CLIENTS_MAX).contains(&count) {
            return Err(format!(
                "{count} clients: each count must be 1 to {SERVER_CLIENTS_MAX}, the most \
                 clients a served store serves at once"
            ));
        }
        if counts.contains(&count) {
            return Err(format!("{count} is listed twice"));
        }
        counts.push(count);
    }
    if counts.len() > CLIENT_COUNTS_MAX {
        return Err(format!("at most {CLIENT_COUNTS_MAX} counts of clients, not {}", counts.len()));
    }
    counts.sort_unstable();
    Ok(ClientCounts(counts))
}

/// The policies of the many-process form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// N client processes of one served store, with durable-only acknowledgements.
    Served,
    /// The same, every line answered (the acknowledgements a client has by default).
    ServedEvery,
    /// N threads of this process on one store.
    Threads,
    /// N processes, each with a store of its own.
    OwnStores,
    /// N processes sharing one SQLite database in WAL mode.
    #[cfg(feature = "sqlite")]
    Sqlite,
}

/// The policies this build measures, in the order they are reported.
#[cfg(feature = "sqlite")]
pub const POLICIES: &[Policy] =
    &[Policy::Served, Policy::ServedEvery, Policy::Threads, Policy::OwnStores, Policy::Sqlite];

/// The policies this build measures, in the order they are reported (SQLite is not built in).
#[cfg(not(feature = "sqlite"))]
pub const POLICIES: &[Policy] =
    &[Policy::Served, Policy::ServedEvery, Policy::Threads, Policy::OwnStores];

impl Policy {
    /// The policy's name in reports and client roles.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Served => "served",
            Policy::ServedEvery => "served-every",
            Policy::Threads => "threads",
            Policy::OwnStores => "own-stores",
            #[cfg(feature = "sqlite")]
            Policy::Sqlite => "sqlite",
        }
    }

    /// The policy named `name`, if this build has it.
    pub fn named(name: &str) -> Option<Policy> {
        POLICIES.iter().copied().find(|p| p.name() == name)
    }

    /// What the policy does, in one line.
    pub fn note(self) -> &'static str {
        match self {
            Policy::Served => {
                "N client processes of one served store (Store::serve, Client on DIR/factlog.sock, \
                 durable-only acknowledgements): deltas and turn/start, step/start pipelined, the \
                 rest each awaited, a step closed by one batch of tool/result + step/end"
            }
            Policy::ServedEvery => {
                "served with every line answered (the default acknowledgements): each full \
                 buffer of pipelined lines waits for their replies"
            }
            Policy::Threads => {
                "N threads of one process on one Store, each type's default tier, a step closed \
                 by one batch of tool/result + step/end"
            }
            Policy::OwnStores => {
                "N processes, each writing its session into a Store of its own (default \
                 options), a step closed by one batch"
            }
            #[cfg(feature = "sqlite")]
            Policy::Sqlite => {
                "one SQLite database (WAL, synchronous=FULL) shared by N processes, a \
                 connection each: BEGIN IMMEDIATE, one insert per event, COMMIT at each critical \
                 event, busy timeout 60 s"
            }
        }
    }
}

/// How to start this executable as a client process: the program and the arguments that route
/// it to [`client_process`]; the role is added in the environment.
#[derive(Debug, Clone)]
pub struct Launcher {
    program: PathBuf,
    args: Vec<OsString>,
}

impl Launcher {
    /// This executable with `args` before the role: `["bench", "--client-process"]` for the
    /// command, none for a bench whose `main` looks at [`CLIENT_ROLE_ENV`] first.
    ///
    /// # Errors
    ///
    /// When the running executable cannot be found.
    pub fn this_executable(args: &[&str]) -> Result<Launcher, Failure> {
        let program = std::env::current_exe().map_err(|error| {
            Failure::failed(format_args!("cannot find this executable to start clients: {error}"))
        })?;
        Ok(Launcher { program, args: args.iter().map(OsString::from).collect() })
    }
}

/// One timed measurement of one policy at one N.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Wall time from the release until the last session was done.
    pub elapsed: Duration,
    /// The `fdatasync`s the records cost (`FsCounts::record_syncs`, summed over the stores);
    /// `None` where they are not counted (SQLite).
    pub syncs: Option<u64>,
    /// Those of `syncs` the background flusher issued.
    pub syncs_by_flusher: Option<u64>,
    /// The latency of every synced append of every session, in nanoseconds.
    pub synced_ns: Vec<u64>,
    /// What every process of the policy used while the sessions ran.
    pub usage: Usage,
    /// What the serving process alone used (its connection threads, writer and flusher);
    /// `None` for the policies without one.
    pub server_usage: Option<Usage>,
    /// Events of the sessions' tasks found in the store (or stores, or database) afterwards.
    pub stored: u64,
}

/// Runs `factlog bench --clients`: measures every N under every policy, its client processes
/// this command re-executed as `bench --client-process`, and prints the report.
pub(super) fn run(
    args: &BenchArgs,
    counts: &ClientCounts,
    shape: Shape,
    observer: &dyn Observer,
) -> Result<(), Failure> {
    let launcher = Launcher::this_executable(&["bench", "--client-process"])?;
    let scratch = Scratch::new(args.dir.as_deref())?;
    let runs = args.runs as usize;
    let measurements = (counts.0.len() * runs * POLICIES.len()) as u64;
    observer.start("bench: clients", measurements);
    let rows = measure_all(&counts.0, POLICIES, runs, shape, &scratch.path, &launcher, observer)?;
    let workload = ClientsWorkload::new(shape, runs, counts.0.clone(), POLICIES.to_vec());
    let text = if args.json {
        format!("{}\n", report::json(&workload, &rows))
    } else {
        report::table(&workload, &rows)
    };
    print(&text)
}

/// Measures every run of every N and each of `policies` in `dir` (a scratch directory); one
/// row per N and policy, N as in `counts`, policies in the order given.
///
/// # Errors
///
/// The first measurement that failed, or that found fewer events stored than acknowledged.
pub fn measure_all(
    counts: &[usize],
    policies: &[Policy],
    runs: usize,
    shape: Shape,
    dir: &Path,
    launcher: &Launcher,
    observer: &dyn Observer,
) -> Result<Vec<Row>, Failure> {
    let mut measured: Vec<Vec<Vec<Measured>>> =
        vec![vec![Vec::with_capacity(runs); policies.len()]; counts.len()];
    for run in 0..runs {
        for i in 0..counts.len() {
            let which = (i + run) % counts.len();
            let n = counts[which];
            let sessions: Vec<Session> =
                (0..n).map(|k| workload::session(shape, k as u64 + 1)).collect();
            for k in 0..policies.len() {
                let index = (k + run + i) % policies.len();
                let policy = policies[index];
                observer.relabel(&format!(
                    "bench run {}/{runs}: {n} clients, {}",
                    run + 1,
                    policy.name()
                ));
                let at = dir.join(format!("run{run}-n{n}-{}", policy.name()));
                let m = measure(policy, &sessions, shape, &at, launcher);
                // A store directory holds a segment and its preallocation: removed at once, so
                // a long bench does not fill the scratch disk.
                let _ = std::fs::remove_dir_all(&at);
                let m =
                    m.map_err(|error| failed(format!("{n} clients, {}: {error}", policy.name())))?;
                let expected = shape.events() * n as u64;
                if m.stored != expected {
                    return Err(failed(format!(
                        "{n} clients, {}: the store holds {} of the {expected} events the \
                         sessions were acknowledged",
                        policy.name(),
                        m.stored
                    )));
                }
                measured[which][index].push(m);
                observer.advance();
            }
        }
    }
    let mut rows = Vec::with_capacity(counts.len() * policies.len());
    for (&n, per_policy) in counts.iter().zip(measured) {
        for (&policy, runs) in policies.iter().zip(per_policy) {
            rows.push(Row { clients: n, policy, runs });
        }
    }
    Ok(rows)
}

/// One timed measurement of `policy` on `sessions` in the fresh directory `dir`.
fn measure(
    policy: Policy,
    sessions: &[Session],
    shape: Shape,
    dir: &Path,
    launcher: &Launcher,
) -> Result<Measured, String> {
    std::fs::create_dir_all(dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    match policy {
        Policy::Threads => threads(sessions, &dir.join("store")),
        Policy::Served | Policy::ServedEvery => {
            served(policy, sessions, shape, &dir.join("store"), launcher)
        }
        Policy::OwnStores => {
            let mut clients = Clients::start(launcher, policy, shape, sessions.len(), |i| {
                dir.join(format!("client-{i}"))
            })?;
            let (elapsed, mut measured) = clients.release()?;
            measured.elapsed = elapsed;
            measured.stored = clients.check()?;
            Ok(measured)
        }
        #[cfg(feature = "sqlite")]
        Policy::Sqlite => {
            let path = dir.join("events.db");
            let setup = crate::sqlite::create(&path);
            let mut clients =
                Clients::start(launcher, policy, shape, sessions.len(), |_| path.clone())?;
            let (elapsed, mut measured) = clients.release()?;
            measured.elapsed = elapsed;
            clients.check()?;
            let stored: i64 = setup
                .query_row("SELECT COUNT(*) FROM events", [], |row| row.get(0))
                .map_err(|error| format!("count the rows: {error}"))?;
            measured.stored = stored.try_into().unwrap_or(0);
            setup.close().map_err(|(_, error)| format!("close the database: {error}"))?;
            Ok(measured)
        }
    }
}

/// Events of `tasks` in `store`'s log, once every buffered one is written.
fn stored_events(store: &Store, tasks: &[String]) -> Result<u64, String> {
    store.flush(Durability::Synced).map_err(|error| format!("flush: {error}"))?;
    let reader = store.log().read_from(Seq(1)).map_err(|error| format!("read back: {error}"))?;
    let mut count = 0;
    for record in reader {
        let record = record.map_err(|error| format!("read back: {error}"))?;
        let envelope = factlog::harness::codec::peek(record.seq, &record.payload)
            .map_err(|error| format!("read back: {error}"))?;
        if tasks.iter().any(|task| task.as_str() == envelope.task) {
            count += 1;
        }
    }
    Ok(count)
}

/// The `threads` policy: one thread per session on one store in `dir`, released together.
fn threads(sessions: &[Session], dir: &Path) -> Result<Measured, String> {
    let (store, counters) = policies::open_store(dir)?;
    let tasks: Vec<Task> = sessions
        .iter()
        .map(|s| store.task(&s.task).map_err(|error| format!("task: {error}")))
        .collect::<Result<_, _>>()?;
    let slots: Vec<Mutex<Option<Session>>> =
        sessions.iter().map(|s| Mutex::new(Some(s.clone()))).collect();
    let barrier = Barrier::new(sessions.len() + 1);
    let before = counters.read();
    let (elapsed, usage, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions.len())
            .map(|i| {
                let (barrier, slots, tasks) = (&barrier, &slots, &tasks);
                scope.spawn(move || {
                    barrier.wait();
                    let session = slots[i].lock().take().ok_or("a session ran twice")?;
                    policies::perform(&tasks[i], session, StoreMode::Tiers)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let used = Usage::now();
        let results: Vec<Result<Vec<u64>, String>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a session thread panicked".to_owned())))
            .collect();
        (start.elapsed(), Usage::now().since(used), results)
    });
    let counts = counters.read().since(&before);
    let mut synced_ns = Vec::new();
    for result in results {
        synced_ns.extend(result?);
    }
    let names: Vec<String> = sessions.iter().map(|s| s.task.clone()).collect();
    let stored = stored_events(&store, &names)?;
    drop(tasks);
    store.close().map_err(|error| format!("close the store: {error}"))?;
    Ok(Measured {
        elapsed,
        syncs: Some(counts.record_syncs()),
        syncs_by_flusher: Some(counts.record_syncs_by_flusher()),
        synced_ns,
        usage,
        server_usage: None,
        stored,
    })
}

/// The `served` policy: this process serves a store in `dir`; one client process per session.
fn served(
    policy: Policy,
    sessions: &[Session],
    shape: Shape,
    dir: &Path,
    launcher: &Launcher,
) -> Result<Measured, String> {
    let (store, counters) = policies::open_store(dir)?;
    let server = store
        .serve(ServeOptions::new().clients_max(sessions.len()))
        .map_err(|error| format!("serve the store: {error}"))?;
    let mut clients =
        Clients::start(launcher, policy, shape, sessions.len(), |_| dir.to_path_buf())?;
    let before = counters.read();
    let used = Usage::now();
    let (elapsed, mut measured) = clients.release()?;
    let usage = Usage::now().since(used);
    let counts = counters.read().since(&before);
    clients.check()?;
    drop(clients);
    let names: Vec<String> = sessions.iter().map(|s| s.task.clone()).collect();
    let stored = stored_events(&store, &names)?;
    server.stop().map_err(|error| format!("stop serving: {error}"))?;
    store.close().map_err(|error| format!("close the store: {error}"))?;
    measured.elapsed = elapsed;
    measured.usage.cpu_ns += usage.cpu_ns;
    measured.usage.switches += usage.switches;
    measured.server_usage = Some(usage);
    measured.syncs = Some(counts.record_syncs());
    measured.syncs_by_flusher = Some(counts.record_syncs_by_flusher());
    measured.stored = stored;
    Ok(measured)
}

/// One started client process.
struct Started {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Started {
    /// The next line the client writes, without its newline.
    fn line(&mut self, waiting_for: &str) -> Result<String, String> {
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line);
        match read {
            Ok(n) if n > 0 => {}
            Ok(_) | Err(_) => {
                // The client is gone: its exit status (and its standard error, inherited)
                // say why.
                let status = self.child.wait().map_or_else(|e| e.to_string(), |s| s.to_string());
                return Err(format!(
                    "a client process ended before it said {waiting_for} ({status})"
                ));
            }
        }
        let line = line.trim_end().to_owned();
        match line.strip_prefix("error ") {
            Some(message) => Err(format!("a client process failed: {message}")),
            None => Ok(line),
        }
    }

    fn tell(&mut self, line: &str) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("a client's standard input is closed")?;
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .map_err(|error| format!("cannot tell a client process to {line}: {error}"))
    }
}

/// The client processes of one measurement. Dropping them closes their standard input (a
/// client that reads its end exits) and waits for them; a client still running is killed
/// first, so a failed measurement leaves no process behind.
struct Clients {
    started: Vec<Started>,
}

impl Clients {
    /// Starts one client of `policy` per session, the `i`th on `path(i)`, and waits until each
    /// says it is ready.
    fn start(
        launcher: &Launcher,
        policy: Policy,
        shape: Shape,
        n: usize,
        path: impl Fn(usize) -> PathBuf,
    ) -> Result<Clients, String> {
        let mut clients = Clients { started: Vec::with_capacity(n) };
        for i in 0..n {
            let role = format!(
                "{} {i} {} {} {} {} {}",
                policy.name(),
                shape.turns,
                shape.steps,
                shape.tokens,
                shape.delta_bytes,
                shape.result_bytes
            );
            let mut child = Command::new(&launcher.program)
                .args(&launcher.args)
                .env(CLIENT_ROLE_ENV, role)
                .env(CLIENT_PATH_ENV, path(i))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|error| format!("cannot start a client process: {error}"))?;
            let stdin = child.stdin.take();
            let stdout = child.stdout.take().ok_or("no pipe from a client process")?;
            clients.started.push(Started { child, stdin, stdout: BufReader::new(stdout) });
        }
        for client in &mut clients.started {
            let line = client.line("ready")?;
            if line != "ready" {
                return Err(format!("a client process said {line:?} instead of ready"));
            }
        }
        Ok(clients)
    }

    /// Releases every client and reads their reports: the wall time from the release until
    /// the last report, and what they measured.
    fn release(&mut self) -> Result<(Duration, Measured), String> {
        let start = Instant::now();
        for client in &mut self.started {
            client.tell("go")?;
        }
        let mut lines = Vec::with_capacity(self.started.len());
        for client in &mut self.started {
            lines.push(client.line("done")?);
        }
        let elapsed = start.elapsed();
        let mut all = Measured::default();
        for line in &lines {
            let report = child::Report::parse(line)?;
            all.synced_ns.extend(report.timings.synced_ns);
            all.usage.cpu_ns += report.timings.usage.cpu_ns;
            all.usage.switches += report.timings.usage.switches;
            if let Some((syncs, by_flusher)) = report.syncs {
                all.syncs = Some(all.syncs.unwrap_or(0) + syncs);
                all.syncs_by_flusher = Some(all.syncs_by_flusher.unwrap_or(0) + by_flusher);
            }
        }
        Ok((elapsed, all))
    }

    /// Asks every client how many events its store holds (those of its own store; 0 from the
    /// clients of a shared one, which this process counts) and waits for them to exit.
    fn check(&mut self) -> Result<u64, String> {
        let mut stored = 0;
        for client in &mut self.started {
            client.tell("check")?;
            let line = client.line("stored")?;
            let count = line
                .strip_prefix("stored ")
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| format!("a client process said {line:?} instead of stored N"))?;
            stored += count;
        }
        for client in &mut self.started {
            drop(client.stdin.take());
            let status = client
                .child
                .wait()
                .map_err(|error| format!("cannot wait for a client process: {error}"))?;
            if !status.success() {
                return Err(format!("a client process ended with {status}"));
            }
        }
        Ok(stored)
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        for client in &mut self.started {
            drop(client.stdin.take());
            if matches!(client.child.try_wait(), Ok(None)) {
                let _ = client.child.kill();
            }
            let _ = client.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_distinct_and_bounded_by_the_server() {
        assert_eq!(parse_counts("32,1,8"), Ok(ClientCounts(vec![1, 8, 32])));
        assert_eq!(parse_counts(" 4 "), Ok(ClientCounts(vec![4])));
        let max = SERVER_CLIENTS_MAX.to_string();
        assert_eq!(parse_counts(&max), Ok(ClientCounts(vec![SERVER_CLIENTS_MAX])));
        let beyond = (SERVER_CLIENTS_MAX + 1).to_string();
        for bad in ["", "0", "1,,2", "1,", "abc", "-1", beyond.as_str(), "8,8", "1.5"] {
            assert!(parse_counts(bad).is_err(), "{bad:?}");
        }
        let many: Vec<String> = (1..=CLIENT_COUNTS_MAX + 1).map(|n| n.to_string()).collect();
        assert!(parse_counts(&many.join(",")).is_err());
        for &policy in POLICIES {
            assert_eq!(Policy::named(policy.name()), Some(policy));
        }
    }
}
