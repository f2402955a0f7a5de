//! The `asof ingest` options that narrow what an ingest takes (`--since`, `--certify none`,
//! `--identity-only`) or add what its files cannot say (`--note`, `--sample-set`), through the
//! library on real files.

mod common;

use common::{day, file, run};

use asof_engine::model::manifest::{SampleExample, SampleSet};
use asof_engine::{Corpus, CorpusStore, Lane, SourceId};
use asof_ingest::pipeline::{Options, Request};

const ALZAMEND: &str = "sec.edgar/submissions/CIK0001677077__20260310T195209Z.json";
const INDEX: &str = "sec.edgar/daily-index/company.20221003.idx";
const PLAIN_LIST: &str = "sec.edgar.ticker_history/company_tickers_weekly_hvcwatch/company_tickers_2026-01-18T0601Z.json";
const EXCHANGE_LIST: &str = "sec.edgar.ticker_history/company_tickers_exchange_snapshots_edgartools/company_tickers_exchange_committed_2026-01-29.csv";

/// An EDGAR ingest of one file, committed at `commit`, with `options`.
fn request(commit: &str, rel: &str, options: Options) -> Request {
    Request {
        options,
        ..common::request(SourceId::SecEdgar, commit, vec![file(rel)])
    }
}

fn store() -> (tempfile::TempDir, CorpusStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    (dir, store)
}

#[tokio::test]
async fn since_leaves_out_the_rows_of_earlier_days_and_refuses_to_certify_them() {
    let (_all_dir, all) = store();
    let every = run(
        &all,
        request("2026-03-10T19:52:09Z", ALZAMEND, Options::default()),
    )
    .await
    .unwrap();
    let (_dir, recent) = store();
    let since = Options {
        since: Some(day("2025-06-01")),
        ..Options::default()
    };
    let out = run(
        &recent,
        request("2026-03-10T19:52:09Z", ALZAMEND, since.clone()),
    )
    .await
    .unwrap();
    assert!(out.published.rows_added > 0, "{out:?}");
    assert!(
        out.published.rows_added < every.published.rows_added,
        "{} of {} rows kept",
        out.published.rows_added,
        every.published.rows_added
    );
    let (_, manifest) = recent.current().await.unwrap();
    assert!(
        manifest
            .partitions
            .iter()
            .all(|p| p.date >= day("2025-06-01")),
        "a partition before --since: {:?}",
        manifest.partitions.first().map(|p| p.date)
    );
    // The rows kept are exactly those of the days from --since in the whole ingest.
    let (_, whole) = all.current().await.unwrap();
    let from_since: u64 = whole
        .partitions
        .iter()
        .filter(|p| p.date >= day("2025-06-01"))
        .map(|p| p.row_count)
        .sum();
    assert_eq!(out.published.rows_added as u64, from_since);

    let (_dir, refused) = store();
    let mut req = request("2026-03-10T19:52:09Z", ALZAMEND, since);
    req.certify = Some((day("2025-05-30"), day("2025-06-02")));
    let err = run(&refused, req).await.unwrap_err().to_string();
    assert!(err.contains("--since 2025-06-01"), "{err}");
    assert_eq!(refused.current_version().await.unwrap(), None);
}

#[tokio::test]
async fn certify_none_holds_a_daily_index_without_certifying_its_day() {
    let (_dir, store) = store();
    let none = Options {
        no_implied_certification: true,
        ..Options::default()
    };
    let out = run(&store, request("2022-10-04T06:00:00Z", INDEX, none))
        .await
        .unwrap();
    assert!(out.certified.is_empty(), "{:?}", out.certified);
    assert_eq!(out.published.rows_added, 4909);
    let corpus = Corpus::open(store).await.unwrap();
    let cert = corpus.certificate(
        SourceId::SecEdgar,
        Lane::CertifiedPit,
        day("2022-10-03"),
        None,
    );
    assert_ne!(cert.status, "certified", "{cert:?}");
}

