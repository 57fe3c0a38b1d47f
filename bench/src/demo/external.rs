//! The simulated outside world of the demo: a publishing service whose whole state is one
//! small JSON file, `external/articles.json` under the store directory.
//!
//! It is not part of the store and knows nothing about it: the demo's writer publishes into
//! it before it is killed, and the recovering process asks it what happened. Each change is
//! written to a temporary file and renamed over the old one, so a process killed at any moment
//! leaves either the old or the new list, never a torn one.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The service's directory, under the store directory.
pub const EXTERNAL_DIR: &str = "external";
/// The file holding every published article.
const ARTICLES_FILE: &str = "articles.json";

/// One published article, as the service keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Article {
    /// The service's id of the article.
    pub article_id: u64,
    /// Where it is published.
    pub url: String,
    /// Its title.
    pub title: String,
    /// The client's request key it was published under.
    pub request_key: String,
}

/// Everything the service ever published, in order.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Articles {
    articles: Vec<Article>,
}

/// How the service treats a second request with a key it has already seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dedup {
    /// It publishes again (a `queryable` service: it can only be asked afterwards).
    None,
    /// It returns the first article (an `idempotent` service).
    ByKey,
}

/// The publishing service of one store directory.
#[derive(Debug)]
pub struct Service {
    dir: PathBuf,
}

impl Service {
    /// The service whose state lives under `store_dir`.
    pub fn new(store_dir: &Path) -> Service {
        Service { dir: store_dir.join(EXTERNAL_DIR) }
    }

    /// The file holding its state.
    pub fn path(&self) -> PathBuf {
        self.dir.join(ARTICLES_FILE)
    }

    fn load(&self) -> io::Result<Articles> {
        match std::fs::read(self.path()) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(io::Error::other),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Articles::default()),
            Err(error) => Err(error),
        }
    }

    fn save(&self, articles: &Articles) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let temporary = self.dir.join(format!("{ARTICLES_FILE}.tmp"));
        let mut bytes = serde_json::to_vec_pretty(articles).map_err(io::Error::other)?;
        bytes.push(b'\n');
        std::fs::write(&temporary, bytes)?;
        std::fs::rename(&temporary, self.path())
    }

    /// Publishes `title` under `request_key`. Returns the article and whether the service
    /// answered with an earlier one instead of publishing (only with [`Dedup::ByKey`]).
    pub fn publish(
        &self,
        title: &str,
        request_key: &str,
        dedup: Dedup,
    ) -> io::Result<(Article, bool)> {
        let mut articles = self.load()?;
        if dedup == Dedup::ByKey
            && let Some(first) = articles.articles.iter().find(|a| a.request_key == request_key)
        {
            return Ok((first.clone(), true));
        }
        let article_id = 101 + articles.articles.len() as u64;
        let article = Article {
            article_id,
            url: format!("https://news.example/articles/{article_id}"),
            title: title.to_owned(),
            request_key: request_key.to_owned(),
        };
        articles.articles.push(article.clone());
        self.save(&articles)?;
        Ok((article, false))
    }

    /// The first article published under `request_key`, if any: the query a `verify` plan
    /// asks for.
    pub fn find(&self, request_key: &str) -> io::Result<Option<Article>> {
        Ok(self.load()?.articles.into_iter().find(|a| a.request_key == request_key))
    }

    /// How many articles were published under `request_key`.
    pub fn count(&self, request_key: &str) -> io::Result<usize> {
        Ok(self.load()?.articles.iter().filter(|a| a.request_key == request_key).count())
    }
}
