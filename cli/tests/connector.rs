//! The bring-your-own-key connector over the router (oneshot) against two vendors on loopback
//! (`asof_test_support::vendors`, one per shape), and end to end against the real binary
//! logging at `trace`: normalised bars with `origin` and `cached: false`, Desk only, every
//! 400, vendor refusals, unknown tickers, rate limits, timeouts, failures and malformed
//! answers, the per-key bound, and the vendor key found nowhere: not in an answer, a receipt,
//! the state database or the log.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use asof_server::Options;
use asof_server::connector::{ConnectorConfig, VendorConfig};
use asof_server::plan::Plan;
use asof_test_support::vendors::{FakeVendor, Mode, VENDOR_KEY};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use serde_json::{Value, json};

struct V {
    t: T,
    a: FakeVendor,
    b: FakeVendor,
    desk: String,
}

fn config(a: &FakeVendor, b: &FakeVendor, timeout: Duration) -> ConnectorConfig {
    ConnectorConfig {
        vendor_a: Some(VendorConfig {
            url: a.url.clone(),
            license_class: "vendor_a_professional_internal".into(),
        }),
        vendor_b: Some(VendorConfig {
            url: b.url.clone(),
            license_class: "vendor_b_end_of_day_personal".into(),
        }),
        call_timeout: timeout,
    }
}

async fn with_vendors(timeout: Duration) -> V {
    let (a, b) = (FakeVendor::start_a().await, FakeVendor::start_b().await);
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let opts = Options {
        connector: config(&a, &b, timeout),
        ..Options::default()
    };
    let t = setup_with(dir, store, opts).await;
    let desk = key_for(&t.store, "desk@example.com", Plan::Desk).await;
    V { t, a, b, desk }
}

async fn bars(v: &V, vendor: &str, key: &str, vendor_key: Option<&str>, body: Value) -> Res {
    let mut b = Request::post(format!("/v1/connectors/{vendor}/bars"))
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json");
    if let Some(k) = vendor_key {
        b = b.header("x-vendor-key", k);
    }
    respond(&v.t, b.body(Body::from(body.to_string())).unwrap()).await
}

fn q1() -> Value {
    json!({"ticker": "aapl", "start": "2024-01-01", "end": "2024-01-12"})
}

#[tokio::test]
async fn vendor_a_bars_come_back_normalised_by_date_with_origin_and_cached_false() {
    let v = with_vendors(Duration::from_secs(5)).await;
    let r = bars(&v, "vendor_a", &v.desk, Some(VENDOR_KEY), q1()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let res = r.json["results"].as_array().unwrap();
    // 2024-01-01..12: the weekdays, Monday the 1st to Friday the 12th.
    assert_eq!(res.len(), 10);
    assert_eq!(r.json["count"], 10);
    assert_eq!(res[0]["date"], "2024-01-01");
    assert_eq!(res[9]["date"], "2024-01-12");
    assert!(
        res.windows(2)
            .all(|w| w[0]["date"].as_str() < w[1]["date"].as_str())
    );
    assert_eq!(res[0]["open"], 185.64);
    assert_eq!(res[0]["adjusted"], true);
    for f in ["open", "high", "low", "close", "volume"] {
        assert!(res[0][f].is_number(), "{f}");
    }
    assert_eq!(r.json["origin"]["vendor"], "vendor_a");
    assert_eq!(
        r.json["origin"]["license_class"],
        "vendor_a_professional_internal"
    );
    let fetched = r.json["origin"]["fetched_at"].as_str().unwrap();
    assert!(
        fetched.ends_with('Z') && asof_engine::Instant::parse(fetched).is_ok(),
        "{fetched}"
    );
    assert_eq!(r.json["cached"], false);
    assert_eq!(r.headers["cache-control"], "no-store");
    let seen = v.a.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].path,
        "/v2/aggs/ticker/AAPL/range/1/day/2024-01-01/2024-01-12"
    );
    assert_eq!(seen[0].query, "adjusted=true&limit=50000&sort=asc");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {VENDOR_KEY}").as_str())
    );
    // Nothing is kept: the same call goes to the vendor again.
    bars(&v, "vendor_a", &v.desk, Some(VENDOR_KEY), q1()).await;
    assert_eq!(v.a.seen().len(), 2);
}

