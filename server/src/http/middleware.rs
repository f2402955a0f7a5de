//! The middleware every request passes through (assembled in `crate::app`).
//!
//! Layers, outermost first: request id → trace span → plain `OPTIONS` → CORS →
//! trailing-slash redirect → `context` (corpus snapshot, error envelopes,
//! `X-Request-Id`/`X-Corpus-Version`, ETag/304, `Cache-Control`, audit receipts) → request
//! timeout → the route's own `guard` (credential, plan, rate limit, rate-limit headers) → the
//! handler.
//!
//! `guard` is applied per route with that route's declared access, so no table of path
//! prefixes can drift from the routes; it leaves the route's [`RouteInfo`] and the attributed
//! caller in the response's extensions for `context`, which hashes the exact body bytes of a
//! receipted answer after every header is final.

use std::net::SocketAddr;
use std::sync::Arc;

use asof_engine::Instant;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::http::envelope::{CoverageBody, ErrorBody, ErrorEnvelope, Status};
use crate::http::response::{CacheKind, JsonEnvelope, envelope_response};
use crate::http::route::{Access, Kind, RouteInfo};
use crate::http::state::{AppState, Caller, ClientAddr, Ctx, Principal};
use crate::plan::Plan;
use crate::signin::session::{self, Session, same_origin};
use crate::state::audit::{AUDIT_HEADER, DROPPED_HEADER, Skip, wants_receipt};
use crate::state::{StoredReceipt, hash_key};

pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub const X_CORPUS_VERSION: HeaderName = HeaderName::from_static("x-corpus-version");

/// Gives every request its id before anything logs: the client's `X-Request-Id` when it is a
/// UUID, else a new one. It runs outside the trace layer so the span, and so every log line of
/// the request, carries the id the client sees (tower-http's `SetRequestId` keeps any value a
/// client sent, and this one must be a UUID).
pub async fn request_id(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .unwrap_or_else(uuid::Uuid::new_v4)
        .hyphenated()
        .to_string();
    req.headers_mut().insert(
        &X_REQUEST_ID,
        HeaderValue::from_str(&id).expect("uuid is a header value"),
    );
    next.run(req).await
}

