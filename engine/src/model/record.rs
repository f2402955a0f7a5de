//! The news record: one row of the corpus, its Arrow/Parquet schema and conversions.
//!
//! Column names are the spec's News record fields, plus `entity_id` and `payload` for sources
//! other than `sec.edgar` (see docs/sources.md). Clocks are `Timestamp(µs, UTC)`, nullable.

use std::borrow::Borrow;
use std::sync::{Arc, OnceLock};

use arrow::array::{
    Array, ArrayRef, RecordBatch, StringArray, StringBuilder, TimestampMicrosecondArray,
    TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::prelude::{Expr, col, lit};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::clock::{AvailabilityBasis, Instant, Lane, SourceId, VisibleBy};

/// One revision of one record. `id` is stable across revisions; `revision_id` is not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewsRow {
    pub id: String,
    pub source_id: SourceId,
    pub lane: Lane,
    pub form: Option<String>,
    pub accession: Option<String>,
    pub cik: Option<String>,
    pub title: String,
    pub event_at: Option<Instant>,
    pub published_at: Option<Instant>,
    pub available_at: Option<Instant>,
    pub acceptance_at: Option<Instant>,
    pub committed_at: Option<Instant>,
    pub availability_basis: AvailabilityBasis,
    pub revision_id: String,
    pub supersedes: Option<String>,
    pub content_sha256: String,
    pub source_locator: String,
    /// The source's own identifier of the subject (LEI, OFAC entity number, FR document
    /// number, FDA recall number, CFTC market code); the CIK for `sec.edgar`.
    pub entity_id: Option<String>,
    /// The source's original fields as JSON text, for sources other than `sec.edgar`.
    pub payload: Option<String>,
}

/// The values of a row that define its content; two revisions differ iff these differ.
/// Rows decoded together (a block of the access path's row cache, or a row of its own), each
/// with a slot for its JSON encoding: an answer that encodes a row the same way every time
/// (the news routes' record) fills the slot once and copies it after, for as long as the block
/// is held. Encoding a record was the largest single item of a replica's CPU under load
/// (JSON string escaping; BENCHMARKS.md, "load during reloads").
pub struct RowBlock {
    rows: Box<[NewsRow]>,
    json: Box<[OnceLock<Box<RawValue>>]>,
}

impl RowBlock {
    /// The rows of the block.
    pub fn rows(&self) -> &[NewsRow] {
        &self.rows
    }

    /// What the block costs in memory, approximately: its rows, their heap, and room for the
    /// JSON encoding of each (counted when the block is made, filled or not: a row's record
    /// encoding is about its own size plus the field names).
    pub fn weight(&self) -> usize {
        self.rows
            .iter()
            .map(|r| 2 * r.heap_bytes() + JSON_FIELD_NAMES)
            .sum::<usize>()
            + self.rows.len()
                * (std::mem::size_of::<NewsRow>() + std::mem::size_of::<OnceLock<Box<RawValue>>>())
    }
}

/// About what the field names and punctuation of one encoded record take.
const JSON_FIELD_NAMES: usize = 320;

impl FromIterator<NewsRow> for RowBlock {
    fn from_iter<I: IntoIterator<Item = NewsRow>>(iter: I) -> Self {
        let rows: Box<[NewsRow]> = iter.into_iter().collect();
        let json = rows.iter().map(|_| OnceLock::new()).collect();
        RowBlock { rows, json }
    }
}

impl std::ops::Deref for RowBlock {
    type Target = [NewsRow];
    fn deref(&self) -> &[NewsRow] {
        &self.rows
    }
}

impl std::fmt::Debug for RowBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.rows.fmt(f)
    }
}

/// How a caller encodes a row as JSON (the service's record shape, which the engine does not
/// know); given to a corpus so a walk can encode its page on the scan pool
/// (`Corpus::set_row_encoder`).
pub type RowEncoder = Arc<dyn Fn(&NewsRow) -> Box<RawValue> + Send + Sync>;

/// A row shared with the block it was read in (a block of the access path's row cache), so
/// an answer hands rows out without copying their strings; it derefs to the row. A row from
/// elsewhere (a scan) is a block of one.
#[derive(Clone)]
pub struct SharedRow {
    block: Arc<RowBlock>,
    index: u32,
}

