//! Users and their API keys as the state store keeps them: a key only by its secret's hash,
//! with when it was last used (written behind with the usage counts).

use async_trait::async_trait;
use rand::RngCore;
use sqlx::Row;

use super::{BATCH_ROWS, PgStore, PoolDb, SqliteStore, instant, plan_of};
use crate::error::Result;
use crate::plan::Plan;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub email: String,
    pub plan: Plan,
}

/// An API key as stored: never the secret, only its hash and display prefix.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct KeyRecord {
    pub id: String,
    #[serde(skip)]
    pub user_id: String,
    pub name: String,
    pub prefix: String,
    pub created_at: asof_engine::Instant,
    pub expires_at: Option<asof_engine::Instant>,
    pub revoked_at: Option<asof_engine::Instant>,
    /// When the key last answered a request, to within a second (written behind with the
    /// usage counts); null when never used. Only key listings carry it.
    pub last_used_at: Option<asof_engine::Instant>,
}

pub const KEY_PREFIX: &str = "svc_live_";

/// sha256 hex of a raw key: what the store keeps and looks keys up by.
pub fn hash_key(raw: &str) -> String {
    asof_cursor::sha256_hex(raw.as_bytes())
}

/// A new raw key: `svc_live_` + 32 random bytes, base62-free hex (64 chars).
pub fn new_raw_key() -> String {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    format!("{KEY_PREFIX}{}", hex::encode(b))
}

/// A new key of `user_id` made at `now` and its raw secret (stored by hash only).
fn new_key(
    user_id: &str,
    name: &str,
    expires_at: Option<asof_engine::Instant>,
    now: asof_engine::Instant,
) -> (KeyRecord, String) {
    let raw = new_raw_key();
    let rec = KeyRecord {
        id: format!("key_{}", uuid::Uuid::new_v4().simple()),
        user_id: user_id.to_owned(),
        name: name.to_owned(),
        prefix: raw[..KEY_PREFIX.len() + 6].to_owned(),
        created_at: now,
        expires_at,
        revoked_at: None,
        last_used_at: None,
    };
    (rec, raw)
}

/// The statement that stores a key made by [`new_key`].
const INSERT_KEY: &str = "INSERT INTO api_keys (id, user_id, name, prefix, secret_hash, created_at, expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)";

/// The tables of this area, in SQL both backends accept; each statement is idempotent.
pub(super) const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, plan TEXT NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id), name TEXT NOT NULL, prefix TEXT NOT NULL, secret_hash TEXT NOT NULL UNIQUE, created_at BIGINT NOT NULL, expires_at BIGINT, revoked_at BIGINT)",
    "CREATE INDEX IF NOT EXISTS api_keys_user ON api_keys (user_id)",
    "CREATE TABLE IF NOT EXISTS key_last_used (key_id TEXT PRIMARY KEY, at BIGINT NOT NULL)",
];

/// Users and their keys.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Creates the user if needed; an existing user's plan is set to `plan`.
    async fn upsert_user(&self, email: &str, plan: Plan) -> Result<User>;
    /// Creates a key and returns it with its raw secret (shown once, stored hashed).
    async fn create_key(
        &self,
        user_id: &str,
        name: &str,
        expires_at: Option<asof_engine::Instant>,
    ) -> Result<(KeyRecord, String)>;
    /// Creates a key unless the user already holds `cap` live keys (not revoked, not expired at
    /// `now`): the count and the insert in one transaction that first takes the user's row
    /// (a write, so PostgreSQL locks the row and SQLite the database), so requests racing for
    /// the last place cannot both get it. `None` when the cap is reached.
    async fn create_key_within(
        &self,
        user_id: &str,
        name: &str,
        expires_at: Option<asof_engine::Instant>,
        cap: u32,
        now: asof_engine::Instant,
    ) -> Result<Option<(KeyRecord, String)>>;
    /// The key and owner for a raw secret's hash, whatever its state (caller checks expiry).
    async fn key_by_hash(&self, hash: &str) -> Result<Option<(KeyRecord, User)>>;
    /// A user's keys, oldest first, with when each was last used.
    async fn list_keys(&self, user_id: &str) -> Result<Vec<KeyRecord>>;
    /// Records that these keys answered requests at `at` (never moves a key's time back).
    async fn keys_used(&self, key_ids: &[String], at: asof_engine::Instant) -> Result<()>;
    /// Revokes a key of this user; false when the user has no such key.
    async fn revoke_key(
        &self,
        user_id: &str,
        key_id: &str,
        at: asof_engine::Instant,
    ) -> Result<bool>;
}

