//! Proves that the README's "Sharing a store between processes" example runs as written and
//! prints what the text under it says: two `factlog emit` processes write one store through
//! a running `factlog serve` (each gets its written reply), a compare-and-set on a stale
//! revision is refused with `STALE_REVISION` and writes nothing, the server exits on SIGTERM,
//! and `state` then shows both tasks at revision 1.

use crate::common;

use common::readme::run_sh_block;
use common::schema::assert_valid;
use serde_json::Value;

#[test]
fn the_readme_sharing_example_prints_what_it_describes() {
    let (script, output) = run_sh_block("## Sharing a store between processes");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script}\n{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    let json = |line: &str| -> Value { serde_json::from_str(line).expect("a JSON line") };
    let mut written: Vec<Value> = lines[..2].iter().map(|l| json(l)).collect();
    written.sort_by_key(|reply| reply["id"].as_str().unwrap_or_default().to_owned());
    for (reply, (id, task)) in written.iter().zip([("a", "t1"), ("b", "t2")]) {
        assert_valid("emit-reply.json", reply);
        assert_eq!((reply["id"].as_str(), reply["task"].as_str()), (Some(id), Some(task)));
        assert_eq!(reply["revision"], 1, "{reply}");
    }
    let stale = json(lines[2]);
    assert_valid("emit-reply.json", &stale);
    assert_eq!(stale["error"], "STALE_REVISION", "{stale}");
    let state = json(lines[3]);
    assert_valid("state.json", &state);
    for task in ["t1", "t2"] {
        assert_eq!(state["tasks"][task]["revision"], 1, "{state}");
    }
}
