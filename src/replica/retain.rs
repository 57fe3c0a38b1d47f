//! Retention of a replica (`format-spec/replication.md`, "Retention"): the remote objects a
//! newer remote snapshot makes unnecessary, removed as `purge` removes segments locally, with
//! a plan that a dry run prints and a marker that tells replicators and restores that the gap
//! is on purpose.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Remote, SEGMENTS_PREFIX, SNAPSHOTS_PREFIX, parse_part_name};
use crate::error::Result;
use crate::harness::snapshot::{self, SnapshotMeta};
use crate::limits::SNAPSHOTS_KEPT;
use crate::types::Seq;

/// The prefix of retention markers: `retained/{through_seq:020}`, created before anything
/// through that seq is removed.
pub const RETAINED_PREFIX: &str = "retained/";

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
    /// The seq the oldest kept snapshot covers: a restore needs it for what was removed (0:
    /// nothing can be removed).
    pub covered_seq: u64,
}

/// The marker name of a retention through `seq`.
#[must_use]
pub fn marker_name(seq: u64) -> String {
    format!("{RETAINED_PREFIX}{seq:020}")
}

/// The highest seq a retention of the replica removed records through (0 for none).
///
/// # Errors
///
/// [`ErrorKind::Remote`].
pub fn retained_through(remote: &dyn Remote) -> Result<u64> {
    let names = remote.list(RETAINED_PREFIX)?;
    Ok(names
        .iter()
        .filter_map(|n| n.strip_prefix(RETAINED_PREFIX)?.parse::<u64>().ok())
        .max()
        .unwrap_or(0))
}

/// What a retention of the replica would remove. Reads the snapshot it keeps as the oldest
/// and checks that it is usable (as an open would load it) before planning to remove a
/// segment it covers.
///
/// # Errors
///
/// Those of [`super::check_identity`] and [`ErrorKind::Remote`].
pub fn plan(remote: &dyn Remote) -> Result<RetainPlan> {
    super::check_identity(remote)?;
    let mut snapshots: Vec<(u64, String)> = remote
        .list(SNAPSHOTS_PREFIX)?
        .into_iter()
        .filter_map(|name| {
            let file = name.strip_prefix(SNAPSHOTS_PREFIX)?;
            Some((snapshot::parse_file_name(file)?.0, name))
        })
        .collect();
    snapshots.sort();
    let mut plan = RetainPlan::default();
    let keep_from = snapshots.len().saturating_sub(SNAPSHOTS_KEPT);
    plan.snapshots = snapshots[..keep_from].iter().map(|(_, name)| name.clone()).collect();
    let Some((covered_seq, oldest_kept)) = snapshots.get(keep_from) else { return Ok(plan) };
    if !usable(remote, oldest_kept, *covered_seq)? {
        // A damaged snapshot covers nothing: remove no segment on its account.
        return Ok(plan);
    }
    plan.covered_seq = *covered_seq;
    let mut segments: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for name in remote.list(SEGMENTS_PREFIX)? {
        if let Some((first_seq, _, _)) = parse_part_name(&name) {
            segments.entry(first_seq).or_default().push(name);
        }
    }
    let firsts: Vec<u64> = segments.keys().copied().collect();
    for pair in firsts.windows(2) {
        // A segment ends where the next begins; the newest is never removed.
        let (first_seq, next) = (pair[0], pair[1]);
        if next - 1 > *covered_seq {
            break;
        }
        plan.segments.push(first_seq);
        plan.parts.extend(segments.remove(&first_seq).unwrap_or_default());
    }
    Ok(plan)
}

/// Whether the snapshot object `name` loads as an open would load it.
fn usable(remote: &dyn Remote, name: &str, covered_seq: u64) -> Result<bool> {
    let Some(bytes) = remote.get(name)? else { return Ok(false) };
    let path = Path::new(name);
    let Ok(decoded) = snapshot::decode(path, &bytes) else { return Ok(false) };
    let meta = SnapshotMeta {
        path: path.to_path_buf(),
        covered_seq: Seq(covered_seq),
        state_schema: decoded.state_schema,
        file_bytes: bytes.len() as u64,
    };
    Ok(decoded.covered_seq == Seq(covered_seq)
        && snapshot::decode_state(&meta, &decoded.body).is_ok())
}

/// Removes what `plan` names: first the marker `retained/{covered_seq}` (so that a
/// replicator never ships a removed segment again and a restore knows the gap is on
/// purpose), then the parts, oldest first, then the old snapshots.
///
/// # Errors
///
/// [`ErrorKind::Remote`]; what was removed before stays removed, and running the retention
/// again finishes it.
pub fn apply(remote: &dyn Remote, plan: &RetainPlan) -> Result<()> {
    if !plan.parts.is_empty() {
        remote.put_new(&marker_name(plan.covered_seq), b"")?;
    }
    for name in plan.parts.iter().chain(&plan.snapshots) {
        remote.delete(name)?;
    }
    Ok(())
}
