//! Account routes: who am I (`/v1/me`) and my keys (`/v1/keys`), with a Bearer key or the
//! session cookie; creating and revoking keys with the session cookie only (a key cannot make
//! or revoke keys, so a leaked key cannot entrench itself).
//!
//! They change without a new corpus version (keys are created and revoked), so their entries
//! are `Kind::LiveEnvelope`: the ETag is derived from the body.

use asof_engine::Instant;
use axum::extract::{Extension, Path, State};
use axum::response::IntoResponse;
use serde::Serialize;

use crate::error::ApiError;
use crate::http::body::{FromJson, Json, required_string, string};
use crate::http::envelope::Envelope;
use crate::http::params::{NoQuery, Q};
use crate::http::{AppState, Ctx, Principal, Reply, ok};
use crate::plan::Plan;
use crate::signin::session::Session;
use crate::state::KeyRecord;

/// `results[0]` of `/v1/me`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Me {
    user_id: String,
    email: String,
    plan: Plan,
    /// Requests per fixed one-minute window for this plan.
    requests_per_minute: u32,
    /// The key this request was made with; null when it came with the session cookie.
    key_id: Option<String>,
    /// `key` or `session`: the credential this request was made with.
    credential: &'static str,
    /// Live (neither revoked nor expired) keys this plan may hold at once.
    max_live_keys: u32,
}

#[utoipa::path(get, path = "/v1/me", tag = "account", operation_id = "me",
    security(("bearer" = []), ("session" = [])),
    responses((status = 200, description = "`results[0]`: the caller, its plan and the credential used.", body = Envelope<Me>)))]
pub(crate) async fn me(
    Extension(ctx): Extension<Ctx>,
    Extension(who): Extension<Principal>,
    Q(_): Q<NoQuery>,
) -> Reply {
    let user = who.user().clone();
    let (key_id, credential) = match &who {
        Principal::Key(c) => (Some(c.key.id.clone()), "key"),
        Principal::Session(_) => (None, "session"),
    };
    let me = Me {
        requests_per_minute: user.plan.requests_per_minute(),
        max_live_keys: user.plan.max_live_keys(),
        user_id: user.id,
        email: user.email,
        plan: user.plan,
        key_id,
        credential,
    };
    Ok(ok(&ctx, vec![me]).into_response())
}

/// `GET /v1/keys`: the caller's keys, oldest first, by id and prefix (never the secret),
/// revoked and expired ones included so a key id in an audit receipt can always be looked up.
#[utoipa::path(get, path = "/v1/keys", tag = "account", operation_id = "list_keys",
    security(("bearer" = []), ("session" = [])),
    responses((status = 200, description = "The caller's keys by id and prefix; never a secret.", body = Envelope<KeyRecord>)))]
pub(crate) async fn list_keys(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(who): Extension<Principal>,
    Q(_): Q<NoQuery>,
) -> Reply {
    let keys: Vec<KeyRecord> = state.store().list_keys(&who.user().id).await?;
    Ok(ok(&ctx, keys).into_response())
}

/// Body of `POST /v1/keys`.
#[derive(Debug, Clone, utoipa::ToSchema)]
pub struct KeyCreate {
    /// A name to tell keys apart (1 to 100 characters, no control characters).
    #[schema(min_length = 1, max_length = 100, example = "backtest laptop")]
    pub name: String,
    /// When the key stops working: RFC 3339 UTC with a literal `Z`, in the future; null or
    /// absent for a key that works until revoked.
    #[schema(value_type = Option<String>, pattern = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$", example = "2027-01-01T00:00:00Z")]
    pub expires_at: Option<Instant>,
}

