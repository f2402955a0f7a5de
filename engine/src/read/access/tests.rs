//! Differential tests of the access files: the index path and the DataFusion scan give the
//! same pages, over files derived at publish.

use super::*;
use crate::format::access::layout::*;
use crate::write::access::*;

use std::collections::{BTreeMap, HashSet};

use std::sync::Arc;

use bytes::Bytes;

use crate::model::clock::{Instant, Lane, SourceId};

use crate::model::clock::VisibleBy;
use crate::model::coverage::Scope;
use crate::model::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::model::record::NewsRow;
use crate::read::corpus::{Answer, Corpus, Entity, NewsQuery, RecordLookup};
use crate::store::CorpusStore;
use crate::store::hashing::sha256_hex;
use crate::store::objects::get_checked;
use crate::testkit::{
    RANDOM_CIKS, RANDOM_FROM, RANDOM_SPAN, Rng, cert, edgar, random_corpus, random_instant, t,
};
use crate::write::publish::{ChangeSet, publish};

/// A page's `(id, revision_id)` pairs and where the next one starts.
type Ids = (Vec<(String, String)>, Option<crate::read::corpus::Position>);

fn page(a: Answer<NewsRow>) -> Option<Ids> {
    match a {
        Answer::Page { rows, next, .. } => Some((
            rows.into_iter().map(|r| (r.id, r.revision_id)).collect(),
            next,
        )),
        Answer::Hole { .. } => None,
    }
}

