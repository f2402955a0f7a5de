//! Audit receipts on the way out: whether a request asked for one (`X-Service-Audit`),
//! whether its answer gets one, and the receipt of the exact body bytes sent, queued without
//! waiting.

use asof_engine::Instant;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::http::response::JsonEnvelope;
use crate::http::response::X_CORPUS_VERSION;
use crate::http::route::RouteInfo;
use crate::http::state::{AppState, Caller, Ctx};
use crate::plan::Plan;
use crate::state::StoredReceipt;
use crate::state::audit::{AUDIT_HEADER, DROPPED_HEADER, Skip, wants_receipt};

/// Whether a request asks for an audit receipt: `X-Service-Audit` absent or `off` is no, one
/// of `on`, `1`, `true`, `yes` (any case) is yes, anything else is refused naming the header
/// (a typo such as `X-Service-Audit: {}` must not silently go unreceipted).
pub(crate) fn audit_requested(headers: &HeaderMap) -> Result<bool, ApiError> {
    // A name made once: a `&str` name is parsed and checked on every lookup.
    const AUDIT: HeaderName = HeaderName::from_static(AUDIT_HEADER);
    let Some(v) = headers.get(AUDIT) else {
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

/// Decides whether a response that asked for a receipt gets one, queues it (never waiting),
/// and adds `X-Service-Audit-Dropped`. The receipt hashes the exact body bytes sent.
pub(crate) async fn audit_step(
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
                user_id: caller.user.id.clone(),
                key_id: caller.key.id.clone(),
                ts_ms: Instant::now().micros().div_euclid(1000),
                route: format!("{method} {path}"),
                params_digest: crate::state::audit::params_digest(query),
                corpus_version,
                envelope_sha256: hex::encode(Sha256::digest(&bytes)),
                request_id: ctx.request_id.to_string(),
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
