//! Publishing a new corpus version: partitions first, then the manifest, then the pointer.
//!
//! A crash at any step leaves the pointer on the previous version: objects written before the
//! crash are unreferenced (content-addressed, so a retry rewrites the same paths with the same
//! bytes) and nothing published is ever rewritten in place.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::clock::{Day, Instant, Lane, SourceId};
use crate::error::{Error, Result};
use crate::identity::IdentityFile;
use crate::manifest::{Certification, ClockStats, FORMAT, Manifest, ObjectEntry, PartitionEntry, SampleSet, derive_spans};
use crate::read::read_partition;
use crate::record::{CLOCK_COLUMNS, NewsRow, to_batch};
use crate::store::{CorpusStore, sha256_hex};

/// Everything one publish adds on top of the parent version.
#[derive(Debug, Default)]
pub struct ChangeSet {
    /// New rows; `committed_at` must be set. Sealed here (content hash, revision id).
    pub rows: Vec<NewsRow>,
    pub certifications: Vec<Certification>,
    /// Replaces the identity file when given.
    pub identity: Option<IdentityFile>,
    /// Replaces the sample set when given.
    pub sample: Option<SampleSet>,
    pub notes: BTreeMap<String, String>,
}

/// The outcome of a publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub version: String,
    /// False when the change set added nothing new (identical re-ingest): no version written.
    pub changed: bool,
    pub rows_added: usize,
    pub rows_unchanged: usize,
}

/// Hook called between the publish steps; tests use it to simulate a crash at each step.
pub type StepHook<'a> = &'a (dyn Fn(PublishStep) -> Result<()> + Sync);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishStep {
    PartitionsWritten,
    ManifestWritten,
}

/// Publishes `changes` on top of the store's current version (if any) at `created_at`.
pub async fn publish(store: &CorpusStore, changes: ChangeSet, created_at: Instant) -> Result<Published> {
    publish_with_hook(store, changes, created_at, &|_| Ok(())).await
}

pub async fn publish_with_hook(store: &CorpusStore, changes: ChangeSet, created_at: Instant, hook: StepHook<'_>) -> Result<Published> {
    let parent = match store.current_version().await? {
        Some(v) => Some((v.clone(), store.manifest(&v).await?)),
        None => None,
    };
    let mut manifest = match &parent {
        Some((v, m)) => Manifest { parent: Some(v.clone()), created_at, ..m.clone() },
        None => Manifest {
            format: FORMAT.into(),
            created_at,
            parent: None,
            partitions: vec![],
            certifications: vec![],
            spans: vec![],
            identity: vec![],
            access: vec![],
            notes: BTreeMap::new(),
            sample: None,
        },
    };

    // Index the parent's current revision of every record id (revisions chain by `supersedes`).
    let mut parent_rows: HashMap<(SourceId, Lane, Day), Vec<NewsRow>> = HashMap::new();
    let mut current: HashMap<String, (String, String)> = HashMap::new(); // id -> (revision, content)
    if parent.is_some() {
        let mut superseded = std::collections::HashSet::new();
        for p in &manifest.partitions {
            let rows = read_partition(store, p).await?;
            for r in &rows {
                if let Some(s) = &r.supersedes {
                    superseded.insert(s.clone());
                }
            }
            parent_rows.insert((p.source_id, p.lane, p.date), rows);
        }
        for r in parent_rows.values().flatten() {
            if !superseded.contains(&r.revision_id) {
                current.insert(r.id.clone(), (r.revision_id.clone(), r.content_sha256.clone()));
            }
        }
    }

    let (mut added, mut unchanged) = (0usize, 0usize);
    let mut new_by_day: BTreeMap<(SourceId, Lane, Day), Vec<NewsRow>> = BTreeMap::new();
    for row in changes.rows {
        if row.committed_at.is_none() {
            return Err(Error::invalid("rows", format!("row {} has no committed_at", row.id)));
        }
        let mut row = row.seal();
        match current.get(&row.id) {
            Some((_, content)) if *content == row.content_sha256 => {
                unchanged += 1;
                continue;
            }
            Some((rev, _)) => row.supersedes = Some(rev.clone()),
            None => row.supersedes = None,
        }
        current.insert(row.id.clone(), (row.revision_id.clone(), row.content_sha256.clone()));
        let day = row.partition_day().ok_or_else(|| Error::invalid("rows", format!("row {} has no clock to place it on a day", row.id)))?;
        new_by_day.entry((row.source_id, row.lane, day)).or_default().push(row);
        added += 1;
    }

    // Step 1: partitions (and identity) objects.
    for ((source, lane, day), mut rows) in new_by_day {
        if let Some(old) = parent_rows.remove(&(source, lane, day)) {
            rows.extend(old);
        }
        let entry = write_partition(store, source, lane, day, rows).await?;
        manifest.partitions.retain(|p| !(p.source_id == source && p.lane == lane && p.date == day));
        manifest.partitions.push(entry);
    }
    manifest.partitions.sort_by(|a, b| (a.source_id, a.lane, a.date).cmp(&(b.source_id, b.lane, b.date)));
    if let Some(identity) = changes.identity {
        manifest.identity = vec![write_identity(store, &identity).await?];
    }
    hook(PublishStep::PartitionsWritten)?;

    // Step 2: the manifest.
    for c in changes.certifications {
        if !manifest.certifications.contains(&c) {
            manifest.certifications.push(c);
        }
    }
    manifest.certifications.sort_by(|a, b| (a.source_id, a.lane, a.from, a.to, a.certified_at).cmp(&(b.source_id, b.lane, b.from, b.to, b.certified_at)));
    manifest.spans = derive_spans(&manifest.certifications);
    if changes.sample.is_some() {
        manifest.sample = changes.sample;
    }
    manifest.notes.extend(changes.notes);
    // Nothing new (identical re-ingest): keep the parent; no version is written.
    if let Some((v, m)) = &parent
        && added == 0
        && *m == (Manifest { parent: m.parent.clone(), created_at: m.created_at, ..manifest.clone() })
    {
        return Ok(Published { version: v.clone(), changed: false, rows_added: 0, rows_unchanged: unchanged });
    }
    let version = store.put_manifest(&manifest).await?;
    hook(PublishStep::ManifestWritten)?;

    // Step 3: flip the pointer.
    store.set_pointer(&version).await?;
    Ok(Published { version, changed: true, rows_added: added, rows_unchanged: unchanged })
}

