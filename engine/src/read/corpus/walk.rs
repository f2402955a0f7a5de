//! The ordered walk: a page of any question the access index does not answer (all rows of a
//! source, the sample scope, a lane without access files) read from the partitions in answer
//! order, from the page's position onward, stopping as soon as the page is full.
//!
//! Why it can stop early: pages sort on `(published_at, id)`, rows without `published_at`
//! last, and a row with `published_at` lives in the partition of that instant's UTC day, sorted
//! there in the same order ([`crate::model::record::partition_order`]). So the dated rows of a
//! source-lane, in answer order, are its partitions' dated rows day after day: a page starts in
//! the partition of its position's day (or the first day, or a `published_at` window's first
//! day), at the first row after the position, and reads on until it holds `limit + 1` rows the
//! cut admits. Rows without `published_at` (never visible on that clock) sit at the end of
//! their partition, sorted by id; a page that reaches them merges the undated rows of every
//! partition that has some, by id. The manifest's clock statistics skip a partition that
//! cannot hold a row of the cut or window without reading it. A page costs the blocks it
//! reads, never the corpus.
//!
//! Reading is by blocks of [`BLOCK_ROWS`] rows of a partition: the footer (with its page
//! index, so a block reads only the pages it lies in) is read once and kept, a block is decoded
//! once and kept in the row cache ([`crate::read::page_cache::ROWS`], keyed by path and rows, like
//! the access path's), and rows are handed out shared with their block, so a hot page decodes
//! and encodes nothing. A position inside a partition of several blocks is found by reading the
//! first key of a few blocks (a binary search), not the rows before it.
//!
//! Which revision is in force is the cut's rule ([`Cut::admits`]) over the version's
//! superseded map, a hash lookup per row: no expression grows with the corpus.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashSet};
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, StringArray, TimestampMicrosecondArray};
use futures::TryStreamExt;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelection};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::file::metadata::PageIndexPolicy;

use crate::error::{Error, Result};
use crate::model::clock::{Day, Instant, VisibleBy};
use crate::model::cut::{Cut, Superseded};
use crate::model::manifest::PartitionEntry;
use crate::model::record::{Position, RowBlock, SharedRow, from_batch};
use crate::read::late::LateLane;
use crate::read::page_cache;
use crate::read::ranged::{Ranges, reader};
use crate::read::scan_pool::Budget;
use crate::store::CorpusStore;

/// Rows decoded at a time from a partition: small enough that a page of 100 rows decodes about
/// a thousand, large enough that a block's fixed costs (a read, a batch) stay small per row.
/// The writer's page size ([`crate::format::partition::PAGE_ROWS`]): a block of a partition written
/// since is one page of each column, and the page index describes each block.
pub(crate) const BLOCK_ROWS: u64 = crate::format::partition::PAGE_ROWS as u64;

/// One page of a walk: everything it needs, owned, so it can run on the scan pool.
#[derive(Debug, Clone)]
pub(crate) struct Walk {
    pub store: CorpusStore,
    /// The partitions of one source-lane, in day order.
    pub partitions: Arc<[PartitionEntry]>,
    /// Only these days (the public sample's scope); every day when `None`.
    pub days: Option<Arc<BTreeSet<Day>>>,
    pub cut: Cut,
    pub superseded: Arc<Superseded>,
    /// Only rows of these CIKs; every row when `None`.
    pub ciks: Option<Arc<HashSet<String>>>,
    /// The keyset position: rows after it.
    pub after: Option<Position>,
    /// Rows wanted (a page's `limit + 1`).
    pub want: usize,
    /// The source-lane's late rows, when its version lists them: a partition is read only for
    /// the marks that are not late; the window's late rows of the others come from here.
    pub late: Option<Arc<LateLane>>,
}

/// A point in the answer order: dated before undated, then the instant, then the id, where
/// `id: None` lies after every id of that instant.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    undated: bool,
    micros: i64,
    id: Option<String>,
}

impl Key {
    fn of_position(p: &Position) -> Self {
        Key {
            undated: p.published_at.is_none(),
            micros: p.published_at.map_or(0, Instant::micros),
            id: Some(p.id.clone()),
        }
    }

    /// Every row published at or before `at`.
    fn through(at: Instant) -> Self {
        Key {
            undated: false,
            micros: at.micros(),
            id: None,
        }
    }

    /// Whether a row of this sort key comes after the point.
    fn before(&self, undated: bool, micros: i64, id: &str) -> bool {
        match (undated, micros).cmp(&(self.undated, self.micros)) {
            Ordering::Greater => true,
            Ordering::Less => false,
            Ordering::Equal => self.id.as_deref().is_some_and(|k| id > k),
        }
    }

    fn later(a: Option<Key>, b: Option<Key>) -> Option<Key> {
        match (a, b) {
            (Some(a), Some(b)) => {
                let rank = |k: &Key| (k.undated, k.micros);
                Some(match rank(&a).cmp(&rank(&b)) {
                    Ordering::Greater => a,
                    Ordering::Less => b,
                    Ordering::Equal => match (&a.id, &b.id) {
                        (None, _) => a,
                        (_, None) => b,
                        (Some(x), Some(y)) if x >= y => a,
                        _ => b,
                    },
                })
            }
            (a, b) => a.or(b),
        }
    }
}

impl Walk {
    /// The first `want` rows of the cut after the position, in answer order: those of the
    /// partitions read, merged with the late rows of the partitions not read.
    pub async fn run(&self, budget: &mut Budget) -> Result<Vec<SharedRow>> {
        let mut out = self.run_partitions(budget).await?;
        if let Some(late) = &self.late {
            self.merge_late(late, &mut out, budget)?;
        }
        Ok(out)
    }