/// The request id [`request_id`] settled on.
pub fn request_id_of(headers: &HeaderMap) -> String {
    headers
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// A plain `OPTIONS` (not a CORS preflight) reports the route's own methods in `Allow`.
/// It runs outside the CORS layer, which would otherwise answer every `OPTIONS` itself.
/// The state is the route table's `(path pattern, Allow)` pairs.
pub async fn plain_options(
    State(routes): State<Arc<Vec<(String, String)>>>,
    req: Request,
    next: Next,
) -> Response {
    if req.method() == Method::OPTIONS
        && !req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        && let Some((_, allow)) = routes
            .iter()
            .find(|(pattern, _)| crate::http::route::path_matches(pattern, req.uri().path()))
    {
        return (StatusCode::NO_CONTENT, [(header::ALLOW, allow.clone())]).into_response();
    }
    next.run(req).await
}

/// `/v1/...` with a trailing slash → 301 to the slashless path, query kept.
pub async fn trailing_slash(req: Request, next: Next) -> Response {
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

/// Whether a request asks for an audit receipt: `X-Service-Audit` absent or `off` is no, one
/// of `on`, `1`, `true`, `yes` (any case) is yes, anything else is refused naming the header
/// (a typo such as `X-Service-Audit: {}` must not silently go unreceipted).
fn audit_requested(headers: &HeaderMap) -> Result<bool, ApiError> {
    let Some(v) = headers.get(AUDIT_HEADER) else {
        return Ok(false);
    };
    let v = v.to_str().unwrap_or("");
    if wants_receipt(v) {
        Ok(true)
    } else if v.eq_ignore_ascii_case("off") {
        Ok(false)
    } else {
        Err(ApiError::invalid(
            "X-Service-Audit",
            "X-Service-Audit must be on, 1, true or yes (asks for a receipt) or off",
        ))
    }
}

/// Corpus snapshot, everything every JSON response carries, and audit receipts.
pub async fn context(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let ctx = Ctx {
        request_id: request_id_of(req.headers()),
        corpus: state.corpus(),
    };
    req.extensions_mut().insert(ctx.clone());
    // A malformed value is refused by the guard, after the rate limit counted the request.
    let wants_audit = audit_requested(req.headers()).unwrap_or(false);
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let if_none_match = req.headers().get(header::IF_NONE_MATCH).cloned();
    let res = next.run(req).await;
    let res = finish(
        &state,
        &ctx,
        &method,
        &path,
        query.as_deref(),
        if_none_match,
        res,
    )
    .await;
    if wants_audit {
        audit_step(&state, &ctx, &method, &path, query.as_deref(), res).await
    } else {
        res
    }
}

/// Error envelopes, request id, corpus version, Cache-Control, ETag and 304.
async fn finish(
    state: &AppState,
    ctx: &Ctx,
    method: &Method,
    path: &str,
    query: Option<&str>,
    if_none_match: Option<HeaderValue>,
    mut res: Response,
) -> Response {
    let route = res.extensions().get::<RouteInfo>().copied();
    let is_sample = route.is_some_and(|r| r.sample);
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
    // The timeout layer answers a bare 503 when the handler ran out of time.
    if res.status() == StatusCode::SERVICE_UNAVAILABLE
        && res.extensions().get::<ApiError>().is_none()
        && res.extensions().get::<JsonEnvelope>().is_none()
    {
        let after = state.options().request_timeout.as_secs().max(1);
        tracing::warn!(after_secs = after, "request timed out");
        res.extensions_mut()
            .insert(ApiError::Timeout { after_secs: after });
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
        if let Some(r) = route {
            res.extensions_mut().insert(r);
        }
    }
    res.headers_mut().insert(
        &X_REQUEST_ID,
        HeaderValue::from_str(&ctx.request_id).expect("uuid is a header value"),
    );
    let kind = route.map(|r| r.kind);
    let document = kind == Some(Kind::Document);
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
        Some(CacheKind::NoStore) => "no-store".to_owned(),
        _ => format!("{visibility}, max-age=0, must-revalidate"),
    };
    let etag_basis = if matches!(kind, Some(Kind::Document | Kind::LiveEnvelope)) {
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
        if let Some(r) = route {
            not_modified.extensions_mut().insert(r);
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
    // The route's entry says (`Route::receipts`); an unknown `/v1` path (404) is in scope:
    // it is answered, just not by a route.
    let in_scope = res
        .extensions()
        .get::<RouteInfo>()
        .map_or(path.starts_with("/v1/"), |r| r.receipts);
    let skip = if !in_scope {
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
                params_digest: crate::state::audit::params_digest(query),
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

/// The error envelope of `err` (the one place errors become JSON).
pub fn error_envelope(ctx: &Ctx, err: &ApiError, sample: bool) -> ErrorEnvelope {
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
    }
}

/// Renders every error response: the envelope, `no-store`, and `Allow`/`Retry-After` where
/// the status calls for them.
pub fn error_response(ctx: &Ctx, err: &ApiError, sample: bool) -> Response {
    let env = error_envelope(ctx, err, sample);
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
        ApiError::RateLimited { retry_after }
        | ApiError::Overloaded { retry_after }
        | ApiError::VendorRateLimited { retry_after } => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        ApiError::ConnectorBusy { .. } => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(1));
        }
        ApiError::StateUnavailable | ApiError::StorageUnavailable => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(5));
        }
        ApiError::Timeout { .. } => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(1));
        }
        ApiError::TooManyStreams { .. } => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(5));
        }
        ApiError::MailUnavailable
        | ApiError::ProviderUnavailable(_)
        | ApiError::ProcessorUnavailable => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(60));
        }
        // Only an operator can change this; a day is as good a guess as any.
        ApiError::SignInNotConfigured(_)
        | ApiError::BillingNotConfigured(_)
        | ApiError::ConnectorNotConfigured(_) => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(86_400));
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

