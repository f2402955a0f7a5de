//! An ingest into a large corpus reads what it touches, not the corpus: every object read goes
//! through a counting store, and the test names what may be read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use asof_engine::model::coverage::Scope;
use asof_engine::model::manifest::Manifest;
use asof_engine::read::corpus::{Entity, NewsQuery};
use asof_engine::{Answer, Corpus, CorpusStore, Day, Instant, Lane, SourceId, VisibleBy};
use asof_ingest::adapter::InputFile;
use asof_ingest::corpora::synthetic::{Spec, build};
use asof_ingest::pipeline::{Request, ingest};
use asof_test_support::counting::CountingStore;
use object_store::local::LocalFileSystem;

fn daily_index() -> InputFile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../snapshots/sources/sec.edgar/daily-index/company.20221003.idx");
    InputFile {
        name: "company.20221003.idx".into(),
        bytes: std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    }
}

/// The most GETs a day's publish sends for the id runs of its source-lane (measured: one).
const ID_RUN_GETS: usize = 1;

fn at(s: &str) -> Instant {
    Instant::parse(s).unwrap()
}

/// A synthetic EDGAR corpus of 60k rows over 500 days ending just after the daily index's day,
/// opened through a counting store.
async fn big_corpus(dir: &Path) -> (CorpusStore, CountingStore) {
    let spec = Spec {
        rows: 60_000,
        days: 500,
        ciks: 5_000,
        seed: 3,
        last_day: "2022-10-20".parse().unwrap(),
        certified_at: None,
        forward_days: 0,
    };
    build(&CorpusStore::local(dir).unwrap(), &spec, &|_| {})
        .await
        .unwrap();
    let counting = CountingStore::new(Arc::new(LocalFileSystem::new_with_prefix(dir).unwrap()));
    // A wrapped store has no conditional writes: publishers share an OS lock file instead.
    let store = CorpusStore::from_store(Arc::new(counting.clone()), dir.display().to_string())
        .with_publish_lock(dir.join("publish.lock"));
    (store, counting)
}

fn request(commit: &str) -> Request {
    Request {
        source: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        commit_time: at(commit),
        captured_at: None,
        certify: None,
        options: Default::default(),
        files: vec![daily_index().into()],
    }
}

fn partitions_read(counting: &CountingStore, m: &Manifest) -> Vec<Day> {
    let read = counting.reads_under("snapshots/partitions/");
    m.partitions
        .iter()
        .filter(|p| read.contains(&p.path))
        .map(|p| p.date)
        .collect()
}

