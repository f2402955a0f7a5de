//! A payment processor on loopback speaking the few endpoints of Stripe's API the service
//! calls, in Stripe's shapes: form-encoded requests with bracketed keys, the secret key as a
//! Bearer token (401 otherwise), `Idempotency-Key` honoured, JSON objects with Stripe's ids
//! and fields, and `{"error": {"type", "code", "param", "message"}}` on a refusal.
//!
//! There is no runnable payment processor to test against, so this is the one fake the
//! billing tests use (the Rust tests through [`FakeProcessor`], the Python end-to-end test
//! through the `asof-fake-processor` binary). Besides the API it makes the events a real
//! processor would send after a payment, a plan change, a cancellation or a failed payment
//! (`/_fake/...`); the tests sign them with [`sign`], Stripe's scheme, which the Python test
//! checks against the official `stripe` package.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

/// The secret key the fake accepts.
pub const SECRET_KEY: &str = "sk_test_asof_fake_4eC39HqLyjWDarjtT1zdp7dc";
/// The webhook signing secret the tests sign events with.
pub const WEBHOOK_SECRET: &str = "whsec_asof_fake_5f1d2c3b4a69788796a5b4c3d2e1f0";
/// The price ids the fake sells, in plan order: researcher, power, desk.
pub const PRICES: [&str; 3] = [
    "price_1ResearcherMonthly",
    "price_1PowerMonthly",
    "price_1DeskMonthly",
];

/// Stripe's webhook signature header for `payload` at unix time `t`:
/// `t=<t>,v1=<hex HMAC-SHA256 of "<t>.<payload>" under the secret>`.
pub fn sign(payload: &[u8], secret: &str, t: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(format!("{t}.").as_bytes());
    mac.update(payload);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// One API request the fake received (its path and form fields, in order).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub form: Vec<(String, String)>,
    pub idempotency_key: Option<String>,
}

impl Recorded {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Inner {
    base: String,
    seq: u64,
    customers: HashMap<String, Value>,
    sessions: HashMap<String, Value>,
    subscriptions: HashMap<String, Value>,
    idempotent: HashMap<(String, String), (StatusCode, Value)>,
    requests: Vec<Recorded>,
    /// Answer the next API call with this status (a processor outage).
    fail_next: Option<u16>,
}

impl Inner {
    fn id(&mut self, prefix: &str) -> String {
        self.seq += 1;
        format!("{prefix}_test_{:024}", self.seq)
    }

