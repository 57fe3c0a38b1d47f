//! Proves the command-line contract of `factlog salvage`: on a store with a flipped byte in a
//! sealed and in the active segment, `--json` reports every kept range, the gap (file, offset,
//! length, reason, lost seq) and the recovery with the lost result's call `outcome_unknown`;
//! the damaged directory stays byte-identical; the new store dumps every other record with
//! its seq; `--dry-run` writes nothing; a non-empty NEWDIR is one line and exit 1.

use crate::common;

use common::cli::{dir_image, json_lines};
use common::damage::{flip_byte, frame_of, result_inside_segment, segment_files, store_with_calls};
use common::{arg, factlog};
use serde_json::Value;

fn salvage_json(dir: &std::path::Path, target: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["salvage", arg(dir), "--to", arg(target), "--json"];
    args.extend_from_slice(extra);
    let run = factlog(&args, b"");
    run.assert_success();
    let lines = json_lines(&run);
    assert_eq!(lines.len(), 1, "one JSON object: {run:?}");
    lines[0].clone()
}

fn seqs(dir: &std::path::Path) -> Vec<u64> {
    let run = factlog(&["dump", arg(dir), "--raw", "--json"], b"");
    run.assert_success();
    json_lines(&run).iter().map(|l| l["seq"].as_u64().expect("seq")).collect()
}

#[test]
fn salvage_reports_gaps_and_recovers_for_sealed_and_active_damage() {
    for segment in ["sealed", "active"] {
        let temp = tempfile::tempdir().expect("temporary directory");
        let dir = temp.path().join("store");
        let results = store_with_calls(&dir, 70);
        let before = seqs(&dir);
        let index = if segment == "sealed" { 0 } else { segment_files(&dir).len() - 1 };
        let (call, lost) = result_inside_segment(&dir, &results, index);
        let (path, offset, _) = frame_of(&dir, lost);
        flip_byte(&path, offset + 40);
        let image = dir_image(&dir);

        let target = temp.path().join("saved");
        let dry = salvage_json(&dir, &target, &["--dry-run"]);
        assert!(!target.exists(), "{segment}: a dry run creates nothing");
        assert_eq!((dry["dry_run"].as_bool(), &dry["recovery"]), (Some(true), &Value::Null));

        let report = salvage_json(&dir, &target, &[]);
        assert_eq!(dir_image(&dir), image, "{segment}: DIR is never written");
        assert_eq!(report["gaps"], dry["gaps"], "{segment}");
        let gaps = report["gaps"].as_array().expect("gaps");
        assert_eq!(gaps.len(), 1, "{segment}: {report}");
        assert_eq!(gaps[0]["path"], arg(&path));
        assert_eq!(gaps[0]["offset"], offset);
        assert!(gaps[0]["bytes"].as_u64() > Some(0));
        assert!(gaps[0]["reason"].as_str().is_some_and(|r| !r.is_empty()));
        assert_eq!(gaps[0]["lost"]["known"], true);
        assert_eq!(
            (gaps[0]["lost"]["first_seq"].as_u64(), gaps[0]["lost"]["last_seq"].as_u64()),
            (Some(lost), Some(lost))
        );
        assert_eq!(report["seqs_lost"], 1);
        assert_eq!(report["declared_gaps"][0]["first_seq"], lost);
        assert_eq!(report["records_kept"], before.len() as u64 - 1);

        let calls = report["recovery"]["tasks"][0]["calls"].as_array().expect("calls").clone();
        assert_eq!(calls.len(), 1, "{segment}: {calls:?}");
        assert_eq!(
            (calls[0]["call_id"].as_str(), calls[0]["outcome"].as_str()),
            (Some(call.as_str()), Some("outcome_unknown"))
        );

        let kept: Vec<u64> = before.iter().copied().filter(|s| *s != lost).collect();
        let after = seqs(&target);
        assert_eq!(&after[..kept.len()], &kept[..], "{segment}: every other record, same seqs");
        let verify = factlog(&["verify", arg(&target)], b"");
        verify.assert_success();
    }
}

#[test]
fn text_output_names_the_gap_and_a_busy_target_is_refused() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    let results = store_with_calls(&dir, 60);
    let (_, lost) = result_inside_segment(&dir, &results, 0);
    let (path, offset, _) = frame_of(&dir, lost);
    flip_byte(&path, offset + 40);

    let busy = temp.path().join("busy");
    std::fs::create_dir(&busy).expect("mkdir");
    std::fs::write(busy.join("x"), b"x").expect("write");
    let run = factlog(&["salvage", arg(&dir), "--to", arg(&busy)], b"");
    run.assert_one_line_error(1);
    assert!(run.stderr.contains("not empty"), "{}", run.stderr);
    assert_eq!(std::fs::read_dir(&busy).expect("list").count(), 1);

    let target = temp.path().join("saved");
    let run = factlog(&["salvage", arg(&dir), "--to", arg(&target)], b"");
    run.assert_success();
    let text = run.stdout_text();
    assert!(text.contains(&format!("lost seq {lost}")), "{text}");
    assert!(text.contains(&format!("at offset {offset}")), "{text}");
    assert!(text.contains("outcome_unknown"), "{text}");
}
