//! Rows of one publish, held in memory up to a limit and past it in a local temporary file,
//! so an ingest of a quarter's EDGAR index (300k+ rows) or a bulk file holds a bounded number
//! of rows at once instead of all of them.
//!
//! Rows are grouped by the partition they land on (source, lane, UTC day) as they arrive and
//! remember their arrival order, because the publisher needs both: it reads the rows of one
//! partition at a time to write it, and it decides revisions in arrival order (two rows with
//! one id in one ingest: the later supersedes the earlier, as if ingested one after the
//! other). A flush writes each buffered partition's rows as one small Parquet blob at the end
//! of the file; the arrival number of each row stays in memory (8 bytes a row).
//!
//! The file is anonymous (`tempfile::tempfile`): the operating system removes it when the
//! spill is dropped or the process dies, so a crashed ingest leaves nothing behind.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::error::{Error, Result};
use crate::model::clock::{Day, Lane, SourceId};
use crate::model::record::{NewsRow, partition_order, to_batch};

/// Where a row lands: its source, lane and partition day (`None` for a row with no clock yet;
/// the publisher refuses such rows, an ingest fills `committed_at` before publishing).
pub type Key = (SourceId, Lane, Option<Day>);

/// Rows held in memory before a flush to the file: about 32 MiB of typical rows, small
/// enough to bound an ingest, big enough that a daily ingest never touches the disk.
pub const DEFAULT_LIMIT: usize = 32_768;

/// One partition's rows of one flush.
#[derive(Debug)]
struct Part {
    offset: u64,
    len: u64,
    /// Arrival number of each row, in blob order (ascending).
    seqs: Vec<u64>,
}

/// Rows grouped by partition, in memory up to a limit, the rest in a temporary file.
#[derive(Debug)]
pub struct RowSpill {
    limit: usize,
    next_seq: u64,
    buffered: BTreeMap<Key, Vec<(u64, NewsRow)>>,
    held: usize,
    file: Option<Arc<std::fs::File>>,
    end: u64,
    /// Flushes in arrival order; each maps a partition to its blob.
    chunks: Vec<BTreeMap<Key, Part>>,
    /// The first flush that failed: every read reports it (pushing stays infallible so an
    /// adapter's loop needs no error path for the disk).
    failed: Option<String>,
}

impl Default for RowSpill {
    fn default() -> Self {
        Self::with_limit(DEFAULT_LIMIT)
    }
}

impl RowSpill {
    pub fn new() -> Self {
        Self::default()
    }

    /// A spill that flushes once it holds `limit` rows (at least one).
    pub fn with_limit(limit: usize) -> Self {
        RowSpill {
            limit: limit.max(1),
            next_seq: 0,
            buffered: BTreeMap::new(),
            held: 0,
            file: None,
            end: 0,
            chunks: Vec::new(),
            failed: None,
        }
    }

    /// Rows pushed so far.
    pub fn len(&self) -> u64 {
        self.next_seq
    }

    pub fn is_empty(&self) -> bool {
        self.next_seq == 0
    }

    /// Rows written to the file so far (0 while everything fits in memory).
    pub fn spilled(&self) -> u64 {
        self.next_seq - self.held as u64
    }

    pub fn push(&mut self, row: NewsRow) {
        let key = (row.source_id, row.lane, row.partition_day());
        self.buffered
            .entry(key)
            .or_default()
            .push((self.next_seq, row));
        self.next_seq += 1;
        self.held += 1;
        if self.held >= self.limit
            && let Err(e) = self.flush()
        {
            // Keep the rows rather than lose them; every read reports the failure.
            self.failed.get_or_insert_with(|| e.to_string());
        }
    }

