//! `factlog request-key`: prints the request key the library derives, so that a harness in
//! any language gets the documented key without re-implementing SHA-256 framing. The
//! derivation is `factlog::harness::request_key::derive`; this module only checks the task id
//! and prints.

use std::process::ExitCode;

use factlog::harness::TaskId;
use factlog::harness::request_key;
use serde_json::json;

use crate::{EXIT_USAGE, Failure, Outcome, RequestKeyArgs, print_out};

pub fn run(args: &RequestKeyArgs) -> Outcome {
    let task = TaskId::new(&args.task).map_err(|_| {
        Failure::new(
            EXIT_USAGE,
            format_args!(
                "the task id must be 1 to {} bytes of UTF-8; {} bytes were given",
                factlog::limits::TASK_ID_BYTES_MAX,
                args.task.len()
            ),
        )
    })?;
    let key = request_key::derive(&task, &args.operation, args.revision);
    let line = if args.json {
        json!({
            "task": args.task,
            "operation": args.operation,
            "revision": args.revision,
            "request_key": key.as_str(),
        })
        .to_string()
    } else {
        key.as_str().to_owned()
    };
    print_out(&format!("{line}\n"))?;
    Ok(ExitCode::SUCCESS)
}
