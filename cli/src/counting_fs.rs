//! A file system that passes every call to [`RealFs`] and counts the writes, `fdatasync`s and
//! directory `fsync`s of the store's own threads: what `bench` and `demo` report as the cost a
//! run put on the disk. Counting changes nothing that reaches the disk.
//!
//! The background preallocator's zeros (thread `factlog-prealloc`) are not counted: they are
//! written ahead, off the append path, and the bench waits for them before it starts timing.
//! Syncs of the background flusher (thread `factlog-flusher`) are counted, and also apart.
//! Syncs of the log mark (`MARK`, `format-spec/mark.md`) are counted on their own, not among
//! the syncs of records.
//! For the floor, each sync records the bytes written since the previous one.
//!
//! The bytes of every file the library maps (segments and snapshots are read through `map`)
//! are counted too: the operator commands show them as the progress of a library scan.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use factlog::fs::{DirLock, Fs, FsFile, OpenMode, RealFs};
use parking_lot::Mutex;

/// The name of the log's background flusher thread (`src/log.rs`).
const FLUSHER_THREAD_NAME: &str = "factlog-flusher";

/// The name of the segment preallocator thread (`src/prealloc.rs`).
const PREALLOC_THREAD_NAME: &str = "factlog-prealloc";

/// Counters shared between a [`CountingFs`] and the bench.
#[derive(Debug, Default)]
pub struct Counters {
    syncs: AtomicU64,
    syncs_by_flusher: AtomicU64,
    mark_syncs: AtomicU64,
    dir_syncs: AtomicU64,
    write_bytes: AtomicU64,
    /// Bytes written since the last counted sync.
    pending_bytes: AtomicU64,
    /// Bytes written between consecutive syncs, one entry per sync.
    chunks: Mutex<Vec<u64>>,
    /// Bytes of the files mapped for reading.
    mapped_bytes: AtomicU64,
    /// Bytes of the file mapped last.
    last_mapped_bytes: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Every counted `fdatasync`.
    pub syncs: u64,
    /// Those issued by the background flusher.
    pub syncs_by_flusher: u64,
    /// `fdatasync`s of the log mark, not among `syncs`.
    pub mark_syncs: u64,
    /// `fsync`s of directories.
    pub dir_syncs: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

impl Counts {
    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: Counts) -> Counts {
        Counts {
            syncs: self.syncs - earlier.syncs,
            syncs_by_flusher: self.syncs_by_flusher - earlier.syncs_by_flusher,
            mark_syncs: self.mark_syncs - earlier.mark_syncs,
            dir_syncs: self.dir_syncs - earlier.dir_syncs,
            write_bytes: self.write_bytes - earlier.write_bytes,
        }
    }
}

impl Counters {
    /// The counts now.
    pub fn read(&self) -> Counts {
        Counts {
            syncs: self.syncs.load(Ordering::Acquire),
            syncs_by_flusher: self.syncs_by_flusher.load(Ordering::Acquire),
            mark_syncs: self.mark_syncs.load(Ordering::Acquire),
            dir_syncs: self.dir_syncs.load(Ordering::Acquire),
            write_bytes: self.write_bytes.load(Ordering::Acquire),
        }
    }

    /// Every counted `fdatasync` of a file and `fsync` of a directory so far.
    pub fn total_syncs(&self) -> u64 {
        let counts = self.read();
        counts.syncs + counts.dir_syncs
    }

    /// Forgets the recorded chunks (and bytes not yet synced).
    pub fn reset_chunks(&self) {
        self.chunks.lock().clear();
        self.pending_bytes.store(0, Ordering::Release);
    }

    /// The bytes written between consecutive syncs since the last reset.
    pub fn chunks(&self) -> Vec<u64> {
        self.chunks.lock().clone()
    }

    /// The bytes of the files mapped for reading before the last one: those a scan that
    /// maps one file after the other has gone through.
    pub fn mapped_bytes_done(&self) -> u64 {
        let last = self.last_mapped_bytes.load(Ordering::Acquire);
        self.mapped_bytes.load(Ordering::Acquire).saturating_sub(last)
    }
}

fn counted_thread() -> bool {
    std::thread::current().name() != Some(PREALLOC_THREAD_NAME)
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
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let mark = factlog::engine::mark::is_mark_file(name);
        Ok(Box::new(CountingFile { inner, counters: Arc::clone(&self.counters), mark }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_dir(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if counted_thread() {
            self.counters.dir_syncs.fetch_add(1, Ordering::AcqRel);
        }
        RealFs.sync_dir(path)
    }

    fn lock_dir(&self, dir: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        RealFs.lock_dir(dir)
    }

    fn map(&self, path: &Path) -> io::Result<Bytes> {
        let bytes = RealFs.map(path)?;
        self.counters.last_mapped_bytes.store(bytes.len() as u64, Ordering::Release);
        self.counters.mapped_bytes.fetch_add(bytes.len() as u64, Ordering::AcqRel);
        Ok(bytes)
    }

    fn random_u64(&self) -> u64 {
        RealFs.random_u64()
    }

    fn space(&self, path: &Path) -> io::Result<factlog::fs::Space> {
        RealFs.space(path)
    }
}

#[derive(Debug)]
struct CountingFile {
    inner: Box<dyn FsFile>,
    counters: Arc<Counters>,
    /// The log mark: its syncs are counted apart.
    mark: bool,
}

impl FsFile for CountingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if counted_thread() {
            let bytes = buf.len() as u64;
            self.counters.write_bytes.fetch_add(bytes, Ordering::AcqRel);
            self.counters.pending_bytes.fetch_add(bytes, Ordering::AcqRel);
        }
        self.inner.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        let outcome = self.inner.sync_data();
        let thread = std::thread::current();
        if self.mark {
            self.counters.mark_syncs.fetch_add(1, Ordering::AcqRel);
        } else if thread.name() != Some(PREALLOC_THREAD_NAME) {
            if thread.name() == Some(FLUSHER_THREAD_NAME) {
                self.counters.syncs_by_flusher.fetch_add(1, Ordering::AcqRel);
            }
            self.counters.syncs.fetch_add(1, Ordering::AcqRel);
            let chunk = self.counters.pending_bytes.swap(0, Ordering::AcqRel);
            self.counters.chunks.lock().push(chunk);
        }
        outcome
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}
