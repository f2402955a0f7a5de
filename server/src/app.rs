//! The whole application: the route table turned into one axum `Router` with its middleware.
//!
//! Each entry of `crate::routes::TABLE` becomes its path's method router, with a 405 answer
//! naming the route's own methods and the route's `guard` (credential, plan, rate limit) as
//! a layer of its own; then the shared layers wrap them all (see `crate::http::middleware`
//! for the order and why). The router is built once; the MCP endpoint re-dispatches tool
//! calls through this same value, handed to it as a request extension.

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, Method, StatusCode, header};
use axum::middleware;

use crate::error::ApiError;
use crate::http::guard::guard;
use crate::http::middleware::{context, plain_options, request_id, request_id_of, trailing_slash};
use crate::http::response::{X_CORPUS_VERSION, X_REQUEST_ID};
use crate::http::route::RouteInfo;
use crate::http::state::AppState;
use crate::routes::{TABLE, TOOLS};
use crate::state::audit::{AUDIT_HEADER, DROPPED_HEADER, NEXT_CURSOR_HEADER};

/// The application for `state`: every route of the table behind the middleware stack.
pub fn app(state: AppState) -> Router {
    let stack = stack(state);
    let dispatch = crate::mcp::Dispatch::new(stack.clone(), TABLE, TOOLS);
    stack.layer(axum::Extension(dispatch))
}

fn stack(state: AppState) -> Router {
    // One method router per path: a path may have several entries (`GET /v1/keys` takes a key
    // or the session, `POST /v1/keys` the session only), each behind its own guard. A method
    // the path does not have is a 405 naming every method it has, before any credential is
    // asked for: the method is wrong whoever sends it.
    let mut paths: Vec<(String, axum::routing::MethodRouter<AppState>)> = Vec::new();
    for (route, pattern) in TABLE.iter().zip(crate::routes::paths()) {
        let (_, described, method_router) = (route.endpoint)();
        let method_router = method_router.layer(middleware::from_fn_with_state(
            (state.clone(), RouteInfo::new(route, pattern)),
            guard,
        ));
        for path in described.paths.keys() {
            match paths.iter_mut().find(|(p, _)| p == path) {
                Some((_, m)) => *m = std::mem::take(m).merge(method_router.clone()),
                None => paths.push((path.clone(), method_router.clone())),
            }
        }
    }
    let mut routes = Router::new();
    for (path, method_router) in paths {
        let allow = allow_of(&path);
        routes = routes.route(
            &path,
            method_router.fallback(move || {
                let allow = allow.clone();
                async move { ApiError::MethodNotAllowed { allow } }
            }),
        );
    }
    let timeout = state.options().request_timeout;
    let routes = routes
        .fallback(|| async {
            ApiError::not_found(
                "no such route; see /v1/openapi.json for the routes this service offers".into(),
            )
        })
        // A bare 503 when a handler runs out of time; `context` turns it into the envelope.
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            timeout,
        ))
        // Heads past the size limits stop here, inside `context` (which renders the
        // envelope) and before any route's guard.
        .layer(middleware::from_fn(crate::http::limits::check))
        .layer(middleware::from_fn_with_state(state.clone(), context))
        .with_state(state);
    let allows = Arc::new(
        crate::routes::paths()
            .iter()
            .map(|p| (p.clone(), allow_of(p)))
            .collect::<Vec<_>>(),
    );
    Router::new()
        .merge(routes)
        .layer(middleware::from_fn(trailing_slash))
        .layer(
            tower_http::cors::CorsLayer::new()
                .allow_origin(tower_http::cors::Any)
                // Never `allow_credentials`: another site's script cannot call the service with
                // a visitor's session cookie, only with a key it holds itself.
                .allow_methods([
                    Method::GET,
                    Method::HEAD,
                    Method::OPTIONS,
                    Method::POST,
                    Method::DELETE,
                ])
                .allow_headers([
                    header::AUTHORIZATION,
                    header::IF_NONE_MATCH,
                    header::CONTENT_TYPE,
                    // Parquet readers in a browser (DuckDB-Wasm) read file URLs by range.
                    header::RANGE,
                    header::IF_RANGE,
                    X_REQUEST_ID,
                    HeaderName::from_static(AUDIT_HEADER),
                    HeaderName::from_static("mcp-session-id"),
                    HeaderName::from_static("mcp-protocol-version"),
                    HeaderName::from_static("x-vendor-key"),
                ])
                .expose_headers([
                    X_REQUEST_ID,
                    X_CORPUS_VERSION,
                    header::ETAG,
                    header::CONTENT_RANGE,
                    header::CONTENT_LENGTH,
                    header::ACCEPT_RANGES,
                    HeaderName::from_static("x-ratelimit-limit"),
                    HeaderName::from_static("x-ratelimit-remaining"),
                    HeaderName::from_static("x-ratelimit-reset"),
                    header::RETRY_AFTER,
                    HeaderName::from_static(DROPPED_HEADER),
                    HeaderName::from_static(NEXT_CURSOR_HEADER),
                    HeaderName::from_static("mcp-session-id"),
                ]),
        )
        .layer(middleware::from_fn_with_state(allows, plain_options))
        // Inside the request's span, so the access line carries its request id; outside
        // everything else, so the latency is the whole answer's.
        .layer(middleware::from_fn(crate::ops::observe::observe))
        .layer(
            tower_http::trace::TraceLayer::new_for_http().make_span_with(|r: &Request| {
                // The request id is in every line logged while the request is served. Path
                // only: query strings never reach the logs, and neither do headers (keys).
                tracing::info_span!(
                    "request",
                    request_id = %request_id_of(r.headers()),
                    method = %r.method(),
                    path = %r.uri().path(),
                )
            }),
        )
        .layer(middleware::from_fn(request_id))
}

/// The value of `Allow` on `path`: the methods of every entry serving it, `HEAD` with `GET`,
/// and `OPTIONS`.
///
/// Entries are matched on the paths the table computed once (`routes::paths`): asking each
/// entry for its path builds its description, and doing so for every entry per path made
/// building the router quadratic in the routes (most of a second in a debug build, which
/// every oneshot test paid per request).
pub fn allow_of(path: &str) -> String {
    let mut names: Vec<&str> = Vec::new();
    let entries = TABLE.iter().zip(crate::routes::paths());
    for (r, _) in entries.filter(|(_, p)| *p == path) {
        for m in r.methods() {
            names.push(m);
            if m == "GET" {
                names.push("HEAD");
            }
        }
    }
    names.push("OPTIONS");
    names.join(", ")
}
