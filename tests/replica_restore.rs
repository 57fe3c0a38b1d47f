//! Restore from a replica (`format-spec/replication.md`, "Restore"): a harness store over
//! several segments, with batches and a snapshot, is shipped by hand into a `file://` replica
//! (each segment in several parts cut at frame boundaries), then restored. Proves that the
//! restored store has the source's events and state, byte-identical segments and the files a
//! store has; that `--seq` ends at the last whole frame (a batch straddling it is left out)
//! and ignores damage after it; that a restore at a time (a store written with a clock the
//! test sets, one turn's clock stepped ahead) ends before the first frame holding an event
//! after it, fetching nothing after that frame, restores nothing before the first event and
//! everything after the last, and is refused together with a seq; that a store whose oldest
//! segments retention removed restores from its snapshot, and is refused without one (and at
//! a time before its first remaining record); and that damage, a missing part, a missing
//! segment, a part ending inside a frame, another identity version, no identity and a
//! non-empty target are each refused with the error naming what is wrong, leaving the target
//! as it was; that a restore failing on a full disk or a failed sync removes what it wrote;
//! and that every local write goes through the `Fs` seam and is synced before `restore`
//! returns (a simulated power failure right after it loses nothing).

use crate::common;

use crate::common::faulty_fs;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::damage::{segment_files, small_options};
use common::harness::{events, fold};
use common::replica_fixture::{
    FIXTURE_REPLICA_ID, Replica, SECOND_US, TIMED_JUMP_TURN, TIMED_TURNS, encode_part,
    frame_boundaries, last_seq, segment_of, ship, source_store, timed_source_store, turn_time_us,
};
use factlog::replica::{self, Remote, RestoreOptions, RestoreReport, part, restore};
use factlog::{Error, ErrorKind, Seq, Store};
use faulty_fs::FaultyFs;

/// A temporary directory holding the source store `store`, and its replica `replica`.
struct Setup {
    temp: tempfile::TempDir,
    source: std::path::PathBuf,
    replica: Replica,
    /// The part names of each segment, in log order.
    parts: Vec<Vec<String>>,
    /// The first seq of each batch of three events.
    batches: Vec<u64>,
}

impl Setup {
    fn new() -> Setup {
        let temp = tempfile::tempdir().expect("temporary directory");
        let source = temp.path().join("store");
        let batches = source_store(&source);
        let replica = Replica::new(&temp.path().join("replica"));
        let parts = ship(&source, &replica, 3);
        Setup { temp, source, replica, parts, batches }
    }

    fn target(&self, name: &str) -> std::path::PathBuf {
        self.temp.path().join(name)
    }

    fn restore(&self, target: &Path, options: RestoreOptions) -> factlog::Result<RestoreReport> {
        restore(&self.replica.remote(), target, options.store(small_options()))
    }

    fn refused(&self, options: RestoreOptions) -> Error {
        let target = self.target("refused");
        let error = self.restore(&target, options).expect_err("refused");
        assert!(!target.exists(), "a refused restore leaves no directory: {error}");
        error
    }
}

fn read_only(dir: &Path) -> Store {
    Store::open_read_only(dir, small_options()).expect("open read-only")
}

/// Rewrites the object `name` of `replica` with `bytes` (objects are immutable to the
/// format, not to a test).
fn overwrite(replica: &Replica, name: &str, bytes: &[u8]) {
    std::fs::write(replica.object(name), bytes).expect("overwrite an object");
}

