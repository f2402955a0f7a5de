//! Sign-in routes: the e-mail link, the two OpenID Connect providers, and logout.
//!
//! Sign-in answers are redirects for a browser: success goes to `/account` with the session
//! cookie set; any failure goes to `/sign-in?error=<reason>` and never sets a session. Only a
//! sign-in way that is not configured answers an envelope (503), because then there is
//! nothing a browser can do.
//!
//! An e-mail link signs in only after a button press, in the browser that asked for it:
//! opening the link (`GET …/callback`, what a mail scanner's prefetch does) spends nothing and
//! leads to a confirmation page whose button posts the token (`POST …/confirm`), and the link
//! is bound to the asking browser by a cookie set at `POST …/start`. So a link an attacker
//! asked for and got a victim to open signs the victim into nothing (login CSRF), and a
//! scanner cannot use up a link.
//!
//! Accounts are found by provider identity `(issuer, subject)`, never by a provider's word on
//! an address alone: a provider sign-in whose address already has an account joins it only
//! once that address is proven, through a link mailed to it and confirmed in this browser.

use asof_engine::Instant;
use axum::extract::{Extension, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lettre::Address;
use rand::RngCore;
use serde::Serialize;

use crate::error::ApiError;
use crate::http::body::{Form, FromJson, Json, required_string};
use crate::http::envelope::Envelope;
use crate::http::params::{NoQuery, Q, query};
use crate::http::{AppState, ClientAddr, Ctx, Reply, ok};
use crate::signin::mail::{
    LINK_TTL, LINKS_PER_ADDRESS, LINKS_PER_CLIENT, MAIL_WINDOW, MailWindows, Purpose, parse_address,
};
use crate::signin::oidc::{Flow, ProviderName, Verified};
use crate::signin::session::{self, Session, clear_cookie, cookie, set_cookie};
use crate::state::User;
use crate::state::hash_key;
use crate::state::store::{Identity, IdentitySignIn, LinkState, SignInLink};

/// A redirect to `to` with `status`, never cached, sending no `Referer` onwards (sign-in URLs
/// carry secrets).
fn redirect_with(status: StatusCode, to: &str, cookies: &[HeaderValue]) -> Response {
    let mut r = status.into_response();
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

/// A `302` to `to` (the answer to a browser's `GET`).
fn redirect(to: &str, cookies: &[HeaderValue]) -> Response {
    redirect_with(StatusCode::FOUND, to, cookies)
}

/// Where a failed sign-in lands: the sign-in page, which explains `reason`.
fn failed(reason: &str, cookies: &[HeaderValue]) -> Response {
    redirect(&format!("/sign-in?error={reason}"), cookies)
}

/// Starts a session for `user` and lands on the account page (`status`: 302 after a `GET`,
/// 303 after a `POST`).
async fn signed_in(
    state: &AppState,
    user: &User,
    via: &str,
    status: StatusCode,
    extra: &[HeaderValue],
) -> Reply {
    let mut cookies =
        vec![session::start(state.store().as_ref(), &state.options().sessions, user, via).await?];
    cookies.extend_from_slice(extra);
    Ok(redirect_with(status, "/account", &cookies))
}

/// Counts a sign-in mail ask in `bucket` and judges it against `limit` over the sliding 15
/// minutes before now ([`MailWindows`]): `Some(retry_after)` when over.
async fn mail_refusal(
    state: &AppState,
    bucket: &str,
    limit: u32,
    w: &MailWindows,
) -> Result<Option<u64>, ApiError> {
    let current = state.store().hit(bucket, w.current).await?;
    let previous = state.store().hit_n(bucket, w.previous, 0).await?;
    Ok(w.refusal(previous, current, limit))
}

/// The rate bucket of links mailed to `to`, all clients together: its hash (rate windows are
/// no place for addresses in clear).
fn address_bucket(to: &Address) -> String {
    format!("signin-to:{}", hash_key(to.as_ref()))
}

/// The rate bucket of links one client asked for `to`.
fn pair_bucket(to: &Address, client: &ClientAddr) -> String {
    format!(
        "signin-pair:{}",
        hash_key(&format!("{to}\n{}", client.bucket))
    )
}

/// The rate bucket of provider join links mailed to `to`.
fn join_bucket(to: &Address) -> String {
    format!("signin-join:{}", hash_key(to.as_ref()))
}

/// Seconds until `to` may be mailed another link under the per-address ceiling, without
/// counting: `None` when it may be now.
async fn ceiling_wait(
    state: &AppState,
    to: &Address,
    now: Instant,
) -> Result<Option<u64>, ApiError> {
    let w = MailWindows::at(now);
    let bucket = address_bucket(to);
    let current = state.store().hit_n(&bucket, w.current, 0).await?;
    let previous = state.store().hit_n(&bucket, w.previous, 0).await?;
    Ok(w.refusal(previous, current + 1, state.options().mail_ceiling))
}

/// Mails `to` a fresh link bound to `binding`, counted under the per-address ceiling.
async fn mail_link(state: &AppState, to: &Address, binding: &str) -> Result<(), ApiError> {
    let mailer = state.mailer().ok_or_else(mail_not_configured)?;
    let now = Instant::now();
    state
        .store()
        .hit(&address_bucket(to), MailWindows::at(now).current)
        .await?;
    let link = new_link(state, to, binding, None, now).await?;
    mailer
        .send_link(to, &link, Purpose::SignIn)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "sign-in mail not sent");
            ApiError::MailUnavailable
        })
}

