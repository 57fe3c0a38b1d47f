//! [`Log`]: the handle applications hold. Opening runs recovery (`format-spec/recovery.md`);
//! appends go to the [`crate::engine::writer`]; reads go through a [`Reader`].

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::engine::created::{Created, Undo};
use crate::engine::gaps::{self, Gaps};
use crate::engine::mark::{self, Mark, MarkKeeper, MarkState};
use crate::engine::options::Options;
use crate::engine::prealloc::{PreallocStats, Preallocator};
use crate::engine::reader::Reader;
use crate::engine::recovery::{self, RecoveryReport, TailAnalysis, TailCut, TailState};
use crate::engine::rewrite;
use crate::engine::segment;
use crate::engine::segments::{self, LOCK_FILE_NAME, PREALLOC_FILE_NAME, SegmentMeta};
use crate::engine::torn;
use crate::engine::writer::{Writer, WriterStart};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::{DirLock, Fs, FsFile, OpenMode};
use crate::limits::ZERO_CHUNK_BYTES;
use crate::types::{Durability, RecoveryMode, SegmentId, Seq};

/// An open log: a directory of segment files.
///
/// A `Log` is `Send + Sync`: share it between threads with an `Arc`, and concurrent
/// `Synced` appenders share their `fdatasync`. Dropping it flushes and syncs what was
/// appended, like [`Log::close`], but ignores errors.
#[derive(Debug)]
pub struct Log {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    report: RecoveryReport,
    format_version: u16,
    gaps: Arc<Gaps>,
    inner: Inner,
    /// What this open created, for [`Log::discard_created`].
    created: Created,
}

enum Inner {
    Writer {
        writer: Arc<Writer>,
        flusher: Option<JoinHandle<()>>,
        lock: Option<Box<dyn DirLock>>,
        closed: bool,
    },
    ReadOnly {
        segments: Vec<SegmentMeta>,
        last: u64,
    },
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Inner::Writer { .. } => "Writer",
            Inner::ReadOnly { .. } => "ReadOnly",
        })
    }
}

/// What a log directory holds, as [`Log::info`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogInfo {
    /// The log directory.
    pub dir: PathBuf,
    /// The segment format version of every segment (`format-spec/versions.md`).
    pub format_version: u16,
    /// Its segments, in log order.
    pub segments: Vec<SegmentInfo>,
    /// The first record's sequence number.
    pub first_seq: Option<Seq>,
    /// The last record's sequence number.
    pub last_seq: Option<Seq>,
    /// The last record on stable storage (for a read-only open: the last record found).
    pub durable_seq: Option<Seq>,
}

/// One segment, as [`Log::info`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its id.
    pub id: SegmentId,
    /// Its file.
    pub path: PathBuf,
    /// Sequence number of its first record.
    pub first_seq: Seq,
    /// Size of the file: its frames and the zeros grown ahead of them, at most its capacity.
    pub file_bytes: u64,
    /// Whether it is sealed (every segment but the last).
    pub sealed: bool,
}

fn some_seq(seq: u64) -> Option<Seq> {
    (seq > 0).then_some(Seq(seq))
}

