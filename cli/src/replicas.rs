//! `factlog replicas list|verify URL`: what a replica holds and a scrub of it, through
//! [`factlog::replica::inspect`]; this module only opens the location and prints the
//! library's reports (text, or one JSON object: `format-spec/schema/replicas-list.json` and
//! `replicas-verify.json`).

use std::path::PathBuf;
use std::process::ExitCode;

use factlog::replica::inspect;
use serde_json::json;

use crate::{EXIT_DAMAGED, Failure, Outcome, Output, library_failure};
use factlog::error::counted;

#[derive(Debug, clap::Args)]
pub struct ReplicasArgs {
    #[command(subcommand)]
    command: ReplicasCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ReplicasCommand {
    /// What the replica holds: identity, leases, retention, log range, snapshots.
    List {
        /// The replica's location: file:///absolute/dir, s3://BUCKET/PREFIX, gs://, az://.
        url: String,
        /// A local store to measure the replica's lag against (opened read-only).
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        /// Print a single JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Read and check every object, as a restore of all of it would; write nothing.
    Verify {
        /// The replica's location.
        url: String,
        /// Print a single JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: &ReplicasArgs) -> Outcome {
    match &args.command {
        ReplicasCommand::List { url, store, json } => list(url, store.as_deref(), *json),
        ReplicasCommand::Verify { url, json } => verify(url, *json),
    }
}

fn list(url: &str, store: Option<&std::path::Path>, as_json: bool) -> Outcome {
    let doing = || format!("cannot list replica {url}");
    let remote = factlog::replica::remote::open(url).map_err(|e| library_failure(doing(), &e))?;
    let summary = inspect::list(&*remote, store).map_err(|e| library_failure(doing(), &e))?;
    let mut out = Output::new();
    if as_json {
        writeln!(out, "{}", summary.to_json(url));
        out.finish()?;
        return Ok(ExitCode::SUCCESS);
    }
    let identity = &summary.listing.identity;
    writeln!(
        out,
        "replica {url}: id {}, created from {} on device {}",
        identity.id_hex(),
        identity.store,
        identity.device
    );
    match (summary.segments.first(), summary.last_seq) {
        (Some(first), Some(last)) => writeln!(
            out,
            "log: seqs {}..={last} in {}",
            first.first_seq,
            counted(summary.segments.len() as u64, "segment")
        ),
        _ => writeln!(out, "log: nothing shipped yet"),
    }
    match &summary.listing.retention {
        Some(r) => writeln!(
            out,
            "retention: the history begins at seq {}; {} covers seqs through {}",
            r.first_kept_seq, r.snapshot, r.covered_seq
        ),
        None => writeln!(out, "retention: none (the history begins at seq 1)"),
    }
    let snapshots: Vec<String> =
        summary.listing.snapshots.keys().map(ToString::to_string).collect();
    if snapshots.is_empty() {
        writeln!(out, "snapshots: none");
    } else {
        writeln!(out, "snapshots: covering seqs through {}", snapshots.join(", "));
    }
    match summary.listing.leases.last() {
        Some(lease) => {
            let holder = summary.latest_lease.as_ref().map_or_else(String::new, |h| {
                format!(" (device {}, pid {}, store {})", h["device"], h["pid"], h["store"])
            });
            let state = if lease.released { "released" } else { "held or not released" };
            writeln!(
                out,
                "lease: epoch {} {state}{holder}; {} listed",
                lease.epoch,
                counted(summary.listing.leases.len() as u64, "epoch")
            );
        }
        None => writeln!(out, "lease: never taken"),
    }
    if let Some(lag) = summary.lag {
        writeln!(
            out,
            "lag: the store holds seqs through {}, the replica lacks {}",
            lag.store_last_seq,
            counted(lag.records, "record")
        );
    }
    for name in &summary.listing.ignored {
        writeln!(out, "ignored: {name}");
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

fn verify(url: &str, as_json: bool) -> Outcome {
    let doing = || format!("replica {url} does not verify");
    let remote = factlog::replica::remote::open(url).map_err(|e| library_failure(doing(), &e))?;
    let scrub = inspect::verify(&*remote).map_err(|e| library_failure(doing(), &e))?;
    let report = &scrub.restore;
    let mut out = Output::new();
    if as_json {
        let object = json!({
            "location": url,
            "replica_id": report.replica_id,
            "ok": scrub.problems.is_empty(),
            "first_seq": report.first_seq.0,
            "through_seq": report.through_seq.0,
            "segments": report.segments.len(),
            "parts": report.parts,
            "bytes": report.bytes,
            "snapshots": report.snapshots.iter().map(|s| s.0).collect::<Vec<_>>(),
            "problems": scrub.problems,
            "ignored": report.ignored,
        });
        writeln!(out, "{object}");
    } else {
        writeln!(
            out,
            "replica {url} (id {}): seqs {}..={} in {}, {}, {}, {}: every object read and \
             checked",
            report.replica_id,
            report.first_seq.0,
            report.through_seq.0,
            counted(report.segments.len() as u64, "segment"),
            counted(report.parts as u64, "part"),
            counted(report.bytes, "byte"),
            counted(report.snapshots.len() as u64, "snapshot")
        );
        for problem in &scrub.problems {
            writeln!(out, "problem: {problem}");
        }
        for name in &report.ignored {
            writeln!(out, "ignored: {name}");
        }
    }
    out.finish()?;
    if scrub.problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::new(
            EXIT_DAMAGED,
            format_args!(
                "replica {url}: {} (above); a restore passes over them, but replicate the \
                 store again or re-seed the replica at a new location to mend them",
                counted(scrub.problems.len() as u64, "problem")
            ),
        ))
    }
}
