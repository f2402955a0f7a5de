//! Identity kept by ingest: two real SEC ticker lists ingested one after the other, and the
//! ticker intervals (`/v1/mapping`, ticker resolution of news) answering from them before,
//! between and after the captures.

mod common;

use common::{at, file, request};
use std::path::PathBuf;

use asof_engine::model::coverage::Scope;
use asof_engine::read::corpus::{Entity, NewsQuery};
use asof_engine::{Answer, Corpus, CorpusStore, Lane, SourceId, VisibleBy};
use asof_ingest::adapter::InputFile;
use asof_ingest::pipeline::{Request, ingest};

const WEEKLY: &str = "sec.edgar.ticker_history/company_tickers_weekly_hvcwatch";
/// When the two weekly copies were committed upstream (their COMMITS.txt).
const FIRST: &str = "2026-01-18T06:01:04Z";
const SECOND: &str = "2026-02-01T06:12:17Z";

fn list(captured: &str, name: &str) -> Request {
    request(
        SourceId::SecEdgar,
        captured,
        vec![file(&format!("{WEEKLY}/{name}"))],
    )
}

/// The CIKs `ticker` names at `when`; `None` for an identity hole.
fn ciks(corpus: &Corpus, ticker: &str, when: &str) -> Option<Vec<String>> {
    corpus
        .mapping_ticker(ticker, at(when))
        .ok()
        .map(|m| m.into_iter().map(|m| m.cik).collect())
}

#[tokio::test]
async fn two_ticker_lists_ingested_in_turn_place_changed_tickers_only_from_each_capture() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let first = ingest(
        &store,
        list(FIRST, "company_tickers_2026-01-18T0601Z.json"),
        &|_| {},
    )
    .await
    .unwrap();
    assert_eq!(first.observations, 1);
    let second = ingest(
        &store,
        list(SECOND, "company_tickers_2026-02-01T0612Z.json"),
        &|_| {},
    )
    .await
    .unwrap();
    assert_eq!(second.observations, 1);
    // The second list is compared with the first (the list state), not with nothing.
    let added = second.changes.get("added").copied().unwrap_or(0);
    assert!(added < 200, "{:?}", second.changes);
    assert!(second.changes.get("removed").is_some_and(|n| *n > 0));

    let corpus = Corpus::open(store.clone()).await.unwrap();
    let before = "2026-01-17T00:00:00Z";
    let between = "2026-01-25T00:00:00Z";
    let after = "2026-02-02T00:00:00Z";
    // ALOVU first appears on the second list: a hole until its capture, placed after.
    assert_eq!(ciks(&corpus, "ALOVU", between), None);
    assert_eq!(ciks(&corpus, "ALOVU", SECOND), Some(vec!["2083989".into()]));
    assert_eq!(ciks(&corpus, "ALOVU", after), Some(vec!["2083989".into()]));
    // NKGN is on the first list only: placed between, not after the second capture.
    assert_eq!(ciks(&corpus, "NKGN", before), None);
    assert_eq!(ciks(&corpus, "NKGN", between), Some(vec!["1845459".into()]));
    assert_eq!(ciks(&corpus, "NKGN", after), None);
    // AKOM moved to another CIK: the old one between, the new one after, neither before.
    assert_eq!(ciks(&corpus, "AKOM", before), None);
    assert_eq!(ciks(&corpus, "AKOM", between), Some(vec!["1590496".into()]));
    assert_eq!(ciks(&corpus, "AKOM", after), Some(vec!["2103785".into()]));

    // News by ticker resolves through the same intervals: ALOVU is an identity hole between
    // the captures and resolves after the second (its days are uncertified here, so the
    // answer may still be a coverage hole, but not for the ticker).
    let q = |when: &str| NewsQuery {
        source: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        visible_by: VisibleBy::PublishedAt,
        start: None,
        as_of: at(when),
        entity: Entity::Ticker("ALOVU".into()),
        after: None,
        limit: 10,
    };
    let ticker_hole = |a: &Answer<asof_engine::NewsRow>, when: &str| match a {
        Answer::Hole { coverage } => {
            coverage
                .missing
                .contains(&asof_engine::model::identity::ticker_hole_key(
                    "ALOVU",
                    at(when),
                ))
        }
        Answer::Page { .. } => false,
    };
    let a = corpus.news(&q(between), Scope::Corpus).await.unwrap();
    assert!(ticker_hole(&a, between));
    let a = corpus.news(&q(after), Scope::Corpus).await.unwrap();
    assert!(!ticker_hole(&a, after));

    // Ingesting the second list again adds nothing: same version.
    let again = ingest(
        &store,
        list(SECOND, "company_tickers_2026-02-01T0612Z.json"),
        &|_| {},
    )
    .await
    .unwrap();
    assert!(!again.published.changed);
    assert_eq!(again.published.version, second.published.version);
}

