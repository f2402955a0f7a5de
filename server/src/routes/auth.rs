//! Sign-in routes: the e-mail link, the two OpenID Connect providers, and logout.
//!
//! Sign-in answers are redirects for a browser: success goes to `/account` with the
//! `svc_session` cookie set; any failure goes to `/sign-in?error=<reason>` and never sets a
//! session. Only a sign-in way that is not configured answers an envelope (503), because then
//! there is nothing a browser can do.

use asof_engine::Instant;
use axum::extract::{Extension, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rand::RngCore;
use serde::Serialize;

use crate::error::ApiError;
use crate::http::body::{FromJson, Json, required_string};
use crate::http::envelope::Envelope;
use crate::http::params::{NoQuery, Q, query};
use crate::http::{AppState, ClientAddr, Ctx, Reply, ok};
use crate::signin::mail::{
    LINK_TTL, LINKS_PER_ADDRESS, LINKS_PER_CLIENT, MAIL_WINDOW, parse_address,
};
use crate::signin::oidc::{FLOW_COOKIE, Flow, ProviderName};
use crate::signin::session::{self, COOKIE, Session, clear_cookie, cookie, set_cookie};
use crate::state::hash_key;

/// A `302` to `to`, never cached, sending no `Referer` onwards (sign-in URLs carry secrets).
fn redirect(to: &str, cookies: &[HeaderValue]) -> Response {
    let mut r = StatusCode::FOUND.into_response();
    let h = r.headers_mut();
    h.insert(
        header::LOCATION,
        HeaderValue::from_str(to).expect("redirect targets are ASCII"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    for c in cookies {
        h.append(header::SET_COOKIE, c.clone());
    }
    r
}

/// Where a failed sign-in lands: the sign-in page, which explains `reason`.
fn failed(reason: &str, cookies: &[HeaderValue]) -> Response {
    redirect(&format!("/sign-in?error={reason}"), cookies)
}

/// Signs `email` in (creating the user on first sign-in) and lands on the account page.
async fn signed_in(state: &AppState, email: &str, via: &str, extra: &[HeaderValue]) -> Reply {
    let user = state.store().sign_in_user(email).await?;
    let mut cookies = vec![
        session::start(
            state.store().as_ref(),
            &state.options().sessions,
            &user,
            via,
        )
        .await?,
    ];
    cookies.extend_from_slice(extra);
    Ok(redirect("/account", &cookies))
}

/// Body of `POST /v1/auth/email/start`.
#[derive(Debug, Clone, utoipa::ToSchema)]
pub struct EmailStart {
    /// The address to send the sign-in link to.
    #[schema(format = "email", max_length = 254, example = "ana@example.com")]
    pub email: String,
}

impl FromJson for EmailStart {
    const FIELDS: &'static [&'static str] = &["email"];
    fn from_object(o: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ApiError> {
        Ok(EmailStart {
            email: required_string(o, "email", "the address to send the sign-in link to")?,
        })
    }
}

/// `results[0]` of `POST /v1/auth/email/start`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LinkSent {
    /// The address the link was sent to, as accounts are matched (lower-cased).
    pub email: String,
    /// How long the link works, once.
    pub expires_in_seconds: u64,
    pub message: &'static str,
}

/// Sends a one-time sign-in link by e-mail.
///
/// The answer is the same whether or not an account exists for the address: the first
/// sign-in creates one (plan `researcher`). The link works once, within 15 minutes. Limits:
/// 5 links per address and 20 per client address per 15 minutes (`429` beyond, with
/// `Retry-After`); `503 sign_in_not_configured` when the server has no mail settings,
/// `503 mail_unavailable` when the mail server refused the message.
#[utoipa::path(post, path = "/v1/auth/email/start", tag = "account", operation_id = "email_sign_in_start",
    params(NoQuery),
    request_body(content = EmailStart, content_type = "application/json"),
    responses((status = 200, description = "`results[0]`: the link is on its way.", body = Envelope<LinkSent>)))]
