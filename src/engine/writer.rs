//! The append path: the buffer, the durability tiers, group commit, segment rolls and the
//! background flusher.
//!
//! Locks, always taken in this order: `state` (the buffer and sequence numbers; the one lock
//! of the hot path), then `io` (the active file and its write offset; serialises writes in
//! log order). `sync` only guards which thread leads a group commit and is never held while
//! the other two are taken. No lock is held during the `fdatasync` of a group commit; a roll
//! syncs the sealed segment and writes the log mark under the state lock (once a segment).
//! `mark` (then `durable_pos`) and `pending_cut` are taken after the others and never wait
//! for them.
//!
//! Invariants: `durable_seq <= written_seq <= appended_seq`; bytes reach the file in sequence
//! order, at consecutive offsets; a sealed segment was fully synced before the next one got
//! its name; a failed `write` or `fdatasync` poisons the writer and nothing is retried on the
//! same data.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::engine::frame;
use crate::engine::mark::{Mark, MarkKeeper};
use crate::engine::prealloc::{PreallocStats, Preallocator};
use crate::engine::segment::SegmentHeader;
use crate::engine::segments::{self, SegmentMeta};
use crate::engine::watch::SeqWatch;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::{Fs, FsFile, OpenMode};
use crate::limits::{
    BATCH_RECORDS_MAX, BUFFER_FLUSH_FRACTION, FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_MAX,
    GROUP_COMMIT_WAIT_US_MAX, SEGMENT_HEADER_BYTES,
};
use crate::types::{Durability, SegmentId, Seq};

/// Where the writer starts: the recovered end of the active segment.
pub(crate) struct WriterStart {
    pub dir: PathBuf,
    pub fs: Arc<dyn Fs>,
    pub segments: Vec<SegmentMeta>,
    pub active_file: Box<dyn FsFile>,
    /// The length of the active segment's file now.
    pub active_file_bytes: u64,
    pub active_capacity: u64,
    pub end_offset: u64,
    pub next_seq: u64,
    pub segment_bytes: u64,
    pub buffer_bytes: usize,
    pub flush_delay: Duration,
    pub prealloc: Preallocator,
    /// The mark, with the open's waiting to be written before the first write.
    pub mark: MarkKeeper,
    /// The torn tail open found in the active segment (offset, bytes): zeroed and synced
    /// before the first write, so that a store refused after its log opened changes nothing.
    pub pending_cut: Option<(u64, u64)>,
    pub mark_interval: Duration,
    /// Whether the flusher thread updates the mark (else the sync that finds it due does).
    pub mark_in_flusher: bool,
}

/// How far the log is known durable: the last synced seq, where its frames end, and in which
/// segment. Moves forward only.
#[derive(Clone, Copy)]
struct DurablePos {
    seq: u64,
    offset: u64,
    segment: SegmentId,
}

struct State {
    buf: Vec<u8>,
    next_seq: u64,
    end_offset: u64,
    capacity: u64,
    active: SegmentHeader,
    salt_crc: u32,
    flush_requested: bool,
}

struct Io {
    spare: Vec<u8>,
    file: Arc<dyn FsFile>,
    path: Arc<Path>,
    offset: u64,
}

/// What the flusher thread is told, under the `flusher` lock.
#[derive(Default)]
struct FlusherSignal {
    /// A quarter of the buffer filled up: write it out now (and group-commit if the flush
    /// delay is up).
    wake: bool,
    /// A record was appended while the flusher was parked: look again at what is due.
    nudged: bool,
    shutdown: bool,
}

thread_local! {
    /// While a [`DeferredSyncs`] scope is open on this thread: the highest seq whose `Synced`
    /// append returned before its sync (0: none yet). `None`: no scope is open.
    static DEFERRED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Records `last` as deferred when a [`DeferredSyncs`] scope is open on this thread.
fn defer(last: u64) -> bool {
    DEFERRED.with(|deferred| match deferred.get() {
        Some(through) => {
            deferred.set(Some(through.max(last)));
            true
        }
        None => false,
    })
}

/// A scope of one thread in which a `Synced` append returns as soon as its records are
/// written and the flusher is told, without waiting for the `fdatasync` (a served store's
/// connection, which hands its reply to the thread that leads the next group commit instead
/// of sleeping through it: `format-spec/server.md`, "Group commit"). What the scope
/// deferred is had from [`DeferredSyncs::close`]; nothing may acknowledge it before
/// [`Writer::sync_through`] covered it. A scope dropped without `close` (a panic) syncs
/// what it deferred, so that nothing leaves it undurable unnoticed.
pub(crate) struct DeferredSyncs<'a> {
    writer: &'a Writer,
    closed: bool,
}

impl DeferredSyncs<'_> {
    /// Closes the scope: the highest seq whose sync it deferred, `None` when it deferred none.
    pub(crate) fn close(mut self) -> Option<u64> {
        self.closed = true;
        DEFERRED.with(Cell::take).filter(|&seq| seq > 0)
    }
}

impl Drop for DeferredSyncs<'_> {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        if let Some(seq) = DEFERRED.with(Cell::take).filter(|&seq| seq > 0) {
            // A failure poisons the writer: the next call says so.
            let _ = self.writer.sync_through(seq);
        }
    }
}

