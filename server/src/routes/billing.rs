//! Billing routes. Today: usage (`/v1/billing/usage`), per UTC day, key and route group,
//! with a Bearer key or the session cookie.

use asof_engine::{Day, Instant};
use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use serde::Serialize;

use crate::http::envelope::Envelope;
use crate::http::params::{NoQuery, Q};
use crate::http::{AppState, Ctx, Principal, Reply, ok};

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
