//! A file system for tests that forwards to the real one and injects failures on command:
//! `fdatasync` failing with EIO or stalled until released, writes failing with ENOSPC, and
//! writes damaged on their way to disk (one bit flipped), the last two optionally only for files whose name contains a given
//! text. It exercises the engine's I/O seam; the full simulated
//! file system with crash images is a separate piece.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use factlog::fs::{DirLock, Fs, FsFile, OpenMode, RealFs};
use parking_lot::Mutex;

/// The failures to inject; shared between the test and the file system.
#[derive(Debug, Default)]
pub struct Faults {
    /// Fail every `sync_data` while set, of files whose name ends with `fail_sync_suffix`.
    pub fail_sync: AtomicBool,
    /// Empty: every file.
    pub fail_sync_suffix: Mutex<String>,
    /// `sync_data` calls failed by `fail_sync` so far.
    pub failed_syncs: AtomicU64,
    /// The names of the files of the `sync_data` calls that reached the real file system.
    pub synced_names: Mutex<Vec<String>>,
    /// Fail every write with ENOSPC while set, to files whose name contains `write_filter`.
    pub disk_full: AtomicBool,
    /// Flip one bit in the middle of every write while set, to files whose name contains
    /// `write_filter`; the write itself succeeds.
    pub damage_writes: AtomicBool,
    /// Writes damaged so far.
    pub damaged: AtomicU64,
    /// Empty: every file.
    pub write_filter: Mutex<String>,
    /// `sync_data` calls that reached the real file system.
    pub syncs: AtomicU64,
    /// While set, `sync_data` of files whose name ends with `hold_suffix` waits (a stalled
    /// disk) until it is cleared.
    pub hold_syncs: AtomicBool,
    /// The name ending whose syncs `hold_syncs` stalls.
    pub hold_suffix: Mutex<String>,
    /// `sync_data` calls waiting on `hold_syncs` now.
    pub held: AtomicU64,
    /// The name of the thread of every rename, with the name the file got.
    pub renames: Mutex<Vec<(String, Option<String>)>>,
}

/// The fault-injecting file system.
#[derive(Debug, Clone)]
pub struct FaultyFs {
    /// What to inject.
    pub faults: Arc<Faults>,
}

impl FaultyFs {
    /// A file system injecting nothing yet.
    pub fn new() -> FaultyFs {
        FaultyFs { faults: Arc::new(Faults::default()) }
    }
}

#[derive(Debug)]
struct FaultyFile {
    name: String,
    inner: Box<dyn FsFile>,
    faults: Arc<Faults>,
}

impl Fs for FaultyFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        RealFs.list_dir(path)
    }
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Box::new(FaultyFile {
            name,
            inner: RealFs.open(path, mode)?,
            faults: Arc::clone(&self.faults),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let thread = std::thread::current().name().map(str::to_owned);
        self.faults.renames.lock().push((to.display().to_string(), thread));
        RealFs.rename(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.hard_link(from, to)
    }
    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        RealFs.is_dir(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
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

    fn space(&self, path: &Path) -> io::Result<factlog::fs::Space> {
        RealFs.space(path)
    }
}

impl FsFile for FaultyFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let chosen = || self.name.contains(self.faults.write_filter.lock().as_str());
        if self.faults.disk_full.load(Ordering::SeqCst) && chosen() {
            return Err(io::Error::from_raw_os_error(28));
        }
        if self.faults.damage_writes.load(Ordering::SeqCst) && chosen() && !buf.is_empty() {
            let mut damaged = buf.to_vec();
            damaged[buf.len() / 2] ^= 0x10;
            self.faults.damaged.fetch_add(1, Ordering::SeqCst);
            return self.inner.write_all_at(&damaged, offset);
        }
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        let held = || {
            self.faults.hold_syncs.load(Ordering::SeqCst)
                && self.name.ends_with(self.faults.hold_suffix.lock().as_str())
        };
        if held() {
            self.faults.held.fetch_add(1, Ordering::SeqCst);
            while held() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            self.faults.held.fetch_sub(1, Ordering::SeqCst);
        }
        if self.faults.fail_sync.load(Ordering::SeqCst)
            && self.name.ends_with(self.faults.fail_sync_suffix.lock().as_str())
        {
            self.faults.failed_syncs.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(5));
        }
        self.faults.syncs.fetch_add(1, Ordering::SeqCst);
        self.faults.synced_names.lock().push(self.name.clone());
        self.inner.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}