pub(crate) async fn email_start(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(client): Extension<ClientAddr>,
    Q(_): Q<NoQuery>,
    Json(body): Json<EmailStart>,
) -> Reply {
    let mailer = state.mailer().ok_or_else(|| {
        ApiError::SignInNotConfigured(
            "e-mail sign-in is not configured on this server (asof serve --smtp-url, --mail-from, --public-url)".into(),
        )
    })?;
    let to = parse_address(&body.email).ok_or_else(|| {
        ApiError::invalid(
            "email",
            "email must be an e-mail address such as ana@example.com",
        )
    })?;
    let now = Instant::now();
    let window_len = i64::try_from(MAIL_WINDOW.as_micros()).unwrap_or(i64::MAX);
    let window = now.micros().div_euclid(window_len) * window_len;
    let retry_after = ((window + window_len - now.micros()) / 1_000_000).max(1) as u64;
    // The client's own limit first: a request it may not make counts against no address, so
    // a client cannot spend another person's allowance (and lock them out) with requests it
    // was refused anyway. The address's bucket is its hash: rate windows are no place for
    // addresses in clear; its refusal is the same whether the address has an account or not.
    for (bucket, limit) in [
        (format!("signin-ip:{}", client.0), LINKS_PER_CLIENT),
        (
            format!("signin-to:{}", hash_key(to.as_ref())),
            LINKS_PER_ADDRESS,
        ),
    ] {
        if state.store().hit(&bucket, window).await? > i64::from(limit) {
            return Err(ApiError::RateLimited { retry_after });
        }
    }
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    let token = hex::encode(b);
    let expires = Instant::from_micros(now.micros() + LINK_TTL.as_micros() as i64);
    state
        .store()
        .put_login_token(&hash_key(&token), to.as_ref(), now, expires)
        .await?;
    let link = format!(
        "{}/v1/auth/email/callback?token={token}",
        state.own_origin()
    );
    mailer.send_link(&to, &link).await.map_err(|e| {
        tracing::warn!(error = %e, "sign-in mail not sent");
        ApiError::MailUnavailable
    })?;
    Ok(ok(
        &ctx,
        vec![LinkSent {
            email: to.to_string(),
            expires_in_seconds: LINK_TTL.as_secs(),
            message: "if this address can receive mail, a sign-in link is on its way; it works once, within 15 minutes",
        }],
    )
    .into_response())
}

query! {
    /// Query of `GET /v1/auth/email/callback`.
    pub struct EmailCallback {
        /// The token of the sign-in link (as the e-mail gives it).
        pub token: Option<String>,
    }
}

/// Where a sign-in link leads: signs in and redirects.
///
/// A live token signs its address in (creating the user on first sign-in), sets the
/// `svc_session` cookie and redirects (`302`) to `/account`. A used, expired or unknown token
/// redirects to `/sign-in?error=link_used|link_expired|link_unknown`, never with a session.
#[utoipa::path(get, path = "/v1/auth/email/callback", tag = "account", operation_id = "email_sign_in_callback",
    params(EmailCallback),
    responses((status = 302, description = "To `/account` with `Set-Cookie: svc_session=...` when the link is live; to `/sign-in?error=...` otherwise.",
        headers(("Location" = String, description = "Where the browser goes next."), ("Set-Cookie" = String, description = "The session cookie, on success only.")))))]
pub(crate) async fn email_callback(State(state): State<AppState>, Q(q): Q<EmailCallback>) -> Reply {
    if state.mailer().is_none() {
        return Err(ApiError::SignInNotConfigured(
            "e-mail sign-in is not configured on this server".into(),
        ));
    }
    let Some(token) = q
        .token
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
    else {
        return Ok(failed("link_unknown", &[]));
    };
    use crate::state::store::TokenUse;
    match state
        .store()
        .use_login_token(&hash_key(&token), Instant::now())
        .await?
    {
        TokenUse::SignIn { email } => signed_in(&state, &email, "email", &[]).await,
        TokenUse::Used => Ok(failed("link_used", &[])),
        TokenUse::Expired => Ok(failed("link_expired", &[])),
        TokenUse::Unknown => Ok(failed("link_unknown", &[])),
    }
}

async fn provider_start(state: &AppState, name: ProviderName) -> Reply {
    let p = state.provider(name).ok_or_else(|| not_configured(name))?;
    let (url, flow) = p.start().await.map_err(|e| {
        tracing::warn!(provider = %name, error = %e, "sign-in provider unreachable");
        ApiError::ProviderUnavailable(name.to_string())
    })?;
    let secure = state.options().sessions.secure;
    let flow_cookie = set_cookie(
        FLOW_COOKIE,
        &flow.seal(state.flow_key()),
        crate::signin::oidc::FLOW_TTL,
        "/v1/auth",
        secure,
    );
    Ok(redirect(url.as_str(), &[flow_cookie]))
}

fn not_configured(name: ProviderName) -> ApiError {
    ApiError::SignInNotConfigured(format!(
        "sign-in with {name} is not configured on this server"
    ))
}

