//! `asof ingest` end to end through the library: real files in, corpus versions out, answers
//! read back through the engine.

mod common;

use common::{at, file, request, run};
use std::collections::BTreeMap;
use std::path::Path;

use asof_engine::model::coverage::Scope;
use asof_engine::read::corpus::{Entity, NewsQuery, RecordLookup};
use asof_engine::{Answer, Corpus, CorpusStore, Day, Lane, SourceId, VisibleBy};
use asof_ingest::adapter::InputFile;
use asof_ingest::pipeline::{Outcome, Request};

/// Every object under the corpus directory with its bytes, to prove nothing changed.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

const ALZAMEND_FIRST: &str = "sec.edgar/submissions/CIK0001677077__20260310T195209Z.json";
const ALZAMEND_LATER: &str = "sec.edgar/submissions/CIK0001677077__20260620T125607Z.json";
/// An 8-K of Alzamend Neuro whose acceptance time the two captures give five hours apart.
const DISPUTED: &str = "0001214659-26-002941_1677077";

#[tokio::test]
async fn edgar_captures_that_disagree_are_two_revisions_under_committed_at() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let first = run(
        &store,
        request(
            SourceId::SecEdgar,
            "2026-03-10T19:52:09Z",
            vec![file(ALZAMEND_FIRST)],
        ),
    )
    .await
    .unwrap();
    assert!(first.published.changed && first.published.rows_added > 300);
    let second = run(
        &store,
        request(
            SourceId::SecEdgar,
            "2026-06-20T12:56:07Z",
            vec![file(ALZAMEND_LATER)],
        ),
    )
    .await
    .unwrap();
    assert!(second.published.changed);
    assert_ne!(first.published.version, second.published.version);

    let corpus = Corpus::open(store.clone()).await.unwrap();
    let lookup = |t: &str| corpus.record(DISPUTED, at(t), VisibleBy::CommittedAt);
    let RecordLookup::Visible(old) = lookup("2026-04-01T00:00:00Z").await.unwrap() else {
        panic!("the first capture's revision is visible between the two commits");
    };
    assert_eq!(old.acceptance_at, Some(at("2026-03-06T16:46:18Z")));
    let RecordLookup::Visible(new) = lookup("2026-07-01T00:00:00Z").await.unwrap() else {
        panic!("the correction is visible after the second commit");
    };
    assert_eq!(new.acceptance_at, Some(at("2026-03-06T21:46:18Z")));
    assert_eq!(new.supersedes.as_deref(), Some(old.revision_id.as_str()));
    assert!(matches!(
        lookup("2026-03-10T19:52:08Z").await.unwrap(),
        RecordLookup::NotYetVisible
    ));
}

#[tokio::test]
async fn identical_reingest_publishes_no_new_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let req = request(
        SourceId::SecEdgar,
        "2026-03-10T19:52:09Z",
        vec![file(ALZAMEND_FIRST)],
    );
    let first = run(&store, req.clone()).await.unwrap();
    let before = tree(dir.path());
    let mut again = req;
    again.commit_time = at("2026-03-11T00:00:00Z");
    let second = run(&store, again).await.unwrap();
    assert!(!second.published.changed);
    assert_eq!(second.published.version, first.published.version);
    assert_eq!(second.published.rows_unchanged, first.published.rows_added);
    assert_eq!(tree(dir.path()), before, "no object written");
}

#[tokio::test]
async fn same_inputs_and_commit_time_give_the_same_corpus_version() {
    let mut versions = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let o = run(
            &store,
            request(
                SourceId::SecEdgar,
                "2026-03-10T19:52:09Z",
                vec![file(ALZAMEND_FIRST)],
            ),
        )
        .await
        .unwrap();
        versions.push(o.published.version);
    }
    assert_eq!(versions[0], versions[1]);
}

/// A refused ingest left the corpus as it was: the same current version and the same files.
async fn assert_unchanged(
    store: &CorpusStore,
    dir: &Path,
    base: &Outcome,
    before: &BTreeMap<String, Vec<u8>>,
    what: &str,
) {
    assert_eq!(
        store.current_version().await.unwrap().as_deref(),
        Some(base.published.version.as_str()),
        "{what}: the previous version stays current"
    );
    assert_eq!(&tree(dir), before, "{what}: no object written");
}

