//! `factlog append` and `factlog dump` keep the CLI contract of issue 2: every stdin line
//! becomes one record, acknowledged by its seq on stdout, and `dump` gives the exact bytes back
//! (text and JSON, non-UTF-8 via `payload_b64`; `--format` as a deprecated alias of `--json`);
//! `append --json` acknowledges `{"seq","durability"}`; bad arguments and unusable logs give a
//! one-line error and a non-zero exit. Proved by running the real binary on temporary logs.

use crate::common;

use common::{append_lines, arg, dump_json, factlog, read_log, temp_log};
use factlog::{Log, Options};

#[test]
fn append_then_dump_round_trips_in_text_and_json() {
    let (_temp, dir) = temp_log();
    let run = factlog(&["append", arg(&dir)], b"hello\nworld\n");
    run.assert_success();
    assert_eq!(run.stdout_text(), "1\n2\n");

    let text = factlog(&["dump", arg(&dir)], b"");
    text.assert_success();
    assert_eq!(text.stdout_text(), "1\thello\n2\tworld\n");

    let json = factlog(&["dump", arg(&dir), "--json"], b"");
    json.assert_success();
    assert_eq!(
        json.stdout_text(),
        "{\"seq\":1,\"payload\":\"hello\"}\n{\"seq\":2,\"payload\":\"world\"}\n"
    );
    // `--format json|text` is a deprecated alias, still accepted; it does not mix with --json.
    let alias = factlog(&["dump", arg(&dir), "--format", "json"], b"");
    assert_eq!(alias.code, Some(0), "{alias:?}");
    assert_eq!(alias.stdout, json.stdout);
    assert!(
        alias.stderr.contains("--format json is deprecated") && alias.stderr.contains("use --json"),
        "{alias:?}"
    );
    assert!(json.stderr.is_empty(), "{json:?}");
    let alias = factlog(&["dump", arg(&dir), "--format", "text"], b"");
    assert_eq!(alias.code, Some(0), "{alias:?}");
    assert!(alias.stderr.contains("--format text is deprecated"), "{alias:?}");
    assert_eq!(alias.stdout, text.stdout);
    factlog(&["dump", arg(&dir), "--json", "--format", "text"], b"").assert_one_line_error(2);
}

#[test]
fn append_json_acknowledges_each_record_with_its_durability() {
    let (_temp, dir) = temp_log();
    for (durability, first) in [("buffered", 1), ("flushed", 3), ("synced", 5)] {
        let run =
            factlog(&["append", arg(&dir), "--json", "--durability", durability], b"one\ntwo\n");
        run.assert_success();
        let expected = format!(
            "{{\"seq\":{first},\"durability\":\"{durability}\"}}\n\
             {{\"seq\":{},\"durability\":\"{durability}\"}}\n",
            first + 1
        );
        assert_eq!(run.stdout_text(), expected);
    }
    let run = factlog(&["append", arg(&dir), "--json"], b"three\n");
    assert_eq!(run.stdout_text(), "{\"seq\":7,\"durability\":\"synced\"}\n");
    assert_eq!(read_log(&dir).len(), 7);
}

#[test]
fn every_durability_acknowledges_consecutive_seqs_and_keeps_the_bytes() {
    let (_temp, dir) = temp_log();
    let mut expected: Vec<(u64, Vec<u8>)> = Vec::new();
    for durability in ["buffered", "flushed", "synced", "buffered", "synced", "flushed"] {
        let first = expected.len() as u64 + 1;
        let lines: Vec<String> = (0..40).map(|i| format!("{durability} record {i}")).collect();
        let input = lines.join("\n") + "\n";
        let acks = append_lines(&dir, durability, input.as_bytes());
        assert_eq!(acks, (first..first + 40).collect::<Vec<_>>(), "{durability}");
        for (ack, line) in acks.into_iter().zip(lines) {
            expected.push((ack, line.into_bytes()));
        }
    }
    assert_eq!(dump_json(&dir, &[]), expected);
    assert_eq!(read_log(&dir), expected);
}

#[test]
fn default_durability_is_synced_and_close_makes_everything_durable() {
    let (_temp, dir) = temp_log();
    assert_eq!(append_lines(&dir, "synced", b"a\nb\n"), [1, 2]);
    let run = factlog(&["append", arg(&dir)], b"c\n");
    run.assert_success();
    assert_eq!(run.stdout_text(), "3\n");
    let log = Log::open_read_only(&dir, Options::new()).expect("read-only open");
    assert_eq!(log.last_seq().map(|seq| seq.0), Some(3));
}

#[test]
fn only_the_newline_is_stripped() {
    let (_temp, dir) = temp_log();
    let acks = append_lines(&dir, "flushed", b"crlf\r\n\n  spaced  \nno newline at end");
    assert_eq!(acks, [1, 2, 3, 4]);
    let expected: Vec<(u64, Vec<u8>)> = vec![
        (1, b"crlf\r".to_vec()),
        (2, Vec::new()),
        (3, b"  spaced  ".to_vec()),
        (4, b"no newline at end".to_vec()),
    ];
    assert_eq!(dump_json(&dir, &[]), expected);
    let text = factlog(&["dump", arg(&dir)], b"");
    text.assert_success();
    assert_eq!(text.stdout_text(), "1\tcrlf\\r\n2\t\n3\t  spaced  \n4\tno newline at end\n");
}

