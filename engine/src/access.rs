//! Derived access files: CIK-clustered compactions of each source-lane-year, their sidecar
//! indexes, and the index-driven read path that answers by-CIK queries from them.
//!
//! Why: a source-day partition is the unit of coverage, immutability and delivery, but a
//! by-CIK query over thousands of daily files touches every file (each costs ~0.5 ms even when
//! pruned). An access file holds one year of one source-lane sorted by
//! `(cik, published_at nulls last, id, committed_at, revision_id)` with 64k-row groups and
//! 128-row pages plus the offset index; its sidecar lists, per CIK, the row range, the number of
//! rows without `published_at` and a fence (the `published_at` of the first row) every 128
//! dated rows. A query then reads only the pages that can hold its page of rows, through an
//! arrow-rs `RowSelection` with the footer kept in memory.
//!
//! Access files are derived at publish time from the partitions of their year and listed,
//! hash-checked, in the manifest's `access` list. A later publish that adds rows to a year
//! writes them as a small delta file (`delta-<sha>.parquet` and its sidecar, same layout) next
//! to the year's base file instead of deriving the year again, so a daily ingest costs its own
//! rows, not the year's; the read path merges runs whose spans overlap (a base and its deltas).
//! The year is derived whole again when its deltas reach a quarter of its base ([`update`]). They are never authoritative: the
//! DataFusion scan over partitions answers the same queries, and a differential test holds the
//! two to the same answers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BinaryBuilder, Int64Array, Int64Builder, RecordBatch,
    StringArray, StringBuilder, UInt32Array, UInt32Builder, UInt64Array, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use futures::FutureExt;
use futures::TryStreamExt;
use futures::future::BoxFuture;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::{KeyValue, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::clock::{Day, Instant, Lane, SourceId};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::read::{get_checked, read_partition};
use crate::record::{NewsRow, RowBlock, SharedRow, from_batch, to_batch};
use crate::store::{CorpusStore, HashingFile, sha256_hex};

/// Manifest `kind` of a CIK-clustered data file.
pub const KIND_CLUSTERED: &str = "access.cik_clustered/1";
/// Manifest `kind` of the sidecar index of one clustered file.
pub const KIND_SIDECAR: &str = "access.cik_index/1";
/// Dated rows between two fences of the sidecar; also the data page row limit.
pub const BLOCK_ROWS: usize = 128;
/// Rows per row group of a clustered file.
pub const ROW_GROUP_ROWS: usize = 65_536;

const META_DATA_SHA: &str = "asof.access.data_sha256";
const META_SUPERSESSIONS: &str = "asof.access.supersessions";
const SIDECAR_SUFFIX: &str = ".cik-index.parquet";
/// File-name prefix of a group's delta files (rows added since its base was derived).
pub const DELTA_PREFIX: &str = "delta-";
/// A group is derived whole again once its deltas hold 1/`DELTA_RATIO` of its base's rows.
pub const DELTA_RATIO: u64 = 4;
/// Delta files per group beyond which they are merged into one.
pub const MAX_DELTAS: usize = 8;

/// The access group of a partition: source, lane and UTC year. Only sources whose rows carry
/// a CIK are clustered (today `sec.edgar`).
pub fn group_of(p: &PartitionEntry) -> Option<(SourceId, Lane, i32)> {
    group_of_day(p.source_id, p.lane, p.date)
}

/// The access group of a source-lane-day, if its source is clustered.
pub fn group_of_day(source: SourceId, lane: Lane, day: Day) -> Option<(SourceId, Lane, i32)> {
    (source == SourceId::SecEdgar).then(|| (source, lane, day.to_date().year()))
}

/// The folder holding the access objects of one group.
pub fn group_dir(source: SourceId, lane: Lane, year: i32) -> String {
    format!("snapshots/access/{source}/{lane}/{year}/")
}

/// The order of rows inside a clustered file: by CIK (rows without one last), then the answer
/// order `(published_at nulls last, id)`, then revisions by commit time.
fn access_order(a: &NewsRow, b: &NewsRow) -> std::cmp::Ordering {
    (a.cik.is_none(), a.cik.as_deref())
        .cmp(&(b.cik.is_none(), b.cik.as_deref()))
        .then(a.sort_key().cmp(&b.sort_key()))
        .then(a.committed_at.cmp(&b.committed_at))
        .then(a.revision_id.cmp(&b.revision_id))
}

fn data_properties() -> WriterProperties {
    // Row-group and page sizes make a 100-row page cost one or two pages per column; chunk
    // statistics only (the sidecar, not the column index, prunes), the offset index on (it
    // maps rows to pages).
    // No dictionaries at all: a dictionary page belongs to a whole 64k-row group, and reading
    // any one page of a dictionary column reads and decodes it first. In a CIK-clustered
    // group `cik` and `entity_id` hold thousands of values, so a one-row answer decoded two
    // dictionaries of thousands of strings: 45% of the server's CPU on a `limit=1` page
    // (BENCHMARKS.md, "The hot path").
    // Uncompressed: under HTTP load Snappy decompression was the largest single cost (23% of
    // server CPU); dropping it cut the first-page p50 by ~40% for twice the bytes. These files
    // are derived and served from the page cache; the source-day partitions, which are the
    // files users download, stay compressed.
    WriterProperties::builder()
        .set_compression(parquet::basic::Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(false)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_data_page_row_count_limit(BLOCK_ROWS)
        .set_write_batch_size(BLOCK_ROWS)
        .set_created_by("asof".into())
        .build()
}

/// One CIK's run of rows inside one clustered file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    file: u32,
    /// First row of the run in the file.
    start: u64,
    /// Rows with `published_at` (they come first, sorted by it).
    dated: u32,
    /// Rows without `published_at` (after the dated ones, sorted by id).
    nulls: u32,
    min_published: Option<i64>,
    max_published: Option<i64>,
    /// `published_at` of dated rows `0, 128, 256, …` of the run.
    fences: Box<[i64]>,
}

fn sidecar_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("cik", DataType::Utf8, false),
        Field::new("row_start", DataType::UInt64, false),
        Field::new("dated", DataType::UInt32, false),
        Field::new("nulls", DataType::UInt32, false),
        Field::new("min_published", DataType::Int64, true),
        Field::new("max_published", DataType::Int64, true),
        Field::new("fences", DataType::Binary, false),
    ]))
}

