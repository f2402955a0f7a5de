//! The server's one error type and its single mapping to HTTP statuses and error codes.
//!
//! Handlers return `Result<_, ApiError>`; `ApiError`'s response carries the error as an
//! extension, and the envelope middleware (see `app.rs`) renders every error envelope in one
//! place with the request id and corpus version. Messages never include internals: internal
//! faults are logged with their detail and answered with a fixed message.
//!
//! The refusals of answers (bad parameters, holes, expired cursors, missing records, engine
//! faults) are the answer layer's ([`asof_answer::Error`], wrapped as [`ApiError::Answer`]
//! with its status, code and message as that crate gives them); the variants here are what
//! only a deployment refuses (keys, limits, sign-in, billing, connectors).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use asof_answer::envelope::Refusal;
use asof_engine::model::coverage::Coverage;

/// A refusal or fault, as the client will see it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// A refusal of the answer layer (the same on every front end).
    #[error(transparent)]
    Answer(#[from] asof_answer::Error),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("method not allowed")]
    MethodNotAllowed { allow: String },
    #[error("range not satisfiable")]
    RangeNotSatisfiable { size: u64 },
    /// A request body longer than the route reads.
    #[error("the body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// A request target (path and query) longer than the service reads.
    #[error("the request target (path and query) is longer than {limit} bytes")]
    UriTooLong { limit: usize },
    /// Request headers larger in total, or more in number, than the service reads.
    #[error("the request headers exceed {bytes} bytes in total or {count} fields")]
    HeadersTooLarge { bytes: usize, count: usize },
    #[error("rate limit exceeded")]
    RateLimited { retry_after: u64 },
    /// The client's address presented too many refused credentials this minute: a
    /// credential this replica has not verified recently is not looked up until it ends.
    #[error("too many refused credentials")]
    CredentialsRefused { retry_after: u64 },
    /// The key already holds its open streams (`/v1/stream`) on this process.
    #[error("too many streams")]
    TooManyStreams { limit: usize },
    /// The process holds its streams (`/v1/stream`): the rest of its connections are kept for
    /// ordinary requests.
    #[error("the server's streams are all open")]
    StreamsFull { limit: usize },
    #[error("request timed out")]
    Timeout { after_secs: u64 },
    /// The replica is not ready for traffic (`GET /ready`, and every request while the
    /// corpus is still loading): starting, draining before a shutdown, or its state store
    /// not answering. Another replica can answer.
    #[error("not ready")]
    NotReady { reason: &'static str },
    /// A sign-in way (e-mail, a provider) this server is not configured for.
    #[error("{0}")]
    SignInNotConfigured(String),
    /// The mail server did not take the sign-in message.
    #[error("mail unavailable")]
    MailUnavailable,
    /// A configured provider could not be reached (discovery failed).
    #[error("provider unavailable")]
    ProviderUnavailable(String),
    /// Payment processing lacks a setting (named in the message, never its value).
    #[error("{0}")]
    BillingNotConfigured(String),
    /// Checkout without the internal-use attestation: self-serve plans are internal use only.
    #[error("commercial license required")]
    CommercialLicenseRequired { contact: String },
    /// The user already pays for a plan: changes go through the customer portal.
    #[error("subscription active")]
    SubscriptionActive { plan: String },
    /// The payment processor could not be reached, or answered that it is busy or failing.
    #[error("payment processor unavailable")]
    ProcessorUnavailable,
    /// The payment processor refused a request the service made (its detail is only logged).
    #[error("payment processor error")]
    ProcessorError,
    /// An inbound webhook whose signature does not verify (the reason, never the secret).
    #[error("{0}")]
    InvalidSignature(String),
    /// A connector vendor this server has no settings for.
    #[error("{0}")]
    ConnectorNotConfigured(String),
    /// The vendor refused the caller's own key (401/403 upstream).
    #[error("vendor refused")]
    VendorRefused,
    /// The vendor's rate limit, its `Retry-After` passed on.
    #[error("vendor rate limited")]
    VendorRateLimited { retry_after: u64 },
    /// The vendor timed out, failed or answered out of shape.
    #[error("vendor error")]
    VendorError,
    /// The key already has its connector calls in flight.
    #[error("too many connector calls")]
    ConnectorBusy { limit: usize },
    /// The state store (accounts, keys, rate windows) cannot be reached just now.
    #[error("state store unavailable")]
    StateUnavailable,
}

impl ApiError {
    /// A fault answered without its detail (logged where it happened).
    pub const INTERNAL: ApiError = ApiError::Answer(asof_answer::Error::Internal);
    /// The object store holding the corpus cannot be reached just now.
    pub const STORAGE_UNAVAILABLE: ApiError =
        ApiError::Answer(asof_answer::Error::StorageUnavailable);

    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Answer(asof_answer::Error::invalid(param, message))
    }

    pub fn not_found(message: String) -> Self {
        ApiError::Answer(asof_answer::Error::NotFound(message))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Answer(e) => {
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            ApiError::InvalidSignature(_) => StatusCode::BAD_REQUEST,
            ApiError::SubscriptionActive { .. } => StatusCode::CONFLICT,
            ApiError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_)
            | ApiError::CommercialLicenseRequired { .. }
            | ApiError::VendorRefused => StatusCode::FORBIDDEN,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
            ApiError::HeadersTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::RateLimited { .. }
            | ApiError::CredentialsRefused { .. }
            | ApiError::TooManyStreams { .. }
            | ApiError::StreamsFull { .. }
            | ApiError::VendorRateLimited { .. }
            | ApiError::ConnectorBusy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Timeout { .. }
            | ApiError::NotReady { .. }
            | ApiError::SignInNotConfigured(_)
            | ApiError::MailUnavailable
            | ApiError::ProviderUnavailable(_)
            | ApiError::BillingNotConfigured(_)
            | ApiError::ProcessorUnavailable
            | ApiError::ConnectorNotConfigured(_)
            | ApiError::StateUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::ProcessorError | ApiError::VendorError => StatusCode::BAD_GATEWAY,
        }
    }

    /// Seconds a client should wait before trying again (`Retry-After`), for the refusals
    /// that pass.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::Answer(e) => e.retry_after(),
            ApiError::RateLimited { retry_after }
            | ApiError::CredentialsRefused { retry_after }
            | ApiError::VendorRateLimited { retry_after } => Some(*retry_after),
            ApiError::ConnectorBusy { .. }
            | ApiError::Timeout { .. }
            | ApiError::NotReady { .. } => Some(1),
            ApiError::StateUnavailable
            | ApiError::TooManyStreams { .. }
            | ApiError::StreamsFull { .. } => Some(5),
            ApiError::MailUnavailable
            | ApiError::ProviderUnavailable(_)
            | ApiError::ProcessorUnavailable => Some(60),
            // Only an operator can change this; a day is as good a guess as any.
            ApiError::SignInNotConfigured(_)
            | ApiError::BillingNotConfigured(_)
            | ApiError::ConnectorNotConfigured(_) => Some(86_400),
            _ => None,
        }
    }

    /// The stable `error.code` of each case (documented in the OpenAPI description).
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Answer(e) => e.code(),
            ApiError::Unauthenticated(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::RangeNotSatisfiable { .. } => "range_not_satisfiable",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::UriTooLong { .. } => "uri_too_long",
            ApiError::HeadersTooLarge { .. } => "headers_too_large",
            ApiError::RateLimited { .. } | ApiError::CredentialsRefused { .. } => "rate_limited",
            ApiError::TooManyStreams { .. } | ApiError::StreamsFull { .. } => "too_many_streams",
            ApiError::Timeout { .. } => "timeout",
            ApiError::NotReady { .. } => "not_ready",
            ApiError::SignInNotConfigured(_) => "sign_in_not_configured",
            ApiError::MailUnavailable => "mail_unavailable",
            ApiError::ProviderUnavailable(_) => "provider_unavailable",
            ApiError::BillingNotConfigured(_) => "billing_not_configured",
            ApiError::CommercialLicenseRequired { .. } => "commercial_license_required",
            ApiError::SubscriptionActive { .. } => "subscription_active",
            ApiError::ProcessorUnavailable => "processor_unavailable",
            ApiError::ProcessorError => "processor_error",
            ApiError::InvalidSignature(_) => "invalid_signature",
            ApiError::ConnectorNotConfigured(_) => "connector_not_configured",
            ApiError::VendorRefused => "vendor_refused",
            ApiError::VendorRateLimited { .. } => "vendor_rate_limited",
            ApiError::VendorError => "vendor_error",
            ApiError::ConnectorBusy { .. } => "too_many_connector_calls",
            ApiError::StateUnavailable => "state_unavailable",
        }
    }

    pub fn param(&self) -> Option<String> {
        match self {
            ApiError::Answer(e) => e.param(),
            ApiError::PayloadTooLarge { .. } => Some("body".into()),
            _ => None,
        }
    }

    pub fn message(&self) -> String {
        match self {
            ApiError::Answer(e) => e.message(),
            ApiError::MethodNotAllowed { allow } => format!("method not allowed on this path; allowed: {allow}"),
            ApiError::RangeNotSatisfiable { size } => format!("the requested range lies past the end of the file ({size} bytes)"),
            ApiError::RateLimited { retry_after } => format!("rate limit exceeded; retry after {retry_after} seconds"),
            ApiError::CredentialsRefused { retry_after } => format!("too many refused keys or sessions from this address; a key this service has not verified recently is not checked for {retry_after} seconds (retry then, with a valid key)"),
            ApiError::TooManyStreams { limit } => format!("this account already holds {limit} open streams on this server; close one (or wait for it to end) and retry"),
            ApiError::StreamsFull { limit } => format!("this server holds {limit} open streams, its most (its other connections are kept for ordinary requests); retry in a few seconds"),
            ApiError::Timeout { after_secs } => format!("the answer took longer than {after_secs} s and was abandoned; retry, or narrow the query (a ticker, cik or limit)"),
            ApiError::NotReady { reason } => format!("this replica is not ready for traffic: {reason}; retry in a second (a load balancer sends it elsewhere)"),
            ApiError::MailUnavailable => "the sign-in e-mail could not be sent just now; retry in a minute".into(),
            ApiError::ProviderUnavailable(p) => format!("{p} could not be reached just now; retry in a minute, or sign in another way"),
            ApiError::CommercialLicenseRequired { contact } => format!("self-serve plans are for internal use only, and checkout needs attestation: true; commercial use or redistribution needs a separate license: ask at {contact}"),
            ApiError::SubscriptionActive { plan } => format!("you already pay for the {plan} plan; change or cancel it in the customer portal (POST /v1/billing/portal)"),
            ApiError::ProcessorUnavailable => "the payment processor could not be reached just now; retry in a minute".into(),
            ApiError::ProcessorError => "the payment processor refused the request; the request id identifies it in the service logs".into(),
            ApiError::VendorRefused => "the vendor refused the vendor key you sent (X-Vendor-Key): check it is current and licensed for daily bars".into(),
            ApiError::VendorRateLimited { retry_after } => format!("the vendor's rate limit for your key is spent; retry after {retry_after} seconds"),
            ApiError::VendorError => "the vendor did not answer in time or answered out of shape; nothing partial is returned; retry later".into(),
            ApiError::ConnectorBusy { limit } => format!("this key already has {limit} connector calls in flight; retry when one ends"),
            ApiError::StateUnavailable => "the service cannot reach its account store just now, so keys and sessions cannot be checked; public and sample routes still answer; retry in a few seconds".into(),
            other => other.to_string(),
        }
    }
}