#[tokio::test]
async fn vendor_b_bars_carry_the_token_and_answer_adjusted_or_raw_prices() {
    let v = with_vendors(Duration::from_secs(5)).await;
    let r = bars(
        &v,
        "vendor_b",
        &v.desk,
        Some(VENDOR_KEY),
        json!({"ticker": "BRK.B", "start": "2024-01-08", "end": "2024-01-09"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let adj = r.json["results"][0]["close"].as_f64().unwrap();
    assert_eq!(r.json["results"][0]["adjusted"], true);
    assert_eq!(
        r.json["origin"]["license_class"],
        "vendor_b_end_of_day_personal"
    );
    let raw = bars(
        &v,
        "vendor_b",
        &v.desk,
        Some(VENDOR_KEY),
        json!({"ticker": "BRK.B", "start": "2024-01-08", "end": "2024-01-09", "adjusted": false}),
    )
    .await;
    assert_eq!(raw.json["results"][0]["adjusted"], false);
    let raw_close = raw.json["results"][0]["close"].as_f64().unwrap();
    assert!(
        (adj - raw_close * 0.98).abs() < 1e-9,
        "{adj} vs {raw_close}"
    );
    assert_eq!(raw.json["count"], 2);
    let seen = v.b.seen();
    assert_eq!(seen[0].path, "/daily/BRK.B/prices");
    assert_eq!(seen[0].query, "endDate=2024-01-09&startDate=2024-01-08");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Token {VENDOR_KEY}").as_str())
    );
}

#[tokio::test]
async fn only_desk_keys_may_call_the_connector() {
    let v = with_vendors(Duration::from_secs(5)).await;
    for plan in [Plan::Researcher, Plan::Power] {
        let key = key_for(&v.t.store, &format!("{plan}@example.com"), plan).await;
        let r = bars(&v, "vendor_a", &key, Some(VENDOR_KEY), q1()).await;
        assert_error(&r, StatusCode::FORBIDDEN, "forbidden", None);
    }
    let r = bars(&v, "vendor_a", "svc_live_nope", Some(VENDOR_KEY), q1()).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized", None);
    assert!(v.a.seen().is_empty(), "no vendor call without a Desk key");
}

#[tokio::test]
async fn a_bad_vendor_a_missing_vendor_key_and_bad_bodies_are_400_naming_the_field() {
    let v = with_vendors(Duration::from_secs(5)).await;
    let r = bars(&v, "vendor_c", &v.desk, Some(VENDOR_KEY), q1()).await;
    assert_error(
        &r,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("vendor"),
    );
    let r = bars(&v, "vendor_a", &v.desk, None, q1()).await;
    assert_error(
        &r,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("X-Vendor-Key"),
    );
    let r = bars(&v, "vendor_a", &v.desk, Some("has a space"), q1()).await;
    assert_error(
        &r,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        Some("X-Vendor-Key"),
    );
    assert!(!r.json.to_string().contains("has a space"), "never echoed");
    for (body, param) in [
        (
            json!({"start": "2024-01-01", "end": "2024-01-02"}),
            "ticker",
        ),
        (
            json!({"ticker": "AA PL", "start": "2024-01-01", "end": "2024-01-02"}),
            "ticker",
        ),
        // A ticker is a path segment of the vendor's URL: `.` and `..` would name another path.
        (
            json!({"ticker": ".", "start": "2024-01-01", "end": "2024-01-02"}),
            "ticker",
        ),
        (
            json!({"ticker": "..", "start": "2024-01-01", "end": "2024-01-02"}),
            "ticker",
        ),
        (
            json!({"ticker": "-A", "start": "2024-01-01", "end": "2024-01-02"}),
            "ticker",
        ),
        (json!({"ticker": "AAPL", "end": "2024-01-02"}), "start"),
        (
            json!({"ticker": "AAPL", "start": "2024-1-1", "end": "2024-01-02"}),
            "start",
        ),
        (
            json!({"ticker": "AAPL", "start": "2024-01-01T00:00:00Z", "end": "2024-01-02"}),
            "start",
        ),
        (
            json!({"ticker": "AAPL", "start": "2024-01-01", "end": "2024-01-02", "adjusted": "yes"}),
            "adjusted",
        ),
        (
            json!({"ticker": "AAPL", "start": "2024-01-01", "end": "2024-01-02", "interval": "1h"}),
            "interval",
        ),
    ] {
        let r = bars(&v, "vendor_a", &v.desk, Some(VENDOR_KEY), body.clone()).await;
        assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some(param));
    }
    assert!(v.a.seen().is_empty(), "no vendor call for a bad request");
}

// Found by schemathesis's positive-data check (issue 43): a range the body schema allows but
// the service refused (backwards, or longer than ten years). No rule of the body relates the
// two dates now: a backwards range holds no trading day, days after today hold no bar yet,
// and how far back bars go is the vendor's history.
#[tokio::test]
async fn a_range_is_answered_for_what_it_holds_whatever_its_length_or_direction() {
    let v = with_vendors(Duration::from_secs(5)).await;
    let backwards = json!({"ticker": "AAPL", "start": "2024-01-03", "end": "2024-01-02"});
    let r = bars(&v, "vendor_a", &v.desk, Some("not-even-tried"), backwards).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["count"], 0);
    assert_eq!(r.json["origin"]["vendor"], "vendor_a");
    let future = json!({"ticker": "AAPL", "start": "9000-01-01", "end": "9999-12-31"});
    let r = bars(&v, "vendor_b", &v.desk, Some(VENDOR_KEY), future).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["count"], 0);
    assert!(
        v.a.seen().is_empty() && v.b.seen().is_empty(),
        "no vendor call for an empty range"
    );
    // Twenty-five years, ending in the future: the vendor is asked up to today, and the
    // stand-in's history starts in 2000.
    let today = asof_engine::Instant::now().day().to_string();
    let long = json!({"ticker": "AAPL", "start": "1990-01-01", "end": "2100-12-31"});
    let r = bars(&v, "vendor_a", &v.desk, Some(VENDOR_KEY), long).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let res = r.json["results"].as_array().unwrap();
    assert_eq!(res[0]["date"], "2000-01-03");
    assert!(res.len() > 6_000, "{}", res.len());
    assert!(res.last().unwrap()["date"].as_str().unwrap() <= today.as_str());
    assert_eq!(
        v.a.seen()[0].path,
        format!("/v2/aggs/ticker/AAPL/range/1/day/1990-01-01/{today}")
    );
}