/// Slots of rows already in access order.
fn slots_of(rows: &[NewsRow]) -> Vec<(String, Slot)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let Some(cik) = rows[i].cik.clone() else {
            break; // rows without a CIK sort last and are not indexed
        };
        let mut j = i;
        while j < rows.len() && rows[j].cik.as_deref() == Some(cik.as_str()) {
            j += 1;
        }
        let run = &rows[i..j];
        let dated: Vec<i64> = run
            .iter()
            .filter_map(|r| r.published_at.map(Instant::micros))
            .collect();
        out.push((
            cik,
            Slot {
                file: 0,
                start: i as u64,
                dated: dated.len() as u32,
                nulls: (run.len() - dated.len()) as u32,
                min_published: dated.first().copied(),
                max_published: dated.last().copied(),
                fences: dated.iter().step_by(BLOCK_ROWS).copied().collect(),
            },
        ));
        i = j;
    }
    out
}

fn encode_sidecar(
    slots: &[(String, Slot)],
    data_sha: &str,
    supersessions: &[(String, i64)],
) -> Result<Vec<u8>> {
    let n = slots.len();
    let mut cik = StringBuilder::with_capacity(n, n * 8);
    let mut start = UInt64Builder::with_capacity(n);
    let mut dated = UInt32Builder::with_capacity(n);
    let mut nulls = UInt32Builder::with_capacity(n);
    let mut min = Int64Builder::with_capacity(n);
    let mut max = Int64Builder::with_capacity(n);
    let mut fences = BinaryBuilder::with_capacity(n, n * 8);
    for (c, s) in slots {
        cik.append_value(c);
        start.append_value(s.start);
        dated.append_value(s.dated);
        nulls.append_value(s.nulls);
        min.append_option(s.min_published);
        max.append_option(s.max_published);
        let bytes: Vec<u8> = s.fences.iter().flat_map(|f| f.to_le_bytes()).collect();
        fences.append_value(bytes);
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(cik.finish()),
        Arc::new(start.finish()),
        Arc::new(dated.finish()),
        Arc::new(nulls.finish()),
        Arc::new(min.finish()),
        Arc::new(max.finish()),
        Arc::new(fences.finish()),
    ];
    let batch = RecordBatch::try_new(sidecar_schema(), cols)?;
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_created_by("asof".into())
        .set_key_value_metadata(Some(vec![
            KeyValue::new(META_DATA_SHA.into(), data_sha.to_owned()),
            KeyValue::new(
                META_SUPERSESSIONS.into(),
                serde_json::to_string(supersessions)?,
            ),
        ]))
        .build();
    let mut buf = Vec::with_capacity(n * 48 + 1024);
    let mut w = ArrowWriter::try_new(&mut buf, sidecar_schema(), Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

/// Writes the clustered file and sidecar of one group from all its rows; returns both manifest
/// entries (data first). Deterministic: the same rows give the same bytes and paths.
pub async fn write_group(
    store: &CorpusStore,
    group: (SourceId, Lane, i32),
    rows: Vec<NewsRow>,
) -> Result<Vec<ObjectEntry>> {
    write_file(store, group, rows, "").await
}

/// Writes one clustered file and its sidecar; `prefix` is `""` for a group's base file and
/// [`DELTA_PREFIX`] for a delta.
async fn write_file(
    store: &CorpusStore,
    group: (SourceId, Lane, i32),
    mut rows: Vec<NewsRow>,
    prefix: &str,
) -> Result<Vec<ObjectEntry>> {
    rows.sort_by(access_order);
    let mut w = ClusteredWriter::new()?;
    w.push(rows)?;
    w.finish(store, group, prefix).await
}

/// One clustered file being written from rows that arrive in access order, a few CIKs at a
/// time, so a group is never wholly in memory as rows (only as the file's bytes). The bytes
/// are those of one write of all the rows: data pages are cut every [`BLOCK_ROWS`] rows
/// counted from the file's first row, whatever the sizes of the pushes.
struct ClusteredWriter {
    /// The data file goes to a temporary file as it is written, hashed on the way: a year
    /// derived whole is hundreds of megabytes, which the publish never holds in memory.
    writer: ArrowWriter<HashingFile>,
    /// Rows pushed and not yet written: fewer than `BLOCK_ROWS` between pushes.
    pending: Vec<NewsRow>,
    rows: u64,
    slots: Vec<(String, Slot)>,
    supersessions: Vec<(String, i64)>,
}

impl ClusteredWriter {
    fn new() -> Result<Self> {
        let data = HashingFile::new()?;
        Ok(Self {
            writer: ArrowWriter::try_new(data, crate::record::schema(), Some(data_properties()))?,
            pending: Vec::new(),
            rows: 0,
            slots: Vec::new(),
            supersessions: Vec::new(),
        })
    }

    /// Appends `rows`, which must be in access order, follow every row pushed before, and
    /// hold each of their CIKs' rows whole (a CIK's run never continues into the next push).
    fn push(&mut self, rows: Vec<NewsRow>) -> Result<()> {
        for (cik, mut slot) in slots_of(&rows) {
            slot.start += self.rows;
            self.slots.push((cik, slot));
        }
        self.supersessions.extend(rows.iter().filter_map(|r| {
            r.supersedes
                .clone()
                .zip(r.committed_at.map(Instant::micros))
        }));
        self.rows += rows.len() as u64;
        self.pending.extend(rows);
        let whole = self.pending.len() / BLOCK_ROWS * BLOCK_ROWS;
        if whole > 0 {
            let batch = to_batch(&self.pending[..whole])?;
            self.write_blocks(&batch)?;
            self.pending.drain(..whole);
        }
        Ok(())
    }

    /// Writing in block-sized slices keeps every data page at `BLOCK_ROWS` rows.
    fn write_blocks(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut off = 0;
        while off < batch.num_rows() {
            let len = BLOCK_ROWS.min(batch.num_rows() - off);
            self.writer.write(&batch.slice(off, len))?;
            off += len;
        }
        Ok(())
    }

    /// Writes the last rows, then the data file and its sidecar; returns both manifest
    /// entries (data first). Deterministic: the same rows give the same bytes and paths.
    async fn finish(
        mut self,
        store: &CorpusStore,
        (source, lane, year): (SourceId, Lane, i32),
        prefix: &str,
    ) -> Result<Vec<ObjectEntry>> {
        if !self.pending.is_empty() {
            let batch = to_batch(&std::mem::take(&mut self.pending))?;
            self.write_blocks(&batch)?;
        }
        let data = self.writer.into_inner()?.finish()?;
        let data_sha = data.sha256.clone();
        let dir = group_dir(source, lane, year);
        let data_path = format!("{dir}{prefix}{data_sha}.parquet");
        self.supersessions.sort();
        let sidecar = encode_sidecar(&self.slots, &data_sha, &self.supersessions)?;
        let sidecar_sha = sha256_hex(&sidecar);
        let sidecar_path = format!("{dir}{prefix}{data_sha}{SIDECAR_SUFFIX}");
        let entries = vec![
            ObjectEntry {
                kind: KIND_CLUSTERED.into(),
                path: data_path.clone(),
                bytes: data.len,
                sha256: data_sha.clone(),
                row_count: self.rows,
            },
            ObjectEntry {
                kind: KIND_SIDECAR.into(),
                path: sidecar_path.clone(),
                bytes: sidecar.len() as u64,
                sha256: sidecar_sha,
                row_count: self.rows,
            },
        ];
        store
            .put_immutable_file(&data_path, data.file, data.len, &data_sha)
            .await?;
        store
            .put_immutable(&sidecar_path, Bytes::from(sidecar))
            .await?;
        Ok(entries)
    }
}

/// Rows of one group held in memory at once while it is derived from its partitions: a
/// bigger group is derived in runs of whole CIKs of about this many rows, reading its
/// partitions once more per run, so memory is bounded by the run and the file's bytes, not
/// by the year (a backfilled year holds millions of rows).
pub const DERIVE_CHUNK_ROWS: u64 = 131_072;

/// Where a row sorts in a clustered file by CIK alone: CIKs in order, rows without one last.
fn cik_key(r: &NewsRow) -> (bool, &str) {
    (r.cik.is_none(), r.cik.as_deref().unwrap_or(""))
}

/// The clustered file and sidecar of one group, derived from its partitions `parts` holding
/// at most about `chunk_rows` rows in memory (a CIK with more rows is one run of its own).
async fn derive_group(
    store: &CorpusStore,
    group: (SourceId, Lane, i32),
    parts: &[&PartitionEntry],
    chunk_rows: u64,
) -> Result<Vec<ObjectEntry>> {
    let total: u64 = parts.iter().map(|p| p.row_count).sum();
    if total <= chunk_rows {
        let mut rows = Vec::with_capacity(total as usize);
        for p in parts {
            rows.extend(read_partition(store, p).await?);
        }
        return write_file(store, group, rows, "").await;
    }
    // Pass 1: rows per CIK, to cut the CIK order into runs of about `chunk_rows` rows.
    let mut per_cik: BTreeMap<(bool, String), u64> = BTreeMap::new();
    for p in parts {
        for r in read_partition(store, p).await? {
            let (none, cik) = cik_key(&r);
            *per_cik.entry((none, cik.to_owned())).or_default() += 1;
        }
    }
    let mut runs: Vec<((bool, String), (bool, String))> = Vec::new();
    let mut acc = 0u64;
    for (key, n) in per_cik {
        match runs.last_mut() {
            Some((_, hi)) if acc + n <= chunk_rows => {
                *hi = key;
                acc += n;
            }
            _ => {
                runs.push((key.clone(), key));
                acc = n;
            }
        }
    }
    // Pass 2: each run's rows from every partition, sorted, appended.
    let mut w = ClusteredWriter::new()?;
    for (lo, hi) in &runs {
        let (lo, hi) = ((lo.0, lo.1.as_str()), (hi.0, hi.1.as_str()));
        let mut rows = Vec::new();
        for p in parts {
            rows.extend(
                read_partition(store, p)
                    .await?
                    .into_iter()
                    .filter(|r| (lo..=hi).contains(&cik_key(r))),
            );
        }
        rows.sort_by(access_order);
        w.push(rows)?;
    }
    w.finish(store, group, "").await
}

/// Derives the access files of `groups` from the manifest's partitions and replaces those
/// groups' entries in `manifest.access`. Other groups keep their objects.
pub async fn derive(
    store: &CorpusStore,
    manifest: &mut Manifest,
    groups: &HashSet<(SourceId, Lane, i32)>,
) -> Result<()> {
    let mut by_group: BTreeMap<(SourceId, Lane, i32), Vec<&PartitionEntry>> = BTreeMap::new();
    for p in &manifest.partitions {
        if let Some(g) = group_of(p)
            && groups.contains(&g)
        {
            by_group.entry(g).or_default().push(p);
        }
    }
    let mut fresh = Vec::new();
    for (g, parts) in by_group {
        fresh.extend(derive_group(store, g, &parts, DERIVE_CHUNK_ROWS).await?);
    }
    let dirs: Vec<String> = groups.iter().map(|&(s, l, y)| group_dir(s, l, y)).collect();
    manifest
        .access
        .retain(|e| !dirs.iter().any(|d| e.path.starts_with(d.as_str())));
    manifest.access.extend(fresh);
    manifest.access.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(())
}

/// How the access files of one group changed in a publish ([`update`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upkeep {
    /// The rows added became one more delta file.
    Delta,
    /// The group's deltas and the rows added became one delta file.
    DeltasMerged,
    /// The group was derived whole from its partitions (no base yet, or deltas grew too big).
    Derived,
}

/// Whether adding `added` rows to `group` of `manifest` derives the group whole from its
/// partitions (it has no base file yet, or its deltas would reach 1/[`DELTA_RATIO`] of the
/// base) rather than writing them as a delta file: [`update`]'s rule, which a publish also
/// asks to keep only the rows a delta file needs.
pub fn derives_whole(manifest: &Manifest, group: (SourceId, Lane, i32), added: u64) -> bool {
    let dir = group_dir(group.0, group.1, group.2);
    let (mut base_rows, mut delta_rows) = (0u64, added);
    for e in manifest
        .access
        .iter()
        .filter(|e| e.kind == KIND_CLUSTERED && e.path.starts_with(&dir))
    {
        if e.path[dir.len()..].starts_with(DELTA_PREFIX) {
            delta_rows += e.row_count;
        } else {
            base_rows += e.row_count;
        }
    }
    base_rows == 0 || delta_rows * DELTA_RATIO >= base_rows
}

/// Keeps the access files of the groups a publish added rows to, reading as little as it can:
/// rows added to a group that has a base file become a small delta file of their own (the
/// read path merges a base and its deltas), so a daily ingest never re-derives a year. When a
/// group's deltas hold [`1/DELTA_RATIO`](DELTA_RATIO) of its base's rows the group is derived
/// whole again from its partitions; past [`MAX_DELTAS`] files its deltas merge into one.
/// Groups in `missing` (partitions without any access file, or groups the caller already
/// knows [`derives_whole`]) are derived whole.
pub async fn update(
    store: &CorpusStore,
    manifest: &mut Manifest,
    added: BTreeMap<(SourceId, Lane, i32), Vec<NewsRow>>,
    missing: &HashSet<(SourceId, Lane, i32)>,
) -> Result<BTreeMap<(SourceId, Lane, i32), Upkeep>> {
    let mut out = BTreeMap::new();
    let mut whole: HashSet<(SourceId, Lane, i32)> = missing.clone();
    for (g, rows) in added {
        if whole.contains(&g) {
            continue;
        }
        if derives_whole(manifest, g, rows.len() as u64) {
            whole.insert(g);
            continue;
        }
        let dir = group_dir(g.0, g.1, g.2);
        let deltas: Vec<ObjectEntry> = manifest
            .access
            .iter()
            .filter(|e| e.kind == KIND_CLUSTERED && e.path.starts_with(&dir))
            .filter(|e| e.path[dir.len()..].starts_with(DELTA_PREFIX))
            .cloned()
            .collect();
        let (mut rows, upkeep) = (
            rows,
            if deltas.len() >= MAX_DELTAS {
                Upkeep::DeltasMerged
            } else {
                Upkeep::Delta
            },
        );
        if upkeep == Upkeep::DeltasMerged {
            for d in &deltas {
                let bytes = get_checked(store, &d.path, &d.sha256).await?;
                rows.extend(crate::read::decode_parquet(&d.path, bytes)?);
            }
            let gone: HashSet<String> = deltas
                .iter()
                .flat_map(|d| {
                    let stem = d.path.strip_suffix(".parquet").unwrap_or(&d.path);
                    [d.path.clone(), format!("{stem}{SIDECAR_SUFFIX}")]
                })
                .collect();
            manifest.access.retain(|e| !gone.contains(&e.path));
        }
        manifest
            .access
            .extend(write_file(store, g, rows, DELTA_PREFIX).await?);
        out.insert(g, upkeep);
    }
    derive(store, manifest, &whole).await?;
    out.extend(whole.into_iter().map(|g| (g, Upkeep::Derived)));
    manifest.access.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A clustered file ready to read: its path and footer (with the offset index) in memory.
struct AccessFile {
    path: Path,
    bytes: u64,
    local: Option<Arc<std::fs::File>>,
    meta: ArrowReaderMetadata,
    /// First row of each row group, plus the total at the end.
    group_starts: Vec<u64>,
    /// The manifest entry of its sidecar (path, sha256): the next version's index takes the
    /// file over when it lists the same sidecar.
    sidecar: (String, String),
    /// Superseded revision id → commit instant of the superseding row, over this file's rows.
    supersessions: Vec<(String, i64)>,
}

type SlotKey = (SourceId, Lane, Box<str>);

/// The in-memory index over every access file of a version.
pub struct AccessIndex {
    /// Shared with the next version's index for the files both list.
    files: Vec<Arc<AccessFile>>,
    slots: Vec<Slot>,
    by_cik: HashMap<SlotKey, Range<u32>>,
    /// Source-lanes every partition of which is in an access file.
    covered: HashSet<(SourceId, Lane)>,
}

impl std::fmt::Debug for AccessIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessIndex")
            .field("files", &self.files.len())
            .field("slots", &self.slots.len())
            .field("covered", &self.covered)
            .finish()
    }
}

