//! A simulated file system for fault-injection tests and fuzzing, deterministic from a seed.
//!
//! For every file it keeps what has been written (what the kernel would show) and what is
//! durable (what survives a power loss), and for every directory entry the same two views.
//! It models, as real kernels and disks do:
//! - a process crash, after which everything written survives ([`CrashModel::ProcessCrash`]);
//! - a power loss that loses everything not synced ([`CrashModel::LoseUnsynced`]);
//! - a power loss that keeps an arbitrary subset of the unsynced 512-byte sectors, in any
//!   order, each torn sector holding the old bytes, the new bytes, zeros or garbage where it
//!   was written ([`CrashModel::TornSectors`]); bytes synced earlier in the same sector are
//!   kept (the "powersafe overwrite" property of current disks, `format-spec/recovery.md`);
//! - directory entries (create, rename, remove) that are durable only after the directory is
//!   synced;
//! - injected errors at a chosen operation: `EIO`, `ENOSPC`, a short write ([`Fault`]);
//! - a disk of limited capacity ([`SimFs::set_capacity`]): a write that would grow the named
//!   files beyond it fails with `ENOSPC` and has no effect, and [`Fs::space`] reports what is
//!   left;
//! - silent corruption of synced data: a bit flip or a zeroed sector.
//!
//! Every state-changing call (create, write, sync, rename, link, remove, directory sync) is one
//! numbered operation, so a test can count a workload's operations and crash it at each one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::{DirLock, Fs, FsFile, OpenMode, Space};

/// Bytes of one simulated disk sector: the unit in which unsynced writes persist.
pub const SECTOR_BYTES: usize = 512;

/// How the simulated machine goes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashModel {
    /// The process dies; the kernel keeps everything written.
    ProcessCrash,
    /// The power fails; only synced data and synced directory entries survive.
    LoseUnsynced,
    /// The power fails; each unsynced sector independently persists whole, not at all,
    /// zeroed or as garbage, and unsynced directory entries may each survive or not.
    TornSectors,
}

impl CrashModel {
    /// Every model, for sweeps.
    pub const ALL: [CrashModel; 3] =
        [CrashModel::ProcessCrash, CrashModel::LoseUnsynced, CrashModel::TornSectors];
}

/// An error to inject at one operation, without crashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails with `EIO` and has no effect.
    Eio,
    /// The operation fails with `ENOSPC` and has no effect.
    NoSpace,
    /// A write stores only its first half, then fails with `EIO`.
    ShortWrite,
}

#[derive(Debug, Default, Clone)]
struct Inode {
    written: Vec<u8>,
    durable: Vec<u8>,
    dirty_sectors: BTreeSet<usize>,
}

/// One atomic directory-entry change: each path now names the inode, or nothing. A rename
/// is one change of two edits.
#[derive(Debug, Clone)]
struct NameChange {
    edits: Vec<(PathBuf, Option<u64>)>,
    /// A directory renamed, `(from, to)`: one entry of `to`'s parent, which moves every name
    /// below it (the edits) at once.
    moved_dir: Option<(PathBuf, PathBuf)>,
}

fn apply(names: &mut BTreeMap<PathBuf, u64>, change: &NameChange) {
    for (path, inode) in &change.edits {
        match inode {
            Some(inode) => names.insert(path.clone(), *inode),
            None => names.remove(path),
        };
    }
}

#[derive(Debug, Default)]
struct State {
    rng: u64,
    next_inode: u64,
    inodes: HashMap<u64, Inode>,
    names: BTreeMap<PathBuf, u64>,
    durable_names: BTreeMap<PathBuf, u64>,
    /// Directory-entry changes not yet durable, in the order they were made: a journaling
    /// file system commits them in order, so a crash keeps a prefix of them.
    name_log: Vec<NameChange>,
    dirs: BTreeSet<PathBuf>,
    durable_dirs: BTreeSet<PathBuf>,
    locks: BTreeSet<PathBuf>,
    ops: u64,
    crash_at: Option<u64>,
    dead: bool,
    faults: BTreeMap<u64, Fault>,
    capacity_bytes: Option<u64>,
}

