//! The site a browser uses: the landing page, the as-of explorer, sign-in, the account page,
//! their stylesheet and scripts, and the cookie-less page-view beacon. Everything is served by this binary from
//! files compiled into it (`server/site/`): no CDN, web font or third-party script, so the
//! site works offline and sends visitors nowhere else.
//!
//! Pages are documents (`Kind::Document`): the same bytes for everyone, a body ETag. The
//! account page is a shell; its data comes from the account routes with the session cookie.

use asof_engine::Instant;
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::ApiError;
use crate::http::body::{FromJson, Json, required_string};
use crate::http::envelope::Envelope;
use crate::http::params::{NoQuery, Q, query};
use crate::http::response::CacheKind;
use crate::http::{AppState, Ctx, Reply, ok};
use crate::signin::oidc::ProviderName;

const INDEX: &str = include_str!("../../site/index.html");
const SIGN_IN: &str = include_str!("../../site/sign-in.html");
const ACCOUNT: &str = include_str!("../../site/account.html");
const CSS: &str = include_str!("../../site/site.css");
const JS: &str = include_str!("../../site/site.js");
const EXPLORE: &str = include_str!("../../site/explore.html");
const EXPLORE_JS: &str = include_str!("../../site/explore.js");

/// The pages the beacon counts.
pub const PAGES: [&str; 4] = ["/", "/explore", "/sign-in", "/account"];

fn page(content_type: &'static str, body: String) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Scripts and styles from this origin only; no frames, no form posts elsewhere.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    r
}

const HTML: &str = "text/html; charset=utf-8";

/// The landing page: what the service does, with a live example from the public sample.
#[utoipa::path(get, path = "/", tag = "site", operation_id = "site_home",
    params(NoQuery),
    responses((status = 200, description = "HTML landing page; works offline.", content_type = "text/html", body = String)))]
pub(crate) async fn home(State(state): State<AppState>, Q(_): Q<NoQuery>) -> Reply {
    let licensing = match &state.options().billing.license_contact {
        Some(c) => format!(r#"Ask for one at <a href="{0}">{0}</a>."#, escape(c)),
        None => "Ask the operator of this service for one.".to_owned(),
    };
    Ok(page(HTML, INDEX.replace("{{licensing}}", &licensing)))
}

/// Text made safe for HTML content and quoted attributes.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

query! {
    /// Query of `GET /explore`: the view, as the page writes it into its own URL so a view
    /// can be shared and reopened. The parameters mean what they mean on the data routes;
    /// the page checks them itself and says which it could not take, so an old or edited link
    /// still opens.
    pub struct ExplorePage {
        /// A public sample company (`/v1/meta`'s `sample.examples[].id`), without a session.
        pub example: Option<String>,
        /// A ticker, signed in (resolved as of the cut, as on `/v1/news`).
        pub ticker: Option<String>,
        /// A CIK, signed in.
        pub cik: Option<String>,
        /// A held source, signed in (default `sec.edgar`).
        pub source: Option<String>,
        /// `certified_pit` (default) or `forward_first_seen`.
        pub lane: Option<String>,
        /// `published_at` (default), `available_at` or `committed_at`.
        pub visible_by: Option<String>,
        /// The cut drawn; omitted, the page opens on an instant the chosen clock answers.
        pub as_of: Option<String>,
        /// An earlier instant: the page also draws what became knowable after it.
        pub as_of_start: Option<String>,
    }
}

/// The as-of explorer: a filer's records on a time axis with their three clocks, the API's
/// answer for the cut a slider names (knowable, not yet, holes, corrections, a diff), the
/// same question as curl, Python and SQL. Without a session it reads the public sample; with
/// one, the data routes with the session cookie (the page's script never holds a key).
#[utoipa::path(get, path = "/explore", tag = "site", operation_id = "site_explore",
    params(ExplorePage),
    responses((status = 200, description = "HTML explorer page; works offline. Its data comes from /v1/meta and the sample routes, or, for a signed-in browser, the data routes with the session cookie.", content_type = "text/html", body = String)))]
