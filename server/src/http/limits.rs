//! Size limits on what a client sends before any handler runs: the request target, the header
//! block, and (in `crate::serve`) how long a client may take to send its headers.
//!
//! Two layers hold them. hyper's parser has a hard ceiling per connection ([`PARSE_BUFFER`]
//! bytes of request head, [`MAX_HEADERS`] fields): past it, hyper itself answers a bare
//! `431` and closes the connection, because it cannot buffer more without letting one client
//! take unbounded memory. Below that ceiling, [`fault`] (asked by the shared path,
//! `crate::http::middleware::Shared`, before any route) refuses heads larger than a serious
//! client ever sends with the service's own error envelope (`414 uri_too_long`,
//! `431 headers_too_large`), so a client that sends a 200 KB cookie learns why.
//!
//! The field count is the parser's alone on the wire: hyper's default of 100, the same as
//! [`MAX_HEADERS`], so a 101st field is hyper's bare `431`. Raising hyper's ceiling to answer
//! 101–512 fields with the envelope (as until issue 65) made hyper build two 512-entry arrays
//! on the heap for every request head, about a tenth of a `/health` request's instructions,
//! for clients that do not exist. [`fault`] still counts fields, for requests that reach the
//! application without hyper's parser (the in-process clients and tests).

use axum::extract::Request;

use crate::error::ApiError;

/// The longest request target (path and query) answered: long enough for every query a route
/// takes (a cursor is a few hundred bytes), short of anything but abuse.
pub const MAX_URI: usize = 8 * 1024;
/// The most bytes of header fields (names, values and separators) answered.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// The most header fields answered: hyper's own default ceiling, which `crate::serve` leaves
/// unset (see above).
pub const MAX_HEADERS: usize = 100;
/// hyper's read buffer per connection: the largest request head it parses at all.
pub const PARSE_BUFFER: usize = 256 * 1024;

/// The fault of a request head past the limits, if any.
pub fn fault(req: &Request) -> Option<ApiError> {
    let target = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > MAX_URI {
        return Some(ApiError::UriTooLong { limit: MAX_URI });
    }
    // The client's fields, as on the wire ("name: value\r\n"), but its `X-Request-Id`: the
    // shared path answers with an id of its own making (the client's only when it is a UUID),
    // and counted that field as its own when it set it on the request.
    let (mut count, mut bytes) = (0, 0);
    for (k, v) in req.headers() {
        if k != crate::http::response::X_REQUEST_ID {
            count += 1;
            bytes += k.as_str().len() + v.len() + 4;
        }
    }
    if count > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return Some(ApiError::HeadersTooLarge {
            bytes: MAX_HEADER_BYTES,
            count: MAX_HEADERS,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(uri: &str, headers: &[(&str, String)]) -> Request {
        let mut b = axum::http::Request::builder().uri(uri);
        for (k, v) in headers {
            b = b.header(*k, v);
        }
        b.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn a_head_within_the_limits_passes() {
        let r = req(
            "/v1/news?cik=320193",
            &[("authorization", "Bearer x".repeat(10))],
        );
        assert!(fault(&r).is_none());
    }

    #[test]
    fn a_target_one_byte_past_the_limit_is_uri_too_long() {
        let at_limit = format!("/?q={}", "a".repeat(MAX_URI - 4));
        assert!(fault(&req(&at_limit, &[])).is_none());
        let past = format!("{at_limit}a");
        assert!(matches!(
            fault(&req(&past, &[])),
            Some(ApiError::UriTooLong { limit: MAX_URI })
        ));
    }

    #[test]
    fn one_huge_header_or_too_many_small_ones_is_headers_too_large() {
        let big = req("/", &[("cookie", "c".repeat(MAX_HEADER_BYTES))]);
        assert!(matches!(
            fault(&big),
            Some(ApiError::HeadersTooLarge { .. })
        ));
        let names: Vec<(String, String)> = (0..=MAX_HEADERS)
            .map(|i| (format!("x-h{i}"), "v".into()))
            .collect();
        let mut b = axum::http::Request::builder().uri("/");
        for (k, v) in &names {
            b = b.header(k.as_str(), v.as_str());
        }
        let mut many = b.body(axum::body::Body::empty()).unwrap();
        assert!(matches!(
            fault(&many),
            Some(ApiError::HeadersTooLarge { .. })
        ));
        // 100 of the client's own pass, beside an `X-Request-Id` (answered with an id of our own).
        many.headers_mut().remove("x-h0");
        many.headers_mut().insert(
            crate::http::response::X_REQUEST_ID,
            axum::http::HeaderValue::from_static("0190c1c2-0000-7000-8000-000000000000"),
        );
        assert_eq!(many.headers().len(), MAX_HEADERS + 1);
        assert!(fault(&many).is_none());
    }
}
