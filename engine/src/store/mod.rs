//! Where a corpus lives: an `object_store` rooted at a local directory or a cloud URL.
//!
//! Layout under the root (the repository root for the shipped sample corpus):
//! - `manifests/CURRENT`: the pointer, one line `sha256:<hex>`; moved only by compare-and-swap
//!   ([`CorpusStore::swap_pointer`]);
//! - `manifests/<hex>.json`: one canonical manifest per published version, never rewritten;
//! - `snapshots/partitions/<source>/<lane>/<YYYY-MM-DD>/<sha256>.parquet`: content-addressed
//!   source-day partitions, never rewritten (a changed day gets a new object);
//! - `snapshots/identity/<sha256>.json`, `snapshots/access/...`: identity and access files.

pub mod hashing;
pub mod objects;

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::signer::Signer;
use object_store::{
    GetOptions, GetRange, GetResult, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutMode,
    PutOptions, PutPayload, UpdateVersion,
};
use sha2::{Digest, Sha256};
use url::Url;

use crate::error::{Error, Result};
use crate::model::clock::Instant;
use crate::model::manifest::{Manifest, version_of};

pub const POINTER: &str = "manifests/CURRENT";

/// How a cloud store retries a failed request: a few times within 8 s. The client library's
/// default (10 retries within 3 minutes) would hold a request far past the service's own
/// deadline when the store is down; a short bound lets it answer `503 storage_unavailable`
/// and the client retry.
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 3,
        retry_timeout: std::time::Duration::from_secs(8),
        ..Default::default()
    }
}

/// Fault injection for crash tests: with `ASOF_FAULT_PAUSE_AFTER_WRITE=N` in its environment,
/// a process stops for good right after the N-th object it writes (immutable objects, the
/// manifest, the pointer), saying so on stderr, so a test can `kill -9` it at exactly that
/// point of a publish. Unset (always, outside tests), it costs one branch per write.
pub const FAULT_PAUSE_ENV: &str = "ASOF_FAULT_PAUSE_AFTER_WRITE";

/// The line a paused process prints, before the write number and path.
pub const FAULT_PAUSED: &str = "asof fault injection: paused after write";

/// The writes counted for [`FAULT_PAUSE_ENV`].
#[derive(Debug)]
struct PauseAfter {
    at: u64,
    done: std::sync::atomic::AtomicU64,
}

/// A cloud store builder configured from a URL and `(key, value)` options, as
/// `object_store::parse_url_opts` configures it (unknown keys are ignored).
macro_rules! configured {
    ($builder:ty, $url:expr, $opts:expr) => {
        $opts.iter().fold(
            <$builder>::new().with_url($url.to_string()),
            |b, (k, v)| match k.to_ascii_lowercase().parse() {
                Ok(key) => b.with_config(key, v.clone()),
                Err(_) => b,
            },
        )
    };
}

/// A handle on one corpus root. Cheap to clone.
#[derive(Clone)]
pub struct CorpusStore {
    store: Arc<dyn ObjectStore>,
    /// The URL DataFusion uses to reach `store` (registered on each session context).
    url: Url,
    /// What to show a human (a path or a URL without credentials).
    display: String,
    /// The root directory, when the corpus is a local directory (hot-path reads use it).
    local_root: Option<PathBuf>,
    /// The lock file every publisher to this object store shares, when it has no conditional
    /// writes ([`PUBLISH_LOCK_ENV`]).
    publish_lock: Option<PathBuf>,
    /// The cloud store's own URL signer (S3, GCS, Azure), and the prefix the corpus root sits
    /// under in its bucket: file downloads are presigned GETs that never pass through the
    /// service. `None` for a local directory (the service signs its own URLs then).
    signer: Option<(Arc<dyn Signer>, Path)>,
    /// [`FAULT_PAUSE_ENV`], when set.
    pause: Option<Arc<PauseAfter>>,
    /// The last manifests read from an object store (bytes, hash-checked), newest last: a
    /// manifest is immutable and named by its hash, and one publish asks for its parent's
    /// several times (pipeline, publisher, Delta versions), each a GET of megabytes at 20M rows
    /// (`benches/cold_pages.py`). A local directory reads its file each time.
    manifests: Arc<std::sync::Mutex<std::collections::VecDeque<(String, Bytes)>>>,
}