impl State {
    fn random(&mut self) -> u64 {
        // xorshift64*: deterministic, good enough to pick sectors and salts.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Counts one state-changing operation; `Err` if the machine is down or the operation
    /// was chosen to fail.
    fn op(&mut self) -> io::Result<Option<Fault>> {
        if self.dead {
            return Err(io::Error::other("simulated crash: the machine is down"));
        }
        let index = self.ops;
        self.ops += 1;
        if self.crash_at == Some(index) {
            self.dead = true;
            return Err(io::Error::other("simulated crash: the machine is down"));
        }
        Ok(self.faults.remove(&index))
    }

    fn check_alive(&self) -> io::Result<()> {
        if self.dead {
            return Err(io::Error::other("simulated crash: the machine is down"));
        }
        Ok(())
    }

    fn change_names(&mut self, edits: Vec<(PathBuf, Option<u64>)>) {
        let change = NameChange { edits, moved_dir: None };
        apply(&mut self.names, &change);
        self.name_log.push(change);
    }

    /// `rename(2)` of a directory: `to` must not exist or be an empty directory; every name
    /// below `from` moves below `to` in one change of `to`'s parent.
    fn rename_dir(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        if self.names.contains_key(to) {
            // ENOTDIR, as rename(2) reports a directory renamed onto a file.
            return Err(io::Error::from_raw_os_error(20));
        }
        let below = |p: &Path, dir: &Path| p != dir && p.starts_with(dir);
        if self.names.keys().chain(self.dirs.iter()).any(|p| below(p, to)) {
            // ENOTEMPTY, as rename(2) reports a non-empty target directory.
            return Err(io::Error::from_raw_os_error(39));
        }
        let moved = |p: &Path| to.join(p.strip_prefix(from).expect("below from"));
        let mut edits = Vec::new();
        for (path, inode) in self.names.iter().filter(|(p, _)| below(p, from)) {
            edits.push((path.clone(), None));
            edits.push((moved(path), Some(*inode)));
        }
        let dirs: Vec<PathBuf> =
            self.dirs.iter().filter(|d| d.starts_with(from)).cloned().collect();
        for dir in dirs {
            self.dirs.remove(&dir);
            self.dirs.insert(moved(&dir));
        }
        let change = NameChange { edits, moved_dir: Some((from.to_path_buf(), to.to_path_buf())) };
        apply(&mut self.names, &change);
        self.name_log.push(change);
        Ok(())
    }

    fn inode_of(&self, path: &Path) -> io::Result<u64> {
        self.names.get(path).copied().ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    /// Bytes of every file that has a name (each inode counted once).
    fn used_bytes(&self) -> u64 {
        let named: BTreeSet<u64> = self.names.values().copied().collect();
        named.iter().filter_map(|i| self.inodes.get(i)).map(|f| f.written.len() as u64).sum()
    }
}

/// The total reported by [`Fs::space`] for a disk without a capacity: effectively unbounded.
const UNLIMITED_BYTES: u64 = 1 << 50;

fn fault_error(fault: Fault) -> io::Error {
    match fault {
        Fault::NoSpace => io::Error::from_raw_os_error(28),
        Fault::Eio | Fault::ShortWrite => io::Error::from_raw_os_error(5),
    }
}

/// The simulated file system. Clones share the same simulated machine.
#[derive(Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("SimFs").field("ops", &state.ops).field("files", &state.names.len()).finish()
    }
}

impl SimFs {
    /// An empty machine whose root directory `/` exists; `seed` drives every random choice.
    #[must_use]
    pub fn new(seed: u64) -> SimFs {
        let root = PathBuf::from("/");
        let state = State {
            rng: seed | 1,
            dirs: BTreeSet::from([root.clone()]),
            durable_dirs: BTreeSet::from([root]),
            ..State::default()
        };
        SimFs { state: Arc::new(Mutex::new(state)) }
    }

