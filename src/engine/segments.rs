//! The set of segments in a log directory: listing and checking their headers at open,
//! preallocating the next file, and creating a segment from it (`format-spec/segment.md`,
//! "Preallocation and roll").
//!
//! Invariant: the segments returned by [`list`] have consecutive ids and strictly increasing
//! first sequence numbers, and each file's name matches its header.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::seeks::Seeks;
use crate::engine::segment::{self, SegmentHeader};
use crate::error::{CorruptionReason, Error, ErrorKind, Result};
use crate::fs::{Fs, FsFile, OpenMode};
use crate::limits::{SEGMENT_HEADER_BYTES, ZERO_CHUNK_BYTES};
use crate::types::{SegmentId, Seq};

/// Name of the file that holds the next segment while it is being preallocated.
pub const PREALLOC_FILE_NAME: &str = "prealloc.tmp";
pub use crate::fs::LOCK_FILE_NAME;

/// A segment known to the log: its header and where it lives.
#[derive(Debug, Clone)]
pub struct SegmentMeta {
    /// The decoded header.
    pub header: SegmentHeader,
    /// The file.
    pub path: PathBuf,
    /// Frame starts recorded by readers, shared by every copy of this meta
    /// (`engine::seeks`).
    pub(crate) seeks: Arc<Seeks>,
}

impl SegmentMeta {
    /// The meta of the segment at `path` with `header`, no frame start recorded yet.
    #[must_use]
    pub fn new(header: SegmentHeader, path: PathBuf) -> SegmentMeta {
        SegmentMeta { header, path, seeks: Arc::default() }
    }
}

/// Two metas are equal when they name the same segment (their recorded starts are a cache).
impl PartialEq for SegmentMeta {
    fn eq(&self, other: &SegmentMeta) -> bool {
        self.header == other.header && self.path == other.path
    }
}

impl Eq for SegmentMeta {}

/// What a directory holds.
#[derive(Debug)]
pub struct Listing {
    /// The segments in log order.
    pub segments: Vec<SegmentMeta>,
    /// Whether the directory holds files that are not part of a log.
    pub foreign_files: bool,
}

/// Lists the segments of `dir` and checks their headers and order; reads one header per
/// segment and nothing else.
pub fn list(fs: &dyn Fs, dir: &Path) -> Result<Listing> {
    match list_inner(fs, dir, false)? {
        (listing, None) => Ok(listing),
        (_, Some(damage)) => Err(damage),
    }
}

/// Like [`list`], but a segment whose name, header or place in the order is corrupt ends the
/// listing before it instead of failing: the segments before it and the corruption are
/// returned. Other errors (I/O, an unsupported version) still fail.
pub fn list_to_damage(fs: &dyn Fs, dir: &Path) -> Result<(Listing, Option<Error>)> {
    list_inner(fs, dir, true)
}

fn list_inner(fs: &dyn Fs, dir: &Path, stop_at_damage: bool) -> Result<(Listing, Option<Error>)> {
    let mut segments: Vec<SegmentMeta> = Vec::new();
    let mut foreign_files = false;
    let damage = match list_into(fs, dir, &mut segments, &mut foreign_files) {
        Ok(()) => None,
        Err(e) if stop_at_damage && matches!(e.kind(), ErrorKind::Corruption { .. }) => Some(e),
        Err(e) => return Err(e),
    };
    Ok((Listing { segments, foreign_files }, damage))
}

fn list_into(
    fs: &dyn Fs,
    dir: &Path,
    segments: &mut Vec<SegmentMeta>,
    foreign: &mut bool,
) -> Result<()> {
    let mut names = fs.list_dir(dir).map_err(|e| Error::io("list directory", dir, e))?;
    names.sort();
    let mut named: Vec<(Seq, String)> = Vec::with_capacity(names.len());
    let mut foreign_files = false;
    for name in names {
        if let Some(seq) = segment::parse_file_name(&name) {
            named.push((seq, name));
        } else if name.ends_with(segment::SEGMENT_SUFFIX) {
            // A renamed segment must not be skipped: it may hold acknowledged records.
            let path = dir.join(&name);
            return Err(Error::corruption(None, &path, 0, CorruptionReason::NameMismatch));
        } else if name != PREALLOC_FILE_NAME
            && name != LOCK_FILE_NAME
            && !crate::engine::mark::is_mark_file(&name)
            && !crate::engine::torn::is_kept_name(&name)
        {
            foreign_files = true;
        }
    }
    *foreign = foreign_files;
    named.sort();
    for (seq, name) in named {
        let path = dir.join(name);
        let header = match read_header(fs, &path) {
            // Reclaimed since the listing (oldest first) by a writer this reader runs beside.
            Err(e) if e.is_not_found() && segments.is_empty() => continue,
            outcome => outcome?,
        };
        if header.first_seq != seq {
            return Err(Error::corruption(
                Some(header.id),
                &path,
                24,
                CorruptionReason::NameMismatch,
            ));
        }
        if let Some(prev) = segments.last() {
            let in_order =
                header.id.0 == prev.header.id.0 + 1 && header.first_seq > prev.header.first_seq;
            if !in_order {
                return Err(Error::corruption(
                    Some(header.id),
                    &path,
                    16,
                    CorruptionReason::SegmentOrder,
                ));
            }
            if header.format_version != prev.header.format_version {
                return Err(Error::corruption(
                    Some(header.id),
                    &path,
                    8,
                    CorruptionReason::MixedFormatVersions {
                        expected: prev.header.format_version,
                        found: header.format_version,
                    },
                ));
            }
        }
        segments.push(SegmentMeta::new(header, path));
    }
    Ok(())
}

