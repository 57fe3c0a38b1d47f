//! Proves the snapshot-file promises of `format-spec/snapshot.md` on the simulated file system
//! (`factlog::fs::sim::SimFs`): a write crashed at every one of its I/O operations, under every
//! crash model, leaves either the old set of snapshots or the old set plus the new one complete,
//! and never a file that loads with the wrong state; a write that returned survives a power
//! loss; an error injected at every operation (`EIO`, `ENOSPC`, a short write) is a typed error
//! (`Io`, `DiskFull`) and leaves nothing that loads wrong; a damaged newest snapshot (bit flip,
//! truncation, zeroed sector, misnamed, refused by the caller) is skipped with its reason and
//! the next older one loads, and with every one damaged nothing loads; `*.tmp` files and foreign
//! names are never loaded, and temporary files are removed by the next write and by `prune`,
//! which keeps the newest N even when crashed part-way.

use std::path::{Path, PathBuf};

use factlog::fs::Fs;
use factlog::fs::sim::{CrashModel, Fault, SimFs};
use factlog::harness::snapshot::{self, Loaded};
use factlog::{Error, ErrorKind, Seq, SnapshotFault};

const STORE: &str = "/store";
const SCHEMA: u16 = 7;
/// Bytes of the bodies: random, so the compressed file spans several 512-byte sectors.
const BODY_BYTES: usize = 3000;
/// Torn-sector crash images tried per crash point.
const TORN_SEEDS: u64 = 6;

fn store() -> &'static Path {
    Path::new(STORE)
}

fn dir() -> PathBuf {
    snapshot::snapshot_dir(store())
}

fn snap_path(seq: u64) -> PathBuf {
    dir().join(snapshot::file_name(Seq(seq)))
}

fn temp_path(seq: u64) -> PathBuf {
    dir().join(format!("{}{}", snapshot::file_name(Seq(seq)), snapshot::TEMP_SUFFIX))
}