    /// State-changing operations performed so far.
    #[must_use]
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Crash the machine at operation `index` (counted from 0, as [`SimFs::ops`] counts):
    /// that operation and every later call fail, as if the process had died there.
    pub fn crash_at(&self, index: u64) {
        self.state.lock().crash_at = Some(index);
    }

    /// Whether the machine went down at its crash point.
    #[must_use]
    pub fn is_down(&self) -> bool {
        self.state.lock().dead
    }

    /// Makes operation `index` fail with `fault` (the machine stays up).
    pub fn inject(&self, index: u64, fault: Fault) {
        self.state.lock().faults.insert(index, fault);
    }

    /// Limits the disk to `bytes` (`None`: unlimited, the default). Files already bigger stay;
    /// a later write that grows the named files beyond the capacity fails with `ENOSPC`.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.state.lock().capacity_bytes = bytes;
    }

    /// Bytes of every file that has a name, as the capacity counts them.
    #[must_use]
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used_bytes()
    }

    /// Brings the machine down now.
    pub fn halt(&self) {
        self.state.lock().dead = true;
    }

    /// The machine after a crash under `model`, with the choices of `TornSectors` drawn from
    /// `seed`: a fresh file system holding what survived, no locks, no operations counted.
    #[must_use]
    pub fn reboot(&self, model: CrashModel, seed: u64) -> SimFs {
        let old = self.state.lock();
        let mut rng = State { rng: seed | 1, ..State::default() };
        let mut new = State { rng: old.rng ^ seed.rotate_left(17), ..State::default() };
        let (names, dirs) = match model {
            CrashModel::ProcessCrash => (old.names.clone(), old.dirs.clone()),
            CrashModel::LoseUnsynced => (old.durable_names.clone(), old.durable_dirs.clone()),
            CrashModel::TornSectors => {
                // The journal keeps a prefix of the unsynced directory changes; a rename is
                // atomic, so a file never ends up under both its old and its new name.
                let mut names = old.durable_names.clone();
                let kept = (rng.random() % (old.name_log.len() as u64 + 1)) as usize;
                for change in &old.name_log[..kept] {
                    apply(&mut names, change);
                }
                (names, old.durable_dirs.union(&old.dirs).cloned().collect())
            }
        };
        // A directory whose entry was lost takes everything below it along.
        let reachable = |path: &Path| {
            path.ancestors().skip(1).all(|a| a.as_os_str().is_empty() || dirs.contains(a))
        };
        let dirs: BTreeSet<PathBuf> = dirs.iter().filter(|d| reachable(d)).cloned().collect();
        let names: BTreeMap<PathBuf, u64> =
            names.into_iter().filter(|(path, _)| reachable(path)).collect();
        let mut inodes = HashMap::new();
        for inode in names.values() {
            if inodes.contains_key(inode) {
                continue;
            }
            let Some(file) = old.inodes.get(inode) else { continue };
            let image = match model {
                CrashModel::ProcessCrash => file.written.clone(),
                CrashModel::LoseUnsynced => file.durable.clone(),
                CrashModel::TornSectors => torn_image(file, &mut rng),
            };
            inodes.insert(
                *inode,
                Inode { written: image.clone(), durable: image, ..Inode::default() },
            );
        }
        new.next_inode = old.next_inode;
        new.capacity_bytes = old.capacity_bytes;
        new.durable_names = names.clone();
        new.names = names;
        new.durable_dirs = dirs.clone();
        new.dirs = dirs;
        new.inodes = inodes;
        SimFs { state: Arc::new(Mutex::new(new)) }
    }

    /// The bytes of `path` as the kernel would show them, if it exists.
    #[must_use]
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state.lock();
        let inode = state.names.get(path)?;
        state.inodes.get(inode).map(|f| f.written.clone())
    }

    /// Replaces the contents of `path`, written and durable alike (setting up a test image).
    pub fn write_file(&self, path: &Path, bytes: &[u8]) {
        let mut state = self.state.lock();
        let inode = match state.names.get(path) {
            Some(inode) => *inode,
            None => {
                state.next_inode += 1;
                let inode = state.next_inode;
                state.names.insert(path.to_path_buf(), inode);
                state.durable_names.insert(path.to_path_buf(), inode);
                inode
            }
        };
        state.inodes.insert(
            inode,
            Inode { written: bytes.to_vec(), durable: bytes.to_vec(), ..Inode::default() },
        );
    }

    /// Every file path, in order.
    #[must_use]
    pub fn files(&self) -> Vec<PathBuf> {
        self.state.lock().names.keys().cloned().collect()
    }

    /// Flips bit `bit` of `path` in both the written and the durable image: silent
    /// corruption of data at rest. Returns `false` if the bit is past the end of the file.
    pub fn flip_bit(&self, path: &Path, bit: u64) -> bool {
        self.mutate_at_rest(path, |bytes| {
            let Some(byte) = bytes.get_mut((bit / 8) as usize) else { return false };
            *byte ^= 1 << (bit % 8);
            true
        })
    }

    /// Zeroes sector `sector` of `path` in both images. Returns `false` past the end.
    pub fn zero_sector(&self, path: &Path, sector: u64) -> bool {
        self.mutate_at_rest(path, |bytes| {
            let start = sector as usize * SECTOR_BYTES;
            let end = (start + SECTOR_BYTES).min(bytes.len());
            let Some(region) = bytes.get_mut(start..end) else {
                return false;
            };
            region.fill(0);
            true
        })
    }

    fn mutate_at_rest(&self, path: &Path, change: impl Fn(&mut Vec<u8>) -> bool) -> bool {
        let mut state = self.state.lock();
        let Some(inode) = state.names.get(path).copied() else { return false };
        let Some(file) = state.inodes.get_mut(&inode) else { return false };
        change(&mut file.written) && change(&mut file.durable)
    }
}

