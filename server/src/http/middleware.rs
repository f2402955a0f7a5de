//! The shared request path: what every request passes through around its route, as two
//! hand-written services (assembled in `crate::app`).
//!
//! Outermost first: [`Outer`] (request id → trace span → metrics and access log,
//! `crate::http::observe` → plain `OPTIONS` → CORS: preflights by tower-http's layer, the
//! headers of every other answer as that layer gives them, [`CorsHeaders`]) → [`Inner`] (trailing-slash redirect →
//! context: corpus snapshot, then on the way out the response's headers and caching,
//! `crate::http::caching`, and audit receipts, `crate::http::receipts` → size limits,
//! `crate::http::limits` → request timeout) → the router → the route's own guard
//! (`crate::http::guard`: credential, plan, rate limit, rate-limit headers) → the handler.
//!
//! Why two services and not a `middleware::from_fn` per concern: a `from_fn` layer clones the
//! whole stack beneath it, boxes the clone and boxes its future on every request, so with six
//! of them the layering cost more than the work it wrapped (issue 65's profile in
//! BENCHMARKS.md). These call their inner service in `call` itself (it is always ready: CORS
//! and a `Router` are) and box one future each; the order and the work are the layers' own.
//!
//! The guard is applied per route with that route's declared access, so no table of path
//! prefixes can drift from the routes; it leaves the route's `RouteInfo` and the attributed
//! caller in the response's extensions for the context step, which hashes the exact body bytes
//! of a receipted answer after every header is final.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use futures::future::BoxFuture;
use tower::{Layer, Service};
use tower_http::cors::{Cors, CorsLayer};
use tracing::Instrument;

use crate::http::response::X_REQUEST_ID;
use crate::http::state::{AppState, Ctx};

/// Request id, trace span, metrics and access log, plain `OPTIONS`, CORS: the outer band.
/// The state is the route table's `(path pattern, Allow)` pairs and the CORS layer.
///
/// CORS is tower-http's, asked once: a preflight (an `OPTIONS` that names the method it wants)
/// goes through the layer as it is, and every other request gets the headers the layer gave
/// a simple request when the application was built ([`CorsHeaders`]), added the way the layer
/// adds them. That answer does not depend on the request (any origin, never credentials), and
/// taking it from the layer keeps one source for it, where asking the layer per request built
/// and hashed a header map of its own for every answer.
#[derive(Clone)]
pub struct Outer<S> {
    allows: Arc<Vec<(String, String)>>,
    inner: S,
    preflight: Cors<S>,
    cors: Arc<CorsHeaders>,
}

impl<S: Clone> Outer<S> {
    pub fn new(allows: Arc<Vec<(String, String)>>, cors: CorsLayer, inner: S) -> Self {
        Outer {
            allows,
            preflight: cors.layer(inner.clone()),
            cors: Arc::new(CorsHeaders::of(&cors)),
            inner,
        }
    }
}

/// What the CORS layer adds to the answer of a request that is not a preflight: `Vary`
/// (appended to any the route set) and the rest (replacing any of the same name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsHeaders {
    vary: Vec<HeaderValue>,
    rest: Vec<(HeaderName, HeaderValue)>,
}

impl CorsHeaders {
    /// The headers `layer` adds to a simple cross-origin `GET`, read off the layer itself.
    pub fn of(layer: &CorsLayer) -> Self {
        let bare = tower::service_fn(|_: Request| async {
            Ok::<_, Infallible>(Response::new(axum::body::Body::empty()))
        });
        let probe = axum::http::Request::get("/")
            .header(header::ORIGIN, "https://example.com")
            .body(axum::body::Body::empty())
            .expect("a valid request");
        let res = layer
            .layer(bare)
            .call(probe)
            .now_or_never()
            .expect("the CORS layer answers at once")
            .unwrap_or_else(|never| match never {});
        let mut vary = Vec::new();
        let mut rest = Vec::new();
        for (name, value) in res.headers() {
            if name == header::VARY {
                vary.push(value.clone());
            } else {
                rest.push((name.clone(), value.clone()));
            }
        }
        CorsHeaders { vary, rest }
    }

    /// Adds them to `res` as the layer would.
    fn apply(&self, res: &mut Response) {
        let h = res.headers_mut();
        for v in &self.vary {
            h.append(header::VARY, v.clone());
        }
        for (name, value) in &self.rest {
            h.insert(name, value.clone());
        }
    }
}

