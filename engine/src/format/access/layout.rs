//! What the access files are: where a group's objects live, the order of rows in a data
//! file, a CIK's run of rows (`Slot`) and the sidecar that lists the runs, written and read
//! back here; and `asof verify`'s check that a data file and its sidecar keep to it.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BinaryBuilder, Int64Array, Int64Builder, RecordBatch,
    StringArray, StringBuilder, UInt32Array, UInt32Builder, UInt64Array, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::model::clock::{Day, Instant, Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::model::record::NewsRow;
use crate::store::CorpusStore;
use crate::store::objects::{download_checked, get_checked};

use super::blocks;

/// Manifest `kind` of a CIK-clustered data file (an Arrow IPC file of 128-row blocks) of one
/// era ([`GROUP_YEARS`] years). Version 1 was a Parquet file of one year, version 2 the same
/// blocks as now in a file of one year; a version listing only those has its by-CIK pages
/// answered by the partition walk until its next publish derives every group again (the kinds
/// differ so a year's file is never taken for its era's).
pub const KIND_CLUSTERED: &str = "access.cik_blocks/3";

/// Manifest `kind` of the sidecar index of one clustered file.
pub const KIND_SIDECAR: &str = "access.cik_index/3";

/// Whether a manifest entry is an access object of an earlier layout (never read; dropped by
/// the next publish, which derives its groups again).
pub(crate) fn is_stale_kind(kind: &str) -> bool {
    kind.starts_with("access.") && kind != KIND_CLUSTERED && kind != KIND_SIDECAR
}

/// Years of one access group (an era). A filer's rows of many years lie in one file, so a
/// cold page of a filer whose few rows span two decades reads three or four ranges, not one
/// per year (BENCHMARKS.md, "A cold page from object storage"); a daily ingest still costs
/// its own rows (a delta file), and an era is derived whole again only when its deltas reach
/// a quarter of it, by an external merge sort in bounded memory ([`super::derive`]).
pub const GROUP_YEARS: i32 = 8;

/// The first year of the era holding `year`: eras begin in 2001, 2009, 2017, 2025, … (and
/// 1993 before them), so the turn of 2024 to 2025 is a boundary the tests' corpora cross.
pub fn era_of(year: i32) -> i32 {
    year - (year - 2001).rem_euclid(GROUP_YEARS)
}

/// Rows per block of a clustered file, counted from its first row; also the dated rows
/// between two fences of the sidecar.
pub const BLOCK_ROWS: usize = 128;

pub(crate) const META_DATA_SHA: &str = "asof.access.data_sha256";

pub(crate) const META_SUPERSESSIONS: &str = "asof.access.supersessions";

/// The byte offset of every block of the data file, and the end of the last (JSON array).
pub(crate) const META_BLOCKS: &str = "asof.access.block_offsets";

pub(crate) const DATA_SUFFIX: &str = ".arrow";

pub(crate) const SIDECAR_SUFFIX: &str = ".cik-index.parquet";

/// File-name prefix of a group's delta files (rows added since its base was derived).
pub const DELTA_PREFIX: &str = "delta-";

/// A group is derived whole again once its deltas hold 1/`DELTA_RATIO` of its base's rows.
pub const DELTA_RATIO: u64 = 4;

/// Delta files per group beyond which they are merged into one.
pub const MAX_DELTAS: usize = 8;

/// The access group of a partition: source, lane and the first year of its UTC day's era
/// ([`era_of`]). Only sources whose rows carry a CIK are clustered (today `sec.edgar`).
pub fn group_of(p: &PartitionEntry) -> Option<(SourceId, Lane, i32)> {
    group_of_day(p.source_id, p.lane, p.date)
}

/// The access group of a source-lane-day, if its source is clustered.
pub fn group_of_day(source: SourceId, lane: Lane, day: Day) -> Option<(SourceId, Lane, i32)> {
    (source == SourceId::SecEdgar).then(|| (source, lane, era_of(day.to_date().year())))
}

/// The folder holding the access objects of one group (named by its era's first year).
pub fn group_dir(source: SourceId, lane: Lane, era: i32) -> String {
    format!("snapshots/access/{source}/{lane}/{era}/")
}

/// Parses `snapshots/access/<source>/<lane>/<era>/…` back to its group.
pub(crate) fn group_of_path(path: &str) -> Option<(SourceId, Lane, i32)> {
    let mut it = path.strip_prefix("snapshots/access/")?.split('/');
    let source = it.next()?.parse().ok()?;
    let lane = it.next()?.parse().ok()?;
    let era = it.next()?.parse().ok()?;
    Some((source, lane, era))
}

/// The order of rows inside a clustered file: by CIK (rows without one last), then the answer
/// order `(published_at nulls last, id)`, then revisions by commit time.
pub(crate) fn access_order(a: &NewsRow, b: &NewsRow) -> std::cmp::Ordering {
    (a.cik.is_none(), a.cik.as_deref())
        .cmp(&(b.cik.is_none(), b.cik.as_deref()))
        .then(a.sort_key().cmp(&b.sort_key()))
        .then(a.committed_at.cmp(&b.committed_at))
        .then(a.revision_id.cmp(&b.revision_id))
}

/// Where a row sorts in a clustered file by CIK alone: CIKs in order, rows without one last.
pub(crate) fn cik_key(r: &NewsRow) -> (bool, &str) {
    (r.cik.is_none(), r.cik.as_deref().unwrap_or(""))
}

pub(crate) type SlotKey = (SourceId, Lane, Box<str>);

/// One CIK's run of rows inside one clustered file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) file: u32,
    /// First row of the run in the file.
    pub(crate) start: u64,
    /// Rows with `published_at` (they come first, sorted by it).
    pub(crate) dated: u32,
    /// Rows without `published_at` (after the dated ones, sorted by id).
    pub(crate) nulls: u32,
    pub(crate) min_published: Option<i64>,
    pub(crate) max_published: Option<i64>,
    /// `published_at` of dated rows `0, 128, 256, …` of the run (shared: a page copies the
    /// slots it reads with their file numbers of its version).
    pub(crate) fences: Arc<[i64]>,
}