/// Slots by key, then file (files load in year order).
fn slot_order(a: &(SlotKey, Slot), b: &(SlotKey, Slot)) -> std::cmp::Ordering {
    (&a.0, a.1.file).cmp(&(&b.0, b.1.file))
}

/// Merges two runs sorted in [`slot_order`] into one.
fn merge_sorted(a: Vec<(SlotKey, Slot)>, b: Vec<(SlotKey, Slot)>) -> Vec<(SlotKey, Slot)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => slot_order(x, y).is_le(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if take_a { a.next() } else { b.next() });
    }
}

/// Parses `snapshots/access/<source>/<lane>/<year>/…` back to its group.
fn group_of_path(path: &str) -> Option<(SourceId, Lane, i32)> {
    let mut it = path.strip_prefix("snapshots/access/")?.split('/');
    let source = it.next()?.parse().ok()?;
    let lane = it.next()?.parse().ok()?;
    let year = it.next()?.parse().ok()?;
    Some((source, lane, year))
}

impl AccessIndex {
    /// Loads the sidecars (hash-checked) and the footers of the clustered files of a version.
    /// `None` when the version lists no access files.
    pub async fn load(store: &CorpusStore, manifest: &Manifest) -> Result<Option<Self>> {
        Self::load_after(store, manifest, None).await
    }

