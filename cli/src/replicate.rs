//! `factlog replicate DIR --to URL`: ships the store in `DIR` to a replica
//! (`format-spec/replication.md`) beside whatever process writes it, until SIGTERM or SIGINT
//! (or after one round with `--once`), then gives the replica's lease back. The shipping is
//! the library's (`factlog::replica::Replicator`); this module parses, reports and waits.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use factlog::fs::RealFs;
use factlog::limits::REPLICA_POLL;
use factlog::replica::{self, Replicator, ShipOptions, ShipStatus};

use crate::{
    EXIT_FAILURE, Failure, Outcome, ReplicateArgs, library_failure, require_store, signals,
};
use factlog::error::counted;

/// Starts replicating `store` to `url`, when given, in this process
/// ([`factlog::Store::replicate`]), for `serve --replicate-to` and `emit --replicate-to`: its
/// `Replicated` appends (`"durability":"replicated"`) are acknowledged once the replica holds
/// them. The caller stops it before closing the store; when it cannot start, the store is
/// closed here and the failure returned.
pub(crate) fn beside(
    store: factlog::Store,
    url: Option<&str>,
) -> Result<(factlog::Store, Option<factlog::replica::Replication>), Failure> {
    let Some(url) = url else { return Ok((store, None)) };
    let started =
        replica::remote::open(url).map_err(|e| library_failure("replica", &e)).and_then(|remote| {
            store
                .replicate(remote, factlog::replica::ReplicateOptions::new())
                .map_err(|e| library_failure(format_args!("cannot replicate to {url}"), &e))
        });
    match started {
        Ok(replication) => Ok((store, Some(replication))),
        Err(failure) => {
            let _ = store.close();
            Err(failure)
        }
    }
}

pub fn run(args: &ReplicateArgs) -> Outcome {
    require_store(&args.dir)?;
    let signals = if args.once {
        None
    } else {
        // Before any thread exists, so that every thread inherits the mask.
        Some(signals::block_termination().map_err(|error| {
            Failure::new(EXIT_FAILURE, format_args!("blocking signals: {error}"))
        })?)
    };
    let remote = replica::remote::open(&args.to).map_err(|e| library_failure("replica", &e))?;
    let now_us = crate::now_us();
    let options = ShipOptions::new().takeover(args.takeover);
    let replicator = Replicator::start(Arc::new(RealFs), &args.dir, remote, options, now_us)
        .map_err(|e| library_failure(format_args!("cannot replicate to {}", args.to), &e))?;
    if replicator.status().takeover {
        eprintln!(
            "factlog replicate: took the lease of {} over (epoch {}); recorded in the replica",
            args.to,
            replicator.status().epoch
        );
    }
    let status = match signals {
        None => replicator.finish(),
        Some(signals) => {
            let stop = AtomicBool::new(false);
            let ended = AtomicBool::new(false);
            let interval = Duration::from_millis(args.interval_ms);
            std::thread::scope(|scope| {
                let shipping = scope.spawn(|| {
                    let shipped = replicator.run(&stop, interval, REPLICA_POLL, |status| {
                        if let Some(error) = &status.last_error {
                            eprintln!("factlog replicate: {error} (retrying)");
                        }
                    });
                    if !stop.load(Ordering::Acquire) {
                        // Stopped by itself (a lost lease, a diverged store): wake the main
                        // thread, which waits for a signal, so that the command ends and says
                        // why instead of waiting forever.
                        ended.store(true, Ordering::Release);
                        signals::terminate_self();
                    }
                    shipped
                });
                let signal = signals.wait();
                if !ended.load(Ordering::Acquire) {
                    eprintln!("factlog replicate: {signal}: shipping what is left and stopping");
                }
                stop.store(true, Ordering::Release);
                shipping.join().expect("the shipping thread does not panic")
            })
        }
    }
    .map_err(|e| library_failure(format_args!("replicating to {}", args.to), &e))?;
    print_status(&status, args.json);
    Ok(ExitCode::SUCCESS)
}

fn print_status(status: &ShipStatus, json: bool) {
    if json {
        let object = serde_json::json!({
            "epoch": status.epoch,
            "takeover": status.takeover,
            "shipped_seq": status.shipped_seq,
            "local_seq": status.local_seq,
            "lag": status.lag(),
            "parts": status.parts,
            "bytes": status.bytes,
            "snapshots": status.snapshots,
        });
        println!("{object}");
    } else {
        println!(
            "replicated through seq {} (store at {}, lag {}): {}, {}, {} shipped by this run \
             (lease epoch {})",
            status.shipped_seq,
            status.local_seq,
            status.lag(),
            counted(status.parts, "part"),
            counted(status.snapshots, "snapshot"),
            counted(status.bytes, "byte"),
            status.epoch
        );
    }
}