impl Slot {
    /// The blocks of the run's dated rows (block `k` holds dated rows `[128k, 128(k+1))`,
    /// and its first row has fence `k`) that can hold a row whose `published_at` lies within
    /// `bounds`; `None` when none can.
    pub(crate) fn dated_blocks(&self, bounds: Bounds) -> Option<Range<usize>> {
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
    pub(crate) fn dated_rows(&self, ks: Range<usize>) -> Range<u64> {
        let dated = u64::from(self.dated);
        self.start + ((ks.start * BLOCK_ROWS) as u64).min(dated)
            ..self.start + ((ks.end * BLOCK_ROWS) as u64).min(dated)
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

pub(crate) fn sidecar_schema() -> Arc<Schema> {
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
pub(crate) fn slots_of(rows: &[NewsRow]) -> Vec<(String, Slot)> {
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
                fences: dated
                    .iter()
                    .step_by(BLOCK_ROWS)
                    .copied()
                    .collect::<Vec<_>>()
                    .into(),
            },
        ));
        i = j;
    }
    out
}

pub(crate) fn encode_sidecar(
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

/// Decodes one sidecar's slots into `pending`; returns the supersessions and the block
/// offsets it carries.
pub(crate) fn decode_sidecar(
    pending: &mut Vec<(SlotKey, Slot)>,
    path: &str,
    bytes: Bytes,
    file: u32,
    (source, lane, _): (SourceId, Lane, i32),
    data_sha: &str,
) -> Result<(Vec<(String, i64)>, Vec<u64>)> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let meta = builder.metadata().clone();
    let get = crate::store::objects::footer_value(&meta);
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
                    .collect::<Vec<_>>()
                    .into(),
            };
            pending.push(((source, lane, cik.value(i).into()), slot));
        }
    }
    Ok((sup, offsets))
}

