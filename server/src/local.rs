//! The data routes answered in-process, without HTTP: what the Python package's `asof.open()`
//! calls. Each answer comes from the routes' own functions (`routes::data`, `routes::discovery`):
//! the same parameter structs refuse the same input with the same messages, the same engine
//! calls answer, and the same envelopes are written, so a corpus on disk answers exactly what
//! the service answers for it (the Python differential test holds the two equal).
//!
//! [`LocalApi::get_batch`] answers a news or diff page with its records as one Arrow batch,
//! made from the engine's rows directly (the Python package's `to_arrow()`), the envelope's
//! other members as [`LocalApi::get`] writes them.
//!
//! What differs is only what HTTP adds: no key, plan or rate limit (the caller holds the files),
//! no receipts, no headers. Cursors are signed with a key of this process, so a cursor minted
//! by one `LocalApi` is refused by another (and by a server), as a server's is by a server
//! with another key.

use std::sync::Arc;

use arrow::array::RecordBatch;
use asof_engine::record::to_batch;
use asof_engine::{Corpus, CorpusStore};
use bytes::Bytes;
use http_body_util::BodyExt;
use rand::RngCore;

use crate::error::ApiError;
use crate::http::cursor::CursorSigner;
use crate::http::envelope::Record;
use crate::http::params::FromQuery;
use crate::http::response::error_response;
use crate::http::state::Ctx;
use crate::http::{Reply, ok};
use crate::plan::PUBLIC_REQUESTS_PER_MINUTE;
use crate::routes::data::{
    CoverageParams, DiffParams, MappingParams, NewsPage, NewsParams, RecordParams, coverage_answer,
    cut_answer, cut_page_of, mapping_cik_answer, mapping_ticker_answer, record_answer,
};
use crate::routes::discovery::meta_answer;
use axum::response::IntoResponse;

/// One corpus version, answering the data routes in-process.
#[derive(Debug, Clone)]
pub struct LocalApi {
    corpus: Arc<Corpus>,
    signer: CursorSigner,
}

/// An answer as the service would send it: the HTTP status and the envelope's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAnswer {
    pub status: u16,
    pub body: Bytes,
}

/// A page of `/v1/news` or `/v1/news/diff` with its records as Arrow (what the Python
/// package hands to pyarrow): the same page [`LocalApi::get`] answers for the same query.
#[derive(Debug, Clone)]
pub struct LocalBatch {
    pub status: u16,
    /// On 200 the envelope without its records (`results: []`, `count` the rows of `batch`);
    /// otherwise the error envelope as [`LocalApi::get`] answers it.
    pub head: Bytes,
    /// On 200 the page's records, one row each in the stored record's columns
    /// (`asof_engine::record::schema`), in the page's order.
    pub batch: Option<RecordBatch>,
}