    /// As [`AccessIndex::load`], taking over from `previous` (the index of a version of the
    /// same store) every file whose sidecar both list: its footer, its supersessions and its
    /// slots, which a publish that adds a delta file to one year leaves as they were. Only
    /// the new sidecars are read; the result equals a fresh load.
    pub async fn load_after(
        store: &CorpusStore,
        manifest: &Manifest,
        previous: Option<&AccessIndex>,
    ) -> Result<Option<Self>> {
        let sidecars: Vec<&ObjectEntry> = manifest
            .access
            .iter()
            .filter(|e| e.kind == KIND_SIDECAR)
            .collect();
        if sidecars.is_empty() {
            return Ok(None);
        }
        let data: HashMap<&str, &ObjectEntry> = manifest
            .access
            .iter()
            .filter(|e| e.kind == KIND_CLUSTERED)
            .map(|e| (e.path.as_str(), e))
            .collect();
        let mut idx = AccessIndex {
            files: Vec::new(),
            slots: Vec::new(),
            by_cik: HashMap::new(),
            covered: HashSet::new(),
        };
        let held: HashMap<(&str, &str), usize> = previous
            .map(|p| {
                p.files
                    .iter()
                    .enumerate()
                    .map(|(i, f)| ((f.sidecar.0.as_str(), f.sidecar.1.as_str()), i))
                    .collect()
            })
            .unwrap_or_default();
        // Index in `previous.files` → index in the new one, for the files taken over.
        let mut moved: Vec<Option<u32>> = vec![None; previous.map_or(0, |p| p.files.len())];
        let mut groups = HashSet::new();
        let mut pending = Vec::new();
        for sc in sidecars {
            let group = group_of_path(&sc.path)
                .ok_or_else(|| Error::integrity(&sc.path, "not under snapshots/access/"))?;
            if let (Some(prev), Some(&old)) =
                (previous, held.get(&(sc.path.as_str(), sc.sha256.as_str())))
            {
                moved[old] = Some(idx.files.len() as u32);
                idx.files.push(Arc::clone(&prev.files[old]));
                groups.insert(group);
                continue;
            }
            let data_path = sc
                .path
                .strip_suffix(SIDECAR_SUFFIX)
                .map(|p| format!("{p}.parquet"))
                .ok_or_else(|| Error::integrity(&sc.path, "not a sidecar path"))?;
            let entry = data.get(data_path.as_str()).ok_or_else(|| {
                Error::integrity(&sc.path, "its clustered file is not in the manifest")
            })?;
            let bytes = get_checked(store, &sc.path, &sc.sha256).await?;
            let file = idx.files.len() as u32;
            let supersessions =
                Self::decode_sidecar(&mut pending, &sc.path, bytes, file, group, &entry.sha256)?;
            let path = Path::from(entry.path.as_str());
            let local = match store.local_root() {
                Some(root) => Some(Arc::new(std::fs::File::open(root.join(&entry.path))?)),
                None => None,
            };
            let mut reader = ObjectReader {
                store: store.object_store(),
                path: path.clone(),
                size: entry.bytes,
                local: local.clone(),
            };
            let options = ArrowReaderOptions::new()
                .with_column_index_policy(PageIndexPolicy::Skip)
                .with_offset_index_policy(PageIndexPolicy::Required);
            let meta = ArrowReaderMetadata::load_async(&mut reader, options).await?;
            let mut group_starts = vec![0u64];
            for rg in meta.metadata().row_groups() {
                let last = *group_starts.last().expect("non-empty");
                group_starts.push(last + rg.num_rows() as u64);
            }
            idx.files.push(Arc::new(AccessFile {
                path,
                bytes: entry.bytes,
                local,
                meta,
                group_starts,
                sidecar: (sc.path.clone(), sc.sha256.clone()),
                supersessions,
            }));
            groups.insert(group);
        }
        // The new sidecars' slots are sorted; the files taken over bring theirs already in
        // order, and the two are merged (sorting every slot again was most of a reload's
        // index cost).
        pending.sort_unstable_by(slot_order);
        let pending = match previous.filter(|_| moved.iter().any(Option::is_some)) {
            Some(prev) => merge_sorted(prev.carried(&moved), pending),
            None => pending,
        };
        idx.finish(pending);
        // A source-lane is answered from access files only if every partition of it is.
        let mut partial = HashSet::new();
        let mut seen = HashSet::new();
        for p in &manifest.partitions {
            seen.insert((p.source_id, p.lane));
            if !group_of(p).is_some_and(|g| groups.contains(&g)) {
                partial.insert((p.source_id, p.lane));
            }
        }
        idx.covered = seen.difference(&partial).copied().collect();
        Ok(Some(idx))
    }

