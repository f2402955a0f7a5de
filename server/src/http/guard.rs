//! One route's gate, applied per route with its declared access: the client's address, the
//! credential (key, session, or none), the plan, the rate limit and its headers.

use std::convert::Infallible;
use std::task::{Context, Poll};

use asof_engine::Instant;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use tower::{Layer, Service, ServiceExt};

use crate::error::ApiError;
use crate::http::client::{ClientAddr, X_FORWARDED_PROTO, client_of, from_proxy};
use crate::http::receipts::audit_requested;
use crate::http::route::{Access, RouteInfo};
use crate::http::state::{AppState, Caller, Ctx, Pinned, Principal, RefusedKey};
use crate::plan::Plan;
use crate::signin::session::{self, Session, same_origin};
use crate::state::hash_key;

/// The rate-limit fields of every rate-limited answer. Made once, at compile time: a name
/// given as `&str` is parsed and checked byte by byte on every insert (about 1,800
/// instructions a keyed request for the three).
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Marks a response refused because the key's plan is below the route's (the metrics count
/// plan refusals apart from other `forbidden` answers).
#[derive(Debug, Clone, Copy)]
pub struct PlanRefused;

/// One route's gate as a layer over its handler (`crate::app` applies one per route, with the
/// route's own access): credentials, plan and rate limit, by the route's declared access.
///
/// A hand-written service rather than `middleware::from_fn`, which on every request boxes a
/// copy of the handler, and a future for it, on top of the copy a gate must take.
#[derive(Clone)]
pub struct Guard {
    state: AppState,
    route: RouteInfo,
}

impl Guard {
    pub fn new(state: AppState, route: RouteInfo) -> Self {
        Guard { state, route }
    }
}

impl<S> Layer<S> for Guard {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded {
            state: self.state.clone(),
            route: self.route,
            inner,
        }
    }
}

/// A route's handler behind its [`Guard`].
#[derive(Clone)]
pub struct Guarded<S> {
    state: AppState,
    route: RouteInfo,
    inner: S,
}

impl<S> Service<Request> for Guarded<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let route = self.route;
        if route.access == Access::Open {
            // No credential, no limit, nothing counted per address (health, readiness, the
            // descriptions): the client's bucket is not worked out, nothing is awaited before
            // the handler, so the handler is called here, on the copy that was made ready,
            // and no copy is made.
            if !from_proxy(&req, &self.state.options().trusted_proxies) {
                req.headers_mut().remove(X_FORWARDED_PROTO);
            }
            let answer = self.inner.call(req);
            return Box::pin(async move {
                let mut res = match answer.await {
                    Ok(res) => res,
                    Err(never) => match never {},
                };
                res.extensions_mut().insert(route);
                Ok(res)
            });
        }
        // The handler runs after the gate's awaits, if at all: it takes the copy that was made
        // ready and leaves a fresh one here (tower's rule for a service called later).
        let fresh = self.inner.clone();
        let handler = std::mem::replace(&mut self.inner, fresh);
        let state = self.state.clone();
        Box::pin(async move {
            let mut res = gate(&state, route, req, Next(handler)).await;
            res.extensions_mut().insert(route);
            Ok(res)
        })
    }
}

/// The rest of the route (its handler), run once the gate lets a request through.
struct Next<S>(S);

impl<S: Service<Request, Response = Response, Error = Infallible>> Next<S> {
    async fn run(self, req: Request) -> Response {
        match self.0.oneshot(req).await {
            Ok(res) => res,
            Err(never) => match never {},
        }
    }
}

