//! Byte ranges of a stored partition for Parquet's async reader: its size taken from the
//! manifest (no request asks for it), several ranges at once coalesced by the store into fewer
//! requests. The walk, record lookups and the supersession readers read partitions through it.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::model::manifest::PartitionEntry;
use crate::store::CorpusStore;

/// A reader of one partition's byte ranges (its size from the manifest, so no request asks
/// for it), for Parquet readers here and in `supersessions.rs`.
pub(crate) fn reader(store: &CorpusStore, entry: &PartitionEntry) -> Ranges {
    Ranges {
        store: store.object_store(),
        path: Path::from(entry.path.as_str()),
        size: entry.bytes,
    }
}

/// Byte ranges of one partition object for the Parquet reader (several at once coalesced by
/// the store into fewer requests).
pub(crate) struct Ranges {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for Ranges {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_metadata<'b>(
        &'b mut self,
        options: Option<&'b ArrowReaderOptions>,
    ) -> BoxFuture<'b, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            // One read takes the footer and page index of a small partition whole.
            let mut reader = ParquetMetaDataReader::new().with_prefetch_hint(Some(64 << 10));
            if let Some(o) = options {
                reader = reader.with_arrow_reader_options(Some(o));
            }
            Ok(Arc::new(reader.load_and_finish(&mut *self, size).await?))
        }
        .boxed()
    }
}