impl Log {
    /// Opens the log in `dir` for appending, creating the directory and the first segment if
    /// needed. Takes the directory's exclusive lock ([`ErrorKind::Locked`] if another writer
    /// holds it) and recovers the active segment as [`Options::recovery_mode`] says; the
    /// report is in [`Log::recovery_report`].
    ///
    /// An open that creates the log and then fails (a nearly full disk, say) removes what it
    /// created: the directories, the first segment, the preallocation file and the lock file.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Log> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let fs = Arc::clone(&options.fs);
        // Dropped after the lock and the writer below, so it removes files no one holds.
        let mut undo = Undo::new(Arc::clone(&fs));
        ensure_dir(&*fs, &dir, &mut undo.created.dirs)?;
        let had_lock_file = fs
            .list_dir(&dir)
            .map_err(|e| Error::io("list directory", &dir, e))?
            .iter()
            .any(|name| name == LOCK_FILE_NAME);
        // A committed rewrite is ours and is completed under the lock before anything is read;
        // without one, refuse someone else's directory before leaving anything in it, not even
        // a lock file.
        let rewriting = rewrite::pending(&*fs, &dir)?.is_some();
        if !rewriting {
            refuse_foreign(&segments::list(&*fs, &dir)?, &dir)?;
        }
        let gaps = Arc::new(gaps::read(&*fs, &dir)?);
        let lock = fs
            .lock_dir(&dir)
            .map_err(|e| Error::io("lock", &dir, e))?
            .ok_or_else(|| Error::from(ErrorKind::Locked { dir: dir.clone() }))?;
        if rewrite::finish(&*fs, &dir)?.is_none() {
            rewrite::clear_staged(&*fs, &dir)?;
        }
        let listing = segments::list(&*fs, &dir)?;
        refuse_foreign(&listing, &dir)?;
        let mut segs = listing.segments;
        let mark_state = mark::read(&*fs, &dir)?;
        if segs.is_empty() {
            // The mark records segments that are gone: never start a new log over them.
            let empty = TailAnalysis {
                end_offset: 0,
                next_seq: Seq(1),
                records: 0,
                state: TailState::Clean,
            };
            mark::check_state(&mark_state, &dir, &segs, &empty)?;
        }
        let creating = segs.is_empty();
        if creating {
            let files = &mut undo.created.files;
            files.push(dir.join(mark::MARK_FILE_NAME));
            files.push(dir.join(mark::MARK_TMP_FILE_NAME));
            files.push(dir.join(PREALLOC_FILE_NAME));
            files.push(dir.join(segment::file_name(Seq(1))));
            if !had_lock_file {
                files.push(dir.join(LOCK_FILE_NAME));
            }
            let first = Preallocator::new(Arc::clone(&fs), &dir, options.segment_bytes, false)?;
            let (_file, meta) = segments::install(
                &*fs,
                &dir,
                first.take()?.0,
                SegmentId(1),
                Seq(1),
                options.new_log_format_version,
            )?;
            segs.push(meta);
        }
        let active = segs.last().expect("at least one segment").clone();
        let file = fs
            .open(&active.path, OpenMode::ReadWrite)
            .map_err(|e| Error::io("open", &active.path, e))?;
        let analysis = analyze(&*fs, &active)?;
        mark::check_state(&mark_state, &dir, &segs, &analysis)?;
        let cut = Cutter { fs: &*fs, dir: &dir, file: &*file };
        let tail_cut = apply_tail(&analysis, &active, options.recovery_mode, Some(cut))?;
        let pending_cut = tail_cut.as_ref().map(|cut| (cut.offset, cut.bytes));
        // What the scan found may sit only in the page cache after a process crash: make it
        // durable before the writer reports it as such.
        file.sync_data().map_err(|e| Error::io("fdatasync", &active.path, e))?;
        fs.sync_dir(&dir).map_err(|e| Error::io("fsync directory", &dir, e))?;
        // The mark found stays a true lower bound; the open's own is written before the first
        // write to a segment (`format-spec/mark.md`, "When the mark is written").
        let open_mark = Mark::at(0, false, &segs, analysis.next_seq.0, analysis.end_offset);
        let mut mark_keeper = MarkKeeper::new(Arc::clone(&fs), &dir, &mark_state, open_mark)?;
        if creating {
            // A log this open created has nothing to leave as it was (a failure removes it
            // whole): its mark is written now, not on the first append's path.
            mark_keeper.write_pending()?;
        }
        // The active segment grows up to `segment_bytes`, or keeps a longer file's length as its
        // capacity (`format-spec/segment.md`, "Capacity and growth").
        let file_bytes = file.len().map_err(|e| Error::io("stat", &active.path, e))?;
        let capacity = (file_bytes / 8 * 8).max(options.segment_bytes);
        // Started only once open is sure to succeed, so a refused open leaves no file behind.
        let prealloc = Preallocator::new(
            Arc::clone(&fs),
            &dir,
            options.segment_bytes,
            options.background_threads,
        )?;
        let report = RecoveryReport {
            mode: options.recovery_mode,
            segments: segs.len(),
            records_scanned: analysis.records,
            last_seq: some_seq(analysis.next_seq.0 - 1),
            tail_cut,
            mark: mark_state.mark().copied(),
        };
        let writer = Arc::new(Writer::new(WriterStart {
            mark: mark_keeper,
            pending_cut,
            mark_interval: options.mark_interval,
            mark_in_flusher: options.background_threads,
            dir: dir.clone(),
            fs: Arc::clone(&fs),
            segments: segs,
            active_file: file,
            active_file_bytes: file_bytes,
            active_capacity: capacity,
            end_offset: analysis.end_offset,
            next_seq: analysis.next_seq.0,
            segment_bytes: options.segment_bytes,
            buffer_bytes: options.buffer_bytes,
            flush_delay: options.flush_delay,
            prealloc,
        }));
        let flusher = if options.background_threads {
            let w = Arc::clone(&writer);
            let spawned = std::thread::Builder::new()
                .name("factlog-flusher".into())
                .spawn(move || w.run_flusher());
            Some(spawned.map_err(|e| Error::io("spawn flusher thread", &dir, e))?)
        } else {
            None
        };
        let created = undo.disarm();
        Ok(Log {
            fs,
            dir,
            report,
            format_version: active.header.format_version,
            gaps,
            inner: Inner::Writer { writer, flusher, lock: Some(lock), closed: false },
            created,
        })
    }

    /// Closes a log whose open created it and removes everything that open created, for a
    /// layer above (the store) whose own open failed after the log's. A log that existed
    /// before is only closed.
    pub(crate) fn discard_created(mut self) {
        // Refused by the layer above: nothing of this open's deferred work is done.
        let _ = self.shutdown(false);
        let mut created = std::mem::take(&mut self.created);
        let fs = Arc::clone(&self.fs);
        drop(self);
        created.remove(&*fs);
    }

    /// Writes the log mark now if the durable end moved past it (a snapshot is about to cover
    /// what is synced: the mark must vouch for it too). A read-only log has no mark to write.
    pub(crate) fn update_mark_now(&self) -> Result<()> {
        match &self.inner {
            Inner::Writer { writer, .. } => writer.update_mark_now(),
            Inner::ReadOnly { .. } => Ok(()),
        }
    }

    /// Cuts the torn tail this open found now instead of before the first write (a rewrite
    /// reads the segments whole). A read-only log has nothing to cut.
    pub(crate) fn cut_torn_tail_now(&self) -> Result<()> {
        match &self.inner {
            Inner::Writer { writer, .. } => writer.cut_torn_tail_now(),
            Inner::ReadOnly { .. } => Ok(()),
        }
    }

    /// The segment format version of this log (`format-spec/versions.md`): every segment of
    /// a log has the same. A new log gets [`Options::new_log_format_version`].
    #[must_use]
    pub fn format_version(&self) -> u16 {
        self.format_version
    }

    /// Opens the log in `dir` for reading only: no lock, no write of any kind, so it works
    /// beside a live writer and on a full disk. A torn tail is reported in
    /// [`RecoveryReport::tail_cut`] (what a writable open would cut) and not read.
    pub fn open_read_only(dir: impl AsRef<Path>, options: Options) -> Result<Log> {
        Log::read_only(dir.as_ref(), options, false).map(|(log, _)| log)
    }

    /// Opens the log in `dir` read-only like [`Log::open_read_only`], but when it is damaged
    /// opens the records that precede the first damage instead of failing: a segment header
    /// that cannot be read ends the log before that segment, and damage in the last readable
    /// segment ends it where the valid records end. The damage (a [`ErrorKind::Corruption`])
    /// is returned beside the log; damage inside an earlier segment is found by the reader
    /// when it gets there, as always. `factlog dump`, `export` and `verify` print what
    /// precedes the damage this way; `factlog salvage` copies what follows it too.
    ///
    /// # Errors
    /// What [`Log::open_read_only`] returns for anything but corruption (a missing log, an
    /// unsupported version, an I/O error), and the corruption itself when not even the first
    /// segment header can be read.
    pub fn open_read_only_to_damage(
        dir: impl AsRef<Path>,
        options: Options,
    ) -> Result<(Log, Option<Error>)> {
        Log::read_only(dir.as_ref(), options, true)
    }

    /// The read-only open; with `to_damage`, corruption ends the log where it starts and is
    /// returned beside it instead of failing the open.
    fn read_only(dir: &Path, options: Options, to_damage: bool) -> Result<(Log, Option<Error>)> {
        options.validate()?;
        let dir = dir.to_path_buf();
        let fs = Arc::clone(&options.fs);
        if rewrite::pending(&*fs, &dir)?.is_some() {
            return Err(ErrorKind::RewritePending { dir }.into());
        }
        // The mark is read before the segments, so beside a live writer it is a lower bound of
        // what the scan finds. A check that fails while the writer moved the mark on (a roll, an
        // update) is looked at again; a mark that stayed the same judged what was scanned.
        let mut attempts = 0;
        let (listing, damage, analysis, mark_found, tail_cut) = loop {
            attempts += 1;
            let mark_read = mark::read(&*fs, &dir);
            let generation = |read: &Result<MarkState>| {
                read.as_ref().ok().map(|state| state.mark().map(|m| m.generation))
            };
            let read_generation = generation(&mark_read);
            let (listing, listed_damage) = if to_damage {
                if let Err(e) = fs.list_dir(&dir)
                    && e.kind() == io::ErrorKind::NotFound
                {
                    return Err(ErrorKind::NotALog { dir }.into());
                }
                segments::list_to_damage(&*fs, &dir)?
            } else {
                (list_existing(&*fs, &dir)?, None)
            };
            let Some(active) = listing.segments.last().cloned() else {
                let none = || ErrorKind::NotALog { dir: dir.clone() }.into();
                return Err(listed_damage.unwrap_or_else(none));
            };
            let analysis = analyze(&*fs, &active)?;
            let checked = mark_read.and_then(|state| {
                if listed_damage.is_none() {
                    mark::check_state(&state, &dir, &listing.segments, &analysis)?;
                }
                Ok(state)
            });
            let moved = |e: &Error| {
                attempts < 5
                    && e.is_corruption()
                    && generation(&mark::read(&*fs, &dir)) != read_generation
            };
            let judged = checked.and_then(|state| {
                apply_tail(&analysis, &active, options.recovery_mode, None).map(|cut| (state, cut))
            });
            match judged {
                Ok((state, cut)) => {
                    break (listing, listed_damage, analysis, state.mark().copied(), cut);
                }
                Err(e) if moved(&e) => continue,
                Err(e) if to_damage && e.is_corruption() => {
                    break (listing, Some(e), analysis, None, None);
                }
                Err(e) => return Err(e),
            }
        };
        let active = listing.segments.last().cloned().expect("a listing with a segment");
        let gaps = Arc::new(gaps::read(&*fs, &dir)?);
        let last = analysis.next_seq.0 - 1;
        let report = RecoveryReport {
            mode: options.recovery_mode,
            segments: listing.segments.len(),
            records_scanned: analysis.records,
            last_seq: some_seq(last),
            tail_cut,
            mark: mark_found,
        };
        let log = Log {
            fs,
            dir,
            report,
            format_version: active.header.format_version,
            gaps,
            created: Created::default(),
            inner: Inner::ReadOnly { segments: listing.segments, last },
        };
        Ok((log, damage))
    }

    fn writer(&self) -> Result<&Writer> {
        match &self.inner {
            Inner::Writer { writer, .. } => Ok(writer),
            Inner::ReadOnly { .. } => Err(ErrorKind::ReadOnly.into()),
        }
    }

    /// Appends one record and returns its sequence number once it meets `durability`.
    ///
    /// # Errors
    /// [`ErrorKind::LimitExceeded`] if the record does not fit in a segment (or exceeds
    /// 16 MiB); [`ErrorKind::Poisoned`] after an earlier I/O failure; the I/O error itself
    /// ([`ErrorKind::Io`], [`ErrorKind::DiskFull`]) when a write or sync fails.
    pub fn append(&self, payload: &[u8], durability: Durability) -> Result<Seq> {
        self.writer()?.append(payload, durability)
    }

    /// Appends `records` as one batch frame: all of them survive a crash or none does. Returns
    /// the first record's sequence number; the others follow it without a gap.
    pub fn append_batch<P: AsRef<[u8]>>(
        &self,
        records: &[P],
        durability: Durability,
    ) -> Result<Seq> {
        self.writer()?.append_batch(records, durability)
    }

    /// Appends one record of `payload_len` bytes that `fill` writes in place, given the
    /// record's sequence number. `fill` runs under the writer's lock, so records it numbers
    /// (a per-task revision, say) are numbered in log order; it must be short and must not
    /// call back into this log. If it fails, nothing is appended and its error is returned.
    pub fn append_with(
        &self,
        payload_len: usize,
        durability: Durability,
        fill: impl FnOnce(Seq, &mut [u8]) -> Result<()>,
    ) -> Result<Seq> {
        self.writer()?.append_with(payload_len, durability, fill)
    }

    /// Appends `records` as one batch frame, like [`Log::append_batch`], after `gate` has
    /// seen the first sequence number under the writer's lock. `gate` may patch the records
    /// in place without changing their lengths, or refuse: then nothing is appended.
    pub fn append_batch_with(
        &self,
        records: &mut [Vec<u8>],
        durability: Durability,
        gate: impl FnOnce(Seq, &mut [Vec<u8>]) -> Result<()>,
    ) -> Result<Seq> {
        self.writer()?.append_batch_with(records, durability, gate)
    }

    /// Makes every record appended so far meet `durability` (`Buffered` acts as `Flushed`).
    pub fn flush(&self, durability: Durability) -> Result<()> {
        let writer = self.writer()?;
        if durability == Durability::Synced {
            writer.sync_waited();
        }
        writer.flush(durability)
    }

    /// Opens a scope in which a `Synced` append on this thread returns before its sync
    /// (`writer::DeferredSyncs`); `None` for a read-only log.
    pub(crate) fn defer_syncs(&self) -> Option<crate::engine::writer::DeferredSyncs<'_>> {
        self.writer().ok().map(Writer::defer_syncs)
    }

    /// Makes every record through `seq` durable: one group commit covers it and whatever else
    /// was appended before it started.
    pub(crate) fn sync_through(&self, seq: u64) -> Result<()> {
        let writer = self.writer()?;
        writer.sync_waited();
        writer.sync_through(seq)
    }

    /// The highest seq whose sync a deferral scope deferred (0: none).
    pub(crate) fn deferred_through(&self) -> u64 {
        self.writer().map_or(0, Writer::deferred_through)
    }

    /// The last record on stable storage: every record up to it survives a power loss. For a
    /// read-only open, the last valid record found.
    #[must_use]
    pub fn durable_seq(&self) -> Option<Seq> {
        match &self.inner {
            Inner::Writer { writer, .. } => some_seq(writer.durable_seq()),
            Inner::ReadOnly { last, .. } => some_seq(*last),
        }
    }

    /// The last record appended (or, read-only, found).
    #[must_use]
    pub fn last_seq(&self) -> Option<Seq> {
        match &self.inner {
            Inner::Writer { writer, .. } => some_seq(writer.appended_seq()),
            Inner::ReadOnly { last, .. } => some_seq(*last),
        }
    }

    /// Reads records from `from` on, up to the last record appended before this call (a
    /// writer first writes its buffer out, so buffered records are included).
    pub fn read_from(&self, from: Seq) -> Result<Reader> {
        let (segments, last) = match &self.inner {
            Inner::Writer { writer, .. } => writer.reader_view()?,
            Inner::ReadOnly { segments, last } => (segments.clone(), *last),
        };
        let first_available = self.first_of(&segments).0;
        if from.0.max(1) < first_available {
            return Err(ErrorKind::Reclaimed { requested: from.0, first_available }.into());
        }
        Ok(Reader::new(Arc::clone(&self.fs), segments, Arc::clone(&self.gaps), from, last))
    }

    /// The first sequence number the log holds: 1 unless [`Log::reclaim_before`] removed
    /// segments. A salvaged log whose first records were lost begins where its first declared
    /// gap begins ([`Log::gaps`]).
    pub fn first_seq(&self) -> Result<Seq> {
        let segments = match &self.inner {
            Inner::Writer { writer, .. } => writer.reader_view()?.0,
            Inner::ReadOnly { segments, .. } => segments.clone(),
        };
        Ok(self.first_of(&segments))
    }

    fn first_of(&self, segments: &[SegmentMeta]) -> Seq {
        let first = segments.first().map_or(Seq(1), |s| s.header.first_seq);
        self.gaps.leading(first.0).unwrap_or(first)
    }

    /// The ranges of sequence numbers a salvage declared lost in this log (none for a log
    /// that was not written by `factlog salvage`).
    #[must_use]
    pub fn gaps(&self) -> &Gaps {
        &self.gaps
    }

    /// Reclaims disk space: deletes the sealed segments whose every record is before
    /// `keep_from`, oldest first, and syncs the directory. The active segment is never
    /// deleted, and nothing else ever deletes a segment. Afterwards reading from before the
    /// first kept record fails with [`ErrorKind::Reclaimed`]. Returns the number of segments
    /// and bytes removed.
    pub fn reclaim_before(&self, keep_from: Seq) -> Result<(usize, u64)> {
        self.writer()?.reclaim_before(keep_from.0)
    }

    /// Blocks until a record with sequence number `seq` or later has been appended through
    /// this handle, until `deadline` passes, or until `stop()` is true (checked before the
    /// first sleep and at every wake-up: call [`Log::wake_waiters`] after making it true).
    /// Returns whether `seq` was reached. Holds no lock of the log while it waits and does not
    /// spin: an append wakes it at once. A read-only log returns at once: nothing is appended
    /// through it.
    pub(crate) fn wait_appended(
        &self,
        seq: Seq,
        deadline: std::time::Instant,
        stop: &dyn Fn() -> bool,
    ) -> bool {
        match &self.inner {
            Inner::Writer { writer, .. } => writer.wait_appended(seq.0, deadline, stop),
            Inner::ReadOnly { .. } => self.last_seq().is_some_and(|last| last >= seq),
        }
    }

    /// Wakes every [`Log::wait_appended`] caller to check its stop again.
    pub(crate) fn wake_waiters(&self) {
        if let Inner::Writer { writer, .. } = &self.inner {
            writer.wake_waiters();
        }
    }

    /// What the preallocator did since this log was opened: growth steps, their bytes, and how
    /// often the writer reached the end of the grown file first
    /// (`format-spec/segment.md`, "Capacity and growth"). All zero for a read-only open.
    #[must_use]
    pub fn prealloc_stats(&self) -> PreallocStats {
        match &self.inner {
            Inner::Writer { writer, .. } => writer.prealloc_stats(),
            Inner::ReadOnly { .. } => PreallocStats::default(),
        }
    }

    /// True if the log was opened with [`Log::open_read_only`].
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        matches!(self.inner, Inner::ReadOnly { .. })
    }

    /// What recovery did when this log was opened.
    #[must_use]
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The log directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Segments, sizes and sequence range.
    pub fn info(&self) -> Result<LogInfo> {
        let segments = match &self.inner {
            Inner::Writer { writer, .. } => writer.reader_view()?.0,
            Inner::ReadOnly { segments, .. } => segments.clone(),
        };
        let count = segments.len();
        let mut infos = Vec::with_capacity(count);
        for (i, meta) in segments.into_iter().enumerate() {
            let file = self
                .fs
                .open(&meta.path, OpenMode::Read)
                .map_err(|e| Error::io("open", &meta.path, e))?;
            let file_bytes = file.len().map_err(|e| Error::io("stat", &meta.path, e))?;
            infos.push(SegmentInfo {
                id: meta.header.id,
                first_seq: meta.header.first_seq,
                path: meta.path,
                file_bytes,
                sealed: i + 1 < count,
            });
        }
        let last_seq = self.last_seq();
        Ok(LogInfo {
            dir: self.dir.clone(),
            format_version: self.format_version,
            first_seq: last_seq.and(infos.first().map(|s| s.first_seq)),
            segments: infos,
            last_seq,
            durable_seq: self.durable_seq(),
        })
    }

    /// Flushes and syncs everything appended, stops the background threads and releases the
    /// directory lock.
    ///
    /// # Errors
    /// [`ErrorKind::Poisoned`] if an earlier I/O failure left appended records unsynced, or
    /// the error of the final sync.
    pub fn close(mut self) -> Result<()> {
        self.shutdown(true)
    }

    /// Stops the writer. `finish`: a close, which also cuts a torn tail the open found if no
    /// write did yet and marks the log cleanly closed; without it (an open refused by the layer
    /// above) no file is changed.
    fn shutdown(&mut self, finish: bool) -> Result<()> {
        let Inner::Writer { writer, flusher, lock, closed } = &mut self.inner else {
            return Ok(());
        };
        if std::mem::replace(closed, true) {
            return Ok(());
        }
        writer.stop_flusher();
        if let Some(thread) = flusher.take() {
            let _ = thread.join();
        }
        // A clean close vouches for every byte: the mark then records the exact end.
        let outcome = if finish {
            writer
                .flush(Durability::Synced)
                .and_then(|()| writer.cut_torn_tail_now())
                .and_then(|()| writer.close_mark())
        } else {
            writer.flush(Durability::Synced)
        };
        writer.stop_preallocator();
        drop(lock.take());
        outcome
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.shutdown(true);
    }
}