impl<S> Service<Request> for Outer<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let started = std::time::Instant::now();
        // The id first, outside the span, so the span (and every line logged while the
        // request is served) carries the id the client sees.
        let id = settle_request_id(&mut req);
        // The request's span: path only (query strings never reach the logs, and neither do
        // headers: keys).
        // The targets are those of the layers this replaced (the span was made in `app`, the
        // events by tower-http's `TraceLayer`), so operators' log filters keep working.
        let span = tracing::info_span!(
            target: "asof_server::app",
            "request",
            request_id = %id,
            method = %req.method(),
            path = %req.uri().path(),
        );
        let method = crate::obs::method_label(req.method().as_str());
        let answer = {
            let _entered = span.enter();
            tracing::debug!(target: "tower_http::trace::on_request", "started processing request");
            match plain_options(&self.allows, &req) {
                Some(res) => Answer::Ready(res),
                None if req.method() == Method::OPTIONS => {
                    Answer::Preflight(self.preflight.call(req))
                }
                None => Answer::Inner(self.inner.call(req), self.cors.clone()),
            }
        };
        Box::pin(
            async move {
                let res = match answer {
                    Answer::Ready(res) => res,
                    Answer::Preflight(fut) => match fut.await {
                        Ok(res) => res,
                        Err(never) => match never {},
                    },
                    Answer::Inner(fut, cors) => {
                        let mut res = match fut.await {
                            Ok(res) => res,
                            Err(never) => match never {},
                        };
                        cors.apply(&mut res);
                        res
                    }
                };
                trace_response(&res, started.elapsed());
                // Inside the span, so the access line carries the request id; around
                // everything else, so the latency is the whole answer's.
                crate::http::observe::record(started, method, &res);
                Ok(res)
            }
            .instrument(span),
        )
    }
}

/// Where an outer-band request's answer comes from.
enum Answer<F, P> {
    /// Answered here (a plain `OPTIONS`).
    Ready(Response),
    /// A CORS preflight, answered by the CORS layer.
    Preflight(P),
    /// Every other request: the inner band, then the CORS headers.
    Inner(F, Arc<CorsHeaders>),
}

/// What tower-http's `TraceLayer` logged of a response: its status and latency at debug, and
/// a server error at error.
fn trace_response(res: &Response, latency: Duration) {
    let ms = latency.as_millis();
    tracing::debug!(
        target: "tower_http::trace::on_response",
        latency = %format_args!("{ms} ms"),
        status = res.status().as_u16(),
        "finished processing request"
    );
    if res.status().is_server_error() {
        tracing::error!(
            target: "tower_http::trace::on_failure",
            latency = %format_args!("{ms} ms"),
            classification = %format_args!("Status code: {}", res.status()),
            "response failed"
        );
    }
}

/// Trailing-slash redirect, context (corpus snapshot; headers, caching and receipts on the way
/// out), size limits, request timeout, then the router: the inner band, inside CORS.
#[derive(Clone)]
pub struct Inner<X> {
    state: AppState,
    router: axum::Router,
    timeout: Duration,
    /// A value handed as an extension to the requests of the one path that reads it (the MCP
    /// endpoint's dispatch, which the application places), and that path; `None` in the copy
    /// the dispatch sends its tool calls through. Only there: a copy and a box on every other
    /// request would be work nobody reads.
    extension: Option<(X, &'static str)>,
}

impl<X> Inner<X> {
    pub fn new(
        state: AppState,
        router: axum::Router,
        extension: Option<(X, &'static str)>,
    ) -> Self {
        let timeout = state.options().request_timeout;
        Inner {
            state,
            router,
            timeout,
            extension,
        }
    }
}

impl<X: Clone + Send + Sync + 'static> Service<Request> for Inner<X> {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // A `Router` is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        if let Some(res) = trailing_slash(&req) {
            return Box::pin(std::future::ready(Ok(res)));
        }
        // The id the outer band settled, as text for the handlers and as the header value
        // the answer carries (a copy of the request's, not a second one made from the text).
        let id_header = req.headers().get(&X_REQUEST_ID).cloned();
        let ctx = Ctx {
            request_id: request_id_of(req.headers()),
            corpus: self.state.corpus(),
        };
        req.extensions_mut().insert(ctx.clone());
        if let Some((x, path)) = &self.extension
            && req.uri().path() == *path
        {
            req.extensions_mut().insert(x.clone());
        }
        // A malformed value is refused by the guard, after the rate limit counted the request.
        let wants_audit = crate::http::receipts::audit_requested(req.headers()).unwrap_or(false);
        let method = req.method().clone();
        let uri = req.uri().clone();
        let if_none_match = req.headers().get(header::IF_NONE_MATCH).cloned();
        // A head past the size limits never reaches a route (nor its credential check).
        let answer = match crate::http::limits::fault(&req) {
            Some(e) => Err(e.into_response()),
            None => Ok(tokio::time::timeout(self.timeout, self.router.call(req))),
        };
        let state = self.state.clone();
        Box::pin(async move {
            let res = match answer {
                Err(res) => res,
                Ok(timed) => match timed.await {
                    Ok(Ok(res)) => res,
                    Ok(Err(never)) => match never {},
                    // A bare 503, as tower-http's timeout layer answered: `finish` turns it
                    // into the `timeout` envelope.
                    Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                },
            };
            let asked = Asked {
                method,
                uri,
                if_none_match,
                id_header,
                wants_audit,
            };
            Ok(finish(&state, ctx, asked, res).await)
        })
    }
}

