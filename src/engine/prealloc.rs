//! The preallocator: prepares disk space ahead of the writer, off the append path, on one
//! background thread (or inline, on the writer's path, when background threads are off). It
//! has two jobs (`format-spec/segment.md`, "Preallocation" and "Growth"):
//!
//! - **The next segment file**, `prealloc.tmp`: its first growth step of real zeros, synced,
//!   so that a roll writes no zeros on the append path.
//! - **Growth of the active segment**: the file is extended in steps of real zeros, each
//!   synced, ahead of the writer, so that an append's `fdatasync` has only data to flush. The
//!   zeros are handed to the writer a chunk at a time as they are written, so a writer that
//!   catches up waits for a chunk's `write`, not for the step's `fdatasync`. A step is
//!   requested once the writer is within half a step of the file's end; it doubles
//!   while the writer keeps catching up (it gets halfway through what is left before the step
//!   is done, or has to wait for it) up to the largest step, starts small again after a pause
//!   of [`GROWTH_IDLE_MS`], and no step goes past the segment's capacity.
//! - **Only once a sync is waited for.** Growth starts after the first append or flush that
//!   waits for an `fdatasync` ([`Preallocator::sync_waited`]). Until then nobody waits for a
//!   sync, so zeros would save no one anything and only cost the writer copy bandwidth: a log
//!   written only `Buffered` or `Flushed` extends its file with its own writes (what the
//!   flusher's syncs then also commit is the file's size, off the append path).
//!
//! It never takes the last free space of a file system: before it writes zeros it asks the
//! file system ([`Fs::space`]) and writes them only if
//! [`prealloc_free_bytes_min`](crate::limits::prealloc_free_bytes_min) stays free afterwards.
//! Otherwise it quietly leaves the file as it is: the writer then extends the file with its
//! own appends, and the next segment asks again. A preparation that runs out of space anyway
//! (another program took it meanwhile) removes its partial `prealloc.tmp` before it reports
//! [`crate::ErrorKind::DiskFull`], so a failed attempt never leaves the disk full; a growth
//! step that fails stops the growth of that segment and leaves the writer to meet the error
//! with its own data: the growth writes and syncs through a handle of its own, so a failed
//! `fdatasync` of the growth is reported again by the writer's next one.
//!
//! Invariants:
//! - at most one preallocation file exists, at [`PREALLOC_FILE_NAME`]; it is handed out only
//!   when it has its first step of synced zeros or, when space was short, is empty, and only
//!   requested again after the previous one has been renamed into a segment. A file left by an
//!   earlier run is reused only if it has exactly that length and holds nothing but zeros;
//! - the growth never writes below the active file's `end` (the zeros handed to the writer so
//!   far) and the writer never writes beyond it while a growth step is in flight, so zeros
//!   never land on records; a writer that reaches `end` first (counted in
//!   [`PreallocStats::writer_waits`]) waits for the next chunk of the step in flight or, with
//!   no step in flight, extends the file with its own write and asks the thread for a step
//!   from there (without a background thread: grows the file itself, zeros and sync); before
//!   any sync is waited for, its writes extend the file and nothing is asked;
//! - a segment is sealed only after its last growth step finished ([`Preallocator::retire`]),
//!   so the `fdatasync` that seals it covers every zero written into it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::engine::segments::{self, PREALLOC_FILE_NAME};
use crate::error::ErrorKind;
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenMode};
use crate::limits::{
    GROWTH_IDLE_MS, SEGMENT_BYTES_ALIGN, ZERO_CHUNK_BYTES, growth_step_bytes_first,
    growth_step_bytes_max, prealloc_free_bytes_min,
};

/// What the preallocator did since the log was opened, as [`crate::Log::prealloc_stats`]
/// reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PreallocStats {
    /// Growth steps written (zeros appended to the active segment and synced).
    pub growth_steps: u64,
    /// Bytes of zeros those steps appended.
    pub growth_bytes: u64,
    /// Times the writer reached the end of the grown file before the growth thread had
    /// extended it: it waited for the step in flight or grew the file on its own path. Always
    /// counted when background threads are off, since the writer then grows the file itself
    /// (once a sync has been waited for: before, the writes extend the file, uncounted).
    pub writer_waits: u64,
}

