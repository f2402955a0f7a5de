//! Billing routes: checkout with the internal-use attestation and the customer portal (session
//! cookie), usage per day, key and route group (key or cookie), and the payment processor's
//! signed notifications (no credential but the signature), which change plans.

use asof_engine::{Day, Instant};
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use serde::Serialize;

use crate::billing::{ATTESTATION_TEXT, ATTESTATION_VERSION, webhook};
use crate::error::ApiError;
use crate::http::body::{FromJson, Json, boolean, required_string};
use crate::http::envelope::Envelope;
use crate::http::params::{NoQuery, Q};
use crate::http::{AppState, Ctx, Principal, Reply, ok};
use crate::plan::Plan;
use crate::signin::session::Session;
use crate::state::BillingOutcome;

/// Days `/v1/billing/usage` reaches back, today included.
pub const USAGE_DAYS: i32 = 31;

/// One element of `/v1/billing/usage`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UsageDay {
    /// The UTC day (`YYYY-MM-DD`).
    pub date: String,
    /// The key the requests were made with; null for requests made with the session cookie.
    pub key_id: Option<String>,
    /// The route group: the path segment after `/v1/` (`news`, `files`, `stream`, `keys`, ...).
    pub route_group: String,
    /// Requests the rate limit let through (refused `429`s are not counted).
    pub requests: i64,
}

/// The caller's requests per UTC day, key and route group over the last 31 days (today
/// included), oldest first. Counted as requests are served and written to the store within a
/// second; the counts are kept beyond the rate-limit windows.
#[utoipa::path(get, path = "/v1/billing/usage", tag = "account", operation_id = "billing_usage",
    params(NoQuery),
    security(("bearer" = []), ("session" = [])),
    responses((status = 200, description = "One element per (day, key, route group) with requests; days without any are absent.", body = Envelope<UsageDay>)))]
pub(crate) async fn usage(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(who): Extension<Principal>,
    Q(_): Q<NoQuery>,
) -> Reply {
    let today = Instant::now().day();
    let first = Day::from_days(today.days() - (USAGE_DAYS - 1));
    let rows = state
        .store()
        .usage(&who.user().id, &first.to_string(), &today.to_string())
        .await?;
    let results: Vec<UsageDay> = rows
        .into_iter()
        .map(|(date, key, route_group, requests)| UsageDay {
            date,
            key_id: (!key.is_empty()).then_some(key),
            route_group,
            requests,
        })
        .collect();
    Ok(ok(&ctx, results).into_response())
}

/// Body of `POST /v1/billing/checkout`.
#[derive(Debug, Clone, utoipa::ToSchema)]
pub struct CheckoutBody {
    /// The plan to subscribe to.
    pub plan_id: Plan,
    /// Must be `true`: affirms that the data is for internal use only (the statement, in its
    /// current version, is on the account page beside the box). `false` is `403
    /// commercial_license_required`: commercial redistribution needs a separate license.
    pub attestation: bool,
}

impl FromJson for CheckoutBody {
    const FIELDS: &'static [&'static str] = &["plan_id", "attestation"];
    fn from_object(o: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ApiError> {
        let plan = required_string(o, "plan_id", "researcher, power or desk")?;
        let plan_id = plan.parse::<Plan>().map_err(|()| {
            ApiError::invalid(
                "plan_id",
                format!("plan_id {plan:?} is not one of: researcher, power, desk"),
            )
        })?;
        let attestation = boolean(o, "attestation")?.ok_or_else(|| {
            ApiError::invalid(
                "attestation",
                format!("attestation is required: true affirms \"{ATTESTATION_TEXT}\""),
            )
        })?;
        Ok(CheckoutBody {
            plan_id,
            attestation,
        })
    }
}

/// `results[0]` of `POST /v1/billing/checkout`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CheckoutAnswer {
    /// The processor's checkout session id (`cs_...`).
    pub checkout_session_id: String,
    /// Where to send the browser to pay; it returns to `/account` either way.
    pub url: String,
    pub plan_id: Plan,
    /// When the checkout stops taking payment; null when the processor did not say.
    #[schema(value_type = Option<String>, example = "2026-11-26T10:00:00Z")]
    pub expires_at: Option<Instant>,
    /// The recorded attestation (`att_...`).
    pub attestation_id: String,
    /// Which wording of the internal-use statement was affirmed.
    pub statement_version: &'static str,
}

