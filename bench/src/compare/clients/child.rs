//! A client process of `factlog bench --clients` (and of the bench `clients`): this executable
//! re-executed with its role in the environment ([`super::CLIENT_ROLE_ENV`],
//! [`super::CLIENT_PATH_ENV`]).
//!
//! It talks to its parent one line at a time. On standard output: `ready` once it is connected
//! (or has opened its store and its preallocation is on disk) and has its session; `done
//! CPU_NS SWITCHES SYNCS SYNCS_BY_FLUSHER LATENCIES` once the session is acknowledged, where
//! the syncs are `-` when it counts none and LATENCIES is the comma-separated nanoseconds of
//! its synced appends (`-` for none); `stored N` with the events its own store holds (0 when
//! the store is not its own), then it exits; `error MESSAGE` instead of any of these when it
//! fails. On standard input it waits for `go` before the session and `check` before counting;
//! when its standard input closes instead (the parent went away) it exits without going on.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use factlog::client::Client;
use factlog::engine::counting_fs::FsCounters;
use factlog::harness::Body;
use factlog::protocol::acks::AckMode;
use factlog::{AppendOptions, Durability, Store, Task};

use super::super::policies::{self, StoreMode};
use super::{CLIENT_PATH_ENV, CLIENT_ROLE_ENV, Policy, stored_events};
use crate::Failure;
use crate::many::{self, Timings, Usage};
use crate::workload::{self, Action, Session, Shape};

/// What a client reported when its session was done.
pub(super) struct Report {
    /// Its synced latencies and the processor time and switches of its session.
    pub timings: Timings,
    /// The record `fdatasync`s of its own store and those of them by the flusher.
    pub syncs: Option<(u64, u64)>,
}

impl Report {
    fn line(&self) -> String {
        let syncs = self.syncs.map_or_else(|| "- -".to_owned(), |(s, f)| format!("{s} {f}"));
        let latencies: Vec<String> = self.timings.synced_ns.iter().map(u64::to_string).collect();
        let latencies = if latencies.is_empty() { "-".to_owned() } else { latencies.join(",") };
        let usage = self.timings.usage;
        format!("done {} {} {syncs} {latencies}", usage.cpu_ns, usage.switches)
    }

    /// Reads a `done` line.
    pub(super) fn parse(line: &str) -> Result<Report, String> {
        let bad = || format!("a client's report is not `done CPU SWITCHES SYNCS ..`: {line:?}");
        let words: Vec<&str> = line.split(' ').collect();
        let ["done", cpu, switches, syncs, by_flusher, latencies] = words[..] else {
            return Err(bad());
        };
        let number = |word: &str| word.parse::<u64>().map_err(|_| bad());
        let syncs = match (syncs, by_flusher) {
            ("-", "-") => None,
            (syncs, by_flusher) => Some((number(syncs)?, number(by_flusher)?)),
        };
        let synced_ns = match latencies {
            "-" => Vec::new(),
            list => list.split(',').map(number).collect::<Result<_, _>>()?,
        };
        let usage = Usage { cpu_ns: number(cpu)?, switches: number(switches)? };
        Ok(Report { timings: Timings { synced_ns, max_any_ns: 0, usage }, syncs })
    }
}

/// The role of a client process, from its environment.
struct Role {
    policy: Policy,
    index: usize,
    shape: Shape,
    path: PathBuf,
}

impl Role {
    fn from_env() -> Result<Role, String> {
        let role = std::env::var(CLIENT_ROLE_ENV)
            .map_err(|_| format!("{CLIENT_ROLE_ENV} is not set: this runs only as a client"))?;
        let path = std::env::var_os(CLIENT_PATH_ENV)
            .map(PathBuf::from)
            .ok_or_else(|| format!("{CLIENT_PATH_ENV} is not set"))?;
        let words: Vec<&str> = role.split(' ').collect();
        let bad = || format!("{CLIENT_ROLE_ENV}={role:?}: POLICY INDEX TURNS STEPS TOKENS ..");
        let [policy, index, turns, steps, tokens, delta_bytes, result_bytes] = words[..] else {
            return Err(bad());
        };
        let policy = Policy::named(policy).ok_or_else(bad)?;
        let number = |word: &str| word.parse::<u32>().map_err(|_| bad());
        let shape = Shape {
            turns: number(turns)?,
            steps: number(steps)?,
            tokens: number(tokens)?,
            delta_bytes: number(delta_bytes)? as usize,
            result_bytes: number(result_bytes)? as usize,
        };
        Ok(Role { policy, index: number(index)? as usize, shape, path })
    }
}

/// Runs the client process whose role is in the environment: returns once its parent has had
/// its report and its count (or closed its standard input).
///
/// # Errors
///
/// A role that cannot be read, a store or connection error, a refused append: also said to
/// the parent as an `error` line.
pub fn client_process() -> Result<(), Failure> {
    let outcome = Role::from_env().and_then(|role| run(&role));
    if let Err(message) = &outcome {
        // The parent reads this line; if it has gone, the exit status says the rest.
        let _ = say(&format!("error {message}"));
    }
    outcome.map_err(Failure::failed)
}

/// Writes `line` to the parent.
fn say(line: &str) -> Result<(), String> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|error| format!("cannot write to the parent: {error}"))
}

/// Waits for `word` from the parent; `false` when its standard input closed instead.
fn wait_for(word: &str) -> Result<bool, String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) => Ok(false),
        Ok(_) if line.trim() == word => Ok(true),
        Ok(_) => Err(format!("the parent said {:?} instead of {word}", line.trim())),
        Err(error) => Err(format!("cannot read from the parent: {error}")),
    }
}

