//! [`CountingFs`]: a file system that passes every call to another one (the real file system
//! by default) and counts what the engine asked of the disk: `fdatasync`s, writes and their
//! bytes by the kind of file and by the thread that issued them, directory `fsync`s, the bytes
//! written between consecutive syncs, and the bytes of files mapped for reading. It is how
//! `factlog bench` and `factlog demo` report the cost of persistence, how the benches count
//! syncs per critical event, and how the long scans of the command show their progress.
//! Counting changes nothing that reaches the disk; each counted call adds a few atomic
//! increments.
//!
//! Files are classified by the name they were opened under: a segment (`*.seg`), the log mark
//! (`MARK`, `MARK.tmp`: `format-spec/mark.md`) or anything else (the preallocated next
//! segment, snapshots, the gap file). The log appends to a rolled-in segment through the
//! handle it opened as the preallocated file, so after a roll its syncs count as
//! [`FileKind::Other`]. Threads are classified by name: the log's background flusher
//! ([`FLUSHER_THREAD_NAME`]), the segment preallocator ([`PREALLOC_THREAD_NAME`]), and every
//! other thread, the appenders (and `close`).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::engine::mark;
use crate::fs::{DirLock, Fs, FsFile, OpenMode, RealFs, Space};

/// The name of the log's background flusher thread.
pub const FLUSHER_THREAD_NAME: &str = "factlog-flusher";

/// The name of the segment preallocator thread.
pub const PREALLOC_THREAD_NAME: &str = "factlog-prealloc";

/// The kind of file a write or sync went to, by the name it was opened under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A log segment (`*.seg`).
    Segment = 0,
    /// The log mark (`MARK`, `MARK.tmp`).
    Mark = 1,
    /// Anything else: the preallocated next segment, snapshots, the gap file.
    Other = 2,
}

/// The thread that issued a write or a sync, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issuer {
    /// Any thread but the two below: the appenders, and whoever closes the log.
    Appender = 0,
    /// The log's background flusher ([`FLUSHER_THREAD_NAME`]).
    Flusher = 1,
    /// The segment preallocator ([`PREALLOC_THREAD_NAME`]), writing space ahead of the log.
    Preallocator = 2,
}

impl Issuer {
    fn current() -> Issuer {
        match std::thread::current().name() {
            Some(FLUSHER_THREAD_NAME) => Issuer::Flusher,
            Some(PREALLOC_THREAD_NAME) => Issuer::Preallocator,
            _ => Issuer::Appender,
        }
    }
}

const KINDS: usize = 3;
const ISSUERS: usize = 3;

/// The counters of one [`CountingFs`], shared with whoever reads them.
#[derive(Debug, Default)]
pub struct FsCounters {
    syncs: [[AtomicU64; ISSUERS]; KINDS],
    writes: [[AtomicU64; ISSUERS]; KINDS],
    write_bytes: [[AtomicU64; ISSUERS]; KINDS],
    dir_syncs: [AtomicU64; ISSUERS],
    /// Bytes written by appenders and the flusher since their last sync of a file that is
    /// not the mark.
    pending_bytes: AtomicU64,
    /// Bytes written between consecutive such syncs, one entry per sync, while recording.
    chunks: Mutex<Vec<u64>>,
    /// Bytes of the files mapped for reading.
    mapped_bytes: AtomicU64,
    /// Bytes of the file mapped last.
    last_mapped_bytes: AtomicU64,
    /// Windows mapped by readers ([`Fs::map_range`]).
    window_maps: AtomicU64,
}

/// A copy of the counters at one moment; [`FsCounts::since`] gives what happened between two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsCounts {
    syncs: [[u64; ISSUERS]; KINDS],
    writes: [[u64; ISSUERS]; KINDS],
    write_bytes: [[u64; ISSUERS]; KINDS],
    dir_syncs: [u64; ISSUERS],
}

impl FsCounts {
    /// `fdatasync`s of files of `kind` issued by `issuer`.
    #[must_use]
    pub fn syncs(&self, kind: FileKind, issuer: Issuer) -> u64 {
        self.syncs[kind as usize][issuer as usize]
    }

    /// `write` calls to files of `kind` by `issuer`.
    #[must_use]
    pub fn writes(&self, kind: FileKind, issuer: Issuer) -> u64 {
        self.writes[kind as usize][issuer as usize]
    }

    /// Bytes written to files of `kind` by `issuer`.
    #[must_use]
    pub fn write_bytes(&self, kind: FileKind, issuer: Issuer) -> u64 {
        self.write_bytes[kind as usize][issuer as usize]
    }

    /// `fsync`s of directories by `issuer`.
    #[must_use]
    pub fn dir_syncs(&self, issuer: Issuer) -> u64 {
        self.dir_syncs[issuer as usize]
    }

    /// Every `fdatasync` of a segment file, whoever issued it.
    #[must_use]
    pub fn segment_syncs(&self) -> u64 {
        self.syncs[FileKind::Segment as usize].iter().sum()
    }