/// Parquet writer settings shared by partitions: snappy, statistics per page, the offset index,
/// and dictionaries only on low-cardinality columns (unique columns read slower with them).
pub fn writer_properties() -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_enabled(false)
        .set_created_by("asof".into());
    for c in ["source_id", "lane", "form", "availability_basis", "cik", "entity_id"] {
        b = b.set_column_dictionary_enabled(ColumnPath::from(c), true);
    }
    b.build()
}

/// Sorts rows by `(published_at, id)` (nulls last; revisions of one id by commit time) and
/// writes them as one content-addressed Parquet object.
pub async fn write_partition(store: &CorpusStore, source: SourceId, lane: Lane, day: Day, mut rows: Vec<NewsRow>) -> Result<PartitionEntry> {
    rows.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()).then(a.committed_at.cmp(&b.committed_at)).then(a.revision_id.cmp(&b.revision_id)));
    let bytes = encode_parquet(&rows)?;
    let sha = sha256_hex(&bytes);
    let path = format!("snapshots/partitions/{source}/{lane}/{day}/{sha}.parquet");
    let len = bytes.len() as u64;
    store.put_immutable(&path, Bytes::from(bytes)).await?;
    let clocks = CLOCK_COLUMNS
        .iter()
        .map(|&c| {
            let by = |r: &NewsRow| match c {
                "event_at" => r.event_at,
                "published_at" => r.published_at,
                "available_at" => r.available_at,
                "acceptance_at" => r.acceptance_at,
                _ => r.committed_at,
            };
            let vals: Vec<Instant> = rows.iter().filter_map(by).collect();
            let stats = ClockStats { min: vals.iter().min().copied(), max: vals.iter().max().copied(), nulls: (rows.len() - vals.len()) as u64 };
            (c.to_owned(), stats)
        })
        .collect();
    Ok(PartitionEntry { source_id: source, lane, date: day, path, row_count: rows.len() as u64, bytes: len, sha256: sha, clocks })
}

pub fn encode_parquet(rows: &[NewsRow]) -> Result<Vec<u8>> {
    let batch = to_batch(rows)?;
    let mut buf = Vec::with_capacity(rows.len() * 256 + 4096);
    let mut w = ArrowWriter::try_new(&mut buf, Arc::clone(batch.schema_ref()), Some(writer_properties()))?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

async fn write_identity(store: &CorpusStore, identity: &IdentityFile) -> Result<ObjectEntry> {
    let bytes = identity.to_parquet()?;
    let sha = sha256_hex(&bytes);
    let path = format!("snapshots/identity/{sha}.parquet");
    let len = bytes.len() as u64;
    store.put_immutable(&path, Bytes::from(bytes)).await?;
    Ok(ObjectEntry { kind: "identity.ticker_intervals".into(), path, bytes: len, sha256: sha, row_count: identity.tickers.len() as u64 })
}
