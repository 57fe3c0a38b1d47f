//! Proves that the README's "Salvaging a damaged store" example runs as written: its shell
//! block, with `factlog` as the built binary and its `/tmp` paths in a temporary directory,
//! prints the verify and dump exit codes it promises, a salvage that loses exactly seq 3 and
//! reports call c1 `outcome_unknown`, and a dump of the new store with seqs 1, 2 and 4.

use crate::common;

use common::readme::run_sh_block;

#[test]
fn the_readme_salvage_example_runs() {
    let (script, output) = run_sh_block("## Salvaging a damaged store");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script}\n{stdout}\n{stderr}");
    assert!(stdout.contains("verify: exit 3") && stdout.contains("dump: exit 3"), "{stdout}");
    assert!(stdout.contains("at offset 224"), "{stdout}");
    assert!(stdout.contains("; lost seq 3"), "{stdout}");
    assert!(stdout.contains("call c1 (fetch): outcome_unknown"), "{stdout}");
    assert!(stderr.contains("factlog salvage"), "{stderr}");
    let last_dump: Vec<&str> = stdout.lines().rev().take(3).collect();
    let seqs: Vec<&str> = last_dump.iter().rev().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(seqs, ["1", "2", "4"], "{stdout}");
}
