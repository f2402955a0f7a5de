//! State the service keeps besides the corpus, over SQLite (the default) or PostgreSQL
//! (replicas): one file per area (accounts and keys, sign-in, rate windows, audit receipts,
//! usage counts, billing), each with its tables, its trait and its SQL, written once for both
//! backends so they cannot drift. [`StateStore`] is every area at once plus the named secrets;
//! the service holds one `Arc<dyn StateStore>`, and one test suite runs against both backends.
//!
//! A `dyn StateStore` answers every area's methods without importing the area traits (a trait
//! object's supertraits come with it); a wrapper (as the tests' fault-injecting store) implements
//! each area trait and then `StateStore`.

mod accounts;
mod billing;
mod receipts;
mod sign_in;
mod usage;
mod windows;

use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use rand::RngCore;
use sqlx::Row;

use crate::error::{Error, Result};
use crate::plan::Plan;

pub use accounts::{AccountStore, KEY_PREFIX, KeyRecord, User, hash_key, new_raw_key};
pub use billing::BillingStore;
pub use receipts::{ReceiptStore, StoredReceipt};
pub use sign_in::{Identity, IdentitySignIn, LinkState, SessionRecord, SignInLink, SignInStore};
pub use usage::{UsageCount, UsageStore};
pub use windows::{WindowHits, WindowStore};

/// The whole state store: every area, plus the secrets all replicas share.
#[async_trait]
pub trait StateStore:
    AccountStore
    + SignInStore
    + WindowStore
    + ReceiptStore
    + UsageStore
    + BillingStore
    + Send
    + Sync
    + std::fmt::Debug
{
    /// Which backend, for logs and `/health`.
    fn backend(&self) -> &'static str;
    /// A named secret, created (random, 32 bytes hex) on first use; every replica reads the same.
    async fn secret(&self, name: &str) -> Result<String>;
    /// One round trip to the database (`SELECT 1`): whether it answers (`GET /ready`).
    async fn ping(&self) -> Result<()>;
}

/// The store's own table: named secrets (e.g. the cursor-signing key).
const SCHEMA: &[&str] =
    &["CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)"];

/// Every area's tables, in the order they are made (accounts first: the others refer to
/// `users`).
const MIGRATIONS: &[&[&str]] = &[
    accounts::SCHEMA,
    SCHEMA,
    windows::SCHEMA,
    receipts::SCHEMA,
    sign_in::SCHEMA,
    usage::SCHEMA,
    billing::SCHEMA,
];

/// Rows per statement of a batched write: far below both backends' bind-parameter limits
/// (SQLite 32,766, PostgreSQL 65,535) at five binds a row.
const BATCH_ROWS: usize = 1_000;

/// Maps a pool type to its database (lets the areas' macros name the row type).
pub trait PoolDb {
    type Db: sqlx::Database;
    /// Opens a transaction that reads before it writes. SQLite's plain `BEGIN` takes the
    /// write lock only at the first write, and refuses it at once, without waiting out the
    /// busy timeout, when another connection committed since the transaction's first read;
    /// `BEGIN IMMEDIATE` takes the lock first, waiting as any write does. PostgreSQL locks
    /// rows as they are written, so a plain `BEGIN` serves.
    const BEGIN_WRITE: &'static str;
}
impl PoolDb for sqlx::SqlitePool {
    type Db = sqlx::Sqlite;
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
}
impl PoolDb for sqlx::PgPool {
    type Db = sqlx::Postgres;
    const BEGIN_WRITE: &'static str = "BEGIN";
}

/// A plan name read back from the store.
fn plan_of(s: &str) -> Result<Plan> {
    Plan::from_str(s).map_err(|()| Error::Config(format!("stored plan {s:?} is unknown")))
}

/// An optional instant stored as microseconds.
fn instant(v: Option<i64>) -> Option<asof_engine::Instant> {
    v.map(asof_engine::Instant::from_micros)
}

