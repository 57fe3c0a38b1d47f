//! Retention of a replica (`format-spec/replication.md`, "Retention"): the remote objects a
//! newer remote snapshot makes unnecessary, removed as `purge` removes segments locally, with
//! a plan that a dry run prints and a self-checking record that tells replicators and
//! restores where the history now begins, and on purpose.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::identity::{Identity, check_identity, foreign, id_hex};
use super::{Remote, SEGMENTS_PREFIX, SNAPSHOTS_PREFIX, lease, parse_part_name, snapshot_object};
use crate::error::{ErrorKind, Result};
use crate::harness::snapshot::{self, SnapshotMeta};
use crate::limits::SNAPSHOTS_KEPT;
use crate::types::Seq;

/// The prefix of retention records: `retained/{covered_seq:020}`, created before anything is
/// removed.
pub const RETAINED_PREFIX: &str = "retained/";
/// The version of retention records this build writes and reads.
pub const RETENTION_VERSION: u16 = 1;

/// A retention record: after it, the replica's history begins at `first_kept_seq`, and the
/// snapshot object `snapshot` (covering `covered_seq`) stands for the seqs before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionRecord {
    /// The replica it belongs to.
    pub replica_id: u128,
    /// The seq the kept snapshot covers (the number in the record's name).
    pub covered_seq: u64,
    /// The kept snapshot object's name.
    pub snapshot: String,
    /// CRC-32 of the kept snapshot object, whole.
    pub snapshot_crc: u32,
    /// The first seq of the oldest segment the retention keeps: the replica's history begins
    /// there.
    pub first_kept_seq: u64,
    /// When it was written, in µs since the Unix epoch.
    pub created_us: u64,
}

