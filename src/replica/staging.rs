//! The staging directory of a restore (`format-spec/replication.md`, "Restore", step 4): a
//! restore writes the new store beside its target, in a directory only it creates, locks and
//! removes, and moves it into place with one `rename` at the end. So two restores into one
//! target never touch each other's files: the second is refused at the start when the first
//! is running (naming its pid), or at the end by the `rename` when the first finished first.
//!
//! Invariants:
//! - The staging directory's name is `.{target name}.restore-{pid}-{random}`, in the target's
//!   parent. A restore creates its directory under a name no other restore looks at
//!   (`.{target name}.restore~{pid}-{random}`, the random part 64 bits), locks it (the
//!   file-system seam's directory lock, a `LOCK` file inside), and only then renames it to
//!   its staging name: so every directory another restore finds under a staging name is
//!   locked for as long as its restore runs, and a free lock means that restore is gone.
//! - Of two running restores that see each other, the one whose staging name sorts first goes
//!   on and the other is refused, so they never both give up.
//! - A restore never writes into another restore's directory: one without a `LOCK` file is
//!   not locked to find out who holds it, and nothing but its own directory is ever removed.
//! - Nothing outside the staging directory is written before the final `rename`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};
use crate::fs::{DirLock, Fs};

/// A restore's own staging directory, locked while it lives.
pub(crate) struct Staging<'a> {
    fs: &'a dyn Fs,
    target: PathBuf,
    dir: PathBuf,
    _lock: Box<dyn DirLock>,
    /// Staging directories of restores of the same target that ended without finishing.
    pub(crate) stale: Vec<PathBuf>,
}

/// The staging directories of restores into `target` are named `.{name}.restore-...`; while
/// being created (not yet locked) `.{name}.restore~...`, which no other restore looks at.
const STAGING: &str = ".restore-";
const CREATING: &str = ".restore~";

/// The prefix of the directories of restores into `target` named with `marker`.
fn prefix(target: &Path, marker: &str) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(target.file_name().unwrap_or_default());
    prefix.push(marker);
    prefix
}

/// The parent directory of `target` (`.` for a bare name).
fn parent(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl<'a> Staging<'a> {
    /// Creates and locks the staging directory of a restore into `target`, after checking
    /// that no other restore of `target` is running.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::RestoreInProgress`] naming the other restore's pid and staging
    /// directory; [`ErrorKind::InvalidOptions`] for a target without a name; I/O errors.
    pub(crate) fn create(fs: &'a dyn Fs, target: &Path) -> Result<Staging<'a>> {
        if target.file_name().is_none() {
            return Err(Error::invalid_options(format!(
                "restore into {}: name the new store's directory itself",
                target.display()
            )));
        }
        let parent = parent(target);
        fs.create_dir_all(&parent).map_err(|e| Error::io("create directory", &parent, e))?;
        let unique = format!("{}-{:016x}", std::process::id(), fs.random_u64());
        let mut creating = prefix(target, CREATING);
        creating.push(&unique);
        let creating = parent.join(creating);
        fs.create_dir_all(&creating).map_err(|e| Error::io("create directory", &creating, e))?;
        let lock = match fs.lock_dir(&creating) {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                crate::fs::remove_tree(fs, &creating);
                return Err(Error::io(
                    "lock",
                    &creating,
                    std::io::Error::new(
                        std::io::ErrorKind::WouldBlock,
                        "a directory this restore just created is locked by another process",
                    ),
                ));
            }
            Err(e) => {
                crate::fs::remove_tree(fs, &creating);
                return Err(Error::io("lock", &creating, e));
            }
        };
        let mut name = prefix(target, STAGING);
        name.push(&unique);
        let dir = parent.join(name);
        if let Err(e) = fs.rename(&creating, &dir) {
            drop(lock);
            crate::fs::remove_tree(fs, &creating);
            return Err(Error::io("rename", &creating, e));
        }
        let mut staging =
            Staging { fs, target: target.to_path_buf(), dir, _lock: lock, stale: Vec::new() };
        if let Err(error) = staging.check_others(&parent) {
            staging.discard();
            return Err(error);
        }
        Ok(staging)
    }

    /// Refuses when another restore of the same target holds its staging directory's lock;
    /// notes the staging directories nobody holds (restores that were killed).
    fn check_others(&mut self, parent: &Path) -> Result<()> {
        let prefix = prefix(&self.target, STAGING);
        let prefix = prefix.to_string_lossy();
        let mut names = self.fs.list_dir(parent).map_err(|e| Error::io("list", parent, e))?;
        names.sort();
        for name in names {
            let Some(rest) = name.strip_prefix(&*prefix) else { continue };
            let other = parent.join(&name);
            if other == self.dir {
                continue;
            }
            let pid = rest.split('-').next().and_then(|pid| pid.parse::<u32>().ok());
            // Every staging directory is locked before it gets its name; one without a lock
            // file was left by something else, and is not written into to find out.
            match self.fs.list_dir(&other) {
                Ok(files) if files.iter().any(|f| f == crate::fs::LOCK_FILE_NAME) => {}
                Ok(_) => {
                    self.stale.push(other);
                    continue;
                }
                // Gone meanwhile (the other restore finished or gave up): not in the way.
                Err(_) => continue,
            }
            match self.fs.lock_dir(&other) {
                Ok(Some(_free)) => self.stale.push(other),
                // A running restore that began after this one (its name sorts after this
                // one's) gives way to it, so two restores that see each other never both
                // give up: this one goes on, and the final `rename` decides in any case.
                Ok(None) if other > self.dir => {}
                Ok(None) => {
                    return Err(ErrorKind::RestoreInProgress {
                        target: self.target.clone(),
                        pid: pid.unwrap_or(0),
                        staging: other,
                    }
                    .into());
                }
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// The staging directory: the new store is written here.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves the staging directory into place as the target, atomically, and syncs the
    /// parent. The target must not exist or be an empty directory.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::TargetNotEmpty`] when the target holds anything now (another restore or
    /// writer put it there meanwhile): the staging directory is removed, the target left as
    /// it is; I/O errors, after which the staging directory is removed too.
    pub(crate) fn commit(self) -> Result<()> {
        let (fs, dir, target) = (self.fs, self.dir.clone(), self.target.clone());
        if let Err(e) = fs.rename(&dir, &target) {
            self.discard();
            // ENOTEMPTY or EEXIST: the target was filled meanwhile.
            return Err(if matches!(e.raw_os_error(), Some(39 | 17)) {
                ErrorKind::TargetNotEmpty { dir: target }.into()
            } else {
                Error::io("rename", &dir, e)
            });
        }
        let parent = parent(&target);
        fs.sync_dir(&parent).map_err(|e| Error::io("fsync directory", &parent, e))
    }

    /// Removes the staging directory and all it holds (this restore's own files only).
    pub(crate) fn discard(self) {
        crate::fs::remove_tree(self.fs, &self.dir);
    }
}
