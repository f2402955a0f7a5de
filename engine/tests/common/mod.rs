//! Shared by the publishing tests: distinct rows per publisher, and a race of publishers
//! checked for lost versions.
#![allow(dead_code)]

use std::collections::BTreeSet;

use asof_engine::store::objects::read_partition;
use asof_engine::write::publish::{ChangeSet, publish};
use asof_engine::{CorpusStore, Instant, Lane, NewsRow, SourceId};

pub fn at(s: &str) -> Instant {
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
        availability_basis: asof_engine::AvailabilityBasis::Unknown,
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
pub async fn race(store: CorpusStore, publishers: usize, each: usize) {
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
    assert_eq!(
        published.len(),
        publishers * each,
        "every publish is its own version"
    );

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

    // The publishers raced on the Delta log too (each writes its commits after its pointer,
    // and the chain's missing ones): one commit of the records table per version, each its
    // version's partitions, and one of the source-lane's supersessions table, which the first
    // version creates and no later one changes (no row corrects another; no certification, so
    // no coverage table).
    let checked = asof_engine::write::delta::check(&store, &current)
        .await
        .unwrap();
    assert_eq!(
        (checked.commits, checked.behind),
        (publishers * each + 1, 0),
        "every version's Delta commit is written and re-derives byte for byte"
    );
}