pub(crate) async fn explore(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    Q(_): Q<ExplorePage>,
) -> Reply {
    // Whether to ask /v1/me at all: a browser without the cookie is not signed in, and asking
    // would only draw a 401 into its console. The cookie is HttpOnly, so the page cannot see it.
    let cookie = crate::signin::session::cookie_of(&headers, &state.options().sessions).is_some();
    let mut r = page(
        HTML,
        EXPLORE.replace("{{session}}", if cookie { "1" } else { "0" }),
    );
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Cookie"));
    Ok(r)
}

/// The explorer's script.
#[utoipa::path(get, path = "/site/explore.js", tag = "site", operation_id = "site_explore_js",
    params(NoQuery),
    responses((status = 200, description = "JavaScript.", content_type = "text/javascript", body = String)))]
pub(crate) async fn explore_js(Q(_): Q<NoQuery>) -> Reply {
    Ok(page(
        "text/javascript; charset=utf-8",
        EXPLORE_JS.to_owned(),
    ))
}

query! {
    /// Query of `GET /sign-in`.
    pub struct SignInPage {
        /// Why the last sign-in failed, as the sign-in routes redirect with it:
        /// `link_used`, `link_expired`, `link_unknown`, `link_other_browser`,
        /// `provider_denied`, `provider_state`, `provider_token`, `provider_failed`,
        /// `email_unverified`, `account_exists`, `links_limited`, `mail_unavailable`,
        /// `session_ended`.
        pub error: Option<String>,
        /// What the last sign-in step did when it is not a failure: `join_link_sent` (a
        /// provider sign-in found the address's account made another way; a link to prove
        /// the address was mailed).
        pub notice: Option<String>,
    }
}

/// A readable sentence for a sign-in failure (never the raw parameter: it is not echoed).
fn reason(code: &str) -> &'static str {
    match code {
        "link_used" => {
            "That sign-in link was already used: each link works once. Ask for a new one below."
        }
        "link_expired" => {
            "That sign-in link has expired (links work for 15 minutes). Ask for a new one below."
        }
        "link_unknown" => "That sign-in link is not valid. Ask for a new one below.",
        "link_other_browser" => {
            "That sign-in link works only in the browser where it was asked for. Open it there, or ask for a new one below."
        }
        "account_exists" => {
            "An account with this e-mail address already exists. Sign in the way you first did; this server cannot mail a link to prove the address."
        }
        "links_limited" => {
            "Too many sign-in links were sent to this address. Please wait 15 minutes and try again."
        }
        "mail_unavailable" => {
            "The sign-in e-mail could not be sent. Please try again in a few minutes."
        }
        "provider_denied" => "Sign-in was cancelled at the provider.",
        "provider_state" => {
            "That sign-in did not start in this browser, or took longer than 10 minutes. Please try again."
        }
        "provider_token" => "The provider's answer could not be verified. Please try again.",
        "provider_failed" => {
            "The provider could not complete the sign-in. Please try again, or sign in another way."
        }
        "email_unverified" => {
            "The provider did not confirm an e-mail address for your account; sign in with a verified address."
        }
        "session_ended" => "Your session has ended. Please sign in again.",
        _ => "Sign-in did not complete. Please try again.",
    }
}

/// The sign-in page: e-mail link, provider A and provider B, each shown only when this server
/// is configured for it.
#[utoipa::path(get, path = "/sign-in", tag = "site", operation_id = "site_sign_in",
    params(SignInPage),
    responses((status = 200, description = "HTML sign-in page; works offline.", content_type = "text/html", body = String)))]