/// A writable copy of the shipped sample corpus: its manifest and pointer, and every object
/// beside the raw sources (partitions, access files, id runs, list states, identity).
fn copy_of_sample(dst: &std::path::Path) -> CorpusStore {
    fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), target).unwrap();
            }
        }
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    copy_dir(&repo.join("manifests"), &dst.join("manifests"));
    for d in ["access", "identity", "ids", "late", "lists", "partitions"] {
        copy_dir(
            &repo.join("snapshots").join(d),
            &dst.join("snapshots").join(d),
        );
    }
    CorpusStore::local(dst).unwrap()
}

#[tokio::test]
async fn a_ticker_list_ingested_into_the_sample_reports_only_what_changed_since_its_last_list() {
    let dir = tempfile::tempdir().unwrap();
    let store = copy_of_sample(dir.path());
    // The sample's last list (2026-02-01) as SEC might publish it a week later: one ticker
    // gone, one new, one company retitled.
    let last = file(&format!("{WEEKLY}/company_tickers_2026-02-01T0612Z.json"));
    let mut list: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&last.bytes).unwrap();
    let gone = list.remove("10337").unwrap();
    assert_eq!(gone["ticker"], "TPZEF");
    list.insert(
        "10337".into(),
        serde_json::json!({"cik_str": 1318605, "ticker": "TSLAX", "title": "Tesla, Inc."}),
    );
    let msft = list.values_mut().find(|v| v["ticker"] == "MSFT").unwrap();
    msft["title"] = "MICROSOFT CORPORATION".into();
    let captured = "2026-02-08T06:01:00Z";
    let outcome = ingest(
        &store,
        Request {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            commit_time: at("2026-11-21T00:00:00Z"),
            captured_at: Some(at(captured)),
            certify: None,
            options: Default::default(),
            files: vec![
                InputFile {
                    name: "company_tickers.json".into(),
                    bytes: serde_json::to_vec(&list).unwrap(),
                }
                .into(),
            ],
        },
        &|_| {},
    )
    .await
    .unwrap();
    // Compared with the sample's list state, not with nothing (10,338 tickers all "added").
    assert_eq!(
        outcome.changes,
        [("added", 1), ("modified", 1), ("removed", 1)]
            .into_iter()
            .map(|(k, n)| (k.to_owned(), n))
            .collect()
    );
    assert_eq!(outcome.observations, 1);

    let corpus = Corpus::open(store.clone()).await.unwrap();
    let before = "2026-02-07T00:00:00Z";
    let after = "2026-02-09T00:00:00Z";
    assert_eq!(ciks(&corpus, "TSLAX", before), None);
    assert_eq!(ciks(&corpus, "TSLAX", after), Some(vec!["1318605".into()]));
    assert_eq!(ciks(&corpus, "TPZEF", before), Some(vec!["2073655".into()]));
    assert_eq!(ciks(&corpus, "TPZEF", after), None);
    assert_eq!(ciks(&corpus, "MSFT", after), Some(vec!["789019".into()]));
}
