//! `factlog migrate` on a copy of a frozen 0.1.0 store: a dry run reports and writes nothing, a
//! real run rewrites the store into format 2 and says where the backup is, a second run is a
//! no-op, and a bad version or a store that cannot be migrated fails with one clear line and
//! exit code 1 (bad arguments: 2).

use crate::common;

use common::factlog;
use common::fixtures::{copy_of, digest_tree};
use serde_json::Value;

fn json(run: &common::Run) -> Value {
    serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"))
}

#[test]
fn dry_run_then_migrate_then_no_op() {
    let (_tmp, dir) = copy_of("v1-clean-multi-task");
    let path = dir.to_str().unwrap();
    let tree = digest_tree(&dir);
    let dry = factlog(&["migrate", path, "--to", "2", "--dry-run", "--json"], b"");
    assert_eq!(dry.code, Some(0), "{dry:?}");
    let report = json(&dry);
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["events"], 140);
    assert_eq!(digest_tree(&dir), tree, "a dry run writes nothing");

    let run = factlog(&["migrate", path, "--to", "2"], b"");
    assert_eq!(run.code, Some(0), "{run:?}");
    let text = String::from_utf8(run.stdout).unwrap();
    assert!(text.contains("migrated") && text.contains("from format 1 to 2"), "{text}");
    assert!(text.contains("store.backup-v1"), "{text}");

    let again = factlog(&["migrate", path, "--to", "2", "--json"], b"");
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(json(&again)["already_current"], true);
    let info = factlog(&["state", path, "--json"], b"");
    assert_eq!(info.code, Some(0), "{info:?}");
}

#[test]
fn errors_are_one_line_with_their_exit_codes() {
    let (_tmp, dir) = copy_of("v1-free-text-status");
    let path = dir.to_str().unwrap();
    let run = factlog(&["migrate", path, "--to", "2"], b"");
    // An event that cannot be rewritten without guessing: refused data.
    assert_eq!(run.code, Some(3), "{run:?}");
    assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("seq 3") || run.stderr.contains("event 3"), "{}", run.stderr);

    // A version this build cannot write is a usage error, and the store is left alone.
    let (_tmp, dir) = copy_of("v1-torn-tail");
    let image = digest_tree(&dir);
    for to in ["3", "0"] {
        let run = factlog(&["migrate", dir.to_str().unwrap(), "--to", to], b"");
        assert_eq!(run.code, Some(2), "{run:?}");
        assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.contains("is not in 1..=2"), "{}", run.stderr);
    }
    assert_eq!(digest_tree(&dir), image);
    // Migrating a format-2 store back is refused by the library, with what to do instead.
    let run = factlog(&["migrate", dir.to_str().unwrap(), "--to", "2"], b"");
    assert_eq!(run.code, Some(0), "{run:?}");
    let run = factlog(&["migrate", dir.to_str().unwrap(), "--to", "1"], b"");
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stderr.contains("restore the backup"), "{}", run.stderr);

    // `--to` defaults to the newest format this build writes: here already current.
    let run = factlog(&["migrate", dir.to_str().unwrap()], b"");
    assert_eq!(run.code, Some(0), "--to defaults to 2: {run:?}");
}