pub(crate) async fn sign_in(State(state): State<AppState>, Q(q): Q<SignInPage>) -> Reply {
    let notice = match (q.error.as_deref(), q.notice.as_deref()) {
        (Some(e), _) => format!(r#"<p class="notice error" role="alert">{}</p>"#, reason(e)),
        (None, Some("join_link_sent")) => r#"<p class="notice ok" role="status">An account with this e-mail address already exists. To add this sign-in way to it, open the link we have just sent to that address, in this browser.</p>"#.to_owned(),
        (None, _) => String::new(),
    };
    let email = if state.mailer().is_some() {
        r#"<form id="email-form"><label for="email">E-mail address</label><input id="email" name="email" type="email" autocomplete="email" required maxlength="254"><button type="submit">Send me a sign-in link</button></form><p id="email-result" hidden tabindex="-1"></p>"#.to_owned()
    } else {
        String::new()
    };
    let mut buttons = Vec::new();
    for (name, label) in [
        (ProviderName::A, "Sign in with provider A"),
        (ProviderName::B, "Sign in with provider B"),
    ] {
        if state.provider(name).is_some() {
            buttons.push(format!(
                r#"<a class="button" href="/v1/auth/{name}/start">{label}</a>"#
            ));
        }
    }
    let providers = if buttons.is_empty() {
        String::new()
    } else {
        format!(
            r#"<h2>Or</h2><div class="providers">{}</div>"#,
            buttons.join("")
        )
    };
    let none = email.is_empty() && providers.is_empty();
    let email = if none {
        r#"<p class="notice">Sign-in is not configured on this server. An operator can create keys with <code>asof keys create</code>.</p>"#.to_owned()
    } else {
        email
    };
    Ok(page(
        HTML,
        SIGN_IN
            .replace("{{notice}}", &notice)
            .replace("{{email}}", &email)
            .replace("{{providers}}", &providers),
    ))
}

query! {
    /// Query of `GET /sign-in/confirm`.
    pub struct ConfirmPage {
        /// The token of the sign-in link (`GET /v1/auth/email/callback` redirects here with it).
        pub token: Option<String>,
    }
}

/// The page a sign-in link leads to: one button that signs in (`POST /v1/auth/email/confirm`,
/// a plain form, no script). Opening the link spends nothing, so a mail scanner fetching it
/// signs nobody in; the button works only in the browser that asked for the link.
#[utoipa::path(get, path = "/sign-in/confirm", tag = "site", operation_id = "site_sign_in_confirm",
    params(ConfirmPage),
    responses((status = 200, description = "HTML confirmation page; works offline.", content_type = "text/html", body = String)))]
pub(crate) async fn sign_in_confirm(Q(q): Q<ConfirmPage>) -> Reply {
    let token = q
        .token
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()));
    let (notice, form) = match token {
        Some(t) => (
            String::new(),
            format!(
                r#"<form method="post" action="/v1/auth/email/confirm"><p>Finish signing in with the link from your e-mail. It works once, and only in the browser where you asked for it.</p><input type="hidden" name="token" value="{}"><button type="submit">Sign in</button></form>"#,
                escape(&t)
            ),
        ),
        None => (
            format!(
                r#"<p class="notice error" role="alert">{}</p>"#,
                reason("link_unknown")
            ),
            r#"<p><a href="/sign-in">Ask for a new link</a></p>"#.to_owned(),
        ),
    };
    let mut r = page(
        HTML,
        SIGN_IN
            .replace("{{notice}}", &notice)
            .replace("{{email}}", &form)
            .replace("{{providers}}", ""),
    );
    // The page holds a live token: never kept by a cache, never sent on as a Referer.
    r.extensions_mut().insert(CacheKind::NoStore);
    r.headers_mut()
        .insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    Ok(r)
}

query! {
    /// Query of `GET /account`.
    pub struct AccountPage {
        /// How a checkout at the payment processor ended, as it returns the browser here:
        /// `success` or `cancelled`.
        pub checkout: Option<String>,
    }
}

/// The plan section: buy a plan (with the internal-use attestation) and manage billing, when
/// this server sells plans.
fn billing_section(state: &AppState) -> String {
    if state.billing().is_err() {
        return r#"<p class="notice">Plans are not sold on this server; an operator sets plans with <code>asof keys create --plan</code>.</p>"#.to_owned();
    }
    let choices: String = crate::plan::Plan::ALL
        .iter()
        .map(|p| {
            format!(
                r#"<div class="choice"><input type="radio" name="plan" id="plan-{p}" value="{p}"{checked} required><label for="plan-{p}">{name}: {rpm} requests a minute, up to {keys} live keys{extra}</label></div>"#,
                checked = if *p == crate::plan::Plan::Power { " checked" } else { "" },
                name = match p {
                    crate::plan::Plan::Researcher => "Researcher",
                    crate::plan::Plan::Power => "Power",
                    crate::plan::Plan::Desk => "Desk",
                },
                rpm = p.requests_per_minute(),
                keys = p.max_live_keys(),
                extra = match p {
                    crate::plan::Plan::Researcher => "",
                    crate::plan::Plan::Power => ", Parquet files",
                    crate::plan::Plan::Desk => ", Parquet files, decision audit receipts",
                },
            )
        })
        .collect();
    format!(
        r#"<form id="checkout"><fieldset><legend>Choose a plan</legend>{choices}</fieldset><div class="choice"><input type="checkbox" id="attestation" name="attestation" required><label for="attestation">{text}</label></div><button type="submit">Continue to payment</button></form><p><button type="button" id="manage-billing" class="secondary">Manage billing and invoices</button></p><p id="billing-error" class="notice error" hidden role="alert"></p>"#,
        text = escape(crate::billing::ATTESTATION_TEXT),
    )
}

