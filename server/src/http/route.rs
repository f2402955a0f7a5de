//! One route, declared once: who may call it, how its answers are cached and receipted, and
//! its handler with the `#[utoipa::path]` annotation that gives its path, methods, typed
//! query and description.
//!
//! Everything else about a route is derived from its entry in `crate::routes::TABLE`: the
//! router and its `OPTIONS`/405 answers, the per-route guard (credential, plan, rate limit),
//! the OpenAPI operation and the shared conventions added to it, `/v1/meta`'s route lists and
//! the MCP tool input schemas. A route not in the table exists nowhere.

use axum::routing::MethodRouter;
use serde::Serialize;
use utoipa::openapi::RefOr;
use utoipa::openapi::path::{HttpMethod, Operation, Paths};
use utoipa::openapi::schema::Schema;

use crate::http::state::AppState;
use crate::plan::Plan;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// No credential and no rate limit: `/health` (load balancers poll it and it must never
    /// answer 429) and the description documents.
    Open,
    /// The MCP endpoint: a Bearer key optional (checked here; a refused one is the endpoint's
    /// to answer, as a JSON-RPC error). Each message is rate-limited per account with a
    /// valid key, else per client address, on budgets of their own; the tool calls a message
    /// makes are limited again as the routes they become.
    Rpc,
    /// No credential; rate-limited per client address.
    Public,
    /// A Bearer key of at least this plan; rate-limited per account (all its keys and its
    /// browser sessions share the plan's limit).
    Key(Plan),
    /// A Bearer key of any plan or the session cookie of a signed-in browser; rate-limited
    /// per account, whichever of its keys or sessions asks.
    KeyOrSession,
    /// The session cookie only (keys cannot manage keys); writes must come from this
    /// service's own pages (see `crate::signin::session::same_origin`). Rate-limited per user.
    Session,
    /// No credential but the signature in the URL itself (checked by the handler): signed
    /// file URLs. Rate-limited per client address on a budget of their own.
    Signed,
}

/// What a successful answer is, as far as the shared conventions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A JSON envelope whose ETag derives from the corpus version and the request: the same
    /// request on the same version always gets the same answer.
    Envelope,
    /// A JSON envelope that can change while the corpus version stays (keys, the audit log):
    /// its ETag derives from the body bytes.
    LiveEnvelope,
    /// A description document (OpenAPI, `/docs`, `/llms.txt`): not an envelope; a body ETag,
    /// `public` caching, 304s.
    Document,
    /// The MCP endpoint: JSON-RPC bodies and its own statuses.
    Rpc,
    /// A server-sent-event stream (`/v1/stream`): not an envelope, never cached or receipted;
    /// errors before it opens are envelopes.
    Stream,
    /// File bytes (a signed file URL): `Content-Length`, ranges, the file's sha256 as ETag;
    /// errors are envelopes, answers are not.
    Bytes,
    /// A Delta Sharing protocol answer (`/delta-sharing/`): the protocol's JSON or NDJSON,
    /// not an envelope, with `Delta-Table-Version` and `X-Corpus-Version`; never cached
    /// (file URLs in it expire); errors are envelopes.
    Protocol,
    /// A browser redirect (`302`, sign-in flows): never cached; errors before it (a sign-in
    /// way not configured) are envelopes.
    Redirect,
}

/// The handler side of an entry, as `utoipa_axum::routes!` builds it: the component schemas
/// its description refers to, its path item, and the axum method router.
pub type Endpoint = (Vec<(String, RefOr<Schema>)>, Paths, MethodRouter<AppState>);

