//! Two market-data vendors on loopback, one per shape the connector speaks, for the connector
//! tests: vendor A an aggregates API (`/v2/aggs/ticker/{t}/range/1/day/{from}/{to}`, the key
//! as `Authorization: Bearer`), vendor B a daily-prices API (`/daily/{t}/prices?startDate=
//! &endDate=`, the key as `Authorization: Token`). Each checks the credential arrives where
//! that vendor expects it (401 otherwise, in the vendor's own error shape), answers
//! real-looking bars for the weekdays of the range (AAPL in early 2024; other known tickers
//! derived from it), 404 for unknown tickers, and can be told to refuse, rate-limit, stall or
//! send garbage. Every request is recorded (path, query and credential) for the tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// The key both vendors accept.
pub const VENDOR_KEY: &str = "vk_live_Zq8XpL3mN0aR7tYc2Wb5";
/// Tickers the vendors know.
pub const TICKERS: [&str; 3] = ["AAPL", "MSFT", "BRK.B"];

/// How the next answers go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ok,
    /// 403 whatever the key.
    Refuse,
    /// 429 with `Retry-After: 17`.
    RateLimit,
    /// Answers after 30 s (past the connector's timeout).
    Stall,
    /// 200 with a body that is not the vendor's shape.
    Garbage,
    /// 200 with one bar whose low is above its high.
    BadBar,
    /// 500.
    Fail,
}

/// One request a vendor received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub query: String,
    pub authorization: Option<String>,
}

#[derive(Debug)]
struct Inner {
    mode: Mode,
    seen: Vec<Seen>,
}

/// A running fake vendor. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FakeVendor {
    inner: Arc<Mutex<Inner>>,
    /// `http://127.0.0.1:<port>`: the vendor's base URL for `--vendor-*-url`.
    pub url: String,
}

impl FakeVendor {
    /// Vendor A (aggregates shape) on a free loopback port of the current runtime.
    pub async fn start_a() -> FakeVendor {
        Self::start(axum::Router::new().route(
            "/v2/aggs/ticker/{ticker}/range/1/day/{from}/{to}",
            get(aggs),
        ))
        .await
    }

    /// Vendor B (daily-prices shape) on a free loopback port of the current runtime.
    pub async fn start_b() -> FakeVendor {
        Self::start(axum::Router::new().route("/daily/{ticker}/prices", get(prices))).await
    }

