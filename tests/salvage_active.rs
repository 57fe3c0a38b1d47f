//! Proves that `factlog::salvage` on a store with one flipped byte in the middle of its
//! active segment (damage a later synced frame proves was durable, so the store refuses to
//! open) keeps every record before and after it with its seq, reports the damaged frame and
//! its seq, and that the call whose `tool/result` was lost is `outcome_unknown` after the
//! salvage, while the new store opens with `Store::open` and takes new events after the last
//! kept seq.

use crate::common;

use common::damage::{
    flip_byte, frame_of, records, result_inside_segment, segment_files, small_options,
    store_with_calls,
};
use common::harness::{files_under, turn_start};
use factlog::harness::salvage::Lost;
use factlog::harness::{Outcome, Plan};
use factlog::{SalvageOptions, Seq, Store};

#[test]
fn a_flipped_byte_in_the_active_segment_loses_only_its_record() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    let results = store_with_calls(&dir, 70);
    let active = segment_files(&dir).len() - 1;
    let before = records(&dir, u64::MAX);
    let last = before.last().expect("records").0;
    let (lost_call, lost_seq) = result_inside_segment(&dir, &results, active);
    let (path, offset, _) = frame_of(&dir, lost_seq);
    flip_byte(&path, offset + 40);
    let refused = Store::open(&dir, small_options()).expect_err("the damaged store refuses");
    assert!(refused.to_string().contains("factlog salvage"), "{refused}");
    let image = files_under(&dir);

    let target = temp.path().join("saved");
    let options = SalvageOptions::new().store(small_options());
    let report = factlog::salvage(&dir, &target, options).expect("salvage");

    assert_eq!(files_under(&dir), image, "the damaged store is never written");
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    assert_eq!((&report.damage[0].path, report.damage[0].offset), (&path, offset));
    assert_eq!(report.damage[0].lost, Lost::Seqs { first: Seq(lost_seq), last: Seq(lost_seq) });
    assert_eq!(report.last_seq, Some(Seq(last)));
    let kept: Vec<(u64, Vec<u8>)> =
        before.iter().filter(|(s, _)| *s != lost_seq).cloned().collect();
    assert_eq!(records(&target, last), kept, "every other record, with its seq");

    let recovery = report.recovery.as_ref().expect("recovered");
    let calls = &recovery.tasks[0].calls;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].call_id.as_str(), lost_call);
    assert_eq!((calls[0].outcome, calls[0].plan), (Outcome::OutcomeUnknown, Plan::RetrySameKey));

    let store = Store::open(&target, small_options()).expect("open the salvaged store");
    let appended = store.task("t1").expect("task").append(turn_start()).expect("append");
    let factlog::Appended::Written { seq, .. } = appended else { panic!("duplicate") };
    assert!(seq.0 > last, "new events follow the last kept seq");
    store.close().expect("close");
}