/// The client's address: the socket peer, or behind `trusted_proxies` proxies (when
/// `--trust-forwarded-for`), the `X-Forwarded-For` entry that many places from the right.
///
/// Each proxy appends the address it received the request from, so the right-most entries are
/// written by proxies we run and everything to their left by whoever sent the request: taking
/// the left-most entry would let a client name any address it likes and escape every
/// per-address limit by rotating it. An entry that is not an IP address, or a list shorter
/// than the proxies (the request did not come through them), gives the socket peer.
pub(crate) fn client_addr(
    req: &Request,
    trust_forwarded_for: bool,
    trusted_proxies: usize,
) -> String {
    let peer = || {
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "local".to_owned(), |c| c.0.ip().to_string())
    };
    if !trust_forwarded_for || trusted_proxies == 0 {
        return peer();
    }
    // Several header fields are one list, in order.
    let entries: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .collect();
    entries
        .len()
        .checked_sub(trusted_proxies)
        .and_then(|i| entries[i].parse::<std::net::IpAddr>().ok())
        .map_or_else(peer, |ip| ip.to_string())
}

/// One route's gate: credentials, plan and rate limit, by the route's declared access.
pub async fn guard(
    State((state, route)): State<(AppState, RouteInfo)>,
    req: Request,
    next: Next,
) -> Response {
    let mut res = gate(&state, route.access, req, next).await;
    res.extensions_mut().insert(route);
    res
}

