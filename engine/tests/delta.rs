//! The Delta logs beside the partitions, through the real publish path into a temp directory:
//! what each commit holds, the version mapping, and the checks that keep the log honest.

mod common;

use std::collections::BTreeSet;

use asof_engine::format::delta::{self, Action};
use asof_engine::model::manifest::Certification;
use asof_engine::read::delta::DeltaLog;
use asof_engine::write::publish::{ChangeSet, publish};
use asof_engine::{CorpusStore, Lane, Manifest, SourceId};
use common::{at, row};

const OFAC: (SourceId, Lane) = (SourceId::OfacSdn, Lane::CertifiedPit);

async fn publish_rows(store: &CorpusStore, rows: Vec<asof_engine::NewsRow>) -> String {
    let p = publish(
        store,
        ChangeSet {
            rows,
            ..Default::default()
        },
        at("2026-01-05T00:00:00Z"),
    )
    .await
    .unwrap();
    assert!(p.changed);
    p.version
}

/// Paths of the table's partitions in a version, relative to the table's root.
fn table_paths(m: &Manifest) -> BTreeSet<String> {
    let root = format!("{}/", delta::table_root(OFAC.0, OFAC.1));
    m.partitions
        .iter()
        .filter(|p| (p.source_id, p.lane) == OFAC)
        .map(|p| p.path.strip_prefix(&root).unwrap().to_owned())
        .collect()
}

fn commit_file(dir: &std::path::Path, version: u64) -> std::path::PathBuf {
    dir.join(delta::commit_path(OFAC.0, OFAC.1, version))
}

/// Two versions: three days, then more rows on the first day (its partition rewritten).
async fn two_versions(store: &CorpusStore) -> (String, String) {
    let v1 = publish_rows(store, (0..3).map(|n| row(0, n)).collect()).await;
    let v2 = publish_rows(store, vec![row(1, 3)]).await;
    (v1, v2)
}

#[tokio::test]
async fn a_rewritten_day_is_a_remove_and_an_add_and_each_table_version_lists_its_corpus_versions_partitions()
 {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let (v1, v2) = two_versions(&store).await;
    let (m1, m2) = (
        store.manifest(&v1).await.unwrap(),
        store.manifest(&v2).await.unwrap(),
    );
    let key = delta::table_key(OFAC.0, OFAC.1);
    assert_eq!(m1.delta.as_ref().unwrap()[&key], 0);
    assert_eq!(m2.delta.as_ref().unwrap()[&key], 1);

    let mut log = DeltaLog::new(delta::Table::Records(OFAC.0, OFAC.1));
    log.extend(&store, 1).await.unwrap();
    for (n, (v, m)) in [(&v1, &m1), (&v2, &m2)].into_iter().enumerate() {
        let st = log.state(n as u64).unwrap();
        assert_eq!(&st.corpus_version, v);
        assert_eq!(
            st.files.keys().cloned().collect::<BTreeSet<_>>(),
            table_paths(m)
        );
        for add in st.files.values() {
            let p = m
                .partitions
                .iter()
                .find(|p| p.path.ends_with(&add.path))
                .unwrap();
            assert_eq!(add.size, p.bytes);
            assert_eq!(add.partition_values["date"], p.date.to_string());
            let stats: serde_json::Value = serde_json::from_str(&add.stats).unwrap();
            assert_eq!(stats["numRecords"], p.row_count);
            let min = p.clocks.published_at.min.unwrap().to_string();
            assert_eq!(
                stats["minValues"]["published_at"],
                format!("{}.000Z", min.trim_end_matches('Z'))
            );
        }
    }
    // Version 1 removes the first day's old file and adds its rewrite; nothing else.
    let one = delta::decode("c", &std::fs::read(commit_file(dir.path(), 1)).unwrap()).unwrap();
    let removes: Vec<_> = one
        .iter()
        .filter(|a| matches!(a, Action::Remove(_)))
        .collect();
    let adds: Vec<_> = one.iter().filter(|a| matches!(a, Action::Add(_))).collect();
    assert_eq!((removes.len(), adds.len()), (1, 1));
    assert!(
        !one.iter()
            .any(|a| matches!(a, Action::MetaData(_) | Action::Protocol(_)))
    );

    // Beside it, the source-lane's supersessions table (no span yet, so no coverage table):
    // created by v1 and left alone by v2, which corrects nothing.
    let sup = "us.ofac.sdn/certified_pit/supersessions";
    assert_eq!(m1.delta.as_ref().unwrap()[sup], 0);
    assert_eq!(m2.delta.as_ref().unwrap()[sup], 0);
    let checked = asof_engine::write::delta::check(&store, &v2).await.unwrap();
    assert_eq!((checked.tables, checked.commits, checked.behind), (2, 3, 0));
}

