//! The rule tables derived at publish, and held to the partitions by `asof verify`: each
//! source-lane's `supersessions` (each superseded revision placed by file name and row) and
//! `coverage` (a function of the manifest). What they hold, and their layout, in
//! `crate::format::rule`.
//!
//! **Cost.** A version's supersessions are its parent's plus those of the partitions it lists
//! and its parent did not (partitions only grow, so a rewritten day's old rows are in the
//! parent's table already): a publish reads its parent's table and the `supersedes` pages of
//! the partitions it wrote, never the corpus. A source-lane whose parent has no table (a corpus
//! published before the tables existed) reads its partitions' footers once, and the
//! `supersedes` pages of the few partitions that hold a correction. The coverage table is a
//! function of the manifest alone.
//!
//! [`Cut::plan`]: crate::model::cut::Cut::plan

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::format::rule::*;
use crate::model::clock::{Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::read::corpus::supersessions::{rows_holding, superseding_rows};
use crate::store::CorpusStore;
use crate::store::hashing::sha256_hex;

/// Partitions whose superseding rows are read at once (a store over the network answers each
/// footer in a round trip).
const READ_AHEAD: usize = 16;

/// Stores `bytes` as the source-lane's table of its kind and lists it in `m` in place of the
/// version's earlier entry of that table.
async fn put(
    store: &CorpusStore,
    m: &mut Manifest,
    source: SourceId,
    lane: Lane,
    table: RuleTable,
    bytes: Vec<u8>,
    rows: u64,
) -> Result<()> {
    let sha = sha256_hex(&bytes);
    let path = format!("{}/{sha}.parquet", table_dir(source, lane, table));
    let len = bytes.len() as u64;
    if entry(m, source, lane, table).is_some_and(|e| e.path == path) {
        return Ok(());
    }
    store.put_immutable(&path, Bytes::from(bytes)).await?;
    drop_entry(m, source, lane, table);
    m.access.push(ObjectEntry {
        kind: table.kind().to_owned(),
        path,
        bytes: len,
        sha256: sha,
        row_count: rows,
    });
    Ok(())
}

fn drop_entry(m: &mut Manifest, source: SourceId, lane: Lane, table: RuleTable) {
    m.access
        .retain(|e| lane_of(e) != Some((source, lane, table)));
}

/// The superseding rows of `parts`, read a few partitions at a time.
async fn superseding_of(
    store: &CorpusStore,
    parts: Vec<&PartitionEntry>,
) -> Result<BTreeSet<Superseding>> {
    // Owned entries and boxed futures: a stream of futures borrowing both the store and the
    // entries makes rustc unable to prove the publish future `Send` for every lifetime.
    let parts: Vec<PartitionEntry> = parts.into_iter().cloned().collect();
    let found: Vec<Vec<Superseding>> = futures::stream::iter(parts)
        .map(
            |p| -> futures::future::BoxFuture<'_, Result<Vec<Superseding>>> {
                Box::pin(async move { superseding_rows(store, &p).await })
            },
        )
        .buffer_unordered(READ_AHEAD)
        .try_collect()
        .await?;
    Ok(found.into_iter().flatten().collect())
}