/// The active segment as the growth sees it.
#[derive(Debug)]
struct Active {
    /// The growth's own handle on the segment, not the writer's: an `fdatasync` of the growth
    /// that fails reports its error on this handle, and the writer's next `fdatasync` still
    /// reports it on the writer's (Linux reports a write-back error once per open file).
    file: Arc<dyn FsFile>,
    path: Arc<Path>,
    /// The offset below which only the writer writes (the zeros handed to it so far; the file
    /// may be longer by a chunk being written): the growth appends zeros from here.
    end: u64,
    /// The segment's capacity: no step goes beyond it.
    capacity: u64,
    /// A step is being written (with the state lock released).
    growing: bool,
    /// The writer asked for a step.
    wanted: bool,
    /// Space was short or a step failed: the writer extends the file itself from now on.
    stopped: bool,
    /// A step failed: zeros it wrote may not be durable, so the seal of this segment must
    /// sync it whatever the writer has synced already.
    failed: bool,
}

#[derive(Debug)]
struct State {
    requested: bool,
    ready: bool,
    failure: Option<Error>,
    shutdown: bool,
    active: Option<Active>,
    /// The last step grown, and when it finished.
    step: u64,
    last_grown: Option<Instant>,
    /// The writer came close to the end of the file while a step was being written, or had
    /// to wait for one: the next step doubles.
    caught_up: bool,
    stats: PreallocStats,
}

#[derive(Debug)]
struct Shared {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    path: PathBuf,
    segment_bytes: u64,
    background: bool,
    state: Mutex<State>,
    changed: Condvar,
    /// The writer's writes ending at or before this offset need nothing from the growth: a
    /// lock-free check on the write path. Never above the active `end`; `u64::MAX` with no
    /// active segment.
    trigger: AtomicU64,
    /// A caller has waited for a sync of this log: the growth writes zeros from now on.
    sync_waited: AtomicBool,
}

/// The length `prealloc.tmp` gets in `dir`, on the real file system, for a log of
/// `segment_bytes` segments: its first growth step, or 0 when the file system is short of
/// space now and the next segment starts empty ([`prealloc_free_bytes_min`]). For benchmarks
/// and tools that wait for a log's background preallocation to settle.
#[must_use]
pub fn prepared_prealloc_bytes(dir: &Path, segment_bytes: u64) -> u64 {
    let first = growth_step_bytes_first(segment_bytes);
    match crate::fs::RealFs.space(dir) {
        Ok(space)
            if space.available_bytes
                < first
                    .saturating_add(prealloc_free_bytes_min(segment_bytes, space.total_bytes)) =>
        {
            0
        }
        _ => first,
    }
}

/// Hands out preallocated segment files and grows the active one.
#[derive(Debug)]
pub struct Preallocator {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Preallocator {
    /// A preallocator for `dir`; with `background`, a thread starts preparing the first file.
    pub fn new(fs: Arc<dyn Fs>, dir: &Path, segment_bytes: u64, background: bool) -> Result<Self> {
        let shared = Arc::new(Shared {
            fs,
            dir: dir.to_path_buf(),
            path: dir.join(PREALLOC_FILE_NAME),
            segment_bytes,
            background,
            state: Mutex::new(State {
                requested: true,
                ready: false,
                failure: None,
                shutdown: false,
                active: None,
                step: growth_step_bytes_first(segment_bytes),
                last_grown: None,
                caught_up: false,
                stats: PreallocStats::default(),
            }),
            changed: Condvar::new(),
            trigger: AtomicU64::new(u64::MAX),
            sync_waited: AtomicBool::new(false),
        });
        let thread = if background {
            let worker = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name("factlog-prealloc".into())
                .spawn(move || worker.run());
            Some(spawned.map_err(|e| Error::io("spawn preallocator thread", dir, e))?)
        } else {
            None
        };
        Ok(Preallocator { shared, thread: Mutex::new(thread) })
    }

