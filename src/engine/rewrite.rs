//! Rewriting every segment of a log into another format version, and switching to the
//! rewritten segments atomically (`format-spec/migration.md`). The engine part of
//! `factlog migrate`: what a record becomes is the caller's business; this module keeps the
//! sequence numbers, the frame boundaries and the durable claims, and makes the switch all or
//! nothing.
//!
//! Invariants:
//! - A staged file (`NAME.seg.new`) is only ever renamed over `NAME.seg` after the marker
//!   `REWRITE` is durable, and the marker is only removed after every rename is durable. So a
//!   directory holds either only old segments (no marker: staged files are garbage) or a
//!   committed rewrite that [`finish`] completes before anything reads the log.
//! - Each old segment becomes exactly one staged segment with the same name, id and first
//!   sequence number.

use std::path::{Path, PathBuf};

use crate::engine::frame::{self, KIND_BATCH};
use crate::engine::segment::{self, SegmentHeader};
use crate::engine::segments::{self, SegmentMeta};
use crate::error::{CorruptionReason, Error, ErrorKind, Result};
use crate::fs::{Fs, OpenMode};
use crate::types::Seq;

/// Suffix of a staged segment: `NAME.seg` is rewritten into `NAME.seg.new`.
pub const STAGED_SUFFIX: &str = ".new";
/// Name of the commit marker of a rewrite.
pub const MARKER_FILE_NAME: &str = "REWRITE";
/// Name the marker is written under before its rename.
const MARKER_TMP_FILE_NAME: &str = "REWRITE.tmp";
/// Magic bytes of the marker.
const MARKER_MAGIC: [u8; 8] = *b"FACTLRWR";
/// The marker format version this build writes and reads.
const MARKER_VERSION: u16 = 1;
/// Bytes of the marker.
const MARKER_BYTES: usize = 32;
/// Staged segments are sized in multiples of this.
const CAPACITY_ALIGN: u64 = 4096;

/// The commit record of a rewrite: what it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// The format version of the old segments.
    pub from: u16,
    /// The format version of the staged ones.
    pub to: u16,
    /// How many segments the rewrite replaces.
    pub segments: u32,
}

impl Marker {
    fn encode(&self) -> [u8; MARKER_BYTES] {
        let mut out = [0u8; MARKER_BYTES];
        out[0..8].copy_from_slice(&MARKER_MAGIC);
        out[8..10].copy_from_slice(&MARKER_VERSION.to_le_bytes());
        out[10..12].copy_from_slice(&self.from.to_le_bytes());
        out[12..14].copy_from_slice(&self.to.to_le_bytes());
        out[16..20].copy_from_slice(&self.segments.to_le_bytes());
        let crc = crc32fast::hash(&out[..28]);
        out[28..32].copy_from_slice(&crc.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8], path: &Path) -> Result<Marker> {
        let bad = |what| Error::corruption(None, path, 0, CorruptionReason::BadRewriteMarker(what));
        let Some(b) = bytes.first_chunk::<MARKER_BYTES>() else { return Err(bad("length")) };
        if bytes.len() != MARKER_BYTES || b[0..8] != MARKER_MAGIC {
            return Err(bad("magic or length"));
        }
        let u16_at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        let version = u16_at(8);
        if version != MARKER_VERSION {
            return Err(ErrorKind::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: MARKER_VERSION,
            }
            .into());
        }
        let crc = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
        if crc32fast::hash(&b[..28]) != crc {
            return Err(bad("checksum"));
        }
        if b[14..16] != [0, 0] || b[20..28].iter().any(|&x| x != 0) {
            return Err(bad("reserved"));
        }
        Ok(Marker {
            from: u16_at(10),
            to: u16_at(12),
            segments: u32::from_le_bytes([b[16], b[17], b[18], b[19]]),
        })
    }
}

/// The staged file of the segment at `path`.
#[must_use]
pub fn staged_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(STAGED_SUFFIX);
    PathBuf::from(name)
}

fn is_staged(name: &str) -> bool {
    name.strip_suffix(STAGED_SUFFIX).is_some_and(|seg| segment::parse_file_name(seg).is_some())
}

/// The committed rewrite of `dir`, if its marker exists.
pub fn pending(fs: &dyn Fs, dir: &Path) -> Result<Option<Marker>> {
    let path = dir.join(MARKER_FILE_NAME);
    let names = match fs.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("list directory", dir, e)),
    };
    if !names.iter().any(|n| n == MARKER_FILE_NAME) {
        return Ok(None);
    }
    let file = fs.open(&path, OpenMode::Read).map_err(|e| Error::io("open", &path, e))?;
    let len = file.len().map_err(|e| Error::io("stat", &path, e))?;
    let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX).min(MARKER_BYTES + 1)];
    file.read_exact_at(&mut bytes, 0).map_err(|e| Error::io("read", &path, e))?;
    Marker::decode(&bytes, &path).map(Some)
}

