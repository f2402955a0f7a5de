//! What every answer carries on its way out: error envelopes for the errors handlers and
//! layers raised, `X-Request-Id` and `X-Corpus-Version`, `Cache-Control`, the ETag and a 304
//! for a matching `If-None-Match`.

use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::http::response::error_response;
use crate::http::response::{CacheKind, JsonEnvelope};
use crate::http::response::{X_CORPUS_VERSION, X_REQUEST_ID};
use crate::http::route::{Kind, RouteInfo};
use crate::http::state::{AppState, Caller, Ctx};

/// Error envelopes, request id, corpus version, Cache-Control, ETag and 304.
pub(crate) async fn finish(
    state: &AppState,
    ctx: &Ctx,
    method: &Method,
    path: &str,
    query: Option<&str>,
    if_none_match: Option<HeaderValue>,
    mut res: Response,
) -> Response {
    let route = res.extensions().get::<RouteInfo>().copied();
    let is_sample = route.is_some_and(|r| r.sample);
    // 405 from the router (wrong method on a known path) becomes an envelope too.
    if res.status() == StatusCode::METHOD_NOT_ALLOWED
        && res.extensions().get::<ApiError>().is_none()
    {
        let allow = res
            .headers()
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("GET, HEAD, OPTIONS")
            .to_owned();
        res.extensions_mut()
            .insert(ApiError::MethodNotAllowed { allow });
    }
    // The timeout layer answers a bare 503 when the handler ran out of time.
    if res.status() == StatusCode::SERVICE_UNAVAILABLE
        && res.extensions().get::<ApiError>().is_none()
        && res.extensions().get::<JsonEnvelope>().is_none()
    {
        let after = state.options().request_timeout.as_secs().max(1);
        tracing::warn!(after_secs = after, "request timed out");
        res.extensions_mut()
            .insert(ApiError::Timeout { after_secs: after });
    }
    if let Some(err) = res.extensions().get::<ApiError>().cloned() {
        let kept: Vec<(HeaderName, HeaderValue)> = res
            .headers()
            .iter()
            .filter(|(k, _)| k.as_str().starts_with("x-ratelimit-"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // Everything inner layers left for the outer ones (the route, the caller, the error
        // itself for the metrics) stays with the rendered envelope.
        let extensions = std::mem::take(res.extensions_mut());
        res = error_response(ctx, &err, is_sample);
        res.headers_mut().extend(kept);
        res.extensions_mut().extend(extensions);
    }
    res.headers_mut()
        .insert(&X_REQUEST_ID, ctx.request_id.header_value());
    let kind = route.map(|r| r.kind);
    let document = kind == Some(Kind::Document);
    if res.extensions().get::<JsonEnvelope>().is_none() && !document {
        return res;
    }
    res.headers_mut()
        .insert(&X_CORPUS_VERSION, version_header(ctx.corpus.version()));
    if res.status() != StatusCode::OK {
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return res;
    }
    // Sample answers and documents are the same for everyone; the rest are the caller's.
    let public = is_sample || document;
    let cache_kind = match res.extensions().get::<JsonEnvelope>() {
        Some(JsonEnvelope(kind)) => Some(*kind),
        None => res.extensions().get::<CacheKind>().copied(),
    };
    let cache = HeaderValue::from_static(match (cache_kind, public) {
        (Some(CacheKind::Historical), true) => "public, max-age=300",
        (Some(CacheKind::Historical), false) => "private, max-age=300",
        (Some(CacheKind::NoStore), _) => "no-store",
        (_, true) => "public, max-age=0, must-revalidate",
        (_, false) => "private, max-age=0, must-revalidate",
    });
    let etag = if matches!(kind, Some(Kind::Document | Kind::LiveEnvelope)) {
        let (parts, body) = res.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        let digest = Sha256::digest(&bytes);
        let etag = etag_of(&[digest.as_slice()]);
        res = Response::from_parts(parts, axum::body::Body::from(bytes));
        etag
    } else {
        // The version and the request as sent, hashed in place (no string built for them).
        etag_of(&[
            ctx.corpus.version().as_bytes(),
            b"\n".as_slice(),
            method.as_str().as_bytes(),
            b" ".as_slice(),
            path.as_bytes(),
            b"?".as_slice(),
            query.unwrap_or("").as_bytes(),
        ])
    };
    let matched = if_none_match
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| etag_matches(v, etag.to_str().expect("ascii")));
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, cache);
    h.insert(header::ETAG, etag);
    if matched {
        let mut not_modified = StatusCode::NOT_MODIFIED.into_response();
        for (k, v) in res.headers().iter().filter(|(k, _)| {
            [
                header::ETAG,
                header::CACHE_CONTROL,
                X_REQUEST_ID,
                X_CORPUS_VERSION,
            ]
            .contains(k)
                || k.as_str().starts_with("x-ratelimit-")
        }) {
            not_modified.headers_mut().insert(k.clone(), v.clone());
        }
        if let Some(c) = res.extensions().get::<Caller>().cloned() {
            not_modified.extensions_mut().insert(c);
        }
        if let Some(r) = route {
            not_modified.extensions_mut().insert(r);
        }
        return not_modified;
    }
    res
}

/// The `X-Corpus-Version` value of `version`: made once per thread and version and shared by
/// the thread's answers (a value is its bytes behind a reference count), where making it per
/// answer checked and copied its 71 bytes into a new allocation every time.
fn version_header(version: &str) -> HeaderValue {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, HeaderValue)>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((v, header)) if v == version => header.clone(),
        _ => {
            let header = HeaderValue::from_str(version).expect("version is a header value");
            *last = Some((version.to_owned(), header.clone()));
            header
        }
    })
}

/// The ETag of an answer whose basis is `parts` in order: the first 40 hex digits of their
/// sha256, quoted.
fn etag_of(parts: &[&[u8]]) -> HeaderValue {
    let mut hasher = Sha256::new();
    for p in parts {
        hasher.update(p);
    }
    let digest = hasher.finalize();
    let mut tag = [b'"'; 42];
    hex::encode_to_slice(&digest[..20], &mut tag[1..41]).expect("40 digits for 20 bytes");
    HeaderValue::from_bytes(&tag).expect("hex digits and quotes")
}

/// Whether an `If-None-Match` value names `etag` (one of its comma-separated tags, or `*`).
pub fn etag_matches(if_none_match: &str, etag: &str) -> bool {
    if_none_match
        .split(',')
        .any(|t| t.trim() == etag || t.trim() == "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_header_names_the_version_asked_whatever_was_asked_before() {
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        for v in [&a, &a, &b, &a, &b, &b] {
            assert_eq!(version_header(v), v.as_str());
        }
        // Another thread keeps its own.
        std::thread::spawn(move || assert_eq!(version_header(&b), b.as_str()))
            .join()
            .unwrap();
        assert_eq!(version_header(&a), a.as_str());
    }

    #[test]
    fn an_if_none_match_names_the_tag_among_others_or_by_star() {
        assert!(etag_matches("\"x\"", "\"x\""));
        assert!(etag_matches("\"y\", \"x\"", "\"x\""));
        assert!(etag_matches("*", "\"x\""));
        assert!(!etag_matches("\"y\"", "\"x\""));
    }
}
