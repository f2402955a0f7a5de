//! Billing as the state store keeps it: attestations (append-only), each user's processor
//! customer and subscription, every notification by event id, and the plan-change history.

use async_trait::async_trait;
use sqlx::Row;

use super::{PgStore, SqliteStore, plan_of};
use crate::error::Result;
use crate::plan::Plan;
use crate::state::billing::{
    Attestation, BillingEvent, BillingOutcome, PlanChange, SubscriptionRecord,
};

/// The tables of this area, in SQL both backends accept; each statement is idempotent.
pub(super) const SCHEMA: &[&str] = &[
    // Billing: attestations (append-only), each user's processor customer and subscription,
    // every notification by event id (idempotency), and the history of plan changes.
    "CREATE TABLE IF NOT EXISTS billing_attestations (id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id), at BIGINT NOT NULL, plan TEXT NOT NULL, statement_version TEXT NOT NULL, statement_sha256 TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS billing_attestations_user ON billing_attestations (user_id)",
    "CREATE TABLE IF NOT EXISTS billing_customers (user_id TEXT PRIMARY KEY REFERENCES users(id), customer_id TEXT NOT NULL UNIQUE, created_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS subscriptions (user_id TEXT PRIMARY KEY REFERENCES users(id), customer_id TEXT NOT NULL, subscription_id TEXT, status TEXT NOT NULL, plan TEXT NOT NULL, event_created BIGINT NOT NULL, updated_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS billing_events (event_id TEXT PRIMARY KEY, event_type TEXT NOT NULL, created BIGINT NOT NULL, received_at BIGINT NOT NULL, user_id TEXT, outcome TEXT NOT NULL, detail TEXT)",
    "CREATE TABLE IF NOT EXISTS plan_changes (user_id TEXT NOT NULL REFERENCES users(id), at BIGINT NOT NULL, from_plan TEXT NOT NULL, to_plan TEXT NOT NULL, event_id TEXT NOT NULL, event_type TEXT NOT NULL, PRIMARY KEY (user_id, at, event_id))",
];

/// Attestations, customers, subscriptions and the notifications that move them.
#[async_trait]
pub trait BillingStore: Send + Sync {
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

/// The area's SQL, once for both backends (see `PoolDb`).
macro_rules! billing_sql {
    ($name:ident, $pool:ty) => {
        #[async_trait]
        impl BillingStore for $name {
            async fn record_attestation(&self, user_id: &str, plan: Plan, statement_version: &str, statement_sha256: &str, at: asof_engine::Instant) -> Result<Attestation> {
                crate::obs::store_op("record_attestation", async {
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
                })
                .await
            }

            async fn attestations(&self, user_id: &str) -> Result<Vec<Attestation>> {
                crate::obs::store_op("attestations", async {
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
                })
                .await
            }

            async fn billing_customer(&self, user_id: &str) -> Result<Option<String>> {
                crate::obs::store_op("billing_customer", async {
                    let r = sqlx::query("SELECT customer_id FROM billing_customers WHERE user_id = $1").bind(user_id).fetch_optional(&self.pool).await?;
                    r.map(|r| Ok(r.try_get("customer_id")?)).transpose()
                })
                .await
            }

            async fn put_billing_customer(&self, user_id: &str, customer_id: &str, at: asof_engine::Instant) -> Result<String> {
                crate::obs::store_op("put_billing_customer", async {
                    sqlx::query("INSERT INTO billing_customers (user_id, customer_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (user_id) DO NOTHING")
                        .bind(user_id)
                        .bind(customer_id)
                        .bind(at.micros())
                        .execute(&self.pool)
                        .await?;
                    let r = sqlx::query("SELECT customer_id FROM billing_customers WHERE user_id = $1").bind(user_id).fetch_one(&self.pool).await?;
                    Ok(r.try_get("customer_id")?)
                })
                .await
            }

            async fn apply_billing_event(&self, e: &BillingEvent) -> Result<BillingOutcome> {
                crate::obs::store_op("apply_billing_event", async {
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
                })
                .await
            }

            async fn subscription(&self, user_id: &str) -> Result<Option<SubscriptionRecord>> {
                crate::obs::store_op("subscription", async {
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
                })
                .await
            }

            async fn plan_changes(&self, user_id: &str) -> Result<Vec<PlanChange>> {
                crate::obs::store_op("plan_changes", async {
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
                })
                .await
            }
        }
    };
}

billing_sql!(SqliteStore, sqlx::SqlitePool);
billing_sql!(PgStore, sqlx::PgPool);
