//! Reading stored objects back: partitions, hash-checked, and Parquet footers (the identity
//! file reads itself with these, `crate::format::identity::read_identity`).

use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};
use crate::model::manifest::PartitionEntry;
use crate::model::record::{NewsRow, from_batch};
use crate::store::CorpusStore;
use crate::store::hashing::sha256_hex;

/// The key-value metadata of a Parquet file's footer as a lookup: the value of a key, if set.
/// Derived objects (identity files, access sidecars) carry their own facts there.
pub fn footer_value<'a>(
    meta: &'a parquet::file::metadata::ParquetMetaData,
) -> impl Fn(&str) -> Option<String> + 'a {
    let kv = meta.file_metadata().key_value_metadata();
    move |k: &str| {
        kv.and_then(|kv| kv.iter().find(|e| e.key == k))
            .and_then(|e| e.value.clone())
    }
}

/// Fetches an object and checks its sha256 against the manifest.
pub async fn get_checked(store: &CorpusStore, path: &str, sha256: &str) -> Result<Bytes> {
    let bytes = store.get(path).await?;
    let actual = sha256_hex(&bytes);
    if actual != sha256 {
        return Err(Error::integrity(
            path,
            format!("sha256 is {actual}, manifest says {sha256}"),
        ));
    }
    Ok(bytes)
}

/// All rows of one partition, in stored order.
pub async fn read_partition(store: &CorpusStore, p: &PartitionEntry) -> Result<Vec<NewsRow>> {
    let bytes = get_checked(store, &p.path, &p.sha256).await?;
    decode_parquet(&p.path, bytes)
}

pub fn decode_parquet(path: &str, bytes: Bytes) -> Result<Vec<NewsRow>> {
    RowReader::new(path, bytes, 8192)?.collect()
}

/// Rows of a Parquet file of rows, decoded a batch at a time: a partition too big to hold (a
/// golden copy's day) is read as a stream.
pub struct RowReader {
    batches: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    rows: std::vec::IntoIter<NewsRow>,
}

impl RowReader {
    /// Reads `input` (in memory, a file, a range of one) in batches of `batch` rows.
    pub fn new<R: parquet::file::reader::ChunkReader + 'static>(
        path: &str,
        input: R,
        batch: usize,
    ) -> Result<Self> {
        let batches = ParquetRecordBatchReaderBuilder::try_new(input)
            .map_err(|e| Error::integrity(path, format!("not a readable parquet file: {e}")))?
            .with_batch_size(batch)
            .build()?;
        Ok(RowReader {
            batches,
            rows: Vec::new().into_iter(),
        })
    }
}

impl Iterator for RowReader {
    type Item = Result<NewsRow>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.rows.next() {
                return Some(Ok(r));
            }
            let batch = match self.batches.next()? {
                Ok(b) => b,
                Err(e) => return Some(Err(e.into())),
            };
            match from_batch(&batch) {
                Ok(rows) => self.rows = rows.into_iter(),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Partitions up to this size are read into memory whole; bigger ones go through a temporary
/// file, so a publish onto a golden copy's day never holds that day.
const STREAM_ABOVE_BYTES: u64 = 64 << 20;

/// The rows of one partition in stored order (partition order), hash-checked, as a stream.
pub async fn partition_rows(store: &CorpusStore, p: &PartitionEntry) -> Result<RowReader> {
    if p.bytes <= STREAM_ABOVE_BYTES {
        let bytes = get_checked(store, &p.path, &p.sha256).await?;
        return RowReader::new(&p.path, bytes, 8192);
    }
    let file = download_checked(store, &p.path, &p.sha256).await?;
    RowReader::new(&p.path, file, 8192)
}

/// Copies an object to an anonymous temporary file, checking its sha256 on the way.
pub async fn download_checked(
    store: &CorpusStore,
    path: &str,
    sha256: &str,
) -> Result<std::fs::File> {
    use sha2::Digest;
    use std::io::Write;
    let mut file = std::io::BufWriter::with_capacity(1 << 20, tempfile::tempfile()?);
    let mut hasher = sha2::Sha256::new();
    let mut stream = store.get_range(path, None).await?.into_stream();
    while let Some(chunk) = futures::TryStreamExt::try_next(&mut stream).await? {
        hasher.update(&chunk);
        file.write_all(&chunk)?;
    }
    let actual = hex::encode(hasher.finalize());
    if actual != sha256 {
        return Err(Error::integrity(
            path,
            format!("sha256 is {actual}, manifest says {sha256}"),
        ));
    }
    Ok(file.into_inner().map_err(|e| e.into_error())?)
}
