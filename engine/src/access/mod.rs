//! Derived access files: CIK-clustered compactions of each source-lane-year, their sidecar
//! indexes, and the index-driven read path that answers by-CIK queries from them.
//!
//! Why: a source-day partition is the unit of coverage, immutability and delivery, but a
//! by-CIK query over thousands of daily files touches every file (each costs ~0.5 ms even when
//! pruned). An access file holds one year of one source-lane sorted by
//! `(cik, published_at nulls last, id, committed_at, revision_id)` in blocks of 128 rows, each
//! block one zstd-compressed Arrow record batch whose columns lie next to each other
//! ([`blocks`]); its sidecar lists, per CIK, the row range, the number of rows without
//! `published_at` and a fence (the `published_at` of the first row) every 128 dated rows, and
//! the byte offset of every block. A query reads only the blocks that can hold its page of
//! rows, and consecutive blocks are one byte range: a cold page from object storage is one
//! range GET of a few kilobytes, not a range per column.
//!
//! The sidecars are read once per version at load (in parallel; the data files' own footers
//! never). Decoded rows are kept in [`crate::page_cache::ROWS`] by their part of each block
//! (a CIK's run, or the piece of it a page reads), not as whole blocks: a small filer's run is
//! a few rows of a block shared with other filers. Compressed blocks from a remote store are
//! kept in [`crate::page_cache::REMOTE`]: the unit cached there is the unit read.
//!
//! Access files are derived at publish time from the partitions of their year and listed,
//! hash-checked, in the manifest's `access` list. A later publish that adds rows to a year
//! writes them as a small delta file (`delta-<sha>.parquet` and its sidecar, same layout) next
//! to the year's base file instead of deriving the year again, so a daily ingest costs its own
//! rows, not the year's; the read path merges runs whose spans overlap (a base and its deltas).
//! The year is derived whole again when its deltas reach a quarter of its base ([`update`]). They are never authoritative: the
//! DataFusion scan over partitions answers the same queries, and a differential test holds the
//! two to the same answers.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BinaryBuilder, Int64Array, Int64Builder, RecordBatch,
    StringArray, StringBuilder, UInt32Array, UInt32Builder, UInt64Array, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::clock::{Day, Instant, Lane, SourceId};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::read::{get_checked, read_partition};
use crate::record::{NewsRow, RowBlock, SharedRow, to_batch};
use crate::store::{CorpusStore, sha256_hex};

pub(crate) mod blocks;

/// Manifest `kind` of a CIK-clustered data file (an Arrow IPC file of 128-row blocks).
/// Version 1 was a Parquet file; a version listing only those has its by-CIK pages answered
/// by the partition walk until its next publish derives every group again.
pub const KIND_CLUSTERED: &str = "access.cik_blocks/2";
/// Manifest `kind` of the sidecar index of one clustered file.
pub const KIND_SIDECAR: &str = "access.cik_index/2";
/// Rows per block of a clustered file, counted from its first row; also the dated rows
/// between two fences of the sidecar.
pub const BLOCK_ROWS: usize = 128;

const META_DATA_SHA: &str = "asof.access.data_sha256";
const META_SUPERSESSIONS: &str = "asof.access.supersessions";
/// The byte offset of every block of the data file, and the end of the last (JSON array).
const META_BLOCKS: &str = "asof.access.block_offsets";
const DATA_SUFFIX: &str = ".arrow";
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

impl Slot {
    /// The blocks of the run's dated rows (block `k` holds dated rows `[128k, 128(k+1))`,
    /// and its first row has fence `k`) that can hold a row whose `published_at` lies within
    /// `bounds`; `None` when none can.
    fn dated_blocks(&self, bounds: Bounds) -> Option<Range<usize>> {
        if let (Some(lo), Some(max)) = (bounds.lower, self.max_published)
            && max < lo
        {
            return None;
        }
        if let (Some(hi), Some(min)) = (bounds.upper, self.min_published)
            && min > hi
        {
            return None;
        }
        let k_lo = bounds.lower.map_or(0, |lo| {
            self.fences.partition_point(|&f| f < lo).saturating_sub(1)
        });
        let k_hi = bounds.upper.map_or(self.fences.len(), |hi| {
            self.fences.partition_point(|&f| f <= hi)
        });
        (k_lo < k_hi).then_some(k_lo..k_hi)
    }