impl RetentionRecord {
    /// The record's object: one line of JSON, then `crc32 ` and the CRC-32 of that line
    /// (newline included) as 8 lower-case hex digits, and a newline.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let line = json!({
            "version": RETENTION_VERSION,
            "replica_id": id_hex(self.replica_id),
            "covered_seq": self.covered_seq,
            "snapshot": self.snapshot,
            "snapshot_crc": self.snapshot_crc,
            "first_kept_seq": self.first_kept_seq,
            "created_us": self.created_us,
        });
        let mut out = format!("{line}\n").into_bytes();
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(format!("crc32 {crc:08x}\n").as_bytes());
        out
    }

    /// Checks the record object `bytes` named `name` and reads it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::ReplicaDamaged`] naming the object when it is not a whole record (an empty
    /// marker included), its number is not its name's, or it belongs to another replica;
    /// [`ErrorKind::UnsupportedVersion`] for a newer record.
    pub fn decode(name: &str, bytes: &[u8], identity: &Identity) -> crate::Result<Self> {
        let damaged = |reason: &str| -> crate::Error {
            ErrorKind::ReplicaDamaged {
                object: name.to_owned(),
                reason: format!(
                    "{reason}: it is not a retention record as factlog retain writes it (if no \
                     retention ran, remove it)"
                ),
            }
            .into()
        };
        if bytes.is_empty() {
            return Err(damaged("an empty marker"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| damaged("not text"))?;
        let Some((line, check)) = text.split_once('\n') else {
            return Err(damaged("no checksum line"));
        };
        let expected = crc32fast::hash(&bytes[..=line.len()]);
        if check != format!("crc32 {expected:08x}\n") {
            return Err(damaged("its checksum does not match"));
        }
        let value: Value = serde_json::from_str(line).map_err(|_| damaged("not JSON"))?;
        let number = |field: &str| value.get(field).and_then(Value::as_u64);
        match number("version") {
            Some(v) if v == u64::from(RETENTION_VERSION) => {}
            Some(v) => {
                return Err(ErrorKind::UnsupportedVersion {
                    path: name.into(),
                    found: u16::try_from(v).unwrap_or(u16::MAX),
                    supported: RETENTION_VERSION,
                }
                .into());
            }
            None => return Err(damaged("no version")),
        }
        let replica_id = value
            .get("replica_id")
            .and_then(Value::as_str)
            .filter(|hex| hex.len() == 32)
            .and_then(|hex| u128::from_str_radix(hex, 16).ok())
            .ok_or_else(|| damaged("no replica_id"))?;
        let record = RetentionRecord {
            replica_id,
            covered_seq: number("covered_seq").ok_or_else(|| damaged("no covered_seq"))?,
            snapshot: value
                .get("snapshot")
                .and_then(Value::as_str)
                .ok_or_else(|| damaged("no snapshot"))?
                .to_owned(),
            snapshot_crc: number("snapshot_crc")
                .and_then(|crc| u32::try_from(crc).ok())
                .ok_or_else(|| damaged("no snapshot_crc"))?,
            first_kept_seq: number("first_kept_seq").ok_or_else(|| damaged("no first_kept_seq"))?,
            created_us: number("created_us").unwrap_or(0),
        };
        if record.replica_id != identity.replica_id {
            return Err(foreign(name, record.replica_id, identity));
        }
        if record_name(record.covered_seq) != name
            || record.snapshot
                != super::snapshot_name(&snapshot::file_name(Seq(record.covered_seq)))
            || record.first_kept_seq == 0
            || record.first_kept_seq > record.covered_seq.saturating_add(1)
        {
            return Err(damaged(&format!(
                "its fields (covered seq {}, snapshot {}, first kept seq {}) do not agree with \
                 each other or with its name",
                record.covered_seq, record.snapshot, record.first_kept_seq
            )));
        }
        Ok(record)
    }
}

/// The name of the record of a retention keeping the snapshot that covers `covered_seq`.
#[must_use]
pub fn record_name(covered_seq: u64) -> String {
    format!("{RETAINED_PREFIX}{covered_seq:020}")
}

/// The retention records of the replica: the newest (the highest `covered_seq`), and the
/// names under `retained/` that are not records' (ignored). Every record is read and
/// checked, so a forged or stray one is refused, not trusted.
///
/// # Errors
///
/// Those of [`RetentionRecord::decode`]; [`ErrorKind::Remote`].
pub fn latest(
    remote: &dyn Remote,
    identity: &Identity,
) -> Result<(Option<RetentionRecord>, Vec<String>)> {
    let mut newest: Option<RetentionRecord> = None;
    let mut ignored = Vec::new();
    for name in remote.list(RETAINED_PREFIX)? {
        let numbered = name
            .strip_prefix(RETAINED_PREFIX)
            .is_some_and(|n| n.len() == 20 && n.bytes().all(|b| b.is_ascii_digit()));
        if !numbered {
            ignored.push(name);
            continue;
        }
        let Some(bytes) = remote.get(&name)? else { continue };
        let record = RetentionRecord::decode(&name, &bytes, identity)?;
        if newest.as_ref().is_none_or(|n| record.covered_seq > n.covered_seq) {
            newest = Some(record);
        }
    }
    Ok((newest, ignored))
}

/// What a retention removes, or removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetainPlan {
    /// Snapshot objects older than the newest [`SNAPSHOTS_KEPT`].
    pub snapshots: Vec<String>,
    /// Part objects of the segments whose every record the oldest kept snapshot covers (and
    /// that a later segment follows).
    pub parts: Vec<String>,
    /// The segments those parts hold, by first seq.
    pub segments: Vec<u64>,
    /// Lease objects of superseded epochs ([`lease::superseded`]).
    pub leases: Vec<String>,
    /// The seq the oldest kept snapshot covers: a restore needs it for what was removed (0:
    /// nothing can be removed).
    pub covered_seq: u64,
    /// The record written before anything is removed (`None` when no snapshot or segment is
    /// removed).
    pub record: Option<RetentionRecord>,
    /// Why no segment or snapshot can be removed, when that is so for a reason the user may
    /// want to know (the oldest kept snapshot does not load).
    pub held_back: Option<String>,
}

