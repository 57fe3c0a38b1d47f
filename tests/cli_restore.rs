//! `factlog restore URL DIR [--seq N]`, run as the real binary on a store shipped by hand into
//! a `file://` replica (`tests/common/replica.rs`): the restored store gives the same
//! `factlog dump --json`, `state --json` and `recover --dry-run --json` as the source and
//! verifies clean with `--deep`; `--seq` says where it ended;
//! a damaged part is one error line naming it, exit 3, nothing written; a target that is not
//! empty is exit 1.

mod common;

use common::replica_fixture::{Replica, last_seq, ship, source_store};
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
