//! Building answers: the envelope builder handlers finish with, the response extensions that
//! tell the `context` middleware how to cache an answer, and every error response (the one
//! place an `ApiError` becomes an envelope).

use std::cell::RefCell;
use std::thread::LocalKey;

use asof_engine::{Coverage, Instant, VisibleBy};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use asof_answer::Answer;
use asof_answer::envelope::encode;

use crate::error::ApiError;
use crate::http::envelope::{Envelope, ErrorEnvelope, Origin};
use crate::http::request_id::RequestId;
use crate::http::state::Ctx;

pub use crate::http::request_id::X_REQUEST_ID;
/// The corpus version an answer was made from.
pub const X_CORPUS_VERSION: HeaderName = HeaderName::from_static("x-corpus-version");

/// What every handler returns.
pub type Reply = Result<Response, ApiError>;

/// How a successful answer may be cached; set by handlers as a response extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheKind {
    /// A cut strictly in the past: immutable for this corpus version.
    Historical,
    /// A cut at or after now, or no cut: may change as time passes.
    Live,
    /// Third-party data fetched for this caller alone (connector bars): never stored by any
    /// cache.
    NoStore,
}

impl CacheKind {
    pub fn for_cut(as_of: Option<Instant>) -> Self {
        match as_of {
            Some(t) if t < Instant::now() => CacheKind::Historical,
            _ => CacheKind::Live,
        }
    }
}

/// Marks a response body as a JSON envelope (it gets an ETag and the JSON-route headers), and
/// says how it may be cached: one extension where two (the mark, then the cache kind) cost an
/// allocation and a hash-map insert each on every answer. Other answers (documents) carry a
/// bare [`CacheKind`].
#[derive(Debug, Clone, Copy)]
pub struct JsonEnvelope(pub CacheKind);

/// Header fields an envelope answer carries at most, but for a route's own (`Content-Type`,
/// request id, corpus version, caching, ETag, three rate-limit fields, `Vary` and two more
/// CORS fields, `Retry-After` or `Allow`): the map is made this size once, where growing it
/// field by field rehashed it twice on every answer.
const ENVELOPE_HEADERS: usize = 16;

/// An encoded envelope (`Envelope::encode`, or [`encode`] for the others: JSON and one
/// trailing newline) as a response with its cache kind.
pub fn envelope_response(status: StatusCode, body: Vec<u8>, cache: CacheKind) -> Response {
    let mut r = Response::new(axum::body::Body::from(body));
    *r.status_mut() = status;
    let mut headers = axum::http::HeaderMap::with_capacity(ENVELOPE_HEADERS);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    *r.headers_mut() = headers;
    r.extensions_mut().insert(JsonEnvelope(cache));
    r
}

/// A successful envelope under construction: `ok(&ctx, results)` (or [`answered`] with the
/// answer layer's value) then what the answer is about (`at`, `coverage`, `next`, `sample`,
/// `origin`), then `.into_response()`. Caching follows the cut: historical when `as_of` is in
/// the past, live otherwise.
#[must_use]
#[derive(Debug)]
pub struct Success<'a, T: Serialize> {
    ctx: &'a Ctx,
    answer: Answer<T>,
    origin: Option<Origin>,
    /// How long the results encode, when known ([`Success::sized`]).
    results_len: Option<usize>,
}

/// Starts a successful envelope of `results`.
pub fn ok<T: Serialize>(ctx: &Ctx, results: Vec<T>) -> Success<'_, T> {
    answered(ctx, Answer::of(results))
}

/// The envelope of an answer of the answer layer.
pub fn answered<T: Serialize>(ctx: &Ctx, answer: Answer<T>) -> Success<'_, T> {
    Success {
        ctx,
        answer,
        origin: None,
        results_len: None,
    }
}

impl<T: Serialize> Success<'_, T> {
    /// The instant answered (and the clock, on cut and diff routes).
    pub fn at(mut self, as_of: Option<Instant>, visible_by: Option<VisibleBy>) -> Self {
        self.answer = self.answer.at(as_of, visible_by);
        self
    }
    pub fn coverage(mut self, coverage: Coverage) -> Self {
        self.answer = self.answer.coverage(coverage);
        self
    }
    pub fn next(mut self, cursor: Option<String>) -> Self {
        self.answer = self.answer.next(cursor);
        self
    }
    /// Names where third-party results came from (`origin`, with `cached: false`); the
    /// answer is then `no-store`.
    pub fn origin(mut self, origin: Origin) -> Self {
        self.origin = Some(origin);
        self
    }
    /// Says how long the results encode (`asof_answer::envelope::encoded_len`), so the body is
    /// made at its size.
    pub fn sized(mut self, results_len: Option<usize>) -> Self {
        self.results_len = results_len;
        self
    }
    /// Watermarks the answer `sample: true` (sample routes and the keyless MCP tier).
    pub fn sample(mut self, sample: bool) -> Self {
        self.answer = self.answer.sample(sample);
        self
    }
}