/// Mails the link of a request accepted past the address's ceiling once the address is under
/// it again, on a task of its own (at most one waiting per address and client: asking again
/// meanwhile changes nothing). Gives up after two windows; the link is made when it is
/// mailed, so it lives its whole 15 minutes from then.
fn mail_later(state: &AppState, to: Address, binding: String, pair: String) {
    if !state.waiting_links().insert(pair.clone()) {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        let give_up = std::time::Instant::now() + 2 * MAIL_WINDOW;
        loop {
            match ceiling_wait(&state, &to, Instant::now()).await {
                Ok(None) => {
                    if let Err(e) = mail_link(&state, &to, &binding).await {
                        tracing::warn!(error = %e.message(), "a delayed sign-in mail was not sent");
                    }
                    break;
                }
                Ok(Some(wait)) if std::time::Instant::now() < give_up => {
                    tokio::time::sleep(std::time::Duration::from_secs(wait.max(1))).await;
                }
                Ok(Some(_)) => {
                    tracing::warn!(
                        "a delayed sign-in mail gave up: the address stayed over its ceiling"
                    );
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e.message(), "a delayed sign-in mail was not sent");
                    break;
                }
            }
        }
        state.waiting_links().remove(&pair);
    });
}

/// Makes a link for `to`, bound to the browser `binding`, joining `joins` once used, and
/// gives its URL.
async fn new_link(
    state: &AppState,
    to: &Address,
    binding: &str,
    joins: Option<Identity>,
    now: Instant,
) -> Result<String, ApiError> {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    let token = hex::encode(b);
    state
        .store()
        .put_sign_in_link(&SignInLink {
            token_hash: hash_key(&token),
            email: to.to_string(),
            browser_hash: hash_key(binding),
            joins,
            created_at: now,
            expires_at: Instant::from_micros(now.micros() + LINK_TTL.as_micros() as i64),
        })
        .await?;
    Ok(format!(
        "{}/v1/auth/email/callback?token={token}",
        state.own_origin()
    ))
}

/// A token as links carry it: 64 hex digits.
fn well_formed(token: &str) -> bool {
    token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Why a link signed nobody in, as the sign-in page names it.
fn link_failure(s: &LinkState) -> &'static str {
    match s {
        LinkState::SignIn { .. } => unreachable!("a live link is not a failure"),
        LinkState::OtherBrowser => "link_other_browser",
        LinkState::Used => "link_used",
        LinkState::Expired => "link_expired",
        LinkState::Unknown => "link_unknown",
    }
}

fn mail_not_configured() -> ApiError {
    ApiError::SignInNotConfigured(
        "e-mail sign-in is not configured on this server (asof serve --smtp-url, --mail-from, --public-url)".into(),
    )
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
/// sign-in creates one (plan `researcher`). The link works once, within 15 minutes, and only
/// in the browser that asked for it: the answer sets the `__Host-svc_signin` cookie
/// (`svc_signin` on a local plain-HTTP server) that binds the link to this browser, so ask
/// from the browser that will open the link. Limits, per 15 minutes: a client may ask 20
/// links in all and 5 for one address (`429` beyond, with `Retry-After`; these are the asking
/// client's own, so nobody can lock another person out of signing in). An address is mailed
/// at most 20 links by all clients together: past that ceiling the request is accepted the
/// same and its link is mailed once the address is under it again (delivery slows; nothing
/// is refused; the link's 15 minutes start when it is mailed). `503 sign_in_not_configured`
/// when the server has no mail settings, `503 mail_unavailable` when the mail server refused
/// the message.
#[utoipa::path(post, path = "/v1/auth/email/start", tag = "account", operation_id = "email_sign_in_start",
    params(NoQuery),
    request_body(content = EmailStart, content_type = "application/json"),
    responses((status = 200, description = "`results[0]`: the link is on its way.", body = Envelope<LinkSent>,
        headers(("Set-Cookie" = String, description = "`__Host-svc_signin`: binds the link to this browser (HttpOnly, SameSite=Lax, 15 minutes).")))))]