    async fn start(router: axum::Router<FakeVendor>) -> FakeVendor {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = FakeVendor {
            inner: Arc::new(Mutex::new(Inner {
                mode: Mode::Ok,
                seen: Vec::new(),
            })),
            url: format!("http://{}", listener.local_addr().unwrap()),
        };
        let app = router.with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    pub fn set(&self, mode: Mode) {
        self.inner.lock().unwrap().mode = mode;
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.inner.lock().unwrap().seen.clone()
    }

    /// Records the request; the mode's fault, if any, as the response.
    async fn enter(&self, path: &str, query: &str, headers: &HeaderMap) -> (Mode, Option<String>) {
        let authorization = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mode = {
            let mut g = self.inner.lock().unwrap();
            g.seen.push(Seen {
                path: path.to_owned(),
                query: query.to_owned(),
                authorization: authorization.clone(),
            });
            g.mode
        };
        if mode == Mode::Stall {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        (mode, authorization)
    }
}

/// Weekdays of `[from, to]` (`YYYY-MM-DD`) with a price path derived from the ticker.
fn days(ticker: &str, from: &str, to: &str) -> Option<Vec<(String, i64, [f64; 5])>> {
    let fmt = time::macros::format_description!("[year]-[month]-[day]");
    // The stand-in's tickers have a history from 2000-01-03, as a real ticker's begins at its
    // listing: a range reaching further back gets the bars there are.
    let listed = time::macros::date!(2000 - 01 - 03);
    let mut d = time::Date::parse(from, &fmt).ok()?.max(listed);
    let end = time::Date::parse(to, &fmt).ok()?;
    let base: f64 = match ticker {
        "AAPL" => 185.64,
        "MSFT" => 370.87,
        _ => 362.18,
    };
    let mut out = Vec::new();
    let mut i: f64 = 0.0;
    while d <= end {
        if !matches!(d.weekday(), time::Weekday::Saturday | time::Weekday::Sunday) {
            let open = base + i * 0.37;
            let close = open + if (i as i64) % 2 == 0 { 1.21 } else { -0.84 };
            let high = open.max(close) + 0.92;
            let low = open.min(close) - 1.07;
            let volume = 52_164_500.0 + i * 1_000_000.0;
            // Midnight US/Eastern, as aggregates APIs stamp daily bars (05:00Z in winter).
            let t = (d.midnight().assume_utc().unix_timestamp() + 5 * 3600) * 1000;
            out.push((d.to_string(), t, [open, high, low, close, volume]));
            i += 1.0;
        }
        d = d.next_day()?;
    }
    Some(out)
}

async fn aggs(
    State(v): State<FakeVendor>,
    Path((ticker, from, to)): Path<(String, String, String)>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let query = {
        let mut k: Vec<_> = q.iter().map(|(a, b)| format!("{a}={b}")).collect();
        k.sort();
        k.join("&")
    };
    let (mode, auth) = v
        .enter(
            &format!("/v2/aggs/ticker/{ticker}/range/1/day/{from}/{to}"),
            &query,
            &headers,
        )
        .await;
    let refuse = |m: &str| {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"status": "ERROR", "request_id": "f1", "error": m})),
        )
            .into_response()
    };
    if auth.as_deref() != Some(&format!("Bearer {VENDOR_KEY}")) {
        return refuse("Unknown API Key");
    }
    match mode {
        Mode::Refuse => return (StatusCode::FORBIDDEN, axum::Json(json!({"status": "NOT_AUTHORIZED", "message": "You are not entitled to this data."}))).into_response(),
        Mode::RateLimit => return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "17")], axum::Json(json!({"status": "ERROR", "error": "You've exceeded the maximum requests per minute"}))).into_response(),
        Mode::Garbage => return (StatusCode::OK, "<html>maintenance</html>").into_response(),
        Mode::Fail => return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({"status": "ERROR"}))).into_response(),
        _ => {}
    }
    if !TICKERS.contains(&ticker.as_str()) {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(
                json!({"status": "NOT_FOUND", "request_id": "f2", "message": "Ticker not found."}),
            ),
        )
            .into_response();
    }
    let Some(days) = days(&ticker, &from, &to) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"status": "ERROR", "error": "bad dates"})),
        )
            .into_response();
    };
    let adjusted = q.get("adjusted").is_none_or(|a| a == "true");
    let mut results: Vec<Value> = days
        .iter()
        .map(|(_, t, [o, h, l, c, vol])| json!({"v": vol, "vw": (o + c) / 2.0, "o": o, "c": c, "h": h, "l": l, "t": t, "n": 612_093}))
        .collect();
    if mode == Mode::BadBar && !results.is_empty() {
        results[0]["l"] = json!(10_000.0);
    }
    axum::Json(json!({
        "ticker": ticker, "queryCount": results.len(), "resultsCount": results.len(),
        "adjusted": adjusted, "results": results, "status": "OK", "request_id": "6a7e466379af0a71039d60cc78e72282", "count": results.len(),
    }))
    .into_response()
}

async fn prices(
    State(v): State<FakeVendor>,
    Path(ticker): Path<String>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let from = q.get("startDate").cloned().unwrap_or_default();
    let to = q.get("endDate").cloned().unwrap_or_default();
    let (mode, auth) = v
        .enter(
            &format!("/daily/{ticker}/prices"),
            &format!("endDate={to}&startDate={from}"),
            &headers,
        )
        .await;
    if auth.as_deref() != Some(&format!("Token {VENDOR_KEY}")) {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"detail": "Invalid token."})),
        )
            .into_response();
    }
    match mode {
        Mode::Refuse => {
            return (
                StatusCode::FORBIDDEN,
                axum::Json(json!({"detail": "Your plan does not include this data."})),
            )
                .into_response();
        }
        Mode::RateLimit => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "17")],
                axum::Json(json!({"detail": "Rate limit exceeded."})),
            )
                .into_response();
        }
        Mode::Garbage => {
            return (StatusCode::OK, axum::Json(json!({"detail": "not a list"}))).into_response();
        }
        Mode::Fail => return (StatusCode::BAD_GATEWAY, "upstream").into_response(),
        _ => {}
    }
    if !TICKERS.contains(&ticker.as_str()) {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"detail": format!("Error: Ticker '{ticker}' not found")})),
        )
            .into_response();
    }
    let Some(days) = days(&ticker, &from, &to) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"detail": "bad dates"})),
        )
            .into_response();
    };
    let mut rows: Vec<Value> = days
        .iter()
        .map(|(date, _, [o, h, l, c, vol])| {
            // Adjusted fields as after a 2% dividend adjustment.
            let a = 0.98;
            json!({
                "date": format!("{date}T00:00:00.000Z"), "open": o, "high": h, "low": l, "close": c, "volume": vol,
                "adjOpen": o * a, "adjHigh": h * a, "adjLow": l * a, "adjClose": c * a, "adjVolume": vol,
                "divCash": 0.0, "splitFactor": 1.0,
            })
        })
        .collect();
    if mode == Mode::BadBar && !rows.is_empty() {
        rows[0]["adjLow"] = json!(10_000.0);
        rows[0]["low"] = json!(10_000.0);
    }
    axum::Json(Value::Array(rows)).into_response()
}
