//! The router and the middleware every request passes through.
//!
//! Layers, outermost first: trace → CORS → trailing-slash redirect → `context` (request id,
//! corpus snapshot, error envelopes, `X-Request-Id`/`X-Corpus-Version`, ETag/304,
//! `Cache-Control`) → `guard` (credentials, plan gate, rate limit, rate-limit headers) → route.
//!
//! `context` also writes audit receipts: `guard` leaves the attributed caller in the response's
//! extensions, and `context` hashes the exact body bytes after every header is final. Everything
//! is one `Router` value, so the MCP endpoint can re-dispatch a tool call as an in-process GET
//! through the same stack.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use asof_engine::{Corpus, Instant};
use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::audit::{AUDIT_HEADER, Audit, DROPPED_HEADER, Skip, wants_receipt};
use crate::auth::{Access, PUBLIC_REQUESTS_PER_MINUTE, Plan, access_for};
use crate::cursor::CursorSigner;
use crate::envelope::{CoverageBody, ErrorBody, ErrorEnvelope, Status};
use crate::error::ApiError;
use crate::state_store::{KeyRecord, StateStore, StoredReceipt, User, hash_key};

/// Shared state of one server process.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    corpus: RwLock<Arc<Corpus>>,
    store: Arc<dyn StateStore>,
    signer: CursorSigner,
    trust_forwarded_for: bool,
    public_requests_per_minute: u32,
    audit: Audit,
    discovery: crate::discovery::Cache,
    rate: Arc<crate::rate::RateWindows>,
    keys: crate::key_cache::KeyCache,
}

/// Settings of one server process besides its corpus and state store.
#[derive(Debug, Clone)]
pub struct Options {
    /// Take the client address from `X-Forwarded-For` (only behind a trusted proxy).
    pub trust_forwarded_for: bool,
    /// Bound of the audit receipt queue (the spec's 1,200; tests use tiny ones).
    pub audit_queue_capacity: usize,
    /// Requests per minute one client address may make to the public rate-limited routes.
    pub public_requests_per_minute: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            trust_forwarded_for: false,
            audit_queue_capacity: crate::audit::DEFAULT_QUEUE_CAPACITY,
            public_requests_per_minute: PUBLIC_REQUESTS_PER_MINUTE,
        }
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("corpus", &self.corpus().version())
            .finish()
    }
}

impl AppState {
    /// Builds the state; the cursor secret is read from (or created in) the state store, so
    /// every replica sharing the store signs and verifies the same cursors.
    pub async fn new(
        corpus: Corpus,
        store: Arc<dyn StateStore>,
        trust_forwarded_for: bool,
    ) -> crate::error::Result<Self> {
        let opts = Options {
            trust_forwarded_for,
            ..Options::default()
        };
        Self::with_options(corpus, store, opts).await
    }

    /// As [`AppState::new`] with every setting explicit; starts the audit writer task.
    pub async fn with_options(
        corpus: Corpus,
        store: Arc<dyn StateStore>,
        opts: Options,
    ) -> crate::error::Result<Self> {
        let secret = store.secret("cursor_hmac").await?;
        let rate = crate::rate::RateWindows::new(store.clone());
        rate.start_flusher();
        Ok(AppState {
            inner: Arc::new(Inner {
                corpus: RwLock::new(Arc::new(corpus)),
                audit: Audit::start(store.clone(), opts.audit_queue_capacity),
                store,
                signer: CursorSigner::new(&secret),
                trust_forwarded_for: opts.trust_forwarded_for,
                public_requests_per_minute: opts.public_requests_per_minute,
                discovery: crate::discovery::Cache::default(),
                rate,
                keys: crate::key_cache::KeyCache::new(crate::key_cache::TTL),
            }),
        })
    }

    /// The corpus version being served now. A request keeps the snapshot it started with.
    pub fn corpus(&self) -> Arc<Corpus> {
        self.inner.corpus.read().expect("corpus lock").clone()
    }

