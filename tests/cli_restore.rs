//! `factlog restore URL DIR [--seq N | --time T]`, run as the real binary on a store shipped
//! by hand into a `file://` replica (`tests/common/replica.rs`): the restored store gives the same
//! `factlog dump --json`, `state --json` and `recover --dry-run --json` as the source and
//! verifies clean with `--deep`; `--seq` says where it ended;
//! a damaged part is one error line naming it, exit 3, nothing written; a target that is not
//! empty is exit 1. On a store written with a clock the test sets, `--time` (RFC 3339, `Z` or
//! an offset) restores the events the source's `dump --until` gives and says which event
//! ended the log, in text and `--json`; a time before the first event restores none; a bad
//! time, or `--time` with `--seq`, is a usage error (exit 2) writing nothing.

use crate::common;

use common::replica_fixture::{
    Replica, SECOND_US, last_seq, ship, source_store, timed_source_store, turn_time_us,
};
use common::{arg, factlog};

#[test]
fn restore_builds_the_same_store_and_refuses_damage() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let source = temp.path().join("store");
    let batches = source_store(&source);
    let replica = Replica::new(&temp.path().join("replica"));
    let parts = ship(&source, &replica, 2);

    let target = temp.path().join("restored");
    let run = factlog(&["restore", &replica.url, arg(&target)], b"");
    run.assert_success();
    let last = last_seq(&source);
    let text = run.stdout_text();
    assert!(text.contains(&format!("seqs 1..={last}")), "{text}");
    assert!(text.contains("snapshots: copied"), "{text}");
    for command in [&["dump"][..], &["state"], &["recover", "--dry-run"]] {
        let of = |dir: &std::path::Path| {
            let mut args = vec![command[0], arg(dir), "--json"];
            args.extend_from_slice(&command[1..]);
            let run = factlog(&args, b"");
            run.assert_success();
            run.stdout
        };
        let (restored, original) = (of(&target), of(&source));
        if command[0] == "recover" {
            // The same report, and the restored store's names the replica it came from.
            let mut report: serde_json::Value =
                serde_json::from_slice(&restored).expect("a JSON report");
            let from = report.as_object_mut().and_then(|r| r.remove("restored"));
            let from = from.expect("the restored store's report says where it came from");
            assert_eq!(from["through_seq"], last, "{from}");
            let original: serde_json::Value = serde_json::from_slice(&original).expect("JSON");
            assert_eq!(report, original, "factlog recover --dry-run --json");
        } else {
            assert_eq!(restored, original, "factlog {command:?} --json");
        }
    }
    factlog(&["verify", arg(&target), "--deep"], b"").assert_success();

    // Inside a batch of three: the restored log ends before it.
    let batch = batches[0];
    let at = temp.path().join("at");
    let seq = (batch + 1).to_string();
    let run = factlog(&["restore", &replica.url, arg(&at), "--seq", &seq], b"");
    run.assert_success();
    let text = run.stdout_text();
    assert!(text.contains(&format!("the restored log ends at seq {}", batch - 1)), "{text}");

    let name = &parts[1][1];
    let mut bytes = std::fs::read(replica.object(name)).expect("read");
    *bytes.last_mut().expect("a byte") ^= 0x40;
    std::fs::write(replica.object(name), bytes).expect("write");
    let refused = temp.path().join("refused");
    let run = factlog(&["restore", &replica.url, arg(&refused)], b"");
    run.assert_one_line_error(3);
    assert!(run.stderr.contains(name.as_str()), "{}", run.stderr);
    assert!(run.stderr.contains("nothing was restored"), "{}", run.stderr);
    assert!(!refused.exists());

    let run = factlog(&["restore", &replica.url, arg(&target)], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("not empty"), "{}", run.stderr);
}

#[test]
fn restore_at_a_time_ends_before_the_first_event_after_it() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let source = temp.path().join("store");
    timed_source_store(&source);
    let replica = Replica::new(&temp.path().join("replica"));
    ship(&source, &replica, 2);
    let dump = |dir: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["dump", arg(dir), "--json"];
        args.extend_from_slice(extra);
        let run = factlog(&args, b"");
        run.assert_success();
        run.stdout
    };

    // Half a second after turn 7 (2026-12-03T10:00:07Z): turns 0..=7, as the source's dump
    // until turn 8 gives them.
    assert_eq!(turn_time_us(7) + SECOND_US / 2, turn_time_us(0) + 7_500_000);
    let at = temp.path().join("at");
    let run =
        factlog(&["restore", &replica.url, arg(&at), "--time", "2026-12-03T10:00:07.5Z"], b"");
    run.assert_success();
    let text = run.stdout_text();
    let restored_events = dump(&at, &[]);
    assert_eq!(restored_events, dump(&source, &["--until", "2026-12-03T10:00:08Z"]));
    let through = restored_events.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
    assert!(
        text.contains(&format!(
            "--time 2026-12-03T10:00:07.500000Z: the restored log ends at seq {through} (before \
             seq {}, appended at 2026-12-03T10:00:08.000000Z)",
            through + 1
        )),
        "{text}"
    );

    // The same time with an offset, in --json.
    let json_at = temp.path().join("json-at");
    let run = factlog(
        &[
            "restore",
            &replica.url,
            arg(&json_at),
            "--time",
            "2026-12-03T11:00:07.5+01:00",
            "--json",
        ],
        b"",
    );
    run.assert_success();
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    assert_eq!(report["requested_time_us"], turn_time_us(0) + 7_500_000);
    assert_eq!(report["requested_time"], "2026-12-03T10:00:07.500000Z");
    assert_eq!(report["requested_seq"], serde_json::Value::Null);
    assert_eq!(report["through_seq"], through);
    assert_eq!(report["first_after_time"]["seq"], through + 1);
    assert_eq!(report["first_after_time"]["timestamp_us"], turn_time_us(8));
    assert_eq!(report["first_after_time"]["time"], "2026-12-03T10:00:08.000000Z");

    // Before the first event: a store without events, as --seq 0 gives.
    let before = temp.path().join("before");
    let run = factlog(&["restore", &replica.url, arg(&before), "--time", "2026-12-03"], b"");
    run.assert_success();
    assert!(run.stdout_text().contains("no events"), "{}", run.stdout_text());
    assert!(dump(&before, &[]).is_empty());

    // A bad time and a time with --seq are usage errors: exit 2, nothing written.
    let refused = temp.path().join("refused");
    let run = factlog(&["restore", &replica.url, arg(&refused), "--time", "10 o'clock"], b"");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("is not a time"), "{}", run.stderr);
    let run = factlog(
        &["restore", &replica.url, arg(&refused), "--seq", "3", "--time", "2026-12-03T10:00:00Z"],
        b"",
    );
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("cannot be used with"), "{}", run.stderr);
    assert!(!refused.exists());
}
