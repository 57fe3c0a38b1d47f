//! `factlog verify` exits 0 on a clean log and on one with only a torn tail (which a writer
//! open then cuts, exactly as reported; the report says `torn_tail`), and 3 on corruption or an
//! unsupported format version, naming segment and offset. Proved by damaging real logs byte by
//! byte at offsets computed from `format-spec/` and running the real binary on them.

use crate::common;

use common::{
    SEGMENT_HEADER_BYTES, append_lines, arg, factlog, frame_bytes, read_at, read_log,
    segment_paths, temp_log, write_at,
};
use factlog::{Durability, Log, Options};

fn verify_json(dir: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let run = factlog(&["verify", arg(dir), "--json"], b"");
    // Corruption is also named in one line on standard error, pointing to `factlog salvage`.
    if run.code == Some(3) && !run.stderr.is_empty() {
        run.assert_one_line_error(3);
        assert!(run.stderr.contains("factlog salvage"), "{run:?}");
    } else {
        assert_eq!(run.stderr, "", "{run:?}");
    }
    let text = run.stdout_text();
    assert_eq!(text.lines().count(), 1, "a single JSON object: {text}");
    (run.code, serde_json::from_str(&text).expect("JSON report"))
}

/// Appends `count` records of exactly 8 bytes each (`rec-0001`, ...) through the CLI.
fn append_fixed(dir: &std::path::Path, count: u64) -> Vec<(u64, Vec<u8>)> {
    let records: Vec<(u64, Vec<u8>)> =
        (1..=count).map(|seq| (seq, format!("rec-{seq:04}").into_bytes())).collect();
    let mut input = Vec::new();
    for (_, payload) in &records {
        input.extend_from_slice(payload);
        input.push(b'\n');
    }
    assert_eq!(append_lines(dir, "synced", &input), (1..=count).collect::<Vec<_>>());
    records
}

#[test]
fn clean_log_exits_0() {
    let (_temp, dir) = temp_log();
    append_fixed(&dir, 20);
    let run = factlog(&["verify", arg(&dir)], b"");
    run.assert_success();
    let text = run.stdout_text();
    assert!(text.lines().last().expect("summary").starts_with("clean:"), "{text}");

    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(0));
    assert_eq!(report["outcome"], "clean");
    assert_eq!(report["exit_code"], 0);
    assert_eq!(report["records"], 20);
    assert_eq!(report["last_seq"], 20);
    assert_eq!(report["segments"][0]["records"], 20);
}

#[test]
fn garbage_after_the_last_record_is_a_torn_tail_that_an_open_cuts() {
    let (_temp, dir) = temp_log();
    let records = append_fixed(&dir, 5);
    let segments = segment_paths(&dir);
    assert_eq!(segments.len(), 1);
    let end = SEGMENT_HEADER_BYTES + 5 * frame_bytes(8);
    let garbage = [0xa5_u8; 13];
    write_at(&segments[0], end, &garbage);

    // The log was closed cleanly: its mark vouches for every byte, so garbage after the end is
    // damage, refused by verify and by a writer open, and nothing changes.
    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["mark"]["clean"], true, "{report}");
    let reason = report["corruption"]["reason"].as_str().expect("a reason");
    assert!(reason.contains("cleanly closed"), "{report}");
    assert!(Log::open(&dir, Options::new()).expect_err("refused").is_corruption());
    assert_eq!(read_at(&segments[0], end, 13), garbage);

    // Without the mark (a log written before marks, or one that crashed before a mark covered
    // the tail), the frames alone decide: a torn tail that an open cuts.
    std::fs::remove_file(dir.join(factlog::engine::mark::MARK_FILE_NAME)).expect("remove MARK");
    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["outcome"], "torn_tail");
    assert_eq!(report["torn_tail"]["segment"], 1);
    assert_eq!(report["torn_tail"]["offset"], end);
    assert_eq!(report["torn_tail"]["bytes"], 13);
    assert_eq!(report["torn_tail"]["evidence"]["first_seq_cut"], 6);
    assert_eq!(report["torn_tail"]["evidence"]["mark_durable_seq"], serde_json::Value::Null);
    let text = factlog(&["verify", arg(&dir)], b"");
    assert_eq!(text.code, Some(0));
    let text = text.stdout_text();
    assert!(text.contains("torn tail") && text.contains(&format!("offset {end}")), "{text}");

    // verify and a read-only open change nothing.
    assert_eq!(read_at(&segments[0], end, 13), garbage);
    assert_eq!(read_log(&dir), records);

    let log = Log::open(&dir, Options::new()).expect("a writer open tolerates a torn tail");
    let cut = log.recovery_report().tail_cut.clone().expect("the open reports a cut");
    assert_eq!((cut.segment.0, cut.offset, cut.bytes), (1, end, 13));
    log.close().expect("close");

    assert_eq!(read_at(&segments[0], end, 13), [0; 13]);
    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(read_log(&dir), records);
    assert_eq!(append_lines(&dir, "synced", b"after the cut\n"), [6]);
}