/// Truncated, malformed, empty and wrongly encoded variants of real files.
fn corrupt_variants() -> Vec<(&'static str, InputFile)> {
    let good = file(ALZAMEND_LATER);
    let idx = file("sec.edgar/daily-index/company.20221003.idx");
    let mut latin1 = idx.bytes.clone();
    let pos = latin1.len() / 2;
    latin1.splice(pos..pos, [0xC9u8, 0x20]);
    let text = String::from_utf8(idx.bytes.clone()).unwrap();
    let bad_row = text.replacen("20221003 ", "20221303 ", 1);
    vec![
        (
            "truncated",
            InputFile {
                name: "CIK0001677077__20260620T125607Z.json".into(),
                bytes: good.bytes[..good.bytes.len() / 2].to_vec(),
            },
        ),
        (
            "empty",
            InputFile {
                name: "CIK0001677077__20260620T125607Z.json".into(),
                bytes: vec![],
            },
        ),
        (
            "wrong encoding",
            InputFile {
                name: "company.20221003.idx".into(),
                bytes: latin1,
            },
        ),
        (
            "malformed row",
            InputFile {
                name: "company.20221003.idx".into(),
                bytes: bad_row.into_bytes(),
            },
        ),
    ]
}

#[tokio::test]
async fn a_corrupt_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let base = run(
        &store,
        request(
            SourceId::SecEdgar,
            "2026-03-10T19:52:09Z",
            vec![file(ALZAMEND_FIRST)],
        ),
    )
    .await
    .unwrap();
    let before = tree(dir.path());
    for (what, bad) in corrupt_variants() {
        let name = bad.name.clone();
        // The corrupt file travels with a good one: all or nothing.
        let err = run(
            &store,
            request(
                SourceId::SecEdgar,
                "2026-06-20T12:56:07Z",
                vec![file(ALZAMEND_LATER), bad],
            ),
        )
        .await
        .expect_err(what)
        .to_string();
        assert!(
            err.contains(&name),
            "{what}: the error names the file: {err}"
        );
        assert_unchanged(&store, dir.path(), &base, &before, what).await;
    }
}

#[tokio::test]
async fn a_daily_index_certifies_its_day_with_evidence_and_row_count() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let out = run(
        &store,
        request(
            SourceId::SecEdgar,
            "2022-10-04T06:00:00Z",
            vec![file("sec.edgar/daily-index/company.20221003.idx")],
        ),
    )
    .await
    .unwrap();
    let day: Day = "2022-10-03".parse().unwrap();
    assert_eq!(out.certified, vec![(day, day)]);
    let corpus = Corpus::open(store).await.unwrap();
    let cert = corpus.certificate(SourceId::SecEdgar, Lane::CertifiedPit, day, None);
    assert_eq!(cert.status, "certified");
    // 4,925 lines, 16 of them repeating a filing line for line: 4,909 records.
    assert_eq!(cert.row_count, Some(4909));
    assert_eq!(cert.evidence.len(), 1);
    assert_eq!(cert.evidence[0].file, "company.20221003.idx");
    assert_eq!(cert.evidence[0].sha256.len(), 64);
}

#[tokio::test]
async fn a_certified_day_without_rows_is_an_empty_answer_and_an_uncertified_day_a_hole() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    // Alzamend filed nothing on the weekend of 2026-03-07/08.
    let mut req = request(
        SourceId::SecEdgar,
        "2026-03-10T19:52:09Z",
        vec![file(ALZAMEND_FIRST)],
    );
    req.certify = Some(("2026-03-07".parse().unwrap(), "2026-03-08".parse().unwrap()));
    run(&store, req).await.unwrap();
    let corpus = Corpus::open(store).await.unwrap();
    let query = |start: &str, end: &str| NewsQuery {
        source: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        visible_by: VisibleBy::PublishedAt,
        start: Some(at(start)),
        as_of: at(end),
        entity: Entity::Cik("1677077".into()),
        after: None,
        limit: 100,
    };
    match corpus
        .news(
            &query("2026-03-07T00:00:00Z", "2026-03-08T23:00:00Z"),
            Scope::Corpus,
        )
        .await
        .unwrap()
    {
        Answer::Page { rows, .. } => assert!(rows.is_empty()),
        Answer::Hole { coverage } => panic!("certified empty days are not a hole: {coverage:?}"),
    }
    let hole = corpus
        .news(
            &query("2026-03-08T00:00:00Z", "2026-03-09T12:00:00Z"),
            Scope::Corpus,
        )
        .await
        .unwrap();
    assert!(
        matches!(hole, Answer::Hole { .. }),
        "2026-03-09 is not certified"
    );
}