    /// Decodes one sidecar's slots into `pending`; returns the supersessions it carries.
    fn decode_sidecar(
        pending: &mut Vec<(SlotKey, Slot)>,
        path: &str,
        bytes: Bytes,
        file: u32,
        (source, lane, _): (SourceId, Lane, i32),
        data_sha: &str,
    ) -> Result<Vec<(String, i64)>> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
        let kv = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .cloned()
            .unwrap_or_default();
        let get = |k: &str| kv.iter().find(|e| e.key == k).and_then(|e| e.value.clone());
        if get(META_DATA_SHA).as_deref() != Some(data_sha) {
            return Err(Error::integrity(
                path,
                "sidecar names another clustered file",
            ));
        }
        let sup: Vec<(String, i64)> =
            serde_json::from_str(&get(META_SUPERSESSIONS).unwrap_or_else(|| "[]".into()))?;
        let bad = |c: &str| Error::integrity(path, format!("sidecar column {c} has a wrong type"));
        for batch in builder.build()? {
            let batch = batch?;
            let cik = col::<StringArray>(&batch, 0).ok_or_else(|| bad("cik"))?;
            let start = col::<UInt64Array>(&batch, 1).ok_or_else(|| bad("row_start"))?;
            let dated = col::<UInt32Array>(&batch, 2).ok_or_else(|| bad("dated"))?;
            let nulls = col::<UInt32Array>(&batch, 3).ok_or_else(|| bad("nulls"))?;
            let min = col::<Int64Array>(&batch, 4).ok_or_else(|| bad("min_published"))?;
            let max = col::<Int64Array>(&batch, 5).ok_or_else(|| bad("max_published"))?;
            let fences = col::<BinaryArray>(&batch, 6).ok_or_else(|| bad("fences"))?;
            for i in 0..batch.num_rows() {
                let f = fences.value(i);
                let slot = Slot {
                    file,
                    start: start.value(i),
                    dated: dated.value(i),
                    nulls: nulls.value(i),
                    min_published: (!min.is_null(i)).then(|| min.value(i)),
                    max_published: (!max.is_null(i)).then(|| max.value(i)),
                    fences: f
                        .chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                        .collect(),
                };
                pending.push(((source, lane, cik.value(i).into()), slot));
            }
        }
        Ok(sup)
    }

    /// The slots of the files `moved` names (index here → index in the new index), under
    /// their new file numbers, in [`slot_order`]: runs are walked in slot order, which is key
    /// order, so no key is compared.
    fn carried(&self, moved: &[Option<u32>]) -> Vec<(SlotKey, Slot)> {
        let mut runs: Vec<(&SlotKey, &Range<u32>)> = self.by_cik.iter().collect();
        runs.sort_unstable_by_key(|(_, r)| r.start);
        let mut out = Vec::with_capacity(self.slots.len());
        for (key, range) in runs {
            let first = out.len();
            for s in &self.slots[range.start as usize..range.end as usize] {
                if let Some(file) = moved[s.file as usize] {
                    out.push((key.clone(), Slot { file, ..s.clone() }));
                }
            }
            out[first..].sort_by_key(|(_, s)| s.file);
        }
        out
    }

    /// Takes the slots in [`slot_order`], so each CIK's runs are one contiguous range.
    fn finish(&mut self, pending: Vec<(SlotKey, Slot)>) {
        debug_assert!(pending.is_sorted_by(|a, b| slot_order(a, b).is_le()));
        self.slots.reserve_exact(pending.len());
        for (key, slot) in pending {
            let at = self.slots.len() as u32;
            self.slots.push(slot);
            self.by_cik
                .entry(key)
                .and_modify(|r| r.end = at + 1)
                .or_insert(at..at + 1);
        }
    }

    /// Whether every partition of `source`/`lane` is in an access file.
    pub fn covers(&self, source: SourceId, lane: Lane) -> bool {
        self.covered.contains(&(source, lane))
    }

    /// Whether every partition of the version is in an access file.
    pub fn covers_all(&self, manifest: &Manifest) -> bool {
        manifest
            .partitions
            .iter()
            .all(|p| self.covers(p.source_id, p.lane))
    }

    /// Superseded revision → earliest commit of a revision superseding it (covered lanes).
    pub fn supersessions(&self) -> impl Iterator<Item = (&str, Instant)> {
        self.files
            .iter()
            .flat_map(|f| f.supersessions.iter())
            .map(|(r, at)| (r.as_str(), Instant::from_micros(*at)))
    }

    /// The runs of one CIK, in year order (files are loaded in manifest path order, so
    /// `snapshots/access/<source>/<lane>/<year>/` sorts by year).
    fn slots(&self, source: SourceId, lane: Lane, cik: &str) -> &[Slot] {
        match self.by_cik.get(&(source, lane, Box::from(cik))) {
            Some(r) => &self.slots[r.start as usize..r.end as usize],
            None => &[],
        }
    }

    /// Reads the given sorted, disjoint row ranges of one file.
    async fn read_rows(
        &self,
        store: &CorpusStore,
        file: u32,
        ranges: &[Range<u64>],
    ) -> Result<Vec<NewsRow>> {
        let batches = self.read_batches(store, file, ranges, None).await?;
        let mut rows = Vec::new();
        for b in &batches {
            rows.extend(from_batch(b)?);
        }
        Ok(rows)
    }

    /// The `id` column of the given row ranges, as `(row number in file, id)`.
    async fn read_ids(
        &self,
        store: &CorpusStore,
        file: u32,
        ranges: &[Range<u64>],
    ) -> Result<Vec<(u64, String)>> {
        let schema = self.files[file as usize].meta.parquet_schema();
        let id = schema
            .columns()
            .iter()
            .position(|c| c.name() == "id")
            .ok_or_else(|| Error::integrity("access file", "no id column"))?;
        let mask = ProjectionMask::leaves(schema, [id]);
        let batches = self.read_batches(store, file, ranges, Some(mask)).await?;
        let positions = ranges.iter().flat_map(|r| r.clone());
        let mut ids = Vec::new();
        for b in &batches {
            let a = col::<StringArray>(b, 0)
                .ok_or_else(|| Error::integrity("access file", "id is not utf8"))?;
            ids.extend((0..b.num_rows()).map(|i| a.value(i).to_owned()));
        }
        Ok(positions.zip(ids).collect())
    }

    async fn read_batches(
        &self,
        store: &CorpusStore,
        file: u32,
        ranges: &[Range<u64>],
        projection: Option<ProjectionMask>,
    ) -> Result<Vec<RecordBatch>> {
        let f = &self.files[file as usize];
        let starts = &f.group_starts;
        // Row groups overlapping any range, and the ranges rebased onto those groups.
        let mut groups: Vec<usize> = Vec::new();
        for r in ranges {
            let first = starts.partition_point(|&s| s <= r.start) - 1;
            let last = starts.partition_point(|&s| s < r.end) - 1;
            for g in first..=last {
                if groups.last() != Some(&g) {
                    groups.push(g);
                }
            }
        }
        let mut rebased = Vec::new();
        let mut base = 0u64;
        let mut total = 0usize;
        for &g in &groups {
            let (gs, ge) = (starts[g], starts[g + 1]);
            for r in ranges {
                let (s, e) = (r.start.max(gs), r.end.min(ge));
                if s < e {
                    rebased.push((base + s - gs) as usize..(base + e - gs) as usize);
                }
            }
            base += ge - gs;
            total += (ge - gs) as usize;
        }
        let selection = RowSelection::from_consecutive_ranges(rebased.into_iter(), total);
        // The footer is in memory; the size keeps every request a bounded range.
        let reader = ObjectReader {
            store: store.object_store(),
            path: f.path.clone(),
            size: f.bytes,
            local: f.local.clone(),
        };
        let mut builder =
            ParquetRecordBatchStreamBuilder::new_with_metadata(reader, f.meta.clone())
                .with_row_groups(groups)
                .with_row_selection(selection)
                .with_batch_size(8192);
        if let Some(mask) = projection {
            builder = builder.with_projection(mask);
        }
        Ok(builder.build()?.try_collect().await?)
    }

    /// The first rows of one CIK, in answer order, that `keep` accepts: at most `want`.
    ///
    /// `lower` is a `published_at` below which no wanted row lies (the keyset position or the
    /// start of a `published_at` diff window); `upper` one above which none lies (the cut, on
    /// the `published_at` clock). `dated_only` skips rows without `published_at`, which sort
    /// after every dated row; `after_nulls` skips the dated rows (the position is already among
    /// the undated ones).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn first_rows(
        &self,
        store: &CorpusStore,
        source: SourceId,
        lane: Lane,
        cik: &str,
        bounds: Bounds,
        want: usize,
        keep: &(dyn Fn(&NewsRow) -> bool + Sync),
    ) -> Result<Vec<SharedRow>> {
        let mut out = Vec::new();
        let slots = self.slots(source, lane, cik);
        if !bounds.after_nulls {
            // Runs by their first dated row. Runs whose spans overlap (a year's base file and
            // its deltas) form one cluster, read together and merged; clusters follow each
            // other in time, so the answer is the first clusters' rows in order.
            let mut dated: Vec<&Slot> = slots.iter().filter(|s| s.dated > 0).collect();
            dated.sort_by_key(|s| (s.min_published, s.file));
            let mut i = 0;
            while i < dated.len() && out.len() < want {
                let mut j = i + 1;
                let mut max = dated[i].max_published;
                while j < dated.len() && dated[j].min_published <= max {
                    max = max.max(dated[j].max_published);
                    j += 1;
                }
                let cluster = &dated[i..j];
                i = j;
                if let (Some(hi), Some(min)) = (bounds.upper, cluster[0].min_published)
                    && min > hi
                {
                    break;
                }
                let need = want - out.len();
                if let [one] = cluster {
                    // `out` holds the earlier clusters' rows: the run fills it up to `want`.
                    self.read_run(store, one, bounds, want, keep, &mut out)
                        .await?;
                } else {
                    let mut merged = Vec::new();
                    for s in cluster {
                        let mut part = Vec::new();
                        self.read_run(store, s, bounds, need, keep, &mut part)
                            .await?;
                        merged.extend(part);
                    }
                    merged.sort_by(|a, b| access_order(a, b));
                    merged.truncate(need);
                    out.extend(merged);
                }
            }
            if out.len() >= want || bounds.dated_only {
                out.truncate(want);
                return Ok(out);
            }
        }
        // Undated rows: after every dated row, ordered by id across all years.
        let mut undated = Vec::new();
        for s in slots.iter().filter(|s| s.nulls > 0) {
            let from = s.start + u64::from(s.dated);
            let to = from + u64::from(s.nulls);
            for run in self
                .cached_runs(store, s.file, std::slice::from_ref(&(from..to)))
                .await?
            {
                for (i, r) in run.iter().enumerate() {
                    if keep(r) {
                        undated.push(SharedRow::new(Arc::clone(&run), i));
                    }
                }
            }
        }
        undated.sort_by(|a, b| access_order(a, b));
        out.extend(undated);
        out.truncate(want);
        Ok(out)
    }

    /// Appends to `out` the kept dated rows of one run, in order, until `out` holds `want` rows
    /// in all (rows already in `out` count).
    async fn read_run(
        &self,
        store: &CorpusStore,
        s: &Slot,
        bounds: Bounds,
        want: usize,
        keep: &(dyn Fn(&NewsRow) -> bool + Sync),
        out: &mut Vec<SharedRow>,
    ) -> Result<()> {
        if let (Some(lo), Some(max)) = (bounds.lower, s.max_published)
            && max < lo
        {
            return Ok(());
        }
        if let (Some(hi), Some(min)) = (bounds.upper, s.min_published)
            && min > hi
        {
            return Ok(());
        }
        let nb = s.fences.len();
        // Block k holds dated rows [128k, 128(k+1)); its first row has fence k.
        let k_lo = bounds.lower.map_or(0, |lo| {
            s.fences.partition_point(|&f| f < lo).saturating_sub(1)
        });
        let k_hi = bounds
            .upper
            .map_or(nb, |hi| s.fences.partition_point(|&f| f <= hi));
        let mut k = k_lo;
        while k < k_hi {
            let need = want.saturating_sub(out.len());
            // Enough blocks for the rows still wanted, plus one when the first block may begin
            // before the lower bound.
            let blocks =
                need.div_ceil(BLOCK_ROWS).max(1) + usize::from(bounds.lower.is_some() && k == k_lo);
            let k_end = (k + blocks).min(k_hi);
            for block in self.dated_blocks(store, s, k..k_end).await? {
                for (i, r) in block.iter().enumerate() {
                    if keep(r) {
                        // Shared with the cached block, not copied: a page of a hundred rows
                        // would otherwise copy some two thousand strings.
                        out.push(SharedRow::new(Arc::clone(&block), i));
                        if out.len() >= want {
                            return Ok(());
                        }
                    }
                }
            }
            k = k_end;
        }
        Ok(())
    }

    /// The decoded rows of blocks `blocks` of a run's dated rows (block `k` holds dated rows
    /// `[128k, 128(k+1))` of the run), from the row cache where held; the blocks missing are
    /// read from the file in one selection and kept.
    async fn dated_blocks(
        &self,
        store: &CorpusStore,
        s: &Slot,
        blocks: Range<usize>,
    ) -> Result<Vec<Arc<RowBlock>>> {
        let rows_of = |k: usize| {
            s.start + (k * BLOCK_ROWS) as u64
                ..s.start + (((k + 1) * BLOCK_ROWS) as u64).min(u64::from(s.dated))
        };
        let ranges: Vec<Range<u64>> = blocks.map(rows_of).collect();
        self.cached_runs(store, s.file, &ranges).await
    }

    /// The rows of each of `ranges` (consecutive row ranges of one file, in order), each a
    /// cache entry of [`crate::page_cache::ROWS`]: held ones from memory, the span from the
    /// first to the last missing one read in one selection.
    async fn cached_runs(
        &self,
        store: &CorpusStore,
        file: u32,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Arc<RowBlock>>> {
        let cache = &crate::page_cache::ROWS;
        let path = self.files[file as usize].path.as_ref();
        let mut out: Vec<Option<Arc<RowBlock>>> =
            ranges.iter().map(|r| cache.get(path, r)).collect();
        if let (Some(first), Some(last)) = (
            out.iter().position(Option::is_none),
            out.iter().rposition(Option::is_none),
        ) {
            let span = ranges[first].start..ranges[last].end;
            let read = self
                .read_rows(store, file, std::slice::from_ref(&span))
                .await?;
            if read.len() as u64 != span.end - span.start {
                return Err(Error::integrity(
                    "access file",
                    format!("{path}: rows {span:?} gave {} rows", read.len()),
                ));
            }
            let mut read = read.into_iter();
            for (i, r) in ranges.iter().enumerate().take(last + 1).skip(first) {
                let block: Arc<RowBlock> =
                    Arc::new(read.by_ref().take((r.end - r.start) as usize).collect());
                if out[i].is_none() {
                    cache.put(path, r, block.clone());
                    out[i] = Some(block);
                }
            }
        }
        Ok(out.into_iter().map(|b| b.expect("filled")).collect())
    }

    /// Every revision of one record id of one CIK, across all covered source-lanes.
    pub(crate) async fn revisions(
        &self,
        store: &CorpusStore,
        cik: &str,
        id: &str,
    ) -> Result<Vec<NewsRow>> {
        let mut lanes: Vec<(SourceId, Lane)> = self.covered.iter().copied().collect();
        lanes.sort();
        let mut out = Vec::new();
        for (source, lane) in lanes {
            for s in self.slots(source, lane, cik) {
                // The id column alone finds the rows; only those are read whole.
                let run = s.start..s.start + u64::from(s.dated) + u64::from(s.nulls);
                let hits: Vec<Range<u64>> = self
                    .read_ids(store, s.file, &[run])
                    .await?
                    .into_iter()
                    .filter(|(_, i)| i == id)
                    .map(|(at, _)| at..at + 1)
                    .collect();
                if !hits.is_empty() {
                    out.extend(self.read_rows(store, s.file, &hits).await?);
                }
            }
        }
        Ok(out)
    }
}

