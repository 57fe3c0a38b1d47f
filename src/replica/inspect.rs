//! `factlog replicas`: what a replica holds ([`list`]) and a scrub of it ([`verify`]), read
//! through the same [`Listing`] and checks as a restore (`format-spec/replication.md`,
//! "Inspecting a replica").

use std::path::Path;

use serde_json::{Value, json};

use super::Remote;
use super::listing::Listing;
use super::restore::{self, RestoreOptions, RestoreReport};
use crate::error::Result;
use crate::types::Seq;
use crate::{Log, Options};

/// The segments of a replica, as [`list`] shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// Its first seq.
    pub first_seq: u64,
    /// Its parts.
    pub parts: usize,
    /// The end of its last part: bytes of the segment file the replica holds.
    pub bytes: u64,
}

/// What a replica holds, from its listing and the header of its newest part.
#[derive(Debug, Clone)]
pub struct ReplicaSummary {
    /// The replica's listing.
    pub listing: Listing,
    /// Its segments (those a retention removed left out).
    pub segments: Vec<SegmentSummary>,
    /// The last seq its newest part holds, as that part's header says (`None`: no part).
    pub last_seq: Option<u64>,
    /// The latest lease object's contents, if any.
    pub latest_lease: Option<Value>,
    /// With a local store given: its last seq, and how many records the replica lacks.
    pub lag: Option<Lag>,
}

/// How far a replica is behind a local store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lag {
    /// The store's last seq (0: none).
    pub store_last_seq: u64,
    /// Records the store holds and the replica does not.
    pub records: u64,
}

/// Lists what the replica in `remote` holds: identity, leases, retention, segments and the
/// last seq, snapshots, ignored names; and its lag behind the store in `store` when given
/// (opened read-only).
///
/// # Errors
///
/// Those of [`Listing::read`] and of the newest part's decoding; those of opening `store`.
pub fn list(remote: &dyn Remote, store: Option<&Path>) -> Result<ReplicaSummary> {
    let listing = Listing::read(remote)?;
    let segments: Vec<SegmentSummary> = listing
        .segments
        .iter()
        .map(|(&first_seq, parts)| SegmentSummary {
            first_seq,
            parts: parts.len(),
            bytes: parts.last().map_or(0, |(_, end, _)| *end),
        })
        .collect();
    let last_seq = match listing.segments.values().next_back().and_then(|parts| parts.last()) {
        Some((start, end, name)) => match remote.get(name)? {
            Some(bytes) => Some(super::part::decode(name, &bytes, *start, *end)?.0.last_seq),
            None => None,
        },
        None => None,
    };
    let latest_lease = match listing.leases.last() {
        Some(lease) => remote
            .get(&format!("{}{:020}.json", super::lease::LEASE_PREFIX, lease.epoch))?
            .and_then(|bytes| serde_json::from_slice(&bytes).ok()),
        None => None,
    };
    let lag = match store {
        Some(dir) => {
            let log = Log::open_read_only(dir, Options::new())?;
            let store_last_seq = log.last_seq().map_or(0, |seq| seq.0);
            let records = store_last_seq.saturating_sub(last_seq.unwrap_or(0));
            Some(Lag { store_last_seq, records })
        }
        None => None,
    };
    Ok(ReplicaSummary { listing, segments, last_seq, latest_lease, lag })
}

impl ReplicaSummary {
    /// The summary as `factlog replicas list --json` prints it
    /// (`format-spec/schema/replicas-list.json`).
    #[must_use]
    pub fn to_json(&self, location: &str) -> Value {
        let identity = &self.listing.identity;
        json!({
            "location": location,
            "replica_id": identity.id_hex(),
            "created_from": {"device": identity.device, "store": identity.store},
            "created_us": identity.created_us,
            "leases": {
                "epochs": self.listing.leases.len(),
                "latest": self.listing.leases.last().map(|l| json!({
                    "epoch": l.epoch,
                    "released": l.released,
                    "holder": self.latest_lease,
                })),
            },
            "retention": self.listing.retention.as_ref().map(|r| json!({
                "covered_seq": r.covered_seq,
                "first_kept_seq": r.first_kept_seq,
                "snapshot": r.snapshot,
            })),
            "first_seq": self.segments.first().map(|s| s.first_seq),
            "last_seq": self.last_seq,
            "segments": self.segments.iter().map(|s| json!({
                "first_seq": s.first_seq, "parts": s.parts, "bytes": s.bytes,
            })).collect::<Vec<_>>(),
            "snapshots": self.listing.snapshots.keys().collect::<Vec<_>>(),
            "ignored": self.listing.ignored,
            "lag": self.lag.map(|lag| json!({
                "store_last_seq": lag.store_last_seq, "records": lag.records,
            })),
        })
    }
}

/// What a scrub of a replica found: every object a restore of all of it would use, read and
/// checked as the restore checks it, and every snapshot object besides.
#[derive(Debug, Clone)]
pub struct ScrubReport {
    /// What the restore of everything would produce (a dry run: nothing written).
    pub restore: RestoreReport,
    /// Snapshot objects that are not usable, with why (a restore passes over them).
    pub problems: Vec<String>,
}

/// Scrubs the replica in `remote`: reads and checks every part of every segment, every
/// frame, the history's start and continuity, and every snapshot object, writing nothing.
///
/// # Errors
///
/// The refusals a restore of everything would give, naming the object or the gap
/// ([`crate::ErrorKind::ReplicaDamaged`], [`crate::ErrorKind::ReplicaGap`], ...).
pub fn verify(remote: &dyn Remote) -> Result<ScrubReport> {
    let options = RestoreOptions::new().dry_run(true);
    let report = restore::check(remote, Path::new(""), &options)?;
    let mut problems: Vec<String> = report
        .snapshots_skipped
        .iter()
        .map(|s| format!("snapshot object {}: {}", s.object, s.reason))
        .collect();
    if report.through_seq < Seq(report.first_seq.0.saturating_sub(1)) {
        problems.push("the replica holds no record".to_owned());
    }
    problems.sort();
    Ok(ScrubReport { restore: report, problems })
}