impl<T: Serialize> IntoResponse for Success<'_, T> {
    fn into_response(self) -> Response {
        let (body, cache) = self.encoded();
        envelope_response(StatusCode::OK, body, cache)
    }
}

impl<T: Serialize> Success<'_, T> {
    /// The envelope's body and how it may be cached.
    fn encoded(self) -> (Vec<u8>, CacheKind) {
        let as_of = self.answer.as_of;
        let mut env = Envelope::of(
            self.ctx.request_id.to_string(),
            self.ctx.corpus.version().to_owned(),
            self.answer,
        );
        env.cached = self.origin.as_ref().map(|_| false);
        env.origin = self.origin;
        let cache = if env.origin.is_some() {
            CacheKind::NoStore
        } else {
            CacheKind::for_cut(as_of)
        };
        (env.encode_sized(self.results_len), cache)
    }
}

/// A thread's copy of an answer that is the same for every request on one corpus version but
/// for its request id (`/health`), for [`per_version`]: the version and the body with a
/// stand-in id.
pub struct PerVersion(RefCell<Option<(String, Vec<u8>, CacheKind)>>);

impl PerVersion {
    pub const fn new() -> Self {
        PerVersion(RefCell::new(None))
    }
}

/// What an envelope's body starts with, before its request id.
const BEFORE_REQUEST_ID: &[u8] = b"{\"request_id\":\"";

/// The answer `make` gives on `ctx`'s corpus version, when it depends on nothing else (no cut,
/// no caller, no query): encoded once per thread and version with a stand-in request id, then
/// copied for each request with the request's own id written over the stand-in (ids are 36
/// characters that JSON never escapes). Encoding the envelope and its record anew was most of
/// what `/health` did beyond the shared path.
pub fn per_version<T: Serialize>(
    ctx: &Ctx,
    cell: &'static LocalKey<PerVersion>,
    make: impl for<'c> FnOnce(&'c Ctx) -> Success<'c, T>,
) -> Response {
    let (body, cache) = cell.with(|cell| {
        let mut cell = cell.0.borrow_mut();
        let version = ctx.corpus.version();
        if !matches!(&*cell, Some((v, _, _)) if v == version) {
            let stand_in = Ctx {
                request_id: RequestId::STAND_IN,
                corpus: ctx.corpus.clone(),
            };
            let success = make(&stand_in);
            debug_assert!(
                success.answer.as_of.is_none(),
                "an answer of a cut may change from historical to live as time passes"
            );
            let (body, cache) = success.encoded();
            *cell = Some((version.to_owned(), body, cache));
        }
        let (_, template, cache) = cell.as_ref().expect("filled above");
        let mut body = template.clone();
        let id = BEFORE_REQUEST_ID.len()..BEFORE_REQUEST_ID.len() + RequestId::LENGTH;
        assert_eq!(
            &body[id.clone()],
            RequestId::STAND_IN.as_str().as_bytes(),
            "an envelope starts with its request id"
        );
        body[id].copy_from_slice(ctx.request_id.as_str().as_bytes());
        (body, *cache)
    });
    envelope_response(StatusCode::OK, body, cache)
}

/// The error envelope of `err` (the one place errors become JSON).
pub fn error_envelope(ctx: &Ctx, err: &ApiError, sample: bool) -> ErrorEnvelope {
    error_envelope_at(&ctx.request_id, ctx.corpus.version(), err, sample)
}

/// The error envelope of `err` for a request with no corpus to name yet (a replica still
/// loading its corpus answers with `corpus_version` empty, as the contract allows for early
/// errors) or with one.
pub fn error_envelope_at(
    request_id: &str,
    corpus_version: &str,
    err: &ApiError,
    sample: bool,
) -> ErrorEnvelope {
    ErrorEnvelope::of(request_id, corpus_version, err, sample)
}

/// Renders every error response: the envelope, `no-store`, and `Allow`/`Retry-After` where
/// the status calls for them.
pub fn error_response(ctx: &Ctx, err: &ApiError, sample: bool) -> Response {
    error_response_at(&ctx.request_id, ctx.corpus.version(), err, sample)
}

/// [`error_response`] without a [`Ctx`] (see [`error_envelope_at`]).
pub fn error_response_at(
    request_id: &str,
    corpus_version: &str,
    err: &ApiError,
    sample: bool,
) -> Response {
    let env = error_envelope_at(request_id, corpus_version, err, sample);
    let mut r = envelope_response(err.status(), encode(&env), CacheKind::Live);
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(after) = err.retry_after() {
        h.insert(header::RETRY_AFTER, HeaderValue::from(after));
    }
    match err {
        ApiError::MethodNotAllowed { allow } => {
            h.insert(
                header::ALLOW,
                HeaderValue::from_str(allow)
                    .unwrap_or(HeaderValue::from_static("GET, HEAD, OPTIONS")),
            );
        }
        ApiError::RangeNotSatisfiable { size } => {
            h.insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes */{size}")).expect("ascii"),
            );
        }
        _ => {}
    }
    r
}
