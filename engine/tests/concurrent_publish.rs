//! Concurrent publishers on one local corpus: the pointer moves only by compare-and-swap, a
//! publisher that loses the race rebases, so no version is lost and the chain stays linear.

mod common;

use asof_engine::store::POINTER;
use asof_engine::write::publish::{ChangeSet, publish};
use asof_engine::{CorpusStore, Error};
use common::{at, race, row};

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