async fn gate(state: &AppState, access: Access, mut req: Request, next: Next) -> Response {
    let now = Instant::now();
    let window = now.micros().div_euclid(60_000_000) * 60_000_000;
    let client = client_addr(
        &req,
        state.options().trust_forwarded_for,
        state.options().trusted_proxies,
    );
    req.extensions_mut().insert(ClientAddr(client.clone()));
    // The key a receipt is attributed to; public routes attribute one only when asked to audit.
    let mut attributed: Option<Caller> = None;
    let (bucket, limit) = match access {
        Access::Open => return next.run(req).await,
        Access::KeyOrSession if !req.headers().contains_key(header::AUTHORIZATION) => {
            let session = match signed_in(state, req.headers()).await {
                Ok(s) => s,
                Err(e) => return e.into_response(),
            };
            let b = format!("user:{}", session.user.id);
            let l = session.user.plan.requests_per_minute();
            req.extensions_mut().insert(Principal::Session(session));
            (b, l)
        }
        Access::Session => {
            let session = match signed_in(state, req.headers()).await {
                Ok(s) => s,
                Err(e) => return e.into_response(),
            };
            if req.method() != Method::GET
                && req.method() != Method::HEAD
                && let Err(e) = same_origin(req.headers(), state.options().public_url.as_deref())
            {
                return e.into_response();
            }
            let b = format!("user:{}", session.user.id);
            let l = session.user.plan.requests_per_minute();
            req.extensions_mut()
                .insert(Principal::Session(session.clone()));
            req.extensions_mut().insert(session);
            (b, l)
        }
        Access::Public => {
            if audit_requested(req.headers()).unwrap_or(false)
                && req.headers().contains_key(header::AUTHORIZATION)
            {
                attributed = authenticate(state, req.headers(), now).await.ok();
            }
            (format!("ip:{client}"), state.public_requests_per_minute())
        }
        Access::Signed => (
            format!("file-ip:{client}"),
            state.options().file_requests_per_minute,
        ),
        Access::Key(_) | Access::KeyOrSession => {
            let min_plan = match access {
                Access::Key(p) => p,
                _ => Plan::Researcher,
            };
            let caller = match authenticate(state, req.headers(), now).await {
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
            if access == Access::KeyOrSession {
                req.extensions_mut().insert(Principal::Key(caller.clone()));
            }
            attributed = Some(caller);
            (b, l)
        }
    };
    let count = match state.rate().hit(&bucket, window, limit).await {
        Ok(c) => c,
        // Public routes (the sample, discovery, signed files) need no account: with the state
        // store unreachable they keep answering, limited per replica in memory. Keyed routes
        // cannot check their key and answer 503 state_unavailable.
        Err(crate::error::Error::Store(e))
            if matches!(access, Access::Public | Access::Signed)
                && crate::error::store_unreachable(&e) =>
        {
            state.rate().hit_local(&bucket, window)
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    let reset_secs = (window + 60_000_000) / 1_000_000;
    let remaining = i64::from(limit).saturating_sub(count).max(0);
    // Outside `/v1/` nothing is receipted and `X-Service-Audit` means nothing: refused only
    // inside it.
    let bad_audit_header = match audit_requested(req.headers()) {
        Err(e) if req.uri().path().starts_with("/v1/") => Some(e),
        _ => None,
    };
    let mut res = if count > i64::from(limit) {
        let retry_after = (reset_secs - now.micros().div_euclid(1_000_000)).max(1) as u64;
        ApiError::RateLimited { retry_after }.into_response()
    } else if let Some(e) = bad_audit_header {
        e.into_response()
    } else {
        // Usage per user and key (the account page's chart): every request a key or a
        // session made that the rate limit let through.
        let who = match (&attributed, req.extensions().get::<Principal>()) {
            (_, Some(Principal::Session(s))) => Some((s.user.id.clone(), String::new())),
            (Some(c), _) if matches!(access, Access::Key(_) | Access::KeyOrSession) => {
                Some((c.user.id.clone(), c.key.id.clone()))
            }
            _ => None,
        };
        if let Some((user, key)) = who {
            let group = crate::state::usage::route_group(req.uri().path());
            state
                .usage()
                .count(&user, &key, &now.day().to_string(), &group);
        }
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

/// The signed-in session of a cookie-authenticated route: 401 without a live one.
async fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<Session, ApiError> {
    session::resolve(state.store().as_ref(), &state.options().sessions, headers)
        .await?
        .ok_or_else(|| {
            ApiError::Unauthenticated(
                "this route needs a signed-in session (the session cookie): sign in at /sign-in"
                    .into(),
            )
        })
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
        .filter(|k| k.starts_with(crate::state::store::KEY_PREFIX))
        .ok_or_else(|| {
            ApiError::Unauthenticated(
                "malformed credential: expected Authorization: Bearer svc_live_<key>".into(),
            )
        })?;
    let (key, user) = state
        .keys()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn req(forwarded: &[&str]) -> Request {
        let mut b = axum::http::Request::builder().uri("/v1/meta");
        for f in forwarded {
            b = b.header("x-forwarded-for", *f);
        }
        let mut r = b.body(axum::body::Body::empty()).unwrap();
        r.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 2], 40_000))));
        r
    }

    #[test]
    fn the_client_is_the_entry_the_trusted_proxies_wrote_never_one_the_client_wrote() {
        let spoofed = req(&["6.6.6.6, 198.51.100.1"]);
        assert_eq!(client_addr(&spoofed, true, 1), "198.51.100.1");
        assert_eq!(client_addr(&spoofed, true, 2), "6.6.6.6");
        assert_eq!(
            client_addr(&spoofed, false, 1),
            "10.0.0.2",
            "untrusted: the peer"
        );
        // Several header fields are one list.
        assert_eq!(
            client_addr(&req(&["6.6.6.6", "198.51.100.1, 203.0.113.5"]), true, 2),
            "198.51.100.1"
        );
        // Fewer entries than proxies, or an entry that is no address: the peer.
        assert_eq!(client_addr(&req(&["198.51.100.1"]), true, 2), "10.0.0.2");
        assert_eq!(
            client_addr(&req(&["198.51.100.1, nonsense"]), true, 1),
            "10.0.0.2"
        );
        assert_eq!(client_addr(&req(&[]), true, 1), "10.0.0.2");
        assert_eq!(client_addr(&req(&["2001:db8::1"]), true, 1), "2001:db8::1");
    }
}
