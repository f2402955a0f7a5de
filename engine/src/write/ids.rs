//! Writing id runs at publish: one run of the rows a publish adds, then runs of similar size
//! merged (the format, and why, in `crate::format::ids`).

use std::collections::HashMap;

use bytes::Bytes;

use crate::error::Result;
use crate::format::ids::{
    IdEntry, KIND_IDS, KIND_IDS_FILTER, MAX_RUNS, MERGE_RATIO, WHOLE_READ_BYTES, encode,
    encode_filter, entry, filter_path, read_run, run_dir, runs_of,
};
use crate::model::clock::{Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry};
use crate::store::CorpusStore;
use crate::store::hashing::sha256_hex;

/// One run while runs are being merged: stored already, or only in memory.
struct Pending {
    stored: Option<ObjectEntry>,
    entries: Option<Vec<IdEntry>>,
    count: u64,
}

impl Pending {
    async fn entries(&mut self, store: &CorpusStore) -> Result<Vec<IdEntry>> {
        match (self.entries.take(), &self.stored) {
            (Some(e), _) => Ok(e),
            (None, Some(s)) => read_run(store, s).await,
            (None, None) => Ok(Vec::new()),
        }
    }
}

/// Merges two sorted, unique entry lists into one.
fn merge(a: Vec<IdEntry>, b: Vec<IdEntry>) -> Vec<IdEntry> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// Adds the entries of one publish to the runs of `source`/`lane` in `manifest`: writes a new
/// run, merges runs as [`MERGE_RATIO`] and [`MAX_RUNS`] say, and replaces the source-lane's
/// run entries in `manifest.access`. Deterministic: the same runs and entries give the same
/// objects.
pub async fn add(
    store: &CorpusStore,
    manifest: &mut Manifest,
    source: SourceId,
    lane: Lane,
    mut fresh: Vec<IdEntry>,
) -> Result<()> {
    fresh.sort_unstable();
    fresh.dedup();
    if fresh.is_empty() {
        return Ok(());
    }
    let mut runs: Vec<Pending> = runs_of(manifest, source, lane)
        .into_iter()
        .map(|e| Pending {
            count: e.row_count,
            stored: Some(e.clone()),
            entries: None,
        })
        .collect();
    runs.push(Pending {
        count: fresh.len() as u64,
        stored: None,
        entries: Some(fresh),
    });
    loop {
        // Largest first; ties by path so the merge order never depends on listing order.
        runs.sort_by(|a, b| {
            b.count.cmp(&a.count).then_with(|| {
                let p = |r: &Pending| r.stored.as_ref().map(|s| s.path.clone());
                p(a).cmp(&p(b))
            })
        });
        let n = runs.len();
        // The smallest neighbours whose sizes are within the ratio; past the run limit, the
        // two smallest whatever their sizes.
        let close = (1..n)
            .rev()
            .find(|&i| runs[i].count * MERGE_RATIO >= runs[i - 1].count);
        let i = match close {
            Some(i) => i,
            None if n > MAX_RUNS => n - 1,
            None => break,
        };
        let mut small = runs.remove(i);
        let mut big = runs.remove(i - 1);
        let merged = merge(big.entries(store).await?, small.entries(store).await?);
        runs.push(Pending {
            count: merged.len() as u64,
            stored: None,
            entries: Some(merged),
        });
    }
    let dir = run_dir(source, lane);
    let filters: HashMap<String, ObjectEntry> = manifest
        .access
        .iter()
        .filter(|e| e.kind == KIND_IDS_FILTER && e.path.starts_with(&dir))
        .map(|e| (e.path.clone(), e.clone()))
        .collect();
    manifest.access.retain(|e| {
        !((e.kind == KIND_IDS || e.kind == KIND_IDS_FILTER) && e.path.starts_with(&dir))
    });
    for r in runs {
        let (entry, entries) = match (r.stored, r.entries) {
            (Some(stored), None) => (stored, None),
            (_, Some(entries)) => {
                let bytes = encode(&entries);
                let sha = sha256_hex(&bytes);
                let path = format!("{dir}{sha}.ids");
                let entry = ObjectEntry {
                    kind: KIND_IDS.into(),
                    path: path.clone(),
                    bytes: bytes.len() as u64,
                    sha256: sha,
                    row_count: entries.len() as u64,
                };
                store.put_immutable(&path, Bytes::from(bytes)).await?;
                (entry, Some(entries))
            }
            (None, None) => continue,
        };
        // A run read by ranges has a filter: kept when it had one, else made from its entries
        // (a large run written before filters existed is read whole once, here).
        if entry.bytes > WHOLE_READ_BYTES {
            let path = filter_path(&entry);
            let filter = match filters.get(&path) {
                Some(f) => f.clone(),
                None => {
                    let entries = match entries {
                        Some(e) => e,
                        None => read_run(store, &entry).await?,
                    };
                    let bytes = encode_filter(&entries);
                    let f = ObjectEntry {
                        kind: KIND_IDS_FILTER.into(),
                        path: path.clone(),
                        bytes: bytes.len() as u64,
                        sha256: sha256_hex(&bytes),
                        row_count: entry.row_count,
                    };
                    store.put_immutable(&path, Bytes::from(bytes)).await?;
                    f
                }
            };
            manifest.access.push(filter);
        }
        manifest.access.push(entry);
    }
    manifest.access.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(())
}

/// Entries of `rows`, grouped by source-lane (rows without a partition day are skipped: the
/// publisher refuses them before it indexes anything).
pub fn entries_by_lane<'a>(
    rows: impl IntoIterator<Item = &'a crate::model::record::NewsRow>,
) -> HashMap<(SourceId, Lane), Vec<IdEntry>> {
    let mut out: HashMap<(SourceId, Lane), Vec<IdEntry>> = HashMap::new();
    for r in rows {
        if let Some(day) = r.partition_day() {
            out.entry((r.source_id, r.lane))
                .or_default()
                .push(entry(&r.id, day));
        }
    }
    out
}