/// A deterministic body that differs for every `seq` and does not compress.
fn body_for(seq: u64) -> Vec<u8> {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..BODY_BYTES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A machine whose store directory exists durably and holds durable snapshots of `seqs`.
fn machine(seqs: &[u64]) -> SimFs {
    let fs = SimFs::new(0x5EED);
    fs.create_dir_all(store()).expect("store directory");
    fs.sync_dir(Path::new("/")).expect("sync /");
    for &seq in seqs {
        snapshot::write(&fs, store(), Seq(seq), SCHEMA, &body_for(seq)).expect("setup write");
    }
    fs
}

fn load(fs: &SimFs) -> Loaded {
    snapshot::load_newest(fs, store(), |_, _| Ok(())).expect("load_newest")
}

fn listed(fs: &SimFs) -> Vec<u64> {
    snapshot::list(fs, store()).expect("list").iter().map(|f| f.covered_seq.0).collect()
}

fn names(fs: &SimFs) -> Vec<String> {
    let mut names = fs.list_dir(&dir()).unwrap_or_default();
    names.sort();
    names
}

/// The seq of the loaded snapshot, after checking that its body is the one written for it.
fn loaded_seq(loaded: &Loaded) -> Option<u64> {
    let (meta, body) = loaded.loaded.as_ref()?;
    let seq = meta.covered_seq.0;
    assert_eq!(meta.state_schema, SCHEMA, "schema of {seq}");
    assert!(*body == body_for(seq), "the body loaded for {seq} is the one written for {seq}");
    assert_eq!(meta.path, snap_path(seq));
    Some(seq)
}

fn fault_of(error: &Error) -> SnapshotFault {
    match error.kind() {
        ErrorKind::CorruptSnapshot { reason, .. } => reason.clone(),
        other => panic!("expected CorruptSnapshot, got {other:?}"),
    }
}

/// Operations a write of `seq` performs on `fs` (the machine is cloned from the same setup).
fn ops_of_write(setup: impl Fn() -> SimFs, seq: u64) -> (u64, u64) {
    let fs = setup();
    let before = fs.ops();
    snapshot::write(&fs, store(), Seq(seq), SCHEMA, &body_for(seq)).expect("probe write");
    (before, fs.ops() - before)
}

/// After a crash: the snapshot names are the old set or the old set plus `new`, every listed
/// file loads with its own body, and the newest of them is what `load_newest` returns.
fn check_after_crash(fs: &SimFs, old: &[u64], new: u64, what: &str) -> bool {
    let now = listed(fs);
    let mut with_new = old.to_vec();
    with_new.push(new);
    assert!(now == old || now == with_new, "{what}: snapshots {now:?}");
    let loaded = load(fs);
    assert!(loaded.skipped.is_empty(), "{what}: a .snap name on a torn file: {:?}", loaded.skipped);
    assert_eq!(loaded_seq(&loaded), now.last().copied(), "{what}");
    now == with_new
}

#[test]
fn a_crash_at_every_step_of_a_write_leaves_the_old_set_or_the_new_one_complete() {
    let old = [5, 10];
    let setup = || {
        let fs = machine(&old);
        // A leftover of an earlier interrupted write, removed by the next write.
        fs.write_file(&temp_path(15), b"half a snapshot");
        fs
    };
    let (before, ops) = ops_of_write(setup, 20);
    assert!(ops >= 8, "dir, sync, remove, create, write, fdatasync, rename, sync: {ops}");
    let mut outcomes = [0u32; 2];
    for step in 0..=ops {
        for model in CrashModel::ALL {
            let seeds = if model == CrashModel::TornSectors { TORN_SEEDS } else { 1 };
            for seed in 0..seeds {
                let fs = setup();
                let what = format!("crash at step {step} of {ops}, {model:?}, seed {seed}");
                if step < ops {
                    fs.crash_at(before + step);
                }
                let result = snapshot::write(&fs, store(), Seq(20), SCHEMA, &body_for(20));
                assert_eq!(result.is_ok(), step == ops, "{what}: {result:?}");
                fs.halt();
                let after = fs.reboot(model, seed);
                let has_new = check_after_crash(&after, &old, 20, &what);
                if step == ops {
                    assert!(has_new, "{what}: a write that returned survives any crash");
                }
                outcomes[usize::from(has_new)] += 1;

                snapshot::write(&after, store(), Seq(30), SCHEMA, &body_for(30))
                    .unwrap_or_else(|e| panic!("{what}: the next write: {e}"));
                let left: Vec<String> =
                    names(&after).into_iter().filter(|n| n.ends_with(".tmp")).collect();
                assert!(left.is_empty(), "{what}: the next write removes {left:?}");
                assert_eq!(loaded_seq(&load(&after)), Some(30), "{what}");
            }
        }
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "both outcomes are reached: {outcomes:?}");
}

#[test]
fn the_first_write_makes_the_new_directory_durable() {
    let fs = SimFs::new(3);
    fs.create_dir_all(store()).expect("store directory");
    fs.sync_dir(Path::new("/")).expect("sync /");
    assert!(listed(&fs).is_empty(), "a missing directory lists nothing");
    let nothing = load(&fs);
    assert!(nothing.loaded.is_none() && nothing.skipped.is_empty());
    let meta = snapshot::write(&fs, store(), Seq(1), SCHEMA, &body_for(1)).expect("write");
    assert_eq!((meta.path.clone(), meta.covered_seq), (snap_path(1), Seq(1)));
    assert_eq!(Some(meta.file_bytes), fs.read_file(&snap_path(1)).map(|b| b.len() as u64));
    let after = fs.reboot(CrashModel::LoseUnsynced, 0);
    assert_eq!(loaded_seq(&load(&after)), Some(1));
}

#[test]
fn a_write_retried_after_a_failed_directory_sync_is_durable() {
    let fs = SimFs::new(4);
    fs.create_dir_all(store()).expect("store directory");
    fs.sync_dir(Path::new("/")).expect("sync /");
    // Operation 0 of the write creates the directory, operation 1 syncs the store directory.
    let base = fs.ops();
    fs.inject(base + 1, Fault::Eio);
    let first = snapshot::write(&fs, store(), Seq(1), SCHEMA, &body_for(1));
    assert!(matches!(first.unwrap_err().kind(), ErrorKind::Io { op: "fsync directory", .. }));
    snapshot::write(&fs, store(), Seq(1), SCHEMA, &body_for(1)).expect("retry");
    let after = fs.reboot(CrashModel::LoseUnsynced, 0);
    assert_eq!(loaded_seq(&load(&after)), Some(1), "the retry synced the store directory too");
}

#[test]
fn an_error_at_every_step_of_a_write_is_typed_and_leaves_nothing_that_loads_wrong() {
    let old = [5, 10];
    let setup = || machine(&old);
    let (before, ops) = ops_of_write(setup, 20);
    for step in 0..ops {
        for fault in [Fault::Eio, Fault::NoSpace, Fault::ShortWrite] {
            let fs = setup();
            let what = format!("{fault:?} at step {step} of {ops}");
            fs.inject(before + step, fault);
            let error =
                snapshot::write(&fs, store(), Seq(20), SCHEMA, &body_for(20)).expect_err(&what);
            match (fault, error.kind()) {
                (Fault::NoSpace, ErrorKind::DiskFull { .. })
                | (Fault::Eio | Fault::ShortWrite, ErrorKind::Io { .. }) => {}
                (_, other) => panic!("{what}: {other:?}"),
            }
            assert!(fs.read_file(&temp_path(20)).is_none(), "{what}: the temporary file stays");
            check_after_crash(&fs, &old, 20, &what);
            for model in CrashModel::ALL {
                check_after_crash(&fs.reboot(model, step), &old, 20, &format!("{what}, {model:?}"));
            }
            snapshot::write(&fs, store(), Seq(20), SCHEMA, &body_for(20)).expect(&what);
            assert_eq!(loaded_seq(&load(&fs)), Some(20), "{what}: the retry");
        }
    }
}

#[test]
fn an_oversized_body_is_refused_before_any_io() {
    let fs = machine(&[]);
    let ops = fs.ops();
    // Zeroed allocation: the pages are never touched, because the length is checked first.
    let body = vec![0u8; factlog::limits::SNAPSHOT_BODY_BYTES_MAX as usize + 1];
    let error = snapshot::write(&fs, store(), Seq(1), SCHEMA, &body).expect_err("too large");
    assert!(matches!(error.kind(), ErrorKind::LimitExceeded { what: "snapshot body bytes", .. }));
    assert_eq!(fs.ops(), ops, "nothing was written");
}

/// Damages the newest of three snapshots with `damage` and checks that it is skipped with
/// `expected` and the one before it loads.
fn newest_damaged(damage: impl Fn(&SimFs, &Path), expected: &dyn Fn(&ErrorKind) -> bool) {
    let fs = machine(&[5, 10, 20]);
    damage(&fs, &snap_path(20));
    let loaded = load(&fs);
    assert_eq!(loaded_seq(&loaded), Some(10));
    let [skipped] = &loaded.skipped[..] else { panic!("one skipped: {:?}", loaded.skipped) };
    assert_eq!(skipped.path, snap_path(20));
    assert!(expected(skipped.error.kind()), "{:?}", skipped.error);
    assert!(skipped.error.is_corruption());
}

fn corrupt(fault: SnapshotFault) -> impl Fn(&ErrorKind) -> bool {
    move |kind| {
        matches!(kind, ErrorKind::CorruptSnapshot { path, reason }
            if *path == snap_path(20) && *reason == fault)
    }
}

fn rewrite(change: impl Fn(&mut Vec<u8>)) -> impl Fn(&SimFs, &Path) {
    move |fs, path| {
        let mut bytes = fs.read_file(path).expect("the file");
        change(&mut bytes);
        fs.write_file(path, &bytes);
    }
}

#[test]
fn a_damaged_newest_snapshot_is_skipped_with_its_reason_and_the_older_one_loads() {
    let flip = |bit| move |fs: &SimFs, path: &Path| assert!(fs.flip_bit(path, bit));
    newest_damaged(flip(0), &corrupt(SnapshotFault::BadMagic));
    newest_damaged(flip(8 * 8), &|kind| {
        matches!(kind, ErrorKind::UnsupportedVersion { found: 0, supported: 1, .. })
    });
    newest_damaged(flip(16 * 8 + 3), &corrupt(SnapshotFault::BadHeaderChecksum));
    newest_damaged(flip(61 * 8), &corrupt(SnapshotFault::BadHeaderChecksum));
    newest_damaged(flip(1000 * 8 + 5), &corrupt(SnapshotFault::BadBodyChecksum));
    newest_damaged(|fs, path| assert!(fs.zero_sector(path, 0)), &corrupt(SnapshotFault::BadMagic));
    newest_damaged(
        |fs, path| assert!(fs.zero_sector(path, 2)),
        &corrupt(SnapshotFault::BadBodyChecksum),
    );
    newest_damaged(rewrite(|b| b.truncate(b.len() - 1)), &corrupt(SnapshotFault::LengthMismatch));
    newest_damaged(rewrite(|b| b.truncate(1500)), &corrupt(SnapshotFault::LengthMismatch));
    newest_damaged(rewrite(|b| b.truncate(63)), &corrupt(SnapshotFault::ShortHeader));
    newest_damaged(rewrite(Vec::clear), &corrupt(SnapshotFault::ShortHeader));
    newest_damaged(
        rewrite(|b| b.extend_from_slice(&[0; 512])),
        &corrupt(SnapshotFault::LengthMismatch),
    );
}

#[test]
fn every_single_bit_flip_of_a_snapshot_is_refused() {
    let bytes = snapshot::encode(Seq(9), SCHEMA, &body_for(9)[..400]).expect("encode");
    let path = Path::new("x.snap");
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let error = snapshot::decode(path, &flipped).expect_err("a flipped bit is detected");
        assert!(error.is_corruption(), "bit {bit}: {error:?}");
    }
}