#[tokio::test]
async fn an_unconfigured_vendor_is_503() {
    let t = setup().await;
    let desk = key_for(&t.store, "desk@example.com", Plan::Desk).await;
    let req = Request::post("/v1/connectors/vendor_b/bars")
        .header("authorization", format!("Bearer {desk}"))
        .header("content-type", "application/json")
        .header("x-vendor-key", VENDOR_KEY)
        .body(Body::from(q1().to_string()))
        .unwrap();
    let r = respond(&t, req).await;
    assert_error(
        &r,
        StatusCode::SERVICE_UNAVAILABLE,
        "connector_not_configured",
        None,
    );
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--vendor-b-url")
    );
}

#[tokio::test]
async fn vendor_refusals_are_403_unknown_tickers_404_and_rate_limits_429_with_the_vendors_retry_after()
 {
    let v = with_vendors(Duration::from_secs(5)).await;
    for vendor in ["vendor_a", "vendor_b"] {
        let fake = if vendor == "vendor_a" { &v.a } else { &v.b };
        let r = bars(&v, vendor, &v.desk, Some("vk_someone_elses_key"), q1()).await;
        assert_error(&r, StatusCode::FORBIDDEN, "vendor_refused", None);
        assert!(
            r.json["error"]["message"]
                .as_str()
                .unwrap()
                .contains("X-Vendor-Key")
        );
        fake.set(Mode::Refuse);
        let r = bars(&v, vendor, &v.desk, Some(VENDOR_KEY), q1()).await;
        assert_error(&r, StatusCode::FORBIDDEN, "vendor_refused", None);
        fake.set(Mode::Ok);
        let r = bars(
            &v,
            vendor,
            &v.desk,
            Some(VENDOR_KEY),
            json!({"ticker": "ZZZZ", "start": "2024-01-01", "end": "2024-01-02"}),
        )
        .await;
        assert_error(&r, StatusCode::NOT_FOUND, "not_found", None);
        fake.set(Mode::RateLimit);
        let r = bars(&v, vendor, &v.desk, Some(VENDOR_KEY), q1()).await;
        assert_error(
            &r,
            StatusCode::TOO_MANY_REQUESTS,
            "vendor_rate_limited",
            None,
        );
        assert_eq!(
            r.headers["retry-after"], "17",
            "the vendor's Retry-After is passed on"
        );
        fake.set(Mode::Ok);
    }
}