fn refuse_foreign(listing: &segments::Listing, dir: &Path) -> Result<()> {
    if listing.segments.is_empty() && listing.foreign_files {
        return Err(ErrorKind::NotALog { dir: dir.to_path_buf() }.into());
    }
    Ok(())
}

/// Lists the log in `dir` for a read-only user: a missing directory is not a log.
pub(crate) fn list_existing(fs: &dyn Fs, dir: &Path) -> Result<segments::Listing> {
    match fs.list_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(ErrorKind::NotALog { dir: dir.to_path_buf() }.into())
        }
        _ => segments::list(fs, dir),
    }
}

/// The directory holding `path`; `.` for a relative name without one.
fn parent_dir(path: &Path) -> Option<&Path> {
    path.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })
}

/// Creates `dir` and its missing ancestors one level at a time, syncing the directory that
/// holds each new entry, so that a power loss cannot take the log's directory away after a
/// record was acknowledged. The parent of `dir` is synced on every open, because an earlier
/// open may have created `dir` and failed before its sync; a parent that cannot be opened for
/// that (no read permission) was not created by us, and its entry is as durable as the
/// system made it.
/// Each directory created is pushed to `created`, outermost first.
fn ensure_dir(fs: &dyn Fs, dir: &Path, created: &mut Vec<PathBuf>) -> Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(level) = at {
        match fs.list_dir(level) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(level),
            Err(e) => return Err(Error::io("list directory", level, e)),
        }
        at = parent_dir(level);
    }
    let sync_parent = |level: &Path, tolerate_denied: bool| -> Result<()> {
        let Some(parent) = parent_dir(level) else { return Ok(()) };
        match fs.sync_dir(parent) {
            Err(e) if tolerate_denied && e.kind() == io::ErrorKind::PermissionDenied => Ok(()),
            outcome => outcome.map_err(|e| Error::io("fsync directory", parent, e)),
        }
    };
    for level in missing.iter().rev() {
        fs.create_dir_all(level).map_err(|e| Error::io("create directory", level, e))?;
        created.push(level.to_path_buf());
        sync_parent(level, false)?;
    }
    if missing.is_empty() {
        sync_parent(dir, true)?;
    }
    Ok(())
}

