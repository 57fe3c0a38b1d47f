//! Helpers for the restore tests: a harness store over several small segments with batches
//! and a snapshot, and that store shipped by hand into a `file://` replica as the replicator
//! ships it (`format-spec/replication.md`, "Objects"): each segment split at frame boundaries
//! into several parts, the snapshots, the identity and a lease. A second source store,
//! written with a clock the helper sets, gives its events known times for restores at a time.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use factlog::engine::segment;
use factlog::harness::Body;
use factlog::replica::{self, DirRemote, Remote, part};
use factlog::{AppendOptions, Seq, Store};

use super::damage::{segment_files, small_options, store_with_calls};
use super::harness::{turn_end, turn_start, user};

/// A replica in a directory, and the URL that names it.
pub struct Replica {
    /// The directory holding the objects.
    pub root: PathBuf,
    /// `file://` + `root`.
    pub url: String,
}

impl Replica {
    /// The replica at `root` (created if missing).
    pub fn new(root: &Path) -> Replica {
        let url = format!("file://{}", root.display());
        Replica { root: root.to_path_buf(), url }
    }

    /// Its remote.
    pub fn remote(&self) -> DirRemote {
        DirRemote::create(&self.url, &self.root).expect("open the replica")
    }

    /// The path of the object `name`.
    pub fn object(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The names of its objects under `prefix`, sorted.
    pub fn names(&self, prefix: &str) -> Vec<String> {
        self.remote().list(prefix).expect("list")
    }
}

/// Writes the source store in `dir`: task `t1` makes 40 tool calls (one turn each), then a
/// snapshot is taken, then task `t2` appends turns whose events go in batches of three. Spans
/// several 8 KiB segments. Returns the seqs of the first record of every batch of `t2`.
pub fn source_store(dir: &Path) -> Vec<u64> {
    store_with_calls(dir, 40);
    let store = Store::open(dir, small_options()).expect("reopen the source");
    store.checkpoint().expect("checkpoint");
    let task = store.task("t2").expect("task t2");
    let mut batches = Vec::new();
    for i in 0..12 {
        let bodies: Vec<Body> = vec![
            turn_start(),
            user(&format!("batched message {i} {}", "y".repeat(60))),
            turn_end(),
        ];
        let appended =
            task.append_batch_with(bodies, AppendOptions::default()).expect("append a batch");
        let factlog::Appended::Written { seq, .. } = appended else { panic!("a duplicate") };
        batches.push(seq.0);
    }
    store.close().expect("close the source");
    assert!(segment_files(dir).len() >= 3, "the source spans several segments");
    batches
}

/// One second, in µs.
pub const SECOND_US: u64 = 1_000_000;
/// The time of the first turn of [`timed_source_store`]: 2026-12-03T10:00:00Z.
pub const TIMED_START_US: u64 = 1_796_292_000 * SECOND_US;
/// The turns of [`timed_source_store`].
pub const TIMED_TURNS: u64 = 30;
/// The turn of [`timed_source_store`] whose clock jumped ahead by [`TIMED_JUMP_US`]; the turns
/// after it are back at their own times, earlier than it.
pub const TIMED_JUMP_TURN: u64 = 20;
/// How far ahead of its time [`TIMED_JUMP_TURN`] was stamped.
pub const TIMED_JUMP_US: u64 = 100 * SECOND_US;

/// The time events of [`timed_source_store`] are stamped with.
static CLOCK_US: AtomicU64 = AtomicU64::new(0);
/// Held while a timed store is written: the clock is one for the whole test binary.
static CLOCK_HELD: Mutex<()> = Mutex::new(());

fn timed_clock() -> u64 {
    CLOCK_US.load(Ordering::SeqCst)
}

/// The time [`timed_source_store`] stamps the events of turn `turn` with:
/// [`TIMED_START_US`] plus `turn` seconds, and [`TIMED_JUMP_US`] more for
/// [`TIMED_JUMP_TURN`] (a clock that stepped ahead, then back).
pub fn turn_time_us(turn: u64) -> u64 {
    let jump = if turn == TIMED_JUMP_TURN { TIMED_JUMP_US } else { 0 };
    TIMED_START_US + turn * SECOND_US + jump
}

/// Writes a store in `dir` whose task `t1` makes [`TIMED_TURNS`] turns, each of three events
/// (`turn/start`, a user message, `turn/end`) stamped [`turn_time_us`]: even turns appended
/// as one batch of three, odd turns as three single appends. Spans several 8 KiB segments.
pub fn timed_source_store(dir: &Path) {
    let _held = CLOCK_HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    CLOCK_US.store(turn_time_us(0), Ordering::SeqCst);
    let store = Store::open(dir, small_options().clock(timed_clock)).expect("open the source");
    let task = store.task("t1").expect("task t1");
    for turn in 0..TIMED_TURNS {
        CLOCK_US.store(turn_time_us(turn), Ordering::SeqCst);
        let bodies: Vec<Body> = vec![
            turn_start(),
            user(&format!("message of turn {turn} {}", "z".repeat(600))),
            turn_end(),
        ];
        if turn % 2 == 0 {
            task.append_batch_with(bodies, AppendOptions::default()).expect("append a batch");
        } else {
            for body in bodies {
                task.append(body).expect("append");
            }
        }
    }
    store.close().expect("close the source");
    assert!(segment_files(dir).len() >= 3, "the source spans several segments");
}

/// The frame boundaries of a segment file: the offset after the header and after every valid
/// frame, in order, the last one where its frames end.
pub fn frame_boundaries(bytes: &[u8], path: &Path) -> Vec<usize> {
    let header = segment::decode_header(bytes, path).expect("a segment header");
    let mut boundaries = vec![64];
    let scan = segment::scan(bytes, &header, None, |offset, frame| {
        boundaries.push(offset + frame.frame_bytes);
    });
    assert_eq!(boundaries.last(), Some(&scan.end_offset));
    boundaries
}

/// Ships the store in `store_dir` to `replica` as a replicator would: the identity, a lease of
/// this device, each segment's bytes up to its last frame in up to `parts_per_segment` parts
/// split at frame boundaries, and every snapshot file. Returns the part names of each
/// segment, by segment in log order.
pub fn ship(store_dir: &Path, replica: &Replica, parts_per_segment: usize) -> Vec<Vec<String>> {
    let remote = replica.remote();
    let identity =
        replica::ensure_identity(&remote, FIXTURE_REPLICA_ID, store_dir, 1_000).expect("identity");
    let lease = replica::lease::take(&remote, store_dir, false, 1_000).expect("lease");
    let mut shipped = Vec::new();
    for path in segment_files(store_dir) {
        let bytes = std::fs::read(&path).expect("read a segment");
        let header = segment::decode_header(&bytes, &path).expect("a segment header");
        let boundaries = frame_boundaries(&bytes, &path);
        let end = *boundaries.last().expect("a boundary");
        // Cuts at evenly spaced frame boundaries; the first part holds the header and at
        // least one frame when there is one.
        let mut cuts: Vec<usize> = (1..parts_per_segment)
            .map(|i| boundaries[(boundaries.len() - 1) * i / parts_per_segment])
            .filter(|&cut| cut > 64 && cut < end)
            .collect();
        cuts.dedup();
        cuts.push(end);
        let mut names = Vec::new();
        let mut start = 0;
        for cut in cuts {
            let name = replica::part_name(header.first_seq.0, start as u64, cut as u64);
            let object =
                encode_part(identity.replica_id, start as u64, header.salt, &bytes[start..cut]);
            assert!(remote.put_new(&name, &object).expect("put a part"), "{name} is new");
            names.push(name);
            start = cut;
        }
        shipped.push(names);
    }
    let snapshots = store_dir.join("snapshots");
    if snapshots.exists() {
        for entry in std::fs::read_dir(&snapshots).expect("list snapshots") {
            let entry = entry.expect("entry");
            let name = entry.file_name().into_string().expect("UTF-8 name");
            if factlog::harness::snapshot::parse_file_name(&name).is_some() {
                let bytes = std::fs::read(entry.path()).expect("read a snapshot");
                let object = encode_snapshot(identity.replica_id, &name, &bytes);
                remote.put_new(&replica::snapshot_name(&name), &object).expect("put a snapshot");
            }
        }
    }
    seed_retention(&remote, &identity, &shipped);
    replica::lease::release(&remote, lease).expect("release the lease");
    shipped
}

/// For a store whose oldest segments were reclaimed, the retention record a replicator writes
/// when it begins such a replica: the history begins at the first shipped segment, and the
/// oldest snapshot covering the seqs before it stands for them.
fn seed_retention(remote: &dyn Remote, identity: &replica::Identity, shipped: &[Vec<String>]) {
    let firsts: Vec<u64> = shipped.iter().map(|names| segment_of(&names[0])).collect();
    let Some(&first) = firsts.first().filter(|&&first| first > 1) else { return };
    let snapshot = remote
        .list("snapshots/")
        .expect("list")
        .into_iter()
        .filter_map(|name| {
            let file = name.strip_prefix("snapshots/")?;
            Some((factlog::harness::snapshot::parse_file_name(file)?.0, name))
        })
        .filter(|(covered, _)| covered + 1 >= first)
        .min();
    let Some((covered_seq, name)) = snapshot else { return };
    let object = remote.get(&name).expect("get").expect("the snapshot object");
    let record = replica::retain::RetentionRecord {
        replica_id: identity.replica_id,
        covered_seq,
        snapshot: name,
        snapshot_crc: crc32fast::hash(&object),
        first_kept_seq: first,
        created_us: 1_000,
    };
    let name = replica::retain::record_name(covered_seq);
    remote.put_new(&name, &record.encode()).expect("put the retention record");
}

/// The replica id [`ship`] gives a new replica.
pub const FIXTURE_REPLICA_ID: u128 = 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef;

/// The part object of replica `replica_id` holding `body`, the segment bytes from `start`.
pub fn encode_part(replica_id: u128, start: u64, salt: u64, body: &[u8]) -> Vec<u8> {
    let (first_seq, last_seq) = part::seq_range(start, salt, body).unwrap_or((0, 0));
    let header = part::PartHeader { start, end: 0, salt, replica_id, first_seq, last_seq };
    part::encode(header, body)
}

/// The snapshot object of replica `replica_id` holding the snapshot file `file_name`.
pub fn encode_snapshot(replica_id: u128, file_name: &str, bytes: &[u8]) -> Vec<u8> {
    let covered = factlog::harness::snapshot::parse_file_name(file_name).expect("a snapshot name");
    let header =
        replica::snapshot_object::SnapshotObjectHeader { replica_id, covered_seq: covered.0 };
    replica::snapshot_object::encode(header, bytes)
}

/// The first seq of a segment's part name.
pub fn segment_of(part_name: &str) -> u64 {
    replica::parse_part_name(part_name).expect("a part name").0
}

/// The last seq of the store's log in `dir`.
pub fn last_seq(dir: &Path) -> u64 {
    let log = factlog::Log::open_read_only(dir, factlog::Options::new()).expect("read the log");
    log.last_seq().map_or(0, |s: Seq| s.0)
}