/// Starts a checkout: a hosted payment page at the processor for a subscription to `plan_id`.
///
/// Session cookie only. `attestation` must be `true` (self-serve use is internal use only);
/// it is recorded with the user, time, plan and the statement's version before the checkout
/// is created. The plan changes when the processor notifies the payment
/// (`/v1/billing/webhook`), not here. Errors: `400` for a missing or malformed field (`param`
/// names it), `403 commercial_license_required` for `attestation: false`, `409
/// subscription_active` when the user already pays (use the portal to change plans), `503
/// billing_not_configured`, `502 processor_error` / `503 processor_unavailable` when the
/// processor refuses or cannot be reached.
#[utoipa::path(post, path = "/v1/billing/checkout", tag = "account", operation_id = "billing_checkout",
    params(NoQuery),
    request_body(content = CheckoutBody, content_type = "application/json"),
    security(("session" = [])),
    responses(
        (status = 200, description = "`results[0]`: the checkout session and its URL.", body = Envelope<CheckoutAnswer>),
        (status = 409, description = "`subscription_active`: the user already pays for a plan; change or cancel it in the customer portal (`POST /v1/billing/portal`)."),
        (status = 502, description = "`processor_error`: the payment processor refused the request (the request id identifies it in the logs)."),
    ))]
pub(crate) async fn checkout(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(session): Extension<Session>,
    Q(_): Q<NoQuery>,
    Json(body): Json<CheckoutBody>,
) -> Reply {
    if !body.attestation {
        let contact = state
            .options()
            .billing
            .license_contact
            .clone()
            .unwrap_or_else(|| format!("{}/#licensing", state.own_origin()));
        return Err(ApiError::CommercialLicenseRequired { contact });
    }
    let started = state
        .billing()?
        .start_checkout(
            &**state.store(),
            &session.user,
            body.plan_id,
            &state.own_origin(),
        )
        .await?;
    Ok(ok(
        &ctx,
        vec![CheckoutAnswer {
            checkout_session_id: started.session.id,
            url: started.session.url,
            plan_id: body.plan_id,
            expires_at: started
                .session
                .expires_at
                .map(|t| Instant::from_micros(t.saturating_mul(1_000_000))),
            attestation_id: started.attestation_id,
            statement_version: ATTESTATION_VERSION,
        }],
    )
    .into_response())
}

/// `results[0]` of `POST /v1/billing/portal`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PortalAnswer {
    /// The processor's portal session id (`bps_...`).
    pub portal_session_id: String,
    /// Where to send the browser to manage the subscription, payment method and invoices; it
    /// returns to `/account`.
    pub url: String,
}

/// Opens the processor's customer portal for the signed-in user: change or cancel the plan,
/// update the payment method, read invoices.
///
/// Session cookie only; no body. Plan changes made there arrive as notifications
/// (`/v1/billing/webhook`). `503 billing_not_configured` when the processor's settings are
/// missing; `502`/`503` as for checkout when the processor fails.
#[utoipa::path(post, path = "/v1/billing/portal", tag = "account", operation_id = "billing_portal",
    params(NoQuery),
    security(("session" = [])),
    responses(
        (status = 200, description = "`results[0]`: the portal session and its URL.", body = Envelope<PortalAnswer>),
        (status = 502, description = "`processor_error`: the payment processor refused the request."),
    ))]
pub(crate) async fn portal(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(session): Extension<Session>,
    Q(_): Q<NoQuery>,
) -> Reply {
    let p = state
        .billing()?
        .open_portal(&**state.store(), &session.user, &state.own_origin())
        .await?;
    Ok(ok(
        &ctx,
        vec![PortalAnswer {
            portal_session_id: p.id,
            url: p.url,
        }],
    )
    .into_response())
}

/// The largest notification read (events are a few kilobytes).
pub const MAX_WEBHOOK_BODY: usize = 256 * 1024;

