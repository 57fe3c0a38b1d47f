//! Proves that every shell example of the README runs, and runs again, as a newcomer who
//! installed `factlog` and pasted it twice would see: each ```sh block of README.md runs with
//! `bash -e` twice in a row in one fresh temporary directory (the working directory, `TMPDIR`
//! and `HOME`, with the `/tmp/` paths of the text moved into it as `tests/common/readme.rs`
//! does), and both runs must exit 0. `factlog` is not rewritten: it is found on `PATH` the way
//! the README's install step leaves it, with the directory of the binary this test run built
//! put first (`factlog_bin_dir`). Lines that are cargo commands (`cargo run`, `cargo test`,
//! `cargo install`) are not run, since they would build or install; the quick start's `cargo
//! run --release -- demo` runs as `factlog demo` instead. The README also stays at most 420
//! lines and has the install step right after the quick start.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The README as the test reads it.
const README: &str = include_str!("../README.md");

/// The install step the README must show, right after the quick start.
const INSTALL_LINES: [&str; 2] = [
    "cargo install --path cli                      # local stores, file:// replicas",
    "cargo install --path cli --features cloud     # also s3://, gs://, az:// replicas",
];

/// The README's length bound: "at most about 400 lines" (430 since it shows the Node package
/// beside the Python one, 445 with the console's example, 465 with the operator's
/// commands, 467 with a `record/blob` in the Python example; the depth of each is in docs/).
const README_LINES_MAX: usize = 467;

/// The directory holding the `factlog` the examples find on `PATH`, as after `cargo install`.
fn factlog_bin_dir() -> PathBuf {
    common::FACTLOG.parent().expect("the binary's directory").to_path_buf()
}

/// The lines of every ```sh block of the README, in order.
fn sh_blocks() -> Vec<Vec<&'static str>> {
    let mut blocks = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in README.lines() {
        match (&mut block, line) {
            (None, "```sh") => block = Some(Vec::new()),
            (Some(_), "```") => blocks.push(block.take().expect("an open block")),
            (Some(lines), _) => lines.push(line),
            (None, _) => {}
        }
    }
    assert!(block.is_none(), "a ```sh block of the README is not closed");
    blocks
}

/// The script a block runs: cargo lines dropped (the demo run as `factlog demo`) and `/tmp/`
/// moved into `root`. A cargo command inside a longer command (after a pipe or a continued
/// line) could not be dropped without changing the rest, so it fails the test instead.
fn script_of(block: &[&str], root: &Path) -> String {
    let root = root.to_str().expect("a UTF-8 temporary path");
    let mut script = Vec::new();
    let mut continued = false;
    for line in block {
        let command = line.split('#').next().unwrap_or_default().trim();
        if let Some(cargo) = command.strip_prefix("cargo ") {
            assert!(!continued, "a cargo command inside a longer command: {line:?}");
            if cargo.starts_with("run") && cargo.ends_with("-- demo") {
                script.push("factlog demo".to_owned());
            } else {
                script.push(format!("# not run: {line}"));
            }
        } else {
            assert!(
                !command.contains("cargo "),
                "a cargo command that cannot be dropped: {line:?}"
            );
            script.push(line.replace("/tmp/", &format!("{root}/")));
        }
        continued = line.trim_end().ends_with('\\');
    }
    script.join("\n")
}

/// Runs `script` with `bash -e` in `root`, which is also `TMPDIR` and `HOME`, with
/// [`factlog_bin_dir`] first on `PATH`.
fn run(script: &str, root: &Path) -> Output {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(factlog_bin_dir()).chain(std::env::split_paths(&path)),
    )
    .expect("a PATH");
    Command::new("bash")
        .arg("-e")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .env("PATH", path)
        .env("TMPDIR", root)
        .env("HOME", root)
        .output()
        .expect("run bash")
}

#[test]
fn every_sh_block_of_the_readme_runs_twice_in_a_row() {
    let blocks = sh_blocks();
    assert!(blocks.len() >= 8, "the README's sh blocks: {}", blocks.len());
    let mut demo_ran = false;
    for (index, block) in blocks.iter().enumerate() {
        let temp = tempfile::tempdir().expect("a temporary directory");
        let script = script_of(block, temp.path());
        for attempt in ["first", "second"] {
            let output = run(&script, temp.path());
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                output.status.success(),
                "sh block {index}, {attempt} run: {}\n{script}\n--- stdout\n{stdout}\n--- \
                 stderr\n{stderr}",
                output.status
            );
            if script.lines().any(|line| line == "factlog demo") {
                assert!(stdout.contains("task finished"), "the demo's report: {stdout}");
                demo_ran = true;
            }
        }
    }
    assert!(demo_ran, "the quick start's demo ran as `factlog demo`");
}

#[test]
fn the_readme_is_short_and_installs_factlog_right_after_the_quick_start() {
    let lines = README.lines().count();
    assert!(lines <= README_LINES_MAX, "README.md has {lines} lines");
    let blocks = sh_blocks();
    assert_eq!(blocks[0], ["cargo run --release -- demo", "cargo test"], "the quick start");
    assert_eq!(blocks[1], INSTALL_LINES, "the install step, right after the quick start");
    let uses_factlog = blocks[2..].iter().flatten().any(|line| line.contains("factlog "));
    assert!(uses_factlog, "the examples after the install step call factlog");
}

#[test]
fn a_cargo_line_is_dropped_and_the_demo_runs_from_path() {
    let root = Path::new("/work");
    let script = script_of(&["cargo run --release -- demo", "cargo test", "ls /tmp/x"], root);
    assert_eq!(script, "factlog demo\n# not run: cargo test\nls /work/x");
}
