//! One replicating run per replica (`format-spec/replication.md`, "The lease"): epochs created
//! with the remote's conditional create, released by a clean stop, taken over explicitly.

use std::path::Path;

use serde_json::{Value, json};

use super::{Remote, device_name};
use crate::error::{ErrorKind, Result};

/// The prefix of lease objects.
pub const LEASE_PREFIX: &str = "lease/";

/// The lease a run holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Its epoch: one more than the epoch before it.
    pub epoch: u64,
    /// Whether it was taken over from a run that had not released it.
    pub takeover: bool,
}

fn lease_name(epoch: u64) -> String {
    format!("{LEASE_PREFIX}{epoch:020}.json")
}

fn released_name(epoch: u64) -> String {
    format!("{LEASE_PREFIX}{epoch:020}.released")
}

/// The highest epoch with a lease object, and whether it was released.
fn latest(remote: &dyn Remote) -> Result<Option<(u64, bool)>> {
    let names = remote.list(LEASE_PREFIX)?;
    let epoch_of = |name: &str, suffix: &str| -> Option<u64> {
        let digits = name.strip_prefix(LEASE_PREFIX)?.strip_suffix(suffix)?;
        (digits.len() == 20).then(|| digits.parse().ok())?
    };
    let Some(epoch) = names.iter().filter_map(|n| epoch_of(n, ".json")).max() else {
        return Ok(None);
    };
    let released = names.iter().any(|n| epoch_of(n, ".released") == Some(epoch));
    Ok(Some((epoch, released)))
}

/// How a lease object describes its holder, for messages.
fn describe(remote: &dyn Remote, epoch: u64) -> String {
    let holder = remote
        .get(&lease_name(epoch))
        .ok()
        .flatten()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
    let field = |name: &str| {
        holder.as_ref().and_then(|h| h.get(name)).map_or_else(|| "?".to_owned(), Value::to_string)
    };
    let since = holder
        .as_ref()
        .and_then(|h| h.get("since_us"))
        .and_then(Value::as_u64)
        .map_or_else(|| "?".to_owned(), crate::protocol::time::format_rfc3339);
    format!(
        "epoch {epoch}, device {}, pid {}, store {}, since {since}",
        field("device"),
        field("pid"),
        field("store")
    )
}

/// Takes the replica's lease for the store in `store_dir`: the next epoch, created only if
/// the latest was released, or whatever its state with `takeover` (which the new lease
/// records, with the holder it ended).
///
/// # Errors
///
/// [`ErrorKind::LeaseHeld`] when another run holds it (or wins the race for the next epoch);
/// [`ErrorKind::Remote`].
pub fn take(remote: &dyn Remote, store_dir: &Path, takeover: bool, now_us: u64) -> Result<Lease> {
    let latest = latest(remote)?;
    let held = latest.filter(|&(_, released)| !released).map(|(epoch, _)| epoch);
    if let Some(epoch) = held
        && !takeover
    {
        return Err(ErrorKind::LeaseHeld {
            location: remote.location().to_owned(),
            holder: describe(remote, epoch),
        }
        .into());
    }
    let epoch = latest.map_or(1, |(epoch, _)| epoch + 1);
    let mut object = json!({
        "version": 1,
        "epoch": epoch,
        "device": device_name(),
        "pid": std::process::id(),
        "store": store_dir.display().to_string(),
        "since_us": now_us,
    });
    if let Some(ended) = held {
        object["takeover"] = json!(true);
        object["ended"] = json!(describe(remote, ended));
    }
    if !remote.put_new(&lease_name(epoch), object.to_string().as_bytes())? {
        return Err(ErrorKind::LeaseHeld {
            location: remote.location().to_owned(),
            holder: describe(remote, epoch),
        }
        .into());
    }
    Ok(Lease { epoch, takeover: held.is_some() })
}

/// The lease objects of every epoch below the highest (their `.json` and `.released`): a
/// later epoch supersedes them, and only the highest tells whether the lease is held, so
/// retention removes them ([`super::retain`]).
///
/// # Errors
///
/// [`ErrorKind::Remote`].
pub fn superseded(remote: &dyn Remote) -> Result<Vec<String>> {
    let names = remote.list(LEASE_PREFIX)?;
    let epoch_of = |name: &str| -> Option<u64> {
        let file = name.strip_prefix(LEASE_PREFIX)?;
        let digits = file.strip_suffix(".json").or_else(|| file.strip_suffix(".released"))?;
        (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())?
    };
    let Some(highest) = names.iter().filter_map(|n| epoch_of(n)).max() else {
        return Ok(Vec::new());
    };
    Ok(names.into_iter().filter(|n| epoch_of(n).is_some_and(|e| e < highest)).collect())
}

/// Checks that `lease` was not taken over (no lease of a later epoch exists).
///
/// # Errors
///
/// [`ErrorKind::LeaseLost`] when it was; [`ErrorKind::Remote`].
pub fn check(remote: &dyn Remote, lease: Lease) -> Result<()> {
    if remote.get(&lease_name(lease.epoch + 1))?.is_some() {
        return Err(ErrorKind::LeaseLost {
            location: remote.location().to_owned(),
            epoch: lease.epoch,
        }
        .into());
    }
    Ok(())
}

/// Releases `lease`: the next run takes the replica without `--takeover`.
///
/// # Errors
///
/// [`ErrorKind::Remote`].
pub fn release(remote: &dyn Remote, lease: Lease) -> Result<()> {
    remote.put_new(&released_name(lease.epoch), b"")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::DirRemote;

    #[test]
    fn one_run_at_a_time_and_takeover_ends_the_other() {
        let dir = tempfile::tempdir().expect("tempdir");
        let remote = DirRemote::create("file:///r", dir.path()).expect("remote");
        let store = Path::new("/stores/a");
        let first = take(&remote, store, false, 1).expect("first");
        assert_eq!(first, Lease { epoch: 1, takeover: false });
        let refused = take(&remote, store, false, 2).unwrap_err();
        assert!(matches!(refused.kind(), ErrorKind::LeaseHeld { .. }), "{refused}");
        assert!(refused.to_string().contains("epoch 1"), "{refused}");
        check(&remote, first).expect("still held");
        let second = take(&remote, store, true, 3).expect("takeover");
        assert_eq!(second, Lease { epoch: 2, takeover: true });
        assert!(matches!(check(&remote, first).unwrap_err().kind(), ErrorKind::LeaseLost { .. }));
        release(&remote, second).expect("release");
        let third = take(&remote, store, false, 4).expect("after a release");
        assert_eq!(third.epoch, 3);
        let old = superseded(&remote).expect("list");
        assert_eq!(old, [lease_name(1), lease_name(2), released_name(2)]);
        let recorded = remote.get(&lease_name(2)).expect("get").expect("the takeover's lease");
        let recorded: Value = serde_json::from_slice(&recorded).expect("json");
        assert_eq!(recorded["takeover"], json!(true));
        assert!(recorded["ended"].as_str().expect("ended").contains("epoch 1"));
    }
}
