//! The per-request metrics and access log: once the response head is ready, [`record`]
//! counts the request by route entry, method, status class and plan, records its latency,
//! counts error envelopes by code, and logs one `asof::access` line (route, status, latency,
//! key id, corpus version; the request id comes from the enclosing span).
//!
//! It reads only what inner layers left in the response's extensions ([`RouteInfo`],
//! [`Caller`], the [`ApiError`] an envelope was rendered from), never the path or query as sent, so no label or log field is
//! something a client chose. The key id is the key's public id; the key itself never reaches a
//! log line or a label.

use std::time::Instant;

use axum::response::Response;

use crate::error::ApiError;
use crate::http::Caller;
use crate::http::guard::PlanRefused;
use crate::http::response::X_CORPUS_VERSION;
use crate::http::route::RouteInfo;
use crate::obs;

/// Label of a request no route entry served (a 404, a wrong method, a plain `OPTIONS`).
const UNMATCHED: &str = "unmatched";

/// Counts and logs one answered request: `started` when it arrived, `method` its label
/// (`crate::obs::method_label`), `res` the response as it leaves. Called by the shared path
/// (`crate::http::middleware::Outer`) inside the request's span.
pub fn record(started: Instant, method: &'static str, res: &Response) {
    let elapsed = started.elapsed();
    let route = res
        .extensions()
        .get::<RouteInfo>()
        .map_or(UNMATCHED, |r| r.path);
    let caller = res.extensions().get::<Caller>();
    let plan = caller.map_or("none", |c| c.user.plan.as_str());
    let status = res.status().as_u16();
    let class = obs::status_class(status);
    metrics::counter!(obs::HTTP_REQUESTS, "route" => route, "method" => method, "status_class" => class, "plan" => plan)
        .increment(1);
    metrics::histogram!(obs::HTTP_DURATION, "route" => route, "method" => method).record(elapsed);
    if let Some(code) = res.extensions().get::<ApiError>().map(ApiError::code) {
        metrics::counter!(obs::HTTP_ERRORS, "code" => code, "status_class" => class).increment(1);
        let refusal = match code {
            "rate_limited" => Some("rate_limited"),
            "unauthorized" => Some("unauthenticated"),
            "forbidden" if res.extensions().get::<PlanRefused>().is_some() => Some("plan"),
            _ => None,
        };
        if let Some(reason) = refusal {
            metrics::counter!(obs::HTTP_REFUSALS, "reason" => reason).increment(1);
        }
    }
    tracing::info!(
        target: "asof::access",
        route,
        method,
        status,
        latency_ms = elapsed.as_secs_f64() * 1e3,
        key_id = caller.map(|c| c.key.id.as_str()),
        corpus_version = res
            .headers()
            .get(&X_CORPUS_VERSION)
            .and_then(|v| v.to_str().ok()),
        "request"
    );
}
