//! The EDGAR and ticker adapters over the real files shipped under `snapshots/sources/`:
//! row counts and hand-checked rows (clocks included) against the raw input.

use std::path::PathBuf;

use asof_engine::model::clock::{Instant, Lane};
use asof_ingest::sources::edgar::{IndexLayout, parse_atom, parse_index, parse_submissions};
use asof_ingest::sources::tickers::parse_ticker_file;

fn src(rel: &str) -> (String, Vec<u8>) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../snapshots/sources")
        .join(rel);
    (
        rel.to_owned(),
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
}

fn t(s: &str) -> Instant {
    Instant::parse(s).unwrap()
}

#[test]
fn tesla_submissions_give_one_row_per_filing_with_acceptance_as_publication() {
    let (name, bytes) = src("sec.edgar/submissions/CIK0001318605__20260203T120702Z.json");
    let s = parse_submissions(&name, &bytes, "0001318605", t("2026-02-03T12:07:02Z")).unwrap();
    assert_eq!(s.cik, "1318605");
    assert_eq!(s.tickers, vec!["TSLA"]);
    assert_eq!(s.rows.len(), 1000);
    assert_eq!(s.older_pages, vec!["CIK0001318605-submissions-001.json"]);
    let r = s
        .rows
        .iter()
        .find(|r| r.id == "0001628280-26-003952_1318605")
        .unwrap();
    assert_eq!(r.form.as_deref(), Some("10-K"));
    assert_eq!(r.acceptance_at, Some(t("2026-01-29T01:55:03Z")));
    assert_eq!(r.published_at, r.acceptance_at);
    assert_eq!(r.available_at, None);
    assert_eq!(
        r.event_at,
        Some(t("2025-12-31T23:59:59Z")),
        "reportDate at day resolution"
    );
    assert_eq!(r.committed_at, Some(t("2026-02-03T12:07:02Z")));
    assert_eq!(r.lane, Lane::CertifiedPit);
    assert_eq!(
        r.title, "10-K - Tesla, Inc.",
        "a description equal to the form adds nothing"
    );
    // The former name was in force on older filings.
    let names: Vec<&str> = s.names.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, vec!["TESLA MOTORS INC", "Tesla, Inc."]);
}

#[test]
fn paginated_submissions_pages_take_the_cik_from_the_file_name() {
    let (name, bytes) =
        src("sec.edgar/submissions/CIK0001318605-submissions-001__20260305T112035Z.json");
    let s = parse_submissions(&name, &bytes, "0001318605", t("2026-03-05T11:20:35Z")).unwrap();
    assert_eq!(s.rows.len(), 720);
    assert!(s.name.is_none());
    assert!(s.rows.iter().all(|r| r.cik.as_deref() == Some("1318605")));
}

#[test]
fn the_company_daily_index_lists_a_whole_day_at_day_resolution() {
    let (name, bytes) = src("sec.edgar/daily-index/company.20221003.idx");
    let f = parse_index(&name, &bytes, t("2026-11-20T00:00:00Z")).unwrap();
    assert_eq!(f.layout, IndexLayout::Company);
    assert_eq!(f.daily, Some("2022-10-03".parse().unwrap()));
    assert_eq!(f.rows.len(), 4925);
    let r = f
        .rows
        .iter()
        .find(|r| r.id == "0001104659-22-105357_1700461")
        .unwrap();
    assert_eq!(r.form.as_deref(), Some("1-A POS"));
    assert_eq!(r.title, "1-A POS - 1st stREIT Office Inc.");
    assert_eq!(r.published_at, Some(t("2022-10-03T23:59:59Z")));
    assert_eq!(r.acceptance_at, None);
    assert_eq!(
        r.source_locator,
        "https://www.sec.gov/Archives/edgar/data/1700461/0001104659-22-105357.txt"
    );
    assert!(
        f.rows
            .iter()
            .all(|r| r.published_at == Some(t("2022-10-03T23:59:59Z")))
    );
}

#[test]
fn master_and_form_indexes_parse_including_overflowing_company_names() {
    let (name, bytes) = src("sec.edgar/daily-index/master.20181231.TRUNCATED.idx");
    let f = parse_index(&name, &bytes, t("2026-11-20T00:00:00Z")).unwrap();
    assert_eq!((f.layout, f.rows.len()), (IndexLayout::Master, 10));
    assert_eq!(f.rows[0].id, "0001209191-18-064398_1000228");
    let (name, bytes) = src("sec.edgar/daily-index/full-index_1993_QTR4_master.TRUNCATED.idx");
    let q = parse_index(&name, &bytes, t("2026-11-20T00:00:00Z")).unwrap();
    assert_eq!(q.daily, None, "a quarterly index certifies no day");
    assert_eq!(q.rows[0].published_at, Some(t("1993-12-30T23:59:59Z")));
    let (name, bytes) = src("sec.edgar/daily-index/edgecase_badform.idx.txt");
    let b = parse_index(&name, &bytes, t("2026-11-20T00:00:00Z")).unwrap();
    assert_eq!(b.layout, IndexLayout::Form);
    let long = b
        .rows
        .iter()
        .find(|r| r.cik.as_deref() == Some("820694"))
        .unwrap();
    assert_eq!(
        long.title,
        "X-17A-5 - UNITED PLANNERS' FINANCIAL SERVICES OF AMERICA A LIMITED PARTNER"
    );
    let (name, bytes) = src("sec.edgar/daily-index/edgecase_empty-form.idx");
    assert!(
        parse_index(&name, &bytes, t("2026-11-20T00:00:00Z"))
            .unwrap()
            .rows
            .is_empty()
    );
}