/// The callback of either provider: checks the flow this browser started, exchanges the code
/// (with the PKCE verifier), verifies the ID token and signs its verified e-mail in.
async fn provider_callback(
    state: &AppState,
    name: ProviderName,
    headers: &HeaderMap,
    query: Option<String>,
) -> Reply {
    let p = state.provider(name).ok_or_else(|| not_configured(name))?;
    let secure = state.options().sessions.secure;
    // The flow cookie is single use: every answer below clears it.
    let clear = clear_cookie(FLOW_COOKIE, "/v1/auth", secure);
    let params: Vec<(String, String)> =
        url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if get("error").is_some() {
        return Ok(failed("provider_denied", &[clear]));
    }
    let (Some(code), Some(state_param)) = (get("code"), get("state")) else {
        return Ok(failed("provider_failed", &[clear]));
    };
    let Some(flow) =
        cookie(headers, FLOW_COOKIE).and_then(|c| Flow::open(&c, state.flow_key(), name))
    else {
        // No flow started in this browser (or it expired): a callback nobody here asked for.
        return Ok(failed("provider_state", &[clear]));
    };
    if !flow.state_matches(state_param) {
        return Ok(failed("provider_state", &[clear]));
    }
    match p.finish(code, &flow).await {
        Ok(email) => signed_in(state, &email, name.as_str(), &[clear]).await,
        Err(e) => {
            tracing::warn!(provider = %name, error = %e, "provider sign-in refused");
            Ok(failed(e.reason(), &[clear]))
        }
    }
}

/// Starts sign-in with provider A: redirects to it (OpenID Connect, authorization code with
/// PKCE, `state` and `nonce`). `503` when provider A is not configured.
#[utoipa::path(get, path = "/v1/auth/provider_a/start", tag = "account", operation_id = "provider_a_start",
    params(NoQuery),
    responses((status = 302, description = "To provider A's authorization endpoint; sets a short-lived `svc_oauth` cookie binding the flow to this browser.",
        headers(("Location" = String, description = "The provider's authorization URL.")))))]
pub(crate) async fn provider_a_start(State(state): State<AppState>, Q(_): Q<NoQuery>) -> Reply {
    provider_start(&state, ProviderName::A).await
}

/// Provider A's redirect back: signs the ID token's verified e-mail in and redirects to
/// `/account`, or to `/sign-in?error=...` (denied, forged `state`, bad ID token, unverified
/// e-mail). Takes the provider's parameters (`code`, `state`, `error`, and any others it adds).
#[utoipa::path(get, path = "/v1/auth/provider_a/callback", tag = "account", operation_id = "provider_a_callback",
    responses((status = 302, description = "To `/account` with `Set-Cookie: svc_session=...` on success; to `/sign-in?error=...` otherwise.",
        headers(("Location" = String, description = "Where the browser goes next.")))))]
pub(crate) async fn provider_a_callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Reply {
    provider_callback(&state, ProviderName::A, &headers, q).await
}

/// Starts sign-in with provider B (as provider A).
#[utoipa::path(get, path = "/v1/auth/provider_b/start", tag = "account", operation_id = "provider_b_start",
    params(NoQuery),
    responses((status = 302, description = "To provider B's authorization endpoint; sets a short-lived `svc_oauth` cookie binding the flow to this browser.",
        headers(("Location" = String, description = "The provider's authorization URL.")))))]
pub(crate) async fn provider_b_start(State(state): State<AppState>, Q(_): Q<NoQuery>) -> Reply {
    provider_start(&state, ProviderName::B).await
}

/// Provider B's redirect back (as provider A's).
#[utoipa::path(get, path = "/v1/auth/provider_b/callback", tag = "account", operation_id = "provider_b_callback",
    responses((status = 302, description = "To `/account` with `Set-Cookie: svc_session=...` on success; to `/sign-in?error=...` otherwise.",
        headers(("Location" = String, description = "Where the browser goes next.")))))]
pub(crate) async fn provider_b_callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Reply {
    provider_callback(&state, ProviderName::B, &headers, q).await
}

/// `results[0]` of `POST /v1/auth/logout`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SignedOut {
    pub signed_out: bool,
}

/// Ends the caller's session and clears its cookie.
#[utoipa::path(post, path = "/v1/auth/logout", tag = "account", operation_id = "logout",
    params(NoQuery),
    security(("session" = [])),
    responses((status = 200, description = "`results[0]`: the session has ended; the cookie is cleared.", body = Envelope<SignedOut>)))]
pub(crate) async fn logout(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(session): Extension<Session>,
    Q(_): Q<NoQuery>,
) -> Reply {
    state
        .store()
        .end_session(&session.id_hash, Instant::now())
        .await?;
    tracing::info!(user_id = %session.user.id, "signed out");
    let mut r = ok(&ctx, vec![SignedOut { signed_out: true }]).into_response();
    r.headers_mut().append(
        header::SET_COOKIE,
        clear_cookie(COOKIE, "/", state.options().sessions.secure),
    );
    Ok(r)
}
