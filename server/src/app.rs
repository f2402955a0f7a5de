//! The whole application: the route table turned into one axum `Router` with its middleware.
//!
//! Each entry of `crate::routes::TABLE` becomes its path's method router, with a 405 answer
//! naming the route's own methods and the route's `guard` (credential, plan, rate limit) as
//! a layer of its own; then the shared path wraps them all (see `crate::http::middleware`
//! for the order and why). The application is built once; the MCP endpoint re-dispatches
//! tool calls through this same value, handed to it as a request extension.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, Method, header};
use axum::response::Response;
use tower::Service;
use tower_http::cors::CorsLayer;

use crate::error::ApiError;
use crate::http::guard::{Guard, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET};
use crate::http::middleware::Shared;
use crate::http::response::{X_CORPUS_VERSION, X_REQUEST_ID};
use crate::http::route::RouteInfo;
use crate::http::state::AppState;
use crate::mcp::Dispatch;
use crate::routes::{TABLE, TOOLS};
use crate::state::audit::{AUDIT_HEADER, DROPPED_HEADER, NEXT_CURSOR_HEADER};

/// The whole application: the route table's router inside the shared path
/// (`crate::http::middleware`), a `tower::Service` of requests that is always ready and
/// never fails. Cloning it is cheap (shared handles).
#[derive(Clone)]
pub struct App(Shared<Dispatch>);

impl Service<Request> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = <Shared<Dispatch> as Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        self.0.call(req)
    }
}

/// The application for `state`: every route of the table behind the shared path.
pub fn app(state: AppState) -> App {
    let routes = routes(&state);
    let allows = Arc::new(
        crate::routes::paths()
            .iter()
            .map(|p| (p.clone(), allow_of(p)))
            .collect::<Vec<_>>(),
    );
    let assemble = |extension: Option<Dispatch>| {
        let extension = extension.map(|d| (d, crate::mcp::PATH));
        App(Shared::new(
            allows.clone(),
            cors(),
            state.clone(),
            routes.clone(),
            extension,
        ))
    };
    // The MCP endpoint re-dispatches tool calls through this same application (without the
    // dispatch itself: a tool call is never an MCP request).
    let stack = assemble(None);
    let dispatch = Dispatch::new(tower::util::BoxCloneSyncService::new(stack), TABLE, TOOLS);
    assemble(Some(dispatch))
}

/// The route table's router: one method router per path, each entry behind its guard.
fn routes(state: &AppState) -> Router {
    // One method router per path: a path may have several entries (`GET /v1/keys` takes a key
    // or the session, `POST /v1/keys` the session only), each behind its own guard. A method
    // the path does not have is a 405 naming every method it has, before any credential is
    // asked for: the method is wrong whoever sends it.
    let mut paths: Vec<(String, axum::routing::MethodRouter<AppState>)> = Vec::new();
    for (route, pattern) in TABLE.iter().zip(crate::routes::paths()) {
        let (_, described, method_router) = (route.endpoint)();
        let method_router =
            method_router.layer(Guard::new(state.clone(), RouteInfo::new(route, pattern)));
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
    routes
        .fallback(|| async {
            ApiError::not_found(
                "no such route; see /v1/openapi.json for the routes this service offers".into(),
            )
        })
        .with_state(state.clone())
}

/// Cross-origin reads with a key a page holds itself.
pub(crate) fn cors() -> CorsLayer {
    CorsLayer::new()
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
            X_RATELIMIT_LIMIT,
            X_RATELIMIT_REMAINING,
            X_RATELIMIT_RESET,
            header::RETRY_AFTER,
            HeaderName::from_static(DROPPED_HEADER),
            HeaderName::from_static(NEXT_CURSOR_HEADER),
            HeaderName::from_static("mcp-session-id"),
        ])
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
