//! The byte layout of an access data file: an Arrow IPC file of 128-row record batches, each
//! compressed with zstd, whose byte offsets the sidecar carries, so that any run of rows is
//! one contiguous byte range: one read from a local disk, one range GET from object storage.
//!
//! Why not Parquet, which the partitions use: a Parquet row group stores each column apart,
//! so a hundred rows of twenty columns are twenty scattered byte ranges, and a reader that
//! coalesces them reads whole column chunks (megabytes from S3 for a one-row page; see
//! BENCHMARKS.md, "A cold page from object storage"). A record batch keeps the columns of its
//! rows next to each other. zstd at level 3 per column buffer makes a file about a third of
//! the uncompressed Parquet it replaces, and decoding a block costs tens of microseconds.
//!
//! `source_id` and `lane` are not stored: every row of a file has its group's (the path says
//! which), and they are restored when a block is decoded. `availability_basis` is stored (the
//! engine does not require it to be constant per lane); a constant column compresses to a few
//! bytes per block.
//!
//! The file is a valid Arrow IPC file (schema, batches, footer): pyarrow, DuckDB's arrow
//! extension or any Arrow reader opens it whole; the service reads it by the sidecar's
//! offsets and never reads its footer.

use std::sync::{Arc, LazyLock};

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::buffer::Buffer;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::ipc::reader::{FileDecoder, FileReader};
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::ipc::{Block, CompressionType, MetadataVersion};
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::model::clock::{Lane, SourceId};
use crate::model::record::{NewsRow, from_batch};
use crate::store::hashing::{HashedFile, HashingFile};

/// Columns of the record schema that an access file does not store (constant per group).
const DROPPED: [&str; 2] = ["source_id", "lane"];

/// The schema of an access data file: the record schema without [`DROPPED`].
pub(crate) fn file_schema() -> SchemaRef {
    static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
        let full = crate::model::record::schema();
        Arc::new(Schema::new(
            full.fields()
                .iter()
                .filter(|f| !DROPPED.contains(&f.name().as_str()))
                .cloned()
                .collect::<Vec<_>>(),
        ))
    });
    SCHEMA.clone()
}

/// Writes blocks to a temporary file, hashed on the way, noting where each begins.
pub(crate) struct BlockWriter {
    writer: FileWriter<HashingFile>,
    /// Byte offset of each block written, then (after `finish`) the end of the last one.
    offsets: Vec<u64>,
}

impl BlockWriter {
    pub(crate) fn new() -> Result<Self> {
        let options =
            IpcWriteOptions::default().try_with_compression(Some(CompressionType::ZSTD))?;
        Ok(BlockWriter {
            writer: FileWriter::try_new_with_options(HashingFile::new()?, &file_schema(), options)?,
            offsets: Vec::new(),
        })
    }

    /// Writes one block: `batch` is in the record schema; its dropped columns are left out.
    /// The writer is unbuffered, so the bytes it has handed the file are where the block
    /// begins.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let schema = file_schema();
        let cols: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .map(|f| {
                batch.column_by_name(f.name()).cloned().ok_or_else(|| {
                    Error::integrity("access block", format!("no column {}", f.name()))
                })
            })
            .collect::<Result<_>>()?;
        self.offsets.push(self.writer.get_ref().written());
        self.writer.write(&RecordBatch::try_new(schema, cols)?)?;
        Ok(())
    }

    /// Writes the footer; returns the file and the block offsets, the end of the last block
    /// appended (so block `k` spans `offsets[k]..offsets[k + 1]`).
    pub(crate) fn finish(mut self) -> Result<(HashedFile, Vec<u64>)> {
        self.offsets.push(self.writer.get_ref().written());
        self.writer.finish()?;
        let file = self.writer.into_inner()?.finish()?;
        Ok((file, self.offsets))
    }
}

/// Bytes `range` of a local file, by one positional read.
pub(crate) fn read_local(file: &std::fs::File, range: std::ops::Range<u64>) -> Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; (range.end - range.start) as usize];
    file.read_exact_at(&mut buf, range.start)?;
    Ok(Bytes::from(buf))
}

/// Restores the dropped columns of a decoded batch and turns it into rows.
fn rows_of(batch: &RecordBatch, source: SourceId, lane: Lane) -> Result<Vec<NewsRow>> {
    let n = batch.num_rows();
    let full = crate::model::record::schema();
    let cols: Vec<ArrayRef> = full
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "source_id" => Ok(Arc::new(StringArray::from(vec![source.as_str(); n])) as ArrayRef),
            "lane" => Ok(Arc::new(StringArray::from(vec![lane.as_str(); n])) as ArrayRef),
            name => batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| Error::integrity("access block", format!("no column {name}"))),
        })
        .collect::<Result<_>>()?;
    from_batch(&RecordBatch::try_new(full, cols)?)
}

/// Decodes the blocks of `span`, the bytes from the start of block `first` of a file to the
/// end of block `first + n - 1`, given the file's block offsets. Each block becomes its rows.
#[cfg(test)]
pub(crate) fn decode_span(
    path: &str,
    span: &Bytes,
    offsets: &[u64],
    blocks: std::ops::Range<usize>,
    group: (SourceId, Lane),
) -> Result<Vec<Vec<NewsRow>>> {
    Ok(decode_parts(path, span, offsets, blocks, group, None)?
        .into_iter()
        .map(|(_, rows)| rows)
        .collect())
}

