//! Object-store replica locations (`s3://`, `gs://`, `az://`) through the `object_store`
//! crate (`format-spec/replication.md`, "Locations and the seam"): [`ObjectRemote`].
//!
//! The replicator is a thread of its own, not async code, so an [`ObjectRemote`] owns a
//! current-thread tokio runtime and runs each request to completion on it. Every request is
//! bounded: each HTTP attempt by a timeout, the attempts by a retry budget, and the whole
//! call by a deadline ([`ObjectOptions`]), so a stalled or vanished server gives an error,
//! never a hang. `put_new` is a conditional create (`If-None-Match: *` on S3); a store that
//! cannot do one is refused, never written with an unconditional put, since the lease
//! depends on it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::TryStreamExt;
#[cfg(feature = "s3")]
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
#[cfg(feature = "azure")]
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
#[cfg(feature = "gcs")]
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig,
};

use super::Remote;
use crate::error::{ErrorKind, Result};

/// Default of [`ObjectOptions::request_timeout`]: one HTTP attempt, long enough for the
/// largest part (8 MiB) on a slow link.
pub const OBJECT_REQUEST_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// Default of [`ObjectOptions::connect_timeout`]: a reachable endpoint answers a TCP or TLS
/// handshake well within this.
pub const OBJECT_CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);
/// Default of [`ObjectOptions::retries_max`]: transient failures (a dropped connection, a
/// 5xx) are retried a few times inside one call; the replicator's own backoff does the rest.
pub const OBJECT_RETRIES_MAX_DEFAULT: usize = 3;
/// Default of [`ObjectOptions::call_timeout`]: the whole call, retries included.
pub const OBJECT_CALL_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);

/// The name prefix of the object [`ObjectRemote::check_conditional_create`] creates twice.
pub const CREATE_CHECK_PREFIX: &str = ".factlog-create-check-";

/// The bounds of an [`ObjectRemote`]'s requests. `ObjectOptions::default()` is what
/// [`super::remote::open`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectOptions {
    request_timeout: Duration,
    connect_timeout: Duration,
    retries_max: usize,
    call_timeout: Duration,
}

impl Default for ObjectOptions {
    fn default() -> Self {
        ObjectOptions {
            request_timeout: OBJECT_REQUEST_TIMEOUT_DEFAULT,
            connect_timeout: OBJECT_CONNECT_TIMEOUT_DEFAULT,
            retries_max: OBJECT_RETRIES_MAX_DEFAULT,
            call_timeout: OBJECT_CALL_TIMEOUT_DEFAULT,
        }
    }
}

impl ObjectOptions {
    /// The time one HTTP attempt may take, from connecting to the last byte of the answer.
    /// Default: 30 s ([`OBJECT_REQUEST_TIMEOUT_DEFAULT`]).
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The time a connection may take to open. Default: 5 s
    /// ([`OBJECT_CONNECT_TIMEOUT_DEFAULT`]).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How many times one call retries a transient failure. Default: 3
    /// ([`OBJECT_RETRIES_MAX_DEFAULT`]).
    #[must_use]
    pub fn retries_max(mut self, retries: usize) -> Self {
        self.retries_max = retries;
        self
    }

    /// The time one call (`put_new`, `get`, `list`, `delete`) may take in all, its retries
    /// included; past it the call fails. Default: 60 s ([`OBJECT_CALL_TIMEOUT_DEFAULT`]).
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    fn retry_config(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: self.retries_max,
            retry_timeout: self.call_timeout,
        }
    }

    fn client_settings(&self) -> [(ClientConfigKey, String); 2] {
        [
            (ClientConfigKey::Timeout, format!("{}ms", self.request_timeout.as_millis())),
            (ClientConfigKey::ConnectTimeout, format!("{}ms", self.connect_timeout.as_millis())),
        ]
    }
}

/// A replica in an object store: objects named `PREFIX/NAME` in one bucket or container,
/// reached through an [`ObjectStore`].
#[derive(Debug)]
pub struct ObjectRemote {
    url: String,
    store: Arc<dyn ObjectStore>,
    /// The replica's root inside the store (empty: the bucket's root).
    prefix: Path,
    options: ObjectOptions,
    /// Whether [`ObjectRemote::check_conditional_create`] passed.
    create_checked: AtomicBool,
    runtime: tokio::runtime::Runtime,
}

