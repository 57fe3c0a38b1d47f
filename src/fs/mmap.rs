//! The memory map of segment files: the only `unsafe` code of the crate.

use std::fs::File;
use std::io;

use bytes::Bytes;

/// Maps `file` read-only and hands the map to a [`Bytes`] that unmaps it when the last slice
/// is dropped. An empty file gives empty bytes (a zero-length map is not allowed).
pub(super) fn map_read_only(file: &File) -> io::Result<Bytes> {
    if file.metadata()?.len() == 0 {
        return Ok(Bytes::new());
    }
    #[expect(unsafe_code, reason = "memmap2 cannot prove the file outlives changes to it")]
    // SAFETY: mapping a file is unsound in Rust's model only if the mapped bytes change or
    // vanish while borrowed. factlog never truncates a segment file and never rewrites bytes
    // a reader can reach: sealed segments are immutable, the active segment is only written
    // past the offset up to which readers are allowed to read, and the zeroing of a torn tail
    // happens at open, before any reader exists. A truncation by another program would raise
    // SIGBUS here; the directory is owner-only (0700) and locked by the writer to keep other
    // programs out, which is the same assumption every memory-mapping database makes.
    let map = unsafe { memmap2::Mmap::map(file)? };
    Ok(Bytes::from_owner(map))
}

/// Maps `[offset, offset + len)` of `file` read-only, clipped to the file's length (empty bytes
/// past its end), like [`map_read_only`].
pub(super) fn map_range_read_only(file: &File, offset: u64, len: u64) -> io::Result<Bytes> {
    let file_len = file.metadata()?.len();
    let len = len.min(file_len.saturating_sub(offset));
    if len == 0 {
        return Ok(Bytes::new());
    }
    let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    #[expect(unsafe_code, reason = "memmap2 cannot prove the file outlives changes to it")]
    // SAFETY: as for `map_read_only`: factlog never truncates a segment file and never
    // rewrites bytes a reader can reach, and the window lies within the file's length now.
    let map = unsafe { memmap2::MmapOptions::new().offset(offset).len(len).map(file)? };
    Ok(Bytes::from_owner(map))
}
