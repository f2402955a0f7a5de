//! `asof poll` against a local feed server (`asof_test_support::feed`) that replays the
//! recorded Atom pages of EDGAR's current-filings listing, enforces a User-Agent with a
//! contact, answers 304 to conditional requests and 429 with `Retry-After` once, and records
//! when each request came, so the poller's politeness and backoff are exercised for real.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use asof_engine::store::objects::read_partition;
use asof_engine::{CorpusStore, Instant, Lane};
use asof_ingest::poll::{Config, Poller};
use asof_ingest::sources::edgar::parse_atom;
use asof_test_support::feed::{serve, three_pages};

const UA: &str = "asof tests ops@example.com";

fn poller(base: &str) -> Poller {
    let mut cfg = Config::new(base, UA, 10).unwrap();
    cfg.backoff = Duration::from_millis(50);
    Poller::new(cfg).unwrap()
}

async fn forward_rows(store: &CorpusStore) -> Vec<asof_engine::NewsRow> {
    let (_, m) = store.current().await.unwrap();
    let mut rows = Vec::new();
    for p in m
        .partitions
        .iter()
        .filter(|p| p.lane == Lane::ForwardFirstSeen)
    {
        rows.extend(read_partition(store, p).await.unwrap());
    }
    rows
}

fn ids_in(pages: &[Vec<u8>]) -> BTreeSet<String> {
    pages
        .iter()
        .flat_map(|b| parse_atom("page", b).unwrap().rows)
        .map(|r| r.id)
        .collect()
}

fn minute(t: Instant) -> Instant {
    Instant::from_micros(t.micros() - t.micros().rem_euclid(60_000_000))
}

#[tokio::test]
async fn a_poll_publishes_exactly_the_new_filings_first_seen_at_the_fetch_minute() {
    let feed = three_pages();
    let base = serve(feed.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let mut p = poller(&base);
    let r = p.poll_once(&store).await.unwrap();
    let want = ids_in(&feed.pages.lock().unwrap());
    assert_eq!(
        r.pages, 4,
        "three full pages and the short one that ends the listing"
    );
    assert_eq!(r.new_rows, want.len());
    assert!(r.published.is_some());
    let rows = forward_rows(&store).await;
    let got: BTreeSet<String> = rows.iter().map(|r| r.id.clone()).collect();
    assert_eq!(got, want);
    for row in &rows {
        assert_eq!(row.available_at, Some(minute(r.fetched_at)), "{}", row.id);
        assert_eq!(
            row.availability_basis,
            asof_engine::AvailabilityBasis::LocalFirstSeen
        );
        assert!(row.committed_at.is_some_and(|c| c >= r.fetched_at));
    }
    // A second poll: the listing answers 304, nothing is published.
    let version = store.current_version().await.unwrap();
    let again = p.poll_once(&store).await.unwrap();
    assert_eq!(
        (again.pages, again.unchanged, again.published),
        (0, 1, None)
    );
    assert_eq!(store.current_version().await.unwrap(), version);
    // A poller that starts afresh (no validators) reads everything again: still nothing new,
    // and every filing keeps the minute it was first seen.
    let fresh = poller(&base).poll_once(&store).await.unwrap();
    assert_eq!((fresh.new_rows, fresh.published), (0, None));
    assert_eq!(store.current_version().await.unwrap(), version);
}

#[tokio::test]
async fn a_new_filing_on_the_first_page_is_the_only_row_the_next_poll_adds() {
    let feed = three_pages();
    let base = serve(feed.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let mut p = poller(&base);
    let first = p.poll_once(&store).await.unwrap();
    let before = forward_rows(&store).await;
    // A derived page: one entry of page 0 re-issued under an accession EDGAR never used.
    {
        let mut pages = feed.pages.lock().unwrap();
        let text = String::from_utf8(pages[0].clone()).unwrap();
        let a = text.find("<entry>").unwrap();
        let b = text.find("</entry>").unwrap() + "</entry>".len();
        let entry = &text[a..b];
        let acc = entry
            .split("accession-number=")
            .nth(1)
            .unwrap()
            .split('<')
            .next()
            .unwrap()
            .to_owned();
        let new_entry = entry.replace(&acc, "0009999999-26-000001");
        pages[0] = format!("{}{new_entry}\n{}", &text[..a], &text[a..]).into_bytes();
    }
    let second = p.poll_once(&store).await.unwrap();
    assert_eq!(second.new_rows, 1);
    assert!(second.published.is_some());
    let after = forward_rows(&store).await;
    assert_eq!(after.len(), before.len() + 1);
    let added: Vec<_> = after
        .iter()
        .filter(|r| r.accession.as_deref() == Some("0009999999-26-000001"))
        .collect();
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].available_at, Some(minute(second.fetched_at)));
    // The rows seen before keep their revision.
    let old: BTreeSet<_> = before.iter().map(|r| r.revision_id.clone()).collect();
    assert!(old.is_subset(&after.iter().map(|r| r.revision_id.clone()).collect()));
    assert!(first.published.is_some());
}

