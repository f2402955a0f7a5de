//! Signing in as the state store keeps it: e-mail links bound to the browser that asked,
//! provider identities by issuer and subject, and browser sessions, each secret by hash only.

use async_trait::async_trait;
use sqlx::Row;

use super::accounts::User;
use super::{PgStore, PoolDb, SqliteStore, instant, plan_of};
use crate::error::Result;
use crate::plan::Plan;

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

/// The tables of this area, in SQL both backends accept; each statement is idempotent.
pub(super) const SCHEMA: &[&str] = &[
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
];

/// Sign-in links, provider identities and sessions.
#[async_trait]
pub trait SignInStore: Send + Sync {
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
}

/// The area's SQL, once for both backends (see `PoolDb`).
macro_rules! sign_in_sql {
    ($name:ident, $pool:ty) => {
        #[async_trait]
        impl SignInStore for $name {
            async fn sign_in_user(&self, email: &str) -> Result<User> {
                crate::obs::store_op("sign_in_user", async {
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
                    Ok(User { id: r.try_get("id")?, email: r.try_get("email")?, plan: plan_of(&plan)? })
                })
                .await
            }

            async fn put_sign_in_link(&self, link: &SignInLink) -> Result<()> {
                crate::obs::store_op("put_sign_in_link", async {
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
                })
                .await
            }

            async fn sign_in_link(&self, token_hash: &str, browser_hash: &str, now: asof_engine::Instant) -> Result<LinkState> {
                crate::obs::store_op("sign_in_link", async {
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
                })
                .await
            }

            async fn use_sign_in_link(&self, token_hash: &str, browser_hash: &str, now: asof_engine::Instant) -> Result<LinkState> {
                crate::obs::store_op("use_sign_in_link", async {
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
                })
                .await
            }

            async fn identity_sign_in(&self, identity: &Identity, email: &str, now: asof_engine::Instant) -> Result<IdentitySignIn> {
                crate::obs::store_op("identity_sign_in", async {
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
                })
                .await
            }

            async fn add_identity(&self, identity: &Identity, user_id: &str, now: asof_engine::Instant) -> Result<()> {
                crate::obs::store_op("add_identity", async {
                    sqlx::query("INSERT INTO identities (issuer, subject, user_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (issuer, subject) DO NOTHING")
                        .bind(&identity.issuer)
                        .bind(&identity.subject)
                        .bind(user_id)
                        .bind(now.micros())
                        .execute(&self.pool)
                        .await?;
                    Ok(())
                })
                .await
            }

            async fn identities(&self, user_id: &str) -> Result<Vec<Identity>> {
                crate::obs::store_op("identities", async {
                    let rows = sqlx::query("SELECT issuer, subject FROM identities WHERE user_id = $1 ORDER BY created_at, issuer, subject")
                        .bind(user_id)
                        .fetch_all(&self.pool)
                        .await?;
                    rows.iter().map(|r| Ok(Identity { issuer: r.try_get("issuer")?, subject: r.try_get("subject")? })).collect()
                })
                .await
            }

            async fn create_session(&self, id_hash: &str, user_id: &str, via: &str, now: asof_engine::Instant, expires_at: asof_engine::Instant) -> Result<()> {
                crate::obs::store_op("create_session", async {
                    sqlx::query("INSERT INTO sessions (id_hash, user_id, via, created_at, last_seen_at, expires_at, ended_at) VALUES ($1, $2, $3, $4, $4, $5, NULL)")
                        .bind(id_hash)
                        .bind(user_id)
                        .bind(via)
                        .bind(now.micros())
                        .bind(expires_at.micros())
                        .execute(&self.pool)
                        .await?;
                    Ok(())
                })
                .await
            }

            async fn session(&self, id_hash: &str) -> Result<Option<SessionRecord>> {
                crate::obs::store_op("session", async {
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
                        user: User { id: r.try_get("user_id")?, email: r.try_get("email")?, plan: plan_of(&plan)? },
                        via: r.try_get("via")?,
                        created_at: asof_engine::Instant::from_micros(r.try_get("created_at")?),
                        last_seen_at: asof_engine::Instant::from_micros(r.try_get("last_seen_at")?),
                        expires_at: asof_engine::Instant::from_micros(r.try_get("expires_at")?),
                        ended_at: instant(r.try_get("ended_at")?),
                    }))
                })
                .await
            }

            async fn touch_session(&self, id_hash: &str, at: asof_engine::Instant) -> Result<()> {
                crate::obs::store_op("touch_session", async {
                    sqlx::query("UPDATE sessions SET last_seen_at = $2 WHERE id_hash = $1 AND last_seen_at < $2").bind(id_hash).bind(at.micros()).execute(&self.pool).await?;
                    Ok(())
                })
                .await
            }

            async fn end_session(&self, id_hash: &str, at: asof_engine::Instant) -> Result<bool> {
                crate::obs::store_op("end_session", async {
                    let done = sqlx::query("UPDATE sessions SET ended_at = $2 WHERE id_hash = $1 AND ended_at IS NULL").bind(id_hash).bind(at.micros()).execute(&self.pool).await?;
                    Ok(done.rows_affected() > 0)
                })
                .await
            }

            async fn purge_sign_ins(&self, before: asof_engine::Instant) -> Result<u64> {
                crate::obs::store_op("purge_sign_ins", async {
                    let t = sqlx::query("DELETE FROM sign_in_links WHERE expires_at < $1").bind(before.micros()).execute(&self.pool).await?.rows_affected();
                    let s = sqlx::query("DELETE FROM sessions WHERE expires_at < $1 OR ended_at < $1").bind(before.micros()).execute(&self.pool).await?.rows_affected();
                    Ok(t + s)
                })
                .await
            }
        }
    };
}

sign_in_sql!(SqliteStore, sqlx::SqlitePool);
sign_in_sql!(PgStore, sqlx::PgPool);
