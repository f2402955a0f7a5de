//! State the service keeps besides the corpus: users, plans, API keys, the cursor-signing secret,
//! rate-limit windows and audit receipts. One trait, two backends (SQLite by default, PostgreSQL for replicas),
//! generated from one body of SQL so they cannot drift; one test suite runs against both.

use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::state::billing::{
    Attestation, BillingEvent, BillingOutcome, PlanChange, SubscriptionRecord,
};

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

/// A signed-in browser session as stored: never its id, only the id's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub user: User,
    /// How the user signed in: `email`, `provider_a` or `provider_b`.
    pub via: String,
    pub created_at: asof_engine::Instant,
    pub last_seen_at: asof_engine::Instant,
    /// The absolute end, whatever the activity.
    pub expires_at: asof_engine::Instant,
    pub ended_at: Option<asof_engine::Instant>,
}

/// A sign-in with an identity provider: the ID token's issuer and subject, which name one
/// person at one provider for good (an e-mail address can change hands, a subject cannot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub issuer: String,
    pub subject: String,
}

/// A sign-in link as stored: its token's hash, never the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInLink {
    pub token_hash: String,
    /// The address it signs in (lower-cased).
    pub email: String,
    /// The hash of the binding cookie of the browser that asked for the link: only that
    /// browser can use it (a link mailed to an attacker and opened by a victim signs nobody in).
    pub browser_hash: String,
    /// The provider identity the link joins to the address's account once used (a second
    /// sign-in way, admitted only after the address is proven), if any.
    pub joins: Option<Identity>,
    pub created_at: asof_engine::Instant,
    pub expires_at: asof_engine::Instant,
}

impl SignInLink {
    /// A link that signs `email` in and joins nothing.
    pub fn new(
        token_hash: &str,
        email: &str,
        browser_hash: &str,
        created_at: asof_engine::Instant,
        expires_at: asof_engine::Instant,
    ) -> Self {
        SignInLink {
            token_hash: token_hash.to_owned(),
            email: email.to_owned(),
            browser_hash: browser_hash.to_owned(),
            joins: None,
            created_at,
            expires_at,
        }
    }
}

/// What a sign-in link's token is worth to a browser, or what using it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    /// Live for this browser (and, when used, now spent): sign this address in, joining
    /// `joins` to its account first.
    SignIn {
        email: String,
        joins: Option<Identity>,
    },
    /// Live, but asked for by another browser: this one cannot use it (it stays live).
    OtherBrowser,
    /// The token was used before (a link works once).
    Used,
    Expired,
    Unknown,
}

/// What signing in with a provider identity found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentitySignIn {
    /// The identity belongs to this user (it signed in with it before).
    Known(User),
    /// Neither the identity nor its address had an account: this one was made for both.
    New(User),
    /// The address belongs to an account that never signed in with this identity: it joins
    /// only once the address is proven (a link mailed to it).
    EmailTaken,
}

