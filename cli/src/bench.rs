//! `factlog bench` and `factlog demo`: their machinery is the `factlog-bench` crate (beside
//! the benches); this module draws its progress line and gives its failures their exit codes.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use factlog_bench::compare::BenchArgs;
use factlog_bench::{FailureKind, Observer};

use crate::progress::{Progress, Unit};
use crate::{EXIT_FAILURE, EXIT_USAGE, Failure, Outcome};

/// Runs `factlog bench` with a progress line on standard error.
pub fn run(args: &BenchArgs) -> Outcome {
    if args.is_client_process() {
        // One client of `bench --clients`: its standard output is its parent's to read.
        factlog_bench::compare::clients::client_process()?;
        return Ok(ExitCode::SUCCESS);
    }
    let progress = Progress::new("bench", None, Unit::Count("measurements"), false);
    let shown = Shown { progress: &progress, done: AtomicU64::new(0) };
    progress.while_running(
        || shown.done.load(Ordering::Acquire),
        || factlog_bench::compare::run(args, &shown),
    )?;
    progress.finish();
    Ok(ExitCode::SUCCESS)
}

/// Runs `factlog demo` (or its writer process).
pub fn demo(args: &factlog_bench::demo::DemoArgs) -> Outcome {
    factlog_bench::demo::run(args)?;
    Ok(ExitCode::SUCCESS)
}

/// The progress line, fed by the measurements.
struct Shown<'a> {
    progress: &'a Progress,
    /// Measurements done, read by the line's redraws.
    done: AtomicU64,
}

impl Observer for Shown<'_> {
    fn start(&self, label: &str, total: u64) {
        self.done.store(0, Ordering::Release);
        self.progress.restart(label, Some(total));
    }

    fn relabel(&self, label: &str) {
        self.progress.relabel(label);
    }

    fn advance(&self) {
        self.done.fetch_add(1, Ordering::AcqRel);
    }
}

impl From<factlog_bench::Failure> for Failure {
    fn from(failure: factlog_bench::Failure) -> Failure {
        let code = match failure.kind() {
            FailureKind::Usage => EXIT_USAGE,
            FailureKind::Failed => EXIT_FAILURE,
        };
        Failure::new(code, failure.message())
    }
}
