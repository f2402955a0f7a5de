//! The rule tables as bytes: what another engine needs, beside a source-lane's record table,
//! to answer a cut the way the service does (the two tables, their kinds, paths and schemas,
//! their encoding and reading back). Derived at publish (`crate::rule::tables`), listed in the
//! manifest (`access`, kinds [`KIND_SUPERSESSIONS`] and [`KIND_COVERAGE`]), Delta tables like
//! the record tables (`crate::format::delta`) and checked by `asof verify`:
//!
//! - `supersessions`: one row per (superseded revision, superseding revision), with the
//!   superseding revision's `committed_at` (`superseded_at`): the table `Cut::plan` anti-joins.
//! - `coverage`: one row per day of the source-lane's certified span, the certificate
//!   `/v1/coverage` answers for it (`certificate_of`, the same rule) plus whether every row of
//!   the day carries `available_at` (a cut on that clock misses the day as
//!   `availability.<source>/<day>` otherwise).
//!
//! The identity intervals (ticker ↔ CIK, as `/v1/mapping`) are the identity object itself,
//! already a Parquet table of intervals listed in the manifest (`crate::format::identity`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;

use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::model::clock::{Day, Instant, Lane, SourceId};
use crate::model::coverage::{DayTable, certificate_of};
use crate::model::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::store::CorpusStore;

/// The kind of a supersessions table in the manifest's `access` list.
pub const KIND_SUPERSESSIONS: &str = "rule.supersessions/2";
/// The kind of a supersessions table written before it named where each superseded revision
/// is stored: still read (its version's tables are replaced whole at the next publish), never
/// written, and not exported ([`crate::rule::sql::views_of`] refuses it, naming the fix).
pub const KIND_SUPERSESSIONS_UNPLACED: &str = "rule.supersessions/1";
/// The kind of a coverage table.
pub const KIND_COVERAGE: &str = "rule.coverage/1";

/// The two tables of a source-lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleTable {
    Supersessions,
    Coverage,
}

impl RuleTable {
    pub const ALL: [RuleTable; 2] = [RuleTable::Supersessions, RuleTable::Coverage];

    pub fn name(self) -> &'static str {
        match self {
            RuleTable::Supersessions => "supersessions",
            RuleTable::Coverage => "coverage",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            RuleTable::Supersessions => KIND_SUPERSESSIONS,
            RuleTable::Coverage => KIND_COVERAGE,
        }
    }

    /// Whether a manifest entry's kind is this table's: its current kind, or (supersessions)
    /// the kind written before the tables placed revisions.
    pub fn is_kind(self, kind: &str) -> bool {
        kind == self.kind()
            || (self == RuleTable::Supersessions && kind == KIND_SUPERSESSIONS_UNPLACED)
    }

    pub fn schema(self) -> SchemaRef {
        match self {
            RuleTable::Supersessions => supersessions_schema(),
            RuleTable::Coverage => coverage_schema(),
        }
    }
}

/// Where a source-lane's table of one kind lives: `snapshots/rule/<source>/<lane>/<table>/`,
/// each version's file named by its sha256.
pub fn table_dir(source: SourceId, lane: Lane, table: RuleTable) -> String {
    format!("snapshots/rule/{source}/{lane}/{}", table.name())
}

/// The manifest's entry of a source-lane's table, if the version has one.
pub fn entry(m: &Manifest, source: SourceId, lane: Lane, table: RuleTable) -> Option<&ObjectEntry> {
    m.access
        .iter()
        .find(|e| lane_of(e) == Some((source, lane, table)))
}

/// The source-lane a rule table's entry belongs to.
pub fn lane_of(e: &ObjectEntry) -> Option<(SourceId, Lane, RuleTable)> {
    let table = RuleTable::ALL.into_iter().find(|t| t.is_kind(&e.kind))?;
    let rest = e.path.strip_prefix("snapshots/rule/")?;
    let mut parts = rest.split('/');
    let (s, l) = (parts.next()?, parts.next()?);
    let source = *SourceId::ALL.iter().find(|x| x.as_str() == s)?;
    let lane = *Lane::ALL.iter().find(|x| x.as_str() == l)?;
    (parts.next()? == table.name()).then_some((source, lane, table))
}

/// The source-lanes a manifest has rule tables for: every one with partitions or a span.
pub fn lanes(m: &Manifest) -> BTreeSet<(SourceId, Lane)> {
    m.partitions
        .iter()
        .map(|p| (p.source_id, p.lane))
        .chain(m.spans.iter().map(|s| (s.source_id, s.lane)))
        .collect()
}