#[tokio::test]
async fn a_publish_that_leaves_a_table_alone_keeps_its_version_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let (_, v2) = two_versions(&store).await;
    let certified = publish(
        &store,
        ChangeSet {
            certifications: vec![Certification {
                source_id: SourceId::OfacSdn,
                lane: Lane::CertifiedPit,
                from: "2026-01-01".parse().unwrap(),
                to: "2026-01-01".parse().unwrap(),
                certified_at: at("2026-01-05T00:00:00Z"),
                evidence: vec![],
            }],
            ..Default::default()
        },
        at("2026-01-06T00:00:00Z"),
    )
    .await
    .unwrap();
    assert!(certified.changed);
    assert_ne!(certified.version, v2);
    let m = store.manifest(&certified.version).await.unwrap();
    let (now, before) = (
        m.delta.unwrap(),
        store.manifest(&v2).await.unwrap().delta.unwrap(),
    );
    // The records and supersessions tables keep their versions; the certification gives the
    // source-lane a span, so its coverage table starts.
    let coverage = "us.ofac.sdn/certified_pit/coverage";
    let mut expected = before.clone();
    expected.insert(coverage.into(), 0);
    assert_eq!(now, expected, "only the coverage table changed");
    assert!(!commit_file(dir.path(), 2).exists());
    let checked = asof_engine::write::delta::check(&store, &certified.version)
        .await
        .unwrap();
    assert_eq!((checked.commits, checked.behind), (4, 0));
}

#[tokio::test]
async fn a_commit_that_differs_from_its_corpus_version_fails_the_check_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let (_, v2) = two_versions(&store).await;
    let path = commit_file(dir.path(), 1);
    let text = std::fs::read_to_string(&path).unwrap();
    // Drop the remove: version 1 would then list the first day twice.
    let kept: String = text
        .lines()
        .filter(|l| !l.starts_with("{\"remove\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(kept, text);
    std::fs::write(&path, kept).unwrap();
    let err = asof_engine::write::delta::check(&store, &v2)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("00000000000000000001.json"), "{err}");
    assert!(err.contains(&v2), "{err}");
}

#[tokio::test]
async fn a_log_behind_its_pointer_is_reported_and_written_again_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let (_, v2) = two_versions(&store).await;
    let path = commit_file(dir.path(), 1);
    let original = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let checked = asof_engine::write::delta::check(&store, &v2).await.unwrap();
    assert_eq!((checked.commits, checked.behind), (2, 1));
    let synced = asof_engine::write::delta::sync(&store, &v2).await.unwrap();
    assert_eq!(synced.commits, 1);
    assert_eq!(std::fs::read(&path).unwrap(), original);
    assert_eq!(
        asof_engine::write::delta::sync(&store, &v2)
            .await
            .unwrap()
            .commits,
        0,
        "idempotent"
    );

    // A hole is not a lag: version 0 missing under a present version 1 is a fault.
    std::fs::remove_file(commit_file(dir.path(), 0)).unwrap();
    let err = asof_engine::write::delta::check(&store, &v2)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("after a missing one"), "{err}");
}

#[tokio::test]
async fn racing_writers_of_a_whole_missing_log_write_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let (_, v2) = two_versions(&store).await;
    let log_dir = dir
        .path()
        .join(delta::table_root(OFAC.0, OFAC.1))
        .join(delta::LOG_DIR);
    let before: Vec<Vec<u8>> = (0..2)
        .map(|n| std::fs::read(commit_file(dir.path(), n)).unwrap())
        .collect();
    std::fs::remove_dir_all(&log_dir).unwrap();
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let (store, v2) = (store.clone(), v2.clone());
            tokio::spawn(async move { asof_engine::write::delta::sync(&store, &v2).await })
        })
        .collect();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    for (n, bytes) in before.iter().enumerate() {
        assert_eq!(
            &std::fs::read(commit_file(dir.path(), n as u64)).unwrap(),
            bytes
        );
    }
    assert_eq!(
        asof_engine::write::delta::check(&store, &v2)
            .await
            .unwrap()
            .behind,
        0
    );
}
