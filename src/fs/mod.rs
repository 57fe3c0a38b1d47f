//! The one I/O seam of the engine. Every file-system call the engine makes goes through [`Fs`]
//! and [`FsFile`], so tests can substitute a file system that loses unsynced writes, tears
//! sectors, fails `fsync` or runs out of space, without touching the engine.
//!
//! The contract mirrors POSIX as the engine relies on it: data written with
//! [`FsFile::write_all_at`] is durable only after [`FsFile::sync_data`]; a created, renamed or
//! removed name is durable only after [`Fs::sync_dir`] on its directory.

mod mmap;
mod real;
pub mod sim;

use std::fmt;
use std::io;
use std::path::Path;

use bytes::Bytes;

pub use real::RealFs;

/// How [`Fs::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// An existing file, for reading only.
    Read,
    /// An existing file, for reading and writing.
    ReadWrite,
    /// A new file for reading and writing, owner-only permissions; fails if it exists.
    CreateNew,
}

/// A file system, as the engine uses it.
pub trait Fs: Send + Sync + fmt::Debug + 'static {
    /// Creates `path` and its missing parents, owner-only (0700).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The names of the entries of directory `path`.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Opens a file.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>>;
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Gives the file `from` a second name `to` (`link(2)`), failing with
    /// [`io::ErrorKind::AlreadyExists`] if `to` exists: the atomic create-if-absent of a
    /// `file://` replica. The new name is durable only after [`Fs::sync_dir`] on its directory.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Whether `path` is a directory (following symbolic links); `Ok(false)` when nothing has
    /// that name.
    fn is_dir(&self, path: &Path) -> io::Result<bool>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory; fails if it holds anything.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of directory `path` durable (`fsync` on the directory).
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Takes the exclusive writer lock of directory `dir`, held until the returned guard is
    /// dropped. `Ok(None)` when another holder has it.
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<Box<dyn DirLock>>>;
    /// A read-only view of the whole file as it is now (a memory map on the real file system).
    fn map(&self, path: &Path) -> io::Result<Bytes>;
    /// A read-only view of `[offset, offset + len)` of the file as it is now, shorter if the
    /// file ends first (empty past its end). Readers map a bounded window at a time, so the
    /// pages they touch stop counting as their memory once they move on. The default slices
    /// [`Fs::map`]; the real file system maps only the window.
    fn map_range(&self, path: &Path, offset: u64, len: u64) -> io::Result<Bytes> {
        Ok(window_of(&self.map(path)?, offset, len))
    }
    /// A random number, for segment salts. A simulated file system makes it deterministic.
    fn random_u64(&self) -> u64;
    /// The space of the file system holding `path` (`statvfs` on the real file system): the
    /// preallocator asks before it reserves a segment, so that it never takes the last of it.
    fn space(&self, path: &Path) -> io::Result<Space>;
}

/// The size and free space of a file system, as [`Fs::space`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes an unprivileged process may still allocate (`f_bavail * f_frsize`).
    pub available_bytes: u64,
    /// Bytes of the whole file system (`f_blocks * f_frsize`).
    pub total_bytes: u64,
}

/// An open file.
#[expect(clippy::len_without_is_empty, reason = "a file length is an I/O result")]
pub trait FsFile: Send + Sync + fmt::Debug {
    /// Fills `buf` from `offset`; fails if the file ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes the data written so far durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// The current length of the file.
    fn len(&self) -> io::Result<u64>;
}

/// `[offset, offset + len)` of a whole file's `bytes`, clipped to them (empty past their end):
/// [`Fs::map_range`] of a file system that maps whole files.
#[must_use]
pub fn window_of(bytes: &Bytes, offset: u64, len: u64) -> Bytes {
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(bytes.len());
    let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX)).min(bytes.len());
    bytes.slice(start..end)
}

/// A held directory lock; dropping it releases the lock.
pub trait DirLock: Send + Sync + fmt::Debug {}

/// Removes `dir` and everything below it, as far as it can (best effort: what cannot be
/// removed stays). Only for a directory the caller created and owns alone: a staging or
/// target directory of its own that it gives up.
pub(crate) fn remove_tree(fs: &dyn Fs, dir: &Path) {
    for name in fs.list_dir(dir).unwrap_or_default() {
        let path = dir.join(name);
        if fs.list_dir(&path).is_ok() {
            remove_tree(fs, &path);
        } else {
            let _ = fs.remove_file(&path);
        }
    }
    let _ = fs.remove_dir(dir);
}

/// The name of the lock file of a log directory (`format-spec/segment.md`): a writer holds
/// an exclusive `flock` on it while the log is open.
pub const LOCK_FILE_NAME: &str = "LOCK";

/// The process holding the directory lock of the store in `dir`, when the system tells
/// (Linux: `/proc/locks` lists each `flock` with its process and the file's device and
/// inode); `None` when nobody holds it or it cannot be told. For error messages: a store
/// locked by a process that does not share it names that process.
#[must_use]
pub fn lock_holder(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir.join(LOCK_FILE_NAME)).ok()?;
    let dev = meta.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF`
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") {
            return None;
        }
        let pid = fields.get(4)?.parse().ok()?;
        let mut id = fields.get(5)?.split(':');
        let file_major = u64::from_str_radix(id.next()?, 16).ok()?;
        let file_minor = u64::from_str_radix(id.next()?, 16).ok()?;
        let inode: u64 = id.next()?.parse().ok()?;
        (file_major == major && file_minor == minor && inode == meta.ino()).then_some(pid)
    })
}
