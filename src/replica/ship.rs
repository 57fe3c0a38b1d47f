//! The replicator (`format-spec/replication.md`, "Shipping"): ships the complete frames of a
//! store's segment files, and its snapshot files, to a replica, reading the files only, so the
//! writer never waits for it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::identity::{Identity, foreign};
use super::lease::{self, Lease};
use super::retain::{self, RetentionRecord};
use super::snapshot_object::{self, SnapshotObjectHeader};
use super::{Remote, SEGMENTS_PREFIX, SNAPSHOTS_PREFIX, part, part_name, snapshot_name};
use crate::engine::frame::{self, Decoded};
use crate::engine::segment::decode_header;
use crate::engine::segments;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::{Fs, OpenMode};
use crate::harness::snapshot;
use crate::limits::{
    REPLICA_BACKOFF_MAX, REPLICA_BACKOFF_MIN, REPLICA_PART_BYTES_MAX, SEGMENT_HEADER_BYTES,
};

/// How a replicator starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShipOptions {
    takeover: bool,
    leave_unsynced: bool,
}

impl ShipOptions {
    /// The defaults: the lease is taken only if the last run released it.
    #[must_use]
    pub fn new() -> ShipOptions {
        ShipOptions::default()
    }

    /// Takes the lease even if another run holds it (`--takeover`): for a run known to be
    /// gone. The new lease records the one it ended.
    #[must_use]
    pub fn takeover(mut self, on: bool) -> ShipOptions {
        self.takeover = on;
        self
    }

    /// Ships without first syncing the segment files it ships from: for a caller that bounds
    /// every round by the store's durable seq itself ([`Replicator::round_through`], as the
    /// store replicating in its own process does). Default: off, so that a replica never
    /// holds a frame the store could still lose in a power failure.
    #[must_use]
    pub fn leave_unsynced(mut self, on: bool) -> ShipOptions {
        self.leave_unsynced = on;
        self
    }
}

/// Where a replicator stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShipStatus {
    /// The lease's epoch.
    pub epoch: u64,
    /// Whether the lease was taken over from a run that had not released it.
    pub takeover: bool,
    /// The last seq the replica holds (0 for none).
    pub shipped_seq: u64,
    /// The last seq found in the store's files at the last round (0 for none).
    pub local_seq: u64,
    /// Parts shipped by this run.
    pub parts: u64,
    /// Body bytes shipped by this run (parts and snapshots).
    pub bytes: u64,
    /// Snapshot files shipped by this run.
    pub snapshots: u64,
    /// The error of the last round, if it failed (the next round retries).
    pub last_error: Option<String>,
}

impl ShipStatus {
    /// Records the replica has not caught up with yet: `local_seq - shipped_seq`.
    #[must_use]
    pub fn lag(&self) -> u64 {
        self.local_seq.saturating_sub(self.shipped_seq)
    }
}

/// What the replica holds of one segment.
#[derive(Debug, Clone, Copy)]
struct Shipped {
    /// The end of its parts in the segment file (0: none).
    end: u64,
    /// The seq after the last record in its parts.
    next_seq: u64,
    /// The segment's salt.
    salt: u64,
    /// A segment that is not the newest and was shipped whole: it gets no more parts.
    sealed: bool,
}

/// A part to ship: bytes `[start, end)` of one segment, holding seqs `first_seq` up to
/// `next_seq - 1`.
struct Pending {
    first_seq: u64,
    start: u64,
    end: u64,
    next_seq: u64,
}

/// Ships one store's files to one replica, holding the replica's lease.
pub struct Replicator {
    remote: Box<dyn Remote>,
    identity: Identity,
    /// When this run started, in µs since the Unix epoch (the caller's clock).
    started_us: u64,
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    lease: Lease,
    segments: BTreeMap<u64, Shipped>,
    snapshots: BTreeSet<String>,
    /// Records through this seq were removed from the replica on purpose (retention): the
    /// store's segments that hold only such records are not shipped again.
    retained: u64,
    /// A part whose creation failed, as `(first_seq, start, end)`: the object store may hold
    /// it all the same, so the next round ships exactly it again before anything else.
    retry: Option<(u64, u64, u64)>,
    options: ShipOptions,
    status: ShipStatus,
    /// When this run started, on the monotonic clock: `started_us` plus its elapsed time
    /// stamps the shipped file.
    started_at: Instant,
    /// What the shipped file last said: shipped and local seq, last error.
    recorded: Option<(u64, u64, Option<String>)>,
}