/// Reads and checks the header of the segment file at `path`.
pub fn read_header(fs: &dyn Fs, path: &Path) -> Result<SegmentHeader> {
    let file = fs.open(path, OpenMode::Read).map_err(|e| Error::io("open", path, e))?;
    let len = file.len().map_err(|e| Error::io("stat", path, e))?;
    let mut bytes = [0u8; SEGMENT_HEADER_BYTES];
    let have = usize::try_from(len).unwrap_or(usize::MAX).min(SEGMENT_HEADER_BYTES);
    file.read_exact_at(&mut bytes[..have], 0).map_err(|e| Error::io("read", path, e))?;
    segment::decode_header(&bytes[..have], path)
}

/// Creates `path` as a new file of `bytes` real zeros and syncs it, so that later writes into
/// it and their `fdatasync` need no change of file size or block allocation.
pub fn preallocate(fs: &dyn Fs, path: &Path, bytes: u64) -> Result<()> {
    let file = fs.open(path, OpenMode::CreateNew).map_err(|e| Error::io("create", path, e))?;
    write_zeros(&*file, path, 0, bytes)?;
    file.sync_data().map_err(|e| Error::io("fdatasync", path, e))
}

/// One chunk of zeros, shared by every zeroing write: no allocation, and its pages are never
/// written, so they cost no resident memory.
static ZEROS: [u8; ZERO_CHUNK_BYTES] = [0; ZERO_CHUNK_BYTES];

/// Writes zeros over `[from, from + bytes)` of `file`, in bounded chunks.
pub fn write_zeros(file: &dyn FsFile, path: &Path, from: u64, bytes: u64) -> Result<()> {
    let zeros = &ZEROS;
    let mut at = from;
    let end = from + bytes;
    while at < end {
        let n = (end - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at).map_err(|e| Error::io("write zeros", path, e))?;
        at += n as u64;
    }
    Ok(())
}

/// Turns the preallocated file at `prealloc` into segment `id` starting at `first_seq`:
/// header written and synced, renamed to its segment name, directory synced. Returns the open
/// file and its metadata.
pub fn install(
    fs: &dyn Fs,
    dir: &Path,
    prealloc: &Path,
    id: SegmentId,
    first_seq: Seq,
    format_version: u16,
) -> Result<(Box<dyn FsFile>, SegmentMeta)> {
    let header = SegmentHeader { format_version, id, first_seq, salt: fs.random_u64() };
    let file =
        fs.open(prealloc, OpenMode::ReadWrite).map_err(|e| Error::io("open", prealloc, e))?;
    file.write_all_at(&header.encode(), 0).map_err(|e| Error::io("write header", prealloc, e))?;
    file.sync_data().map_err(|e| Error::io("fdatasync", prealloc, e))?;
    let path = dir.join(segment::file_name(first_seq));
    fs.rename(prealloc, &path).map_err(|e| Error::io("rename", &path, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io("fsync directory", dir, e))?;
    Ok((file, SegmentMeta::new(header, path)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    #[test]
    fn install_then_list() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let pre = dir.join(PREALLOC_FILE_NAME);
        preallocate(&RealFs, &pre, 8192).unwrap();
        let (_file, one) = install(&RealFs, dir, &pre, SegmentId(1), Seq(1), 2).unwrap();
        preallocate(&RealFs, &pre, 8192).unwrap();
        let (_file, two) = install(&RealFs, dir, &pre, SegmentId(2), Seq(40), 2).unwrap();
        let listing = list(&RealFs, dir).unwrap();
        assert_eq!(listing.segments, vec![one, two]);
        assert_eq!(std::fs::metadata(&listing.segments[1].path).unwrap().len(), 8192);
    }

    #[test]
    fn out_of_order_ids_are_corruption() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let pre = dir.join(PREALLOC_FILE_NAME);
        preallocate(&RealFs, &pre, 8192).unwrap();
        install(&RealFs, dir, &pre, SegmentId(1), Seq(1), 2).unwrap();
        preallocate(&RealFs, &pre, 8192).unwrap();
        install(&RealFs, dir, &pre, SegmentId(3), Seq(5), 2).unwrap();
        let err = list(&RealFs, dir).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }
}
