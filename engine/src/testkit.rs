//! Test helpers: small corpora published through the real publish path into a temp directory.

use crate::model::clock::{Day, Instant, Lane, SourceId};
use crate::model::manifest::Certification;
use crate::model::record::NewsRow;
use crate::read::corpus::Corpus;
use crate::store::CorpusStore;
use crate::write::publish::{ChangeSet, publish};

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
        availability_basis: crate::model::clock::AvailabilityBasis::Unknown,
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
pub fn january() -> Vec<crate::model::manifest::Certification> {
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
pub fn empty_manifest() -> crate::model::manifest::Manifest {
    crate::model::manifest::Manifest {
        format: crate::model::manifest::FORMAT.into(),
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

/// A seed for a randomized test that differs run to run (odd, as xorshift needs); print it,
/// so a failure can be replayed with it.
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1
}

/// xorshift64*: deterministic, dependency-free randomness for test data and queries.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub const RANDOM_FROM: i64 = 1_730_419_200_000_000; // 2024-11-01T00:00:00Z
pub const RANDOM_SPAN: i64 = 120 * 86_400_000_000; // through late February 2025, crossing a year
pub const RANDOM_CIKS: [&str; 5] = ["1", "20", "300", "4000", "50000"];

pub fn random_instant(rng: &mut Rng) -> Instant {
    Instant::from_micros(
        RANDOM_FROM + (rng.below(RANDOM_SPAN as u64 / 1_000_000) as i64) * 1_000_000,
    )
}

/// A corpus of ~900 rows: one big filer (several 128-row blocks per year), small ones,
/// rows without `published_at`, a forward lane with `available_at`, and a second publish
/// that corrects some rows (revisions).
pub async fn random_corpus(
    seed: u64,
    batched: bool,
) -> (tempfile::TempDir, CorpusStore, Vec<NewsRow>) {
    let mut rng = Rng(seed);
    let mut rows = Vec::new();
    for i in 0..900u64 {
        // Zipf-like: half the rows to the first CIK.
        let cik = if rng.below(2) == 0 {
            RANDOM_CIKS[0]
        } else {
            RANDOM_CIKS[1 + rng.below(4) as usize]
        };
        let published = random_instant(&mut rng);
        let committed = Instant::from_micros(published.micros() + 86_400_000_000);
        let mut r = edgar(
            &format!("0000000001-25-{i:06}"),
            cik,
            Some(&published.to_string()),
            &committed.to_string(),
        );
        match rng.below(10) {
            0 => r.published_at = None,
            1 | 2 => {
                r.lane = Lane::ForwardFirstSeen;
                r.available_at = Some(Instant::from_micros(published.micros() + 60_000_000));
                r.availability_basis = crate::model::clock::AvailabilityBasis::LocalFirstSeen;
            }
            _ => {}
        }
        // Ties on published_at exercise the id tie-break.
        if rng.below(8) == 0
            && let Some(prev) = rows.last().map(|p: &NewsRow| p.published_at)
            && r.published_at.is_some()
        {
            r.published_at = prev.or(r.published_at);
        }
        rows.push(r);
    }
    let certs = vec![
        cert(
            Lane::CertifiedPit,
            "2024-11-01",
            "2025-03-31",
            "2024-10-01T00:00:00Z",
        ),
        cert(
            Lane::ForwardFirstSeen,
            "2024-11-01",
            "2025-03-31",
            "2024-10-01T00:00:00Z",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    // Most rows first, then small batches: each later batch becomes delta files of the
    // years it touches, which the index path must merge with their base files.
    let mut certs = Some(certs);
    let mut batches = vec![&rows[..if batched { 820 } else { rows.len() }]];
    if batched {
        batches.extend(rows[820..].chunks(20));
    }
    for (i, batch) in batches.into_iter().enumerate() {
        publish(
            &store,
            ChangeSet {
                rows: batch.to_vec(),
                certifications: certs.take().unwrap_or_default(),
                ..Default::default()
            },
            Instant::from_micros(t("2025-04-01T00:00:00Z").micros() + i as i64),
        )
        .await
        .unwrap();
    }
    // Corrections: a later capture moves some publication instants.
    let mut corrected: Vec<NewsRow> = Vec::new();
    for r in &rows {
        if rng.below(12) == 0 {
            let mut c = r.clone();
            c.published_at = c
                .published_at
                .map(|p| Instant::from_micros(p.micros() + 3_600_000_000));
            c.committed_at = Some(random_instant(&mut rng).max(r.committed_at.unwrap()));
            corrected.push(c);
        }
    }
    publish(
        &store,
        ChangeSet {
            rows: corrected,
            ..Default::default()
        },
        t("2025-04-02T00:00:00Z"),
    )
    .await
    .unwrap();
    (dir, store, rows)
}

/// Stores `forged` as a child of `parent` (the version it was copied from, whose objects
/// verify as already checked) and returns the error `asof verify` gives for it: what a test of
/// a refused object asserts on. Panics if verify accepts it.
pub async fn refusal_of(
    store: &CorpusStore,
    mut forged: crate::model::manifest::Manifest,
    parent: &str,
) -> String {
    forged.parent = Some(parent.to_owned());
    let version = store.put_manifest(&forged).await.unwrap();
    crate::verify::verify(store, Some(&version))
        .await
        .expect_err("verify accepts the forged version")
        .to_string()
}

/// The rows of partition files `paths` (under `dir`) with each row's place, as another engine
/// defines a rows view of the exported rule ([`crate::rule::sql::view_sql`]: Spark's
/// `_metadata.file_name` and `_metadata.row_index`). DataFusion reads no such columns from
/// Parquet, so the tests that run the exported SQL in DataFusion build the view here.
pub fn placed_rows(
    dir: &std::path::Path,
    paths: &[String],
) -> std::sync::Arc<dyn datafusion::catalog::TableProvider> {
    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use std::sync::Arc;
    let schema = crate::rule::sql::placed_rows_schema();
    let mut batches = Vec::new();
    for p in paths {
        let file = std::fs::File::open(dir.join(p)).unwrap();
        let name = crate::format::rule::file_name(p);
        let mut row = 0i64;
        for b in ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
        {
            let b = b.unwrap();
            let n = b.num_rows();
            let mut cols: Vec<ArrayRef> = crate::model::record::schema()
                .fields()
                .iter()
                .map(|f| b.column_by_name(f.name()).unwrap().clone())
                .collect();
            cols.push(Arc::new(StringArray::from(vec![name; n])));
            cols.push(Arc::new(Int64Array::from_iter_values(row..row + n as i64)));
            row += n as i64;
            batches.push(RecordBatch::try_new(schema.clone(), cols).unwrap());
        }
    }
    Arc::new(datafusion::datasource::MemTable::try_new(schema, vec![batches]).unwrap())
}