/// Recovery's analysis of the active segment (`format-spec/recovery.md`, steps 7 and 8): the
/// frames are scanned through a memory map, the rest of the file is read back in chunks of
/// [`ZERO_CHUNK_BYTES`] (zeros ahead of the writer are not mapped in).
fn analyze(fs: &dyn Fs, active: &SegmentMeta) -> Result<TailAnalysis> {
    let map = fs.map(&active.path).map_err(|e| Error::io("map", &active.path, e))?;
    let file =
        fs.open(&active.path, OpenMode::Read).map_err(|e| Error::io("open", &active.path, e))?;
    let mut failure = None;
    let analysis = recovery::analyze_tail_with(&map, &active.header, |end| {
        let read = last_nonzero_read(&*file, end as u64, map.len() as u64);
        read.map_err(|e| failure = Some(Error::io("read", &active.path, e))).ok().flatten()
    });
    match failure {
        Some(error) => Err(error),
        None => Ok(analysis),
    }
}

/// The index, relative to `from`, of the last non-zero byte of `[from, len)` of `file`, read in
/// chunks of [`ZERO_CHUNK_BYTES`].
fn last_nonzero_read(file: &dyn FsFile, from: u64, len: u64) -> io::Result<Option<usize>> {
    let mut chunk = vec![0u8; ZERO_CHUNK_BYTES];
    let mut last = None;
    let mut at = from;
    while at < len {
        let n = (len - at).min(ZERO_CHUNK_BYTES as u64) as usize;
        let bytes = &mut chunk[..n];
        file.read_exact_at(bytes, at)?;
        if let Some(i) = recovery::last_nonzero(bytes) {
            last = Some((at - from) as usize + i);
        }
        at += n as u64;
    }
    Ok(last)
}