    /// Every `fdatasync` of a file that is not a segment (the mark included), whoever issued
    /// it.
    #[must_use]
    pub fn other_syncs(&self) -> u64 {
        self.syncs[FileKind::Mark as usize].iter().sum::<u64>()
            + self.syncs[FileKind::Other as usize].iter().sum::<u64>()
    }

    /// The `fdatasync`s the log's records cost: of every file but the mark, by the appenders
    /// and the flusher (the preallocator's syncs are space prepared ahead, off the path).
    #[must_use]
    pub fn record_syncs(&self) -> u64 {
        [FileKind::Segment, FileKind::Other]
            .iter()
            .flat_map(|&kind| [Issuer::Appender, Issuer::Flusher].map(|i| self.syncs(kind, i)))
            .sum()
    }

    /// Those of [`FsCounts::record_syncs`] the background flusher issued.
    #[must_use]
    pub fn record_syncs_by_flusher(&self) -> u64 {
        self.syncs(FileKind::Segment, Issuer::Flusher)
            + self.syncs(FileKind::Other, Issuer::Flusher)
    }

    /// The `fdatasync`s of the log mark, by any thread.
    #[must_use]
    pub fn mark_syncs(&self) -> u64 {
        self.syncs[FileKind::Mark as usize].iter().sum()
    }

    /// `write` calls to segment files, by any thread.
    #[must_use]
    pub fn segment_writes(&self) -> u64 {
        self.writes[FileKind::Segment as usize].iter().sum()
    }

    /// Bytes written to segment files, by any thread.
    #[must_use]
    pub fn segment_write_bytes(&self) -> u64 {
        self.write_bytes[FileKind::Segment as usize].iter().sum()
    }

    /// Bytes written by the appenders and the flusher, to any file.
    #[must_use]
    pub fn record_write_bytes(&self) -> u64 {
        self.write_bytes
            .iter()
            .map(|by_issuer| {
                by_issuer[Issuer::Appender as usize] + by_issuer[Issuer::Flusher as usize]
            })
            .sum()
    }

    /// `fsync`s of directories by the appenders and the flusher.
    #[must_use]
    pub fn record_dir_syncs(&self) -> u64 {
        self.dir_syncs(Issuer::Appender) + self.dir_syncs(Issuer::Flusher)
    }

    /// [`FsCounts::record_syncs`] and [`FsCounts::record_dir_syncs`] together: every sync of
    /// a file or a directory the records cost.
    #[must_use]
    pub fn record_and_dir_syncs(&self) -> u64 {
        self.record_syncs() + self.record_dir_syncs()
    }

    /// What happened between `earlier` and `self`.
    ///
    /// # Panics
    ///
    /// If `earlier` was read after `self` (a counter would go backwards).
    #[must_use]
    pub fn since(&self, earlier: &FsCounts) -> FsCounts {
        let minus = |a: u64, b: u64| a.checked_sub(b).expect("counts read in order");
        let grid = |a: &[[u64; ISSUERS]; KINDS], b: &[[u64; ISSUERS]; KINDS]| {
            std::array::from_fn(|k| std::array::from_fn(|i| minus(a[k][i], b[k][i])))
        };
        FsCounts {
            syncs: grid(&self.syncs, &earlier.syncs),
            writes: grid(&self.writes, &earlier.writes),
            write_bytes: grid(&self.write_bytes, &earlier.write_bytes),
            dir_syncs: std::array::from_fn(|i| minus(self.dir_syncs[i], earlier.dir_syncs[i])),
        }
    }
}

impl FsCounters {
    /// The counts now.
    #[must_use]
    pub fn read(&self) -> FsCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Acquire);
        let grid = |g: &[[AtomicU64; ISSUERS]; KINDS]| {
            std::array::from_fn(|k| std::array::from_fn(|i| get(&g[k][i])))
        };
        FsCounts {
            syncs: grid(&self.syncs),
            writes: grid(&self.writes),
            write_bytes: grid(&self.write_bytes),
            dir_syncs: std::array::from_fn(|i| get(&self.dir_syncs[i])),
        }
    }

    /// Starts recording the bytes written between consecutive record syncs afresh
    /// ([`FsCounters::chunks`]).
    pub fn reset_chunks(&self) {
        self.chunks.lock().clear();
        self.pending_bytes.store(0, Ordering::Release);
    }

    /// The bytes the appenders and the flusher wrote before each of their syncs of a file
    /// that is not the mark, since the last [`FsCounters::reset_chunks`]: what a replay of
    /// the same syncs on a bare file writes (the bench's floor).
    #[must_use]
    pub fn chunks(&self) -> Vec<u64> {
        self.chunks.lock().clone()
    }

    /// The windows of files readers mapped ([`Fs::map_range`] calls).
    #[must_use]
    pub fn window_maps(&self) -> u64 {
        self.window_maps.load(Ordering::Acquire)
    }

    /// The bytes of the files mapped for reading before the last one: those a scan that maps
    /// one file after the other has gone through.
    #[must_use]
    pub fn mapped_bytes_done(&self) -> u64 {
        let last = self.last_mapped_bytes.load(Ordering::Acquire);
        self.mapped_bytes.load(Ordering::Acquire).saturating_sub(last)
    }
}