    /// The path and length of a synced preallocation file (its first growth step of zeros, or
    /// empty when space was short), waiting for it if needed. The caller must rename it away
    /// and then call [`Preallocator::request`].
    pub fn take(&self) -> Result<(&Path, u64)> {
        let first = growth_step_bytes_first(self.shared.segment_bytes);
        let mut state = self.shared.state.lock();
        if !self.shared.background {
            let full = self.shared.prepare()?;
            return Ok((&self.shared.path, if full { first } else { 0 }));
        }
        loop {
            if let Some(failure) = state.failure.take() {
                state.requested = true;
                self.shared.changed.notify_all();
                return Err(failure);
            }
            if state.ready {
                state.ready = false;
                // The length is asked of the file: `prepare` may have left it empty.
                let len = self
                    .shared
                    .fs
                    .open(&self.shared.path, OpenMode::Read)
                    .and_then(|f| f.len())
                    .map_err(|e| Error::io("stat", &self.shared.path, e))?;
                return Ok((&self.shared.path, len));
            }
            self.shared.changed.wait(&mut state);
        }
    }

    /// Asks for the next file, after the previous one was renamed into a segment.
    pub fn request(&self) {
        let mut state = self.shared.state.lock();
        state.requested = true;
        self.shared.changed.notify_all();
    }

    /// Makes the segment at `path`, `len` bytes long now, the active segment to grow, up to
    /// `capacity`. The growth opens a handle of its own on it; if it cannot, the writer
    /// extends the file with its appends.
    pub fn activate(&self, path: Arc<Path>, len: u64, capacity: u64) {
        let file = self.shared.fs.open(&path, OpenMode::ReadWrite);
        let mut state = self.shared.state.lock();
        assert!(state.active.is_none(), "one active segment at a time");
        let Ok(file) = file else {
            // No growth for this segment (no file descriptor to spare, say): its appends
            // extend it, and the next segment tries again.
            self.shared.trigger.store(u64::MAX, Ordering::Release);
            return;
        };
        let half_step = growth_step_bytes_first(self.shared.segment_bytes) / 2;
        let trigger = if self.shared.background && len < capacity {
            len.saturating_sub(half_step)
        } else {
            len
        };
        state.active = Some(Active {
            file: Arc::from(file),
            path,
            end: len,
            capacity,
            growing: false,
            wanted: false,
            stopped: false,
            failed: false,
        });
        self.shared.trigger.store(trigger, Ordering::Release);
    }

    /// Stops growing the active segment, waiting for a step in flight to finish, before the
    /// writer seals it: the seal's `fdatasync` then covers every zero written into it. Returns
    /// whether a step on it failed: its zeros may be unsynced (and the growth's handle took
    /// the error), so the seal must `fdatasync` the segment on the writer's handle even if
    /// every record in it is durable already.
    #[must_use]
    pub fn retire(&self) -> bool {
        let mut state = self.shared.state.lock();
        while state.active.as_ref().is_some_and(|a| a.growing) {
            self.shared.changed.wait(&mut state);
        }
        let failed = state.active.take().is_some_and(|a| a.failed);
        self.shared.trigger.store(u64::MAX, Ordering::Release);
        failed
    }

    /// Whether a growth step on the active segment failed (see [`Preallocator::retire`]): a
    /// clean close then syncs the segment on the writer's handle before it vouches for it.
    pub fn step_failed(&self) -> bool {
        self.shared.state.lock().active.as_ref().is_some_and(|a| a.failed)
    }

    /// Called by the writer, under its `io` lock, before it writes the active segment up to
    /// `write_end`. Returns at once (one atomic load) unless the write reaches the point where
    /// the next step is due or the end of the grown file.
    pub fn room_for(&self, write_end: u64) {
        if write_end <= self.shared.trigger.load(Ordering::Acquire) {
            return;
        }
        self.shared.room_for_slow(write_end);
    }

    /// Tells the growth that a caller is about to wait for an `fdatasync` (a `Synced` append,
    /// a `flush(Synced)`): from then on it writes zeros ahead of the writer, so that the syncs
    /// waited for have only data to flush. One atomic load once it knows.
    pub fn sync_waited(&self) {
        if self.shared.sync_waited.load(Ordering::Relaxed) {
            return;
        }
        let mut state = self.shared.state.lock();
        if self.shared.sync_waited.swap(true, Ordering::AcqRel) {
            return;
        }
        // The first time: ask for a step from the end of the file at once, rather than
        // letting the next write find the end reached (a writer wait, and a doubled step).
        if let Some(active) = state.active.as_mut()
            && self.shared.background
            && !active.stopped
            && active.end < active.capacity
        {
            active.wanted = true;
            self.shared.changed.notify_all();
        }
        // Without a background thread, the next write past the end grows the file inline.
        drop(state);
    }

