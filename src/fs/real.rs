//! The real file system: `std::fs` with owner-only permissions, `flock` for the directory lock
//! and read-only memory maps.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::Path;

use bytes::Bytes;

use super::{DirLock, Fs, FsFile, OpenMode, Space};
use crate::limits::{LOCK_RETRIES, LOCK_RETRY_MS};

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

const FILE_MODE: u32 = 0o600;
const DIR_MODE: u32 = 0o700;

impl Fs for RealFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true).mode(FILE_MODE),
        };
        Ok(Box::new(RealFile(options.open(path)?)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        match fs::metadata(path) {
            Ok(meta) => Ok(meta.is_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn lock_dir(&self, dir: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .open(dir.join(super::LOCK_FILE_NAME))?;
        // A lock released a moment ago can still be held by a child process forked in that
        // moment (its copy of the descriptor holds the flock until it execs and closes it), so
        // a busy lock is tried again a few times before the store is reported locked.
        for attempt in 0..=LOCK_RETRIES {
            match file.try_lock() {
                Ok(()) => return Ok(Some(Box::new(RealLock(file)))),
                Err(fs::TryLockError::WouldBlock) if attempt < LOCK_RETRIES => {
                    std::thread::sleep(std::time::Duration::from_millis(LOCK_RETRY_MS));
                }
                Err(fs::TryLockError::WouldBlock) => return Ok(None),
                Err(fs::TryLockError::Error(e)) => return Err(e),
            }
        }
        Ok(None)
    }

    fn map(&self, path: &Path) -> io::Result<Bytes> {
        super::mmap::map_read_only(&File::open(path)?)
    }

    fn map_range(&self, path: &Path, offset: u64, len: u64) -> io::Result<Bytes> {
        super::mmap::map_range_read_only(&File::open(path)?, offset, len)
    }

    fn random_u64(&self) -> u64 {
        use std::hash::{BuildHasher, Hasher};
        // The standard library seeds each RandomState from the operating system's entropy.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        hasher.write_u128(now.map_or(0, |d| d.as_nanos()));
        hasher.finish()
    }

    fn space(&self, path: &Path) -> io::Result<Space> {
        let stat = rustix::fs::statvfs(path)?;
        Ok(Space {
            available_bytes: stat.f_bavail.saturating_mul(stat.f_frsize),
            total_bytes: stat.f_blocks.saturating_mul(stat.f_frsize),
        })
    }
}

#[derive(Debug)]
struct RealFile(File);

impl FsFile for RealFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

#[derive(Debug)]
struct RealLock(#[expect(dead_code, reason = "held for its flock, never read")] File);

impl DirLock for RealLock {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_and_dirs_are_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        RealFs.create_dir_all(&dir).unwrap();
        let file = dir.join("a");
        RealFs.open(&file, OpenMode::CreateNew).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&file), 0o600);
    }

    #[test]
    fn second_lock_is_refused_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let first = RealFs.lock_dir(tmp.path()).unwrap();
        assert!(first.is_some());
        assert!(RealFs.lock_dir(tmp.path()).unwrap().is_none());
        drop(first);
        assert!(RealFs.lock_dir(tmp.path()).unwrap().is_some());
    }

    #[test]
    fn map_sees_written_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        let file = RealFs.open(&path, OpenMode::CreateNew).unwrap();
        file.write_all_at(b"hello", 3).unwrap();
        assert_eq!(&RealFs.map(&path).unwrap()[..], b"\0\0\0hello");
        assert!(RealFs.random_u64() != RealFs.random_u64());
    }

    #[test]
    fn space_reports_a_file_system_with_room() {
        let tmp = tempfile::tempdir().unwrap();
        let space = RealFs.space(tmp.path()).unwrap();
        assert!(space.total_bytes > 0);
        assert!(space.available_bytes <= space.total_bytes);
        assert!(RealFs.space(&tmp.path().join("missing")).is_err());
    }
}
