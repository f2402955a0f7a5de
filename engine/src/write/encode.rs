//! Encoding partitions to Parquet: rows checked to arrive in partition order, written a batch
//! at a time with the settings of `crate::format::partition`, and stored at their content
//! address (the inverse of `crate::store::objects`'s decoding).

use parquet::arrow::ArrowWriter;

use crate::error::{Error, Result};
use crate::format::partition::{PAGE_ROWS, writer_properties};
use crate::model::clock::{Day, Instant, Lane, SourceId};
use crate::model::manifest::{Partition, PartitionClocks, PartitionEntry};
use crate::model::record::{NewsRow, partition_order, to_batch};
use crate::store::CorpusStore;

/// Sorts rows by `(published_at, id)` (nulls last; revisions of one id by commit time) and
/// writes them as one content-addressed Parquet object.
pub async fn write_partition(
    store: &CorpusStore,
    source: SourceId,
    lane: Lane,
    day: Day,
    mut rows: Vec<NewsRow>,
) -> Result<PartitionEntry> {
    rows.sort_by(partition_order);
    let encoded = encode_partition(rows.into_iter().map(Ok))?;
    put_partition(store, source, lane, day, encoded).await
}

/// Rows handed to the Parquet writer at a time: a multiple of its 1,024-value mini-batches,
/// at which it decides page boundaries, so a partition's bytes are those of one write of all
/// its rows whatever the batches.
const PARTITION_BATCH: usize = 8 * PAGE_ROWS;

/// A partition encoded to a temporary file, with what its manifest entry says of it.
pub struct EncodedPartition {
    file: crate::store::hashing::HashedFile,
    rows: u64,
    clocks: PartitionClocks,
    commits: Option<Vec<Instant>>,
    available_hours: Option<Vec<Instant>>,
}

/// Encodes rows already in partition order ([`partition_order`], checked) as one partition, a
/// batch at a time into a temporary file: memory holds one batch, not the partition.
pub fn encode_partition(rows: impl Iterator<Item = Result<NewsRow>>) -> Result<EncodedPartition> {
    encode_partition_bounded(rows, crate::store::ROW_GROUP_BYTES)
}

/// [`encode_partition`] closing row groups at `row_group_bytes` (tests use small ones).
fn encode_partition_bounded(
    rows: impl Iterator<Item = Result<NewsRow>>,
    row_group_bytes: usize,
) -> Result<EncodedPartition> {
    let mut writer = ArrowWriter::try_new(
        crate::store::hashing::HashingFile::new()?,
        crate::model::record::schema(),
        Some(writer_properties()),
    )?;
    let mut clocks = PartitionClocks::EMPTY;
    let mut commits = crate::model::manifest::Marks::commits();
    let mut hours = crate::model::manifest::Marks::available_hours();
    let mut batch: Vec<NewsRow> = Vec::with_capacity(PARTITION_BATCH);
    let mut last: Option<NewsRow> = None;
    let mut count = 0u64;
    let mut flush = |batch: &mut Vec<NewsRow>, last: &mut Option<NewsRow>| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let first_ok = last
            .as_ref()
            .is_none_or(|l| partition_order(l, &batch[0]).is_lt());
        if !first_ok
            || batch
                .windows(2)
                .any(|w| !partition_order(&w[0], &w[1]).is_lt())
        {
            return Err(Error::integrity(
                "partition",
                "rows to write are not in partition order (or a revision repeats)",
            ));
        }
        writer.write(&to_batch(batch)?)?;
        // A row group is held encoded in memory until it is closed: close it at a size, so
        // a day of millions of rows (a golden copy's) is written in bounded memory. Cut
        // between batches only, so the bytes still depend on the rows alone.
        if writer.in_progress_size() >= row_group_bytes {
            writer.flush()?;
        }
        *last = batch.pop();
        batch.clear();
        Ok(())
    };
    for row in rows {
        let row = row?;
        clocks.add(&row);
        commits.add(row.committed_at);
        hours.add(row.available_at);
        count += 1;
        batch.push(row);
        if batch.len() >= PARTITION_BATCH {
            flush(&mut batch, &mut last)?;
        }
    }
    flush(&mut batch, &mut last)?;
    let file = writer.into_inner()?.finish()?;
    Ok(EncodedPartition {
        file,
        rows: count,
        clocks,
        commits: commits.listed(),
        available_hours: hours.listed(),
    })
}