#[tokio::test]
async fn an_index_loaded_after_the_previous_version_takes_its_unchanged_files_and_equals_a_fresh_load()
 {
    let (dir, store, rows) = random_corpus(5, false).await;
    let (counting, counted) = crate::testkit::counted_store(dir.path());
    let (_, before) = store.current().await.unwrap();
    let old = AccessIndex::load(&store, &before).await.unwrap().unwrap();
    // One 2025 row and a correction of a 2024 row: a delta file in each of two groups of
    // one lane; the other lane's files stay as they were.
    let fresh_row = edgar(
        "0000000009-25-000001",
        "20",
        Some("2025-02-01T12:00:00Z"),
        "2025-05-01T00:00:00Z",
    );
    let mut corrected = rows
        .iter()
        .find(|r| {
            r.lane == Lane::CertifiedPit
                && r.published_at
                    .is_some_and(|p| p < t("2024-12-31T00:00:00Z"))
        })
        .unwrap()
        .clone();
    corrected.title = "8-K - corrected".into();
    corrected.committed_at = Some(t("2025-05-01T00:00:00Z"));
    publish(
        &store,
        ChangeSet {
            rows: vec![fresh_row, corrected],
            ..Default::default()
        },
        t("2025-05-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let (_, after) = store.current().await.unwrap();
    counting.reset();
    let carried = AccessIndex::load_after(&counted, &after, Some(&old))
        .await
        .unwrap()
        .unwrap();
    // Only the sidecars the previous index did not hold are read, once each, and no data
    // file at all.
    let mut read: Vec<String> = counting.requests().into_iter().map(|(p, _)| p).collect();
    read.sort();
    let mut new_sidecars: Vec<String> = after
        .access
        .iter()
        .filter(|e| e.kind == KIND_SIDECAR && !before.access.contains(e))
        .map(|e| e.path.clone())
        .collect();
    new_sidecars.sort();
    assert!(!new_sidecars.is_empty());
    assert_eq!(read, new_sidecars);
    let fresh = AccessIndex::load(&store, &after).await.unwrap().unwrap();

    let shared = carried
        .files
        .iter()
        .filter(|f| old.files.iter().any(|o| Arc::ptr_eq(o, f)))
        .count();
    assert!(shared > 0, "unchanged files are taken over");
    assert!(shared < carried.files.len(), "new sidecars are read");
    let paths = |i: &AccessIndex| {
        i.files
            .iter()
            .map(|f| f.sidecar.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(paths(&carried), paths(&fresh));
    // Every CIK's runs, as each index answers them (with its version's file numbers).
    let runs = |i: &AccessIndex| {
        let mut keys: Vec<(SourceId, Lane, Box<str>)> = i
            .files
            .iter()
            .flat_map(|f| f.runs.keys().map(|c| (f.group.0, f.group.1, c.clone())))
            .collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|(s, l, c)| {
                let slots = i.slots(s, l, &c);
                (s, l, c, slots)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(runs(&carried), runs(&fresh));
    assert_eq!(carried.groups, fresh.groups);
    assert_eq!(carried.covered, fresh.covered);
    let sups = |i: &AccessIndex| {
        let mut v: Vec<(String, Instant)> = i
            .supersessions()
            .map(|(r, at)| (r.to_owned(), at))
            .collect();
        v.sort();
        v
    };
    assert_eq!(sups(&carried), sups(&fresh));
    assert!(
        sups(&fresh).len() > sups(&old).len(),
        "the correction supersedes a revision"
    );
}

#[tokio::test]
async fn a_group_derived_in_runs_of_a_few_ciks_has_the_bytes_of_one_derived_at_once() {
    // Revisions, rows without a CIK-run boundary at a block edge, a big filer: runs of
    // any size give the same file and sidecar as holding the whole group in memory.
    let (_dir, store, _) = random_corpus(11, false).await;
    let (_, m) = store.current().await.unwrap();
    let mut by_group: BTreeMap<(SourceId, Lane, i32), Vec<&PartitionEntry>> = BTreeMap::new();
    for p in &m.partitions {
        by_group.entry(group_of(p).unwrap()).or_default().push(p);
    }
    assert!(by_group.len() >= 3, "two years and two lanes");
    for (g, parts) in by_group {
        let whole = derive_group(&store, g, &parts, u64::MAX).await.unwrap();
        assert_eq!(
            whole[0].row_count,
            parts.iter().map(|p| p.row_count).sum::<u64>()
        );
        for chunk in [1, 7, 100, 128, 300] {
            let runs = derive_group(&store, g, &parts, chunk).await.unwrap();
            assert_eq!(runs, whole, "{g:?} in runs of {chunk} rows");
        }
    }
}

#[tokio::test]
async fn index_path_and_datafusion_scan_agree_on_random_queries_and_page_walks() {
    // Once over years published whole, once over years with delta files.
    for batched in [false, true] {
        index_and_scan_agree(batched).await;
    }
}

async fn index_and_scan_agree(batched: bool) {
    let (dir, store, rows) = random_corpus(0x5eed_0001, batched).await;
    // The batched corpus is read as from object storage (through `object_store`, not by
    // positional reads): the path that reads several runs at once and keeps compressed
    // blocks.
    let fast = if batched {
        Corpus::open(crate::testkit::counted_store(dir.path()).1)
            .await
            .unwrap()
    } else {
        Corpus::open(store.clone()).await.unwrap()
    };
    let mut scan = Corpus::open(store).await.unwrap();
    scan.set_read_path(crate::read::corpus::ReadPath::Scan);
    let index = fast.access().expect("publish derived access files");
    if batched {
        assert!(
            fast.manifest()
                .access
                .iter()
                .any(|e| e.path.contains(&format!("/{DELTA_PREFIX}"))),
            "the batches became delta files"
        );
    }
    assert!(index.covers(SourceId::SecEdgar, Lane::CertifiedPit));
    assert!(index.covers(SourceId::SecEdgar, Lane::ForwardFirstSeen));
    assert!(
        fast.manifest()
            .access
            .iter()
            .filter(|e| e.kind == KIND_CLUSTERED)
            .count()
            >= 4,
        "two years in two lanes"
    );

    let mut rng = Rng(0x5eed_0002);
    let mut compared_rows = 0usize;
    for _ in 0..120 {
        let lane = if rng.below(3) == 0 {
            Lane::ForwardFirstSeen
        } else {
            Lane::CertifiedPit
        };
        let visible_by = match (lane, rng.below(3)) {
            (_, 0) => VisibleBy::PublishedAt,
            (Lane::ForwardFirstSeen, 1) => VisibleBy::AvailableAt,
            _ => VisibleBy::CommittedAt,
        };
        let as_of = random_instant(&mut rng);
        let start = (rng.below(3) == 0).then(|| {
            Instant::from_micros(as_of.micros() - 1 - rng.below(20 * 86_400) as i64 * 1_000_000)
        });
        let cik = if rng.below(15) == 0 {
            "999".to_owned()
        } else {
            RANDOM_CIKS[rng.below(5) as usize].to_owned()
        };
        let mut q = NewsQuery {
            source: SourceId::SecEdgar,
            lane,
            visible_by,
            start: start.filter(|s| s.micros() >= RANDOM_FROM),
            as_of,
            entity: Entity::Cik(cik),
            after: None,
            limit: 1 + rng.below(150) as usize,
        };
        for _ in 0..40 {
            let a = page(fast.news(&q, Scope::Corpus).await.unwrap());
            let b = page(scan.news(&q, Scope::Corpus).await.unwrap());
            assert_eq!(a, b, "query {q:?}");
            let Some((got, next)) = a else { break };
            compared_rows += got.len();
            match next {
                Some(p) => q.after = Some(p),
                None => break,
            }
        }
    }
    assert!(
        compared_rows > 2_000,
        "the queries returned rows ({compared_rows})"
    );

    for _ in 0..150 {
        let id = &rows[rng.below(rows.len() as u64) as usize].id;
        let id = if rng.below(20) == 0 {
            "0000000001-25-999999_1".to_owned()
        } else {
            id.clone()
        };
        let as_of = random_instant(&mut rng);
        for by in [VisibleBy::PublishedAt, VisibleBy::CommittedAt] {
            let show = |l: RecordLookup| match l {
                RecordLookup::Visible(r) => format!("visible {}", r.revision_id),
                RecordLookup::NotYetVisible => "not yet".into(),
                RecordLookup::NotFound => "not found".into(),
            };
            assert_eq!(
                show(fast.record(&id, as_of, by).await.unwrap()),
                show(scan.record(&id, as_of, by).await.unwrap()),
                "record {id} at {as_of} by {by:?}"
            );
        }
    }
}

/// A first page of up to 300 of `cik`'s certified rows, at the end of the span.
fn whole_span(cik: &str) -> NewsQuery {
    NewsQuery {
        source: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        visible_by: VisibleBy::PublishedAt,
        start: None,
        as_of: Instant::from_micros(RANDOM_FROM + RANDOM_SPAN),
        entity: Entity::Cik(cik.to_owned()),
        after: None,
        limit: 300,
    }
}

#[tokio::test]
async fn rows_read_once_are_answered_from_the_row_cache_without_reading_the_file() {
    let (dir, store, _) = random_corpus(0x5eed_0003, false).await;
    let corpus = Corpus::open(store).await.unwrap();
    let query = whole_span;
    let first = page(
        corpus
            .news(&query(RANDOM_CIKS[0]), Scope::Corpus)
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        first.0.len() > 2 * BLOCK_ROWS,
        "several blocks of the big filer"
    );
    // Zero every access data file in place (the open handles read the same inodes; the
    // block offsets are in memory): only what the cache holds can still be answered.
    for e in corpus
        .manifest()
        .access
        .iter()
        .filter(|e| e.kind == KIND_CLUSTERED)
    {
        let path = dir.path().join(&e.path);
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::write(&path, vec![0u8; len as usize]).unwrap();
    }
    let again = page(
        corpus
            .news(&query(RANDOM_CIKS[0]), Scope::Corpus)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(again, first, "the same rows, from memory");
    // The last filer of the files: no block of it was read with the first filer's.
    assert!(
        corpus
            .news(&query(RANDOM_CIKS[4]), Scope::Corpus)
            .await
            .is_err(),
        "a filer never read must read the (now zeroed) file"
    );
}

#[tokio::test]
async fn a_page_keeps_in_the_row_cache_the_rows_of_its_runs_not_the_blocks_they_share() {
    let (_dir, store, _) = random_corpus(0x5eed_0007, false).await;
    let corpus = Corpus::open(store).await.unwrap();
    let index = corpus.access().unwrap();
    let (source, lane) = (SourceId::SecEdgar, Lane::CertifiedPit);
    let rows_of = |c: &str| -> u32 {
        index
            .slots(source, lane, c)
            .iter()
            .map(|s| s.dated + s.nulls)
            .sum()
    };
    let cik = *RANDOM_CIKS.iter().min_by_key(|c| rows_of(c)).unwrap();
    page(corpus.news(&whole_span(cik), Scope::Corpus).await.unwrap()).unwrap();
    let mut shared = 0;
    for s in index.slots(source, lane, cik) {
        let f = &index.files[s.file as usize];
        let run = s.start..s.start + u64::from(s.dated);
        let block = f.block_rows((run.start / BLOCK_ROWS as u64) as usize);
        if run.is_empty() || run.end > block.end {
            continue;
        }
        let path: &str = f.path.as_ref();
        let held = crate::read::page_cache::ROWS
            .get(path, &run)
            .expect("the run's rows are kept");
        assert_eq!(held.len() as u64, run.end - run.start);
        if block != run {
            assert!(
                crate::read::page_cache::ROWS.get(path, &block).is_none(),
                "the block the run shares with other filers is not kept whole"
            );
            shared += 1;
        }
    }
    assert!(shared > 0, "{cik}: a run sharing its block");
}

/// What a page cost from object storage: range requests to access data files and their
/// bytes; any other read fails the test (the sidecars are read at load, never per page).
fn page_reads(counting: &asof_test_support::counting::CountingStore) -> (usize, u64) {
    let requests = counting.requests();
    for (path, _) in &requests {
        assert!(path.ends_with(DATA_SUFFIX), "a page read {path}");
    }
    (requests.len(), requests.iter().map(|(_, b)| b).sum())
}

#[tokio::test]
async fn a_cold_page_from_object_storage_is_one_range_read_per_access_file_of_its_rows_and_so_is_the_next()
 {
    // Its own seed: the caches are the process's, and content-addressed paths differ.
    let (dir, _, _) = random_corpus(0x5eed_0047, true).await;
    let (counting, store) = crate::testkit::counted_store(dir.path());
    let corpus = Corpus::open(store).await.unwrap();
    assert!(
        counting
            .reads_under("snapshots/access/")
            .iter()
            .all(|p| p.ends_with(SIDECAR_SUFFIX)),
        "the load reads sidecars, never a data file"
    );
    let index = corpus.access().unwrap();
    let max_block = index
        .files
        .iter()
        .flat_map(|f| f.offsets.windows(2).map(|w| w[1] - w[0]))
        .max()
        .unwrap();
    let mut pages = 0;
    for cik in RANDOM_CIKS {
        for limit in [1usize, 100] {
            let mut q = NewsQuery {
                source: SourceId::SecEdgar,
                lane: Lane::CertifiedPit,
                visible_by: VisibleBy::PublishedAt,
                start: None,
                as_of: Instant::from_micros(RANDOM_FROM + RANDOM_SPAN),
                entity: Entity::Cik(cik.to_owned()),
                after: None,
                limit,
            };
            // The first page, then the next one after it.
            for _ in 0..2 {
                counting.reset();
                let Some((ids, next)) = page(corpus.news(&q, Scope::Corpus).await.unwrap()) else {
                    panic!("no hole in the certified span")
                };
                let (requests, bytes) = page_reads(&counting);
                // Base files and deltas: at most one range per file holding the CIK.
                let files = index
                    .slots(SourceId::SecEdgar, Lane::CertifiedPit, cik)
                    .len();
                assert!(
                    requests <= files,
                    "cik {cik} limit {limit}: {requests} requests for {files} files"
                );
                // The blocks of the rows returned, and at most two more per file (a run
                // starts and ends inside blocks of the file).
                let blocks = ids.len().div_ceil(BLOCK_ROWS) as u64 + 2 * files as u64;
                assert!(
                    bytes <= blocks * max_block,
                    "cik {cik} limit {limit}: {bytes} bytes for {} rows",
                    ids.len()
                );
                pages += 1;
                match next {
                    Some(p) => q.after = Some(p),
                    None => break,
                }
            }
            // The same page again is answered from memory.
            q.after = None;
            corpus.news(&q, Scope::Corpus).await.unwrap();
            counting.reset();
            corpus.news(&q, Scope::Corpus).await.unwrap();
            assert_eq!(page_reads(&counting), (0, 0), "cik {cik}: a warm page");
        }
    }
    assert!(pages > 10, "{pages} pages checked");
}

#[tokio::test]
async fn a_filers_rows_of_nine_years_are_two_range_reads_cold_because_eight_lie_in_one_era() {
    // One filer with a filing in each year 2017–2024 (one era) and one in 2025 (the next
    // era), among other filers: a cold page of its rows from object storage is one range
    // GET for the eight years and one for 2025.
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let mut rows = Vec::new();
    for (i, year) in (2017..=2025).enumerate() {
        for (j, cik) in ["5", "7", "9"].iter().enumerate() {
            rows.push(edgar(
                &format!("0000000001-{}-{:06}", year % 100, i * 10 + j),
                cik,
                Some(&format!("{year}-06-15T15:00:00Z")),
                "2025-12-31T00:00:00Z",
            ));
        }
    }
    publish(
        &store,
        ChangeSet {
            rows,
            certifications: vec![cert(
                Lane::CertifiedPit,
                "2017-01-01",
                "2025-12-30",
                "2025-12-31T00:00:00Z",
            )],
            ..Default::default()
        },
        t("2025-12-31T00:00:00Z"),
    )
    .await
    .unwrap();
    let (counting, remote) = crate::testkit::counted_store(dir.path());
    let corpus = Corpus::open(remote).await.unwrap();
    let q = NewsQuery {
        source: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        visible_by: VisibleBy::PublishedAt,
        start: None,
        as_of: t("2025-12-30T00:00:00Z"),
        entity: Entity::Cik("7".into()),
        after: None,
        limit: 100,
    };
    // Nine years of rows: one range of the era 2017–2024's file, one of 2025's (a file a
    // year read nine).
    counting.reset();
    let (ids, _) = page(corpus.news(&q, Scope::Corpus).await.unwrap()).unwrap();
    assert_eq!(ids.len(), 9);
    assert_eq!(page_reads(&counting).0, 2, "{:?}", counting.requests());
}

#[tokio::test]
async fn past_max_deltas_an_eras_deltas_merge_into_one_and_every_row_stays_answered() {
    // A base of 100 rows, then twelve publishes of one row each into the same era: the
    // deltas stay at most MAX_DELTAS files (the ninth merges them, a delta file at a
    // time), never reach a quarter of the base, and every row is answered.
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let row = |i: usize| {
        edgar(
            &format!("0000000001-25-{i:06}"),
            if i % 2 == 0 { "5" } else { "7" },
            Some(&format!("2025-01-{:02}T15:00:00Z", 1 + i % 28)),
            "2025-02-01T00:00:00Z",
        )
    };
    publish(
        &store,
        ChangeSet {
            rows: (0..100).map(row).collect(),
            certifications: vec![cert(
                Lane::CertifiedPit,
                "2025-01-01",
                "2025-01-31",
                "2025-02-01T00:00:00Z",
            )],
            ..Default::default()
        },
        t("2025-02-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let mut most = 0;
    for i in 100..112 {
        publish(
            &store,
            ChangeSet {
                rows: vec![row(i)],
                ..Default::default()
            },
            Instant::from_micros(t("2025-02-02T00:00:00Z").micros() + i as i64),
        )
        .await
        .unwrap();
        let (_, m) = store.current().await.unwrap();
        let deltas = m
            .access
            .iter()
            .filter(|e| e.kind == KIND_CLUSTERED && e.path.contains(DELTA_PREFIX))
            .count();
        assert!(deltas <= MAX_DELTAS, "{deltas} delta files after row {i}");
        most = most.max(deltas);
    }
    assert_eq!(
        most, MAX_DELTAS,
        "the deltas reached the limit and were merged"
    );
    crate::verify::verify(&store, None).await.unwrap();
    let corpus = Corpus::open(store).await.unwrap();
    assert!(
        corpus
            .access()
            .unwrap()
            .covers(SourceId::SecEdgar, Lane::CertifiedPit)
    );
    let mut total = 0;
    for cik in ["5", "7"] {
        let q = NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: t("2025-01-31T23:59:59Z"),
            entity: Entity::Cik(cik.into()),
            after: None,
            limit: 500,
        };
        total += page(corpus.news(&q, Scope::Corpus).await.unwrap())
            .unwrap()
            .0
            .len();
    }
    assert_eq!(total, 112);
}

#[tokio::test]
async fn access_files_of_earlier_layouts_are_ignored_and_the_next_publish_derives_every_group_again()
 {
    // Version 1: Parquet files of one year. Version 2: today's blocks in files of one
    // year, whose folder may be named like an era's (2017/, 2025/): taken for the era,
    // such a file would hide the other years' rows.
    for (data, sidecar) in [
        ("access.cik_clustered/1", "access.cik_index/1"),
        ("access.cik_blocks/2", "access.cik_index/2"),
    ] {
        earlier_layout_is_ignored_then_derived_again(data, sidecar).await;
    }
}

async fn earlier_layout_is_ignored_then_derived_again(data: &str, sidecar: &str) {
    let (_dir, store, _) = random_corpus(0x5eed_0048, false).await;
    let (version, mut m) = store.current().await.unwrap();
    // As a corpus published before this layout lists its files (the objects themselves do
    // not matter: they are never opened).
    for e in &mut m.access {
        if e.kind == KIND_CLUSTERED {
            e.kind = data.into();
        } else if e.kind == KIND_SIDECAR {
            e.kind = sidecar.into();
        }
    }
    let old = store.put_manifest(&m).await.unwrap();
    store.swap_pointer(Some(&version), &old).await.unwrap();
    let before = Corpus::open(store.clone()).await.unwrap();
    assert!(before.access().is_none(), "no access file of this layout");
    let cik = RANDOM_CIKS[0].to_owned();
    let q = NewsQuery {
        source: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        visible_by: VisibleBy::PublishedAt,
        start: None,
        as_of: Instant::from_micros(RANDOM_FROM + RANDOM_SPAN),
        entity: Entity::Cik(cik.clone()),
        after: None,
        limit: 50,
    };
    let walked = page(before.news(&q, Scope::Corpus).await.unwrap()).unwrap();
    assert_eq!(walked.0.len(), 50, "the walk answers the lane");
    // One more row: every group is derived again, the old entries gone.
    let mut more = edgar(
        "0000000002-25-000001",
        "7",
        Some("2025-01-15T12:00:00Z"),
        "2025-03-01T00:00:00Z",
    );
    more.title = "one more".into();
    publish(
        &store,
        ChangeSet {
            rows: vec![more],
            ..Default::default()
        },
        t("2025-03-02T00:00:00Z"),
    )
    .await
    .unwrap();
    let after = Corpus::open(store.clone()).await.unwrap();
    let kinds: HashSet<&str> = after
        .manifest()
        .access
        .iter()
        .map(|e| e.kind.as_str())
        .filter(|k| k.starts_with("access."))
        .collect();
    assert_eq!(kinds, HashSet::from([KIND_CLUSTERED, KIND_SIDECAR]));
    assert!(
        after
            .access()
            .unwrap()
            .covers(SourceId::SecEdgar, Lane::CertifiedPit)
    );
    assert_eq!(
        page(after.news(&q, Scope::Corpus).await.unwrap()).unwrap(),
        walked
    );
    crate::verify::verify(&store, None).await.unwrap();
}

/// Republishes the version with one sidecar replaced by what `edit` makes of its slots,
/// supersessions and offsets (hashes made to match, as a faulty writer would have).
async fn with_sidecar_edited(
    store: &CorpusStore,
    edit: impl FnOnce(&mut Vec<(String, Slot)>, &mut Vec<u64>),
) {
    let (version, mut m) = store.current().await.unwrap();
    let at = m
        .access
        .iter()
        .position(|e| e.kind == KIND_SIDECAR)
        .unwrap();
    let sc = m.access[at].clone();
    let data = m
        .access
        .iter()
        .find(|d| d.kind == KIND_CLUSTERED && names_data(&sc, d))
        .unwrap()
        .clone();
    let group = group_of_path(&sc.path).unwrap();
    let mut pending = Vec::new();
    let bytes = get_checked(store, &sc.path, &sc.sha256).await.unwrap();
    let (sup, mut offsets) =
        decode_sidecar(&mut pending, &sc.path, bytes, 0, group, &data.sha256).unwrap();
    let mut slots: Vec<(String, Slot)> = pending
        .into_iter()
        .map(|((_, _, cik), s)| (cik.into(), s))
        .collect();
    slots.sort_by_key(|(_, s)| s.start);
    edit(&mut slots, &mut offsets);
    let bytes = encode_sidecar(&slots, &data.sha256, &sup, &offsets).unwrap();
    let path = sc.path.replace(".cik-index", ".edited.cik-index");
    m.access[at] = ObjectEntry {
        path: path.clone(),
        bytes: bytes.len() as u64,
        sha256: sha256_hex(&bytes),
        ..sc
    };
    store
        .put_immutable(&path, Bytes::from(bytes))
        .await
        .unwrap();
    // The edited sidecar must still name its data file by path.
    let stem = path.strip_suffix(SIDECAR_SUFFIX).unwrap().to_owned();
    let d = m.access.iter_mut().find(|e| e.path == data.path).unwrap();
    d.path = format!("{stem}{DATA_SUFFIX}");
    let local = store.local_root().unwrap();
    std::fs::copy(local.join(&data.path), local.join(&d.path)).unwrap();
    let next = store.put_manifest(&m).await.unwrap();
    store.swap_pointer(Some(&version), &next).await.unwrap();
}

#[tokio::test]
async fn verify_decodes_every_block_by_the_sidecars_offsets_and_checks_its_slots() {
    let (_dir, store, _) = random_corpus(0x5eed_0049, false).await;
    crate::verify::verify(&store, None).await.unwrap();
    // Offsets shifted by a byte: a block no longer begins a message.
    with_sidecar_edited(&store, |_, offsets| {
        for o in offsets.iter_mut().skip(1).take(1) {
            *o += 1;
        }
    })
    .await;
    let err = crate::verify::verify(&store, None).await.unwrap_err();
    assert!(err.to_string().contains("block"), "{err}");
    let (_dir, store, _) = random_corpus(0x5eed_004a, false).await;
    // A slot that says its run starts a row later than it does.
    with_sidecar_edited(&store, |slots, _| slots[0].1.start += 1).await;
    let err = crate::verify::verify(&store, None).await.unwrap_err();
    assert!(err.to_string().contains("slots"), "{err}");
    // The index refuses a sidecar whose offsets do not fit its file at load.
    let (_dir, store, _) = random_corpus(0x5eed_004b, false).await;
    with_sidecar_edited(&store, |_, offsets| {
        offsets.pop();
    })
    .await;
    let err = Corpus::open(store).await.unwrap_err();
    assert!(err.to_string().contains("block offsets"), "{err}");
}

#[tokio::test]
async fn unchanged_eras_keep_their_access_objects_across_publishes() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let certs = vec![cert(
        Lane::CertifiedPit,
        "2024-12-01",
        "2025-01-31",
        "2024-10-01T00:00:00Z",
    )];
    let first = vec![
        edgar(
            "0000000001-24-000001",
            "1",
            Some("2024-12-10T15:00:00Z"),
            "2025-02-01T00:00:00Z",
        ),
        edgar(
            "0000000001-25-000001",
            "1",
            Some("2025-01-10T15:00:00Z"),
            "2025-02-01T00:00:00Z",
        ),
    ];
    publish(
        &store,
        ChangeSet {
            rows: first,
            certifications: certs,
            ..Default::default()
        },
        t("2025-02-01T00:00:00Z"),
    )
    .await
    .unwrap();
    let (_, m1) = store.current().await.unwrap();
    let later = vec![edgar(
        "0000000001-25-000002",
        "1",
        Some("2025-01-20T15:00:00Z"),
        "2025-02-02T00:00:00Z",
    )];
    publish(
        &store,
        ChangeSet {
            rows: later,
            ..Default::default()
        },
        t("2025-02-02T00:00:00Z"),
    )
    .await
    .unwrap();
    let (_, m2) = store.current().await.unwrap();
    let year = |m: &Manifest, y: &str| -> Vec<String> {
        m.access
            .iter()
            .filter(|e| e.path.contains(&format!("/{y}/")))
            .map(|e| e.path.clone())
            .collect()
    };
    // 2024 is the last year of the era of 2017, 2025 the first of the next.
    assert_eq!(
        year(&m1, "2017"),
        year(&m2, "2017"),
        "the era of 2024 was not touched"
    );
    assert!(!year(&m1, "2017").is_empty());
    assert_ne!(
        year(&m1, "2025"),
        year(&m2, "2025"),
        "the era of 2025 was derived again"
    );
    assert_eq!(
        m2.access
            .iter()
            .filter(|e| e.kind == KIND_CLUSTERED)
            .map(|e| e.row_count)
            .max(),
        Some(2),
        "one row added to a one-row era derives the era again"
    );
    crate::verify::verify(&store, None).await.unwrap();
}
