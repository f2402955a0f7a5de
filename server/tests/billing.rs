//! Billing over the router (oneshot) against the Stripe-shaped processor of `test-support` on
//! loopback, every test on SQLite and on PostgreSQL: the 503 of each missing setting, the
//! attestation (400 missing, 403 false, recorded when true), checkout and portal at the
//! processor, signed notifications moving plans (checkout → power → the same key reaches
//! `/v1/files`; cancellation and a failed payment past grace → researcher), replayed,
//! tampered and stale notifications, and processor failures as envelopes. The official
//! `stripe` package's check of the signatures is in `tests/billing/` (run by scripts/test-all).

#[macro_use]
mod common;

use std::time::Duration;

use asof_server::Options;
use asof_server::billing::BillingConfig;
use asof_server::plan::Plan;
use asof_test_support::processor::{self, FakeProcessor, PRICES, SECRET_KEY, WEBHOOK_SECRET};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::backends::on_backend;
use common::*;
use serde_json::{Value, json};

const ORIGIN: &str = "https://asof.example";

fn config(api_url: &str) -> BillingConfig {
    BillingConfig {
        api_url: Some(api_url.into()),
        secret_key: Some(SECRET_KEY.into()),
        webhook_secret: Some(WEBHOOK_SECRET.into()),
        prices: PRICES.map(|p| Some(p.to_owned())),
        license_contact: Some("mailto:licensing@asof.example".into()),
    }
}

fn options(billing: BillingConfig) -> Options {
    Options {
        public_url: Some(ORIGIN.into()),
        billing,
        ..Options::default()
    }
}

/// A state with billing at a fresh fake processor.
async fn billed() -> (T, FakeProcessor) {
    let fake = FakeProcessor::start().await;
    (on_backend(options(config(&fake.url))).await, fake)
}

async fn checkout(t: &T, cookie: &str, body: Value) -> Res {
    call(
        t,
        Method::POST,
        "/v1/billing/checkout",
        &with_cookie(cookie),
        Some(body),
    )
    .await
}

async fn portal(t: &T, cookie: &str) -> Res {
    call(
        t,
        Method::POST,
        "/v1/billing/portal",
        &with_cookie(cookie),
        None,
    )
    .await
}

/// Posts `payload` to the webhook with `signature` as the `Stripe-Signature` header.
async fn post_webhook(t: &T, payload: &[u8], signature: Option<&str>) -> Res {
    let mut b = Request::builder()
        .method(Method::POST)
        .uri("/v1/billing/webhook")
        .header("content-type", "application/json; charset=utf-8");
    if let Some(s) = signature {
        b = b.header("stripe-signature", s);
    }
    respond(&t, b.body(Body::from(payload.to_vec())).unwrap()).await
}

/// Delivers one event as the processor does: serialized once, signed now.
async fn deliver(t: &T, event: &Value) -> Res {
    let payload = serde_json::to_vec(event).unwrap();
    let sig = processor::sign(&payload, WEBHOOK_SECRET, processor::now());
    post_webhook(t, &payload, Some(&sig)).await
}

/// Delivers events and asserts each answered 200; returns their outcomes.
async fn deliver_all(t: &T, events: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        let r = deliver(t, e).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        assert_eq!(r.json["status"], "ok");
        assert_eq!(r.json["results"][0]["event_id"], e["id"]);
        out.push(r.json["results"][0]["outcome"].as_str().unwrap().to_owned());
    }
    out
}