/// Stores an encoded partition at its content address; its manifest entry.
pub async fn put_partition(
    store: &CorpusStore,
    source: SourceId,
    lane: Lane,
    day: Day,
    p: EncodedPartition,
) -> Result<PartitionEntry> {
    let f = p.file;
    let path = format!(
        "snapshots/partitions/{source}/{lane}/{day}/{}.parquet",
        f.sha256
    );
    store
        .put_immutable_file(&path, f.file, f.len, &f.sha256)
        .await?;
    Ok(PartitionEntry::new(Partition {
        source_id: source,
        lane,
        date: day,
        path,
        row_count: p.rows,
        bytes: f.len,
        sha256: f.sha256,
        clocks: p.clocks,
        commits: p.commits,
        available_hours: p.available_hours,
    }))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::testkit::edgar;

    #[test]
    fn a_partition_is_written_only_from_rows_in_partition_order() {
        let row = |i: u32| {
            edgar(
                &format!("0000000001-26-{i:06}"),
                "1",
                Some("2026-01-05T09:00:00Z"),
                "2026-01-06T00:00:00Z",
            )
            .seal()
        };
        // More rows than one write batch, so the order is checked across batches too.
        let mut rows: Vec<NewsRow> = (0..20_000).map(row).collect();
        rows.sort_by(partition_order);
        let whole = encode_partition(rows.clone().into_iter().map(Ok)).unwrap();
        assert_eq!(whole.rows, 20_000);
        assert_eq!(whole.clocks, PartitionClocks::from_rows(&rows));
        rows.swap(10_000, 10_001);
        let err = encode_partition(rows.clone().into_iter().map(Ok))
            .err()
            .unwrap();
        assert!(err.to_string().contains("not in partition order"), "{err}");
        rows.swap(10_000, 10_001);
        rows.swap(8_191, 8_192);
        let err = encode_partition(rows.into_iter().map(Ok)).err().unwrap();
        assert!(
            err.to_string().contains("not in partition order"),
            "across batches: {err}"
        );
    }

    #[test]
    fn a_big_partition_is_written_in_row_groups_of_bounded_size_and_reads_back_whole() {
        use std::io::{Read, Seek};
        let mut rows: Vec<NewsRow> = (0..30_000u32)
            .map(|i| {
                let mut r = edgar(
                    &format!("0000000001-26-{i:06}"),
                    "1",
                    Some("2026-01-05T09:00:00Z"),
                    "2026-01-06T00:00:00Z",
                );
                r.payload = Some(format!(
                    r#"{{"n":{i},"pad":"{}"}}"#,
                    "x".repeat(i as usize % 97)
                ));
                r.seal()
            })
            .collect();
        rows.sort_by(partition_order);
        let mut p = encode_partition_bounded(rows.clone().into_iter().map(Ok), 64 << 10).unwrap();
        let mut bytes = Vec::new();
        p.file.file.rewind().unwrap();
        p.file.file.read_to_end(&mut bytes).unwrap();
        let bytes = Bytes::from(bytes);
        let meta = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&bytes)
            .unwrap();
        assert!(
            meta.num_row_groups() > 1,
            "{} row groups",
            meta.num_row_groups()
        );
        assert_eq!(
            crate::store::objects::decode_parquet("p", bytes).unwrap(),
            rows
        );
    }

    #[test]
    fn every_page_of_a_partition_holds_the_1024_rows_of_one_walk_block() {
        use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
        use std::io::{Read, Seek};
        // Payloads of up to 3 KB: 1,024 of them pass the writer's default page byte limit,
        // which must not cut a page inside a block.
        let mut rows: Vec<NewsRow> = (0..20_000u32)
            .map(|i| {
                let mut r = edgar(
                    &format!("0000000001-26-{i:06}"),
                    &(i % 37).to_string(),
                    (i % 11 != 0).then_some("2026-01-05T09:00:00Z"),
                    "2026-01-06T00:00:00Z",
                );
                r.payload = Some(format!(
                    r#"{{"n":{i},"pad":"{}"}}"#,
                    "x".repeat(i as usize * 7 % 3_000)
                ));
                r.seal()
            })
            .collect();
        rows.sort_by(partition_order);
        for group_bytes in [crate::store::ROW_GROUP_BYTES, 64 << 10] {
            let mut p =
                encode_partition_bounded(rows.clone().into_iter().map(Ok), group_bytes).unwrap();
            let mut bytes = Vec::new();
            p.file.file.rewind().unwrap();
            p.file.file.read_to_end(&mut bytes).unwrap();
            let meta = ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Required)
                .parse_and_finish(&Bytes::from(bytes))
                .unwrap();
            let offsets = meta.offset_index().expect("an offset index");
            let groups = meta.row_groups();
            for (g, group) in groups.iter().enumerate() {
                let n = group.num_rows() as usize;
                if g + 1 < groups.len() {
                    assert_eq!(n % PAGE_ROWS, 0, "row group {g} of {n} rows");
                }
                for (c, column) in offsets[g].iter().enumerate() {
                    let firsts: Vec<i64> = column
                        .page_locations()
                        .iter()
                        .map(|l| l.first_row_index)
                        .collect();
                    let want: Vec<i64> = (0..n.div_ceil(PAGE_ROWS))
                        .map(|k| (k * PAGE_ROWS) as i64)
                        .collect();
                    assert_eq!(firsts, want, "row group {g} column {c} ({group_bytes})");
                }
            }
        }
    }
}
