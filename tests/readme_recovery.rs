//! Proves that the README's "Recovery modes" example runs as written: a store of 50 synced
//! events cut to 100 bytes, as a disk that loses the tail leaves it, is refused by `verify`
//! (exit 3) and by the next writer (exit 3, nothing cut), and `salvage` still runs.

use crate::common;

use common::readme::run_sh_block;

#[test]
fn the_readme_recovery_example_runs() {
    let (script, output) = run_sh_block("## Recovery modes");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script}\n{stdout}\n{stderr}");
    assert!(stdout.contains("verify: exit 3"), "{stdout}");
    assert!(stdout.contains("emit: exit 3"), "{stdout}");
    assert!(stdout.contains("salvage: exit 0"), "{stdout}");
    assert!(stderr.contains("records 1 to 50 are damaged or missing"), "{stderr}");
}
