//! Proves that the README's "Salvaging a damaged store" example runs as written: its shell
//! block, with `factlog` as the built binary and its `/tmp` paths in a temporary directory,
//! prints the verify and dump exit codes it promises, a salvage that loses exactly seq 3 and
//! reports call c1 `outcome_unknown`, and a dump of the new store with seqs 1, 2 and 4.

mod common;

use std::process::Command;

use common::FACTLOG;

/// The first ```sh block after the heading `## Salvaging a damaged store`.
fn example() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme.split("## Salvaging a damaged store").nth(1).expect("the section");
    let block = section.split("```sh\n").nth(1).expect("a sh block");
    block.split("```").next().expect("the block's end").to_owned()
}

#[test]
fn the_readme_salvage_example_runs() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let root = temp.path().to_str().expect("UTF-8 path");
    let script = example()
        .replace("/tmp/", &format!("{root}/"))
        .lines()
        .map(|line| match line.strip_prefix("factlog ") {
            Some(rest) => format!("\"$FACTLOG\" {rest}"),
            None => line.replace("| factlog ", "| \"$FACTLOG\" "),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let output = Command::new("sh")
        .arg("-ec")
        .arg(&script)
        .env("FACTLOG", FACTLOG)
        .output()
        .expect("run sh");
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