impl From<asof_cursor::Error> for ApiError {
    fn from(e: asof_cursor::Error) -> Self {
        ApiError::Answer(e.into())
    }
}

impl From<asof_engine::Error> for ApiError {
    fn from(e: asof_engine::Error) -> Self {
        ApiError::Answer(e.into())
    }
}

impl Refusal for ApiError {
    fn code(&self) -> &'static str {
        ApiError::code(self)
    }
    fn message(&self) -> String {
        ApiError::message(self)
    }
    fn param(&self) -> Option<String> {
        ApiError::param(self)
    }
    fn hole(&self) -> Option<(&Coverage, Option<asof_engine::Instant>, Option<&str>)> {
        match self {
            ApiError::Answer(e) => e.hole(),
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = self.status().into_response();
        r.extensions_mut().insert(self);
        r
    }
}

/// Faults of the server's own machinery (state store, startup), not client-facing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("state store: {0}")]
    Store(sqlx::Error),
    #[error(transparent)]
    Engine(#[from] asof_engine::Error),
    #[error("{0}")]
    Config(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("mail: {0}")]
    Mail(String),
    /// A call to the payment processor failed: `retryable` when it could not be reached or
    /// answered 429/5xx. `detail` is for the log only (it never holds the secret key).
    #[error("payment processor: {detail}")]
    Processor { retryable: bool, detail: String },
}