impl std::fmt::Debug for Replicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicator")
            .field("location", &self.remote.location())
            .field("dir", &self.dir)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Replicator {
    /// Starts replicating the store in `dir` to `remote`: creates or checks the replica's
    /// identity, takes the lease, and checks that what the replica holds is what the store's
    /// files hold. Ships nothing yet ([`Replicator::round`]).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::LeaseHeld`], [`ErrorKind::ReplicaDiverged`], [`ErrorKind::ReplicaGap`]
    /// (the replica's own parts do not follow each other), those of
    /// [`super::check_identity`], [`ErrorKind::Remote`] and local I/O errors.
    pub fn start(
        fs: Arc<dyn Fs>,
        dir: &Path,
        remote: Box<dyn Remote>,
        options: ShipOptions,
        now_us: u64,
    ) -> Result<Replicator> {
        let replica_id = u128::from(fs.random_u64()) << 64 | u128::from(fs.random_u64());
        let identity = super::ensure_identity(remote.as_ref(), replica_id, dir, now_us)?;
        let lease = lease::take(remote.as_ref(), dir, options.takeover, now_us)?;
        let mut replicator = Replicator {
            remote,
            identity,
            started_us: now_us,
            fs,
            dir: dir.to_path_buf(),
            lease,
            segments: BTreeMap::new(),
            snapshots: BTreeSet::new(),
            retained: 0,
            retry: None,
            options,
            status: ShipStatus {
                epoch: lease.epoch,
                takeover: lease.takeover,
                ..ShipStatus::default()
            },
            started_at: Instant::now(),
            recorded: None,
        };
        // A store segment listed and then removed while the replica was compared with it is
        // read again from a new listing (`vanished`), once.
        let loaded = match replicator.load_replica() {
            Err(error) if vanished(&error) => {
                replicator.segments.clear();
                replicator.load_replica()
            }
            other => other,
        };
        if let Err(error) = loaded {
            // The lease is given back: nothing was shipped by this run.
            let _ = lease::release(replicator.remote.as_ref(), lease);
            return Err(error);
        }
        replicator.record_shipped(true);
        Ok(replicator)
    }

    /// Where this replicator stands.
    #[must_use]
    pub fn status(&self) -> &ShipStatus {
        &self.status
    }

    /// The replica's location.
    #[must_use]
    pub fn location(&self) -> &str {
        self.remote.location()
    }

    /// Reads what the replica holds and checks it against the store's files.
    fn load_replica(&mut self) -> Result<()> {
        let (record, _) = retain::latest(self.remote.as_ref(), &self.identity)?;
        self.retained = record.map_or(0, |r| r.covered_seq);
        let mut parts: BTreeMap<u64, Vec<(u64, u64, String)>> = BTreeMap::new();
        for name in self.remote.list(SEGMENTS_PREFIX)? {
            if let Some((first_seq, start, end)) = super::parse_part_name(&name) {
                parts.entry(first_seq).or_default().push((start, end, name));
            }
        }
        let local = segments::list(self.fs.as_ref(), &self.dir)?;
        let oldest_local = local.segments.first().map(|m| m.header.first_seq.0);
        let firsts: Vec<u64> = parts.keys().copied().collect();
        for pair in firsts.windows(2) {
            if pair[1] - 1 <= self.retained {
                // Left by a retention cut off half way: removed on purpose, not checked.
                parts.remove(&pair[0]);
                self.segments
                    .insert(pair[0], Shipped { end: 0, next_seq: 0, salt: 0, sealed: true });
            }
        }
        for (first_seq, mut ranges) in parts {
            ranges.sort();
            let mut end = 0;
            for (start, part_end, name) in &ranges {
                if *start != end {
                    return Err(ErrorKind::ReplicaGap {
                        missing: format!(
                            "bytes [{end}, {start}) of segment {first_seq} (before {name}); \
                             replicate this store to a new location"
                        ),
                    }
                    .into());
                }
                end = *part_end;
            }
            let (last_start, last_end, last_name) = ranges.last().expect("a listed segment");
            let meta = local.segments.iter().find(|m| m.header.first_seq.0 == first_seq);
            let Some(meta) = meta else {
                if oldest_local.is_some_and(|oldest| first_seq < oldest) {
                    // Purged here after a snapshot covered it; the replica keeps it. Where its
                    // frames end tells whether the store's next segment follows it.
                    let object = self
                        .remote
                        .get(last_name)?
                        .ok_or_else(|| listed_but_gone(self, last_name))?;
                    let (header, body) = part::decode(last_name, &object, *last_start, *last_end)?;
                    self.check_ours(last_name, header.replica_id)?;
                    let next_seq = next_seq_of_part(body, *last_start, header.salt).unwrap_or(0);
                    self.segments
                        .insert(first_seq, Shipped { end, next_seq, salt: 0, sealed: true });
                    continue;
                }
                return Err(diverged(first_seq, 0, "the replica has this segment, the store not"));
            };
            let object =
                self.remote.get(last_name)?.ok_or_else(|| listed_but_gone(self, last_name))?;
            let (header, body) = part::decode(last_name, &object, *last_start, *last_end)?;
            self.check_ours(last_name, header.replica_id)?;
            if header.salt != meta.header.salt {
                return Err(diverged(first_seq, 0, "the segment was written anew (another salt)"));
            }
            let bytes = self.fs.map(&meta.path).map_err(|e| Error::io("map", &meta.path, e))?;
            let local_bytes = bytes.get(*last_start as usize..end as usize);
            if local_bytes != Some(body) {
                return Err(diverged(
                    first_seq,
                    *last_start,
                    "the replica's bytes are not the store's (or the store's file is shorter)",
                ));
            }
            let next_seq = next_seq_at(&bytes, meta.header.first_seq.0, meta.header.salt, end)
                .ok_or_else(|| diverged(first_seq, end, "the replica ends inside a frame"))?;
            self.segments
                .insert(first_seq, Shipped { end, next_seq, salt: header.salt, sealed: false });
            self.status.shipped_seq = self.status.shipped_seq.max(next_seq.saturating_sub(1));
        }
        if let (Some((&newest, _)), Some(newest_local)) =
            (self.segments.last_key_value(), local.segments.last())
            && newest > newest_local.header.first_seq.0
        {
            return Err(diverged(newest, 0, "the replica has this segment, the store not"));
        }
        self.snapshots = self.remote.list(SNAPSHOTS_PREFIX)?.into_iter().collect();
        Ok(())
    }

    /// Ships what the store's files hold and the replica does not: the complete frames after
    /// the replica's end of each segment (synced first, unless
    /// [`ShipOptions::leave_unsynced`]), then the snapshot files it lacks. Checks the lease
    /// before each request that writes. On an error the replica keeps every object shipped
    /// before it, and the next round goes on from there, with the same part first.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::LeaseLost`], [`ErrorKind::ReplicaDiverged`], [`ErrorKind::ReplicaGap`]
    /// (the store removed segments before they were shipped), [`ErrorKind::Remote`] and
    /// local I/O errors.
    pub fn round(&mut self) -> Result<&ShipStatus> {
        self.round_through(u64::MAX)
    }

    /// [`Replicator::round`], shipping only records up to `bound` (the store's durable seq,
    /// for a caller that knows it).
    ///
    /// # Errors
    ///
    /// Those of [`Replicator::round`].
    pub fn round_through(&mut self, bound: u64) -> Result<&ShipStatus> {
        // A segment listed at the start of the round and removed before it was read (a purge
        // or a reclaim beside the replicator) is not damage: the round starts over from a new
        // listing, which sees the segment gone (and a gap, if it was not shipped in full).
        let result = match self.round_inner(bound) {
            Err(error) if vanished(&error) => self.round_inner(bound),
            other => other,
        };
        self.status.last_error = result.as_ref().err().map(ToString::to_string);
        self.record_shipped(true);
        result.map(|()| &self.status)
    }

    /// Writes the store's shipped file of this replica (`shipped.rs`) when what it says
    /// changed, or the run ends (`running` false). A write that fails is passed over: the
    /// file only informs.
    fn record_shipped(&mut self, running: bool) {
        let state =
            (self.status.shipped_seq, self.status.local_seq, self.status.last_error.clone());
        if running && self.recorded.as_ref() == Some(&state) {
            return;
        }
        let elapsed = u64::try_from(self.started_at.elapsed().as_micros()).unwrap_or(u64::MAX);
        let file = super::shipped::Shipped {
            version: super::shipped::SHIPPED_VERSION,
            replica_id: self.identity.id_hex(),
            location: self.remote.location().to_owned(),
            shipped_seq: state.0,
            local_seq: state.1,
            updated_us: self.started_us.saturating_add(elapsed),
            pid: std::process::id(),
            running,
            last_error: state.2.clone(),
        };
        let _ = super::shipped::write(self.fs.as_ref(), &self.dir, &file);
        self.recorded = Some(state);
    }

    fn round_inner(&mut self, bound: u64) -> Result<()> {
        let local = segments::list(self.fs.as_ref(), &self.dir)?;
        let newest = local.segments.len().saturating_sub(1);
        for (i, meta) in local.segments.iter().enumerate() {
            let first_seq = meta.header.first_seq.0;
            let next = local.segments.get(i + 1).map(|m| m.header.first_seq.0);
            if !self.segments.contains_key(&first_seq) {
                if self.segments.range(..first_seq).next().is_none()
                    && first_seq > self.retained + 1
                {
                    // The store purged its oldest records before this replica began.
                    self.seed(first_seq, &local.segments, bound)?;
                }
                if next.is_some_and(|next| next - 1 <= self.retained) {
                    // Removed from the replica by retention, on purpose: not shipped again.
                    continue;
                }
                self.check_follows(first_seq)?;
            }
            let state = *self.segments.entry(first_seq).or_insert(Shipped {
                end: 0,
                next_seq: first_seq,
                salt: meta.header.salt,
                sealed: false,
            });
            if state.sealed {
                continue;
            }
            if state.salt != meta.header.salt {
                return Err(diverged(first_seq, 0, "the segment was written anew (another salt)"));
            }
            let bytes = self.fs.map(&meta.path).map_err(|e| Error::io("map", &meta.path, e))?;
            // The part that failed last, if it was of this segment: exactly it again first.
            let cut = self
                .retry
                .filter(|&(segment, start, _)| segment == first_seq && start == state.end);
            let cut = cut.map(|(_, _, end)| end);
            let (pending, next_seq) = parts_after(&bytes, meta.header.salt, state, bound, cut);
            if i == newest {
                self.status.local_seq = next_seq.saturating_sub(1);
            }
            if !pending.is_empty() && !self.options.leave_unsynced {
                // What is shipped must not be lost here by a power failure after.
                let file = self.fs.open(&meta.path, OpenMode::Read);
                file.and_then(|f| f.sync_data())
                    .map_err(|e| Error::io("fdatasync", &meta.path, e))?;
            }
            for part in pending {
                lease::check(self.remote.as_ref(), self.lease)?;
                let body = &bytes[part.start as usize..part.end as usize];
                let name = part_name(first_seq, part.start, part.end);
                let object = part::encode(
                    part::PartHeader {
                        start: part.start,
                        end: part.end,
                        salt: state.salt,
                        replica_id: self.identity.replica_id,
                        first_seq: part.first_seq,
                        last_seq: part.next_seq - 1,
                    },
                    body,
                );
                self.retry = Some((first_seq, part.start, part.end));
                self.put_new_or_same(&name, &object, first_seq, part.start)?;
                self.retry = None;
                let shipped = self.segments.get_mut(&first_seq).expect("inserted above");
                shipped.end = part.end;
                shipped.next_seq = part.next_seq;
                self.status.parts += 1;
                self.status.bytes += body.len() as u64;
                self.status.shipped_seq = self.status.shipped_seq.max(part.next_seq - 1);
            }
            if i < newest && self.segments[&first_seq].next_seq.saturating_sub(1) < bound {
                self.segments.get_mut(&first_seq).expect("inserted above").sealed = true;
            }
        }
        for file in snapshot::list(self.fs.as_ref(), &self.dir)? {
            let Some(file_name) = file.path.file_name().and_then(|n| n.to_str()) else { continue };
            let name = snapshot_name(file_name);
            if self.snapshots.contains(&name) || file.covered_seq.0 > bound {
                continue;
            }
            let Some(bytes) = read_whole(self.fs.as_ref(), &file.path)? else { continue };
            lease::check(self.remote.as_ref(), self.lease)?;
            let header = SnapshotObjectHeader {
                replica_id: self.identity.replica_id,
                covered_seq: file.covered_seq.0,
            };
            let object = snapshot_object::encode(header, &bytes);
            self.put_new_or_same(&name, &object, file.covered_seq.0, 0)?;
            self.status.snapshots += 1;
            self.status.bytes += bytes.len() as u64;
            self.snapshots.insert(name);
        }
        Ok(())
    }

    /// Refuses an object of another replica.
    fn check_ours(&self, name: &str, replica_id: u128) -> Result<()> {
        if replica_id == self.identity.replica_id {
            return Ok(());
        }
        Err(foreign(name, replica_id, &self.identity))
    }

    /// Begins the history of a replica whose first segment is the store's oldest, beginning
    /// at `first_seq > 1` (the store purged the records before it): ships the oldest snapshot
    /// covering `first_seq - 1` and creates the retention record naming it, as a retention
    /// of the replica would have, so that a restore knows where the history begins and why.
    fn seed(&mut self, first_seq: u64, local: &[segments::SegmentMeta], bound: u64) -> Result<()> {
        let base = snapshot::list(self.fs.as_ref(), &self.dir)?
            .into_iter()
            .filter(|file| file.covered_seq.0 + 1 >= first_seq && file.covered_seq.0 <= bound)
            .min_by_key(|file| file.covered_seq);
        let Some(file) = base else {
            return Err(ErrorKind::ReplicaGap {
                missing: format!(
                    "seqs 1..={}: the store purged them, and none of its durable snapshots \
                     covers them yet: checkpoint the store, then replicate again",
                    first_seq - 1
                ),
            }
            .into());
        };
        let covered = file.covered_seq.0;
        let Some(bytes) = read_whole(self.fs.as_ref(), &file.path)? else {
            return Err(Error::io(
                "read",
                &file.path,
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        };
        let name = snapshot_name(&snapshot::file_name(file.covered_seq));
        let header =
            SnapshotObjectHeader { replica_id: self.identity.replica_id, covered_seq: covered };
        let object = snapshot_object::encode(header, &bytes);
        lease::check(self.remote.as_ref(), self.lease)?;
        self.put_new_or_same(&name, &object, covered, 0)?;
        self.snapshots.insert(name.clone());
        // The first segment kept: the first whose records are not all covered.
        let firsts: Vec<u64> = local.iter().map(|m| m.header.first_seq.0).collect();
        let first_kept = firsts
            .windows(2)
            .find(|pair| pair[1] - 1 > covered)
            .map_or_else(|| firsts.last().copied().unwrap_or(first_seq), |pair| pair[0]);
        let record = RetentionRecord {
            replica_id: self.identity.replica_id,
            covered_seq: covered,
            snapshot: name,
            snapshot_crc: crc32fast::hash(&object),
            first_kept_seq: first_kept,
            created_us: self.started_us,
        };
        let record_name = retain::record_name(covered);
        if !self.remote.put_new(&record_name, &record.encode())? {
            let existing = self.remote.get(&record_name)?.unwrap_or_default();
            let found = RetentionRecord::decode(&record_name, &existing, &self.identity)?;
            if found.first_kept_seq != first_kept {
                return Err(diverged(
                    first_seq,
                    0,
                    &format!("{record_name} names another history"),
                ));
            }
        }
        self.retained = covered;
        Ok(())
    }

    /// Checks that a segment the replica does not have yet, beginning at `first_seq`,
    /// follows the replica's segment before it: a store that removed segments (`purge`)
    /// before they were shipped would leave a gap in the replica.
    fn check_follows(&self, first_seq: u64) -> Result<()> {
        let Some((_, before)) = self.segments.range(..first_seq).next_back() else {
            return Ok(());
        };
        // `next_seq` 0: a segment purged here before this run began, shipped whole before.
        if before.next_seq == 0 || before.next_seq == first_seq || first_seq <= self.retained + 1 {
            return Ok(());
        }
        Err(ErrorKind::ReplicaGap {
            missing: format!(
                "seqs {}..={}: the store removed them (purge) before they were shipped, so this \
                 replica cannot go on; replicate the store to a new location",
                before.next_seq,
                first_seq - 1
            ),
        }
        .into())
    }

    /// Creates `name`; if it exists (a request that succeeded although its answer was lost),
    /// it must hold the same bytes.
    fn put_new_or_same(&self, name: &str, object: &[u8], segment: u64, offset: u64) -> Result<()> {
        if self.remote.put_new(name, object)? {
            return Ok(());
        }
        match self.remote.get(name)? {
            Some(existing) if existing == object => Ok(()),
            _ => Err(diverged(segment, offset, &format!("{name} exists with other bytes"))),
        }
    }

    /// Runs rounds until `stop` is set: one at once, then one whenever `due` says the store
    /// may have grown and at least every `interval`; after a failed round the next waits a
    /// backoff (from 100 ms, doubling up to 10 s). `report` is called after every round. Ends
    /// with a last round and gives the lease back.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::LeaseLost`], [`ErrorKind::ReplicaDiverged`] and [`ErrorKind::ReplicaGap`],
    /// which no retry can mend (reported first); the error of the last round, if it failed;
    /// [`ErrorKind::Remote`] from the release.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        interval: Duration,
        poll: Duration,
        mut report: impl FnMut(&ShipStatus),
    ) -> Result<ShipStatus> {
        let mut backoff = REPLICA_BACKOFF_MIN;
        let mut next_round = Instant::now();
        let mut last_round = Instant::now();
        let mut fingerprint = None;
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            let current = self.fingerprint();
            let grown = current != fingerprint;
            if now >= next_round && (grown || now >= last_round + interval) {
                last_round = now;
                match self.round() {
                    Ok(_) => {
                        backoff = REPLICA_BACKOFF_MIN;
                        fingerprint = current;
                        next_round = now;
                    }
                    Err(error) if fatal(&error) => {
                        report(&self.status);
                        return Err(error);
                    }
                    Err(_) => {
                        next_round = now + backoff;
                        backoff = (backoff * 2).min(REPLICA_BACKOFF_MAX);
                    }
                }
                report(&self.status);
            }
            std::thread::sleep(poll);
        }
        self.finish()
    }

    /// A last round, then the lease given back: the next run takes the replica without
    /// `--takeover`. The lease is kept when the round fails, so that a later run sees that
    /// this one did not end cleanly.
    ///
    /// # Errors
    ///
    /// Those of [`Replicator::round`] and [`ErrorKind::Remote`].
    pub fn finish(mut self) -> Result<ShipStatus> {
        self.round()?;
        lease::release(self.remote.as_ref(), self.lease)?;
        self.record_shipped(false);
        Ok(self.status)
    }

    /// What tells whether the store's files may hold more to ship: the number of segments,
    /// the newest one's first seq, the number of snapshots, and whether a frame begins where
    /// the replica's copy of the newest segment ends (files grow in zero-filled steps ahead
    /// of the writer, so their length says nothing).
    fn fingerprint(&self) -> Option<(usize, u64, usize, bool)> {
        let local = segments::list(self.fs.as_ref(), &self.dir).ok()?;
        let newest = local.segments.last()?;
        let end = self
            .segments
            .get(&newest.header.first_seq.0)
            .map_or(SEGMENT_HEADER_BYTES as u64, |s| s.end.max(SEGMENT_HEADER_BYTES as u64));
        let file = self.fs.open(&newest.path, OpenMode::Read).ok()?;
        let mut word = [0_u8; 8];
        let grown = file.read_exact_at(&mut word, end).is_ok() && word != [0; 8];
        let snapshots = snapshot::list(self.fs.as_ref(), &self.dir).ok()?.len();
        Some((local.segments.len(), newest.header.first_seq.0, snapshots, grown))
    }
}

