//! Reading id runs: the days that may hold an id, asked of every run of a source-lane, with
//! each run's fences and key filter kept in [`ID_RUNS`] (the format, and why, in
//! `crate::format::ids`).

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use parquet::bloom_filter::Sbbf;

use crate::error::Result;
use crate::format::ids::{
    ENTRY, HEADER, IdEntry, WHOLE_READ_BYTES, decode_entries, decode_filter, filter_of, get_range,
    get_ranges, header, indexed, key_of, read_run, runs_of,
};
use crate::model::clock::{Day, Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry};
use crate::read::page_cache::{Cache, Weigh, bound_or};
use crate::store::CorpusStore;
use crate::store::objects::get_checked;

/// What a lookup needs of an id run, kept so a lookup does not read and hash-check the
/// version's runs again: a small run's entries, or a large one's header, fences and key filter
/// (its blocks are still read by range). Runs are content-addressed, so an entry is never
/// stale (`ASOF_ID_RUN_CACHE_MB`, default 256: one entry may take a quarter of it, and the
/// filter of a 20M-entry run is 32 MiB).
pub static ID_RUNS: LazyLock<Cache<Arc<RunIndex>>> =
    LazyLock::new(|| Cache::new(bound_or("ASOF_ID_RUN_CACHE_MB", 256)));

impl Weigh for Arc<RunIndex> {
    fn weight(&self) -> usize {
        RunIndex::weight(self)
    }
}

/// What a lookup needs of one run before its blocks: a small run's entries (read whole and
/// hash-checked), or a large run's entry count, block size and fences. Kept in
/// [`ID_RUNS`], so the version's runs are read once, not per lookup.
#[derive(Debug)]
pub enum RunIndex {
    Whole(Vec<IdEntry>),
    Fenced {
        n: u64,
        block: u32,
        fences: Vec<u64>,
        /// The run's key filter, when it has one.
        filter: Option<Sbbf>,
    },
}

impl RunIndex {
    /// Approximate bytes held.
    pub fn weight(&self) -> usize {
        match self {
            RunIndex::Whole(e) => e.len() * std::mem::size_of::<IdEntry>(),
            RunIndex::Fenced { fences, filter, .. } => {
                fences.len() * 8 + filter.as_ref().map_or(0, |f| f.num_blocks() * 32)
            }
        }
    }

    async fn load(
        store: &CorpusStore,
        e: &ObjectEntry,
        filter: Option<&ObjectEntry>,
    ) -> Result<std::sync::Arc<Self>> {
        let cache = &ID_RUNS;
        let whole = 0..e.bytes;
        // A run is kept with the filter it was loaded with: the version after the one that
        // gave an older large run its filter must not find it cached without one.
        let key = match filter {
            Some(f) => format!("{}#{}", e.path, f.sha256),
            None => e.path.clone(),
        };
        if let Some(i) = cache.get(&key, &whole) {
            return Ok(i);
        }
        let index = if e.bytes <= WHOLE_READ_BYTES {
            RunIndex::Whole(read_run(store, e).await?)
        } else {
            let head = get_range(store, &e.path, 0..HEADER).await?;
            let (n, block) = header(&e.path, &head, e.bytes)?;
            let nblocks = n.div_ceil(u64::from(block));
            let fences_at = HEADER + n * ENTRY;
            let raw = get_range(store, &e.path, fences_at..fences_at + nblocks * 8).await?;
            let fences = raw
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            let filter = match filter {
                Some(f) => {
                    let bytes = get_checked(store, &f.path, &f.sha256).await?;
                    Some(decode_filter(&f.path, &bytes, n)?)
                }
                None => None,
            };
            RunIndex::Fenced {
                n,
                block,
                fences,
                filter,
            }
        };
        let index = std::sync::Arc::new(index);
        cache.put(&key, &whole, std::sync::Arc::clone(&index));
        Ok(index)
    }
}