#[test]
fn empty_input_creates_an_empty_log() {
    let (_temp, dir) = temp_log();
    let run = factlog(&["append", arg(&dir)], b"");
    run.assert_success();
    assert_eq!(run.stdout_text(), "");
    assert!(dir.is_dir());
    let dump = factlog(&["dump", arg(&dir)], b"");
    dump.assert_success();
    assert_eq!(dump.stdout_text(), "");
}

#[test]
fn non_utf8_lines_round_trip_through_payload_b64() {
    let (_temp, dir) = temp_log();
    let binary: &[u8] = b"\xff\xfe bin \x00\x01\x80\t\\";
    let mut input = binary.to_vec();
    input.extend_from_slice(b"\nplain \"quoted\" caf\xc3\xa9\n");
    assert_eq!(append_lines(&dir, "synced", &input), [1, 2]);

    let json = factlog(&["dump", arg(&dir), "--json"], b"");
    json.assert_success();
    let text = json.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].contains("\"payload_b64\":\"//4gYmluIAABgAlc\""), "{}", lines[0]);
    assert!(!lines[1].contains("payload_b64"), "{}", lines[1]);
    assert_eq!(
        dump_json(&dir, &[]),
        vec![(1, binary.to_vec()), (2, "plain \"quoted\" café".as_bytes().to_vec())]
    );

    let text = factlog(&["dump", arg(&dir)], b"");
    text.assert_success();
    assert_eq!(
        text.stdout_text(),
        "1\t\\xff\\xfe bin \\x00\\x01\\x80\\t\\\\\n2\tplain \"quoted\" café\n"
    );
}

#[test]
fn dump_from_starts_at_the_given_seq() {
    let (_temp, dir) = temp_log();
    let input = (1..=10).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n") + "\n";
    append_lines(&dir, "buffered", input.as_bytes());
    let records = dump_json(&dir, &["--from", "4"]);
    let seqs: Vec<u64> = records.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, (4..=10).collect::<Vec<_>>());
    assert_eq!(records[0].1, b"line 4");
}

#[test]
fn info_reports_segments_range_and_durable_seq() {
    let (_temp, dir) = temp_log();
    append_lines(&dir, "synced", b"one\ntwo\nthree\n");
    let run = factlog(&["info", arg(&dir), "--json"], b"");
    run.assert_success();
    let info: serde_json::Value = serde_json::from_str(&run.stdout_text()).expect("one object");
    assert_eq!(info["first_seq"], 1);
    assert_eq!(info["last_seq"], 3);
    assert_eq!(info["durable_seq"], 3);
    let segments = info["segments"].as_array().expect("segments array");
    assert_eq!(segments.len(), 1);
    assert_eq!(segments[0]["id"], 1);
    assert_eq!(segments[0]["first_seq"], 1);
    assert_eq!(segments[0]["sealed"], false);
    assert!(segments[0]["file_bytes"].as_u64().expect("file_bytes") >= 64);

    let text = factlog(&["info", arg(&dir)], b"");
    text.assert_success();
    let text = text.stdout_text();
    assert!(text.contains("seqs: 1..=3"), "{text}");
    assert!(text.contains("durable seq: 3"), "{text}");
}

#[test]
fn bad_arguments_give_one_line_and_exit_2() {
    let (_temp, dir) = temp_log();
    let dir = arg(&dir);
    let cases: [&[&str]; 10] = [
        &[],
        &["frobnicate"],
        &["append"],
        &["append", dir, "--durability", "fast"],
        &["append", dir, "--durability"],
        &["dump", dir, "--format", "xml"],
        &["dump", dir, "--from", "abc"],
        &["dump", dir, "--from", "0"],
        &["verify", dir, "--bogus"],
        &["info", dir, "extra"],
    ];
    for args in cases {
        let run = factlog(args, b"");
        run.assert_one_line_error(2);
        assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
    }
}

#[test]
fn unusable_logs_give_one_line_and_exit_1() {
    let (temp, dir) = temp_log();
    let missing = temp.path().join("missing");
    factlog(&["dump", arg(&missing)], b"").assert_one_line_error(1);
    factlog(&["info", arg(&missing)], b"").assert_one_line_error(1);
    assert!(!missing.exists(), "read-only commands must not create a log");

    let file = temp.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write file");
    factlog(&["append", arg(&file)], b"x\n").assert_one_line_error(1);

    let writer = Log::open(&dir, Options::new()).expect("open the log for writing");
    let run = factlog(&["append", arg(&dir)], b"x\n");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("locked"), "{}", run.stderr);
    writer.close().expect("close");
}

#[test]
fn an_oversized_line_is_refused_and_earlier_records_are_kept() {
    let (_temp, dir) = temp_log();
    let mut input = b"small\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', factlog::limits::FRAME_PAYLOAD_BYTES_MAX + 1));
    input.extend_from_slice(b"\nnever appended\n");
    let run = factlog(&["append", arg(&dir), "--durability", "buffered"], &input);
    run.assert_one_line_error(1);
    assert_eq!(run.stdout_text(), "1\n");
    assert_eq!(read_log(&dir), vec![(1, b"small".to_vec())]);
}
