//! Superseded revisions of a version (which revision ids later revisions replaced, and when),
//! gathered per partition so a reload reads only the partitions the new version adds.
//!
//! Why per partition: partitions are immutable and content-addressed, so what one holds never
//! changes under its path. A version's map is the union of its partitions' findings (the
//! earliest superseding commit wins), which a reload rebuilds from the previous version's
//! findings plus the new partitions' own, instead of scanning every partition again. Lanes whose
//! every partition is in an access file take their supersessions from the sidecars instead
//! ([`AccessIndex::supersessions`]), which carry them for exactly those rows.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, StringArray, TimestampMicrosecondArray};
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::ProjectionMask;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;

use crate::error::{Error, Result};
use crate::format::rule::Superseding;
use crate::model::clock::Instant;
use crate::model::cut::Superseded;
use crate::model::manifest::{Manifest, PartitionEntry};
use crate::read::access::AccessIndex;
use crate::store::CorpusStore;

/// What one partition supersedes: (superseded revision id, commit instant of the row that
/// superseded it), in stored order. Empty for most partitions.
pub(crate) type Found = Arc<[(Box<str>, Instant)]>;

/// Per-partition findings by partition path.
pub(crate) type ByPartition = HashMap<String, Found>;

/// Partitions read at once on a first open (a store over the network answers each footer
/// request in a round trip).
const READ_AHEAD: usize = 16;

/// Gathers the supersessions of `manifest`: from the sidecars for lanes `access` covers, from
/// each other partition otherwise, taking a partition's findings from `previous` when it lists
/// the same path. Returns the merged map and the per-partition findings to carry forward.
pub(crate) async fn gather(
    store: &CorpusStore,
    manifest: &Manifest,
    access: Option<&AccessIndex>,
    previous: Option<&ByPartition>,
) -> Result<(Superseded, ByPartition)> {
    let covered = |p: &PartitionEntry| access.is_some_and(|a| a.covers(p.source_id, p.lane));
    let wanted: Vec<&PartitionEntry> = manifest.partitions.iter().filter(|p| !covered(p)).collect();
    let mut by_partition = ByPartition::with_capacity(wanted.len());
    let mut to_read = Vec::new();
    for p in wanted {
        match previous.and_then(|prev| prev.get(&p.path)) {
            Some(found) => {
                by_partition.insert(p.path.clone(), Arc::clone(found));
            }
            None => to_read.push(p),
        }
    }
    // The futures are made by an `async fn`, not a closure's async block: a stream of those
    // is not `Send` to the compiler (a higher-ranked lifetime it cannot prove), and
    // `asof sql`'s table functions, which gather here too, must be.
    let reads: Vec<_> = to_read.into_iter().map(|p| found_in(store, p)).collect();
    let read: Vec<(String, Found)> = futures::stream::iter(reads)
        .buffer_unordered(READ_AHEAD)
        .try_collect()
        .await?;
    by_partition.extend(read);

    let mut merged = Superseded::default();
    let mut note = |rev: &str, at: Instant| {
        merged
            .entry(rev.to_owned())
            .and_modify(|w: &mut Instant| *w = (*w).min(at))
            .or_insert(at);
    };
    if let Some(a) = access {
        for (rev, at) in a.supersessions() {
            note(rev, at);
        }
    }
    for found in by_partition.values() {
        for (rev, at) in found.iter() {
            note(rev, *at);
        }
    }
    Ok((merged, by_partition))
}

/// One partition's path and findings.
async fn found_in(store: &CorpusStore, p: &PartitionEntry) -> Result<(String, Found)> {
    Ok((p.path.clone(), read_partition(store, p).await?))
}

/// Reads the `supersedes` and `committed_at` columns of one partition, and nothing when its
/// footer's statistics say `supersedes` is null throughout (the common case).
async fn read_partition(store: &CorpusStore, p: &PartitionEntry) -> Result<Found> {
    let mut found = Vec::new();
    for row in superseding_rows(store, p).await? {
        found.push((row.supersedes.into_boxed_str(), row.committed_at));
    }
    Ok(found.into())
}