#[tokio::test]
async fn a_certification_of_days_after_the_commit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let mut req = request(
        SourceId::SecEdgar,
        "2026-03-10T19:52:09Z",
        vec![file(ALZAMEND_FIRST)],
    );
    req.certify = Some(("2026-03-09".parse().unwrap(), "2026-03-11".parse().unwrap()));
    let err = run(&store, req).await.unwrap_err().to_string();
    assert!(err.contains("--certify"), "{err}");
    assert_eq!(store.current_version().await.unwrap(), None);
}

#[tokio::test]
async fn the_atom_feed_belongs_to_the_forward_lane() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let page = file("sec.edgar/current-feed-atom_2026-01-12/start_00000.atom");
    let err = run(
        &store,
        request(
            SourceId::SecEdgar,
            "2026-01-12T17:00:00Z",
            vec![page.clone()],
        ),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("forward_first_seen"), "{err}");
    let mut req = request(SourceId::SecEdgar, "2026-01-12T17:00:00Z", vec![page]);
    req.lane = Lane::ForwardFirstSeen;
    let out = run(&store, req).await.unwrap();
    assert!(out.published.rows_added > 0 && out.published.rows_added <= 100);
}

/// `sdn.csv` of the 2019-01 set without the entries of its last `drop` lines.
fn sdn_without_last(drop: usize) -> (InputFile, Vec<String>) {
    let f = file("us.ofac.sdn/moov_2019-01/sdn.csv");
    let text = String::from_utf8(f.bytes).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let keep = lines.len() - drop;
    let dropped = lines[keep..]
        .iter()
        .map(|l| l.split(',').next().unwrap().to_owned())
        .collect();
    (
        InputFile {
            name: "sdn.csv".into(),
            bytes: lines[..keep].concat().into_bytes(),
        },
        dropped,
    )
}

fn ofac(commit: &str, captured: &str, files: Vec<InputFile>) -> Request {
    let mut r = request(SourceId::OfacSdn, commit, files);
    r.captured_at = Some(at(captured));
    r
}

#[tokio::test]
async fn ofac_entries_added_between_two_snapshots_are_visible_only_after_the_second_capture() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let (older, added) = sdn_without_last(3);
    let first = run(
        &store,
        ofac("2019-01-02T00:00:00Z", "2019-01-01T12:00:00Z", vec![older]),
    )
    .await
    .unwrap();
    assert_eq!(first.changes.get("added"), Some(&7376));
    assert_eq!(
        first.certified,
        vec![("2019-01-01".parse().unwrap(), "2019-01-01".parse().unwrap())]
    );

    let mut second_req = ofac(
        "2019-01-05T00:00:00Z",
        "2019-01-04T12:00:00Z",
        vec![file("us.ofac.sdn/moov_2019-01/sdn.csv")],
    );
    second_req.certify = Some(("2019-01-01".parse().unwrap(), "2019-01-04".parse().unwrap()));
    let second = run(&store, second_req).await.unwrap();
    assert_eq!(second.changes, BTreeMap::from([("added".to_owned(), 3)]));

    let corpus = Corpus::open(store.clone()).await.unwrap();
    for ent in &added {
        let id = format!("{ent}@2019-01-04T12:00:00Z");
        for (cut, visible) in [
            ("2019-01-04T11:59:59Z", false),
            ("2019-01-04T12:00:00Z", true),
        ] {
            let got = corpus
                .record(&id, at(cut), VisibleBy::PublishedAt)
                .await
                .unwrap();
            assert_eq!(
                matches!(got, RecordLookup::Visible(_)),
                visible,
                "{id} at {cut}"
            );
        }
    }
    // What became knowable between the captures is exactly the three additions.
    let diff = NewsQuery {
        source: SourceId::OfacSdn,
        lane: Lane::CertifiedPit,
        visible_by: VisibleBy::PublishedAt,
        start: Some(at("2019-01-02T00:00:00Z")),
        as_of: at("2019-01-04T23:00:00Z"),
        entity: Entity::All,
        after: None,
        limit: 100,
    };
    let Answer::Page { rows, .. } = corpus.news(&diff, Scope::Corpus).await.unwrap() else {
        panic!("the window is certified");
    };
    let mut got: Vec<String> = rows.iter().map(|r| r.entity_id.clone().unwrap()).collect();
    got.sort();
    let mut want = added.clone();
    want.sort();
    assert_eq!(got, want);
    assert!(rows.iter().all(|r| r.form.as_deref() == Some("sdn.added")));

    // A third capture without one of them removes it, with the entry as it was in `before`.
    let (third, _) = sdn_without_last(1);
    let out = run(
        &store,
        ofac("2019-01-06T00:00:00Z", "2019-01-05T12:00:00Z", vec![third]),
    )
    .await
    .unwrap();
    assert_eq!(out.changes, BTreeMap::from([("removed".to_owned(), 1)]));
    let corpus = Corpus::open(store.clone()).await.unwrap();
    let id = format!("{}@2019-01-05T12:00:00Z", added.last().unwrap());
    let RecordLookup::Visible(r) = corpus
        .record(&id, at("2019-01-06T00:00:00Z"), VisibleBy::PublishedAt)
        .await
        .unwrap()
    else {
        panic!("the removal is a record");
    };
    let payload: serde_json::Value = serde_json::from_str(r.payload.as_deref().unwrap()).unwrap();
    assert_eq!(payload["change"], "removed");
    assert!(payload["after"].is_null() && payload["before"].is_object());

    // The same snapshot again adds nothing; an older one is refused.
    let (again, _) = sdn_without_last(1);
    let same = run(
        &store,
        ofac("2019-01-07T00:00:00Z", "2019-01-05T12:00:00Z", vec![again]),
    )
    .await
    .unwrap();
    assert!(!same.published.changed);
    let err = run(
        &store,
        ofac(
            "2019-01-07T00:00:00Z",
            "2019-01-03T00:00:00Z",
            vec![file("us.ofac.sdn/moov_2019-01/sdn.csv")],
        ),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("capture order"), "{err}");
}