/// Where `m` stores the superseded revisions of `rows` in `source`/`lane`: each keeps the place
/// `kept` gives it while that file is still one of the version's, and the others are looked for
/// in the partitions that may hold their record ids (by the id runs; every partition of the
/// source-lane where it has none), reading only their `revision_id` pages. A publish thus reads
/// the partitions it rewrote and those its new corrections supersede into, never the corpus.
async fn place(
    store: &CorpusStore,
    m: &Manifest,
    source: SourceId,
    lane: Lane,
    rows: &BTreeSet<Superseding>,
    kept: &Positions,
) -> Result<Positions> {
    let parts: Vec<&PartitionEntry> = m.lane_partitions(source, lane).collect();
    let files: HashSet<&str> = parts.iter().map(|p| file_name(&p.path)).collect();
    let mut out = Positions::new();
    // Superseded revision → its record id (a record's revisions share it).
    let mut wanted: BTreeMap<&str, &str> = BTreeMap::new();
    for r in rows {
        match kept.get(&r.supersedes) {
            Some(p) if files.contains(p.file.as_str()) => {
                out.insert(r.supersedes.clone(), p.clone());
            }
            _ => {
                wanted.insert(&r.supersedes, &r.id);
            }
        }
    }
    if wanted.is_empty() {
        return Ok(out);
    }
    let days =
        crate::read::ids::days_holding(store, m, source, lane, wanted.values().copied()).await?;
    let to_read: Vec<PartitionEntry> = parts
        .into_iter()
        .filter(|p| days.as_ref().is_none_or(|d| d.contains(&p.date)))
        .cloned()
        .collect();
    let revisions: HashSet<&str> = wanted.keys().copied().collect();
    let revisions = &revisions;
    let found: Vec<(String, Vec<(String, i64)>)> = futures::stream::iter(to_read)
        .map(
            |p| -> futures::future::BoxFuture<'_, Result<(String, Vec<(String, i64)>)>> {
                Box::pin(async move {
                    let rows = rows_holding(store, &p, revisions).await?;
                    Ok((file_name(&p.path).to_owned(), rows))
                })
            },
        )
        .buffer_unordered(READ_AHEAD)
        .try_collect()
        .await?;
    for (file, rows) in found {
        for (rev, row) in rows {
            let place = Position {
                file: file.clone(),
                row,
            };
            if let Some(other) = out.insert(rev.clone(), place.clone()) {
                return Err(Error::integrity(
                    format!("snapshots/partitions/{source}/{lane}"),
                    format!("revision {rev} is stored twice ({other:?} and {place:?})"),
                ));
            }
        }
    }
    Ok(out)
}

/// Derives the rule tables of `m`, a version about to be published on `parent` (its
/// partitions and certifications in place): each source-lane's supersessions (its parent's
/// table and the superseding rows of the partitions the parent did not list, each superseded
/// revision placed in the version's files by [`place`]) and coverage (from the manifest). A
/// table whose bytes did not change keeps its entry; tables of source-lanes the version no
/// longer has are dropped. A parent's table of the unplaced kind is read for its rows and
/// placed afresh.
pub async fn update(
    store: &CorpusStore,
    m: &mut Manifest,
    parent: Option<&Manifest>,
) -> Result<()> {
    let lanes = lanes(m);
    m.access
        .retain(|e| lane_of(e).is_none_or(|(s, l, _)| lanes.contains(&(s, l))));
    for (source, lane) in lanes {
        let parent_table = parent.and_then(|pm| {
            entry(pm, source, lane, RuleTable::Supersessions).map(|e| (pm, e.clone()))
        });
        let held: HashSet<&str> = match &parent_table {
            Some((pm, _)) => pm
                .lane_partitions(source, lane)
                .map(|p| p.path.as_str())
                .collect(),
            None => HashSet::new(),
        };
        let new: Vec<&PartitionEntry> = m
            .lane_partitions(source, lane)
            .filter(|p| !held.contains(p.path.as_str()))
            .collect();
        let listed = m.lane_partitions(source, lane).count();
        // The same files (so the same places) and a table that places them.
        let unchanged = parent_table
            .as_ref()
            .is_some_and(|(_, e)| e.kind == KIND_SUPERSESSIONS)
            && new.is_empty()
            && listed == held.len();
        if !unchanged {
            let mut rows = superseding_of(store, new).await?;
            let mut kept = Positions::new();
            if let Some((_, e)) = &parent_table {
                let bytes = crate::store::objects::get_checked(store, &e.path, &e.sha256).await?;
                let table = decode_supersessions(&e.path, bytes)?;
                rows.extend(table.rows);
                kept = table.positions;
            }
            let positions = place(store, m, source, lane, &rows, &kept).await?;
            let n = rows.len() as u64;
            let bytes = encode_supersessions(&rows, &positions)?;
            put(store, m, source, lane, RuleTable::Supersessions, bytes, n).await?;
        } else if let Some((_, e)) = parent_table
            && entry(m, source, lane, RuleTable::Supersessions).is_none()
        {
            m.access.push(e);
        }
        match encode_coverage(m, source, lane)? {
            Some(bytes) => {
                let days = m
                    .span(source, lane)
                    .map_or(0, |s| (s.last.days() - s.first.days() + 1) as u64);
                put(store, m, source, lane, RuleTable::Coverage, bytes, days).await?;
            }
            None => drop_entry(m, source, lane, RuleTable::Coverage),
        }
    }
    m.access.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(())
}