/// The rows of one partition that supersede a revision, in stored order: the footer, then
/// only the `supersedes`, `committed_at`, `revision_id` and `id` pages of the row groups,
/// and nothing past the footer when its statistics say `supersedes` is null throughout (the
/// common case; a golden copy's day is gigabytes, its `supersedes` a few kilobytes). The one
/// reading of supersessions off the stored rows: the loaded version's map and the exported
/// rule tables (`crate::rule`) both come from it.
pub(crate) async fn superseding_rows(
    store: &CorpusStore,
    p: &PartitionEntry,
) -> Result<Vec<Superseding>> {
    let bad = |why: &str| Error::integrity(&p.path, why.to_owned());
    let reader = crate::read::ranged::reader(store, p);
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
    let leaves = builder.parquet_schema();
    let sup = leaves
        .columns()
        .iter()
        .position(|c| c.name() == "supersedes")
        .ok_or_else(|| bad("no supersedes column"))?;
    let none = builder.metadata().row_groups().iter().all(|rg| {
        rg.column(sup)
            .statistics()
            .and_then(|s| s.null_count_opt())
            .is_some_and(|n| n == rg.num_rows() as u64)
    });
    if none {
        return Ok(Vec::new());
    }
    let mask = ProjectionMask::columns(leaves, ["supersedes", "committed_at", "revision_id", "id"]);
    let mut batches = builder.with_projection(mask).build()?;
    let mut found = Vec::new();
    while let Some(batch) = batches.try_next().await? {
        let text = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| bad(&format!("{name} is not utf8")))
        };
        let (revs, by, ids) = (text("supersedes")?, text("revision_id")?, text("id")?);
        let at = batch
            .column_by_name("committed_at")
            .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
            .ok_or_else(|| bad("committed_at is not a timestamp"))?;
        for i in 0..batch.num_rows() {
            if revs.is_valid(i) {
                if !at.is_valid(i) {
                    return Err(bad("a superseding row without committed_at"));
                }
                found.push(Superseding {
                    supersedes: revs.value(i).to_owned(),
                    revision_id: by.value(i).to_owned(),
                    id: ids.value(i).to_owned(),
                    committed_at: Instant::from_micros(at.value(i)),
                });
            }
        }
    }
    Ok(found)
}