#[tokio::test]
async fn a_later_copy_of_a_cumulative_cot_file_adds_only_new_reports_keeping_first_sightings() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let dir_rel = "us.cftc.cot/legacy_futures_only_2025_weekly_asof";
    let mut a = request(
        SourceId::CftcCot,
        "2025-01-14T00:00:00Z",
        vec![file(&format!("{dir_rel}/annual.txt.committed_2025-01-13"))],
    );
    a.captured_at = Some(at("2025-01-13T23:00:02Z"));
    let first = run(&store, a).await.unwrap();
    assert_eq!(first.published.rows_added, 310);
    let mut b = request(
        SourceId::CftcCot,
        "2025-01-18T00:00:00Z",
        vec![file(&format!("{dir_rel}/annual.txt.committed_2025-01-17"))],
    );
    b.captured_at = Some(at("2025-01-17T23:00:02Z"));
    let second = run(&store, b).await.unwrap();
    assert_eq!(second.published.rows_added, 316);
    assert_eq!(second.published.rows_unchanged, 310);

    let corpus = Corpus::open(store).await.unwrap();
    let wheat = |id: &'static str| {
        let corpus = &corpus;
        async move {
            match corpus
                .record(id, at("2025-02-01T00:00:00Z"), VisibleBy::PublishedAt)
                .await
                .unwrap()
            {
                RecordLookup::Visible(r) => r,
                other => panic!("{id}: {other:?}"),
            }
        }
    };
    let old = wheat("legacy_futures_only:001602@2025-01-07").await;
    assert_eq!(
        old.published_at,
        Some(at("2025-01-13T23:00:02Z")),
        "first sighting kept"
    );
    assert_eq!(old.supersedes, None);
    let new = wheat("legacy_futures_only:001602@2025-01-14").await;
    assert_eq!(new.published_at, Some(at("2025-01-17T23:00:02Z")));
    assert_eq!(new.event_at, Some(at("2025-01-14T23:59:59Z")));
}