impl ObjectRemote {
    /// The replica at `url` (`s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX` or
    /// `az://CONTAINER/PREFIX`), configured from the environment as the `object_store` crate
    /// reads it (`AWS_*` for `s3://`, e.g. `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`; `GOOGLE_*` for `gs://`;
    /// `AZURE_*` for `az://`, and for the azurite emulator `AZURE_STORAGE_USE_EMULATOR=true`,
    /// which selects its well-known account and key, with `AZURITE_BLOB_STORAGE_URL` when it
    /// does not listen on `http://127.0.0.1:10000`), then from `settings`: pairs of a
    /// configuration key as that crate names it (`aws_endpoint`, `aws_access_key_id`,
    /// `allow_http`, ...) and its value, which override the environment.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedUrl`] for another scheme, a URL without a bucket or a key
    /// the store does not know; [`ErrorKind::Remote`] when the client cannot be configured
    /// (a missing region or account, say) or its runtime cannot start.
    pub fn open(url: &str, settings: &[(&str, &str)], options: ObjectOptions) -> Result<Self> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(unsupported(url, "give a URL such as s3://bucket/prefix"));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(unsupported(url, "the URL names no bucket: s3://BUCKET/PREFIX"));
        }
        let prefix = object_prefix(url, prefix)?;
        let bucket_url = format!("{scheme}://{bucket}");
        let client = options.client_settings();
        let bad_key = |key: &str| {
            unsupported(url, &format!("{key:?} is not a configuration key of {scheme}:// stores"))
        };
        let runtime = new_runtime(url)?;
        // Clients are built inside the runtime so that anything they start belongs to it.
        let _entered = runtime.enter();
        // The three builders have the same methods but no trait in common.
        macro_rules! configured {
            ($builder:ident, $key:ident) => {{
                let mut builder = $builder::from_env().with_url(bucket_url);
                for (key, value) in client {
                    builder = builder.with_config($key::Client(key), value);
                }
                for &(key, value) in settings {
                    let key: $key = key.parse().map_err(|_| bad_key(key))?;
                    builder = builder.with_config(key, value);
                }
                builder.with_retry(options.retry_config()).build().map(|s| Arc::new(s) as _)
            }};
        }
        let built: object_store::Result<Arc<dyn ObjectStore>> = match scheme {
            #[cfg(feature = "s3")]
            "s3" => configured!(AmazonS3Builder, AmazonS3ConfigKey),
            #[cfg(feature = "gcs")]
            "gs" => configured!(GoogleCloudStorageBuilder, GoogleConfigKey),
            #[cfg(feature = "azure")]
            "az" => configured!(MicrosoftAzureBuilder, AzureConfigKey),
            #[allow(unreachable_patterns, reason = "reached only when a backend's feature is off")]
            "s3" | "gs" | "az" => return Err(super::remote::backend_missing(url, scheme)),
            other => {
                return Err(unsupported(
                    url,
                    &format!("unknown object-store scheme {other:?}; use s3://, gs:// or az://"),
                ));
            }
        };
        drop(_entered);
        let store = built.map_err(|e| {
            remote_error(
                url,
                "open",
                "",
                format!(
                    "cannot configure the {scheme}:// client: {e}; check the URL and the \
                     environment variables that configure it ({})",
                    environment_hint(scheme)
                ),
            )
        })?;
        Ok(ObjectRemote::assemble(url, store, prefix, options, runtime))
    }

    /// A replica under `prefix` in `store`, named `url` in messages: for a store built by the
    /// caller (an in-memory one in tests, or one with settings [`ObjectRemote::open`] does
    /// not cover). `options` bounds each call with its `call_timeout`; the other bounds
    /// belong to the store's own client.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnsupportedUrl`] for a prefix that is not a valid object path;
    /// [`ErrorKind::Remote`] when the runtime cannot start.
    pub fn with_store(
        url: &str,
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        options: ObjectOptions,
    ) -> Result<Self> {
        let prefix = object_prefix(url, prefix)?;
        let runtime = new_runtime(url)?;
        Ok(ObjectRemote::assemble(url, store, prefix, options, runtime))
    }

    fn assemble(
        url: &str,
        store: Arc<dyn ObjectStore>,
        prefix: Path,
        options: ObjectOptions,
        runtime: tokio::runtime::Runtime,
    ) -> ObjectRemote {
        ObjectRemote {
            url: url.to_owned(),
            store,
            prefix,
            options,
            create_checked: AtomicBool::new(false),
            runtime,
        }
    }

    /// The bounds of this remote's calls.
    #[must_use]
    pub fn options(&self) -> ObjectOptions {
        self.options
    }

    /// The store's path of the object `name`.
    fn path(&self, op: &'static str, name: &str) -> Result<Path> {
        let valid =
            !name.is_empty() && name.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
        let joined = if self.prefix.as_ref().is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.prefix)
        };
        match Path::parse(&joined) {
            Ok(path) if valid => Ok(path),
            _ => Err(self.failed(op, name, "not a valid object name".to_owned())),
        }
    }

    fn failed(&self, op: &'static str, object: &str, reason: String) -> crate::Error {
        remote_error(&self.url, op, object, reason)
    }

    /// Runs `request` to completion, within the call deadline.
    fn run<T>(
        &self,
        op: &'static str,
        object: &str,
        request: impl Future<Output = object_store::Result<T>>,
    ) -> std::result::Result<T, Failure> {
        let deadline = self.options.call_timeout;
        match self.runtime.block_on(async { tokio::time::timeout(deadline, request).await }) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(Failure::Store(error)),
            Err(_elapsed) => Err(Failure::Deadline(self.failed(
                op,
                object,
                format!(
                    "no answer within {deadline:?} (the call's deadline); check that the \
                     endpoint is up and reachable"
                ),
            ))),
        }
    }

    /// Checks, once per remote, that the store refuses a second create of one name: it creates
    /// an empty object named `.factlog-create-check-{pid}-{nanos}` twice and deletes it. A
    /// store that accepts both creates ignores the condition, and could let two runs take one
    /// lease epoch. [`Remote::put_new`] calls this before its first create.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Remote`] when the store accepted both creates, cannot create
    /// conditionally at all, or failed a request.
    pub fn check_conditional_create(&self) -> Result<()> {
        if self.create_checked.load(Ordering::Acquire) {
            return Ok(());
        }
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let name = format!("{CREATE_CHECK_PREFIX}{}-{nanos}", std::process::id());
        let first = self.create(&name, b"")?;
        let second = self.create(&name, b"");
        // Best effort: a leftover check object is not part of the replica (no reader looks at
        // names of this form).
        let _ = self.delete(&name);
        if first && second? {
            return Err(self.failed(
                "put",
                &name,
                format!(
                    "this object store accepted a second create of one name (a check object, \
                     {CREATE_CHECK_PREFIX}...) although the request asked for it only if the \
                     name was free (it ignores If-None-Match: *), so it cannot hold a \
                     replica's lease safely; use a store that honours conditional writes (S3, \
                     GCS, Azure Blob, or an S3-compatible server that supports them) or a \
                     file:// location"
                ),
            ));
        }
        self.create_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// Creates `name` if no object has that name (`put_new` without the check).
    fn create(&self, name: &str, bytes: &[u8]) -> Result<bool> {
        let path = self.path("put", name)?;
        let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        let payload = PutPayload::from(bytes.to_vec());
        match self.run("put", name, self.store.put_opts(&path, payload, options)) {
            Ok(_) => Ok(true),
            Err(Failure::Store(object_store::Error::AlreadyExists { .. })) => Ok(false),
            Err(Failure::Store(
                error @ (object_store::Error::NotImplemented { .. }
                | object_store::Error::NotSupported { .. }),
            )) => Err(self.failed(
                "put",
                name,
                format!(
                    "this object store cannot create an object only if it does not exist (a \
                     conditional create, If-None-Match: *), so it cannot hold a replica's lease \
                     safely and factlog will not write to it unconditionally ({}); use a store \
                     that supports conditional writes (S3 and most S3-compatible servers, GCS, \
                     Azure Blob) or a file:// location",
                    chain(&error)
                ),
            )),
            Err(Failure::Store(error)) => Err(self.store_failed("put", name, &error)),
            Err(Failure::Deadline(error)) => Err(error),
        }
    }

    /// The error for a failed request, saying what to check.
    fn store_failed(
        &self,
        op: &'static str,
        object: &str,
        error: &object_store::Error,
    ) -> crate::Error {
        let scheme = self.url.split_once("://").map_or("", |(scheme, _)| scheme);
        let text = chain(error);
        // The S3 client reports a refused listing as a generic error whose text holds the
        // status; its status-carrying error type is not public, so the text is what is left.
        let refused = matches!(
            error,
            object_store::Error::Unauthenticated { .. }
                | object_store::Error::PermissionDenied { .. }
        ) || text.contains("401 Unauthorized")
            || text.contains("403 Forbidden");
        let reason = if refused {
            format!(
                "the object store refused the credentials: {text}; check the access key and \
                 secret ({}) and that they may read and write this bucket and prefix",
                environment_hint(scheme)
            )
        } else {
            text
        };
        self.failed(op, object, reason)
    }
}

