//! Concurrent publishers on one local corpus: the pointer moves only by compare-and-swap, a
//! publisher that loses the race rebases, so no version is lost and the chain stays linear.

use std::collections::BTreeSet;

use asof_engine::publish::{ChangeSet, publish};
use asof_engine::read::read_partition;
use asof_engine::store::POINTER;
use asof_engine::{CorpusStore, Error, Instant, Lane, NewsRow, SourceId};

fn at(s: &str) -> Instant {
    Instant::parse(s).unwrap()
}

/// One OFAC-like list row, distinct per (publisher, n), on one of three days.
pub fn row(publisher: usize, n: usize) -> NewsRow {
    let published = at(&format!("2026-01-0{}T12:00:00Z", 1 + n % 3));
    NewsRow {
        id: format!("p{publisher}-n{n}"),
        source_id: SourceId::OfacSdn,
        lane: Lane::CertifiedPit,
        form: Some("sdn.added".into()),
        accession: None,
        cik: None,
        title: format!("entry {n} of publisher {publisher}"),
        event_at: None,
        published_at: Some(published),
        available_at: None,
        acceptance_at: None,
        committed_at: Some(at("2026-01-05T00:00:00Z")),
        availability_basis: "capture".into(),
        revision_id: String::new(),
        supersedes: None,
        content_sha256: String::new(),
        source_locator: "https://sanctionslist.ofac.treas.gov/".into(),
        entity_id: Some(format!("p{publisher}-n{n}")),
        payload: None,
    }
}

/// `publishers` tasks publish `each` one-row change sets at the same time; then the final
/// version must hold every row and the parent chain must be exactly the versions published.
async fn race(store: CorpusStore, publishers: usize, each: usize) {
    let mut tasks = Vec::new();
    for p in 0..publishers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut versions = Vec::new();
            for n in 0..each {
                let changes = ChangeSet {
                    rows: vec![row(p, n)],
                    ..Default::default()
                };
                let published = publish(&store, changes, at("2026-01-05T00:00:00Z"))
                    .await
                    .unwrap_or_else(|e| panic!("publisher {p}, publish {n}: {e}"));
                assert!(published.changed);
                versions.push(published.version);
            }
            versions
        }));
    }
    let mut published: BTreeSet<String> = BTreeSet::new();
    for t in tasks {
        published.extend(t.await.unwrap());
    }
    assert_eq!(published.len(), publishers * each, "every publish is its own version");

    // Walk the chain from the pointer: linear by construction of `parent`, so it must reach
    // every version any publisher was told it published, and nothing else.
    let (current, manifest) = store.current().await.unwrap();
    let mut chain = Vec::new();
    let mut next = Some(current.clone());
    while let Some(v) = next {
        let m = store.manifest(&v).await.unwrap();
        next = m.parent.clone();
        chain.push(v);
    }
    assert_eq!(chain.len(), publishers * each, "one version per publish");
    assert_eq!(
        chain.iter().cloned().collect::<BTreeSet<_>>(),
        published,
        "the chain is exactly the published versions"
    );

    // Every row of every publish is in the final version.
    let mut ids = BTreeSet::new();
    for p in &manifest.partitions {
        for r in read_partition(&store, p).await.unwrap() {
            ids.insert(r.id);
        }
    }
    let want: BTreeSet<String> = (0..publishers)
        .flat_map(|p| (0..each).map(move |n| format!("p{p}-n{n}")))
        .collect();
    assert_eq!(ids, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_concurrent_publishers_of_fifty_versions_each_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    race(CorpusStore::local(dir.path()).unwrap(), 2, 50).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn eight_concurrent_publishers_of_fifty_versions_each_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    race(CorpusStore::local(dir.path()).unwrap(), 8, 50).await;
}

#[tokio::test]
async fn a_stale_expected_version_is_refused_and_the_pointer_stays() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let first = publish(
        &store,
        ChangeSet {
            rows: vec![row(0, 0)],
            ..Default::default()
        },
        at("2026-01-05T00:00:00Z"),
    )
    .await
    .unwrap()
    .version;
    let second = publish(
        &store,
        ChangeSet {
            rows: vec![row(0, 1)],
            ..Default::default()
        },
        at("2026-01-05T00:00:00Z"),
    )
    .await
    .unwrap()
    .version;
    // A publisher that started from `first` may not move the pointer back to anything.
    let err = store.swap_pointer(Some(&first), &first).await.unwrap_err();
    assert!(
        matches!(&err, Error::PointerMoved { expected, found }
            if expected.as_deref() == Some(first.as_str()) && found.as_deref() == Some(second.as_str())),
        "{err}"
    );
    // Nor may one that believes no version exists yet.
    let err = store.swap_pointer(None, &first).await.unwrap_err();
    assert!(matches!(err, Error::PointerMoved { .. }), "{err}");
    assert_eq!(store.current_version().await.unwrap(), Some(second.clone()));
    let on_disk = std::fs::read_to_string(dir.path().join(POINTER)).unwrap();
    assert_eq!(on_disk.trim(), second);
    // The right expectation moves it.
    store.swap_pointer(Some(&second), &first).await.unwrap();
    assert_eq!(store.current_version().await.unwrap(), Some(first));
}

#[tokio::test]
async fn the_pointer_never_names_a_version_whose_manifest_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let ghost = format!("sha256:{}", "0".repeat(64));
    let err = store.swap_pointer(None, &ghost).await.unwrap_err();
    assert!(matches!(err, Error::Integrity { .. }), "{err}");
    assert_eq!(store.current_version().await.unwrap(), None);
}
