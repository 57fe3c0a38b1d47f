//! A file system for the demo's persistence-cost summary: every call goes to [`RealFs`], and
//! the `fdatasync`s of files and the `fsync`s of directories are counted.
//! Counting adds one atomic increment per call and changes nothing that reaches the disk.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use factlog::fs::{DirLock, Fs, FsFile, OpenMode, RealFs};

/// What a [`CountingFs`] counted.
#[derive(Debug, Default)]
pub struct Counters {
    file_syncs: AtomicU64,
    dir_syncs: AtomicU64,
}

impl Counters {
    /// `fdatasync`s of files plus `fsync`s of directories.
    pub fn syncs(&self) -> u64 {
        self.file_syncs.load(Ordering::Acquire) + self.dir_syncs.load(Ordering::Acquire)
    }
}

/// [`RealFs`], counted.
#[derive(Debug)]
pub struct CountingFs {
    counters: Arc<Counters>,
}

impl CountingFs {
    /// A counting file system and the handle on its counters.
    pub fn new() -> (Arc<CountingFs>, Arc<Counters>) {
        let counters = Arc::new(Counters::default());
        (Arc::new(CountingFs { counters: Arc::clone(&counters) }), counters)
    }
}

impl Fs for CountingFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        RealFs.list_dir(path)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let inner = RealFs.open(path, mode)?;
        Ok(Box::new(CountingFile { inner, counters: Arc::clone(&self.counters) }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.counters.dir_syncs.fetch_add(1, Ordering::AcqRel);
        RealFs.sync_dir(path)
    }

    fn lock_dir(&self, dir: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        RealFs.lock_dir(dir)
    }

    fn map(&self, path: &Path) -> io::Result<Bytes> {
        RealFs.map(path)
    }

    fn random_u64(&self) -> u64 {
        RealFs.random_u64()
    }
}

#[derive(Debug)]
struct CountingFile {
    inner: Box<dyn FsFile>,
    counters: Arc<Counters>,
}

impl FsFile for CountingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.counters.file_syncs.fetch_add(1, Ordering::AcqRel);
        self.inner.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}