/// Whether a round's error is one no retry mends.
pub(crate) fn fatal(error: &Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::LeaseLost { .. }
            | ErrorKind::ReplicaDiverged { .. }
            | ErrorKind::ReplicaGap { .. }
            | ErrorKind::UnsupportedVersion { .. }
            | ErrorKind::Corruption { .. }
    )
}

/// Whether a round failed because a file of the store it had listed was gone when it read it
/// (a purge or a reclaim beside the replicator): a new listing is the answer, not a report.
fn vanished(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::Io { source, .. }
        if source.kind() == std::io::ErrorKind::NotFound)
}

/// A part the replica listed and no longer holds when it is read: a `retain` removed it
/// meanwhile, or another process removes objects. The next round lists the replica again.
fn listed_but_gone(replicator: &Replicator, name: &str) -> Error {
    ErrorKind::Remote {
        location: replicator.remote.location().to_owned(),
        op: "get",
        object: name.to_owned(),
        reason: "the object was listed, then gone before it was read (a retain running \
                 meanwhile?); the next round reads the replica again"
            .to_owned(),
    }
    .into()
}

fn diverged(segment: u64, offset: u64, reason: &str) -> Error {
    ErrorKind::ReplicaDiverged { segment, offset, reason: reason.to_owned() }.into()
}

