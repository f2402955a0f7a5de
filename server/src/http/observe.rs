//! The per-request metrics and access log: once the response head is ready, [`record`]
//! counts the request by route entry, method, status class and plan, records its latency,
//! counts error envelopes by code, and logs one `asof::access` line (route, status, latency,
//! key id, corpus version; the request id comes from the enclosing span).
//!
//! It reads only what inner layers left in the response's extensions ([`RouteInfo`],
//! [`Caller`], the [`ApiError`] an envelope was rendered from), never the path or query as sent, so no label or log field is
//! something a client chose. The key id is the key's public id; the key itself never reaches a
//! log line or a label.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use metrics::{Counter, Histogram};

use axum::response::Response;

use crate::error::ApiError;
use crate::http::Caller;
use crate::http::guard::PlanRefused;
use crate::http::response::X_CORPUS_VERSION;
use crate::http::route::RouteInfo;
use crate::obs;

/// Label of a request no route entry served (a 404, a wrong method, a plain `OPTIONS`).
const UNMATCHED: &str = "unmatched";

/// Counts and logs one answered request: `elapsed` since it arrived, `method` its label
/// (`crate::obs::method_label`), `res` the response as it leaves. Called by the shared path
/// (`crate::http::middleware::Shared`) inside the request's span, which reads the clock once
/// for this and its trace line.
pub fn record(elapsed: Duration, method: &'static str, res: &Response) {
    let route = res
        .extensions()
        .get::<RouteInfo>()
        .map_or(UNMATCHED, |r| r.path);
    let caller = res.extensions().get::<Caller>();
    let plan = caller.map_or("none", |c| c.user.plan.as_str());
    let status = res.status().as_u16();
    if obs::recording() {
        count(route, method, status, plan, elapsed, res);
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

/// The series of one request: its count and latency, and its error envelope's code.
fn count(
    route: &'static str,
    method: &'static str,
    status: u16,
    plan: &'static str,
    elapsed: Duration,
    res: &Response,
) {
    let class = obs::status_class(status);
    SERIES.with_borrow_mut(|s| {
        s.requests
            .entry(labels([route, method, class, plan]))
            .or_insert_with(|| {
                metrics::counter!(obs::HTTP_REQUESTS, "route" => route, "method" => method, "status_class" => class, "plan" => plan)
            })
            .increment(1);
        s.durations
            .entry(labels([route, method, "", ""]))
            .or_insert_with(|| {
                metrics::histogram!(obs::HTTP_DURATION, "route" => route, "method" => method)
            })
            .record(elapsed);
    });
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
}

/// A series' labels by where their text lives: every label of the per-request series is a
/// `&'static str` from a finite set (the route table's paths, `obs::method_label`,
/// `obs::status_class`, the plans), so the addresses name the series without reading or
/// hashing the text. Two copies of one text at two addresses are two entries holding handles
/// of the same series, which is still right.
fn labels(texts: [&'static str; 4]) -> [usize; 4] {
    texts.map(|t| t.as_ptr() as usize)
}

/// The handles of the per-request series this thread has recorded. A handle is the
/// recorder's own entry for its series (the Prometheus exporter never forgets a counter or a
/// histogram), so recording through it is an atomic add, where `counter!` with labels builds
/// the key (a vector), hashes every label and looks the key up in the registry on every
/// request. Per thread, so no lock is shared between the runtime's workers.
#[derive(Default)]
struct Series {
    requests: HashMap<[usize; 4], Counter>,
    durations: HashMap<[usize; 4], Histogram>,
}

thread_local! {
    static SERIES: RefCell<Series> = RefCell::new(Series::default());
}
