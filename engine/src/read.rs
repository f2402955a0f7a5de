//! Reading stored objects back: partitions (hash-checked) and the identity file.

use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};
use crate::identity::IdentityFile;
use crate::manifest::{ObjectEntry, PartitionEntry};
use crate::record::{NewsRow, from_batch};
use crate::store::{CorpusStore, sha256_hex};

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
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| Error::integrity(path, format!("not a readable parquet file: {e}")))?
        .build()?;
    let mut rows = Vec::new();
    for batch in reader {
        rows.extend(from_batch(&batch?)?);
    }
    Ok(rows)
}

pub async fn read_identity(store: &CorpusStore, e: &ObjectEntry) -> Result<IdentityFile> {
    let bytes = get_checked(store, &e.path, &e.sha256).await?;
    IdentityFile::from_parquet(&e.path, bytes)
}
