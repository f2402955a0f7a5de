//! SEC ticker files (`company_tickers.json`, `company_tickers_exchange.json` and CSV exports of
//! them): dated full-list observations for identity intervals, and full list snapshots that
//! `asof ingest` compares with the `sec.edgar` list state to report what changed. A ticker list
//! is identity evidence, never a record of `sec.edgar` (whose records are filings): it makes no
//! rows (`crate::pipeline::list_makes_rows`).

use std::collections::{BTreeMap, BTreeSet};

use asof_engine::model::clock::Instant;
use asof_engine::model::identity::{EvidenceFile, Observation};
use asof_engine::normalize_cik;
use asof_engine::store::hashing::sha256_hex;
use serde_json::{Value, json};

use crate::adapter::{Entry, Snapshot};

use crate::error::{Error, Result};

/// One line of a ticker list: a ticker, the CIK it maps to, and what else the form gives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listing {
    pub ticker: String,
    pub cik: String,
    pub name: Option<String>,
    pub exchange: Option<String>,
}

/// Parses one full ticker list observed at `observed_at` into (ticker, CIK) pairs. Accepts the
/// `{"0": {"cik_str", "ticker", "title"}, ...}` form, the `{"fields": [...], "data": [[...]]}`
/// exchange form, and CSV with `cik` and `ticker` columns.
pub fn parse_ticker_file(file: &str, bytes: &[u8], observed_at: Instant) -> Result<Observation> {
    let pairs: BTreeSet<(String, String)> = listings(file, bytes)?
        .into_iter()
        .map(|l| (l.ticker, l.cik))
        .collect();
    Ok(Observation {
        evidence: EvidenceFile {
            file: file.to_owned(),
            sha256: sha256_hex(bytes),
            observed_at,
            scope: "full".into(),
        },
        cik_scope: None,
        pairs,
    })
}

/// Whether a file name is one of SEC's ticker lists (`company_tickers*.json|csv`, as SEC names
/// them and as archives keep the names), which `asof ingest --source sec.edgar` reads as a
/// list snapshot.
pub fn is_ticker_file(base: &str) -> bool {
    let b = base.to_ascii_lowercase();
    b.starts_with("company_tickers") && (b.ends_with(".json") || b.ends_with(".csv"))
}

/// A ticker list as a full snapshot captured at `captured_at`, one entry per ticker: the
/// listings under it (normally one; exchange exports list a few tickers under two CIKs), so a
/// ticker that moves to another CIK, is renamed or changes exchange is `modified`, and one that
/// leaves the list is `removed`.
pub fn parse_ticker_snapshot(file: &str, bytes: &[u8], captured_at: Instant) -> Result<Snapshot> {
    let mut by_ticker: BTreeMap<String, Vec<Listing>> = BTreeMap::new();
    for l in listings(file, bytes)? {
        by_ticker.entry(l.ticker.clone()).or_default().push(l);
    }
    let entries = by_ticker
        .into_iter()
        .map(|(ticker, mut ls)| {
            ls.sort();
            ls.dedup();
            let first = &ls[0];
            let name = first.name.clone().unwrap_or_else(|| ticker.clone());
            let locator = format!(
                "https://www.sec.gov/cgi-bin/browse-edgar?action=getcompany&CIK={}",
                first.cik
            );
            let fields = json!({
                "ticker": ticker,
                "listings": ls.iter().map(|l| json!({
                    "cik": l.cik,
                    "name": l.name,
                    "exchange": l.exchange,
                })).collect::<Vec<_>>(),
            });
            let name = format!("{ticker} ({name})");
            (
                ticker,
                Entry {
                    name,
                    locator,
                    fields,
                },
            )
        })
        .collect();
    Ok(Snapshot {
        captured_at,
        full: true,
        entries,
    })
}

/// Every listing of a ticker file, in file order; a file with none is refused.
fn listings(file: &str, bytes: &[u8]) -> Result<Vec<Listing>> {
    let out = if file.to_ascii_lowercase().ends_with(".csv") {
        parse_csv(file, bytes)?
    } else {
        parse_json(file, bytes)?
    };
    if out.is_empty() {
        return Err(Error::parse(file, "content", "no ticker rows"));
    }
    Ok(out)
}

fn listing(
    file: &str,
    at: &str,
    ticker: &str,
    cik: &str,
    name: Option<&str>,
    exchange: Option<&str>,
) -> Result<Listing> {
    let ticker = ticker.trim().to_ascii_uppercase();
    if ticker.is_empty()
        || ticker.len() > 16
        || !ticker
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-')
    {
        return Err(Error::parse(
            file,
            at,
            format!("ticker {ticker:?} is not 1-16 letters, digits, '.' or '-'"),
        ));
    }
    let cik = normalize_cik(cik.trim())
        .ok_or_else(|| Error::parse(file, at, format!("CIK {cik:?} is not a number")))?;
    let text = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    Ok(Listing {
        ticker,
        cik,
        name: text(name),
        exchange: text(exchange),
    })
}

