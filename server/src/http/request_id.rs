//! A request's id: the client's `X-Request-Id` when it is a UUID, else one minted here, held
//! as its 36 characters inline so the context, the envelope and the answer's header take it
//! without a text allocated for each (six allocations a request when it was a `String` and a
//! request header).

use std::fmt;

use axum::http::{HeaderMap, HeaderName, HeaderValue};

/// Characters of a hyphenated UUID.
const LENGTH: usize = uuid::fmt::Hyphenated::LENGTH;

/// The request id every answer carries (the client's, when it sent a UUID).
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A request id as the client sees it: a lowercase hyphenated UUID. `Copy`: 36 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId([u8; LENGTH]);

impl RequestId {
    /// Characters of the id (a hyphenated UUID).
    pub const LENGTH: usize = LENGTH;
    /// The nil UUID: the id an answer cached per corpus version is encoded with
    /// (`crate::http::response::per_version`), before each request's own is written over it.
    /// A client that sends the nil UUID as its id gets it back all the same.
    pub const STAND_IN: RequestId = RequestId(*b"00000000-0000-0000-0000-000000000000");

    /// The id of a request with these headers: the client's `X-Request-Id` when it is a UUID
    /// (written lowercase and hyphenated, whatever form the client sent), else a new one
    /// ([`new_request_id`]). tower-http's `SetRequestId` keeps any value a client sent; this
    /// one must be a UUID.
    pub fn of(headers: &HeaderMap) -> Self {
        let id = headers
            .get(&X_REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| uuid::Uuid::parse_str(s).ok())
            .unwrap_or_else(new_request_id);
        RequestId::from(id)
    }

    /// A new id, for what answers outside a request's path (the MCP endpoint's own refusals).
    pub fn new() -> Self {
        RequestId::from(new_request_id())
    }

    pub fn as_str(&self) -> &str {
        // Written by `encode_lower` only: ASCII hex digits and hyphens.
        std::str::from_utf8(&self.0).expect("a UUID's text is ASCII")
    }

    /// The `X-Request-Id` value of the answer.
    pub fn header_value(&self) -> HeaderValue {
        HeaderValue::from_bytes(&self.0).expect("hex digits and hyphens are a header value")
    }
}

impl Default for RequestId {
    fn default() -> Self {
        RequestId::new()
    }
}

impl From<uuid::Uuid> for RequestId {
    fn from(id: uuid::Uuid) -> Self {
        let mut text = [0u8; LENGTH];
        id.hyphenated().encode_lower(&mut text);
        RequestId(text)
    }
}

impl std::ops::Deref for RequestId {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A request id minted here: a version 7 UUID (its first 48 bits the Unix time in
/// milliseconds), whose next 12 bits count the ids this process minted in that millisecond,
/// so ids sort in the order they were minted. Audit receipts of a key are listed by
/// `(ts, request_id)`; with random ids, two requests served in one millisecond came back in
/// either order. Past 4,096 ids in a millisecond the time runs ahead of the clock by as many
/// milliseconds, never backwards.
pub fn new_request_id() -> uuid::Uuid {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// The last id's time and counter: milliseconds << 12 | counter.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut last = LAST.load(Ordering::Relaxed);
    let stamp = loop {
        let next = (now_ms << 12).max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    let (ms, counter) = (stamp >> 12, (stamp & 0xfff) as u16);
    // The random bits from the thread's generator (seeded from the OS once): `Uuid::new_v4`
    // asks the kernel for them, a system call on every request.
    let mut bytes: [u8; 10] = rand::random();
    bytes[0] = (counter >> 8) as u8;
    bytes[1] = counter as u8;
    uuid::Builder::from_unix_timestamp_millis(ms, &bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers_with(id: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(&X_REQUEST_ID, HeaderValue::from_str(id).unwrap());
        h
    }

    #[test]
    fn a_clients_uuid_is_kept_lowercase_and_hyphenated_whatever_form_it_came_in() {
        let id = "0190C1C2-0000-7000-8000-00000000ABCD";
        let kept = RequestId::of(&headers_with(id));
        assert_eq!(kept.as_str(), id.to_lowercase());
        let simple = RequestId::of(&headers_with("0190c1c200007000800000000000abcd"));
        assert_eq!(simple, kept);
        assert_eq!(kept.header_value(), id.to_lowercase().as_str());
        assert_eq!(kept.to_string(), kept.as_str());
        assert_eq!(format!("{kept:?}"), format!("{:?}", id.to_lowercase()));
    }

    #[test]
    fn anything_but_a_uuid_gets_a_new_version_7_id() {
        for sent in [None, Some("not-a-uuid"), Some(""), Some("1234")] {
            let headers = sent.map_or_else(HeaderMap::new, headers_with);
            let id = RequestId::of(&headers);
            let parsed = uuid::Uuid::parse_str(id.as_str()).unwrap();
            assert_eq!(parsed.get_version_num(), 7);
            assert_eq!(id.as_str(), parsed.hyphenated().to_string());
        }
        assert_ne!(RequestId::new(), RequestId::new());
    }

    #[test]
    fn minted_request_ids_are_version_7_and_sort_in_minting_order_within_a_millisecond() {
        // Thousands within one millisecond: the counter, not the clock, orders them.
        let ids: Vec<uuid::Uuid> = (0..10_000).map(|_| new_request_id()).collect();
        assert!(ids.iter().all(|u| u.get_version_num() == 7));
        let text: Vec<String> = ids.iter().map(|u| u.hyphenated().to_string()).collect();
        assert!(
            text.windows(2).all(|w| w[0] < w[1]),
            "as strings too: the audit log orders by the id's text"
        );
        // From many threads at once: every id distinct.
        let all: std::collections::HashSet<uuid::Uuid> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..2_000).map(|_| new_request_id()).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert_eq!(all.len(), 16_000);
    }
}