/// The shared writer of one log.
pub(crate) struct Writer {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    segment_bytes: u64,
    buffer_bytes: usize,
    flush_bytes: usize,
    flush_delay: Duration,
    state: Mutex<State>,
    io: Mutex<Io>,
    /// Whether a group commit is running. A `std` mutex and condvar, not `parking_lot`'s:
    /// `notify_all` must wake every follower at once (a futex wake of all waiters) instead of
    /// requeueing them onto the mutex to be released one by one, which serialises the wakeup
    /// of a whole group behind as many context switches as it has members.
    syncing: std::sync::Mutex<bool>,
    synced: std::sync::Condvar,
    /// Threads inside a `Synced` append, and `Synced` records encoded since the last
    /// group commit wrote the buffer out (both changed under the `state` lock): a leader waits,
    /// briefly, until every such thread has a record in the next group.
    synced_active: AtomicUsize,
    synced_fresh: AtomicUsize,
    appended_seq: AtomicU64,
    /// Threads waiting for `appended_seq` to reach a seq ([`Writer::wait_appended`]).
    appended_watch: SeqWatch,
    written_seq: AtomicU64,
    durable_seq: AtomicU64,
    /// The highest seq whose `Synced` append returned before its sync, in a
    /// [`DeferredSyncs`] scope: whoever answers for the store waits for it first.
    deferred_through: AtomicU64,
    poisoned: AtomicBool,
    poison_cause: Mutex<Option<String>>,
    flusher: Mutex<FlusherSignal>,
    flusher_wake: Condvar,
    /// Whether the flusher is parked: blocked with nothing to do until an append nudges it.
    /// Read by every append (one atomic load, no lock, no syscall); only the append that
    /// clears it takes the `flusher` lock to wake the thread.
    flusher_parked: AtomicBool,
    segments: Mutex<Vec<SegmentMeta>>,
    prealloc: Preallocator,
    /// Taken after `segments` when both are, never while `state` waits for `io`.
    mark: Mutex<MarkKeeper>,
    /// Whether the open's deferred work (the cut of a torn tail, the open's mark) still waits
    /// to be done before the first write (checked before every write-out, not per record).
    open_pending: AtomicBool,
    /// The torn tail open found, zeroed before the first write ([`Writer::finish_open`]).
    pending_cut: Mutex<Option<(u64, u64)>>,
    mark_interval: Duration,
    mark_in_flusher: bool,
    durable_pos: Mutex<DurablePos>,
}

impl Writer {
    /// A writer continuing the log at `start`. Everything before `start.next_seq` must be
    /// durable already.
    pub(crate) fn new(start: WriterStart) -> Writer {
        let active = start.segments.last().expect("a writer has an active segment").clone();
        let last = start.next_seq - 1;
        let file: Arc<dyn FsFile> = Arc::from(start.active_file);
        let path: Arc<Path> = Arc::from(active.path.as_path());
        start.prealloc.activate(Arc::clone(&path), start.active_file_bytes, start.active_capacity);
        Writer {
            dir: start.dir,
            fs: start.fs,
            segment_bytes: start.segment_bytes,
            buffer_bytes: start.buffer_bytes,
            flush_bytes: start.buffer_bytes / BUFFER_FLUSH_FRACTION,
            flush_delay: start.flush_delay,
            state: Mutex::new(State {
                buf: Vec::with_capacity(start.buffer_bytes),
                next_seq: start.next_seq,
                end_offset: start.end_offset,
                capacity: start.active_capacity,
                salt_crc: active.header.salt_crc(),
                active: active.header,
                flush_requested: false,
            }),
            io: Mutex::new(Io {
                spare: Vec::with_capacity(start.buffer_bytes),
                file,
                path,
                offset: start.end_offset,
            }),
            syncing: std::sync::Mutex::new(false),
            synced: std::sync::Condvar::new(),
            synced_active: AtomicUsize::new(0),
            synced_fresh: AtomicUsize::new(0),
            appended_seq: AtomicU64::new(last),
            appended_watch: SeqWatch::default(),
            written_seq: AtomicU64::new(last),
            durable_seq: AtomicU64::new(last),
            deferred_through: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
            poison_cause: Mutex::new(None),
            flusher: Mutex::new(FlusherSignal::default()),
            flusher_wake: Condvar::new(),
            flusher_parked: AtomicBool::new(false),
            segments: Mutex::new(start.segments),
            prealloc: start.prealloc,
            durable_pos: Mutex::new(DurablePos {
                seq: last,
                offset: start.end_offset,
                segment: active.header.id,
            }),
            mark: Mutex::new(start.mark),
            open_pending: AtomicBool::new(true),
            pending_cut: Mutex::new(start.pending_cut),
            mark_interval: start.mark_interval,
            mark_in_flusher: start.mark_in_flusher,
        }
    }

    /// The largest record (or batch payload) that fits in a new segment.
    fn payload_bytes_max(&self) -> usize {
        let room = self.segment_bytes as usize - SEGMENT_HEADER_BYTES - FRAME_HEADER_BYTES;
        FRAME_PAYLOAD_BYTES_MAX.min(room - room % 8)
    }

    fn check_payload(&self, what: &'static str, bytes: usize) -> Result<()> {
        let limit = self.payload_bytes_max();
        if bytes > limit {
            return Err(ErrorKind::LimitExceeded {
                what,
                value: bytes as u64,
                limit: limit as u64,
            }
            .into());
        }
        Ok(())
    }