/// How a request failed: the store's error, or the call's deadline (already a factlog error).
enum Failure {
    Store(object_store::Error),
    Deadline(crate::Error),
}

impl Remote for ObjectRemote {
    fn put_new(&self, name: &str, bytes: &[u8]) -> Result<bool> {
        // A failed check is reported as a failure to create `name`, the object asked for.
        self.check_conditional_create().map_err(|error| match error.kind() {
            ErrorKind::Remote { op, reason, .. } => self.failed(op, name, reason.clone()),
            _ => error,
        })?;
        self.create(name, bytes)
    }

    fn get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path("get", name)?;
        let request = async {
            match self.store.get(&path).await {
                Ok(result) => result.bytes().await.map(|bytes| Some(bytes.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(error) => Err(error),
            }
        };
        match self.run("get", name, request) {
            Ok(bytes) => Ok(bytes),
            Err(Failure::Store(error)) => Err(self.store_failed("get", name, &error)),
            Err(Failure::Deadline(error)) => Err(error),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let relative = prefix.trim_end_matches('/');
        let under =
            if relative.is_empty() { self.prefix.clone() } else { self.path("list", relative)? };
        let request = async {
            let listed = self.store.list(Some(&under));
            listed.try_collect::<Vec<_>>().await
        };
        let listed = match self.run("list", prefix, request) {
            Ok(listed) => listed,
            Err(Failure::Store(error)) => return Err(self.store_failed("list", prefix, &error)),
            Err(Failure::Deadline(error)) => return Err(error),
        };
        let root = self.prefix.as_ref();
        let mut names: Vec<String> = listed
            .into_iter()
            .filter_map(|meta| {
                let full = meta.location.as_ref();
                let name = if root.is_empty() {
                    full
                } else {
                    full.strip_prefix(root)?.strip_prefix('/')?
                };
                name.starts_with(prefix).then(|| name.to_owned())
            })
            .collect();
        names.sort();
        Ok(names)
    }

    fn delete(&self, name: &str) -> Result<()> {
        let path = self.path("delete", name)?;
        let request = async {
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(error) => Err(error),
            }
        };
        match self.run("delete", name, request) {
            Ok(()) => Ok(()),
            Err(Failure::Store(error)) => Err(self.store_failed("delete", name, &error)),
            Err(Failure::Deadline(error)) => Err(error),
        }
    }

    fn location(&self) -> &str {
        &self.url
    }
}

fn new_runtime(url: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
        remote_error(url, "open", "", format!("cannot start the client's runtime: {e}"))
    })
}

