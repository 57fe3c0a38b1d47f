//! `factlog serve DIR`: shares the store in `DIR` with other processes of the machine over
//! `DIR/factlog.sock` (`format-spec/server.md`), in the foreground, until SIGTERM or SIGINT.
//! The serving is the library's (`Store::serve`); this module opens the store, waits for a
//! signal and closes: it stops taking connections, lets every connection finish the request
//! it is running, syncs and closes the store. Connection events are logged to standard error.

use std::process::ExitCode;
use std::time::Duration;

use factlog::server::ServeOptions;
use factlog::{Store, StoreOptions};

use crate::signals;
use crate::{
    EXIT_FAILURE, Failure, Outcome, ServeArgs, library_failure, open_failure, refuse_file,
};

pub fn run(args: &ServeArgs) -> Outcome {
    refuse_file(&args.dir)?;
    // Before any thread exists, so that every thread of the process inherits the mask and
    // the signals wait for `sigwait` below instead of killing the process mid-request.
    let signals = signals::block_termination()
        .map_err(|error| Failure::new(EXIT_FAILURE, format_args!("blocking signals: {error}")))?;
    let options = StoreOptions::new().refuse_unmarked_secrets(args.refuse_unmarked_secrets);
    let store = Store::open(&args.dir, options).map_err(|error| {
        match factlog::client::served::held_by_another(&args.dir, &error) {
            // A second server on a served store: say so, by whom, and what to do instead.
            Some(factlog::client::served::Held::Served { socket }) => Failure::new(
                EXIT_FAILURE,
                format_args!(
                    "{} is already served{} over {}: connect to it (factlog emit, the Python \
                     package and the Rust client do so by themselves), or stop that server \
                     first (SIGTERM) to serve it from here",
                    args.dir.display(),
                    factlog::server::lock_holder(&args.dir)
                        .map_or_else(String::new, |pid| format!(" by process {pid}")),
                    socket.display()
                ),
            ),
            _ => open_failure(&args.dir, &error),
        }
    })?;
    crate::report_cut("serve", &args.dir, &store.open_report().log);
    let (store, replication) = crate::replicate::beside(store, args.replicate_to.as_deref())?;
    let serve = ServeOptions::new()
        .allow_group(args.allow_group)
        .clients_max(args.clients_max)
        .write_timeout(Duration::from_millis(args.write_timeout_ms))
        .hello_timeout(Duration::from_millis(args.hello_timeout_ms))
        .idle_timeout(Duration::from_millis(args.idle_timeout_ms))
        .log(|line| eprintln!("factlog serve: {line}"));
    let server = match store.serve(serve) {
        Ok(server) => server,
        Err(error) => {
            drop(replication);
            let _ = store.close();
            return Err(library_failure("cannot serve", &error));
        }
    };
    let signal = signals.wait();
    eprintln!("factlog serve: {signal}: draining and closing");
    let stopped = server.stop();
    let replicated = replication.map(factlog::replica::Replication::stop).transpose();
    let closed = store.close();
    stopped.map_err(|error| library_failure("stop", &error))?;
    replicated.map_err(|error| library_failure("replicate", &error))?;
    closed.map_err(|error| library_failure("close", &error))?;
    Ok(ExitCode::SUCCESS)
}
