//! Audit receipts as the state store keeps them: append-only, read back per key in
//! `(ts_ms, request_id)` order (`state/audit.rs` queues the writes).

use async_trait::async_trait;
use sqlx::Row;

use super::{PgStore, SqliteStore};
use crate::error::Result;

/// An audit receipt as stored: the spec's seven fields plus the owner, `ts` in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReceipt {
    pub user_id: String,
    pub key_id: String,
    pub ts_ms: i64,
    pub route: String,
    pub params_digest: String,
    pub corpus_version: String,
    pub envelope_sha256: String,
    pub request_id: String,
}

/// The tables of this area, in SQL both backends accept; each statement is idempotent.
pub(super) const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS audit_receipts (key_id TEXT NOT NULL, ts_ms BIGINT NOT NULL, request_id TEXT NOT NULL, user_id TEXT NOT NULL, route TEXT NOT NULL, params_digest TEXT NOT NULL, corpus_version TEXT NOT NULL, envelope_sha256 TEXT NOT NULL, PRIMARY KEY (key_id, ts_ms, request_id))",
];

/// Audit receipts, append-only.
#[async_trait]
pub trait ReceiptStore: Send + Sync {
    /// Appends one audit receipt (append-only: the trait has no way to change or delete one).
    async fn append_receipt(&self, r: &StoredReceipt) -> Result<()>;
    /// The receipts of one key with `ts_ms` in `[from_ms, to_ms)`, strictly after `after`
    /// (`(ts_ms, request_id)`), oldest first, at most `limit`.
    async fn receipts(
        &self,
        key_id: &str,
        from_ms: i64,
        to_ms: i64,
        after: Option<(i64, String)>,
        limit: i64,
    ) -> Result<Vec<StoredReceipt>>;
    /// How many receipts one key has in the store.
    async fn receipt_count(&self, key_id: &str) -> Result<i64>;
}

/// The area's SQL, once for both backends (see `PoolDb`).
macro_rules! receipt_sql {
    ($name:ident, $pool:ty) => {
        #[async_trait]
        impl ReceiptStore for $name {
            async fn append_receipt(&self, r: &StoredReceipt) -> Result<()> {
                crate::obs::store_op("append_receipt", async {
                    sqlx::query(
                        "INSERT INTO audit_receipts (key_id, ts_ms, request_id, user_id, route, params_digest, corpus_version, envelope_sha256) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(&r.key_id)
                    .bind(r.ts_ms)
                    .bind(&r.request_id)
                    .bind(&r.user_id)
                    .bind(&r.route)
                    .bind(&r.params_digest)
                    .bind(&r.corpus_version)
                    .bind(&r.envelope_sha256)
                    .execute(&self.pool)
                    .await?;
                    Ok(())
                })
                .await
            }

            async fn receipts(&self, key_id: &str, from_ms: i64, to_ms: i64, after: Option<(i64, String)>, limit: i64) -> Result<Vec<StoredReceipt>> {
                crate::obs::store_op("receipts", async {
                    // Keyset paging on (ts_ms, request_id); with no position, (from_ms - 1, '') is
                    // before every row of the range.
                    let (after_ts, after_id) = after.unwrap_or((from_ms - 1, String::new()));
                    let rows = sqlx::query(
                        "SELECT key_id, ts_ms, request_id, user_id, route, params_digest, corpus_version, envelope_sha256 \
                         FROM audit_receipts WHERE key_id = $1 AND ts_ms >= $2 AND ts_ms < $3 \
                         AND (ts_ms > $4 OR (ts_ms = $4 AND request_id > $5)) \
                         ORDER BY ts_ms, request_id LIMIT $6",
                    )
                    .bind(key_id)
                    .bind(from_ms)
                    .bind(to_ms)
                    .bind(after_ts)
                    .bind(after_id)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                    rows.iter()
                        .map(|r| {
                            Ok(StoredReceipt {
                                key_id: r.try_get("key_id")?,
                                ts_ms: r.try_get("ts_ms")?,
                                request_id: r.try_get("request_id")?,
                                user_id: r.try_get("user_id")?,
                                route: r.try_get("route")?,
                                params_digest: r.try_get("params_digest")?,
                                corpus_version: r.try_get("corpus_version")?,
                                envelope_sha256: r.try_get("envelope_sha256")?,
                            })
                        })
                        .collect()
                })
                .await
            }

            async fn receipt_count(&self, key_id: &str) -> Result<i64> {
                crate::obs::store_op("receipt_count", async {
                    let r = sqlx::query("SELECT COUNT(*) AS n FROM audit_receipts WHERE key_id = $1").bind(key_id).fetch_one(&self.pool).await?;
                    Ok(r.try_get("n")?)
                })
                .await
            }
        }
    };
}

receipt_sql!(SqliteStore, sqlx::SqlitePool);
receipt_sql!(PgStore, sqlx::PgPool);
