//! The console's health page: what `factlog info` shows of a store (its segments, snapshots,
//! sequence range and durable seq), who holds it and whether that process serves it, how
//! far each replication lags, and how the console itself reads it. Read on request through a
//! read-only open of the log (no lock, nothing written); the snapshot files are listed, not
//! decoded.

use std::path::Path;

use serde_json::{Value, json};

use crate::client::served::{Held, holder_of};
use crate::fs::{RealFs, lock_holder};
use crate::harness::snapshot;
use crate::replica::shipped::{self, Found};
use crate::{Log, Options};

use super::mirror::Mirror;

/// The health of the store the console shows, as one JSON object.
#[must_use]
pub fn health(mirror: &Mirror) -> Value {
    let dir = mirror.dir();
    let (source, seen_seq, last_error) = mirror.status();
    let (tasks, attention) = (mirror.summaries().len(), mirror.attention().len());
    let log = match Log::open_read_only(dir, Options::new()).and_then(|log| log.info()) {
        Ok(info) => info,
        Err(error) => {
            return json!({
                "dir": dir.display().to_string(),
                "error": format!("cannot read the log: {error}"),
                "console": { "source": source.as_str(), "seen_seq": seen_seq, "last_error": last_error },
            });
        }
    };
    let last_seq = log.last_seq.map_or(0, |seq| seq.0);
    let segments: Vec<Value> = log
        .segments
        .iter()
        .map(|segment| {
            json!({
                "id": segment.id.0,
                "first_seq": segment.first_seq.0,
                "file_bytes": segment.file_bytes,
                "sealed": segment.sealed,
            })
        })
        .collect();
    let snapshots: Vec<Value> = snapshot::list(&RealFs, dir)
        .unwrap_or_default()
        .iter()
        .map(|file| json!({ "covered_seq": file.covered_seq.0, "file_bytes": file.file_bytes }))
        .collect();
    let holder = match holder_of(dir) {
        None => json!(null),
        Some(Held::Served { .. }) => json!({ "pid": lock_holder(dir), "served": true }),
        Some(Held::NotServed { pid }) => json!({ "pid": pid, "served": false }),
    };
    let replicas: Vec<Value> = shipped::read_all(&RealFs, dir)
        .iter()
        .map(|found| match found {
            Found::Read(shipped) => json!({
                "location": shipped.location,
                "shipped_seq": shipped.shipped_seq,
                "lag": last_seq.saturating_sub(shipped.shipped_seq),
                "running": shipped.running,
                "updated_us": shipped.updated_us,
                "last_error": shipped.last_error,
            }),
            Found::Unreadable { path, reason } => {
                json!({ "path": path.display().to_string(), "unreadable": reason })
            }
        })
        .collect();
    json!({
        "dir": dir.display().to_string(),
        "format_version": log.format_version,
        "first_seq": log.first_seq.map(|seq| seq.0),
        "last_seq": log.last_seq.map(|seq| seq.0),
        "durable_seq": log.durable_seq.map(|seq| seq.0),
        "segments": segments,
        "segment_bytes": log.segments.iter().map(|segment| segment.file_bytes).sum::<u64>(),
        "snapshots": snapshots,
        "holder": holder,
        "served_clients": served_clients(dir, &holder),
        "replicas": replicas,
        "tasks": tasks,
        "attention": attention,
        "console": {
            "source": source.as_str(),
            "seen_seq": seen_seq,
            "last_error": last_error,
            "opened": mirror.opened(),
        },
    })
}

/// How many clients the serving process serves now (the console's own connections included)
/// and at most, asked of it (`{"op":"clients"}`); `null` when the store is not served or the
/// server does not answer.
fn served_clients(dir: &Path, holder: &Value) -> Value {
    if holder["served"] != json!(true) {
        return Value::Null;
    }
    match crate::client::Client::connect(dir).and_then(|mut client| client.clients()) {
        Ok((clients, clients_max)) => json!({ "now": clients, "max": clients_max }),
        Err(_) => Value::Null,
    }
}
