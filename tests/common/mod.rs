//! Helpers shared by the integration tests: running the real `factlog` binary, reading a log
//! back through the library, and the frame arithmetic of `format-spec/record.md`.

#![allow(dead_code, reason = "each test file uses a different subset of these helpers")]

pub mod cli;
pub mod damage;
pub mod emulators;
pub mod faulty_fs;
pub mod fixtures;
pub mod harness;
pub mod readme;
pub mod replica;
pub mod replica_fixture;
pub mod s3;
pub mod schema;
pub mod server;
pub mod vectors;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use factlog::{Log, Options, Seq};

/// The `factlog` binary of the command's package (`cli/`), built beside this test's own
/// executable: `cargo test` at the workspace root builds it first, because that package is a
/// default member with integration tests of its own.
pub static FACTLOG: std::sync::LazyLock<PathBuf> = std::sync::LazyLock::new(|| {
    let exe = std::env::current_exe().expect("the test's executable");
    // target/PROFILE/deps/TEST-HASH -> target/PROFILE/factlog
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("factlog"))
        .expect("the test executable's directory");
    assert!(
        binary.is_file(),
        "{} is missing: run the tests from the workspace root (`cargo test`), which builds \
         the command, or build it first with `cargo build -p factlog-cli`",
        binary.display()
    );
    binary
});

/// The name libtest gives the test `name` of the module `module` (its `module_path!()`), to
/// run it alone with `--exact` in a child process: the module path without the crate's name
/// (`integration::server_sigkill` and `child_entry` give `server_sigkill::child_entry`).
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}

/// Bytes of a segment header (`format-spec/segment.md`).
pub const SEGMENT_HEADER_BYTES: u64 = 64;

/// Bytes of a frame header (`format-spec/record.md`).
pub const FRAME_HEADER_BYTES: u64 = 24;

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    /// The exit code; `None` if a signal ended the process.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn stdout_text(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    /// Asserts exit code 0 and an empty standard error.
    pub fn assert_success(&self) {
        assert_eq!(self.code, Some(0), "expected success: {self:?}");
        assert_eq!(self.stderr, "", "expected no stderr: {self:?}");
    }

    /// Asserts the error contract: the given exit code and exactly one `factlog: ` line on
    /// standard error.
    pub fn assert_one_line_error(&self, code: i32) {
        assert_eq!(self.code, Some(code), "unexpected exit code: {self:?}");
        assert!(self.stderr.starts_with("factlog: "), "stderr: {:?}", self.stderr);
        assert!(self.stderr.ends_with('\n'), "stderr: {:?}", self.stderr);
        assert_eq!(self.stderr.lines().count(), 1, "stderr: {:?}", self.stderr);
        assert!(!self.stderr.contains("panicked"), "stderr: {:?}", self.stderr);
    }
}

