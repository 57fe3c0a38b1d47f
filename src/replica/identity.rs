//! A replica's identity (`format-spec/replication.md`, "Identity"): the object
//! `factlog-replica.json`, created once by the first run that ships, naming the store it is a
//! replica of and the random `replica_id` that every part, snapshot object and retention
//! record of the replica carries, so that an object of another replica is refused by name.

use std::path::Path;

use serde_json::{Value, json};

use super::Remote;
use crate::error::{ErrorKind, Result};

/// The name of a replica's identity object.
pub const IDENTITY_NAME: &str = "factlog-replica.json";
/// The `format` of the identity object.
pub const IDENTITY_FORMAT: &str = "factlog-replica";
/// The replica format version this build writes and reads.
pub const REPLICA_VERSION: u16 = 2;

/// What a replica's identity object says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The replica's id: 128 random bits chosen when it was created, carried by each of its
    /// objects.
    pub replica_id: u128,
    /// The device of the store the replica was created from.
    pub device: String,
    /// The directory of that store, as its replicator named it.
    pub store: String,
    /// When the replica was created, in µs since the Unix epoch.
    pub created_us: u64,
}

impl Identity {
    /// The replica id as written in JSON and messages: 32 lower-case hex digits.
    #[must_use]
    pub fn id_hex(&self) -> String {
        id_hex(self.replica_id)
    }

    /// The identity as the object holds it.
    #[must_use]
    pub fn to_json(&self) -> Value {
        json!({
            "format": IDENTITY_FORMAT,
            "version": REPLICA_VERSION,
            "replica_id": self.id_hex(),
            "device": self.device,
            "store": self.store,
            "created_us": self.created_us,
        })
    }
}

/// A replica id as 32 lower-case hex digits.
#[must_use]
pub fn id_hex(replica_id: u128) -> String {
    format!("{replica_id:032x}")
}

/// Creates the replica's identity object if it is missing (a conditional create: of two runs
/// that create it at once, one wins and both read its identity), and checks it.
///
/// `replica_id` is the id a new replica gets (random, from the caller); `store` the
/// directory of the store that ships.
///
/// # Errors
///
/// Those of [`check_identity`], and [`ErrorKind::Remote`].
pub fn ensure_identity(
    remote: &dyn Remote,
    replica_id: u128,
    store: &Path,
    now_us: u64,
) -> Result<Identity> {
    let identity = Identity {
        replica_id,
        device: super::device_name(),
        store: store.display().to_string(),
        created_us: now_us,
    };
    remote.put_new(IDENTITY_NAME, identity.to_json().to_string().as_bytes())?;
    check_identity(remote)
}

/// Reads and checks the replica's identity.
///
/// # Errors
///
/// [`ErrorKind::NotAReplica`] without an identity object; [`ErrorKind::ReplicaOutdated`] for
/// a replica of version 1, which does not bind its objects to it;
/// [`ErrorKind::UnsupportedVersion`] for a newer version; [`ErrorKind::ReplicaDamaged`] for
/// an identity that is not one.
pub fn check_identity(remote: &dyn Remote) -> Result<Identity> {
    let Some(bytes) = remote.get(IDENTITY_NAME)? else {
        return Err(ErrorKind::NotAReplica { location: remote.location().to_owned() }.into());
    };
    let damaged = |reason: &str| -> crate::Error {
        ErrorKind::ReplicaDamaged { object: IDENTITY_NAME.to_owned(), reason: reason.to_owned() }
            .into()
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| damaged("not a JSON object"))?;
    if value.get("format").and_then(Value::as_str) != Some(IDENTITY_FORMAT) {
        return Err(damaged("its \"format\" is not \"factlog-replica\""));
    }
    match value.get("version").and_then(Value::as_u64) {
        Some(v) if v == u64::from(REPLICA_VERSION) => {}
        Some(v) if v < u64::from(REPLICA_VERSION) => {
            return Err(ErrorKind::ReplicaOutdated {
                location: remote.location().to_owned(),
                found: u16::try_from(v).unwrap_or(0),
                supported: REPLICA_VERSION,
            }
            .into());
        }
        Some(v) => {
            return Err(ErrorKind::UnsupportedVersion {
                path: IDENTITY_NAME.into(),
                found: u16::try_from(v).unwrap_or(u16::MAX),
                supported: REPLICA_VERSION,
            }
            .into());
        }
        None => return Err(damaged("its \"version\" is not a number")),
    }
    let text = |field: &str| value.get(field).and_then(Value::as_str).map(str::to_owned);
    let replica_id = text("replica_id")
        .filter(|hex| hex.len() == 32)
        .and_then(|hex| u128::from_str_radix(&hex, 16).ok())
        .ok_or_else(|| damaged("its \"replica_id\" is not 32 hex digits"))?;
    Ok(Identity {
        replica_id,
        device: text("device").unwrap_or_default(),
        store: text("store").unwrap_or_default(),
        created_us: value.get("created_us").and_then(Value::as_u64).unwrap_or(0),
    })
}

/// The error of an object that carries another replica's id.
pub(crate) fn foreign(object: &str, found: u128, identity: &Identity) -> crate::Error {
    ErrorKind::ReplicaDamaged {
        object: object.to_owned(),
        reason: format!(
            "it belongs to replica {} (another store's, or another replica of this store), \
             not to this replica {}: remove it from the replica",
            id_hex(found),
            identity.id_hex()
        ),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::DirRemote;

    #[test]
    fn the_identity_is_created_once_and_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let remote = DirRemote::create("file:///r", dir.path()).expect("remote");
        assert!(matches!(
            check_identity(&remote).unwrap_err().kind(),
            ErrorKind::NotAReplica { .. }
        ));
        let first = ensure_identity(&remote, 7, Path::new("/a"), 1).expect("created");
        assert_eq!(first.replica_id, 7);
        // A second run's own id loses: the replica keeps the first.
        assert_eq!(ensure_identity(&remote, 9, Path::new("/b"), 2).expect("checked"), first);
        let write = |text: &str| std::fs::write(dir.path().join(IDENTITY_NAME), text);
        write(r#"{"format":"factlog-replica","version":3}"#).expect("write");
        assert!(matches!(
            check_identity(&remote).unwrap_err().kind(),
            ErrorKind::UnsupportedVersion { found: 3, .. }
        ));
        write(r#"{"format":"factlog-replica","version":1}"#).expect("write");
        let outdated = check_identity(&remote).unwrap_err();
        assert!(matches!(outdated.kind(), ErrorKind::ReplicaOutdated { found: 1, .. }));
        assert!(outdated.to_string().contains("new location"), "{outdated}");
        write(r#"{"format":"factlog-replica","version":2,"replica_id":"xyz"}"#).expect("write");
        assert!(check_identity(&remote).unwrap_err().to_string().contains("replica_id"));
    }
}
