//! The measuring and demonstrating side of factlog, beside its benches: the one agent-session
//! workload every bench runs (`/work/shared/mission/workload.md`), the machinery of
//! `factlog bench` (persistence cost per token under each durability policy, against
//! plain-file baselines and the physical floor measured in the same run) and of `factlog demo`
//! (a simulated agent whose writer is killed in a side-effecting call, and its recovery).
//!
//! The `factlog` command parses the arguments ([`compare::BenchArgs`], [`demo::DemoArgs`])
//! and calls [`compare::run`] and [`demo::run`]; the criterion benches in `benches/` share
//! [`workload`], [`events`], [`many`] and [`settle`]. Nothing here is part of the storage
//! library (`factlog`), which it only calls.
//!
//! | module | what it holds |
//! |---|---|
//! | [`workload`] | the session of the workload as typed events and as JSON lines |
//! | [`events`] | one session as the baselines write it (SQLite bodies, JSON lines, floor chunks) |
//! | [`many`] | the many-session form: timings, the parallel release of N sessions |
//! | [`settle`] | disk state settled before a measurement (preallocation, floor files) |
//! | [`scratch`] | the benches' scratch directories |
//! | `sqlite` | the SQLite baseline of the many-session benches (feature `sqlite`) |
//! | [`compare`] | `factlog bench`: policies, runs, reports and charts |
//! | [`demo`] | `factlog demo`: the crash, the recovery and what persistence cost |

pub mod compare;
pub mod demo;
pub mod events;
pub mod many;
pub mod scratch;
pub mod settle;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod workload;

use std::fmt;
use std::io::{ErrorKind, Write};

/// Why a bench or the demo stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The arguments cannot be run (a chart file that cannot be written, a missing
    /// directory): the command's usage error.
    Usage,
    /// The run failed on the way (a store or file error, a result that is not what the run
    /// must show).
    Failed,
}

/// A bench or the demo could not finish: what happened and what to do, as one line.
#[derive(Debug, Clone)]
pub struct Failure {
    kind: FailureKind,
    message: String,
}

impl Failure {
    /// A usage error: the arguments cannot be run.
    pub fn usage(message: impl fmt::Display) -> Failure {
        Failure { kind: FailureKind::Usage, message: message.to_string() }
    }

    /// A failure on the way.
    pub fn failed(message: impl fmt::Display) -> Failure {
        Failure { kind: FailureKind::Failed, message: message.to_string() }
    }

    /// Which kind of failure.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The message: what happened and what to do.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Where a long measurement tells how far it is; the command draws a progress line from it.
/// Every method is called from the measuring thread.
pub trait Observer: Sync {
    /// A measurement of `total` begins; it is named `label`.
    fn start(&self, label: &str, total: u64);
    /// The part now being measured is named `label`.
    fn relabel(&self, label: &str);
    /// One more of the `total` parts is done.
    fn advance(&self);
}

/// Writes `text` to standard output; a reader that went away is no failure.
fn print(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(Failure::failed(format_args!("write the report: {error}"))),
    }
}