/// What a retention of the replica would remove. Reads the snapshot it keeps as the oldest
/// and checks that it is usable (as an open would load it, and of this replica) before
/// planning to remove a segment it covers or a snapshot older than it.
///
/// # Errors
///
/// Those of [`check_identity`] and [`latest`]; [`ErrorKind::Remote`].
pub fn plan(remote: &dyn Remote, now_us: u64) -> Result<RetainPlan> {
    let identity = check_identity(remote)?;
    // A damaged record refuses the retention: it would hide how the history begins.
    let _ = latest(remote, &identity)?;
    let mut plan = RetainPlan { leases: lease::superseded(remote)?, ..RetainPlan::default() };
    let mut snapshots: Vec<(u64, String)> = remote
        .list(SNAPSHOTS_PREFIX)?
        .into_iter()
        .filter_map(|name| {
            let file = name.strip_prefix(SNAPSHOTS_PREFIX)?;
            Some((snapshot::parse_file_name(file)?.0, name))
        })
        .collect();
    snapshots.sort();
    let keep_from = snapshots.len().saturating_sub(SNAPSHOTS_KEPT);
    let Some((covered_seq, oldest_kept)) = snapshots.get(keep_from) else { return Ok(plan) };
    let Some(snapshot_crc) = usable(remote, &identity, oldest_kept, *covered_seq)? else {
        // A damaged snapshot covers nothing: remove nothing on its account, not even the
        // snapshots before it, one of which the newest record may name.
        plan.held_back = Some(format!(
            "the oldest snapshot to keep, {oldest_kept}, does not load: nothing but superseded \
             leases is removed until newer snapshots replace it"
        ));
        return Ok(plan);
    };
    plan.snapshots = snapshots[..keep_from].iter().map(|(_, name)| name.clone()).collect();
    plan.covered_seq = *covered_seq;
    let mut segments: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for name in remote.list(SEGMENTS_PREFIX)? {
        if let Some((first_seq, _, _)) = parse_part_name(&name) {
            segments.entry(first_seq).or_default().push(name);
        }
    }
    let firsts: Vec<u64> = segments.keys().copied().collect();
    let mut first_kept_seq = firsts.first().copied().unwrap_or(covered_seq + 1);
    for pair in firsts.windows(2) {
        // A segment ends where the next begins; the newest is never removed.
        let (first_seq, next) = (pair[0], pair[1]);
        if next - 1 > *covered_seq {
            break;
        }
        plan.segments.push(first_seq);
        plan.parts.extend(segments.remove(&first_seq).unwrap_or_default());
        first_kept_seq = next;
    }
    if !plan.parts.is_empty() || !plan.snapshots.is_empty() {
        plan.record = Some(RetentionRecord {
            replica_id: identity.replica_id,
            covered_seq: *covered_seq,
            snapshot: oldest_kept.clone(),
            snapshot_crc,
            first_kept_seq: first_kept_seq.min(covered_seq + 1),
            created_us: now_us,
        });
    }
    Ok(plan)
}

/// The CRC-32 of the snapshot object `name` if it is one of this replica that loads as an
/// open would load it.
fn usable(
    remote: &dyn Remote,
    identity: &Identity,
    name: &str,
    covered_seq: u64,
) -> Result<Option<u32>> {
    let Some(bytes) = remote.get(name)? else { return Ok(None) };
    let Ok((header, file)) = snapshot_object::decode(name, &bytes, covered_seq) else {
        return Ok(None);
    };
    if header.replica_id != identity.replica_id {
        return Ok(None);
    }
    let path = Path::new(name);
    let Ok(decoded) = snapshot::decode(path, file) else { return Ok(None) };
    let meta = SnapshotMeta {
        path: path.to_path_buf(),
        covered_seq: Seq(covered_seq),
        state_schema: decoded.state_schema,
        file_bytes: file.len() as u64,
    };
    let loads = decoded.covered_seq == Seq(covered_seq)
        && snapshot::decode_state(&meta, &decoded.body).is_ok();
    Ok(loads.then(|| crc32fast::hash(&bytes)))
}

/// Removes what `plan` names: first it creates the plan's retention record (so that a
/// replicator never ships a removed segment again and a restore knows where the history
/// begins and why), then removes the parts, oldest first, then the old snapshots, then the
/// superseded leases.
///
/// # Errors
///
/// [`ErrorKind::ReplicaDamaged`] when a record of that name exists with other contents;
/// [`ErrorKind::Remote`]; what was removed before stays removed, and running the retention
/// again finishes it.
pub fn apply(remote: &dyn Remote, plan: &RetainPlan) -> Result<()> {
    if let Some(record) = &plan.record {
        let name = record_name(record.covered_seq);
        if !remote.put_new(&name, &record.encode())? {
            // A retention cut off after its record: the record must be this one.
            let identity = check_identity(remote)?;
            let existing = remote.get(&name)?.unwrap_or_default();
            let found = RetentionRecord::decode(&name, &existing, &identity)?;
            if (found.snapshot_crc, found.first_kept_seq)
                != (record.snapshot_crc, record.first_kept_seq)
            {
                return Err(ErrorKind::ReplicaDamaged {
                    object: name,
                    reason: format!(
                        "it says the history begins at seq {} with a snapshot of checksum \
                         {:08x}, this retention at seq {} with {:08x}: remove the replica's \
                         stray objects, or re-seed it at a new location",
                        found.first_kept_seq,
                        found.snapshot_crc,
                        record.first_kept_seq,
                        record.snapshot_crc
                    ),
                }
                .into());
            }
        }
    }
    for name in plan.parts.iter().chain(&plan.snapshots).chain(&plan.leases) {
        remote.delete(name)?;
    }
    Ok(())
}
