//! Torn tails kept aside (`format-spec/mark.md`, "Kept tails"): before an open cuts a torn tail
//! that still holds valid frames after its hole, it copies the bytes it is about to zero into
//! a file beside the segment, `NAME.seg.torn-OFFSET-N`, so that `factlog salvage` can bring
//! those records back. The file repeats the segment's header (its salt decodes the frames) and
//! says where the bytes were.
//!
//! Invariant: a kept file is complete before the cut starts: written and synced under a
//! temporary name, renamed, directory synced.

use std::io;
use std::path::{Path, PathBuf};

use crate::engine::segment::{self, SegmentHeader};
use crate::error::{CorruptionReason, Error, Result};
use crate::fs::{Fs, FsFile, OpenMode};
use crate::limits::{SEGMENT_HEADER_BYTES, ZERO_CHUNK_BYTES};

/// Magic bytes at offset 0 of a kept tail.
pub const KEPT_MAGIC: [u8; 8] = *b"FACTLTRN";
/// The kept-tail version this build reads and writes.
pub const KEPT_VERSION: u16 = 1;
/// Bytes before the segment header copy.
const PREFIX_BYTES: usize = 32;
/// Bytes before the kept bytes.
pub const KEPT_HEADER_BYTES: usize = PREFIX_BYTES + SEGMENT_HEADER_BYTES;
/// The part of a kept file's name after the segment's name.
const INFIX: &str = ".torn-";

/// A kept tail, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptTail<'a> {
    /// The header of the segment the bytes were cut from.
    pub header: SegmentHeader,
    /// Where the bytes were in that segment.
    pub offset: u64,
    /// The bytes, as they were.
    pub bytes: &'a [u8],
}

/// Whether `name` is the name of a kept tail.
#[must_use]
pub fn is_kept_name(name: &str) -> bool {
    name.split_once(INFIX).is_some_and(|(seg, _)| segment::parse_file_name(seg).is_some())
}

/// The kept tails in `dir`, in name order.
///
/// # Errors
/// I/O errors listing the directory.
pub fn list(fs: &dyn Fs, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut names: Vec<String> = fs
        .list_dir(dir)
        .map_err(|e| Error::io("list directory", dir, e))?
        .into_iter()
        .filter(|name| is_kept_name(name) && !name.ends_with(".tmp"))
        .collect();
    names.sort();
    Ok(names.into_iter().map(|name| dir.join(name)).collect())
}

/// Copies `[offset, offset + bytes)` of the segment `file` (at `path`, with `header`) into a
/// new kept file beside it and returns that file's path.
///
/// # Errors
/// I/O errors; nothing is cut when it fails.
pub(crate) fn keep(
    fs: &dyn Fs,
    dir: &Path,
    header: &SegmentHeader,
    path: &Path,
    file: &dyn FsFile,
    offset: u64,
    bytes: u64,
) -> Result<PathBuf> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let taken = fs.list_dir(dir).map_err(|e| Error::io("list directory", dir, e))?;
    let header_bytes = encode_header(header, offset, bytes);
    let mut kept = None;
    for n in 1.. {
        let candidate = format!("{name}{INFIX}{offset:020}-{n}");
        if !taken.contains(&candidate) {
            kept = Some(candidate);
            break;
        }
        // An earlier open that kept the same bytes and was then refused or crashed before its
        // cut: keep them once.
        let existing = dir.join(&candidate);
        if same_bytes(fs, &existing, &header_bytes, file, path, offset, bytes)? {
            return Ok(existing);
        }
    }
    let kept = kept.expect("an unused name");
    let kept = dir.join(kept);
    let tmp = PathBuf::from(format!("{}.tmp", kept.display()));
    match fs.remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(Error::io("remove", &tmp, e)),
        _ => {}
    }
    let out = fs.open(&tmp, OpenMode::CreateNew).map_err(|e| Error::io("create", &tmp, e))?;
    out.write_all_at(&header_bytes, 0).map_err(|e| Error::io("write", &tmp, e))?;
    let mut chunk = vec![0u8; ZERO_CHUNK_BYTES];
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(ZERO_CHUNK_BYTES as u64) as usize;
        file.read_exact_at(&mut chunk[..n], offset + done)
            .map_err(|e| Error::io("read", path, e))?;
        out.write_all_at(&chunk[..n], KEPT_HEADER_BYTES as u64 + done)
            .map_err(|e| Error::io("write", &tmp, e))?;
        done += n as u64;
    }
    out.sync_data().map_err(|e| Error::io("fdatasync", &tmp, e))?;
    fs.rename(&tmp, &kept).map_err(|e| Error::io("rename", &kept, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io("fsync directory", dir, e))?;
    Ok(kept)
}

