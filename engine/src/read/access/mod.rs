//! Reading access files: `AccessIndex`, loaded from the sidecars of a version (taking over
//! what an earlier version's index shares), and the reads of a page's blocks, local or
//! remote, cached by their part of each block.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::error::{Error, Result};
use crate::model::clock::{Day, Instant, Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry};
use crate::model::record::{NewsRow, RowBlock, SharedRow};
use crate::store::CorpusStore;
use crate::store::objects::get_checked;

use crate::format::access::blocks;
use crate::format::access::layout::{
    BLOCK_ROWS, Bounds, DATA_SUFFIX, KIND_CLUSTERED, KIND_SIDECAR, SIDECAR_SUFFIX, Slot,
    access_order, decode_sidecar, group_of, group_of_path,
};

/// A clustered file ready to read: where it is and where each of its blocks begins.
pub(crate) struct AccessFile {
    pub(crate) path: Path,
    /// A handle opened at load when the corpus is a local directory.
    pub(crate) local: Option<Arc<std::fs::File>>,
    /// The source and lane of every row (not stored in the file).
    pub(crate) group: (SourceId, Lane),
    /// Byte offset of each block, then the end of the last one.
    pub(crate) offsets: Box<[u64]>,
    /// Rows in the file.
    pub(crate) rows: u64,
    /// The manifest entry of its sidecar (path, sha256): the next version's index takes the
    /// file over when it lists the same sidecar.
    pub(crate) sidecar: (String, String),
    /// Superseded revision id → commit instant of the superseding row, over this file's rows.
    pub(crate) supersessions: Vec<(String, i64)>,
    /// Each CIK's run in this file (its `file` field is 0: a version numbers its files itself,
    /// see [`AccessIndex::slots`]). Kept with the file, not in the index: every version that
    /// lists the file shares it, so versions kept side by side (pinned reads) hold one copy of
    /// the runs of the files they have in common, which are almost all of them.
    pub(crate) runs: HashMap<Box<str>, Slot>,
}

impl AccessFile {
    /// Whether it is read from a local directory (a read costs microseconds, not a round
    /// trip).
    pub(crate) fn is_local(&self) -> bool {
        self.local.is_some()
    }

    pub(crate) fn blocks(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The rows of block `k`.
    pub(crate) fn block_rows(&self, k: usize) -> Range<u64> {
        (k * BLOCK_ROWS) as u64..(((k + 1) * BLOCK_ROWS) as u64).min(self.rows)
    }

    /// The bytes of block `k`.
    pub(crate) fn block_bytes(&self, k: usize) -> Range<u64> {
        self.offsets[k]..self.offsets[k + 1]
    }
}

/// The in-memory index over every access file of a version.
pub struct AccessIndex {
    /// Shared with the next version's index for the files both list.
    pub(crate) files: Vec<Arc<AccessFile>>,
    /// Each source-lane's files, as indexes into `files`, in load order (era order).
    pub(crate) groups: HashMap<(SourceId, Lane), Vec<u32>>,
    /// Source-lanes every partition of which is in an access file.
    pub(crate) covered: HashSet<(SourceId, Lane)>,
}

impl std::fmt::Debug for AccessIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessIndex")
            .field("files", &self.files.len())
            .field(
                "runs",
                &self.files.iter().map(|f| f.runs.len()).sum::<usize>(),
            )
            .field("covered", &self.covered)
            .finish()
    }
}

impl AccessIndex {
    /// Loads the sidecars (hash-checked) of the clustered files of a version.
    /// `None` when the version lists no access files.
    pub async fn load(store: &CorpusStore, manifest: &Manifest) -> Result<Option<Self>> {
        Self::load_after(store, manifest, None).await
    }