/// The durable image of `file` plus a random subset of its unsynced sectors, applied in a
/// random order, each new, old, zeroed or garbage where it differs from the durable bytes.
fn torn_image(file: &Inode, rng: &mut State) -> Vec<u8> {
    let mut image = file.durable.clone();
    let mut sectors: Vec<usize> = file.dirty_sectors.iter().copied().collect();
    for i in (1..sectors.len()).rev() {
        let j = (rng.random() % (i as u64 + 1)) as usize;
        sectors.swap(i, j);
    }
    for sector in sectors {
        let start = sector * SECTOR_BYTES;
        let end = (start + SECTOR_BYTES).min(file.written.len());
        if start >= end {
            continue;
        }
        let choice = rng.random() % 8;
        if choice < 3 {
            continue; // old bytes
        }
        if image.len() < end {
            image.resize(end, 0);
        }
        for (at, (byte, &new)) in
            image[start..end].iter_mut().zip(&file.written[start..end]).enumerate()
        {
            let old = file.durable.get(start + at).copied().unwrap_or(0);
            if old == new {
                continue;
            }
            *byte = match choice {
                3..=5 => new,
                6 => 0,
                _ => rng.random() as u8,
            };
        }
    }
    image
}

#[derive(Debug)]
struct SimFile {
    state: Arc<Mutex<State>>,
    inode: u64,
}

#[derive(Debug)]
struct SimLock {
    state: Arc<Mutex<State>>,
    dir: PathBuf,
}

impl DirLock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.dir);
    }
}