/// One entry of the route table.
#[derive(Clone, Copy)]
pub struct Route {
    pub access: Access,
    pub kind: Kind,
    /// Whether an answer may carry a decision audit receipt (`X-Service-Audit`): every `/v1`
    /// route but those that read the audit log itself; nothing outside `/v1` (the discovery
    /// documents, the site, MCP, Delta Sharing, file bytes are marked `unreceipted`).
    pub receipts: bool,
    /// The public sample tier (`/v1/sample/*`): answers from the shipped sample, watermarked
    /// `sample: true`, publicly cacheable; its routes take the sample's one source and its
    /// example ids (the description's enums), and MCP tool calls without a key go to them.
    pub sample: bool,
    pub endpoint: fn() -> Endpoint,
    /// Also answered in-process, by the answer layer's `LocalApi` (the Python package's
    /// `asof.open()`): its table, `asof_answer::local::ROUTES`, holds exactly these entries'
    /// paths, in this order (a test holds the two equal).
    pub in_process: bool,
    /// The JSON schema of a request body the handler reads as a JSON value rather than
    /// through a typed body (rules utoipa's schema types cannot hold: `not`, `null`-only
    /// members, a value of any shape); the description gives it in place of the annotation's.
    pub body: Option<fn() -> serde_json::Value>,
    /// Takes `corpus_version` (an extension of the contract): the guard answers the request
    /// from that retained version instead of the served one (`asof_answer::versions`). The
    /// route's query struct declares the parameter, so the description and the MCP tool
    /// schemas show it.
    pub pinned: bool,
    /// A keyed route (`Access::Key`) that also takes the session cookie of a signed-in
    /// browser, when the request carries the cookie and no `Authorization` (the site's
    /// explorer reads the data routes without its script ever holding a key). The account's
    /// plan is checked as a key's would be and the same per-account limit applies. Reads
    /// only: the routes are GETs, the cookie is SameSite=Lax (never sent on another site's
    /// subresource requests) and CORS never allows credentials.
    pub browser: bool,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("path", &self.path())
            .field("access", &self.access)
            .finish()
    }
}

impl Route {
    /// A route any caller may use without a credential, rate-limited per address.
    pub const fn public(endpoint: fn() -> Endpoint) -> Self {
        Route {
            access: Access::Public,
            kind: Kind::Envelope,
            receipts: true,
            endpoint,
            sample: false,
            in_process: false,
            body: None,
            pinned: false,
            browser: false,
        }
    }

    /// A route needing a Bearer key of `plan` or higher.
    pub const fn key(plan: Plan, endpoint: fn() -> Endpoint) -> Self {
        Route {
            access: Access::Key(plan),
            kind: Kind::Envelope,
            receipts: true,
            endpoint,
            sample: false,
            in_process: false,
            body: None,
            pinned: false,
            browser: false,
        }
    }

    /// An account route taking a Bearer key or the session cookie.
    pub const fn key_or_session(endpoint: fn() -> Endpoint) -> Self {
        Route {
            access: Access::KeyOrSession,
            kind: Kind::LiveEnvelope,
            receipts: true,
            endpoint,
            sample: false,
            in_process: false,
            body: None,
            pinned: false,
            browser: false,
        }
    }

    /// An account route taking the session cookie only.
    pub const fn session(endpoint: fn() -> Endpoint) -> Self {
        Route {
            access: Access::Session,
            kind: Kind::LiveEnvelope,
            receipts: true,
            endpoint,
            sample: false,
            in_process: false,
            body: None,
            pinned: false,
            browser: false,
        }
    }

    /// A sign-in step a browser is redirected through: public, answered with a `302`.
    pub const fn redirect(endpoint: fn() -> Endpoint) -> Self {
        Route {
            access: Access::Public,
            kind: Kind::Redirect,
            receipts: false,
            endpoint,
            sample: false,
            in_process: false,
            body: None,
            pinned: false,
            browser: false,
        }
    }

    /// A route outside every gate (see [`Access::Open`]).
    pub const fn open(endpoint: fn() -> Endpoint) -> Self {
        Route {
            access: Access::Open,
            kind: Kind::Envelope,
            receipts: true,
            endpoint,
            sample: false,
            in_process: false,
            body: None,
            pinned: false,
            browser: false,
        }
    }

    /// The MCP endpoint (see [`Access::Rpc`]).
    pub const fn rpc(endpoint: fn() -> Endpoint) -> Self {
        Route {
            access: Access::Rpc,
            kind: Kind::Rpc,
            receipts: false,
            endpoint,
            sample: false,
            in_process: false,
            body: None,
            pinned: false,
            browser: false,
        }
    }

    /// A signed file URL (see [`Access::Signed`]): bytes, never receipted.
    pub const fn signed(endpoint: fn() -> Endpoint) -> Self {
        Route {
            access: Access::Signed,
            kind: Kind::Bytes,
            receipts: false,
            endpoint,
            sample: false,
            in_process: false,
            body: None,
            pinned: false,
            browser: false,
        }
    }

    pub const fn kind(self, kind: Kind) -> Self {
        Route { kind, ..self }
    }

    /// A route of the public sample tier (see [`Route::sample`]).
    pub const fn sample(self) -> Self {
        Route {
            sample: true,
            ..self
        }
    }

