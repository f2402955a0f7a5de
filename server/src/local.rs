//! The data routes answered in-process, without HTTP: what the Python package's `asof.open()`
//! calls. Each answer comes from the routes' own functions (`routes::data`, `routes::discovery`):
//! the same parameter structs refuse the same input with the same messages, the same engine
//! calls answer, and the same envelopes are written, so a corpus on disk answers exactly what
//! the service answers for it (the Python differential test holds the two equal).
//!
//! What differs is only what HTTP adds: no key, plan or rate limit (the caller holds the files),
//! no receipts, no headers. Cursors are signed with a key of this process, so a cursor minted
//! by one `LocalApi` is refused by another (and by a server), as a server's is by a server
//! with another key.

use std::sync::Arc;

use asof_engine::{Corpus, CorpusStore};
use bytes::Bytes;
use http_body_util::BodyExt;
use rand::RngCore;

use crate::error::ApiError;
use crate::http::Reply;
use crate::http::cursor::CursorSigner;
use crate::http::params::FromQuery;
use crate::http::response::error_response;
use crate::http::state::Ctx;
use crate::plan::PUBLIC_REQUESTS_PER_MINUTE;
use crate::routes::data::{
    CoverageParams, DiffParams, MappingParams, NewsParams, RecordParams, coverage_answer,
    diff_answer, mapping_cik_answer, mapping_ticker_answer, news_answer, record_answer,
};
use crate::routes::discovery::meta_answer;

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
        let ctx = Ctx {
            request_id: uuid::Uuid::new_v4().hyphenated().to_string(),
            corpus: self.corpus.clone(),
        };
        let response = match self.answer(&ctx, path, query).await {
            Ok(r) => r,
            Err(e) => error_response(&ctx, &e, false),
        };
        let status = response.status().as_u16();
        // The envelope is already encoded: collecting the body only moves its bytes.
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        LocalAnswer { status, body }
    }

    async fn answer(&self, ctx: &Ctx, path: &str, query: Option<&str>) -> Reply {
        let segments = segments(path)?;
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        match segments.as_slice() {
            ["v1", "news"] => news_answer(&self.signer, ctx, &NewsParams::parse(query)?).await,
            ["v1", "news", "diff"] => {
                diff_answer(&self.signer, ctx, &DiffParams::parse(query)?).await
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