#[test]
fn a_misnamed_or_refused_snapshot_is_skipped_and_with_all_damaged_nothing_loads() {
    let fs = machine(&[5, 10, 20]);
    // 20's bytes under the name of 30: the header does not match the name.
    let bytes = fs.read_file(&snap_path(20)).expect("20");
    fs.write_file(&snap_path(30), &bytes);
    let refuse_20 = |meta: &snapshot::SnapshotMeta, _: &[u8]| {
        if meta.covered_seq == Seq(20) {
            return Err(ErrorKind::CorruptSnapshot {
                path: meta.path.clone(),
                reason: SnapshotFault::BadBody("refused by the caller".into()),
            }
            .into());
        }
        Ok(())
    };
    let loaded = snapshot::load_newest(&fs, store(), refuse_20).expect("load");
    assert_eq!(loaded_seq(&loaded), Some(10));
    let reasons: Vec<(PathBuf, SnapshotFault)> =
        loaded.skipped.iter().map(|s| (s.path.clone(), fault_of(&s.error))).collect();
    assert_eq!(
        reasons,
        [
            (snap_path(30), SnapshotFault::BadHeaderField("covered_seq")),
            (snap_path(20), SnapshotFault::BadBody("refused by the caller".into())),
        ]
    );

    assert!(fs.flip_bit(&snap_path(10), 2000 * 8));
    fs.write_file(&snap_path(5), b"");
    let loaded = snapshot::load_newest(&fs, store(), refuse_20).expect("load");
    assert!(loaded.loaded.is_none(), "nothing loads: full replay");
    let reasons: Vec<(PathBuf, SnapshotFault)> =
        loaded.skipped.iter().map(|s| (s.path.clone(), fault_of(&s.error))).collect();
    assert_eq!(
        reasons,
        [
            (snap_path(30), SnapshotFault::BadHeaderField("covered_seq")),
            (snap_path(20), SnapshotFault::BadBody("refused by the caller".into())),
            (snap_path(10), SnapshotFault::BadBodyChecksum),
            (snap_path(5), SnapshotFault::ShortHeader),
        ]
    );
    assert_eq!(listed(&fs), [5, 10, 20, 30], "loading changes no file");
}

