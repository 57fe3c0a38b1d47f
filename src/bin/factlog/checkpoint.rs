//! `factlog checkpoint`: writes a snapshot of every task's state now, through a writer open,
//! and prints where it is and which events it covers.
//!
//! The library folds the snapshot from the events (never from memory) and writes it
//! atomically; this command only asks for it.

use std::process::ExitCode;

use factlog::{Store, StoreOptions};
use serde_json::json;

use crate::{CheckpointArgs, Outcome, library_failure, open_failure, print_out, require_store};

pub fn run(args: &CheckpointArgs) -> Outcome {
    require_store(&args.dir)?;
    let store = Store::open(&args.dir, StoreOptions::new())
        .map_err(|error| open_failure(&args.dir, &error))?;
    let meta =
        store.checkpoint().map_err(|error| library_failure("cannot write a snapshot", &error))?;
    store.close().map_err(|error| library_failure("close", &error))?;
    let path = meta.path.display().to_string();
    let text = if args.json {
        json!({ "path": path, "covered_seq": meta.covered_seq.0 }).to_string()
    } else {
        format!("snapshot {path} covers the events through seq {}", meta.covered_seq.0)
    };
    print_out(&format!("{text}\n"))?;
    Ok(ExitCode::SUCCESS)
}