#[tokio::test]
async fn one_days_ingest_into_a_large_corpus_reads_that_days_partition_and_no_access_file() {
    let dir = tempfile::tempdir().unwrap();
    let (store, counting) = big_corpus(dir.path()).await;
    let (_, before) = store.current().await.unwrap();
    assert!(before.partitions.len() > 400, "{}", before.partitions.len());
    counting.reset();

    let out = ingest(&store, request("2026-11-20T00:00:00Z"), &|_| {})
        .await
        .unwrap();
    assert!(out.published.changed);
    // 4,925 lines; a filing listed twice for one filer is one record.
    assert_eq!(
        out.published.rows_added + out.published.rows_unchanged,
        4925
    );
    let added = out.published.rows_added;
    let day: Day = "2022-10-03".parse().unwrap();
    assert_eq!(
        partitions_read(&counting, &before),
        vec![day],
        "only the day the index lists (rewritten with its rows); reads: {:?}",
        counting.reads().keys().collect::<Vec<_>>()
    );
    assert!(
        counting.reads_under("snapshots/access/").is_empty(),
        "the era's access files are not read: the rows become a delta file"
    );
    let (_, after) = store.current().await.unwrap();
    // 2022 lies in the era that begins in 2017.
    assert!(
        after.access.iter().any(|e| e
            .path
            .starts_with("snapshots/access/sec.edgar/certified_pit/2017/delta-")),
        "the era has a delta file"
    );
    // Nothing else was read but the pointer, manifests, the source-lane's id runs, its late
    // object (carried to the new version for the partitions that stayed), the partition the
    // version adds (the footer for its Delta commit's statistics, the `supersedes` pages for
    // the rule tables) and the parent's supersessions table of the source-lane (the new one
    // is that table and what the new partition supersedes; `asof_engine::rule`).
    let day_path = &before
        .partitions
        .iter()
        .find(|p| p.date == day)
        .unwrap()
        .path;
    let new_path = &after
        .partitions
        .iter()
        .find(|p| p.date == day)
        .unwrap()
        .path;
    for path in counting.reads().keys() {
        assert!(
            path == day_path
                || path == new_path
                || path.starts_with("manifests/")
                || path.starts_with("snapshots/ids/sec.edgar/certified_pit/")
                || path.starts_with("snapshots/late/sec.edgar/certified_pit/")
                || path.starts_with("snapshots/rule/sec.edgar/certified_pit/supersessions/"),
            "{path} was read"
        );
    }

    // Counted as S3 would be sent them (ranges coalesced, one GET each), the publisher's reads
    // of the source-lane's id runs and late object (issue 47, point 5). Measured today: the
    // run (60k entries) in one GET of the whole object, and the late object read twice (by the
    // publish, then again after it); the bounds hold that, so neither can grow unnoticed.
    let gets = counting.requests();
    let under = |prefix: &str| -> (usize, u64) {
        let hits: Vec<u64> = gets
            .iter()
            .filter(|(p, _)| p.starts_with(prefix))
            .map(|(_, b)| *b)
            .collect();
        (hits.len(), hits.iter().sum())
    };
    let (id_gets, id_bytes) = under("snapshots/ids/sec.edgar/certified_pit/");
    let (late_gets, late_bytes) = under("snapshots/late/sec.edgar/certified_pit/");
    let late_size =
        asof_engine::format::late::entry_of(&before, SourceId::SecEdgar, Lane::CertifiedPit)
            .unwrap()
            .bytes;
    assert!(
        late_gets <= 2 && late_bytes <= 2 * late_size,
        "the late object: {late_gets} GETs, {late_bytes} bytes of {late_size}"
    );
    assert!(id_gets <= ID_RUN_GETS, "{id_gets} GETs of id runs");
    // The rule tables: the parent's supersessions table of the source-lane, once; the coverage
    // table comes from the manifest alone.
    let (rule_gets, _) = under("snapshots/rule/");
    assert!(rule_gets <= 1, "{rule_gets} GETs of rule tables");
    assert!(id_bytes <= 800_000, "{id_bytes} bytes of id runs");

    // The same file again: nothing new, and again only that day is read.
    counting.reset();
    let again = ingest(&store, request("2026-11-21T00:00:00Z"), &|_| {})
        .await
        .unwrap();
    assert!(!again.published.changed);
    assert_eq!(again.published.rows_unchanged, 4925);
    assert!(added > 4_900);
    let (_, now) = store.current().await.unwrap();
    assert_eq!(partitions_read(&counting, &now), vec![day]);

    // The index path (base plus delta) and the scan over partitions give the same first pages
    // for the filers of that day, and the day's filings are found.
    let fast = Corpus::open(store.clone()).await.unwrap();
    let mut scan = Corpus::open(store.clone()).await.unwrap();
    scan.set_read_path(asof_engine::read::corpus::ReadPath::Scan);
    let ids = |a: Answer<asof_engine::NewsRow>| match a {
        Answer::Page { rows, .. } => rows.into_iter().map(|r| r.id).collect::<Vec<_>>(),
        Answer::Hole { coverage } => panic!("a hole: {:?}", coverage.missing),
    };
    let index = std::str::from_utf8(&daily_index().bytes)
        .unwrap()
        .to_owned();
    let mut ciks: Vec<String> = index
        .lines()
        .filter_map(|l| {
            l.split("edgar/data/")
                .nth(1)?
                .split('/')
                .next()
                .map(str::to_owned)
        })
        .collect();
    ciks.sort();
    ciks.dedup();
    let mut found = 0;
    for cik in ciks.iter().step_by(100) {
        let q = NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: at("2022-10-10T00:00:00Z"),
            entity: Entity::Cik(cik.clone()),
            after: None,
            limit: 20,
        };
        let got = ids(fast.news(&q, Scope::Corpus).await.unwrap());
        found += got
            .iter()
            .filter(|id| id.ends_with(&format!("_{cik}")))
            .count();
        assert_eq!(
            got,
            ids(scan.news(&q, Scope::Corpus).await.unwrap()),
            "{cik}"
        );
    }
    assert!(found >= ciks.len() / 100, "{found}");
    asof_engine::verify::verify(&store, None).await.unwrap();
}

