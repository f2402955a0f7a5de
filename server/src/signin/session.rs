//! Browser sessions: the session cookie, its lifetimes, the browser binding of sign-in
//! links, and the cross-site check that guards cookie-authenticated writes.
//!
//! The session cookie is `__Host-svc_session`: the prefix makes browsers refuse it unless it
//! is `Secure`, `Path=/` and has no `Domain`, so a sibling subdomain cannot plant a session
//! (login fixation) or shadow this one. Only a local plain-HTTP deployment
//! (`--insecure-cookies`, where browsers refuse `__Host-` cookies) uses the spec's bare
//! `svc_session`, and a server reads only the name it sets.
//!
//! The cookie holds 32 random bytes; the state store keeps only their sha256, so a copy of
//! the database signs nobody in. Every replica resolves a session from the shared store, so a
//! browser may land on any of them. A session ends at the first of: `POST /v1/auth/logout`,
//! [`SessionOptions::idle`] without a request, or [`SessionOptions::absolute`] after sign-in.

use std::time::Duration;

use asof_engine::Instant;
use axum::http::{HeaderMap, HeaderValue, header};
use rand::RngCore;

use crate::error::ApiError;
use crate::state::{StateStore, User, hash_key};

/// The session cookie's name wherever cookies are `Secure` (the default).
pub const COOKIE: &str = "__Host-svc_session";
/// The session cookie's name on a local plain-HTTP deployment (`--insecure-cookies`): the
/// spec's name, without the prefix browsers refuse over plain HTTP.
pub const PLAIN_COOKIE: &str = "svc_session";
/// The cookie binding sign-in links to the browser that asked for them (random, 32 bytes
/// hex; the store keeps its hash with each link), with the same prefix rule.
pub const BINDING_COOKIE: &str = "__Host-svc_signin";
/// [`BINDING_COOKIE`] on a local plain-HTTP deployment.
pub const PLAIN_BINDING_COOKIE: &str = "svc_signin";
/// The cookie carrying a provider sign-in flow from its start to its callback
/// (`crate::signin::oidc::Flow`), with the same prefix rule: a sibling subdomain can set
/// `svc_oauth` for the parent domain (planting its own flow to sign the victim into the
/// planter's account), never a `__Host-` cookie.
pub const FLOW_COOKIE: &str = "__Host-svc_oauth";
/// [`FLOW_COOKIE`] on a local plain-HTTP deployment.
pub const PLAIN_FLOW_COOKIE: &str = "svc_oauth";

/// How long sessions live and how their cookie is sent.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// A session unused this long has ended (default 24 hours).
    pub idle: Duration,
    /// A session ends this long after sign-in, however active (default 14 days).
    pub absolute: Duration,
    /// Send the cookie with `Secure` (default). Off only for a local plain-HTTP deployment,
    /// by `asof serve --insecure-cookies`: browsers drop `Secure` cookies set over plain HTTP
    /// on other hosts than localhost.
    pub secure: bool,
}

impl SessionOptions {
    /// The name of the session cookie this server sets and reads.
    pub fn cookie_name(&self) -> &'static str {
        if self.secure { COOKIE } else { PLAIN_COOKIE }
    }

    /// The name of the provider flow cookie this server sets and reads.
    pub fn flow_cookie_name(&self) -> &'static str {
        if self.secure {
            FLOW_COOKIE
        } else {
            PLAIN_FLOW_COOKIE
        }
    }

    /// The name of the sign-in binding cookie this server sets and reads.
    pub fn binding_cookie_name(&self) -> &'static str {
        if self.secure {
            BINDING_COOKIE
        } else {
            PLAIN_BINDING_COOKIE
        }
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            idle: Duration::from_secs(24 * 3600),
            absolute: Duration::from_secs(14 * 24 * 3600),
            secure: true,
        }
    }
}

/// Activity is written to the store at most this often per session (a page makes several
/// requests; the idle lifetime is counted in hours).
const TOUCH_EVERY: i64 = 60_000_000;

/// A signed-in browser: the user, and the session's id hash (what logout ends).
#[derive(Debug, Clone)]
pub struct Session {
    pub user: User,
    pub id_hash: String,
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX / 4)
}

/// The session cookie's value a request carries, if any (every `Cookie` header is read).
pub fn cookie_of(headers: &HeaderMap, opts: &SessionOptions) -> Option<String> {
    cookie(headers, opts.cookie_name())
}

/// The browser binding of a request (the value of its binding cookie), and the `Set-Cookie`
/// that gives it one when it has none yet. One binding serves every link the browser asks for
/// while the cookie lives ([`crate::signin::mail::LINK_TTL`], renewed at each ask).
pub fn binding(headers: &HeaderMap, opts: &SessionOptions) -> (String, HeaderValue) {
    let value = cookie(headers, opts.binding_cookie_name())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| {
            let mut b = [0u8; 32];
            rand::rng().fill_bytes(&mut b);
            hex::encode(b)
        });
    let set = set_cookie(
        opts.binding_cookie_name(),
        &value,
        crate::signin::mail::LINK_TTL,
        "/",
        opts.secure,
    );
    (value, set)
}