    fn event(&mut self, kind: &str, object: Value, previous: Option<Value>) -> Value {
        let mut data = json!({ "object": object });
        if let Some(p) = previous {
            data["previous_attributes"] = p;
        }
        json!({
            "id": self.id("evt"),
            "object": "event",
            "api_version": "2025-10-29.clover",
            "created": now(),
            "livemode": false,
            "pending_webhooks": 1,
            "request": { "id": null, "idempotency_key": null },
            "type": kind,
            "data": data,
        })
    }
}

/// The fake, serving on a loopback port of the runtime that started it. Cheap to clone.
#[derive(Clone)]
pub struct FakeProcessor {
    inner: Arc<Mutex<Inner>>,
    /// `http://127.0.0.1:<port>`: the value of `--billing-api-url`.
    pub url: String,
}

fn stripe_error(
    status: StatusCode,
    kind: &str,
    code: Option<&str>,
    param: Option<&str>,
    message: &str,
) -> (StatusCode, Value) {
    let mut e = json!({ "type": kind, "message": message });
    if let Some(c) = code {
        e["code"] = c.into();
    }
    if let Some(p) = param {
        e["param"] = p.into();
    }
    (status, json!({ "error": e }))
}

/// Fields `prefix[key]=v` of a form as an object (`metadata[user_id]` → `{"user_id": v}`).
fn bracketed(form: &[(String, String)], prefix: &str) -> Value {
    let mut m = Map::new();
    for (k, v) in form {
        if let Some(rest) = k.strip_prefix(prefix).and_then(|r| r.strip_prefix('['))
            && let Some(key) = rest.strip_suffix(']')
            && !key.contains('[')
        {
            m.insert(key.to_owned(), Value::String(v.clone()));
        }
    }
    Value::Object(m)
}

fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

impl FakeProcessor {
    /// Starts the fake on a free loopback port, as a task of the current runtime.
    pub async fn start() -> FakeProcessor {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fake = FakeProcessor {
            inner: Arc::new(Mutex::new(Inner {
                base: url.clone(),
                ..Inner::default()
            })),
            url,
        };
        let app = axum::Router::new()
            .route("/v1/customers", post(customers))
            .route("/v1/checkout/sessions", post(checkout_sessions))
            .route("/v1/billing_portal/sessions", post(portal_sessions))
            .route(
                "/_fake/checkout/sessions/{id}/complete",
                post(fake_complete),
            )
            .route("/_fake/subscriptions/{id}/update", post(fake_update))
            .route("/_fake/subscriptions/{id}/cancel", post(fake_cancel))
            .route(
                "/_fake/subscriptions/{id}/payment_failed",
                post(fake_payment_failed),
            )
            .route("/_fake/fail_next", post(fake_fail_next))
            .route("/_fake/requests", get(fake_requests))
            .route(
                "/pay/{id}",
                get(|| async { "the fake processor's hosted payment page" }),
            )
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    /// The API requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// The next API call is answered with `status` (and Stripe's error body).
    pub fn fail_next(&self, status: u16) {
        self.inner.lock().unwrap().fail_next = Some(status);
    }

    /// Pays checkout session `id`: the subscription is created and the two events a real
    /// processor sends are returned, `customer.subscription.created` then
    /// `checkout.session.completed`.
    pub fn complete_checkout(&self, id: &str) -> Vec<Value> {
        let mut g = self.inner.lock().unwrap();
        let mut session = g
            .sessions
            .get(id)
            .cloned()
            .expect("a checkout session of this fake");
        let sub_id = g.id("sub");
        let item_id = g.id("si");
        let sub = json!({
            "id": sub_id,
            "object": "subscription",
            "customer": session["customer"],
            "status": "active",
            "cancel_at_period_end": false,
            "created": now(),
            "metadata": session["subscription_data_metadata"],
            "items": { "object": "list", "data": [ {
                "id": item_id, "object": "subscription_item", "quantity": 1,
                "current_period_start": now(), "current_period_end": now() + 30 * 86_400,
                "price": { "id": session["price"], "object": "price", "active": true, "currency": "usd", "recurring": { "interval": "month" } },
            } ] },
        });
        g.subscriptions.insert(sub_id.clone(), sub.clone());
        session["status"] = "complete".into();
        session["payment_status"] = "paid".into();
        session["subscription"] = sub_id.into();
        g.sessions.insert(id.to_owned(), session.clone());
        let created = g.event("customer.subscription.created", sub, None);
        let completed = g.event("checkout.session.completed", public_session(&session), None);
        vec![created, completed]
    }

    /// Moves subscription `id` to `price` and `status` (a plan change in the portal, or the
    /// processor's dunning); returns `customer.subscription.updated`.
    pub fn update_subscription(
        &self,
        id: &str,
        price: Option<&str>,
        status: Option<&str>,
    ) -> Value {
        let mut g = self.inner.lock().unwrap();
        let mut sub = g
            .subscriptions
            .get(id)
            .cloned()
            .expect("a subscription of this fake");
        let mut previous = json!({});
        if let Some(p) = price {
            previous["items"] = sub["items"].clone();
            sub["items"]["data"][0]["price"]["id"] = p.into();
        }
        if let Some(s) = status {
            previous["status"] = sub["status"].clone();
            sub["status"] = s.into();
        }
        g.subscriptions.insert(id.to_owned(), sub.clone());
        g.event("customer.subscription.updated", sub, Some(previous))
    }

    /// Cancels subscription `id` now; returns `customer.subscription.deleted`.
    pub fn cancel_subscription(&self, id: &str) -> Value {
        let mut g = self.inner.lock().unwrap();
        let mut sub = g
            .subscriptions
            .get(id)
            .cloned()
            .expect("a subscription of this fake");
        sub["status"] = "canceled".into();
        sub["canceled_at"] = now().into();
        sub["ended_at"] = now().into();
        g.subscriptions.insert(id.to_owned(), sub.clone());
        g.event("customer.subscription.deleted", sub, None)
    }

    /// A failed renewal of subscription `id`: `invoice.payment_failed`, with another attempt
    /// scheduled when `retrying`, none when the processor has given up.
    pub fn payment_failed(&self, id: &str, retrying: bool) -> Value {
        let mut g = self.inner.lock().unwrap();
        let sub = g
            .subscriptions
            .get(id)
            .cloned()
            .expect("a subscription of this fake");
        let inv_id = g.id("in");
        let invoice = json!({
            "id": inv_id,
            "object": "invoice",
            "customer": sub["customer"],
            "status": "open",
            "attempt_count": if retrying { 1 } else { 4 },
            "attempted": true,
            "billing_reason": "subscription_cycle",
            "next_payment_attempt": if retrying { Value::from(now() + 3 * 86_400) } else { Value::Null },
            "parent": { "type": "subscription_details", "subscription_details": { "subscription": id, "metadata": sub["metadata"] } },
        });
        g.event("invoice.payment_failed", invoice, None)
    }

    /// The subscription id a completed checkout session made.
    pub fn subscription_of(&self, checkout_session: &str) -> Option<String> {
        let g = self.inner.lock().unwrap();
        g.sessions
            .get(checkout_session)?
            .get("subscription")?
            .as_str()
            .map(str::to_owned)
    }
}

/// A session as the API shows it (the fake's bookkeeping fields removed).
fn public_session(s: &Value) -> Value {
    let mut s = s.clone();
    if let Some(o) = s.as_object_mut() {
        o.remove("subscription_data_metadata");
        o.remove("price");
    }
    s
}

/// Authenticates, parses the form and applies idempotency around one API call.
fn api(
    fake: &FakeProcessor,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
    handle: impl FnOnce(&mut Inner, &[(String, String)]) -> (StatusCode, Value),
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut g = fake.inner.lock().unwrap();
    let answer = (|| {
        let Some(key) = auth.strip_prefix("Bearer ") else {
            return stripe_error(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                None,
                None,
                "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
            );
        };
        if key != SECRET_KEY {
            let tail: String = key
                .chars()
                .rev()
                .take(4)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            return stripe_error(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                None,
                None,
                &format!("Invalid API Key provided: sk_test_****{tail}"),
            );
        }
        let form_ct = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        if !form_ct {
            return stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                None,
                None,
                "Invalid request: the body must be application/x-www-form-urlencoded.",
            );
        }
        let form: Vec<(String, String)> = url::form_urlencoded::parse(body).into_owned().collect();
        let idem = headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        g.requests.push(Recorded {
            path: path.to_owned(),
            form: form.clone(),
            idempotency_key: idem.clone(),
        });
        if let Some(status) = g.fail_next.take() {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return stripe_error(
                status,
                "api_error",
                None,
                None,
                "An unknown error occurred (the fake was told to fail).",
            );
        }
        if let Some(k) = &idem
            && let Some(prev) = g.idempotent.get(&(path.to_owned(), k.clone()))
        {
            return prev.clone();
        }
        let out = handle(&mut g, &form);
        if let Some(k) = idem {
            g.idempotent.insert((path.to_owned(), k), out.clone());
        }
        out
    })();
    (answer.0, axum::Json(answer.1)).into_response()
}

async fn customers(State(fake): State<FakeProcessor>, headers: HeaderMap, body: Bytes) -> Response {
    api(&fake, "/v1/customers", &headers, &body, |g, form| {
        let id = g.id("cus");
        let c = json!({
            "id": id, "object": "customer", "created": now(), "livemode": false,
            "email": field(form, "email"), "metadata": bracketed(form, "metadata"),
        });
        g.customers.insert(id, c.clone());
        (StatusCode::OK, c)
    })
}

async fn checkout_sessions(
    State(fake): State<FakeProcessor>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    api(
        &fake,
        "/v1/checkout/sessions",
        &headers,
        &body,
        |g, form| {
            let missing = |p: &str| {
                stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("parameter_missing"),
                    Some(p),
                    &format!("Missing required param: {p}."),
                )
            };
            let Some(mode) = field(form, "mode") else {
                return missing("mode");
            };
            if mode != "subscription" {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("parameter_invalid"),
                    Some("mode"),
                    "This fake sells subscriptions only.",
                );
            }
            let Some(price) = field(form, "line_items[0][price]") else {
                return missing("line_items[0][price]");
            };
            if !PRICES.contains(&price) {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("resource_missing"),
                    Some("line_items[0][price]"),
                    &format!("No such price: '{price}'"),
                );
            }
            let Some(success) = field(form, "success_url") else {
                return missing("success_url");
            };
            let customer = field(form, "customer");
            if let Some(c) = customer
                && !g.customers.contains_key(c)
            {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("resource_missing"),
                    Some("customer"),
                    &format!("No such customer: '{c}'"),
                );
            }
            let id = g.id("cs");
            let s = json!({
                "id": id, "object": "checkout.session", "mode": mode, "status": "open",
                "payment_status": "unpaid", "customer": customer,
                "client_reference_id": field(form, "client_reference_id"),
                "metadata": bracketed(form, "metadata"),
                "success_url": success, "cancel_url": field(form, "cancel_url"),
                "subscription": null, "livemode": false,
                "expires_at": now() + 86_400, "created": now(),
                "url": format!("{}/pay/{id}", g.base),
                // Bookkeeping for complete_checkout (not part of the API answer).
                "subscription_data_metadata": bracketed(form, "subscription_data[metadata]"),
                "price": price,
            });
            g.sessions.insert(id, s.clone());
            (StatusCode::OK, public_session(&s))
        },
    )
}