/// Removes the staged files and marker temp file of a rewrite that was never committed.
/// Call only with the directory's lock held and no marker present. Returns the files removed.
pub fn clear_staged(fs: &dyn Fs, dir: &Path) -> Result<usize> {
    let names = fs.list_dir(dir).map_err(|e| Error::io("list directory", dir, e))?;
    let mut removed = 0;
    for name in names.iter().filter(|n| is_staged(n) || *n == MARKER_TMP_FILE_NAME) {
        let path = dir.join(name);
        fs.remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        removed += 1;
    }
    if removed > 0 {
        fs.sync_dir(dir).map_err(|e| Error::io("fsync directory", dir, e))?;
    }
    Ok(removed)
}

/// What a rewrite does to one record: `Ok(None)` keeps its bytes, `Ok(Some(new))` replaces
/// them, an error stops the rewrite.
pub type MapRecord<'m> = dyn FnMut(Seq, &[u8]) -> Result<Option<Vec<u8>>> + 'm;

/// What one staged segment holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The staged file.
    pub path: PathBuf,
    /// Records in it.
    pub records: u64,
    /// Records the caller replaced.
    pub rewritten: u64,
    /// The file's length.
    pub bytes: u64,
}

/// Writes `meta`'s segment, read from `bytes` (the whole file), into its staged file at format
/// `to`: every frame again with the same sequence numbers, kind and durable claim, each record
/// as `map` returns it (`None` keeps its bytes). `append`, if not empty, is written after the
/// last frame as one batch frame whose durable claim covers every record before it. The file is
/// synced; the directory is not (see [`commit`]).
///
/// # Errors
/// What `map` returns; [`ErrorKind::LimitExceeded`] if a record grows past the frame limit;
/// I/O errors of the write.
pub fn stage_segment(
    fs: &dyn Fs,
    meta: &SegmentMeta,
    bytes: &[u8],
    to: u16,
    map: &mut MapRecord<'_>,
    append: &[Vec<u8>],
) -> Result<Staged> {
    let header = SegmentHeader { format_version: to, salt: fs.random_u64(), ..meta.header };
    let salt_crc = header.salt_crc();
    let mut out = header.encode().to_vec();
    let mut failure = None;
    let mut records = 0;
    let mut rewritten = 0;
    let scan = segment::scan(bytes, &meta.header, None, |_, f| {
        if failure.is_some() {
            return;
        }
        let mut payloads: Vec<std::borrow::Cow<'_, [u8]>> = Vec::with_capacity(f.count.into());
        for (i, record) in f.records().enumerate() {
            match map(Seq(f.seq + i as u64), record) {
                Ok(Some(new)) => {
                    rewritten += 1;
                    payloads.push(new.into());
                }
                Ok(None) => payloads.push(record.into()),
                Err(e) => {
                    failure = Some(e);
                    return;
                }
            }
        }
        records += payloads.len() as u64;
        let durable = f.durable_claim.unwrap_or(0);
        if f.kind == KIND_BATCH {
            frame::encode_batch(&mut out, salt_crc, f.seq, durable, &payloads);
        } else {
            frame::encode_single(&mut out, salt_crc, f.seq, durable, &payloads[0]);
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    if !matches!(scan.end, segment::ScanEnd::Clean) {
        // The caller opened the log for writing first, so its tail was cut: anything else is
        // damage that the rewrite must not paper over.
        return Err(Error::corruption(
            Some(meta.header.id),
            &meta.path,
            scan.end_offset as u64,
            CorruptionReason::MissingRecords { expected: scan.next_seq.0 },
        ));
    }
    if !append.is_empty() {
        let seq = scan.next_seq.0;
        frame::encode_batch(&mut out, salt_crc, seq, seq - 1, append);
        records += append.len() as u64;
    }
    let capacity =
        (bytes.len() as u64).max((out.len() as u64).div_ceil(CAPACITY_ALIGN) * CAPACITY_ALIGN);
    let path = staged_path(&meta.path);
    let file = fs.open(&path, OpenMode::CreateNew).map_err(|e| Error::io("create", &path, e))?;
    file.write_all_at(&out, 0).map_err(|e| Error::io("write", &path, e))?;
    segments::write_zeros(&*file, &path, out.len() as u64, capacity - out.len() as u64)?;
    file.sync_data().map_err(|e| Error::io("fdatasync", &path, e))?;
    Ok(Staged { path, records, rewritten, bytes: capacity })
}

/// Reads the staged segments of `dir` back, in order, checking every header and frame, and
/// calls `each` for every record. The check before the switch reads what is on disk, not
/// what was meant to be written.
///
/// # Errors
/// [`ErrorKind::Corruption`] for a staged file that does not read back whole and in sequence.
pub fn read_staged(
    fs: &dyn Fs,
    dir: &Path,
    to: u16,
    each: &mut dyn FnMut(Seq, &[u8]) -> Result<()>,
) -> Result<u64> {
    let mut names: Vec<String> = fs
        .list_dir(dir)
        .map_err(|e| Error::io("list directory", dir, e))?
        .into_iter()
        .filter(|n| is_staged(n))
        .collect();
    names.sort();
    let gaps = crate::engine::gaps::read(fs, dir)?;
    let mut next: Option<u64> = None;
    let mut records = 0;
    for name in names {
        let path = dir.join(&name);
        let bytes = fs.map(&path).map_err(|e| Error::io("map", &path, e))?;
        let header = segment::decode_header(&bytes, &path)?;
        let found = header.first_seq.0;
        if header.format_version != to
            || next.is_some_and(|n| n != found && !gaps.declares(n, found))
        {
            return Err(Error::corruption(
                Some(header.id),
                &path,
                0,
                CorruptionReason::SequenceGap {
                    expected: next.unwrap_or(header.first_seq.0),
                    found: header.first_seq.0,
                },
            ));
        }
        let mut failure = None;
        let scan = segment::scan(&bytes, &header, None, |_, f| {
            for (i, record) in f.records().enumerate() {
                if failure.is_none()
                    && let Err(e) = each(Seq(f.seq + i as u64), record)
                {
                    failure = Some(e);
                }
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        if !matches!(scan.end, segment::ScanEnd::Clean) {
            return Err(Error::corruption(
                Some(header.id),
                &path,
                scan.end_offset as u64,
                CorruptionReason::MissingRecords { expected: scan.next_seq.0 },
            ));
        }
        records += scan.records;
        next = Some(scan.next_seq.0);
    }
    Ok(records)
}

/// Commits the rewrite staged in `dir`: syncs the directory (the staged names), then writes
/// the marker (temp file, fdatasync, rename, directory fsync). From the moment the marker is
/// durable the rewrite is done in effect: [`finish`] completes it, now or at the next open.
///
/// # Errors
/// I/O errors; nothing is switched if it fails.
pub fn commit(fs: &dyn Fs, dir: &Path, marker: Marker) -> Result<()> {
    fs.sync_dir(dir).map_err(|e| Error::io("fsync directory", dir, e))?;
    let tmp = dir.join(MARKER_TMP_FILE_NAME);
    let file = fs.open(&tmp, OpenMode::CreateNew).map_err(|e| Error::io("create", &tmp, e))?;
    file.write_all_at(&marker.encode(), 0).map_err(|e| Error::io("write", &tmp, e))?;
    file.sync_data().map_err(|e| Error::io("fdatasync", &tmp, e))?;
    let path = dir.join(MARKER_FILE_NAME);
    fs.rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io("fsync directory", dir, e))
}

/// Completes a committed rewrite of `dir`, if there is one: renames every staged segment over
/// its old one, syncs the directory, removes the marker and syncs again. Idempotent: after a
/// crash at any point it is run again and ends in the same place. Call only with the
/// directory's lock held. Returns the marker of the rewrite it completed.
///
/// # Errors
/// I/O errors (the marker stays, so the next open tries again); corruption of the marker.
pub fn finish(fs: &dyn Fs, dir: &Path) -> Result<Option<Marker>> {
    let Some(marker) = pending(fs, dir)? else { return Ok(None) };
    let names = fs.list_dir(dir).map_err(|e| Error::io("list directory", dir, e))?;
    let mut staged: Vec<&String> = names.iter().filter(|n| is_staged(n)).collect();
    staged.sort();
    for name in staged {
        let from = dir.join(name);
        let to = dir.join(name.strip_suffix(STAGED_SUFFIX).unwrap_or(name));
        fs.rename(&from, &to).map_err(|e| Error::io("rename", &to, e))?;
    }
    fs.sync_dir(dir).map_err(|e| Error::io("fsync directory", dir, e))?;
    // The log mark names the old files (their salts): the rewritten log, whole and synced,
    // gets a clean one (or none, if it does not end cleanly: the next write gives it one). A
    // writer still holding the old mark open writes only to the replaced file.
    match crate::engine::mark::write_clean(fs, dir) {
        Err(e) if e.is_corruption() => crate::engine::mark::remove(fs, dir)?,
        outcome => outcome?,
    }
    let path = dir.join(MARKER_FILE_NAME);
    fs.remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io("fsync directory", dir, e))?;
    Ok(Some(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trips_and_refuses_damage() {
        let m = Marker { from: 1, to: 2, segments: 7 };
        let bytes = m.encode();
        let p = Path::new("REWRITE");
        assert_eq!(Marker::decode(&bytes, p).unwrap(), m);
        let mut bad = bytes;
        bad[16] ^= 1;
        assert!(Marker::decode(&bad, p).unwrap_err().is_corruption());
        let mut newer = bytes;
        newer[8] = 2;
        assert!(matches!(
            Marker::decode(&newer, p).unwrap_err().into_kind(),
            ErrorKind::UnsupportedVersion { found: 2, supported: 1, .. }
        ));
        assert!(Marker::decode(&bytes[..31], p).is_err());
    }

    #[test]
    fn staged_names_are_segment_names_with_the_suffix() {
        assert!(is_staged("00000000000000000001.seg.new"));
        assert!(!is_staged("00000000000000000001.seg"));
        assert!(!is_staged("x.seg.new"));
        assert_eq!(staged_path(Path::new("/d/1.seg")), Path::new("/d/1.seg.new"));
    }
}