pub(crate) async fn email_start(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Extension(client): Extension<ClientAddr>,
    headers: HeaderMap,
    Q(_): Q<NoQuery>,
    Json(body): Json<EmailStart>,
) -> Reply {
    state.mailer().ok_or_else(mail_not_configured)?;
    let to = parse_address(&body.email).ok_or_else(|| {
        ApiError::invalid(
            "email",
            "email must be an e-mail address such as ana@example.com",
        )
    })?;
    let now = Instant::now();
    let windows = MailWindows::at(now);
    // Limits that refuse are the asking client's own: its asks in all, then its asks for this
    // address. A request refused for the first counts against no address. No limit that
    // refuses is the address's alone, so nobody can lock its owner out by spending it.
    for (bucket, limit) in [
        (format!("signin-ip:{}", client.bucket), LINKS_PER_CLIENT),
        (pair_bucket(&to, &client), LINKS_PER_ADDRESS),
    ] {
        if let Some(retry_after) = mail_refusal(&state, &bucket, limit, &windows).await? {
            return Err(ApiError::RateLimited { retry_after });
        }
    }
    let (binding, bind_cookie) = session::binding(&headers, &state.options().sessions);
    // The address's ceiling (many clients together) only slows delivery. The answer is the
    // same either way, whether or not an account exists.
    match ceiling_wait(&state, &to, now).await? {
        None => mail_link(&state, &to, &binding).await?,
        Some(_) => mail_later(&state, to.clone(), binding, pair_bucket(&to, &client)),
    }
    let mut r = ok(
        &ctx,
        vec![LinkSent {
            email: to.to_string(),
            expires_in_seconds: LINK_TTL.as_secs(),
            message: "if this address can receive mail, a sign-in link is on its way; it works once, within 15 minutes, in this browser",
        }],
    )
    .into_response();
    r.headers_mut().append(header::SET_COOKIE, bind_cookie);
    Ok(r)
}

query! {
    /// Query of `GET /v1/auth/email/callback`.
    pub struct EmailCallback {
        /// The token of the sign-in link (as the e-mail gives it).
        pub token: Option<String>,
    }
}

/// Where a sign-in link leads: to the page that confirms the sign-in.
///
/// Opening a link spends nothing (a mail scanner that fetches it signs nobody in and leaves it
/// live). A link live for this browser redirects (`302`) to `/sign-in/confirm?token=...`,
/// whose button posts the token to `POST /v1/auth/email/confirm`. A link asked for by another
/// browser, used, expired or unknown redirects to
/// `/sign-in?error=link_other_browser|link_used|link_expired|link_unknown`. Never sets a
/// session.
#[utoipa::path(get, path = "/v1/auth/email/callback", tag = "account", operation_id = "email_sign_in_callback",
    params(EmailCallback),
    responses((status = 302, description = "To `/sign-in/confirm?token=...` when the link is live for this browser; to `/sign-in?error=...` otherwise.",
        headers(("Location" = String, description = "Where the browser goes next.")))))]
pub(crate) async fn email_callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    Q(q): Q<EmailCallback>,
) -> Reply {
    if state.mailer().is_none() {
        return Err(mail_not_configured());
    }
    let Some(token) = q
        .token
        .filter(|t| well_formed(t))
        .map(|t| t.to_ascii_lowercase())
    else {
        return Ok(failed("link_unknown", &[]));
    };
    let binding = session::binding_hash(&headers, &state.options().sessions);
    match state
        .store()
        .sign_in_link(&hash_key(&token), &binding, Instant::now())
        .await?
    {
        LinkState::SignIn { .. } => Ok(redirect(&format!("/sign-in/confirm?token={token}"), &[])),
        other => Ok(failed(link_failure(&other), &[])),
    }
}

/// Body of `POST /v1/auth/email/confirm` (the confirmation page's form).
#[derive(Debug, Clone, utoipa::ToSchema)]
pub struct EmailConfirm {
    /// The token of the sign-in link.
    #[schema(example = "9f2c…")]
    pub token: String,
}

impl FromJson for EmailConfirm {
    const FIELDS: &'static [&'static str] = &["token"];
    fn from_object(o: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ApiError> {
        Ok(EmailConfirm {
            token: required_string(o, "token", "the token of the sign-in link")?,
        })
    }
}

