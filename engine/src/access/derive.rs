//! Writing access files: a group's data file and sidecar derived from its partitions in
//! bounded memory, and the upkeep of a publish (a delta file for the rows added, deltas
//! merged, or the year derived whole again).

use std::collections::{BTreeMap, HashSet};

use arrow::array::RecordBatch;
use bytes::Bytes;

use crate::clock::{Instant, Lane, SourceId};
use crate::error::Result;
use crate::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::read::{get_checked, read_partition};
use crate::record::{NewsRow, to_batch};
use crate::store::{CorpusStore, sha256_hex};

use super::blocks;
use super::layout::{
    BLOCK_ROWS, DATA_SUFFIX, DELTA_PREFIX, DELTA_RATIO, KIND_CLUSTERED, KIND_SIDECAR, MAX_DELTAS,
    SIDECAR_SUFFIX, Slot, access_order, cik_key, encode_sidecar, group_dir, group_of, slots_of,
};

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
pub(super) async fn write_file(
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
pub(super) struct ClusteredWriter {
    /// The data file goes to a temporary file as it is written, hashed on the way: a year
    /// derived whole is tens of megabytes, which the publish never holds in memory.
    pub(super) writer: blocks::BlockWriter,
    /// Rows pushed and not yet written: fewer than `BLOCK_ROWS` between pushes.
    pub(super) pending: Vec<NewsRow>,
    pub(super) rows: u64,
    pub(super) slots: Vec<(String, Slot)>,
    pub(super) supersessions: Vec<(String, i64)>,
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

/// The clustered file and sidecar of one group, derived from its partitions `parts` holding
/// at most about `chunk_rows` rows in memory (a CIK with more rows is one run of its own).
pub(super) async fn derive_group(
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
