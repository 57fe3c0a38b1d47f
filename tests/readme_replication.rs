//! Proves that the README's "Replicating a store to another machine" walkthrough runs as
//! written and prints what the text under it says: `replicate --once` ships the three events,
//! `info` shows the replica 0 records behind, `replicas list` shows its log and how far it is
//! behind the store, `replicas verify` checks every object, a dry run
//! writes nothing, the store restored from the replica alone dumps the same events, and
//! `recover` on it gives the booking in flight an unknown outcome to ask the user about.

use crate::common;

use common::readme::run_sh_block;

#[test]
fn the_readme_replication_walkthrough_prints_what_it_describes() {
    let (script, output) = run_sh_block("## Replicating a store to another machine");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script}\n{stdout}\n{stderr}");
    assert!(stdout.contains("replicated through seq 3 (store at 3, lag 0)"), "{stdout}");
    assert!(stdout.contains("0 records behind this store (stopped"), "{stdout}");
    assert!(stdout.contains("log: seqs 1..=3 in 1 segment"), "{stdout}");
    assert!(stdout.contains("the replica lacks 0 records"), "{stdout}");
    assert!(stdout.contains("every object read and checked"), "{stdout}");
    assert!(stdout.contains("would restore file://"), "{stdout}");
    assert!(stdout.contains("dry run: every object was checked, nothing was written"), "{stdout}");
    assert!(stdout.contains("\nrestored file://"), "{stdout}");
    assert!(stdout.contains("same events"), "{stdout}");
    let recover = stdout.split("same events").nth(1).expect("recover's report");
    assert!(recover.contains("b1") && recover.contains("outcome_unknown"), "{recover}");
    assert!(recover.contains("ask_user"), "{recover}");
}