/// Signs in with a sign-in link: the confirmation page's button.
///
/// A link live for this browser (the `__Host-svc_signin` cookie of `POST /v1/auth/email/start`)
/// is spent, its address signed in (its account made on first sign-in; a provider sign-in
/// the link was mailed for joins the account), and the browser goes (`303`) to `/account`
/// with the session cookie. Otherwise it goes to `/sign-in?error=...` with no session; a link
/// asked for by another browser stays live for that browser.
#[utoipa::path(post, path = "/v1/auth/email/confirm", tag = "account", operation_id = "email_sign_in_confirm",
    params(NoQuery),
    request_body(content = EmailConfirm, content_type = "application/x-www-form-urlencoded"),
    responses((status = 303, description = "To `/account` with `Set-Cookie: __Host-svc_session=...` (the session cookie) when the link is live for this browser; to `/sign-in?error=...` otherwise, with no cookie.",
        headers(("Location" = String, description = "Where the browser goes next.")))))]
pub(crate) async fn email_confirm(
    State(state): State<AppState>,
    headers: HeaderMap,
    Q(_): Q<NoQuery>,
    Form(body): Form<EmailConfirm>,
) -> Reply {
    if state.mailer().is_none() {
        return Err(mail_not_configured());
    }
    let back = |reason: &str| {
        redirect_with(
            StatusCode::SEE_OTHER,
            &format!("/sign-in?error={reason}"),
            &[],
        )
    };
    if !well_formed(&body.token) {
        return Ok(back("link_unknown"));
    }
    let binding = session::binding_hash(&headers, &state.options().sessions);
    let now = Instant::now();
    match state
        .store()
        .use_sign_in_link(&hash_key(&body.token.to_ascii_lowercase()), &binding, now)
        .await?
    {
        LinkState::SignIn { email, joins } => {
            let user = state.store().sign_in_user(&email).await?;
            if let Some(identity) = joins {
                state.store().add_identity(&identity, &user.id, now).await?;
                tracing::info!(user_id = %user.id, issuer = %identity.issuer, "sign-in way joined after the address was proven");
            }
            signed_in(&state, &user, "email", StatusCode::SEE_OTHER, &[]).await
        }
        other => Ok(back(link_failure(&other))),
    }
}

async fn provider_start(state: &AppState, name: ProviderName, headers: &HeaderMap) -> Reply {
    let p = state.provider(name).ok_or_else(|| not_configured(name))?;
    let (url, flow) = p.start().await.map_err(|e| {
        tracing::warn!(provider = %name, error = %e, "sign-in provider unreachable");
        ApiError::ProviderUnavailable(name.to_string())
    })?;
    let sessions = &state.options().sessions;
    // The flow is bound to this browser: its binding cookie (made now when it has none)
    // must come back with the callback.
    let (binding, bind_cookie) = session::binding(headers, sessions);
    let flow = flow.bound_to(hash_key(&binding));
    let flow_cookie = set_cookie(
        sessions.flow_cookie_name(),
        &flow.seal(state.flow_key()),
        crate::signin::oidc::FLOW_TTL,
        "/",
        sessions.secure,
    );
    Ok(redirect(url.as_str(), &[flow_cookie, bind_cookie]))
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
    let sessions = &state.options().sessions;
    // The flow cookie is single use: every answer below clears it.
    let clear = clear_cookie(sessions.flow_cookie_name(), "/", sessions.secure);
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
    let Some(flow) = cookie(headers, sessions.flow_cookie_name())
        .and_then(|c| Flow::open(&c, state.flow_key(), name))
    else {
        // No flow started in this browser (or it expired): a callback nobody here asked for.
        return Ok(failed("provider_state", &[clear]));
    };
    // A flow started elsewhere and planted here (its binding is the starter's), or a
    // callback for another flow: nobody is signed in.
    if !flow.state_matches(state_param)
        || !flow.browser_matches(&session::binding_hash(headers, sessions))
    {
        return Ok(failed("provider_state", &[clear]));
    }
    match p.finish(code, &flow).await {
        Ok(v) => {
            let found = state
                .store()
                .identity_sign_in(&v.identity, &v.email, Instant::now())
                .await?;
            match found {
                IdentitySignIn::Known(user) | IdentitySignIn::New(user) => {
                    signed_in(state, &user, name.as_str(), StatusCode::FOUND, &[clear]).await
                }
                IdentitySignIn::EmailTaken => join_by_email(state, name, headers, v, clear).await,
            }
        }
        Err(e) => {
            tracing::warn!(provider = %name, error = %e, "provider sign-in refused");
            Ok(failed(e.reason(), &[clear]))
        }
    }
}

