//! Vendor A, shaped like an aggregates API: `GET /v2/aggs/ticker/{ticker}/range/1/day/{from}/
//! {to}?adjusted=&sort=asc&limit=50000` with `Authorization: Bearer <key>`, answering
//! `{"status": "OK", "adjusted": bool, "results": [{"t": <epoch ms>, "o", "h", "l", "c", "v"}],
//! "next_url"?}`. A `next_url` on the configured origin is followed (same key) up to 20
//! pages; anywhere else it is refused (the key never leaves for another host).

use asof_engine::Instant;
use serde::Deserialize;

use super::{Bar, BarsRequest, Connector, Fault, MAX_PAGES, VendorKey};

#[derive(Debug, Deserialize)]
struct Page {
    status: String,
    #[serde(default)]
    adjusted: Option<bool>,
    #[serde(default)]
    results: Vec<Agg>,
    #[serde(default)]
    next_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Agg {
    t: i64,
    o: f64,
    h: f64,
    l: f64,
    c: f64,
    v: f64,
}

pub(super) async fn fetch(
    c: &Connector,
    base: &str,
    key: &VendorKey,
    req: &BarsRequest,
) -> Result<Vec<Bar>, Fault> {
    let mut url = format!(
        "{base}/v2/aggs/ticker/{}/range/1/day/{}/{}?adjusted={}&sort=asc&limit=50000",
        req.ticker, req.start, req.end, req.adjusted
    );
    let mut bars = Vec::new();
    for _ in 0..MAX_PAGES {
        let body = c.get(&url, key, "Bearer").await?;
        let page: Page = serde_json::from_slice(&body)
            .map_err(|e| Fault::Upstream(format!("vendor_a answer is not its shape: {e}")))?;
        if !matches!(page.status.as_str(), "OK" | "DELAYED") {
            return Err(Fault::Upstream(format!(
                "vendor_a status {:?}",
                page.status
            )));
        }
        let adjusted = page.adjusted.unwrap_or(req.adjusted);
        for a in page.results {
            bars.push(Bar {
                date: Instant::from_micros(a.t.saturating_mul(1_000))
                    .day()
                    .to_string(),
                open: a.o,
                high: a.h,
                low: a.l,
                close: a.c,
                volume: a.v,
                adjusted,
            });
        }
        match page.next_url {
            None => return Ok(bars),
            Some(next) if same_origin(&next, base) => url = next,
            Some(_) => {
                return Err(Fault::Upstream(
                    "vendor_a pointed the next page to another origin".into(),
                ));
            }
        }
    }
    Err(Fault::Upstream(format!(
        "vendor_a answered more than {MAX_PAGES} pages"
    )))
}

fn same_origin(url: &str, base: &str) -> bool {
    match (url::Url::parse(url), url::Url::parse(base)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_pages_are_followed_only_on_the_configured_origin() {
        let base = "http://127.0.0.1:9000";
        assert!(same_origin(
            "http://127.0.0.1:9000/v2/aggs/x?cursor=1",
            base
        ));
        assert!(!same_origin("http://127.0.0.1:9001/v2/aggs/x", base));
        assert!(!same_origin("https://127.0.0.1:9000/v2/aggs/x", base));
        assert!(!same_origin("http://evil.example/v2", base));
    }
}