/// Manifests a remote [`CorpusStore`] keeps read.
const MANIFESTS_KEPT: usize = 2;

impl std::fmt::Debug for CorpusStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorpusStore")
            .field("location", &self.display)
            .finish()
    }
}

impl CorpusStore {
    /// Opens a corpus at a local directory (created if absent) or an object-store URL
    /// (`s3://`, `gs://`, `az://`, `file://`, `memory://`), configured from the environment
    /// (`AWS_*`, `GOOGLE_*`, `AZURE_*`) where the build includes those backends.
    pub fn open(location: &str) -> Result<Self> {
        let env: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| {
                k.starts_with("AWS_") || k.starts_with("GOOGLE_") || k.starts_with("AZURE_")
            })
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        let mut store = Self::open_with_options(location, env)?;
        store.publish_lock = std::env::var_os(PUBLISH_LOCK_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        store.pause = std::env::var(FAULT_PAUSE_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .map(|at| {
                Arc::new(PauseAfter {
                    at,
                    done: Default::default(),
                })
            });
        Ok(store)
    }

    /// As [`CorpusStore::open`] with the object store's options given (`aws_endpoint`,
    /// `aws_access_key_id`, ...) instead of read from the environment.
    pub fn open_with_options(
        location: &str,
        opts: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self> {
        if let Ok(url) = Url::parse(location)
            && url.scheme().len() > 1
        {
            if url.scheme() == "file" {
                let path = url.to_file_path().map_err(|()| {
                    Error::invalid("corpus", format!("not a file path: {location}"))
                })?;
                return Self::local(&path);
            }
            let cannot = |e: &dyn std::fmt::Display| {
                Error::invalid("corpus", format!("cannot open {}: {e}", redact(&url)))
            };
            let opts: Vec<(String, String)> = opts.into_iter().collect();
            let (scheme, prefix) = ObjectStoreScheme::parse(&url).map_err(|e| cannot(&e))?;
            // The cloud backends are built here rather than by `parse_url_opts` so that the
            // concrete store is kept as a `Signer` too.
            let (store, signer): (Arc<dyn ObjectStore>, Option<Arc<dyn Signer>>) = match scheme {
                ObjectStoreScheme::AmazonS3 => {
                    let s = Arc::new(
                        configured!(object_store::aws::AmazonS3Builder, &url, &opts)
                            .with_retry(retry())
                            .build()
                            .map_err(|e| cannot(&e))?,
                    );
                    (s.clone(), Some(s))
                }
                ObjectStoreScheme::GoogleCloudStorage => {
                    let s = Arc::new(
                        configured!(object_store::gcp::GoogleCloudStorageBuilder, &url, &opts)
                            .with_retry(retry())
                            .build()
                            .map_err(|e| cannot(&e))?,
                    );
                    (s.clone(), Some(s))
                }
                ObjectStoreScheme::MicrosoftAzure => {
                    let s = Arc::new(
                        configured!(object_store::azure::MicrosoftAzureBuilder, &url, &opts)
                            .with_retry(retry())
                            .build()
                            .map_err(|e| cannot(&e))?,
                    );
                    (s.clone(), Some(s))
                }
                _ => {
                    let (s, _) =
                        object_store::parse_url_opts(&url, opts).map_err(|e| cannot(&e))?;
                    (Arc::from(s), None)
                }
            };
            let prefix = Path::from(prefix.as_ref());
            let store: Arc<dyn ObjectStore> = if prefix.as_ref().is_empty() {
                store
            } else {
                Arc::new(object_store::prefix::PrefixStore::new(
                    store,
                    prefix.clone(),
                ))
            };
            let mut corpus = Self::from_store(store, redact(&url));
            corpus.signer = signer.map(|s| (s, prefix));
            return Ok(corpus);
        }
        Self::local(FsPath::new(location))
    }

    /// A local directory; created if it does not exist.
    pub fn local(dir: &FsPath) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let dir: PathBuf = dir.canonicalize()?;
        let fs = LocalFileSystem::new_with_prefix(&dir)?;
        let mut store = Self::from_store(Arc::new(fs), dir.display().to_string());
        store.local_root = Some(dir);
        Ok(store)
    }

    /// Wraps any object store (tests use `InMemory`).
    pub fn from_store(store: Arc<dyn ObjectStore>, display: String) -> Self {
        // A private scheme: each corpus gets its own registered store, whatever its backend.
        let url = Url::parse("asof-corpus://root/").expect("static url");
        CorpusStore {
            store,
            url,
            display,
            local_root: None,
            publish_lock: None,
            signer: None,
            pause: None,
            manifests: Default::default(),
        }
    }

    /// Makes every pointer move take the OS lock on `path` (a file all publishers to this
    /// store share), for object stores without conditional writes.
    pub fn with_publish_lock(mut self, path: PathBuf) -> Self {
        self.publish_lock = Some(path);
        self
    }

    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }
    pub fn url(&self) -> &Url {
        &self.url
    }
    pub fn display(&self) -> &str {
        &self.display
    }
    /// The root directory of a local corpus; `None` for object-store URLs.
    pub fn local_root(&self) -> Option<&FsPath> {
        self.local_root.as_deref()
    }

