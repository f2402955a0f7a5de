//! Vendor B, shaped like a daily-prices API: `GET /daily/{ticker}/prices?startDate=&endDate=`
//! with `Authorization: Token <key>`, answering a JSON array of
//! `{"date": "2024-01-02T00:00:00.000Z", "open", "high", "low", "close", "volume",
//! "adjOpen", "adjHigh", "adjLow", "adjClose", "adjVolume", ...}`.

use asof_engine::Day;
use serde::Deserialize;

use super::{Bar, BarsRequest, Connector, Fault, VendorKey};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Price {
    date: String,
    open: f64,
    high: f64,
    low: f64,
    close: f64,
    volume: f64,
    adj_open: f64,
    adj_high: f64,
    adj_low: f64,
    adj_close: f64,
    adj_volume: f64,
}

pub(super) async fn fetch(
    c: &Connector,
    base: &str,
    key: &VendorKey,
    req: &BarsRequest,
) -> Result<Vec<Bar>, Fault> {
    let url = format!(
        "{base}/daily/{}/prices?startDate={}&endDate={}",
        req.ticker, req.start, req.end
    );
    let body = c.get(&url, key, "Token").await?;
    let prices: Vec<Price> = serde_json::from_slice(&body)
        .map_err(|e| Fault::Upstream(format!("vendor_b answer is not its shape: {e}")))?;
    prices
        .into_iter()
        .map(|p| {
            let day = p
                .date
                .get(..10)
                .and_then(|d| Day::parse_param("date", d).ok())
                .ok_or_else(|| Fault::Upstream(format!("vendor_b date {:?}", p.date)))?;
            Ok(if req.adjusted {
                Bar {
                    date: day.to_string(),
                    open: p.adj_open,
                    high: p.adj_high,
                    low: p.adj_low,
                    close: p.adj_close,
                    volume: p.adj_volume,
                    adjusted: true,
                }
            } else {
                Bar {
                    date: day.to_string(),
                    open: p.open,
                    high: p.high,
                    low: p.low,
                    close: p.close,
                    volume: p.volume,
                    adjusted: false,
                }
            })
        })
        .collect()
}