    /// Atomically serves a new corpus; in-flight requests finish on the one they hold.
    pub fn swap_corpus(&self, corpus: Corpus) {
        *self.inner.corpus.write().expect("corpus lock") = Arc::new(corpus);
    }

    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.inner.store
    }

    pub fn signer(&self) -> &CursorSigner {
        &self.inner.signer
    }

    pub fn audit(&self) -> &Audit {
        &self.inner.audit
    }

    /// Writes the rate-limit counts this replica holds to the state store (the flusher does
    /// this every 250 ms; shutdown and tests call it directly).
    pub async fn flush_rate_windows(&self) -> crate::error::Result<()> {
        self.inner.rate.flush().await
    }

    /// Requests per minute one client address may make to the public rate-limited routes.
    pub fn public_requests_per_minute(&self) -> u32 {
        self.inner.public_requests_per_minute
    }

    /// The description and its renderings for `corpus` (made once per corpus version).
    pub fn discovery(&self, corpus: &Corpus) -> Arc<crate::discovery::Rendered> {
        self.inner.discovery.get(corpus)
    }
}

/// Per-request context, inserted by the `context` middleware.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub request_id: String,
    pub corpus: Arc<Corpus>,
}

/// The authenticated caller of a keyed route.
#[derive(Debug, Clone)]
pub struct Caller {
    pub key: KeyRecord,
    pub user: User,
}

/// How a successful answer may be cached; set by handlers as a response extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheKind {
    /// A cut strictly in the past: immutable for this corpus version.
    Historical,
    /// A cut at or after now, or no cut: may change as time passes.
    Live,
}

impl CacheKind {
    pub fn for_cut(as_of: Option<Instant>) -> Self {
        match as_of {
            Some(t) if t < Instant::now() => CacheKind::Historical,
            _ => CacheKind::Live,
        }
    }
}

/// Marks a response body as a JSON envelope (gets ETag and the JSON-route headers).
#[derive(Debug, Clone, Copy)]
pub struct JsonEnvelope;

/// Marks a discovery document (description, `/docs`, `/llms.txt`): not an envelope, but it
/// gets an ETag, 304s, `X-Corpus-Version` (the version it was made for) and public caching.
#[derive(Debug, Clone, Copy)]
pub struct Document;

/// Marks an answer that can change while the corpus version stays the same (audit log, keys):
/// its ETag is derived from the body bytes instead of the corpus version and request.
#[derive(Debug, Clone, Copy)]
pub struct BodyEtag;

pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub const X_CORPUS_VERSION: HeaderName = HeaderName::from_static("x-corpus-version");

/// Serializes an envelope (one trailing newline) into a response with its cache kind.
pub fn envelope_response<E: Serialize>(status: StatusCode, env: &E, cache: CacheKind) -> Response {
    let mut body = serde_json::to_vec(env).expect("envelope serializes");
    body.push(b'\n');
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

/// A GET route that also answers `OPTIONS` with its own methods.
pub fn get_route<H, T>(handler: H) -> MethodRouter<AppState>
where
    H: axum::handler::Handler<T, AppState>,
    T: 'static,
{
    get(handler).options(|| async {
        (
            StatusCode::NO_CONTENT,
            [(header::ALLOW, "GET, HEAD, OPTIONS")],
        )
    })
}

/// The whole application: routes plus the middleware stack.
pub fn app(state: AppState) -> Router {
    let routes = crate::routes::router()
        .fallback(|| async {
            ApiError::NotFound(
                "no such route; see /v1/openapi.json for the routes this service offers".into(),
            )
        })
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(middleware::from_fn_with_state(state.clone(), context))
        .with_state(state);
    Router::new()
        .merge(routes)
        .layer(middleware::from_fn(trailing_slash))
        .layer(
            tower_http::cors::CorsLayer::new()
                .allow_origin(tower_http::cors::Any)
                .allow_methods([Method::GET, Method::HEAD, Method::OPTIONS, Method::POST])
                .allow_headers([
                    header::AUTHORIZATION,
                    header::IF_NONE_MATCH,
                    header::CONTENT_TYPE,
                    X_REQUEST_ID,
                    HeaderName::from_static(AUDIT_HEADER),
                    HeaderName::from_static("mcp-session-id"),
                    HeaderName::from_static("mcp-protocol-version"),
                ])
                .expose_headers([
                    X_REQUEST_ID,
                    X_CORPUS_VERSION,
                    header::ETAG,
                    HeaderName::from_static("x-ratelimit-limit"),
                    HeaderName::from_static("x-ratelimit-remaining"),
                    HeaderName::from_static("x-ratelimit-reset"),
                    header::RETRY_AFTER,
                    HeaderName::from_static(DROPPED_HEADER),
                    HeaderName::from_static(crate::audit::NEXT_CURSOR_HEADER),
                    HeaderName::from_static("mcp-session-id"),
                ]),
        )
        .layer(middleware::from_fn(plain_options))
        .layer(
            tower_http::trace::TraceLayer::new_for_http().make_span_with(|r: &Request| {
                // Path only: query strings never reach the logs, and neither do headers (keys).
                tracing::info_span!("request", method = %r.method(), path = %r.uri().path())
            }),
        )
}

/// A plain `OPTIONS` (not a CORS preflight) reports the route's own methods in `Allow`.
/// It runs outside the CORS layer, which would otherwise answer every `OPTIONS` itself.
async fn plain_options(req: Request, next: Next) -> Response {
    if req.method() == Method::OPTIONS
        && !req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        let path = req.uri().path();
        let allow = if path == "/mcp" {
            Some("POST, OPTIONS")
        } else {
            crate::routes::is_route(path).then_some("GET, HEAD, OPTIONS")
        };
        if let Some(allow) = allow {
            return (StatusCode::NO_CONTENT, [(header::ALLOW, allow)]).into_response();
        }
    }
    next.run(req).await
}

