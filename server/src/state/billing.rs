//! What the state store keeps about paying users: the attestations checkouts recorded, each
//! user's processor customer and subscription, the notifications received (by event id, so a
//! replay changes nothing), and the history of plan changes (who, when, which event).

use crate::plan::Plan;

/// One verified processor notification, read into what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingEvent {
    /// The processor's event id: a notification is applied at most once.
    pub id: String,
    /// The event type (`customer.subscription.updated`, ...).
    pub kind: String,
    /// When the processor created the event (unix seconds): an event older than the last one
    /// applied to a subscription is recorded but changes nothing (deliveries arrive out of
    /// order).
    pub created: i64,
    /// When this service received it (microseconds since the epoch).
    pub received_at: i64,
    /// What it does, or why it does nothing.
    pub effect: Result<BillingEffect, &'static str>,
}

/// What an event does to a customer's subscription and plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingEffect {
    pub customer: String,
    /// The user id the service put in the checkout or subscription metadata; only used when
    /// the customer is not yet known here.
    pub user_hint: Option<String>,
    pub subscription: Option<String>,
    /// The subscription's status after this event (`active`, `past_due`, `canceled`, ...).
    pub status: String,
    /// The plan the user is on after this event; `None` keeps the current one.
    pub plan: Option<Plan>,
    /// A completed checkout: the subscription it names replaces any earlier one.
    pub starts_subscription: bool,
}

/// What applying an event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BillingOutcome {
    /// Applied to `user_id`, now on `plan`; `changed` when the plan moved.
    Applied {
        user_id: String,
        plan: Plan,
        changed: bool,
    },
    /// This event id was received before: nothing changed.
    Replayed,
    /// Recorded; does nothing (the reason).
    Ignored(String),
}

impl BillingOutcome {
    /// The outcome's wire name (`applied`, `replayed`, `ignored`).
    pub fn as_str(&self) -> &'static str {
        match self {
            BillingOutcome::Applied { .. } => "applied",
            BillingOutcome::Replayed => "replayed",
            BillingOutcome::Ignored(_) => "ignored",
        }
    }
}

/// A user's subscription as the last applied event left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRecord {
    pub user_id: String,
    pub customer_id: String,
    pub subscription_id: Option<String>,
    pub status: String,
    pub plan: Plan,
    /// `created` of the last event applied.
    pub event_created: i64,
    pub updated_at: asof_engine::Instant,
}

impl SubscriptionRecord {
    /// Whether the user pays now (a new checkout would make a second subscription).
    pub fn is_live(&self) -> bool {
        self.subscription_id.is_some()
            && matches!(self.status.as_str(), "active" | "trialing" | "past_due")
    }
}

/// One change of a user's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanChange {
    pub user_id: String,
    pub at: asof_engine::Instant,
    pub from: Plan,
    pub to: Plan,
    /// The processor event that made it.
    pub event_id: String,
    pub event_type: String,
}

/// One internal-use attestation, as recorded before a checkout is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    pub id: String,
    pub user_id: String,
    pub at: asof_engine::Instant,
    pub plan: Plan,
    /// Which wording was affirmed (`crate::billing::ATTESTATION_VERSION`) and its sha256.
    pub statement_version: String,
    pub statement_sha256: String,
}