    /// The rows of the file holding dated blocks `ks` of the run.
    fn dated_rows(&self, ks: Range<usize>) -> Range<u64> {
        let dated = u64::from(self.dated);
        self.start + ((ks.start * BLOCK_ROWS) as u64).min(dated)
            ..self.start + ((ks.end * BLOCK_ROWS) as u64).min(dated)
    }
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
    offsets: &[u64],
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
            KeyValue::new(META_BLOCKS.into(), serde_json::to_string(offsets)?),
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
/// are those of one write of all the rows: blocks are cut every [`BLOCK_ROWS`] rows counted
/// from the file's first row, whatever the sizes of the pushes.
struct ClusteredWriter {
    /// The data file goes to a temporary file as it is written, hashed on the way: a year
    /// derived whole is tens of megabytes, which the publish never holds in memory.
    writer: blocks::BlockWriter,
    /// Rows pushed and not yet written: fewer than `BLOCK_ROWS` between pushes.
    pending: Vec<NewsRow>,
    rows: u64,
    slots: Vec<(String, Slot)>,
    supersessions: Vec<(String, i64)>,
}

impl ClusteredWriter {
    fn new() -> Result<Self> {
        Ok(Self {
            writer: blocks::BlockWriter::new()?,
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

    /// Each block-sized slice is one block of the file.
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
        let (data, offsets) = self.writer.finish()?;
        let data_sha = data.sha256.clone();
        let dir = group_dir(source, lane, year);
        let data_path = format!("{dir}{prefix}{data_sha}{DATA_SUFFIX}");
        self.supersessions.sort();
        let sidecar = encode_sidecar(&self.slots, &data_sha, &self.supersessions, &offsets)?;
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
                rows.extend(
                    blocks::decode_file(&d.path, bytes, (g.0, g.1))?
                        .into_iter()
                        .flatten(),
                );
            }
            let gone: HashSet<String> = deltas
                .iter()
                .flat_map(|d| {
                    let stem = d.path.strip_suffix(DATA_SUFFIX).unwrap_or(&d.path);
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

/// Whether `sidecar` is the sidecar of the data file `data`.
pub(crate) fn names_data(sidecar: &ObjectEntry, data: &ObjectEntry) -> bool {
    sidecar
        .path
        .strip_suffix(SIDECAR_SUFFIX)
        .zip(data.path.strip_suffix(DATA_SUFFIX))
        .is_some_and(|(a, b)| a == b)
}

/// `asof verify` of one access file and its sidecar, both hash-checked: every block decodes
/// from the offsets the sidecar gives, blocks hold [`BLOCK_ROWS`] rows (the last one fewer)
/// and as many as the manifest says, rows are in access order, and every slot of the sidecar
/// (a CIK's run: where it starts, its dated and undated rows, its fences) matches the rows.
/// Returns the rows checked.
pub(crate) async fn verify_file(
    store: &CorpusStore,
    manifest: &Manifest,
    sidecar: &ObjectEntry,
) -> Result<u64> {
    let bad = |what: String| Error::integrity(&sidecar.path, what);
    let group =
        group_of_path(&sidecar.path).ok_or_else(|| bad("not under snapshots/access/".into()))?;
    let data_path = sidecar
        .path
        .strip_suffix(SIDECAR_SUFFIX)
        .map(|p| format!("{p}{DATA_SUFFIX}"))
        .ok_or_else(|| bad("not a sidecar path".into()))?;
    let data = manifest
        .access
        .iter()
        .find(|e| e.kind == KIND_CLUSTERED && e.path == data_path)
        .ok_or_else(|| bad("its clustered file is not in the manifest".into()))?;
    let mut slots = Vec::new();
    let sc = get_checked(store, &sidecar.path, &sidecar.sha256).await?;
    let (_, offsets) =
        AccessIndex::decode_sidecar(&mut slots, &sidecar.path, sc, 0, group, &data.sha256)?;
    let bytes = get_checked(store, &data.path, &data.sha256).await?;
    let n = (data.row_count as usize).div_ceil(BLOCK_ROWS);
    if offsets.len() != n + 1 || offsets[n] > bytes.len() as u64 {
        return Err(bad(format!(
            "{} block offsets for {} rows",
            offsets.len(),
            data.row_count
        )));
    }
    let span = bytes.slice(offsets[0] as usize..offsets[n] as usize);
    let decoded = blocks::decode_span(&data.path, &span, &offsets, 0..n, (group.0, group.1))?;
    let last = decoded.len().saturating_sub(1);
    if let Some(k) = (0..decoded.len())
        .find(|&k| (k < last && decoded[k].len() != BLOCK_ROWS) || decoded[k].is_empty())
    {
        return Err(bad(format!("block {k} holds {} rows", decoded[k].len())));
    }
    let rows: Vec<NewsRow> = decoded.into_iter().flatten().collect();
    if rows.len() as u64 != data.row_count {
        return Err(bad(format!(
            "{} rows, manifest says {}",
            rows.len(),
            data.row_count
        )));
    }
    if !rows.is_sorted_by(|a, b| access_order(a, b).is_le()) {
        return Err(bad("rows are not in access order".into()));
    }
    let mut expected: Vec<(String, Slot)> = slots_of(&rows);
    for (_, s) in &mut expected {
        s.file = 0;
    }
    let mut found: Vec<(String, Slot)> = slots
        .into_iter()
        .map(|((_, _, cik), s)| (cik.into(), s))
        .collect();
    found.sort_by_key(|(_, s)| s.start);
    if found != expected {
        return Err(bad("its slots do not match the rows of its file".into()));
    }
    Ok(data.row_count)
}

/// A clustered file ready to read: where it is and where each of its blocks begins.
struct AccessFile {
    path: Path,
    /// A handle opened at load when the corpus is a local directory.
    local: Option<Arc<std::fs::File>>,
    /// The source and lane of every row (not stored in the file).
    group: (SourceId, Lane),
    /// Byte offset of each block, then the end of the last one.
    offsets: Box<[u64]>,
    /// Rows in the file.
    rows: u64,
    /// The manifest entry of its sidecar (path, sha256): the next version's index takes the
    /// file over when it lists the same sidecar.
    sidecar: (String, String),
    /// Superseded revision id → commit instant of the superseding row, over this file's rows.
    supersessions: Vec<(String, i64)>,
}

impl AccessFile {
    /// Whether it is read from a local directory (a read costs microseconds, not a round
    /// trip).
    fn is_local(&self) -> bool {
        self.local.is_some()
    }

    fn blocks(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The rows of block `k`.
    fn block_rows(&self, k: usize) -> Range<u64> {
        (k * BLOCK_ROWS) as u64..(((k + 1) * BLOCK_ROWS) as u64).min(self.rows)
    }

    /// The bytes of block `k`.
    fn block_bytes(&self, k: usize) -> Range<u64> {
        self.offsets[k]..self.offsets[k + 1]
    }
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
    /// Loads the sidecars (hash-checked) of the clustered files of a version.
    /// `None` when the version lists no access files.
    pub async fn load(store: &CorpusStore, manifest: &Manifest) -> Result<Option<Self>> {
        Self::load_after(store, manifest, None).await
    }

    /// As [`AccessIndex::load`], taking over from `previous` (the index of a version of the
    /// same store) every file whose sidecar both list: its block offsets, its supersessions and its
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
        // Files taken over, and the sidecars to read with their data files' entries, in
        // manifest order (which is year order within a source-lane).
        let mut plan: Vec<(
            (SourceId, Lane, i32),
            Result<usize, (&ObjectEntry, &ObjectEntry)>,
        )> = Vec::with_capacity(sidecars.len());
        for sc in sidecars {
            let group = group_of_path(&sc.path)
                .ok_or_else(|| Error::integrity(&sc.path, "not under snapshots/access/"))?;
            if let (Some(_), Some(&old)) =
                (previous, held.get(&(sc.path.as_str(), sc.sha256.as_str())))
            {
                plan.push((group, Ok(old)));
                continue;
            }
            let data_path = sc
                .path
                .strip_suffix(SIDECAR_SUFFIX)
                .map(|p| format!("{p}{DATA_SUFFIX}"))
                .ok_or_else(|| Error::integrity(&sc.path, "not a sidecar path"))?;
            let entry = data.get(data_path.as_str()).ok_or_else(|| {
                Error::integrity(&sc.path, "its clustered file is not in the manifest")
            })?;
            plan.push((group, Err((sc, *entry))));
        }
        // Only the sidecars are read (the data files' footers never are), several at a time:
        // from object storage each is a round trip, and a replica starts in a few of them.
        let mut fetched =
            futures::stream::iter(plan.iter().filter_map(|(_, p)| p.as_ref().err().copied()))
                .map(|(sc, _)| get_checked(store, &sc.path, &sc.sha256))
                .buffered(16)
                .try_collect::<Vec<Bytes>>()
                .await?
                .into_iter();
        for (group, p) in plan {
            let (sc, entry) = match p {
                Ok(old) => {
                    let prev = previous.expect("files are taken over from a previous index");
                    moved[old] = Some(idx.files.len() as u32);
                    idx.files.push(Arc::clone(&prev.files[old]));
                    groups.insert(group);
                    continue;
                }
                Err(new) => new,
            };
            let bytes = fetched.next().expect("one sidecar read per file to load");
            let file = idx.files.len() as u32;
            let (supersessions, offsets) =
                Self::decode_sidecar(&mut pending, &sc.path, bytes, file, group, &entry.sha256)?;
            let blocks = (entry.row_count as usize).div_ceil(BLOCK_ROWS);
            if offsets.len() != blocks + 1
                || !offsets.is_sorted_by(|a, b| a < b)
                || offsets.last().is_some_and(|&end| end > entry.bytes)
            {
                return Err(Error::integrity(
                    &sc.path,
                    format!(
                        "{} block offsets for {} rows of {} bytes",
                        offsets.len(),
                        entry.row_count,
                        entry.bytes
                    ),
                ));
            }
            let local = match store.local_root() {
                Some(root) => Some(Arc::new(std::fs::File::open(root.join(&entry.path))?)),
                None => None,
            };
            idx.files.push(Arc::new(AccessFile {
                path: Path::from(entry.path.as_str()),
                local,
                group: (group.0, group.1),
                offsets: offsets.into(),
                rows: entry.row_count,
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

    /// Decodes one sidecar's slots into `pending`; returns the supersessions and the block
    /// offsets it carries.
    fn decode_sidecar(
        pending: &mut Vec<(SlotKey, Slot)>,
        path: &str,
        bytes: Bytes,
        file: u32,
        (source, lane, _): (SourceId, Lane, i32),
        data_sha: &str,
    ) -> Result<(Vec<(String, i64)>, Vec<u64>)> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
        let meta = builder.metadata().clone();
        let get = crate::read::footer_value(&meta);
        if get(META_DATA_SHA).as_deref() != Some(data_sha) {
            return Err(Error::integrity(
                path,
                "sidecar names another clustered file",
            ));
        }
        let sup: Vec<(String, i64)> =
            serde_json::from_str(&get(META_SUPERSESSIONS).unwrap_or_else(|| "[]".into()))?;
        let offsets: Vec<u64> = serde_json::from_str(
            &get(META_BLOCKS).ok_or_else(|| Error::integrity(path, "no block offsets"))?,
        )?;
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
        Ok((sup, offsets))
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

    /// Rows `range` of one file (inside one CIK's run), decoded and kept in the row cache by
    /// their part in each block: the unit kept is what pages of that run read, not the
    /// block, so a small filer's few rows of a block hold a few rows of the cache, not 128
    /// (with one run per year, a page of such a filer would otherwise keep thousands of rows
    /// and the cache would hold a few hundred pages). Missing parts are read as one span.
    async fn rows(
        &self,
        store: &CorpusStore,
        file: u32,
        range: Range<u64>,
    ) -> Result<Vec<SharedRow>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let f = &self.files[file as usize];
        let first = (range.start / BLOCK_ROWS as u64) as usize;
        let last = ((range.end - 1) / BLOCK_ROWS as u64) as usize;
        if last >= f.blocks() {
            return Err(Error::integrity(
                f.path.as_ref(),
                format!("block {last} of {}", f.blocks()),
            ));
        }
        let parts: Vec<Range<u64>> = (first..=last)
            .map(|k| {
                let b = f.block_rows(k);
                range.start.max(b.start)..range.end.min(b.end)
            })
            .collect();
        let cache = &crate::page_cache::ROWS;
        let path = f.path.as_ref();
        let mut held: Vec<Option<Arc<RowBlock>>> =
            parts.iter().map(|p| cache.get(path, p)).collect();
        if let (Some(a), Some(b)) = (
            held.iter().position(Option::is_none),
            held.iter().rposition(Option::is_none),
        ) {
            let missing = first + a..first + b + 1;
            let within: Vec<Range<usize>> = missing
                .clone()
                .map(|k| {
                    let (p, at) = (&parts[k - first], f.block_rows(k).start);
                    (p.start - at) as usize..(p.end - at) as usize
                })
                .collect();
            let decoded = self.decode(store, f, missing.clone(), &within).await?;
            for (k, (n, rows)) in missing.zip(decoded) {
                let expected = f.block_rows(k);
                if n as u64 != expected.end - expected.start {
                    return Err(Error::integrity(path, format!("block {k} holds {n} rows")));
                }
                if held[k - first].is_none() {
                    let part: Arc<RowBlock> = Arc::new(rows.into_iter().collect());
                    cache.put(path, &parts[k - first], Arc::clone(&part));
                    held[k - first] = Some(part);
                }
            }
        }
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        for part in held {
            let part = part.expect("filled");
            out.extend((0..part.len()).map(|i| SharedRow::new(Arc::clone(&part), i)));
        }
        Ok(out)
    }

    /// Reads and decodes blocks `ks` of `f`. From a local directory, one positional read
    /// on the handle opened at load (the OS keeps the file cached; going through
    /// `LocalFileSystem` would open the file and hop to a blocking thread every time). From
    /// object storage, the compressed blocks held in [`crate::page_cache::REMOTE`] and one
    /// range GET for the span of the others.
    async fn decode(
        &self,
        store: &CorpusStore,
        f: &AccessFile,
        ks: Range<usize>,
        parts: &[Range<usize>],
    ) -> Result<Vec<(usize, Vec<NewsRow>)>> {
        let path = f.path.as_ref();
        let span = f.offsets[ks.start]..f.offsets[ks.end];
        if let Some(local) = &f.local {
            let bytes = read_local(local, span)?;
            return blocks::decode_parts(path, &bytes, &f.offsets, ks, f.group, Some(parts));
        }
        let remote = &crate::page_cache::REMOTE;
        let mut held: Vec<Option<Bytes>> = ks
            .clone()
            .map(|k| remote.get(path, &f.block_bytes(k)))
            .collect();
        if let (Some(first), Some(last)) = (
            held.iter().position(Option::is_none),
            held.iter().rposition(Option::is_none),
        ) {
            let (first, last) = (ks.start + first, ks.start + last);
            let fetched = store
                .object_store()
                .get_range(&f.path, f.offsets[first]..f.offsets[last + 1])
                .await?;
            for k in first..=last {
                let r = f.block_bytes(k);
                let at = (r.start - f.offsets[first]) as usize..(r.end - f.offsets[first]) as usize;
                if at.end > fetched.len() {
                    return Err(Error::integrity(path, format!("block {k}: a short read")));
                }
                let bytes = fetched.slice(at);
                if held[k - ks.start].is_none() {
                    remote.put(path, &r, bytes.clone());
                    held[k - ks.start] = Some(bytes);
                }
            }
        }
        let mut out = Vec::with_capacity(ks.len());
        for ((k, bytes), part) in ks.zip(held).zip(parts) {
            let bytes = bytes.expect("filled");
            out.extend(blocks::decode_parts(
                path,
                &bytes,
                &f.offsets,
                k..k + 1,
                f.group,
                Some(std::slice::from_ref(part)),
            )?);
        }
        Ok(out)
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
        // Runs with dated rows, in time order (by their first dated row).
        let mut dated: Vec<&Slot> = slots.iter().filter(|s| s.dated > 0).collect();
        dated.sort_by_key(|s| (s.min_published, s.file));
        // From object storage, a page reads at once what it will need of each run, in one
        // round trip instead of one per year: the runs in time order from the page's position
        // up to the rows the page wants (each from the block holding the position, the last
        // one only the blocks of the rows still wanted), and the undated rows if the dated
        // ones cannot fill it. Most filers have a few rows spread over years; a busy one's
        // hundred rows often span several. Rows the cut then turns away may make the reading
        // below go on to further blocks; from a local directory reads cost microseconds and
        // it alone reads.
        if !bounds.after_nulls && slots.len() > 1 && !self.files[slots[0].file as usize].is_local()
        {
            let mut reads: Vec<(u32, Range<u64>)> = Vec::new();
            let mut held = 0usize;
            for &s in &dated {
                if held >= want
                    || bounds
                        .upper
                        .zip(s.min_published)
                        .is_some_and(|(hi, min)| min > hi)
                {
                    break;
                }
                let Some(ks) = s.dated_blocks(bounds) else {
                    continue;
                };
                // One block more when the first may begin before the position.
                let blocks =
                    (want - held).div_ceil(BLOCK_ROWS) + usize::from(bounds.lower.is_some());
                let end = (ks.start + blocks).min(ks.end);
                reads.push((s.file, s.dated_rows(ks.start..end)));
                held += (s.dated as usize).saturating_sub(ks.start * BLOCK_ROWS);
            }
            if held < want && !bounds.dated_only {
                reads.extend(slots.iter().filter(|s| s.nulls > 0).map(|s| {
                    let from = s.start + u64::from(s.dated);
                    (s.file, from..from + u64::from(s.nulls))
                }));
            }
            if reads.len() > 1 {
                futures::future::try_join_all(
                    reads
                        .into_iter()
                        .map(|(file, rows)| self.rows(store, file, rows)),
                )
                .await?;
            }
        }
        if !bounds.after_nulls {
            // Runs by their first dated row. Runs whose spans overlap (a year's base file and
            // its deltas) form one cluster, read together and merged; clusters follow each
            // other in time, so the answer is the first clusters' rows in order.
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
            undated.extend(
                self.rows(store, s.file, from..to)
                    .await?
                    .into_iter()
                    .filter(|r| keep(r)),
            );
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
        let Some(Range {
            start: k_lo,
            end: k_hi,
        }) = s.dated_blocks(bounds)
        else {
            return Ok(());
        };
        let mut k = k_lo;
        while k < k_hi {
            let need = want.saturating_sub(out.len());
            // Enough blocks for the rows still wanted, plus one when the first block may begin
            // before the lower bound.
            let blocks =
                need.div_ceil(BLOCK_ROWS).max(1) + usize::from(bounds.lower.is_some() && k == k_lo);
            let k_end = (k + blocks).min(k_hi);
            // Dated rows of blocks k..k_end of the run (which need not begin at a block of
            // the file: its rows are one range, read as the file's blocks holding it).
            for r in self.rows(store, s.file, s.dated_rows(k..k_end)).await? {
                if keep(&r) {
                    // Shared with the cached block, not copied: a page of a hundred rows
                    // would otherwise copy some two thousand strings.
                    out.push(r);
                    if out.len() >= want {
                        return Ok(());
                    }
                }
            }
            k = k_end;
        }
        Ok(())
    }

    /// Every revision of one record id of one CIK, across all covered source-lanes. `days`
    /// names, per source-lane, the partition days that may hold a revision (the version's id
    /// runs, [`crate::ids::days_holding`]); only the blocks of the CIK's runs whose
    /// `published_at` falls on one of them are read, and the rows without one (a revision
    /// without `published_at` is filed under another clock's day). A lane without days has
    /// its runs read whole.
    pub(crate) async fn revisions(
        &self,
        store: &CorpusStore,
        cik: &str,
        id: &str,
        days: &HashMap<(SourceId, Lane), BTreeSet<Day>>,
    ) -> Result<Vec<NewsRow>> {
        let mut lanes: Vec<(SourceId, Lane)> = self.covered.iter().copied().collect();
        lanes.sort();
        let mut out = Vec::new();
        for (source, lane) in lanes {
            let days = days.get(&(source, lane));
            for s in self.slots(source, lane, cik) {
                let mut ranges: Vec<Range<u64>> = Vec::new();
                let dated = s.start..s.start + u64::from(s.dated);
                match days {
                    None => ranges.push(dated.clone()),
                    Some(days) => {
                        for d in days {
                            let lo = d.start().micros();
                            let hi = lo + 86_400_000_000 - 1;
                            let bounds = Bounds {
                                lower: Some(lo),
                                upper: Some(hi),
                                ..Bounds::default()
                            };
                            if let Some(ks) = s.dated_blocks(bounds) {
                                ranges.push(s.dated_rows(ks));
                            }
                        }
                    }
                }
                ranges.push(dated.end..dated.end + u64::from(s.nulls));
                ranges.sort_by_key(|r| r.start);
                let mut merged: Vec<Range<u64>> = Vec::new();
                for r in ranges.into_iter().filter(|r| !r.is_empty()) {
                    match merged.last_mut() {
                        Some(m) if r.start <= m.end => m.end = m.end.max(r.end),
                        _ => merged.push(r),
                    }
                }
                for r in merged {
                    out.extend(
                        self.rows(store, s.file, r)
                            .await?
                            .into_iter()
                            .filter(|row| row.id == id)
                            .map(|row| NewsRow::clone(&row)),
                    );
                }
            }
        }
        Ok(out)
    }
}

fn read_local(file: &std::fs::File, range: Range<u64>) -> Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; (range.end - range.start) as usize];
    file.read_exact_at(&mut buf, range.start)?;
    Ok(Bytes::from(buf))
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
    use crate::testkit::{
        RANDOM_CIKS, RANDOM_FROM, RANDOM_SPAN, Rng, cert, edgar, random_corpus, random_instant, t,
    };

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
            let held = crate::page_cache::ROWS
                .get(path, &run)
                .expect("the run's rows are kept");
            assert_eq!(held.len() as u64, run.end - run.start);
            if block != run {
                assert!(
                    crate::page_cache::ROWS.get(path, &block).is_none(),
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
                    let Some((ids, next)) = page(corpus.news(&q, Scope::Corpus).await.unwrap())
                    else {
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
    async fn access_files_of_the_first_layout_are_ignored_and_the_next_publish_derives_every_group_again()
     {
        let (_dir, store, _) = random_corpus(0x5eed_0048, false).await;
        let (version, mut m) = store.current().await.unwrap();
        // As a corpus published before this layout lists its files (the objects themselves do
        // not matter: they are never opened).
        for e in &mut m.access {
            if e.kind == KIND_CLUSTERED {
                e.kind = "access.cik_clustered/1".into();
            } else if e.kind == KIND_SIDECAR {
                e.kind = "access.cik_index/1".into();
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
            AccessIndex::decode_sidecar(&mut pending, &sc.path, bytes, 0, group, &data.sha256)
                .unwrap();
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