/// `results[0]` of `POST /v1/billing/webhook`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookAnswer {
    /// The processor's event id.
    pub event_id: String,
    /// The event type.
    pub event_type: String,
    /// `applied` (the subscription and plan follow the event), `replayed` (this event id was
    /// received before; nothing changed) or `ignored` (recorded; `detail` says why).
    pub outcome: &'static str,
    /// The user's plan after the event, when applied.
    pub plan: Option<Plan>,
    /// Why an event was ignored.
    pub detail: Option<String>,
}

/// Receives the payment processor's notifications (Stripe's event shape and signature).
///
/// No credential: the `Stripe-Signature` header is the credential (`t=<unix seconds>,
/// v1=<hex HMAC-SHA256 of "<t>.<raw body>" under the endpoint's signing secret>`; any of
/// several `v1` may match; the timestamp must be within 5 minutes). A bad, missing or stale
/// signature is `400 invalid_signature` and changes nothing. Each event id is applied once: a
/// replay answers `200` with `outcome: replayed`. Acted on: `checkout.session.completed` and
/// `checkout.session.async_payment_succeeded` (plan set), `customer.subscription.created` and
/// `.updated` (plan follows the price; `past_due` keeps it during the processor's retries;
/// `unpaid`/`canceled` back to `researcher`), `customer.subscription.deleted` (back to
/// `researcher`), `invoice.payment_failed` with no retry left (back to `researcher`). Other
/// types are recorded and ignored. A plan change reaches every replica within 5 seconds.
#[utoipa::path(post, path = "/v1/billing/webhook", tag = "account", operation_id = "billing_webhook",
    params(NoQuery, ("Stripe-Signature" = String, Header, description = "`t=<unix seconds>,v1=<hex>`: the processor's signature of this body.")),
    request_body(content = serde_json::Value, content_type = "application/json", description = "The processor's event object (`id`, `type`, `created`, `data.object`)."),
    responses((status = 200, description = "`results[0]`: what the event did.", body = Envelope<WebhookAnswer>)))]
pub(crate) async fn webhook(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    headers: HeaderMap,
    Q(_): Q<NoQuery>,
    body: axum::body::Body,
) -> Reply {
    let billing = state.billing()?;
    let payload = crate::http::body::read_limited(body, MAX_WEBHOOK_BODY).await?;
    let now = Instant::now();
    let signature = headers
        .get("stripe-signature")
        .map(|v| v.to_str().unwrap_or(""));
    let count = |outcome: &'static str| {
        metrics::counter!(crate::obs::BILLING_WEBHOOKS, "outcome" => outcome).increment(1);
    };
    webhook::verify(
        signature,
        &payload,
        billing.webhook_secret(),
        now.micros().div_euclid(1_000_000),
    )
    .map_err(|f| {
        count("bad_signature");
        ApiError::InvalidSignature(f.to_string())
    })?;
    let event = webhook::read(&payload, billing, now.micros()).map_err(|m| {
        count("invalid");
        ApiError::invalid("body", m)
    })?;
    let outcome = state.store().apply_billing_event(&event).await;
    count(outcome.as_ref().map_or("error", BillingOutcome::as_str));
    let outcome = outcome?;
    let (plan, detail) = match &outcome {
        BillingOutcome::Applied {
            user_id,
            plan,
            changed,
        } => {
            if *changed {
                // This replica's keys of the user take the new plan at once.
                state.keys().forget_user(user_id);
                tracing::info!(%user_id, %plan, event_id = %event.id, "plan changed");
            }
            (Some(*plan), None)
        }
        BillingOutcome::Ignored(why) => {
            tracing::info!(event_id = %event.id, event_type = %event.kind, reason = %why, "billing event ignored");
            (None, Some(why.clone()))
        }
        BillingOutcome::Replayed => (None, None),
    };
    Ok(ok(
        &ctx,
        vec![WebhookAnswer {
            event_id: event.id,
            event_type: event.kind,
            outcome: outcome.as_str(),
            plan,
            detail,
        }],
    )
    .into_response())
}