/// Decodes the blocks of a span as `decode_span` does, turning into rows only `parts[i]` (a range of rows inside the block)
/// of the `i`-th block, when given: a small filer's run is a few rows of a block, and making
/// rows of all 128 cost most of a cold page. Each block comes with its number of rows.
pub(crate) fn decode_parts(
    path: &str,
    span: &Bytes,
    offsets: &[u64],
    blocks: std::ops::Range<usize>,
    (source, lane): (SourceId, Lane),
    parts: Option<&[std::ops::Range<usize>]>,
) -> Result<Vec<(usize, Vec<NewsRow>)>> {
    let bad = |what: String| Error::integrity(path, what);
    let first = blocks.start;
    let base = offsets[blocks.start];
    let decoder = FileDecoder::new(file_schema(), MetadataVersion::V5);
    let mut out = Vec::with_capacity(blocks.len());
    for k in blocks {
        let (lo, hi) = (offsets[k] - base, offsets[k + 1] - base);
        let bytes = span
            .get(lo as usize..hi as usize)
            .ok_or_else(|| bad(format!("block {k} lies outside the bytes read")))?;
        // A message: 0xFFFFFFFF, the metadata length, the metadata, then the body.
        let meta_len = match bytes.get(..8) {
            Some([0xff, 0xff, 0xff, 0xff, a, b, c, d]) => {
                8 + i64::from(i32::from_le_bytes([*a, *b, *c, *d]))
            }
            _ => return Err(bad(format!("block {k} does not begin a message"))),
        };
        let body = (hi - lo) as i64 - meta_len;
        if body < 0 {
            return Err(bad(format!("block {k} is shorter than its metadata")));
        }
        let block = Block::new(offsets[k] as i64, meta_len as i32, body);
        let batch = decoder
            .read_record_batch(&block, &Buffer::from(span.slice(lo as usize..hi as usize)))?
            .ok_or_else(|| bad(format!("block {k} holds no record batch")))?;
        let n = batch.num_rows();
        let rows = match parts.map(|p| p[k - first].clone()) {
            Some(r) if r.end <= n => rows_of(&batch.slice(r.start, r.len()), source, lane)?,
            Some(r) => return Err(bad(format!("rows {r:?} of block {k}, which holds {n}"))),
            None => rows_of(&batch, source, lane)?,
        };
        out.push((n, rows));
    }
    Ok(out)
}

/// Hands `f` the rows of each block of a whole access data file (read through its own
/// footer), one block at a time: delta files merged into one may hold a quarter of an era.
pub(crate) fn for_each_block(
    path: &str,
    file: impl std::io::Read + std::io::Seek,
    group: (SourceId, Lane),
    mut f: impl FnMut(Vec<NewsRow>) -> Result<()>,
) -> Result<()> {
    use std::io::Seek;
    let mut file = std::io::BufReader::new(file);
    file.rewind()?;
    let reader = FileReader::try_new(file, None)?;
    if reader.schema() != file_schema() {
        return Err(Error::integrity(path, "not the schema of an access file"));
    }
    for batch in reader {
        f(rows_of(&batch?, group.0, group.1)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::to_batch;
    use crate::testkit::edgar;

    fn rows(n: usize) -> Vec<NewsRow> {
        (0..n)
            .map(|i| {
                edgar(
                    &format!("0000000001-25-{i:06}"),
                    "320193",
                    Some("2025-01-02T15:00:00Z"),
                    "2025-01-03T00:00:00Z",
                )
            })
            .collect()
    }

    fn written(blocks: &[Vec<NewsRow>]) -> (Bytes, Vec<u64>) {
        let mut w = BlockWriter::new().unwrap();
        for b in blocks {
            w.write(&to_batch(b).unwrap()).unwrap();
        }
        let (file, offsets) = w.finish().unwrap();
        let mut f = file.file;
        use std::io::{Read, Seek};
        f.rewind().unwrap();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len() as u64, file.len);
        (Bytes::from(bytes), offsets)
    }

    #[test]
    fn any_run_of_blocks_decodes_from_its_own_bytes_with_the_dropped_columns_restored() {
        let all = rows(300);
        let blocks: Vec<Vec<NewsRow>> = all.chunks(128).map(<[NewsRow]>::to_vec).collect();
        let (file, offsets) = written(&blocks);
        assert_eq!(offsets.len(), 4, "three blocks and the end");
        let group = (SourceId::SecEdgar, Lane::CertifiedPit);
        for (from, to) in [(0, 1), (1, 3), (0, 3), (2, 3)] {
            let span = file.slice(offsets[from] as usize..offsets[to] as usize);
            let got = decode_span("t", &span, &offsets, from..to, group).unwrap();
            assert_eq!(got, blocks[from..to].to_vec(), "blocks {from}..{to}");
        }
        // The file is a whole Arrow IPC file too.
        let mut whole = Vec::new();
        for_each_block("t", std::io::Cursor::new(file.clone()), group, |rows| {
            whole.push(rows);
            Ok(())
        })
        .unwrap();
        assert_eq!(whole, blocks);
        // Bytes that are not the block's are refused, not misread.
        let shifted = file.slice(offsets[1] as usize + 8..offsets[2] as usize + 8);
        assert!(decode_span("t", &shifted, &offsets, 1..2, group).is_err());
    }

    #[test]
    fn blocks_are_compressed_well_below_their_rows_as_plain_arrow() {
        let all = rows(1280);
        let blocks: Vec<Vec<NewsRow>> = all.chunks(128).map(<[NewsRow]>::to_vec).collect();
        let (file, _) = written(&blocks);
        let plain: usize = blocks
            .iter()
            .map(|b| to_batch(b).unwrap().get_array_memory_size())
            .sum();
        assert!(
            file.len() * 3 < plain,
            "{} bytes on disk for {plain} in memory",
            file.len()
        );
    }
}