pub(crate) fn col<T: 'static>(batch: &RecordBatch, i: usize) -> Option<&T> {
    batch.column(i).as_any().downcast_ref::<T>()
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
    if era_of(group.2) != group.2 {
        return Err(bad(format!("{} does not begin an era", group.2)));
    }
    let mut slots = Vec::new();
    let sc = get_checked(store, &sidecar.path, &sidecar.sha256).await?;
    let (_, offsets) = decode_sidecar(&mut slots, &sidecar.path, sc, 0, group, &data.sha256)?;
    // An era's file runs to gigabytes: it is checked a block at a time from a local copy,
    // holding one CIK's run of rows.
    let file = download_checked(store, &data.path, &data.sha256).await?;
    let n = (data.row_count as usize).div_ceil(BLOCK_ROWS);
    if offsets.len() != n + 1 || offsets[n] > file.metadata()?.len() {
        return Err(bad(format!(
            "{} block offsets for {} rows",
            offsets.len(),
            data.row_count
        )));
    }
    let mut expected: Vec<(String, Slot)> = Vec::new();
    let (mut run, mut run_start, mut rows, mut last) = (Vec::<NewsRow>::new(), 0u64, 0u64, None);
    let flush =
        |run: &mut Vec<NewsRow>, run_start: &mut u64, expected: &mut Vec<(String, Slot)>| {
            for (cik, mut s) in slots_of(run) {
                s.start += *run_start;
                expected.push((cik, s));
            }
            *run_start += run.len() as u64;
            run.clear();
        };
    for k in 0..n {
        let bytes = blocks::read_local(&file, offsets[k]..offsets[k + 1])?;
        let (held, block) = blocks::decode_parts(
            &data.path,
            &bytes,
            &offsets,
            k..k + 1,
            (group.0, group.1),
            None,
        )?
        .pop()
        .ok_or_else(|| bad(format!("block {k} holds nothing")))?;
        if (k + 1 < n && held != BLOCK_ROWS) || held == 0 {
            return Err(bad(format!("block {k} holds {held} rows")));
        }
        let in_order = last
            .iter()
            .chain(block.iter())
            .is_sorted_by(|a, b| access_order(a, b).is_le());
        if !in_order {
            return Err(bad("rows are not in access order".into()));
        }
        rows += block.len() as u64;
        last = block.last().cloned();
        for r in block {
            if run.last().is_some_and(|l| cik_key(l) != cik_key(&r)) {
                flush(&mut run, &mut run_start, &mut expected);
            }
            run.push(r);
        }
    }
    flush(&mut run, &mut run_start, &mut expected);
    if rows != data.row_count {
        return Err(bad(format!(
            "{rows} rows, manifest says {}",
            data.row_count
        )));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eras_are_eight_years_from_2001_and_every_day_of_one_lies_in_its_folder() {
        assert_eq!(era_of(2001), 2001);
        assert_eq!(era_of(2008), 2001);
        assert_eq!(era_of(2024), 2017);
        assert_eq!(era_of(2025), 2025);
        assert_eq!(era_of(2000), 1993);
        assert_eq!(era_of(1993), 1993);
        for year in 1900..2200 {
            let era = era_of(year);
            assert!((era..era + GROUP_YEARS).contains(&year), "{year} in {era}");
            assert_eq!(era_of(era), era, "{era} begins its era");
        }
        let day: Day = "2024-12-31".parse().unwrap();
        let g = group_of_day(SourceId::SecEdgar, Lane::CertifiedPit, day).unwrap();
        assert_eq!(g.2, 2017);
        let dir = group_dir(g.0, g.1, g.2);
        assert_eq!(dir, "snapshots/access/sec.edgar/certified_pit/2017/");
        assert_eq!(group_of_path(&format!("{dir}x.arrow")), Some(g));
        assert_eq!(
            group_of_day(SourceId::OfacSdn, Lane::CertifiedPit, day),
            None,
            "only sources whose rows carry a CIK"
        );
    }
}
