//! Decision audit receipts: what was asked, which corpus answered, and the hash of the exact
//! bytes sent, written off the request path through a bounded queue.
//!
//! The `context` middleware (app.rs) decides per response whether a receipt is due and calls
//! [`Audit::offer`] or [`Audit::count_skip`]. Offering never waits: when the queue is full the
//! receipt is dropped and counted, because a compliance feature must not slow the answer it
//! documents. One writer task drains the queue into the state store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::state::store::{StateStore, StoredReceipt};

/// The spec's queue bound.
pub const DEFAULT_QUEUE_CAPACITY: usize = 1200;

/// Header that asks for a receipt, and the values that switch it on (case-insensitive).
pub const AUDIT_HEADER: &str = "x-service-audit";
/// Header on every response to a request that asked for a receipt: the process's drop count.
pub const DROPPED_HEADER: &str = "x-service-audit-dropped";
/// Next-page token of the JSONL form of `/v1/audit-log`.
pub const NEXT_CURSOR_HEADER: &str = "x-service-audit-next-cursor";

/// Whether a header value asks for a receipt.
pub fn wants_receipt(value: &str) -> bool {
    ["on", "1", "true", "yes"]
        .iter()
        .any(|w| value.eq_ignore_ascii_case(w))
}

/// Why a request that asked for a receipt got none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Path outside `/v1/`, or a read of the audit log itself.
    OutOfScope,
    /// No key could be attributed: no or rejected credential, or a browser session.
    Unattributed,
    /// A key whose plan has no audit log.
    PlanRequired,
    /// A reply that is not a JSON envelope (description document, SSE, 304).
    Skipped,
}

/// The process's running counters (served by `/v1/audit-log/stats`).
#[derive(Debug, Default)]
struct Counters {
    requested: AtomicU64,
    enqueued: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    out_of_scope: AtomicU64,
    unattributed: AtomicU64,
    plan_required: AtomicU64,
    skipped: AtomicU64,
}

/// A snapshot of the counters.
///
/// Every request that asked for a receipt lands in exactly one of `enqueued`, `dropped`,
/// `out_of_scope`, `unattributed`, `plan_required`, `skipped`; every enqueued receipt ends in
/// `written` or `failed` or is still `queued`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AuditStats {
    /// Counters are per server process, since it started.
    pub scope: &'static str,
    pub process_started_at: asof_engine::Instant,
    pub queue_capacity: u64,
    /// Receipts waiting in the queue now.
    pub queued: u64,
    /// Responses to requests that carried the audit header with an on value.
    pub requested: u64,
    pub enqueued: u64,
    pub written: u64,
    /// Receipts dropped because the queue was full.
    pub dropped: u64,
    /// Receipt writes that returned an error.
    pub failed: u64,
    /// `dropped + failed`.
    pub lost: u64,
    pub plan_required: u64,
    pub unattributed: u64,
    pub skipped: u64,
    /// Paths outside `/v1/` and reads of the audit log itself.
    pub out_of_scope: u64,
}

/// The receipt queue and its counters; cheap to clone.
#[derive(Clone)]
pub struct Audit {
    inner: Arc<AuditInner>,
}