/// A provider sign-in whose verified address has an account this identity is not joined to:
/// the address is proven first. A link joining the identity is mailed to the address, bound
/// to this browser; confirming it signs in and joins. Without mail there is no proof to ask
/// for, so the sign-in is refused (`account_exists`: sign in the way the account was made).
async fn join_by_email(
    state: &AppState,
    name: ProviderName,
    headers: &HeaderMap,
    v: Verified,
    clear: HeaderValue,
) -> Reply {
    let Some(mailer) = state.mailer() else {
        return Ok(failed("account_exists", &[clear]));
    };
    let Some(to) = parse_address(&v.email) else {
        return Ok(failed("email_unverified", &[clear]));
    };
    let now = Instant::now();
    let windows = MailWindows::at(now);
    if mail_refusal(state, &join_bucket(&to), LINKS_PER_ADDRESS, &windows)
        .await?
        .is_some()
    {
        return Ok(failed("links_limited", &[clear]));
    }
    let (binding, bind_cookie) = session::binding(headers, &state.options().sessions);
    let link = new_link(state, &to, &binding, Some(v.identity), now).await?;
    if let Err(e) = mailer
        .send_link(&to, &link, Purpose::Join(name.as_str()))
        .await
    {
        tracing::warn!(error = %e, "joining mail not sent");
        return Ok(failed("mail_unavailable", &[clear]));
    }
    Ok(redirect(
        "/sign-in?notice=join_link_sent",
        &[clear, bind_cookie],
    ))
}

/// Starts sign-in with provider A: redirects to it (OpenID Connect, authorization code with
/// PKCE, `state` and `nonce`). `503` when provider A is not configured.
#[utoipa::path(get, path = "/v1/auth/provider_a/start", tag = "account", operation_id = "provider_a_start",
    params(NoQuery),
    responses((status = 302, description = "To provider A's authorization endpoint; sets a short-lived `__Host-svc_oauth` cookie (`svc_oauth` on a local plain-HTTP server) holding the sealed flow, bound to this browser's `__Host-svc_signin` binding cookie (set too when absent): a callback in another browser, or with a flow cookie planted from elsewhere, signs nobody in.",
        headers(("Location" = String, description = "The provider's authorization URL.")))))]
pub(crate) async fn provider_a_start(
    State(state): State<AppState>,
    headers: HeaderMap,
    Q(_): Q<NoQuery>,
) -> Reply {
    provider_start(&state, ProviderName::A, &headers).await
}

/// Provider A's redirect back: signs in the account of the ID token's identity (`iss`, `sub`)
/// and redirects to `/account`; a first sign-in makes an account for the token's verified
/// e-mail. When that address already has an account made another way, nothing is signed in:
/// a link is mailed to the address to prove it, and the browser goes to
/// `/sign-in?notice=join_link_sent`. Failures go to `/sign-in?error=...` (denied, forged
/// `state`, bad ID token, unverified e-mail, `account_exists` without mail). Takes the
/// provider's parameters (`code`, `state`, `error`, and any others it adds).
#[utoipa::path(get, path = "/v1/auth/provider_a/callback", tag = "account", operation_id = "provider_a_callback",
    responses((status = 302, description = "To `/account` with `Set-Cookie: __Host-svc_session=...` on success; to `/sign-in?notice=join_link_sent` when the address must be proven first; to `/sign-in?error=...` otherwise.",
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
    responses((status = 302, description = "To provider B's authorization endpoint; sets a short-lived `__Host-svc_oauth` cookie (`svc_oauth` on a local plain-HTTP server) holding the sealed flow, bound to this browser's `__Host-svc_signin` binding cookie (set too when absent): a callback in another browser, or with a flow cookie planted from elsewhere, signs nobody in.",
        headers(("Location" = String, description = "The provider's authorization URL.")))))]
pub(crate) async fn provider_b_start(
    State(state): State<AppState>,
    headers: HeaderMap,
    Q(_): Q<NoQuery>,
) -> Reply {
    provider_start(&state, ProviderName::B, &headers).await
}

/// Provider B's redirect back (as provider A's).
#[utoipa::path(get, path = "/v1/auth/provider_b/callback", tag = "account", operation_id = "provider_b_callback",
    responses((status = 302, description = "To `/account` with `Set-Cookie: __Host-svc_session=...` on success; to `/sign-in?notice=join_link_sent` when the address must be proven first; to `/sign-in?error=...` otherwise.",
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
        clear_cookie(
            state.options().sessions.cookie_name(),
            "/",
            state.options().sessions.secure,
        ),
    );
    Ok(r)
}