/// Byte-range reads of one stored file of known size, for the arrow-rs async reader. The
/// footer is read once at open (with the offset index, without the column index).
///
/// Files of a local corpus are read with positional reads on a handle opened once at load:
/// they are small page reads of files the OS keeps cached, and going through
/// `LocalFileSystem` would open the file and hop to a blocking thread on every read. Other
/// stores go through `object_store`.
struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    local: Option<Arc<std::fs::File>>,
}

fn read_local(file: &std::fs::File, range: Range<u64>) -> parquet::errors::Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; (range.end - range.start) as usize];
    file.read_exact_at(&mut buf, range.start)
        .map_err(|e| ParquetError::External(Box::new(e)))?;
    Ok(Bytes::from(buf))
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        if let Some(f) = &self.local {
            return futures::future::ready(read_local(f, range)).boxed();
        }
        async move {
            let cache = &crate::page_cache::REMOTE;
            if let Some(b) = cache.get(self.path.as_ref(), &range) {
                return Ok(b);
            }
            let b = self
                .store
                .get_range(&self.path, range.clone())
                .await
                .map_err(external)?;
            cache.put(self.path.as_ref(), &range, b.clone());
            Ok(b)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        if let Some(f) = &self.local {
            let out = ranges.into_iter().map(|r| read_local(f, r)).collect();
            return futures::future::ready(out).boxed();
        }
        async move {
            // Ranges not held are fetched together (the store coalesces neighbours), then kept.
            let cache = &crate::page_cache::REMOTE;
            let mut out: Vec<Option<Bytes>> = ranges
                .iter()
                .map(|r| cache.get(self.path.as_ref(), r))
                .collect();
            let missing: Vec<Range<u64>> = ranges
                .iter()
                .zip(&out)
                .filter(|(_, got)| got.is_none())
                .map(|(r, _)| r.clone())
                .collect();
            if !missing.is_empty() {
                let fetched = self
                    .store
                    .get_ranges(&self.path, &missing)
                    .await
                    .map_err(external)?;
                let mut fetched = missing.iter().zip(fetched);
                for slot in out.iter_mut().filter(|s| s.is_none()) {
                    let (r, b) = fetched.next().expect("one answer per range");
                    cache.put(self.path.as_ref(), r, b.clone());
                    *slot = Some(b);
                }
            }
            Ok(out.into_iter().map(|b| b.expect("filled")).collect())
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let meta = ParquetMetaDataReader::new()
                .with_column_index_policy(PageIndexPolicy::Skip)
                .with_offset_index_policy(PageIndexPolicy::Required)
                .load_and_finish(&mut *self, size)
                .await?;
            Ok(Arc::new(meta))
        }
        .boxed()
    }
}