/// The area's SQL, once for both backends (see `PoolDb`).
macro_rules! account_sql {
    ($name:ident, $pool:ty) => {
        impl $name {
            fn key_from_row(r: &<<$pool as PoolDb>::Db as sqlx::Database>::Row) -> Result<KeyRecord> {
                Ok(KeyRecord {
                    id: r.try_get("id")?,
                    user_id: r.try_get("user_id")?,
                    name: r.try_get("name")?,
                    prefix: r.try_get("prefix")?,
                    created_at: asof_engine::Instant::from_micros(r.try_get("created_at")?),
                    expires_at: instant(r.try_get("expires_at")?),
                    revoked_at: instant(r.try_get("revoked_at")?),
                    last_used_at: None,
                })
            }
        }

        #[async_trait]
        impl AccountStore for $name {
            async fn upsert_user(&self, email: &str, plan: Plan) -> Result<User> {
                crate::obs::store_op("upsert_user", async {
                    let id = format!("usr_{}", uuid::Uuid::new_v4().simple());
                    let now = asof_engine::Instant::now().micros();
                    sqlx::query("INSERT INTO users (id, email, plan, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (email) DO UPDATE SET plan = excluded.plan")
                        .bind(&id)
                        .bind(email)
                        .bind(plan.as_str())
                        .bind(now)
                        .execute(&self.pool)
                        .await?;
                    let r = sqlx::query("SELECT id, email, plan FROM users WHERE email = $1").bind(email).fetch_one(&self.pool).await?;
                    let plan: String = r.try_get("plan")?;
                    Ok(User { id: r.try_get("id")?, email: r.try_get("email")?, plan: plan_of(&plan)? })
                })
                .await
            }

            async fn create_key(&self, user_id: &str, name: &str, expires_at: Option<asof_engine::Instant>) -> Result<(KeyRecord, String)> {
                crate::obs::store_op("create_key", async {
                    let (rec, raw) = new_key(user_id, name, expires_at, asof_engine::Instant::now());
                    sqlx::query(INSERT_KEY)
                        .bind(&rec.id)
                        .bind(&rec.user_id)
                        .bind(&rec.name)
                        .bind(&rec.prefix)
                        .bind(hash_key(&raw))
                        .bind(rec.created_at.micros())
                        .bind(rec.expires_at.map(asof_engine::Instant::micros))
                        .execute(&self.pool)
                        .await?;
                    Ok((rec, raw))
                })
                .await
            }

            async fn create_key_within(&self, user_id: &str, name: &str, expires_at: Option<asof_engine::Instant>, cap: u32, now: asof_engine::Instant) -> Result<Option<(KeyRecord, String)>> {
                crate::obs::store_op("create_key_within", async {
                    let mut tx = self.pool.begin().await?;
                    // The lock: a write to the user's row before anything is read.
                    sqlx::query("UPDATE users SET id = id WHERE id = $1").bind(user_id).execute(&mut *tx).await?;
                    let live: i64 = sqlx::query_scalar("SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)")
                        .bind(user_id)
                        .bind(now.micros())
                        .fetch_one(&mut *tx)
                        .await?;
                    if live >= i64::from(cap) {
                        return Ok(None);
                    }
                    let (rec, raw) = new_key(user_id, name, expires_at, now);
                    sqlx::query(INSERT_KEY)
                        .bind(&rec.id)
                        .bind(&rec.user_id)
                        .bind(&rec.name)
                        .bind(&rec.prefix)
                        .bind(hash_key(&raw))
                        .bind(rec.created_at.micros())
                        .bind(rec.expires_at.map(asof_engine::Instant::micros))
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    Ok(Some((rec, raw)))
                })
                .await
            }

            async fn key_by_hash(&self, hash: &str) -> Result<Option<(KeyRecord, User)>> {
                crate::obs::store_op("key_by_hash", async {
                    let row = sqlx::query(
                        "SELECT k.id, k.user_id, k.name, k.prefix, k.created_at, k.expires_at, k.revoked_at, u.email, u.plan \
                         FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.secret_hash = $1",
                    )
                    .bind(hash)
                    .fetch_optional(&self.pool)
                    .await?;
                    let Some(r) = row else { return Ok(None) };
                    let key = Self::key_from_row(&r)?;
                    let plan: String = r.try_get("plan")?;
                    let user = User { id: key.user_id.clone(), email: r.try_get("email")?, plan: plan_of(&plan)? };
                    Ok(Some((key, user)))
                })
                .await
            }

            async fn list_keys(&self, user_id: &str) -> Result<Vec<KeyRecord>> {
                crate::obs::store_op("list_keys", async {
                    let rows = sqlx::query(
                        "SELECT k.id, k.user_id, k.name, k.prefix, k.created_at, k.expires_at, k.revoked_at, u.at AS last_used_at \
                         FROM api_keys k LEFT JOIN key_last_used u ON u.key_id = k.id WHERE k.user_id = $1 ORDER BY k.created_at, k.id",
                    )
                    .bind(user_id)
                    .fetch_all(&self.pool)
                    .await?;
                    rows.iter()
                        .map(|r| {
                            let mut k = Self::key_from_row(r)?;
                            k.last_used_at = instant(r.try_get("last_used_at")?);
                            Ok(k)
                        })
                        .collect()
                })
                .await
            }

            async fn keys_used(&self, key_ids: &[String], at: asof_engine::Instant) -> Result<()> {
                crate::obs::store_op("keys_used", async {
                    if key_ids.is_empty() {
                        return Ok(());
                    }
                    let mut ids: Vec<&String> = key_ids.iter().collect();
                    ids.sort_unstable();
                    ids.dedup();
                    let mut tx = self.pool.begin().await?;
                    for chunk in ids.chunks(BATCH_ROWS) {
                        let mut q = sqlx::QueryBuilder::<<$pool as PoolDb>::Db>::new("INSERT INTO key_last_used (key_id, at) ");
                        q.push_values(chunk, |mut row, id| {
                            row.push_bind(id.as_str()).push_bind(at.micros());
                        });
                        q.push(" ON CONFLICT (key_id) DO UPDATE SET at = excluded.at WHERE key_last_used.at < excluded.at");
                        q.build().execute(&mut *tx).await?;
                    }
                    tx.commit().await?;
                    Ok(())
                })
                .await
            }

            async fn revoke_key(&self, user_id: &str, key_id: &str, at: asof_engine::Instant) -> Result<bool> {
                crate::obs::store_op("revoke_key", async {
                    let done = sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND user_id = $3")
                        .bind(at.micros())
                        .bind(key_id)
                        .bind(user_id)
                        .execute(&self.pool)
                        .await?;
                    Ok(done.rows_affected() > 0)
                })
                .await
            }
        }
    };
}

account_sql!(SqliteStore, sqlx::SqlitePool);
account_sql!(PgStore, sqlx::PgPool);
