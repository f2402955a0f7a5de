//! The data routes answered in-process, without HTTP: what the Python package's `asof.open()`
//! calls. The same query structs refuse the same input with the same messages, the same answer
//! functions answer, and the same envelopes are written, so a corpus on disk answers what the
//! service answers for it (the server's tests and the Python differential test hold the two
//! equal).
//!
//! [`ROUTES`] is the in-process route table: each entry a path pattern of the server's route
//! table (a server test holds the two lists equal: the entries it marks `in_process`, in its
//! order) and the answer it dispatches to. [`LocalApi::get_batch`] answers a news or diff page
//! with its records as one Arrow batch, made from the engine's rows directly (the Python
//! package's `to_arrow()`), the envelope's other members as [`LocalApi::get`] writes them.
//!
//! What differs is only what a deployment adds: no key, plan or rate limit (the caller holds
//! the files; `/v1/meta` lists no plans), no receipts, no headers. Cursors are signed with a
//! key of this process, so a cursor minted by one `LocalApi` is refused by another (and by a
//! server), as a server's is by a server with another key.

use std::sync::Arc;

use arrow::array::RecordBatch;
use asof_engine::model::record::to_batch;
use asof_engine::{Corpus, CorpusStore};
use futures::future::BoxFuture;
use rand::RngCore;
use serde::Serialize;

use crate::answer::{Answer, NewsPage};
use crate::envelope::{Envelope, ErrorEnvelope, Record, encode, records};
use crate::pager::Pager;
use crate::params::FromQuery;
use crate::versions::{CacheBounds, Retention, Versions, pin_of};
use crate::{Error, Result, data, meta};

/// One corpus version, answering the data routes in-process.
#[derive(Debug, Clone)]
pub struct LocalApi {
    corpus: Arc<Corpus>,
    pager: Pager,
    /// The store's other versions, for queries pinned with `corpus_version` (all retained:
    /// the caller holds the files, so no serving policy applies).
    versions: Arc<Versions>,
}

/// An answer as the service would send it: the HTTP status and the envelope's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAnswer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A page of `/v1/news` or `/v1/news/diff` with its records as Arrow (what the Python
/// package hands to pyarrow): the same page [`LocalApi::get`] answers for the same query.
#[derive(Debug, Clone)]
pub struct LocalBatch {
    pub status: u16,
    /// On 200 the envelope without its records (`results: []`, `count` the rows of `batch`);
    /// otherwise the error envelope as [`LocalApi::get`] answers it.
    pub head: Vec<u8>,
    /// On 200 the page's records, one row each in the stored record's columns
    /// (`asof_engine::model::record::schema`), in the page's order.
    pub batch: Option<RecordBatch>,
}

/// What one in-process route is asked: the API, the path's `{..}` segments (decoded) and the
/// raw query.
type Args<'a> = (&'a LocalApi, &'a [String], Option<&'a str>);

/// One route answered in-process.
pub struct LocalRoute {
    /// The path pattern, as the server's route table declares it (`{x}`: one segment).
    pub path: &'static str,
    /// The envelope's JSON (the rendered answer, or the refusal to render).
    answer: for<'a> fn(Args<'a>) -> BoxFuture<'a, Result<Vec<u8>>>,
    /// The page as rows, for routes with an Arrow form (news and diff).
    page: Option<for<'a> fn(Args<'a>) -> BoxFuture<'a, Result<NewsPage>>>,
    /// Takes `corpus_version` (the server's pinned routes).
    pinned: bool,
}

impl std::fmt::Debug for LocalRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRoute")
            .field("path", &self.path)
            .finish()
    }
}

impl LocalRoute {
    /// The path's `{..}` segments when `segments` is this route's path, else `None`.
    fn captures(&self, segments: &[String]) -> Option<Vec<String>> {
        let pattern: Vec<&str> = self.path.trim_start_matches('/').split('/').collect();
        if pattern.len() != segments.len() {
            return None;
        }
        let mut args = Vec::new();
        for (p, s) in pattern.iter().zip(segments) {
            if p.starts_with('{') {
                args.push(s.clone());
            } else if p != s {
                return None;
            }
        }
        Some(args)
    }
}

