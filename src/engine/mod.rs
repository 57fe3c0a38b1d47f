//! The engine: the log itself, knowing nothing of events, tasks or sockets. Everything here
//! reads and writes through the one I/O seam, [`crate::fs::Fs`]. A map of the wing, from the
//! bytes up:
//!
//! - [`frame`]: a record's frame, encoded and decoded with its salted CRC; pure functions
//!   over byte slices (`format-spec/record.md`).
//! - [`segment`]: one segment file, its header and the scan of its frames;
//!   [`segments`]: the set of them in a directory, the lock, the next file prepared ahead;
//!   `prealloc`: the thread that prepares disk space off the append path.
//! - `writer`: the append path: buffer, durability tiers, group commit, rolls, the
//!   background flusher; `log`: [`Log`](crate::Log), the handle that owns a writer and
//!   hands out readers; `reader`: reading records in order through bounded memory maps;
//!   `seeks`: the frame starts readers record, where a later read starts;
//!   `watch`: waiting for the log to grow.
//! - [`recovery`]: what an open does with the active segment's tail (`format-spec/recovery.md`);
//!   [`mark`]: the log mark that vouches for the durable end (`format-spec/mark.md`);
//!   [`torn`]: torn tails kept aside before a cut; `created`: what a failed create takes back.
//! - `verify`: the read-only check of every segment; [`gaps`]: the gap file a salvage
//!   writes; [`rewrite`]: rewriting segments into another format version.
//! - `options`: how a log is opened; [`counting_fs`]: a file system that counts the syncs
//!   and writes the engine asks for, by file and by thread (the benches' and `demo`'s cost).
//!
//! Nothing in this wing imports the harness or a door (`ARCHITECTURE.md`); the layering test
//! (`tests/layering.rs`) fails when an import points up.

pub mod counting_fs;
pub(crate) mod created;
pub mod frame;
pub mod gaps;
pub(crate) mod log;
pub mod mark;
pub(crate) mod options;
pub(crate) mod prealloc;
pub(crate) mod reader;
pub mod recovery;
pub mod rewrite;
pub(crate) mod seeks;
pub mod segment;
pub mod segments;
pub mod torn;
pub(crate) mod verify;
pub(crate) mod watch;
pub(crate) mod writer;