    /// Merges into `out` (the first `want` rows of the partitions read, in answer order) the
    /// late rows of the window whose partitions the walk did not read, keeping the first
    /// `want` of both.
    fn merge_late(
        &self,
        late: &LateLane,
        out: &mut Vec<SharedRow>,
        budget: &mut Budget,
    ) -> Result<()> {
        if self.ciks.as_ref().is_some_and(|c| c.is_empty()) {
            return Ok(());
        }
        let (clock, after, through) = (self.cut.clock, self.cut.start, self.cut.as_of);
        let position = self.after.as_ref().map(Key::of_position);
        let mut extra: Vec<SharedRow> = Vec::new();
        let mut examined = 0u64;
        for (day, r) in late.within(clock, after, through) {
            examined += 1;
            if self.days.as_ref().is_some_and(|d| !d.contains(&day)) {
                continue;
            }
            let Ok(i) = self.partitions.binary_search_by_key(&day, |p| p.date) else {
                continue; // checked at load: every late row's partition is listed
            };
            // A partition the walk read gave its rows of the window itself.
            if late.walks(&self.partitions[i], clock, after, through) {
                continue;
            }
            if position
                .as_ref()
                .is_some_and(|k| !k.before(r.published_at.is_none(), micros(&r), &r.id))
            {
                continue;
            }
            if self.keeps(&r) {
                extra.push(r);
            }
        }
        budget.spend(examined)?;
        if extra.is_empty() {
            return Ok(());
        }
        extra.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        let walked = std::mem::take(out);
        let (mut a, mut b) = (walked.into_iter().peekable(), extra.into_iter().peekable());
        while out.len() < self.want {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.sort_key() <= y.sort_key() => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, _) => b.next(),
            };
            match next {
                Some(r) => out.push(r),
                None => break,
            }
        }
        Ok(())
    }

    /// The first `want` rows of the cut after the position among the partitions the walk
    /// reads, in answer order.
    async fn run_partitions(&self, budget: &mut Budget) -> Result<Vec<SharedRow>> {
        let mut out = Vec::new();
        if self.ciks.as_ref().is_some_and(|c| c.is_empty()) {
            return Ok(out);
        }
        let on_published = self.cut.clock == VisibleBy::PublishedAt;
        let position = self.after.as_ref().map(Key::of_position);
        let among_undated = position.as_ref().is_some_and(|k| k.undated);
        if !among_undated {
            // Rows of a `published_at` window lie after its start: seek there directly.
            let window = self.cut.start.filter(|_| on_published).map(Key::through);
            let seek = Key::later(position.clone(), window);
            let first_day = seek
                .as_ref()
                .filter(|k| !k.undated)
                .map(|k| Instant::from_micros(k.micros).day());
            let first = first_day.map_or(0, |d| self.partitions.partition_point(|p| p.date < d));
            for p in &self.partitions[first..] {
                if on_published && p.date > self.cut.as_of.day() {
                    break; // every later partition was published after the cut
                }
                let dated = p.row_count - p.clocks.published_at.nulls;
                if dated == 0 || !self.may_hold(p) {
                    continue;
                }
                let seek = seek
                    .as_ref()
                    .filter(|k| Instant::from_micros(k.micros).day() == p.date);
                self.read(p, 0..dated, seek, self.want, &mut out, budget)
                    .await?;
                if out.len() >= self.want {
                    return Ok(out);
                }
            }
        }
        if on_published {
            return Ok(out); // a row without `published_at` is never visible on that clock
        }
        // The undated rows of every partition that has some, merged by id: each partition
        // gives at most what the page still lacks.
        let need = self.want - out.len();
        let seek = position.filter(|k| k.undated);
        let mut undated = Vec::new();
        for p in self.partitions.iter() {
            let nulls = p.clocks.published_at.nulls;
            if nulls == 0 || !self.may_hold(p) {
                continue;
            }
            let rows = p.row_count - nulls..p.row_count;
            let mut mine = Vec::new();
            self.read(p, rows, seek.as_ref(), need, &mut mine, budget)
                .await?;
            undated.extend(mine);
        }
        undated.sort_by(|a: &SharedRow, b: &SharedRow| a.id.cmp(&b.id));
        undated.truncate(need);
        out.extend(undated);
        Ok(out)
    }

    /// Whether the partition may hold a row of the cut, from the manifest alone.
    fn may_hold(&self, p: &PartitionEntry) -> bool {
        if self.days.as_ref().is_some_and(|d| !d.contains(&p.date)) {
            return false;
        }
        match &self.late {
            Some(late) => late.walks(p, self.cut.clock, self.cut.start, self.cut.as_of),
            None => p.may_hold_in(self.cut.clock, self.cut.start, self.cut.as_of),
        }
    }

    fn keeps(&self, r: &crate::model::record::NewsRow) -> bool {
        self.cut.admits(r, &self.superseded)
            && self
                .ciks
                .as_ref()
                .is_none_or(|c| r.cik.as_ref().is_some_and(|k| c.contains(k)))
    }

    /// Rows `rows` of partition `p` after `seek`, that the cut admits, into `out` until it
    /// holds `want`.
    async fn read(
        &self,
        p: &PartitionEntry,
        rows: Range<u64>,
        seek: Option<&Key>,
        want: usize,
        out: &mut Vec<SharedRow>,
        budget: &mut Budget,
    ) -> Result<()> {
        let file = PartitionFile::open(&self.store, p).await?;
        metrics::counter!(crate::read::scan_pool::METRIC_PARTITIONS).increment(1);
        let start = match seek {
            Some(k) => file.seek(&rows, k).await?,
            None => rows.start,
        };
        let mut block = start / BLOCK_ROWS;
        // On a clock other than `published_at` the rows a cut admits can be sparse in a
        // partition (a correction committed weeks after its day's rows). The clock's page
        // index (each page's range of values) answers for a block first: one with no value in
        // the cut is skipped unread, one whose every row lies in it is decoded at once. Any
        // other block not yet decoded is looked at through its clock column alone: skipped
        // when no row is in the cut, decoded at those rows only (not kept) when a few are, and
        // decoded whole and kept only when dense in the cut. (A partition written before
        // pages were blocks has pages of several blocks, and its index decides less.)
        let sparse = self.cut.clock != VisibleBy::PublishedAt;
        let clock_pages = if sparse {
            file.pages_of(self.cut.clock.as_str())
        } else {
            None
        };
        while block * BLOCK_ROWS < rows.end {
            let base = block * BLOCK_ROWS;
            let (lo, hi) = (start.max(base), rows.end.min(base + BLOCK_ROWS));
            let verdict = clock_pages
                .as_ref()
                .map_or(Verdict::Some, |p| p.verdict(lo..hi, &self.cut));
            if sparse && verdict == Verdict::None {
                budget.spend(hi - lo)?;
                block += 1;
                tokio::task::consume_budget().await;
                continue;
            }
            let decoded = if sparse && verdict == Verdict::Some && !file.is_cached(block) {
                let hits: Vec<u64> = file
                    .clock_hits(block, &self.cut)
                    .await?
                    .into_iter()
                    .filter(|r| (lo..hi).contains(r))
                    .collect();
                budget.spend(hi - lo)?;
                if hits.is_empty() {
                    block += 1;
                    tokio::task::consume_budget().await;
                    continue;
                }
                if (hits.len() as u64) * 8 < hi - lo {
                    let few = file.rows_at(&hits).await?;
                    for (i, _) in hits.iter().enumerate() {
                        if self.take(&few, i, seek, out) && out.len() >= want {
                            return Ok(());
                        }
                    }
                    block += 1;
                    tokio::task::consume_budget().await;
                    continue;
                }
                file.block(block).await?
            } else {
                let b = file.block(block).await?;
                budget.spend(hi - lo)?;
                b
            };
            for i in (lo - base) as usize..(hi - base) as usize {
                if self.take(&decoded, i, seek, out) && out.len() >= want {
                    return Ok(());
                }
            }
            block += 1;
            // A walk whose caller went away (deadline, closed connection) ends here.
            tokio::task::consume_budget().await;
        }
        Ok(())
    }

    /// Adds row `i` of `block` to `out` when it lies after `seek` and the cut admits it.
    fn take(
        &self,
        block: &Arc<RowBlock>,
        i: usize,
        seek: Option<&Key>,
        out: &mut Vec<SharedRow>,
    ) -> bool {
        let r = &block[i];
        if seek.is_some_and(|k| !k.before(r.published_at.is_none(), micros(r), &r.id)) {
            return false;
        }
        if !self.keeps(r) {
            return false;
        }
        out.push(SharedRow::new(Arc::clone(block), i));
        true
    }
}