/// A file system that counts what passes through it to another one.
#[derive(Debug)]
pub struct CountingFs {
    inner: Arc<dyn Fs>,
    counters: Arc<FsCounters>,
}

impl CountingFs {
    /// The real file system, counted, and the handle on its counters.
    #[must_use]
    pub fn new() -> (Arc<CountingFs>, Arc<FsCounters>) {
        CountingFs::over(Arc::new(RealFs))
    }

    /// `inner`, counted, and the handle on its counters.
    #[must_use]
    pub fn over(inner: Arc<dyn Fs>) -> (Arc<CountingFs>, Arc<FsCounters>) {
        let counters = Arc::new(FsCounters::default());
        (Arc::new(CountingFs { inner, counters: Arc::clone(&counters) }), counters)
    }
}

impl Fs for CountingFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let inner = self.inner.open(path, mode)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let kind = if mark::is_mark_file(name) {
            FileKind::Mark
        } else if path.extension().is_some_and(|e| e == "seg") {
            FileKind::Segment
        } else {
            FileKind::Other
        };
        Ok(Box::new(CountingFile { inner, kind, counters: Arc::clone(&self.counters) }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.hard_link(from, to)
    }

    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        self.inner.is_dir(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.counters.dir_syncs[Issuer::current() as usize].fetch_add(1, Ordering::AcqRel);
        self.inner.sync_dir(path)
    }

    fn lock_dir(&self, dir: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        self.inner.lock_dir(dir)
    }

    fn map(&self, path: &Path) -> io::Result<Bytes> {
        let bytes = self.inner.map(path)?;
        let len = bytes.len() as u64;
        self.counters.last_mapped_bytes.store(len, Ordering::Release);
        self.counters.mapped_bytes.fetch_add(len, Ordering::AcqRel);
        Ok(bytes)
    }

    fn map_range(&self, path: &Path, offset: u64, len: u64) -> io::Result<Bytes> {
        self.counters.window_maps.fetch_add(1, Ordering::AcqRel);
        // Through `map`, counted as a whole file (what the progress of a scan shows).
        Ok(crate::fs::window_of(&self.map(path)?, offset, len))
    }

    fn random_u64(&self) -> u64 {
        self.inner.random_u64()
    }

    fn space(&self, path: &Path) -> io::Result<Space> {
        self.inner.space(path)
    }
}

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
        let issuer = Issuer::current();
        let (kind, who) = (self.kind as usize, issuer as usize);
        let bytes = buf.len() as u64;
        self.counters.writes[kind][who].fetch_add(1, Ordering::AcqRel);
        self.counters.write_bytes[kind][who].fetch_add(bytes, Ordering::AcqRel);
        if issuer != Issuer::Preallocator {
            self.counters.pending_bytes.fetch_add(bytes, Ordering::AcqRel);
        }
        self.inner.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        let outcome = self.inner.sync_data();
        let issuer = Issuer::current();
        self.counters.syncs[self.kind as usize][issuer as usize].fetch_add(1, Ordering::AcqRel);
        if self.kind != FileKind::Mark && issuer != Issuer::Preallocator {
            let chunk = self.counters.pending_bytes.swap(0, Ordering::AcqRel);
            self.counters.chunks.lock().push(chunk);
        }
        outcome
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_and_writes_are_counted_by_file_and_thread() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (fs, counters) = CountingFs::new();
        let segment = fs.open(&dir.path().join("00000001.seg"), OpenMode::CreateNew).expect("seg");
        let mark = fs.open(&dir.path().join("MARK"), OpenMode::CreateNew).expect("mark");
        let before = counters.read();
        segment.write_all_at(b"abc", 0).expect("write");
        segment.sync_data().expect("sync");
        mark.write_all_at(b"m", 0).expect("write");
        mark.sync_data().expect("sync");
        std::thread::Builder::new()
            .name(FLUSHER_THREAD_NAME.into())
            .spawn(move || segment.sync_data().expect("sync"))
            .expect("spawn")
            .join()
            .expect("join");
        fs.sync_dir(dir.path()).expect("dir sync");
        let counts = counters.read().since(&before);
        assert_eq!(counts.syncs(FileKind::Segment, Issuer::Appender), 1);
        assert_eq!(counts.syncs(FileKind::Segment, Issuer::Flusher), 1);
        assert_eq!(counts.segment_syncs(), 2);
        assert_eq!((counts.mark_syncs(), counts.other_syncs()), (1, 1));
        assert_eq!((counts.record_syncs(), counts.record_syncs_by_flusher()), (2, 1));
        assert_eq!((counts.segment_write_bytes(), counts.record_write_bytes()), (3, 4));
        assert_eq!(counts.record_dir_syncs(), 1);
        // The mark's write is in the chunk of the next record sync: 3, then 1 + 0.
        assert_eq!(counters.chunks(), [3, 1]);
    }
}
