//! The middleware every request passes through (assembled in `crate::app`).
//!
//! Layers, outermost first: request id → trace span → metrics and access log
//! (`crate::ops::observe`) → plain `OPTIONS` → CORS →
//! trailing-slash redirect → `context` (corpus snapshot, then on the way out the response's
//! headers and caching, `crate::http::caching`, and audit receipts, `crate::http::receipts`)
//! → request timeout → the route's own guard (`crate::http::guard`: credential, plan, rate
//! limit, rate-limit headers) → the handler.
//!
//! The guard is applied per route with that route's declared access, so no table of path
//! prefixes can drift from the routes; it leaves the route's `RouteInfo` and the attributed
//! caller in the response's extensions for `context`, which hashes the exact body bytes of a
//! receipted answer after every header is final.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::response::X_REQUEST_ID;
use crate::http::state::{AppState, Ctx};

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

/// Corpus snapshot, everything every JSON response carries, and audit receipts.
pub async fn context(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let ctx = Ctx {
        request_id: request_id_of(req.headers()),
        corpus: state.corpus(),
    };
    req.extensions_mut().insert(ctx.clone());
    // A malformed value is refused by the guard, after the rate limit counted the request.
    let wants_audit = crate::http::receipts::audit_requested(req.headers()).unwrap_or(false);
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let if_none_match = req.headers().get(header::IF_NONE_MATCH).cloned();
    let res = next.run(req).await;
    let res = crate::http::caching::finish(
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
        crate::http::receipts::audit_step(&state, &ctx, &method, &path, query.as_deref(), res).await
    } else {
        res
    }
}