impl SharedRow {
    /// Row `index` of `block`.
    pub fn new(block: Arc<RowBlock>, index: usize) -> Self {
        assert!(
            index < block.len(),
            "row {index} of a block of {}",
            block.len()
        );
        SharedRow {
            block,
            index: index as u32,
        }
    }

    /// A row of its own.
    pub fn owned(row: NewsRow) -> Self {
        SharedRow {
            block: Arc::new(std::iter::once(row).collect()),
            index: 0,
        }
    }

    /// The row, copied out of its block.
    pub fn into_row(self) -> NewsRow {
        self.block.rows[self.index as usize].clone()
    }

    /// The row's JSON encoding: made by `encode` the first time any holder of the block asks,
    /// the same bytes after. Every caller must encode the row the same way (one record shape).
    pub fn json(&self, encode: impl FnOnce(&NewsRow) -> Box<RawValue>) -> &RawValue {
        let i = self.index as usize;
        self.block.json[i].get_or_init(|| encode(&self.block.rows[i]))
    }
}

impl Borrow<NewsRow> for SharedRow {
    fn borrow(&self) -> &NewsRow {
        &self.block.rows[self.index as usize]
    }
}

impl std::ops::Deref for SharedRow {
    type Target = NewsRow;
    fn deref(&self) -> &NewsRow {
        &self.block.rows[self.index as usize]
    }
}

impl std::fmt::Debug for SharedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[derive(Serialize)]
struct Content<'a> {
    id: &'a str,
    source_id: &'a str,
    lane: &'a str,
    form: &'a Option<String>,
    accession: &'a Option<String>,
    cik: &'a Option<String>,
    title: &'a str,
    event_at: Option<String>,
    published_at: Option<String>,
    available_at: Option<String>,
    acceptance_at: Option<String>,
    availability_basis: &'a str,
    source_locator: &'a str,
    entity_id: &'a Option<String>,
    payload: &'a Option<String>,
}

impl NewsRow {
    /// Bytes the row's strings hold on the heap (what a cache of rows is bounded by).
    pub fn heap_bytes(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        self.id.capacity()
            + self.title.capacity()
            + self.revision_id.capacity()
            + self.content_sha256.capacity()
            + self.source_locator.capacity()
            + opt(&self.form)
            + opt(&self.accession)
            + opt(&self.cik)
            + opt(&self.supersedes)
            + opt(&self.entity_id)
            + opt(&self.payload)
    }

    /// Fills `content_sha256` and `revision_id` from the row's content. Corpus bookkeeping
    /// (`committed_at`, `supersedes`) is not content: re-ingesting the same facts later must
    /// give the same hash, so identical re-ingest is a no-op.
    pub fn seal(mut self) -> Self {
        let c = Content {
            id: &self.id,
            source_id: self.source_id.as_str(),
            lane: self.lane.as_str(),
            form: &self.form,
            accession: &self.accession,
            cik: &self.cik,
            title: &self.title,
            event_at: self.event_at.map(|i| i.to_string()),
            published_at: self.published_at.map(|i| i.to_string()),
            available_at: self.available_at.map(|i| i.to_string()),
            acceptance_at: self.acceptance_at.map(|i| i.to_string()),
            availability_basis: self.availability_basis.as_str(),
            source_locator: &self.source_locator,
            entity_id: &self.entity_id,
            payload: &self.payload,
        };
        let bytes = serde_json::to_vec(&c).expect("content serializes");
        let hash = hex::encode(Sha256::digest(&bytes));
        self.revision_id = format!("rev_{}", &hash[..24]);
        self.content_sha256 = hash;
        self
    }

    /// The named clock of this row.
    pub fn clock(&self, by: VisibleBy) -> Option<Instant> {
        match by {
            VisibleBy::PublishedAt => self.published_at,
            VisibleBy::AvailableAt => self.available_at,
            VisibleBy::CommittedAt => self.committed_at,
        }
    }