#[test]
fn temporary_and_foreign_files_are_never_loaded_and_temporary_ones_are_removed() {
    let fs = machine(&[10]);
    // A complete, valid snapshot under a temporary name is still not loaded: its rename never
    // happened, so nothing vouches that it was synced.
    let valid = snapshot::encode(Seq(40), SCHEMA, &body_for(40)).expect("encode");
    fs.write_file(&temp_path(40), &valid);
    fs.write_file(&temp_path(50), b"torn");
    for foreign in ["notes.txt", "1.snap", "00000000000000000099.snap.bak"] {
        fs.write_file(&dir().join(foreign), &valid);
    }
    assert_eq!(listed(&fs), [10]);
    let loaded = load(&fs);
    assert_eq!(loaded_seq(&loaded), Some(10));
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);

    snapshot::write(&fs, store(), Seq(20), SCHEMA, &body_for(20)).expect("write");
    assert_eq!(
        names(&fs),
        [
            "00000000000000000010.snap",
            "00000000000000000020.snap",
            "00000000000000000099.snap.bak",
            "1.snap",
            "notes.txt",
        ]
    );
    fs.write_file(&temp_path(60), b"left by a crash");
    assert_eq!(snapshot::prune(&fs, store(), 5).expect("prune"), 1, "only the .tmp file");
    assert_eq!(names(&fs).len(), 5, "foreign files are left alone");
}