/// sha256 hex of a raw key: what the store keeps and looks keys up by.
pub fn hash_key(raw: &str) -> String {
    hex::encode(Sha256::digest(raw.as_bytes()))
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

/// Requests counted in one fixed rate window: `(bucket, window_start, n)`.
pub type WindowHits = (String, i64, i64);

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

/// Rows per statement of a batched write: far below both backends' bind-parameter limits
/// (SQLite 32,766, PostgreSQL 65,535) at five binds a row.
const BATCH_ROWS: usize = 1_000;

#[async_trait]
pub trait StateStore: Send + Sync + std::fmt::Debug {
    /// Which backend, for logs and `/health`.
    fn backend(&self) -> &'static str;
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
    /// A named secret, created (random, 32 bytes hex) on first use; every replica reads the same.
    async fn secret(&self, name: &str) -> Result<String>;
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

    /// The user signing in with this verified address: created on first sign-in with the
    /// `researcher` plan; an existing user keeps its plan.
    async fn sign_in_user(&self, email: &str) -> Result<User>;
    /// Stores a sign-in link (its token by hash only).
    async fn put_sign_in_link(&self, link: &SignInLink) -> Result<()>;
    /// What the link with this token hash is worth to the browser whose binding cookie hashes
    /// to `browser_hash`, at `now`; changes nothing (a mail scanner fetching the link spends
    /// nothing).
    async fn sign_in_link(
        &self,
        token_hash: &str,
        browser_hash: &str,
        now: asof_engine::Instant,
    ) -> Result<LinkState>;
    /// Uses a sign-in link: atomically, so of two requests with the same live token exactly
    /// one gets [`LinkState::SignIn`]; a link asked for by another browser is not spent.
    async fn use_sign_in_link(
        &self,
        token_hash: &str,
        browser_hash: &str,
        now: asof_engine::Instant,
    ) -> Result<LinkState>;
    /// The user signing in with a provider identity whose verified address is `email`: the
    /// identity's user when it signed in before; a new `researcher` account holding both when
    /// neither is known; [`IdentitySignIn::EmailTaken`] when the address has an account the
    /// identity is not joined to (nothing is changed then).
    async fn identity_sign_in(
        &self,
        identity: &Identity,
        email: &str,
        now: asof_engine::Instant,
    ) -> Result<IdentitySignIn>;
    /// Joins a provider identity to a user (after the user's address was proven); joining one
    /// already joined changes nothing.
    async fn add_identity(
        &self,
        identity: &Identity,
        user_id: &str,
        now: asof_engine::Instant,
    ) -> Result<()>;
    /// The provider identities joined to a user, oldest first.
    async fn identities(&self, user_id: &str) -> Result<Vec<Identity>>;
    /// Starts a session (stored by its id's hash) for `user_id`, ending at `expires_at` at the
    /// latest.
    async fn create_session(
        &self,
        id_hash: &str,
        user_id: &str,
        via: &str,
        now: asof_engine::Instant,
        expires_at: asof_engine::Instant,
    ) -> Result<()>;
    /// The session with this id hash and its user, whatever its state (the caller checks the
    /// lifetimes).
    async fn session(&self, id_hash: &str) -> Result<Option<SessionRecord>>;
    /// Records activity on a session (what the idle lifetime counts from).
    async fn touch_session(&self, id_hash: &str, at: asof_engine::Instant) -> Result<()>;
    /// Ends a session; false when there was no live one.
    async fn end_session(&self, id_hash: &str, at: asof_engine::Instant) -> Result<bool>;
    /// Drops sign-in tokens and sessions that ended or expired before `before`.
    async fn purge_sign_ins(&self, before: asof_engine::Instant) -> Result<u64>;
    /// Counts one page view of `path` on UTC day `day` (`YYYY-MM-DD`).
    async fn count_page_view(&self, path: &str, day: &str) -> Result<()>;
    /// Page views per `(path, day)` for days in `[from_day, to_day]`, by day then path.
    async fn page_views(&self, from_day: &str, to_day: &str) -> Result<Vec<(String, String, i64)>>;
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

    /// Records an internal-use attestation (before its checkout is created); append-only.
    async fn record_attestation(
        &self,
        user_id: &str,
        plan: Plan,
        statement_version: &str,
        statement_sha256: &str,
        at: asof_engine::Instant,
    ) -> Result<Attestation>;
    /// A user's attestations, oldest first.
    async fn attestations(&self, user_id: &str) -> Result<Vec<Attestation>>;
    /// The processor's customer id of a user, if one was made.
    async fn billing_customer(&self, user_id: &str) -> Result<Option<String>>;
    /// Keeps `customer_id` as the user's customer unless one is kept already; returns the one
    /// kept (of two racing checkouts, both then use the first).
    async fn put_billing_customer(
        &self,
        user_id: &str,
        customer_id: &str,
        at: asof_engine::Instant,
    ) -> Result<String>;
    /// Applies one verified notification, all or nothing: recorded by event id (a second
    /// delivery is [`BillingOutcome::Replayed`] and changes nothing), then the user's
    /// subscription and plan moved as its effect says, with the plan change in the history.
    /// An event older than the last one applied to the user's subscription, or about another
    /// subscription than the current one, is recorded and ignored.
    async fn apply_billing_event(&self, e: &BillingEvent) -> Result<BillingOutcome>;
    /// A user's subscription, as the last applied event left it.
    async fn subscription(&self, user_id: &str) -> Result<Option<SubscriptionRecord>>;
    /// A user's plan changes, oldest first.
    async fn plan_changes(&self, user_id: &str) -> Result<Vec<PlanChange>>;
}

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

/// The schema, in SQL both backends accept. Applied in order; each statement is idempotent.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, plan TEXT NOT NULL, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id), name TEXT NOT NULL, prefix TEXT NOT NULL, secret_hash TEXT NOT NULL UNIQUE, created_at BIGINT NOT NULL, expires_at BIGINT, revoked_at BIGINT)",
    "CREATE INDEX IF NOT EXISTS api_keys_user ON api_keys (user_id)",
    "CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS rate_windows (bucket TEXT NOT NULL, window_start BIGINT NOT NULL, count BIGINT NOT NULL, PRIMARY KEY (bucket, window_start))",
    "CREATE TABLE IF NOT EXISTS audit_receipts (key_id TEXT NOT NULL, ts_ms BIGINT NOT NULL, request_id TEXT NOT NULL, user_id TEXT NOT NULL, route TEXT NOT NULL, params_digest TEXT NOT NULL, corpus_version TEXT NOT NULL, envelope_sha256 TEXT NOT NULL, PRIMARY KEY (key_id, ts_ms, request_id))",
    // Sign-in links and sessions: only hashes of their secrets are kept. A link is bound to
    // the browser that asked for it (`browser_hash`) and may join a provider identity to the
    // address's account; `login_tokens` held unbound links (none outlives 15 minutes).
    "DROP TABLE IF EXISTS login_tokens",
    "CREATE TABLE IF NOT EXISTS sign_in_links (token_hash TEXT PRIMARY KEY, email TEXT NOT NULL, browser_hash TEXT NOT NULL, join_issuer TEXT, join_subject TEXT, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, used_at BIGINT)",
    // Provider identities by (issuer, subject): what a provider sign-in finds its account by.
    "CREATE TABLE IF NOT EXISTS identities (issuer TEXT NOT NULL, subject TEXT NOT NULL, user_id TEXT NOT NULL REFERENCES users(id), created_at BIGINT NOT NULL, PRIMARY KEY (issuer, subject))",
    "CREATE INDEX IF NOT EXISTS identities_user ON identities (user_id)",
    "CREATE TABLE IF NOT EXISTS sessions (id_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id), via TEXT NOT NULL, created_at BIGINT NOT NULL, last_seen_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, ended_at BIGINT)",
    "CREATE INDEX IF NOT EXISTS sessions_user ON sessions (user_id)",
    "CREATE TABLE IF NOT EXISTS page_views (path TEXT NOT NULL, day TEXT NOT NULL, count BIGINT NOT NULL, PRIMARY KEY (path, day))",
    "CREATE TABLE IF NOT EXISTS key_last_used (key_id TEXT PRIMARY KEY, at BIGINT NOT NULL)",
    // Usage per user, key, UTC day and route group; kept apart from the rate windows' purge.
    "CREATE TABLE IF NOT EXISTS usage_days (user_id TEXT NOT NULL, key_id TEXT NOT NULL, day TEXT NOT NULL, route_group TEXT NOT NULL, requests BIGINT NOT NULL, PRIMARY KEY (user_id, day, key_id, route_group))",
    // Billing: attestations (append-only), each user's processor customer and subscription,
    // every notification by event id (idempotency), and the history of plan changes.
    "CREATE TABLE IF NOT EXISTS billing_attestations (id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id), at BIGINT NOT NULL, plan TEXT NOT NULL, statement_version TEXT NOT NULL, statement_sha256 TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS billing_attestations_user ON billing_attestations (user_id)",
    "CREATE TABLE IF NOT EXISTS billing_customers (user_id TEXT PRIMARY KEY REFERENCES users(id), customer_id TEXT NOT NULL UNIQUE, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS subscriptions (user_id TEXT PRIMARY KEY REFERENCES users(id), customer_id TEXT NOT NULL, subscription_id TEXT, status TEXT NOT NULL, plan TEXT NOT NULL, event_created BIGINT NOT NULL, updated_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS billing_events (event_id TEXT PRIMARY KEY, event_type TEXT NOT NULL, created BIGINT NOT NULL, received_at BIGINT NOT NULL, user_id TEXT, outcome TEXT NOT NULL, detail TEXT)",
    "CREATE TABLE IF NOT EXISTS plan_changes (user_id TEXT NOT NULL REFERENCES users(id), at BIGINT NOT NULL, from_plan TEXT NOT NULL, to_plan TEXT NOT NULL, event_id TEXT NOT NULL, event_type TEXT NOT NULL, PRIMARY KEY (user_id, at, event_id))",
];