/// The hash of a request's browser binding as links store it; a request without the cookie
/// has a binding no link matches.
pub fn binding_hash(headers: &HeaderMap, opts: &SessionOptions) -> String {
    match cookie(headers, opts.binding_cookie_name()) {
        Some(v) => hash_key(&v),
        None => String::from("none"),
    }
}

/// The refusal of a session cookie the store does not know.
pub fn unknown() -> ApiError {
    ApiError::Unauthenticated("this session is unknown; sign in again at /sign-in".into())
}

/// The value of cookie `name` in a request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, `Path=/`, `Secure` unless turned off.
pub fn set_cookie(
    name: &str,
    value: &str,
    max_age: Duration,
    path: &str,
    secure: bool,
) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Max-Age={}; Path={path}; HttpOnly; SameSite=Lax{secure}",
        max_age.as_secs()
    ))
    .expect("cookie values are ASCII")
}

/// A `Set-Cookie` that deletes cookie `name`.
pub fn clear_cookie(name: &str, path: &str, secure: bool) -> HeaderValue {
    set_cookie(name, "", Duration::ZERO, path, secure)
}

/// Starts a session for `user`, signed in `via` (`email`, `provider_a`, `provider_b`), and
/// gives the `Set-Cookie` that carries it.
pub async fn start(
    store: &dyn StateStore,
    opts: &SessionOptions,
    user: &User,
    via: &str,
) -> Result<HeaderValue, ApiError> {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    let id = hex::encode(b);
    let now = Instant::now();
    let expires = Instant::from_micros(now.micros() + micros(opts.absolute));
    store
        .create_session(&hash_key(&id), &user.id, via, now, expires)
        .await?;
    tracing::info!(user_id = %user.id, via, "signed in");
    Ok(set_cookie(
        opts.cookie_name(),
        &id,
        opts.absolute,
        "/",
        opts.secure,
    ))
}

/// The live session a request's cookie names: `Ok(None)` without a cookie, 401 when the
/// cookie names no live session.
pub async fn resolve(
    store: &dyn StateStore,
    opts: &SessionOptions,
    headers: &HeaderMap,
    unknown_ids: &crate::state::key_cache::Unknown,
) -> Result<Option<Session>, ApiError> {
    let Some(id) = cookie_of(headers, opts) else {
        return Ok(None);
    };
    let id_hash = hash_key(&id);
    let now = Instant::now();
    let Some(s) = store.session(&id_hash).await? else {
        // Session ids are 32 random bytes the service makes: one unknown now stays unknown.
        unknown_ids.insert(&id_hash);
        return Err(unknown());
    };
    if s.ended_at.is_some() {
        return Err(ApiError::Unauthenticated(
            "this session was signed out; sign in again at /sign-in".into(),
        ));
    }
    if s.expires_at <= now || s.last_seen_at.micros() + micros(opts.idle) <= now.micros() {
        return Err(ApiError::Unauthenticated(
            "this session has expired; sign in again at /sign-in".into(),
        ));
    }
    if now.micros() - s.last_seen_at.micros() >= TOUCH_EVERY {
        store.touch_session(&id_hash, now).await?;
    }
    Ok(Some(Session {
        user: s.user,
        id_hash,
    }))
}

