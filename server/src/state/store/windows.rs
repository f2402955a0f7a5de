//! Rate-limit windows as the state store keeps them: one count per bucket and fixed window,
//! shared by every replica (`state/rate.rs` counts in front of it and flushes here).

use async_trait::async_trait;
use sqlx::Row;

use super::{BATCH_ROWS, PgStore, PoolDb, SqliteStore};
use crate::error::Result;

/// Requests counted in one fixed rate window: `(bucket, window_start, n)`.
pub type WindowHits = (String, i64, i64);

/// The tables of this area, in SQL both backends accept; each statement is idempotent.
pub(super) const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS rate_windows (bucket TEXT NOT NULL, window_start BIGINT NOT NULL, count BIGINT NOT NULL, PRIMARY KEY (bucket, window_start))",
];

/// Fixed-window request counts.
#[async_trait]
pub trait WindowStore: Send + Sync {
    /// Counts one request in the fixed window `(bucket, window_start)`; returns the new count.
    async fn hit(&self, bucket: &str, window_start: i64) -> Result<i64> {
        self.hit_n(bucket, window_start, 1).await
    }
    /// Counts `n` requests at once in the fixed window `(bucket, window_start)` (a replica
    /// flushing what it counted locally); returns the new count.
    async fn hit_n(&self, bucket: &str, window_start: i64, n: i64) -> Result<i64>;
    /// Counts many windows at once (a replica's flush), all or none, in a few statements
    /// whatever their number; returns the new count of each `(bucket, window_start)` given.
    /// Each window may appear once.
    async fn hit_many(&self, hits: &[WindowHits]) -> Result<Vec<WindowHits>>;
    /// Drops windows that ended before `before`.
    async fn purge_windows(&self, before: i64) -> Result<u64>;
}

/// The area's SQL, once for both backends (see `PoolDb`).
macro_rules! window_sql {
    ($name:ident, $pool:ty) => {
        #[async_trait]
        impl WindowStore for $name {
            async fn hit_n(&self, bucket: &str, window_start: i64, n: i64) -> Result<i64> {
                crate::obs::store_op("hit_n", async {
                    let r = sqlx::query(
                        "INSERT INTO rate_windows (bucket, window_start, count) VALUES ($1, $2, $3) \
                         ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_windows.count + $3 RETURNING count",
                    )
                    .bind(bucket)
                    .bind(window_start)
                    .bind(n)
                    .fetch_one(&self.pool)
                    .await?;
                    Ok(r.try_get("count")?)
                })
                .await
            }

            async fn hit_many(&self, hits: &[WindowHits]) -> Result<Vec<WindowHits>> {
                crate::obs::store_op("hit_many", async {
                    if hits.is_empty() {
                        return Ok(Vec::new());
                    }
                    // Rows in one order in every replica's batches, so two batches that share
                    // windows lock them in the same order (else PostgreSQL finds a deadlock).
                    let mut hits: Vec<&WindowHits> = hits.iter().collect();
                    hits.sort_unstable();
                    let mut out = Vec::with_capacity(hits.len());
                    let mut tx = self.pool.begin().await?;
                    for chunk in hits.chunks(BATCH_ROWS) {
                        let mut q = sqlx::QueryBuilder::<<$pool as PoolDb>::Db>::new("INSERT INTO rate_windows (bucket, window_start, count) ");
                        q.push_values(chunk, |mut row, &(bucket, window, n)| {
                            row.push_bind(bucket.as_str()).push_bind(*window).push_bind(*n);
                        });
                        q.push(" ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_windows.count + excluded.count RETURNING bucket, window_start, count");
                        for r in q.build().fetch_all(&mut *tx).await? {
                            out.push((r.try_get("bucket")?, r.try_get("window_start")?, r.try_get("count")?));
                        }
                    }
                    tx.commit().await?;
                    Ok(out)
                })
                .await
            }

            async fn purge_windows(&self, before: i64) -> Result<u64> {
                crate::obs::store_op("purge_windows", async {
                    Ok(sqlx::query("DELETE FROM rate_windows WHERE window_start < $1").bind(before).execute(&self.pool).await?.rows_affected())
                })
                .await
            }
        }
    };
}

window_sql!(SqliteStore, sqlx::SqlitePool);
window_sql!(PgStore, sqlx::PgPool);
