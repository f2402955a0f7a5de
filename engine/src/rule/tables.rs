//! The rule tables: what another engine needs, beside a source-lane's record table, to answer
//! a cut the way the service does. Two per source-lane, derived at publish, content-addressed,
//! listed in the manifest (`access`, kinds [`KIND_SUPERSESSIONS`] and [`KIND_COVERAGE`]) and
//! checked by `asof verify`:
//!
//! - `supersessions`: one row per (superseded revision, superseding revision), with the
//!   superseding revision's `committed_at` (`superseded_at`): the table [`Cut::plan`] anti-joins.
//! - `coverage`: one row per day of the source-lane's certified span, the certificate
//!   `/v1/coverage` answers for it ([`certificate_of`], the same rule) plus whether every row of
//!   the day carries `available_at` (a cut on that clock misses the day as
//!   `availability.<source>/<day>` otherwise).
//!
//! The identity intervals (ticker ↔ CIK, as `/v1/mapping`) are the identity object itself,
//! already a Parquet table of intervals listed in the manifest.
//!
//! **Cost.** A version's supersessions are its parent's plus those of the partitions it lists
//! and its parent did not (partitions only grow, so a rewritten day's old rows are in the
//! parent's table already): a publish reads its parent's table and the `supersedes` pages of
//! the partitions it wrote, never the corpus. A source-lane whose parent has no table (a corpus
//! published before the tables existed) reads its partitions' footers once, and the
//! `supersedes` pages of the few partitions that hold a correction. The coverage table is a
//! function of the manifest alone.
//!
//! [`Cut::plan`]: crate::cut::Cut::plan

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::clock::{Day, Instant, Lane, SourceId};
pub use crate::corpus::supersessions::Superseding;
use crate::corpus::supersessions::superseding_rows;
use crate::coverage::{DayTable, certificate_of};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::store::{CorpusStore, sha256_hex};

/// The kind of a supersessions table in the manifest's `access` list.
pub const KIND_SUPERSESSIONS: &str = "rule.supersessions/1";
/// The kind of a coverage table.
pub const KIND_COVERAGE: &str = "rule.coverage/1";

/// Partitions whose superseding rows are read at once (a store over the network answers each
/// footer in a round trip).
const READ_AHEAD: usize = 16;

/// The two tables of a source-lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleTable {
    Supersessions,
    Coverage,
}

impl RuleTable {
    pub const ALL: [RuleTable; 2] = [RuleTable::Supersessions, RuleTable::Coverage];

    pub fn name(self) -> &'static str {
        match self {
            RuleTable::Supersessions => "supersessions",
            RuleTable::Coverage => "coverage",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            RuleTable::Supersessions => KIND_SUPERSESSIONS,
            RuleTable::Coverage => KIND_COVERAGE,
        }
    }

    pub fn schema(self) -> SchemaRef {
        match self {
            RuleTable::Supersessions => supersessions_schema(),
            RuleTable::Coverage => coverage_schema(),
        }
    }
}

/// Where a source-lane's table of one kind lives: `snapshots/rule/<source>/<lane>/<table>/`,
/// each version's file named by its sha256.
pub fn table_dir(source: SourceId, lane: Lane, table: RuleTable) -> String {
    format!("snapshots/rule/{source}/{lane}/{}", table.name())
}

/// The manifest's entry of a source-lane's table, if the version has one.
pub fn entry(m: &Manifest, source: SourceId, lane: Lane, table: RuleTable) -> Option<&ObjectEntry> {
    m.access
        .iter()
        .find(|e| lane_of(e) == Some((source, lane, table)))
}

/// The source-lane a rule table's entry belongs to.
pub fn lane_of(e: &ObjectEntry) -> Option<(SourceId, Lane, RuleTable)> {
    let table = RuleTable::ALL.into_iter().find(|t| t.kind() == e.kind)?;
    let rest = e.path.strip_prefix("snapshots/rule/")?;
    let mut parts = rest.split('/');
    let (s, l) = (parts.next()?, parts.next()?);
    let source = *SourceId::ALL.iter().find(|x| x.as_str() == s)?;
    let lane = *Lane::ALL.iter().find(|x| x.as_str() == l)?;
    (parts.next()? == table.name()).then_some((source, lane, table))
}

/// The source-lanes a manifest has rule tables for: every one with partitions or a span.
pub fn lanes(m: &Manifest) -> BTreeSet<(SourceId, Lane)> {
    m.partitions
        .iter()
        .map(|p| (p.source_id, p.lane))
        .chain(m.spans.iter().map(|s| (s.source_id, s.lane)))
        .collect()
}

/// `id`, `revision_id` (superseded), `superseded_by`, `superseded_at` (the superseding
/// revision's `committed_at`).
pub fn supersessions_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new(crate::cut::SUPERSEDED, DataType::Utf8, false),
        Field::new("superseded_by", DataType::Utf8, false),
        Field::new(crate::cut::SUPERSEDED_AT, crate::record::ts_type(), false),
    ]))
}

