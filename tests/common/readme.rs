//! Running the README's shell examples as written: the first ```sh block after a heading,
//! with `factlog` as the built binary and its `/tmp/` paths moved into a temporary directory.

use std::process::{Command, Output};

use super::FACTLOG;

/// The first ```sh block after the heading `heading` (e.g. `## Salvaging a damaged store`).
pub fn sh_block(heading: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme.split(heading).nth(1).unwrap_or_else(|| panic!("no {heading}"));
    let block = section.split("```sh\n").nth(1).expect("a sh block");
    block.split("```").next().expect("the block's end").to_owned()
}

/// Runs the ```sh block under `heading` with `sh -e`, `factlog` replaced by the built binary
/// and `/tmp/` by a fresh temporary directory; returns the script and what it printed.
pub fn run_sh_block(heading: &str) -> (String, Output) {
    let temp = tempfile::tempdir().expect("temporary directory");
    let root = temp.path().to_str().expect("UTF-8 path");
    let script = sh_block(heading)
        .replace("/tmp/", &format!("{root}/"))
        .lines()
        .map(|line| match line.strip_prefix("factlog ") {
            Some(rest) => format!("\"$FACTLOG\" {rest}"),
            None => line
                .replace("| factlog ", "| \"$FACTLOG\" ")
                .replace("; factlog ", "; \"$FACTLOG\" "),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let output = Command::new("sh")
        .arg("-ec")
        .arg(&script)
        .env("FACTLOG", &*FACTLOG)
        .output()
        .expect("run sh");
    (script, output)
}