    fn flush(&mut self) -> Result<()> {
        if self.failed.is_some() || self.buffered.is_empty() {
            return Ok(());
        }
        let file = match &self.file {
            Some(f) => Arc::clone(f),
            None => {
                let f = Arc::new(tempfile::tempfile()?);
                self.file = Some(Arc::clone(&f));
                f
            }
        };
        let mut chunk = BTreeMap::new();
        for (key, mut rows) in std::mem::take(&mut self.buffered) {
            // In partition order, so a partition's rows can be read back merged from every
            // flush without holding them ([`RowSpill::sorted_rows`]); the arrival numbers go
            // with them.
            rows.sort_by(|a, b| partition_order(&a.1, &b.1));
            let (seqs, rows): (Vec<u64>, Vec<NewsRow>) = rows.into_iter().unzip();
            let bytes = encode(&rows)?;
            file.write_all_at(&bytes, self.end)?;
            chunk.insert(
                key,
                Part {
                    offset: self.end,
                    len: bytes.len() as u64,
                    seqs,
                },
            );
            self.end += bytes.len() as u64;
        }
        self.chunks.push(chunk);
        self.held = 0;
        Ok(())
    }

    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(Error::Io(std::io::Error::other(format!(
                "spilling rows to a temporary file failed: {e}"
            )))),
            None => Ok(()),
        }
    }

    fn read_part(&self, part: &Part) -> Result<Vec<NewsRow>> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| Error::integrity("row spill", "a flushed part without its file"))?;
        let mut buf = vec![0; part.len as usize];
        file.read_exact_at(&mut buf, part.offset)?;
        let rows = crate::store::objects::decode_parquet("row spill", Bytes::from(buf))?;
        if rows.len() != part.seqs.len() {
            return Err(Error::integrity(
                "row spill",
                format!("{} rows read back, {} written", rows.len(), part.seqs.len()),
            ));
        }
        Ok(rows)
    }

    /// Every partition a row landed on.
    pub fn keys(&self) -> BTreeSet<Key> {
        self.chunks
            .iter()
            .flat_map(|c| c.keys().copied())
            .chain(self.buffered.keys().copied())
            .collect()
    }

    /// The rows of one partition in partition order ([`partition_order`]), merged from every
    /// flush a batch at a time: a partition of millions of rows (a golden copy's day) is never
    /// held whole.
    pub fn sorted_rows(&self, key: &Key) -> Result<SortedRows<'static>> {
        self.check()?;
        let mut sources: Vec<Box<dyn Iterator<Item = Result<NewsRow>> + Send>> = Vec::new();
        for chunk in &self.chunks {
            if let Some(part) = chunk.get(key) {
                let file = self.file.as_ref().ok_or_else(|| {
                    Error::integrity("row spill", "a flushed part without its file")
                })?;
                let range = FileRange {
                    file: Arc::clone(file),
                    offset: part.offset,
                    len: part.len,
                };
                sources.push(Box::new(crate::store::objects::RowReader::new(
                    "row spill",
                    range,
                    READ_BATCH,
                )?));
            }
        }
        if let Some(rows) = self.buffered.get(key) {
            let mut rows: Vec<NewsRow> = rows.iter().map(|(_, r)| r.clone()).collect();
            rows.sort_by(partition_order);
            sources.push(Box::new(rows.into_iter().map(Ok)));
        }
        SortedRows::new(sources)
    }

    /// Calls `f` with every row in arrival order, holding one flush's rows at a time. `f`'s
    /// error type is the caller's (the spill's own read errors convert into it).
    pub fn for_each<E: From<Error>>(
        &self,
        mut f: impl FnMut(NewsRow) -> Result<(), E>,
    ) -> Result<(), E> {
        self.check()?;
        for chunk in &self.chunks {
            let mut rows: Vec<(u64, NewsRow)> = Vec::new();
            for part in chunk.values() {
                rows.extend(part.seqs.iter().copied().zip(self.read_part(part)?));
            }
            rows.sort_unstable_by_key(|(s, _)| *s);
            for (_, r) in rows {
                f(r)?;
            }
        }
        let mut rows: Vec<&(u64, NewsRow)> = self.buffered.values().flatten().collect();
        rows.sort_unstable_by_key(|(s, _)| *s);
        for (_, r) in rows {
            f(r.clone())?;
        }
        Ok(())
    }

    /// A new spill of `f` applied to every row in arrival order (`None` drops the row).
    pub fn try_map<E: From<Error>>(
        &self,
        mut f: impl FnMut(NewsRow) -> Result<Option<NewsRow>, E>,
    ) -> Result<Self, E> {
        let mut out = RowSpill::with_limit(self.limit);
        self.for_each(|r| {
            if let Some(r) = f(r)? {
                out.push(r);
            }
            Ok::<(), E>(())
        })?;
        out.check()?;
        Ok(out)
    }

    /// All rows in arrival order (for tests and small spills).
    pub fn to_vec(&self) -> Result<Vec<NewsRow>> {
        let mut out = Vec::with_capacity(self.next_seq as usize);
        self.for_each(|r| {
            out.push(r);
            Ok::<(), Error>(())
        })?;
        Ok(out)
    }
}

impl Extend<NewsRow> for RowSpill {
    fn extend<I: IntoIterator<Item = NewsRow>>(&mut self, iter: I) {
        for r in iter {
            self.push(r);
        }
    }
}

/// Rows decoded at a time from each flush when a partition is read merged: memory for a
/// partition read back is this many rows per flush that holds some of it.
const READ_BATCH: usize = 1024;

/// A byte range of the spill file, read by Parquet as a file of its own.
struct FileRange {
    file: Arc<std::fs::File>,
    offset: u64,
    len: u64,
}

impl parquet::file::reader::Length for FileRange {
    fn len(&self) -> u64 {
        self.len
    }
}

/// A reader from a position of a [`FileRange`] to its end.
struct RangeRead {
    file: Arc<std::fs::File>,
    pos: u64,
    end: u64,
}