    /// Appends one record.
    pub(crate) fn append(&self, payload: &[u8], durability: Durability) -> Result<Seq> {
        self.check_payload("record bytes", payload.len())?;
        let _active = Counted::enter(&self.synced_active, durability == Durability::Synced);
        let frame_len = frame::frame_bytes(payload.len());
        let (state, seq) = self.reserve(frame_len, 1, |out, salt_crc, seq, durable| {
            frame::encode_single(out, salt_crc, seq, durable, payload);
            Ok(())
        })?;
        self.complete(state, seq, durability)?;
        Ok(Seq(seq))
    }

    /// Appends one record of `payload_len` bytes that `fill` writes in place, under the state
    /// lock, given the record's sequence number. If `fill` fails, nothing is appended.
    pub(crate) fn append_with(
        &self,
        payload_len: usize,
        durability: Durability,
        fill: impl FnOnce(Seq, &mut [u8]) -> Result<()>,
    ) -> Result<Seq> {
        self.check_payload("record bytes", payload_len)?;
        let _active = Counted::enter(&self.synced_active, durability == Durability::Synced);
        let frame_len = frame::frame_bytes(payload_len);
        let (state, seq) = self.reserve(frame_len, 1, |out, salt_crc, seq, durable| {
            frame::encode_single_with(out, salt_crc, seq, durable, payload_len, |p| {
                fill(Seq(seq), p)
            })
        })?;
        self.complete(state, seq, durability)?;
        Ok(Seq(seq))
    }

    /// Checks a batch against the limits; returns its payload bytes.
    fn check_batch<P: AsRef<[u8]>>(&self, records: &[P]) -> Result<usize> {
        if records.is_empty() || records.len() > BATCH_RECORDS_MAX {
            return Err(ErrorKind::LimitExceeded {
                what: "batch records (at least 1)",
                value: records.len() as u64,
                limit: BATCH_RECORDS_MAX as u64,
            }
            .into());
        }
        let payload = frame::batch_payload_bytes(records);
        self.check_payload("batch payload bytes", payload)?;
        Ok(payload)
    }

    /// Appends several records as one all-or-nothing frame; returns the first one's seq.
    pub(crate) fn append_batch<P: AsRef<[u8]>>(
        &self,
        records: &[P],
        durability: Durability,
    ) -> Result<Seq> {
        let payload = self.check_batch(records)?;
        let _active = Counted::enter(&self.synced_active, durability == Durability::Synced);
        let frame_len = frame::frame_bytes(payload);
        let count = records.len() as u64;
        let (state, first) = self.reserve(frame_len, count, |out, salt_crc, seq, durable| {
            frame::encode_batch(out, salt_crc, seq, durable, records);
            Ok(())
        })?;
        self.complete(state, first + count - 1, durability)?;
        Ok(Seq(first))
    }

    /// Appends `records` as one batch frame after `gate` has seen the first sequence number
    /// under the state lock. `gate` may patch the records in place (their lengths must not
    /// change) or refuse, in which case nothing is appended.
    pub(crate) fn append_batch_with(
        &self,
        records: &mut [Vec<u8>],
        durability: Durability,
        gate: impl FnOnce(Seq, &mut [Vec<u8>]) -> Result<()>,
    ) -> Result<Seq> {
        let payload = self.check_batch(records)?;
        let _active = Counted::enter(&self.synced_active, durability == Durability::Synced);
        let frame_len = frame::frame_bytes(payload);
        let count = records.len() as u64;
        let (state, first) = self.reserve(frame_len, count, |out, salt_crc, seq, durable| {
            gate(Seq(seq), records)?;
            assert_eq!(frame::batch_payload_bytes(records), payload, "a gate keeps lengths");
            frame::encode_batch(out, salt_crc, seq, durable, records);
            Ok(())
        })?;
        self.complete(state, first + count - 1, durability)?;
        Ok(Seq(first))
    }