/// The store over one backend's pool; each area file implements its trait for both.
macro_rules! sql_state_store {
    ($name:ident, $pool:ty, $backend:literal, $begin:literal, $migration_lock:expr) => {
        #[derive(Debug, Clone)]
        pub struct $name {
            pool: $pool,
        }

        impl $name {
            /// The store over `pool`, its tables made if absent: in one transaction, under
            /// the backend's migration lock, so replicas starting at once on an empty
            /// database wait for the first instead of racing it (PostgreSQL refuses the
            /// second `CREATE TABLE IF NOT EXISTS` of a table being created) and a start cut
            /// short leaves no half-made schema.
            pub async fn new(pool: $pool) -> Result<Self> {
                let mut tx = pool.begin_with($begin).await?;
                let lock: Option<&'static str> = $migration_lock;
                if let Some(lock) = lock {
                    sqlx::query(lock).execute(&mut *tx).await?;
                }
                for statement in MIGRATIONS.iter().copied().flatten() {
                    sqlx::query(*statement).execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok($name { pool })
            }
        }

        #[async_trait]
        impl StateStore for $name {
            fn backend(&self) -> &'static str {
                $backend
            }

            async fn ping(&self) -> Result<()> {
                crate::obs::store_op("ping", async {
                    sqlx::query("SELECT 1").execute(&self.pool).await?;
                    Ok(())
                })
                .await
            }

            async fn secret(&self, name: &str) -> Result<String> {
                crate::obs::store_op("secret", async {
                    let mut b = [0u8; 32];
                    rand::rng().fill_bytes(&mut b);
                    // First writer wins; every replica then reads the same value.
                    sqlx::query("INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING").bind(name).bind(hex::encode(b)).execute(&self.pool).await?;
                    let r = sqlx::query("SELECT value FROM secrets WHERE name = $1").bind(name).fetch_one(&self.pool).await?;
                    Ok(r.try_get("value")?)
                })
                .await
            }
        }
    };
}

// The migration lock: SQLite's `BEGIN IMMEDIATE` takes the database's write lock at once (a
// deferred transaction whose first statements only read would be refused, not made to wait,
// once another process wrote); PostgreSQL's is a transaction-scoped advisory lock (released
// at commit) under a fixed key, the same on every replica.
sql_state_store!(
    SqliteStore,
    sqlx::SqlitePool,
    "sqlite",
    "BEGIN IMMEDIATE",
    None
);
sql_state_store!(
    PgStore,
    sqlx::PgPool,
    "postgres",
    "BEGIN",
    Some("SELECT pg_advisory_xact_lock(7305982514)")
);

/// How long a request waits for a state-store connection before it is refused.
pub const STORE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Opens the state store a URL names: `postgres://...` (its `options`, e.g. a `search_path`,
/// apply to every connection) or `sqlite://path` (created if absent).
pub async fn open(url: &str) -> Result<Arc<dyn StateStore>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        // A request waits at most STORE_WAIT for a connection: with the database down or
        // every connection busy it gets `503 state_unavailable` then, never a hang.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(STORE_WAIT)
            .connect(url)
            .await?;
        return Ok(Arc::new(PgStore::new(pool).await?));
    }
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    if let Some(dir) = std::path::Path::new(path).parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
        .busy_timeout(std::time::Duration::from_secs(5))
        // Room for every row a batched statement returns (`hit_many`'s counts): a connection's
        // worker thread hands rows over through a channel of this size and waits whenever it
        // is full. At sqlx's 50, a flush of 512 buckets' rate windows woke that thread once
        // per row after the first 50, two context switches a row, four flushes a second:
        // 0.2 a keyed request, preempting the serving thread (BENCHMARKS.md, "The state
        // store's rows in one hand-over").
        .row_buffer_size(BATCH_ROWS);
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(opts)
        .await?;
    Ok(Arc::new(SqliteStore::new(pool).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_store_method_is_timed_under_its_own_name_and_its_failures_counted() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        // A current-thread runtime: the store's futures record on this thread, where the
        // local recorder is installed.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        metrics::with_local_recorder(&recorder, || {
            rt.block_on(async {
                let url = format!("sqlite://{}/state.db", dir.path().display());
                let store = open(&url).await.unwrap();
                store.ping().await.unwrap();
                assert!(store.key_by_hash("no such key").await.unwrap().is_none());
                let pool = sqlx::sqlite::SqlitePoolOptions::new()
                    .connect(&url)
                    .await
                    .unwrap();
                let closed = SqliteStore::new(pool.clone()).await.unwrap();
                pool.close().await;
                assert!(closed.ping().await.is_err());
            })
        });
        let text = handle.render();
        for op in ["ping", "key_by_hash"] {
            assert!(
                text.contains(&format!(
                    "asof_state_operation_duration_seconds_count{{operation=\"{op}\"}}"
                )),
                "{text}"
            );
        }
        assert!(
            text.contains("asof_state_errors_total{operation=\"ping\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("asof_state_errors_total{operation=\"key_by_hash\"}"),
            "{text}"
        );
    }
}
