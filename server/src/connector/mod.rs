//! Bring-your-own-key daily bars: the caller's own market-data vendor credential, used for one
//! upstream call and dropped, and the bars normalised beside the as-of record.
//!
//! Two vendor shapes, modelled on real daily-bar APIs: [`vendor_a`] an aggregates API
//! (`/v2/aggs/ticker/{ticker}/range/1/day/{from}/{to}`, Bearer key, epoch-millisecond bar
//! times, `o/h/l/c/v`), [`vendor_b`] a daily-prices API (`/daily/{ticker}/prices`,
//! `Authorization: Token`, ISO dates, `open/high/low/close/volume` and `adj*` fields).
//!
//! Why the key is a [`VendorKey`]: it has no `Display`, its `Debug` is redacted, and it only
//! leaves this module as a sensitive header value, so no log line, error message, receipt or
//! answer can carry it by accident. Nothing a vendor answers is stored or served to anyone
//! else (`cached: false`).

pub mod vendor_a;
pub mod vendor_b;

use std::time::Duration;

use asof_engine::Day;
use serde::Serialize;

use crate::error::{ApiError, Error, Result};
use crate::state::slots::{KeySlot, KeySlots};

/// Longest wait for a connection to a vendor.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default of [`ConnectorConfig::call_timeout`] (under the request timeout).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Upstream calls one API key may have in flight at once (beyond: `429`).
pub const CALLS_PER_KEY: usize = 4;
/// Pages of one vendor answer followed at most (vendor A pages with `next_url`).
const MAX_PAGES: usize = 20;
/// The largest vendor answer read (ten years of bars are about 600 KB).
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// The vendors, by their path name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    VendorA,
    VendorB,
}

impl Vendor {
    pub const ALL: [Vendor; 2] = [Vendor::VendorA, Vendor::VendorB];
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::VendorA => "vendor_a",
            Vendor::VendorB => "vendor_b",
        }
    }
    pub fn parse(s: &str) -> Option<Vendor> {
        Vendor::ALL.into_iter().find(|v| v.as_str() == s)
    }
    fn flag(self) -> &'static str {
        match self {
            Vendor::VendorA => "--vendor-a-url",
            Vendor::VendorB => "--vendor-b-url",
        }
    }
}

/// One vendor's settings.
#[derive(Debug, Clone)]
pub struct VendorConfig {
    /// The vendor API's base URL (e.g. `https://api.vendor-a.example`).
    pub url: String,
    /// The license class in force for this vendor's data, named in every answer's `origin`.
    pub license_class: String,
}

/// The connector's settings (flags of `asof serve`); a vendor is off until configured.
#[derive(Debug, Clone)]
pub struct ConnectorConfig {
    pub vendor_a: Option<VendorConfig>,
    pub vendor_b: Option<VendorConfig>,
    /// Longest one upstream request may take (each page of an answer).
    pub call_timeout: Duration,
}

impl Default for ConnectorConfig {
    fn default() -> Self {
        ConnectorConfig {
            vendor_a: None,
            vendor_b: None,
            call_timeout: CALL_TIMEOUT,
        }
    }
}

/// The caller's vendor credential. Never displayed, logged, stored or echoed: its `Debug` is
/// redacted and the only way out is [`VendorKey::header`], a sensitive header value.
pub struct VendorKey(String);

impl std::fmt::Debug for VendorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VendorKey(redacted)")
    }
}