#[test]
fn rewriting_a_covered_seq_replaces_the_file() {
    let fs = machine(&[10]);
    snapshot::write(&fs, store(), Seq(10), SCHEMA + 1, b"new encoding").expect("rewrite");
    let loaded = load(&fs);
    let (meta, body) = loaded.loaded.expect("loads");
    assert_eq!(
        (meta.covered_seq, meta.state_schema, &body[..]),
        (Seq(10), SCHEMA + 1, &b"new encoding"[..])
    );
    assert_eq!(listed(&fs), [10]);
}

#[test]
fn prune_keeps_the_newest_n() {
    let fs = machine(&[1, 2, 3, 4, 5, 6]);
    assert_eq!(snapshot::prune(&fs, store(), 3).expect("prune"), 3);
    assert_eq!(listed(&fs), [4, 5, 6]);
    assert_eq!(snapshot::prune(&fs, store(), 3).expect("again"), 0);
    let after = fs.reboot(CrashModel::LoseUnsynced, 0);
    assert_eq!(listed(&after), [4, 5, 6], "prune syncs the directory");
    // By name only: a damaged file counts as one of the kept.
    assert!(fs.flip_bit(&snap_path(6), 3000 * 8));
    assert_eq!(snapshot::prune(&fs, store(), 2).expect("prune"), 1);
    assert_eq!(listed(&fs), [5, 6]);
    assert_eq!(loaded_seq(&load(&fs)), Some(5));
    assert_eq!(snapshot::prune(&fs, store(), 0).expect("all"), 2);
    assert!(listed(&fs).is_empty());
    let empty = SimFs::new(9);
    assert_eq!(snapshot::prune(&empty, store(), 3).expect("no directory"), 0);
}

#[test]
fn a_crash_during_prune_keeps_the_newest() {
    let seqs = [1, 2, 3, 4, 5, 6];
    let probe = machine(&seqs);
    let before = probe.ops();
    assert_eq!(snapshot::prune(&probe, store(), 3).expect("probe"), 3);
    let ops = probe.ops() - before;
    for step in 0..ops {
        for model in CrashModel::ALL {
            let fs = machine(&seqs);
            fs.crash_at(before + step);
            assert!(snapshot::prune(&fs, store(), 3).is_err());
            let after = fs.reboot(model, step);
            let now = listed(&after);
            assert!(now.ends_with(&[4, 5, 6]), "step {step}, {model:?}: {now:?}");
            assert!(now.windows(2).all(|w| w[0] < w[1]));
            assert!(seqs.ends_with(&now), "only the oldest are removed: {now:?}");
            assert_eq!(loaded_seq(&load(&after)), Some(6));
        }
    }
}
