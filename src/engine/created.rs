//! What a writer open created, so that a failed create takes it all back: a store that could
//! not be created (a nearly full disk, a failed sync) leaves no directory, segment,
//! preallocation file or lock file behind to fill the disk or to be mistaken for a store.
//!
//! Invariant: only names this open created are recorded, and a directory is removed only
//! when it is empty (`rmdir`), so nothing that was there before, or that someone else put
//! there meanwhile, is ever removed.

use std::path::PathBuf;
use std::sync::Arc;

use crate::fs::Fs;

/// The directories and files one writer open created.
#[derive(Debug, Default)]
pub(crate) struct Created {
    /// Directories created, the outermost first.
    pub(crate) dirs: Vec<PathBuf>,
    /// Files created inside the log directory.
    pub(crate) files: Vec<PathBuf>,
}

impl Created {
    /// Removes every recorded file, then every recorded directory, innermost first. Best
    /// effort: this runs after another failure, which is the one to report. The removals
    /// are not synced: a name that comes back after a power loss holds no segment, and the
    /// next open treats it as a new log again.
    pub(crate) fn remove(&mut self, fs: &dyn Fs) {
        for file in self.files.drain(..) {
            let _ = fs.remove_file(&file);
        }
        while let Some(dir) = self.dirs.pop() {
            let _ = fs.remove_dir(&dir);
        }
    }
}

/// Takes back what an open created unless it is disarmed: declared before the lock and the
/// writer, it is dropped after them, once the preallocator thread has stopped.
#[derive(Debug)]
pub(crate) struct Undo {
    fs: Arc<dyn Fs>,
    pub(crate) created: Created,
    armed: bool,
}

impl Undo {
    pub(crate) fn new(fs: Arc<dyn Fs>) -> Undo {
        Undo { fs, created: Created::default(), armed: true }
    }

    /// The open succeeded: keep everything, and hand the record to the log.
    pub(crate) fn disarm(mut self) -> Created {
        self.armed = false;
        std::mem::take(&mut self.created)
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        if self.armed {
            self.created.remove(&*self.fs);
        }
    }
}