#[test]
fn a_restored_store_is_the_source_store() {
    let setup = Setup::new();
    let stray = "segments/notes.txt";
    overwrite(&setup.replica, stray, b"not a part");
    let target = setup.target("restored");
    let report = setup.restore(&target, RestoreOptions::new()).expect("restore");

    let last = last_seq(&setup.source);
    assert_eq!(report.through_seq, Seq(last));
    assert_eq!(report.first_seq, Seq(1));
    assert_eq!(report.segments.len(), setup.parts.len());
    assert_eq!(report.parts, setup.parts.iter().map(Vec::len).sum::<usize>());
    assert!(setup.parts.iter().any(|p| p.len() == 3), "segments were shipped in three parts");
    assert_eq!(report.segments_left_out, 0);
    assert!(report.segments.iter().all(|s| !s.cut));
    assert_eq!(report.ignored, [stray]);
    assert_eq!(report.snapshots.len(), 1, "the checkpoint's snapshot is copied");
    assert!(report.snapshots_skipped.is_empty());
    assert_eq!(report.source_device.as_deref(), Some(replica::device_name().as_str()));

    // Each segment file holds exactly the source's bytes up to its last frame.
    let (sources, restored) = (segment_files(&setup.source), segment_files(&target));
    assert_eq!(restored.len(), sources.len());
    for (source, copy) in sources.iter().zip(&restored) {
        assert_eq!(source.file_name(), copy.file_name());
        let bytes = std::fs::read(source).expect("read");
        let end = *frame_boundaries(&bytes, source).last().expect("an end");
        assert_eq!(std::fs::read(copy).expect("read"), bytes[..end], "{}", copy.display());
    }
    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&target), 0o700);
    assert!(restored.iter().all(|p| mode(p) == 0o600));
    let restored_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(target.join("RESTORED.json")).expect("read"))
            .expect("RESTORED.json is JSON");
    assert_eq!(restored_json["version"], 1);
    assert_eq!(restored_json["from"], setup.replica.url.as_str());
    assert_eq!(restored_json["through_seq"], last);
    assert_eq!(restored_json["source_device"], replica::device_name().as_str());
    assert_eq!(restored_json["restored_us"], common::harness::fixed_clock());

    let (source, copy) = (read_only(&setup.source), read_only(&target));
    assert_eq!(events(&copy), events(&source), "dump: the same events");
    assert_eq!(copy.state(), source.state(), "state: the same tasks");
    assert_eq!(
        copy.open_report().snapshot.as_ref().map(|m| m.covered_seq),
        report.snapshots.last().copied(),
        "the restored store opens from the copied snapshot"
    );
    drop(copy);
    // The restored store is a store: it takes appends.
    let writable = Store::open(&target, small_options()).expect("open the restored store");
    let task = writable.task("t2").expect("task");
    task.append(common::harness::user("after the restore")).expect("append");
    writable.close().expect("close");
}

#[test]
fn a_point_in_time_restore_ends_at_the_last_whole_frame() {
    let setup = Setup::new();
    let source_events = events(&read_only(&setup.source));
    let batch = setup.batches[setup.batches.len() / 2];
    for (seq, through) in [(batch + 1, batch - 1), (batch + 2, batch + 2), (batch, batch - 1)] {
        let target = setup.target(&format!("at-{seq}"));
        let report = setup.restore(&target, RestoreOptions::new().seq(Seq(seq))).expect("restore");
        assert_eq!(report.requested_seq, Some(Seq(seq)));
        assert_eq!(report.through_seq, Seq(through), "--seq {seq}: the batch is whole or absent");
        let restored = read_only(&target);
        let expected: Vec<_> =
            source_events.iter().filter(|e| e.seq.0 <= through).cloned().collect();
        assert_eq!(events(&restored), expected, "--seq {seq}");
        assert_eq!(restored.state(), fold(&expected), "--seq {seq}");
    }

    // A point in the first segment, before its last part, which is damaged: the damage and
    // the later segments are left out, and the first segment is cut.
    let last_part = setup.parts[0].last().expect("a part").clone();
    let (_, last_start, _) = replica::parse_part_name(&last_part).expect("a part name");
    let first_seq_of_last_part = {
        let path = &segment_files(&setup.source)[0];
        let bytes = std::fs::read(path).expect("read");
        let header = factlog::engine::segment::decode_header(&bytes, path).expect("header");
        let mut found = None;
        factlog::engine::segment::scan(&bytes, &header, None, |offset, frame| {
            if offset as u64 == last_start {
                found = Some(frame.seq);
            }
        });
        found.expect("a frame begins the last part")
    };
    let mut bytes = std::fs::read(setup.replica.object(&last_part)).expect("read");
    *bytes.last_mut().expect("a byte") ^= 0xff;
    overwrite(&setup.replica, &last_part, &bytes);
    let target = setup.target("early");
    let seq = Seq(first_seq_of_last_part - 1);
    let report = setup.restore(&target, RestoreOptions::new().seq(seq)).expect("below the damage");
    assert_eq!(report.through_seq, seq);
    assert_eq!(report.segments.len(), 1);
    assert!(report.segments[0].cut);
    assert_eq!(report.segments[0].parts, setup.parts[0].len() - 1);
    assert_eq!(report.segments_left_out, setup.parts.len() - 1);
    let restored = read_only(&target);
    let expected: Vec<_> = source_events.iter().filter(|e| e.seq <= seq).cloned().collect();
    assert_eq!(events(&restored), expected);
    assert!(report.snapshots.is_empty(), "the snapshot covers a later seq");
    assert_eq!(segment_files(&target).len(), 1);
}