struct AuditInner {
    tx: mpsc::Sender<StoredReceipt>,
    counters: Counters,
    capacity: usize,
    started_at: asof_engine::Instant,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Audit {
    /// Creates the queue and spawns its writer (needs a Tokio runtime).
    pub fn start(store: Arc<dyn StateStore>, capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let (tx, mut rx) = mpsc::channel::<StoredReceipt>(capacity);
        let audit = Audit {
            inner: Arc::new(AuditInner {
                tx,
                counters: Counters::default(),
                capacity,
                started_at: asof_engine::Instant::now(),
            }),
        };
        // The writer holds only a weak handle: when every `Audit` is gone the channel closes,
        // the loop ends after draining, and the task exits.
        let weak = Arc::downgrade(&audit.inner);
        tokio::spawn(async move {
            while let Some(r) = rx.recv().await {
                let outcome = store.append_receipt(&r).await;
                let Some(inner) = weak.upgrade() else { break };
                match outcome {
                    Ok(()) => inner.counters.written.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        // The receipt's identifiers are not secret; its key id helps support.
                        tracing::error!(error = %e, key_id = %r.key_id, request_id = %r.request_id, "audit receipt write failed");
                        inner.counters.failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        });
        audit
    }

    fn c(&self) -> &Counters {
        &self.inner.counters
    }

    /// Counts a response to a request that asked for a receipt (call once per such response).
    pub fn count_requested(&self) {
        self.c().requested.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request that asked for a receipt and will get none.
    pub fn count_skip(&self, why: Skip) {
        let c = match why {
            Skip::OutOfScope => &self.c().out_of_scope,
            Skip::Unattributed => &self.c().unattributed,
            Skip::PlanRequired => &self.c().plan_required,
            Skip::Skipped => &self.c().skipped,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Queues a receipt without waiting; a full queue drops it (counted).
    pub fn offer(&self, r: StoredReceipt) {
        match self.inner.tx.try_send(r) {
            Ok(()) => self.c().enqueued.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.c().dropped.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// The running drop count (`X-Service-Audit-Dropped`).
    pub fn dropped(&self) -> u64 {
        self.c().dropped.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> AuditStats {
        let c = self.c();
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (enqueued, written, dropped, failed) = (
            get(&c.enqueued),
            get(&c.written),
            get(&c.dropped),
            get(&c.failed),
        );
        AuditStats {
            scope: "process",
            process_started_at: self.inner.started_at,
            queue_capacity: self.inner.capacity as u64,
            queued: enqueued.saturating_sub(written + failed),
            requested: get(&c.requested),
            enqueued,
            written,
            dropped,
            failed,
            lost: dropped + failed,
            plan_required: get(&c.plan_required),
            unattributed: get(&c.unattributed),
            skipped: get(&c.skipped),
            out_of_scope: get(&c.out_of_scope),
        }
    }

    /// Waits until every queued receipt is written or failed, or `timeout` passes; true when
    /// the queue drained. Used at shutdown (so a SIGTERM loses no receipt) and by tests.
    pub async fn drain(&self, timeout: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.stats().queued == 0 {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}

/// A receipt as answered by `/v1/audit-log`: exactly the spec's seven fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Receipt {
    pub ts: String,
    pub key_id: String,
    pub route: String,
    pub params_digest: String,
    pub corpus_version: String,
    pub envelope_sha256: String,
    pub request_id: String,
}

impl From<StoredReceipt> for Receipt {
    fn from(r: StoredReceipt) -> Self {
        Receipt {
            ts: rfc3339_millis(r.ts_ms),
            key_id: r.key_id,
            route: r.route,
            params_digest: r.params_digest,
            corpus_version: r.corpus_version,
            envelope_sha256: r.envelope_sha256,
            request_id: r.request_id,
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of a unix-millisecond instant.
pub fn rfc3339_millis(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

/// The canonical form of a query string, as hashed into `params_digest`:
///
/// 1. split on `&` and decode each `name=value` as `application/x-www-form-urlencoded`
///    (percent-decoding, `+` is a space; a pair without `=` has an empty value; empty pairs
///    are ignored), exactly as the server reads its parameters;
/// 2. sort the pairs by name, then value, comparing UTF-8 bytes;
/// 3. re-encode every name and value, leaving only RFC 3986 unreserved characters
///    (`A-Z a-z 0-9 - . _ ~`) as they are and writing every other byte as `%XX` (upper-case);
/// 4. join as `name=value` with `&`. No query (or an empty one) gives the empty string.
pub fn canonical_query(raw: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `params_digest`: sha256 hex of [`canonical_query`].
pub fn params_digest(raw: Option<&str>) -> String {
    hex::encode(Sha256::digest(canonical_query(raw).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_query_decodes_sorts_and_reencodes() {
        assert_eq!(canonical_query(None), "");
        assert_eq!(canonical_query(Some("")), "");
        assert_eq!(
            canonical_query(Some("b=2&a=%3A+x&cursor")),
            "a=%3A%20x&b=2&cursor="
        );
        // The same parameters in another order or encoding give the same digest.
        assert_eq!(
            params_digest(Some("ticker=TSLA&as_of=2026-01-29T12%3A00%3A00Z")),
            params_digest(Some("as_of=2026-01-29T12:00:00Z&ticker=TSLA"))
        );
        assert_eq!(
            params_digest(None),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn audit_header_values_are_case_insensitive() {
        // HTTP strips the spaces around a field value before it gets here.
        for v in ["on", "1", "true", "yes", "ON", "Yes"] {
            assert!(wants_receipt(v), "{v}");
        }
        for v in ["off", "0", "", "y"] {
            assert!(!wants_receipt(v), "{v}");
        }
    }

    #[test]
    fn receipt_timestamps_are_utc_to_the_millisecond() {
        assert_eq!(
            rfc3339_millis(1_769_688_000_123),
            "2026-01-29T12:00:00.123Z"
        );
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
    }
}
