//! Account routes over the router (oneshot): sessions by cookie, keys made and revoked by a
//! signed-in user, who may use which credential, cross-site writes, lifetimes, logout, and
//! the 503s of sign-in ways that are not configured. The e-mail link against a real SMTP
//! server and the browser flows are in `tests/accounts/` (run by scripts/test-all).

#[macro_use]
mod common;

use asof_engine::Instant;
use asof_server::Options;
use asof_server::plan::Plan;
use asof_server::signin::session;
use asof_server::state::hash_key;
use asof_server::state::store::SignInLink;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::backends::on_backend;
use common::*;
use serde_json::{Value, json};
use tower::ServiceExt;

/// A state whose mail goes to a port nothing listens on.
async fn with_dead_mail() -> T {
    dead_mail(Options::default()).await
}

/// `base` with e-mail sign-in configured towards a port nothing listens on.
async fn dead_mail(base: Options) -> T {
    on_backend(common::dead_mail(base)).await
}

/// `POST /v1/auth/email/confirm` with a form body, as the confirmation page's button sends it.
async fn confirm(t: &T, form: &str, cookie: Option<&str>) -> Res {
    let mut b = Request::builder()
        .method(Method::POST)
        .uri("/v1/auth/email/confirm")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    respond(&t, b.body(Body::from(form.to_owned())).unwrap()).await
}