/// Where one partition stores each revision of `wanted` it holds: (revision id, row index
/// from 0), reading only the `revision_id` pages. What the rule tables place superseded
/// revisions by (`crate::rule::tables`), for the partitions a publish must place them in.
pub(crate) async fn rows_holding(
    store: &CorpusStore,
    p: &PartitionEntry,
    wanted: &std::collections::HashSet<&str>,
) -> Result<Vec<(String, i64)>> {
    let reader = crate::read::ranged::reader(store, p);
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
    let mask = ProjectionMask::columns(builder.parquet_schema(), ["revision_id"]);
    let mut batches = builder.with_projection(mask).build()?;
    let (mut found, mut row) = (Vec::new(), 0i64);
    while let Some(batch) = batches.try_next().await? {
        let revs = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| Error::integrity(&p.path, "revision_id is not utf8".to_owned()))?;
        for i in 0..batch.num_rows() {
            if wanted.contains(revs.value(i)) {
                found.push((revs.value(i).to_owned(), row + i as i64));
            }
        }
        row += batch.num_rows() as i64;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::clock::{Lane, SourceId};
    use crate::model::identity::{FORMAT, IdentityFile, TickerInterval};
    use crate::model::record::NewsRow;
    use crate::read::corpus::Corpus;
    use crate::testkit::{edgar, t};
    use crate::write::publish::{ChangeSet, publish};

    /// A Federal Register row: a lane no access file covers.
    fn notice(id: &str, published: &str, committed: &str) -> NewsRow {
        let mut r = edgar(id, "1", Some(published), committed);
        r.id = id.into();
        r.source_id = SourceId::FederalRegisterPi;
        r.lane = Lane::ForwardFirstSeen;
        r.cik = None;
        r.entity_id = None;
        r.form = None;
        r.acceptance_at = None;
        r
    }

    fn identity(ticker: &str) -> IdentityFile {
        IdentityFile {
            format: FORMAT.into(),
            evidence: vec![],
            tickers: vec![TickerInterval {
                ticker: ticker.into(),
                cik: "1".into(),
                valid_from: t("2026-01-01T00:00:00Z"),
                valid_to: t("2026-02-01T00:00:00Z"),
                evidence: vec![],
            }],
            names: vec![],
        }
    }

    async fn put(store: &CorpusStore, changes: ChangeSet, at: &str) -> String {
        let p = publish(store, changes, t(at)).await.unwrap();
        assert!(p.changed);
        p.version
    }

    /// Three versions: rows in an access-file lane and in one without; then corrections of
    /// both and a new day, identity unchanged; then a new identity file.
    async fn three_versions() -> (tempfile::TempDir, CorpusStore, [String; 3]) {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let v1 = put(
            &store,
            ChangeSet {
                rows: vec![
                    edgar(
                        "0000000001-26-000001",
                        "1",
                        Some("2026-01-05T16:00:00Z"),
                        "2026-01-06T00:00:00Z",
                    ),
                    notice("2026-00001", "2026-01-05T09:00:00Z", "2026-01-05T10:00:00Z"),
                    notice("2026-00002", "2026-01-06T09:00:00Z", "2026-01-06T10:00:00Z"),
                ],
                identity: Some(identity("ONE")),
                ..Default::default()
            },
            "2026-03-01T00:00:00Z",
        )
        .await;
        let v2 = put(
            &store,
            ChangeSet {
                rows: vec![
                    edgar(
                        "0000000001-26-000001",
                        "1",
                        Some("2026-01-05T21:00:00Z"),
                        "2026-01-20T00:00:00Z",
                    ),
                    notice("2026-00001", "2026-01-05T09:30:00Z", "2026-01-21T00:00:00Z"),
                    notice("2026-00003", "2026-01-09T09:00:00Z", "2026-01-21T00:00:00Z"),
                ],
                ..Default::default()
            },
            "2026-03-02T00:00:00Z",
        )
        .await;
        let v3 = put(
            &store,
            ChangeSet {
                identity: Some(identity("TWO")),
                ..Default::default()
            },
            "2026-03-03T00:00:00Z",
        )
        .await;
        (dir, store, [v1, v2, v3])
    }

    #[tokio::test]
    async fn gathering_partition_by_partition_finds_what_a_scan_over_every_partition_finds() {
        let (_d, store, [_, v2, _]) = three_versions().await;
        let c = Corpus::open_version(store.clone(), &v2).await.unwrap();
        let scanned = c.scan_supersessions().await.unwrap();
        assert_eq!(scanned.len(), 2, "one correction in each lane: {scanned:?}");
        assert!(c.access.is_some(), "sec.edgar has access files");
        assert_eq!(
            *c.superseded, scanned,
            "sidecars for sec.edgar, partitions for the rest"
        );
        let (every_partition, _) = gather(&store, c.manifest(), None, None).await.unwrap();
        assert_eq!(
            every_partition, scanned,
            "no access files: every partition read"
        );
    }

    /// Versions held side by side (pinned reads) hold what they share once: each partition
    /// entry both list, and the superseded map when no publish between them corrected anything.
    #[tokio::test]
    async fn a_version_opened_after_another_holds_their_shared_entries_and_map_once() {
        let (_d, store, [v1, v2, _]) = three_versions().await;
        let c1 = Corpus::open_version(store.clone(), &v1).await.unwrap();
        let again = Corpus::open_after(
            store.clone(),
            &v1,
            store.manifest(&v1).await.unwrap(),
            Some(&c1),
        )
        .await
        .unwrap();
        assert!(Arc::ptr_eq(&c1.superseded, &again.superseded));
        let m2 = store.manifest(&v2).await.unwrap();
        let c2 = Corpus::open_after(store.clone(), &v2, m2, Some(&c1))
            .await
            .unwrap();
        let fresh2 = Corpus::open_version(store.clone(), &v2).await.unwrap();
        assert_eq!(
            c2.manifest(),
            fresh2.manifest(),
            "the same manifest, wherever it lives"
        );
        let shared = c2
            .manifest()
            .partitions
            .iter()
            .filter(|p| {
                c1.manifest()
                    .partitions
                    .iter()
                    .any(|q| std::ptr::eq::<crate::model::manifest::Partition>(&***p, &**q))
            })
            .count();
        let listed_by_both = c2
            .manifest()
            .partitions
            .iter()
            .filter(|p| c1.manifest().partitions.contains(p))
            .count();
        assert!(listed_by_both > 0);
        assert_eq!(shared, listed_by_both, "every entry both list is held once");
    }

    #[tokio::test]
    async fn a_version_opened_after_another_takes_over_what_they_share_and_answers_as_if_fresh() {
        let (_d, store, [v1, v2, v3]) = three_versions().await;
        let c1 = Corpus::open_version(store.clone(), &v1).await.unwrap();
        let m2 = store.manifest(&v2).await.unwrap();
        let c2 = Corpus::open_after(store.clone(), &v2, m2, Some(&c1))
            .await
            .unwrap();
        let fresh2 = Corpus::open_version(store.clone(), &v2).await.unwrap();

        assert!(
            Arc::ptr_eq(&c1.identity, &c2.identity),
            "same identity object: index shared"
        );
        assert_eq!(c2.superseded, fresh2.superseded);
        assert_eq!(*c2.superseded, fresh2.scan_supersessions().await.unwrap());
        assert_eq!(c2.superseded.len(), 2);
        let carried = c1
            .supersessions
            .iter()
            .filter(|(path, found)| {
                c2.supersessions
                    .get(*path)
                    .is_some_and(|f| Arc::ptr_eq(f, found))
            })
            .count();
        assert!(
            carried > 0,
            "partitions both versions list are not read again"
        );
        assert_eq!(c2.supersessions.len(), fresh2.supersessions.len());

        let m3 = store.manifest(&v3).await.unwrap();
        let c3 = Corpus::open_after(store.clone(), &v3, m3, Some(&c2))
            .await
            .unwrap();
        let fresh3 = Corpus::open_version(store, &v3).await.unwrap();
        assert!(
            !Arc::ptr_eq(&c2.identity, &c3.identity),
            "a new identity object is read"
        );
        assert_eq!(c3.identity().file(), fresh3.identity().file());
        assert_eq!(
            c3.identity()
                .ticker_at("TWO", t("2026-01-10T00:00:00Z"))
                .len(),
            1
        );
        assert!(
            c3.identity()
                .ticker_at("ONE", t("2026-01-10T00:00:00Z"))
                .is_empty()
        );
        assert_eq!(c3.superseded, fresh3.superseded);
    }

    /// The drift the SQL functions once had: they skipped a superseding row without
    /// `committed_at` where a load refused it. Publish never writes one; a partition forged
    /// with one (written over its own path, as a damaged store would hold it) is refused by
    /// both readings alike, since `asof sql` now takes the version's map from here.
    #[tokio::test]
    async fn a_superseding_row_without_a_commit_fails_a_load_and_asof_sql_alike() {
        let (dir, store, _) = crate::testkit::random_corpus(0x61_05, false).await;
        let (_, manifest) = store.current().await.unwrap();
        let query = "SELECT id || '/' || revision_id FROM news_asof('2025-03-20T00:00:00Z')";
        let rows = crate::sql::run_on(&store, &manifest, query).await.unwrap();
        assert!(
            rows.iter().map(|b| b.num_rows()).sum::<usize>() > 0,
            "a covered cut"
        );

        let mut forged = None;
        for p in &manifest.partitions {
            let rows = crate::store::objects::read_partition(&store, p)
                .await
                .unwrap();
            if rows.iter().any(|r| r.supersedes.is_some()) {
                forged = Some((p.clone(), rows));
                break;
            }
        }
        let (p, mut rows) = forged.expect("the corrections supersede revisions");
        for r in rows.iter_mut().filter(|r| r.supersedes.is_some()) {
            r.committed_at = None;
        }
        let batch = crate::model::record::to_batch(&rows).unwrap();
        let mut bytes = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            &mut bytes,
            batch.schema(),
            Some(crate::format::partition::writer_properties()),
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        // The manifest as it would list those bytes (readers take the size from it).
        let mut manifest = manifest.clone();
        let entry = manifest
            .partitions
            .iter_mut()
            .find(|e| e.path == p.path)
            .unwrap()
            .edit();
        entry.bytes = bytes.len() as u64;
        entry.sha256 = crate::store::hashing::sha256_hex(&bytes);
        let file = dir.path().join(&p.path);
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, bytes).unwrap();

        let load = gather(&store, &manifest, None, None).await.unwrap_err();
        assert!(
            load.to_string()
                .contains("a superseding row without committed_at"),
            "{load}"
        );
        let sql = crate::sql::run_on(&store, &manifest, query)
            .await
            .unwrap_err();
        assert!(
            sql.to_string()
                .contains("a superseding row without committed_at"),
            "{sql}"
        );
    }
}
