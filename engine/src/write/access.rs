//! Writing access files: a group's data file and sidecar derived from its partitions in
//! bounded memory, and the upkeep of a publish (a delta file for the rows added, deltas
//! merged, or the era derived whole again).

use std::collections::{BTreeMap, HashSet};

use arrow::array::RecordBatch;
use bytes::Bytes;

use crate::error::Result;
use crate::model::clock::{Instant, Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::model::record::{NewsRow, to_batch};
use crate::store::CorpusStore;
use crate::store::hashing::sha256_hex;
use crate::store::objects::{download_checked, read_partition};

use crate::format::access::blocks;
use crate::format::access::layout::{
    BLOCK_ROWS, DATA_SUFFIX, DELTA_PREFIX, DELTA_RATIO, KIND_CLUSTERED, KIND_SIDECAR, MAX_DELTAS,
    SIDECAR_SUFFIX, Slot, access_order, cik_key, encode_sidecar, group_dir, group_of,
    is_stale_kind, slots_of,
};

/// Writes one clustered file and its sidecar; `prefix` is `""` for a group's base file and
/// [`DELTA_PREFIX`] for a delta.
pub(crate) async fn write_file(
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
pub(crate) struct ClusteredWriter {
    /// The data file goes to a temporary file as it is written, hashed on the way: an era
    /// derived whole runs to a gigabyte, which the publish never holds in memory.
    pub(crate) writer: blocks::BlockWriter,
    /// Rows pushed and not yet written: fewer than `BLOCK_ROWS` between pushes.
    pub(crate) pending: Vec<NewsRow>,
    pub(crate) rows: u64,
    pub(crate) slots: Vec<(String, Slot)>,
    pub(crate) supersessions: Vec<(String, i64)>,
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
        (source, lane, era): (SourceId, Lane, i32),
        prefix: &str,
    ) -> Result<Vec<ObjectEntry>> {
        if !self.pending.is_empty() {
            let batch = to_batch(&std::mem::take(&mut self.pending))?;
            self.write_blocks(&batch)?;
        }
        let (data, offsets) = self.writer.finish()?;
        let data_sha = data.sha256.clone();
        let dir = group_dir(source, lane, era);
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

/// Rows of one group held in memory at once while it is written: past this many, rows are
/// sorted and spilled as a run to a temporary file, and the runs are merged into the file
/// ([`GroupBuilder`]), so memory is bounded by the run and the merge's blocks, not by the era
/// (an era of a backfilled corpus holds millions of rows).
pub const DERIVE_CHUNK_ROWS: u64 = 131_072;

/// Rows per block of a spilled run: the merge holds one decoded block of each run.
const SPILL_BLOCK_ROWS: usize = 512;

/// Rows the merge hands the file writer at once (more when one CIK's run is longer: a
/// push holds whole CIKs).
const MERGE_PUSH_ROWS: usize = 4_096;

/// One clustered file written from rows that arrive in any order, in bounded memory: an
/// external merge sort. Rows are held up to `chunk_rows`; past that each chunk is sorted in
/// access order and spilled to an anonymous temporary file (zstd blocks, the access file's
/// own encoding), and [`GroupBuilder::finish`] merges the runs into the file. The bytes are
/// those of one sort of all the rows (access order is total: revision ids are unique), so
/// how the rows were cut into runs never shows.
///
/// Why not reading the group's partitions once per run of CIKs, as the first derive did:
/// that read an era's partitions some seventy times; this reads them once and writes and
/// reads each row once more on the local disk.
pub struct GroupBuilder {
    group: (SourceId, Lane, i32),
    chunk_rows: usize,
    held: Vec<NewsRow>,
    runs: Vec<SpilledRun>,
}

/// One sorted run in a temporary file: its blocks' offsets.
struct SpilledRun {
    file: std::fs::File,
    offsets: Vec<u64>,
}

impl GroupBuilder {
    /// A builder of `group`'s file holding at most [`DERIVE_CHUNK_ROWS`] rows in memory.
    pub fn new(group: (SourceId, Lane, i32)) -> Self {
        Self::with_chunk(group, DERIVE_CHUNK_ROWS)
    }

    pub(crate) fn with_chunk(group: (SourceId, Lane, i32), chunk_rows: u64) -> Self {
        GroupBuilder {
            group,
            chunk_rows: usize::try_from(chunk_rows).unwrap_or(usize::MAX).max(1),
            held: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// The group whose file this is.
    pub fn group(&self) -> (SourceId, Lane, i32) {
        self.group
    }

    /// Adds rows of the group, in any order.
    pub fn push(&mut self, rows: impl IntoIterator<Item = NewsRow>) -> Result<()> {
        for r in rows {
            self.held.push(r);
            if self.held.len() >= self.chunk_rows {
                self.spill()?;
            }
        }
        Ok(())
    }

    /// Sorts the rows held and writes them as one run; past [`MAX_RUNS`] runs, merges them
    /// into one (a second level), so the merge never holds more than that many files open.
    fn spill(&mut self) -> Result<()> {
        let mut rows = std::mem::take(&mut self.held);
        rows.sort_by(access_order);
        let mut w = RunWriter::new()?;
        for r in rows {
            w.push(r)?;
        }
        self.runs.push(w.finish()?);
        if self.runs.len() >= MAX_RUNS {
            let mut w = RunWriter::new()?;
            merge(std::mem::take(&mut self.runs), self.group, |r| w.push(r))?;
            self.runs.push(w.finish()?);
        }
        Ok(())
    }

    /// Writes the clustered file and its sidecar; `prefix` is `""` for a group's base file
    /// and [`DELTA_PREFIX`] for a delta. Returns both manifest entries (data first).
    pub async fn finish(mut self, store: &CorpusStore, prefix: &str) -> Result<Vec<ObjectEntry>> {
        if self.runs.is_empty() {
            return write_file(store, self.group, self.held, prefix).await;
        }
        if !self.held.is_empty() {
            self.spill()?;
        }
        let mut w = ClusteredWriter::new()?;
        let mut batch: Vec<NewsRow> = Vec::with_capacity(MERGE_PUSH_ROWS);
        merge(std::mem::take(&mut self.runs), self.group, |row| {
            // A push holds whole CIKs (the writer's slots are per push).
            if batch.len() >= MERGE_PUSH_ROWS
                && batch
                    .last()
                    .is_some_and(|last| cik_key(last) != cik_key(&row))
            {
                w.push(std::mem::take(&mut batch))?;
            }
            batch.push(row);
            Ok(())
        })?;
        w.push(batch)?;
        w.finish(store, self.group, prefix).await
    }
}

/// Runs merged at once: more are first merged into one.
const MAX_RUNS: usize = 64;

/// Hands `sink` the rows of `runs` in access order.
fn merge(
    runs: Vec<SpilledRun>,
    (source, lane, _): (SourceId, Lane, i32),
    mut sink: impl FnMut(NewsRow) -> Result<()>,
) -> Result<()> {
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = std::collections::BinaryHeap::with_capacity(runs.len());
    for (run, spilled) in runs.into_iter().enumerate() {
        let mut r = RunReader {
            run: spilled,
            next_block: 0,
            rows: Vec::new().into_iter(),
            group: (source, lane),
        };
        if let Some(row) = r.next_row()? {
            heap.push(Head { row, run });
        }
        readers.push(r);
    }
    while let Some(Head { row, run }) = heap.pop() {
        sink(row)?;
        if let Some(next) = readers[run].next_row()? {
            heap.push(Head { row: next, run });
        }
    }
    Ok(())
}

/// Writes one sorted run to a temporary file in blocks of [`SPILL_BLOCK_ROWS`].
struct RunWriter {
    writer: blocks::BlockWriter,
    pending: Vec<NewsRow>,
}

impl RunWriter {
    fn new() -> Result<Self> {
        Ok(RunWriter {
            writer: blocks::BlockWriter::new()?,
            pending: Vec::with_capacity(SPILL_BLOCK_ROWS),
        })
    }

    fn push(&mut self, row: NewsRow) -> Result<()> {
        self.pending.push(row);
        if self.pending.len() >= SPILL_BLOCK_ROWS {
            self.writer.write(&to_batch(&self.pending)?)?;
            self.pending.clear();
        }
        Ok(())
    }

    fn finish(mut self) -> Result<SpilledRun> {
        if !self.pending.is_empty() {
            self.writer.write(&to_batch(&self.pending)?)?;
        }
        let (file, offsets) = self.writer.finish()?;
        Ok(SpilledRun {
            file: file.file,
            offsets,
        })
    }
}

/// Reads a spilled run back one block at a time.
struct RunReader {
    run: SpilledRun,
    next_block: usize,
    rows: std::vec::IntoIter<NewsRow>,
    group: (SourceId, Lane),
}

impl RunReader {
    fn next_row(&mut self) -> Result<Option<NewsRow>> {
        loop {
            if let Some(r) = self.rows.next() {
                return Ok(Some(r));
            }
            let k = self.next_block;
            if k + 1 >= self.run.offsets.len() {
                return Ok(None);
            }
            self.next_block += 1;
            let bytes =
                blocks::read_local(&self.run.file, self.run.offsets[k]..self.run.offsets[k + 1])?;
            let mut decoded = blocks::decode_parts(
                "a spilled run of an access file",
                &bytes,
                &self.run.offsets,
                k..k + 1,
                self.group,
                None,
            )?;
            self.rows = decoded
                .pop()
                .map(|(_, rows)| rows)
                .unwrap_or_default()
                .into_iter();
        }
    }
}

/// A run's next row in the merge: the heap is a max-heap, so the order is reversed, and ties
/// (none in access order) go to the earlier run.
struct Head {
    row: NewsRow,
    run: usize,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        access_order(&other.row, &self.row).then(other.run.cmp(&self.run))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Head {}

/// The clustered file and sidecar of one group, derived from its partitions `parts` (each read
/// once) holding at most about `chunk_rows` rows in memory.
pub(crate) async fn derive_group(
    store: &CorpusStore,
    group: (SourceId, Lane, i32),
    parts: &[&PartitionEntry],
    chunk_rows: u64,
) -> Result<Vec<ObjectEntry>> {
    let mut b = GroupBuilder::with_chunk(group, chunk_rows);
    for p in parts {
        b.push(read_partition(store, p).await?)?;
    }
    b.finish(store, "").await
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
/// read path merges a base and its deltas), so a daily ingest never re-derives an era. When a
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
        let upkeep = if deltas.len() >= MAX_DELTAS {
            Upkeep::DeltasMerged
        } else {
            Upkeep::Delta
        };
        // Merged deltas of an era can hold up to a quarter of its rows: they are merged in
        // bounded memory, a delta file at a time.
        let mut file = GroupBuilder::new(g);
        file.push(rows)?;
        if upkeep == Upkeep::DeltasMerged {
            for d in &deltas {
                let local = download_checked(store, &d.path, &d.sha256).await?;
                blocks::for_each_block(&d.path, local, (g.0, g.1), |rows| file.push(rows))?;
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
            .extend(file.finish(store, DELTA_PREFIX).await?);
        out.insert(g, upkeep);
    }
    derive(store, manifest, &whole).await?;
    // Objects of an earlier layout are never read; every group they covered was just derived
    // (a group without a file of this layout is derived whole).
    manifest.access.retain(|e| !is_stale_kind(&e.kind));
    out.extend(whole.into_iter().map(|g| (g, Upkeep::Derived)));
    manifest.access.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
