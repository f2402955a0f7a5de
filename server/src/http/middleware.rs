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
        .unwrap_or_else(new_request_id)
        .hyphenated()
        .to_string();
    req.headers_mut().insert(
        &X_REQUEST_ID,
        HeaderValue::from_str(&id).expect("uuid is a header value"),
    );
    next.run(req).await
}

/// A request id minted here: a version 7 UUID (its first 48 bits the Unix time in
/// milliseconds), whose next 12 bits count the ids this process minted in that millisecond,
/// so ids sort in the order they were minted. Audit receipts of a key are listed by
/// `(ts, request_id)`; with random ids, two requests served in one millisecond came back in
/// either order. Past 4,096 ids in a millisecond the time runs ahead of the clock by as many
/// milliseconds, never backwards.
pub fn new_request_id() -> uuid::Uuid {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// The last id's time and counter: milliseconds << 12 | counter.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut last = LAST.load(Ordering::Relaxed);
    let stamp = loop {
        let next = (now_ms << 12).max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    let (ms, counter) = (stamp >> 12, (stamp & 0xfff) as u16);
    let mut bytes = [0u8; 10];
    bytes.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[6..]);
    bytes[0] = (counter >> 8) as u8;
    bytes[1] = counter as u8;
    uuid::Builder::from_unix_timestamp_millis(ms, &bytes).into_uuid()
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
    // A pinned request was answered by the version it named (the guard says which).
    let ctx = match res.extensions().get::<crate::http::state::Pinned>() {
        Some(p) => Ctx {
            corpus: p.0.clone(),
            ..ctx
        },
        None => ctx,
    };
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

#[cfg(test)]
mod tests {
    use super::new_request_id;

    #[test]
    fn minted_request_ids_are_version_7_and_sort_in_minting_order_within_a_millisecond() {
        // Thousands within one millisecond: the counter, not the clock, orders them.
        let ids: Vec<uuid::Uuid> = (0..10_000).map(|_| new_request_id()).collect();
        assert!(ids.iter().all(|u| u.get_version_num() == 7));
        let text: Vec<String> = ids.iter().map(|u| u.hyphenated().to_string()).collect();
        assert!(
            text.windows(2).all(|w| w[0] < w[1]),
            "as strings too: the audit log orders by the id's text"
        );
        // From many threads at once: every id distinct.
        let all: std::collections::HashSet<uuid::Uuid> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..2_000).map(|_| new_request_id()).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert_eq!(all.len(), 16_000);
    }
}