/// Whether the kept file `existing` holds `header` followed by `[offset, offset + bytes)` of
/// `file`, compared in bounded chunks.
fn same_bytes(
    fs: &dyn Fs,
    existing: &Path,
    header: &[u8],
    file: &dyn FsFile,
    path: &Path,
    offset: u64,
    bytes: u64,
) -> Result<bool> {
    let kept = fs.open(existing, OpenMode::Read).map_err(|e| Error::io("open", existing, e))?;
    if kept.len().map_err(|e| Error::io("stat", existing, e))? != KEPT_HEADER_BYTES as u64 + bytes {
        return Ok(false);
    }
    let mut head = [0u8; KEPT_HEADER_BYTES];
    kept.read_exact_at(&mut head, 0).map_err(|e| Error::io("read", existing, e))?;
    if head[..] != header[..] {
        return Ok(false);
    }
    let (mut ours, mut theirs) = (vec![0u8; ZERO_CHUNK_BYTES], vec![0u8; ZERO_CHUNK_BYTES]);
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(ZERO_CHUNK_BYTES as u64) as usize;
        file.read_exact_at(&mut ours[..n], offset + done)
            .map_err(|e| Error::io("read", path, e))?;
        kept.read_exact_at(&mut theirs[..n], KEPT_HEADER_BYTES as u64 + done)
            .map_err(|e| Error::io("read", existing, e))?;
        if ours[..n] != theirs[..n] {
            return Ok(false);
        }
        done += n as u64;
    }
    Ok(true)
}

fn encode_header(header: &SegmentHeader, offset: u64, bytes: u64) -> [u8; KEPT_HEADER_BYTES] {
    let mut out = [0u8; KEPT_HEADER_BYTES];
    out[0..8].copy_from_slice(&KEPT_MAGIC);
    out[8..10].copy_from_slice(&KEPT_VERSION.to_le_bytes());
    out[16..24].copy_from_slice(&offset.to_le_bytes());
    out[24..32].copy_from_slice(&bytes.to_le_bytes());
    out[PREFIX_BYTES..].copy_from_slice(&header.encode());
    let crc = crc32fast::hash(&out[16..]);
    out[12..16].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a kept tail (`format-spec/mark.md`, "Kept tails").
///
/// # Errors
/// [`crate::ErrorKind::Corruption`] with [`CorruptionReason::BadKeptTail`] for a file that is
/// not a whole kept tail; [`crate::ErrorKind::UnsupportedVersion`] for another version.
pub fn decode<'a>(bytes: &'a [u8], path: &Path) -> Result<KeptTail<'a>> {
    let bad = |what| Error::corruption(None, path, 0, CorruptionReason::BadKeptTail(what));
    let head = bytes.get(..KEPT_HEADER_BYTES).ok_or_else(|| bad("shorter than its header"))?;
    if head[0..8] != KEPT_MAGIC {
        return Err(bad("bad magic"));
    }
    let version = u16::from_le_bytes([head[8], head[9]]);
    if version != KEPT_VERSION {
        return Err(crate::ErrorKind::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: KEPT_VERSION,
        }
        .into());
    }
    let crc = u32::from_le_bytes(head[12..16].try_into().expect("four bytes"));
    if crc != crc32fast::hash(&head[16..]) || head[10..12] != [0, 0] {
        return Err(bad("header checksum"));
    }
    let offset = u64::from_le_bytes(head[16..24].try_into().expect("eight bytes"));
    let len = u64::from_le_bytes(head[24..32].try_into().expect("eight bytes"));
    // A copied header that does not read is this file's damage, whatever the segment's is.
    let header =
        segment::decode_header(&head[PREFIX_BYTES..], path).map_err(|e| match e.kind() {
            crate::ErrorKind::UnsupportedVersion { .. } => e,
            _ => bad("the copied segment header"),
        })?;
    let body = &bytes[KEPT_HEADER_BYTES..];
    if body.len() as u64 != len || offset < SEGMENT_HEADER_BYTES as u64 {
        return Err(bad("length"));
    }
    Ok(KeptTail { header, offset, bytes: body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{SegmentId, Seq};

    #[test]
    fn names_and_header_round_trip() {
        assert!(is_kept_name("00000000000000000001.seg.torn-00000000000000004096-1"));
        assert!(!is_kept_name("00000000000000000001.seg"));
        assert!(!is_kept_name("x.seg.torn-1"));
        let header =
            SegmentHeader { format_version: 2, id: SegmentId(1), first_seq: Seq(1), salt: 5 };
        let mut bytes = encode_header(&header, 4096, 3).to_vec();
        bytes.extend_from_slice(&[1, 2, 3]);
        let kept = decode(&bytes, Path::new("k")).unwrap();
        assert_eq!((kept.header, kept.offset, kept.bytes), (header, 4096, &[1u8, 2, 3][..]));
        bytes[20] ^= 1;
        assert!(decode(&bytes, Path::new("k")).unwrap_err().is_corruption());
    }
}
