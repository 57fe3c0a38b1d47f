//! factlog: an embedded, crash-safe storage engine for the facts of AI-agent harnesses.
//!
//! A [`Log`] is a directory of segment files holding CRC-framed records with gap-free
//! sequence numbers. Every append names its [`Durability`]: `Buffered` (returns at once,
//! group-committed in the background within a few milliseconds), `Flushed` (in the kernel:
//! survives a process crash) or `Synced` (on stable storage: survives a power loss).
//! Concurrent `Synced` appenders share one `fdatasync`. Opening recovers from any crash: a
//! torn tail is cut and reported, damage elsewhere is refused with the segment and offset.
//! The on-disk format is specified in `format-spec/`.
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

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod frame;
pub mod fs;
pub mod harness;
pub mod limits;
mod log;
mod options;
mod prealloc;
mod reader;
pub mod recovery;
pub mod segment;
pub mod segments;
mod types;
mod verify;
mod writer;

pub use crate::error::{CorruptionReason, Error, ErrorKind, FrameFault, Result, SnapshotFault};
pub use crate::harness::{AppendOptions, Appended, Store, StoreOptions, Task};
pub use crate::log::{Log, LogInfo, SegmentInfo};
pub use crate::options::Options;
pub use crate::reader::{Reader, Record};
pub use crate::recovery::{RecoveryReport, TailCut};
pub use crate::types::{Durability, RecoveryMode, SegmentId, Seq};
pub use crate::verify::{SegmentVerify, VerifyOutcome, VerifyReport, verify};
