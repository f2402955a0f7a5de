//! Test helpers: small corpora published through the real publish path into a temp directory.

use crate::clock::{Day, Instant, Lane, SourceId};
use crate::corpus::Corpus;
use crate::manifest::Certification;
use crate::publish::{ChangeSet, publish};
use crate::record::NewsRow;
use crate::store::CorpusStore;

pub fn t(s: &str) -> Instant {
    Instant::parse(s).unwrap()
}

pub fn day(s: &str) -> Day {
    s.parse().unwrap()
}

/// An EDGAR-like certified-lane row; `published` doubles as acceptance time.
pub fn edgar(accession: &str, cik: &str, published: Option<&str>, committed: &str) -> NewsRow {
    NewsRow {
        id: format!("{accession}_{cik}"),
        source_id: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        form: Some("8-K".into()),
        accession: Some(accession.into()),
        cik: Some(cik.into()),
        title: format!("8-K - company {cik}"),
        event_at: None,
        published_at: published.map(t),
        available_at: None,
        acceptance_at: published.map(t),
        committed_at: Some(t(committed)),
        availability_basis: "unknown".into(),
        revision_id: String::new(),
        supersedes: None,
        content_sha256: String::new(),
        source_locator: format!(
            "https://www.sec.gov/Archives/edgar/data/{cik}/{accession}-index.htm"
        ),
        entity_id: Some(cik.into()),
        payload: None,
    }
}

pub fn cert(lane: Lane, from: &str, to: &str, at: &str) -> Certification {
    Certification {
        source_id: SourceId::SecEdgar,
        lane,
        from: day(from),
        to: day(to),
        certified_at: t(at),
        evidence: vec![],
    }
}

/// Publishes one change set into a fresh temp corpus and opens it.
pub async fn corpus(
    rows: Vec<NewsRow>,
    certifications: Vec<Certification>,
) -> (tempfile::TempDir, CorpusStore, Corpus) {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    publish(
        &store,
        ChangeSet {
            rows,
            certifications,
            ..Default::default()
        },
        t("2026-03-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let c = Corpus::open(store.clone()).await.unwrap();
    (dir, store, c)
}

/// January certified in both lanes. Certified (committed) on Jan 1 so that `committed_at`
/// cuts during January see the certification; a later `certified_at` would make them holes.
pub fn january() -> Vec<crate::manifest::Certification> {
    vec![
        cert(
            Lane::CertifiedPit,
            "2026-01-01",
            "2026-01-31",
            "2026-01-01T00:00:00Z",
        ),
        cert(
            Lane::ForwardFirstSeen,
            "2026-01-01",
            "2026-01-31",
            "2026-01-01T00:00:00Z",
        ),
    ]
}

/// A manifest with nothing in it, for tests that add derived objects one at a time.
pub fn empty_manifest() -> crate::manifest::Manifest {
    crate::manifest::Manifest {
        format: crate::manifest::FORMAT.into(),
        created_at: t("2026-01-01T00:00:00Z"),
        parent: None,
        partitions: vec![],
        certifications: vec![],
        spans: vec![],
        identity: vec![],
        access: vec![],
        notes: Default::default(),
        sample: None,
        delta: None,
    }
}

/// The corpus directory `dir` behind a store that counts what it reads (tests that hold a
/// read to the objects it needs).
pub fn counted_store(
    dir: &std::path::Path,
) -> (asof_test_support::counting::CountingStore, CorpusStore) {
    let counting = asof_test_support::counting::CountingStore::new(std::sync::Arc::new(
        object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap(),
    ));
    let store = CorpusStore::from_store(std::sync::Arc::new(counting.clone()), "counted".into());
    (counting, store)
}
