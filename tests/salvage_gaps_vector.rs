//! Proves that the gap-file vector `format-spec/vectors/030-gaps` holds exactly the bytes the
//! encoder writes for the gaps `[4, 9)` and `[20, 21)` (also as rebuilt from its annotated hex
//! dump, which is the example of `format-spec/salvage.md`), that it decodes to those gaps, and
//! that every truncation and bit flip of it is refused as corruption or a newer version.

use std::path::{Path, PathBuf};

use factlog::engine::gaps::{Gap, Gaps};
use factlog::{ErrorKind, Seq};

fn vector(ext: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("format-spec/vectors/030-gaps.{ext}"))
}

fn gap(first: u64, end: u64) -> Gap {
    Gap { first: Seq(first), end: Seq(end) }
}

/// The bytes of the hex columns of lines `XXXXXXXX  hex ...` in `text`.
fn hex_bytes(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((_, rest)) = line.split_once("  ") else { continue };
        let hex = rest.split("  ").next().unwrap_or("");
        out.extend(hex.split(' ').map(|b| u8::from_str_radix(b, 16).expect("hex")));
    }
    out
}

#[test]
fn vector_030_gaps() {
    let bin = std::fs::read(vector("bin")).expect("030-gaps.bin");
    let gaps = Gaps::new(vec![gap(4, 9), gap(20, 21)]).expect("gaps");
    assert_eq!(gaps.encode(), bin, "the encoder writes the vector");
    let txt = std::fs::read_to_string(vector("txt")).expect("030-gaps.txt");
    assert_eq!(hex_bytes(&txt), bin, "the annotated dump holds the same bytes");
    let spec = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("format-spec/salvage.md"),
    )
    .expect("salvage.md");
    let example: String =
        spec.lines().filter(|l| l.starts_with("000000")).collect::<Vec<_>>().join("\n");
    assert_eq!(hex_bytes(&example), bin, "the example of salvage.md");

    let decoded = Gaps::decode(&bin, Path::new("GAPS")).expect("decode");
    assert_eq!(decoded.ranges(), &[gap(4, 9), gap(20, 21)]);
    assert!(decoded.declares(4, 9) && decoded.declares(20, 21) && !decoded.declares(4, 10));
    for cut in 0..bin.len() {
        let err = Gaps::decode(&bin[..cut], Path::new("GAPS")).expect_err("a truncation");
        assert!(err.is_corruption(), "cut {cut}: {err}");
    }
    for bit in 0..bin.len() * 8 {
        let mut flipped = bin.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let err = Gaps::decode(&flipped, Path::new("GAPS")).expect_err("a flip");
        assert!(
            matches!(
                err.kind(),
                ErrorKind::Corruption { .. } | ErrorKind::UnsupportedVersion { .. }
            ),
            "bit {bit}: {err:?}"
        );
    }
}
