//! The seam every request to a replica's object store goes through (`format-spec/replication.md`,
//! "Locations and the seam"): [`Remote`], its `file://` implementation [`DirRemote`], and
//! [`open`], which turns a location URL into one.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{ErrorKind, Result};
use crate::fs::{Fs, OpenMode, RealFs};

/// An object store as a replica sees it. Objects are immutable once created; names are
/// relative, `/`-separated, without empty, `.` or `..` components.
pub trait Remote: Send + Sync {
    /// Creates `name` holding `bytes` if no object has that name: `Ok(true)` when this call
    /// created it, `Ok(false)` when an object of that name exists (it is left as it is). The
    /// one conditional request of the format: two writers racing for a name cannot both win.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Remote`] when the store fails the request.
    fn put_new(&self, name: &str, bytes: &[u8]) -> Result<bool>;

    /// The bytes of `name`, or `None` when there is no such object.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Remote`] when the store fails the request.
    fn get(&self, name: &str) -> Result<Option<Vec<u8>>>;

    /// The names of the objects under `prefix` (empty, or ending with `/`), sorted.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Remote`] when the store fails the request.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;

    /// Deletes `name`; deleting a missing object is not an error.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Remote`] when the store fails the request.
    fn delete(&self, name: &str) -> Result<()>;

    /// The location, as messages name it (the URL it was opened from).
    fn location(&self) -> &str;
}

/// The remote a location URL names: `file:///absolute/dir` (created if missing) is a
/// [`DirRemote`]; `s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX` and `az://CONTAINER/PREFIX` are
/// an [`ObjectRemote`](super::object::ObjectRemote) configured from the environment, with the
/// default bounds (builds with the feature of that backend: `s3`, `gcs` or `azure`).
///
/// # Errors
///
/// [`ErrorKind::UnsupportedUrl`] for another scheme, a relative path, or an object-store URL
/// in a build without that backend's feature; [`ErrorKind::Remote`] when the directory
/// cannot be created or the object-store client cannot be configured.
pub fn open(url: &str) -> Result<Box<dyn Remote>> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(unsupported(url, "give a URL such as file:///srv/replicas/agent-1"));
    };
    match scheme {
        "file" => {
            if !rest.starts_with('/') {
                return Err(unsupported(
                    url,
                    "a file:// location needs an absolute path (file:///dir, three slashes)",
                ));
            }
            Ok(Box::new(DirRemote::create(url, Path::new(rest))?))
        }
        #[cfg(feature = "object-store")]
        "s3" | "gs" | "az" => {
            // For s3://, the shared credentials files fill what the environment leaves unset.
            let profile =
                if scheme == "s3" { super::aws_profile::settings_from_files() } else { Vec::new() };
            let settings: Vec<(&str, &str)> =
                profile.iter().map(|(key, value)| (*key, value.as_str())).collect();
            let options = super::object::ObjectOptions::default();
            Ok(Box::new(super::object::ObjectRemote::open(url, &settings, options)?))
        }
        #[cfg(not(feature = "object-store"))]
        "s3" | "gs" | "az" => Err(backend_missing(url, scheme)),
        other => Err(unsupported(
            url,
            &format!("unknown scheme {other:?}; use file:///DIR, s3://, gs:// or az://"),
        )),
    }
}

/// The refusal of an object-store location whose backend this build left out (the library's
/// features `s3`, `gcs` and `azure`).
pub(crate) fn backend_missing(url: &str, scheme: &str) -> crate::Error {
    let feature = match scheme {
        "s3" => "s3",
        "gs" => "gcs",
        _ => "azure",
    };
    unsupported(
        url,
        &format!(
            "this build of factlog has no {scheme}:// client (it was built without the \
             `{feature}` feature); use file:///DIR, or install the command with it: \
             `cargo install --path cli --features {feature}` (`--features cloud` for every \
             backend)"
        ),
    )
}

fn unsupported(url: &str, reason: &str) -> crate::Error {
    ErrorKind::UnsupportedUrl { url: url.to_owned(), reason: reason.to_owned() }.into()
}

/// A replica in a directory (`file://`): an object is a file under it. A create writes a
/// hidden temporary file, syncs it and links it to its name, so readers never see part of
/// an object and two creators of one name cannot both succeed. Every file-system call goes
/// through an [`Fs`] ([`RealFs`] unless [`DirRemote::create_with_fs`] gives another), so the
/// fault-injecting file systems of the tests reach it as they reach the log.
#[derive(Debug)]
pub struct DirRemote {
    url: String,
    root: PathBuf,
    fs: Arc<dyn Fs>,
    temporaries: AtomicU64,
}

/// The prefix of a [`DirRemote`]'s temporary files, which listings skip.
const TEMPORARY_PREFIX: &str = ".tmp-";

impl DirRemote {
    /// The replica in `root` on the real file system (created with its parents if missing),
    /// named `url` in messages.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Remote`] when `root` cannot be created.
    pub fn create(url: &str, root: &Path) -> Result<DirRemote> {
        DirRemote::create_with_fs(Arc::new(RealFs), url, root)
    }

    /// The replica in `root` on the file system `fs` (created with its parents if missing),
    /// named `url` in messages: how a test runs a `file://` replica on a file system that
    /// fails or crashes.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Remote`] when `root` cannot be created.
    pub fn create_with_fs(fs: Arc<dyn Fs>, url: &str, root: &Path) -> Result<DirRemote> {
        let remote =
            DirRemote { url: url.to_owned(), root: root.to_path_buf(), fs, temporaries: 0.into() };
        remote.create_dirs_synced(root).map_err(|e| remote.failed("create", "", &e))?;
        Ok(remote)
    }

