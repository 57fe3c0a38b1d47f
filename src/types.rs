//! Identifier newtypes and the small enums of the public API.

use std::fmt;
use std::str::FromStr;

/// The sequence number of a record. Sequence numbers start at 1 and have no gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seq(pub u64);

impl Seq {
    /// The sequence number after this one.
    #[must_use]
    pub fn next(self) -> Seq {
        Seq(self.0 + 1)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The identifier of a segment: its position in the directory, starting at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u64);

impl fmt::Display for SegmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How durable an append must be before the call returns.
///
/// Durability is prefix-ordered: once a record meets a tier, every earlier record meets it
/// too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Durability {
    /// Returns at once, without a syscall. The record waits in the writer's buffer and is
    /// synced by the background flusher within the flush delay
    /// ([`crate::Options::flush_delay`]); it is written out earlier, without a sync, as soon as
    /// the buffer is a quarter full. A process crash before the write, or a power loss before
    /// the sync, loses it, whole: it is never torn into garbage.
    Buffered,
    /// Returns once the record is in the kernel (one `write`, shared with every record buffered
    /// before it). Survives a process crash (SIGKILL); a power loss may lose it.
    Flushed,
    /// Returns once the record and everything before it is on stable storage (`fdatasync`,
    /// shared by all concurrent appenders). Survives a power loss.
    Synced,
}

impl Durability {
    /// The lower-case name used by the command line and the docs.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Buffered => "buffered",
            Durability::Flushed => "flushed",
            Durability::Synced => "synced",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "buffered" => Ok(Durability::Buffered),
            "flushed" => Ok(Durability::Flushed),
            "synced" => Ok(Durability::Synced),
            other => {
                Err(format!("unknown durability {other:?}: expected buffered, flushed or synced"))
            }
        }
    }
}

/// What opening a log does with an incomplete tail (`format-spec/recovery.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RecoveryMode {
    /// Cuts off a torn or partial tail of the active segment (bytes written but never
    /// acknowledged as synced), reports exactly what was cut, and opens. Refuses, like
    /// `Strict`, any damage that a later frame proves was on stable storage, and any damage
    /// in a sealed segment.
    #[default]
    TolerateTornTail,
    /// Cuts nothing: a torn tail is an error ([`crate::ErrorKind::TornTail`]) naming segment,
    /// offset and length, and the log is left as found.
    Strict,
}

impl fmt::Display for RecoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecoveryMode::TolerateTornTail => "tolerate-torn-tail",
            RecoveryMode::Strict => "strict",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durability_round_trips_through_its_name() {
        for d in [Durability::Buffered, Durability::Flushed, Durability::Synced] {
            assert_eq!(d.as_str().parse::<Durability>(), Ok(d));
        }
        assert!("fsync".parse::<Durability>().is_err());
    }

    #[test]
    fn durability_orders_by_strength() {
        assert!(Durability::Buffered < Durability::Flushed);
        assert!(Durability::Flushed < Durability::Synced);
    }
}
