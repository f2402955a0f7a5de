//! Late rows: the few rows of a partition committed (or first seen) long after the rest of it,
//! kept a second time per source-lane, so that a window on `committed_at` or `available_at`
//! finds them without reading the partitions they live in.
//!
//! Why: a row lives in the partition of its publication day, sorted there by
//! `(published_at, id)`. A correction committed a month after its day sits in that day's
//! partition, so the first page of a 30-day `committed_at` window holds the corrections of
//! the 30 days before it, one or two in each of those days' partitions, and the walk read 30
//! partitions for one page (70 ms at 20M rows; BENCHMARKS.md, "The general path"). The
//! manifest lists each partition's commit instants (`commits`) and `available_at` hours
//! (`available_hours`); a *late mark* is one of them that holds few of the partition's rows
//! ([`is_late`]). Every row of a late mark is copied into its source-lane's late object, with
//! a flag per clock. The walk counts only a partition's other marks when it decides whether to
//! read the partition ([`LateLane::walks`]), and takes the rows the window holds of the
//! partitions it does not read from here, merged into the page in answer order.
//!
//! The invariant the walk relies on: for every partition of a source-lane, each row whose
//! commit (or hour) is a late mark of that partition is in the object, flagged for that
//! clock, and no other row is flagged. Lateness is decided per mark from the partition's rows
//! alone ([`Finder`]), so it is exact and `asof verify` recomputes it. A partition whose entry
//! does not list its marks (too many) has no late mark: the walk reads it as before.
//!
//! The object is an Arrow IPC file (zstd): the record columns, the path of the row's
//! partition, and the two flags. It is small (one row in a thousand of the bench corpora) and
//! loaded whole with the version; a version whose late object is unchanged takes over the
//! previous one's.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, SchemaRef};
use arrow::ipc::CompressionType;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::model::clock::{Instant, Lane, SourceId};
use crate::model::manifest::{COMMITS_LISTED, HOURS_LISTED, Manifest, ObjectEntry, hour_of};
use crate::model::record::{NewsRow, from_batch, partition_order, to_batch};

/// The kind of a late object in `manifest.access`.
pub const KIND_LATE: &str = "walk.late/1";
/// The most rows a late mark may hold: a mark with more is worth reading its partition for.
pub const LATE_MAX: usize = 1024;

/// The folder of one source-lane's late object.
pub fn late_dir(source: SourceId, lane: Lane) -> String {
    format!("snapshots/late/{source}/{lane}/")
}

/// Whether a mark holding `count` of a partition's `rows` is late: never the mark holding the
/// most rows, at most [`LATE_MAX`] rows, and a sliver of the partition (a 64th) or a handful.
pub fn is_late(count: usize, rows: usize, dominant: bool) -> bool {
    !dominant && count <= LATE_MAX && (count * 64 <= rows || count <= 4)
}

/// A row of a late object: the row, and on which clocks its mark is late.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateRow {
    pub row: NewsRow,
    pub on_committed: bool,
    pub on_available: bool,
}

/// The marks of one clock of a partition and, for each, its rows while they are few.
#[derive(Debug)]
struct Tally {
    cap: usize,
    overflow: bool,
    marks: BTreeMap<Instant, (usize, Vec<NewsRow>)>,
}

impl Tally {
    fn new(cap: usize) -> Self {
        Tally {
            cap,
            overflow: false,
            marks: BTreeMap::new(),
        }
    }

    fn add(&mut self, mark: Option<Instant>, row: &NewsRow) {
        let Some(m) = mark.filter(|_| !self.overflow) else {
            return;
        };
        // The manifest lists at most `cap` marks (`crate::model::manifest::Marks`); past that it
        // lists none, and no mark can be told apart.
        if !self.marks.contains_key(&m) && self.marks.len() == self.cap {
            self.overflow = true;
            self.marks.clear();
            return;
        }
        let (count, rows) = self.marks.entry(m).or_default();
        *count += 1;
        if *count <= LATE_MAX {
            rows.push(row.clone());
        } else if !rows.is_empty() {
            *rows = Vec::new();
        }
    }

    /// The late marks and their rows.
    fn late(self, n: usize) -> Vec<(Instant, Vec<NewsRow>)> {
        if self.overflow {
            return Vec::new();
        }
        // The dominant mark: the most rows, the earliest on a tie.
        let dominant = self
            .marks
            .iter()
            .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(a.0)))
            .map(|(m, _)| *m);
        self.marks
            .into_iter()
            .filter(|(m, (count, _))| is_late(*count, n, Some(*m) == dominant))
            .map(|(m, (_, rows))| (m, rows))
            .collect()
    }
}

/// Finds the late rows of one partition, fed its rows one at a time (a golden copy's day is
/// streamed): it keeps copies of at most [`LATE_MAX`] rows per listed mark.
#[derive(Debug)]
pub struct Finder {
    rows: usize,
    commits: Tally,
    hours: Tally,
}

impl Default for Finder {
    fn default() -> Self {
        Finder {
            rows: 0,
            commits: Tally::new(COMMITS_LISTED),
            hours: Tally::new(HOURS_LISTED),
        }
    }
}