fn num_or_str(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn parse_json(file: &str, bytes: &[u8]) -> Result<Vec<Listing>> {
    let v = crate::adapter::json(file, bytes)?;
    let mut out = Vec::new();
    if let (Some(fields), Some(data)) = (
        v.get("fields").and_then(Value::as_array),
        v.get("data").and_then(Value::as_array),
    ) {
        let idx = |name: &str| fields.iter().position(|f| f.as_str() == Some(name));
        let need = |name: &str| {
            idx(name).ok_or_else(|| Error::parse(file, "fields", format!("no {name} field")))
        };
        let (ci, ti) = (need("cik")?, need("ticker")?);
        let (ni, ei) = (idx("name"), idx("exchange"));
        for (i, row) in data.iter().enumerate() {
            let at = format!("data[{i}]");
            let cik = row
                .get(ci)
                .and_then(num_or_str)
                .ok_or_else(|| Error::parse(file, &at, "no cik"))?;
            let ticker = row
                .get(ti)
                .and_then(Value::as_str)
                .ok_or_else(|| Error::parse(file, &at, "no ticker"))?;
            let get = |i: Option<usize>| i.and_then(|i| row.get(i)).and_then(Value::as_str);
            out.push(listing(file, &at, ticker, &cik, get(ni), get(ei))?);
        }
        return Ok(out);
    }
    let obj = v.as_object().ok_or_else(|| {
        Error::parse(
            file,
            "top level",
            "expected an object of entries or {fields, data}",
        )
    })?;
    for (k, e) in obj {
        let at = format!("entry {k}");
        let cik = e
            .get("cik_str")
            .and_then(num_or_str)
            .ok_or_else(|| Error::parse(file, &at, "no cik_str"))?;
        let ticker = e
            .get("ticker")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::parse(file, &at, "no ticker"))?;
        let title = e.get("title").and_then(Value::as_str);
        out.push(listing(file, &at, ticker, &cik, title, None)?);
    }
    Ok(out)
}

fn parse_csv(file: &str, bytes: &[u8]) -> Result<Vec<Listing>> {
    let mut r = csv::Reader::from_reader(bytes);
    let headers = r
        .headers()
        .map_err(|e| Error::parse(file, "header", e.to_string()))?
        .clone();
    let idx = |name: &str| headers.iter().position(|h| h == name);
    let need = |name: &str| {
        idx(name).ok_or_else(|| Error::parse(file, "header", format!("no {name} column")))
    };
    let (ci, ti) = (need("cik")?, need("ticker")?);
    let (ni, ei) = (idx("name"), idx("exchange"));
    let mut out = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let at = format!("line {}", i + 2);
        let rec = rec.map_err(|e| Error::parse(file, &at, e.to_string()))?;
        let (Some(cik), Some(ticker)) = (rec.get(ci), rec.get(ti)) else {
            return Err(Error::parse(file, at, "missing cik or ticker"));
        };
        if ticker.trim().is_empty() {
            continue; // exchange exports list some CIKs without a ticker
        }
        let get = |i: Option<usize>| i.and_then(|i| rec.get(i));
        out.push(listing(file, &at, ticker, cik, get(ni), get(ei))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_three_list_forms_give_the_same_pairs() {
        let at = Instant::parse("2026-01-04T06:01:13Z").unwrap();
        let a = parse_ticker_file(
            "a.json",
            br#"{"0":{"cik_str":320193,"ticker":"AAPL","title":"Apple Inc."}}"#,
            at,
        )
        .unwrap();
        let b = parse_ticker_file("b.json", br#"{"fields":["cik","name","ticker","exchange"],"data":[[320193,"Apple Inc.","AAPL","Nasdaq"]]}"#, at).unwrap();
        let c = parse_ticker_file("c.csv", b"\"cik\",\"ticker\",\"exchange\",\"name\"\n\"0000320193\",\"AAPL\",\"Nasdaq\",\"Apple Inc.\"\n", at).unwrap();
        let want: BTreeSet<_> = [("AAPL".to_owned(), "320193".to_owned())].into();
        assert_eq!(
            (a.pairs.clone(), b.pairs.clone()),
            (want.clone(), want.clone())
        );
        assert_eq!(c.pairs, want);
    }

    #[test]
    fn a_malformed_ticker_is_refused_naming_the_entry() {
        let at = Instant::parse("2026-01-04T06:01:13Z").unwrap();
        let e = parse_ticker_file(
            "t.json",
            br#"{"7":{"cik_str":1,"ticker":"BAD TICKER!","title":"x"}}"#,
            at,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("t.json: entry 7:"), "{e}");
    }
}