impl std::io::Read for RangeRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min((self.end - self.pos) as usize);
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.pos)?;
        self.pos += got as u64;
        Ok(got)
    }
}

impl parquet::file::reader::ChunkReader for FileRange {
    type T = RangeRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<RangeRead> {
        Ok(RangeRead {
            file: Arc::clone(&self.file),
            pos: self.offset + start.min(self.len),
            end: self.offset + self.len,
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        if start + length as u64 > self.len {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "{length} bytes at {start} past the end of a {}-byte part",
                self.len
            )));
        }
        let mut buf = vec![0; length];
        self.file
            .read_exact_at(&mut buf, self.offset + start)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        Ok(Bytes::from(buf))
    }
}

/// Rows of several sources, each in partition order, merged into partition order.
pub struct SortedRows<'a> {
    sources: Vec<Box<dyn Iterator<Item = Result<NewsRow>> + Send + 'a>>,
    heads: Vec<Option<NewsRow>>,
}

impl<'a> SortedRows<'a> {
    /// Merges `sources`, each already in partition order.
    pub fn new(
        mut sources: Vec<Box<dyn Iterator<Item = Result<NewsRow>> + Send + 'a>>,
    ) -> Result<Self> {
        let heads = sources
            .iter_mut()
            .map(|s| s.next().transpose())
            .collect::<Result<_>>()?;
        Ok(SortedRows { sources, heads })
    }
}

impl Iterator for SortedRows<'_> {
    type Item = Result<NewsRow>;

    fn next(&mut self) -> Option<Self::Item> {
        // A linear scan of the heads: a partition is merged from a few dozen flushes at most
        // (one per 32,768 rows of the ingest), where a heap would save nothing that matters.
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some(r) = h
                && best.is_none_or(|b| {
                    partition_order(r, self.heads[b].as_ref().expect("a head")).is_lt()
                })
            {
                best = Some(i);
            }
        }
        let i = best?;
        let next = match self.sources[i].next().transpose() {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        std::mem::replace(&mut self.heads[i], next).map(Ok)
    }
}

/// Parquet without statistics or dictionaries: written once, read back once or twice.
fn encode(rows: &[NewsRow]) -> Result<Vec<u8>> {
    let batch = to_batch(rows)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_dictionary_enabled(false)
        .build();
    let mut buf = Vec::with_capacity(rows.len() * 256 + 1024);
    let mut w = ArrowWriter::try_new(&mut buf, Arc::clone(batch.schema_ref()), Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::edgar;

    fn row(i: usize, day: u32) -> NewsRow {
        let mut r = edgar(
            &format!("0000000001-26-{i:06}"),
            "1",
            Some(&format!("2026-01-{day:02}T09:00:00Z")),
            "2026-02-01T00:00:00Z",
        );
        r.payload = Some(format!("{{\"n\":{i}}}"));
        r
    }

    #[test]
    fn rows_past_the_limit_go_to_the_file_and_come_back_in_arrival_order() {
        // Ids descending: each flush stores its rows in partition order (ids ascending), and
        // they must still come back as they arrived.
        let rows: Vec<NewsRow> = (0..50).rev().map(|i| row(i, 1 + (i % 7) as u32)).collect();
        let mut spill = RowSpill::with_limit(8);
        spill.extend(rows.clone());
        assert_eq!(spill.len(), 50);
        assert_eq!(spill.spilled(), 48, "six flushes of eight rows");
        assert_eq!(spill.to_vec().unwrap(), rows);
    }

    #[test]
    fn a_partitions_rows_come_back_merged_from_every_flush_in_partition_order() {
        let rows: Vec<NewsRow> = (0..30).rev().map(|i| row(i, 1 + (i % 3) as u32)).collect();
        let mut spill = RowSpill::with_limit(4);
        spill.extend(rows.clone());
        assert_eq!(spill.keys().len(), 3);
        for key in spill.keys() {
            let want: Vec<NewsRow> = rows
                .iter()
                .filter(|r| (r.source_id, r.lane, r.partition_day()) == key)
                .cloned()
                .collect();
            let mut want = want;
            want.sort_by(partition_order);
            let got: Vec<NewsRow> = spill
                .sorted_rows(&key)
                .unwrap()
                .collect::<Result<_>>()
                .unwrap();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_spill_within_its_limit_never_writes_a_file() {
        let mut spill = RowSpill::with_limit(100);
        spill.extend((0..10).map(|i| row(i, 2)));
        assert_eq!(spill.spilled(), 0);
        assert!(spill.file.is_none());
        let mapped = spill
            .try_map(|r| Ok::<_, Error>((!r.id.starts_with("0000000001-26-000003")).then_some(r)))
            .unwrap();
        assert_eq!(mapped.len(), 9);
    }
}