/// A certificate of `/v1/coverage` per day, and whether a cut on `available_at` can use it.
pub fn coverage_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("source_id", DataType::Utf8, false),
        Field::new("lane", DataType::Utf8, false),
        Field::new("date", DataType::Date32, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("row_count", DataType::Int64, true),
        Field::new("rows_held", DataType::Int64, false),
        Field::new("certified_at", crate::record::ts_type(), true),
        Field::new("partition_path", DataType::Utf8, true),
        Field::new("partition_sha256", DataType::Utf8, true),
        Field::new("evidence", DataType::Utf8, false),
        Field::new("available_at_complete", DataType::Boolean, false),
        Field::new("availability_key", DataType::Utf8, false),
    ]))
}

/// One Parquet object of one batch: snappy, no dictionaries, a fixed `created_by`, so the
/// same rows are the same bytes (and the same content address) in every run.
fn encode(batch: &RecordBatch) -> Result<Vec<u8>> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .set_created_by("asof".into())
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props))?;
    w.write(batch)?;
    w.close()?;
    Ok(buf)
}

/// The supersessions table's bytes: rows sorted, so the bytes depend on the set alone.
pub fn encode_supersessions(rows: &BTreeSet<Superseding>) -> Result<Vec<u8>> {
    let col = |f: fn(&Superseding) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let batch = RecordBatch::try_new(
        supersessions_schema(),
        vec![
            col(|r| &r.id),
            col(|r| &r.supersedes),
            col(|r| &r.revision_id),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|r| r.committed_at.micros()),
                )
                .with_timezone("UTC"),
            ),
        ],
    )?;
    encode(&batch)
}

/// The rows of a stored supersessions table.
pub fn decode_supersessions(path: &str, bytes: Bytes) -> Result<BTreeSet<Superseding>> {
    let bad = |why: String| Error::integrity(path, why);
    let mut out = BTreeSet::new();
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| bad(format!("not parquet: {e}")))?
        .build()?;
    for batch in reader {
        let b = batch?;
        if b.schema() != supersessions_schema() {
            return Err(bad(format!("not a supersessions table: {}", b.schema())));
        }
        let s = |i: usize| b.column(i).as_any().downcast_ref::<StringArray>();
        let (Some(id), Some(rev), Some(by)) = (s(0), s(1), s(2)) else {
            return Err(bad("column types".into()));
        };
        let at = b
            .column(3)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .ok_or_else(|| bad("superseded_at".into()))?;
        for i in 0..b.num_rows() {
            out.insert(Superseding {
                id: id.value(i).to_owned(),
                supersedes: rev.value(i).to_owned(),
                revision_id: by.value(i).to_owned(),
                committed_at: Instant::from_micros(at.value(i)),
            });
        }
    }
    Ok(out)
}

/// The coverage table's bytes of one source-lane of `m` (`None` without a certified span):
/// every day of the span, its certificate as `/v1/coverage` answers it for the latest cut.
pub fn encode_coverage(m: &Manifest, source: SourceId, lane: Lane) -> Result<Option<Vec<u8>>> {
    let Some(span) = m.span(source, lane) else {
        return Ok(None);
    };
    let table = DayTable::build(m, source, lane);
    let parts: HashMap<Day, &PartitionEntry> = m
        .partitions
        .iter()
        .filter(|p| p.source_id == source && p.lane == lane)
        .map(|p| (p.date, p))
        .collect();
    let n = (span.last.days() - span.first.days() + 1) as usize;
    let mut key = Vec::with_capacity(n);
    let mut date = Vec::with_capacity(n);
    let mut status = Vec::with_capacity(n);
    let mut row_count = Vec::with_capacity(n);
    let mut rows_held = Vec::with_capacity(n);
    let mut certified_at = Vec::with_capacity(n);
    let mut path = Vec::with_capacity(n);
    let mut sha = Vec::with_capacity(n);
    let mut evidence = Vec::with_capacity(n);
    let mut available = Vec::with_capacity(n);
    let mut availability_key = Vec::with_capacity(n);
    let mut day = span.first;
    while day <= span.last {
        let part = parts.get(&day).copied();
        let c = certificate_of(m, table.as_ref(), (source, lane, day), part, None);
        key.push(c.key);
        date.push(day.days());
        status.push(c.status);
        row_count.push(c.row_count.map(|n| n as i64));
        rows_held.push(c.rows_held as i64);
        certified_at.push(c.certified_at.map(Instant::micros));
        path.push(c.partition.as_ref().map(|p| p.path.clone()));
        sha.push(c.partition.as_ref().map(|p| p.sha256.clone()));
        evidence.push(serde_json::to_string(&c.evidence)?);
        available.push(part.is_none_or(|p| p.clocks.available_at.nulls == 0));
        availability_key.push(format!("availability.{source}/{day}"));
        day = day.next();
    }
    let constant = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v; n])) };
    let batch = RecordBatch::try_new(
        coverage_schema(),
        vec![
            Arc::new(StringArray::from(key)),
            constant(source.as_str()),
            constant(lane.as_str()),
            Arc::new(Date32Array::from(date)),
            Arc::new(StringArray::from(status)),
            Arc::new(Int64Array::from(row_count)),
            Arc::new(Int64Array::from(rows_held)),
            Arc::new(TimestampMicrosecondArray::from(certified_at).with_timezone("UTC")),
            Arc::new(StringArray::from(path)),
            Arc::new(StringArray::from(sha)),
            Arc::new(StringArray::from(evidence)),
            Arc::new(BooleanArray::from(available)),
            Arc::new(StringArray::from(availability_key)),
        ],
    )?;
    Ok(Some(encode(&batch)?))
}

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

