//! Proves that the README's "Scripting: JSON, schemas, time" example runs as written and
//! prints what the text under it says: replies that echo each `id` first, one `state` shape
//! valid against `state.json`, dump lines with `time` valid against `dump-line.json` and
//! inside the `--since`/`--until` window, exit 1 for a task the store does not have, and the
//! request key of vector 024's derivation.

use crate::common;

use common::readme::run_sh_block;
use common::schema::assert_valid;
use serde_json::Value;

#[test]
fn the_readme_scripting_example_prints_what_it_describes() {
    let (script, output) = run_sh_block("### Scripting: JSON, schemas, time");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script}\n{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let json = |line: &str| -> Value { serde_json::from_str(line).expect("a JSON line") };

    // Two emit replies, the id first.
    for (line, id) in lines[..2].iter().zip(["a", "b"]) {
        let reply = json(line);
        assert_valid("emit-reply.json", &reply);
        assert_eq!(reply.as_object().unwrap().keys().next().map(String::as_str), Some("id"));
        assert_eq!(reply["id"], id, "{line}");
    }
    // The state of t1, in the one state shape.
    let state = json(lines[2]);
    assert_valid("state.json", &state);
    assert_eq!(state["last_seq"], 2);
    assert_eq!(state["tasks"].as_object().unwrap().keys().collect::<Vec<_>>(), ["t1"]);
    // Both events in the time window, each with its RFC 3339 time.
    for line in &lines[3..5] {
        let event = json(line);
        assert_valid("dump-line.json", &event);
        assert!(event["time"].as_str().unwrap().ends_with('Z'), "{line}");
    }
    // The unknown task: exit 1 and the shared message.
    assert_eq!(lines[5], "export: exit 1", "{stdout}");
    assert!(stderr.contains("no task \"t2\" in this store (its tasks are: t1"), "{stderr}");
    // The request key.
    let key = factlog::harness::request_key::derive(
        &factlog::harness::TaskId::new("t1").unwrap(),
        "publish_article:weekly",
        2,
    );
    assert_eq!(lines[6], key.as_str(), "{stdout}");
    assert_eq!(lines.len(), 7, "{stdout}");
}