    /// What the preallocator did so far.
    pub fn stats(&self) -> PreallocStats {
        self.shared.state.lock().stats
    }

    /// Stops the background thread, waiting for a preallocation in progress to finish.
    pub fn stop(&self) {
        self.shared.state.lock().shutdown = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn room_for_slow(&self, write_end: u64) {
        let mut state = self.state.lock();
        let mut counted = false;
        loop {
            let waited = self.sync_waited.load(Ordering::Acquire);
            let Some(active) = state.active.as_mut() else { return };
            if write_end <= active.end {
                let more = active.end < active.capacity && !active.stopped && waited;
                if active.growing {
                    // Halfway through what was left and the step is not done: the writer
                    // keeps catching up. Writes below `end` need nothing more until it is.
                    self.trigger.store(active.end, Ordering::Release);
                    state.caught_up = true;
                } else if self.background && more {
                    active.wanted = true;
                    self.changed.notify_all();
                    // A second look halfway through what is left.
                    let halfway = write_end + (active.end - write_end) / 2;
                    self.trigger.store(halfway, Ordering::Release);
                } else {
                    self.trigger.store(active.end, Ordering::Release);
                }
                return;
            }
            if active.stopped {
                // The writer's own write extends the file; the growth resumes, if at all, in
                // the next segment.
                active.end = write_end;
                self.trigger.store(write_end, Ordering::Release);
                return;
            }
            if !waited && !active.growing {
                // Nobody waits for a sync yet: the writer's own write extends the file, and
                // the growth starts from there once somebody does.
                active.end = write_end;
                self.trigger.store(write_end, Ordering::Release);
                return;
            }
            let growing = active.growing;
            if !counted {
                counted = true;
                state.stats.writer_waits += 1;
                state.caught_up = true;
            }
            if growing {
                self.changed.wait(&mut state);
            } else if self.background {
                // The thread is busy (preparing the next segment's file, say): the writer's
                // own write extends the file rather than writing and syncing zeros on the
                // append path, and the thread grows the file from there once it is free.
                let active = state.active.as_mut().expect("checked above");
                active.end = write_end;
                active.wanted = true;
                self.trigger.store(write_end, Ordering::Release);
                self.changed.notify_all();
                return;
            } else {
                state = self.grow(state, write_end);
            }
        }
    }

    /// The size of the next step: the first step without a background thread (so that tests
    /// see the same operations every run); else twice the last one if the writer kept catching
    /// up with it, the first step again after a pause, and the last one otherwise.
    fn next_step(&self, state: &mut State) -> u64 {
        let first = growth_step_bytes_first(self.segment_bytes);
        if !self.background {
            return first;
        }
        let idle = Duration::from_millis(GROWTH_IDLE_MS);
        let paused = state.last_grown.is_none_or(|at| at.elapsed() >= idle);
        state.step = if std::mem::take(&mut state.caught_up) {
            (state.step * 2).min(growth_step_bytes_max(self.segment_bytes))
        } else if paused {
            first
        } else {
            state.step
        };
        state.step
    }

    /// Appends one step of zeros to the active segment (at least up to `at_least`) and syncs
    /// it, with the state lock released while it writes. Each chunk of zeros is handed to the
    /// writer as soon as it is written ([`Active::end`]), so a writer that catches up waits
    /// for one chunk's `write`, never for the step's `fdatasync`. Space short or a failed step
    /// stops the growth of this segment.
    fn grow<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        at_least: u64,
    ) -> MutexGuard<'a, State> {
        let step = self.next_step(&mut state);
        let Some(active) = state.active.as_mut() else { return state };
        active.wanted = false;
        let target = active.end.saturating_add(step).max(at_least);
        let target = target.div_ceil(SEGMENT_BYTES_ALIGN) * SEGMENT_BYTES_ALIGN;
        let target = target.min(active.capacity).max(at_least);
        let from = active.end;
        if target <= from {
            return state;
        }
        if !self.has_room(target - from) {
            active.stopped = true;
            return state;
        }
        active.growing = true;
        let file = Arc::clone(&active.file);
        let path = Arc::clone(&active.path);
        drop(state);
        let mut written = from;
        let mut outcome = Ok(());
        while written < target {
            let chunk = (target - written).min(ZERO_CHUNK_BYTES as u64);
            if let Err(e) = segments::write_zeros(&*file, &path, written, chunk) {
                outcome = Err(e);
                break;
            }
            written += chunk;
            let mut state = self.state.lock();
            if let Some(active) = state.active.as_mut() {
                active.end = written;
            }
            self.changed.notify_all();
        }
        let outcome =
            outcome.and_then(|()| file.sync_data().map_err(|e| Error::io("fdatasync", &path, e)));
        let mut state = self.state.lock();
        // A segment is retired only once its step in flight is done.
        let Some(active) = state.active.as_mut() else { return state };
        active.growing = false;
        if outcome.is_ok() {
            let trigger = if self.background && target < active.capacity {
                target - step / 2
            } else {
                target
            };
            self.trigger.store(trigger.max(from), Ordering::Release);
            state.last_grown = Some(Instant::now());
            state.stats.growth_steps += 1;
            state.stats.growth_bytes += target - from;
        } else {
            // Zeros may have been appended past `end`: the writer's records overwrite them.
            // The writer may already have written records over the zeros below `end`: a
            // failed `fdatasync` here is reported again by the writer's own next one, on its
            // own handle, and poisons it there: the seal syncs it for that ([`Preallocator::retire`]).
            active.stopped = true;
            active.failed = true;
            self.trigger.store(active.end, Ordering::Release);
        }
        self.changed.notify_all();
        state
    }