/// The days of the entries of one run whose keys are in `keys` (sorted, unique).
async fn days_in_run(
    store: &CorpusStore,
    e: &ObjectEntry,
    filter: Option<&ObjectEntry>,
    keys: &[u64],
    out: &mut BTreeSet<Day>,
) -> Result<()> {
    let hits = |entries: &[IdEntry], out: &mut BTreeSet<Day>| {
        for &(k, d) in entries {
            if keys.binary_search(&k).is_ok() {
                out.insert(Day::from_days(d));
            }
        }
    };
    let index = RunIndex::load(store, e, filter).await?;
    let (n, block, fences, filter) = match &*index {
        RunIndex::Whole(entries) => {
            hits(entries, out);
            return Ok(());
        }
        RunIndex::Fenced {
            n,
            block,
            fences,
            filter,
        } => (*n, *block, fences, filter),
    };
    // Blocks that can hold a key: the last block starting at or below it, and the one before
    // when the key starts a block (a key's entries for several days may straddle a fence).
    // A key the filter refuses is in no block.
    let mut wanted: BTreeSet<u64> = BTreeSet::new();
    for &k in keys {
        if filter.as_ref().is_some_and(|f| !f.check(&k)) {
            continue;
        }
        let hi = fences.partition_point(|&f| f <= k);
        if hi == 0 {
            continue;
        }
        let lo = fences.partition_point(|&f| f < k);
        for b in lo.max(1) - 1..hi {
            wanted.insert(b as u64);
        }
    }
    // Adjacent blocks become one range.
    let mut ranges: Vec<Range<u64>> = Vec::new();
    for b in wanted {
        let start = HEADER + b * u64::from(block) * ENTRY;
        let end = HEADER + ((b + 1) * u64::from(block)).min(n) * ENTRY;
        match ranges.last_mut() {
            Some(r) if r.end == start => r.end = end,
            _ => ranges.push(start..end),
        }
    }
    // Past a filter the blocks are few and far apart (the held ids and a few false
    // positives), so each is its own GET: coalescing them as object_store does (gaps under a
    // megabyte) would read most of a large run for fifty blocks. Without one they are dense.
    let got = if filter.is_some() {
        get_sparse(store, &e.path, ranges).await?
    } else {
        get_ranges(store, &e.path, &ranges).await?
    };
    for bytes in got {
        hits(&decode_entries(&e.path, &bytes)?, out);
    }
    Ok(())
}

/// Ranges this close become one read: a gap costs less to read than a request's round trip.
const SPARSE_GAP: u64 = 16 << 10;
/// Range reads of one run in flight at once.
const SPARSE_PARALLEL: usize = 16;

/// Reads `ranges` (sorted, whole blocks), joining only those a [`SPARSE_GAP`] apart, a few
/// requests at a time. A joined range is whole blocks too, so it decodes as entries.
async fn get_sparse(
    store: &CorpusStore,
    path: &str,
    ranges: Vec<Range<u64>>,
) -> Result<Vec<Bytes>> {
    use futures::{StreamExt, TryStreamExt};
    let mut joined: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match joined.last_mut() {
            Some(last) if r.start <= last.end + SPARSE_GAP => last.end = last.end.max(r.end),
            _ => joined.push(r),
        }
    }
    futures::stream::iter(joined)
        .map(|r| get_range(store, path, r))
        .buffered(SPARSE_PARALLEL)
        .try_collect()
        .await
}

/// The days whose partitions of `source`/`lane` may hold a revision of any of `ids`, by the
/// version's runs. `None` when the source-lane is not [`indexed`]: the caller reads all its
/// partitions.
pub async fn days_holding<'a>(
    store: &CorpusStore,
    manifest: &Manifest,
    source: SourceId,
    lane: Lane,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<Option<BTreeSet<Day>>> {
    if !indexed(manifest, source, lane) {
        return Ok(None);
    }
    let mut keys: Vec<u64> = ids.into_iter().map(key_of).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut out = BTreeSet::new();
    if keys.is_empty() {
        return Ok(Some(out));
    }
    for e in runs_of(manifest, source, lane) {
        days_in_run(store, e, filter_of(manifest, e), &keys, &mut out).await?;
    }
    Ok(Some(out))
}