    /// The request body's schema, given by the module that reads it (see [`Route::body`]).
    pub const fn body(self, schema: fn() -> serde_json::Value) -> Self {
        Route {
            body: Some(schema),
            ..self
        }
    }

    /// Also answered in-process (see [`Route::in_process`]).
    pub const fn in_process(self) -> Self {
        Route {
            in_process: true,
            ..self
        }
    }

    /// Answers from a pinned `corpus_version` (see [`Route::pinned`]).
    pub const fn pinned(self) -> Self {
        Route {
            pinned: true,
            ..self
        }
    }

    /// Also takes a signed-in browser's session (see [`Route::browser`]).
    pub const fn browser(self) -> Self {
        Route {
            browser: true,
            ..self
        }
    }

    /// Answers are never receipted (the audit log's own routes).
    pub const fn unreceipted(self) -> Self {
        Route {
            receipts: false,
            ..self
        }
    }

    /// The path as axum matches it (`{id}` stands for one segment), from the annotation.
    pub fn path(&self) -> String {
        let (_, paths, _) = (self.endpoint)();
        paths.paths.keys().next().cloned().unwrap_or_default()
    }

    /// The methods the annotation declares, in their wire names.
    pub fn methods(&self) -> Vec<&'static str> {
        let (_, paths, _) = (self.endpoint)();
        let mut m = Vec::new();
        for item in paths.paths.values() {
            for (method, op) in [
                (HttpMethod::Get, &item.get),
                (HttpMethod::Post, &item.post),
                (HttpMethod::Put, &item.put),
                (HttpMethod::Delete, &item.delete),
                (HttpMethod::Patch, &item.patch),
            ] {
                if op.is_some() {
                    m.push(method_name(&method));
                }
            }
        }
        m
    }

    /// The value of `Allow` on this route: its methods, `HEAD` with `GET`, and `OPTIONS`.
    pub fn allow(&self) -> String {
        let mut names = Vec::new();
        for m in self.methods() {
            names.push(m);
            if m == "GET" {
                names.push("HEAD");
            }
        }
        names.push("OPTIONS");
        names.join(", ")
    }

    /// The OpenAPI operations of this route, by method.
    pub fn operations(&self) -> Vec<(&'static str, Operation)> {
        let (_, paths, _) = (self.endpoint)();
        let mut out = Vec::new();
        for item in paths.paths.into_values() {
            for (name, op) in [
                ("GET", item.get),
                ("POST", item.post),
                ("PUT", item.put),
                ("DELETE", item.delete),
                ("PATCH", item.patch),
            ] {
                if let Some(op) = op {
                    out.push((name, op));
                }
            }
        }
        out
    }

    /// Whether a request path matches this route.
    pub fn matches(&self, path: &str) -> bool {
        path_matches(&self.path(), path)
    }
}

/// Whether request `path` matches route `pattern` (`{x}` matches one non-empty segment).
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), path.split('/').collect());
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| (x.starts_with('{') && !y.is_empty()) || x == y)
}

fn method_name(m: &HttpMethod) -> &'static str {
    match m {
        HttpMethod::Get => "GET",
        HttpMethod::Post => "POST",
        HttpMethod::Put => "PUT",
        HttpMethod::Delete => "DELETE",
        HttpMethod::Patch => "PATCH",
        HttpMethod::Head => "HEAD",
        HttpMethod::Options => "OPTIONS",
        HttpMethod::Trace => "TRACE",
    }
}

/// What the per-route layer tells the outer middleware about the route that answered (a
/// response extension): `context` uses it for ETags, caching and receipts, and the metrics
/// layer names the route by its entry's path pattern (never the path as sent).
#[derive(Debug, Clone, Copy)]
pub struct RouteInfo {
    pub access: Access,
    pub kind: Kind,
    pub receipts: bool,
    pub sample: bool,
    pub pinned: bool,
    pub browser: bool,
    /// The entry's path pattern (`/v1/mapping/cik/{cik}`).
    pub path: &'static str,
}

impl RouteInfo {
    /// The entry `r`, whose path pattern is `path` (computed once per process by the table).
    pub fn new(r: &Route, path: &'static str) -> Self {
        RouteInfo {
            access: r.access,
            kind: r.kind,
            receipts: r.receipts,
            sample: r.sample,
            pinned: r.pinned,
            browser: r.browser,
            path,
        }
    }
}