fn plan_of(s: &str) -> Result<Plan> {
    Plan::from_str(s).map_err(|()| Error::Config(format!("stored plan {s:?} is unknown")))
}

/// A stored link's state when it is not live for the asking browser (`None`: it is).
fn link_state(used: bool, expired: bool, same_browser: bool) -> Option<LinkState> {
    if used {
        Some(LinkState::Used)
    } else if expired {
        Some(LinkState::Expired)
    } else if !same_browser {
        Some(LinkState::OtherBrowser)
    } else {
        None
    }
}

fn identity_of(issuer: Option<String>, subject: Option<String>) -> Option<Identity> {
    Some(Identity {
        issuer: issuer?,
        subject: subject?,
    })
}

fn instant(v: Option<i64>) -> Option<asof_engine::Instant> {
    v.map(asof_engine::Instant::from_micros)
}

macro_rules! sql_state_store {
    ($name:ident, $pool:ty, $backend:literal) => {
        #[derive(Debug, Clone)]
        pub struct $name {
            pool: $pool,
        }

        impl $name {
            pub async fn migrate(&self) -> Result<()> {
                for m in MIGRATIONS {
                    sqlx::query(*m).execute(&self.pool).await?;
                }
                Ok(())
            }

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
        impl StateStore for $name {
            fn backend(&self) -> &'static str {
                $backend
            }

            async fn upsert_user(&self, email: &str, plan: Plan) -> Result<User> {
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
                Ok(User { id: r.try_get("id")?, email: r.try_get("email")?, plan: Plan::from_str(&plan).map_err(|()| Error::Config(format!("stored plan {plan:?} is unknown")))? })
            }

            async fn create_key(&self, user_id: &str, name: &str, expires_at: Option<asof_engine::Instant>) -> Result<(KeyRecord, String)> {
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
            }

            async fn create_key_within(&self, user_id: &str, name: &str, expires_at: Option<asof_engine::Instant>, cap: u32, now: asof_engine::Instant) -> Result<Option<(KeyRecord, String)>> {
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
            }

            async fn key_by_hash(&self, hash: &str) -> Result<Option<(KeyRecord, User)>> {
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
                let user = User { id: key.user_id.clone(), email: r.try_get("email")?, plan: Plan::from_str(&plan).map_err(|()| Error::Config(format!("stored plan {plan:?} is unknown")))? };
                Ok(Some((key, user)))
            }

            async fn list_keys(&self, user_id: &str) -> Result<Vec<KeyRecord>> {
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
            }

            async fn keys_used(&self, key_ids: &[String], at: asof_engine::Instant) -> Result<()> {
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
            }

            async fn revoke_key(&self, user_id: &str, key_id: &str, at: asof_engine::Instant) -> Result<bool> {
                let done = sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND user_id = $3")
                    .bind(at.micros())
                    .bind(key_id)
                    .bind(user_id)
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn secret(&self, name: &str) -> Result<String> {
                let mut b = [0u8; 32];
                rand::rng().fill_bytes(&mut b);
                // First writer wins; every replica then reads the same value.
                sqlx::query("INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING").bind(name).bind(hex::encode(b)).execute(&self.pool).await?;
                let r = sqlx::query("SELECT value FROM secrets WHERE name = $1").bind(name).fetch_one(&self.pool).await?;
                Ok(r.try_get("value")?)
            }

            async fn hit_n(&self, bucket: &str, window_start: i64, n: i64) -> Result<i64> {
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
            }

            async fn hit_many(&self, hits: &[WindowHits]) -> Result<Vec<WindowHits>> {
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
            }

            async fn purge_windows(&self, before: i64) -> Result<u64> {
                Ok(sqlx::query("DELETE FROM rate_windows WHERE window_start < $1").bind(before).execute(&self.pool).await?.rows_affected())
            }

            async fn append_receipt(&self, r: &StoredReceipt) -> Result<()> {
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
            }

            async fn receipts(&self, key_id: &str, from_ms: i64, to_ms: i64, after: Option<(i64, String)>, limit: i64) -> Result<Vec<StoredReceipt>> {
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
            }

            async fn receipt_count(&self, key_id: &str) -> Result<i64> {
                let r = sqlx::query("SELECT COUNT(*) AS n FROM audit_receipts WHERE key_id = $1").bind(key_id).fetch_one(&self.pool).await?;
                Ok(r.try_get("n")?)
            }

            async fn sign_in_user(&self, email: &str) -> Result<User> {
                let id = format!("usr_{}", uuid::Uuid::new_v4().simple());
                let now = asof_engine::Instant::now().micros();
                sqlx::query("INSERT INTO users (id, email, plan, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (email) DO NOTHING")
                    .bind(&id)
                    .bind(email)
                    .bind(Plan::Researcher.as_str())
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                let r = sqlx::query("SELECT id, email, plan FROM users WHERE email = $1").bind(email).fetch_one(&self.pool).await?;
                let plan: String = r.try_get("plan")?;
                Ok(User { id: r.try_get("id")?, email: r.try_get("email")?, plan: Plan::from_str(&plan).map_err(|()| Error::Config(format!("stored plan {plan:?} is unknown")))? })
            }

            async fn put_sign_in_link(&self, link: &SignInLink) -> Result<()> {
                sqlx::query("INSERT INTO sign_in_links (token_hash, email, browser_hash, join_issuer, join_subject, created_at, expires_at, used_at) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)")
                    .bind(&link.token_hash)
                    .bind(&link.email)
                    .bind(&link.browser_hash)
                    .bind(link.joins.as_ref().map(|i| i.issuer.as_str()))
                    .bind(link.joins.as_ref().map(|i| i.subject.as_str()))
                    .bind(link.created_at.micros())
                    .bind(link.expires_at.micros())
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn sign_in_link(&self, token_hash: &str, browser_hash: &str, now: asof_engine::Instant) -> Result<LinkState> {
                let r = sqlx::query("SELECT email, browser_hash, join_issuer, join_subject, expires_at, used_at FROM sign_in_links WHERE token_hash = $1")
                    .bind(token_hash)
                    .fetch_optional(&self.pool)
                    .await?;
                let Some(r) = r else { return Ok(LinkState::Unknown) };
                let state = link_state(
                    r.try_get::<Option<i64>, _>("used_at")?.is_some(),
                    r.try_get::<i64, _>("expires_at")? <= now.micros(),
                    r.try_get::<String, _>("browser_hash")? == browser_hash,
                );
                Ok(match state {
                    Some(s) => s,
                    None => LinkState::SignIn {
                        email: r.try_get("email")?,
                        joins: identity_of(r.try_get("join_issuer")?, r.try_get("join_subject")?),
                    },
                })
            }

            async fn use_sign_in_link(&self, token_hash: &str, browser_hash: &str, now: asof_engine::Instant) -> Result<LinkState> {
                // One statement marks the link used only if it is live and this browser's: two
                // requests racing with one link cannot both sign in.
                let used = sqlx::query("UPDATE sign_in_links SET used_at = $2 WHERE token_hash = $1 AND browser_hash = $3 AND used_at IS NULL AND expires_at > $2 RETURNING email, join_issuer, join_subject")
                    .bind(token_hash)
                    .bind(now.micros())
                    .bind(browser_hash)
                    .fetch_optional(&self.pool)
                    .await?;
                if let Some(r) = used {
                    return Ok(LinkState::SignIn {
                        email: r.try_get("email")?,
                        joins: identity_of(r.try_get("join_issuer")?, r.try_get("join_subject")?),
                    });
                }
                // Not spent: say why, as a look would (it cannot be live for this browser now).
                Ok(match self.sign_in_link(token_hash, browser_hash, now).await? {
                    LinkState::SignIn { .. } => LinkState::Used,
                    other => other,
                })
            }

            async fn identity_sign_in(&self, identity: &Identity, email: &str, now: asof_engine::Instant) -> Result<IdentitySignIn> {
                // Reads, then writes: see `PoolDb::BEGIN_WRITE`.
                let mut tx = self.pool.begin_with(<$pool as PoolDb>::BEGIN_WRITE).await?;
                let known = sqlx::query("SELECT u.id, u.email, u.plan FROM identities i JOIN users u ON u.id = i.user_id WHERE i.issuer = $1 AND i.subject = $2")
                    .bind(&identity.issuer)
                    .bind(&identity.subject)
                    .fetch_optional(&mut *tx)
                    .await?;
                if let Some(r) = known {
                    let plan: String = r.try_get("plan")?;
                    return Ok(IdentitySignIn::Known(User { id: r.try_get("id")?, email: r.try_get("email")?, plan: plan_of(&plan)? }));
                }
                let id = format!("usr_{}", uuid::Uuid::new_v4().simple());
                let made = sqlx::query("INSERT INTO users (id, email, plan, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (email) DO NOTHING")
                    .bind(&id)
                    .bind(email)
                    .bind(Plan::Researcher.as_str())
                    .bind(now.micros())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if made == 0 {
                    return Ok(IdentitySignIn::EmailTaken);
                }
                sqlx::query("INSERT INTO identities (issuer, subject, user_id, created_at) VALUES ($1, $2, $3, $4)")
                    .bind(&identity.issuer)
                    .bind(&identity.subject)
                    .bind(&id)
                    .bind(now.micros())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(IdentitySignIn::New(User { id, email: email.to_owned(), plan: Plan::Researcher }))
            }

            async fn add_identity(&self, identity: &Identity, user_id: &str, now: asof_engine::Instant) -> Result<()> {
                sqlx::query("INSERT INTO identities (issuer, subject, user_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (issuer, subject) DO NOTHING")
                    .bind(&identity.issuer)
                    .bind(&identity.subject)
                    .bind(user_id)
                    .bind(now.micros())
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn identities(&self, user_id: &str) -> Result<Vec<Identity>> {
                let rows = sqlx::query("SELECT issuer, subject FROM identities WHERE user_id = $1 ORDER BY created_at, issuer, subject")
                    .bind(user_id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(|r| Ok(Identity { issuer: r.try_get("issuer")?, subject: r.try_get("subject")? })).collect()
            }

            async fn create_session(&self, id_hash: &str, user_id: &str, via: &str, now: asof_engine::Instant, expires_at: asof_engine::Instant) -> Result<()> {
                sqlx::query("INSERT INTO sessions (id_hash, user_id, via, created_at, last_seen_at, expires_at, ended_at) VALUES ($1, $2, $3, $4, $4, $5, NULL)")
                    .bind(id_hash)
                    .bind(user_id)
                    .bind(via)
                    .bind(now.micros())
                    .bind(expires_at.micros())
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn session(&self, id_hash: &str) -> Result<Option<SessionRecord>> {
                let row = sqlx::query(
                    "SELECT s.user_id, s.via, s.created_at, s.last_seen_at, s.expires_at, s.ended_at, u.email, u.plan \
                     FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = $1",
                )
                .bind(id_hash)
                .fetch_optional(&self.pool)
                .await?;
                let Some(r) = row else { return Ok(None) };
                let plan: String = r.try_get("plan")?;
                Ok(Some(SessionRecord {
                    user: User { id: r.try_get("user_id")?, email: r.try_get("email")?, plan: Plan::from_str(&plan).map_err(|()| Error::Config(format!("stored plan {plan:?} is unknown")))? },
                    via: r.try_get("via")?,
                    created_at: asof_engine::Instant::from_micros(r.try_get("created_at")?),
                    last_seen_at: asof_engine::Instant::from_micros(r.try_get("last_seen_at")?),
                    expires_at: asof_engine::Instant::from_micros(r.try_get("expires_at")?),
                    ended_at: instant(r.try_get("ended_at")?),
                }))
            }

            async fn touch_session(&self, id_hash: &str, at: asof_engine::Instant) -> Result<()> {
                sqlx::query("UPDATE sessions SET last_seen_at = $2 WHERE id_hash = $1 AND last_seen_at < $2").bind(id_hash).bind(at.micros()).execute(&self.pool).await?;
                Ok(())
            }

            async fn end_session(&self, id_hash: &str, at: asof_engine::Instant) -> Result<bool> {
                let done = sqlx::query("UPDATE sessions SET ended_at = $2 WHERE id_hash = $1 AND ended_at IS NULL").bind(id_hash).bind(at.micros()).execute(&self.pool).await?;
                Ok(done.rows_affected() > 0)
            }

            async fn purge_sign_ins(&self, before: asof_engine::Instant) -> Result<u64> {
                let t = sqlx::query("DELETE FROM sign_in_links WHERE expires_at < $1").bind(before.micros()).execute(&self.pool).await?.rows_affected();
                let s = sqlx::query("DELETE FROM sessions WHERE expires_at < $1 OR ended_at < $1").bind(before.micros()).execute(&self.pool).await?.rows_affected();
                Ok(t + s)
            }

            async fn count_page_view(&self, path: &str, day: &str) -> Result<()> {
                sqlx::query("INSERT INTO page_views (path, day, count) VALUES ($1, $2, 1) ON CONFLICT (path, day) DO UPDATE SET count = page_views.count + 1")
                    .bind(path)
                    .bind(day)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn add_usage(&self, counts: &[UsageCount]) -> Result<()> {
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
            }

            async fn usage(&self, user_id: &str, from_day: &str, to_day: &str) -> Result<Vec<(String, String, String, i64)>> {
                let rows = sqlx::query("SELECT day, key_id, route_group, requests FROM usage_days WHERE user_id = $1 AND day >= $2 AND day <= $3 ORDER BY day, key_id, route_group")
                    .bind(user_id)
                    .bind(from_day)
                    .bind(to_day)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(|r| Ok((r.try_get("day")?, r.try_get("key_id")?, r.try_get("route_group")?, r.try_get("requests")?))).collect()
            }

            async fn record_attestation(&self, user_id: &str, plan: Plan, statement_version: &str, statement_sha256: &str, at: asof_engine::Instant) -> Result<Attestation> {
                let a = Attestation {
                    id: format!("att_{}", uuid::Uuid::new_v4().simple()),
                    user_id: user_id.to_owned(),
                    at,
                    plan,
                    statement_version: statement_version.to_owned(),
                    statement_sha256: statement_sha256.to_owned(),
                };
                sqlx::query("INSERT INTO billing_attestations (id, user_id, at, plan, statement_version, statement_sha256) VALUES ($1, $2, $3, $4, $5, $6)")
                    .bind(&a.id)
                    .bind(&a.user_id)
                    .bind(a.at.micros())
                    .bind(a.plan.as_str())
                    .bind(&a.statement_version)
                    .bind(&a.statement_sha256)
                    .execute(&self.pool)
                    .await?;
                Ok(a)
            }

            async fn attestations(&self, user_id: &str) -> Result<Vec<Attestation>> {
                let rows = sqlx::query("SELECT id, user_id, at, plan, statement_version, statement_sha256 FROM billing_attestations WHERE user_id = $1 ORDER BY at, id")
                    .bind(user_id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok(Attestation {
                            id: r.try_get("id")?,
                            user_id: r.try_get("user_id")?,
                            at: asof_engine::Instant::from_micros(r.try_get("at")?),
                            plan: plan_of(&r.try_get::<String, _>("plan")?)?,
                            statement_version: r.try_get("statement_version")?,
                            statement_sha256: r.try_get("statement_sha256")?,
                        })
                    })
                    .collect()
            }

            async fn billing_customer(&self, user_id: &str) -> Result<Option<String>> {
                let r = sqlx::query("SELECT customer_id FROM billing_customers WHERE user_id = $1").bind(user_id).fetch_optional(&self.pool).await?;
                r.map(|r| Ok(r.try_get("customer_id")?)).transpose()
            }

            async fn put_billing_customer(&self, user_id: &str, customer_id: &str, at: asof_engine::Instant) -> Result<String> {
                sqlx::query("INSERT INTO billing_customers (user_id, customer_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (user_id) DO NOTHING")
                    .bind(user_id)
                    .bind(customer_id)
                    .bind(at.micros())
                    .execute(&self.pool)
                    .await?;
                let r = sqlx::query("SELECT customer_id FROM billing_customers WHERE user_id = $1").bind(user_id).fetch_one(&self.pool).await?;
                Ok(r.try_get("customer_id")?)
            }

            async fn apply_billing_event(&self, e: &BillingEvent) -> Result<BillingOutcome> {
                let mut tx = self.pool.begin().await?;
                // The event id first: of two deliveries of one event, one inserts it and the
                // other (waiting on the row, or after it) sees it taken and changes nothing.
                let fresh = sqlx::query("INSERT INTO billing_events (event_id, event_type, created, received_at, user_id, outcome, detail) VALUES ($1, $2, $3, $4, NULL, 'pending', NULL) ON CONFLICT (event_id) DO NOTHING")
                    .bind(&e.id)
                    .bind(&e.kind)
                    .bind(e.created)
                    .bind(e.received_at)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
                    == 1;
                if !fresh {
                    tx.rollback().await?;
                    return Ok(BillingOutcome::Replayed);
                }
                let outcome = 'outcome: {
                    let fx = match &e.effect {
                        Err(reason) => break 'outcome BillingOutcome::Ignored((*reason).to_owned()),
                        Ok(fx) => fx,
                    };
                    let known = sqlx::query("SELECT user_id FROM billing_customers WHERE customer_id = $1").bind(&fx.customer).fetch_optional(&mut *tx).await?;
                    let user_id: String = match known {
                        Some(r) => r.try_get("user_id")?,
                        None => {
                            // A customer made elsewhere than this service's checkout: accepted
                            // only for a user this service named in the metadata and who has
                            // no customer yet.
                            let Some(hint) = &fx.user_hint else {
                                break 'outcome BillingOutcome::Ignored("a customer this service does not know".into());
                            };
                            let taken = sqlx::query("INSERT INTO billing_customers (user_id, customer_id, created_at) SELECT id, $2, $3 FROM users WHERE id = $1 ON CONFLICT DO NOTHING")
                                .bind(hint)
                                .bind(&fx.customer)
                                .bind(e.received_at)
                                .execute(&mut *tx)
                                .await?
                                .rows_affected();
                            if taken == 0 {
                                break 'outcome BillingOutcome::Ignored("a customer this service does not know".into());
                            }
                            hint.clone()
                        }
                    };
                    // Writing the user's row first holds it (PostgreSQL) until commit, so two
                    // events of one user apply one after the other.
                    let current = sqlx::query("UPDATE users SET plan = plan WHERE id = $1 RETURNING plan").bind(&user_id).fetch_one(&mut *tx).await?;
                    let current = plan_of(&current.try_get::<String, _>("plan")?)?;
                    let sub = sqlx::query("SELECT subscription_id, event_created FROM subscriptions WHERE user_id = $1").bind(&user_id).fetch_optional(&mut *tx).await?;
                    let (held, last_created): (Option<String>, i64) = match &sub {
                        Some(r) => (r.try_get("subscription_id")?, r.try_get("event_created")?),
                        None => (None, i64::MIN),
                    };
                    if e.created < last_created {
                        break 'outcome BillingOutcome::Ignored("older than the last event applied to this subscription".into());
                    }
                    if !fx.starts_subscription
                        && let (Some(h), Some(s)) = (&held, &fx.subscription)
                        && h != s
                    {
                        break 'outcome BillingOutcome::Ignored("about another subscription than the user's current one".into());
                    }
                    let subscription = if fx.starts_subscription { fx.subscription.clone().or(held) } else { held.or(fx.subscription.clone()) };
                    let plan = fx.plan.unwrap_or(current);
                    sqlx::query(
                        "INSERT INTO subscriptions (user_id, customer_id, subscription_id, status, plan, event_created, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                         ON CONFLICT (user_id) DO UPDATE SET customer_id = excluded.customer_id, subscription_id = excluded.subscription_id, status = excluded.status, plan = excluded.plan, event_created = excluded.event_created, updated_at = excluded.updated_at",
                    )
                    .bind(&user_id)
                    .bind(&fx.customer)
                    .bind(&subscription)
                    .bind(&fx.status)
                    .bind(plan.as_str())
                    .bind(e.created)
                    .bind(e.received_at)
                    .execute(&mut *tx)
                    .await?;
                    if plan != current {
                        sqlx::query("UPDATE users SET plan = $2 WHERE id = $1").bind(&user_id).bind(plan.as_str()).execute(&mut *tx).await?;
                        sqlx::query("INSERT INTO plan_changes (user_id, at, from_plan, to_plan, event_id, event_type) VALUES ($1, $2, $3, $4, $5, $6)")
                            .bind(&user_id)
                            .bind(e.received_at)
                            .bind(current.as_str())
                            .bind(plan.as_str())
                            .bind(&e.id)
                            .bind(&e.kind)
                            .execute(&mut *tx)
                            .await?;
                    }
                    BillingOutcome::Applied { user_id, plan, changed: plan != current }
                };
                let (user, detail) = match &outcome {
                    BillingOutcome::Applied { user_id, plan, .. } => (Some(user_id.clone()), Some(plan.as_str().to_owned())),
                    BillingOutcome::Ignored(why) => (None, Some(why.clone())),
                    BillingOutcome::Replayed => (None, None),
                };
                sqlx::query("UPDATE billing_events SET outcome = $2, user_id = $3, detail = $4 WHERE event_id = $1")
                    .bind(&e.id)
                    .bind(outcome.as_str())
                    .bind(user)
                    .bind(detail)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(outcome)
            }

            async fn subscription(&self, user_id: &str) -> Result<Option<SubscriptionRecord>> {
                let r = sqlx::query("SELECT user_id, customer_id, subscription_id, status, plan, event_created, updated_at FROM subscriptions WHERE user_id = $1").bind(user_id).fetch_optional(&self.pool).await?;
                r.map(|r| {
                    Ok(SubscriptionRecord {
                        user_id: r.try_get("user_id")?,
                        customer_id: r.try_get("customer_id")?,
                        subscription_id: r.try_get("subscription_id")?,
                        status: r.try_get("status")?,
                        plan: plan_of(&r.try_get::<String, _>("plan")?)?,
                        event_created: r.try_get("event_created")?,
                        updated_at: asof_engine::Instant::from_micros(r.try_get("updated_at")?),
                    })
                })
                .transpose()
            }

            async fn plan_changes(&self, user_id: &str) -> Result<Vec<PlanChange>> {
                let rows = sqlx::query("SELECT user_id, at, from_plan, to_plan, event_id, event_type FROM plan_changes WHERE user_id = $1 ORDER BY at, event_id").bind(user_id).fetch_all(&self.pool).await?;
                rows.iter()
                    .map(|r| {
                        Ok(PlanChange {
                            user_id: r.try_get("user_id")?,
                            at: asof_engine::Instant::from_micros(r.try_get("at")?),
                            from: plan_of(&r.try_get::<String, _>("from_plan")?)?,
                            to: plan_of(&r.try_get::<String, _>("to_plan")?)?,
                            event_id: r.try_get("event_id")?,
                            event_type: r.try_get("event_type")?,
                        })
                    })
                    .collect()
            }

            async fn page_views(&self, from_day: &str, to_day: &str) -> Result<Vec<(String, String, i64)>> {
                let rows = sqlx::query("SELECT path, day, count FROM page_views WHERE day >= $1 AND day <= $2 ORDER BY day, path")
                    .bind(from_day)
                    .bind(to_day)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(|r| Ok((r.try_get("path")?, r.try_get("day")?, r.try_get("count")?))).collect()
            }
        }
    };
}

/// Maps a pool type to its database (lets the macro name the row type).
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

sql_state_store!(SqliteStore, sqlx::SqlitePool, "sqlite");
sql_state_store!(PgStore, sqlx::PgPool, "postgres");

/// How long a request waits for a state-store connection before it is refused.
pub const STORE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Opens the state store a URL names: `postgres://...` or `sqlite://path` (created if absent).
pub async fn open(url: &str) -> Result<Arc<dyn StateStore>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        // A request waits at most STORE_WAIT for a connection: with the database down or
        // every connection busy it gets `503 state_unavailable` then, never a hang.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(STORE_WAIT)
            .connect(url)
            .await?;
        let s = PgStore { pool };
        s.migrate().await?;
        return Ok(Arc::new(s));
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
        .busy_timeout(std::time::Duration::from_secs(5));
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(opts)
        .await?;
    let s = SqliteStore { pool };
    s.migrate().await?;
    Ok(Arc::new(s))
}

/// Opens PostgreSQL inside a fresh schema (tests: isolation on a shared server).
pub async fn open_postgres_schema(url: &str, schema: &str) -> Result<Arc<dyn StateStore>> {
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS \"{}\"",
        schema.replace('"', "")
    )))
    .execute(&admin)
    .await?;
    admin.close().await;
    let opts: sqlx::postgres::PgConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| Error::Config(e.to_string()))?;
    let opts = opts.options([("search_path", schema)]);
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect_with(opts)
        .await?;
    let s = PgStore { pool };
    s.migrate().await?;
    Ok(Arc::new(s))
}

/// Drops a test schema made by [`open_postgres_schema`].
pub async fn drop_postgres_schema(url: &str, schema: &str) -> Result<()> {
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
        schema.replace('"', "")
    )))
    .execute(&admin)
    .await?;
    Ok(())
}