    /// The UTC day whose partition holds this row: the day of `published_at`, else of
    /// `available_at`, else of `committed_at`.
    pub fn partition_day(&self) -> Option<crate::model::clock::Day> {
        self.published_at
            .or(self.available_at)
            .or(self.committed_at)
            .map(Instant::day)
    }

    /// The sort key of every answer: `(published_at, id)`, rows without `published_at` last.
    pub fn sort_key(&self) -> (bool, i64, &str) {
        (
            self.published_at.is_none(),
            self.published_at.map_or(0, Instant::micros),
            &self.id,
        )
    }
}

/// A keyset position in the answer order: the last row of the previous page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub published_at: Option<Instant>,
    pub id: String,
}

impl Position {
    /// Whether `r` comes after the position in the answer order ([`NewsRow::sort_key`]).
    pub fn precedes(&self, r: &NewsRow) -> bool {
        match (r.published_at, self.published_at) {
            (Some(a), Some(p)) => a > p || (a == p && r.id > self.id),
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (None, None) => r.id > self.id,
        }
    }

    /// [`Position::precedes`] as a DataFusion predicate over the partitions' columns, for
    /// the reference scan (a test holds the two equal on every row).
    pub fn precedes_expr(&self) -> Expr {
        let p = col("published_at");
        let later_id = col("id").gt(lit(self.id.clone()));
        match self.published_at {
            Some(at) => p
                .clone()
                .gt(ts(at))
                .or(p.clone().eq(ts(at)).and(later_id))
                .or(p.is_null()),
            None => p.is_null().and(later_id),
        }
    }
}

/// A timestamp literal in the partitions' type (microseconds, UTC).
pub fn ts(t: Instant) -> Expr {
    lit(datafusion::scalar::ScalarValue::TimestampMicrosecond(
        Some(t.micros()),
        Some("UTC".into()),
    ))
}

/// The order of rows inside a partition: the answer order [`NewsRow::sort_key`], then
/// revisions by commit time and revision id. A total order for sealed rows (revision ids are
/// unique), so the same rows give the same partition bytes however they arrive.
pub fn partition_order(a: &NewsRow, b: &NewsRow) -> std::cmp::Ordering {
    a.sort_key()
        .cmp(&b.sort_key())
        .then(a.committed_at.cmp(&b.committed_at))
        .then(a.revision_id.cmp(&b.revision_id))
}

/// The type of every clock column: microseconds, UTC.
pub fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The clock columns, in schema order.
pub const CLOCK_COLUMNS: [&str; 5] = [
    "event_at",
    "published_at",
    "available_at",
    "acceptance_at",
    "committed_at",
];

/// The record columns followed by `extra`: the schema of a table that carries each row with
/// something about it (the late object's partition and flags, an exported rows view's place).
pub fn schema_with(extra: impl IntoIterator<Item = Field>) -> SchemaRef {
    let mut fields: Vec<Field> = schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend(extra);
    Arc::new(Schema::new(fields))
}

/// The Arrow schema of partitions and compacted access files.
pub fn schema() -> SchemaRef {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    let t = |n: &str| Field::new(n, ts_type(), true);
    Arc::new(Schema::new(vec![
        s("id", false),
        s("source_id", false),
        s("lane", false),
        s("form", true),
        s("accession", true),
        s("cik", true),
        s("title", false),
        t("event_at"),
        t("published_at"),
        t("available_at"),
        t("acceptance_at"),
        t("committed_at"),
        s("availability_basis", false),
        s("revision_id", false),
        s("supersedes", true),
        s("content_sha256", false),
        s("source_locator", false),
        s("entity_id", true),
        s("payload", true),
    ]))
}