/// What a writer open cuts a torn tail with.
struct Cutter<'a> {
    fs: &'a dyn Fs,
    dir: &'a Path,
    file: &'a dyn FsFile,
}

/// Decides, per the recovery table, what to do about the tail; with `cut` (a writer open),
/// keeps a torn tail's bytes aside when valid frames follow its hole. The writer zeroes the
/// tail itself ([`WriterStart::pending_cut`]).
fn apply_tail(
    analysis: &TailAnalysis,
    active: &SegmentMeta,
    mode: RecoveryMode,
    cut: Option<Cutter<'_>>,
) -> Result<Option<TailCut>> {
    let segment = active.header.id;
    match analysis.state {
        TailState::Clean => Ok(None),
        TailState::Corrupt { offset, ref reason } => {
            Err(Error::corruption(Some(segment), &active.path, offset, reason.clone()))
        }
        TailState::Torn { bytes, frames, .. } => {
            let offset = analysis.end_offset;
            if mode == RecoveryMode::Strict {
                return Err(ErrorKind::TornTail {
                    segment,
                    path: active.path.clone(),
                    offset,
                    bytes,
                }
                .into());
            }
            // The bytes are kept aside now (a new file; the segment is not changed), and zeroed
            // by the writer before its first write or at its close: a layer above that refuses
            // the store after this open leaves the segment as it was.
            let mut kept = None;
            if let Some(Cutter { fs, dir, file }) = cut
                && frames > 0
            {
                let header = &active.header;
                kept = Some(torn::keep(fs, dir, header, &active.path, file, offset, bytes)?);
            }
            Ok(Some(TailCut {
                segment,
                path: active.path.clone(),
                offset,
                bytes,
                first_seq_cut: analysis.next_seq,
                frames,
                kept,
            }))
        }
    }
}