async fn gate<S>(state: &AppState, route: RouteInfo, mut req: Request, next: Next<S>) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let (access, pinned) = (route.access, route.pinned);
    let now = Instant::now();
    let window = now.micros().div_euclid(60_000_000) * 60_000_000;
    let client = client_of(
        &req,
        &state.options().trusted_proxies,
        state.options().ipv6_prefix,
    );
    if !client.via_proxy {
        // Only our proxies say which scheme the client used (signed URLs are built on it).
        req.headers_mut().remove(X_FORWARDED_PROTO);
    }
    req.extensions_mut().insert(client.clone());
    // The version a pinned route's request names; none when it names none or one the route's
    // query parser refuses itself, with its own message (malformed, sent twice).
    let pin = pinned
        .then(|| asof_answer::versions::pin_of(req.uri().query()))
        .flatten();
    // The key a receipt is attributed to; public routes attribute one only when asked to audit.
    let mut attributed: Option<Caller> = None;
    let (bucket, limit) = match access {
        Access::Open => unreachable!("open routes are answered in `Guarded::call`"),
        Access::KeyOrSession if !req.headers().contains_key(header::AUTHORIZATION) => {
            let session = match signed_in(state, req.headers(), &client).await {
                Ok(s) => s,
                Err(e) => return refused(state, e, now),
            };
            let b = format!("user:{}", session.user.id);
            let l = session.user.plan.requests_per_minute();
            req.extensions_mut().insert(Principal::Session(session));
            (b, l)
        }
        // A signed-in browser on a data route (the explorer): the account's plan and limit,
        // as its keys have them; no key is attributed, so nothing is receipted.
        Access::Key(min_plan)
            if route.browser
                && !req.headers().contains_key(header::AUTHORIZATION)
                && session::cookie_of(req.headers(), &state.options().sessions).is_some() =>
        {
            let session = match signed_in(state, req.headers(), &client).await {
                Ok(s) => s,
                Err(e) => return refused(state, e, now),
            };
            if session.user.plan < min_plan {
                return plan_refused(min_plan, session.user.plan, "the account's");
            }
            let b = format!("user:{}", session.user.id);
            let l = session.user.plan.requests_per_minute();
            req.extensions_mut().insert(Principal::Session(session));
            (b, l)
        }
        Access::Session => {
            let session = match signed_in(state, req.headers(), &client).await {
                Ok(s) => s,
                Err(e) => return refused(state, e, now),
            };
            if req.method() != Method::GET
                && req.method() != Method::HEAD
                && let Err(e) = same_origin(req.headers(), state.options().public_url.as_deref())
            {
                return e.into_response();
            }
            let b = format!("user:{}", session.user.id);
            let l = session.user.plan.requests_per_minute();
            req.extensions_mut()
                .insert(Principal::Session(session.clone()));
            req.extensions_mut().insert(session);
            (b, l)
        }
        Access::Public => {
            // A past version is loaded into memory for the request that names it: on a route
            // anyone may call, only a caller with a key may make this replica hold one.
            if pin.is_some() {
                match authenticate(state, req.headers(), &client, now).await {
                    Ok(c) => attributed = Some(c),
                    Err(ApiError::Unauthenticated(why)) => {
                        return ApiError::Unauthenticated(format!(
                            "corpus_version on this route needs an API key ({why})"
                        ))
                        .into_response();
                    }
                    Err(e) => return refused(state, e, now),
                }
            } else if audit_requested(req.headers()).unwrap_or(false)
                && req.headers().contains_key(header::AUTHORIZATION)
            {
                attributed = authenticate(state, req.headers(), &client, now).await.ok();
            }
            (
                format!("ip:{}", client.bucket),
                state.public_requests_per_minute(),
            )
        }
        Access::Signed => (
            format!("file-ip:{}", client.bucket),
            state.options().file_requests_per_minute,
        ),
        Access::Rpc => {
            // An MCP message with a key is limited as the key's account, one without as its
            // address, each on a budget of its own (`MCP_MESSAGES_PER_REQUEST` times the
            // plan's or the public limit): the tool calls it makes are limited again as the
            // routes they become, so this budget bounds the cheap messages around them
            // (initialize, tools/list, ping) and their bodies. A key refused here is the
            // endpoint's to answer (as a JSON-RPC error); the message then counts against
            // the address.
            let caller = if req.headers().contains_key(header::AUTHORIZATION) {
                match authenticate(state, req.headers(), &client, now).await {
                    Ok(c) => Some(c),
                    Err(e @ (ApiError::CredentialsRefused { .. } | ApiError::StateUnavailable)) => {
                        return refused(state, e, now);
                    }
                    Err(e) => {
                        req.extensions_mut().insert(RefusedKey(e.message()));
                        None
                    }
                }
            } else {
                None
            };
            match caller {
                Some(c) => {
                    let b = format!("mcp-user:{}", c.user.id);
                    let l =
                        c.user.plan.requests_per_minute() * crate::plan::MCP_MESSAGES_PER_REQUEST;
                    req.extensions_mut().insert(c);
                    (b, l)
                }
                None => (
                    format!("mcp-ip:{}", client.bucket),
                    state.public_requests_per_minute() * crate::plan::MCP_MESSAGES_PER_REQUEST,
                ),
            }
        }
        Access::Key(_) | Access::KeyOrSession => {
            let min_plan = match access {
                Access::Key(p) => p,
                _ => Plan::Researcher,
            };
            let caller = match authenticate(state, req.headers(), &client, now).await {
                Ok(c) => c,
                Err(e) => return refused(state, e, now),
            };
            if caller.user.plan < min_plan {
                let mut res = plan_refused(min_plan, caller.user.plan, "the key's");
                res.extensions_mut().insert(caller);
                return res;
            }
            // The plan's limit is the account's, whichever of its keys (or its browser
            // session) asks: more keys are not more requests.
            let b = format!("user:{}", caller.user.id);
            let l = caller.user.plan.requests_per_minute();
            req.extensions_mut().insert(caller.clone());
            if access == Access::KeyOrSession {
                req.extensions_mut().insert(Principal::Key(caller.clone()));
            }
            attributed = Some(caller);
            (b, l)
        }
    };
    let count = match state.rate().hit(&bucket, window, limit).await {
        Ok(c) => c,
        // Public routes (the sample, discovery, signed files) need no account: with the state
        // store unreachable they keep answering, limited per replica in memory. Keyed routes
        // cannot check their key and answer 503 state_unavailable.
        Err(crate::error::Error::Store(e))
            if matches!(access, Access::Public | Access::Signed)
                && crate::error::store_unreachable(&e) =>
        {
            state.rate().hit_local(&bucket, window)
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    let reset_secs = (window + 60_000_000) / 1_000_000;
    let remaining = i64::from(limit).saturating_sub(count).max(0);
    // Outside `/v1/` nothing is receipted and `X-Service-Audit` means nothing: refused only
    // inside it.
    let bad_audit_header = match audit_requested(req.headers()) {
        Err(e) if req.uri().path().starts_with("/v1/") => Some(e),
        _ => None,
    };
    let mut res = if count > i64::from(limit) {
        let retry_after = (reset_secs - now.micros().div_euclid(1_000_000)).max(1) as u64;
        ApiError::RateLimited { retry_after }.into_response()
    } else if let Some(e) = bad_audit_header {
        e.into_response()
    } else {
        // Usage per user and key (the account page's chart): every request a key or a
        // session made that the rate limit let through.
        let who = match (&attributed, req.extensions().get::<Principal>()) {
            (_, Some(Principal::Session(s))) => Some((s.user.id.as_str(), "")),
            (Some(c), _) if matches!(access, Access::Key(_) | Access::KeyOrSession) => {
                Some((c.user.id.as_str(), c.key.id.as_str()))
            }
            _ => None,
        };
        if let Some((user, key)) = who {
            let group = crate::state::usage::route_group(req.uri().path());
            state.usage().count(user, key, now.day(), group);
        }
        // The version is resolved after the credential and the rate limit: a caller who may
        // not ask, or has asked too often, never makes this replica read a manifest or load
        // a version.
        match pinned_to(state, pin.as_ref(), &mut req).await {
            Ok(None) => next.run(req).await,
            Ok(Some(p)) => {
                let mut res = next.run(req).await;
                res.extensions_mut().insert(p);
                res
            }
            Err(e) => e.into_response(),
        }
    };
    if let Some(c) = attributed {
        res.extensions_mut().insert(c);
    }
    let h = res.headers_mut();
    h.insert(X_RATELIMIT_LIMIT, HeaderValue::from(limit));
    h.insert(X_RATELIMIT_REMAINING, HeaderValue::from(remaining));
    h.insert(X_RATELIMIT_RESET, HeaderValue::from(reset_secs));
    res
}

/// `403` for a caller whose plan (`whose`: "the key's", "the account's") is below the
/// route's, marked for the metrics' count of plan refusals.
fn plan_refused(min_plan: Plan, plan: Plan, whose: &str) -> Response {
    let mut res = ApiError::Forbidden(format!(
        "this route needs the {min_plan} plan or higher; {whose} plan is {plan}"
    ))
    .into_response();
    res.extensions_mut().insert(PlanRefused);
    res
}

/// The version `pin` names (the request's `corpus_version`), made the request's corpus:
/// `None` without one (or naming the served one); the refusal when the version is unknown
/// or not retained.
async fn pinned_to(
    state: &AppState,
    pin: Option<&asof_answer::params::Pin>,
    req: &mut Request,
) -> Result<Option<Pinned>, ApiError> {
    let Some(version) = pin else {
        return Ok(None);
    };
    let Some(ctx) = req.extensions().get::<Ctx>().cloned() else {
        return Ok(None);
    };
    let corpus = state.versions().resolve(&ctx.corpus, Some(version)).await?;
    if corpus.version() == ctx.corpus.version() {
        return Ok(None);
    }
    req.extensions_mut().insert(Ctx {
        corpus: corpus.clone(),
        ..ctx
    });
    Ok(Some(Pinned(corpus)))
}

/// The answer to a refused credential: a `429` for too many refused ones carries the rate
/// limit headers every `429` does (the refusal limit, none left, its minute's end).
fn refused(state: &AppState, e: ApiError, now: Instant) -> Response {
    let limited = matches!(e, ApiError::CredentialsRefused { .. });
    let mut res = e.into_response();
    if limited {
        let reset = (now.micros().div_euclid(60_000_000) + 1) * 60;
        let h = res.headers_mut();
        h.insert(
            X_RATELIMIT_LIMIT,
            HeaderValue::from(state.options().bad_credentials_per_minute),
        );
        h.insert(X_RATELIMIT_REMAINING, HeaderValue::from(0));
        h.insert(X_RATELIMIT_RESET, HeaderValue::from(reset));
    }
    res
}

/// The signed-in session of a cookie-authenticated route: 401 without a live one. A cookie
/// the store answered unknown before is refused without a lookup (and counts nothing); one
/// refused after a lookup (unknown, ended, expired) counts against the client's address, and
/// an address past its refusal limit is answered `429` before its cookie is looked up.
async fn signed_in(
    state: &AppState,
    headers: &HeaderMap,
    client: &ClientAddr,
) -> Result<Session, ApiError> {
    let now = Instant::now();
    if let Some(id) = session::cookie_of(headers, &state.options().sessions) {
        if state.unknown_sessions().contains(&hash_key(&id)) {
            return Err(session::unknown());
        }
        if let Some(retry_after) = state.refusals().blocked(&client.bucket, now) {
            return Err(ApiError::CredentialsRefused { retry_after });
        }
    }
    let resolved = session::resolve(
        state.store().as_ref(),
        &state.options().sessions,
        headers,
        state.unknown_sessions(),
    )
    .await;
    if matches!(resolved, Err(ApiError::Unauthenticated(_))) {
        state.refusals().count(&client.bucket, now);
    }
    resolved?.ok_or_else(|| {
        ApiError::Unauthenticated(
            "this route needs a signed-in session (the session cookie): sign in at /sign-in".into(),
        )
    })
}

/// Resolves `Authorization: Bearer svc_live_...` to a live key and its owner.
///
/// A missing or malformed credential is refused for free. A well-formed one from an address
/// past its refusal limit is answered `429` without a lookup, unless it is a key this replica
/// has verified before (a real key: looked up as usual, so a valid user behind an abuser's
/// NAT keeps working). An unknown, revoked or expired key counts against the address
/// (`crate::state::refusals`); an unknown one is remembered, so repeating it costs no lookup.
pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    client: &ClientAddr,
    now: Instant,
) -> Result<Caller, ApiError> {
    let raw = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| {
            ApiError::Unauthenticated(
                "missing credential: send Authorization: Bearer svc_live_<key>".into(),
            )
        })?
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| k.starts_with(crate::state::store::KEY_PREFIX))
        .ok_or_else(|| {
            ApiError::Unauthenticated(
                "malformed credential: expected Authorization: Bearer svc_live_<key>".into(),
            )
        })?;
    let hash = hash_key(raw);
    // The usual request: a key verified within the cache's TTL, one lock and no store query.
    let found = match state.keys().fresh(&hash) {
        Some(k) => crate::state::key_cache::Found {
            key: Some(k),
            asked_store: false,
        },
        None => {
            // A key the store answered unknown lately is refused again for free, counting
            // nothing.
            if state.keys().known_unknown(&hash) {
                return Err(ApiError::Unauthenticated("unknown API key".into()));
            }
            if !state.keys().seen_valid(&hash)
                && let Some(retry_after) = state.refusals().blocked(&client.bucket, now)
            {
                return Err(ApiError::CredentialsRefused { retry_after });
            }
            state.keys().lookup(state.store().as_ref(), &hash).await?
        }
    };
    // A refusal counts against the address when it cost the store a query: repeating one
    // made-up key (remembered unknown) or a revoked one (cached) costs nothing and counts
    // nothing, so a client retrying its one mistyped key is never limited.
    let refused = |why: &str| {
        if found.asked_store {
            state.refusals().count(&client.bucket, now);
        }
        ApiError::Unauthenticated(why.into())
    };
    let Some((key, user)) = found.key.clone() else {
        return Err(refused("unknown API key"));
    };
    if key.revoked_at.is_some() {
        return Err(refused("this API key was revoked"));
    }
    if key.expires_at.is_some_and(|e| e <= now) {
        return Err(refused("this API key has expired"));
    }
    Ok(Caller { key, user })
}