/// `/v1/...` with a trailing slash → 301 to the slashless path, query kept.
async fn trailing_slash(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path.starts_with("/v1/") && path.len() > 4 && path.ends_with('/') {
        let mut to = path.trim_end_matches('/').to_owned();
        if let Some(q) = req.uri().query() {
            to.push('?');
            to.push_str(q);
        }
        return (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, to)]).into_response();
    }
    next.run(req).await
}

fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .map_or_else(
            || uuid::Uuid::new_v4().to_string(),
            |u| u.hyphenated().to_string(),
        )
}

/// Whether a request asks for an audit receipt.
fn audit_requested(headers: &HeaderMap) -> bool {
    headers
        .get(AUDIT_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(wants_receipt)
}

/// Request id, corpus snapshot, everything every JSON response carries, and audit receipts.
async fn context(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let ctx = Ctx {
        request_id: request_id(req.headers()),
        corpus: state.corpus(),
    };
    req.extensions_mut().insert(ctx.clone());
    let wants_audit = audit_requested(req.headers());
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let if_none_match = req.headers().get(header::IF_NONE_MATCH).cloned();
    let res = next.run(req).await;
    let res = finish(&ctx, &method, &path, query.as_deref(), if_none_match, res).await;
    if wants_audit {
        audit_step(&state, &ctx, &method, &path, query.as_deref(), res).await
    } else {
        res
    }
}

/// Error envelopes, request id, corpus version, Cache-Control, ETag and 304.
async fn finish(
    ctx: &Ctx,
    method: &Method,
    path: &str,
    query: Option<&str>,
    if_none_match: Option<HeaderValue>,
    mut res: Response,
) -> Response {
    let is_sample = path.starts_with("/v1/sample/");
    // 405 from the router (wrong method on a known path) becomes an envelope too.
    if res.status() == StatusCode::METHOD_NOT_ALLOWED
        && res.extensions().get::<ApiError>().is_none()
    {
        let allow = res
            .headers()
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("GET, HEAD, OPTIONS")
            .to_owned();
        res.extensions_mut()
            .insert(ApiError::MethodNotAllowed { allow });
    }
    if let Some(err) = res.extensions().get::<ApiError>().cloned() {
        let kept: Vec<(HeaderName, HeaderValue)> = res
            .headers()
            .iter()
            .filter(|(k, _)| k.as_str().starts_with("x-ratelimit-"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let caller = res.extensions().get::<Caller>().cloned();
        res = error_response(ctx, &err, is_sample);
        res.headers_mut().extend(kept);
        if let Some(c) = caller {
            res.extensions_mut().insert(c);
        }
    }
    res.headers_mut().insert(
        &X_REQUEST_ID,
        HeaderValue::from_str(&ctx.request_id).expect("uuid is a header value"),
    );
    let document = res.extensions().get::<Document>().is_some();
    if res.extensions().get::<JsonEnvelope>().is_none() && !document {
        return res;
    }
    res.headers_mut().insert(
        &X_CORPUS_VERSION,
        HeaderValue::from_str(ctx.corpus.version()).expect("version is a header value"),
    );
    if res.status() != StatusCode::OK {
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return res;
    }
    let visibility = if is_sample || document {
        "public"
    } else {
        "private"
    };
    let cache = match res.extensions().get::<CacheKind>() {
        Some(CacheKind::Historical) => format!("{visibility}, max-age=300"),
        _ => format!("{visibility}, max-age=0, must-revalidate"),
    };
    let etag_basis = if res.extensions().get::<BodyEtag>().is_some() {
        let (parts, body) = res.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        let basis = Sha256::digest(&bytes).to_vec();
        res = Response::from_parts(parts, axum::body::Body::from(bytes));
        basis
    } else {
        format!(
            "{}\n{} {}?{}",
            ctx.corpus.version(),
            method,
            path,
            query.unwrap_or("")
        )
        .into_bytes()
    };
    let etag = format!("\"{}\"", &hex::encode(Sha256::digest(&etag_basis))[..40]);
    let h = res.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_str(&cache).expect("ascii"),
    );
    h.insert(header::ETAG, HeaderValue::from_str(&etag).expect("ascii"));
    if if_none_match
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        let mut not_modified = StatusCode::NOT_MODIFIED.into_response();
        for (k, v) in res.headers().iter().filter(|(k, _)| {
            [
                header::ETAG,
                header::CACHE_CONTROL,
                X_REQUEST_ID,
                X_CORPUS_VERSION,
            ]
            .contains(k)
                || k.as_str().starts_with("x-ratelimit-")
        }) {
            not_modified.headers_mut().insert(k.clone(), v.clone());
        }
        if let Some(c) = res.extensions().get::<Caller>().cloned() {
            not_modified.extensions_mut().insert(c);
        }
        return not_modified;
    }
    res
}

/// Decides whether a response that asked for a receipt gets one, queues it (never waiting),
/// and adds `X-Service-Audit-Dropped`. The receipt hashes the exact body bytes sent.
async fn audit_step(
    state: &AppState,
    ctx: &Ctx,
    method: &Method,
    path: &str,
    query: Option<&str>,
    res: Response,
) -> Response {
    let audit = state.audit();
    audit.count_requested();
    let caller = res.extensions().get::<Caller>().cloned();
    let skip = if !path.starts_with("/v1/") || access_for(path) == access_for("/v1/audit-log") {
        Some(Skip::OutOfScope)
    } else {
        // Non-JSON replies (the description, SSE), 304 and HEAD carry no envelope bytes to
        // hash, whoever the caller.
        let no_envelope = res.extensions().get::<JsonEnvelope>().is_none()
            || res.status() == StatusCode::NOT_MODIFIED
            || *method == Method::HEAD;
        match &caller {
            _ if no_envelope => Some(Skip::Skipped),
            None => Some(Skip::Unattributed),
            Some(c) if c.user.plan < Plan::Desk => Some(Skip::PlanRequired),
            Some(_) => None,
        }
    };
    let mut res = match (skip, caller) {
        (None, Some(caller)) => {
            let (parts, body) = res.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            let corpus_version = parts
                .headers
                .get(&X_CORPUS_VERSION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or(ctx.corpus.version())
                .to_owned();
            audit.offer(StoredReceipt {
                user_id: caller.user.id,
                key_id: caller.key.id,
                ts_ms: Instant::now().micros().div_euclid(1000),
                route: format!("{method} {path}"),
                params_digest: crate::audit::params_digest(query),
                corpus_version,
                envelope_sha256: hex::encode(Sha256::digest(&bytes)),
                request_id: ctx.request_id.clone(),
            });
            Response::from_parts(parts, axum::body::Body::from(bytes))
        }
        (why, _) => {
            audit.count_skip(why.unwrap_or(Skip::Unattributed));
            res
        }
    };
    res.headers_mut()
        .insert(DROPPED_HEADER, HeaderValue::from(audit.dropped()));
    res
}

/// Renders every error envelope (the one place errors become JSON).
pub fn error_response(ctx: &Ctx, err: &ApiError, sample: bool) -> Response {
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
    let env = ErrorEnvelope {
        request_id: ctx.request_id.clone(),
        corpus_version: ctx.corpus.version().to_owned(),
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
    };
    let mut r = envelope_response(err.status(), &env, CacheKind::Live);
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    match err {
        ApiError::MethodNotAllowed { allow } => {
            h.insert(
                header::ALLOW,
                HeaderValue::from_str(allow)
                    .unwrap_or(HeaderValue::from_static("GET, HEAD, OPTIONS")),
            );
        }
        ApiError::RateLimited { retry_after } => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        _ => {}
    }
    r
}

fn client_addr(req: &Request, trust_forwarded_for: bool) -> String {
    if trust_forwarded_for
        && let Some(first) = req
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.split(',').next())
    {
        return first.trim().to_owned();
    }
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(|| "local".to_owned(), |c| c.0.ip().to_string())
}

/// Credentials, plan gate and rate limit.
async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let access = access_for(&path);
    let now = Instant::now();
    let window = now.micros().div_euclid(60_000_000) * 60_000_000;
    // The key a receipt is attributed to; public routes attribute one only when asked to audit.
    let mut attributed: Option<Caller> = None;
    let (bucket, limit) = match access {
        None => return next.run(req).await,
        Some(Access::Public) => {
            if audit_requested(req.headers()) && req.headers().contains_key(header::AUTHORIZATION) {
                attributed = authenticate(&state, req.headers(), now).await.ok();
            }
            (
                format!("ip:{}", client_addr(&req, state.inner.trust_forwarded_for)),
                state.inner.public_requests_per_minute,
            )
        }
        Some(Access::Key(min_plan)) => {
            let caller = match authenticate(&state, req.headers(), now).await {
                Ok(c) => c,
                Err(e) => return e.into_response(),
            };
            if caller.user.plan < min_plan {
                let mut res = ApiError::Forbidden(format!(
                    "this route needs the {min_plan} plan or higher; the key's plan is {}",
                    caller.user.plan
                ))
                .into_response();
                res.extensions_mut().insert(caller);
                return res;
            }
            let b = format!("key:{}", caller.key.id);
            let l = caller.user.plan.requests_per_minute();
            req.extensions_mut().insert(caller.clone());
            attributed = Some(caller);
            (b, l)
        }
    };
    let count = match state.inner.rate.hit(&bucket, window, limit).await {
        Ok(c) => c,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let reset_secs = (window + 60_000_000) / 1_000_000;
    let remaining = i64::from(limit).saturating_sub(count).max(0);
    let mut res = if count > i64::from(limit) {
        let retry_after = (reset_secs - now.micros().div_euclid(1_000_000)).max(1) as u64;
        ApiError::RateLimited { retry_after }.into_response()
    } else {
        next.run(req).await
    };
    if let Some(c) = attributed {
        res.extensions_mut().insert(c);
    }
    let h = res.headers_mut();
    h.insert("x-ratelimit-limit", HeaderValue::from(limit));
    h.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    h.insert("x-ratelimit-reset", HeaderValue::from(reset_secs));
    res
}

/// Resolves `Authorization: Bearer svc_live_...` to a live key and its owner.
pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    now: Instant,
) -> Result<Caller, ApiError> {
    let raw = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| {
            ApiError::Unauthenticated(
                "missing credential: send Authorization: Bearer svc_live_<key>".into(),
            )
        })?
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| k.starts_with(crate::state_store::KEY_PREFIX))
        .ok_or_else(|| {
            ApiError::Unauthenticated(
                "malformed credential: expected Authorization: Bearer svc_live_<key>".into(),
            )
        })?;
    let (key, user) = state
        .inner
        .keys
        .get(state.store().as_ref(), &hash_key(raw))
        .await?
        .ok_or_else(|| ApiError::Unauthenticated("unknown API key".into()))?;
    if key.revoked_at.is_some() {
        return Err(ApiError::Unauthenticated("this API key was revoked".into()));
    }
    if key.expires_at.is_some_and(|e| e <= now) {
        return Err(ApiError::Unauthenticated("this API key has expired".into()));
    }
    Ok(Caller { key, user })
}