    /// As [`AccessIndex::load`], taking over from `previous` (the index of a version of the
    /// same store) every file whose sidecar both list: its block offsets, its supersessions and its
    /// slots, which a publish that adds a delta file to one era leaves as they were. Only
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
            groups: HashMap::new(),
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
        let mut groups = HashSet::new();
        // Files taken over, and the sidecars to read with their data files' entries, in
        // manifest order (which is era order within a source-lane).
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
        // Owned paths, not closures over `plan`'s borrows: a future holding a closure whose
        // argument borrows is not provably `Send` to rustc when awaited inside another
        // generic future (a pinned version is loaded on a task of its own).
        let wanted: Vec<(String, String)> = plan
            .iter()
            .filter_map(|(_, p)| p.as_ref().err())
            .map(|(sc, _)| (sc.path.clone(), sc.sha256.clone()))
            .collect();
        let mut fetched = futures::stream::iter(wanted)
            .map(|(path, sha256)| async move { get_checked(store, &path, &sha256).await })
            .buffered(16)
            .try_collect::<Vec<Bytes>>()
            .await?
            .into_iter();
        for (group, p) in plan {
            let (sc, entry) = match p {
                Ok(old) => {
                    let prev = previous.expect("files are taken over from a previous index");
                    idx.files.push(Arc::clone(&prev.files[old]));
                    groups.insert(group);
                    continue;
                }
                Err(new) => new,
            };
            let bytes = fetched.next().expect("one sidecar read per file to load");
            let mut pending = Vec::new();
            let (supersessions, offsets) =
                decode_sidecar(&mut pending, &sc.path, bytes, 0, group, &entry.sha256)?;
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
                runs: pending
                    .into_iter()
                    .map(|((_, _, cik), slot)| (cik, slot))
                    .collect(),
            }));
            groups.insert(group);
        }
        for (i, f) in idx.files.iter().enumerate() {
            idx.groups.entry(f.group).or_default().push(i as u32);
        }
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

    /// The runs of one CIK, in era order (files are loaded in manifest path order, so
    /// `snapshots/access/<source>/<lane>/<era>/` sorts by era), each with its file's number
    /// in this version. One probe per file of the source-lane (an era's base file and its
    /// deltas: a handful), each run copied without its fences (shared).
    pub(crate) fn slots(&self, source: SourceId, lane: Lane, cik: &str) -> Vec<Slot> {
        let Some(files) = self.groups.get(&(source, lane)) else {
            return Vec::new();
        };
        files
            .iter()
            .filter_map(|&i| {
                self.files[i as usize].runs.get(cik).map(|s| Slot {
                    file: i,
                    ..s.clone()
                })
            })
            .collect()
    }

    /// Rows `range` of one file (inside one CIK's run), decoded and kept in the row cache by
    /// their part in each block: the unit kept is what pages of that run read, not the
    /// block, so a small filer's few rows of a block hold a few rows of the cache, not 128
    /// (with one run per year or era, a page of such a filer would otherwise keep thousands of rows
    /// and the cache would hold a few hundred pages). Missing parts are read as one span.
    pub(crate) async fn rows(
        &self,
        store: &CorpusStore,
        file: u32,
        range: Range<u64>,
    ) -> Result<Vec<SharedRow>> {
        let parts = self.parts(store, file, range).await?;
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
        for part in parts {
            out.extend((0..part.len()).map(|i| SharedRow::new(Arc::clone(&part), i)));
        }
        Ok(out)
    }

    /// [`Self::rows`] as the cached parts that hold them, in order: a caller that keeps only
    /// some of the rows (a page's predicate) shares a part per row it keeps, not per row it
    /// reads, where every `SharedRow` made is a count taken and given back on the part,
    /// which the workers asking pages of the same busy filer share.
    pub(crate) async fn parts(
        &self,
        store: &CorpusStore,
        file: u32,
        range: Range<u64>,
    ) -> Result<Vec<Arc<RowBlock>>> {
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
        let cache = &crate::read::page_cache::ROWS;
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
            // Boxed: reading and decoding a span from the object store is a future of many
            // KiB, and held in place it made every future that awaits this one that large,
            // the by-filer handler's among them, which is moved (copied whole) a few times on
            // every request, cache hit or not. A miss pays one allocation instead.
            let decoded = Box::pin(self.decode(store, f, missing.clone(), &within)).await?;
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
        Ok(held.into_iter().map(|p| p.expect("filled")).collect())
    }

    /// Reads and decodes blocks `ks` of `f`. From a local directory, one positional read
    /// on the handle opened at load (the OS keeps the file cached; going through
    /// `LocalFileSystem` would open the file and hop to a blocking thread every time). From
    /// object storage, the compressed blocks held in [`crate::read::page_cache::REMOTE`] and one
    /// range GET for the span of the others.
    pub(crate) async fn decode(
        &self,
        store: &CorpusStore,
        f: &AccessFile,
        ks: Range<usize>,
        parts: &[Range<usize>],
    ) -> Result<Vec<(usize, Vec<NewsRow>)>> {
        let path = f.path.as_ref();
        let span = f.offsets[ks.start]..f.offsets[ks.end];
        if let Some(local) = &f.local {
            let bytes = blocks::read_local(local, span)?;
            return blocks::decode_parts(path, &bytes, &f.offsets, ks, f.group, Some(parts));
        }
        let remote = &crate::read::page_cache::REMOTE;
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
        // A busy filer's page fills `want`; a small filer's few rows waste little of it.
        let mut out = Vec::with_capacity(want.min(BLOCK_ROWS));
        let slots = self.slots(source, lane, cik);
        // Runs with dated rows, in time order (by their first dated row).
        let mut dated: Vec<&Slot> = slots.iter().filter(|s| s.dated > 0).collect();
        dated.sort_by_key(|s| (s.min_published, s.file));
        // From object storage, a page reads at once what it will need of each run, in one
        // round trip instead of one per era: the runs in time order from the page's position
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
            // Runs by their first dated row. Runs whose spans overlap (an era's base file and
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
        // Undated rows: after every dated row, ordered by id across all eras.
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
    pub(crate) async fn read_run(
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
            for part in self.parts(store, s.file, s.dated_rows(k..k_end)).await? {
                for (i, r) in part.rows().iter().enumerate() {
                    if keep(r) {
                        // Shared with the cached block, not copied: a page of a hundred rows
                        // would otherwise copy some two thousand strings.
                        out.push(SharedRow::new(Arc::clone(&part), i));
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

    /// Every revision of one record id of one CIK, across all covered source-lanes. `days`
    /// names, per source-lane, the partition days that may hold a revision (the version's id
    /// runs, [`crate::read::ids::days_holding`]); only the blocks of the CIK's runs whose
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

#[cfg(test)]
mod tests;
