//! Counts the state store keeps: requests per user, key, UTC day and route group (billing
//! usage, flushed by `state/usage.rs`) and the site's page views per path and day.

use async_trait::async_trait;
use sqlx::Row;

use super::{BATCH_ROWS, PgStore, PoolDb, SqliteStore};
use crate::error::Result;

/// Requests to add to one counter of `usage_days`: a user's requests with one key (empty for
/// the session cookie) on one UTC day (`YYYY-MM-DD`) to one route group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UsageCount {
    pub user_id: String,
    pub key_id: String,
    pub day: String,
    pub route_group: String,
    pub requests: i64,
}

/// The tables of this area, in SQL both backends accept; each statement is idempotent.
pub(super) const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS page_views (path TEXT NOT NULL, day TEXT NOT NULL, count BIGINT NOT NULL, PRIMARY KEY (path, day))",
    // Usage per user, key, UTC day and route group; kept apart from the rate windows' purge.
    "CREATE TABLE IF NOT EXISTS usage_days (user_id TEXT NOT NULL, key_id TEXT NOT NULL, day TEXT NOT NULL, route_group TEXT NOT NULL, requests BIGINT NOT NULL, PRIMARY KEY (user_id, day, key_id, route_group))",
];

/// Usage counts and page views.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Adds requests to users' counts, all or none, in a few statements whatever their number
    /// (a replica's flush). Each counter may appear once.
    async fn add_usage(&self, counts: &[UsageCount]) -> Result<()>;
    /// A user's counts for days in `[from_day, to_day]`: `(day, key_id, route_group, requests)`
    /// ordered by day, key, group.
    async fn usage(
        &self,
        user_id: &str,
        from_day: &str,
        to_day: &str,
    ) -> Result<Vec<(String, String, String, i64)>>;
    /// Counts one page view of `path` on UTC day `day` (`YYYY-MM-DD`).
    async fn count_page_view(&self, path: &str, day: &str) -> Result<()>;
    /// Page views per `(path, day)` for days in `[from_day, to_day]`, by day then path.
    async fn page_views(&self, from_day: &str, to_day: &str) -> Result<Vec<(String, String, i64)>>;
}

/// The area's SQL, once for both backends (see `PoolDb`).
macro_rules! usage_sql {
    ($name:ident, $pool:ty) => {
        #[async_trait]
        impl UsageStore for $name {
            async fn add_usage(&self, counts: &[UsageCount]) -> Result<()> {
                crate::obs::store_op("add_usage", async {
                    if counts.is_empty() {
                        return Ok(());
                    }
                    // One order in every replica's batches (see `hit_many`).
                    let mut counts: Vec<&UsageCount> = counts.iter().collect();
                    counts.sort_unstable();
                    let mut tx = self.pool.begin().await?;
                    for chunk in counts.chunks(BATCH_ROWS) {
                        let mut q = sqlx::QueryBuilder::<<$pool as PoolDb>::Db>::new("INSERT INTO usage_days (user_id, key_id, day, route_group, requests) ");
                        q.push_values(chunk, |mut row, c| {
                            row.push_bind(c.user_id.as_str())
                                .push_bind(c.key_id.as_str())
                                .push_bind(c.day.as_str())
                                .push_bind(c.route_group.as_str())
                                .push_bind(c.requests);
                        });
                        q.push(" ON CONFLICT (user_id, day, key_id, route_group) DO UPDATE SET requests = usage_days.requests + excluded.requests");
                        q.build().execute(&mut *tx).await?;
                    }
                    tx.commit().await?;
                    Ok(())
                })
                .await
            }

            async fn usage(&self, user_id: &str, from_day: &str, to_day: &str) -> Result<Vec<(String, String, String, i64)>> {
                crate::obs::store_op("usage", async {
                    let rows = sqlx::query("SELECT day, key_id, route_group, requests FROM usage_days WHERE user_id = $1 AND day >= $2 AND day <= $3 ORDER BY day, key_id, route_group")
                        .bind(user_id)
                        .bind(from_day)
                        .bind(to_day)
                        .fetch_all(&self.pool)
                        .await?;
                    rows.iter().map(|r| Ok((r.try_get("day")?, r.try_get("key_id")?, r.try_get("route_group")?, r.try_get("requests")?))).collect()
                })
                .await
            }

            async fn count_page_view(&self, path: &str, day: &str) -> Result<()> {
                crate::obs::store_op("count_page_view", async {
                    sqlx::query("INSERT INTO page_views (path, day, count) VALUES ($1, $2, 1) ON CONFLICT (path, day) DO UPDATE SET count = page_views.count + 1")
                        .bind(path)
                        .bind(day)
                        .execute(&self.pool)
                        .await?;
                    Ok(())
                })
                .await
            }

            async fn page_views(&self, from_day: &str, to_day: &str) -> Result<Vec<(String, String, i64)>> {
                crate::obs::store_op("page_views", async {
                    let rows = sqlx::query("SELECT path, day, count FROM page_views WHERE day >= $1 AND day <= $2 ORDER BY day, path")
                        .bind(from_day)
                        .bind(to_day)
                        .fetch_all(&self.pool)
                        .await?;
                    rows.iter().map(|r| Ok((r.try_get("path")?, r.try_get("day")?, r.try_get("count")?))).collect()
                })
                .await
            }
        }
    };
}

usage_sql!(SqliteStore, sqlx::SqlitePool);
usage_sql!(PgStore, sqlx::PgPool);