/// Every failed statement of the state store passes here, whichever operation sent it: it is
/// counted by the kind of failure (a bounded set: `database`, `io`, `pool_timed_out`, ...).
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        let kind = match &e {
            sqlx::Error::Database(_) => "database",
            sqlx::Error::Io(_) => "io",
            sqlx::Error::Tls(_) => "tls",
            sqlx::Error::Protocol(_) => "protocol",
            sqlx::Error::RowNotFound => "row_not_found",
            sqlx::Error::PoolTimedOut => "pool_timed_out",
            sqlx::Error::PoolClosed => "pool_closed",
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => "decode",
            _ => "other",
        };
        metrics::counter!(crate::obs::STATE_STATEMENT_ERRORS, "kind" => kind).increment(1);
        Error::Store(e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Processor { retryable, detail } => {
                tracing::warn!(%detail, retryable, "payment processor call failed");
                if retryable {
                    ApiError::ProcessorUnavailable
                } else {
                    ApiError::ProcessorError
                }
            }
            Error::Engine(e) => ApiError::from(e),
            Error::Store(e) if store_unreachable(&e) => {
                tracing::warn!(error = %e, "state store unreachable");
                ApiError::StateUnavailable
            }
            e => {
                tracing::error!(error = %e, "server fault");
                ApiError::INTERNAL
            }
        }
    }
}

