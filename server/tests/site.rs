//! The site over the router (oneshot): pages served offline with a strict CSP, sign-in buttons
//! only for the ways configured, a failure reason told in words (never echoed), the page-view
//! beacon (counted, never receipted), and the per-client limit on sign-in links.

mod common;

use asof_engine::Instant;
use asof_server::Options;
use asof_server::signin::SignInConfig;
use asof_server::signin::oidc::ProviderConfig;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::*;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn page(t: &T, uri: &str) -> (StatusCode, axum::http::HeaderMap, String) {
    let res = t
        .app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

async fn post_json(t: &T, uri: &str, body: Value) -> Res {
    respond(
        &t,
        Request::post(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn pages_and_assets_come_from_this_binary_and_load_nothing_from_elsewhere() {
    let t = setup().await;
    for (uri, kind) in [
        ("/", "text/html"),
        ("/sign-in", "text/html"),
        ("/account", "text/html"),
        ("/site/site.css", "text/css"),
        ("/site/site.js", "text/javascript"),
        ("/explore", "text/html"),
        ("/site/explore.js", "text/javascript"),
    ] {
        let (status, h, body) = page(&t, uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert!(
            h[header::CONTENT_TYPE].to_str().unwrap().starts_with(kind),
            "{uri}"
        );
        assert!(
            h[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .starts_with("default-src 'self'"),
            "{uri}"
        );
        // No other origin anywhere: no CDN, font or script from elsewhere (the SVG
        // namespace the explorer draws in is a name, never fetched).
        let body = body.replace("\"http://www.w3.org/2000/svg\"", "");
        for needle in ["http://", "https://", "//cdn", "fonts.g"] {
            assert!(!body.contains(needle), "{uri} mentions {needle}");
        }
        assert!(h.contains_key(header::ETAG), "{uri}");
    }
    let (_, _, home) = page(&t, "/").await;
    assert!(home.contains(r#"<html lang="en">"#) && home.contains("name=\"viewport\""));
}

#[tokio::test]
async fn the_explorer_page_says_only_whether_a_session_cookie_came_and_varies_on_the_cookie() {
    let t = setup().await;
    let (status, h, body) = page(&t, "/explore?example=tesla&as_of=2026-01-29T00:00:00Z").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"data-session="0""#), "{body}");
    assert_eq!(h[header::VARY], "Cookie");
    // With a cookie (valid or not: the page asks /v1/me to know), the flag is set; the page
    // carries nothing of the session itself.
    let res = t
        .app
        .clone()
        .oneshot(
            Request::get("/explore")
                .header(header::COOKIE, "__Host-svc_session=anything")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body =
        String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert!(body.contains(r#"data-session="1""#));
    assert!(!body.contains("anything"));
    // The view's parameters are the page's to check: an unknown one is refused as on every
    // route, a bad value of a known one is left to the page (it says what it could not take).
    let (status, _, _) = page(&t, "/explore?as_of=yesterday&visible_by=sometime").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = page(&t, "/explore?colour=blue").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // The beacon counts the explorer.
    let r = post_json(&t, "/site/beacon", json!({ "path": "/explore" })).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
}

#[tokio::test]
async fn the_sign_in_page_offers_only_the_ways_configured_and_explains_a_failure() {
    let t = setup().await;
    let (_, _, body) = page(&t, "/sign-in").await;
    assert!(body.contains("Sign-in is not configured on this server"));
    assert!(!body.contains("email-form") && !body.contains("provider_a/start"));

    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let opts = Options {
        public_url: Some("https://asof.example".into()),
        sign_in: SignInConfig {
            mail: Some((
                asof_server::secret::SecretUrl::new("smtp://127.0.0.1:1"),
                "no-reply@example.com".into(),
            )),
            provider_a: Some(ProviderConfig {
                issuer: "https://id.example".into(),
                client_id: "asof".into(),
                client_secret: None,
                redirect_url: "https://asof.example/v1/auth/provider_a/callback".into(),
            }),
            provider_b: None,
        },
        ..Options::default()
    };
    let t = setup_with(dir, store, opts).await;
    let (_, _, body) = page(&t, "/sign-in?error=link_used").await;
    assert!(body.contains(r#"<label for="email">"#) && body.contains("email-form"));
    assert!(body.contains("/v1/auth/provider_a/start"));
    assert!(
        !body.contains("/v1/auth/provider_b/start"),
        "B is not configured"
    );
    assert!(body.contains("already used"));
    // An unknown reason is told generically, never echoed.
    let (_, _, body) = page(&t, "/sign-in?error=%3Cscript%3Ealert(1)%3C%2Fscript%3E").await;
    assert!(!body.contains("<script>alert") && body.contains("did not complete"));
    let (status, _, _) = page(&t, "/sign-in?next=/x").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "undeclared parameter");
}

#[tokio::test]
async fn the_beacon_counts_a_page_view_per_day_and_is_never_receipted() {
    let t = setup().await;
    let before = t.state.audit().stats();
    for _ in 0..2 {
        let r = post_json(&t, "/site/beacon", json!({"path": "/account"})).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        assert_eq!(r.json["results"][0]["path"], "/account");
    }
    let day = Instant::now().day().to_string();
    assert_eq!(
        t.store.page_views(&day, &day).await.unwrap(),
        [("/account".to_string(), day.clone(), 2)]
    );
    for bad in [
        json!({"path": "/v1/news"}),
        json!({}),
        json!({"path": "/", "ua": "x"}),
    ] {
        let r = post_json(&t, "/site/beacon", bad).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    }
    // Asked for a receipt, a beacon is out of the audit's scope.
    let res = t
        .app
        .clone()
        .oneshot(
            Request::post("/site/beacon")
                .header(header::CONTENT_TYPE, "application/json")
                .header("x-service-audit", "on")
                .header(header::AUTHORIZATION, format!("Bearer {}", t.key))
                .body(Body::from(r#"{"path":"/"}"#))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(!res.headers().contains_key("x-service-audit-receipt"));
    let after = t.state.audit().stats();
    assert_eq!(after.enqueued, before.enqueued, "nothing receipted");
    assert_eq!(after.out_of_scope, before.out_of_scope + 1);
}

#[tokio::test]
async fn one_client_asks_for_at_most_twenty_sign_in_links_per_fifteen_minutes() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let opts = dead_mail(Options::default());
    let t = setup_with(dir, store, opts).await;
    // Nothing listens on the mail port: each ask passes the limits and fails to send.
    for n in 0..20 {
        let r = post_json(
            &t,
            "/v1/auth/email/start",
            json!({"email": format!("u{n}@example.com")}),
        )
        .await;
        assert_eq!(r.json["error"]["code"], "mail_unavailable", "ask {n}");
    }
    let r = post_json(
        &t,
        "/v1/auth/email/start",
        json!({"email": "u99@example.com"}),
    )
    .await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None);
    assert!(r.headers.contains_key(header::RETRY_AFTER));
}

#[tokio::test]
async fn a_key_revoked_on_one_replica_is_refused_by_another_within_the_key_cache_lifetime() {
    use asof_server::plan::Plan;
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let a = setup_with(
        tempfile::tempdir().unwrap(),
        store.clone(),
        Options::default(),
    )
    .await;
    let b = asof_server::AppState::with_options(
        sample_corpus().await,
        store.clone(),
        Options::default(),
    )
    .await
    .unwrap();
    let user = store
        .upsert_user("r@example.com", Plan::Researcher)
        .await
        .unwrap();
    let (key, secret) = store.create_key(&user.id, "k", None).await.unwrap();
    let b = asof_server::app(b);
    let me = |app: asof_server::App| {
        let secret = secret.clone();
        async move {
            app.oneshot(
                Request::get("/v1/me")
                    .header(header::AUTHORIZATION, format!("Bearer {secret}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap()
            .status()
        }
    };
    assert_eq!(
        me(b.clone()).await,
        StatusCode::OK,
        "replica B has the key cached"
    );
    // Revoked through replica A's session route.
    let set = asof_server::signin::session::start(
        store.as_ref(),
        &a.state.options().sessions,
        &user,
        "email",
    )
    .await
    .unwrap();
    let cookie = set.to_str().unwrap().split(';').next().unwrap().to_owned();
    let res = a
        .app
        .clone()
        .oneshot(
            Request::delete(format!("/v1/keys/{}", key.id))
                .header(header::COOKIE, cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        me(a.app.clone()).await,
        StatusCode::UNAUTHORIZED,
        "at once on A"
    );
    let started = std::time::Instant::now();
    while me(b.clone()).await == StatusCode::OK {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(6),
            "replica B still accepts the revoked key after 6 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_account_page_sells_plans_with_the_attestation_only_where_billing_is_configured() {
    let t = setup().await;
    let (_, _, body) = page(&t, "/account").await;
    assert!(body.contains("Plans are not sold on this server"), "{body}");
    assert!(!body.contains(r#"id="checkout""#));
    let (_, _, home) = page(&t, "/").await;
    assert!(home.contains(r#"id="licensing""#) && home.contains("Ask the operator"));

    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let opts = Options {
        public_url: Some("https://asof.example".into()),
        billing: asof_server::billing::BillingConfig {
            api_url: Some("http://127.0.0.1:9".into()),
            secret_key: Some("sk_test_x".into()),
            webhook_secret: Some("whsec_x".into()),
            prices: [Some("p_r".into()), Some("p_p".into()), Some("p_d".into())],
            license_contact: Some("mailto:licensing@asof.example?subject=<x>".into()),
        },
        ..Options::default()
    };
    let t = setup_with(dir, store, opts).await;
    let (status, _, body) = page(&t, "/account").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"<form id="checkout">"#), "{body}");
    for plan in ["researcher", "power", "desk"] {
        assert!(body.contains(&format!(r#"id="plan-{plan}""#)), "{plan}");
    }
    assert!(
        body.contains(r#"<input type="checkbox" id="attestation" name="attestation" required>"#)
    );
    assert!(
        body.contains(asof_server::billing::ATTESTATION_TEXT),
        "the statement attested is shown whole"
    );
    assert!(!body.contains("{{"), "every placeholder filled");
    // The processor sends the browser back with how checkout ended.
    let (status, _, body) = page(&t, "/account?checkout=success").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Your payment is being confirmed"));
    let (_, _, body) = page(&t, "/account?checkout=cancelled").await;
    assert!(body.contains("nothing was charged"));
    let (status, _, body) = page(&t, "/account?checkout=%3Cscript%3E").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.contains("<script>"), "never echoed");
    let (_, _, home) = page(&t, "/").await;
    assert!(
        home.contains(r#"href="mailto:licensing@asof.example?subject=&lt;x&gt;""#),
        "{home}"
    );
}
