//! `factlog retain URL [--dry-run]`: removes the objects of a replica that a newer remote
//! snapshot makes unnecessary (`format-spec/replication.md`, "Retention"). The plan and the
//! removal are the library's (`factlog::replica::retain`); this module prints them.

use std::process::ExitCode;

use factlog::replica::{self, retain};

use crate::{Outcome, RetainArgs, library_failure, print_out};

pub fn run(args: &RetainArgs) -> Outcome {
    let remote = replica::remote::open(&args.url).map_err(|e| library_failure("replica", &e))?;
    let plan = retain::plan(remote.as_ref())
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
        });
        print_out(&format!("{object}\n"))?;
    } else {
        let verb = if args.dry_run { "would remove" } else { "removed" };
        print_out(&format!(
            "{verb} {} segments ({} parts) covered by the snapshot through seq {}, and {} older \
             snapshots\n",
            plan.segments.len(),
            plan.parts.len(),
            plan.covered_seq,
            plan.snapshots.len()
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
