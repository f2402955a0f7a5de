//! Building answers: the envelope builder handlers finish with, the response extensions that
//! tell the `context` middleware how to cache an answer, and every error response (the one
//! place an `ApiError` becomes an envelope).

use asof_engine::{Coverage, Instant, VisibleBy};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::ApiError;
use crate::http::envelope::{CoverageBody, Envelope, ErrorBody, ErrorEnvelope, Origin, Status};
use crate::http::state::Ctx;

/// The request id every answer carries (the client's, when it sent a UUID).
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
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

/// Marks a response body as a JSON envelope (it gets an ETag and the JSON-route headers).
#[derive(Debug, Clone, Copy)]
pub struct JsonEnvelope;

/// Serializes an envelope (one trailing newline) into a response with its cache kind.
pub fn envelope_response<E: Serialize>(status: StatusCode, env: &E, cache: CacheKind) -> Response {
    let body = encode(env);
    let mut r = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response();
    r.extensions_mut().insert(cache);
    r.extensions_mut().insert(JsonEnvelope);
    r
}

/// Encoding buffers above this size are not kept between answers.
const KEEP_BUFFER_BYTES: usize = 4 << 20;

thread_local! {
    /// The thread's encoding buffer. An envelope is encoded into it, then copied out once at
    /// its final size: a fresh `Vec` grown by doubling from 128 bytes reallocated and copied
    /// a page of rows a dozen times, a quarter of a keyed page's instructions (BENCHMARKS.md).
    static BODY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The envelope's JSON and one trailing newline.
fn encode<E: Serialize>(env: &E) -> Vec<u8> {
    BODY.with_borrow_mut(|buf| {
        buf.clear();
        serde_json::to_writer(&mut *buf, env).expect("envelope serializes");
        buf.push(b'\n');
        let body = buf.as_slice().to_vec();
        if buf.capacity() > KEEP_BUFFER_BYTES {
            *buf = Vec::new();
        }
        body
    })
}

/// A successful envelope under construction: `ok(&ctx, results)` then what the answer is
/// about (`cut`, `coverage`, `next`, `sample`), then `.into_response()`. Caching follows the
/// cut: historical when `as_of` is in the past, live otherwise.
#[must_use]
#[derive(Debug)]
pub struct Success<'a, T: Serialize> {
    ctx: &'a Ctx,
    results: Vec<T>,
    as_of: Option<Instant>,
    visible_by: Option<VisibleBy>,
    coverage: Coverage,
    next_cursor: Option<String>,
    sample: bool,
    origin: Option<Origin>,
}

/// Starts a successful envelope of `results`.
pub fn ok<T: Serialize>(ctx: &Ctx, results: Vec<T>) -> Success<'_, T> {
    Success {
        ctx,
        results,
        as_of: None,
        visible_by: None,
        coverage: Coverage::default(),
        next_cursor: None,
        sample: false,
        origin: None,
    }
}

impl<T: Serialize> Success<'_, T> {
    /// The instant answered (and the clock, on cut and diff routes).
    pub fn at(mut self, as_of: Option<Instant>, visible_by: Option<VisibleBy>) -> Self {
        self.as_of = as_of;
        self.visible_by = visible_by;
        self
    }
    pub fn coverage(mut self, coverage: Coverage) -> Self {
        self.coverage = coverage;
        self
    }
    pub fn next(mut self, cursor: Option<String>) -> Self {
        self.next_cursor = cursor;
        self
    }
    /// Names where third-party results came from (`origin`, with `cached: false`); the
    /// answer is then `no-store`.
    pub fn origin(mut self, origin: Origin) -> Self {
        self.origin = Some(origin);
        self
    }
    /// Watermarks the answer `sample: true` (sample routes and the keyless MCP tier).
    pub fn sample(mut self, sample: bool) -> Self {
        self.sample = sample;
        self
    }
}

impl<T: Serialize> IntoResponse for Success<'_, T> {
    fn into_response(self) -> Response {
        let env = Envelope {
            request_id: self.ctx.request_id.clone(),
            corpus_version: self.ctx.corpus.version().to_owned(),
            as_of: self.as_of,
            visible_by: self.visible_by.map(|v| v.to_string()),
            status: Status::Ok,
            count: Some(self.results.len()),
            results: self.results,
            next_cursor: self.next_cursor,
            coverage: CoverageBody::from(self.coverage),
            error: None,
            sample: self.sample.then_some(true),
            cached: self.origin.as_ref().map(|_| false),
            origin: self.origin,
        };
        let cache = if env.origin.is_some() {
            CacheKind::NoStore
        } else {
            CacheKind::for_cut(self.as_of)
        };
        envelope_response(StatusCode::OK, &env, cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_encoding_is_its_value_and_a_newline_whatever_the_thread_encoded_before() {
        let big = serde_json::json!({ "rows": vec!["x".repeat(1000); 50] });
        let small = serde_json::json!({ "rows": [] });
        let mut expected = serde_json::to_vec(&big).unwrap();
        expected.push(b'\n');
        assert_eq!(encode(&big), expected);
        assert_eq!(encode(&small), b"{\"rows\":[]}\n");
        // A body past the size the buffer keeps is answered whole, and the next one too.
        let huge = serde_json::json!({ "rows": "y".repeat(KEEP_BUFFER_BYTES + 1) });
        let out = encode(&huge);
        assert_eq!(
            out.len(),
            KEEP_BUFFER_BYTES + 1 + r#"{"rows":""}"#.len() + 1
        );
        assert!(out.ends_with(b"y\"}\n"));
        assert_eq!(encode(&small), b"{\"rows\":[]}\n");
    }
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
    let (coverage, as_of, visible_by, status) = match err {
        ApiError::CoverageMissing {
            coverage,
            as_of,
            visible_by,
        } => (
            CoverageBody::from(coverage.clone()),
            *as_of,
            visible_by.clone(),
            Status::CoverageMissing,
        ),
        _ => (CoverageBody::default(), None, None, Status::Error),
    };
    ErrorEnvelope {
        request_id: request_id.to_owned(),
        corpus_version: corpus_version.to_owned(),
        as_of,
        visible_by,
        status,
        results: [],
        next_cursor: None,
        count: None,
        coverage,
        error: ErrorBody {
            code: err.code().into(),
            message: err.message(),
            param: err.param(),
        },
        sample: sample.then_some(true),
    }
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
    let mut r = envelope_response(err.status(), &env, CacheKind::Live);
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