/// Whether a state-store error means the database cannot be reached (down, restarting, the
/// network gone, every connection busy past the wait) rather than a fault in a statement:
/// the first is a `503 state_unavailable` the client retries, the second a `500`.
pub fn store_unreachable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        // PostgreSQL's connection exceptions (08...), and shutting down or starting up (57P..).
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_store_is_503_state_unavailable_and_a_bad_statement_500() {
        let down = Error::Store(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        let api = ApiError::from(down);
        assert_eq!(api.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(api.code(), "state_unavailable");
        assert!(!api.message().contains("refused"), "no internals");
        let timed_out = ApiError::from(Error::Store(sqlx::Error::PoolTimedOut));
        assert_eq!(timed_out.code(), "state_unavailable");
        let bad = ApiError::from(Error::Store(sqlx::Error::RowNotFound));
        assert_eq!(bad.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn every_failed_statement_is_counted_by_its_kind() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let _ = Error::from(sqlx::Error::PoolTimedOut);
            let _ = Error::from(sqlx::Error::PoolTimedOut);
            let _ = Error::from(sqlx::Error::Io(std::io::Error::from(
                std::io::ErrorKind::ConnectionReset,
            )));
        });
        let text = handle.render();
        assert!(
            text.contains("asof_state_statement_errors_total{kind=\"pool_timed_out\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("asof_state_statement_errors_total{kind=\"io\"} 1"),
            "{text}"
        );
    }
}