impl FromJson for KeyCreate {
    const FIELDS: &'static [&'static str] = &["name", "expires_at"];
    fn from_object(o: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ApiError> {
        let name = required_string(o, "name", "a name to tell the key apart")?;
        let trimmed = name.trim();
        if trimmed.is_empty()
            || trimmed.chars().count() > 100
            || trimmed.chars().any(char::is_control)
        {
            return Err(ApiError::invalid(
                "name",
                "name must be 1 to 100 characters without control characters",
            ));
        }
        let expires_at = string(o, "expires_at")?
            .map(|s| {
                Instant::parse(&s).map_err(|fault| {
                    ApiError::invalid("expires_at", format!("expires_at must be RFC 3339 UTC with a literal Z, e.g. 2027-01-01T00:00:00Z: {fault}"))
                })
            })
            .transpose()?;
        Ok(KeyCreate {
            name: trimmed.to_owned(),
            expires_at,
        })
    }
}

/// `results[0]` of `POST /v1/keys`: the key, and its secret, shown this once.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NewKey {
    #[serde(flatten)]
    pub key: KeyRecord,
    /// The raw key (`svc_live_...`), shown only in this answer: the service keeps its hash.
    pub secret: String,
}

/// Creates a key for the signed-in user; its secret is in this answer only.
///
/// Session cookie only: a key cannot create keys. Each plan holds a bounded number of live
/// (neither revoked nor expired) keys: researcher 3, power 10, desk 50; `403` beyond.
#[utoipa::path(post, path = "/v1/keys", tag = "account", operation_id = "create_key",
    params(NoQuery),
    request_body(content = KeyCreate, content_type = "application/json"),
    security(("session" = [])),
    responses((status = 200, description = "`results[0]`: the new key with its `secret`, shown once.", body = Envelope<NewKey>)))]
pub(crate) async fn create_key(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(session): Extension<Session>,
    Q(_): Q<NoQuery>,
    Json(body): Json<KeyCreate>,
) -> Reply {
    let now = Instant::now();
    if body.expires_at.is_some_and(|e| e <= now) {
        return Err(ApiError::invalid(
            "expires_at",
            "expires_at must be in the future",
        ));
    }
    let user = &session.user;
    let cap = user.plan.max_live_keys();
    // The cap is checked and the key inserted in one transaction: parallel requests cannot
    // both take the last place.
    let Some((key, secret)) = state
        .store()
        .create_key_within(&user.id, &body.name, body.expires_at, cap, now)
        .await?
    else {
        return Err(ApiError::Forbidden(format!(
            "the {} plan holds at most {cap} live keys; revoke one first",
            user.plan
        )));
    };
    tracing::info!(user_id = %user.id, key_id = %key.id, "key created");
    Ok(ok(&ctx, vec![NewKey { key, secret }]).into_response())
}

/// Revokes one of the signed-in user's keys.
///
/// Session cookie only. Another user's key, or no such key, is `404`. Every replica refuses
/// the key within 5 seconds (the key cache keeps a key 4 s). Revoking a revoked key answers it
/// unchanged.
#[utoipa::path(delete, path = "/v1/keys/{id}", tag = "account", operation_id = "revoke_key",
    params(NoQuery, ("id" = String, Path, description = "The key's id (`key_...`), as `GET /v1/keys` lists it.")),
    security(("session" = [])),
    responses((status = 200, description = "`results[0]`: the key, with `revoked_at` set.", body = Envelope<KeyRecord>)))]
pub(crate) async fn revoke_key(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    Q(_): Q<NoQuery>,
) -> Reply {
    let user = &session.user;
    if !state
        .store()
        .revoke_key(&user.id, &id, Instant::now())
        .await?
    {
        return Err(ApiError::not_found(
            "no key with this id among yours".into(),
        ));
    }
    state.keys().forget(&id);
    let key = state
        .store()
        .list_keys(&user.id)
        .await?
        .into_iter()
        .find(|k| k.id == id)
        .ok_or(ApiError::INTERNAL)?;
    tracing::info!(user_id = %user.id, key_id = %key.id, "key revoked");
    Ok(ok(&ctx, vec![key]).into_response())
}