fn micros(r: &crate::model::record::NewsRow) -> i64 {
    r.published_at.map_or(0, Instant::micros)
}

/// One partition opened for block reads: its footer, kept across requests and versions.
struct PartitionFile<'a> {
    store: &'a CorpusStore,
    entry: &'a PartitionEntry,
    meta: ArrowReaderMetadata,
}

impl<'a> PartitionFile<'a> {
    async fn open(store: &'a CorpusStore, entry: &'a PartitionEntry) -> Result<Self> {
        let whole = 0..entry.bytes;
        let meta = match page_cache::FOOTERS.get(&entry.path, &whole) {
            Some(m) => m,
            None => {
                let options =
                    ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
                let meta =
                    ArrowReaderMetadata::load_async(&mut reader(store, entry), options).await?;
                let rows = meta.metadata().file_metadata().num_rows();
                if u64::try_from(rows).ok() != Some(entry.row_count) {
                    return Err(Error::integrity(
                        &entry.path,
                        format!("{rows} rows, the manifest says {}", entry.row_count),
                    ));
                }
                page_cache::FOOTERS.put(&entry.path, &whole, meta.clone());
                meta
            }
        };
        Ok(PartitionFile { store, entry, meta })
    }

    /// The rows of block `index`.
    fn rows_of(&self, index: u64) -> Range<u64> {
        let start = index * BLOCK_ROWS;
        start..(start + BLOCK_ROWS).min(self.entry.row_count)
    }

    /// The page index of the INT64 column `column` (a clock): each page's first row in the
    /// file and its range of values, across row groups. `None` when the file has none.
    fn pages_of(&self, column: &str) -> Option<Pages> {
        use parquet::file::page_index::column_index::ColumnIndexMetaData;
        let meta = self.meta.metadata();
        let (columns, offsets) = (meta.column_index()?, meta.offset_index()?);
        let leaves = meta.file_metadata().schema_descr();
        let col = (0..leaves.num_columns()).find(|&i| leaves.column(i).name() == column)?;
        let mut pages = Vec::new();
        let mut base = 0u64;
        for (g, group) in meta.row_groups().iter().enumerate() {
            let ColumnIndexMetaData::INT64(index) = columns.get(g)?.get(col)? else {
                return None;
            };
            let locations = offsets.get(g)?.get(col)?.page_locations();
            if locations.len() as u64 != index.num_pages() {
                return None;
            }
            for (i, at) in locations.iter().enumerate() {
                pages.push(Page {
                    first: base + u64::try_from(at.first_row_index).ok()?,
                    values: index.min_value(i).copied().zip(index.max_value(i).copied()),
                    no_nulls: index.null_count(i) == Some(0),
                });
            }
            base += u64::try_from(group.num_rows()).ok()?;
        }
        Some(Pages { pages, rows: base })
    }

    /// Whether block `index` is decoded in the row cache.
    fn is_cached(&self, index: u64) -> bool {
        page_cache::ROWS
            .get(&self.entry.path, &self.rows_of(index))
            .is_some()
    }

    /// The rows of block `index` whose `cut.clock` lies inside the cut (or window), read from
    /// that one column.
    async fn clock_hits(&self, index: u64, cut: &Cut) -> Result<Vec<u64>> {
        let name = cut.clock.as_str();
        let schema = self.meta.metadata().file_metadata().schema_descr();
        let mask = ProjectionMask::columns(schema, [name]);
        let rows = self.rows_of(index);
        let batches = self.batches(rows.clone(), Some(mask)).await?;
        let (hi, lo) = (cut.as_of.micros(), cut.start.map(Instant::micros));
        let mut hits = Vec::new();
        let mut at = rows.start;
        for b in &batches {
            let c = b
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
                .ok_or_else(|| {
                    Error::integrity(&self.entry.path, format!("{name} is not a timestamp"))
                })?;
            for i in 0..c.len() {
                if c.is_valid(i) && c.value(i) <= hi && lo.is_none_or(|l| c.value(i) > l) {
                    hits.push(at + i as u64);
                }
            }
            at += c.len() as u64;
        }
        Ok(hits)
    }

    /// The given rows (ascending), decoded as one block of their own (not kept).
    async fn rows_at(&self, rows: &[u64]) -> Result<Arc<RowBlock>> {
        let (Some(&first), Some(&last)) = (rows.first(), rows.last()) else {
            return Ok(Arc::new(RowBlock::from_iter(std::iter::empty())));
        };
        let batches = self.batches_at(first..last + 1, rows).await?;
        let mut decoded = Vec::with_capacity(rows.len());
        for b in &batches {
            decoded.extend(from_batch(b)?);
        }
        if decoded.len() != rows.len() {
            return Err(Error::integrity(
                &self.entry.path,
                "a row read came back short",
            ));
        }
        Ok(Arc::new(decoded.into_iter().collect()))
    }