/// Limits on where the wanted rows of one CIK can lie; see [`AccessIndex::first_rows`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bounds {
    pub lower: Option<i64>,
    pub upper: Option<i64>,
    pub dated_only: bool,
    pub after_nulls: bool,
}

fn col<T: 'static>(batch: &RecordBatch, i: usize) -> Option<&T> {
    batch.column(i).as_any().downcast_ref::<T>()
}

#[cfg(test)]
mod tests {
    //! Differential tests: the index path and the DataFusion scan give the same pages.

    use super::*;
    use crate::clock::VisibleBy;
    use crate::corpus::{Answer, Corpus, Entity, NewsQuery, RecordLookup};
    use crate::coverage::Scope;
    use crate::publish::{ChangeSet, publish};
    use crate::testkit::{cert, edgar, t};

    /// xorshift64*: deterministic, dependency-free randomness for test data and queries.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    const FROM: i64 = 1_730_419_200_000_000; // 2024-11-01T00:00:00Z
    const SPAN: i64 = 120 * 86_400_000_000; // through late February 2025, crossing a year
    const CIKS: [&str; 5] = ["1", "20", "300", "4000", "50000"];

    fn instant(rng: &mut Rng) -> Instant {
        Instant::from_micros(FROM + (rng.below(SPAN as u64 / 1_000_000) as i64) * 1_000_000)
    }