/// The account page: plan (buy one, manage billing), keys (create, copy once, revoke),
/// usage, sign out. Without a live session its script goes to the sign-in page.
#[utoipa::path(get, path = "/account", tag = "site", operation_id = "site_account",
    params(AccountPage),
    responses((status = 200, description = "HTML account page; its data comes from /v1/me, /v1/keys and /v1/billing/usage with the session cookie, and it starts checkouts and portal sessions.", content_type = "text/html", body = String)))]
pub(crate) async fn account(State(state): State<AppState>, Q(q): Q<AccountPage>) -> Reply {
    let notice = match q.checkout.as_deref() {
        Some("success") => {
            r#"<p class="notice ok" role="status">Thank you. Your payment is being confirmed; your plan changes as soon as the payment processor tells us, usually within seconds. Reload to see it.</p>"#
        }
        Some("cancelled") => {
            r#"<p class="notice" role="status">Checkout was cancelled; nothing was charged.</p>"#
        }
        _ => "",
    };
    Ok(page(
        HTML,
        ACCOUNT
            .replace("{{checkout_notice}}", notice)
            .replace("{{billing}}", &billing_section(&state)),
    ))
}

/// The site's stylesheet.
#[utoipa::path(get, path = "/site/site.css", tag = "site", operation_id = "site_css",
    params(NoQuery),
    responses((status = 200, description = "CSS.", content_type = "text/css", body = String)))]
pub(crate) async fn css(Q(_): Q<NoQuery>) -> Reply {
    Ok(page("text/css; charset=utf-8", CSS.to_owned()))
}

/// The site's script.
#[utoipa::path(get, path = "/site/site.js", tag = "site", operation_id = "site_js",
    params(NoQuery),
    responses((status = 200, description = "JavaScript.", content_type = "text/javascript", body = String)))]
pub(crate) async fn js(Q(_): Q<NoQuery>) -> Reply {
    Ok(page("text/javascript; charset=utf-8", JS.to_owned()))
}

/// Body of `POST /site/beacon`.
#[derive(Debug, Clone, utoipa::ToSchema)]
pub struct Beacon {
    /// The page viewed: `/`, `/explore`, `/sign-in` or `/account`.
    #[schema(pattern = "^/(explore|sign-in|account)?$")]
    pub path: String,
}

impl FromJson for Beacon {
    const FIELDS: &'static [&'static str] = &["path"];
    fn from_object(o: &serde_json::Map<String, serde_json::Value>) -> Result<Self, ApiError> {
        let path = required_string(o, "path", "the page viewed")?;
        if !PAGES.contains(&path.as_str()) {
            return Err(ApiError::invalid(
                "path",
                format!("path must be one of the site's pages: {}", PAGES.join(", ")),
            ));
        }
        Ok(Beacon { path })
    }
}

/// `results[0]` of `POST /site/beacon`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Counted {
    pub path: String,
    /// The UTC day counted.
    pub date: String,
}

/// Counts one page view (first-party, cookie-less): the page and the UTC day, nothing about
/// the visitor. Never receipted.
#[utoipa::path(post, path = "/site/beacon", tag = "site", operation_id = "site_beacon",
    params(NoQuery),
    request_body(content = Beacon, content_type = "application/json"),
    responses((status = 200, description = "`results[0]`: what was counted.", body = Envelope<Counted>)))]
pub(crate) async fn beacon(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(_): Q<NoQuery>,
    Json(b): Json<Beacon>,
) -> Reply {
    let date = Instant::now().day().to_string();
    state.store().count_page_view(&b.path, &date).await?;
    Ok(ok(&ctx, vec![Counted { path: b.path, date }]).into_response())
}