/// The object path of a location's prefix.
fn object_prefix(url: &str, prefix: &str) -> Result<Path> {
    Path::parse(prefix.trim_end_matches('/'))
        .map_err(|e| unsupported(url, &format!("its prefix is not a valid object path ({e})")))
}

fn unsupported(url: &str, reason: &str) -> crate::Error {
    ErrorKind::UnsupportedUrl { url: url.to_owned(), reason: reason.to_owned() }.into()
}

fn remote_error(url: &str, op: &'static str, object: &str, reason: String) -> crate::Error {
    ErrorKind::Remote { location: url.to_owned(), op, object: object.to_owned(), reason }.into()
}

/// The environment variables that configure a scheme's client, for messages.
fn environment_hint(scheme: &str) -> &'static str {
    match scheme {
        "s3" => {
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, \
             AWS_ENDPOINT_URL, AWS_ALLOW_HTTP"
        }
        "gs" => "GOOGLE_SERVICE_ACCOUNT, GOOGLE_APPLICATION_CREDENTIALS",
        "az" => "AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_KEY",
        _ => "the store's credentials",
    }
}

/// An error and its sources, as one line: the store's messages put the useful part (a
/// status code, "connection refused") in the innermost source.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let line = inner.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    fn memory_remote(prefix: &str) -> ObjectRemote {
        ObjectRemote::with_store(
            "memory:///r",
            Arc::new(InMemory::new()),
            prefix,
            ObjectOptions::default(),
        )
        .expect("remote")
    }

    #[test]
    fn objects_are_created_once_listed_sorted_and_deleted() {
        for prefix in ["", "replicas/agent-1"] {
            crate::replica::remote::tests::objects_behave(&memory_remote(prefix));
        }
    }

    #[test]
    fn of_two_racing_creators_of_one_name_exactly_one_wins() {
        // Two writers with clients of their own on one store whose conditional create is
        // atomic: the remote reports the store's answer, one winner per name.
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let remotes: Vec<Arc<ObjectRemote>> = (0..2)
            .map(|_| {
                let remote = ObjectRemote::with_store(
                    "memory:///r",
                    Arc::clone(&store),
                    "race",
                    ObjectOptions::default(),
                );
                Arc::new(remote.expect("remote"))
            })
            .collect();
        for round in 0..50 {
            let name = format!("lease/{round:020}.json");
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let racers: Vec<_> = remotes
                .iter()
                .map(|remote| {
                    let (remote, barrier) = (Arc::clone(remote), Arc::clone(&barrier));
                    let name = name.clone();
                    std::thread::spawn(move || {
                        barrier.wait();
                        remote.put_new(&name, b"{}").expect("put")
                    })
                })
                .collect();
            let won: Vec<bool> = racers.into_iter().map(|r| r.join().expect("racer")).collect();
            assert_eq!(won.iter().filter(|&&w| w).count(), 1, "round {round}: {won:?}");
        }
    }

    #[test]
    fn a_store_without_conditional_creates_is_refused_not_overwritten() {
        // With conditional puts disabled the S3 client refuses a create before any request,
        // so no server is needed: the endpoint is a closed port.
        let remote = ObjectRemote::open(
            "s3://bucket/prefix",
            &[
                ("aws_endpoint", "http://127.0.0.1:9"),
                ("aws_allow_http", "true"),
                ("aws_region", "us-east-1"),
                ("aws_access_key_id", "key"),
                ("aws_secret_access_key", "secret"),
                ("aws_conditional_put", "disabled"),
            ],
            ObjectOptions::default().retries_max(0).call_timeout(Duration::from_secs(5)),
        )
        .expect("open");
        let error = remote.put_new("lease/1.json", b"{}").unwrap_err();
        assert!(matches!(error.kind(), ErrorKind::Remote { op: "put", .. }), "{error}");
        assert!(error.to_string().contains("cannot hold a replica's lease safely"), "{error}");
    }

    #[test]
    fn unknown_schemes_and_keys_are_refused() {
        for (url, settings) in [
            ("s3://", &[][..]),
            ("ftp://bucket/p", &[][..]),
            ("s3://bucket/p", &[("no_such_key", "x")][..]),
        ] {
            let error = ObjectRemote::open(url, settings, ObjectOptions::default()).unwrap_err();
            assert!(matches!(error.kind(), ErrorKind::UnsupportedUrl { .. }), "{url}: {error}");
        }
    }
}
