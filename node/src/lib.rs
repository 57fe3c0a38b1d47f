//! `factlog.node`: the Node-API addon under the `factlog` npm package (`node/`).
//!
//! A thin layer over the library, as the Python binding is: every event is parsed, checked,
//! answered and refused by the library's protocol module (`factlog::protocol`), so an object
//! appended from TypeScript meets the same rules as a line sent to `factlog emit`. The
//! package's TypeScript (`node/lib/`) holds the classes users see, the error classes and the
//! framework adapters; this crate holds the native half:
//!
//! - `store` — `NativeStore`: open (embedded, shared, or a client of a served store), tasks,
//!   recovery, pages of events, flush, close.
//! - `task` — `NativeTask`: deltas, appends and batches, revision, state, history.
//! - `hot` — a task's delta function, the hot path, in raw Node-API (the binding's only
//!   unsafe code).
//! - `tail` — `NativeTail`: the long poll behind `Store.tail`, on threads of its own.
//! - `remote` — the connection of a client of a served store.
//! - `jobs` — work on the libuv pool, and failures as the protocol's error replies.

mod hot;
mod jobs;
mod remote;
mod store;
mod tail;
mod task;

use factlog::harness::TaskId;
use factlog::harness::request_key as key;
use napi_derive::napi;

/// The protocol version the binding speaks.
#[napi]
pub const PROTOCOL_VERSION: u32 = factlog::protocol::PROTOCOL_VERSION;

/// Every error code of the protocol, in the order of the spec's table.
#[napi]
pub fn error_codes() -> Vec<String> {
    factlog::protocol::reply::ERROR_CODES.iter().map(|code| (*code).to_owned()).collect()
}

/// The version of the addon (the package's).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// The documented request key of `operation` on `task` at `revision` (as
/// `factlog request-key`).
#[napi]
pub fn request_key(task: String, operation: String, revision: i64) -> napi::Result<String> {
    let revision = u64::try_from(revision).map_err(|_| {
        jobs::rejection(&jobs::invalid_options("a request key's revision must be 0 or more"))
    })?;
    Ok(key::derive(&TaskId(task), &operation, revision).to_string())
}