    /// Block `index` of the partition, decoded (from the row cache when held).
    async fn block(&self, index: u64) -> Result<Arc<RowBlock>> {
        let rows = self.rows_of(index);
        if let Some(b) = page_cache::ROWS.get(&self.entry.path, &rows) {
            return Ok(b);
        }
        let batches = self.batches(rows.clone(), None).await?;
        let mut decoded = Vec::with_capacity((rows.end - rows.start) as usize);
        for b in &batches {
            decoded.extend(from_batch(b)?);
        }
        if decoded.len() as u64 != rows.end - rows.start {
            return Err(Error::integrity(&self.entry.path, "a block read short"));
        }
        let block: Arc<RowBlock> = Arc::new(decoded.into_iter().collect());
        page_cache::ROWS.put(&self.entry.path, &rows, Arc::clone(&block));
        Ok(block)
    }

    /// The first row of `rows` that may come after `key`: the start of the last block whose
    /// first row does not (found by reading one key per probed block), or `rows.start`.
    async fn seek(&self, rows: &Range<u64>, key: &Key) -> Result<u64> {
        let first = rows.start / BLOCK_ROWS;
        let last = rows.end.saturating_sub(1) / BLOCK_ROWS;
        if first == last {
            return Ok(rows.start);
        }
        // Invariant: the answer lies in blocks lo..=hi; block lo's first row is not after key
        // (or lo is the first block).
        let (mut lo, mut hi) = (first, last);
        // The page index of `published_at` narrows it unread: the first row of a page that
        // starts a block is that page's least instant (dated rows ascend), so a page starting
        // before the key's instant starts a block not after the key, and one starting after it
        // a block after the key. An instant equal to the key's decides nothing (the ids would).
        if !key.undated
            && let Some(pages) = self.pages_of("published_at")
        {
            for p in pages.starts_of_blocks(first..last + 1) {
                let Some((least, _)) = p.values else { continue };
                let block = p.first / BLOCK_ROWS;
                let not_after = least < key.micros || (least == key.micros && key.id.is_none());
                if not_after {
                    lo = lo.max(block);
                } else if least > key.micros {
                    hi = hi.min(block.saturating_sub(1)).max(lo);
                    break;
                }
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let (undated, micros, id) = self.key_at(mid * BLOCK_ROWS).await?;
            if key.before(undated, micros, &id) {
                hi = mid - 1;
            } else {
                lo = mid;
            }
        }
        Ok(rows.start.max(lo * BLOCK_ROWS))
    }

    /// The sort key of one row: its `published_at` and `id` columns only.
    async fn key_at(&self, row: u64) -> Result<(bool, i64, String)> {
        let schema = self.meta.metadata().file_metadata().schema_descr();
        let mask = ProjectionMask::columns(schema, ["published_at", "id"]);
        let batches = self.batches(row..row + 1, Some(mask)).await?;
        let bad = || Error::integrity(&self.entry.path, "a key probe read no row");
        let b = batches.iter().find(|b| b.num_rows() > 0).ok_or_else(bad)?;
        let published = b
            .column_by_name("published_at")
            .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
            .ok_or_else(bad)?;
        let id = b
            .column_by_name("id")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(bad)?;
        let undated = published.is_null(0);
        let micros = if undated { 0 } else { published.value(0) };
        Ok((undated, micros, id.value(0).to_owned()))
    }

    /// Rows `rows` of the file as batches: only the row groups and (through the page index)
    /// the pages they lie in are read.
    async fn batches(
        &self,
        rows: Range<u64>,
        projection: Option<ProjectionMask>,
    ) -> Result<Vec<arrow::array::RecordBatch>> {
        let (groups, selection) = self.select(rows.clone(), &[rows]);
        let mut builder = self.builder(groups, selection);
        if let Some(mask) = projection {
            builder = builder.with_projection(mask);
        }
        Ok(builder.build()?.try_collect().await?)
    }

    /// The rows `picked` (ascending, inside `span`), every column.
    async fn batches_at(
        &self,
        span: Range<u64>,
        picked: &[u64],
    ) -> Result<Vec<arrow::array::RecordBatch>> {
        let ranges: Vec<Range<u64>> = picked.iter().map(|&r| r..r + 1).collect();
        let (groups, selection) = self.select(span, &ranges);
        Ok(self
            .builder(groups, selection)
            .build()?
            .try_collect()
            .await?)
    }

    /// The row groups `span` overlaps, and a selection of `ranges` (inside `span`, ascending)
    /// rebased onto those groups.
    fn select(&self, span: Range<u64>, ranges: &[Range<u64>]) -> (Vec<usize>, RowSelection) {
        let meta = self.meta.metadata();
        let mut groups = Vec::new();
        let mut selected = Vec::new();
        let (mut at, mut base) = (0u64, 0usize);
        for (g, rg) in meta.row_groups().iter().enumerate() {
            let n = rg.num_rows() as u64;
            if span.start < at + n && at < span.end {
                groups.push(g);
                for r in ranges {
                    let (s, e) = (r.start.max(at), r.end.min(at + n));
                    if s < e {
                        selected.push(base + (s - at) as usize..base + (e - at) as usize);
                    }
                }
                base += n as usize;
            }
            at += n;
        }
        (
            groups,
            RowSelection::from_consecutive_ranges(selected.into_iter(), base),
        )
    }

    fn builder(
        &self,
        groups: Vec<usize>,
        selection: RowSelection,
    ) -> parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder<Ranges> {
        ParquetRecordBatchStreamBuilder::new_with_metadata(
            reader(self.store, self.entry),
            self.meta.clone(),
        )
        .with_row_groups(groups)
        .with_row_selection(selection)
        .with_batch_size(BLOCK_ROWS as usize)
    }
}

/// One data page of a clock column, from the page index.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Page {
    /// Its first row in the file.
    first: u64,
    /// Its least and greatest value; `None` when it holds nulls only.
    values: Option<(i64, i64)>,
    /// Whether the index says it holds no null.
    no_nulls: bool,
}