#[test]
fn atom_feed_entries_are_forward_lane_rows_first_seen_at_the_fetch_minute() {
    let (name, bytes) = src("sec.edgar/current-feed-atom_2026-01-12/start_00000.atom");
    let p = parse_atom(&name, &bytes).unwrap();
    assert_eq!(p.rows.len(), 100);
    assert_eq!(p.fetched_at, t("2026-01-12T16:28:50Z"));
    let r = &p.rows[0];
    assert_eq!(r.id, "0002074440-26-000002_2074440");
    assert_eq!(r.lane, Lane::ForwardFirstSeen);
    assert_eq!(r.form.as_deref(), Some("13F-HR"));
    assert_eq!(
        r.acceptance_at,
        Some(t("2026-01-12T16:27:39Z")),
        "11:27:39-05:00 in UTC"
    );
    assert_eq!(r.available_at, Some(t("2026-01-12T16:28:00Z")));
    assert_eq!(
        r.availability_basis,
        asof_engine::AvailabilityBasis::LocalFirstSeen
    );
    assert_eq!(r.title, "13F-HR - Ryan Investment Management, Inc. (Filer)");
    // One accession, two parties: two rows.
    assert!(
        p.rows
            .iter()
            .any(|r| r.id == "0000080661-26-000032_1071287")
    );
    assert!(p.rows.iter().any(|r| r.id == "0000080661-26-000032_80661"));
}

#[test]
fn ticker_snapshots_parse_in_all_their_published_forms() {
    let (name, bytes) = src(
        "sec.edgar.ticker_history/company_tickers_weekly_hvcwatch/company_tickers_2026-02-01T0612Z.json",
    );
    let o = parse_ticker_file(&name, &bytes, t("2026-02-01T06:12:17Z")).unwrap();
    assert!(o.pairs.contains(&("SMEGF".into(), "1830056".into())));
    assert!(o.pairs.contains(&("TSLA".into(), "1318605".into())));
    let (name, bytes) = src(
        "sec.edgar.ticker_history/company_tickers_weekly_hvcwatch/company_tickers_2026-01-18T0601Z.json",
    );
    let before = parse_ticker_file(&name, &bytes, t("2026-01-18T06:01:04Z")).unwrap();
    assert!(
        !before.pairs.iter().any(|(t, _)| t == "SMEGF"),
        "SMEGF is not in the 2026-01-18 file"
    );
    let (name, bytes) = src(
        "sec.edgar.ticker_history/company_tickers_exchange_snapshots_edgartools/company_tickers_exchange_committed_2026-03-24.csv",
    );
    assert!(
        parse_ticker_file(&name, &bytes, t("2026-03-24T23:59:59Z"))
            .unwrap()
            .pairs
            .contains(&("AAPL".into(), "320193".into()))
    );
    let (name, bytes) = src(
        "sec.edgar.ticker_history/other_snapshots/company_tickers_exchange_edgar-crawler_committed_2023-05-26.json",
    );
    assert!(
        parse_ticker_file(&name, &bytes, t("2023-05-26T23:59:59Z"))
            .unwrap()
            .pairs
            .contains(&("MSFT".into(), "789019".into()))
    );
}

#[test]
fn truncated_malformed_and_wrong_encoding_files_are_refused_naming_the_file() {
    let (name, bytes) = src("sec.edgar/submissions/CIK0001318605__20260203T120702Z.json");
    let err = parse_submissions(
        &name,
        &bytes[..bytes.len() / 2],
        "1318605",
        t("2026-02-03T12:07:02Z"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("sec.edgar/submissions/CIK0001318605__20260203T120702Z.json: line 1"),
        "{err}"
    );
    let err = parse_index(
        "latin1.idx",
        b"Company Name   Form Type\n\xe9\xff\n",
        t("2026-11-20T00:00:00Z"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("not UTF-8"), "{err}");
    let err = parse_atom(
        "cut.atom",
        b"<?xml version=\"1.0\"?><feed><entry><title>4 - X (0000000001) (Issuer)</title>",
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("cut.atom:"), "{err}");
}