/// A temporary directory holding [`timed_source_store`] shipped in three parts a segment.
fn timed_setup() -> (tempfile::TempDir, std::path::PathBuf, Replica, Vec<Vec<String>>) {
    let temp = tempfile::tempdir().expect("temporary directory");
    let source = temp.path().join("store");
    timed_source_store(&source);
    let replica = Replica::new(&temp.path().join("replica"));
    let parts = ship(&source, &replica, 3);
    (temp, source, replica, parts)
}

/// The events of the log as it was at `time_us` by the rule of a restore at a time: up to the
/// first event after it. Every frame of the timed store holds the events of one turn, which
/// share a time, so this ends at a frame boundary.
fn events_at(events: &[factlog::harness::Event], time_us: u64) -> Vec<factlog::harness::Event> {
    events.iter().take_while(|e| e.timestamp_us <= time_us).cloned().collect()
}

#[test]
fn a_restore_at_a_time_ends_before_the_first_frame_after_it() {
    let (temp, source, replica, parts) = timed_setup();
    let source_events = events(&read_only(&source));
    let last = last_seq(&source);
    let first_of_turn = |turn: u64| {
        let time = turn_time_us(turn);
        source_events.iter().find(|e| e.timestamp_us == time).expect("the turn's events").seq
    };
    let cases = [
        // Inside the first second: turn 0 only.
        (turn_time_us(0) + SECOND_US / 2, first_of_turn(1)),
        // Exactly a turn's time: that turn is kept (at or before), the next is not.
        (turn_time_us(7), first_of_turn(8)),
        (turn_time_us(12) + 1, first_of_turn(13)),
        (turn_time_us(TIMED_JUMP_TURN - 1), first_of_turn(TIMED_JUMP_TURN)),
        // After turns 21..=25 but before the jumped turn 20: the log ends before turn 20, and
        // the later turns, whose clock stepped back, are left out with it.
        (turn_time_us(25), first_of_turn(TIMED_JUMP_TURN)),
    ];
    for (time_us, first_after) in cases {
        let target = temp.path().join(format!("at-{time_us}"));
        let options = RestoreOptions::new().time(time_us).store(small_options());
        let report = restore(&replica.remote(), &target, options).expect("restore at a time");
        assert_eq!(report.requested_time_us, Some(time_us));
        assert_eq!(report.requested_seq, None);
        assert_eq!(report.through_seq, Seq(first_after.0 - 1), "--time {time_us}");
        let after = report.first_after_time.expect("a record after the time");
        assert_eq!(after.seq, first_after, "--time {time_us}");
        assert!(after.timestamp_us > time_us);
        let restored = read_only(&target);
        let expected: Vec<_> =
            source_events.iter().filter(|e| e.seq < first_after).cloned().collect();
        assert_eq!(events(&restored), expected, "--time {time_us}");
        assert_eq!(restored.state(), fold(&expected), "--time {time_us}");
        if time_us < turn_time_us(TIMED_JUMP_TURN - 1) {
            assert_eq!(expected, events_at(&source_events, time_us), "the rule, before the jump");
        }
        let cut_segments = report.segments.iter().filter(|s| s.cut).count();
        assert!(cut_segments <= 1, "only the last restored segment is cut");
        assert_eq!(report.segments.len() + report.segments_left_out, parts.len());
        let restored_json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(target.join("RESTORED.json")).expect("read"))
                .expect("RESTORED.json is JSON");
        assert_eq!(restored_json["through_seq"], first_after.0 - 1);
    }

    // After the last event (the jumped turn included): everything, no record after the time.
    let target = temp.path().join("after-the-end");
    let end = turn_time_us(TIMED_JUMP_TURN).max(turn_time_us(TIMED_TURNS - 1));
    let options = RestoreOptions::new().time(end).store(small_options());
    let report = restore(&replica.remote(), &target, options).expect("restore after the end");
    assert_eq!(report.through_seq, Seq(last));
    assert_eq!(report.first_after_time, None);
    assert_eq!(report.segments_left_out, 0);
    assert!(report.segments.iter().all(|s| !s.cut));
    assert_eq!(events(&read_only(&target)), source_events);

    // Before the first event: a store without records, as `--seq 0` restores.
    let before = turn_time_us(0) - 1;
    let (at_zero, at_before) = (temp.path().join("seq-0"), temp.path().join("before"));
    let by_seq = restore(
        &replica.remote(),
        &at_zero,
        RestoreOptions::new().seq(Seq(0)).store(small_options()),
    )
    .expect("restore at seq 0");
    let options = RestoreOptions::new().time(before).store(small_options());
    let by_time = restore(&replica.remote(), &at_before, options).expect("restore before");
    assert_eq!(by_time.through_seq, Seq(0));
    assert_eq!(by_time.through_seq, by_seq.through_seq);
    assert_eq!(by_time.segments, by_seq.segments);
    assert_eq!(by_time.first_after_time.map(|a| a.seq), Some(Seq(1)));
    assert!(events(&read_only(&at_before)).is_empty());
    assert_eq!(segment_files(&at_before).len(), 1, "one segment, holding only its header");
}

