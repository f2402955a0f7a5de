//! Browser sessions: the `svc_session` cookie, its lifetimes, and the cross-site check that
//! guards cookie-authenticated writes.
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

/// The session cookie's name (the spec's).
pub const COOKIE: &str = "svc_session";

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

/// The `svc_session` value a request carries, if any (every `Cookie` header is read).
pub fn cookie_of(headers: &HeaderMap) -> Option<String> {
    cookie(headers, COOKIE)
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
    Ok(set_cookie(COOKIE, &id, opts.absolute, "/", opts.secure))
}

/// The live session a request's cookie names: `Ok(None)` without a cookie, 401 when the
/// cookie names no live session.
pub async fn resolve(
    store: &dyn StateStore,
    opts: &SessionOptions,
    headers: &HeaderMap,
) -> Result<Option<Session>, ApiError> {
    let Some(id) = cookie_of(headers) else {
        return Ok(None);
    };
    let id_hash = hash_key(&id);
    let now = Instant::now();
    let s = store.session(&id_hash).await?.ok_or_else(|| {
        ApiError::Unauthenticated("this session is unknown; sign in again at /sign-in".into())
    })?;
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
        let h = headers(&[("cookie", "a=1; b=2"), ("cookie", "svc_session=abc ; c=3")]);
        assert_eq!(cookie_of(&h).as_deref(), Some("abc"));
        assert_eq!(cookie_of(&headers(&[("cookie", "svc_sessionx=1")])), None);
        assert_eq!(cookie_of(&headers(&[("cookie", "svc_session=")])), None);
        assert_eq!(cookie_of(&HeaderMap::new()), None);
    }

    #[test]
    fn the_cookie_is_http_only_lax_and_secure_unless_turned_off() {
        let v = set_cookie(COOKIE, "x", Duration::from_secs(60), "/", true);
        assert_eq!(
            v,
            "svc_session=x; Max-Age=60; Path=/; HttpOnly; SameSite=Lax; Secure"
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
