//! Proves the full-disk behaviour on a real, small `tmpfs` (mounted by the test, unmounted in
//! every case, skipped with a message where mounting is not permitted): a store whose creation
//! fails on a full file system leaves nothing behind; a store that fills its file system gets
//! `DiskFull`, loses no acknowledged event, and after space is freed keeps working without
//! preallocating into the freed space below the margin, and preallocates (grows its segments
//! in steps of zeros) again above it.

use crate::common;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use factlog::engine::segments::PREALLOC_FILE_NAME;
use factlog::fs::{Fs, RealFs};
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::limits::prealloc_free_bytes_min;
use factlog::{Appended, Durability, ErrorKind, Options, Seq, Store, StoreOptions};

const MIB: u64 = 1024 * 1024;
const SEGMENT_BYTES: u64 = MIB;

/// A tmpfs mounted on a temporary directory for the life of the value.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes`, or `None` (with a message) where mounting is not permitted.
    fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0700"), "tmpfs"])
            .arg(dir.path())
            .output();
        match status {
            Ok(output) if output.status.success() => Some(Tmpfs { dir }),
            Ok(output) => {
                let why = String::from_utf8_lossy(&output.stderr);
                eprintln!("skipped: cannot mount a tmpfs here ({})", why.trim());
                None
            }
            Err(error) => {
                eprintln!("skipped: cannot run mount ({error})");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn available(&self) -> u64 {
        RealFs.space(self.path()).expect("statvfs").available_bytes
    }

    fn total(&self) -> u64 {
        RealFs.space(self.path()).expect("statvfs").total_bytes
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(self.path()).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            // Still busy (a panic left a file open): detach it so the directory can go.
            let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        }
    }
}

/// Grows (or creates) the file `path` until the file system holding it is left with at most
/// `left` bytes; returns the file's length. With `left` 0 it writes until `ENOSPC`.
fn fill(path: &Path, mount: &Tmpfs, left: u64) -> u64 {
    let mut file = OpenOptions::new().create(true).append(true).open(path).expect("filler");
    let chunk = vec![0x5Au8; 4096];
    while mount.available() > left {
        let want = (mount.available() - left).min(chunk.len() as u64) as usize;
        if file.write_all(&chunk[..want]).is_err() {
            break;
        }
    }
    file.sync_all().ok();
    file.metadata().expect("stat").len()
}

fn options() -> StoreOptions {
    StoreOptions::new().log(Options::new().segment_bytes(SEGMENT_BYTES).background_threads(false))
}

fn message(n: usize) -> Body {
    Body::UserMessage(UserMessage {
        text: format!("{n:06} {}", "x".repeat(1000)),
        ..Default::default()
    })
}

/// Appends messages until `count` are acknowledged or one fails; returns the failure.
fn append(store: &Store, acked: &mut Vec<(Seq, usize)>, count: usize) -> Option<factlog::Error> {
    let task = store.task("t1").expect("task");
    for _ in 0..count {
        let n = acked.len();
        match task.append(message(n)) {
            Ok(Appended::Written { seq, .. }) => acked.push((seq, n)),
            Ok(other) => panic!("{other:?}"),
            Err(error) => return Some(error),
        }
    }
    None
}

/// Every event of the store at `dir` is exactly the acknowledged messages, in order.
fn assert_holds(dir: &Path, acked: &[(Seq, usize)]) {
    let store = Store::open_read_only(dir, options()).expect("read-only open");
    let events: Vec<_> = store.events(Seq(1)).expect("events").map(|e| e.expect("event")).collect();
    assert_eq!(events.len(), acked.len(), "every acknowledged event and nothing else");
    for (event, (seq, n)) in events.iter().zip(acked) {
        assert_eq!(event.seq, *seq);
        assert_eq!(event.body, message(*n));
    }
}

fn prealloc_len(dir: &Path) -> u64 {
    fs::metadata(dir.join(PREALLOC_FILE_NAME)).map_or(0, |m| m.len())
}