#[test]
fn a_restore_at_a_time_fetches_nothing_after_the_first_frame_after_it() {
    let (temp, source, replica, parts) = timed_setup();
    let source_events = events(&read_only(&source));
    // The first part of the first segment holds several turns: a time just before its last
    // frame's turn ends the restore inside it.
    let (_, _, first_part_end) = replica::parse_part_name(&parts[0][0]).expect("a part name");
    let path = &segment_files(&source)[0];
    let bytes = std::fs::read(path).expect("read");
    let boundaries = frame_boundaries(&bytes, path);
    let last_frame_at = boundaries
        .iter()
        .rev()
        .find(|&&b| (b as u64) < first_part_end)
        .copied()
        .expect("a frame in the first part");
    let header = factlog::engine::segment::decode_header(&bytes, path).expect("header");
    let mut last_frame_seq = None;
    factlog::engine::segment::scan(&bytes, &header, None, |offset, frame| {
        if offset == last_frame_at {
            last_frame_seq = Some(frame.seq);
        }
    });
    let last_frame_seq = last_frame_seq.expect("the frame's seq");
    let event = &source_events[usize::try_from(last_frame_seq - 1).expect("small")];
    assert!(event.seq.0 > 1, "the first part holds more than one frame");
    let time_us = event.timestamp_us - 1;

    // Every other part is garbage: fetching one would refuse the restore.
    for name in parts.iter().flatten().skip(1) {
        overwrite(&replica, name, b"not a part");
    }
    let target = temp.path().join("restored");
    let options = RestoreOptions::new().time(time_us).store(small_options());
    let report = restore(&replica.remote(), &target, options).expect("nothing after is fetched");
    assert_eq!(report.parts, 1);
    assert_eq!(report.segments.len(), 1);
    assert!(report.segments[0].cut);
    assert_eq!(report.segments_left_out, parts.len() - 1);
    let after = report.first_after_time.expect("a record after the time");
    assert!(after.seq.0 <= last_frame_seq, "the frame ending the log is in the first part");
    assert_eq!(events(&read_only(&target)), events_at(&source_events, time_us));

    // Without a time, the garbage is found.
    let error = restore(
        &replica.remote(),
        &temp.path().join("whole"),
        RestoreOptions::new().store(small_options()),
    )
    .expect_err("damaged");
    assert!(matches!(error.kind(), ErrorKind::ReplicaDamaged { .. }), "{error}");
}