    /// A corpus of ~900 rows: one big filer (several 128-row blocks per year), small ones,
    /// rows without `published_at`, a forward lane with `available_at`, and a second publish
    /// that corrects some rows (revisions).
    async fn random_corpus(
        seed: u64,
        batched: bool,
    ) -> (tempfile::TempDir, CorpusStore, Vec<NewsRow>) {
        let mut rng = Rng(seed);
        let mut rows = Vec::new();
        for i in 0..900u64 {
            // Zipf-like: half the rows to the first CIK.
            let cik = if rng.below(2) == 0 {
                CIKS[0]
            } else {
                CIKS[1 + rng.below(4) as usize]
            };
            let published = instant(&mut rng);
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
                    r.availability_basis = "local_first_seen".into();
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
                c.committed_at = Some(instant(&mut rng).max(r.committed_at.unwrap()));
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

    /// A page's `(id, revision_id)` pairs and where the next one starts.
    type Ids = (Vec<(String, String)>, Option<crate::corpus::Position>);

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
        let (_dir, store, rows) = random_corpus(5, false).await;
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
        let carried = AccessIndex::load_after(&store, &after, Some(&old))
            .await
            .unwrap()
            .unwrap();
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
        assert_eq!(carried.slots, fresh.slots);
        assert_eq!(carried.by_cik, fresh.by_cik);
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
        let (_dir, store, rows) = random_corpus(0x5eed_0001, batched).await;
        let fast = Corpus::open(store.clone()).await.unwrap();
        let mut scan = Corpus::open(store).await.unwrap();
        scan.set_read_path(crate::corpus::ReadPath::Scan);
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
            let as_of = instant(&mut rng);
            let start = (rng.below(3) == 0).then(|| {
                Instant::from_micros(as_of.micros() - 1 - rng.below(20 * 86_400) as i64 * 1_000_000)
            });
            let cik = if rng.below(15) == 0 {
                "999".to_owned()
            } else {
                CIKS[rng.below(5) as usize].to_owned()
            };
            let mut q = NewsQuery {
                source: SourceId::SecEdgar,
                lane,
                visible_by,
                start: start.filter(|s| s.micros() >= FROM),
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
            let as_of = instant(&mut rng);
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

    #[tokio::test]
    async fn rows_read_once_are_answered_from_the_row_cache_without_reading_the_file() {
        let (dir, store, _) = random_corpus(0x5eed_0003, false).await;
        let corpus = Corpus::open(store).await.unwrap();
        let query = |cik: &str| NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: Instant::from_micros(FROM + SPAN),
            entity: Entity::Cik(cik.to_owned()),
            after: None,
            limit: 300,
        };
        let first = page(corpus.news(&query(CIKS[0]), Scope::Corpus).await.unwrap()).unwrap();
        assert!(
            first.0.len() > 2 * BLOCK_ROWS,
            "several blocks of the big filer"
        );
        // Zero every access data file in place (the open handles read the same inodes; the
        // footers are in memory): only what the cache holds can still be answered.
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
        let again = page(corpus.news(&query(CIKS[0]), Scope::Corpus).await.unwrap()).unwrap();
        assert_eq!(again, first, "the same rows, from memory");
        assert!(
            corpus.news(&query(CIKS[1]), Scope::Corpus).await.is_err(),
            "a filer never read must read the (now zeroed) file"
        );
    }

    #[tokio::test]
    async fn unchanged_years_keep_their_access_objects_across_publishes() {
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
        assert_eq!(year(&m1, "2024"), year(&m2, "2024"), "2024 was not touched");
        assert_ne!(
            year(&m1, "2025"),
            year(&m2, "2025"),
            "2025 was derived again"
        );
        assert_eq!(
            m2.access
                .iter()
                .filter(|e| e.kind == KIND_CLUSTERED)
                .map(|e| e.row_count)
                .max(),
            Some(2),
            "one row added to a one-row year derives the year again"
        );
        crate::verify::verify(&store, None).await.unwrap();
    }
}
