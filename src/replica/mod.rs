//! Replicas: a store's log and snapshots shipped to an object store, and rebuilt from there on
//! another machine (`format-spec/replication.md`).
//!
//! - [`remote`]: the seam every object-store request goes through, and its `file://` form;
//! - [`object`]: its `s3://`, `gs://` and `az://` forms (feature `object-store`), with
//!   [`aws_profile`] for the shared credentials files of `s3://`;
//! - [`part`]: a part, the self-checking object that holds a range of a segment file;
//! - [`lease`]: one replicating run per replica;
//! - [`retain`]: the remote objects a newer remote snapshot makes unnecessary, removed;
//! - [`restored`]: the file a restored store keeps, naming the replica it came from;
//! - [`ship`]: the replicator, which ships what the store's files hold;
//! - [`background`]: a store replicating in its own process ([`crate::Store::replicate`]);
//! - [`restore`](mod@restore): a store rebuilt from a replica, every object checked first.

#[cfg(feature = "object-store")]
pub mod aws_profile;
pub mod background;
pub mod lease;
#[cfg(feature = "object-store")]
pub mod object;
pub mod part;
pub(crate) mod progress;
pub mod remote;
pub mod restore;
pub mod restored;
pub mod retain;
pub mod ship;

pub use background::{ReplicateOptions, Replication};
#[cfg(feature = "object-store")]
pub use object::{ObjectOptions, ObjectRemote};
pub use remote::{DirRemote, Remote};
pub use restore::{RecordTime, RestoreOptions, RestoreReport, restore};
pub use ship::{Replicator, ShipOptions, ShipStatus};

use crate::error::{ErrorKind, Result};

/// The name of a replica's identity object.
pub const IDENTITY_NAME: &str = "factlog-replica.json";
/// The `format` of the identity object.
pub const IDENTITY_FORMAT: &str = "factlog-replica";
/// The replica format version this build writes and reads.
pub const REPLICA_VERSION: u16 = 1;
/// The prefix of part objects.
pub const SEGMENTS_PREFIX: &str = "segments/";
/// The prefix of snapshot objects.
pub const SNAPSHOTS_PREFIX: &str = "snapshots/";

/// The name of the part holding bytes `[start, end)` of the segment that begins at
/// `first_seq`.
#[must_use]
pub fn part_name(first_seq: u64, start: u64, end: u64) -> String {
    format!("{SEGMENTS_PREFIX}{first_seq:020}/{start:020}-{end:020}.part")
}

/// The segment's first seq, start and end a part's name says, or `None` for a name that is
/// not a part's.
#[must_use]
pub fn parse_part_name(name: &str) -> Option<(u64, u64, u64)> {
    let rest = name.strip_prefix(SEGMENTS_PREFIX)?;
    let (segment, file) = rest.split_once('/')?;
    let (start, end) = file.strip_suffix(".part")?.split_once('-')?;
    Some((number20(segment)?, number20(start)?, number20(end)?))
}

/// The object name of the store's snapshot file named `file_name`.
#[must_use]
pub fn snapshot_name(file_name: &str) -> String {
    format!("{SNAPSHOTS_PREFIX}{file_name}")
}

/// A number written as exactly 20 decimal digits.
fn number20(text: &str) -> Option<u64> {
    (text.len() == 20 && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok())?
}

/// Creates the replica's identity object if it is missing, and checks it.
///
/// # Errors
///
/// Those of [`check_identity`], and [`ErrorKind::Remote`].
pub fn ensure_identity(remote: &dyn Remote) -> Result<()> {
    let identity = serde_json::json!({"format": IDENTITY_FORMAT, "version": REPLICA_VERSION});
    remote.put_new(IDENTITY_NAME, identity.to_string().as_bytes())?;
    check_identity(remote)
}

/// Checks that the location holds a replica of a version this build reads.
///
/// # Errors
///
/// [`ErrorKind::NotAReplica`] without an identity object; [`ErrorKind::UnsupportedVersion`]
/// for another version; [`ErrorKind::ReplicaDamaged`] for an identity that is not one.
pub fn check_identity(remote: &dyn Remote) -> Result<()> {
    let Some(bytes) = remote.get(IDENTITY_NAME)? else {
        return Err(ErrorKind::NotAReplica { location: remote.location().to_owned() }.into());
    };
    let damaged = |reason: &str| -> crate::Error {
        ErrorKind::ReplicaDamaged { object: IDENTITY_NAME.to_owned(), reason: reason.to_owned() }
            .into()
    };
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| damaged("not a JSON object"))?;
    if value.get("format").and_then(serde_json::Value::as_str) != Some(IDENTITY_FORMAT) {
        return Err(damaged("its \"format\" is not \"factlog-replica\""));
    }
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(REPLICA_VERSION) => Ok(()),
        Some(v) => Err(ErrorKind::UnsupportedVersion {
            path: IDENTITY_NAME.into(),
            found: u16::try_from(v).unwrap_or(u16::MAX),
            supported: REPLICA_VERSION,
        }
        .into()),
        None => Err(damaged("its \"version\" is not a number")),
    }
}

/// The name of this machine, as leases and restore reports name devices.
#[must_use]
pub fn device_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_round_trip_and_sort_in_order() {
        let name = part_name(17, 64, 4096);
        assert_eq!(
            name,
            "segments/00000000000000000017/00000000000000000064-00000000000000004096.part"
        );
        assert_eq!(parse_part_name(&name), Some((17, 64, 4096)));
        assert!(part_name(17, 64, 100) < part_name(17, 100, 200));
        for bad in
            ["segments/17/64-4096.part", "snapshots/x", "segments/00000000000000000017/x.part"]
        {
            assert_eq!(parse_part_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_identity_is_created_once_and_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let remote = DirRemote::create("file:///r", dir.path()).expect("remote");
        assert!(matches!(
            check_identity(&remote).unwrap_err().kind(),
            ErrorKind::NotAReplica { .. }
        ));
        ensure_identity(&remote).expect("created");
        ensure_identity(&remote).expect("checked");
        std::fs::write(
            dir.path().join(IDENTITY_NAME),
            br#"{"format":"factlog-replica","version":2}"#,
        )
        .expect("write");
        assert!(matches!(
            check_identity(&remote).unwrap_err().kind(),
            ErrorKind::UnsupportedVersion { found: 2, .. }
        ));
    }
}
