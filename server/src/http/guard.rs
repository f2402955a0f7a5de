//! One route's gate, applied per route with its declared access: the client's address, the
//! credential (key, session, or none), the plan, the rate limit and its headers.

use std::net::SocketAddr;

use asof_engine::Instant;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::http::receipts::audit_requested;
use crate::http::route::{Access, RouteInfo};
use crate::http::state::{AppState, Caller, ClientAddr, Ctx, Pinned, Principal};
use crate::plan::Plan;
use crate::signin::session::{self, Session, same_origin};
use crate::state::hash_key;

/// The client's address: the socket peer, or behind `trusted_proxies` proxies (when
/// `--trust-forwarded-for`), the `X-Forwarded-For` entry that many places from the right.
///
/// Each proxy appends the address it received the request from, so the right-most entries are
/// written by proxies we run and everything to their left by whoever sent the request: taking
/// the left-most entry would let a client name any address it likes and escape every
/// per-address limit by rotating it. An entry that is not an IP address, or a list shorter
/// than the proxies (the request did not come through them), gives the socket peer.
pub(crate) fn client_addr(
    req: &Request,
    trust_forwarded_for: bool,
    trusted_proxies: usize,
) -> String {
    let peer = || {
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "local".to_owned(), |c| c.0.ip().to_string())
    };
    if !trust_forwarded_for || trusted_proxies == 0 {
        return peer();
    }
    // Several header fields are one list, in order.
    let entries: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .collect();
    entries
        .len()
        .checked_sub(trusted_proxies)
        .and_then(|i| entries[i].parse::<std::net::IpAddr>().ok())
        .map_or_else(peer, |ip| ip.to_string())
}

/// Marks a response refused because the key's plan is below the route's (the metrics count
/// plan refusals apart from other `forbidden` answers).
#[derive(Debug, Clone, Copy)]
pub struct PlanRefused;

/// One route's gate: credentials, plan and rate limit, by the route's declared access.
pub async fn guard(
    State((state, route)): State<(AppState, RouteInfo)>,
    req: Request,
    next: Next,
) -> Response {
    let mut res = gate(&state, route.access, route.pinned, req, next).await;
    res.extensions_mut().insert(route);
    res
}

