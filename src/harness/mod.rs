//! The harness state model on top of the log: typed events with an envelope
//! (`format-spec/events.md`), a pure deterministic fold into [`State`], snapshots of that state,
//! the recovery procedure that classifies every open tool call and repairs the log, stable
//! request keys with a side-effect ledger, revision compare-and-set, and approvals that do not
//! outlive a restart.
//!
//! The [`Store`] ties them together: one directory, many tasks, one group commit.

mod check;
pub mod codec;
pub mod event;
pub mod fold;
pub mod history;
pub mod ids;
pub mod migrate;
pub mod operator;
pub mod purge;
pub mod recovery;
pub(crate) mod replication_progress;
pub mod request_key;
pub mod restored;
pub mod salvage;
pub mod secret;
pub mod secret_shapes;
pub mod snapshot;
mod snapshotter;
pub mod state;
mod store;
pub mod upcast;

pub use check::Verdict;
pub use event::{Body, Event, EventType};
pub use fold::apply;
pub use history::Entry;
pub use ids::{ApprovalId, CallId, RequestKey, TaskId};
pub use purge::{PurgeReport, plan_purge};
pub use recovery::{Outcome, Plan, RecoveryReport as HarnessRecoveryReport, Resume};
pub use state::{State, TaskState};
pub(crate) use store::check_delta_text;
pub use store::{
    AppendOptions, Appended, DeepVerify, OpenReport, SOCKET_FILE, Store, StoreOptions, Task,
    TaskRead, socket_path,
};
