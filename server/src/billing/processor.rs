//! Outbound calls to the payment processor, in Stripe's API shape: form-encoded bodies with
//! bracketed keys (`metadata[user_id]`), the secret key as a Bearer token, JSON answers, and
//! `{"error": {"type", "code", "message"}}` on failure.
//!
//! Three calls: create a customer, create a hosted checkout session, create a customer-portal
//! session. Every call has a connect and a total timeout; a failure becomes
//! [`Error::Processor`], whose detail is logged and never shown to a client (the client gets
//! `502 processor_error` or `503 processor_unavailable`).

use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Longest wait for a connection to the processor.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a whole call may take (the browser waits on it).
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// A client of the processor's API.
pub struct Processor {
    http: reqwest::Client,
    base: url::Url,
    secret_key: String,
}

impl std::fmt::Debug for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// A customer as the processor answers it (the fields read).
#[derive(Debug, Clone, Deserialize)]
pub struct Customer {
    pub id: String,
}

/// A hosted checkout session (the fields read).
#[derive(Debug, Clone, Deserialize)]
pub struct CheckoutSession {
    pub id: String,
    /// Where the browser pays.
    pub url: String,
    /// Unix seconds when the session stops taking payment.
    #[serde(default)]
    pub expires_at: Option<i64>,
}

/// A customer-portal session (the fields read).
#[derive(Debug, Clone, Deserialize)]
pub struct PortalSession {
    pub id: String,
    pub url: String,
}

/// What a checkout asks the processor for.
#[derive(Debug, Clone)]
pub struct CheckoutRequest<'a> {
    pub customer: &'a str,
    pub price: &'a str,
    pub user_id: &'a str,
    pub plan: &'a str,
    pub attestation_id: &'a str,
    pub success_url: &'a str,
    pub cancel_url: &'a str,
    /// Makes a retried request create one session, not two.
    pub idempotency_key: &'a str,
}

/// The processor's error body.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl Processor {
    /// A client of the API at `base` (`https://api.stripe.com`), authenticating with
    /// `secret_key`.
    pub fn new(base: &str, secret_key: &str) -> Result<Self> {
        let base = url::Url::parse(base.trim_end_matches('/'))
            .map_err(|e| Error::Config(format!("--billing-api-url {base:?}: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(Error::Config(
                "--billing-api-url must be an http(s) URL".into(),
            ));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .user_agent(concat!("asof/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        Ok(Processor {
            http,
            base,
            secret_key: secret_key.to_owned(),
        })
    }

    /// Creates a customer for a user (its id in the metadata, so the processor's dashboard
    /// and every later event lead back to it).
    pub async fn create_customer(
        &self,
        email: &str,
        user_id: &str,
        idempotency_key: &str,
    ) -> Result<Customer> {
        self.post(
            "/v1/customers",
            &[("email", email), ("metadata[user_id]", user_id)],
            idempotency_key,
        )
        .await
    }

    /// Creates a hosted checkout session for one subscription to `price`.
    pub async fn create_checkout_session(
        &self,
        r: &CheckoutRequest<'_>,
    ) -> Result<CheckoutSession> {
        self.post(
            "/v1/checkout/sessions",
            &[
                ("mode", "subscription"),
                ("customer", r.customer),
                ("line_items[0][price]", r.price),
                ("line_items[0][quantity]", "1"),
                ("client_reference_id", r.user_id),
                ("success_url", r.success_url),
                ("cancel_url", r.cancel_url),
                ("metadata[user_id]", r.user_id),
                ("metadata[plan]", r.plan),
                ("metadata[attestation_id]", r.attestation_id),
                ("subscription_data[metadata][user_id]", r.user_id),
                ("subscription_data[metadata][plan]", r.plan),
            ],
            r.idempotency_key,
        )
        .await
    }

    /// Creates a customer-portal session (manage or cancel the subscription, invoices,
    /// payment method) that returns to `return_url`.
    pub async fn create_portal_session(
        &self,
        customer: &str,
        return_url: &str,
    ) -> Result<PortalSession> {
        self.post(
            "/v1/billing_portal/sessions",
            &[("customer", customer), ("return_url", return_url)],
            &format!("portal-{}", uuid::Uuid::new_v4().simple()),
        )
        .await
    }

    async fn post<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        form: &[(&str, &str)],
        idempotency_key: &str,
    ) -> Result<T> {
        let url = format!("{}{path}", self.base.as_str().trim_end_matches('/'));
        let res = self
            .http
            .post(&url)
            .bearer_auth(&self.secret_key)
            .header("Idempotency-Key", idempotency_key)
            .form(form)
            .send()
            .await
            .map_err(|e| Error::Processor {
                retryable: true,
                // Without the URL's query (there is none) or any header: never the key.
                detail: format!("POST {path}: {}", e.without_url()),
            })?;
        let status = res.status();
        let body = res.bytes().await.map_err(|e| Error::Processor {
            retryable: true,
            detail: format!("POST {path}: reading the answer: {}", e.without_url()),
        })?;
        if !status.is_success() {
            let detail = match serde_json::from_slice::<ErrorBody>(&body) {
                Ok(ErrorBody { error: e }) => format!(
                    "POST {path}: {status} {} {}: {}",
                    e.kind.unwrap_or_default(),
                    e.code.unwrap_or_default(),
                    e.message.unwrap_or_default()
                ),
                Err(_) => format!("POST {path}: {status} (no error body)"),
            };
            return Err(Error::Processor {
                retryable: status.is_server_error() || status.as_u16() == 429,
                // A processor that echoes the key back must not put it in our log.
                detail: detail.replace(&self.secret_key, "[secret key]"),
            });
        }
        serde_json::from_slice(&body).map_err(|e| Error::Processor {
            retryable: false,
            detail: format!("POST {path}: unexpected answer: {e}"),
        })
    }
}
