//! The shared request path: what every request passes through around its route, as one
//! hand-written service, [`Shared`] (assembled in `crate::app`).
//!
//! In order: request id (`crate::http::request_id`) → trace span → metrics and access log,
//! `crate::http::observe` → plain `OPTIONS` → CORS (preflights by tower-http's layer, the
//! headers of every other answer as that layer gives them, [`CorsHeaders`]) → trailing-slash
//! redirect → context: corpus snapshot, then on the way out the response's headers and
//! caching, `crate::http::caching`, and audit receipts, `crate::http::receipts` → size limits,
//! `crate::http::limits` → request timeout → the router → the route's own guard
//! (`crate::http::guard`: credential, plan, rate limit, rate-limit headers) → the handler.
//!
//! Why one service and not a `middleware::from_fn` per concern: a `from_fn` layer clones the
//! whole stack beneath it, boxes the clone and boxes its future on every request, so with six
//! of them the layering cost more than the work it wrapped (issue 65's profile in
//! BENCHMARKS.md). Two services (an outer and an inner band) still boxed two futures and
//! handed the request id from one to the other as a request header; as one, the id is a local
//! and one future is boxed. The order and the work are the layers' own.
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
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use futures::future::BoxFuture;
use tower::{Layer, Service};
use tower_http::cors::{Cors, CorsLayer};
use tracing::Instrument;

use crate::http::request_id::RequestId;
use crate::http::state::{AppState, Ctx};

/// The shared path around the router: request id, trace span, metrics and access log, plain
/// `OPTIONS`, CORS, trailing-slash redirect, context (corpus snapshot; headers, caching and
/// receipts on the way out), size limits, request timeout.
///
/// CORS is tower-http's, asked once: a preflight (an `OPTIONS` that names the method it wants)
/// goes through the layer as it is, and every other request gets the headers the layer gave
/// a simple request when the application was built ([`CorsHeaders`]), added the way the layer
/// adds them. That answer does not depend on the request (any origin, never credentials), and
/// taking it from the layer keeps one source for it, where asking the layer per request built
/// and hashed a header map of its own for every answer.
#[derive(Clone)]
pub struct Shared<X> {
    /// The route table's `(path pattern, Allow)` pairs, for plain `OPTIONS`.
    allows: Arc<Vec<(String, String)>>,
    /// The CORS layer over the router, asked only for `OPTIONS` requests, which it answers
    /// itself (it never calls the router for one).
    preflight: Cors<axum::Router>,
    cors: Arc<CorsHeaders>,
    state: AppState,
    router: axum::Router,
    timeout: Duration,
    /// A value handed as an extension to the requests of the one path that reads it (the MCP
    /// endpoint's dispatch, which the application places), and that path; `None` in the copy
    /// the dispatch sends its tool calls through. Only there: a copy and a box on every other
    /// request would be work nobody reads.
    extension: Option<(X, &'static str)>,
}

impl<X> Shared<X> {
    pub fn new(
        allows: Arc<Vec<(String, String)>>,
        cors: CorsLayer,
        state: AppState,
        router: axum::Router,
        extension: Option<(X, &'static str)>,
    ) -> Self {
        let timeout = state.options().request_timeout;
        Shared {
            allows,
            preflight: cors.layer(router.clone()),
            cors: Arc::new(CorsHeaders::of(&cors)),
            state,
            router,
            timeout,
            extension,
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

impl<X: Clone + Send + Sync + 'static> Service<Request> for Shared<X> {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // A `Router` is always ready, and the CORS layer is as ready as it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let started = std::time::Instant::now();
        // The id first, outside the span, so the span (and every line logged while the
        // request is served) carries the id the client sees.
        let id = RequestId::of(req.headers());
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
                None => match trailing_slash(&req) {
                    Some(res) => Answer::Routed(Routed::Redirect(res)),
                    None => Answer::Routed(self.route(req, id, started)),
                },
            }
        };
        let cors = self.cors.clone();
        let state = self.state.clone();
        Box::pin(
            async move {
                let res = match answer {
                    Answer::Ready(res) => res,
                    Answer::Preflight(fut) => match fut.await {
                        Ok(res) => res,
                        Err(never) => match never {},
                    },
                    Answer::Routed(routed) => {
                        let mut res = routed.answer(&state).await;
                        cors.apply(&mut res);
                        res
                    }
                };
                let elapsed = started.elapsed();
                trace_response(&res, elapsed);
                // Inside the span, so the access line carries the request id; around
                // everything else, so the latency is the whole answer's.
                crate::http::observe::record(elapsed, method, &res);
                Ok(res)
            }
            .instrument(span),
        )
    }
}

impl<X: Clone + Send + Sync + 'static> Shared<X> {
    /// The context step on the way in (the request's context, the extension of its path),
    /// then the size limits, then the router under the request timeout, counted from
    /// `started` (the instant the shared path read anyway: one clock read a request fewer).
    fn route(&mut self, mut req: Request, id: RequestId, started: std::time::Instant) -> Routed {
        let ctx = Ctx {
            request_id: id,
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
        let asked = Asked {
            method: req.method().clone(),
            uri: req.uri().clone(),
            if_none_match: req.headers().get(header::IF_NONE_MATCH).cloned(),
            wants_audit,
        };
        // A head past the size limits never reaches a route (nor its credential check).
        let answer = match crate::http::limits::fault(&req) {
            Some(e) => Err(e.into_response()),
            // A timeout too long to add to an instant (an operator's "never") is tokio's to
            // cap, as `timeout` does.
            None => Ok(
                match tokio::time::Instant::from_std(started).checked_add(self.timeout) {
                    Some(deadline) => tokio::time::timeout_at(deadline, self.router.call(req)),
                    None => tokio::time::timeout(self.timeout, self.router.call(req)),
                },
            ),
        };
        Routed::Router { answer, ctx, asked }
    }
}

/// Where the shared path's answer comes from.
enum Answer<P> {
    /// Answered here (a plain `OPTIONS`).
    Ready(Response),
    /// A CORS preflight, answered by the CORS layer.
    Preflight(P),
    /// Every other request: the redirect or the router, then the CORS headers.
    Routed(Routed),
}

/// The answer of a request that is neither an `OPTIONS` nor answered before the context.
enum Routed {
    /// A trailing slash's redirect.
    Redirect(Response),
    /// The size limits' refusal or the router's answer under the timeout; then the context
    /// step on the way out.
    Router {
        answer: Result<tokio::time::Timeout<<axum::Router as Service<Request>>::Future>, Response>,
        ctx: Ctx,
        asked: Asked,
    },
}

impl Routed {
    async fn answer(self, state: &AppState) -> Response {
        let (answer, ctx, asked) = match self {
            Routed::Redirect(res) => return res,
            Routed::Router { answer, ctx, asked } => (answer, ctx, asked),
        };
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
        finish(state, ctx, asked, res).await
    }
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

/// What the context step keeps of a request for its answer.
struct Asked {
    method: Method,
    uri: Uri,
    if_none_match: Option<HeaderValue>,
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
        res,
    )
    .await;
    if asked.wants_audit {
        crate::http::receipts::audit_step(state, &ctx, &asked.method, path, query, res).await
    } else {
        res
    }
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
    use axum::http::HeaderMap;

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
}