#[tokio::test]
async fn a_429_is_waited_out_for_its_retry_after_and_requests_stay_under_ten_a_second() {
    let feed = three_pages();
    feed.throttle_once.store(true, Ordering::SeqCst);
    let base = serve(feed.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let r = poller(&base).poll_once(&store).await.unwrap();
    assert!(r.published.is_some());
    let log = feed.log.lock().unwrap().clone();
    let throttled = log
        .iter()
        .position(|(_, s, code)| *s == 100 && *code == 429)
        .unwrap();
    let (t429, _, _) = log[throttled];
    let (retry, start, code) = log[throttled + 1];
    assert_eq!((start, code), (100, 200));
    assert!(
        retry - t429 >= Duration::from_secs(1),
        "retried after {:?}",
        retry - t429
    );
    for w in log.windows(2) {
        let gap = w[1].0 - w[0].0;
        assert!(
            gap >= Duration::from_millis(95),
            "two requests {gap:?} apart"
        );
    }
}

#[tokio::test]
async fn a_poll_that_fails_leaves_the_corpus_as_it_was() {
    // The feed refuses a User-Agent without a contact (403): the poll fails, nothing changes.
    let feed = three_pages();
    let base = serve(feed.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let mut cfg = Config::new(&base, UA, 10).unwrap();
    cfg.user_agent = "no contact".into();
    let err = Poller::new(cfg)
        .unwrap()
        .poll_once(&store)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
    assert_eq!(store.current_version().await.unwrap(), None);
}

#[test]
fn fair_access_settings_are_checked_before_any_request() {
    let e = Config::new("http://127.0.0.1:1", "asof-bot", 10).unwrap_err();
    assert!(e.to_string().starts_with("--user-agent"), "{e}");
    let e = Config::new("http://127.0.0.1:1", UA, 11).unwrap_err();
    assert!(e.to_string().starts_with("--max-rps"), "{e}");
    let e = Config::new("not a url", UA, 5).unwrap_err();
    assert!(e.to_string().starts_with("--edgar-base-url"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_poll_and_a_manual_ingest_at_once_lose_neither() {
    let feed = three_pages();
    let base = serve(feed.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let cot = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../snapshots/sources/us.cftc.cot/disaggregated_futures_only_2021/f_year.txt");
    let req = asof_ingest::pipeline::Request {
        source: asof_engine::SourceId::CftcCot,
        lane: Lane::CertifiedPit,
        commit_time: Instant::now(),
        captured_at: Some(Instant::parse("2021-03-26T23:59:59Z").unwrap()),
        certify: None,
        options: Default::default(),
        files: asof_ingest::pipeline::read_files(&[cot]).unwrap(),
    };
    let mut p = poller(&base);
    let (polled, ingested) = tokio::join!(
        p.poll_once(&store),
        asof_ingest::pipeline::ingest(&store, req, &|_| {})
    );
    let (polled, ingested) = (polled.unwrap(), ingested.unwrap());
    let (_, m) = store.current().await.unwrap();
    let held: BTreeSet<_> = m.partitions.iter().map(|p| (p.source_id, p.lane)).collect();
    assert!(held.contains(&(asof_engine::SourceId::SecEdgar, Lane::ForwardFirstSeen)));
    assert!(held.contains(&(asof_engine::SourceId::CftcCot, Lane::CertifiedPit)));
    assert_eq!(forward_rows(&store).await.len(), polled.new_rows);
    assert!(ingested.published.rows_added > 0);
}

/// The recorded daily index of 2022-10-03 and a quarter listing naming it (and, with
/// `more`, a later index), served under `/Archives/edgar/daily-index/2022/QTR4/`.
fn with_quarter(feed: &asof_test_support::feed::Feed, more: bool) {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots/sources/sec.edgar/daily-index");
    let idx = std::fs::read(dir.join("company.20221003.idx")).unwrap();
    let mut items = vec![r#"{"name":"company.20221003.idx","type":"file"}"#];
    if more {
        items.push(r#"{"name":"company.20221005.idx","type":"file"}"#);
    }
    let listing = format!(
        r#"{{"directory":{{"name":"daily-index/2022/QTR4/","parent-dir":"../","item":[{}]}}}}"#,
        items.join(",")
    );
    let mut a = feed.archives.lock().unwrap();
    a.insert(
        "edgar/daily-index/2022/QTR4/index.json".into(),
        listing.into_bytes(),
    );
    a.insert(
        "edgar/daily-index/2022/QTR4/company.20221003.idx".into(),
        idx,
    );
}

fn day(s: &str) -> asof_engine::Day {
    s.parse().unwrap()
}

#[tokio::test]
async fn a_finished_day_is_certified_from_its_daily_index_and_a_skipped_day_empty_on_the_listing() {
    let feed = three_pages();
    with_quarter(&feed, false);
    let base = serve(feed.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    // Four days back: the quarter's first four days (the third quarter is not served).
    let mut cfg = Config::new(&base, UA, 10).unwrap();
    cfg.backfill_days = 4;
    let mut p = Poller::new(cfg).unwrap();
    let c = p.poll_certified(&store, day("2022-10-04")).await.unwrap();
    assert_eq!(c.indexed, vec![day("2022-10-03")]);
    // The weekend before it: EDGAR published no index; the listing is the evidence.
    assert!(c.empty.contains(&day("2022-10-01")) && c.empty.contains(&day("2022-10-02")));
    // The 4th is finished but not listed yet: it waits, it is not claimed empty.
    assert_eq!(c.waiting, vec![day("2022-10-04")]);
    assert!(c.published.is_some());
    let (_, m) = store.current().await.unwrap();
    let certified = |d: &str| {
        m.certifications
            .iter()
            .find(|c| c.lane == Lane::CertifiedPit && c.from <= day(d) && day(d) <= c.to)
            .cloned()
    };
    let oct3 = certified("2022-10-03").unwrap();
    assert!(
        oct3.evidence
            .iter()
            .any(|e| e.file == "company.20221003.idx")
    );
    let oct1 = certified("2022-10-01").unwrap();
    assert!(oct1.evidence.iter().any(|e| e.file == "index.json"));
    assert!(certified("2022-10-04").is_none());
    let rows: usize = m
        .partitions
        .iter()
        .filter(|p| p.lane == Lane::CertifiedPit && p.date == day("2022-10-03"))
        .map(|p| p.row_count as usize)
        .sum();
    assert!(rows > 0);
    assert!(m.partitions.iter().all(|p| p.date != day("2022-10-01")));
    // Once EDGAR lists a later day, the 4th (skipped) is certified empty; nothing else moves.
    with_quarter(&feed, true);
    let c = p.poll_certified(&store, day("2022-10-04")).await.unwrap();
    assert_eq!(
        (c.indexed.clone(), c.empty.clone()),
        (vec![], vec![day("2022-10-04")])
    );
    assert!(c.waiting.is_empty());
    // Nothing left: no request for a publish.
    let c = p.poll_certified(&store, day("2022-10-04")).await.unwrap();
    assert_eq!(c.published, None);
}

#[tokio::test]
async fn a_daily_index_cut_short_is_never_certified() {
    let feed = three_pages();
    with_quarter(&feed, false);
    *feed.cut_short.lock().unwrap() =
        Some("edgar/daily-index/2022/QTR4/company.20221003.idx".into());
    let base = serve(feed.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let mut cfg = Config::new(&base, UA, 10).unwrap();
    cfg.attempts = 2;
    cfg.backoff = Duration::from_millis(10);
    let err = Poller::new(cfg)
        .unwrap()
        .poll_certified(&store, day("2022-10-03"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("company.20221003.idx"), "{err}");
    assert_eq!(store.current_version().await.unwrap(), None);
}