async fn gate(
    state: &AppState,
    access: Access,
    pinned: bool,
    mut req: Request,
    next: Next,
) -> Response {
    let now = Instant::now();
    let window = now.micros().div_euclid(60_000_000) * 60_000_000;
    let client = client_addr(
        &req,
        state.options().trust_forwarded_for,
        state.options().trusted_proxies,
    );
    req.extensions_mut().insert(ClientAddr(client.clone()));
    // The version a pinned route's request names; none when it names none or one the route's
    // query parser refuses itself, with its own message (malformed, sent twice).
    let pin = pinned
        .then(|| asof_answer::versions::pin_of(req.uri().query()))
        .flatten();
    // The key a receipt is attributed to; public routes attribute one only when asked to audit.
    let mut attributed: Option<Caller> = None;
    let (bucket, limit) = match access {
        Access::Open => return next.run(req).await,
        Access::KeyOrSession if !req.headers().contains_key(header::AUTHORIZATION) => {
            let session = match signed_in(state, req.headers()).await {
                Ok(s) => s,
                Err(e) => return e.into_response(),
            };
            let b = format!("user:{}", session.user.id);
            let l = session.user.plan.requests_per_minute();
            req.extensions_mut().insert(Principal::Session(session));
            (b, l)
        }
        Access::Session => {
            let session = match signed_in(state, req.headers()).await {
                Ok(s) => s,
                Err(e) => return e.into_response(),
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
                match authenticate(state, req.headers(), now).await {
                    Ok(c) => attributed = Some(c),
                    Err(ApiError::Unauthenticated(why)) => {
                        return ApiError::Unauthenticated(format!(
                            "corpus_version on this route needs an API key ({why})"
                        ))
                        .into_response();
                    }
                    Err(e) => return e.into_response(),
                }
            } else if audit_requested(req.headers()).unwrap_or(false)
                && req.headers().contains_key(header::AUTHORIZATION)
            {
                attributed = authenticate(state, req.headers(), now).await.ok();
            }
            (format!("ip:{client}"), state.public_requests_per_minute())
        }
        Access::Signed => (
            format!("file-ip:{client}"),
            state.options().file_requests_per_minute,
        ),
        Access::Key(_) | Access::KeyOrSession => {
            let min_plan = match access {
                Access::Key(p) => p,
                _ => Plan::Researcher,
            };
            let caller = match authenticate(state, req.headers(), now).await {
                Ok(c) => c,
                Err(e) => return e.into_response(),
            };
            if caller.user.plan < min_plan {
                let mut res = ApiError::Forbidden(format!(
                    "this route needs the {min_plan} plan or higher; the key's plan is {}",
                    caller.user.plan
                ))
                .into_response();
                res.extensions_mut().insert(caller);
                res.extensions_mut().insert(PlanRefused);
                return res;
            }
            let b = format!("key:{}", caller.key.id);
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
            (_, Some(Principal::Session(s))) => Some((s.user.id.clone(), String::new())),
            (Some(c), _) if matches!(access, Access::Key(_) | Access::KeyOrSession) => {
                Some((c.user.id.clone(), c.key.id.clone()))
            }
            _ => None,
        };
        if let Some((user, key)) = who {
            let group = crate::state::usage::route_group(req.uri().path());
            state
                .usage()
                .count(&user, &key, &now.day().to_string(), &group);
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
    h.insert("x-ratelimit-limit", HeaderValue::from(limit));
    h.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    h.insert("x-ratelimit-reset", HeaderValue::from(reset_secs));
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

/// The signed-in session of a cookie-authenticated route: 401 without a live one.
async fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<Session, ApiError> {
    session::resolve(state.store().as_ref(), &state.options().sessions, headers)
        .await?
        .ok_or_else(|| {
            ApiError::Unauthenticated(
                "this route needs a signed-in session (the session cookie): sign in at /sign-in"
                    .into(),
            )
        })
}

/// Resolves `Authorization: Bearer svc_live_...` to a live key and its owner.
pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
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
    let (key, user) = state
        .keys()
        .get(state.store().as_ref(), &hash_key(raw))
        .await?
        .ok_or_else(|| ApiError::Unauthenticated("unknown API key".into()))?;
    if key.revoked_at.is_some() {
        return Err(ApiError::Unauthenticated("this API key was revoked".into()));
    }
    if key.expires_at.is_some_and(|e| e <= now) {
        return Err(ApiError::Unauthenticated("this API key has expired".into()));
    }
    Ok(Caller { key, user })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(forwarded: &[&str]) -> Request {
        let mut b = axum::http::Request::builder().uri("/v1/meta");
        for f in forwarded {
            b = b.header("x-forwarded-for", *f);
        }
        let mut r = b.body(axum::body::Body::empty()).unwrap();
        r.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 2], 40_000))));
        r
    }

    #[test]
    fn the_client_is_the_entry_the_trusted_proxies_wrote_never_one_the_client_wrote() {
        let spoofed = req(&["6.6.6.6, 198.51.100.1"]);
        assert_eq!(client_addr(&spoofed, true, 1), "198.51.100.1");
        assert_eq!(client_addr(&spoofed, true, 2), "6.6.6.6");
        assert_eq!(
            client_addr(&spoofed, false, 1),
            "10.0.0.2",
            "untrusted: the peer"
        );
        // Several header fields are one list.
        assert_eq!(
            client_addr(&req(&["6.6.6.6", "198.51.100.1, 203.0.113.5"]), true, 2),
            "198.51.100.1"
        );
        // Fewer entries than proxies, or an entry that is no address: the peer.
        assert_eq!(client_addr(&req(&["198.51.100.1"]), true, 2), "10.0.0.2");
        assert_eq!(
            client_addr(&req(&["198.51.100.1, nonsense"]), true, 1),
            "10.0.0.2"
        );
        assert_eq!(client_addr(&req(&[]), true, 1), "10.0.0.2");
        assert_eq!(client_addr(&req(&["2001:db8::1"]), true, 1), "2001:db8::1");
    }
}