/// Rows to one Arrow batch in schema order: owned rows, or the [`SharedRow`]s of an answer
/// (what the Python package hands to pyarrow).
pub fn to_batch<R: Borrow<NewsRow>>(rows: &[R]) -> Result<RecordBatch> {
    fn strs<'a, R: Borrow<NewsRow>>(
        rows: &'a [R],
        f: impl Fn(&'a NewsRow) -> Option<&'a str>,
    ) -> ArrayRef {
        let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 16);
        for r in rows {
            b.append_option(f(r.borrow()));
        }
        Arc::new(b.finish())
    }
    fn times<R: Borrow<NewsRow>>(rows: &[R], f: impl Fn(&NewsRow) -> Option<Instant>) -> ArrayRef {
        let mut b = TimestampMicrosecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
        for r in rows {
            b.append_option(f(r.borrow()).map(Instant::micros));
        }
        Arc::new(b.finish())
    }
    let cols: Vec<ArrayRef> = vec![
        strs(rows, |r| Some(r.id.as_str())),
        strs(rows, |r| Some(r.source_id.as_str())),
        strs(rows, |r| Some(r.lane.as_str())),
        strs(rows, |r| r.form.as_deref()),
        strs(rows, |r| r.accession.as_deref()),
        strs(rows, |r| r.cik.as_deref()),
        strs(rows, |r| Some(r.title.as_str())),
        times(rows, |r| r.event_at),
        times(rows, |r| r.published_at),
        times(rows, |r| r.available_at),
        times(rows, |r| r.acceptance_at),
        times(rows, |r| r.committed_at),
        strs(rows, |r| Some(r.availability_basis.as_str())),
        strs(rows, |r| Some(r.revision_id.as_str())),
        strs(rows, |r| r.supersedes.as_deref()),
        strs(rows, |r| Some(r.content_sha256.as_str())),
        strs(rows, |r| Some(r.source_locator.as_str())),
        strs(rows, |r| r.entity_id.as_deref()),
        strs(rows, |r| r.payload.as_deref()),
    ];
    Ok(RecordBatch::try_new(schema(), cols)?)
}