/// The revisions each supersessions table of `m` not in `seen` names as superseded, per
/// source-lane: what `asof verify` looks for in the partitions it decodes, to hold the tables'
/// places to where the rows are ([`verify`]).
pub async fn superseded_revisions(
    store: &CorpusStore,
    m: &Manifest,
    seen: &HashSet<&str>,
) -> Result<HashMap<(SourceId, Lane), HashSet<String>>> {
    let mut out: HashMap<_, HashSet<String>> = HashMap::new();
    for e in m.access.iter().filter(|e| !seen.contains(e.path.as_str())) {
        if let Some((source, lane, RuleTable::Supersessions)) = lane_of(e) {
            let table = read_table(store, e).await?;
            out.entry((source, lane))
                .or_default()
                .extend(table.rows.into_iter().map(|r| r.supersedes));
        }
    }
    Ok(out)
}

/// What `asof verify` found of a version's rows, for its rule tables: per source-lane, the
/// superseding rows of the partitions it decoded, and where those partitions store the
/// revisions [`superseded_revisions`] named; and the file names of the partitions decoded.
#[derive(Debug, Default)]
pub struct Decoded {
    pub superseding: BTreeMap<(SourceId, Lane), BTreeSet<Superseding>>,
    pub placed: HashMap<(SourceId, Lane), Positions>,
    pub files: HashSet<String>,
}