#[test]
fn a_seq_and_a_time_together_are_refused() {
    let setup = Setup::new();
    let options = RestoreOptions::new().seq(Seq(3)).time(common::harness::NOW_US);
    let error = setup.refused(options);
    match error.kind() {
        ErrorKind::InvalidOptions { reason } => assert!(reason.contains("not both"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_damaged_part_is_refused_and_named() {
    let setup = Setup::new();
    let name = setup.parts[1][1].clone();
    let original = std::fs::read(setup.replica.object(&name)).expect("read");
    let mut flipped = original.clone();
    flipped[part::PART_HEADER_BYTES + 10] ^= 0x01;
    overwrite(&setup.replica, &name, &flipped);
    let error = setup.refused(RestoreOptions::new());
    match error.kind() {
        ErrorKind::ReplicaDamaged { object, reason } => {
            assert_eq!(object, &name);
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(error.is_damaged_or_refused_data());

    // A part that checks itself but whose frames do not: the frame check names it.
    let (_, start, end) = replica::parse_part_name(&name).expect("a part name");
    let (header, body) = part::decode(&name, &original, start, end).expect("the original");
    // A part of another incarnation of the segment (another salt): its frames would not check.
    overwrite(
        &setup.replica,
        &name,
        &part::encode(part::PartHeader { salt: header.salt ^ 1, ..header }, body),
    );
    match setup.refused(RestoreOptions::new()).kind() {
        ErrorKind::ReplicaDamaged { object, reason } => {
            assert_eq!(object, &name);
            assert!(reason.contains("another incarnation"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let mut body = body.to_vec();
    body[30] ^= 0x01;
    overwrite(&setup.replica, &name, &part::encode(header, &body));
    match setup.refused(RestoreOptions::new()).kind() {
        ErrorKind::ReplicaDamaged { object, reason } => {
            assert_eq!(object, &name);
            assert!(reason.contains(&format!("byte {start} of segment")), "{reason}");
            assert!(reason.contains("not a valid frame"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_part_that_ends_inside_a_frame_is_refused() {
    let setup = Setup::new();
    let parts = setup.parts.iter().find(|p| p.len() == 3).expect("a segment in three parts");
    let (first_seq, a, b) = replica::parse_part_name(&parts[1]).expect("a part name");
    let (_, _, c) = replica::parse_part_name(&parts[2]).expect("a part name");
    let index = setup.parts.iter().position(|p| p == parts).expect("its index");
    let path = &segment_files(&setup.source)[index];
    let bytes = std::fs::read(path).expect("read the source segment");
    let header = factlog::engine::segment::decode_header(&bytes, path).expect("header");
    // The same bytes, cut 8 bytes into the first frame of the last part.
    let remote = setup.replica.remote();
    for name in &parts[1..] {
        std::fs::remove_file(setup.replica.object(name)).expect("remove");
    }
    let cut = b + 8;
    let early = replica::part_name(first_seq, a, cut);
    for (start, end, name) in
        [(a, cut, early.clone()), (cut, c, replica::part_name(first_seq, cut, c))]
    {
        let body = &bytes[start as usize..end as usize];
        remote
            .put_new(&name, &encode_part(FIXTURE_REPLICA_ID, start, header.salt, body))
            .expect("put");
    }
    match setup.refused(RestoreOptions::new()).kind() {
        ErrorKind::ReplicaDamaged { object, reason } => {
            assert_eq!(object, &early);
            assert!(reason.contains(&format!("byte {b} of segment {first_seq}")), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_part_that_ends_inside_a_frames_padding_is_refused() {
    let setup = Setup::new();
    let path = &segment_files(&setup.source)[0];
    let bytes = std::fs::read(path).expect("read the source segment");
    let header = factlog::engine::segment::decode_header(&bytes, path).expect("header");
    let mut padded = None;
    let scan = factlog::engine::segment::scan(&bytes, &header, None, |offset, frame| {
        let unpadded = 24 + frame.payload.len();
        if padded.is_none() && frame.frame_bytes > unpadded {
            padded = Some((offset, offset + unpadded));
        }
    });
    let (frame_at, cut) = padded.expect("a frame with padding");
    let remote = setup.replica.remote();
    for name in &setup.parts[0] {
        std::fs::remove_file(setup.replica.object(name)).expect("remove");
    }
    let first_seq = header.first_seq.0;
    let early = replica::part_name(first_seq, 0, cut as u64);
    let late = replica::part_name(first_seq, cut as u64, scan.end_offset as u64);
    remote
        .put_new(&early, &encode_part(FIXTURE_REPLICA_ID, 0, header.salt, &bytes[..cut]))
        .expect("put");
    let late_body = &bytes[cut..scan.end_offset];
    remote
        .put_new(&late, &encode_part(FIXTURE_REPLICA_ID, cut as u64, header.salt, late_body))
        .expect("put");
    match setup.refused(RestoreOptions::new()).kind() {
        ErrorKind::ReplicaDamaged { object, reason } => {
            assert_eq!(object, &early);
            assert!(
                reason.contains(&format!("padding of the frame at byte {frame_at}")),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missing_part_is_a_gap_naming_the_bytes() {
    let setup = Setup::new();
    let parts = setup.parts.iter().find(|p| p.len() == 3).expect("a segment in three parts");
    let (first_seq, start, end) = replica::parse_part_name(&parts[1]).expect("a part name");
    std::fs::remove_file(setup.replica.object(&parts[1])).expect("remove the middle part");
    match setup.refused(RestoreOptions::new()).kind() {
        ErrorKind::ReplicaGap { missing } => {
            let range = format!("bytes [{start}, {end}) of segment {first_seq}");
            assert!(missing.contains(&range), "{missing} names {range}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_last_parts_of_a_segment_are_a_gap_naming_the_seqs_up_to_the_point() {
    let setup = Setup::new();
    let last = setup.parts[0].last().expect("a part").clone();
    let (_, start, _) = replica::parse_part_name(&last).expect("a part name");
    std::fs::remove_file(setup.replica.object(&last)).expect("remove the last part");
    // The seqs the removed part held, from the source's frame boundaries.
    let path = &segment_files(&setup.source)[0];
    let bytes = std::fs::read(path).expect("read");
    let header = factlog::engine::segment::decode_header(&bytes, path).expect("header");
    let mut first_missing = None;
    let scan = factlog::engine::segment::scan(&bytes, &header, None, |offset, frame| {
        if offset as u64 == start {
            first_missing = Some(frame.seq);
        }
    });
    let (first_missing, next) = (first_missing.expect("a frame"), scan.next_seq.0);
    let seqs = format!("seqs {first_missing}..={}", next - 1);
    for options in [RestoreOptions::new(), RestoreOptions::new().seq(Seq(first_missing))] {
        match setup.refused(options).kind() {
            ErrorKind::ReplicaGap { missing } => assert!(missing.starts_with(&seqs), "{missing}"),
            other => panic!("{other:?}"),
        }
    }
    let target = setup.target("below");
    let report = setup
        .restore(&target, RestoreOptions::new().seq(Seq(first_missing - 1)))
        .expect("below the gap");
    assert_eq!(report.through_seq, Seq(first_missing - 1));
}

#[test]
fn a_missing_segment_is_a_gap_naming_the_seqs() {
    let setup = Setup::new();
    let (middle, after) = (segment_of(&setup.parts[1][0]), segment_of(&setup.parts[2][0]));
    for name in &setup.parts[1] {
        std::fs::remove_file(setup.replica.object(name)).expect("remove a part");
    }
    match setup.refused(RestoreOptions::new()).kind() {
        ErrorKind::ReplicaGap { missing } => {
            let seqs = format!("seqs {middle}..={}", after - 1);
            assert!(missing.starts_with(&seqs), "{missing} names {seqs}");
        }
        other => panic!("{other:?}"),
    }
    // Below the gap the replica is whole.
    let target = setup.target("below");
    let report =
        setup.restore(&target, RestoreOptions::new().seq(Seq(middle - 1))).expect("below the gap");
    assert_eq!(report.through_seq, Seq(middle - 1));
}

#[test]
fn removed_old_segments_restore_from_a_snapshot_and_are_a_gap_without_one() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let source = temp.path().join("store");
    source_store(&source);
    let store = Store::open(&source, small_options()).expect("open");
    let covered = store.checkpoint().expect("checkpoint").covered_seq;
    let (removed, _) = store.reclaim().expect("reclaim");
    assert!(removed > 0, "segments were reclaimed");
    store.close().expect("close");
    let replica = Replica::new(&temp.path().join("replica"));
    let parts = ship(&source, &replica, 2);
    let first = segment_of(&parts[0][0]);
    assert!(first > 1);

    // Every event of the fixed clock is at `NOW_US`: at that time the whole log restores; a
    // moment before it, the log as it was is in the removed segments.
    let now = common::harness::NOW_US;
    let at_now = temp.path().join("at-now");
    let options = RestoreOptions::new().time(now).store(small_options());
    let report = restore(&replica.remote(), &at_now, options).expect("restore at the time");
    assert_eq!(report.through_seq, Seq(last_seq(&source)));
    assert_eq!(report.first_after_time, None);
    let before = temp.path().join("before");
    let options = RestoreOptions::new().time(now - 1).store(small_options());
    let error = restore(&replica.remote(), &before, options).expect_err("before the first");
    match error.kind() {
        ErrorKind::ReplicaGap { missing } => {
            assert!(missing.starts_with(&format!("seqs 1..={}", first - 1)), "{missing}");
            let at = factlog::protocol::time::format_rfc3339(now);
            assert!(missing.contains(&format!("(seq {first}) was appended at {at}")), "{missing}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!before.exists());

    let target = temp.path().join("restored");
    let report = restore(&replica.remote(), &target, RestoreOptions::new().store(small_options()))
        .expect("restore");
    assert_eq!(report.first_seq, Seq(first));
    assert!(report.snapshots.contains(&covered));
    let (source_store, copy) = (read_only(&source), read_only(&target));
    assert_eq!(copy.state(), source_store.state());
    let events_from = |store: &Store| -> Vec<factlog::harness::Event> {
        let read = store.events(Seq(first)).expect("events");
        read.collect::<factlog::Result<_>>().expect("decode")
    };
    assert_eq!(events_from(&copy), events_from(&source_store));

    for name in replica.names("snapshots/") {
        std::fs::remove_file(replica.object(&name)).expect("remove a snapshot");
    }
    let target = temp.path().join("refused");
    let error = restore(&replica.remote(), &target, RestoreOptions::new().store(small_options()))
        .expect_err("no snapshot covers the removed seqs");
    match error.kind() {
        ErrorKind::ReplicaGap { missing } => {
            assert!(missing.starts_with(&format!("seqs 1..={}", first - 1)), "{missing}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!target.exists());
}

#[test]
fn another_identity_version_is_refused() {
    let setup = Setup::new();
    overwrite(
        &setup.replica,
        replica::IDENTITY_NAME,
        br#"{"format":"factlog-replica","version":3}"#,
    );
    match setup.refused(RestoreOptions::new()).kind() {
        ErrorKind::UnsupportedVersion { found: 3, supported: 2, .. } => {}
        other => panic!("{other:?}"),
    }
    // A replica of version 1 names no replica in its objects: refused, saying how to re-seed.
    overwrite(
        &setup.replica,
        replica::IDENTITY_NAME,
        br#"{"format":"factlog-replica","version":1}"#,
    );
    let outdated = setup.refused(RestoreOptions::new());
    assert!(matches!(outdated.kind(), ErrorKind::ReplicaOutdated { found: 1, .. }), "{outdated}");
    assert!(outdated.to_string().contains("re-seed"), "{outdated}");
    assert!(outdated.is_damaged_or_refused_data());
}

#[test]
fn a_location_without_identity_is_not_a_replica() {
    let temp = tempfile::tempdir().expect("temporary directory");
    let replica = Replica::new(&temp.path().join("empty"));
    let target = temp.path().join("restored");
    let error = restore(&replica.remote(), &target, RestoreOptions::new()).expect_err("refused");
    assert!(matches!(error.kind(), ErrorKind::NotAReplica { .. }), "{error}");
    assert!(!target.exists());
}

#[test]
fn a_target_that_is_not_empty_is_refused_and_left_alone() {
    let setup = Setup::new();
    let target = setup.target("occupied");
    std::fs::create_dir(&target).expect("create");
    std::fs::write(target.join("keep.txt"), b"mine").expect("write");
    let error = setup.restore(&target, RestoreOptions::new()).expect_err("refused");
    assert!(matches!(error.kind(), ErrorKind::TargetNotEmpty { .. }), "{error}");
    let names: Vec<_> =
        std::fs::read_dir(&target).expect("list").map(|e| e.expect("e").file_name()).collect();
    assert_eq!(names, ["keep.txt"]);

    // An empty directory is restored into, and stays when the restore is refused.
    let empty = setup.target("empty");
    std::fs::create_dir(&empty).expect("create");
    std::fs::remove_file(setup.replica.object(&setup.parts[0][0])).expect("remove a part");
    setup.restore(&empty, RestoreOptions::new()).expect_err("a gap");
    assert!(empty.is_dir());
    assert_eq!(std::fs::read_dir(&empty).expect("list").count(), 0);
}

#[test]
fn a_restore_that_fails_while_writing_removes_what_it_wrote() {
    let setup = Setup::new();
    // A full disk at each kind of file the restore writes, then failed syncs.
    for filter in [".seg", ".snap", "RESTORED"] {
        let fs = FaultyFs::new();
        *fs.faults.write_filter.lock() = filter.to_owned();
        fs.faults.disk_full.store(true, Ordering::SeqCst);
        let options = small_options().log(factlog::Options::new().fs(Arc::new(fs)));
        let target = setup.target("full");
        let error = restore(&setup.replica.remote(), &target, RestoreOptions::new().store(options))
            .expect_err("a full disk");
        assert!(matches!(error.kind(), ErrorKind::DiskFull { .. }), "{filter}: {error}");
        assert!(!target.exists(), "{filter}: nothing left behind");
    }
    let fs = FaultyFs::new();
    fs.faults.fail_sync.store(true, Ordering::SeqCst);
    let options = small_options().log(factlog::Options::new().fs(Arc::new(fs)));
    let target = setup.target("unsynced");
    let error = restore(&setup.replica.remote(), &target, RestoreOptions::new().store(options))
        .expect_err("a failed fdatasync");
    assert!(matches!(error.kind(), ErrorKind::Io { op: "fdatasync", .. }), "{error}");
    assert!(!target.exists());
}

#[test]
fn an_unusable_snapshot_is_skipped_and_reported_when_the_log_is_whole() {
    let setup = Setup::new();
    let snapshots = setup.replica.names("snapshots/");
    assert_eq!(snapshots.len(), 1);
    let mut bytes = std::fs::read(setup.replica.object(&snapshots[0])).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    overwrite(&setup.replica, &snapshots[0], &bytes);
    for stray in ["snapshots/notes.txt", "lease/junk"] {
        overwrite(&setup.replica, stray, b"x");
    }
    let target = setup.target("restored");
    let report = setup.restore(&target, RestoreOptions::new()).expect("the log is whole");
    assert!(report.snapshots.is_empty());
    assert_eq!(report.snapshots_skipped.len(), 1);
    assert_eq!(report.snapshots_skipped[0].object, snapshots[0]);
    assert_eq!(report.ignored, ["snapshots/notes.txt", "lease/junk"]);
    assert!(!target.join("snapshots").exists());
    let (source, copy) = (read_only(&setup.source), read_only(&target));
    assert_eq!(events(&copy), events(&source));
    assert_eq!(copy.state(), source.state());
}

#[test]
fn every_local_write_goes_through_the_file_system_seam_and_is_synced() {
    let setup = Setup::new();
    let sim = factlog::fs::sim::SimFs::new(7);
    let options = small_options().log(
        factlog::Options::new()
            .segment_bytes(common::damage::SMALL_SEGMENT_BYTES)
            .background_threads(false)
            .fs(Arc::new(sim.clone())),
    );
    let target = setup.target("simulated");
    // The temporary directory exists on the simulated machine too, durably, as it does on the
    // real one before the restore.
    let parent = target.parent().expect("a parent");
    factlog::fs::Fs::create_dir_all(&sim, parent).expect("create the parent");
    for dir in parent.ancestors().filter_map(Path::parent) {
        factlog::fs::Fs::sync_dir(&sim, dir).expect("sync an ancestor");
    }
    let report = restore(&setup.replica.remote(), &target, RestoreOptions::new().store(options))
        .expect("restore onto the simulated file system");
    assert!(!target.exists(), "nothing was written to the real file system");
    let files = sim.files();
    for segment in &report.segments {
        let path = target.join(factlog::engine::segment::file_name(segment.first_seq));
        let bytes = sim.read_file(&path).expect("the segment is on the simulated disk");
        assert_eq!(bytes.len() as u64, segment.bytes);
    }
    assert!(files.contains(&target.join("RESTORED.json")), "{files:?}");
    assert_eq!(files.iter().filter(|f| f.extension().is_some_and(|e| e == "snap")).count(), 1);

    // Every file and name was synced before the restore returned: a power failure right
    // after it loses nothing, and the store opens.
    sim.halt();
    let after = sim.reboot(factlog::fs::sim::CrashModel::LoseUnsynced, 0);
    assert_eq!(after.files(), files);
    for file in &files {
        assert_eq!(after.read_file(file), sim.read_file(file), "{}", file.display());
    }
    let options = small_options().log(
        factlog::Options::new()
            .segment_bytes(common::damage::SMALL_SEGMENT_BYTES)
            .background_threads(false)
            .fs(Arc::new(after)),
    );
    let store = Store::open_read_only(&target, options).expect("opens after a power failure");
    assert_eq!(store.log().last_seq(), Some(report.through_seq));
}
