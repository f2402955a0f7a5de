//! Account routes answered with a Bearer key: who am I (`/v1/me`) and my keys (`/v1/keys`).
//!
//! Both change without a new corpus version (keys are created and revoked), so their ETag is
//! derived from the body ([`BodyEtag`]).

use asof_engine::Coverage;
use axum::extract::{Extension, RawQuery, State};
use serde::Serialize;

use crate::app::{AppState, BodyEtag, CacheKind, Caller, Ctx};
use crate::auth::Plan;
use crate::envelope::Envelope;
use crate::params::Params;
use crate::routes::{Reply, ok};
use crate::state_store::KeyRecord;

/// `results[0]` of `/v1/me`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct Me {
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
pub async fn me(
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    RawQuery(q): RawQuery,
) -> Reply {
    Params::parse(q.as_deref(), &[])?;
    let me = Me {
        user_id: caller.user.id,
        email: caller.user.email,
        plan: caller.user.plan,
        requests_per_minute: caller.user.plan.requests_per_minute(),
        key_id: caller.key.id,
    };
    let mut r = ok(
        &ctx,
        vec![me],
        None,
        None,
        Coverage::default(),
        None,
        false,
        CacheKind::Live,
    );
    r.extensions_mut().insert(BodyEtag);
    Ok(r)
}

/// `GET /v1/keys`: the caller's keys, oldest first, by id and prefix (never the secret),
/// revoked and expired ones included so a key id in an audit receipt can always be looked up.
#[utoipa::path(get, path = "/v1/keys", tag = "account", operation_id = "list_keys",
    security(("bearer" = [])),
    responses((status = 200, description = "The caller's keys by id and prefix; never a secret.", body = Envelope<KeyRecord>)))]
pub async fn list_keys(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(caller): Extension<Caller>,
    RawQuery(q): RawQuery,
) -> Reply {
    Params::parse(q.as_deref(), &[])?;
    let keys: Vec<KeyRecord> = state.store().list_keys(&caller.user.id).await?;
    let mut r = ok(
        &ctx,
        keys,
        None,
        None,
        Coverage::default(),
        None,
        false,
        CacheKind::Live,
    );
    r.extensions_mut().insert(BodyEtag);
    Ok(r)
}
