//! `DIR/replicas/{replica_id}.json`: what a replication of the store in `DIR` has shipped,
//! written by its replicator (in the store's process or in `factlog replicate`) so that
//! `factlog info` can show the lag of a replicating store (`format-spec/replication.md`,
//! "The shipped file").
//!
//! The file only informs: the replica is the truth about what it holds. It is replaced
//! whole (written beside, then renamed over), never synced, and a reader passes over a file it
//! cannot read, saying so.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fs::{Fs, OpenMode};

/// The directory of the shipped files in a store directory.
pub const SHIPPED_DIR: &str = "replicas";
/// The version of the file this build writes and reads.
pub const SHIPPED_VERSION: u16 = 1;
/// The most bytes of a shipped file a reader reads.
const SHIPPED_MAX_BYTES: usize = 64 * 1024;

/// What one replication has shipped, as its replicator last wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shipped {
    /// The file's version ([`SHIPPED_VERSION`]).
    pub version: u16,
    /// The replica's id, 32 lower-case hex digits.
    pub replica_id: String,
    /// The replica's location.
    pub location: String,
    /// The last seq the replica holds (0 for none).
    pub shipped_seq: u64,
    /// The last seq the replicator found in the store's files.
    pub local_seq: u64,
    /// When the replicator wrote this, in µs since the Unix epoch.
    pub updated_us: u64,
    /// The process that runs the replication.
    pub pid: u32,
    /// Whether the replication was running when this was written: `false` once it stopped
    /// and gave its lease back. A replication whose process died leaves `true` behind, with
    /// an `updated_us` that no longer advances.
    pub running: bool,
    /// The error of its last round, if that failed (the next round retries).
    pub last_error: Option<String>,
}

/// The path of the shipped file of replica `replica_id` (hex) of the store in `dir`.
#[must_use]
pub fn path(dir: &Path, replica_id: &str) -> PathBuf {
    dir.join(SHIPPED_DIR).join(format!("{replica_id}.json"))
}

/// Replaces the shipped file of `shipped.replica_id` in the store in `dir`: written to a
/// temporary name beside it, then renamed over it, so that a reader sees the old file or the
/// new one. Not synced: after a crash the file may be old, empty or missing, which a reader
/// reports as unreadable.
///
/// # Errors
///
/// The file-system error of the write, with the path (the caller decides whether it
/// matters: a replicator goes on without it).
pub fn write(fs: &dyn Fs, dir: &Path, shipped: &Shipped) -> std::io::Result<()> {
    let final_path = path(dir, &shipped.replica_id);
    let temporary = final_path.with_extension("json.tmp");
    fs.create_dir_all(&dir.join(SHIPPED_DIR))?;
    match fs.remove_file(&temporary) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut bytes = serde_json::to_vec(shipped).expect("a struct of strings and numbers");
    bytes.push(b'\n');
    let file = fs.open(&temporary, OpenMode::CreateNew)?;
    file.write_all_at(&bytes, 0)?;
    drop(file);
    fs.rename(&temporary, &final_path)
}

/// One shipped file of a store, as a reader found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A file this build reads.
    Read(Shipped),
    /// A file it cannot use: its path and why (damaged, cut by a crash, a newer version).
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
}

/// Every shipped file of the store in `dir`, sorted by replica id; none when the store has
/// never replicated (or cannot list its directory: the files only inform).
#[must_use]
pub fn read_all(fs: &dyn Fs, dir: &Path) -> Vec<Found> {
    let shipped_dir = dir.join(SHIPPED_DIR);
    let Ok(mut names) = fs.list_dir(&shipped_dir) else { return Vec::new() };
    names.retain(|name| name.ends_with(".json"));
    names.sort();
    // A file removed between the listing and its read is passed over: a listing that races a
    // rename or a removal is normal.
    names.iter().filter_map(|name| read_one(fs, &shipped_dir.join(name))).collect()
}

fn read_one(fs: &dyn Fs, path: &Path) -> Option<Found> {
    let unreadable = |reason: String| Some(Found::Unreadable { path: path.to_owned(), reason });
    let file = match fs.open(path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return unreadable(format!("cannot be opened: {e}")),
    };
    let len = match file.len() {
        Ok(len) => usize::try_from(len).unwrap_or(usize::MAX),
        Err(e) => return unreadable(format!("cannot be read: {e}")),
    };
    if len > SHIPPED_MAX_BYTES {
        return unreadable(format!("is {len} bytes long, more than {SHIPPED_MAX_BYTES}"));
    }
    let mut bytes = vec![0; len];
    if let Err(e) = file.read_exact_at(&mut bytes, 0) {
        return unreadable(format!("cannot be read: {e}"));
    }
    let version = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|value| value.get("version").and_then(serde_json::Value::as_u64));
    match version {
        Some(v) if v == u64::from(SHIPPED_VERSION) => match serde_json::from_slice(&bytes) {
            Ok(shipped) => Some(Found::Read(shipped)),
            Err(e) => unreadable(format!("is not a shipped file of version 1: {e}")),
        },
        Some(v) => unreadable(format!(
            "has version {v}, which this build does not read (it reads {SHIPPED_VERSION}): \
             a newer factlog wrote it"
        )),
        None => unreadable("is not a JSON object with a version (cut by a crash?)".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    fn sample(id: &str, shipped_seq: u64) -> Shipped {
        Shipped {
            version: SHIPPED_VERSION,
            replica_id: id.to_owned(),
            location: "file:///replicas/a".to_owned(),
            shipped_seq,
            local_seq: 9,
            updated_us: 1,
            pid: 7,
            running: true,
            last_error: None,
        }
    }

    #[test]
    fn written_files_are_read_back_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_all(&RealFs, dir.path()).is_empty(), "a store that never replicated");
        write(&RealFs, dir.path(), &sample("bb", 3)).unwrap();
        write(&RealFs, dir.path(), &sample("aa", 4)).unwrap();
        write(&RealFs, dir.path(), &sample("bb", 5)).unwrap();
        let found = read_all(&RealFs, dir.path());
        assert_eq!(found, [Found::Read(sample("aa", 4)), Found::Read(sample("bb", 5))]);
        // A temporary file left by a crash is neither read nor in the way.
        std::fs::write(path(dir.path(), "bb").with_extension("json.tmp"), b"{").unwrap();
        write(&RealFs, dir.path(), &sample("bb", 6)).unwrap();
        assert_eq!(read_all(&RealFs, dir.path())[1], Found::Read(sample("bb", 6)));
    }

    #[test]
    fn damaged_empty_and_newer_files_are_unreadable_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(SHIPPED_DIR)).unwrap();
        std::fs::write(path(dir.path(), "a"), b"").unwrap();
        std::fs::write(path(dir.path(), "b"), br#"{"version":2}"#).unwrap();
        std::fs::write(path(dir.path(), "c"), br#"{"version":1,"replica_id":3}"#).unwrap();
        let reasons: Vec<String> = read_all(&RealFs, dir.path())
            .into_iter()
            .map(|found| match found {
                Found::Unreadable { reason, .. } => reason,
                Found::Read(shipped) => panic!("read {shipped:?}"),
            })
            .collect();
        assert!(reasons[0].contains("cut by a crash"), "{reasons:?}");
        assert!(reasons[1].contains("version 2"), "{reasons:?}");
        assert!(reasons[2].contains("not a shipped file"), "{reasons:?}");
    }
}