impl Finder {
    pub fn add(&mut self, row: &NewsRow) {
        self.rows += 1;
        self.commits.add(row.committed_at, row);
        self.hours.add(row.available_at.map(hour_of), row);
    }

    /// The partition's late rows, in partition order.
    pub fn finish(self) -> Vec<LateRow> {
        let n = self.rows;
        let mut by_revision: BTreeMap<(String, String), LateRow> = BTreeMap::new();
        for (_, rows) in self.commits.late(n) {
            for row in rows {
                let key = (row.id.clone(), row.revision_id.clone());
                by_revision.insert(
                    key,
                    LateRow {
                        row,
                        on_committed: true,
                        on_available: false,
                    },
                );
            }
        }
        for (_, rows) in self.hours.late(n) {
            for row in rows {
                let key = (row.id.clone(), row.revision_id.clone());
                by_revision
                    .entry(key)
                    .or_insert(LateRow {
                        row,
                        on_committed: false,
                        on_available: false,
                    })
                    .on_available = true;
            }
        }
        let mut out: Vec<LateRow> = by_revision.into_values().collect();
        out.sort_by(|a, b| partition_order(&a.row, &b.row));
        out
    }

    /// The late rows of `rows` (one partition's).
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a NewsRow>) -> Vec<LateRow> {
        let mut f = Finder::default();
        for r in rows {
            f.add(r);
        }
        f.finish()
    }
}

const PARTITION: &str = "partition";
const ON_COMMITTED: &str = "late_on_committed_at";
const ON_AVAILABLE: &str = "late_on_available_at";

fn file_schema() -> SchemaRef {
    crate::model::record::schema_with([
        Field::new(PARTITION, DataType::Utf8, false),
        Field::new(ON_COMMITTED, DataType::Boolean, false),
        Field::new(ON_AVAILABLE, DataType::Boolean, false),
    ])
}

/// The bytes of a late object: `rows` (partition path, row), in the order given.
pub fn encode(rows: &[(String, LateRow)]) -> Result<Bytes> {
    let schema = file_schema();
    let options = IpcWriteOptions::default().try_with_compression(Some(CompressionType::ZSTD))?;
    let mut w = FileWriter::try_new_with_options(Vec::new(), &schema, options)?;
    for chunk in rows.chunks(8192) {
        let records: Vec<NewsRow> = chunk.iter().map(|(_, l)| l.row.clone()).collect();
        let mut cols: Vec<ArrayRef> = to_batch(&records)?.columns().to_vec();
        cols.push(Arc::new(StringArray::from_iter_values(
            chunk.iter().map(|(p, _)| p.as_str()),
        )));
        cols.push(Arc::new(BooleanArray::from_iter(
            chunk.iter().map(|(_, l)| Some(l.on_committed)),
        )));
        cols.push(Arc::new(BooleanArray::from_iter(
            chunk.iter().map(|(_, l)| Some(l.on_available)),
        )));
        w.write(&RecordBatch::try_new(schema.clone(), cols)?)?;
    }
    w.finish()?;
    Ok(Bytes::from(w.into_inner()?))
}

/// The rows of a late object's bytes.
pub fn decode(path: &str, bytes: Bytes) -> Result<Vec<(String, LateRow)>> {
    let bad = |what: &str| Error::integrity(path, format!("late object: {what}"));
    let reader = FileReader::try_new(Cursor::new(bytes), None)?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch?;
        let rows = from_batch(&batch)?;
        let parts = batch
            .column_by_name(PARTITION)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| bad("no partition column"))?;
        let flag = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
                .cloned()
                .ok_or_else(|| bad("a flag column is missing"))
        };
        let (c, a) = (flag(ON_COMMITTED)?, flag(ON_AVAILABLE)?);
        for (i, row) in rows.into_iter().enumerate() {
            if parts.is_null(i) || c.is_null(i) || a.is_null(i) {
                return Err(bad("a null partition or flag"));
            }
            out.push((
                parts.value(i).to_owned(),
                LateRow {
                    row,
                    on_committed: c.value(i),
                    on_available: a.value(i),
                },
            ));
        }
    }
    Ok(out)
}

