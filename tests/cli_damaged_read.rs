//! Proves that `dump`, `export` and `verify` on a store with a flipped byte (in a sealed and
//! in the active segment) print every selected record that precedes the damage, then name the
//! damage (segment file, offset, reason) in one line on standard error pointing to `factlog
//! salvage`, with exit code 3 (damaged data), and that
//! `dump --raw --to 3` on such a store succeeds with exit 0.

use crate::common;

use common::cli::json_lines;
use common::damage::{flip_byte, frame_of, result_inside_segment, segment_files, store_with_calls};
use common::{Run, arg, factlog};

fn assert_points_to_salvage(run: &Run, code: i32, path: &std::path::Path, offset: u64) {
    run.assert_one_line_error(code);
    assert!(run.stderr.contains("factlog salvage"), "{}", run.stderr);
    assert!(run.stderr.contains(arg(path)), "{}", run.stderr);
    assert!(run.stderr.contains(&format!("offset {offset}")), "{}", run.stderr);
    assert!(!run.stderr.contains("backup"), "{}", run.stderr);
}

#[test]
fn readers_print_what_precedes_the_damage_and_point_to_salvage() {
    for segment in ["sealed", "active"] {
        let temp = tempfile::tempdir().expect("temporary directory");
        let dir = temp.path().join("store");
        let results = store_with_calls(&dir, 70);
        let index = if segment == "sealed" { 1 } else { segment_files(&dir).len() - 1 };
        let (_, lost) = result_inside_segment(&dir, &results, index);
        let (path, offset, _) = frame_of(&dir, lost);
        flip_byte(&path, offset + 40);
        let expected: Vec<u64> = (1..lost).collect();

        let run = factlog(&["dump", arg(&dir), "--raw", "--json"], b"");
        assert_points_to_salvage(&run, 3, &path, offset);
        let printed: Vec<u64> =
            json_lines(&run).iter().map(|l| l["seq"].as_u64().unwrap()).collect();
        assert_eq!(printed, expected, "{segment}: dump prints every record before the damage");

        let run = factlog(&["dump", arg(&dir), "--json", "--type", "tool/result"], b"");
        assert_points_to_salvage(&run, 3, &path, offset);
        let printed: Vec<u64> =
            json_lines(&run).iter().map(|l| l["seq"].as_u64().unwrap()).collect();
        let mut before: Vec<u64> = results.values().copied().filter(|s| *s < lost).collect();
        before.sort_unstable();
        assert_eq!(printed, before, "{segment}: the filters still apply");

        let run = factlog(&["dump", arg(&dir), "--raw", "--to", "3"], b"");
        run.assert_success();
        assert_eq!(run.stdout_text().lines().count(), 3);
        let run = factlog(&["dump", arg(&dir), "--to", &(lost - 1).to_string()], b"");
        run.assert_success();

        let run = factlog(&["export", arg(&dir)], b"");
        assert_points_to_salvage(&run, 3, &path, offset);
        let printed: Vec<u64> =
            json_lines(&run).iter().map(|l| l["seq"].as_u64().unwrap()).collect();
        assert_eq!(printed, expected, "{segment}: export prints every event before the damage");

        let run = factlog(&["verify", arg(&dir)], b"");
        assert_points_to_salvage(&run, 3, &path, offset);
        assert!(run.stdout_text().contains(&format!("at offset {offset}")), "{run:?}");
    }
}