/// An Arrow batch (any column order, extra columns ignored) back to rows.
pub fn from_batch(batch: &RecordBatch) -> Result<Vec<NewsRow>> {
    let col = |name: &str| -> Result<&ArrayRef> {
        batch
            .column_by_name(name)
            .ok_or_else(|| Error::integrity("batch", format!("missing column {name}")))
    };
    let s = |name: &str| -> Result<&StringArray> {
        col(name)?
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| Error::integrity("batch", format!("column {name} is not utf8")))
    };
    let t = |name: &str| -> Result<&TimestampMicrosecondArray> {
        col(name)?
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .ok_or_else(|| Error::integrity("batch", format!("column {name} is not timestamp(us)")))
    };
    let (id, source, lane, form, accession, cik, title) = (
        s("id")?,
        s("source_id")?,
        s("lane")?,
        s("form")?,
        s("accession")?,
        s("cik")?,
        s("title")?,
    );
    let (event, published, available, acceptance, committed) = (
        t("event_at")?,
        t("published_at")?,
        t("available_at")?,
        t("acceptance_at")?,
        t("committed_at")?,
    );
    let (basis, revision, supersedes, content, locator, entity, payload) = (
        s("availability_basis")?,
        s("revision_id")?,
        s("supersedes")?,
        s("content_sha256")?,
        s("source_locator")?,
        s("entity_id")?,
        s("payload")?,
    );
    let opt_s = |a: &StringArray, i: usize| (!a.is_null(i)).then(|| a.value(i).to_owned());
    let opt_t = |a: &TimestampMicrosecondArray, i: usize| {
        (!a.is_null(i)).then(|| Instant::from_micros(a.value(i)))
    };
    (0..batch.num_rows())
        .map(|i| {
            Ok(NewsRow {
                id: id.value(i).to_owned(),
                source_id: source.value(i).parse().map_err(|()| {
                    Error::integrity("batch", format!("unknown source_id {}", source.value(i)))
                })?,
                lane: lane.value(i).parse().map_err(|()| {
                    Error::integrity("batch", format!("unknown lane {}", lane.value(i)))
                })?,
                form: opt_s(form, i),
                accession: opt_s(accession, i),
                cik: opt_s(cik, i),
                title: title.value(i).to_owned(),
                event_at: opt_t(event, i),
                published_at: opt_t(published, i),
                available_at: opt_t(available, i),
                acceptance_at: opt_t(acceptance, i),
                committed_at: opt_t(committed, i),
                availability_basis: basis.value(i).parse().map_err(|()| {
                    Error::integrity(
                        "batch",
                        format!("unknown availability_basis {}", basis.value(i)),
                    )
                })?,
                revision_id: revision.value(i).to_owned(),
                supersedes: opt_s(supersedes, i),
                content_sha256: content.value(i).to_owned(),
                source_locator: locator.value(i).to_owned(),
                entity_id: opt_s(entity, i),
                payload: opt_s(payload, i),
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small EDGAR-like row for tests across the crate.
    pub fn row(id: &str, cik: &str, published: Option<&str>) -> NewsRow {
        NewsRow {
            id: id.into(),
            source_id: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            form: Some("8-K".into()),
            accession: Some(id.split('_').next().unwrap().into()),
            cik: Some(cik.into()),
            title: format!("8-K {id}"),
            event_at: None,
            published_at: published.map(|p| Instant::parse(p).unwrap()),
            available_at: None,
            acceptance_at: published.map(|p| Instant::parse(p).unwrap()),
            committed_at: Some(Instant::parse("2026-02-03T12:07:02Z").unwrap()),
            availability_basis: AvailabilityBasis::Unknown,
            revision_id: String::new(),
            supersedes: None,
            content_sha256: String::new(),
            source_locator: format!("https://www.sec.gov/Archives/edgar/data/{cik}/{id}"),
            entity_id: Some(cik.into()),
            payload: None,
        }
        .seal()
    }

    /// The keyset predicate in both its forms keeps the same rows, for positions on dated
    /// and undated rows, ties on `published_at` broken by id.
    #[tokio::test]
    async fn a_position_and_its_datafusion_predicate_keep_the_same_rows() {
        use datafusion::prelude::SessionContext;
        let rows = vec![
            row("a_1", "1", Some("2026-01-09T15:00:00Z")),
            row("b_1", "1", Some("2026-01-09T15:00:00Z")),
            row("c_1", "1", Some("2026-01-10T15:00:00Z")),
            row("d_1", "1", None),
            row("e_1", "1", None),
            row("f_1", "1", Some("2026-01-08T00:00:00Z")),
        ];
        let ctx = SessionContext::new();
        ctx.register_batch("r", to_batch(&rows).unwrap()).unwrap();
        let mut positions: Vec<Position> = rows
            .iter()
            .map(|r| Position {
                published_at: r.published_at,
                id: r.id.clone(),
            })
            .collect();
        positions.push(Position {
            published_at: Some(Instant::parse("2026-01-09T15:00:00Z").unwrap()),
            id: "a_0".into(),
        });
        for pos in positions {
            let mut want: Vec<String> = rows
                .iter()
                .filter(|r| pos.precedes(r))
                .map(|r| r.id.clone())
                .collect();
            want.sort();
            let batches = ctx
                .table("r")
                .await
                .unwrap()
                .filter(pos.precedes_expr())
                .unwrap()
                .select_columns(&["id"])
                .unwrap()
                .collect()
                .await
                .unwrap();
            let mut got: Vec<String> = batches
                .iter()
                .flat_map(|b| {
                    let ids = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
                    (0..b.num_rows())
                        .map(|i| ids.value(i).to_owned())
                        .collect::<Vec<_>>()
                })
                .collect();
            got.sort();
            assert_eq!(got, want, "after {pos:?}");
        }
    }

    #[test]
    fn revision_id_depends_on_content_not_on_commit_time() {
        let a = row("0000000000-26-000001_1", "1", Some("2026-01-09T15:00:00Z"));
        let mut b = a.clone();
        b.committed_at = Some(Instant::parse("2026-03-05T11:20:34Z").unwrap());
        assert_eq!(a.clone().seal().revision_id, b.seal().revision_id);
        let mut c = a.clone();
        c.acceptance_at = Some(Instant::parse("2026-01-09T20:00:00Z").unwrap());
        assert_ne!(a.revision_id, c.seal().revision_id);
    }

    #[test]
    fn rows_survive_an_arrow_round_trip() {
        let mut r = row(
            "0000000000-26-000001_1",
            "1",
            Some("2026-01-09T15:00:00.5Z"),
        );
        r.payload = Some("{\"a\":1}".into());
        let back = from_batch(&to_batch(std::slice::from_ref(&r)).unwrap()).unwrap();
        assert_eq!(back, vec![r]);
    }
}
