//! The preallocator: keeps the next segment file ready (zero-filled to capacity and synced)
//! so that a roll does not write megabytes of zeros on the append path. Runs on a background
//! thread, or inline during the roll when background threads are off.
//!
//! It never takes the last free space of a file system: before writing a file it asks the
//! file system ([`Fs::space`]) and preallocates only if
//! [`prealloc_free_bytes_min`](crate::limits::prealloc_free_bytes_min) stays free afterwards.
//! Otherwise it quietly hands out an empty file: the segment made from it grows as records
//! are appended, and the next roll asks again. A preallocation that runs out of space anyway
//! (another program took it meanwhile) removes its partial file before it reports
//! [`crate::ErrorKind::DiskFull`], so a failed attempt never leaves the disk full.
//!
//! Invariant: at most one preallocation file exists, at [`PREALLOC_FILE_NAME`]; it is only
//! handed out when it has its full length or, when space was short, is empty, and only
//! requested again after the previous one has been renamed into a segment. A file left by an
//! earlier run is reused only if it has its full length and holds nothing but zeros;
//! otherwise it is removed and prepared again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::error::ErrorKind;
use crate::error::{Error, Result};
use crate::fs::{Fs, OpenMode};
use crate::limits::prealloc_free_bytes_min;
use crate::segments::{self, PREALLOC_FILE_NAME};

#[derive(Debug, Default)]
struct State {
    requested: bool,
    ready: bool,
    failure: Option<Error>,
    shutdown: bool,
}

#[derive(Debug)]
struct Shared {
    fs: Arc<dyn Fs>,
    path: PathBuf,
    segment_bytes: u64,
    state: Mutex<State>,
    changed: Condvar,
}

/// Hands out preallocated segment files.
#[derive(Debug)]
pub struct Preallocator {
    shared: Arc<Shared>,
    background: bool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Preallocator {
    /// A preallocator for `dir`; with `background`, a thread starts preparing the first file.
    pub fn new(fs: Arc<dyn Fs>, dir: &Path, segment_bytes: u64, background: bool) -> Result<Self> {
        let shared = Arc::new(Shared {
            fs,
            path: dir.join(PREALLOC_FILE_NAME),
            segment_bytes,
            state: Mutex::new(State { requested: true, ..State::default() }),
            changed: Condvar::new(),
        });
        let thread = if background {
            let worker = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name("factlog-prealloc".into())
                .spawn(move || worker.run());
            Some(spawned.map_err(|e| Error::io("spawn preallocator thread", dir, e))?)
        } else {
            None
        };
        Ok(Preallocator { shared, background, thread: Mutex::new(thread) })
    }

    /// The path of a complete, synced preallocation file, waiting for it if needed. The caller
    /// must rename it away and then call [`Preallocator::request`].
    pub fn take(&self) -> Result<&Path> {
        if !self.background {
            let mut state = self.shared.state.lock();
            if !state.ready {
                self.shared.prepare()?;
                state.ready = true;
            }
            state.ready = false;
            return Ok(&self.shared.path);
        }
        let mut state = self.shared.state.lock();
        loop {
            if let Some(failure) = state.failure.take() {
                state.requested = true;
                self.shared.changed.notify_all();
                return Err(failure);
            }
            if state.ready {
                state.ready = false;
                return Ok(&self.shared.path);
            }
            self.shared.changed.wait(&mut state);
        }
    }

    /// Asks for the next file, after the previous one was renamed into a segment.
    pub fn request(&self) {
        let mut state = self.shared.state.lock();
        state.requested = true;
        self.shared.changed.notify_all();
    }
}

impl Shared {
    fn prepare(&self) -> Result<()> {
        if self.reusable() {
            return Ok(());
        }
        self.remove()?;
        if !self.room_for_segment() {
            // Quietly no preallocation: the segment grows as it is appended to.
            return segments::preallocate(&*self.fs, &self.path, 0);
        }
        let outcome = segments::preallocate(&*self.fs, &self.path, self.segment_bytes);
        if let Err(e) = &outcome
            && matches!(e.kind(), ErrorKind::DiskFull { .. })
        {
            // Give the space back; the next attempt asks the file system first.
            let _ = self.remove();
        }
        outcome
    }

    fn remove(&self) -> Result<()> {
        match self.fs.remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", &self.path, e)),
        }
    }

    /// Whether a whole segment fits with the margin to spare. A file system that cannot say
    /// is assumed to have room: a preallocation that fails gives its space back.
    fn room_for_segment(&self) -> bool {
        let dir = self.path.parent().unwrap_or(&self.path);
        let Ok(space) = self.fs.space(dir) else { return true };
        let needed = self
            .segment_bytes
            .saturating_add(prealloc_free_bytes_min(self.segment_bytes, space.total_bytes));
        space.available_bytes >= needed
    }

    /// Whether a file left by an earlier run is complete: full length and all zeros. Reading
    /// it back costs less than writing it again, and happens off the append path.
    fn reusable(&self) -> bool {
        let full = self.fs.open(&self.path, OpenMode::Read).and_then(|f| f.len());
        full.is_ok_and(|len| len == self.segment_bytes)
            && self
                .fs
                .map(&self.path)
                .is_ok_and(|bytes| crate::recovery::last_nonzero(&bytes).is_none())
    }

    fn run(&self) {
        let mut state = self.state.lock();
        loop {
            if state.shutdown {
                return;
            }
            if !state.requested {
                self.changed.wait(&mut state);
                continue;
            }
            state.requested = false;
            drop(state);
            let outcome = self.prepare();
            state = self.state.lock();
            match outcome {
                Ok(()) => state.ready = true,
                Err(e) => state.failure = Some(e),
            }
            self.changed.notify_all();
        }
    }
}

impl Preallocator {
    /// Stops the background thread, waiting for a preallocation in progress to finish.
    pub fn stop(&self) {
        self.shared.state.lock().shutdown = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        self.stop();
    }
}