/// What the context step keeps of a request for its answer.
struct Asked {
    method: Method,
    uri: Uri,
    if_none_match: Option<HeaderValue>,
    /// The request's `X-Request-Id` as the outer band settled it.
    id_header: Option<HeaderValue>,
    wants_audit: bool,
}

/// The context step on the way out: the version that answered, every header and the caching
/// of a JSON answer, and its receipt when one was asked for.
async fn finish(state: &AppState, ctx: Ctx, asked: Asked, res: Response) -> Response {
    // A pinned request was answered by the version it named (the guard says which).
    let ctx = match res.extensions().get::<crate::http::state::Pinned>() {
        Some(p) => Ctx {
            corpus: p.0.clone(),
            ..ctx
        },
        None => ctx,
    };
    let (path, query) = (asked.uri.path(), asked.uri.query());
    let res = crate::http::caching::finish(
        state,
        &ctx,
        &asked.method,
        path,
        query,
        asked.if_none_match,
        asked.id_header,
        res,
    )
    .await;
    if asked.wants_audit {
        crate::http::receipts::audit_step(state, &ctx, &asked.method, path, query, res).await
    } else {
        res
    }
}

/// Gives every request its id before anything logs: the client's `X-Request-Id` when it is a
/// UUID, else a new one (tower-http's `SetRequestId` keeps any value a client sent, and this
/// one must be a UUID). Returns it.
fn settle_request_id(req: &mut Request) -> String {
    let id = req
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .unwrap_or_else(new_request_id);
    // Written into a buffer on the stack: `to_string` goes through the formatter.
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let id = id.hyphenated().encode_lower(&mut text);
    req.headers_mut().insert(
        &X_REQUEST_ID,
        HeaderValue::from_str(id).expect("uuid is a header value"),
    );
    id.to_owned()
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
    // The random bits from the thread's generator (seeded from the OS once): `Uuid::new_v4`
    // asks the kernel for them, a system call on every request.
    let mut bytes: [u8; 10] = rand::random();
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
fn plain_options(routes: &[(String, String)], req: &Request) -> Option<Response> {
    if req.method() != Method::OPTIONS
        || req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return None;
    }
    let (_, allow) = routes
        .iter()
        .find(|(pattern, _)| crate::http::route::path_matches(pattern, req.uri().path()))?;
    Some((StatusCode::NO_CONTENT, [(header::ALLOW, allow.clone())]).into_response())
}

/// `/v1/...` with a trailing slash → 301 to the slashless path, query kept.
fn trailing_slash(req: &Request) -> Option<Response> {
    let path = req.uri().path();
    if !(path.starts_with("/v1/") && path.len() > 4 && path.ends_with('/')) {
        return None;
    }
    let mut to = path.trim_end_matches('/').to_owned();
    if let Some(q) = req.uri().query() {
        to.push('?');
        to.push_str(q);
    }
    Some((StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, to)]).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The route's answer under the CORS headers, the way `layer` adds them and the way
    /// [`CorsHeaders`] does, for `req`.
    fn both_ways(layer: &CorsLayer, req: fn() -> Request) -> (HeaderMap, HeaderMap) {
        let route = tower::service_fn(|_: Request| async {
            let mut res = Response::new(axum::body::Body::empty());
            // A route's own `Vary` stays beside the layer's.
            res.headers_mut()
                .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
            res.headers_mut().insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("https://replaced.example"),
            );
            Ok::<_, Infallible>(res)
        });
        let by_layer = layer
            .clone()
            .layer(route.clone())
            .call(req())
            .now_or_never()
            .unwrap()
            .unwrap();
        let mut by_us = route.clone().call(req()).now_or_never().unwrap().unwrap();
        CorsHeaders::of(layer).apply(&mut by_us);
        (by_layer.headers().clone(), by_us.headers().clone())
    }

    #[test]
    fn the_cors_headers_of_a_request_that_is_not_a_preflight_are_the_layers_own() {
        let layer = crate::app::cors();
        let requests: [fn() -> Request; 3] = [
            || {
                axum::http::Request::get("/v1/news")
                    .body(axum::body::Body::empty())
                    .unwrap()
            },
            || {
                axum::http::Request::get("/health")
                    .header(header::ORIGIN, "https://someone.example")
                    .body(axum::body::Body::empty())
                    .unwrap()
            },
            || {
                axum::http::Request::post("/v1/keys")
                    .header(header::ORIGIN, "null")
                    .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "authorization")
                    .body(axum::body::Body::empty())
                    .unwrap()
            },
        ];
        for req in requests {
            let (by_layer, by_us) = both_ways(&layer, req);
            assert_eq!(by_us, by_layer);
            assert_eq!(by_us.get_all(header::VARY).iter().count(), 2);
            assert_eq!(by_us[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
            assert!(by_us.contains_key(header::ACCESS_CONTROL_EXPOSE_HEADERS));
        }
    }

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