fn parent_of(path: &Path) -> PathBuf {
    path.parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

impl Fs for SimFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if let Some(fault) = state.op()? {
            return Err(fault_error(fault));
        }
        for ancestor in path.ancestors() {
            if !ancestor.as_os_str().is_empty() {
                state.dirs.insert(ancestor.to_path_buf());
            }
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let state = self.state.lock();
        state.check_alive()?;
        if !state.dirs.contains(path) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        // Files and subdirectories, as `readdir` gives them.
        let names = state
            .names
            .keys()
            .chain(state.dirs.iter())
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        Ok(names)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let mut state = self.state.lock();
        let inode = if mode == OpenMode::CreateNew {
            if let Some(fault) = state.op()? {
                return Err(fault_error(fault));
            }
            if state.names.contains_key(path) {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            if !state.dirs.contains(&parent_of(path)) {
                return Err(io::Error::from(io::ErrorKind::NotFound));
            }
            state.next_inode += 1;
            let inode = state.next_inode;
            state.inodes.insert(inode, Inode::default());
            state.change_names(vec![(path.to_path_buf(), Some(inode))]);
            inode
        } else {
            state.check_alive()?;
            state.inode_of(path)?
        };
        Ok(Box::new(SimFile { state: Arc::clone(&self.state), inode }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if let Some(fault) = state.op()? {
            return Err(fault_error(fault));
        }
        if state.dirs.contains(from) {
            return state.rename_dir(from, to);
        }
        let inode = state.inode_of(from)?;
        state.change_names(vec![(from.to_path_buf(), None), (to.to_path_buf(), Some(inode))]);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if let Some(fault) = state.op()? {
            return Err(fault_error(fault));
        }
        let inode = state.inode_of(from)?;
        if state.names.contains_key(to) || state.dirs.contains(to) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        if !state.dirs.contains(&parent_of(to)) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        state.change_names(vec![(to.to_path_buf(), Some(inode))]);
        Ok(())
    }

    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        let state = self.state.lock();
        state.check_alive()?;
        Ok(state.dirs.contains(path))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if let Some(fault) = state.op()? {
            return Err(fault_error(fault));
        }
        state.inode_of(path)?;
        state.change_names(vec![(path.to_path_buf(), None)]);
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if let Some(fault) = state.op()? {
            return Err(fault_error(fault));
        }
        if !state.dirs.contains(path) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        let holds_anything =
            state.names.keys().chain(state.dirs.iter()).any(|p| p.parent() == Some(path));
        if holds_anything {
            // ENOTEMPTY, as rmdir(2) reports it.
            return Err(io::Error::from_raw_os_error(39));
        }
        state.dirs.remove(path);
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if let Some(fault) = state.op()? {
            return Err(fault_error(fault));
        }
        let in_dir = |p: &Path| p.parent() == Some(path);
        let log = std::mem::take(&mut state.name_log);
        let (synced, pending): (Vec<_>, Vec<_>) = log.into_iter().partition(|c| {
            c.edits.iter().any(|(p, _)| in_dir(p))
                || c.moved_dir.as_ref().is_some_and(|(_, to)| in_dir(to))
        });
        for change in &synced {
            apply(&mut state.durable_names, change);
            if let Some((from, to)) = &change.moved_dir {
                // The directories below a renamed one move with it.
                let below: Vec<PathBuf> = state
                    .durable_dirs
                    .iter()
                    .filter(|d| d.starts_with(from) && *d != from)
                    .cloned()
                    .collect();
                for dir in below {
                    state.durable_dirs.remove(&dir);
                    state.durable_dirs.insert(to.join(dir.strip_prefix(from).expect("below")));
                }
            }
        }
        state.name_log = pending;
        let subdirs: Vec<PathBuf> = state.dirs.iter().filter(|d| in_dir(d)).cloned().collect();
        // Removed subdirectories are gone for good once their parent is synced.
        state.durable_dirs.retain(|d| !in_dir(d) || subdirs.contains(d));
        state.durable_dirs.extend(subdirs);
        Ok(())
    }

    fn lock_dir(&self, dir: &Path) -> io::Result<Option<Box<dyn DirLock>>> {
        let mut state = self.state.lock();
        state.check_alive()?;
        if !state.locks.insert(dir.to_path_buf()) {
            return Ok(None);
        }
        Ok(Some(Box::new(SimLock { state: Arc::clone(&self.state), dir: dir.to_path_buf() })))
    }

    fn map(&self, path: &Path) -> io::Result<Bytes> {
        let state = self.state.lock();
        state.check_alive()?;
        let inode = state.inode_of(path)?;
        Ok(Bytes::from(state.inodes.get(&inode).map(|f| f.written.clone()).unwrap_or_default()))
    }

    fn map_range(&self, path: &Path, offset: u64, len: u64) -> io::Result<Bytes> {
        let state = self.state.lock();
        state.check_alive()?;
        let inode = state.inode_of(path)?;
        let written = state.inodes.get(&inode).map_or(&[][..], |f| &f.written[..]);
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(written.len());
        let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
        Ok(Bytes::copy_from_slice(&written[start..end.min(written.len())]))
    }

    fn random_u64(&self) -> u64 {
        self.state.lock().random()
    }

    fn space(&self, path: &Path) -> io::Result<Space> {
        let state = self.state.lock();
        state.check_alive()?;
        if !state.dirs.contains(path) && !state.names.contains_key(path) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        let total_bytes = state.capacity_bytes.unwrap_or(UNLIMITED_BYTES);
        Ok(Space { available_bytes: total_bytes.saturating_sub(state.used_bytes()), total_bytes })
    }
}

impl FsFile for SimFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let state = self.state.lock();
        state.check_alive()?;
        let file = state.inodes.get(&self.inode).ok_or(io::ErrorKind::NotFound)?;
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let source =
            file.written.get(start..start + buf.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(source);
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        let fault = state.op()?;
        let stored = match fault {
            None => buf.len(),
            Some(Fault::ShortWrite) => buf.len() / 2,
            Some(other) => return Err(fault_error(other)),
        };
        let start = offset as usize;
        if let Some(capacity) = state.capacity_bytes {
            let len = state.inodes.get(&self.inode).map_or(0, |f| f.written.len());
            let growth = (start + stored).saturating_sub(len) as u64;
            if growth > 0 && state.used_bytes() + growth > capacity {
                return Err(fault_error(Fault::NoSpace));
            }
        }
        let file = state.inodes.get_mut(&self.inode).ok_or(io::ErrorKind::NotFound)?;
        let end = start + stored;
        if file.written.len() < end {
            file.written.resize(end, 0);
        }
        file.written[start..end].copy_from_slice(&buf[..stored]);
        if stored > 0 {
            file.dirty_sectors.extend(start / SECTOR_BYTES..=(end - 1) / SECTOR_BYTES);
        }
        match fault {
            Some(f) => Err(fault_error(f)),
            None => Ok(()),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = self.state.lock();
        if let Some(fault) = state.op()? {
            return Err(fault_error(fault));
        }
        let file = state.inodes.get_mut(&self.inode).ok_or(io::ErrorKind::NotFound)?;
        file.durable.clone_from(&file.written);
        file.dirty_sectors.clear();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let state = self.state.lock();
        state.check_alive()?;
        Ok(state.inodes.get(&self.inode).map_or(0, |f| f.written.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(fs: &SimFs, path: &str) -> Box<dyn FsFile> {
        fs.open(Path::new(path), OpenMode::CreateNew).unwrap()
    }

    #[test]
    fn synced_data_survives_and_unsynced_data_can_vanish() {
        let fs = SimFs::new(1);
        let f = file(&fs, "/a");
        fs.sync_dir(Path::new("/")).unwrap();
        f.write_all_at(b"synced", 0).unwrap();
        f.sync_data().unwrap();
        f.write_all_at(b"-later", 6).unwrap();
        let lost = fs.reboot(CrashModel::LoseUnsynced, 0);
        assert_eq!(lost.read_file(Path::new("/a")).unwrap(), b"synced");
        let kept = fs.reboot(CrashModel::ProcessCrash, 0);
        assert_eq!(kept.read_file(Path::new("/a")).unwrap(), b"synced-later");
    }

    #[test]
    fn names_are_durable_only_after_a_directory_sync() {
        let fs = SimFs::new(2);
        let f = file(&fs, "/new");
        f.write_all_at(b"x", 0).unwrap();
        f.sync_data().unwrap();
        assert!(fs.reboot(CrashModel::LoseUnsynced, 0).read_file(Path::new("/new")).is_none());
        fs.rename(Path::new("/new"), Path::new("/renamed")).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        let after = fs.reboot(CrashModel::LoseUnsynced, 0);
        assert_eq!(after.read_file(Path::new("/renamed")).unwrap(), b"x");
        assert!(after.read_file(Path::new("/new")).is_none());
    }

    #[test]
    fn torn_sectors_keep_synced_bytes_and_vary_unsynced_ones() {
        let fs = SimFs::new(3);
        let f = file(&fs, "/t");
        fs.sync_dir(Path::new("/")).unwrap();
        f.write_all_at(&[1u8; 100], 0).unwrap();
        f.sync_data().unwrap();
        f.write_all_at(&[2u8; 4000], 100).unwrap();
        let mut outcomes = BTreeSet::new();
        for seed in 0..200 {
            let image =
                fs.reboot(CrashModel::TornSectors, seed).read_file(Path::new("/t")).unwrap();
            assert_eq!(&image[..100], &[1u8; 100], "synced bytes of a torn sector survive");
            outcomes.insert(image.get(3000).copied());
        }
        assert!(outcomes.len() >= 3, "sectors persist new, old or otherwise: {outcomes:?}");
    }

    #[test]
    fn crash_point_and_faults_fail_operations() {
        let fs = SimFs::new(4);
        let f = file(&fs, "/c");
        fs.inject(1, Fault::NoSpace);
        assert_eq!(f.write_all_at(b"x", 0).unwrap_err().raw_os_error(), Some(28));
        fs.inject(2, Fault::ShortWrite);
        assert!(f.write_all_at(b"abcd", 0).is_err());
        assert_eq!(fs.read_file(Path::new("/c")).unwrap(), b"ab");
        fs.crash_at(3);
        assert!(f.sync_data().is_err());
        assert!(fs.is_down());
        assert!(f.write_all_at(b"y", 0).is_err());
        assert_eq!(fs.ops(), 4);
    }

    #[test]
    fn a_full_disk_refuses_growth_and_reports_its_space() {
        let fs = SimFs::new(6);
        fs.set_capacity(Some(1000));
        let f = file(&fs, "/a");
        f.write_all_at(&[1; 600], 0).unwrap();
        let space = fs.space(Path::new("/")).unwrap();
        assert_eq!((space.available_bytes, space.total_bytes), (400, 1000));
        let err = f.write_all_at(&[2; 500], 600).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28));
        assert_eq!(fs.read_file(Path::new("/a")).unwrap(), vec![1; 600], "no effect");
        f.write_all_at(&[3; 600], 0).unwrap(); // overwriting needs no space
        fs.remove_file(Path::new("/a")).unwrap();
        assert_eq!(fs.space(Path::new("/")).unwrap().available_bytes, 1000);
    }

    #[test]
    fn bit_flips_change_data_at_rest() {
        let fs = SimFs::new(5);
        fs.write_file(Path::new("/b"), &[0u8; 600]);
        assert!(fs.flip_bit(Path::new("/b"), 9));
        assert_eq!(fs.read_file(Path::new("/b")).unwrap()[1], 2);
        assert!(fs.zero_sector(Path::new("/b"), 1));
        assert!(!fs.flip_bit(Path::new("/b"), 600 * 8));
        let after = fs.reboot(CrashModel::LoseUnsynced, 0);
        assert_eq!(after.read_file(Path::new("/b")).unwrap()[1], 2);
    }
}