#[tokio::test]
async fn every_source_ingests_its_real_files() {
    // One real file set per source through the whole pipeline, into one corpus.
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let commit = "2026-11-20T00:00:00Z";
    let cases: Vec<(SourceId, Vec<&str>, usize)> = vec![
        (
            SourceId::FederalRegisterPi,
            vec![
                "us.federal_register.pi/gwu_midnight_rules_2017_2021/public_inspection_midnight_documents_all.csv",
            ],
            2245,
        ),
        (
            SourceId::CftcCot,
            vec!["us.cftc.cot/disaggregated_futures_only_2021/f_year.txt"],
            2178,
        ),
        (
            SourceId::FdaDrug,
            vec!["us.fda.enforcement.drug/fda_enforcement_report_csv/Jun_2023_to_Sep_2024.csv"],
            933,
        ),
        (
            SourceId::FdaDevice,
            vec!["us.fda.enforcement.device/openfda_api_NY_subset/medical-device-recalls.csv"],
            34,
        ),
        (
            SourceId::FdaFood,
            vec!["us.fda.enforcement.food/openfda_doc_example/_examples.json"],
            1,
        ),
        (
            SourceId::GleifLei,
            vec!["gleif.lei/api_json_gleif-rs_2025-05/lei_records/multi_lei_records.json"],
            12,
        ),
    ];
    for (source, files, rows) in cases {
        let mut req = request(source, commit, files.iter().map(|f| file(f)).collect());
        req.captured_at = Some(at("2021-03-26T23:59:59Z"));
        let out = run(&store, req)
            .await
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        assert_eq!(out.published.rows_added, rows, "{source}");
    }
    let corpus = Corpus::open(store).await.unwrap();
    let held = corpus.manifest().held_sources();
    assert_eq!(held.len(), 6, "{held:?}");
}

#[tokio::test]
async fn an_entry_changed_between_snapshots_is_a_modified_row_with_before_and_after() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let real = file("us.ofac.sdn/moov_2019-01/sdn.csv");
    run(
        &store,
        ofac(
            "2019-01-02T00:00:00Z",
            "2019-01-01T12:00:00Z",
            vec![real.clone()],
        ),
    )
    .await
    .unwrap();
    // The next capture renames entry 36 (its first line); nothing else differs.
    let text = String::from_utf8(real.bytes).unwrap();
    let renamed = text.replacen(
        "36,\"AEROCARIBBEAN AIRLINES\"",
        "36,\"AEROCARIBBEAN AIRLINES S.A.\"",
        1,
    );
    assert_ne!(renamed, text);
    let out = run(
        &store,
        ofac(
            "2019-01-05T00:00:00Z",
            "2019-01-04T12:00:00Z",
            vec![InputFile {
                name: "sdn.csv".into(),
                bytes: renamed.into_bytes(),
            }],
        ),
    )
    .await
    .unwrap();
    assert_eq!(out.changes, BTreeMap::from([("modified".to_owned(), 1)]));
    let corpus = Corpus::open(store).await.unwrap();
    let id = "36@2019-01-04T12:00:00Z";
    assert!(matches!(
        corpus
            .record(id, at("2019-01-04T11:59:59Z"), VisibleBy::PublishedAt)
            .await
            .unwrap(),
        RecordLookup::NotYetVisible | RecordLookup::NotFound
    ));
    let RecordLookup::Visible(r) = corpus
        .record(id, at("2019-01-04T12:00:00Z"), VisibleBy::PublishedAt)
        .await
        .unwrap()
    else {
        panic!("the modification is visible from the second capture");
    };
    assert_eq!(r.form.as_deref(), Some("sdn.modified"));
    let p: serde_json::Value = serde_json::from_str(r.payload.as_deref().unwrap()).unwrap();
    assert_eq!(p["change"], "modified");
    assert_eq!(p["name"], "AEROCARIBBEAN AIRLINES S.A.");
    assert_eq!(p["name_before"], "AEROCARIBBEAN AIRLINES", "{p}");
    assert_eq!(p["after"]["programs"][0], "CUBA", "{p}");
    assert!(p["before"].is_object(), "{p}");
}

