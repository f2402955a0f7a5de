//! `asof poll --backfill` through the library: daily indexes served by a local EDGAR stand-in,
//! published in batches, and a run stopped part-way that resumes to the version an
//! uninterrupted run reaches, fetching nothing twice.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use asof_engine::{CorpusStore, Day, Instant, Lane, SourceId};
use asof_ingest::poll::{Backfill, BackfillReport, Config, Poller};
use asof_test_support::edgar_archive::{archive, business_days, date};
use asof_test_support::feed::{Feed, serve};

const UA: &str = "asof tests admin@example.com";

async fn feed() -> String {
    let feed = Arc::new(Feed::default());
    *feed.archives.lock().unwrap() = archive(date("2024-01-01"), date("2024-02-29"), 40, 7)
        .into_iter()
        .collect();
    serve(feed).await
}

fn plan() -> Backfill {
    Backfill {
        from: "2024-01-01".parse().unwrap(),
        to: "2024-02-29".parse().unwrap(),
        batch_days: 10,
        commit_time: Instant::parse("2026-11-25T00:00:00Z").unwrap(),
    }
}

async fn run(base: &str, store: &CorpusStore, stop_after_batches: Option<usize>) -> BackfillReport {
    let mut cfg = Config::new(base, UA, 10).unwrap();
    cfg.backoff = std::time::Duration::from_millis(10);
    let mut poller = Poller::new(cfg).unwrap();
    let batches = AtomicUsize::new(0);
    poller
        .backfill(
            store,
            &plan(),
            &|_| {
                batches.fetch_add(1, Ordering::SeqCst);
            },
            &|| stop_after_batches.is_some_and(|n| batches.load(Ordering::SeqCst) >= n),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn a_stopped_backfill_resumes_to_the_version_of_an_uninterrupted_one() {
    let base = feed().await;
    let weekdays: BTreeSet<Day> = business_days(date("2024-01-01"), date("2024-02-29"))
        .into_iter()
        .map(Day::from_date)
        .collect();

    let whole_dir = tempfile::tempdir().unwrap();
    let whole_store = CorpusStore::local(whole_dir.path()).unwrap();
    let whole = run(&base, &whole_store, None).await;
    assert_eq!(whole.stopped_at, None);
    assert_eq!(whole.batches, 6, "60 days in batches of 10");
    assert_eq!(whole.versions.len(), 6, "one publish per batch");
    assert_eq!(
        whole.indexed.iter().copied().collect::<BTreeSet<_>>(),
        weekdays
    );
    // Weekends are certified empty on the quarter's listing: the first batch's listing covers
    // every weekend up to the quarter's last listed day, so later batches skip theirs.
    assert_eq!(
        whole.empty.len() + whole.skipped_days,
        60 - weekdays.len(),
        "weekends certified empty"
    );
    assert!(!whole.empty.is_empty());
    assert_eq!(whole.rows, weekdays.len() * 40);
    let (version, m) = whole_store.current().await.unwrap();
    let spans: Vec<(Day, Day, usize)> = m
        .spans
        .iter()
        .filter(|s| s.source_id == SourceId::SecEdgar && s.lane == Lane::CertifiedPit)
        .map(|s| (s.first, s.last, s.holes.len()))
        .collect();
    assert_eq!(
        spans,
        vec![(plan().from, plan().to, 0)],
        "every day certified"
    );

    // Stopped after two batches: the third is abandoned before anything of it is published.
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let first = run(&base, &store, Some(2)).await;
    assert_eq!(first.stopped_at, Some("2024-01-21".parse().unwrap()));
    assert_eq!(first.versions.len(), 2);
    let resumed = run(&base, &store, None).await;
    assert_eq!(resumed.stopped_at, None);
    assert!(
        resumed
            .indexed
            .iter()
            .all(|d| *d >= "2024-01-21".parse().unwrap()),
        "the two published batches are not fetched again"
    );
    let fetched: Vec<Day> = first
        .indexed
        .iter()
        .chain(&resumed.indexed)
        .copied()
        .collect();
    assert_eq!(fetched.len(), weekdays.len(), "no day fetched twice");
    assert_eq!(fetched.into_iter().collect::<BTreeSet<_>>(), weekdays);
    assert_eq!(first.rows + resumed.rows, whole.rows);
    assert_eq!(store.current_version().await.unwrap(), Some(version));

    // A run over a span already certified publishes nothing.
    let again = run(&base, &store, None).await;
    assert_eq!((again.batches, again.skipped_days), (0, 60));
    assert!(again.versions.is_empty());
}

#[tokio::test]
async fn a_backfill_of_days_not_finished_is_refused_before_any_request() {
    let mut cfg = Config::new("http://127.0.0.1:9", UA, 10).unwrap();
    cfg.attempts = 1;
    let mut poller = Poller::new(cfg).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let mut p = plan();
    p.to = p.commit_time.day();
    let err = poller
        .backfill(&store, &p, &|_| {}, &|| false)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("finished days only"), "{err}");
}
