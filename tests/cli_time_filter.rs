//! Proves `dump --since/--until` and `export --since/--until` and the RFC 3339 times of the
//! command line: a store is written through the library with a clock the test sets, its
//! timestamps out of order (the clock jumps back), then the real binary selects the events in
//! a range (since inclusive, until exclusive, every event checked, none stopping the scan),
//! accepts RFC 3339 with offsets, dates and microseconds, refuses a bad time or an empty range
//! with exit 2, leaves raw records out under a time filter, and prints every timestamp as
//! `time` in JSON and as a TIME column in text.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use common::cli::json_lines;
use common::harness::{turn_end, turn_start, user};
use common::{arg, factlog};
use factlog::{Store, StoreOptions};

/// 2026-12-03T14:00:00Z in microseconds since 1970.
const BASE_US: u64 = 1_796_306_400_000_000;
const SECOND_US: u64 = 1_000_000;

/// The time the store's clock reads; each test file is its own process, but its tests run on
/// threads of it at once: [`WRITING`] keeps one writer setting the clock at a time.
static NOW_US: AtomicU64 = AtomicU64::new(BASE_US);

/// Held while a test writes a store through the shared clock.
static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn clock() -> u64 {
    NOW_US.load(Ordering::SeqCst)
}

/// Offsets from [`BASE_US`] of the events written, in seq order: the clock jumps back at seq 3
/// and seq 5.
const OFFSETS_SECONDS: [u64; 6] = [0, 10, 5, 20, 1, 86_400];

/// Writes one event per offset for task `t1`, seqs 1 to 6.
fn store_with_times(dir: &Path) {
    let _writing = WRITING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let store = Store::open(dir, StoreOptions::new().clock(clock)).expect("open the store");
    let task = store.task("t1").expect("task");
    for (i, offset) in OFFSETS_SECONDS.iter().enumerate() {
        NOW_US.store(BASE_US + offset * SECOND_US + 123_456, Ordering::SeqCst);
        let body = match i % 3 {
            0 => turn_start(),
            1 => user("hi"),
            _ => turn_end(),
        };
        task.append(body).expect("append");
    }
    store.close().expect("close");
}

/// The seqs `command DIR ARGS` prints as JSON lines, asserting success.
fn seqs(command: &str, dir: &Path, extra: &[&str]) -> Vec<u64> {
    let mut args = vec![command, arg(dir)];
    args.extend_from_slice(extra);
    if command == "dump" {
        args.push("--json");
    }
    let run = factlog(&args, b"");
    run.assert_success();
    json_lines(&run).iter().map(|line| line["seq"].as_u64().expect("seq")).collect()
}

#[test]
fn since_and_until_select_each_event_by_its_own_timestamp() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    store_with_times(&dir);
    for command in ["dump", "export"] {
        assert_eq!(seqs(command, &dir, &[]), [1, 2, 3, 4, 5, 6], "{command}");
        // [+5 s, +20 s): seq 2 (+10 s) and seq 3 (+5 s, after a jump back); +20 s excluded.
        let range = ["--since", "2026-12-03T14:00:05Z", "--until", "2026-12-03T14:00:20Z"];
        assert_eq!(seqs(command, &dir, &range), [2, 3], "{command}");
        // Since is inclusive to the microsecond, until exclusive.
        let exact = (BASE_US + 20 * SECOND_US + 123_456).to_string();
        assert_eq!(seqs(command, &dir, &["--since", &exact]), [4, 6], "{command}");
        assert_eq!(seqs(command, &dir, &["--until", &exact]), [1, 2, 3, 5], "{command}");
        // The same instant with an offset, and a date meaning midnight UTC.
        let offset = ["--since", "2026-12-03T15:00:05.123456+01:00"];
        assert_eq!(seqs(command, &dir, &offset), [2, 3, 4, 6], "{command}");
        assert_eq!(seqs(command, &dir, &["--since", "2026-12-04"]), [6], "{command}");
        assert_eq!(seqs(command, &dir, &["--until", "2026-12-03"]), Vec::<u64>::new());
        // With --task, both filters apply.
        let both = ["--task", "t1", "--until", "2026-12-03T14:00:02Z"];
        assert_eq!(seqs(command, &dir, &both), [1, 5], "{command}");
    }
    // dump's other filters combine with the range.
    let typed = ["--type", "user/message", "--since", "2026-12-03T14:00:01Z"];
    assert_eq!(seqs("dump", &dir, &typed), [2, 5]);
    assert_eq!(
        seqs("dump", &dir, &["--from", "3", "--to", "5", "--since", "2026-12-03"]),
        [3, 4, 5]
    );
}

#[test]
fn timestamps_print_as_rfc_3339_in_json_and_text() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    store_with_times(&dir);
    let run = factlog(&["dump", arg(&dir), "--json", "--to", "2"], b"");
    run.assert_success();
    let lines = json_lines(&run);
    let keys: Vec<&str> = lines[1].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["seq", "task", "revision", "timestamp_us", "time", "type", "text"]);
    assert_eq!(lines[1]["timestamp_us"], BASE_US + 10 * SECOND_US + 123_456);
    assert_eq!(lines[1]["time"], "2026-12-03T14:00:10.123456Z");

    let run = factlog(&["export", arg(&dir), "--json"], b"");
    run.assert_success();
    let last = json_lines(&run).pop().unwrap();
    assert_eq!(last["time"], "2026-12-04T14:00:00.123456Z");
    assert_eq!(last["schema"], 1);

    let run = factlog(&["dump", arg(&dir), "--from", "2", "--to", "2"], b"");
    run.assert_success();
    assert_eq!(
        run.stdout_text(),
        "2\t2026-12-03T14:00:10.123456Z\tuser/message\tt1\t2\t{\"text\":\"hi\"}\n"
    );

    let run = factlog(&["tail", arg(&dir), "--from", "6", "--json"], b"");
    run.assert_success();
    assert_eq!(json_lines(&run)[0]["time"], "2026-12-04T14:00:00.123456Z");
}

#[test]
fn a_bad_time_or_an_empty_range_is_a_usage_error_and_raw_records_are_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    store_with_times(&dir);
    for command in ["dump", "export"] {
        let run = factlog(&[command, arg(&dir), "--since", "yesterday"], b"");
        run.assert_one_line_error(2);
        assert!(run.stderr.contains("is not a time") && run.stderr.contains("RFC 3339"), "{run:?}");
        let run = factlog(&[command, arg(&dir), "--until", "2026-02-30"], b"");
        run.assert_one_line_error(2);
        assert!(run.stderr.contains("day 30"), "{run:?}");
        let run = factlog(
            &[command, arg(&dir), "--since", "2026-12-04", "--until", "2026-12-03T23:59:59Z"],
            b"",
        );
        run.assert_one_line_error(2);
        assert!(run.stderr.contains("--until 2026-12-03T23:59:59.000000Z is before"), "{run:?}");
    }

    // A raw log: every record without a filter, none with one.
    let raw = tmp.path().join("raw");
    factlog(&["append", arg(&raw)], b"one\ntwo\n").assert_success();
    let run = factlog(&["dump", arg(&raw)], b"");
    run.assert_success();
    assert_eq!(run.stdout_text(), "1\tone\n2\ttwo\n");
    let run = factlog(&["dump", arg(&raw), "--since", "0"], b"");
    run.assert_success();
    assert!(run.stdout.is_empty(), "{run:?}");
}
