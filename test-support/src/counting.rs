//! An object store that records every object read through it, so tests can assert what a
//! publish, an ingest or a page touched, and in how many requests (a real store underneath;
//! the counting is the only addition).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Wraps a store; `reads()` lists each path read (whole or by ranges) with the bytes asked for.
#[derive(Debug, Clone)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    reads: Arc<Mutex<BTreeMap<String, u64>>>,
    requests: Arc<Mutex<Vec<(String, u64)>>>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore {
            inner,
            reads: Arc::default(),
            requests: Arc::default(),
        }
    }

    /// Paths read since the last [`CountingStore::reset`], with the bytes returned for each
    /// (`u64::MAX` for a whole-object read whose size was not known up front).
    pub fn reads(&self) -> BTreeMap<String, u64> {
        self.reads.lock().expect("not poisoned").clone()
    }

    /// Paths read under `prefix`.
    pub fn reads_under(&self, prefix: &str) -> Vec<String> {
        self.reads()
            .into_keys()
            .filter(|p| p.starts_with(prefix))
            .collect()
    }

    /// Every read request since the last reset, in order: the path and the bytes returned.
    /// Several ranges of one object asked at once count as the GETs S3 would be sent for them
    /// (neighbours within 1 MiB coalesced, see `get_ranges`).
    pub fn requests(&self) -> Vec<(String, u64)> {
        self.requests.lock().expect("not poisoned").clone()
    }

    pub fn reset(&self) {
        self.reads.lock().expect("not poisoned").clear();
        self.requests.lock().expect("not poisoned").clear();
    }

    fn note(&self, path: &Path, bytes: u64) {
        let mut r = self.reads.lock().expect("not poisoned");
        let e = r.entry(path.to_string()).or_default();
        *e = e.saturating_add(bytes);
        let mut q = self.requests.lock().expect("not poisoned");
        q.push((path.to_string(), bytes));
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        let out = self.inner.get_opts(location, options).await?;
        if !head {
            self.note(location, out.range.end - out.range.start);
        }
        Ok(out)
    }

    /// As the S3, GCS and Azure stores do (not the local one, which reads each range apart):
    /// neighbouring ranges within 1 MiB become one GET, and each GET is counted.
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        object_store::coalesce_ranges(
            ranges,
            |range| self.get_range(location, range),
            object_store::OBJECT_STORE_COALESCE_DEFAULT,
        )
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