impl VendorKey {
    /// Checks an `X-Vendor-Key` value: 1 to 512 visible ASCII characters. The message names
    /// the header, never the value.
    pub fn parse(raw: Option<&axum::http::HeaderValue>) -> Result<VendorKey, ApiError> {
        let bad = |m: &str| ApiError::invalid("X-Vendor-Key", m);
        let v = raw.ok_or_else(|| {
            bad("the X-Vendor-Key header is required: your own credential with this vendor, used for this one call and never kept")
        })?;
        let s = v
            .to_str()
            .map_err(|_| bad("X-Vendor-Key must be visible ASCII"))?;
        if s.is_empty() || s.len() > 512 || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad(
                "X-Vendor-Key must be 1 to 512 visible ASCII characters without spaces",
            ));
        }
        Ok(VendorKey(s.to_owned()))
    }

    /// `<scheme> <key>` as a header value marked sensitive (never printed by the HTTP stack).
    fn header(&self, scheme: &str) -> axum::http::HeaderValue {
        let mut v = axum::http::HeaderValue::from_str(&format!("{scheme} {}", self.0))
            .expect("checked visible ASCII");
        v.set_sensitive(true);
        v
    }
}

/// What a bars request asks for (checked by the route).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BarsRequest {
    /// Upper-case, by the ticker rule of every route, beginning with a letter or digit
    /// ([`is_path_segment`]).
    pub ticker: String,
    pub start: Day,
    pub end: Day,
    /// Split- and dividend-adjusted prices (default true).
    pub adjusted: bool,
}

/// One normalised daily bar.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Bar {
    /// The trading day (`YYYY-MM-DD`).
    pub date: String,
    pub open: f64,
    pub high: f64,
    pub low: f64,
    pub close: f64,
    /// Shares traded (adjusted for splits when `adjusted`).
    pub volume: f64,
    /// Whether prices are split- and dividend-adjusted.
    pub adjusted: bool,
}

/// Why a vendor call gave no bars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The vendor refused the caller's key (401/403).
    Refused,
    /// The vendor knows no such ticker (404).
    NotFound,
    /// The vendor's rate limit; its `Retry-After`, in seconds.
    RateLimited { retry_after: u64 },
    /// Timeout, unreachable, 5xx, or an answer that is not the vendor's shape (the detail is
    /// for the log only and never holds the key).
    Upstream(String),
}

impl From<Fault> for ApiError {
    fn from(f: Fault) -> Self {
        match f {
            Fault::Refused => ApiError::VendorRefused,
            Fault::NotFound => {
                ApiError::not_found("the vendor has no daily bars for this ticker".into())
            }
            Fault::RateLimited { retry_after } => ApiError::VendorRateLimited { retry_after },
            Fault::Upstream(detail) => {
                tracing::warn!(%detail, "vendor call failed");
                ApiError::VendorError
            }
        }
    }
}

/// Calls vendors for callers; one per server process.
pub struct Connector {
    http: reqwest::Client,
    vendors: [Option<VendorConfig>; 2],
    /// In-flight calls per API key id.
    slots: KeySlots,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("vendors", &self.vendors)
            .finish_non_exhaustive()
    }
}

/// Whether a ticker may stand as one segment of a vendor's URL path as it is: 1 to 16 letters,
/// digits, `.` or `-`, the first a letter or digit (so never `.` or `..`, and nothing a URL
/// parser would decode or resolve).
pub fn is_path_segment(t: &str) -> bool {
    t.len() <= 16
        && t.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && t.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-')
}

