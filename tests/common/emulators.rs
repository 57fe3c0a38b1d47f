//! The object-store emulators the replica tests run against besides `s3s-fs` (`s3.rs`): moto's
//! S3 server for `s3://` and azurite's blob service for `az://`, installed at pinned versions
//! and started on loopback by `bash .ci/emulators start DIR` (which `.ci/run` runs, and stops
//! afterwards). They are found through the endpoints that command writes to `DIR/env`,
//! `FACTLOG_MOTO_ENDPOINT` and `FACTLOG_AZURITE_ENDPOINT`. The servers outlive the tests, so
//! every test writes under a prefix of its own ([`unique_prefix`]) in the one bucket, and
//! removes what it wrote there when it ends ([`Emulator::cleanup`]), so that a server that
//! lives through many runs of these tests (a stress loop) holds only what the running tests
//! wrote; `.ci/emulators` says why azurite keeps its blobs on disk for the same reason.
//!
//! When an endpoint is unset a test is skipped with a message, unless `CI=true` or
//! `FACTLOG_EMULATORS_REQUIRED` is set (`.ci/run` sets the latter), which makes it a failure.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use factlog::replica::{ObjectOptions, ObjectRemote, Remote};

/// The bucket (S3) and the container (Azure) `.ci/emulators start` creates.
pub const BUCKET: &str = "factlog-test";
/// Azurite's well-known development account.
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// The key of [`AZURITE_ACCOUNT`], the same in every azurite.
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Which emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// moto's S3 server (`s3://`).
    Moto,
    /// azurite's blob service (`az://`).
    Azurite,
}

impl Kind {
    /// The emulator's name, for messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Kind::Moto => "moto",
            Kind::Azurite => "azurite",
        }
    }

    /// The variable holding its endpoint.
    #[must_use]
    pub fn endpoint_variable(self) -> &'static str {
        match self {
            Kind::Moto => "FACTLOG_MOTO_ENDPOINT",
            Kind::Azurite => "FACTLOG_AZURITE_ENDPOINT",
        }
    }
}

/// A running emulator, as `.ci/emulators start` left it.
#[derive(Debug, Clone)]
pub struct Emulator {
    kind: Kind,
    endpoint: String,
}

impl Emulator {
    /// The emulator of `kind`, or `None` (after saying why) when its endpoint is unset and
    /// neither `CI=true` nor `FACTLOG_EMULATORS_REQUIRED` is set.
    ///
    /// # Panics
    ///
    /// When its endpoint is unset and one of them is.
    #[must_use]
    pub fn find(kind: Kind, test: &str) -> Option<Emulator> {
        let variable = kind.endpoint_variable();
        match std::env::var(variable) {
            Ok(endpoint) if !endpoint.is_empty() => Some(Emulator { kind, endpoint }),
            _ => {
                let missing = format!(
                    "no {} ({variable} is unset): run `bash .ci/emulators start DIR` and \
                     `source DIR/env` first",
                    kind.name()
                );
                let required = std::env::var("CI").is_ok_and(|v| v == "true")
                    || std::env::var_os("FACTLOG_EMULATORS_REQUIRED").is_some();
                assert!(
                    !required,
                    "{test}: {missing} (CI=true or FACTLOG_EMULATORS_REQUIRED is set, so this \
                     is a failure)"
                );
                // Written to the process's stderr, not through the test harness's capture, so
                // that the skip shows in a plain `cargo test`.
                let _ = writeln!(std::io::stderr(), "{test}: skipped: {missing}");
                None
            }
        }
    }

    /// Which emulator this is.
    #[must_use]
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its endpoint: `http://127.0.0.1:PORT` for moto, `http://127.0.0.1:PORT/ACCOUNT` for
    /// azurite.
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The location URL of `prefix` in [`BUCKET`]: `s3://...` or `az://...`.
    #[must_use]
    pub fn url(&self, prefix: &str) -> String {
        let scheme = match self.kind {
            Kind::Moto => "s3",
            Kind::Azurite => "az",
        };
        format!("{scheme}://{BUCKET}/{prefix}")
    }

    /// The settings that point an [`ObjectRemote`] at this emulator. moto checks no
    /// signature, so any key does; azurite checks the development account's.
    fn settings(&self) -> Vec<(&'static str, String)> {
        match self.kind {
            Kind::Moto => vec![
                ("aws_endpoint", self.endpoint.clone()),
                ("aws_allow_http", "true".to_owned()),
                ("aws_region", "us-east-1".to_owned()),
                ("aws_access_key_id", "factlog-test-key".to_owned()),
                ("aws_secret_access_key", "factlog-test-secret".to_owned()),
            ],
            Kind::Azurite => vec![
                ("azure_storage_account_name", AZURITE_ACCOUNT.to_owned()),
                ("azure_storage_account_key", AZURITE_KEY.to_owned()),
                ("azure_storage_endpoint", self.endpoint.clone()),
                ("azure_allow_http", "true".to_owned()),
            ],
        }
    }

    /// A remote at [`Emulator::url`]`(prefix)`: a client of its own, as another machine's.
    ///
    /// # Panics
    ///
    /// When the remote cannot be configured.
    #[must_use]
    pub fn remote(&self, prefix: &str, options: ObjectOptions) -> ObjectRemote {
        let settings = self.settings();
        let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ObjectRemote::open(&self.url(prefix), &settings, options)
            .unwrap_or_else(|e| panic!("open a remote on {}: {e}", self.kind.name()))
    }
}

/// Removes every object under its prefix when dropped, whether the test passed or not.
pub struct Cleanup {
    remote: ObjectRemote,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // Best effort: a failure to clean up must not hide the test's own outcome.
        if let Ok(names) = self.remote.list("") {
            for name in names {
                let _ = self.remote.delete(&name);
            }
        }
    }
}

impl Emulator {
    /// A guard that removes everything under `prefix` when the test ends.
    #[must_use]
    pub fn cleanup(&self, prefix: &str) -> Cleanup {
        let options = ObjectOptions::default()
            .request_timeout(std::time::Duration::from_secs(10))
            .connect_timeout(std::time::Duration::from_secs(2));
        Cleanup { remote: self.remote(prefix, options) }
    }
}

/// A prefix no other test, run or process uses: `LABEL-PID-NANOS-N`.
#[must_use]
pub fn unique_prefix(label: &str) -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    format!("{label}-{}-{nanos}-{n}", std::process::id())
}