/// Signs in `email`, checks out `plan` and completes the payment at the processor; returns
/// the cookie, the user's key (made before paying), and the subscription id.
async fn subscribe(
    t: &T,
    fake: &FakeProcessor,
    email: &str,
    plan: Plan,
) -> (String, String, String) {
    let cookie = signed_in(t, email, Plan::Researcher).await;
    let user = t.store.sign_in_user(email).await.unwrap();
    let key = t
        .store
        .create_key(&user.id, "laptop", None)
        .await
        .unwrap()
        .1;
    let r = checkout(
        t,
        &cookie,
        json!({"plan_id": plan.as_str(), "attestation": true}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let session = r.json["results"][0]["checkout_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = fake.complete_checkout(&session);
    assert_eq!(deliver_all(t, &events).await, ["applied", "applied"]);
    let sub = fake.subscription_of(&session).unwrap();
    (cookie, key, sub)
}

async fn plan_of(t: &T, email: &str) -> Plan {
    t.store.sign_in_user(email).await.unwrap().plan
}

on_both! {
    async fn checkout_portal_and_webhook_answer_503_billing_not_configured_for_each_missing_setting() {
        for missing in 0..6 {
            let mut c = config("http://127.0.0.1:9");
            let flag = match missing {
                0 => { c.api_url = None; "--billing-api-url" }
                1 => { c.secret_key = None; "--billing-secret-key" }
                2 => { c.webhook_secret = None; "--billing-webhook-secret" }
                3 => { c.prices[0] = None; "--billing-price-researcher" }
                4 => { c.prices[1] = None; "--billing-price-power" }
                _ => { c.prices[2] = None; "--billing-price-desk" }
            };
            let t = on_backend(options(c)).await;
            let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
            for r in [
                checkout(&t, &cookie, json!({"plan_id": "power", "attestation": true})).await,
                portal(&t, &cookie).await,
                deliver(&t, &json!({"id": "evt_1", "type": "customer.subscription.deleted", "created": 1, "data": {"object": {}}})).await,
            ] {
                assert_error(&r, StatusCode::SERVICE_UNAVAILABLE, "billing_not_configured", None);
                let message = r.json["error"]["message"].as_str().unwrap();
                assert!(message.contains(flag), "{flag}: {message}");
                assert!(r.headers.contains_key("retry-after"));
            }
        }
    }

    async fn checkout_without_attestation_or_with_a_bad_plan_is_400_naming_the_field() {
        let (t, fake) = billed().await;
        let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
        for (body, param) in [
            (json!({"plan_id": "power"}), "attestation"),
            (json!({"plan_id": "power", "attestation": null}), "attestation"),
            (json!({"plan_id": "power", "attestation": "yes"}), "attestation"),
            (json!({"plan_id": "gold", "attestation": true}), "plan_id"),
            (json!({"plan_id": "Power", "attestation": true}), "plan_id"),
            (json!({"attestation": true}), "plan_id"),
            (json!({"plan_id": 2, "attestation": true}), "plan_id"),
            (json!({"plan_id": "power", "attestation": true, "coupon": "x"}), "coupon"),
        ] {
            let r = checkout(&t, &cookie, body.clone()).await;
            assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some(param));
        }
        let r = checkout(&t, &cookie, json!({"plan_id": "power"})).await;
        assert!(r.json["error"]["message"].as_str().unwrap().contains("internal"), "{}", r.json);
        assert!(fake.requests().is_empty(), "nothing reached the processor");
    }

    async fn checkout_with_attestation_false_is_403_commercial_license_required_and_records_nothing() {
        let (t, fake) = billed().await;
        let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
        let r = checkout(&t, &cookie, json!({"plan_id": "desk", "attestation": false})).await;
        assert_error(&r, StatusCode::FORBIDDEN, "commercial_license_required", None);
        let message = r.json["error"]["message"].as_str().unwrap();
        assert!(message.contains("mailto:licensing@asof.example"), "{message}");
        assert!(message.contains("internal use"), "{message}");
        let user = t.store.sign_in_user("ana@example.com").await.unwrap();
        assert!(t.store.attestations(&user.id).await.unwrap().is_empty());
        assert!(fake.requests().is_empty());
    }

    async fn checkout_and_portal_need_the_session_cookie_a_key_is_not_enough() {
        let (t, _fake) = billed().await;
        for path in ["/v1/billing/checkout", "/v1/billing/portal"] {
            let body = Some(json!({"plan_id": "power", "attestation": true}));
            let r = call(&t, Method::POST, path, &[("sec-fetch-site", "same-origin")], body.clone()).await;
            assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
            let bearer = format!("Bearer {}", t.key);
            let r = call(&t, Method::POST, path, &[("authorization", &bearer), ("sec-fetch-site", "same-origin")], body).await;
            assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
        }
    }

    async fn checkout_records_the_attestation_reuses_one_customer_and_answers_the_processors_url() {
        let (t, fake) = billed().await;
        let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
        let user = t.store.sign_in_user("ana@example.com").await.unwrap();
        let r = checkout(&t, &cookie, json!({"plan_id": "power", "attestation": true})).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        let a = &r.json["results"][0];
        let session = a["checkout_session_id"].as_str().unwrap();
        assert!(session.starts_with("cs_test_"));
        assert_eq!(a["url"], format!("{}/pay/{session}", fake.url));
        assert_eq!(a["plan_id"], "power");
        assert!(a["expires_at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(a["statement_version"], asof_server::billing::ATTESTATION_VERSION);
        let atts = t.store.attestations(&user.id).await.unwrap();
        assert_eq!(atts.len(), 1);
        assert_eq!((atts[0].id.as_str(), atts[0].plan), (a["attestation_id"].as_str().unwrap(), Plan::Power));
        assert_eq!(atts[0].statement_sha256, asof_server::billing::attestation_sha256());

        let reqs = fake.requests();
        assert_eq!(reqs.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), ["/v1/customers", "/v1/checkout/sessions"]);
        assert_eq!(reqs[0].field("email"), Some("ana@example.com"));
        assert_eq!(reqs[0].field("metadata[user_id]"), Some(user.id.as_str()));
        let s = &reqs[1];
        assert_eq!(s.field("mode"), Some("subscription"));
        assert_eq!(s.field("line_items[0][price]"), Some(PRICES[1]));
        assert_eq!(s.field("client_reference_id"), Some(user.id.as_str()));
        assert_eq!(s.field("metadata[plan]"), Some("power"));
        assert_eq!(s.field("success_url"), Some("https://asof.example/account?checkout=success"));
        assert_eq!(s.field("cancel_url"), Some("https://asof.example/account?checkout=cancelled"));
        let customer = t.store.billing_customer(&user.id).await.unwrap().unwrap();
        assert_eq!(s.field("customer"), Some(customer.as_str()));

        // A second (abandoned first) checkout reuses the customer and records a second
        // attestation; the portal opens on the same customer.
        let r = checkout(&t, &cookie, json!({"plan_id": "desk", "attestation": true})).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        let r = portal(&t, &cookie).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        assert!(r.json["results"][0]["portal_session_id"].as_str().unwrap().starts_with("bps_"));
        assert!(r.json["results"][0]["url"].as_str().unwrap().starts_with(&fake.url));
        let reqs = fake.requests();
        assert_eq!(reqs.iter().filter(|r| r.path == "/v1/customers").count(), 1);
        let p = reqs.last().unwrap();
        assert_eq!(p.path, "/v1/billing_portal/sessions");
        assert_eq!(p.field("customer"), Some(customer.as_str()));
        assert_eq!(p.field("return_url"), Some("https://asof.example/account"));
        assert_eq!(t.store.attestations(&user.id).await.unwrap().len(), 2);
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Researcher, "paying happens at the processor");
    }

    async fn checkout_then_webhook_sets_power_and_the_same_key_reaches_files() {
        let (t, fake) = billed().await;
        let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
        let user = t.store.sign_in_user("ana@example.com").await.unwrap();
        let key = t.store.create_key(&user.id, "laptop", None).await.unwrap().1;
        let r = send(&t, Method::GET, "/v1/files", Some(&key), &[]).await;
        assert_error(&r, StatusCode::FORBIDDEN, "forbidden", None);
        let r = send(&t, Method::GET, "/v1/me", Some(&key), &[]).await;
        assert_eq!(r.json["results"][0]["requests_per_minute"], 60);
        assert_eq!(r.headers["x-ratelimit-limit"], "60");

        let r = checkout(&t, &cookie, json!({"plan_id": "power", "attestation": true})).await;
        let session = r.json["results"][0]["checkout_session_id"].as_str().unwrap().to_owned();
        let events = fake.complete_checkout(&session);
        let answers: Vec<Res> = deliver_applied(&t, &events).await;
        for a in &answers {
            assert_eq!(a.json["results"][0]["plan"], "power", "{}", a.json);
        }

        let r = send(&t, Method::GET, "/v1/files", Some(&key), &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        let r = send(&t, Method::GET, "/v1/me", Some(&key), &[]).await;
        assert_eq!(r.json["results"][0]["plan"], "power");
        assert_eq!(r.json["results"][0]["requests_per_minute"], 300);
        assert_eq!(r.headers["x-ratelimit-limit"], "300", "the rate limit follows the plan");
        let changes = t.store.plan_changes(&user.id).await.unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!((changes[0].from, changes[0].to), (Plan::Researcher, Plan::Power));
        assert_eq!(changes[0].event_id, events[0]["id"].as_str().unwrap());
        let sub = t.store.subscription(&user.id).await.unwrap().unwrap();
        assert_eq!(sub.subscription_id, fake.subscription_of(&session));
        assert_eq!((sub.status.as_str(), sub.plan), ("active", Plan::Power));

        // Paying now, a second checkout would be a second subscription.
        let r = checkout(&t, &cookie, json!({"plan_id": "desk", "attestation": true})).await;
        assert_error(&r, StatusCode::CONFLICT, "subscription_active", None);
    }

    async fn a_plan_change_reaches_a_second_replica_within_the_key_cache_lifetime() {
        let (t, fake) = billed().await;
        let other = asof_server::AppState::with_options(sample_corpus().await, t.store.clone(), options(config(&fake.url))).await.unwrap();
        let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
        let user = t.store.sign_in_user("ana@example.com").await.unwrap();
        let key = t.store.create_key(&user.id, "laptop", None).await.unwrap().1;
        let other = asof_server::app(other);
        let files = |app: asof_server::App| {
            let key = key.clone();
            async move {
                let req = Request::builder().uri("/v1/files").header("authorization", format!("Bearer {key}")).body(Body::empty()).unwrap();
                respond_with(&app, req).await.status
            }
        };
        // The other replica has the key cached as researcher.
        assert_eq!(files(other.clone()).await, StatusCode::FORBIDDEN);
        let r = checkout(&t, &cookie, json!({"plan_id": "power", "attestation": true})).await;
        let session = r.json["results"][0]["checkout_session_id"].as_str().unwrap().to_owned();
        deliver_all(&t, &fake.complete_checkout(&session)).await;
        let changed = std::time::Instant::now();
        loop {
            if files(other.clone()).await == StatusCode::OK {
                break;
            }
            assert!(changed.elapsed() < asof_server::state::key_cache::TTL + Duration::from_secs(1), "the other replica still refuses after the key cache's lifetime");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn cancellation_and_a_failed_payment_past_grace_return_to_researcher() {
        let (t, fake) = billed().await;
        let (_, key, sub) = subscribe(&t, &fake, "ana@example.com", Plan::Power).await;
        // Upgraded in the portal: the plan follows the price.
        assert_eq!(deliver_all(&t, &[fake.update_subscription(&sub, Some(PRICES[2]), None)]).await, ["applied"]);
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Desk);
        // Cancelled: back to researcher, and the key loses /v1/files at once here.
        assert_eq!(deliver_all(&t, &[fake.cancel_subscription(&sub)]).await, ["applied"]);
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Researcher);
        let r = send(&t, Method::GET, "/v1/files", Some(&key), &[]).await;
        assert_error(&r, StatusCode::FORBIDDEN, "forbidden", None);
        let user = t.store.sign_in_user("ana@example.com").await.unwrap();
        let plans: Vec<(Plan, Plan)> = t.store.plan_changes(&user.id).await.unwrap().iter().map(|c| (c.from, c.to)).collect();
        assert_eq!(plans, [(Plan::Researcher, Plan::Power), (Plan::Power, Plan::Desk), (Plan::Desk, Plan::Researcher)]);

        // Another user: a failed renewal with retries left keeps the plan (grace, past_due);
        // once the processor gives up, back to researcher.
        let (_, _, sub) = subscribe(&t, &fake, "bo@example.com", Plan::Desk).await;
        deliver_all(&t, &[fake.payment_failed(&sub, true)]).await;
        assert_eq!(plan_of(&t, "bo@example.com").await, Plan::Desk);
        let bo = t.store.sign_in_user("bo@example.com").await.unwrap();
        assert_eq!(t.store.subscription(&bo.id).await.unwrap().unwrap().status, "past_due");
        deliver_all(&t, &[fake.payment_failed(&sub, false)]).await;
        assert_eq!(plan_of(&t, "bo@example.com").await, Plan::Researcher);
        // With the subscription over, a new checkout is allowed again.
        let cookie = signed_in(&t, "bo@example.com", Plan::Researcher).await;
        let r = checkout(&t, &cookie, json!({"plan_id": "power", "attestation": true})).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    }

    async fn a_replayed_webhook_changes_nothing_and_still_answers_200() {
        let (t, fake) = billed().await;
        let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
        let r = checkout(&t, &cookie, json!({"plan_id": "power", "attestation": true})).await;
        let session = r.json["results"][0]["checkout_session_id"].as_str().unwrap().to_owned();
        let paid = fake.complete_checkout(&session);
        assert_eq!(deliver_all(&t, &paid).await, ["applied", "applied"]);
        assert_eq!(deliver_all(&t, &paid).await, ["replayed", "replayed"]);
        let sub = fake.subscription_of(&session).unwrap();
        let cancel = fake.cancel_subscription(&sub);
        assert_eq!(deliver_all(&t, std::slice::from_ref(&cancel)).await, ["applied"]);
        // The processor retrying the old payment events (a fresh signature, same ids) does not
        // bring the plan back; nor does the cancellation twice add a second change.
        assert_eq!(deliver_all(&t, &paid).await, ["replayed", "replayed"]);
        assert_eq!(deliver_all(&t, &[cancel]).await, ["replayed"]);
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Researcher);
        let user = t.store.sign_in_user("ana@example.com").await.unwrap();
        assert_eq!(t.store.plan_changes(&user.id).await.unwrap().len(), 2);
    }

    async fn tampered_stale_future_unsigned_and_wrongly_signed_webhooks_are_400_and_change_nothing() {
        let (t, fake) = billed().await;
        let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
        let r = checkout(&t, &cookie, json!({"plan_id": "desk", "attestation": true})).await;
        let session = r.json["results"][0]["checkout_session_id"].as_str().unwrap().to_owned();
        let paid = &fake.complete_checkout(&session)[1];
        let payload = serde_json::to_vec(paid).unwrap();
        let now = processor::now();
        let good = processor::sign(&payload, WEBHOOK_SECRET, now);
        let tampered = String::from_utf8(payload.clone()).unwrap().replace("\"desk\"", "\"power\"").into_bytes();
        assert_ne!(tampered, payload);
        for (body, sig) in [
            (tampered.clone(), Some(good.clone())),
            (payload.clone(), Some(processor::sign(&payload, WEBHOOK_SECRET, now - 301))),
            (payload.clone(), Some(processor::sign(&payload, WEBHOOK_SECRET, now + 600))),
            (payload.clone(), Some(processor::sign(&payload, "whsec_someone_else", now))),
            (payload.clone(), Some(format!("t={now}"))),
            (payload.clone(), Some(good.replace("v1=", "v0="))),
            (payload.clone(), None),
        ] {
            let r = post_webhook(&t, &body, sig.as_deref()).await;
            assert_error(&r, StatusCode::BAD_REQUEST, "invalid_signature", None);
            let m = r.json["error"]["message"].as_str().unwrap();
            assert!(!m.contains(WEBHOOK_SECRET), "{m}");
        }
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Researcher);
        // The untouched delivery still applies: nothing above consumed its event id.
        let r = post_webhook(&t, &payload, Some(&good)).await;
        assert_eq!(r.json["results"][0]["outcome"], "applied", "{}", r.json);
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Desk);
        // A signed body that is not an event is a 400 naming the body.
        let junk = br#"{"hello": "world"}"#;
        let r = post_webhook(&t, junk, Some(&processor::sign(junk, WEBHOOK_SECRET, now))).await;
        assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some("body"));
    }

    async fn events_out_of_order_about_other_subscriptions_or_unknown_customers_are_recorded_and_ignored() {
        let (t, fake) = billed().await;
        let (_, _, sub) = subscribe(&t, &fake, "ana@example.com", Plan::Power).await;
        // An update created before the last applied event (delivered late) changes nothing.
        let mut late = fake.update_subscription(&sub, Some(PRICES[2]), None);
        late["created"] = (late["created"].as_i64().unwrap() - 3600).into();
        let r = deliver(&t, &late).await;
        assert_eq!(r.json["results"][0]["outcome"], "ignored", "{}", r.json);
        assert!(r.json["results"][0]["detail"].as_str().unwrap().contains("older"));
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Power);
        // A deletion of some other subscription of the same customer does not end this one.
        let mut other = fake.cancel_subscription(&sub);
        other["data"]["object"]["id"] = "sub_test_someone_else".into();
        let r = deliver(&t, &other).await;
        assert_eq!(r.json["results"][0]["outcome"], "ignored", "{}", r.json);
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Power);
        // A customer this service never made, and an event type it does not act on.
        let mut stranger = fake.cancel_subscription(&sub);
        stranger["id"] = "evt_test_stranger".into();
        stranger["data"]["object"]["customer"] = "cus_test_stranger".into();
        let r = deliver(&t, &stranger).await;
        assert_eq!(r.json["results"][0]["outcome"], "ignored", "{}", r.json);
        let r = deliver(&t, &json!({"id": "evt_test_x", "object": "event", "type": "customer.created", "created": processor::now(), "data": {"object": {"id": "cus_x"}}})).await;
        assert_eq!(r.json["results"][0]["outcome"], "ignored", "{}", r.json);
        assert_eq!(plan_of(&t, "ana@example.com").await, Plan::Power);
    }

    async fn processor_failures_become_502_or_503_envelopes_without_the_processors_words_or_key() {
        let (t, fake) = billed().await;
        let cookie = signed_in(&t, "ana@example.com", Plan::Researcher).await;
        let body = json!({"plan_id": "power", "attestation": true});
        fake.fail_next(500);
        let r = checkout(&t, &cookie, body.clone()).await;
        assert_error(&r, StatusCode::SERVICE_UNAVAILABLE, "processor_unavailable", None);
        assert_eq!(r.headers["retry-after"], "60");
        fake.fail_next(429);
        let r = portal(&t, &cookie).await;
        assert_error(&r, StatusCode::SERVICE_UNAVAILABLE, "processor_unavailable", None);

        // A wrong secret key: the processor's 401 is this service's 502, its words unsaid.
        let mut c = config(&fake.url);
        c.secret_key = Some("sk_test_wrong_key_1234".into());
        let wrong = on_backend(options(c)).await;
        let cookie = signed_in(&wrong, "bo@example.com", Plan::Researcher).await;
        let r = checkout(&wrong, &cookie, body.clone()).await;
        assert_error(&r, StatusCode::BAD_GATEWAY, "processor_error", None);
        let text = String::from_utf8_lossy(&r.bytes);
        assert!(!text.contains("sk_test") && !text.contains("Invalid API Key"), "{text}");

        // Nobody listening: 503.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let gone = on_backend(options(config(&format!("http://127.0.0.1:{port}")))).await;
        let cookie = signed_in(&gone, "cy@example.com", Plan::Researcher).await;
        let r = checkout(&gone, &cookie, body).await;
        assert_error(&r, StatusCode::SERVICE_UNAVAILABLE, "processor_unavailable", None);
    }
}

/// Delivers `events` and returns the answers (each asserted 200 and applied).
async fn deliver_applied(t: &T, events: &[Value]) -> Vec<Res> {
    let mut out = Vec::new();
    for e in events {
        let r = deliver(t, e).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        assert_eq!(r.json["results"][0]["outcome"], "applied", "{}", r.json);
        out.push(r);
    }
    out
}

#[tokio::test]
async fn billing_with_settings_but_no_public_url_refuses_to_start() {
    let fake = FakeProcessor::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let opts = Options {
        billing: config(&fake.url),
        ..Options::default()
    };
    let err = asof_server::AppState::with_options(sample_corpus().await, store, opts)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--public-url"), "{err}");
}