/// `id`, `revision_id` (superseded), `superseded_by`, `superseded_at` (the superseding
/// revision's `committed_at`), and where the version stores the superseded revision:
/// `superseded_file` (its partition's file name) and `superseded_row` (its row there, from
/// 0), both null when the source-lane holds no such revision.
pub fn supersessions_schema() -> SchemaRef {
    let mut fields = unplaced_fields();
    fields.push(Field::new(
        crate::model::cut::SUPERSEDED_FILE,
        DataType::Utf8,
        true,
    ));
    fields.push(Field::new(
        crate::model::cut::SUPERSEDED_ROW,
        DataType::Int64,
        true,
    ));
    Arc::new(Schema::new(fields))
}

/// The columns of a table of kind [`KIND_SUPERSESSIONS_UNPLACED`] (the first four).
pub(crate) fn unplaced_fields() -> Vec<Field> {
    vec![
        Field::new("id", DataType::Utf8, false),
        Field::new(crate::model::cut::SUPERSEDED, DataType::Utf8, false),
        Field::new("superseded_by", DataType::Utf8, false),
        Field::new(
            crate::model::cut::SUPERSEDED_AT,
            crate::model::record::ts_type(),
            false,
        ),
    ]
}

/// Where a version stores a revision: its partition's file name (`<sha256>.parquet`, unique
/// in the version, as Spark's `_metadata.file_name` names it) and its row index there, from 0
/// (Spark's `_metadata.row_index`, DuckDB's `file_row_number`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub file: String,
    pub row: i64,
}

/// Superseded revision id → where the version stores it. A revision the source-lane does not
/// hold has no entry.
pub type Positions = BTreeMap<String, Position>;

/// A supersessions table as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Supersessions {
    pub rows: BTreeSet<Superseding>,
    pub positions: Positions,
    /// Whether the table places revisions (false for [`KIND_SUPERSESSIONS_UNPLACED`]).
    pub placed: bool,
}

/// The file name of a partition path: what Spark's `_metadata.file_name` gives for its rows.
pub fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

/// A certificate of `/v1/coverage` per day, and whether a cut on `available_at` can use it.
pub fn coverage_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("source_id", DataType::Utf8, false),
        Field::new("lane", DataType::Utf8, false),
        Field::new("date", DataType::Date32, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("row_count", DataType::Int64, true),
        Field::new("rows_held", DataType::Int64, false),
        Field::new("certified_at", crate::model::record::ts_type(), true),
        Field::new("partition_path", DataType::Utf8, true),
        Field::new("partition_sha256", DataType::Utf8, true),
        Field::new("evidence", DataType::Utf8, false),
        Field::new("available_at_complete", DataType::Boolean, false),
        Field::new("availability_key", DataType::Utf8, false),
    ]))
}

/// One Parquet object of one batch: snappy, no dictionaries, a fixed `created_by`, so the
/// same rows are the same bytes (and the same content address) in every run.
pub(crate) fn encode(batch: &RecordBatch) -> Result<Vec<u8>> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .set_created_by("asof".into())
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props))?;
    w.write(batch)?;
    w.close()?;
    Ok(buf)
}

/// The supersessions table's bytes: rows sorted, so the bytes depend on the set (and the
/// places of its superseded revisions) alone.
pub fn encode_supersessions(
    rows: &BTreeSet<Superseding>,
    positions: &Positions,
) -> Result<Vec<u8>> {
    let col = |f: fn(&Superseding) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let place = |r: &Superseding| positions.get(&r.supersedes);
    let batch = RecordBatch::try_new(
        supersessions_schema(),
        vec![
            col(|r| &r.id),
            col(|r| &r.supersedes),
            col(|r| &r.revision_id),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|r| r.committed_at.micros()),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| place(r).map(|p| p.file.as_str())),
            )),
            Arc::new(Int64Array::from_iter(
                rows.iter().map(|r| place(r).map(|p| p.row)),
            )),
        ],
    )?;
    encode(&batch)
}

/// A stored supersessions table: of kind [`KIND_SUPERSESSIONS`], or the unplaced kind before
/// it (`placed` false, no positions).
pub fn decode_supersessions(path: &str, bytes: Bytes) -> Result<Supersessions> {
    let bad = |why: String| Error::integrity(path, why);
    let mut out = Supersessions {
        placed: true,
        ..Default::default()
    };
    let unplaced = Schema::new(unplaced_fields());
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| bad(format!("not parquet: {e}")))?
        .build()?;
    for batch in reader {
        let b = batch?;
        if b.schema() != supersessions_schema() {
            if *b.schema() != unplaced {
                return Err(bad(format!("not a supersessions table: {}", b.schema())));
            }
            out.placed = false;
        }
        let s = |i: usize| b.column(i).as_any().downcast_ref::<StringArray>();
        let (Some(id), Some(rev), Some(by)) = (s(0), s(1), s(2)) else {
            return Err(bad("column types".into()));
        };
        let at = b
            .column(3)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .ok_or_else(|| bad("superseded_at".into()))?;
        let places = out
            .placed
            .then(|| {
                let file = b.column(4).as_any().downcast_ref::<StringArray>()?;
                let row = b.column(5).as_any().downcast_ref::<Int64Array>()?;
                Some((file, row))
            })
            .map(|p| p.ok_or_else(|| bad("superseded_file, superseded_row".into())))
            .transpose()?;
        for i in 0..b.num_rows() {
            if let Some((file, row)) = places
                && file.is_valid(i)
            {
                if !row.is_valid(i) {
                    return Err(bad(format!("{} has a file but no row", rev.value(i))));
                }
                let place = Position {
                    file: file.value(i).to_owned(),
                    row: row.value(i),
                };
                if let Some(other) = out.positions.insert(rev.value(i).to_owned(), place.clone())
                    && other != place
                {
                    return Err(bad(format!("{} is placed twice", rev.value(i))));
                }
            }
            out.rows.insert(Superseding {
                id: id.value(i).to_owned(),
                supersedes: rev.value(i).to_owned(),
                revision_id: by.value(i).to_owned(),
                committed_at: Instant::from_micros(at.value(i)),
            });
        }
    }
    Ok(out)
}