/// Runs `factlog ARGS...` with `stdin` as its standard input and waits for it.
pub fn factlog(args: &[&str], stdin: &[u8]) -> Run {
    let mut child = Command::new(&*FACTLOG)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn factlog");
    let mut child_stdin = child.stdin.take().expect("piped stdin");
    let input = stdin.to_vec();
    // A separate writer keeps a large input from deadlocking against a full stdout pipe. A
    // command that does not read its input closes the pipe early: that is not an error here.
    let writer = std::thread::spawn(move || {
        let _ = child_stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("wait for factlog");
    writer.join().expect("stdin writer");
    Run {
        code: output.status.code(),
        stdout: output.stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The path as a `&str` argument; temporary directories have UTF-8 names.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temporary path")
}

/// A fresh temporary directory and, inside it, the path of a log that does not exist yet.
pub fn temp_log() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temporary directory");
    let dir = temp.path().join("log");
    (temp, dir)
}

/// `factlog append DIR --durability D`, asserting success; returns the acknowledged seqs.
pub fn append_lines(dir: &Path, durability: &str, input: &[u8]) -> Vec<u64> {
    let run = factlog(&["append", arg(dir), "--durability", durability], input);
    run.assert_success();
    run.stdout_text().lines().map(|line| line.parse().expect("decimal seq")).collect()
}

/// Appends raw records to the log in `dir` through the library, `Synced`: for tests of a store
/// that also holds records that are not events, which `factlog append` refuses to write.
pub fn append_raw(dir: &Path, records: &[&[u8]]) {
    let log = factlog::Log::open(dir, factlog::Options::new()).expect("open the log");
    for record in records {
        log.append(record, factlog::Durability::Synced).expect("append a raw record");
    }
    log.close().expect("close the log");
}

/// Every record of the log, read through the library (read-only).
pub fn read_log(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    let log = Log::open_read_only(dir, Options::new()).expect("read-only open");
    log.read_from(Seq(1))
        .expect("read_from")
        .map(|record| {
            let record = record.expect("record");
            (record.seq.0, record.payload.to_vec())
        })
        .collect()
}

/// Every record as printed by `factlog dump DIR --json`, bytes recovered exactly.
pub fn dump_json(dir: &Path, extra: &[&str]) -> Vec<(u64, Vec<u8>)> {
    let mut args = vec!["dump", arg(dir), "--json"];
    args.extend_from_slice(extra);
    let run = factlog(&args, b"");
    run.assert_success();
    run.stdout_text().lines().map(parse_dump_line).collect()
}

/// One `dump --json` line: `{"seq":N,"payload":"..."[,"payload_b64":"..."]}`.
pub fn parse_dump_line(line: &str) -> (u64, Vec<u8>) {
    let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
    let seq = value["seq"].as_u64().expect("numeric seq");
    let payload = value["payload"].as_str().expect("string payload");
    let bytes = match value.get("payload_b64") {
        Some(encoded) => {
            let bytes = base64_decode(encoded.as_str().expect("string payload_b64"));
            assert_eq!(payload, String::from_utf8_lossy(&bytes), "payload is the lossy text");
            assert!(std::str::from_utf8(&bytes).is_err(), "payload_b64 only for non-UTF-8");
            bytes
        }
        None => payload.as_bytes().to_vec(),
    };
    (seq, bytes)
}

/// Decodes standard base64 with padding; panics on anything else.
pub fn base64_decode(text: &str) -> Vec<u8> {
    fn sextet(c: u8) -> u32 {
        u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            other => panic!("not a base64 digit: {other:#x}"),
        })
    }
    assert_eq!(text.len() % 4, 0, "padded base64: {text}");
    let mut out = Vec::new();
    for quad in text.as_bytes().chunks(4) {
        let digits = quad.iter().take_while(|&&c| c != b'=').count();
        let group = quad[..digits]
            .iter()
            .enumerate()
            .fold(0u32, |group, (index, &c)| group | (sextet(c) << (18 - 6 * index)));
        for index in 0..digits.saturating_sub(1) {
            out.push(u8::try_from((group >> (16 - 8 * index)) & 0xff).expect("one byte"));
        }
    }
    out
}

/// Bytes a single-record frame with a payload of `payload_bytes` occupies on disk.
pub fn frame_bytes(payload_bytes: u64) -> u64 {
    (FRAME_HEADER_BYTES + payload_bytes).div_ceil(8) * 8
}

/// The segment files of a log, in log order.
pub fn segment_paths(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read log directory")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "seg"))
        .collect();
    paths.sort();
    paths
}

/// Overwrites bytes of a file in place.
pub fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).expect("open for patching");
    file.write_all_at(bytes, offset).expect("patch");
    file.sync_all().expect("sync patch");
}

/// Reads `len` bytes of a file at `offset`.
pub fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).expect("open for reading");
    let mut bytes = vec![0; len];
    file.read_exact_at(&mut bytes, offset).expect("read");
    bytes
}