    /// Whether `bytes` more fit with the margin to spare. A file system that cannot say is
    /// assumed to have room: a preallocation that fails gives its space back.
    fn has_room(&self, bytes: u64) -> bool {
        let Ok(space) = self.fs.space(&self.dir) else { return true };
        let needed =
            bytes.saturating_add(prealloc_free_bytes_min(self.segment_bytes, space.total_bytes));
        space.available_bytes >= needed
    }

    /// Prepares `prealloc.tmp`; `Ok(false)` when space was short and it is left empty.
    fn prepare(&self) -> Result<bool> {
        let first = growth_step_bytes_first(self.segment_bytes);
        if self.reusable(first) {
            return Ok(true);
        }
        self.remove()?;
        if !self.has_room(first) {
            // Quietly no preallocation: the segment grows as it is appended to.
            segments::preallocate(&*self.fs, &self.path, 0)?;
            return Ok(false);
        }
        let outcome = segments::preallocate(&*self.fs, &self.path, first);
        if let Err(e) = &outcome
            && matches!(e.kind(), ErrorKind::DiskFull { .. })
        {
            // Give the space back; the next attempt asks the file system first.
            let _ = self.remove();
        }
        outcome.map(|()| true)
    }

    fn remove(&self) -> Result<()> {
        match self.fs.remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", &self.path, e)),
        }
    }

    /// Whether a file left by an earlier run is complete: `len` bytes, all zero. Read back in
    /// bounded chunks (not mapped), which costs less than writing it again and happens off
    /// the append path.
    fn reusable(&self, len: u64) -> bool {
        let Ok(file) = self.fs.open(&self.path, OpenMode::Read) else { return false };
        if !file.len().is_ok_and(|found| found == len) {
            return false;
        }
        let mut chunk = vec![0u8; ZERO_CHUNK_BYTES];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(ZERO_CHUNK_BYTES as u64) as usize;
            let Some(buf) = chunk.get_mut(..n) else { return false };
            if file.read_exact_at(buf, at).is_err() || buf.iter().any(|&b| b != 0) {
                return false;
            }
            at += n as u64;
        }
        true
    }

    fn run(&self) {
        let mut state = self.state.lock();
        loop {
            if state.shutdown {
                return;
            }
            let grow = state.active.as_ref().is_some_and(|a| a.wanted && !a.growing && !a.stopped);
            if grow {
                let at_least = state.active.as_ref().map_or(0, |a| a.end);
                state = self.grow(state, at_least);
                continue;
            }
            if !state.requested {
                self.changed.wait(&mut state);
                continue;
            }
            state.requested = false;
            drop(state);
            let outcome = self.prepare();
            state = self.state.lock();
            match outcome {
                Ok(_) => state.ready = true,
                Err(e) => state.failure = Some(e),
            }
            self.changed.notify_all();
        }
    }
}