/// Refuses a cookie-authenticated write a browser sent from another site.
///
/// Browsers say where a request comes from: `Sec-Fetch-Site` (all current ones) and, on every
/// `POST`/`DELETE`, `Origin`. A write is accepted when `Sec-Fetch-Site` is `same-origin` or
/// `none` (typed by the user), or, without it, when `Origin` is this service's own origin
/// (`public_url`; without one, an origin whose host is the request's `Host`). A request with
/// neither header does not come from a browser page (curl, a script holding the cookie) and
/// cannot be forged cross-site. With SameSite=Lax cookies this is defence in depth: a
/// cross-site `POST` carries no session cookie in the first place.
pub fn same_origin(headers: &HeaderMap, public_url: Option<&str>) -> Result<(), ApiError> {
    let refused = || {
        ApiError::Forbidden(
            "cross-site request refused: account changes are accepted only from this service's own pages".into(),
        )
    };
    if let Some(site) = headers.get("sec-fetch-site") {
        return match site.to_str().unwrap_or("") {
            "same-origin" | "none" => Ok(()),
            _ => Err(refused()),
        };
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let own = match public_url {
        Some(u) => origin.eq_ignore_ascii_case(u.trim_end_matches('/')),
        None => {
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
            let authority = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            host.is_some_and(|h| authority.is_some_and(|a| a.eq_ignore_ascii_case(h)))
        }
    };
    if own { Ok(()) } else { Err(refused()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_session_cookie_is_found_among_others_in_any_cookie_header() {
        let plain = SessionOptions {
            secure: false,
            ..SessionOptions::default()
        };
        let h = headers(&[("cookie", "a=1; b=2"), ("cookie", "svc_session=abc ; c=3")]);
        assert_eq!(cookie_of(&h, &plain).as_deref(), Some("abc"));
        let none = |c: &str| cookie_of(&headers(&[("cookie", c)]), &plain);
        assert_eq!(none("svc_sessionx=1"), None);
        assert_eq!(none("svc_session="), None);
        assert_eq!(cookie_of(&HeaderMap::new(), &plain), None);
    }

    // A sibling subdomain can set `svc_session` for the parent domain, never a `__Host-`
    // cookie: a secure server reads only the prefixed name, so a planted cookie is ignored.
    #[test]
    fn a_secure_server_reads_only_the_host_prefixed_session_cookie() {
        let secure = SessionOptions::default();
        assert_eq!(secure.cookie_name(), "__Host-svc_session");
        assert_eq!(secure.flow_cookie_name(), "__Host-svc_oauth");
        assert_eq!(
            SessionOptions {
                secure: false,
                ..SessionOptions::default()
            }
            .flow_cookie_name(),
            "svc_oauth"
        );
        let planted = headers(&[("cookie", "svc_session=planted")]);
        assert_eq!(cookie_of(&planted, &secure), None);
        let own = headers(&[("cookie", "svc_session=planted; __Host-svc_session=own")]);
        assert_eq!(cookie_of(&own, &secure).as_deref(), Some("own"));
        let v = set_cookie(
            secure.cookie_name(),
            "x",
            Duration::from_secs(60),
            "/",
            true,
        );
        let v = v.to_str().unwrap();
        assert!(
            v.starts_with("__Host-svc_session=x;")
                && v.contains("; Secure")
                && v.contains("Path=/;")
        );
        assert!(
            !v.to_ascii_lowercase().contains("domain="),
            "__Host- cookies carry no Domain"
        );
    }

    #[test]
    fn a_browser_keeps_its_binding_and_one_without_gets_a_fresh_one() {
        let opts = SessionOptions::default();
        let (fresh, set) = binding(&HeaderMap::new(), &opts);
        assert_eq!(fresh.len(), 64);
        assert!(
            set.to_str()
                .unwrap()
                .starts_with(&format!("__Host-svc_signin={fresh};"))
        );
        let h = headers(&[("cookie", &format!("__Host-svc_signin={fresh}"))]);
        assert_eq!(binding(&h, &opts).0, fresh, "kept");
        assert_eq!(binding_hash(&h, &opts), hash_key(&fresh));
        assert_ne!(binding(&HeaderMap::new(), &opts).0, fresh, "random");
        // A forged, malformed binding is replaced, never stored.
        let bad = headers(&[("cookie", "__Host-svc_signin=abc")]);
        assert_ne!(binding(&bad, &opts).0, "abc");
        assert_eq!(binding_hash(&HeaderMap::new(), &opts), "none");
    }

    #[test]
    fn the_cookie_is_http_only_lax_and_secure_unless_turned_off() {
        let v = set_cookie(COOKIE, "x", Duration::from_secs(60), "/", true);
        assert_eq!(
            v,
            "__Host-svc_session=x; Max-Age=60; Path=/; HttpOnly; SameSite=Lax; Secure"
        );
        let v = set_cookie(COOKIE, "x", Duration::from_secs(60), "/", false);
        assert!(!v.to_str().unwrap().contains("Secure"));
        assert!(
            clear_cookie(COOKIE, "/", true)
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
    }

    #[test]
    fn a_write_from_another_site_is_refused_and_one_from_this_origin_or_no_browser_is_not() {
        let own = Some("https://asof.example");
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin")]), own).is_ok());
        assert!(same_origin(&headers(&[("sec-fetch-site", "none")]), own).is_ok());
        assert!(same_origin(&headers(&[("sec-fetch-site", "cross-site")]), own).is_err());
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-site")]), own).is_err());
        assert!(
            same_origin(
                &headers(&[
                    ("sec-fetch-site", "cross-site"),
                    ("origin", "https://asof.example")
                ]),
                own
            )
            .is_err(),
            "Sec-Fetch-Site decides when present"
        );
        assert!(same_origin(&headers(&[("origin", "https://asof.example/")]), own).is_err());
        assert!(same_origin(&headers(&[("origin", "https://evil.example")]), own).is_err());
        assert!(same_origin(&headers(&[("origin", "null")]), own).is_err());
        assert!(same_origin(&HeaderMap::new(), own).is_ok());
        assert!(same_origin(&headers(&[("origin", "https://asof.example")]), own).is_ok());
        // Without a public URL the origin must name the host the request was sent to.
        let h = |o: &str| headers(&[("origin", o), ("host", "127.0.0.1:8080")]);
        assert!(same_origin(&h("http://127.0.0.1:8080"), None).is_ok());
        assert!(same_origin(&h("http://evil.example"), None).is_err());
        assert!(same_origin(&h("http://127.0.0.1:9999"), None).is_err());
    }
}