#[tokio::test]
async fn vendor_timeouts_failures_garbage_and_bad_bars_are_502_never_a_partial_answer() {
    let v = with_vendors(Duration::from_secs(1)).await;
    for vendor in ["vendor_a", "vendor_b"] {
        let fake = if vendor == "vendor_a" { &v.a } else { &v.b };
        for mode in [Mode::Stall, Mode::Fail, Mode::Garbage, Mode::BadBar] {
            fake.set(mode);
            let r = bars(&v, vendor, &v.desk, Some(VENDOR_KEY), q1()).await;
            assert_error(&r, StatusCode::BAD_GATEWAY, "vendor_error", None);
            assert_eq!(r.json["results"], json!([]), "{vendor} {mode:?}");
        }
        fake.set(Mode::Ok);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_has_at_most_four_vendor_calls_in_flight() {
    let v = with_vendors(Duration::from_secs(8)).await;
    v.a.set(Mode::Stall);
    let app = v.t.app.clone();
    let desk = v.desk.clone();
    let call = move || {
        let (app, desk) = (app.clone(), desk.clone());
        async move {
            let req = Request::post("/v1/connectors/vendor_a/bars")
                .header("authorization", format!("Bearer {desk}"))
                .header("content-type", "application/json")
                .header("x-vendor-key", VENDOR_KEY)
                .body(Body::from(q1().to_string()))
                .unwrap();
            respond_with(&app, req).await
        }
    };
    let held: Vec<_> = (0..4).map(|_| tokio::spawn(call())).collect();
    // Wait until the four calls reached the vendor.
    let deadline = std::time::Instant::now() + Duration::from_secs(6);
    while v.a.seen().len() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "four calls did not reach the vendor"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = call().await;
    assert_error(
        &r,
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_connector_calls",
        None,
    );
    assert_eq!(r.headers["retry-after"], "1");
    // Another key is not held back by this one.
    let other = key_for(&v.t.store, "other-desk@example.com", Plan::Desk).await;
    v.b.set(Mode::Ok);
    let r = bars(&v, "vendor_b", &other, Some(VENDOR_KEY), q1()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    for h in held {
        assert_eq!(h.await.unwrap().status, StatusCode::BAD_GATEWAY);
    }
    // The slots are free again.
    v.a.set(Mode::Ok);
    assert_eq!(
        bars(&v, "vendor_a", &v.desk, Some(VENDOR_KEY), q1())
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_receipted_answer_hashes_its_body_and_no_answer_or_receipt_holds_the_vendor_key() {
    let v = with_vendors(Duration::from_secs(1)).await;
    let mut bodies = Vec::new();
    for (mode, status) in [
        (Mode::Ok, 200),
        (Mode::Refuse, 403),
        (Mode::RateLimit, 429),
        (Mode::Garbage, 502),
    ] {
        v.a.set(mode);
        let req = Request::post("/v1/connectors/vendor_a/bars")
            .header("authorization", format!("Bearer {}", v.desk))
            .header("content-type", "application/json")
            .header("x-vendor-key", VENDOR_KEY)
            .header("x-service-audit", "on")
            .body(Body::from(q1().to_string()))
            .unwrap();
        let r = respond(&v.t, req).await;
        assert_eq!(r.status.as_u16(), status, "{}", r.json);
        let head: String = r
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v:?}\n"))
            .collect();
        assert!(
            !head.contains(VENDOR_KEY) && !String::from_utf8_lossy(&r.bytes).contains(VENDOR_KEY)
        );
        bodies.push(r);
    }
    assert!(v.t.state.audit().drain(Duration::from_secs(10)).await);
    let (desk_key, _) =
        v.t.store
            .key_by_hash(&asof_server::state::hash_key(&v.desk))
            .await
            .unwrap()
            .unwrap();
    let receipts =
        v.t.store
            .receipts(&desk_key.id, 0, i64::MAX, None, 100)
            .await
            .unwrap();
    assert_eq!(
        receipts.len(),
        4,
        "answers and refusals alike are receipted"
    );
    for answer in &bodies {
        let receipt = receipts
            .iter()
            .find(|r| answer.json["request_id"] == r.request_id.as_str())
            .expect("a receipt per answer");
        assert_eq!(receipt.route, "POST /v1/connectors/vendor_a/bars");
        assert_eq!(
            receipt.envelope_sha256,
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&answer.bytes)),
            "the exact body is hashed"
        );
    }
    assert!(!format!("{receipts:?}").contains(VENDOR_KEY));
}

/// The real binary at `trace`: the key appears in no log line, no answer and no byte of the
/// state database (its WAL included).
#[tokio::test(flavor = "multi_thread")]
async fn the_vendor_key_never_reaches_the_log_the_state_database_or_an_answer() {
    let (a, b) = (FakeVendor::start_a().await, FakeVendor::start_b().await);
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}/state.db", dir.path().display());
    let made = Command::new(env!("CARGO_BIN_EXE_asof"))
        .args([
            "keys",
            "create",
            "--database-url",
            &db,
            "--email",
            "e2e@example.com",
            "--plan",
            "desk",
        ])
        .output()
        .unwrap();
    assert!(made.status.success());
    let desk = String::from_utf8(made.stdout)
        .unwrap()
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_asof"))
        .env("ASOF_LOG", "trace")
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &db,
            "--corpus",
            repo().to_str().unwrap(),
        ])
        .args(["--vendor-a-url", &a.url, "--vendor-b-url", &b.url])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let addr = loop {
        let line = lines
            .next()
            .expect("server exited before listening")
            .unwrap();
        log.lock().unwrap().push(line.clone());
        if let Some(rest) = line.strip_prefix("asof listening on http://") {
            break rest.trim().to_owned();
        }
    };
    let sink = log.clone();
    let reader = std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            sink.lock().unwrap().push(l);
        }
    });
    let http = reqwest::Client::new();
    let mut answers = String::new();
    for (vendor, mode) in [
        ("vendor_a", Mode::Ok),
        ("vendor_b", Mode::Ok),
        ("vendor_a", Mode::Refuse),
        ("vendor_b", Mode::Garbage),
        ("vendor_a", Mode::RateLimit),
    ] {
        let fake = if vendor == "vendor_a" { &a } else { &b };
        fake.set(mode);
        let r = http
            .post(format!("http://{addr}/v1/connectors/{vendor}/bars"))
            .bearer_auth(&desk)
            .header("x-vendor-key", VENDOR_KEY)
            .header("x-service-audit", "on")
            .header("content-type", "application/json")
            .body(q1().to_string())
            .send()
            .await
            .unwrap();
        let head = format!("{:?}", r.headers());
        answers.push_str(&format!("{head}\n{}\n", r.text().await.unwrap()));
    }
    assert!(answers.contains("\"cached\":false"), "{answers}");
    // A wrong key too: the vendor's refusal must not echo what was sent.
    a.set(Mode::Ok);
    let r = http
        .post(format!("http://{addr}/v1/connectors/vendor_a/bars"))
        .bearer_auth(&desk)
        .header("x-vendor-key", "vk_wrong_but_secret_too")
        .header("content-type", "application/json")
        .body(q1().to_string())
        .send()
        .await
        .unwrap();
    answers.push_str(&r.text().await.unwrap());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    child.wait().unwrap();
    reader.join().unwrap();
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("TRACE"), "the server logged at trace level");
    assert!(
        log.contains("/v1/connectors/vendor_a/bars"),
        "requests are logged"
    );
    for secret in [VENDOR_KEY, "vk_wrong_but_secret_too"] {
        assert!(!log.contains(secret), "the vendor key reached the log");
        assert!(
            !answers.contains(secret),
            "the vendor key reached an answer"
        );
        for f in std::fs::read_dir(dir.path()).unwrap() {
            let bytes = std::fs::read(f.unwrap().path()).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "the vendor key reached the state database"
            );
        }
    }
}