    /// Encodes a frame of `frame_len` bytes holding `count` records into the buffer, rolling
    /// the segment or writing the buffer out first when needed. Returns the locked state and
    /// the frame's first sequence number.
    fn reserve(
        &self,
        frame_len: usize,
        count: u64,
        encode: impl FnOnce(&mut Vec<u8>, u32, u64, u64) -> Result<()>,
    ) -> Result<(MutexGuard<'_, State>, u64)> {
        let mut encode = Some(encode);
        loop {
            let mut state = self.state.lock();
            self.check_poison()?;
            if state.next_seq.checked_add(count).is_none() {
                // A frame's `seq + count` must fit in a u64 (`format-spec/record.md`).
                return Err(ErrorKind::LimitExceeded {
                    what: "sequence number",
                    value: state.next_seq,
                    limit: u64::MAX - count,
                }
                .into());
            }
            if state.end_offset + frame_len as u64 > state.capacity {
                self.roll(&mut state, frame_len)?;
            }
            let fits = state.buf.len() + frame_len <= self.buffer_bytes;
            if !fits && frame_len <= self.buffer_bytes {
                // A flush is due: write the full buffer, then try again.
                self.write_out(state)?;
                continue;
            }
            let seq = state.next_seq;
            let durable = self.durable_seq.load(Ordering::Acquire);
            let salt_crc = state.salt_crc;
            let encode = encode.take().expect("a frame is encoded once");
            if fits {
                let before = state.buf.len();
                if let Err(e) = encode(&mut state.buf, salt_crc, seq, durable) {
                    state.buf.truncate(before);
                    return Err(e);
                }
                assert_eq!(state.buf.len() - before, frame_len);
            } else {
                // Rare: one frame larger than the whole buffer. Bounded by the payload limit.
                let mut big = Vec::with_capacity(frame_len);
                encode(&mut big, salt_crc, seq, durable)?;
                assert_eq!(big.len(), frame_len);
                let mut io = self.io.lock();
                // Another thread's write may have failed since the check above.
                self.check_poison()?;
                self.swap_into(&mut state, &mut io);
                self.write_spare(&mut io, seq - 1)?;
                if self.open_pending.load(Ordering::Acquire) {
                    self.finish_open(&io)?;
                }
                self.prealloc.room_for(io.offset + big.len() as u64);
                if let Err(e) = io.file.write_all_at(&big, io.offset) {
                    return Err(self.poison(Error::io("write", &io.path, e)));
                }
                io.offset += big.len() as u64;
                self.written_seq.fetch_max(seq + count - 1, Ordering::AcqRel);
            }
            state.next_seq += count;
            state.end_offset += frame_len as u64;
            // `SeqCst`, before the watch reads its flag (in `complete`): no waiter misses it.
            self.appended_seq.store(state.next_seq - 1, Ordering::SeqCst);
            return Ok((state, seq));
        }
    }

    /// Meets `durability` for everything through `last`, the record just reserved. The
    /// waiters of [`Writer::wait_appended`] are told once the state lock is released, so a
    /// wake never runs under it.
    fn complete(
        &self,
        state: MutexGuard<'_, State>,
        last: u64,
        durability: Durability,
    ) -> Result<()> {
        match durability {
            Durability::Buffered => {
                let due = !state.flush_requested && state.buf.len() >= self.flush_bytes;
                let mut state = state;
                if due {
                    state.flush_requested = true;
                }
                drop(state);
                self.appended_watch.appended();
                if due {
                    self.wake_flusher();
                } else {
                    self.nudge_flusher();
                }
                Ok(())
            }
            Durability::Flushed => {
                let written = self.write_out(state).map(|_| ());
                self.appended_watch.appended();
                self.nudge_flusher();
                written
            }
            Durability::Synced => {
                self.synced_fresh.fetch_add(1, Ordering::AcqRel);
                // Recorded under the state lock, before anyone is told of the record: a
                // reader that saw it (its revision, a waiter woken) and then reads
                // `deferred_through` under this lock sees its seq.
                let deferred = defer(last);
                if deferred {
                    self.deferred_through.fetch_max(last, Ordering::AcqRel);
                }
                drop(state);
                self.prealloc.sync_waited();
                self.appended_watch.appended();
                // The sync is this thread's; the flusher still owes the mark an update.
                self.nudge_flusher();
                if deferred {
                    // The caller's scope answers for it: it waits (or has it waited for)
                    // before anything acknowledges this record.
                    return Ok(());
                }
                self.sync_through(last)
            }
        }
    }

    /// A caller is about to wait for a sync (`Log::flush(Synced)`; a `Synced` append says so
    /// itself): the growth writes zeros ahead from now on. Not the close's own sync.
    pub(crate) fn sync_waited(&self) {
        self.prealloc.sync_waited();
    }

