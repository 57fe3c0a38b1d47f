//! [`Options`]: how a log is opened. Every setter documents its default; [`Options::validate`]
//! checks them against [`crate::limits`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::segment::{FORMAT_VERSION, FORMAT_VERSION_MIN};
use crate::error::{Error, Result};
use crate::fs::{Fs, RealFs};
use crate::limits::{
    BUFFER_BYTES_DEFAULT, BUFFER_BYTES_MAX, BUFFER_BYTES_MIN, FLUSH_DELAY_US_DEFAULT,
    FLUSH_DELAY_US_MAX, MARK_INTERVAL_US_DEFAULT, MARK_INTERVAL_US_MAX, SEGMENT_BYTES_ALIGN,
    SEGMENT_BYTES_DEFAULT, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN,
};
use crate::types::RecoveryMode;

/// How to open a log. A builder: `Options::new().segment_bytes(1 << 20)`.
#[derive(Clone)]
pub struct Options {
    pub(crate) segment_bytes: u64,
    pub(crate) buffer_bytes: usize,
    pub(crate) flush_delay: Duration,
    pub(crate) recovery_mode: RecoveryMode,
    pub(crate) mark_interval: Duration,
    pub(crate) background_threads: bool,
    pub(crate) new_log_format_version: u16,
    pub(crate) fs: Arc<dyn Fs>,
}

impl Options {
    /// The defaults.
    #[must_use]
    pub fn new() -> Options {
        Options {
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            buffer_bytes: BUFFER_BYTES_DEFAULT,
            flush_delay: Duration::from_micros(FLUSH_DELAY_US_DEFAULT),
            recovery_mode: RecoveryMode::default(),
            mark_interval: Duration::from_micros(MARK_INTERVAL_US_DEFAULT),
            background_threads: true,
            new_log_format_version: FORMAT_VERSION,
            fs: Arc::new(RealFs),
        }
    }

    /// The segment format version a new log is created in; an existing log keeps its own
    /// (`format-spec/versions.md`). From 1 to [`FORMAT_VERSION`]: version 1 keeps a new log
    /// readable by builds that know only version 1. Default: [`FORMAT_VERSION`].
    #[must_use]
    pub fn new_log_format_version(mut self, version: u16) -> Options {
        self.new_log_format_version = version;
        self
    }

    /// Capacity of each segment file; a segment is rolled when the next frame does not fit.
    /// Files grow toward this size in steps of synced zeros ahead of the writer, once a caller
    /// has waited for a sync (`format-spec/segment.md`, "Capacity and growth"); segments of at most 64 KiB are
    /// preallocated whole. A multiple of 4096 between 8 KiB and 1 GiB.
    /// Default: 32 MiB.
    #[must_use]
    pub fn segment_bytes(mut self, bytes: u64) -> Options {
        self.segment_bytes = bytes;
        self
    }

    /// Size of each of the writer's two append buffers; a burst of buffered records up to
    /// this size costs one `write`. Between 4 KiB and 64 MiB. Default: 1 MiB.
    #[must_use]
    pub fn buffer_bytes(mut self, bytes: usize) -> Options {
        self.buffer_bytes = bytes;
        self
    }

    /// The longest a `Buffered` record waits before the background flusher writes and syncs
    /// it (it is also written as soon as a quarter of the buffer is full). At most 10 s.
    /// Default: 5 ms.
    #[must_use]
    pub fn flush_delay(mut self, delay: Duration) -> Options {
        self.flush_delay = delay;
        self
    }

    /// The longest time between two updates of the log mark (`MARK`, `format-spec/mark.md`)
    /// while records are being synced. Damage to records synced since the last update, when no
    /// later frame witnesses it, cannot be told from a torn write after a crash; a shorter
    /// interval narrows that window for one more small `fdatasync` of `MARK` per interval, done
    /// by the background flusher (without background threads, by the sync that finds the
    /// interval over). A clean close, a roll and a reclaim always update the mark. Above zero
    /// and at most 60 s. Default: 100 ms.
    #[must_use]
    pub fn mark_interval(mut self, interval: Duration) -> Options {
        self.mark_interval = interval;
        self
    }

