//! Serving a stored file: single byte ranges (RFC 9110 §14), what Parquet readers send for a
//! file's footer and columns (`bytes=a-b`, `bytes=a-` and the suffix `bytes=-n`; anything
//! else is ignored and the whole file answers, as the RFC allows, several ranges included:
//! readers ask for one), `If-Range`, `If-None-Match` against the file's strong ETag, and the
//! headers of the answer ([`FileResponse`]).

use std::ops::Range;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::http::caching::etag_matches;

/// A stored file about to be answered: what its headers say of it.
#[derive(Debug, Clone)]
pub struct FileResponse {
    /// The strong ETag, quoted.
    pub etag: String,
    pub size: u64,
    pub content_type: &'static str,
    pub cache_control: String,
    /// `Content-Disposition`, when the file has a name to save it under.
    pub disposition: Option<String>,
}

/// What a request asks of a [`FileResponse`]'s file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// The client's copy is this file (`If-None-Match`): `304`, no bytes.
    NotModified,
    /// These bytes: the whole file (`None`) or one range of it.
    Bytes(Option<Range<u64>>),
}

impl FileResponse {
    /// What `headers` ask of the file: `304` for a matching `If-None-Match`; a `Range` only
    /// while `If-Range` (when sent) names this file; `416 range_not_satisfiable` for a range
    /// wholly past its end.
    pub fn asked(&self, headers: &HeaderMap) -> Result<Asked, ApiError> {
        let header_str = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        if header_str(header::IF_NONE_MATCH).is_some_and(|v| etag_matches(v, &self.etag)) {
            return Ok(Asked::NotModified);
        }
        let range_header = match header_str(header::IF_RANGE) {
            Some(v) if v.trim() != self.etag => None,
            _ => header_str(header::RANGE),
        };
        match resolve(range_header, self.size) {
            Ranged::Whole => Ok(Asked::Bytes(None)),
            Ranged::Part { start, end } => Ok(Asked::Bytes(Some(start..end))),
            Ranged::Unsatisfiable => Err(ApiError::RangeNotSatisfiable { size: self.size }),
        }
    }

    /// The `304` answer: the ETag and the cache rule, nothing else.
    pub fn not_modified(&self) -> Response {
        (
            StatusCode::NOT_MODIFIED,
            [
                (header::ETAG, self.etag.clone()),
                (header::CACHE_CONTROL, self.cache_control.clone()),
            ],
        )
            .into_response()
    }

    /// The answer carrying `body`, the bytes of `range` (the whole file for `None`; an empty
    /// body for `HEAD`): `200` or `206` with `Content-Range`, and the file's headers.
    pub fn respond(&self, range: Option<Range<u64>>, body: Body) -> Response {
        let mut res = Response::new(body);
        let (start, end) = range.clone().map_or((0, self.size), |r| (r.start, r.end));
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start));
        h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        h.insert(
            header::ETAG,
            HeaderValue::from_str(&self.etag).expect("a quoted hash"),
        );
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_str(&self.cache_control).expect("ascii"),
        );
        if let Some(d) = &self.disposition {
            h.insert(
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(d).expect("ascii"),
            );
        }
        if range.is_some() {
            *res.status_mut() = StatusCode::PARTIAL_CONTENT;
            res.headers_mut().insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes {start}-{}/{}", end - 1, self.size))
                    .expect("ascii"),
            );
        }
        res
    }
}

/// What a `Range` header asks of a file of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranged {
    /// No usable range: `200` with the whole file.
    Whole,
    /// `206` with bytes `start..end` (end exclusive).
    Part { start: u64, end: u64 },
    /// `416`: the range lies wholly past the end of the file.
    Unsatisfiable,
}

/// Resolves a `Range` header value against a file of `size` bytes.
pub fn resolve(header: Option<&str>, size: u64) -> Ranged {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Ranged::Whole;
    };
    if spec.contains(',') {
        return Ranged::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ranged::Whole;
    };
    let num = |s: &str| -> Option<Option<u64>> {
        let s = s.trim();
        if s.is_empty() {
            Some(None)
        } else if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok().map(Some)
        } else {
            None
        }
    };
    match (num(a), num(b)) {
        // bytes=-n: the last n bytes.
        (Some(None), Some(Some(n))) => {
            if n == 0 || size == 0 {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part {
                    start: size.saturating_sub(n),
                    end: size,
                }
            }
        }
        // bytes=a- and bytes=a-b (b clamped to the last byte).
        (Some(Some(start)), Some(last)) => {
            if last.is_some_and(|l| l < start) {
                Ranged::Whole
            } else if start >= size {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part {
                    start,
                    end: last.map_or(size, |l| l.saturating_add(1).min(size)),
                }
            }
        }
        _ => Ranged::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_open_and_suffix_ranges_resolve_within_the_file() {
        assert_eq!(
            resolve(Some("bytes=0-9"), 100),
            Ranged::Part { start: 0, end: 10 }
        );
        assert_eq!(
            resolve(Some("bytes=90-"), 100),
            Ranged::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            resolve(Some("bytes=90-500"), 100),
            Ranged::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            resolve(Some("bytes=-8"), 100),
            Ranged::Part {
                start: 92,
                end: 100
            }
        );
        assert_eq!(
            resolve(Some("bytes=-800"), 100),
            Ranged::Part { start: 0, end: 100 }
        );
    }

    #[test]
    fn a_range_past_the_end_is_unsatisfiable_and_a_malformed_one_is_ignored() {
        assert_eq!(resolve(Some("bytes=100-"), 100), Ranged::Unsatisfiable);
        assert_eq!(resolve(Some("bytes=-0"), 100), Ranged::Unsatisfiable);
        assert_eq!(resolve(None, 100), Ranged::Whole);
        assert_eq!(resolve(Some("bytes=5-2"), 100), Ranged::Whole);
        assert_eq!(resolve(Some("bytes=0-1,5-6"), 100), Ranged::Whole);
        assert_eq!(resolve(Some("items=0-1"), 100), Ranged::Whole);
        assert_eq!(resolve(Some("bytes=x-1"), 100), Ranged::Whole);
    }
}
