//! Ingests of real agency files into one corpus at the same moment (an `asof ingest` next to
//! a poller, or several ingests at once) keep every record: each one that finds the pointer
//! moved re-compares against the new version and publishes again.

mod common;

use common::file;
use std::collections::{BTreeMap, BTreeSet};

use asof_engine::store::objects::read_partition;
use asof_engine::{CorpusStore, Instant, Lane, SourceId};
use asof_ingest::pipeline::{Request, ingest};

/// The FDA exports held in the repository, each its own ingest (as in the field: one export
/// per download), plus a device and a food file.
fn requests() -> Vec<Request> {
    let at = Instant::parse("2026-11-20T00:00:00Z").unwrap();
    [
        (
            SourceId::FdaDrug,
            "us.fda.enforcement.drug/fda_enforcement_report_csv/Jan_2016_to_Oct_2016.csv",
        ),
        (
            SourceId::FdaDrug,
            "us.fda.enforcement.drug/fda_enforcement_report_csv/Jun_2023_to_Sep_2024.csv",
        ),
        (
            SourceId::FdaDrug,
            "us.fda.enforcement.drug/fda_enforcement_report_csv/Class_1_Drug_recalls_Jan_2024_to_12_July_2026.csv",
        ),
        (
            SourceId::FdaDrug,
            "us.fda.enforcement.drug/openfda_api_NY_subset/drug-recalls.csv",
        ),
        (
            SourceId::FdaDevice,
            "us.fda.enforcement.device/openfda_api_NY_subset/medical-device-recalls.csv",
        ),
        (
            SourceId::FdaFood,
            "us.fda.enforcement.food/openfda_doc_example/_examples.json",
        ),
    ]
    .into_iter()
    .map(|(source, rel)| Request {
        source,
        lane: Lane::CertifiedPit,
        commit_time: at,
        captured_at: Some(at),
        certify: None,
        options: Default::default(),
        files: vec![file(rel).into()],
    })
    .collect()
}

/// The record ids of the current version, by source.
async fn records(store: &CorpusStore) -> BTreeMap<SourceId, BTreeSet<String>> {
    let (_, manifest) = store.current().await.unwrap();
    let mut out: BTreeMap<SourceId, BTreeSet<String>> = BTreeMap::new();
    for p in &manifest.partitions {
        for r in read_partition(store, p).await.unwrap() {
            out.entry(r.source_id).or_default().insert(r.id);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn concurrent_ingests_keep_every_record_that_the_same_ingests_in_turn_keep() {
    let one_by_one = tempfile::tempdir().unwrap();
    let sequential = CorpusStore::local(one_by_one.path()).unwrap();
    for req in requests() {
        ingest(&sequential, req, &|_| {}).await.unwrap();
    }
    let want = records(&sequential).await;
    let total: usize = want.values().map(BTreeSet::len).sum();
    assert!(total > 1500, "{total} records");

    let at_once = tempfile::tempdir().unwrap();
    let concurrent = CorpusStore::local(at_once.path()).unwrap();
    let tasks: Vec<_> = requests()
        .into_iter()
        .map(|req| {
            let store = concurrent.clone();
            tokio::spawn(async move { ingest(&store, req, &|_| {}).await })
        })
        .collect();
    for t in tasks {
        let outcome = t.await.unwrap().unwrap();
        assert!(outcome.published.changed);
    }
    let got = records(&concurrent).await;
    for (source, ids) in &want {
        let held = got.get(source).map_or(0, BTreeSet::len);
        assert_eq!(held, ids.len(), "{source}: records kept");
    }
    assert_eq!(got, want);

    // Six publishes, one version each, in one line of parents.
    let (mut next, mut versions) = (concurrent.current_version().await.unwrap(), 0);
    while let Some(v) = next {
        next = concurrent.manifest(&v).await.unwrap().parent;
        versions += 1;
    }
    assert_eq!(versions, 6);
}