/// The whole file at `path`, or `None` if it is gone (a snapshot pruned meanwhile).
fn read_whole(fs: &dyn Fs, path: &Path) -> Result<Option<Vec<u8>>> {
    let file = match fs.open(path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let len = file.len().map_err(|e| Error::io("stat", path, e))?;
    let mut bytes = vec![0; usize::try_from(len).unwrap_or(usize::MAX)];
    file.read_exact_at(&mut bytes, 0).map_err(|e| Error::io("read", path, e))?;
    Ok(Some(bytes))
}

/// The seq after the last frame of a part's `body` (segment bytes from `start`, a frame
/// boundary), or `None` when it holds no frame.
fn next_seq_of_part(body: &[u8], start: u64, salt: u64) -> Option<u64> {
    let salt_crc = frame::salt_crc(salt);
    let mut offset = if start == 0 { SEGMENT_HEADER_BYTES } else { 0 };
    let mut next = None;
    while let Decoded::Frame(f) = frame::decode(body, offset, salt_crc) {
        next = Some(f.end_seq());
        offset += f.frame_bytes;
    }
    next
}

/// The seq after the frames of a segment's `bytes` that end exactly at `end`, or `None` when
/// no frame ends there.
fn next_seq_at(bytes: &[u8], first_seq: u64, salt: u64, end: u64) -> Option<u64> {
    if end == SEGMENT_HEADER_BYTES as u64 {
        return Some(first_seq);
    }
    let header = decode_header(bytes.get(..SEGMENT_HEADER_BYTES)?, Path::new("")).ok()?;
    debug_assert_eq!(header.salt, salt);
    let mut found = None;
    crate::engine::segment::scan(bytes, &header, None, |offset, frame| {
        if (offset + frame.frame_bytes) as u64 == end {
            found = Some(frame.end_seq());
        }
    });
    found
}

/// The parts to ship of a segment whose replica holds `state`: its complete frames after
/// `state.end` whose records are all at most `bound`, split so that no part's body passes
/// [`REPLICA_PART_BYTES_MAX`] unless it is one frame; and the seq after the last frame found
/// (bound or not). A part ends at `cut` when a frame does (the part that failed before,
/// shipped exactly again: the object store may hold it).
fn parts_after(
    bytes: &[u8],
    salt: u64,
    state: Shipped,
    bound: u64,
    cut: Option<u64>,
) -> (Vec<Pending>, u64) {
    let salt_crc = frame::salt_crc(salt);
    let mut parts = Vec::new();
    let mut start = state.end;
    let mut offset = state.end.max(SEGMENT_HEADER_BYTES as u64);
    let mut next_seq = state.next_seq;
    let mut part_first = next_seq;
    let mut shippable = (offset, next_seq);
    let max = REPLICA_PART_BYTES_MAX as u64;
    while let Decoded::Frame(f) = frame::decode(bytes, offset as usize, salt_crc) {
        if f.seq != next_seq {
            break;
        }
        let frame_end = offset + f.frame_bytes as u64;
        if f.end_seq() - 1 <= bound {
            if frame_end - start > max && offset > start.max(SEGMENT_HEADER_BYTES as u64) {
                parts.push(Pending { first_seq: part_first, start, end: offset, next_seq });
                start = offset;
                part_first = next_seq;
            }
            shippable = (frame_end, f.end_seq());
            if cut == Some(frame_end) {
                parts.push(Pending {
                    first_seq: part_first,
                    start,
                    end: frame_end,
                    next_seq: f.end_seq(),
                });
                start = frame_end;
                part_first = f.end_seq();
            }
        }
        offset = frame_end;
        next_seq = f.end_seq();
    }
    let (end, shipped_next) = shippable;
    if end > start.max(SEGMENT_HEADER_BYTES as u64) {
        parts.push(Pending { first_seq: part_first, start, end, next_seq: shipped_next });
    }
    (parts, next_seq)
}