#[tokio::test]
async fn a_corrupt_snapshot_or_report_file_of_another_source_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let base = run(
        &store,
        ofac(
            "2019-01-02T00:00:00Z",
            "2019-01-01T12:00:00Z",
            vec![sdn_without_last(3).0],
        ),
    )
    .await
    .unwrap();
    let before = tree(dir.path());
    let sdn = file("us.ofac.sdn/moov_2019-01/sdn.csv").bytes;
    let cot =
        file("us.cftc.cot/legacy_futures_only_2025_weekly_asof/annual.txt.committed_2025-01-13");
    let mut latin1 = sdn.clone();
    let pos = sdn.len() / 2;
    let pos = pos + sdn[pos..].iter().position(|b| *b == b'"').unwrap() + 1;
    latin1.splice(pos..pos, [0xC9u8]);
    let cases: Vec<(&str, Request)> = vec![
        (
            "truncated mid-record",
            ofac(
                "2019-01-05T00:00:00Z",
                "2019-01-04T12:00:00Z",
                vec![InputFile {
                    name: "sdn.csv".into(),
                    bytes: sdn[..sdn.len() - 40].to_vec(),
                }],
            ),
        ),
        (
            "empty",
            ofac(
                "2019-01-05T00:00:00Z",
                "2019-01-04T12:00:00Z",
                vec![InputFile {
                    name: "sdn.csv".into(),
                    bytes: vec![],
                }],
            ),
        ),
        (
            "wrong encoding",
            ofac(
                "2019-01-05T00:00:00Z",
                "2019-01-04T12:00:00Z",
                vec![InputFile {
                    name: "sdn.csv".into(),
                    bytes: latin1,
                }],
            ),
        ),
        ("malformed COT row", {
            let text = String::from_utf8(cot.bytes.clone()).unwrap();
            let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
            lines[5] = "\"WHEAT - CHICAGO BOARD OF TRADE\",not-a-date,oops\n";
            let mut r = request(
                SourceId::CftcCot,
                "2025-01-14T00:00:00Z",
                vec![InputFile {
                    name: "annual.txt".into(),
                    bytes: lines.concat().into_bytes(),
                }],
            );
            r.captured_at = Some(at("2025-01-13T23:00:02Z"));
            r
        }),
    ];
    for (what, req) in cases {
        let err = run(&store, req).await.expect_err(what).to_string();
        assert!(
            err.contains("sdn.csv") || err.contains("annual.txt"),
            "{what}: the error names the file: {err}"
        );
        assert_unchanged(&store, dir.path(), &base, &before, what).await;
    }
}

#[tokio::test]
async fn successive_sec_ticker_lists_report_their_changes_and_move_the_identity_intervals_but_make_no_record()
 {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let weekly = "sec.edgar.ticker_history/company_tickers_weekly_hvcwatch";
    let list = |commit: &str, captured: &str, name: &str| {
        let mut r = request(
            SourceId::SecEdgar,
            commit,
            vec![file(&format!("{weekly}/{name}"))],
        );
        r.captured_at = Some(at(captured));
        r
    };
    let first = run(
        &store,
        list(
            "2026-01-04T07:00:00Z",
            "2026-01-04T06:01:13Z",
            "company_tickers_2026-01-04T0601Z.json",
        ),
    )
    .await
    .unwrap();
    assert_eq!(first.changes, BTreeMap::from([("added".to_owned(), 10283)]));
    assert!(
        first.certified.is_empty(),
        "a ticker list certifies no EDGAR day"
    );
    let second = run(
        &store,
        list(
            "2026-01-11T07:00:00Z",
            "2026-01-11T06:01:14Z",
            "company_tickers_2026-01-11T0601Z.json",
        ),
    )
    .await
    .unwrap();
    // Counted by hand from the two files: 69 tickers new, 49 gone, 23 with another CIK or title.
    assert_eq!(
        second.changes,
        BTreeMap::from([
            ("added".to_owned(), 69),
            ("modified".to_owned(), 23),
            ("removed".to_owned(), 49),
        ])
    );
    // A ticker list is identity evidence: no `sec.edgar` record (those are filings).
    let corpus = Corpus::open(store).await.unwrap();
    assert!(
        corpus.manifest().partitions.is_empty(),
        "{:?}",
        corpus.manifest().partitions
    );
    assert!(!matches!(
        corpus
            .record(
                "ABXL@2026-01-11T06:01:14Z_1814287",
                at("2026-02-01T00:00:00Z"),
                VisibleBy::PublishedAt
            )
            .await
            .unwrap(),
        RecordLookup::Visible(_)
    ));
    // ABXL first listed on 2026-01-11, for Abacus Global Management (CIK 1814287): unknown
    // before the capture that first showed it (an identity hole), placed from it on, with
    // that capture named as the evidence.
    assert!(
        corpus
            .mapping_ticker("ABXL", at("2026-01-11T06:01:13Z"))
            .is_err()
    );
    let abxl = corpus
        .mapping_ticker("ABXL", at("2026-01-11T06:01:14Z"))
        .unwrap();
    assert_eq!(abxl[0].cik, "1814287");
    let named = |m: &[asof_engine::model::identity::Mapping], file: &str| {
        m.iter()
            .any(|m| m.evidence.iter().any(|e| e.file.contains(file)))
    };
    assert!(named(&abxl, "2026-01-11T0601Z"), "{abxl:?}");
    // ABX moved from Barrick (CIK 756894) to Abacus between the two captures.
    let before = corpus
        .mapping_ticker("ABX", at("2026-01-05T00:00:00Z"))
        .unwrap();
    assert_eq!(
        before.iter().map(|m| m.cik.as_str()).collect::<Vec<_>>(),
        ["756894"]
    );
    let after = corpus
        .mapping_ticker("ABX", at("2026-01-12T00:00:00Z"))
        .unwrap();
    assert_eq!(
        after.iter().map(|m| m.cik.as_str()).collect::<Vec<_>>(),
        ["1814287"]
    );
    assert!(named(&after, "2026-01-11T0601Z"), "{after:?}");
    // Ticker lists certify no EDGAR day, so a by-CIK cut over those days is a hole, not zero.
    let q = NewsQuery {
        source: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        visible_by: VisibleBy::PublishedAt,
        start: None,
        as_of: at("2026-01-11T06:01:14Z"),
        entity: Entity::Cik("1814287".into()),
        after: None,
        limit: 100,
    };
    assert!(matches!(
        corpus.news(&q, Scope::Corpus).await.unwrap(),
        Answer::Hole { .. }
    ));
}

