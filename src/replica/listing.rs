//! What a replica holds, listed once and sorted by kind (`format-spec/replication.md`,
//! "Objects"): its identity, newest retention record, parts by segment, snapshot objects,
//! leases, and the names that are none of these. Restore, `factlog replicas` and retention
//! read a replica through it.

use std::collections::BTreeMap;

use super::identity::{Identity, check_identity};
use super::lease::LEASE_PREFIX;
use super::retain::{self, RetentionRecord};
use super::{Remote, SEGMENTS_PREFIX, SNAPSHOTS_PREFIX, parse_part_name};
use crate::error::Result;
use crate::harness::snapshot;

/// One lease epoch of a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseEntry {
    /// Its epoch.
    pub epoch: u64,
    /// Whether its run released it.
    pub released: bool,
}

/// A replica's objects by kind.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The replica's identity.
    pub identity: Identity,
    /// The newest retention record, if a retention ran.
    pub retention: Option<RetentionRecord>,
    /// The parts of each segment by its first seq, `(start, end, name)` sorted by `start`;
    /// without the segments a retention removed (what a retention cut off half way left of
    /// them is in `ignored`).
    pub segments: BTreeMap<u64, Vec<(u64, u64, String)>>,
    /// The snapshot objects by the seq they cover.
    pub snapshots: BTreeMap<u64, String>,
    /// The lease epochs, oldest first.
    pub leases: Vec<LeaseEntry>,
    /// Names under the replica's prefixes that are none of its objects, or left over.
    pub ignored: Vec<String>,
}

impl Listing {
    /// Lists the replica in `remote`, checking its identity and every retention record.
    ///
    /// # Errors
    ///
    /// Those of [`check_identity`] and [`retain::latest`]; [`crate::ErrorKind::Remote`].
    pub fn read(remote: &dyn Remote) -> Result<Listing> {
        let identity = check_identity(remote)?;
        let (retention, mut ignored) = retain::latest(remote, &identity)?;
        let mut segments: BTreeMap<u64, Vec<(u64, u64, String)>> = BTreeMap::new();
        for name in remote.list(SEGMENTS_PREFIX)? {
            match parse_part_name(&name) {
                // Seq 0 names no segment (`format-spec/segment.md`, "Validity rules").
                Some((first_seq, start, end)) if first_seq > 0 => {
                    segments.entry(first_seq).or_default().push((start, end, name));
                }
                _ => ignored.push(name),
            }
        }
        for parts in segments.values_mut() {
            parts.sort();
        }
        // Segments a retention removed: what a retention cut off half way left of their
        // parts is not part of the replica any more.
        let retained = retention.as_ref().map_or(0, |r| r.covered_seq);
        let firsts: Vec<u64> = segments.keys().copied().collect();
        for pair in firsts.windows(2) {
            if pair[1] - 1 <= retained
                && let Some(parts) = segments.remove(&pair[0])
            {
                ignored.extend(parts.into_iter().map(|(_, _, name)| name));
            }
        }
        let mut snapshots = BTreeMap::new();
        for name in remote.list(SNAPSHOTS_PREFIX)? {
            let covered = name
                .strip_prefix(SNAPSHOTS_PREFIX)
                .filter(|file| !file.contains('/'))
                .and_then(snapshot::parse_file_name);
            match covered {
                Some(seq) => {
                    snapshots.insert(seq.0, name);
                }
                None => ignored.push(name),
            }
        }
        let mut leases: BTreeMap<u64, bool> = BTreeMap::new();
        for name in remote.list(LEASE_PREFIX)? {
            let file = name.strip_prefix(LEASE_PREFIX).unwrap_or_default();
            let epoch = |suffix: &str| -> Option<u64> {
                let digits = file.strip_suffix(suffix)?;
                (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| digits.parse().ok())?
            };
            if let Some(epoch) = epoch(".json") {
                leases.entry(epoch).or_default();
            } else if let Some(epoch) = epoch(".released") {
                *leases.entry(epoch).or_default() = true;
            } else {
                ignored.push(name);
            }
        }
        let leases =
            leases.into_iter().map(|(epoch, released)| LeaseEntry { epoch, released }).collect();
        Ok(Listing { identity, retention, segments, snapshots, leases, ignored })
    }

    /// The device of the run that holds or last held the lease (its lease object's
    /// `device`), if known.
    ///
    /// # Errors
    ///
    /// [`crate::ErrorKind::Remote`].
    pub fn source_device(&self, remote: &dyn Remote) -> Result<Option<String>> {
        let Some(latest) = self.leases.last() else { return Ok(None) };
        let name = format!("{LEASE_PREFIX}{:020}.json", latest.epoch);
        Ok(remote.get(&name)?.and_then(|bytes| {
            let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
            value.get("device")?.as_str().map(str::to_owned)
        }))
    }
}
