//! The test-vector files of `format-spec/vectors/` (`README.md` there): the annotated hex dump
//! beside each `.bin`, and the check that the committed `.bin`, the built bytes and the dump's
//! hex columns agree. Shared by `format_vectors`, `snapshot_vectors` and `event_vectors`.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The directory of the vectors.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("format-spec").join("vectors")
}

/// Whether `variable` is `1`: the test may write the files of a vector that does not exist yet.
pub fn writing(variable: &str) -> bool {
    std::env::var(variable).is_ok_and(|v| v == "1")
}

/// The little-endian `u16` at `at`.
pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// The little-endian `u32` at `at`.
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The little-endian `u64` at `at`.
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Appends the hex lines of `bytes[start..end)`: up to 16 bytes a line, a run of lines equal to
/// the one before shown as one `*`.
pub fn dump_lines(out: &mut String, bytes: &[u8], start: usize, end: usize) {
    let mut offset = start;
    let mut previous: Option<&[u8]> = None;
    let mut starred = false;
    while offset < end {
        let chunk = &bytes[offset..end.min(offset + 16)];
        if chunk.len() == 16 && previous == Some(chunk) {
            if !starred {
                out.push_str("*\n");
                starred = true;
            }
        } else {
            let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            let _ = writeln!(out, "{offset:08x}  {:<47}  |{}|", hex.join(" "), ascii(chunk));
            starred = false;
        }
        previous = Some(chunk);
        offset += chunk.len();
    }
}

/// The ASCII column of a dump line: printable bytes as themselves, others as `.`.
pub fn ascii(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| if (0x20..0x7f).contains(&b) { b as char } else { '.' }).collect()
}

/// The hex bytes in columns 10 to 56 of a dump line: at most 16 two-digit tokens.
pub fn hex_columns(line: &str) -> Result<Vec<u8>, String> {
    let area = line.get(10..line.len().min(57)).ok_or("line too short")?;
    let bytes: Vec<u8> = area
        .split_whitespace()
        .map(|t| {
            if t.len() == 2 { u8::from_str_radix(t, 16).ok() } else { None }.ok_or(t.to_owned())
        })
        .collect::<Result<_, _>>()
        .map_err(|t| format!("not a hex byte: {t:?}"))?;
    if bytes.is_empty() || bytes.len() > 16 {
        return Err(format!("{} bytes on one line", bytes.len()));
    }
    Ok(bytes)
}

/// Rebuilds the file from an annotated dump, checking that every byte is shown (or repeated by
/// a `*`), that the offsets follow each other, that the ASCII column matches the hex, and that
/// the last line is the length.
pub fn parse_dump(text: &str) -> Result<Vec<u8>, String> {
    let mut bytes: Vec<u8> = Vec::new();
    let mut previous: Vec<u8> = Vec::new();
    let mut starred = false;
    for (number, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}", number + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "*" {
            if previous.len() != 16 || starred {
                return Err(at("'*' must follow a full line".into()));
            }
            starred = true;
            continue;
        }
        let offset = line
            .get(..8)
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or_else(|| at(format!("no offset in {line:?}")))?;
        if starred {
            while bytes.len() < offset {
                bytes.extend_from_slice(&previous);
            }
            starred = false;
        }
        if offset != bytes.len() {
            return Err(at(format!("offset {offset:#x}, expected {:#x}", bytes.len())));
        }
        if line.len() == 8 {
            return Ok(bytes);
        }
        let chunk = hex_columns(line).map_err(at)?;
        let shown = line.get(57..).unwrap_or_default();
        if shown != format!("  |{}|", ascii(&chunk)) {
            return Err(at(format!("ASCII column {shown:?} does not match the hex")));
        }
        bytes.extend_from_slice(&chunk);
        previous = chunk;
    }
    Err("no final line with the file length".into())
}

/// Creates `path` with `bytes`; never overwrites a file.
pub fn write_new(path: &Path, bytes: &[u8]) {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap_or_else(|e| panic!("create {} (never overwritten): {e}", path.display()));
    file.write_all(bytes).expect("write vector file");
    file.sync_all().expect("sync vector file");
}

/// Panics at the first byte where `got` and `expected` differ, or when their lengths do.
pub fn assert_same_bytes(got: &[u8], expected: &[u8], what: &str) {
    if let Some(at) = got.iter().zip(expected).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at offset {at}: {:#04x} != {:#04x}",
            got[at], expected[at]
        );
    }
    assert_eq!(got.len(), expected.len(), "{what}: length");
}

/// One vector's files: its name, what the test built for it, and how to write its dump.
pub struct Files<'a> {
    /// `NNN-name`.
    pub name: &'a str,
    /// The bytes the library's encoders build from the vector's description.
    pub built: &'a [u8],
    /// What built them, for messages (`codec::encode`, `the encoder`).
    pub builder: &'a str,
    /// The test that writes missing files (`format_vectors`).
    pub test: &'a str,
    /// The environment variable that lets it write them.
    pub write_variable: &'a str,
}

impl Files<'_> {
    /// The committed `.bin`, after checking it against the built bytes and the hex columns of
    /// the `.txt`. A vector whose files do not exist yet is written (`.bin` and the dump made
    /// by `dump`) when the write variable is `1`, and is a failure otherwise.
    pub fn committed(&self, dump: impl FnOnce() -> String) -> Vec<u8> {
        let bin = dir().join(format!("{}.bin", self.name));
        let txt = dir().join(format!("{}.txt", self.name));
        if !bin.exists() {
            assert!(
                writing(self.write_variable),
                "{} does not exist: run `{}=1 cargo test --test integration {}::` once to write \
                 it, then commit it",
                bin.display(),
                self.write_variable,
                self.test
            );
            write_new(&bin, self.built);
            write_new(&txt, dump().as_bytes());
        }
        let committed = fs::read(&bin).expect("read the committed .bin");
        let what = format!("{} against {}", bin.display(), self.builder);
        assert_same_bytes(&committed, self.built, &what);
        let text = fs::read_to_string(&txt).expect("read the committed .txt");
        let dumped = parse_dump(&text).unwrap_or_else(|e| panic!("{}: {e}", txt.display()));
        assert_same_bytes(&dumped, &committed, &format!("hex columns of {}", txt.display()));
        committed
    }
}

/// One annotated structure of a dump: its description, notes on it (damage), and its bytes
/// `[start, end)`.
pub struct Section {
    /// The `# ...` line naming the byte range and the fields.
    pub description: String,
    /// The `#   ...` lines after it.
    pub notes: Vec<String>,
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// The annotated hex dump of vector `name` (its `.txt`): the `about` lines, then `legend` (the
/// lines saying what generated the file and how to read it, each without its `# `), then each
/// section's annotation and bytes, then the length.
pub fn dump(
    name: &str,
    bytes: &[u8],
    about: &[&str],
    legend: &[&str],
    sections: &[Section],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# format-spec/vectors/{name}.bin: {} bytes.", bytes.len());
    for line in about {
        let _ = writeln!(out, "# {line}");
    }
    out.push_str("#\n");
    for line in legend {
        let _ = writeln!(out, "# {line}");
    }
    for section in sections {
        let _ = writeln!(out, "#\n# {}", section.description);
        for note in &section.notes {
            let _ = writeln!(out, "#   {note}");
        }
        dump_lines(&mut out, bytes, section.start, section.end);
    }
    let _ = writeln!(out, "{:08x}", bytes.len());
    out
}