/// The late object of a source-lane listed in `manifest`, if any.
pub fn entry_of(manifest: &Manifest, source: SourceId, lane: Lane) -> Option<&ObjectEntry> {
    let dir = late_dir(source, lane);
    manifest
        .access
        .iter()
        .find(|e| e.kind == KIND_LATE && e.path.starts_with(&dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::hashing::sha256_hex;
    use crate::testkit::{corpus, edgar, january, t};
    use crate::write::publish::{ChangeSet, publish};

    /// `n` rows of Jan 5 committed the next morning, and `late` more committed on Jan 20.
    fn day(n: usize, late: usize) -> Vec<NewsRow> {
        (0..n + late)
            .map(|i| {
                let committed = if i < n {
                    "2026-01-06T01:00:00Z"
                } else {
                    "2026-01-20T01:00:00Z"
                };
                edgar(
                    &format!("0000000001-26-{i:06}"),
                    "1",
                    Some("2026-01-05T10:00:00Z"),
                    committed,
                )
                .seal()
            })
            .collect()
    }

    #[test]
    fn a_mark_holding_a_sliver_of_its_partition_is_late_and_the_main_one_never() {
        let late = Finder::of(&day(640, 3));
        assert_eq!(late.len(), 3);
        assert!(late.iter().all(|l| l.on_committed && !l.on_available));
        assert!(
            late.iter()
                .all(|l| l.row.committed_at == Some(t("2026-01-20T01:00:00Z")))
        );
        // A mark of a tenth of the rows is read with its partition.
        assert!(Finder::of(&day(640, 64)).is_empty());
        // Two marks of equal size: the earlier is the partition's own.
        let even = Finder::of(&day(3, 3));
        assert_eq!(even.len(), 3);
        assert!(
            even.iter()
                .all(|l| l.row.committed_at == Some(t("2026-01-20T01:00:00Z")))
        );
        // One mark: nothing is late.
        assert!(Finder::of(&day(5, 0)).is_empty());
    }

    #[test]
    fn a_partition_with_more_marks_than_its_entry_lists_has_no_late_row() {
        let rows: Vec<NewsRow> = (0..200)
            .map(|i| {
                let committed = if i < 180 {
                    "2026-01-06T01:00:00Z".to_owned()
                } else {
                    format!("2026-01-2{}T01:00:{:02}Z", i % 2, i - 180)
                };
                edgar(
                    &format!("0000000001-26-{i:06}"),
                    "1",
                    Some("2026-01-05T10:00:00Z"),
                    &committed,
                )
            })
            .collect();
        assert!(Finder::of(&rows[..180 + COMMITS_LISTED - 1]).len() == COMMITS_LISTED - 1);
        assert!(Finder::of(&rows).is_empty(), "21 commits are not listed");
    }

    #[test]
    fn a_late_hour_is_flagged_on_available_at_beside_its_commit() {
        let mut rows = day(100, 1);
        for r in &mut rows {
            r.available_at = r.committed_at;
        }
        let late = Finder::of(&rows);
        assert_eq!(late.len(), 1);
        assert!(late[0].on_committed && late[0].on_available);
    }

    #[test]
    fn a_late_object_reads_back_the_rows_and_flags_written() {
        let rows: Vec<(String, LateRow)> = Finder::of(&day(640, 3))
            .into_iter()
            .map(|l| ("snapshots/partitions/x.parquet".to_owned(), l))
            .collect();
        let bytes = encode(&rows).unwrap();
        assert_eq!(decode("x", bytes).unwrap(), rows);
        assert!(decode("x", Bytes::from_static(b"not arrow")).is_err());
    }

    #[tokio::test]
    async fn publish_keeps_each_source_lanes_late_rows_and_verify_holds_them_to_the_partitions() {
        let (_dir, store, _) = corpus(day(640, 0), january()).await;
        let (v1, m1) = store.current().await.unwrap();
        let first = entry_of(&m1, SourceId::SecEdgar, Lane::CertifiedPit)
            .cloned()
            .expect("a late object, empty");
        assert_eq!(first.row_count, 0);
        // Three corrections committed on Jan 20: late rows of Jan 5.
        let fixes: Vec<NewsRow> = day(640, 0)
            .into_iter()
            .take(3)
            .map(|mut r| {
                r.title = "corrected".into();
                r.committed_at = Some(t("2026-01-20T01:00:00Z"));
                r
            })
            .collect();
        publish(
            &store,
            ChangeSet {
                rows: fixes,
                ..Default::default()
            },
            t("2026-03-02T00:00:00Z"),
        )
        .await
        .unwrap();
        let (v2, m2) = store.current().await.unwrap();
        assert_ne!(v1, v2);
        let second = entry_of(&m2, SourceId::SecEdgar, Lane::CertifiedPit).unwrap();
        assert_eq!(second.row_count, 3);
        crate::verify::verify(&store, None).await.unwrap();
        // A late object that drops a row is refused by name.
        let bytes = crate::store::objects::get_checked(&store, &second.path, &second.sha256)
            .await
            .unwrap();
        let mut rows = decode(&second.path, bytes).unwrap();
        rows.pop();
        let short = encode(&rows).unwrap();
        let sha = sha256_hex(&short);
        let mut forged = m2.clone();
        let e = forged
            .access
            .iter_mut()
            .find(|e| e.kind == KIND_LATE)
            .unwrap();
        *e = ObjectEntry {
            kind: KIND_LATE.into(),
            path: format!(
                "{}{sha}.arrow",
                late_dir(SourceId::SecEdgar, Lane::CertifiedPit)
            ),
            bytes: short.len() as u64,
            sha256: sha,
            row_count: 2,
        };
        store.put_immutable(&e.path.clone(), short).await.unwrap();
        let forged_version = store.put_manifest(&forged).await.unwrap();
        let err = crate::verify::verify(&store, Some(&forged_version))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("late rows of"), "{err}");
    }
}
