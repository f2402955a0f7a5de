//! Paying for a plan: the payment processor's settings, the internal-use attestation a
//! checkout records, and how a processor's price ids map to plans. Outbound calls are in
//! [`processor`], the inbound signed notifications in [`webhook`], the routes in
//! `crate::routes::billing`.
//!
//! The processor speaks Stripe's API shape (form-encoded requests, Bearer secret key,
//! `Stripe-Signature` on webhooks), so a Stripe account works as configured and so does any
//! processor that speaks the same shape. Billing is all or nothing: with any setting missing,
//! checkout, portal and webhook answer `503 billing_not_configured`.

pub mod processor;
pub mod webhook;

use sha2::{Digest, Sha256};

use crate::error::{ApiError, Error, Result};
use crate::plan::Plan;
use crate::state::{StateStore, User};

/// Version of the internal-use statement a checkout attests to; stored with each attestation
/// so the text a user agreed to can always be told apart from later wording.
pub const ATTESTATION_VERSION: &str = "2026-11-25";

/// The statement `attestation: true` affirms (shown on the account page beside the box).
pub const ATTESTATION_TEXT: &str = "I will use asof data for internal purposes only: I will not \
redistribute it, or data derived from it, to third parties. Commercial redistribution needs a \
separate license.";

/// sha256 hex of [`ATTESTATION_TEXT`], stored with each attestation.
pub fn attestation_sha256() -> String {
    hex::encode(Sha256::digest(ATTESTATION_TEXT.as_bytes()))
}

/// How long a webhook's signed timestamp stays acceptable, either side of now (Stripe's
/// libraries default to the same five minutes).
pub const WEBHOOK_TOLERANCE_SECS: i64 = 300;

/// Billing settings of one server process (flags and environment of `asof serve`).
#[derive(Clone, Default)]
pub struct BillingConfig {
    /// The processor's API base, e.g. `https://api.stripe.com`.
    pub api_url: Option<String>,
    /// The processor's secret API key (`sk_live_...`).
    pub secret_key: Option<String>,
    /// The webhook endpoint's signing secret (`whsec_...`).
    pub webhook_secret: Option<String>,
    /// The processor's price id of each plan, cheapest first (`Plan::ALL` order).
    pub prices: [Option<String>; 3],
    /// Where to ask for a commercial license (a URL or `mailto:`); default: the site's
    /// licensing section.
    pub license_contact: Option<String>,
}

/// Secrets never reach a log through `{:?}`.
impl std::fmt::Debug for BillingConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BillingConfig")
            .field("api_url", &self.api_url)
            .field("missing", &self.missing())
            .finish_non_exhaustive()
    }
}

impl BillingConfig {
    /// The settings not given, by flag name (never a value).
    pub fn missing(&self) -> Vec<&'static str> {
        let mut m = Vec::new();
        let blank = |v: &Option<String>| v.as_deref().is_none_or(|s| s.trim().is_empty());
        if blank(&self.api_url) {
            m.push("--billing-api-url");
        }
        if blank(&self.secret_key) {
            m.push("--billing-secret-key");
        }
        if blank(&self.webhook_secret) {
            m.push("--billing-webhook-secret");
        }
        for (plan, price) in Plan::ALL.iter().zip(&self.prices) {
            if blank(price) {
                m.push(match plan {
                    Plan::Researcher => "--billing-price-researcher",
                    Plan::Power => "--billing-price-power",
                    Plan::Desk => "--billing-price-desk",
                });
            }
        }
        m
    }
}

/// Billing as configured: every setting present.
pub struct Billing {
    processor: processor::Processor,
    webhook_secret: String,
    prices: [String; 3],
}

impl std::fmt::Debug for Billing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Billing")
            .field("processor", &self.processor)
            .finish_non_exhaustive()
    }
}

impl Billing {
    /// Billing from its settings: `Ok(None)` when any is missing (see
    /// [`BillingConfig::missing`]), an error when one is malformed.
    pub fn from_config(cfg: &BillingConfig) -> Result<Option<Billing>> {
        if !cfg.missing().is_empty() {
            return Ok(None);
        }
        let get = |v: &Option<String>| v.as_deref().unwrap_or_default().trim().to_owned();
        let prices = [
            get(&cfg.prices[0]),
            get(&cfg.prices[1]),
            get(&cfg.prices[2]),
        ];
        if prices[0] == prices[1] || prices[1] == prices[2] || prices[0] == prices[2] {
            return Err(Error::Config(
                "each plan needs a price id of its own (--billing-price-*)".into(),
            ));
        }
        Ok(Some(Billing {
            processor: processor::Processor::new(&get(&cfg.api_url), &get(&cfg.secret_key))?,
            webhook_secret: get(&cfg.webhook_secret),
            prices,
        }))
    }

    pub fn processor(&self) -> &processor::Processor {
        &self.processor
    }