async fn portal_sessions(
    State(fake): State<FakeProcessor>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    api(
        &fake,
        "/v1/billing_portal/sessions",
        &headers,
        &body,
        |g, form| {
            let Some(customer) = field(form, "customer") else {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("parameter_missing"),
                    Some("customer"),
                    "Missing required param: customer.",
                );
            };
            if !g.customers.contains_key(customer) {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("resource_missing"),
                    Some("customer"),
                    &format!("No such customer: '{customer}'"),
                );
            }
            let id = g.id("bps");
            let p = json!({
                "id": id, "object": "billing_portal.session", "customer": customer,
                "return_url": field(form, "return_url"), "livemode": false, "created": now(),
                "url": format!("{}/p/session/{id}", g.base),
            });
            (StatusCode::OK, p)
        },
    )
}

async fn fake_complete(State(fake): State<FakeProcessor>, Path(id): Path<String>) -> Response {
    if !fake.inner.lock().unwrap().sessions.contains_key(&id) {
        return (StatusCode::NOT_FOUND, "no such checkout session").into_response();
    }
    axum::Json(
        json!({ "events": fake.complete_checkout(&id), "subscription": fake.subscription_of(&id) }),
    )
    .into_response()
}

#[derive(serde::Deserialize)]
struct UpdateQuery {
    price: Option<String>,
    status: Option<String>,
    retrying: Option<bool>,
}