/// A master.idx of `n` filings over the first weekdays of 2025 (`changed`: one filing's form
/// differs).
fn master_index(n: usize, changed: Option<usize>) -> InputFile {
    let mut text = String::from(
        "Description:           Master Index of EDGAR Dissemination Feed\n\
         Last Data Received:    March 31, 2025\n\n\
         CIK|Company Name|Form Type|Date Filed|Filename\n\
         --------------------------------------------------------------------------------\n",
    );
    for i in 0..n {
        let cik = 1000 + i % 997;
        let day = 2 + i % 20;
        let form = if Some(i) == changed { "8-K/A" } else { "8-K" };
        text.push_str(&format!(
            "{cik}|COMPANY {cik} INC|{form}|2025-01-{day:02}|edgar/data/{cik}/0001000000-25-{i:06}.txt\n"
        ));
    }
    InputFile {
        name: "master.idx".into(),
        bytes: text.into_bytes(),
    }
}

#[tokio::test]
async fn an_index_larger_than_the_row_spill_publishes_every_filing_once() {
    // More rows than a spill holds in memory: the ingest streams them through its file.
    let n = asof_engine::write::spill::DEFAULT_LIMIT + 7_000;
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let commit = "2025-04-01T06:00:00Z";
    let first = run(
        &store,
        request(SourceId::SecEdgar, commit, vec![master_index(n, None)]),
    )
    .await
    .unwrap();
    assert!(first.published.changed);
    assert_eq!(first.published.rows_added, n);
    let m = store.current().await.unwrap().1;
    let held: u64 = m.partitions.iter().map(|p| p.row_count).sum();
    assert_eq!(held, n as u64);
    // The same file again: nothing new.
    let again = run(
        &store,
        request(SourceId::SecEdgar, commit, vec![master_index(n, None)]),
    )
    .await
    .unwrap();
    assert!(!again.published.changed);
    assert_eq!(again.published.rows_unchanged, n);
    // One filing changed past the in-memory limit: one revision, superseding the first.
    let fixed = run(
        &store,
        request(
            SourceId::SecEdgar,
            "2025-04-02T06:00:00Z",
            vec![master_index(n, Some(n - 3))],
        ),
    )
    .await
    .unwrap();
    assert_eq!(fixed.published.rows_added, 1);
    assert_eq!(fixed.published.rows_unchanged, n - 1);
    let corpus = Corpus::open(store).await.unwrap();
    let id = format!("0001000000-25-{:06}_{}", n - 3, 1000 + (n - 3) % 997);
    for (when, want) in [
        ("2025-04-01T12:00:00Z", "8-K"),
        ("2025-04-02T12:00:00Z", "8-K/A"),
    ] {
        match corpus
            .record(&id, at(when), VisibleBy::CommittedAt)
            .await
            .unwrap()
        {
            RecordLookup::Visible(r) => assert_eq!(r.form.as_deref(), Some(want), "{when}"),
            other => panic!("{when}: {other:?}"),
        }
    }
}