    fn failed(&self, op: &'static str, object: &str, error: &io::Error) -> crate::Error {
        ErrorKind::Remote {
            location: self.url.clone(),
            op,
            object: object.to_owned(),
            reason: error.to_string(),
        }
        .into()
    }

    fn path(&self, op: &'static str, name: &str) -> Result<PathBuf> {
        let valid = !name.is_empty()
            && name.split('/').all(|c| {
                !c.is_empty() && c != "." && c != ".." && !c.starts_with(TEMPORARY_PREFIX)
            });
        if !valid {
            let error = io::Error::new(io::ErrorKind::InvalidInput, "not a valid object name");
            return Err(self.failed(op, name, &error));
        }
        Ok(self.root.join(name))
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> io::Result<bool> {
        let parent = path.parent().unwrap_or(&self.root);
        self.create_dirs_synced(parent)?;
        let number = self.temporaries.fetch_add(1, Ordering::Relaxed);
        let temporary = parent.join(format!("{TEMPORARY_PREFIX}{}-{number}", std::process::id()));
        let written = (|| {
            let file = self.fs.open(&temporary, OpenMode::CreateNew)?;
            file.write_all_at(bytes, 0)?;
            file.sync_data()?;
            match self.fs.hard_link(&temporary, path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            }
        })();
        // Whatever happened, the temporary goes: a failed create leaves no trace but, at
        // worst, a temporary name that listings skip.
        let _ = self.fs.remove_file(&temporary);
        let created = written?;
        if created {
            self.fs.sync_dir(parent)?;
        }
        Ok(created)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let file = self.fs.open(path, OpenMode::Read)?;
        let len = usize::try_from(file.len()?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "object too large"))?;
        let mut bytes = vec![0; len];
        file.read_exact_at(&mut bytes, 0)?;
        Ok(bytes)
    }

    /// Creates `dir` and its missing ancestors, syncing the directory that holds each one it
    /// creates, so that an object created inside is not lost with its directory by a power
    /// failure.
    fn create_dirs_synced(&self, dir: &Path) -> io::Result<()> {
        if self.fs.is_dir(dir)? {
            return Ok(());
        }
        if let Some(parent) = dir.parent() {
            self.create_dirs_synced(parent)?;
        }
        // The parent exists: this creates `dir` alone, or finds it made by a racing creator.
        self.fs.create_dir_all(dir)?;
        match dir.parent() {
            Some(parent) => self.fs.sync_dir(parent),
            None => Ok(()),
        }
    }

    /// Adds the files under `dir` (named `prefix` + their relative path) to `names`, skipping
    /// temporary files; a missing `dir` holds nothing.
    fn list_files(&self, dir: &Path, prefix: &str, names: &mut Vec<String>) -> io::Result<()> {
        let entries = match self.fs.list_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for name in entries {
            if name.starts_with(TEMPORARY_PREFIX) {
                continue;
            }
            let relative = if prefix.is_empty() || prefix.ends_with('/') {
                format!("{prefix}{name}")
            } else {
                format!("{prefix}/{name}")
            };
            let path = dir.join(&name);
            if self.fs.is_dir(&path)? {
                self.list_files(&path, &format!("{relative}/"), names)?;
            } else {
                names.push(relative);
            }
        }
        Ok(())
    }
}

impl Remote for DirRemote {
    fn put_new(&self, name: &str, bytes: &[u8]) -> Result<bool> {
        let path = self.path("put", name)?;
        self.write_new(&path, bytes).map_err(|e| self.failed("put", name, &e))
    }

    fn get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path("get", name)?;
        match self.read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.failed("get", name, &e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let start = self.root.join(prefix.trim_end_matches('/'));
        self.list_files(&start, prefix, &mut names).map_err(|e| self.failed("list", prefix, &e))?;
        names.sort();
        Ok(names)
    }

    fn delete(&self, name: &str) -> Result<()> {
        let path = self.path("delete", name)?;
        match self.fs.remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.failed("delete", name, &e)),
        }
    }

    fn location(&self) -> &str {
        &self.url
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn objects_are_created_once_listed_sorted_and_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        objects_behave(&DirRemote::create("file:///test", dir.path()).expect("create"));
    }

    /// What every [`Remote`] does with objects, checked on an empty one.
    pub(crate) fn objects_behave(remote: &dyn Remote) {
        assert!(remote.put_new("a/2.part", b"two").expect("put"));
        assert!(remote.put_new("a/1.part", b"one").expect("put"));
        assert!(!remote.put_new("a/1.part", b"other").expect("put again"));
        assert!(remote.put_new("top.json", b"{}").expect("put"));
        assert_eq!(remote.get("a/1.part").expect("get").as_deref(), Some(&b"one"[..]));
        assert_eq!(remote.get("a/3.part").expect("get"), None);
        assert_eq!(remote.list("a/").expect("list"), ["a/1.part", "a/2.part"]);
        assert_eq!(remote.list("").expect("list"), ["a/1.part", "a/2.part", "top.json"]);
        assert_eq!(remote.list("missing/").expect("list"), Vec::<String>::new());
        remote.delete("a/1.part").expect("delete");
        remote.delete("a/1.part").expect("delete again");
        assert_eq!(remote.list("a/").expect("list"), ["a/2.part"]);
        assert!(remote.get("../escape").is_err());
    }

    #[test]
    fn urls_other_than_absolute_file_urls_are_refused() {
        for url in ["relative/dir", "file://relative", "ftp://x/y", "s3://"] {
            let error = open(url).err().expect("refused");
            assert!(matches!(error.kind(), ErrorKind::UnsupportedUrl { .. }), "{url}: {error}");
        }
    }
}
