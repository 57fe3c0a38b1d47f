//! `factlog checkpoint`: writes a snapshot of every task's state now, through a writer open,
//! and prints where it is and which events it covers.
//!
//! The library folds the snapshot from the events (never from memory) and writes it
//! atomically; this command only asks for it. On a store held by a process that shares it
//! (`format-spec/server.md`), that process writes the snapshot, asked through its socket.

use std::process::ExitCode;

use factlog::client::Client;
use factlog::{Store, StoreOptions};
use serde_json::json;

use crate::{
    CheckpointArgs, EXIT_FAILURE, Failure, Outcome, library_failure, open_or_share_failure,
    print_out, require_store,
};

pub fn run(args: &CheckpointArgs) -> Outcome {
    require_store(&args.dir)?;
    // Served now: the serving process writes it, asked at once (not after the open's retries
    // of the busy lock); a socket that does not answer falls back to opening, below.
    let served = factlog::client::served::connect_now(&args.dir).map(|mut client| {
        client.checkpoint().map_err(crate::served_failure("checkpoint", &args.dir))
    });
    let (path, covered_seq) = match served {
        Some(written) => written?,
        None => opened(args)?,
    };
    let path = path.display().to_string();
    let text = if args.json {
        json!({ "path": path, "covered_seq": covered_seq }).to_string()
    } else {
        format!("snapshot {path} covers the events through seq {covered_seq}")
    };
    print_out(&format!("{text}\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// The snapshot written through a writer open, or by the process that shares the store.
fn opened(args: &CheckpointArgs) -> Result<(std::path::PathBuf, u64), Failure> {
    Ok(match Store::open(&args.dir, StoreOptions::new()) {
        Ok(store) => {
            crate::report_cut("checkpoint", &args.dir, &store.open_report().log);
            let meta = store
                .checkpoint()
                .map_err(|error| library_failure("cannot write a snapshot", &error))?;
            store.close().map_err(|error| library_failure("close", &error))?;
            (meta.path, meta.covered_seq.0)
        }
        // Held by a process that shares the store: the snapshot is written there.
        Err(error)
            if matches!(
                factlog::client::served::held_by_another(&args.dir, &error),
                Some(factlog::client::served::Held::Served { .. })
            ) =>
        {
            Client::connect(&args.dir).and_then(|mut client| client.checkpoint()).map_err(
                |client_error| {
                    Failure::new(
                        EXIT_FAILURE,
                        format_args!("cannot open {}: {error}; {client_error}", args.dir.display()),
                    )
                },
            )?
        }
        Err(error) => return Err(open_or_share_failure(&args.dir, &error)),
    })
}