#[test]
fn a_store_created_on_a_full_file_system_leaves_nothing_behind() {
    let Some(mount) = Tmpfs::mount(2 * MIB) else { return };
    fill(&mount.path().join("filler"), &mount, 0);
    for dir in [mount.path().join("store"), mount.path().join("a/b/store")] {
        let error = Store::open(&dir, options()).expect_err("no room for a segment header");
        assert!(matches!(error.kind(), ErrorKind::DiskFull { .. }), "{error}");
        assert_eq!(mount.names(), ["filler"], "nothing of {} is left", dir.display());
    }
    fs::create_dir(mount.path().join("empty")).expect("mkdir");
    Store::open(mount.path().join("empty"), options()).expect_err("still full");
    assert!(fs::read_dir(mount.path().join("empty")).expect("list").next().is_none());
    fs::remove_file(mount.path().join("filler")).expect("free");
    Store::open(mount.path().join("store"), options()).expect("room now").close().expect("close");
}

#[test]
fn factlog_emit_creating_a_store_on_a_full_file_system_leaves_nothing_behind() {
    let Some(mount) = Tmpfs::mount(2 * MIB) else { return };
    fill(&mount.path().join("filler"), &mount, 0);
    let dir = mount.path().join("store");
    let output = Command::new(&*common::FACTLOG)
        .args(["emit"])
        .arg(&dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run factlog emit");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("factlog: ") && stderr.contains("full"), "{stderr}");
    assert_eq!(mount.names(), ["filler"], "nothing of the store is left");
}

#[test]
fn a_store_that_fills_its_file_system_loses_nothing_and_does_not_fill_it_again() {
    let Some(mount) = Tmpfs::mount(80 * MIB) else { return };
    let margin = prealloc_free_bytes_min(SEGMENT_BYTES, mount.total());
    let dir: PathBuf = mount.path().join("store");
    let filler = mount.path().join("filler");
    let store = Store::open(&dir, options()).expect("open");
    // Growth steps start once a caller waits for a sync (the messages are only `Flushed`):
    // without one, no step would be taken whatever the space.
    store.flush(Durability::Synced).expect("a sync waited for");
    let mut acked = Vec::new();

    // Less than a segment above the margin: the next segments are not preallocated.
    fill(&filler, &mount, margin + SEGMENT_BYTES / 2);
    let before = mount.available();
    assert!(append(&store, &mut acked, 1500).is_none());
    assert!(store.log().info().expect("info").segments.len() >= 2, "it rolled");
    assert_eq!(prealloc_len(&dir), 0, "no segment reserved below the margin");
    assert!(before - mount.available() < 2 * SEGMENT_BYTES, "only the events took space");

    // The disk fills up: DiskFull, and nothing acknowledged is lost.
    fill(&filler, &mount, 0);
    let error = append(&store, &mut acked, 100_000).expect("the disk fills up");
    assert!(matches!(error.kind(), ErrorKind::DiskFull { .. }), "{error}");
    drop(store);
    assert_holds(&dir, &acked);

    // Some space freed, below the margin: the store works and leaves that space free.
    fs::remove_file(&filler).expect("free");
    fill(&filler, &mount, 4 * SEGMENT_BYTES);
    let store = Store::open(&dir, options()).expect("reopen");
    store.flush(Durability::Synced).expect("a sync waited for");
    assert!(append(&store, &mut acked, 1500).is_none());
    assert_eq!(prealloc_len(&dir), 0);
    assert!(mount.available() >= SEGMENT_BYTES, "the freed space was not taken");
    store.close().expect("close");
    assert_holds(&dir, &acked);

    // All space freed: segments are preallocated again, and the margin stays free.
    fs::remove_file(&filler).expect("free");
    let store = Store::open(&dir, options()).expect("reopen");
    store.flush(Durability::Synced).expect("a sync waited for");
    assert!(append(&store, &mut acked, 1500).is_none());
    let grown = store.log().prealloc_stats();
    assert!(grown.growth_steps > 0, "segments grow in steps of zeros again: {grown:?}");
    assert!(mount.available() >= margin);
    store.close().expect("close");
    assert_holds(&dir, &acked);
    drop(File::open(mount.path()).expect("the mount is still there"));
}