/// The coverage table's bytes of one source-lane of `m` (`None` without a certified span):
/// every day of the span, its certificate as `/v1/coverage` answers it for the latest cut.
pub fn encode_coverage(m: &Manifest, source: SourceId, lane: Lane) -> Result<Option<Vec<u8>>> {
    let Some(span) = m.span(source, lane) else {
        return Ok(None);
    };
    let table = DayTable::build(m, source, lane);
    let parts: HashMap<Day, &PartitionEntry> = m
        .lane_partitions(source, lane)
        .map(|p| (p.date, p))
        .collect();
    let n = (span.last.days() - span.first.days() + 1) as usize;
    let mut key = Vec::with_capacity(n);
    let mut date = Vec::with_capacity(n);
    let mut status = Vec::with_capacity(n);
    let mut row_count = Vec::with_capacity(n);
    let mut rows_held = Vec::with_capacity(n);
    let mut certified_at = Vec::with_capacity(n);
    let mut path = Vec::with_capacity(n);
    let mut sha = Vec::with_capacity(n);
    let mut evidence = Vec::with_capacity(n);
    let mut available = Vec::with_capacity(n);
    let mut availability_key = Vec::with_capacity(n);
    let mut day = span.first;
    while day <= span.last {
        let part = parts.get(&day).copied();
        let c = certificate_of(m, table.as_ref(), (source, lane, day), part, None);
        key.push(c.key);
        date.push(day.days());
        status.push(c.status);
        row_count.push(c.row_count.map(|n| n as i64));
        rows_held.push(c.rows_held as i64);
        certified_at.push(c.certified_at.map(Instant::micros));
        path.push(c.partition.as_ref().map(|p| p.path.clone()));
        sha.push(c.partition.as_ref().map(|p| p.sha256.clone()));
        evidence.push(serde_json::to_string(&c.evidence)?);
        available.push(part.is_none_or(|p| p.clocks.available_at.nulls == 0));
        availability_key.push(format!("availability.{source}/{day}"));
        day = day.next();
    }
    let constant = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v; n])) };
    let batch = RecordBatch::try_new(
        coverage_schema(),
        vec![
            Arc::new(StringArray::from(key)),
            constant(source.as_str()),
            constant(lane.as_str()),
            Arc::new(Date32Array::from(date)),
            Arc::new(StringArray::from(status)),
            Arc::new(Int64Array::from(row_count)),
            Arc::new(Int64Array::from(rows_held)),
            Arc::new(TimestampMicrosecondArray::from(certified_at).with_timezone("UTC")),
            Arc::new(StringArray::from(path)),
            Arc::new(StringArray::from(sha)),
            Arc::new(StringArray::from(evidence)),
            Arc::new(BooleanArray::from(available)),
            Arc::new(StringArray::from(availability_key)),
        ],
    )?;
    Ok(Some(encode(&batch)?))
}

/// The supersessions of a version's source-lane as a loaded map would hold them, read from
/// its table (for the SQL and the tests).
pub async fn read_supersessions(
    store: &CorpusStore,
    e: &ObjectEntry,
) -> Result<BTreeSet<Superseding>> {
    Ok(read_table(store, e).await?.rows)
}

/// A version's supersessions table as stored, with its places.
pub async fn read_table(store: &CorpusStore, e: &ObjectEntry) -> Result<Supersessions> {
    let bytes = crate::store::objects::get_checked(store, &e.path, &e.sha256).await?;
    decode_supersessions(&e.path, bytes)
}

/// One row of a partition that supersedes a revision.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Superseding {
    /// The superseded revision.
    pub supersedes: String,
    /// The superseding revision and its record id.
    pub revision_id: String,
    pub id: String,
    /// The superseding revision's commit (every stored row has one: publish refuses rows
    /// without).
    pub committed_at: Instant,
}