/// A clock column's pages, in row order, over a file of `rows` rows.
#[derive(Debug, Clone, PartialEq)]
struct Pages {
    pages: Vec<Page>,
    rows: u64,
}

/// What a clock's page index says of a block's rows against a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// No row's value lies in the cut (or window).
    None,
    /// Every row's value does.
    All,
    /// Some may: read the column.
    Some,
}

impl Pages {
    /// The pages overlapping `rows`.
    fn over(&self, rows: Range<u64>) -> impl Iterator<Item = (Range<u64>, &Page)> {
        let from = self.pages.partition_point(|p| p.first <= rows.start).max(1) - 1;
        self.pages[from..]
            .iter()
            .enumerate()
            .map(move |(i, p)| {
                let end = self.pages.get(from + i + 1).map_or(self.rows, |n| n.first);
                (p.first..end, p)
            })
            .take_while(move |(span, _)| span.start < rows.end)
            .filter(move |(span, _)| span.end > rows.start)
    }

    /// The pages that start one of `blocks` (block numbers), in row order.
    fn starts_of_blocks(&self, blocks: Range<u64>) -> impl Iterator<Item = &Page> {
        self.pages
            .iter()
            .filter(move |p| p.first % BLOCK_ROWS == 0 && blocks.contains(&(p.first / BLOCK_ROWS)))
    }

    /// What the pages over `rows` say of their values against the cut's window
    /// `(start, as_of]`. A page of nulls and values is never `All` (its nulls are not in it).
    fn verdict(&self, rows: Range<u64>, cut: &Cut) -> Verdict {
        let (hi, lo) = (cut.as_of.micros(), cut.start.map(Instant::micros));
        let inside = |v: i64| v <= hi && lo.is_none_or(|l| v > l);
        let mut pages = self.over(rows).peekable();
        if pages.peek().is_none() {
            return Verdict::Some;
        }
        let (mut any, mut all) = (false, true);
        for (_, p) in pages {
            match p.values {
                None => all = false,
                Some((least, most)) => {
                    let disjoint = least > hi || lo.is_some_and(|l| most <= l);
                    any |= !disjoint;
                    all &= p.no_nulls && inside(least) && inside(most);
                }
            }
        }
        match (any, all) {
            (false, _) => Verdict::None,
            (true, true) => Verdict::All,
            (true, false) => Verdict::Some,
        }
    }
}