/// An all-rows page (no ticker or CIK) walks partitions in day order from its position and
/// stops when it is full: on a corpus of 500 days, a page reads the few days it returns rows
/// from, whatever the cut, the clock or the position.
#[tokio::test]
async fn an_all_rows_page_reads_the_days_it_answers_from_not_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let (store, counting) = big_corpus(dir.path()).await;
    let corpus = Corpus::open(store.clone()).await.unwrap();
    let mut scan = Corpus::open(store).await.unwrap();
    scan.set_read_path(asof_engine::read::corpus::ReadPath::Scan);
    let days: Vec<Day> = corpus
        .manifest()
        .partitions
        .iter()
        .map(|p| p.date)
        .collect();
    assert!(days.len() > 400);
    let page = |a: Answer<asof_engine::NewsRow>| match a {
        Answer::Page { rows, next, .. } => (rows, next),
        Answer::Hole { coverage } => panic!("a hole: {:?}", coverage.missing),
    };
    // (On `committed_at` every cut of this corpus is a hole: it is certified on its commit
    // instant, after its last day. The walk's other clocks are held by the engine's tests.)
    for (clock, as_of) in [(VisibleBy::PublishedAt, "2022-10-10T00:00:00Z")] {
        let mut q = NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: clock,
            start: None,
            as_of: at(as_of),
            entity: Entity::All,
            after: None,
            limit: 100,
        };
        let mut pages = 0;
        while pages < 40 {
            counting.reset();
            let (rows, next) = page(corpus.news(&q, Scope::Corpus).await.unwrap());
            assert_eq!(rows.len(), 100);
            let read = partitions_read(&counting, corpus.manifest());
            let first = rows[0].published_at.unwrap().day();
            let last = rows[99].published_at.unwrap().day();
            // The days of the page's rows, and at most the next held day (its 101st row).
            assert!(
                read.iter().all(|d| *d >= first)
                    && read.len()
                        <= 1 + days.iter().filter(|d| **d >= first && **d <= last).count() + 1,
                "{clock:?} page {pages}: rows {first}..{last}, read {read:?}"
            );
            // The same page as the DataFusion scan over every partition gives.
            if pages % 8 == 0 {
                let (want, want_next) = page(scan.news(&q, Scope::Corpus).await.unwrap());
                let ids = |r: &[asof_engine::NewsRow]| {
                    r.iter().map(|r| r.revision_id.clone()).collect::<Vec<_>>()
                };
                assert_eq!(ids(&rows), ids(&want), "{clock:?} page {pages}");
                assert_eq!(next, want_next);
            }
            pages += 1;
            // Jump ahead: every fourth page starts 40 days later.
            q.after = next;
            if pages % 4 == 0 {
                let later = last.start().micros() + 40 * 86_400_000_000;
                q.after = Some(asof_engine::Position {
                    published_at: Some(Instant::from_micros(later)),
                    id: String::new(),
                });
            }
        }
    }
    // A one-day window on `published_at` reads that day.
    for (clock, end, most) in [(VisibleBy::PublishedAt, "2022-06-15T00:00:00Z", 1)] {
        counting.reset();
        let q = NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: clock,
            start: Some(at("2022-06-14T00:00:00Z")),
            as_of: at(end),
            entity: Entity::All,
            after: None,
            limit: 1000,
        };
        let (rows, _) = page(corpus.news(&q, Scope::Corpus).await.unwrap());
        assert!(!rows.is_empty());
        let read = partitions_read(&counting, corpus.manifest());
        assert!(
            !read.is_empty() && read.len() <= most,
            "{clock:?}: {read:?}"
        );
    }
}
