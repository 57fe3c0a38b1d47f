//! The README's holders example runs as written: the `sh` block after `<!-- example: holders
//! -->` is split into its `factlog emit` pipelines, each pipeline's quoted JSON lines are fed
//! to a new `emit` process on one fresh store, and the replies are the ones the README
//! describes (the second process refuses the payment with `NEEDS_RECOVERY` naming p1, then
//! writes the result and the payment, then refuses the reused call id with `CALL_ID_REUSED`).

use crate::common;

use common::cli::{emit, refused, written};
use common::temp_log;
use serde_json::{Value, json};

const README: &str = include_str!("../README.md");

/// The JSON lines of each `| factlog emit` pipeline of the example block.
fn pipelines() -> Vec<Vec<Value>> {
    let start = README.find("<!-- example: holders -->").expect("the example marker");
    let block = &README[start..];
    let open = block.find("```sh\n").expect("the sh block") + "```sh\n".len();
    let close = block[open..].find("```").expect("the end of the block") + open;
    let mut pipelines = Vec::new();
    let mut lines = Vec::new();
    for text in block[open..close].lines() {
        let text = text.trim();
        if let Some(quoted) = text.strip_prefix('\'') {
            let json = quoted.split('\'').next().expect("a quoted line");
            lines.push(serde_json::from_str(json).expect("a JSON line"));
        }
        if text.starts_with("| factlog emit ") {
            pipelines.push(std::mem::take(&mut lines));
        }
    }
    assert!(lines.is_empty(), "every line belongs to a pipeline");
    pipelines
}

#[test]
fn the_readme_holders_example_gives_the_replies_it_describes() {
    let pipelines = pipelines();
    assert_eq!(pipelines.len(), 2, "two emit processes");
    let (_temp, dir) = temp_log();
    for reply in emit(&dir, &pipelines[0]) {
        written(&reply);
    }
    let replies = emit(&dir, &pipelines[1]);
    refused(&replies[0], "NEEDS_RECOVERY");
    assert_eq!(
        replies[0]["calls"],
        json!([{ "call_id": "p1", "tool": "pay", "plan": "ask_user" }])
    );
    written(&replies[1]);
    written(&replies[2]);
    refused(&replies[3], "CALL_ID_REUSED");
    assert_eq!(
        (replies[3]["earlier"]["seq"].as_u64(), replies[3]["earlier"]["tool"].as_str()),
        (Some(2), Some("pay"))
    );
}