/// Every row of one partition whose `id` is `id`: the `id` column is read and matched first,
/// the other columns only at the rows it matched (a record lookup in a partition the id runs
/// named). The footer is the walk's, kept across requests.
pub(crate) async fn rows_with_id(
    store: &CorpusStore,
    entry: &PartitionEntry,
    id: &str,
) -> Result<Vec<crate::model::record::NewsRow>> {
    use arrow::array::{AsArray, Datum, StringArray};
    use parquet::arrow::arrow_reader::{ArrowPredicateFn, RowFilter};

    let file = PartitionFile::open(store, entry).await?;
    let leaves = file.meta.parquet_schema();
    let wanted = StringArray::new_scalar(id);
    let matches = ArrowPredicateFn::new(
        ProjectionMask::columns(leaves, ["id"]),
        move |batch: arrow::array::RecordBatch| {
            let ids = batch.column(0).as_string::<i32>();
            arrow::compute::kernels::cmp::eq(ids, &wanted as &dyn Datum)
        },
    );
    let batches: Vec<arrow::array::RecordBatch> =
        ParquetRecordBatchStreamBuilder::new_with_metadata(reader(store, entry), file.meta.clone())
            .with_row_filter(RowFilter::new(vec![Box::new(matches)]))
            .build()?
            .try_collect()
            .await?;
    let mut rows = Vec::new();
    for b in &batches {
        rows.extend(from_batch(b)?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::clock::{Lane, SourceId};
    use crate::model::coverage::Scope;
    use crate::model::record::NewsRow;
    use crate::read::corpus::{Answer, Corpus, Entity, NewsQuery, ReadPath};
    use crate::read::scan_pool::ScanPool;
    use crate::testkit::{corpus, edgar, january, t};
    use crate::write::publish::{ChangeSet, publish};

    /// Minute `m` of January 2026.
    fn minute(m: u64) -> String {
        let at = t("2026-01-01T00:00:00Z").micros() + m as i64 * 60_000_000;
        Instant::from_micros(at).to_string()
    }

    /// Rows of both lanes over three days, two of them of several blocks: many rows share an
    /// instant (ids decide), some have no `published_at` (they sort last), forward-lane rows
    /// carry `available_at`.
    fn rows() -> Vec<NewsRow> {
        let mut out = Vec::new();
        for i in 0..5_200u64 {
            // Days 5, 6 and 7 (2,600, 1,800 and 800 rows), ten rows a minute.
            let day = match i {
                0..2_600 => 4,
                2_600..4_400 => 5,
                _ => 6,
            };
            let at = minute(day * 1440 + (i % 1_000) / 10 * 7);
            let cik = (i % 7 + 1).to_string();
            let published = (i % 13 != 0).then_some(at.as_str());
            // Five commits a day: each day's marks are listed in its manifest entry.
            let committed = minute(day * 1440 + 1_500 + i % 5);
            let mut r = edgar(
                &format!("0000000001-26-{i:06}"),
                &cik,
                published,
                &committed,
            );
            if i % 3 == 0 {
                r.lane = Lane::ForwardFirstSeen;
                r.available_at = Some(t(&minute(day * 1440 + 1_450 + i % 40)));
                r.availability_basis = crate::model::clock::AvailabilityBasis::LocalFirstSeen;
            }
            out.push(r);
        }
        out
    }

    async fn readings() -> (tempfile::TempDir, Corpus, Corpus) {
        let (dir, store, _) = corpus(rows(), january()).await;
        // Corrections: some move to another instant (another block or day), some lose theirs.
        let corrected: Vec<NewsRow> = rows()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % 97 == 0)
            .map(|(i, mut r)| {
                r.title = "corrected".into();
                r.published_at = match i % 3 {
                    0 => Some(t(&minute(5 * 1440 + 3))),
                    1 => None,
                    _ => r
                        .published_at
                        .map(|p| Instant::from_micros(p.micros() - 3_600_000_000)),
                };
                // Four later commits (hours), shared by the days: late marks of each day
                // (`crate::format::late`), so the walk takes them from the late object.
                r.committed_at = Some(t(&minute(8 * 1440 + (i as u64 % 4) * 60)));
                if r.lane == Lane::ForwardFirstSeen {
                    r.available_at = r.committed_at;
                }
                r
            })
            .collect();
        publish(
            &store,
            ChangeSet {
                rows: corrected,
                ..Default::default()
            },
            t("2026-03-02T00:00:00Z"),
        )
        .await
        .unwrap();
        let mut walked = Corpus::open(store.clone()).await.unwrap();
        walked.set_read_path(ReadPath::Walk);
        let mut scanned = Corpus::open(store).await.unwrap();
        scanned.set_read_path(ReadPath::Scan);
        (dir, walked, scanned)
    }

    fn query(lane: Lane, clock: VisibleBy, as_of: &str, start: Option<&str>) -> NewsQuery {
        NewsQuery {
            source: crate::model::clock::SourceId::SecEdgar,
            lane,
            visible_by: clock,
            start: start.map(t),
            as_of: t(as_of),
            entity: Entity::All,
            after: None,
            limit: 100_000,
        }
    }

    fn ids(a: Answer<NewsRow>) -> (Vec<(String, String)>, Option<Position>) {
        match a {
            Answer::Page { rows, next, .. } => (
                rows.into_iter().map(|r| (r.id, r.revision_id)).collect(),
                next,
            ),
            Answer::Hole { coverage } => panic!("a hole: {:?}", coverage.missing),
        }
    }

    #[tokio::test]
    async fn pages_through_partitions_of_several_blocks_walk_to_what_the_scan_answers() {
        let (_dir, walked, scanned) = readings().await;
        // The corrections are late rows of their days in both lanes: the walk merges them in.
        for lane in [Lane::CertifiedPit, Lane::ForwardFirstSeen] {
            let held = crate::format::late::entry_of(walked.manifest(), SourceId::SecEdgar, lane)
                .map_or(0, |e| e.row_count);
            assert!(held > 10, "{lane:?}: {held} late rows");
        }
        let mut checked = 0;
        for (lane, clock) in [
            (Lane::CertifiedPit, VisibleBy::PublishedAt),
            (Lane::CertifiedPit, VisibleBy::CommittedAt),
            (Lane::ForwardFirstSeen, VisibleBy::PublishedAt),
            (Lane::ForwardFirstSeen, VisibleBy::AvailableAt),
            (Lane::ForwardFirstSeen, VisibleBy::CommittedAt),
        ] {
            for (as_of, start) in [
                ("2026-01-06T11:00:00Z", None),
                ("2026-01-31T00:00:00Z", None),
                ("2026-01-31T00:00:00Z", Some("2026-01-06T02:00:00Z")),
                ("2026-01-06T20:00:00Z", Some("2026-01-05T23:00:00Z")),
            ] {
                let q = query(lane, clock, as_of, start);
                let Answer::Page {
                    rows: all, next, ..
                } = scanned.news(&q, Scope::Corpus).await.unwrap()
                else {
                    panic!("a hole")
                };
                assert!(next.is_none());
                let want: Vec<(String, String)> = all
                    .iter()
                    .map(|r| (r.id.clone(), r.revision_id.clone()))
                    .collect();
                for size in [1, 333, 1_024, 1_500] {
                    let mut p = q.clone();
                    p.limit = size;
                    let mut got = Vec::new();
                    loop {
                        let (rows, next) = ids(walked.news(&p, Scope::Corpus).await.unwrap());
                        got.extend(rows);
                        match next {
                            Some(n) => p.after = Some(n),
                            None => break,
                        }
                        if size == 1 && got.len() == 40 && want.len() > 120 {
                            // Pages of one row: the first forty, then on from deep inside.
                            let at = want.len() * 2 / 3;
                            got = want[..=at].to_vec();
                            p.after = Some(Position {
                                published_at: all[at].published_at,
                                id: all[at].id.clone(),
                            });
                        }
                    }
                    assert_eq!(
                        got, want,
                        "{lane:?} {clock:?} {as_of} {start:?} pages of {size}"
                    );
                    checked += want.len();
                }
            }
        }
        assert!(checked > 20_000, "the cuts hold rows: {checked}");
    }

    /// The corpus in `dir` opened through a store that counts its reads, read by the walk.
    async fn counted(
        dir: &std::path::Path,
    ) -> (asof_test_support::counting::CountingStore, Corpus) {
        let (counting, store) = crate::testkit::counted_store(dir);
        let mut c = Corpus::open(store).await.unwrap();
        c.set_read_path(ReadPath::Walk);
        (counting, c)
    }

    /// `rows` published into `dir` (January certified), opened through a counting store.
    async fn published(
        dir: &std::path::Path,
        rows: Vec<NewsRow>,
    ) -> (asof_test_support::counting::CountingStore, Corpus) {
        publish(
            &CorpusStore::local(dir).unwrap(),
            ChangeSet {
                rows,
                certifications: january(),
                ..Default::default()
            },
            t("2026-03-01T00:00:00Z"),
        )
        .await
        .unwrap();
        counted(dir).await
    }

    /// The days of the partitions read since the last reset, in day order.
    fn days_read(counting: &asof_test_support::counting::CountingStore, c: &Corpus) -> Vec<String> {
        counting
            .reads_under("snapshots/partitions/")
            .iter()
            .map(|p| {
                c.manifest()
                    .partitions
                    .iter()
                    .find(|e| &e.path == p)
                    .map(|e| e.date.to_string())
                    .unwrap()
            })
            .collect()
    }

    #[tokio::test]
    async fn a_page_reads_only_the_partitions_from_its_position_on() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<NewsRow> = (0..30 * 40)
            .map(|i| {
                let at = minute((i / 40) * 1440 + 600 + i % 40);
                edgar(
                    &format!("0000000001-26-{i:06}"),
                    "1",
                    Some(&at),
                    &minute((i / 40) * 1440 + 1500),
                )
            })
            .collect();
        let (counting, c) = published(dir.path(), rows).await;
        let read_days = || days_read(&counting, &c);
        counting.reset();
        let mut q = query(
            Lane::CertifiedPit,
            VisibleBy::PublishedAt,
            "2026-01-29T00:00:00Z",
            None,
        );
        q.limit = 50;
        let (first, next) = ids(c.news(&q, Scope::Corpus).await.unwrap());
        assert_eq!(first.len(), 50);
        assert_eq!(
            read_days(),
            ["2026-01-01", "2026-01-02"],
            "the first page's days only"
        );
        // From object storage, each day read costs its footer and the pages of its block, in
        // the GETs S3 would be sent (ranges coalesced): a few, and less than the object twice
        // (a small day's footer read takes the object whole; its pages are read again).
        let requests = counting.requests();
        assert!(requests.len() <= 2 * 3, "{requests:?}");
        for day in &c.manifest().partitions[..2] {
            let read: u64 = requests
                .iter()
                .filter(|(p, _)| *p == day.path)
                .map(|(_, b)| b)
                .sum();
            assert!(
                read < 2 * day.bytes,
                "{}: {read} bytes of {}",
                day.path,
                day.bytes
            );
        }
        // A page from a position deep in the month reads that day and the next.
        counting.reset();
        q.limit = 45;
        q.after = Some(Position {
            published_at: Some(t(&minute(16 * 1440 + 600 + 29))),
            id: format!("0000000001-26-{:06}_1", 16 * 40 + 29),
        });
        let (deep, _) = ids(c.news(&q, Scope::Corpus).await.unwrap());
        assert_eq!(
            deep.first().unwrap().0,
            format!("0000000001-26-{:06}_1", 16 * 40 + 30)
        );
        assert_eq!(read_days(), ["2026-01-17", "2026-01-18"]);
        // A diff window of one afternoon reads its day.
        counting.reset();
        let w = query(
            Lane::CertifiedPit,
            VisibleBy::PublishedAt,
            "2026-01-20T23:00:00Z",
            Some("2026-01-20T10:10:00Z"),
        );
        let (rows, _) = ids(c.news(&w, Scope::Corpus).await.unwrap());
        assert_eq!(rows.len(), 29);
        assert_eq!(read_days(), ["2026-01-20"]);
        assert!(next.is_some());
    }

    #[tokio::test]
    async fn the_page_index_finds_a_block_deep_in_a_day_and_skips_blocks_outside_a_window_unread() {
        // One day of 5,000 rows (five blocks), a row a second from 09:00, committed the next
        // day in five batches an hour apart, one per block.
        let dir = tempfile::tempdir().unwrap();
        let opened = t("2026-01-05T09:00:00Z").micros();
        let at = |i: u64| Instant::from_micros(opened + i as i64 * 1_000_000);
        let id = |i: u64| format!("0000000001-26-{i:06}_{}", i % 7 + 1);
        let rows: Vec<NewsRow> = (0..5_000u64)
            .map(|i| {
                edgar(
                    &format!("0000000001-26-{i:06}"),
                    &(i % 7 + 1).to_string(),
                    Some(at(i).to_string().as_str()),
                    &minute(5 * 1440 + (i / BLOCK_ROWS) * 60),
                )
            })
            .collect();
        let (counting, c) = published(dir.path(), rows).await;
        let day = c.manifest().partitions[0].path.clone();
        // A first page opens the day (its footer and page index are kept).
        let mut q = query(
            Lane::CertifiedPit,
            VisibleBy::PublishedAt,
            "2026-01-29T00:00:00Z",
            None,
        );
        q.limit = 10;
        let (first, _) = ids(c.news(&q, Scope::Corpus).await.unwrap());
        assert_eq!(first[0].0, id(0));
        // From a position in the fourth block: that block's pages, in one request (no probe
        // of other blocks' first keys).
        counting.reset();
        q.after = Some(Position {
            published_at: Some(at(3_500)),
            id: id(3_500),
        });
        let (deep, _) = ids(c.news(&q, Scope::Corpus).await.unwrap());
        assert_eq!(deep[0].0, id(3_501));
        assert_eq!(deep.len(), 10);
        let requests = counting.requests();
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(requests[0].0, day);
        // A `committed_at` window holding the third batch (a block not read yet): the other
        // blocks are skipped from the index, and the third, all inside the window, is read at
        // once (not first through its clock column).
        counting.reset();
        let mut w = query(
            Lane::CertifiedPit,
            VisibleBy::CommittedAt,
            &minute(5 * 1440 + 2 * 60 + 30),
            Some(minute(5 * 1440 + 60 + 30).as_str()),
        );
        w.limit = 5_000;
        let (window, _) = ids(c.news(&w, Scope::Corpus).await.unwrap());
        let want: Vec<String> = (2 * BLOCK_ROWS..3 * BLOCK_ROWS).map(id).collect();
        assert_eq!(window.into_iter().map(|(i, _)| i).collect::<Vec<_>>(), want);
        let requests = counting.requests();
        assert_eq!(requests.len(), 1, "{requests:?}");
    }

    #[tokio::test]
    async fn a_commit_or_first_seen_window_skips_a_day_whose_late_correction_lies_outside_it() {
        // A corpus each: the row cache is the process's, keyed by content-addressed paths.
        for clock in [VisibleBy::CommittedAt, VisibleBy::AvailableAt] {
            late_correction_window(clock).await;
        }
    }

    async fn late_correction_window(clock: VisibleBy) {
        let dir = tempfile::tempdir().unwrap();
        let local = CorpusStore::local(dir.path()).unwrap();
        // Thirty days of 40 forward-lane rows, each day first seen and committed the next
        // morning at 01:00.
        let row = |i: u64| {
            let d = i / 40;
            let mut r = edgar(
                &format!("0000000001-26-{i:06}"),
                "1",
                Some(&minute(d * 1440 + 600 + i % 40)),
                &minute(d * 1440 + 1500),
            );
            r.lane = Lane::ForwardFirstSeen;
            r.available_at = r.committed_at;
            r.availability_basis = crate::model::clock::AvailabilityBasis::LocalFirstSeen;
            r.title = format!("8-K read on {clock:?}");
            r
        };
        publish(
            &local,
            ChangeSet {
                rows: (0..30 * 40).map(row).collect(),
                certifications: january(),
                ..Default::default()
            },
            t("2026-03-01T00:00:00Z"),
        )
        .await
        .unwrap();
        // One row of Jan 2 corrected on Jan 26: that day's commits span most of the month.
        let mut fix = row(45);
        fix.title = "corrected".into();
        fix.committed_at = Some(t(&minute(25 * 1440 + 60)));
        fix.available_at = fix.committed_at;
        publish(
            &local,
            ChangeSet {
                rows: vec![fix],
                ..Default::default()
            },
            t("2026-03-02T00:00:00Z"),
        )
        .await
        .unwrap();
        let (counting, c) = counted(dir.path()).await;
        let jan2 = c
            .manifest()
            .partitions
            .iter()
            .find(|p| p.date.to_string() == "2026-01-02")
            .unwrap()
            .clone();
        let marks = Some(vec![t(&minute(1440 + 1500)), t(&minute(25 * 1440 + 60))]);
        assert_eq!(jan2.commits, marks);
        assert_eq!(jan2.available_hours, marks, "01:00 is an hour's start");
        let read_days = || days_read(&counting, &c);
        // The window of Jan 11 12:00 to Jan 12 12:00 holds Jan 11's rows only.
        counting.reset();
        let w = query(
            Lane::ForwardFirstSeen,
            clock,
            &minute(11 * 1440 + 720),
            Some(&minute(10 * 1440 + 720)),
        );
        let (rows, _) = ids(c.news(&w, Scope::Corpus).await.unwrap());
        assert_eq!(rows.len(), 40, "{clock:?}");
        assert_eq!(read_days(), ["2026-01-11"], "{clock:?}");
        // The window holding the correction reads Jan 25 only: the correction is the one row
        // of a late mark of Jan 2, whose rows the late object holds (`crate::format::late`).
        counting.reset();
        let w = query(
            Lane::ForwardFirstSeen,
            clock,
            &minute(25 * 1440 + 720),
            Some(&minute(24 * 1440 + 720)),
        );
        let (rows, _) = ids(c.news(&w, Scope::Corpus).await.unwrap());
        assert_eq!(rows.len(), 41, "{clock:?}");
        assert_eq!(rows[0].0, "0000000001-26-000045_1");
        assert_eq!(read_days(), ["2026-01-25"], "{clock:?}");
        assert!(
            counting.reads_under("snapshots/late/").is_empty(),
            "the late rows were loaded with the version"
        );
        // Without the late object, the same window reads Jan 2 for its correction.
        let mut m = c.manifest().clone();
        m.access
            .retain(|e| e.kind != crate::format::late::KIND_LATE);
        let bare = Corpus::open_after(c.store().clone(), "bare", m, None)
            .await
            .unwrap();
        counting.reset();
        let (again, _) = ids(bare.news(&w, Scope::Corpus).await.unwrap());
        assert_eq!(again, rows, "{clock:?}");
        // (Jan 25's blocks are in the row cache since the page above.)
        assert_eq!(read_days(), ["2026-01-02"], "{clock:?}");
    }

    /// Rows `range` an hour apart from the first minute, of three filers in turn, committed
    /// on 25 January.
    fn hourly(range: std::ops::Range<u64>) -> Vec<NewsRow> {
        range
            .map(|i| {
                edgar(
                    &format!("0000000001-26-{i:06}"),
                    &(1 + i % 3).to_string(),
                    Some(&minute(i * 60)),
                    "2026-01-25T00:00:00Z",
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn a_walk_past_its_row_budget_is_refused_as_too_broad() {
        let rows = hourly(0..300);
        let (_dir, _store, mut c) = corpus(rows, january()).await;
        c.set_scan_pool(ScanPool::new(1, 2, Duration::from_secs(1), 100, None).unwrap());
        // The sample scope is walked: a CIK whose rows are a third of the corpus needs it all.
        c.set_read_path(ReadPath::Walk);
        let mut q = query(
            Lane::CertifiedPit,
            VisibleBy::PublishedAt,
            "2026-01-20T00:00:00Z",
            None,
        );
        q.limit = 10;
        assert!(matches!(
            c.news(&q, Scope::Corpus).await,
            Ok(Answer::Page { .. })
        ));
        q.entity = Entity::Cik("3".into());
        q.limit = 90;
        match c.news(&q, Scope::Corpus).await {
            Err(Error::TooBroad { limit: 100 }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_pages_future_stays_small_whatever_its_misses_and_walks_await() {
        let (_dir, _store, c) = corpus(hourly(0..40), january()).await;
        let q = query(
            Lane::CertifiedPit,
            VisibleBy::PublishedAt,
            "2026-01-20T00:00:00Z",
            None,
        );
        // Every front end moves the answer's future a few times before it runs (into a box,
        // into the handler's own future): its size is copied on every request. The object
        // store reads and the walk are boxed where they are awaited, so they do not count.
        let page = c.news_shared(&q, Scope::Corpus);
        let size = std::mem::size_of_val(&page);
        assert!(size <= MAX_PAGE_FUTURE, "a page's future is {size} bytes");
        page.await.unwrap();
    }

    /// The most a page's future may hold, in bytes (debug builds lay futures out larger).
    const MAX_PAGE_FUTURE: usize = 2048;

    #[tokio::test]
    async fn a_walks_page_is_encoded_on_the_scan_pool_once_before_it_is_handed_out() {
        let rows = hourly(0..40);
        let (_dir, _store, mut c) = corpus(rows, january()).await;
        c.set_scan_pool(ScanPool::new(1, 2, Duration::from_secs(1), 1_000, None).unwrap());
        let threads = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = Arc::clone(&threads);
        c.set_row_encoder(Arc::new(move |r: &NewsRow| {
            let name = std::thread::current().name().unwrap_or("").to_owned();
            seen.lock().unwrap().push(name);
            serde_json::value::to_raw_value(&r.id).unwrap()
        }));
        let mut q = query(
            Lane::CertifiedPit,
            VisibleBy::PublishedAt,
            "2026-01-20T00:00:00Z",
            None,
        );
        q.limit = 25;
        let Answer::Page { rows, .. } = c.news_shared(&q, Scope::Corpus).await.unwrap() else {
            panic!("a page");
        };
        assert_eq!(rows.len(), 25);
        let names = threads.lock().unwrap().clone();
        assert_eq!(
            names.len(),
            26,
            "the page's rows and the one past it, each once"
        );
        assert!(names.iter().all(|n| n == "asof-scan"), "{names:?}");
        for r in &rows {
            let json = r.json(|_| panic!("already encoded on the pool"));
            assert_eq!(json.get(), format!("{:?}", r.id));
        }
    }
}
