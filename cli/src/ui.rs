//! `factlog ui DIR`: the local web console (`factlog::console`), in the foreground until
//! SIGTERM or SIGINT. This module only parses, starts the library's console, prints its URL
//! and where it listens, and waits for a signal; the console reads the store without holding
//! it and records answers through the library's operator rules.

use std::process::ExitCode;

use factlog::console::{ConsoleError, ConsoleOptions};

use crate::signals;
use crate::{EXIT_FAILURE, EXIT_USAGE, Failure, Outcome, UiArgs, require_store};

pub fn run(args: &UiArgs) -> Outcome {
    require_store(&args.dir)?;
    // Before any thread exists, so that every thread inherits the mask and the signals wait
    // for `sigwait` below.
    let signals = signals::block_termination()
        .map_err(|error| Failure::new(EXIT_FAILURE, format_args!("blocking signals: {error}")))?;
    let options = ConsoleOptions::new()
        .addr(args.addr)
        .read_only(args.read_only)
        .allow_remote(args.allow_remote);
    let console = factlog::console::serve(&args.dir, options).map_err(|error| {
        let code = match error {
            ConsoleError::NotLoopback { .. } => EXIT_USAGE,
            _ => EXIT_FAILURE,
        };
        Failure::new(code, format_args!("{error}"))
    })?;
    if console.is_loopback() {
        println!("factlog ui: listening on loopback only ({})", console.addr());
    } else {
        eprintln!(
            "factlog ui: WARNING: listening on {}, reachable from other machines over plain \
             HTTP: anyone with the URL below can read this store{}",
            console.addr(),
            if console.is_read_only() { "" } else { " and answer for its tasks" }
        );
    }
    if console.is_read_only() {
        println!("factlog ui: read-only: the console records no answer");
    }
    println!("{}", console.url());
    let signal = signals.wait();
    eprintln!("factlog ui: {signal}: stopping");
    console.shutdown();
    Ok(ExitCode::SUCCESS)
}
