//! `factlog retain URL [--dry-run]`: removes the objects of a replica that a newer remote
//! snapshot makes unnecessary (`format-spec/replication.md`, "Retention"). The plan and the
//! removal are the library's (`factlog::replica::retain`); this module prints them.

use std::process::ExitCode;

use factlog::replica::{self, retain};

use crate::{Outcome, RetainArgs, library_failure, print_out};
use factlog::error::counted;

pub fn run(args: &RetainArgs) -> Outcome {
    let remote = replica::remote::open(&args.url).map_err(|e| library_failure("replica", &e))?;
    let plan = retain::plan(remote.as_ref(), crate::now_us())
        .map_err(|e| library_failure(format_args!("cannot plan retention of {}", args.url), &e))?;
    if !args.dry_run {
        retain::apply(remote.as_ref(), &plan)
            .map_err(|e| library_failure(format_args!("retention of {}", args.url), &e))?;
    }
    if args.json {
        let object = serde_json::json!({
            "dry_run": args.dry_run,
            "covered_seq": plan.covered_seq,
            "segments": plan.segments,
            "parts": plan.parts.len(),
            "snapshots": plan.snapshots,
            "leases": plan.leases.len(),
            "record": plan.record.as_ref().map(|r| serde_json::json!({
                "name": retain::record_name(r.covered_seq),
                "covered_seq": r.covered_seq,
                "first_kept_seq": r.first_kept_seq,
                "snapshot": r.snapshot,
            })),
            "held_back": plan.held_back,
        });
        print_out(&format!("{object}\n"))?;
    } else {
        let verb = if args.dry_run { "would remove" } else { "removed" };
        let segments = if plan.covered_seq == 0 {
            "no segments (the replica holds no snapshot: checkpoint the store and replicate \
             it first)"
                .to_owned()
        } else {
            format!(
                "{} ({}) covered by the snapshot through seq {}",
                counted(plan.segments.len() as u64, "segment"),
                counted(plan.parts.len() as u64, "part"),
                plan.covered_seq
            )
        };
        print_out(&format!(
            "{verb} {segments}, {} and {}\n",
            counted(plan.snapshots.len() as u64, "older snapshot"),
            counted(plan.leases.len() as u64, "superseded lease object")
        ))?;
        if let Some(record) = &plan.record {
            let verb = if args.dry_run { "would record" } else { "recorded" };
            print_out(&format!(
                "{verb} {}: the history begins at seq {}\n",
                retain::record_name(record.covered_seq),
                record.first_kept_seq
            ))?;
        }
        if let Some(reason) = &plan.held_back {
            print_out(&format!("held back: {reason}\n"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
