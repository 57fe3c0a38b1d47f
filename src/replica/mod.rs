//! Replicas: a store's log and snapshots shipped to an object store, and rebuilt from there on
//! another machine (`format-spec/replication.md`).
//!
//! - [`remote`]: the seam every object-store request goes through, and its `file://` form;
//! - [`object`]: its `s3://`, `gs://` and `az://` forms (feature `object-store`), with
//!   [`aws_profile`] for the shared credentials files of `s3://`;
//! - [`identity`]: the replica's identity object and the id each of its objects carries;
//! - [`part`]: a part, the self-checking object that holds a range of a segment file;
//! - [`snapshot_object`]: a snapshot object, the self-checking copy of a snapshot file;
//! - [`listing`]: what a replica holds, listed once and sorted by kind;
//! - [`lease`]: one replicating run per replica;
//! - [`retain`]: the remote objects a newer remote snapshot makes unnecessary, removed, and
//!   the retention record that says where the history then begins;
//! - [`restored`]: the file a restored store keeps, naming the replica it came from;
//! - [`ship`]: the replicator, which ships what the store's files hold;
//! - [`shipped`]: the file in the store directory that says what a replication shipped;
//! - [`background`]: a store replicating in its own process ([`crate::Store::replicate`]);
//! - [`restore`](mod@restore): a store rebuilt from a replica, every object checked first,
//!   written in a staging directory (`staging.rs`) of its own and moved into place;
//! - [`inspect`]: `factlog replicas`: what a replica holds, and a scrub of it.

#[cfg(feature = "object-store")]
pub mod aws_profile;
pub mod background;
pub mod identity;
pub mod inspect;
pub mod lease;
pub mod listing;
#[cfg(feature = "object-store")]
pub mod object;
pub mod part;
pub mod remote;
pub mod restore;
pub mod retain;
pub mod ship;
pub mod shipped;
pub mod snapshot_object;
mod staging;

pub use background::{ReplicateOptions, Replication};
pub use identity::{
    IDENTITY_FORMAT, IDENTITY_NAME, Identity, REPLICA_VERSION, check_identity, ensure_identity,
};
#[cfg(feature = "object-store")]
pub use object::{ObjectOptions, ObjectRemote};
pub use remote::{DirRemote, Remote};
pub use restore::{RecordTime, RestoreOptions, RestoreReport, restore};
pub use ship::{Replicator, ShipOptions, ShipStatus};

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
}
