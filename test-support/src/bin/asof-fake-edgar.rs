//! EDGAR files made to measure, for `benches/ingest.sh`:
//! - `asof-fake-edgar serve FROM TO ROWS_PER_DAY SEED` serves each weekday's
//!   `company.YYYYMMDD.idx` and each quarter's `index.json` under
//!   `/Archives/edgar/daily-index/`, generated on request (1,000 days of 4,000 rows never sit in
//!   memory at once); prints `listening <url>` once it accepts connections, serves until killed;
//! - `asof-fake-edgar write DIR DAY ROWS SUBMISSIONS CAPTURED` writes one daily index of `ROWS`
//!   filings on `DAY` and `SUBMISSIONS` company captures (40 filings each, the newest the day
//!   before `DAY`) taken at `CAPTURED`.

use std::sync::Arc;

use asof_test_support::edgar_archive::{archive, business_days, compact, daily_index, date};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use time::Date;

struct Span {
    from: Date,
    to: Date,
    rows: usize,
    seed: u64,
}

async fn get(
    State(span): State<Arc<Span>>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> Response {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ua.contains('@') {
        return StatusCode::FORBIDDEN.into_response();
    }
    let Some(rest) = path.strip_prefix("edgar/daily-index/") else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let [year, quarter, file] = parts.as_slice() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (Ok(year), Some(Ok(q))) = (
        year.parse::<i32>(),
        quarter.strip_prefix("QTR").map(str::parse::<u8>),
    ) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if !(1..=4).contains(&q) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if *file == "index.json" {
        // The quarter's slice of the span, listed as EDGAR lists it.
        let first = date(&format!("{year}-{:02}-01", (q - 1) * 3 + 1));
        let last = date(&format!("{year}-{:02}-01", (q - 1) * 3 + 3))
            .replace_day(time::util::days_in_month(
                time::Month::try_from((q - 1) * 3 + 3).expect("month"),
                year,
            ))
            .expect("a day");
        let (from, to) = (first.max(span.from), last.min(span.to));
        if from > to {
            return StatusCode::NOT_FOUND.into_response();
        }
        let listing = archive(from, to, 0, 0)
            .into_iter()
            .find(|(p, _)| p.ends_with("index.json"))
            .map(|(_, b)| b)
            .unwrap_or_default();
        return listing.into_response();
    }
    let day = business_days(span.from, span.to)
        .into_iter()
        .find(|d| *file == format!("company.{}.idx", compact(*d)));
    match day {
        Some(d) => daily_index(d, span.rows, span.seed).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn write(dir: &str, day: &str, rows: &str, subs: &str, captured: &str) {
    let dir = std::path::Path::new(dir);
    std::fs::create_dir_all(dir).expect("output directory");
    let day = date(day);
    let rows: usize = rows.parse().expect("ROWS is a number");
    let subs: u64 = subs.parse().expect("SUBMISSIONS is a number");
    std::fs::write(
        dir.join(format!("company.{}.idx", compact(day))),
        daily_index(day, rows, 1),
    )
    .expect("write the daily index");
    for i in 0..subs {
        let cik = 3_000_000 + i * 7;
        let (name, bytes) = asof_test_support::edgar_archive::submissions(
            cik,
            &format!("ZZ{i}"),
            40,
            day.previous_day().expect("a day"),
            captured,
        );
        std::fs::write(dir.join(name), bytes).expect("write a submissions capture");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!(
            "usage: asof-fake-edgar serve FROM TO ROWS_PER_DAY SEED\n       asof-fake-edgar write DIR DAY ROWS SUBMISSIONS CAPTURED"
        );
        std::process::exit(2)
    };
    let (from, to, rows, seed) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["serve", from, to, rows, seed] => (from, to, rows, seed),
        ["write", dir, day, rows, subs, captured] => {
            write(dir, day, rows, subs, captured);
            return;
        }
        _ => usage(),
    };
    let span = Arc::new(Span {
        from: date(from),
        to: date(to),
        rows: rows.parse().expect("ROWS_PER_DAY is a number"),
        seed: seed.parse().expect("SEED is a number"),
    });
    let app = axum::Router::new()
        .route("/Archives/{*path}", axum::routing::get(get))
        .with_state(span);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("listening http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}
