//! Proves that a dry-run salvage writes nothing anywhere: the damaged directory stays
//! byte-identical, the target directory is not created, and the report names the same kept
//! ranges and the same damage as the real salvage then does.

use crate::common;

use common::damage::{flip_byte, frame_of, result_inside_segment, small_options, store_with_calls};
use common::harness::files_under;
use factlog::SalvageOptions;

#[test]
fn a_dry_run_reports_what_a_salvage_does_and_writes_nothing() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    let results = store_with_calls(&dir, 60);
    let (_, lost_seq) = result_inside_segment(&dir, &results, 1);
    let (path, offset, _) = frame_of(&dir, lost_seq);
    flip_byte(&path, offset + 30);
    let image = files_under(temp.path());

    let target = temp.path().join("saved");
    let options = SalvageOptions::new().store(small_options());
    let dry = factlog::salvage(&dir, &target, options.clone().dry_run(true)).expect("dry run");
    assert_eq!(files_under(temp.path()), image, "nothing written anywhere");
    assert!(!target.exists(), "the target is not created");
    assert!(dry.dry_run && dry.recovery.is_none());
    assert_eq!(dry.damage.len(), 1);

    let real = factlog::salvage(&dir, &target, options).expect("salvage");
    assert_eq!((real.kept, real.damage, real.gaps), (dry.kept, dry.damage, dry.gaps));
}
