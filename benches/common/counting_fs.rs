//! A file system for benches that passes every call to [`RealFs`] and counts the writes and
//! syncs, by file kind and by the thread that made them, so a bench can report how many
//! `fdatasync`s a workload cost and who issued them. The counting adds one atomic increment
//! per call; it changes nothing that reaches the disk.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use factlog::fs::{DirLock, Fs, FsFile, OpenMode, RealFs};

/// The name of the log's background flusher thread (`src/log.rs`): syncs it issues are counted
/// apart from those of the appending threads.
const FLUSHER_THREAD_NAME: &str = "factlog-flusher";

/// Which file a write or sync went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    /// A log segment (`*.seg`).
    Segment,
    /// Anything else: the preallocation file, snapshot files, the lock file.
    Other,
}

/// Counters, shared between a [`CountingFs`] and the bench that reads them.
#[derive(Debug, Default)]
pub struct FsCounters {
    segment_syncs_by_appenders: AtomicU64,
    segment_syncs_by_flusher: AtomicU64,
    segment_writes: AtomicU64,
    segment_write_bytes: AtomicU64,
    other_syncs: AtomicU64,
    dir_syncs: AtomicU64,
}

/// A copy of the counters at one moment; subtract two to get what happened in between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsCounts {
    /// `fdatasync`s of segment files issued by appending threads (and by close).
    pub segment_syncs_by_appenders: u64,
    /// `fdatasync`s of segment files issued by the background flusher.
    pub segment_syncs_by_flusher: u64,
    /// `write` calls to segment files.
    pub segment_writes: u64,
    /// Bytes written to segment files.
    pub segment_write_bytes: u64,
    /// `fdatasync`s of other files (preallocation, snapshots).
    pub other_syncs: u64,
    /// `fsync`s of directories.
    pub dir_syncs: u64,
}

impl FsCounts {
    /// Every `fdatasync` of a segment file, whoever issued it.
    pub fn segment_syncs(&self) -> u64 {
        self.segment_syncs_by_appenders + self.segment_syncs_by_flusher
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &FsCounts) -> FsCounts {
        FsCounts {
            segment_syncs_by_appenders: self.segment_syncs_by_appenders
                - earlier.segment_syncs_by_appenders,
            segment_syncs_by_flusher: self.segment_syncs_by_flusher
                - earlier.segment_syncs_by_flusher,
            segment_writes: self.segment_writes - earlier.segment_writes,
            segment_write_bytes: self.segment_write_bytes - earlier.segment_write_bytes,
            other_syncs: self.other_syncs - earlier.other_syncs,
            dir_syncs: self.dir_syncs - earlier.dir_syncs,
        }
    }
}

impl FsCounters {
    /// The counts now.
    pub fn read(&self) -> FsCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Acquire);
        FsCounts {
            segment_syncs_by_appenders: get(&self.segment_syncs_by_appenders),
            segment_syncs_by_flusher: get(&self.segment_syncs_by_flusher),
            segment_writes: get(&self.segment_writes),
            segment_write_bytes: get(&self.segment_write_bytes),
            other_syncs: get(&self.other_syncs),
            dir_syncs: get(&self.dir_syncs),
        }
    }
}

/// [`RealFs`], counted.
#[derive(Debug, Default)]
pub struct CountingFs {
    counters: Arc<FsCounters>,
}

impl CountingFs {
    /// A counting file system and the handle on its counters.
    pub fn new() -> (Arc<CountingFs>, Arc<FsCounters>) {
        let counters = Arc::new(FsCounters::default());
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
        let kind = if path.extension().is_some_and(|e| e == "seg") {
            FileKind::Segment
        } else {
            FileKind::Other
        };
        Ok(Box::new(CountingFile { inner, kind, counters: Arc::clone(&self.counters) }))
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

    fn space(&self, path: &Path) -> io::Result<factlog::fs::Space> {
        RealFs.space(path)
    }
}

/// A file of a [`CountingFs`], classified by the name it was opened under.
///
/// The log appends to a rolled-in segment through the handle it opened as `prealloc.tmp`
/// (`src/segments.rs`, `install`), so after a roll its syncs count as [`FileKind::Other`]:
/// a bench that counts segment syncs must not roll (the first segment is reopened by its
/// name at open and is counted right).
#[derive(Debug)]
struct CountingFile {
    inner: Box<dyn FsFile>,
    kind: FileKind,
    counters: Arc<FsCounters>,
}

impl FsFile for CountingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.kind == FileKind::Segment {
            self.counters.segment_writes.fetch_add(1, Ordering::AcqRel);
            self.counters.segment_write_bytes.fetch_add(buf.len() as u64, Ordering::AcqRel);
        }
        self.inner.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        let counter = match self.kind {
            FileKind::Segment if std::thread::current().name() == Some(FLUSHER_THREAD_NAME) => {
                &self.counters.segment_syncs_by_flusher
            }
            FileKind::Segment => &self.counters.segment_syncs_by_appenders,
            FileKind::Other => &self.counters.other_syncs,
        };
        let outcome = self.inner.sync_data();
        counter.fetch_add(1, Ordering::AcqRel);
        outcome
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}