impl Connector {
    pub fn new(cfg: &ConnectorConfig) -> Result<Self> {
        for (v, c) in Vendor::ALL.iter().zip([&cfg.vendor_a, &cfg.vendor_b]) {
            if let Some(c) = c {
                let u = url::Url::parse(&c.url)
                    .map_err(|e| Error::Config(format!("{} {:?}: {e}", v.flag(), c.url)))?;
                if !matches!(u.scheme(), "http" | "https") {
                    return Err(Error::Config(format!(
                        "{} must be an http(s) URL",
                        v.flag()
                    )));
                }
                if c.license_class.trim().is_empty() {
                    return Err(Error::Config(format!("{v:?} needs a license class")));
                }
            }
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(cfg.call_timeout)
            // A vendor redirecting would carry the key elsewhere; answers come from the
            // configured origin only.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("asof/", env!("CARGO_PKG_VERSION"), " (connector)"))
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        Ok(Connector {
            http,
            vendors: [cfg.vendor_a.clone(), cfg.vendor_b.clone()],
            slots: KeySlots::new(CALLS_PER_KEY),
        })
    }

    /// A vendor's settings, or `503 connector_not_configured`.
    pub fn vendor(&self, v: Vendor) -> Result<&VendorConfig, ApiError> {
        self.vendors[v as usize].as_ref().ok_or_else(|| {
            ApiError::ConnectorNotConfigured(format!(
                "{} is not configured on this server ({})",
                v.as_str(),
                v.flag()
            ))
        })
    }

    /// One of the key's [`CALLS_PER_KEY`] call slots, held until the permit drops; `429`
    /// when all are taken.
    pub fn slot(&self, key_id: &str) -> Result<KeySlot, ApiError> {
        self.slots.take(key_id).ok_or(ApiError::ConnectorBusy {
            limit: CALLS_PER_KEY,
        })
    }

    /// The bars of `req` from vendor `v` with the caller's `key`, sorted by date.
    pub async fn bars(
        &self,
        v: Vendor,
        key: &VendorKey,
        req: &BarsRequest,
    ) -> Result<Vec<Bar>, ApiError> {
        let cfg = self.vendor(v)?;
        let base = cfg.url.trim_end_matches('/');
        // The ticker becomes a path segment of the vendor's URL: never `.`, `..` or anything
        // that would be read as another path, whoever built the request.
        if !is_path_segment(&req.ticker) {
            return Err(ApiError::invalid(
                "ticker",
                "ticker must begin with a letter or digit and hold only letters, digits, '.' or '-'",
            ));
        }
        // No day after today (UTC) has a bar yet, so the range ends today at the latest; a
        // range that then ends before it starts holds no trading day and is answered empty
        // without a vendor call. How far back bars go is the vendor's to say (a ticker's
        // history): the answer is bounded by its page and size caps, not by a span rule.
        let req = &BarsRequest {
            end: req.end.min(asof_engine::Instant::now().day()),
            ..req.clone()
        };
        if req.end < req.start {
            return Ok(Vec::new());
        }
        let fetched = match v {
            Vendor::VendorA => vendor_a::fetch(self, base, key, req).await,
            Vendor::VendorB => vendor_b::fetch(self, base, key, req).await,
        };
        // By vendor and outcome only: never the key, the ticker or the URL.
        let outcome = match &fetched {
            Ok(_) => "ok",
            Err(Fault::Refused) => "refused",
            Err(Fault::RateLimited { .. }) => "rate_limited",
            Err(Fault::NotFound) => "not_found",
            Err(Fault::Upstream(_)) => "error",
        };
        metrics::counter!(crate::obs::CONNECTOR_CALLS, "vendor" => v.as_str(), "outcome" => outcome)
            .increment(1);
        let mut bars = fetched?;
        check(&mut bars, req)?;
        Ok(bars)
    }

    /// One GET with the key in `Authorization: <scheme> <key>`; the body of a 2xx answer, or
    /// the fault its status means.
    async fn get(&self, url: &str, key: &VendorKey, scheme: &str) -> Result<Vec<u8>, Fault> {
        let mut res = self
            .http
            .get(url)
            .header(reqwest::header::AUTHORIZATION, key.header(scheme))
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| Fault::Upstream(format!("GET {}: {}", path_of(url), e.without_url())))?;
        let status = res.status();
        match status.as_u16() {
            200..=299 => {}
            401 | 403 => return Err(Fault::Refused),
            404 => return Err(Fault::NotFound),
            429 => {
                let retry_after = res
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(60)
                    .clamp(1, 3_600);
                return Err(Fault::RateLimited { retry_after });
            }
            _ => {
                return Err(Fault::Upstream(format!("GET {}: {status}", path_of(url))));
            }
        }
        let mut body = Vec::new();
        while let Some(chunk) = res
            .chunk()
            .await
            .map_err(|e| Fault::Upstream(format!("GET {}: {}", path_of(url), e.without_url())))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(Fault::Upstream(format!(
                    "GET {}: answer larger than {MAX_ANSWER_BYTES} bytes",
                    path_of(url)
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// A URL's path, for log lines (never its query).
fn path_of(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| "(url)".into(), |u| u.path().to_owned())
}

/// A vendor answer is used whole or not at all: every bar finite, `low <= open, close <=
/// high`, volume not negative, its day within the request and unique; then sorted by date.
fn check(bars: &mut [Bar], req: &BarsRequest) -> Result<(), Fault> {
    let (start, end) = (req.start.to_string(), req.end.to_string());
    for b in bars.iter() {
        let prices = [b.open, b.high, b.low, b.close];
        let sane = prices.iter().chain([&b.volume]).all(|x| x.is_finite())
            && b.volume >= 0.0
            && b.low <= b.high
            && prices.iter().all(|p| *p >= b.low && *p <= b.high);
        if !sane || b.date < start || b.date > end {
            return Err(Fault::Upstream(format!(
                "a bar out of shape or out of the asked range on {}",
                b.date
            )));
        }
    }
    bars.sort_by(|a, b| a.date.cmp(&b.date));
    if bars.windows(2).any(|w| w[0].date == w[1].date) {
        return Err(Fault::Upstream("two bars for one day".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticker_that_would_name_another_vendor_path_is_no_path_segment() {
        for ok in ["AAPL", "BRK.B", "BF-B", "A", "0700"] {
            assert!(is_path_segment(ok), "{ok}");
        }
        for bad in [
            ".",
            "..",
            "-A",
            ".A",
            "",
            "A/B",
            "A%2F",
            "A B",
            "ABCDEFGHIJKLMNOPQ",
        ] {
            assert!(!is_path_segment(bad), "{bad}");
        }
    }

    fn bar(date: &str, low: f64, high: f64) -> Bar {
        Bar {
            date: date.into(),
            open: low,
            high,
            low,
            close: high,
            volume: 10.0,
            adjusted: true,
        }
    }

    fn req() -> BarsRequest {
        BarsRequest {
            ticker: "AAPL".into(),
            start: Day::parse_param("start", "2024-01-02").unwrap(),
            end: Day::parse_param("end", "2024-01-05").unwrap(),
            adjusted: true,
        }
    }

    #[test]
    fn bars_are_sorted_and_a_bar_out_of_shape_range_or_repeated_refuses_the_whole_answer() {
        let mut ok = vec![bar("2024-01-03", 1.0, 2.0), bar("2024-01-02", 1.0, 2.0)];
        check(&mut ok, &req()).unwrap();
        assert_eq!(ok[0].date, "2024-01-02");
        for mut bad in [
            vec![bar("2024-01-03", 3.0, 2.0)],
            vec![bar("2024-01-06", 1.0, 2.0)],
            vec![bar("2024-01-01", 1.0, 2.0)],
            vec![bar("2024-01-03", 1.0, f64::NAN)],
            vec![bar("2024-01-03", 1.0, 2.0), bar("2024-01-03", 1.0, 2.0)],
            vec![Bar {
                volume: -1.0,
                ..bar("2024-01-03", 1.0, 2.0)
            }],
            vec![Bar {
                open: 9.0,
                ..bar("2024-01-03", 1.0, 2.0)
            }],
        ] {
            assert!(check(&mut bad, &req()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_vendor_key_is_never_printed() {
        let v = axum::http::HeaderValue::from_static("vk_secret_123");
        let k = VendorKey::parse(Some(&v)).unwrap();
        assert_eq!(format!("{k:?}"), "VendorKey(redacted)");
        let h = k.header("Bearer");
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains("vk_secret"), "{h:?}");
        for bad in ["", "has space", "é"] {
            let v = axum::http::HeaderValue::from_bytes(bad.as_bytes()).unwrap();
            let e = VendorKey::parse(Some(&v)).unwrap_err();
            assert_eq!(e.param().as_deref(), Some("X-Vendor-Key"));
        }
        assert!(VendorKey::parse(None).is_err());
    }
}
