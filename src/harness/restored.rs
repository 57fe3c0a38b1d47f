//! `DIR/RESTORED.json`: what `factlog restore` leaves in a store it built from a replica
//! (`format-spec/replication.md`, "Restore"), so that the store's recovery reports say where
//! it came from.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fs::{Fs, OpenMode};

/// The name of the file in the store directory.
pub const RESTORED_FILE: &str = "RESTORED.json";
/// The version of the file this build writes and reads.
pub const RESTORED_VERSION: u16 = 1;

/// Where a restored store came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    /// The file's version ([`RESTORED_VERSION`]).
    pub version: u16,
    /// The replica's location.
    pub from: String,
    /// The last seq restored.
    pub through_seq: u64,
    /// The device that wrote the replica (its last lease's), when known.
    pub source_device: Option<String>,
    /// When the restore ran, in microseconds since the epoch.
    pub restored_us: u64,
    /// The device the restore ran on.
    pub device: String,
}

/// The `RESTORED.json` of the store in `dir`: `None` when the store was not restored, or when
/// the file is not one this build reads (it only informs; the log is the truth).
#[must_use]
pub fn read(fs: &dyn Fs, dir: &Path) -> Option<Restored> {
    let path = dir.join(RESTORED_FILE);
    let file = fs.open(&path, OpenMode::Read).ok()?;
    let len = usize::try_from(file.len().ok()?).ok()?.min(64 * 1024);
    let mut bytes = vec![0; len];
    file.read_exact_at(&mut bytes, 0).ok()?;
    let restored: Restored = serde_json::from_slice(&bytes).ok()?;
    (restored.version == RESTORED_VERSION).then_some(restored)
}

/// Writes `restored` as `dir/RESTORED.json` and syncs it (the caller syncs the directory).
///
/// # Errors
///
/// The file-system errors of the write.
pub fn write(fs: &dyn Fs, dir: &Path, restored: &Restored) -> Result<()> {
    let path = dir.join(RESTORED_FILE);
    let bytes = serde_json::to_vec(restored).expect("a struct of strings and numbers");
    let file = fs.open(&path, OpenMode::CreateNew).map_err(|e| Error::io("create", &path, e))?;
    file.write_all_at(&bytes, 0).map_err(|e| Error::io("write", &path, e))?;
    file.sync_data().map_err(|e| Error::io("fdatasync", &path, e))
}
