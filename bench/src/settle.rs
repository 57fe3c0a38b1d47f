//! Disk state settled before a measurement: waiting for a freshly opened log's background
//! preallocation, so that its zeros are not written back during the timing, and the floors'
//! preallocated files. Shared by the benches that write to the disk.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Name of the file the preallocator fills (`format-spec/segment.md`, "Preallocation").
const PREALLOC_FILE_NAME: &str = "prealloc.tmp";

/// The longest a bench waits for a background preallocation before giving up.
const PREALLOC_WAIT_MAX: Duration = Duration::from_secs(120);

/// Waits until the background preallocator of the log in `dir` (segments of `segment_bytes`)
/// has written its next file (the first growth step of zeros,
/// `factlog::prepared_prealloc_bytes`) and that file is on disk. A freshly opened log starts preparing its
/// second segment at once; without this wait its zeros would be written back during the first
/// samples of a measurement.
pub fn wait_for_prealloc(dir: &Path, segment_bytes: u64) {
    let path = dir.join(PREALLOC_FILE_NAME);
    let started = Instant::now();
    loop {
        // The first growth step of a segment, or empty when the file system is short of space.
        let expected = factlog::prepared_prealloc_bytes(dir, segment_bytes);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == expected) {
            break;
        }
        assert!(
            started.elapsed() < PREALLOC_WAIT_MAX,
            "{} did not reach {expected} bytes within {PREALLOC_WAIT_MAX:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every zero is written once the file has its full length; syncing it here waits for their
    // writeback, after which the preallocator's own fdatasync returns at once.
    File::open(&path).and_then(|file| file.sync_data()).expect("sync the preallocated file");
    std::thread::sleep(Duration::from_millis(50));
}

/// A file of `bytes` zeros, written and synced, as factlog's segments are preallocated: a
/// floor that writes into it pays for no block allocation and no size change.
pub fn preallocated_file(path: &Path, bytes: u64) -> File {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .expect("create the floor file");
    let zeros = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < bytes {
        let n = (bytes - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at).expect("write zeros");
        at += n as u64;
    }
    file.sync_all().expect("sync the floor file");
    file
}