on_both! {
async fn a_signed_in_browser_reads_me_and_keys_with_its_cookie_and_a_key_holder_with_the_key() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "t@example.com", Plan::Researcher).await;
    let me = call(&t, Method::GET, "/v1/me", &with_cookie(&cookie), None).await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.json);
    let r = &me.json["results"][0];
    assert_eq!(r["email"], "t@example.com");
    assert_eq!(r["credential"], "session");
    assert_eq!(r["key_id"], Value::Null);
    assert_eq!(r["max_live_keys"], 3);
    let bearer = format!("Bearer {}", t.key);
    let me = call(
        &t,
        Method::GET,
        "/v1/me",
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_eq!(me.json["results"][0]["credential"], "key");
    assert!(
        me.json["results"][0]["key_id"]
            .as_str()
            .unwrap()
            .starts_with("key_")
    );
    let by_cookie = call(&t, Method::GET, "/v1/keys", &with_cookie(&cookie), None).await;
    let by_key = call(
        &t,
        Method::GET,
        "/v1/keys",
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_eq!(by_cookie.status, StatusCode::OK);
    // The same keys (`last_used_at` may move between the two reads: the flusher writes it).
    let ids = |r: &Res| -> Vec<Value> {
        r.json["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| json!([k["id"], k["prefix"], k["name"]]))
            .collect()
    };
    assert_eq!(
        ids(&by_cookie),
        ids(&by_key),
        "same user, same keys"
    );
    let none = call(&t, Method::GET, "/v1/me", &[], None).await;
    assert_error(&none, StatusCode::UNAUTHORIZED, "unauthorized", None);
}

async fn a_key_is_created_with_its_secret_shown_once_and_works_at_once() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "new@example.com", Plan::Researcher).await;
    let made = call(
        &t,
        Method::POST,
        "/v1/keys",
        &with_cookie(&cookie),
        Some(json!({"name": "laptop", "expires_at": "2099-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.json);
    let k = &made.json["results"][0];
    let secret = k["secret"].as_str().unwrap();
    assert!(secret.starts_with("svc_live_") && secret.starts_with(k["prefix"].as_str().unwrap()));
    assert_eq!(k["name"], "laptop");
    assert_eq!(k["expires_at"], "2099-01-01T00:00:00Z");
    assert_eq!(
        made.headers[header::CACHE_CONTROL],
        "private, max-age=0, must-revalidate"
    );
    // Listed by prefix, never with the secret.
    let listed = call(&t, Method::GET, "/v1/keys", &with_cookie(&cookie), None).await;
    assert!(!String::from_utf8_lossy(&listed.bytes).contains(secret));
    assert_eq!(listed.json["results"][0]["id"], k["id"]);
    // The secret is a working key, and only its hash is stored.
    let news = call(
        &t,
        Method::GET,
        "/v1/news?cik=320193&as_of=2026-11-01T00:00:00Z",
        &[("authorization", &format!("Bearer {secret}"))],
        None,
    )
    .await;
    assert_ne!(news.status, StatusCode::UNAUTHORIZED, "{}", news.json);
    assert!(
        t.store
            .key_by_hash(&hash_key(secret))
            .await
            .unwrap()
            .is_some()
    );
}

async fn keys_are_made_and_revoked_with_the_session_only_never_with_a_key() {
    let t = on_backend(Options::default()).await;
    let bearer = format!("Bearer {}", t.key);
    let r = call(
        &t,
        Method::POST,
        "/v1/keys",
        &[("authorization", &bearer)],
        Some(json!({"name": "x"})),
    )
    .await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sign in")
    );
    let id = t
        .store
        .list_keys(
            &t.store
                .upsert_user("t@example.com", Plan::Researcher)
                .await
                .unwrap()
                .id,
        )
        .await
        .unwrap()[0]
        .id
        .clone();
    let r = call(
        &t,
        Method::DELETE,
        &format!("/v1/keys/{id}"),
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
}

async fn bad_key_bodies_are_refused_naming_the_field() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "b@example.com", Plan::Researcher).await;
    let h = with_cookie(&cookie);
    for (body, param) in [
        (json!({}), "name"),
        (json!({"name": ""}), "name"),
        (json!({"name": "a\u{7}b"}), "name"),
        (json!({"name": "x".repeat(101)}), "name"),
        (json!({"name": 7}), "name"),
        (
            json!({"name": "x", "expires_at": "2020-01-01T00:00:00Z"}),
            "expires_at",
        ),
        (
            json!({"name": "x", "expires_at": "2099-01-01T00:00:00+01:00"}),
            "expires_at",
        ),
        (
            json!({"name": "x", "expires_at": "2099-01-01"}),
            "expires_at",
        ),
        (
            json!({"name": "x", "expire_at": "2099-01-01T00:00:00Z"}),
            "expire_at",
        ),
        (json!(["name"]), "body"),
    ] {
        let r = call(&t, Method::POST, "/v1/keys", &h, Some(body.clone())).await;
        assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some(param));
        assert!(
            !r.json["error"]["message"].as_str().unwrap().is_empty(),
            "{body}"
        );
    }
    // Not JSON at all.
    let mut hs = h.clone();
    hs.push(("content-type", "text/plain"));
    let res = t.app.clone()
        .oneshot(
            Request::post("/v1/keys")
                .header("cookie", &cookie)
                .header("content-type", "application/json")
                .body(Body::from("{not json"))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(
        t.store
            .list_keys(&t.store.sign_in_user("b@example.com").await.unwrap().id)
            .await
            .unwrap()
            .is_empty(),
        "nothing was made"
    );
}

async fn a_plan_holds_at_most_its_live_keys() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "cap@example.com", Plan::Researcher).await;
    let h = with_cookie(&cookie);
    let mut ids = Vec::new();
    for n in 0..3 {
        let r = call(
            &t,
            Method::POST,
            "/v1/keys",
            &h,
            Some(json!({"name": format!("k{n}")})),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        ids.push(r.json["results"][0]["id"].as_str().unwrap().to_owned());
    }
    let r = call(
        &t,
        Method::POST,
        "/v1/keys",
        &h,
        Some(json!({"name": "k3"})),
    )
    .await;
    assert_error(&r, StatusCode::FORBIDDEN, "forbidden", None);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 3")
    );
    // A revoked key frees its slot.
    let d = call(
        &t,
        Method::DELETE,
        &format!("/v1/keys/{}", ids[0]),
        &h,
        None,
    )
    .await;
    assert_eq!(d.status, StatusCode::OK);
    let r = call(
        &t,
        Method::POST,
        "/v1/keys",
        &h,
        Some(json!({"name": "k3"})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
}

async fn a_revoked_key_is_refused_at_once_and_another_users_key_is_404() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "rev@example.com", Plan::Researcher).await;
    let h = with_cookie(&cookie);
    let made = call(&t, Method::POST, "/v1/keys", &h, Some(json!({"name": "k"}))).await;
    let id = made.json["results"][0]["id"].as_str().unwrap().to_owned();
    let secret = made.json["results"][0]["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let bearer = format!("Bearer {secret}");
    // Used once, so this process caches it.
    let ok = call(
        &t,
        Method::GET,
        "/v1/me",
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK);
    // Someone else's session cannot see or revoke it.
    let other = signed_in(&t, "other@example.com", Plan::Desk).await;
    let r = call(
        &t,
        Method::DELETE,
        &format!("/v1/keys/{id}"),
        &with_cookie(&other),
        None,
    )
    .await;
    assert_error(&r, StatusCode::NOT_FOUND, "not_found", None);
    let r = call(&t, Method::DELETE, "/v1/keys/key_nope", &h, None).await;
    assert_error(&r, StatusCode::NOT_FOUND, "not_found", None);
    let r = call(&t, Method::DELETE, &format!("/v1/keys/{id}"), &h, None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert!(r.json["results"][0]["revoked_at"].is_string());
    let refused = call(
        &t,
        Method::GET,
        "/v1/me",
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_error(&refused, StatusCode::UNAUTHORIZED, "unauthorized", None);
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("revoked")
    );
}

async fn a_cookie_write_from_another_site_is_refused() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "x@example.com", Plan::Researcher).await;
    for extra in [
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
        ("origin", "https://evil.example"),
    ] {
        let r = call(
            &t,
            Method::POST,
            "/v1/keys",
            &[("cookie", &cookie), extra],
            Some(json!({"name": "x"})),
        )
        .await;
        assert_error(&r, StatusCode::FORBIDDEN, "forbidden", None);
        assert!(
            r.json["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cross-site")
        );
        let r = call(
            &t,
            Method::POST,
            "/v1/auth/logout",
            &[("cookie", &cookie), extra],
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
    }
    // A same-origin page, and a client that is no browser page at all, may write.
    let r = call(
        &t,
        Method::POST,
        "/v1/keys",
        &[("cookie", &cookie)],
        Some(json!({"name": "cli"})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    // CORS never lets another origin send credentials.
    let pre = call(
        &t,
        Method::OPTIONS,
        "/v1/keys",
        &[
            ("origin", "https://evil.example"),
            ("access-control-request-method", "POST"),
        ],
        None,
    )
    .await;
    assert!(!pre.headers.contains_key("access-control-allow-credentials"));
}

async fn sessions_end_at_logout_after_idling_and_at_their_absolute_end() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "s@example.com", Plan::Researcher).await;
    let out = call(
        &t,
        Method::POST,
        "/v1/auth/logout",
        &with_cookie(&cookie),
        None,
    )
    .await;
    assert_eq!(out.status, StatusCode::OK, "{}", out.json);
    assert_eq!(out.json["results"][0]["signed_out"], true);
    let cleared = out.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(cleared.starts_with("__Host-svc_session=;") && cleared.contains("Max-Age=0"));
    let r = call(&t, Method::GET, "/v1/me", &with_cookie(&cookie), None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("signed out")
    );

    // Idle longer than the idle lifetime, and past the absolute end.
    let user = t.store.sign_in_user("s@example.com").await.unwrap();
    let now = Instant::now().micros();
    let hour = 3_600_000_000;
    t.store
        .create_session(
            &hash_key("idle"),
            &user.id,
            "email",
            Instant::from_micros(now - 25 * hour),
            Instant::from_micros(now + hour),
        )
        .await
        .unwrap();
    t.store
        .create_session(
            &hash_key("old"),
            &user.id,
            "email",
            Instant::from_micros(now - 10),
            Instant::from_micros(now - 1),
        )
        .await
        .unwrap();
    for id in ["idle", "old", "never-issued"] {
        let c = format!("__Host-svc_session={id}");
        let r = call(&t, Method::GET, "/v1/keys", &with_cookie(&c), None).await;
        assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    }
    // Logout without a session is 401.
    let r = call(&t, Method::POST, "/v1/auth/logout", &[], None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
}

async fn the_session_cookie_is_http_only_lax_and_secure_by_default() {
    let t = on_backend(Options::default()).await;
    let user = t.store.sign_in_user("c@example.com").await.unwrap();
    let set = session::start(
        t.store.as_ref(),
        &t.state.options().sessions,
        &user,
        "email",
    )
    .await
    .unwrap();
    let v = set.to_str().unwrap();
    assert!(v.starts_with("__Host-svc_session="));
    for attr in [
        "HttpOnly",
        "SameSite=Lax",
        "Path=/",
        "Secure",
        "Max-Age=1209600",
    ] {
        assert!(v.contains(attr), "{v} lacks {attr}");
    }
    // What the cookie carries is never what the store keeps.
    let id = cookie_of(v).trim_start_matches("__Host-svc_session=").to_owned();
    assert!(t.store.session(&id).await.unwrap().is_none());
    assert!(t.store.session(&hash_key(&id)).await.unwrap().is_some());
    // Issue 43, 3.5: the session under the unprefixed name (a cookie a sibling subdomain can
    // plant) is not read by a secure server; the `__Host-` one is.
    let planted = format!("svc_session={id}");
    let r = call(&t, Method::GET, "/v1/me", &with_cookie(&planted), None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    let own = format!("__Host-svc_session={id}");
    let r = call(&t, Method::GET, "/v1/me", &with_cookie(&own), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
}

// A local plain-HTTP server (`--insecure-cookies`) uses the spec's bare name: browsers refuse
// `__Host-` cookies without `Secure`.
async fn a_plain_http_server_names_its_session_cookie_svc_session() {
    let t = on_backend(Options {
        sessions: session::SessionOptions {
            secure: false,
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let cookie = signed_in(&t, "plain@example.com", Plan::Researcher).await;
    assert!(cookie.starts_with("svc_session="), "{cookie}");
    let r = call(&t, Method::GET, "/v1/me", &with_cookie(&cookie), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let prefixed = cookie.replacen("svc_session=", "__Host-svc_session=", 1);
    let r = call(&t, Method::GET, "/v1/me", &with_cookie(&prefixed), None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
}

async fn sign_in_ways_that_are_not_configured_answer_503_with_the_envelope() {
    let t = on_backend(Options::default()).await;
    for (method, uri, body) in [
        (
            Method::POST,
            "/v1/auth/email/start",
            Some(json!({"email": "a@example.com"})),
        ),
        (Method::GET, "/v1/auth/email/callback?token=00", None),
        (Method::GET, "/v1/auth/provider_a/start", None),
        (
            Method::GET,
            "/v1/auth/provider_a/callback?code=x&state=y",
            None,
        ),
        (Method::GET, "/v1/auth/provider_b/start", None),
        (Method::GET, "/v1/auth/provider_b/callback", None),
    ] {
        let r = call(&t, method, uri, &[], body).await;
        assert_error(
            &r,
            StatusCode::SERVICE_UNAVAILABLE,
            "sign_in_not_configured",
            None,
        );
        assert!(r.headers.contains_key(header::RETRY_AFTER), "{uri}");
    }
}

async fn an_email_sign_in_is_refused_for_a_bad_address_or_body_and_503_when_mail_fails() {
    let t = with_dead_mail().await;
    for (body, param) in [
        (json!({}), "email"),
        (json!({"email": "not-an-address"}), "email"),
        (json!({"email": "a@localhost"}), "email"),
        (json!({"email": 5}), "email"),
        (json!({"email": "a@example.com", "plan": "desk"}), "plan"),
    ] {
        let r = call(&t, Method::POST, "/v1/auth/email/start", &[], Some(body)).await;
        assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some(param));
    }
    let r = call(
        &t,
        Method::POST,
        "/v1/auth/email/start",
        &[],
        Some(json!({"email": "a@example.com"})),
    )
    .await;
    assert_error(
        &r,
        StatusCode::SERVICE_UNAVAILABLE,
        "mail_unavailable",
        None,
    );
}

// A client past its own limit spends no address's allowance: the requests it is refused count
// against no one, so it cannot lock a victim's address out of signing in.
async fn a_client_refused_for_its_own_limit_does_not_spend_an_addresss_links() {
    let t = dead_mail(Options {
        trusted_proxies: common::loopback_proxy(),
        ..Options::default()
    })
    .await;
    let start = |from: &'static str, email: String| {
        let t = &t;
        async move {
            call(
                t,
                Method::POST,
                "/v1/auth/email/start",
                &[("x-forwarded-for", from)],
                Some(json!({ "email": email })),
            )
            .await
        }
    };
    // The attacker spends its own 20 links on other addresses (the mail server is down, so
    // each is a 503 after being counted) ...
    for i in 0..asof_server::signin::mail::LINKS_PER_CLIENT {
        let r = start("203.0.113.7", format!("other{i}@example.com")).await;
        assert_eq!(r.json["error"]["code"], "mail_unavailable", "{}", r.json);
    }
    // ... then asks for the victim's address more times than the address allows: refused,
    // for its own limit.
    for _ in 0..=asof_server::signin::mail::LINKS_PER_ADDRESS {
        let r = start("203.0.113.7", "victim@example.com".into()).await;
        assert_error(&r, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None);
    }
    // The victim, from elsewhere, is not rate-limited: the link is attempted.
    let r = start("198.51.100.9", "victim@example.com".into()).await;
    assert_eq!(r.json["error"]["code"], "mail_unavailable", "{}", r.json);
}

// Issue 43, 3.4: a link signed in whoever opened it (login CSRF: an attacker's link opened by
// a victim) and a mail scanner's prefetch spent it. Now opening spends nothing, and only the
// browser that asked for the link (its binding cookie) signs in, by pressing the button.
async fn a_sign_in_link_signs_in_only_when_its_own_browser_presses_the_button() {
    let t = with_dead_mail().await;
    let now = Instant::now().micros();
    let live = "a".repeat(64);
    let old = "b".repeat(64);
    let binding = "c".repeat(64);
    let mine = format!("__Host-svc_signin={binding}");
    for (token, from, to) in [
        (&live, now, now + 600_000_000),
        (&old, now - 2_000_000_000, now - 1_000_000_000),
    ] {
        t.store
            .put_sign_in_link(&SignInLink::new(
                &hash_key(token),
                "l@example.com",
                &hash_key(&binding),
                Instant::from_micros(from),
                Instant::from_micros(to),
            ))
            .await
            .unwrap();
    }
    let open = |token: String, cookie: Option<String>| {
        let t = &t;
        async move {
            let h: Vec<(&str, &str)> = cookie.iter().map(|c| ("cookie", c.as_str())).collect();
            call(t, Method::GET, &format!("/v1/auth/email/callback?token={token}"), &h, None).await
        }
    };
    let press = |token: String, cookie: Option<String>| {
        let t = &t;
        async move { confirm(t, &format!("token={token}"), cookie.as_deref()).await }
    };
    // Opening the link (twice, as a scanner and then the user) spends nothing, sets nothing.
    for _ in 0..2 {
        let r = open(live.clone(), Some(mine.clone())).await;
        assert_eq!(r.status, StatusCode::FOUND);
        assert_eq!(
            r.headers[header::LOCATION],
            format!("/sign-in/confirm?token={live}").as_str()
        );
        assert!(!r.headers.contains_key(header::SET_COOKIE));
    }
    let r = open(live.clone(), None).await;
    assert_eq!(r.headers[header::LOCATION], "/sign-in?error=link_other_browser");
    // The confirmation page: a plain form posting the token, never stored by a cache.
    let page = get(&t, &format!("/sign-in/confirm?token={live}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.headers[header::CACHE_CONTROL], "no-store");
    assert_eq!(page.headers["referrer-policy"], "no-referrer");
    let html = String::from_utf8_lossy(&page.bytes).into_owned();
    assert!(html.contains(r#"<form method="post" action="/v1/auth/email/confirm">"#), "{html}");
    assert!(html.contains(&format!(r#"name="token" value="{live}""#)), "{html}");
    let bad = get(&t, "/sign-in/confirm?token=%3Cscript%3E").await;
    let bad_html = String::from_utf8_lossy(&bad.bytes).into_owned();
    assert!(!bad_html.contains("<script>") && !bad_html.contains("<form method"), "{bad_html}");
    // Another browser's press (no binding, another one, the unprefixed name a sibling
    // subdomain could plant) signs nobody in and leaves the link live.
    for other in [
        None,
        Some(format!("__Host-svc_signin={}", "d".repeat(64))),
        Some(format!("svc_signin={binding}")),
    ] {
        let r = press(live.clone(), other.clone()).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{other:?}");
        assert_eq!(r.headers[header::LOCATION], "/sign-in?error=link_other_browser");
        assert!(!r.headers.contains_key(header::SET_COOKIE), "{other:?}");
    }
    // The browser that asked: signed in, once.
    let first = press(live.clone(), Some(mine.clone())).await;
    assert_eq!(first.status, StatusCode::SEE_OTHER);
    assert_eq!(first.headers[header::LOCATION], "/account");
    assert_eq!(first.headers[header::CACHE_CONTROL], "no-store");
    let cookie = cookie_of(first.headers[header::SET_COOKIE].to_str().unwrap());
    assert!(cookie.starts_with("__Host-svc_session="), "{cookie}");
    let me = call(&t, Method::GET, "/v1/me", &with_cookie(&cookie), None).await;
    assert_eq!(me.json["results"][0]["email"], "l@example.com");
    assert_eq!(
        me.json["results"][0]["plan"], "researcher",
        "first sign-in makes a researcher"
    );
    let again = press(live.clone(), Some(mine.clone())).await;
    assert_eq!(again.headers[header::LOCATION], "/sign-in?error=link_used");
    for (token, reason) in [
        (live.clone(), "link_used"),
        (old.clone(), "link_expired"),
        ("e".repeat(64), "link_unknown"),
        ("short".to_owned(), "link_unknown"),
    ] {
        let r = open(token.clone(), Some(mine.clone())).await;
        assert_eq!(r.status, StatusCode::FOUND);
        assert_eq!(
            r.headers[header::LOCATION],
            format!("/sign-in?error={reason}").as_str()
        );
        assert!(!r.headers.contains_key(header::SET_COOKIE), "{reason}: no session");
        let r = press(token, Some(mine.clone())).await;
        assert_eq!(
            r.headers[header::LOCATION],
            format!("/sign-in?error={reason}").as_str()
        );
        assert!(!r.headers.contains_key(header::SET_COOKIE), "{reason}: no session");
    }
    let r = call(&t, Method::GET, "/v1/auth/email/callback", &[], None).await;
    assert_eq!(r.headers[header::LOCATION], "/sign-in?error=link_unknown");
    // The button's body is a form with the token alone.
    let r = confirm(&t, &format!("token={live}&plan=desk"), Some(&mine)).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some("plan"));
    let r = confirm(&t, "", Some(&mine)).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some("token"));
    let r = call(
        &t,
        Method::POST,
        "/v1/auth/email/confirm",
        &[],
        Some(json!({ "token": live })),
    )
    .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some("body"));
}

async fn session_requests_are_never_attributed_to_a_key_in_the_audit() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "aud@example.com", Plan::Desk).await;
    let before = t.state.audit().stats();
    let mut h = with_cookie(&cookie);
    h.push(("x-service-audit", "on"));
    let r = call(&t, Method::GET, "/v1/keys", &h, None).await;
    assert_eq!(r.status, StatusCode::OK);
    let after = t.state.audit().stats();
    assert_eq!(after.unattributed, before.unattributed + 1, "{after:?}");
}

async fn a_signed_in_browser_reads_the_data_routes_with_its_session_as_a_key_would() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "explorer@example.com", Plan::Researcher).await;
    let bearer = format!("Bearer {}", t.key);
    for uri in [
        "/v1/news?ticker=TSLA&as_of=2026-02-06T00:00:00Z",
        "/v1/news/diff?ticker=TSLA&as_of_start=2026-01-27T00:00:00Z&as_of_end=2026-02-06T00:00:00Z",
        "/v1/news?cik=1318605&as_of=2026-02-06T00:00:00Z&visible_by=available_at",
        "/v1/coverage?source=sec.edgar&date=2026-01-28",
        "/v1/mapping/ticker/TSLA?as_of=2026-02-06T00:00:00Z",
        "/v1/mapping/cik/1318605?as_of=2026-02-06T00:00:00Z",
    ] {
        let by_session = call(&t, Method::GET, uri, &with_cookie(&cookie), None).await;
        let by_key = call(&t, Method::GET, uri, &[("authorization", &bearer)], None).await;
        assert_eq!(by_session.status, by_key.status, "{uri}: {}", by_session.json);
        assert!(by_session.headers.contains_key("x-ratelimit-remaining"), "{uri}");
        let strip = |mut v: Value| {
            v["request_id"] = Value::Null;
            v
        };
        assert_eq!(strip(by_session.json), strip(by_key.json), "{uri}");
        assert_eq!(by_session.headers.get(header::ETAG), by_key.headers.get(header::ETAG), "{uri}");
    }
    // The record route too, by an id the cut answered.
    let cut = call(
        &t,
        Method::GET,
        "/v1/news?ticker=TSLA&as_of=2026-02-06T00:00:00Z",
        &with_cookie(&cookie),
        None,
    )
    .await;
    let id = cut.json["results"][0]["id"].as_str().unwrap().to_owned();
    let r = call(
        &t,
        Method::GET,
        &format!("/v1/news/{id}?as_of=2026-02-06T00:00:00Z"),
        &with_cookie(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    // The routes beyond the explorer's stay key-only: files, the stream.
    for uri in ["/v1/files", "/v1/stream?ticker=TSLA"] {
        let r = call(&t, Method::GET, uri, &with_cookie(&cookie), None).await;
        assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    }
}

async fn on_a_data_route_a_key_decides_whatever_session_cookie_comes_with_it() {
    let t = on_backend(Options::default()).await;
    let cookie = signed_in(&t, "both-creds@example.com", Plan::Researcher).await;
    let mut h = with_cookie(&cookie);
    h.push(("authorization", "Bearer svc_live_not_a_real_key_at_all_0000000000"));
    let r = call(&t, Method::GET, "/v1/news?ticker=TSLA&as_of=2026-02-06T00:00:00Z", &h, None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    // A session cookie that names no session is refused as on the account routes, and
    // without any credential the route asks for a key, as before.
    let made_up = with_cookie("__Host-svc_session=0123456789abcdef0123456789abcdef0123456789abcdef");
    let r = call(&t, Method::GET, "/v1/news?ticker=TSLA&as_of=2026-02-06T00:00:00Z", &made_up, None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    let r = call(&t, Method::GET, "/v1/news?ticker=TSLA&as_of=2026-02-06T00:00:00Z", &[], None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    assert!(
        r.json["error"]["message"].as_str().unwrap().contains("key"),
        "{}",
        r.json
    );
}

async fn usage_counts_requests_per_day_key_and_route_group_and_marks_each_keys_last_use() {
    let t = on_backend(Options::default()).await;
    let bearer = format!("Bearer {}", t.key);
    for uri in ["/v1/me", "/v1/me", "/v1/keys"] {
        let r = call(&t, Method::GET, uri, &[("authorization", &bearer)], None).await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let cookie = signed_in(&t, "t@example.com", Plan::Researcher).await;
    let r = call(&t, Method::GET, "/v1/keys", &with_cookie(&cookie), None).await;
    assert_eq!(r.status, StatusCode::OK);
    t.state.usage().flush().await.unwrap();
    let u = call(
        &t,
        Method::GET,
        "/v1/billing/usage",
        &with_cookie(&cookie),
        None,
    )
    .await;
    assert_eq!(u.status, StatusCode::OK, "{}", u.json);
    let today = Instant::now().day().to_string();
    let key_id = t
        .store
        .list_keys(&t.store.sign_in_user("t@example.com").await.unwrap().id)
        .await
        .unwrap()[0]
        .id
        .clone();
    let rows: Vec<(String, Value, String, i64)> = u.json["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["date"].as_str().unwrap().to_owned(),
                r["key_id"].clone(),
                r["route_group"].as_str().unwrap().to_owned(),
                r["requests"].as_i64().unwrap(),
            )
        })
        // The usage read itself is counted as it starts; the background flusher may have
        // written it before the read or not, so it is left out.
        .filter(|r| r.2 != "billing")
        .collect();
    assert_eq!(
        rows,
        [
            (today.clone(), Value::Null, "keys".to_owned(), 1),
            (today.clone(), json!(key_id), "keys".to_owned(), 1),
            (today.clone(), json!(key_id), "me".to_owned(), 2),
        ],
        "the session's own request is counted without a key"
    );
    let keys = call(
        &t,
        Method::GET,
        "/v1/keys",
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert!(
        keys.json["results"][0]["last_used_at"].is_string(),
        "{}",
        keys.json
    );
    // Another user sees only their own usage.
    let other = signed_in(&t, "o@example.com", Plan::Researcher).await;
    let u = call(
        &t,
        Method::GET,
        "/v1/billing/usage",
        &with_cookie(&other),
        None,
    )
    .await;
    assert_eq!(u.json["results"], json!([]));
}

// Issue 63, point 4: a third party asking links for someone's address, every 15 minutes, once
// spent the address's own allowance and locked its owner out of signing in. The limits that
// refuse are now the asking client's own (all its asks; its asks for one address).
async fn another_client_spending_an_addresss_links_does_not_lock_its_owner_out() {
    let t = dead_mail(Options {
        trusted_proxies: common::loopback_proxy(),
        ..Options::default()
    })
    .await;
    let start = |from: &'static str| {
        let t = &t;
        async move {
            call(
                t,
                Method::POST,
                "/v1/auth/email/start",
                &[("x-forwarded-for", from)],
                Some(json!({ "email": "owner@example.com" })),
            )
            .await
        }
    };
    // The attacker's asks for the owner's address: mailed (the mail server is down: 503
    // after each is counted), then refused, for the attacker's own limit.
    for _ in 0..asof_server::signin::mail::LINKS_PER_ADDRESS {
        let r = start("203.0.113.7").await;
        assert_eq!(r.json["error"]["code"], "mail_unavailable", "{}", r.json);
    }
    let r = start("203.0.113.7").await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None);
    // The owner, from their own browser and address, still gets a link.
    let r = start("198.51.100.9").await;
    assert_eq!(r.json["error"]["code"], "mail_unavailable", "{}", r.json);
}

// Issue 63, point 4: the address's ceiling (many clients together) slows delivery and refuses
// nobody: past it the ask is answered as any other and its link waits.
async fn past_an_addresss_ceiling_a_link_waits_and_nobody_is_refused() {
    let t = dead_mail(Options {
        trusted_proxies: common::loopback_proxy(),
        mail_ceiling: 3,
        ..Options::default()
    })
    .await;
    let mut codes = Vec::new();
    for i in 0..6 {
        let from = format!("203.0.113.{}", 20 + i);
        let r = call(
            &t,
            Method::POST,
            "/v1/auth/email/start",
            &[("x-forwarded-for", from.as_str())],
            Some(json!({ "email": "busy@example.com" })),
        )
        .await;
        codes.push(if r.status == StatusCode::OK {
            "ok".to_owned()
        } else {
            r.json["error"]["code"].as_str().unwrap().to_owned()
        });
        if r.status == StatusCode::OK {
            assert_eq!(r.json["results"][0]["email"], "busy@example.com", "{}", r.json);
            assert!(
                r.headers
                    .get_all(header::SET_COOKIE)
                    .iter()
                    .any(|c| c.to_str().unwrap().contains("svc_signin=")),
                "the browser is bound as for a mailed link"
            );
        }
    }
    // Three mailed now (503: the mail server is down), three accepted to be mailed later.
    assert_eq!(
        codes,
        [
            "mail_unavailable",
            "mail_unavailable",
            "mail_unavailable",
            "ok",
            "ok",
            "ok"
        ]
    );
    assert_eq!(t.state.waiting_links().len(), 3);
    // Asking again from a client whose link waits keeps one waiting, not two.
    let r = call(
        &t,
        Method::POST,
        "/v1/auth/email/start",
        &[("x-forwarded-for", "203.0.113.25")],
        Some(json!({ "email": "busy@example.com" })),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(t.state.waiting_links().len(), 3);
}
}