    /// What open does with a torn tail. Default: [`RecoveryMode::TolerateTornTail`].
    #[must_use]
    pub fn recovery_mode(mut self, mode: RecoveryMode) -> Options {
        self.recovery_mode = mode;
        self
    }

    /// Whether to run the background flusher and segment preallocator threads. Without them,
    /// buffered records are written only when the buffer is full or on [`crate::Log::flush`],
    /// the next segment is preallocated during the roll, and the writer grows the active
    /// segment itself, one first step at a time, when a write reaches its end. Turned off by
    /// deterministic tests. Default: `true`.
    #[must_use]
    pub fn background_threads(mut self, on: bool) -> Options {
        self.background_threads = on;
        self
    }

    /// The file system to use. Default: the real one ([`RealFs`]).
    #[must_use]
    pub fn fs(mut self, fs: Arc<dyn Fs>) -> Options {
        self.fs = fs;
        self
    }

    /// Checks every option against its bounds.
    pub fn validate(&self) -> Result<()> {
        let s = self.segment_bytes;
        if !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&s)
            || !s.is_multiple_of(SEGMENT_BYTES_ALIGN)
        {
            return Err(Error::invalid_options(format!(
                "segment_bytes is {s}: it must be a multiple of {SEGMENT_BYTES_ALIGN} between \
                 {SEGMENT_BYTES_MIN} and {SEGMENT_BYTES_MAX}"
            )));
        }
        let b = self.buffer_bytes;
        if !(BUFFER_BYTES_MIN..=BUFFER_BYTES_MAX).contains(&b) {
            return Err(Error::invalid_options(format!(
                "buffer_bytes is {b}: it must be between {BUFFER_BYTES_MIN} and {BUFFER_BYTES_MAX}"
            )));
        }
        if self.flush_delay > Duration::from_micros(FLUSH_DELAY_US_MAX)
            || self.flush_delay.is_zero()
        {
            return Err(Error::invalid_options(format!(
                "flush_delay is {:?}: it must be above zero and at most {FLUSH_DELAY_US_MAX} us",
                self.flush_delay
            )));
        }
        if self.mark_interval > Duration::from_micros(MARK_INTERVAL_US_MAX)
            || self.mark_interval.is_zero()
        {
            return Err(Error::invalid_options(format!(
                "mark_interval is {:?}: it must be above zero and at most {MARK_INTERVAL_US_MAX} us",
                self.mark_interval
            )));
        }
        let v = self.new_log_format_version;
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&v) {
            return Err(Error::invalid_options(format!(
                "new_log_format_version is {v}: this build writes versions {FORMAT_VERSION_MIN} \
                 to {FORMAT_VERSION}"
            )));
        }
        Ok(())
    }
}

impl Default for Options {
    fn default() -> Options {
        Options::new()
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("segment_bytes", &self.segment_bytes)
            .field("buffer_bytes", &self.buffer_bytes)
            .field("flush_delay", &self.flush_delay)
            .field("recovery_mode", &self.recovery_mode)
            .field("mark_interval", &self.mark_interval)
            .field("background_threads", &self.background_threads)
            .field("new_log_format_version", &self.new_log_format_version)
            .field("fs", &self.fs)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_refused() {
        Options::new().validate().unwrap();
        assert!(Options::new().segment_bytes(5000).validate().is_err());
        assert!(Options::new().segment_bytes(4096).validate().is_err());
        assert!(Options::new().buffer_bytes(10).validate().is_err());
        assert!(Options::new().flush_delay(Duration::ZERO).validate().is_err());
        Options::new().segment_bytes(8192).buffer_bytes(4096).validate().unwrap();
    }
}