/// Derives the rule tables of `m`, a version about to be published on `parent` (its
/// partitions and certifications in place): each source-lane's supersessions (its parent's
/// table and the superseding rows of the partitions the parent did not list) and coverage
/// (from the manifest). A table whose bytes did not change keeps its entry; tables of
/// source-lanes the version no longer has are dropped.
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
                .partitions
                .iter()
                .filter(|p| p.source_id == source && p.lane == lane)
                .map(|p| p.path.as_str())
                .collect(),
            None => HashSet::new(),
        };
        let new: Vec<&PartitionEntry> = m
            .partitions
            .iter()
            .filter(|p| p.source_id == source && p.lane == lane && !held.contains(p.path.as_str()))
            .collect();
        let unchanged = parent_table.is_some() && new.is_empty();
        if !unchanged {
            let mut rows = superseding_of(store, new).await?;
            if let Some((_, e)) = &parent_table {
                let bytes = crate::read::get_checked(store, &e.path, &e.sha256).await?;
                rows.extend(decode_supersessions(&e.path, bytes)?);
            }
            let n = rows.len() as u64;
            let bytes = encode_supersessions(&rows)?;
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

/// What `asof verify` holds of a version's rule tables (those whose path is not in `seen`,
/// the objects a served version already listed), given the superseding rows of the
/// partitions it decoded (`found`, per source-lane) and whether it decoded every partition:
/// each coverage table is the one the manifest derives, byte for byte; each supersessions
/// table holds every superseding row of the partitions decoded, and, where every partition
/// was decoded, nothing else. Every source-lane with partitions or a span has both (one
/// without a span has no coverage table) once any has one.
pub async fn verify(
    store: &CorpusStore,
    m: &Manifest,
    seen: &HashSet<&str>,
    found: &BTreeMap<(SourceId, Lane), BTreeSet<Superseding>>,
    whole: bool,
) -> Result<usize> {
    let mut checked = 0;
    let any = m.access.iter().any(|e| lane_of(e).is_some());
    for e in m.access.iter().filter(|e| {
        RuleTable::ALL.iter().any(|t| t.kind() == e.kind) && !seen.contains(e.path.as_str())
    }) {
        let Some((source, lane, table)) = lane_of(e) else {
            return Err(Error::integrity(&e.path, "a rule table outside its folder"));
        };
        let bytes = crate::read::get_checked(store, &e.path, &e.sha256).await?;
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
                let rows = decode_supersessions(&e.path, bytes)?;
                let empty = BTreeSet::new();
                let decoded = found.get(&(source, lane)).unwrap_or(&empty);
                if let Some(missing) = decoded.difference(&rows).next() {
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

/// The superseding rows of decoded partition rows (what [`verify`] compares with).
pub fn superseding_of_rows<'a>(
    rows: impl IntoIterator<Item = &'a crate::record::NewsRow>,
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

/// The supersessions of a version's source-lane as a loaded map would hold them, read from
/// its table (for the SQL and the tests).
pub async fn read_supersessions(
    store: &CorpusStore,
    e: &ObjectEntry,
) -> Result<BTreeSet<Superseding>> {
    let bytes = crate::read::get_checked(store, &e.path, &e.sha256).await?;
    decode_supersessions(&e.path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::{ChangeSet, publish};
    use crate::testkit::{edgar, random_corpus, refusal_of, t};

    /// Every stored row's supersession of one source-lane of `m`, read off its partitions.
    async fn recomputed(
        store: &CorpusStore,
        m: &Manifest,
        source: SourceId,
        lane: Lane,
    ) -> BTreeSet<Superseding> {
        let mut out = BTreeSet::new();
        for p in m
            .partitions
            .iter()
            .filter(|p| p.source_id == source && p.lane == lane)
        {
            let rows =
                crate::read::decode_parquet(&p.path, store.get(&p.path).await.unwrap()).unwrap();
            out.extend(superseding_of_rows(&rows));
        }
        out
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
                let stored = read_supersessions(store, e).await.unwrap();
                assert_eq!(
                    stored,
                    recomputed(store, &m, source, lane).await,
                    "{v}: {source}/{lane}"
                );
                corrections += stored.len();
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
        let first = crate::coverage::certificate_of(
            &m,
            None,
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
        publish(
            &store,
            ChangeSet {
                rows: vec![edgar(
                    "0000000009-25-000001",
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
            encode_supersessions(&rows).unwrap(),
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
}
