//! EDGAR daily-index files made to measure, for backfill tests and benchmarks: a quarter's
//! `index.json` listing and `company.YYYYMMDD.idx` files in EDGAR's own layout (the header of
//! the real `company.20221003.idx`, fixed-width columns), with deterministic rows. A
//! [`crate::feed::Feed`] serves them under `/Archives/edgar/daily-index/`.

use std::collections::BTreeMap;

use time::{Date, Month, Weekday};

/// SplitMix64: deterministic rows from a seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

const FORMS: [&str; 8] = ["4", "8-K", "10-Q", "SC 13G/A", "424B2", "6-K", "D", "10-K"];

/// `YYYYMMDD` of a date.
pub fn compact(d: Date) -> String {
    format!("{:04}{:02}{:02}", d.year(), u8::from(d.month()), d.day())
}

/// One `company.YYYYMMDD.idx` of `rows` filings accepted on `day`.
pub fn daily_index(day: Date, rows: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed ^ u64::from(day.to_julian_day().unsigned_abs()));
    let month = &format!("{:?}", day.month())[..3];
    let mut out = format!(
        "Description:           Daily Index of EDGAR Dissemination Feed by Company Name\n\
         Last Data Received:    {month} {:>2}, {}\n\
         Comments:              webmaster@sec.gov\n\
         Anonymous FTP:         ftp://ftp.sec.gov/edgar/\n \n \n \n \n\
         Company Name                                                  Form Type   CIK\n      Date Filed  File Name\n{}\n",
        day.day(),
        day.year(),
        "-".repeat(145)
    );
    let yy = day.year() % 100;
    let mut lines: Vec<String> = (0..rows)
        .map(|i| {
            let cik = 1_000 + rng.next() % 2_000_000;
            let agent = 1_000 + rng.next() % 50_000;
            let form = FORMS[(rng.next() % FORMS.len() as u64) as usize];
            let accession = format!(
                "{agent:010}-{yy:02}-{:06}",
                (day.ordinal() as usize * 4_000 + i) % 1_000_000
            );
            format!(
                "{:<62}{:<12}{:<12}{:<12}edgar/data/{cik}/{accession}.txt         ",
                format!("Company {cik} Holdings Inc."),
                form,
                cik,
                compact(day),
            )
        })
        .collect();
    lines.sort();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out.into_bytes()
}

/// Weekdays in `from..=to` (EDGAR publishes no index on weekends; holidays are not modelled).
pub fn business_days(from: Date, to: Date) -> Vec<Date> {
    let mut out = Vec::new();
    let mut d = from;
    while d <= to {
        if !matches!(d.weekday(), Weekday::Saturday | Weekday::Sunday) {
            out.push(d);
        }
        d = d.next_day().expect("in range");
    }
    out
}

/// The archive of every weekday in `from..=to`: path under `/Archives/` → bytes, with each
/// quarter's `index.json` listing its days (as EDGAR's directory listing does).
pub fn archive(from: Date, to: Date, rows: usize, seed: u64) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut quarters: BTreeMap<(i32, u8), Vec<String>> = BTreeMap::new();
    for d in business_days(from, to) {
        let q = (u8::from(d.month()) - 1) / 3 + 1;
        let name = format!("company.{}.idx", compact(d));
        out.insert(
            format!("edgar/daily-index/{}/QTR{q}/{name}", d.year()),
            daily_index(d, rows, seed),
        );
        quarters.entry((d.year(), q)).or_default().push(name);
    }
    for ((year, q), names) in quarters {
        let items: Vec<serde_json::Value> = names
            .iter()
            .map(|n| serde_json::json!({"name": n, "type": "file", "href": n}))
            .collect();
        let listing = serde_json::json!({
            "directory": {"item": items, "name": format!("daily-index/{year}/QTR{q}/")}
        });
        out.insert(
            format!("edgar/daily-index/{year}/QTR{q}/index.json"),
            serde_json::to_vec_pretty(&listing).expect("json"),
        );
    }
    out
}

/// A date from `YYYY-MM-DD`.
pub fn date(s: &str) -> Date {
    let p: Vec<i32> = s.split('-').map(|x| x.parse().expect("digits")).collect();
    Date::from_calendar_date(
        p[0],
        Month::try_from(p[1] as u8).expect("month"),
        p[2] as u8,
    )
    .expect("a date")
}

/// One company's submissions capture (`data.sec.gov/submissions/CIK##########.json` shape) with
/// `filings` recent filings, one a day back from `last`, named as a capture at `captured`
/// (`CIK##########__YYYYMMDDTHHMMSSZ.json`). Returns the file name and bytes.
pub fn submissions(
    cik: u64,
    ticker: &str,
    filings: usize,
    last: Date,
    captured: &str,
) -> (String, Vec<u8>) {
    let mut rng = Rng(cik);
    let mut cols: BTreeMap<&str, Vec<serde_json::Value>> = BTreeMap::new();
    let mut day = last;
    for i in 0..filings {
        let form = FORMS[(rng.next() % FORMS.len() as u64) as usize];
        let yy = day.year() % 100;
        let push = |cols: &mut BTreeMap<&str, Vec<serde_json::Value>>, k, v| {
            cols.entry(k).or_default().push(v);
        };
        push(
            &mut cols,
            "accessionNumber",
            format!("{cik:010}-{yy:02}-{:06}", 900_000 + i).into(),
        );
        let iso = format!(
            "{:04}-{:02}-{:02}",
            day.year(),
            u8::from(day.month()),
            day.day()
        );
        push(&mut cols, "filingDate", iso.clone().into());
        push(&mut cols, "reportDate", "".into());
        push(
            &mut cols,
            "acceptanceDateTime",
            format!("{iso}T{:02}:{:02}:00.000Z", 10 + i % 10, i % 60).into(),
        );
        push(&mut cols, "form", form.into());
        push(&mut cols, "primaryDocument", format!("doc{i}.htm").into());
        push(&mut cols, "primaryDocDescription", form.into());
        day = day.previous_day().expect("in range");
    }
    let body = serde_json::json!({
        "cik": format!("{cik:010}"),
        "name": format!("Company {cik} Holdings Inc."),
        "tickers": [ticker],
        "exchanges": ["Nasdaq"],
        "formerNames": [],
        "filings": {"recent": cols, "files": []},
    });
    let stamp: String = captured
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    (
        format!("CIK{cik:010}__{stamp}.json"),
        serde_json::to_vec(&body).expect("json"),
    )
}