    /// Opens a scope in which a `Synced` append on this thread returns once its records are
    /// written, without waiting for their sync ([`DeferredSyncs`]).
    pub(crate) fn defer_syncs(&self) -> DeferredSyncs<'_> {
        DEFERRED.with(|deferred| {
            assert!(deferred.get().is_none(), "one deferral scope at a time on a thread");
            deferred.set(Some(0));
        });
        DeferredSyncs { writer: self, closed: false }
    }

    /// The highest seq whose sync a [`DeferredSyncs`] scope deferred (0: none ever), read
    /// under the state lock: every record a caller could have seen before is counted.
    pub(crate) fn deferred_through(&self) -> u64 {
        let _state = self.state.lock();
        self.deferred_through.load(Ordering::Acquire)
    }

    /// Makes everything appended so far meet `durability`.
    pub(crate) fn flush(&self, durability: Durability) -> Result<()> {
        let state = self.state.lock();
        self.check_poison()?;
        let last = state.next_seq - 1;
        if durability == Durability::Synced {
            drop(state);
            return self.sync_through(last);
        }
        self.write_out(state).map(|_| ())
    }

    fn swap_into(&self, state: &mut State, io: &mut Io) {
        assert!(io.spare.is_empty(), "the spare buffer is empty between writes");
        if !state.buf.is_empty() {
            std::mem::swap(&mut state.buf, &mut io.spare);
            state.flush_requested = false;
        }
    }

    /// Writes the buffer to the file, releasing the state lock before the `write` so that
    /// appenders go on filling the other buffer. Returns the seq written through.
    fn write_out(&self, mut state: MutexGuard<'_, State>) -> Result<u64> {
        let mut io = self.io.lock();
        self.check_poison()?;
        let through = state.next_seq - 1;
        self.swap_into(&mut state, &mut io);
        drop(state);
        self.write_spare(&mut io, through)
    }

    fn write_spare(&self, io: &mut Io, through: u64) -> Result<u64> {
        if self.open_pending.load(Ordering::Acquire) && !io.spare.is_empty() {
            self.finish_open(io)?;
        }
        if !io.spare.is_empty() {
            self.prealloc.room_for(io.offset + io.spare.len() as u64);
            if let Err(e) = io.file.write_all_at(&io.spare, io.offset) {
                return Err(self.poison(Error::io("write", &io.path, e)));
            }
            io.offset += io.spare.len() as u64;
            io.spare.clear();
        }
        self.written_seq.fetch_max(through, Ordering::AcqRel);
        Ok(through)
    }

    /// Group commit: returns once `target` is durable. One thread at a time leads: it writes
    /// out everything buffered and syncs once for every record written before it.
    pub(crate) fn sync_through(&self, target: u64) -> Result<()> {
        // The guarded flag stays consistent even if a thread panicked while holding the lock.
        let lock = || self.syncing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut syncing = lock();
        loop {
            if self.durable_seq.load(Ordering::Acquire) >= target {
                return Ok(());
            }
            self.check_poison()?;
            if *syncing {
                // Wait for the running sync on the condition variable at once. Polling the
                // durable seq instead (yielding the CPU) was measured slower with many
                // appenders, in threads and in client processes of a served store alike: the
                // pollers take the cores from the threads that have records to encode. The
                // leader clears the flag and notifies under this lock: no lost wake-up.
                syncing =
                    self.synced.wait(syncing).unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            *syncing = true;
            drop(syncing);
            self.gather_group();
            let outcome = self.lead_sync();
            syncing = lock();
            *syncing = false;
            self.synced.notify_all();
            outcome?;
        }
    }

    /// Before a leader writes out, gives the other threads inside a `Synced` append (for
    /// instance those just released by the previous sync) a moment to encode their records, so
    /// that one `fdatasync` covers all of them instead of every other one. Returns at once when
    /// no other synced append is in flight, and after `GROUP_COMMIT_WAIT_US_MAX` at most.
    fn gather_group(&self) {
        // Threads just released by the previous sync are still counted as active until they
        // return; they stop holding the group back as soon as they leave or append again.
        let pending = || {
            self.synced_fresh.load(Ordering::Acquire) < self.synced_active.load(Ordering::Acquire)
        };
        if !pending() {
            return;
        }
        let deadline = Instant::now() + Duration::from_micros(GROUP_COMMIT_WAIT_US_MAX);
        while pending() && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }

    fn lead_sync(&self) -> Result<()> {
        let state = self.state.lock();
        let mut io = self.io.lock();
        self.check_poison()?;
        let through = state.next_seq - 1;
        let segment = state.active.id;
        let mut state = state;
        self.synced_fresh.store(0, Ordering::Release);
        self.swap_into(&mut state, &mut io);
        drop(state);
        self.write_spare(&mut io, through)?;
        let file = Arc::clone(&io.file);
        let path = Arc::clone(&io.path);
        // Under the io lock, the file holds exactly the frames through `through`.
        let pos = DurablePos { seq: through, offset: io.offset, segment };
        drop(io);
        // Records before `through` that are not in `file` are in sealed segments, which were
        // synced when they were sealed.
        if let Err(e) = file.sync_data() {
            return Err(self.poison(Error::io("fdatasync", &path, e)));
        }
        self.durable_seq.fetch_max(through, Ordering::AcqRel);
        {
            let mut durable = self.durable_pos.lock();
            if pos.seq > durable.seq {
                *durable = pos;
            }
        }
        if !self.mark_in_flusher {
            // The records are durable whatever happens to the mark: a failed mark write
            // poisons the writer for the appends after this one, not this one.
            let _ = self.update_mark(false);
        }
        Ok(())
    }

    /// Writes the mark if it is due: the durable end moved past the mark's and the mark
    /// interval has passed since the last update (`force`: at once). A mark that names an older
    /// segment than the durable position is left to the roll that moved on.
    fn update_mark(&self, force: bool) -> Result<()> {
        let mut mark = self.mark.lock();
        let pos = *self.durable_pos.lock();
        let current = mark.current();
        let due = force || mark.since_written() >= self.mark_interval;
        if !due || pos.segment != current.last_segment || pos.seq <= current.durable_seq {
            return Ok(());
        }
        let next =
            Mark { clean: false, durable_seq: pos.seq, durable_offset: pos.offset, ..current };
        mark.write(next).map_err(|e| self.poison(e))
    }

    /// The open's deferred work, before the first write to a segment (with the io lock held,
    /// so the active file is the one open found): the torn tail it found is zeroed and synced,
    /// then the open's mark is written (`format-spec/recovery.md`, step 9).
    fn finish_open(&self, io: &Io) -> Result<()> {
        self.cut_pending(io)?;
        let mut mark = self.mark.lock();
        mark.write_pending().map_err(|e| self.poison(e))?;
        self.open_pending.store(false, Ordering::Release);
        Ok(())
    }

    /// Zeroes and syncs the torn tail open found, if it is still there.
    fn cut_pending(&self, io: &Io) -> Result<()> {
        if let Some((offset, bytes)) = self.pending_cut.lock().take() {
            segments::write_zeros(&*io.file, &io.path, offset, bytes)
                .and_then(|()| io.file.sync_data().map_err(|e| Error::io("fdatasync", &io.path, e)))
                .map_err(|e| self.poison(e))?;
        }
        Ok(())
    }

    /// Cuts the torn tail open found now, if no write did yet: at a close, and before a
    /// rewrite reads the segments. The mark is left as open found it (it vouches for nothing
    /// the cut removed), so a log that was not written to keeps its `MARK` as it was.
    pub(crate) fn cut_torn_tail_now(&self) -> Result<()> {
        if self.pending_cut.lock().is_none() {
            return Ok(());
        }
        let io = self.io.lock();
        self.check_poison()?;
        self.cut_pending(&io)
    }

    /// Writes the mark at once if the durable end moved past it (the open's pending mark
    /// first, if no write did it yet).
    pub(crate) fn update_mark_now(&self) -> Result<()> {
        if self.open_pending.load(Ordering::Acquire) {
            let io = self.io.lock();
            self.check_poison()?;
            self.finish_open(&io)?;
        }
        self.update_mark(true)
    }

    /// At a clean close: the mark records exactly where the log ends, whether or not this open
    /// wrote (after a crash the mark found may lag the records the open found and synced). A
    /// log without a `MARK` that was not written to stays without one.
    pub(crate) fn close_mark(&self) -> Result<()> {
        if self.prealloc.step_failed() {
            // A failed growth step may have left unsynced zeros after the last frame, and its
            // error only on the growth's handle: this sync covers them, or reports the error.
            let io = self.io.lock();
            self.check_poison()?;
            if let Err(e) = io.file.sync_data() {
                return Err(self.poison(Error::io("fdatasync", &io.path, e)));
            }
        }
        let has_file = self.mark.lock().has_file();
        if !has_file && self.open_pending.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.open_pending.load(Ordering::Acquire) {
            let io = self.io.lock();
            self.check_poison()?;
            self.finish_open(&io)?;
        }
        self.mark_clean()
    }

    /// Marks the log cleanly closed: everything appended is synced (call after a synced
    /// flush), and the mark records exactly where it ends.
    pub(crate) fn mark_clean(&self) -> Result<()> {
        self.check_poison()?;
        let mut mark = self.mark.lock();
        let pos = *self.durable_pos.lock();
        let current = mark.current();
        if mark.is_pending() {
            // Nothing was written since open: the mark found is as true as it was.
            return Ok(());
        }
        if pos.segment != current.last_segment || pos.seq != self.appended_seq() {
            // Not everything is accounted for: leave the mark open, as after a crash.
            return Ok(());
        }
        let next =
            Mark { clean: true, durable_seq: pos.seq, durable_offset: pos.offset, ..current };
        mark.write(next).map_err(|e| self.poison(e))
    }

    /// Seals the active segment (written out and synced) and switches to a new one.
    fn roll(&self, state: &mut State, frame_len: usize) -> Result<()> {
        if state.next_seq == state.active.first_seq.0 {
            // An empty segment cannot be sealed: its successor would have the same name.
            let room = state.capacity.saturating_sub(state.end_offset);
            return Err(ErrorKind::LimitExceeded {
                what: "frame bytes in the active segment",
                value: frame_len as u64,
                limit: room,
            }
            .into());
        }
        let through = state.next_seq - 1;
        {
            let mut io = self.io.lock();
            self.check_poison()?;
            // No zeros may land in the segment after the `fdatasync` that seals it.
            let growth_failed = self.prealloc.retire();
            self.synced_fresh.store(0, Ordering::Release);
            self.swap_into(state, &mut io);
            self.write_spare(&mut io, through)?;
            if self.open_pending.load(Ordering::Acquire) {
                // A torn tail must be cut before the segment is sealed with it.
                self.finish_open(&io)?;
            }
            // A failed growth step may have left unsynced zeros after the last frame, and its
            // error only on the growth's handle: the writer's sync seals them and reports it.
            if growth_failed || self.durable_seq.load(Ordering::Acquire) < through {
                if let Err(e) = io.file.sync_data() {
                    return Err(self.poison(Error::io("fdatasync", &io.path, e)));
                }
                self.durable_seq.fetch_max(through, Ordering::AcqRel);
            }
        }
        // Nothing is lost if no file can be prepared: the append fails and a later one retries
        // (the retired segment is then grown by the writer's own writes, if at all).
        let (prealloc, prealloc_bytes) = self.prealloc.take()?;
        let next_id = SegmentId(state.active.id.0 + 1);
        let (file, meta) = segments::install(
            &*self.fs,
            &self.dir,
            prealloc,
            next_id,
            Seq(state.next_seq),
            state.active.format_version,
        )
        .map_err(|e| self.poison(e))?;
        {
            // No frame goes into the new segment before a mark names it: a crash before this
            // leaves an empty segment after the marked one, which open accepts.
            let mut mark = self.mark.lock();
            let current = mark.current();
            let next = Mark {
                clean: false,
                last_segment: meta.header.id,
                last_first_seq: meta.header.first_seq,
                last_salt: meta.header.salt,
                durable_seq: through,
                durable_offset: SEGMENT_HEADER_BYTES as u64,
                ..current
            };
            mark.write(next).map_err(|e| self.poison(e))?;
            *self.durable_pos.lock() = DurablePos {
                seq: through,
                offset: SEGMENT_HEADER_BYTES as u64,
                segment: meta.header.id,
            };
        }
        self.prealloc.request();
        {
            let mut io = self.io.lock();
            io.file = Arc::from(file);
            io.path = Arc::from(meta.path.as_path());
            io.offset = SEGMENT_HEADER_BYTES as u64;
            let file_bytes = prealloc_bytes.max(SEGMENT_HEADER_BYTES as u64);
            self.prealloc.activate(Arc::clone(&io.path), file_bytes, self.segment_bytes);
        }
        state.active = meta.header;
        state.salt_crc = meta.header.salt_crc();
        state.end_offset = SEGMENT_HEADER_BYTES as u64;
        state.capacity = self.segment_bytes;
        self.segments.lock().push(meta);
        Ok(())
    }

    fn poison(&self, error: Error) -> Error {
        let mut cause = self.poison_cause.lock();
        if cause.is_none() {
            *cause = Some(error.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
        error
    }

    fn check_poison(&self) -> Result<()> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        let cause = self.poison_cause.lock().clone().unwrap_or_default();
        Err(ErrorKind::Poisoned { cause }.into())
    }

    /// Whether an I/O failure poisoned the writer.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    fn wake_flusher(&self) {
        self.flusher.lock().wake = true;
        self.flusher_wake.notify_one();
    }

    /// Wakes the flusher if it is parked, after an append (whose `appended_seq` store is
    /// `SeqCst`, as the flag's accesses are: either this load sees the flag, or the flusher's
    /// check after setting it sees the record). On the hot path: one atomic load while the
    /// flusher is awake; the lock and the wake-up only for the first append after idle.
    fn nudge_flusher(&self) {
        if self.flusher_parked.load(Ordering::SeqCst)
            && self.flusher_parked.swap(false, Ordering::SeqCst)
        {
            self.flusher.lock().nudged = true;
            self.flusher_wake.notify_one();
        }
    }

    /// How long the flusher may sleep before it has work: while records are not durable, what
    /// is left of the flush delay since the flusher first saw them (`pending_since`, set here:
    /// a `Buffered` record reaches the disk within the delay), the time until the mark is due
    /// while it lags the durable end, `None` (park until an append) when neither.
    /// The second value says which: `true` for records not durable, `false` for the mark.
    fn flusher_timeout(&self, pending_since: &mut Option<Instant>) -> Option<(Duration, bool)> {
        if self.is_poisoned() {
            return None;
        }
        if self.appended_seq.load(Ordering::Acquire) > self.durable_seq.load(Ordering::Acquire) {
            let since = *pending_since.get_or_insert_with(Instant::now);
            return Some((self.flush_delay.saturating_sub(since.elapsed()), true));
        }
        *pending_since = None;
        let mark = self.mark.lock();
        let pos = *self.durable_pos.lock();
        let current = mark.current();
        if pos.segment != current.last_segment || pos.seq <= current.durable_seq {
            return None;
        }
        Some((self.mark_interval.saturating_sub(mark.since_written()), false))
    }

    /// The body of the background flusher thread: group-commits whatever is not yet durable
    /// within a flush delay of first seeing it, writes the buffer out (without a sync until
    /// the delay is up) when woken by a buffer filling up, and updates the mark when it is
    /// due. With nothing to do it parks, without a timeout, until an append nudges it: an idle
    /// store does not wake.
    pub(crate) fn run_flusher(&self) {
        let mut signal = self.flusher.lock();
        // When the flusher first saw records that are not durable yet.
        let mut pending_since: Option<Instant> = None;
        loop {
            if signal.shutdown {
                return;
            }
            if !signal.wake {
                let seen = self.appended_seq.load(Ordering::SeqCst);
                drop(signal);
                let timeout = self.flusher_timeout(&mut pending_since);
                signal = self.flusher.lock();
                match timeout {
                    Some((timeout, true)) => {
                        if !signal.wake && !signal.shutdown {
                            self.flusher_wake.wait_for(&mut signal, timeout);
                        }
                    }
                    Some((timeout, false)) => {
                        // Waiting only for the mark: an append meanwhile nudges the flusher as
                        // it would a parked one, so that its records get their flush delay
                        // from then on, not from when the mark is due.
                        signal.nudged = false;
                        self.flusher_parked.store(true, Ordering::SeqCst);
                        let quiet = self.appended_seq.load(Ordering::SeqCst) == seen;
                        if quiet && !signal.wake && !signal.shutdown {
                            self.flusher_wake.wait_for(&mut signal, timeout);
                        }
                        self.flusher_parked.store(false, Ordering::SeqCst);
                        if !quiet || signal.nudged {
                            continue;
                        }
                    }
                    None => {
                        signal.nudged = false;
                        self.flusher_parked.store(true, Ordering::SeqCst);
                        // An append that did not see the flag stored its seq before reading it.
                        if self.appended_seq.load(Ordering::SeqCst) == seen {
                            while !signal.wake && !signal.nudged && !signal.shutdown {
                                self.flusher_wake.wait(&mut signal);
                            }
                        }
                        self.flusher_parked.store(false, Ordering::SeqCst);
                        // Records appended meanwhile get their flush delay from now on.
                        continue;
                    }
                }
                if signal.shutdown {
                    return;
                }
            }
            let woken = std::mem::take(&mut signal.wake);
            drop(signal);
            let appended = self.appended_seq.load(Ordering::Acquire);
            if appended > self.durable_seq.load(Ordering::Acquire) && !self.is_poisoned() {
                let since = *pending_since.get_or_insert_with(Instant::now);
                // A failure poisons the writer; the appenders report it.
                if woken && since.elapsed() < self.flush_delay {
                    // A buffer filled up before the delay is up: only write it out, so the
                    // appenders go on into an empty buffer. Syncing every quarter of a buffer
                    // would make a burst of `Buffered` appends pay for syncs nobody waits for.
                    let _ = self.write_out(self.state.lock());
                } else {
                    let _ = self.sync_through(appended);
                    pending_since = None;
                }
            }
            if !self.is_poisoned() {
                // Off the append path: a failure poisons the writer, the appenders report it.
                let _ = self.update_mark(false);
            }
            signal = self.flusher.lock();
        }
    }

    /// Asks the flusher thread to stop.
    pub(crate) fn stop_flusher(&self) {
        self.flusher.lock().shutdown = true;
        self.flusher_wake.notify_all();
    }

    /// The highest seq on stable storage (0 for none).
    pub(crate) fn durable_seq(&self) -> u64 {
        self.durable_seq.load(Ordering::Acquire)
    }

    /// The highest seq appended (0 for none).
    pub(crate) fn appended_seq(&self) -> u64 {
        self.appended_seq.load(Ordering::Acquire)
    }

    /// Blocks until a record at or after `seq` is appended, `deadline` passes or `stop()` is
    /// true when checked; returns whether `seq` was reached. No lock of the writer is held
    /// meanwhile ([`SeqWatch`]).
    pub(crate) fn wait_appended(
        &self,
        seq: u64,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
    ) -> bool {
        let reached = || self.appended_seq.load(Ordering::SeqCst) >= seq;
        self.appended_watch.wait(reached, deadline, stop)
    }

    /// Wakes every [`Writer::wait_appended`] caller to check its stop again.
    pub(crate) fn wake_waiters(&self) {
        self.appended_watch.wake_all();
    }

    /// Removes the sealed segments whose every record is before `keep_from`, oldest first,
    /// then syncs the directory. Returns how many segments and bytes were removed.
    pub(crate) fn reclaim_before(&self, keep_from: u64) -> Result<(usize, u64)> {
        let mut segments = self.segments.lock();
        let mut removed = 0;
        let mut bytes = 0;
        let keep = segments
            .iter()
            .skip(1)
            .take_while(|s| s.header.first_seq.0 <= keep_from)
            .last()
            .map(|s| s.header);
        if let Some(first) = keep {
            // The mark moves first: a crash before the removals leaves older segments than the
            // mark names, which open accepts; the other order would read as lost segments.
            self.check_poison()?;
            let mut mark = self.mark.lock();
            let current = mark.current();
            let next = Mark { first_segment: first.id, first_seq: first.first_seq, ..current };
            mark.write(next).map_err(|e| self.poison(e))?;
        }
        // The active segment (the last) is never removed; a sealed one only if the next one
        // starts at or before `keep_from`, so that nothing at or after it goes.
        while segments.len() > 1 && segments[1].header.first_seq.0 <= keep_from {
            let path = segments[0].path.clone();
            let len = self.fs.open(&path, OpenMode::Read).and_then(|f| f.len()).unwrap_or(0);
            self.fs.remove_file(&path).map_err(|e| Error::io("remove segment", &path, e))?;
            segments.remove(0);
            removed += 1;
            bytes += len;
        }
        if removed > 0 {
            self.fs.sync_dir(&self.dir).map_err(|e| Error::io("fsync directory", &self.dir, e))?;
        }
        Ok((removed, bytes))
    }

    /// Writes the buffer out and returns the segments and the last seq a reader may read.
    pub(crate) fn reader_view(&self) -> Result<(Vec<SegmentMeta>, u64)> {
        let state = self.state.lock();
        let through = if state.buf.is_empty() {
            // A write-out may be in flight: its records left the buffer but `written_seq` moves
            // only once they are in the file. Its io lock is held until then.
            let _io = self.io.lock();
            self.written_seq.load(Ordering::Acquire)
        } else {
            self.write_out(state)?
        };
        Ok((self.segments.lock().clone(), through))
    }

    /// Stops the preallocator thread; a preallocated file stays for the next open to reuse.
    pub(crate) fn stop_preallocator(&self) {
        self.prealloc.stop();
    }

    /// What the preallocator did since open.
    pub(crate) fn prealloc_stats(&self) -> PreallocStats {
        self.prealloc.stats()
    }
}

/// Counts a thread in a phase for as long as the guard lives.
struct Counted<'a>(Option<&'a AtomicUsize>);

impl<'a> Counted<'a> {
    fn enter(counter: &'a AtomicUsize, counted: bool) -> Counted<'a> {
        if counted {
            counter.fetch_add(1, Ordering::AcqRel);
        }
        Counted(counted.then_some(counter))
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if let Some(counter) = self.0 {
            counter.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
