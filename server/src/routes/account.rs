//! Account routes answered with a Bearer key: who am I (`/v1/me`) and my keys (`/v1/keys`).
//!
//! Both change without a new corpus version (keys are created and revoked), so their entries
//! are `Kind::LiveEnvelope`: the ETag is derived from the body.

use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use serde::Serialize;

use crate::http::envelope::Envelope;
use crate::http::params::{NoQuery, Q};
use crate::http::{AppState, Caller, Ctx, Reply, ok};
use crate::plan::Plan;
use crate::state::KeyRecord;

/// `results[0]` of `/v1/me`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Me {
    user_id: String,
    email: String,
    plan: Plan,
    /// Requests per fixed one-minute window for this plan.
    requests_per_minute: u32,
    /// The key this request was made with.
    key_id: String,
}

#[utoipa::path(get, path = "/v1/me", tag = "account", operation_id = "me",
    security(("bearer" = [])),
    responses((status = 200, description = "`results[0]`: the caller, its plan and the key used.", body = Envelope<Me>)))]
pub(crate) async fn me(
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    Q(_): Q<NoQuery>,
) -> Reply {
    let me = Me {
        user_id: caller.user.id,
        email: caller.user.email,
        plan: caller.user.plan,
        requests_per_minute: caller.user.plan.requests_per_minute(),
        key_id: caller.key.id,
    };
    Ok(ok(&ctx, vec![me]).into_response())
}

/// `GET /v1/keys`: the caller's keys, oldest first, by id and prefix (never the secret),
/// revoked and expired ones included so a key id in an audit receipt can always be looked up.
#[utoipa::path(get, path = "/v1/keys", tag = "account", operation_id = "list_keys",
    security(("bearer" = [])),
    responses((status = 200, description = "The caller's keys by id and prefix; never a secret.", body = Envelope<KeyRecord>)))]
pub(crate) async fn list_keys(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    Q(_): Q<NoQuery>,
) -> Reply {
    let keys: Vec<KeyRecord> = state.store().list_keys(&caller.user.id).await?;
    Ok(ok(&ctx, keys).into_response())
}