    /// Whether file URLs come from the object store's own signer (S3, GCS, Azure).
    pub fn presigns(&self) -> bool {
        self.signer.is_some()
    }

    /// A presigned GET URL for the object at `path`, valid for `ttl`, from the object store's
    /// own signer; `None` when the backend has none (a local directory).
    pub async fn presigned_get(&self, path: &str, ttl: std::time::Duration) -> Result<Option<Url>> {
        let Some((signer, prefix)) = &self.signer else {
            return Ok(None);
        };
        let full: Path = prefix.parts().chain(Path::from(path).parts()).collect();
        Ok(Some(
            signer.signed_url(http::Method::GET, &full, ttl).await?,
        ))
    }

    /// The object at `path`, or one byte range of it: a stream with its size and metadata.
    pub async fn get_range(&self, path: &str, range: Option<GetRange>) -> Result<GetResult> {
        let opts = GetOptions {
            range,
            ..GetOptions::default()
        };
        Ok(self.store.get_opts(&Path::from(path), opts).await?)
    }

    pub async fn get(&self, path: &str) -> Result<Bytes> {
        Ok(self.store.get(&Path::from(path)).await?.bytes().await?)
    }

    pub async fn exists(&self, path: &str) -> Result<bool> {
        match self.store.head(&Path::from(path)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes an immutable object. If it already exists it must hold the same bytes
    /// (content-addressed paths make that the normal case); published bytes are never replaced.
    pub async fn put_immutable(&self, path: &str, bytes: Bytes) -> Result<()> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .store
            .put_opts(
                &Path::from(path),
                PutPayload::from_bytes(bytes.clone()),
                opts,
            )
            .await
        {
            Ok(_) => {
                self.wrote(path);
                Ok(())
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                let existing = self.get(path).await?;
                if existing == bytes {
                    Ok(())
                } else {
                    Err(Error::integrity(
                        path,
                        "an object with this path exists with other bytes; refusing to overwrite",
                    ))
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`Self::put_immutable`] of a local file's bytes (`len` of them, hashing to `sha256`, both
    /// known to the caller, which wrote them), sent in parts so an object bigger than memory
    /// never sits in it whole: a year's access file runs to hundreds of megabytes. A file of
    /// one part goes as one put. An object already at `path` must hash to `sha256`.
    pub async fn put_immutable_file(
        &self,
        path: &str,
        file: std::fs::File,
        len: u64,
        sha256: &str,
    ) -> Result<()> {
        self.put_file_in_parts(path, file, len, sha256, UPLOAD_PART_BYTES)
            .await
    }

    /// [`Self::put_immutable_file`] with parts of `part` bytes (tests use small ones).
    pub async fn put_file_in_parts(
        &self,
        path: &str,
        mut file: std::fs::File,
        len: u64,
        sha256: &str,
        part: u64,
    ) -> Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        file.seek(SeekFrom::Start(0))?;
        if len <= part {
            let mut buf = Vec::with_capacity(len as usize);
            file.read_to_end(&mut buf)?;
            return self.put_immutable(path, Bytes::from(buf)).await;
        }
        let location = Path::from(path);
        match self.store.head(&location).await {
            Ok(_) => {
                // Content-addressed: normally the same bytes, written by an earlier attempt.
                let mut hasher = Sha256::new();
                let mut stream = self.store.get(&location).await?.into_stream();
                while let Some(chunk) = futures::TryStreamExt::try_next(&mut stream).await? {
                    hasher.update(&chunk);
                }
                return if hex::encode(hasher.finalize()) == sha256 {
                    Ok(())
                } else {
                    Err(Error::integrity(
                        path,
                        "an object with this path exists with other bytes; refusing to overwrite",
                    ))
                };
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        // The object appears only when the upload completes (a local store renames a staged
        // file; S3 assembles the parts), so a crash mid-way leaves nothing at `path`.
        let mut upload = self.store.put_multipart(&location).await?;
        let mut left = len;
        while left > 0 {
            let n = part.min(left) as usize;
            let mut buf = vec![0; n];
            let sent = match file.read_exact(&mut buf) {
                Ok(()) => upload
                    .put_part(PutPayload::from(buf))
                    .await
                    .map_err(Error::from),
                Err(e) => Err(e.into()),
            };
            if let Err(e) = sent {
                let _ = upload.abort().await;
                return Err(e);
            }
            left -= n as u64;
        }
        upload.complete().await?;
        self.wrote(path);
        Ok(())
    }

    /// Counts a write for [`FAULT_PAUSE_ENV`]; at the named one, stops the process for good.
    fn wrote(&self, path: &str) {
        let Some(p) = &self.pause else { return };
        let n = p.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if n == p.at {
            eprintln!("{FAULT_PAUSED} {n} ({path})");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
    }

    /// The published version the pointer names, if any.
    pub async fn current_version(&self) -> Result<Option<String>> {
        match self.get(POINTER).await {
            Ok(b) => Ok(Some(parse_pointer(&b)?)),
            Err(Error::Store(object_store::Error::NotFound { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Loads and checks one manifest: its bytes must hash to `version`.
    pub async fn manifest(&self, version: &str) -> Result<Manifest> {
        let path = manifest_path(version)?;
        let bytes = self.manifest_bytes(version).await?;
        Manifest::from_bytes(&path, &bytes)
    }

    /// The `parent` and `created_at` of `version`'s manifest, its bytes hash-checked but not
    /// parsed whole: what walking a chain of versions needs. Why apart from
    /// [`Self::manifest`]: a 2M-row corpus's manifest lists thousands of partitions, and
    /// building them (and re-serializing to check the canonical form) is most of reading it;
    /// a chain of 30 versions was half a second to learn that way.
    pub async fn manifest_link(&self, version: &str) -> Result<(Option<String>, Instant)> {
        #[derive(serde::Deserialize)]
        struct Link {
            parent: Option<String>,
            created_at: Instant,
        }
        let path = manifest_path(version)?;
        let bytes = self.manifest_bytes(version).await?;
        let link: Link = serde_json::from_slice(&bytes).map_err(|e| Error::Manifest {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        Ok((link.parent, link.created_at))
    }

    /// `version`'s manifest bytes, hash-checked against the version.
    async fn manifest_bytes(&self, version: &str) -> Result<Bytes> {
        let path = manifest_path(version)?;
        let kept = self
            .manifests
            .lock()
            .expect("manifest list")
            .iter()
            .find(|(v, _)| v == version)
            .map(|(_, b)| b.clone());
        let bytes = match kept {
            Some(b) => b,
            None => {
                let bytes = self.get(&path).await?;
                let actual = version_of(&bytes);
                if actual != version {
                    return Err(Error::integrity(
                        path,
                        format!("manifest hashes to {actual}, not {version}"),
                    ));
                }
                self.keep_manifest(version, bytes.clone());
                bytes
            }
        };
        Ok(bytes)
    }

    /// Keeps a manifest's bytes (checked, or just written) when the store is remote.
    fn keep_manifest(&self, version: &str, bytes: Bytes) {
        if self.local_root.is_some() {
            return;
        }
        let mut kept = self.manifests.lock().expect("manifest list");
        kept.retain(|(v, _)| v != version);
        if kept.len() >= MANIFESTS_KEPT {
            kept.pop_front();
        }
        kept.push_back((version.to_owned(), bytes));
    }

    /// The current version and its manifest.
    pub async fn current(&self) -> Result<(String, Manifest)> {
        let version = self
            .current_version()
            .await?
            .ok_or_else(|| Error::NoCorpus(self.display.clone()))?;
        let m = self.manifest(&version).await?;
        Ok((version, m))
    }

    /// Writes a manifest object (immutable) and returns its version. Does not move the pointer.
    pub async fn put_manifest(&self, m: &Manifest) -> Result<String> {
        let bytes = Bytes::from(m.to_canonical_bytes()?);
        let version = version_of(&bytes);
        self.put_immutable(&manifest_path(&version)?, bytes.clone())
            .await?;
        self.keep_manifest(&version, bytes);
        Ok(version)
    }

    /// Moves the pointer from `expected` (`None`: no version published yet) to `version`, only
    /// if it still names `expected`; otherwise [`Error::PointerMoved`] and nothing changes.
    ///
    /// This compare-and-swap is the only way the pointer moves, so two publishers can never
    /// both succeed from the same parent (the second rebases, `crate::write::publish`). How it is made
    /// atomic depends on the backend:
    /// - a local directory: an OS lock on `manifests/CURRENT.lock` around read-compare-write
    ///   (the write is a temporary file, fsync, rename); the OS drops the lock of a process
    ///   that dies, so a crash never leaves the corpus locked;
    /// - an object store with conditional writes (S3 `If-Match`/`If-None-Match`, GCS, Azure):
    ///   `PutMode::Update` on the pointer's ETag/version, `PutMode::Create` for the first;
    /// - an object store without them (some S3-compatible servers): every publisher must take
    ///   the same lock file, named by `ASOF_PUBLISH_LOCK` (a path on a file system they share);
    ///   without it the publish is refused ([`Error::NoConditionalWrites`]), never done blind.
    ///   `ASOF_PUBLISH_LOCK` set also makes an object store with conditional writes take it.
    pub async fn swap_pointer(&self, expected: Option<&str>, version: &str) -> Result<()> {
        self.swap(expected, version).await?;
        self.wrote(POINTER);
        Ok(())
    }

    async fn swap(&self, expected: Option<&str>, version: &str) -> Result<()> {
        if !self.exists(&manifest_path(version)?).await? {
            return Err(Error::integrity(
                POINTER,
                format!("refusing to point at {version}: its manifest is not stored"),
            ));
        }
        if let Some(root) = &self.local_root {
            let root = root.clone();
            let (expected, version) = (expected.map(str::to_owned), version.to_owned());
            return tokio::task::spawn_blocking(move || {
                swap_local(&root, expected.as_deref(), &version)
            })
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e)))?;
        }
        if let Some(lock) = self.publish_lock.clone() {
            let held = tokio::task::spawn_blocking(move || lock_file(&lock))
                .await
                .map_err(|e| Error::Io(std::io::Error::other(e)))??;
            let found = self.current_version().await?;
            check_expected(expected, found)?;
            let payload = PutPayload::from(format!("{version}\n").into_bytes());
            self.store.put(&Path::from(POINTER), payload).await?;
            drop(held);
            return Ok(());
        }
        self.swap_conditional(expected, version).await
    }

    /// The compare-and-swap through the object store's own conditional writes.
    async fn swap_conditional(&self, expected: Option<&str>, version: &str) -> Result<()> {
        let payload = PutPayload::from(format!("{version}\n").into_bytes());
        let mode = match self.store.get(&Path::from(POINTER)).await {
            Ok(got) => {
                let update = UpdateVersion {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                };
                let found = parse_pointer(&got.bytes().await?)?;
                check_expected(expected, Some(found))?;
                PutMode::Update(update)
            }
            Err(object_store::Error::NotFound { .. }) => {
                check_expected(expected, None)?;
                PutMode::Create
            }
            Err(e) => return Err(e.into()),
        };
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        match self
            .store
            .put_opts(&Path::from(POINTER), payload, opts)
            .await
        {
            Ok(_) => Ok(()),
            // Another publisher moved (or created) the pointer between our read and write.
            Err(object_store::Error::Precondition { .. })
            | Err(object_store::Error::AlreadyExists { .. }) => {
                let found = self.current_version().await?;
                Err(Error::PointerMoved {
                    expected: expected.map(str::to_owned),
                    found,
                })
            }
            Err(object_store::Error::NotImplemented { .. }) => {
                Err(Error::NoConditionalWrites(self.display.clone()))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// The variable naming the lock file publishers to an object store without conditional
/// writes share.
pub const PUBLISH_LOCK_ENV: &str = "ASOF_PUBLISH_LOCK";

/// The lock file beside the pointer of a local corpus.
pub const POINTER_LOCK: &str = "manifests/CURRENT.lock";

fn check_expected(expected: Option<&str>, found: Option<String>) -> Result<()> {
    if found.as_deref() == expected {
        Ok(())
    } else {
        Err(Error::PointerMoved {
            expected: expected.map(str::to_owned),
            found,
        })
    }
}

fn parse_pointer(bytes: &[u8]) -> Result<String> {
    let v = String::from_utf8_lossy(bytes).trim().to_owned();
    if !is_version(&v) {
        return Err(Error::Manifest {
            path: POINTER.into(),
            detail: "pointer does not hold a sha256:<hex> version".into(),
        });
    }
    Ok(v)
}

/// Opens (creating) `path` and takes an exclusive OS lock on it, waiting for other holders.
fn lock_file(path: &FsPath) -> Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    f.lock()?;
    Ok(f)
}

/// The local compare-and-swap: under the lock, read, compare, write a temporary file, fsync,
/// rename over the pointer, fsync the directory (so the rename survives a power cut).
fn swap_local(root: &FsPath, expected: Option<&str>, version: &str) -> Result<()> {
    use std::io::Write;
    let _held = lock_file(&root.join(POINTER_LOCK))?;
    let pointer = root.join(POINTER);
    let found = match std::fs::read(&pointer) {
        Ok(b) => Some(parse_pointer(&b)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    check_expected(expected, found)?;
    let dir = pointer.parent().expect("the pointer is in manifests/");
    let tmp = dir.join(format!(".CURRENT.{}.tmp", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(format!("{version}\n").as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &pointer)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// `manifests/<hex>.json` for `sha256:<hex>`.
pub fn manifest_path(version: &str) -> Result<String> {
    if !is_version(version) {
        return Err(Error::invalid(
            "corpus_version",
            format!("not a sha256:<hex> version: {version}"),
        ));
    }
    Ok(format!("manifests/{}.json", &version[7..]))
}

fn is_version(v: &str) -> bool {
    v.len() == 71
        && v.starts_with("sha256:")
        && v[7..]
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

/// Parts of a streamed upload ([`CorpusStore::put_immutable_file`]): above S3's 5 MiB minimum,
/// small enough that a part in flight is a small share of an ingest's memory.
pub const UPLOAD_PART_BYTES: u64 = 16 << 20;

/// Encoded bytes a Parquet writer of partitions and list states holds before it closes a row
/// group. The writer keeps a row group in memory until it is closed, so without a bound a
/// golden copy's day (millions of rows, one row group per million) would be held encoded;
/// every stored object smaller than this is one row group, as before.
pub const ROW_GROUP_BYTES: usize = 64 << 20;

fn redact(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_password(None);
    let _ = u.set_username("");
    u.set_query(None);
    u.to_string()
}

#[cfg(test)]
mod tests {
    use super::hashing::sha256_hex;
    use std::io::Write;

    use super::*;

    fn temp_file(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    #[tokio::test]
    async fn a_remote_store_reads_each_manifest_once_and_a_local_one_every_time() {
        let (dir, _, _) = crate::testkit::random_corpus(0x5eed_0049, false).await;
        let (counting, remote) = crate::testkit::counted_store(dir.path());
        let (version, first) = remote.current().await.unwrap();
        for _ in 0..3 {
            assert_eq!(remote.current().await.unwrap().1, first);
            assert_eq!(remote.manifest(&version).await.unwrap(), first);
        }
        let path = manifest_path(&version).unwrap();
        let manifest_reads = counting
            .requests()
            .iter()
            .filter(|(p, _)| *p == path)
            .count();
        assert_eq!(manifest_reads, 1, "{:?}", counting.requests());
        // A local directory reads its file each time: a manifest damaged on disk is seen.
        let local = CorpusStore::local(dir.path()).unwrap();
        local.manifest(&version).await.unwrap();
        std::fs::write(dir.path().join(&path), b"{}").unwrap();
        assert!(local.manifest(&version).await.is_err());
        // The remote store keeps what it checked when it read it.
        assert_eq!(remote.manifest(&version).await.unwrap(), first);
        // And what it wrote: a publisher reads back the version it just put without a GET.
        let mut next = first.clone();
        next.notes.insert("sec.edgar".into(), "a note".into());
        let v2 = remote.put_manifest(&next).await.unwrap();
        counting.reset();
        let back = remote.manifest(&v2).await.unwrap();
        assert_eq!(
            back.notes.get("sec.edgar").map(String::as_str),
            Some("a note")
        );
        assert!(counting.requests().is_empty(), "{:?}", counting.requests());
    }

    #[tokio::test]
    async fn a_manifest_link_is_the_manifests_parent_and_creation_and_checks_the_hash() {
        let (dir, _, _) = crate::testkit::random_corpus(0x5eed_0063, false).await;
        let store = CorpusStore::local(dir.path()).unwrap();
        let (version, first) = store.current().await.unwrap();
        let mut next = first.clone();
        next.parent = Some(version.clone());
        next.notes.insert("sec.edgar".into(), "a note".into());
        let v2 = store.put_manifest(&next).await.unwrap();
        assert_eq!(
            store.manifest_link(&v2).await.unwrap(),
            (Some(version.clone()), next.created_at)
        );
        assert_eq!(
            store.manifest_link(&version).await.unwrap(),
            (first.parent.clone(), first.created_at)
        );
        // Bytes that are not the version's are refused, as a whole read refuses them.
        let path = manifest_path(&v2).unwrap();
        let mut damaged = std::fs::read(dir.path().join(&path)).unwrap();
        damaged.push(b' ');
        std::fs::write(dir.path().join(&path), damaged).unwrap();
        assert!(store.manifest_link(&v2).await.is_err());
    }

    #[tokio::test]
    async fn a_file_sent_in_parts_is_stored_whole_and_its_retry_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let bytes: Vec<u8> = (0..10_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let sha = sha256_hex(&bytes);
        let len = bytes.len() as u64;
        // Parts of 4 KiB: ten of them.
        store
            .put_file_in_parts("snapshots/big", temp_file(&bytes), len, &sha, 4096)
            .await
            .unwrap();
        assert_eq!(store.get("snapshots/big").await.unwrap(), bytes);
        // The same bytes again (an attempt after a crash): accepted, nothing rewritten.
        store
            .put_file_in_parts("snapshots/big", temp_file(&bytes), len, &sha, 4096)
            .await
            .unwrap();
        // Other bytes at the same path: refused, the object keeps its bytes.
        let mut other = bytes.clone();
        other[5000] ^= 1;
        let err = store
            .put_file_in_parts(
                "snapshots/big",
                temp_file(&other),
                len,
                &sha256_hex(&other),
                4096,
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("refusing to overwrite"), "{err}");
        assert_eq!(store.get("snapshots/big").await.unwrap(), bytes);
        // A file of one part goes as one put.
        store
            .put_file_in_parts(
                "snapshots/small",
                temp_file(b"one"),
                3,
                &sha256_hex(b"one"),
                4096,
            )
            .await
            .unwrap();
        assert_eq!(
            store.get("snapshots/small").await.unwrap(),
            Bytes::from_static(b"one")
        );
    }
}