#[tokio::test]
async fn identity_only_takes_a_ticker_list_as_observations_and_nothing_else() {
    let (_dir, store) = store();
    let first = run(
        &store,
        request("2026-01-18T07:00:00Z", PLAIN_LIST, Options::default()),
    )
    .await
    .unwrap();
    let (_, before) = store.current().await.unwrap();
    let identity_only = Options {
        identity_only: true,
        ..Options::default()
    };
    // The exchange form names exchanges: taken as a list, it would report every ticker as
    // modified. Identity only, it adds an observation and leaves rows and list as they are.
    let out = run(
        &store,
        request("2026-01-29T23:59:59Z", EXCHANGE_LIST, identity_only.clone()),
    )
    .await
    .unwrap();
    assert!(out.published.changed);
    assert_eq!(out.published.rows_added, 0);
    assert!(out.changes.is_empty(), "{:?}", out.changes);
    assert!(out.certified.is_empty());
    assert_eq!(out.observations, 1);
    let (_, after) = store.current().await.unwrap();
    assert_eq!(after.partitions, before.partitions);
    assert_eq!(after.certifications, before.certifications);
    assert_ne!(after.identity, before.identity);
    let list_files = |m: &asof_engine::model::manifest::Manifest| -> Vec<String> {
        m.access
            .iter()
            .filter(|e| e.kind == asof_engine::format::lists::KIND_LIST)
            .map(|e| e.path.clone())
            .collect()
    };
    assert!(!list_files(&before).is_empty());
    assert_eq!(list_files(&after), list_files(&before));
    // The plain list was taken as a list: its changes counted and its state kept, no record.
    assert_eq!(first.published.rows_added, 0);
    assert!(
        first.changes.get("added").is_some_and(|n| *n > 10_000),
        "{:?}",
        first.changes
    );

    // Files with no identity in them, or a certification with nothing to certify: refused.
    let err = run(
        &store,
        request("2022-10-04T06:00:00Z", INDEX, identity_only.clone()),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("no identity observations"), "{err}");
    let mut req = request("2026-01-29T23:59:59Z", EXCHANGE_LIST, identity_only);
    req.certify = Some((day("2026-01-29"), day("2026-01-29")));
    let err = run(&store, req).await.unwrap_err().to_string();
    assert!(err.contains("--identity-only"), "{err}");
    let (_, last) = store.current().await.unwrap();
    assert_eq!(last, after);
}

#[tokio::test]
async fn a_list_captured_before_since_is_refused_rather_than_half_taken() {
    let (_dir, store) = store();
    let since = Options {
        since: Some(day("2026-02-01")),
        ..Options::default()
    };
    let err = run(&store, request("2026-01-18T07:00:00Z", PLAIN_LIST, since))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("--since"), "{err}");
    assert_eq!(store.current_version().await.unwrap(), None);
}

#[tokio::test]
async fn a_note_and_a_sample_set_are_published_with_the_ingest_and_replace_earlier_ones() {
    let (_dir, store) = store();
    let sample = SampleSet {
        source_id: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        days: vec![day("2026-03-05"), day("2026-03-06")],
        examples: vec![SampleExample {
            id: "alzamend".into(),
            ticker: "ALZN".into(),
            cik: "1677077".into(),
            name: "Alzamend Neuro, Inc.".into(),
            note: "a filing corrected between two captures".into(),
        }],
    };
    let with = |note: &str| Options {
        note: Some(note.to_owned()),
        sample: Some(sample.clone()),
        ..Options::default()
    };
    let first = run(
        &store,
        request("2026-03-10T19:52:09Z", ALZAMEND, with("one company")),
    )
    .await
    .unwrap();
    let (_, m) = store.current().await.unwrap();
    assert_eq!(
        m.notes.get("sec.edgar").map(String::as_str),
        Some("one company")
    );
    assert_eq!(m.sample.as_ref(), Some(&sample));

    // The same files and note again: nothing new, no version.
    let again = run(
        &store,
        request("2026-03-10T19:52:09Z", ALZAMEND, with("one company")),
    )
    .await
    .unwrap();
    assert!(!again.published.changed);
    assert_eq!(again.published.version, first.published.version);

    // Only the note differs: a new version with no new rows, the note replaced, the sample
    // set kept when not given.
    let reworded = Options {
        note: Some("one company, two captures".into()),
        ..Options::default()
    };
    let third = run(&store, request("2026-03-10T19:52:09Z", ALZAMEND, reworded))
        .await
        .unwrap();
    assert!(third.published.changed);
    assert_eq!(third.published.rows_added, 0);
    let (_, m) = store.current().await.unwrap();
    assert_eq!(
        m.notes.get("sec.edgar").map(String::as_str),
        Some("one company, two captures")
    );
    assert_eq!(m.sample.as_ref(), Some(&sample));
}