/// The routes answered in-process, in the server's route-table order.
pub static ROUTES: &[LocalRoute] = &[
    LocalRoute {
        path: "/v1/meta",
        answer: |(api, _, q)| {
            Box::pin(async move {
                data::MetaParams::parse(q)?;
                // No deployment: no plans, no public allowance, no retention policy.
                let record = meta::meta_record(&api.corpus, Vec::new(), 0, None);
                Ok(api.render(Answer::of(vec![record])))
            })
        },
        page: None,
        pinned: true,
    },
    LocalRoute {
        path: "/v1/news",
        answer: |args| Box::pin(async move { Ok(args.0.render_page(news(args).await?)) }),
        page: Some(|args| Box::pin(news(args))),
        pinned: true,
    },
    LocalRoute {
        path: "/v1/news/diff",
        answer: |args| Box::pin(async move { Ok(args.0.render_page(diff(args).await?)) }),
        page: Some(|args| Box::pin(diff(args))),
        pinned: true,
    },
    LocalRoute {
        path: "/v1/news/{id}",
        answer: |(api, path, q)| {
            Box::pin(async move {
                let p = data::RecordParams::parse(q)?;
                Ok(api.render(data::record(&api.corpus, &path[0], &p).await?))
            })
        },
        page: None,
        pinned: true,
    },
    LocalRoute {
        path: "/v1/coverage",
        answer: |(api, _, q)| {
            Box::pin(async move {
                let p = data::CoverageParams::parse(q)?;
                Ok(api.render(data::coverage(&api.corpus, &api.pager, &p)?))
            })
        },
        page: None,
        pinned: true,
    },
    LocalRoute {
        path: "/v1/mapping/ticker/{ticker}",
        answer: |(api, path, q)| {
            Box::pin(async move {
                let p = data::MappingParams::parse(q)?;
                Ok(api.render(data::mapping_ticker(&api.corpus, &path[0], &p)?))
            })
        },
        page: None,
        pinned: true,
    },
    LocalRoute {
        path: "/v1/mapping/cik/{cik}",
        answer: |(api, path, q)| {
            Box::pin(async move {
                let p = data::MappingParams::parse(q)?;
                Ok(api.render(data::mapping_cik(&api.corpus, &path[0], &p)?))
            })
        },
        page: None,
        pinned: true,
    },
];

async fn news((api, _, q): Args<'_>) -> Result<NewsPage> {
    data::cut(&api.corpus, &api.pager, &data::NewsParams::parse(q)?).await
}

async fn diff((api, _, q): Args<'_>) -> Result<NewsPage> {
    data::cut(&api.corpus, &api.pager, &data::DiffParams::parse(q)?).await
}

impl LocalApi {
    /// Opens the corpus at `location` (a directory or an object-store URL): its current
    /// version, or `version` (a `sha256:...` corpus version the store still holds).
    pub async fn open(location: &str, version: Option<&str>) -> asof_engine::Result<Self> {
        let store = CorpusStore::open(location)?;
        let corpus = match version {
            Some(v) => Corpus::open_version(store, v).await?,
            None => Corpus::open(store).await?,
        };
        Ok(Self::new(corpus))
    }

    /// Answers from an opened corpus.
    pub fn new(corpus: Corpus) -> Self {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        LocalApi {
            corpus: Arc::new(corpus),
            pager: Pager::new(&hex::encode(key)),
            versions: Arc::new(Versions::new(
                Retention {
                    versions: None,
                    days: None,
                },
                CacheBounds::default(),
                None,
            )),
        }
    }

    /// The API answering `route` for `query`: this one, or the version its `corpus_version`
    /// pins (loaded once, then kept within the cache's bound).
    async fn at_pin(&self, route: &LocalRoute, query: Option<&str>) -> Result<LocalApi> {
        let pin = if route.pinned { pin_of(query) } else { None };
        let Some(pin) = pin else {
            return Ok(self.clone());
        };
        Ok(LocalApi {
            corpus: self.versions.resolve(&self.corpus, Some(&pin)).await?,
            pager: self.pager.clone(),
            versions: self.versions.clone(),
        })
    }

