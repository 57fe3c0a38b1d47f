//! factlog: an embedded, crash-safe storage engine for the facts of AI-agent harnesses.
//!
//! Two layers:
//!
//! - A [`Store`] keeps the facts of many agent tasks: typed events (turns, steps, streamed
//!   model output, tool calls and their receipts, approvals, cancels) folded into a
//!   deterministic [`harness::State`], with snapshots, a recovery procedure that classifies
//!   every interrupted tool call, stable request keys, revision compare-and-set, and
//!   approvals that do not outlive a restart. The event format is in
//!   `format-spec/events.md`, recovery in `format-spec/harness-recovery.md`.
//! - A [`Log`] is the engine below it: a directory of segment files holding CRC-framed
//!   records with gap-free sequence numbers. Every append names its [`Durability`]:
//!   `Buffered` (returns at once, group-committed in the background within a few
//!   milliseconds), `Flushed` (in the kernel: survives a process crash) or `Synced` (on stable
//!   storage: survives a power loss). Concurrent `Synced` appenders share one `fdatasync`.
//!   Opening recovers from any crash: a torn tail is cut and reported, damage elsewhere is
//!   refused with the segment and offset. The on-disk format is in `format-spec/`.
//!
//! A harness loop, a crash and the restart (`examples/harness_loop.rs` is a longer one):
//!
//! ```
//! use factlog::harness::event::{Effect, ToolCall, ToolResult, TurnStart};
//! use factlog::harness::{Body, Outcome, Plan, request_key};
//! use factlog::{Store, StoreOptions};
//!
//! # fn main() -> factlog::Result<()> {
//! let dir = tempfile::tempdir().expect("temporary directory");
//! {
//!     let store = Store::open(dir.path(), StoreOptions::new())?;
//!     let task = store.task("session-1")?;
//!     task.append(Body::TurnStart(TurnStart::default()))?;
//!     for token in ["Publishing", " now"] {
//!         task.delta(token)?; // buffered: no syscall, no allocation
//!     }
//!     let key = request_key::derive(task.id(), "publish:draft-7", task.revision());
//!     task.append(Body::ToolCall(ToolCall {
//!         call_id: "c1".into(),
//!         tool: "publish".into(),
//!         effect: Effect::Idempotent,
//!         request_key: Some(key),
//!         ..Default::default()
//!     }))?; // synced before the tool runs
//!     // ... the process dies while the tool runs: no tool/result.
//! }
//! let store = Store::open(dir.path(), StoreOptions::new())?;
//! let report = store.recover()?;
//! let call = &report.tasks[0].calls[0];
//! assert_eq!((call.outcome, call.plan), (Outcome::OutcomeUnknown, Plan::RetrySameKey));
//! // Retry with the same key; the receipt closes the call.
//! let task = store.task("session-1")?;
//! task.append(Body::TurnStart(TurnStart::default()))?;
//! task.append(Body::ToolCall(ToolCall {
//!     call_id: "c1".into(),
//!     tool: "publish".into(),
//!     effect: Effect::Idempotent,
//!     request_key: call.request_key.clone(),
//!     ..Default::default()
//! }))?;
//! task.append(Body::ToolResult(ToolResult {
//!     call_id: "c1".into(),
//!     receipt: Some(serde_json::json!({"article_id": 7})),
//!     ..Default::default()
//! }))?;
//! store.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! The engine alone:
//!
//! ```
//! use factlog::{Durability, Log, Options, Seq};
//!
//! # fn main() -> factlog::Result<()> {
//! let dir = tempfile::tempdir().expect("temporary directory");
//! let log = Log::open(dir.path(), Options::new())?;
//! log.append(b"token", Durability::Buffered)?;
//! log.append(b"assistant message", Durability::Flushed)?;
//! let seq = log.append(b"tool call: publish article", Durability::Synced)?;
//! assert!(log.durable_seq() >= Some(seq));
//! log.close()?;
//!
//! let log = Log::open(dir.path(), Options::new())?;
//! assert_eq!(log.recovery_report().last_seq, Some(Seq(3)));
//! let records: Vec<_> = log.read_from(Seq(1))?.collect::<factlog::Result<_>>()?;
//! assert_eq!(&records[2].payload[..], b"tool call: publish article");
//! # Ok(())
//! # }
//! ```
//!
//! # Cargo features
//!
//! The default build has no argument parser and no network stack: the engine, the harness,
//! the served store (a Unix socket) and `file://` replicas.
//!
//! - `s3`, `gcs`, `azure`: replica locations on `s3://`, `gs://` and `az://`
//!   (`replica::ObjectRemote`) through the `object_store` crate, with its HTTP and TLS
//!   clients; `cloud` enables all three. A location whose backend is left out is refused with
//!   [`ErrorKind::UnsupportedUrl`] naming the feature.
//!
//! The layers and which may call which are drawn in `ARCHITECTURE.md`.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
#[cfg(feature = "console")]
pub mod console;
pub mod engine;
pub mod error;
pub mod fs;
pub mod harness;
pub mod limits;
pub mod protocol;
pub mod replica;
pub mod server;
mod types;

pub use crate::engine::log::{Log, LogInfo, SegmentInfo};
pub use crate::engine::options::Options;
pub use crate::engine::prealloc::{PreallocStats, prepared_prealloc_bytes};
pub use crate::engine::reader::{Reader, Record};
pub use crate::engine::recovery::{RecoveryReport, TailCut};
pub use crate::engine::verify::{SegmentVerify, VerifyOutcome, VerifyReport, verify};
pub use crate::error::{
    CorruptionReason, Error, ErrorKind, FrameFault, Result, SnapshotFault, UnresolvedCall,
};
pub use crate::harness::salvage::{SalvageOptions, SalvageReport, salvage};
pub use crate::harness::{AppendOptions, Appended, Store, StoreOptions, Task};
pub use crate::types::{Durability, RecoveryMode, SegmentId, Seq};

/// The README's Rust examples, compiled (and run, unless marked `no_run`) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