    pub fn webhook_secret(&self) -> &str {
        &self.webhook_secret
    }

    /// The processor's price id of `plan`.
    pub fn price_of(&self, plan: Plan) -> &str {
        &self.prices[plan as usize]
    }

    /// The plan a price id stands for; `None` for a price this service does not sell.
    pub fn plan_of_price(&self, price: &str) -> Option<Plan> {
        Plan::ALL.into_iter().find(|p| self.price_of(*p) == price)
    }

    /// Starts a checkout of `plan` for `user`, who affirmed the internal-use statement: `409
    /// subscription_active` when the user already pays; else the attestation is recorded
    /// first (with the statement's version and hash), then the processor's checkout session
    /// is created for the user's customer, returning to `origin`'s account page either way.
    pub async fn start_checkout(
        &self,
        store: &dyn StateStore,
        user: &User,
        plan: Plan,
        origin: &str,
    ) -> Result<StartedCheckout, ApiError> {
        if let Some(sub) = store.subscription(&user.id).await?
            && sub.is_live()
        {
            return Err(ApiError::SubscriptionActive {
                plan: sub.plan.to_string(),
            });
        }
        let now = asof_engine::Instant::now();
        let attestation = store
            .record_attestation(
                &user.id,
                plan,
                ATTESTATION_VERSION,
                &attestation_sha256(),
                now,
            )
            .await?;
        let customer = self.customer_of(store, user).await?;
        let session = self
            .processor
            .create_checkout_session(&processor::CheckoutRequest {
                customer: &customer,
                price: self.price_of(plan),
                user_id: &user.id,
                plan: plan.as_str(),
                attestation_id: &attestation.id,
                success_url: &format!("{origin}/account?checkout=success"),
                cancel_url: &format!("{origin}/account?checkout=cancelled"),
                idempotency_key: &format!("checkout-{}", attestation.id),
            })
            .await?;
        tracing::info!(user_id = %user.id, %plan, checkout = %session.id, "checkout started");
        Ok(StartedCheckout {
            session,
            attestation_id: attestation.id,
        })
    }

    /// Opens the processor's customer portal for `user`, returning to `origin`'s account page.
    pub async fn open_portal(
        &self,
        store: &dyn StateStore,
        user: &User,
        origin: &str,
    ) -> Result<processor::PortalSession, ApiError> {
        let customer = self.customer_of(store, user).await?;
        Ok(self
            .processor
            .create_portal_session(&customer, &format!("{origin}/account"))
            .await?)
    }

    /// The user's customer at the processor: the one kept, else a new one (its creation is
    /// idempotent per user at the processor, and the store keeps the first of two racing).
    async fn customer_of(&self, store: &dyn StateStore, user: &User) -> Result<String, ApiError> {
        if let Some(c) = store.billing_customer(&user.id).await? {
            return Ok(c);
        }
        let made = self
            .processor
            .create_customer(&user.email, &user.id, &format!("customer-{}", user.id))
            .await?;
        Ok(store
            .put_billing_customer(&user.id, &made.id, asof_engine::Instant::now())
            .await?)
    }
}

/// A checkout [`Billing::start_checkout`] started: the processor's session and the recorded
/// attestation's id.
#[derive(Debug)]
pub struct StartedCheckout {
    pub session: processor::CheckoutSession,
    pub attestation_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> BillingConfig {
        BillingConfig {
            api_url: Some("http://127.0.0.1:9".into()),
            secret_key: Some("sk_test_x".into()),
            webhook_secret: Some("whsec_x".into()),
            prices: [
                Some("price_r".into()),
                Some("price_p".into()),
                Some("price_d".into()),
            ],
            license_contact: None,
        }
    }

    #[test]
    fn every_missing_setting_is_named_by_its_flag_and_billing_stays_off() {
        assert!(full().missing().is_empty());
        let mut c = full();
        c.secret_key = Some("  ".into());
        c.prices[2] = None;
        assert_eq!(
            c.missing(),
            ["--billing-secret-key", "--billing-price-desk"]
        );
        assert!(Billing::from_config(&c).unwrap().is_none());
    }

    #[test]
    fn prices_map_to_plans_both_ways_and_must_differ() {
        let b = Billing::from_config(&full()).unwrap().unwrap();
        for p in Plan::ALL {
            assert_eq!(b.plan_of_price(b.price_of(p)), Some(p));
        }
        assert_eq!(b.plan_of_price("price_other"), None);
        let mut c = full();
        c.prices[1] = Some("price_r".into());
        assert!(Billing::from_config(&c).is_err());
    }

    #[test]
    fn debug_output_never_shows_a_secret() {
        let c = full();
        let b = Billing::from_config(&c).unwrap().unwrap();
        for s in [format!("{c:?}"), format!("{b:?}")] {
            assert!(!s.contains("sk_test_x") && !s.contains("whsec_x"), "{s}");
        }
    }
}
