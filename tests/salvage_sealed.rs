//! Proves that `factlog::salvage` on a store with one flipped byte in the middle of a sealed
//! segment keeps every other record with its seq, reports exactly the damaged frame and the
//! seq it held, declares the gap so the new store opens and reads whole, leaves the damaged
//! directory byte-identical, and that the tool call whose `tool/result` was lost comes back
//! as `outcome_unknown` from the harness recovery, never as `completed`.

use crate::common;

use common::damage::{
    flip_byte, frame_of, records, result_inside_segment, segment_files, small_options,
    store_with_calls,
};
use common::harness::files_under;
use factlog::harness::salvage::Lost;
use factlog::harness::{Outcome, Plan};
use factlog::{SalvageOptions, Seq, Store, VerifyOutcome};

#[test]
fn a_flipped_byte_in_a_sealed_segment_loses_only_its_record() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("store");
    let results = store_with_calls(&dir, 60);
    assert!(segment_files(&dir).len() >= 3, "the store spans several segments");
    let last = *results.values().max().expect("results") + 1;
    let before = records(&dir, u64::MAX);
    let (lost_call, lost_seq) = result_inside_segment(&dir, &results, 0);
    let (path, offset, _) = frame_of(&dir, lost_seq);
    flip_byte(&path, offset + 40);
    let image = files_under(&dir);

    let target = temp.path().join("saved");
    let options = SalvageOptions::new().store(small_options());
    let report = factlog::salvage(&dir, &target, options).expect("salvage");

    assert_eq!(files_under(&dir), image, "the damaged store is never written");
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    let damage = &report.damage[0];
    assert_eq!((&damage.path, damage.offset), (&path, offset));
    assert_eq!(damage.lost, Lost::Seqs { first: Seq(lost_seq), last: Seq(lost_seq) });
    assert_eq!(report.seqs_lost(), 1);
    assert_eq!(report.records_kept, before.len() as u64 - 1);
    assert_eq!(report.gaps.len(), 1);
    assert_eq!((report.gaps[0].first, report.gaps[0].end), (Seq(lost_seq), Seq(lost_seq + 1)));

    let kept: Vec<(u64, Vec<u8>)> =
        before.iter().filter(|(s, _)| *s != lost_seq).cloned().collect();
    assert_eq!(records(&target, last), kept, "every other record, with its seq");

    let recovery = report.recovery.as_ref().expect("the new store was recovered");
    let calls = &recovery.tasks[0].calls;
    assert_eq!(calls.len(), 1, "only the call whose result was lost: {calls:?}");
    assert_eq!(calls[0].call_id.as_str(), lost_call);
    assert_eq!((calls[0].outcome, calls[0].plan), (Outcome::OutcomeUnknown, Plan::RetrySameKey));

    // The new store opens with the normal open, verifies clean, and keeps its decision.
    let report = factlog::verify(&target, factlog::Options::new()).expect("verify");
    assert!(matches!(report.outcome, VerifyOutcome::Clean), "{:?}", report.outcome);
    let store = Store::open(&target, small_options()).expect("open the salvaged store");
    let state = store.task_state("t1").expect("task t1");
    let call = &state.session.calls[&factlog::harness::CallId::from(lost_call.as_str())];
    assert_ne!(call.status, factlog::harness::state::CallStatus::Completed);
    store.close().expect("close");
}