impl Decoded {
    /// Notes one decoded partition: its superseding rows, and the rows (by index) of the
    /// revisions `wanted` names.
    pub fn partition(
        &mut self,
        p: &PartitionEntry,
        rows: &[crate::model::record::NewsRow],
        wanted: Option<&HashSet<String>>,
    ) -> Result<()> {
        let key = (p.source_id, p.lane);
        self.superseding
            .entry(key)
            .or_default()
            .extend(superseding_of_rows(rows));
        let file = file_name(&p.path);
        self.files.insert(file.to_owned());
        if let Some(wanted) = wanted {
            let placed = self.placed.entry(key).or_default();
            for (i, r) in rows.iter().enumerate() {
                if wanted.contains(&r.revision_id) {
                    let place = Position {
                        file: file.to_owned(),
                        row: i as i64,
                    };
                    if let Some(other) = placed.insert(r.revision_id.clone(), place) {
                        return Err(Error::integrity(
                            &p.path,
                            format!(
                                "revision {} is also stored in {}",
                                r.revision_id, other.file
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// What `asof verify` holds of a version's rule tables (those whose path is not in `seen`,
/// the objects a served version already listed), given what it decoded (`found`) and whether
/// it decoded every partition: each coverage table is the one the manifest derives, byte for
/// byte; each supersessions table holds every superseding row of the partitions decoded
/// (and, where every partition was decoded, nothing else), and places each superseded
/// revision where the decoded partitions store it: a place in a decoded partition holds that
/// revision, a place names one of the version's partitions of the source-lane, and a revision
/// a decoded partition holds is placed there. Every source-lane with partitions or a span
/// has both tables (one without a span has no coverage table) once any has one.
pub async fn verify(
    store: &CorpusStore,
    m: &Manifest,
    seen: &HashSet<&str>,
    found: &Decoded,
    whole: bool,
) -> Result<usize> {
    let mut checked = 0;
    let any = m.access.iter().any(|e| lane_of(e).is_some());
    for e in m.access.iter().filter(|e| {
        RuleTable::ALL.iter().any(|t| t.is_kind(&e.kind)) && !seen.contains(e.path.as_str())
    }) {
        let Some((source, lane, table)) = lane_of(e) else {
            return Err(Error::integrity(&e.path, "a rule table outside its folder"));
        };
        let bytes = crate::store::objects::get_checked(store, &e.path, &e.sha256).await?;
        match table {
            RuleTable::Coverage => {
                let want = encode_coverage(m, source, lane)?;
                if want.as_deref() != Some(&bytes[..]) {
                    return Err(Error::integrity(
                        &e.path,
                        "the coverage table differs from the one the manifest derives",
                    ));
                }
            }
            RuleTable::Supersessions => {
                let table = decode_supersessions(&e.path, bytes)?;
                if table.placed != (e.kind == KIND_SUPERSESSIONS) {
                    return Err(Error::integrity(
                        &e.path,
                        format!("its columns are not those of a {} table", e.kind),
                    ));
                }
                let rows = &table.rows;
                let empty = BTreeSet::new();
                let decoded = found.superseding.get(&(source, lane)).unwrap_or(&empty);
                if let Some(missing) = decoded.difference(rows).next() {
                    return Err(Error::integrity(
                        &e.path,
                        format!(
                            "lacks the supersession of {} by {}",
                            missing.supersedes, missing.revision_id
                        ),
                    ));
                }
                if whole && let Some(extra) = rows.difference(decoded).next() {
                    return Err(Error::integrity(
                        &e.path,
                        format!(
                            "lists a supersession no stored row makes: {} by {}",
                            extra.supersedes, extra.revision_id
                        ),
                    ));
                }
                if table.placed {
                    verify_places(m, source, lane, &e.path, &table, found)?;
                }
            }
        }
        checked += 1;
    }
    if any {
        for (source, lane) in lanes(m) {
            let lacking = RuleTable::ALL.into_iter().find(|&t| {
                entry(m, source, lane, t).is_none()
                    && (t == RuleTable::Supersessions || m.span(source, lane).is_some())
            });
            if let Some(t) = lacking {
                return Err(Error::integrity(
                    table_dir(source, lane, t),
                    "the version lists rule tables but not this one",
                ));
            }
        }
    }
    Ok(checked)
}

/// The places of one supersessions table against the decoded partitions ([`verify`]).
fn verify_places(
    m: &Manifest,
    source: SourceId,
    lane: Lane,
    path: &str,
    table: &Supersessions,
    found: &Decoded,
) -> Result<()> {
    let files: HashSet<&str> = m
        .lane_partitions(source, lane)
        .map(|p| file_name(&p.path))
        .collect();
    let empty = Positions::new();
    let placed = found.placed.get(&(source, lane)).unwrap_or(&empty);
    let bad = |why: String| Err(Error::integrity(path, why));
    for (rev, at) in &table.positions {
        if !files.contains(at.file.as_str()) {
            return bad(format!(
                "places {rev} in {}, not a partition of {source}/{lane} in this version",
                at.file
            ));
        }
        if found.files.contains(&at.file) && placed.get(rev) != Some(at) {
            return bad(format!(
                "places {rev} at row {} of {}, which holds another revision",
                at.row, at.file
            ));
        }
    }
    for (rev, at) in placed {
        if table.positions.get(rev) != Some(at) {
            return bad(format!(
                "does not place {rev} at row {} of {}, where it is stored",
                at.row, at.file
            ));
        }
    }
    Ok(())
}

/// The superseding rows of decoded partition rows (what [`verify`] compares with).
pub fn superseding_of_rows<'a>(
    rows: impl IntoIterator<Item = &'a crate::model::record::NewsRow>,
) -> impl Iterator<Item = Superseding> {
    rows.into_iter().filter_map(|r| {
        Some(Superseding {
            supersedes: r.supersedes.clone()?,
            revision_id: r.revision_id.clone(),
            id: r.id.clone(),
            committed_at: r.committed_at?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rule::{encode, unplaced_fields};
    use crate::testkit::{edgar, random_corpus, refusal_of, t};
    use crate::write::publish::{ChangeSet, publish};
    use arrow::array::{RecordBatch, StringArray};
    use arrow::datatypes::Schema;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use std::sync::Arc;

    /// Every stored row's supersession of one source-lane of `m`, read off its partitions.
    async fn recomputed(
        store: &CorpusStore,
        m: &Manifest,
        source: SourceId,
        lane: Lane,
    ) -> BTreeSet<Superseding> {
        recomputed_table(store, m, source, lane).await.rows
    }

    /// The supersessions table of one source-lane of `m` as its partitions say it: every
    /// stored row's supersession, and where (file name, row index) each superseded revision is
    /// stored.
    async fn recomputed_table(
        store: &CorpusStore,
        m: &Manifest,
        source: SourceId,
        lane: Lane,
    ) -> Supersessions {
        let parts: Vec<&PartitionEntry> = m.lane_partitions(source, lane).collect();
        let mut decoded = Vec::new();
        for p in &parts {
            decoded.push(
                crate::store::objects::decode_parquet(&p.path, store.get(&p.path).await.unwrap())
                    .unwrap(),
            );
        }
        let rows: BTreeSet<Superseding> = decoded
            .iter()
            .flat_map(|r| superseding_of_rows(r))
            .collect();
        let superseded: HashSet<&str> = rows.iter().map(|r| r.supersedes.as_str()).collect();
        let mut positions = Positions::new();
        for (p, decoded) in parts.iter().zip(&decoded) {
            for (i, r) in decoded.iter().enumerate() {
                if superseded.contains(r.revision_id.as_str()) {
                    let place = Position {
                        file: file_name(&p.path).to_owned(),
                        row: i as i64,
                    };
                    assert!(positions.insert(r.revision_id.clone(), place).is_none());
                }
            }
        }
        Supersessions {
            rows,
            positions,
            placed: true,
        }
    }

    /// Checks every version of the chain ending at the pointer: both tables of every
    /// source-lane, equal to what its partitions and manifest say.
    async fn hold_every_version(store: &CorpusStore) -> usize {
        let mut version = store.current_version().await.unwrap();
        let mut corrections = 0;
        while let Some(v) = version {
            let m = store.manifest(&v).await.unwrap();
            for (source, lane) in lanes(&m) {
                let e = entry(&m, source, lane, RuleTable::Supersessions)
                    .unwrap_or_else(|| panic!("{v}: {source}/{lane} has a supersessions table"));
                let stored = read_table(store, e).await.unwrap();
                let want = recomputed_table(store, &m, source, lane).await;
                assert_eq!(stored, want, "{v}: {source}/{lane}");
                // Every superseded revision the source-lane holds is placed (a correction
                // of a revision the lane never held would be the one unplaced).
                assert_eq!(
                    stored.positions.len(),
                    stored
                        .rows
                        .iter()
                        .map(|r| &r.supersedes)
                        .collect::<BTreeSet<_>>()
                        .len(),
                    "{v}: {source}/{lane}"
                );
                corrections += stored.rows.len();
                let coverage = entry(&m, source, lane, RuleTable::Coverage).map(|e| e.path.clone());
                match encode_coverage(&m, source, lane).unwrap() {
                    Some(bytes) => assert_eq!(
                        store.get(coverage.as_deref().unwrap()).await.unwrap(),
                        bytes,
                        "{v}: {source}/{lane} coverage"
                    ),
                    None => assert!(coverage.is_none()),
                }
            }
            version = m.parent;
        }
        corrections
    }

    /// Publishes one new row of filer 1 on 2025-01-15 (rewriting that day's partition),
    /// correcting nothing.
    async fn publish_a_row(store: &CorpusStore, accession: &str) {
        publish(
            store,
            ChangeSet {
                rows: vec![edgar(
                    accession,
                    "1",
                    Some("2025-01-15T12:00:00Z"),
                    "2025-04-03T00:00:00Z",
                )],
                ..Default::default()
            },
            t("2025-04-03T00:00:00Z"),
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn each_versions_rule_tables_are_what_its_partitions_and_manifest_say() {
        for batched in [false, true] {
            let (_dir, store, _) = random_corpus(0x60_0001, batched).await;
            let corrections = hold_every_version(&store).await;
            assert!(corrections > 0, "the corpus corrects some rows");
            crate::verify::verify(&store, None).await.unwrap();
        }
    }

    #[tokio::test]
    async fn the_coverage_table_is_the_certificate_of_every_day_of_the_span() {
        let (_dir, store, _) = random_corpus(0x60_0002, false).await;
        let (_, m) = store.current().await.unwrap();
        let e = entry(
            &m,
            SourceId::SecEdgar,
            Lane::CertifiedPit,
            RuleTable::Coverage,
        )
        .unwrap();
        let bytes = store.get(&e.path).await.unwrap();
        let batch = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let span = m.span(SourceId::SecEdgar, Lane::CertifiedPit).unwrap();
        assert_eq!(
            batch.num_rows() as i32,
            span.last.days() - span.first.days() + 1
        );
        let keys = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let status = batch
            .column(4)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let table =
            crate::model::coverage::DayTable::build(&m, SourceId::SecEdgar, Lane::CertifiedPit);
        let first = crate::model::coverage::certificate_of(
            &m,
            table.as_ref(),
            (SourceId::SecEdgar, Lane::CertifiedPit, span.first),
            None,
            None,
        );
        assert_eq!(keys.value(0), first.key);
        assert_eq!(status.value(0), first.status);
        assert_eq!(e.row_count, batch.num_rows() as u64);
    }

    #[tokio::test]
    async fn a_corpus_published_before_the_rule_tables_gets_them_whole_on_its_next_publish() {
        let (_dir, store, _) = random_corpus(0x60_0003, false).await;
        let (v, mut m) = store.current().await.unwrap();
        m.access.retain(|e| lane_of(e).is_none());
        m.parent = Some(v.clone());
        let old = store.put_manifest(&m).await.unwrap();
        store.swap_pointer(Some(&v), &old).await.unwrap();
        // One new row, correcting nothing: the tables come from every partition, once.
        publish_a_row(&store, "0000000009-25-000001").await;
        let (_, now) = store.current().await.unwrap();
        let e = entry(
            &now,
            SourceId::SecEdgar,
            Lane::CertifiedPit,
            RuleTable::Supersessions,
        )
        .unwrap();
        let stored = read_supersessions(&store, e).await.unwrap();
        assert!(!stored.is_empty());
        assert_eq!(
            stored,
            recomputed(&store, &now, SourceId::SecEdgar, Lane::CertifiedPit).await
        );
    }

    #[tokio::test]
    async fn verify_refuses_a_supersessions_table_that_lacks_a_row_or_a_coverage_table_not_derived()
    {
        let (_dir, store, _) = random_corpus(0x60_0004, false).await;
        let (v, m) = store.current().await.unwrap();
        let (s, l) = (SourceId::SecEdgar, Lane::CertifiedPit);
        let e = entry(&m, s, l, RuleTable::Supersessions).unwrap().clone();
        let mut rows = read_supersessions(&store, &e).await.unwrap();
        let dropped = rows.pop_first().unwrap();
        let mut forged = m.clone();
        put(
            &store,
            &mut forged,
            s,
            l,
            RuleTable::Supersessions,
            encode_supersessions(&rows, &Positions::new()).unwrap(),
            0,
        )
        .await
        .unwrap();
        let err = refusal_of(&store, forged, &v).await;
        assert!(
            err.contains("lacks the supersession") && err.contains(&dropped.supersedes),
            "{err}"
        );
        // A coverage table of another manifest (the span cut short) is not this one's.
        let mut other = m.clone();
        other.spans.iter_mut().for_each(|sp| sp.last = sp.first);
        let bytes = encode_coverage(&other, s, l).unwrap().unwrap();
        let mut forged = m.clone();
        put(&store, &mut forged, s, l, RuleTable::Coverage, bytes, 1)
            .await
            .unwrap();
        let err = refusal_of(&store, forged, &v).await;
        assert!(err.contains("coverage table differs"), "{err}");
    }

    #[tokio::test]
    async fn verify_refuses_a_supersessions_table_that_places_a_revision_where_it_is_not() {
        let (_dir, store, _) = random_corpus(0x60_0005, false).await;
        let (v, m) = store.current().await.unwrap();
        let (s, l) = (SourceId::SecEdgar, Lane::CertifiedPit);
        let e = entry(&m, s, l, RuleTable::Supersessions).unwrap().clone();
        let table = read_table(&store, &e).await.unwrap();
        let (rev, at) = table
            .positions
            .iter()
            .next()
            .map(|(r, p)| (r.clone(), p.clone()))
            .unwrap();
        let forge = |positions: Positions| {
            let (store, m, rows) = (store.clone(), m.clone(), table.rows.clone());
            async move {
                let mut forged = m;
                let bytes = encode_supersessions(&rows, &positions).unwrap();
                put(
                    &store,
                    &mut forged,
                    s,
                    l,
                    RuleTable::Supersessions,
                    bytes,
                    0,
                )
                .await
                .unwrap();
                forged
            }
        };
        // One row off.
        let mut moved = table.positions.clone();
        moved.insert(
            rev.clone(),
            Position {
                row: at.row + 1,
                ..at.clone()
            },
        );
        let err = refusal_of(&store, forge(moved).await, &v).await;
        assert!(
            err.contains("which holds another revision") && err.contains(&rev),
            "{err}"
        );
        // Not placed at all, though stored.
        let mut dropped = table.positions.clone();
        dropped.remove(&rev);
        let err = refusal_of(&store, forge(dropped).await, &v).await;
        assert!(
            err.contains("does not place") && err.contains(&rev),
            "{err}"
        );
        // In a file the version does not list.
        let mut elsewhere = table.positions.clone();
        elsewhere.insert(
            rev.clone(),
            Position {
                file: "0.parquet".into(),
                row: 0,
            },
        );
        let err = refusal_of(&store, forge(elsewhere).await, &v).await;
        assert!(err.contains("not a partition of"), "{err}");
    }

    /// A version whose supersessions tables were written before they placed revisions (kind
    /// `rule.supersessions/1`, four columns): its cuts are not exported (refused, naming the
    /// fix); its next publish places every revision afresh, and the table's Delta log gives
    /// the placed schema from that version on.
    #[tokio::test]
    async fn an_unplaced_table_is_placed_whole_at_the_next_publish() {
        use crate::format::delta::Table;
        use crate::read::delta::DeltaLog;
        let (_dir, store, _) = random_corpus(0x60_0006, false).await;
        let (v, m) = store.current().await.unwrap();
        let (s, l) = (SourceId::SecEdgar, Lane::CertifiedPit);
        let e = entry(&m, s, l, RuleTable::Supersessions).unwrap().clone();
        let placed = read_table(&store, &e).await.unwrap();
        assert!(!placed.positions.is_empty());
        // The same rows in the old form, listed under the old kind.
        let cols = supersessions_schema().fields().len() - 2;
        let bytes = crate::store::objects::get_checked(&store, &e.path, &e.sha256)
            .await
            .unwrap();
        let batch = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let old = RecordBatch::try_new(
            Arc::new(Schema::new(unplaced_fields())),
            batch.columns()[..cols].to_vec(),
        )
        .unwrap();
        let mut legacy = m.clone();
        put(
            &store,
            &mut legacy,
            s,
            l,
            RuleTable::Supersessions,
            encode(&old).unwrap(),
            0,
        )
        .await
        .unwrap();
        legacy
            .access
            .iter_mut()
            .filter(|x| lane_of(x) == Some((s, l, RuleTable::Supersessions)))
            .for_each(|x| x.kind = KIND_SUPERSESSIONS_UNPLACED.into());
        legacy.parent = Some(v.clone());
        let parent_tables = crate::format::delta::versions_of(&store, &v, &m)
            .await
            .unwrap();
        legacy.delta = Some(crate::format::delta::next_versions(
            Some((&m, &parent_tables)),
            &legacy,
        ));
        let old_version = store.put_manifest(&legacy).await.unwrap();
        store.swap_pointer(Some(&v), &old_version).await.unwrap();
        crate::write::delta::sync(&store, &old_version)
            .await
            .unwrap();
        crate::verify::verify(&store, None).await.unwrap();
        let unplaced = read_table(
            &store,
            entry(&legacy, s, l, RuleTable::Supersessions).unwrap(),
        )
        .await
        .unwrap();
        assert!(!unplaced.placed && unplaced.positions.is_empty());
        assert_eq!(unplaced.rows, placed.rows);
        let cut = crate::model::cut::Cut {
            lane: Some(l),
            ..crate::model::cut::Cut::at(
                t("2025-03-01T00:00:00Z"),
                crate::model::clock::VisibleBy::PublishedAt,
            )
        };
        let names = crate::rule::Names::prefixed("x");
        let err = crate::rule::sql::views_of(&legacy, &cut, s, &names)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("does not place") && err.contains("next publish"),
            "{err}"
        );

        publish_a_row(&store, "0000000009-25-000002").await;
        let (now_v, now) = store.current().await.unwrap();
        let e = entry(&now, s, l, RuleTable::Supersessions).unwrap();
        assert_eq!(e.kind, KIND_SUPERSESSIONS);
        assert_eq!(
            read_table(&store, e).await.unwrap(),
            recomputed_table(&store, &now, s, l).await
        );
        crate::verify::verify(&store, None).await.unwrap();
        crate::write::delta::check(&store, &now_v).await.unwrap();
        crate::rule::sql::views_of(&now, &cut, s, &names).unwrap();
        // Delta readers get the new columns from the version that placed them.
        let table = Table::Rule(s, l, RuleTable::Supersessions);
        let version = now.delta.as_ref().unwrap()[&table.key()];
        let mut log = DeltaLog::new(table);
        log.extend(&store, version).await.unwrap();
        let state = log.state(version).unwrap();
        let schema = &state.metadata.schema_string;
        assert!(
            schema.contains(crate::model::cut::SUPERSEDED_ROW),
            "{now_v}: {schema}"
        );
        assert_eq!(state.files.len(), 1, "the unplaced file is removed");
    }
}