#[test]
fn a_flipped_byte_in_a_sealed_segment_is_corruption() {
    let (_temp, dir) = temp_log();
    let log = Log::open(&dir, Options::new().segment_bytes(8192)).expect("open");
    for i in 0..200_u32 {
        let payload = format!("{i:0100}");
        log.append(payload.as_bytes(), Durability::Buffered).expect("append");
    }
    log.close().expect("close");
    let segments = segment_paths(&dir);
    assert!(segments.len() >= 3, "records must span several segments: {segments:?}");

    let first_payload = SEGMENT_HEADER_BYTES + common::FRAME_HEADER_BYTES;
    let byte = read_at(&segments[0], first_payload, 1)[0];
    write_at(&segments[0], first_payload, &[byte ^ 0x01]);

    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["outcome"], "corrupt");
    let corruption = &report["corruption"];
    assert_eq!(corruption["kind"], "corruption", "{report}");
    assert_eq!(corruption["segment"], 1, "{report}");
    assert_eq!(corruption["offset"], SEGMENT_HEADER_BYTES, "{report}");
    assert!(!corruption["reason"].as_str().expect("reason").is_empty());

    let text = factlog(&["verify", arg(&dir)], b"");
    assert_eq!(text.code, Some(3));
    let text = text.stdout_text();
    assert!(text.contains("segment 1") && text.contains("offset 64"), "{text}");
}

#[test]
fn a_flipped_byte_before_later_synced_records_is_corruption() {
    let (_temp, dir) = temp_log();
    append_fixed(&dir, 10);
    let segments = segment_paths(&dir);
    // Record 3 is damaged; records 4.. were written after it was synced and say so.
    let third_payload = SEGMENT_HEADER_BYTES + 2 * frame_bytes(8) + common::FRAME_HEADER_BYTES;
    write_at(&segments[0], third_payload, b"X");

    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["outcome"], "corrupt");
    assert_eq!(report["corruption"]["segment"], 1, "{report}");
    assert_eq!(report["corruption"]["offset"], SEGMENT_HEADER_BYTES + 2 * frame_bytes(8));
}

#[test]
fn a_future_format_version_exits_3() {
    let (_temp, dir) = temp_log();
    append_fixed(&dir, 3);
    let segments = segment_paths(&dir);
    write_at(&segments[0], 8, &3_u16.to_le_bytes());

    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["outcome"], "corrupt");
    assert_eq!(report["corruption"]["kind"], "unsupported_version", "{report}");
    assert_eq!(report["corruption"]["found"], 3);
    assert_eq!(report["corruption"]["supported"], 2);
}

#[test]
fn a_directory_without_a_log_exits_1_with_one_line() {
    let (temp, _dir) = temp_log();
    let missing = temp.path().join("missing");
    factlog(&["verify", arg(&missing)], b"").assert_one_line_error(1);
    let empty = temp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    factlog(&["verify", arg(&empty)], b"").assert_one_line_error(1);
}