/// What a client holds while it waits to be released.
enum Door {
    Served(Box<Client>),
    Own {
        store: Store,
        task: Task,
        counters: Arc<FsCounters>,
    },
    #[cfg(feature = "sqlite")]
    Sqlite(Box<(rusqlite::Connection, crate::events::Workload)>),
}

fn run(role: &Role) -> Result<(), String> {
    let session = workload::session(role.shape, role.index as u64 + 1);
    let door = match role.policy {
        Policy::Served | Policy::ServedEvery => {
            // served: acknowledgements of what became durable only, the fragments and
            // pipelined appends get no reply of their own (format-spec/server.md,
            // "Acknowledgements"); served-every: every line answered.
            let acks =
                if role.policy == Policy::Served { AckMode::DurableOnly } else { AckMode::Every };
            let client = Client::connect_acks(&role.path, acks)
                .map_err(|error| format!("connect: {error}"))?;
            Door::Served(Box::new(client))
        }
        Policy::OwnStores => {
            let (store, counters) = policies::open_store(&role.path)?;
            let task = store.task(&session.task).map_err(|error| format!("task: {error}"))?;
            Door::Own { store, task, counters }
        }
        #[cfg(feature = "sqlite")]
        Policy::Sqlite => {
            let seed = role.index as u64 + 1;
            let workload = crate::events::Workload::new(role.shape, seed, &session.task);
            Door::Sqlite(Box::new((crate::sqlite::connect(&role.path), workload)))
        }
        Policy::Threads => return Err("threads run in the parent".to_owned()),
    };
    say("ready")?;
    if !wait_for("go")? {
        return Ok(());
    }
    let task_name = session.task.clone();
    let before = Usage::now();
    let (synced_ns, own) = match door {
        Door::Served(mut client) => (served_session(&mut client, session)?, None),
        Door::Own { store, task, counters } => {
            let counted = counters.read();
            let latencies = policies::perform(&task, session, StoreMode::Tiers)?;
            let counts = counters.read().since(&counted);
            let syncs = (counts.record_syncs(), counts.record_syncs_by_flusher());
            (latencies, Some((store, task, syncs)))
        }
        #[cfg(feature = "sqlite")]
        Door::Sqlite(sqlite) => {
            let (conn, workload) = *sqlite;
            let timings = crate::sqlite::session(&conn, &workload);
            (timings.synced_ns, None)
        }
    };
    let usage = Usage::now().since(before);
    let report = Report {
        timings: Timings { synced_ns, max_any_ns: 0, usage },
        syncs: own.as_ref().map(|(_, _, syncs)| *syncs),
    };
    say(&report.line())?;
    if !wait_for("check")? {
        return Ok(());
    }
    let stored = match own {
        Some((store, task, _)) => {
            let stored = stored_events(&store, &[task_name])?;
            drop(task);
            store.close().map_err(|error| format!("close the store: {error}"))?;
            stored
        }
        None => 0,
    };
    say(&format!("stored {stored}"))
}

/// Whether `body`'s type is `Buffered` by default (what `Client::append_pipelined` takes).
fn buffered(body: &Body) -> bool {
    body.event_type().is_some_and(|t| t.default_durability() == Durability::Buffered)
}

/// One session through a client of the served store: the latency of each synced append.
fn served_session(client: &mut Client, session: Session) -> Result<Vec<u64>, String> {
    let failed = |what: &'static str| move |error| format!("{what}: {error}");
    let task = session.task.as_str();
    let mut latencies = Vec::new();
    for action in session.actions {
        let synced = many::synced_action(&action);
        // The clock is read for the synced actions only, not once a fragment: the threads' and
        // own stores' sessions read it for each append (`policies::timed_append`), never for a
        // fragment.
        let start = synced.then(Instant::now);
        match action {
            Action::Delta(range) => {
                client.delta(task, &session.deltas[range]).map_err(failed("delta"))?;
            }
            Action::Append(body) if !synced && buffered(&body) => {
                client.append_pipelined(task, &body).map_err(failed("pipelined append"))?;
            }
            Action::Append(body) => {
                client.append(task, &body, AppendOptions::default()).map_err(failed("append"))?;
            }
            Action::CloseStep(bodies) => {
                let batch = &bodies[..];
                client
                    .append_batch(task, batch, AppendOptions::default())
                    .map_err(failed("batch"))?;
            }
        }
        if let Some(start) = start {
            latencies.push(start.elapsed().as_nanos() as u64);
        }
    }
    client.flush().map_err(failed("flush the last fragments"))?;
    Ok(latencies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_read_back() {
        let report = Report {
            timings: Timings {
                synced_ns: vec![5, 7],
                max_any_ns: 0,
                usage: Usage { cpu_ns: 3, switches: 4 },
            },
            syncs: Some((9, 1)),
        };
        let line = report.line();
        assert_eq!(line, "done 3 4 9 1 5,7");
        let back = Report::parse(&line).expect("parse");
        assert_eq!(back.timings.synced_ns, vec![5, 7]);
        assert_eq!(back.syncs, Some((9, 1)));
        let none = Report::parse("done 1 2 - - -").expect("parse");
        assert!(none.syncs.is_none() && none.timings.synced_ns.is_empty());
        assert!(Report::parse("done 1 2").is_err());
    }
}