/// The routes [`LocalApi::get`] answers, as patterns (for its refusal of any other path).
pub const LOCAL_ROUTES: &[&str] = &[
    "/v1/news",
    "/v1/news/diff",
    "/v1/news/{id}",
    "/v1/coverage",
    "/v1/mapping/ticker/{ticker}",
    "/v1/mapping/cik/{cik}",
    "/v1/meta",
];

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
            signer: CursorSigner::new(&hex::encode(key)),
        }
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
        let ctx = self.ctx();
        let response = match self.answer(&ctx, path, query).await {
            Ok(r) => r,
            Err(e) => error_response(&ctx, &e, false),
        };
        let status = response.status().as_u16();
        LocalAnswer {
            status,
            body: body_of(response).await,
        }
    }

    /// The page `GET path?query` answers, its records as one Arrow batch: only
    /// `/v1/news` and `/v1/news/diff` (other paths: a 404 envelope). The rows go from the
    /// engine's page to Arrow columns directly, never through JSON.
    pub async fn get_batch(&self, path: &str, query: Option<&str>) -> LocalBatch {
        let ctx = self.ctx();
        let answer = match self.page(&ctx, path, query).await {
            Ok(page) => to_batch(&page.rows)
                .map_err(ApiError::from)
                .map(|batch| (batch, page)),
            Err(e) => Err(e),
        };
        match answer {
            Ok((batch, page)) => {
                let count = page.rows.len();
                let response = ok(&ctx, Vec::<Record<'_>>::new())
                    .at(Some(page.as_of), Some(page.visible_by))
                    .coverage(page.coverage)
                    .next(page.next_cursor)
                    .into_response();
                let status = response.status().as_u16();
                // The head is small: re-encoding it to set `count` costs next to nothing.
                let mut head: serde_json::Value =
                    serde_json::from_slice(&body_of(response).await).unwrap_or_default();
                head["count"] = serde_json::Value::from(count);
                LocalBatch {
                    status,
                    head: Bytes::from(serde_json::to_vec(&head).unwrap_or_default()),
                    batch: Some(batch),
                }
            }
            Err(e) => {
                let response = error_response(&ctx, &e, false);
                LocalBatch {
                    status: response.status().as_u16(),
                    head: body_of(response).await,
                    batch: None,
                }
            }
        }
    }

    fn ctx(&self) -> Ctx {
        Ctx {
            request_id: crate::http::middleware::new_request_id()
                .hyphenated()
                .to_string(),
            corpus: self.corpus.clone(),
        }
    }

    async fn page(&self, ctx: &Ctx, path: &str, query: Option<&str>) -> Result<NewsPage, ApiError> {
        let segments = segments(path)?;
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        match segments.as_slice() {
            ["v1", "news"] => cut_page_of(&self.signer, ctx, &NewsParams::parse(query)?).await,
            ["v1", "news", "diff"] => {
                cut_page_of(&self.signer, ctx, &DiffParams::parse(query)?).await
            }
            _ => Err(ApiError::NotFound(format!(
                "{path} has no Arrow form; /v1/news and /v1/news/diff do"
            ))),
        }
    }

    async fn answer(&self, ctx: &Ctx, path: &str, query: Option<&str>) -> Reply {
        let segments = segments(path)?;
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        match segments.as_slice() {
            ["v1", "news"] => cut_answer(&self.signer, ctx, &NewsParams::parse(query)?).await,
            ["v1", "news", "diff"] => {
                cut_answer(&self.signer, ctx, &DiffParams::parse(query)?).await
            }
            ["v1", "news", id] => record_answer(ctx, id, &RecordParams::parse(query)?).await,
            ["v1", "coverage"] => {
                coverage_answer(&self.signer, ctx, &CoverageParams::parse(query)?)
            }
            ["v1", "mapping", "ticker", ticker] => {
                mapping_ticker_answer(ctx, ticker, &MappingParams::parse(query)?)
            }
            ["v1", "mapping", "cik", cik] => {
                mapping_cik_answer(ctx, cik, &MappingParams::parse(query)?)
            }
            ["v1", "meta"] => {
                crate::http::params::NoQuery::parse(query)?;
                meta_answer(ctx, PUBLIC_REQUESTS_PER_MINUTE, false)
            }
            _ => Err(ApiError::NotFound(format!(
                "no route {path} in a corpus opened in-process; it answers {}",
                LOCAL_ROUTES.join(", ")
            ))),
        }
    }
}

/// A response's body (already encoded: collecting it only moves its bytes).
async fn body_of(response: axum::response::Response) -> Bytes {
    response
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default()
}

/// The decoded segments of an absolute path (`/v1/news/a%2Fb` → `v1`, `news`, `a/b`).
fn segments(path: &str) -> Result<Vec<String>, ApiError> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(ApiError::NotFound(format!(
            "{path:?} is not an absolute path"
        )));
    };
    rest.split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|d| d.into_owned())
                .map_err(|_| ApiError::NotFound(format!("{path:?} is not UTF-8 once decoded")))
        })
        .collect()
}