    /// The corpus version every answer names.
    pub fn version(&self) -> &str {
        self.corpus.version()
    }

    /// The opened version itself (its store and manifest: what `asof_engine::sql` reads).
    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }

    /// The answer to `GET path?query` (`path` percent-encoded as in a URL, `query` without its
    /// `?`), as the service's route would give it: a 200 envelope or an error envelope.
    pub async fn get(&self, path: &str, query: Option<&str>) -> LocalAnswer {
        let answer = match route(path) {
            Ok((route, args)) => match self.at_pin(route, query).await {
                Ok(api) => (route.answer)((&api, &args, query))
                    .await
                    .map_err(|e| (e, api)),
                Err(e) => Err((e, self.clone())),
            },
            Err(e) => Err((e, self.clone())),
        };
        // A refusal names the version that refused: the pinned one once it answered.
        match answer {
            Ok(body) => LocalAnswer { status: 200, body },
            Err((e, api)) => LocalAnswer {
                status: e.status(),
                body: api.refuse(&e),
            },
        }
    }

    /// The page `GET path?query` answers, its records as one Arrow batch: only the routes with
    /// an Arrow form, `/v1/news` and `/v1/news/diff` (other paths: a 404 envelope). The rows go
    /// from the engine's page to Arrow columns directly, never through JSON.
    pub async fn get_batch(&self, path: &str, query: Option<&str>) -> LocalBatch {
        let (page, api) = match route(path) {
            Ok((route, args)) => match (route.page, self.at_pin(route, query).await) {
                (Some(page), Ok(api)) => (page((&api, &args, query)).await, api),
                (_, Err(e)) => (Err(e), self.clone()),
                (None, _) => (
                    Err(Error::NotFound(format!(
                        "{path} has no Arrow form; /v1/news and /v1/news/diff do"
                    ))),
                    self.clone(),
                ),
            },
            Err(e) => (Err(e), self.clone()),
        };
        let batch = page.and_then(|page| Ok((to_batch(&page.results)?, page)));
        match batch {
            Ok((batch, page)) => {
                let count = page.results.len();
                let mut head = Envelope::of(
                    api.request_id(),
                    api.version().to_owned(),
                    page.map(|_| Vec::<Record<'_>>::new()),
                );
                head.count = Some(count);
                LocalBatch {
                    status: 200,
                    head: head.encode(),
                    batch: Some(batch),
                }
            }
            Err(e) => LocalBatch {
                status: e.status(),
                head: api.refuse(&e),
                batch: None,
            },
        }
    }

    fn request_id(&self) -> String {
        uuid::Uuid::new_v4().hyphenated().to_string()
    }

    fn render<T: Serialize>(&self, answer: Answer<T>) -> Vec<u8> {
        Envelope::of(self.request_id(), self.version().to_owned(), answer).encode()
    }

    fn render_page(&self, mut page: NewsPage) -> Vec<u8> {
        let rows = std::mem::take(&mut page.results);
        self.render(page.map(|_| records(&rows, false)))
    }

    fn refuse(&self, e: &Error) -> Vec<u8> {
        encode(&ErrorEnvelope::of(
            &self.request_id(),
            self.version(),
            e,
            false,
        ))
    }
}

/// The in-process route of `path` and its `{..}` segments; a 404 naming the routes there are
/// for any other path.
fn route(path: &str) -> Result<(&'static LocalRoute, Vec<String>)> {
    let segments = segments(path)?;
    ROUTES
        .iter()
        .find_map(|r| r.captures(&segments).map(|args| (r, args)))
        .ok_or_else(|| {
            let paths: Vec<&str> = ROUTES.iter().map(|r| r.path).collect();
            Error::NotFound(format!(
                "no route {path} in a corpus opened in-process; it answers {}",
                paths.join(", ")
            ))
        })
}

/// The decoded segments of an absolute path (`/v1/news/a%2Fb` → `v1`, `news`, `a/b`).
fn segments(path: &str) -> Result<Vec<String>> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Error::NotFound(format!("{path:?} is not an absolute path")));
    };
    rest.split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|d| d.into_owned())
                .map_err(|_| Error::NotFound(format!("{path:?} is not UTF-8 once decoded")))
        })
        .collect()
}