fn known_subscription(fake: &FakeProcessor, id: &str) -> bool {
    fake.inner.lock().unwrap().subscriptions.contains_key(id)
}

async fn fake_update(
    State(fake): State<FakeProcessor>,
    Path(id): Path<String>,
    Query(q): Query<UpdateQuery>,
) -> Response {
    if !known_subscription(&fake, &id) {
        return (StatusCode::NOT_FOUND, "no such subscription").into_response();
    }
    axum::Json(json!({ "events": [fake.update_subscription(&id, q.price.as_deref(), q.status.as_deref())] })).into_response()
}

async fn fake_cancel(State(fake): State<FakeProcessor>, Path(id): Path<String>) -> Response {
    if !known_subscription(&fake, &id) {
        return (StatusCode::NOT_FOUND, "no such subscription").into_response();
    }
    axum::Json(json!({ "events": [fake.cancel_subscription(&id)] })).into_response()
}

async fn fake_payment_failed(
    State(fake): State<FakeProcessor>,
    Path(id): Path<String>,
    Query(q): Query<UpdateQuery>,
) -> Response {
    if !known_subscription(&fake, &id) {
        return (StatusCode::NOT_FOUND, "no such subscription").into_response();
    }
    axum::Json(json!({ "events": [fake.payment_failed(&id, q.retrying.unwrap_or(false))] }))
        .into_response()
}

async fn fake_fail_next(
    State(fake): State<FakeProcessor>,
    Query(q): Query<HashMap<String, u16>>,
) -> Response {
    fake.fail_next(q.get("status").copied().unwrap_or(500));
    StatusCode::NO_CONTENT.into_response()
}

async fn fake_requests(State(fake): State<FakeProcessor>) -> Response {
    let r: Vec<Value> = fake
        .requests()
        .into_iter()
        .map(|r| json!({ "path": r.path, "form": r.form, "idempotency_key": r.idempotency_key }))
        .collect();
    axum::Json(r).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_matches_stripes_documented_example_shape() {
        let h = sign(b"{}", "whsec_x", 1_700_000_000);
        assert!(h.starts_with("t=1700000000,v1="));
        assert_eq!(h.len(), "t=1700000000,v1=".len() + 64);
    }
}
