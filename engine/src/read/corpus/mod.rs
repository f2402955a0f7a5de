//! A loaded corpus version and the queries it answers, one file per operation: as-of news and
//! diff (`news.rs`), single records (`record.rs`), coverage certificates (`coverage.rs`),
//! identity mappings (`mapping.rs`) and the version's partitions as flat files (`files.rs`).
//! This file loads a version and holds what they share. No HTTP here: the answer layer, the
//! server and the CLI call these.
//!
//! Loading reads the manifest, the identity object, the supersessions (`supersessions.rs`),
//! the day tables of coverage, the access index's sidecars and the late objects.
//! [`Corpus::open_after`] loads a version after another, taking over what the two share
//! through content-addressed paths (the identity index when the object is the same, the access
//! files whose sidecars both list, each partition's supersessions, the late lanes), so a
//! reload reads what the publish added, not the corpus; tests hold the result equal to a fresh
//! open.
//!
//! Readings ([`ReadPath`]): by-CIK and by-ticker pages and EDGAR record lookups go through the
//! access index when every partition of the lane is in an access file; a record lookup of
//! another source reads only the partitions its id runs name; every other page is the ordered
//! walk (`walk.rs`), on the scan pool. Both apply `Cut::admits` to the rows they read. The
//! reference reading, a DataFusion scan of every partition, exists only with the `oracle`
//! feature (and in tests): the differential tests (`laws.rs`, `walk.rs`,
//! `crate::read::access`'s) hold the readings' pages equal to it and to an oracle reading the
//! as-of rule off every revision.

mod coverage;
mod files;
#[cfg(test)]
mod laws;
mod mapping;
mod news;
mod record;
pub(crate) mod supersessions;
mod walk;

pub use coverage::{Certificate, CoverageQuery, PartitionRef};
pub use files::{FileEntry, FilePosition, FilesQuery};
pub use news::{Answer, Entity, NewsQuery, Position};
pub use record::RecordLookup;

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::identity::read_identity;
use crate::model::clock::{Lane, SourceId};
use crate::model::coverage::{DayTable, Scope, SourceCoverage};
use crate::model::cut::Superseded;
use crate::model::identity::{IdentityFile, IdentityIndex};
use crate::model::manifest::{Manifest, PartitionEntry};
use crate::read::access::AccessIndex;
use crate::read::late::LateIndex;
use crate::store::CorpusStore;

/// Which reading answers a news page. Every one gives the same answers (the differential tests
/// hold them equal); tests and benchmarks compare them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPath {
    /// By-filer pages through the access index where it covers the lane, every other page by
    /// the ordered walk over partitions (the default).
    Indexed,
    /// Every page by the ordered walk.
    Walk,
    /// Every page and record lookup by a DataFusion scan of every partition: the reference
    /// the others are held to, O(corpus) a page (only with the `oracle` feature, or in tests).
    #[cfg(any(test, feature = "oracle"))]
    Scan,
}

pub struct Corpus {
    store: CorpusStore,
    version: String,
    manifest: Manifest,
    /// Shared with the next version when it lists the same identity object.
    identity: Arc<IdentityIndex>,
    /// Superseded revision id → commit instant of the revision that superseded it.
    superseded: Arc<Superseded>,
    /// Each source-lane's partitions in day order, for the walk.
    lanes: HashMap<(SourceId, Lane), Arc<[PartitionEntry]>>,
    /// What each partition of a lane without access files supersedes, carried to the next
    /// version (see `supersessions.rs`).
    supersessions: supersessions::ByPartition,
    /// The reference scan's DataFusion session.
    #[cfg(any(test, feature = "oracle"))]
    ctx: datafusion::prelude::SessionContext,
    /// The access-file index, when the version lists access files.
    access: Option<AccessIndex>,
    /// The late rows of each source-lane whose version lists them (`crate::format::late`).
    late: LateIndex,
    /// Which reading answers pages (`Indexed` by default).
    path: ReadPath,
    /// Per-day certification tables of every certified source-lane.
    day_tables: HashMap<(SourceId, Lane), DayTable>,
    /// The sources the version holds ([`Manifest::held_sources`], computed once: every
    /// request asks, and deriving it walks every partition, 7.7% of a by-filer page's CPU at
    /// 2M rows before it was kept here).
    held_sources: Vec<SourceId>,
    /// Where walks and scans run, and their bounds (shared with the process's other versions).
    scans: crate::ScanPool,
    /// The caller's record encoding, applied to a walk's rows on the scan pool.
    encoder: Option<crate::model::record::RowEncoder>,
}

impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("version", &self.version)
            .field("store", &self.store)
            .finish()
    }
}

impl Corpus {
    /// Loads the version the store's pointer names.
    pub async fn open(store: CorpusStore) -> Result<Self> {
        let version = store
            .current_version()
            .await?
            .ok_or_else(|| Error::NoCorpus(store.display().to_owned()))?;
        Self::open_version(store, &version).await
    }

    /// Loads one version (its manifest hash-checked, its identity file hash-checked).
    pub async fn open_version(store: CorpusStore, version: &str) -> Result<Self> {
        let manifest = store.manifest(version).await?;
        Self::open_after(store, version, manifest, None).await
    }

    /// Loads `version` from its `manifest` (already read and hash-checked), taking over from
    /// `previous`, a version of the same store already loaded, what the two share: the
    /// identity index when both list the same identity object, the access files (footers,
    /// slots) whose sidecars both list, and what each partition supersedes for the
    /// partitions both list. Objects are content-addressed, so the same
    /// path is the same bytes; a reload after a day's ingest then reads that day, not the
    /// corpus. The result is the same as opening the version afresh.
    pub async fn open_after(
        store: CorpusStore,
        version: &str,
        mut manifest: Manifest,
        previous: Option<&Corpus>,
    ) -> Result<Self> {
        if let Some(p) = previous {
            // One copy of each partition entry the two list (most of them): what keeps N
            // versions held side by side from costing N manifests.
            manifest.share_entries(&p.manifest);
        }
        let identity = match previous.filter(|p| p.manifest.identity == manifest.identity) {
            Some(p) => Arc::clone(&p.identity),
            None => {
                let file = match manifest.identity.first() {
                    Some(e) => read_identity(&store, e).await?,
                    None => IdentityFile::default(),
                };
                Arc::new(IdentityIndex::new(file)?)
            }
        };
        #[cfg(any(test, feature = "oracle"))]
        let ctx = {
            let config = datafusion::prelude::SessionConfig::new()
                .with_target_partitions(2)
                .with_batch_size(8192);
            let ctx = datafusion::prelude::SessionContext::new_with_config(config);
            ctx.register_object_store(store.url(), store.object_store());
            ctx
        };
        let access =
            AccessIndex::load_after(&store, &manifest, previous.and_then(|p| p.access.as_ref()))
                .await?;
        let (superseded, supersessions) = supersessions::gather(
            &store,
            &manifest,
            access.as_ref(),
            previous.map(|p| &p.supersessions),
        )
        .await?;
        // A publish that corrects nothing leaves the superseded revisions as they were: the
        // map (one entry per corrected revision of the corpus) is then the previous version's.
        let superseded = match previous.filter(|p| *p.superseded == superseded) {
            Some(p) => Arc::clone(&p.superseded),
            None => Arc::new(superseded),
        };
        let mut lanes: HashMap<(SourceId, Lane), Vec<PartitionEntry>> = HashMap::new();
        for p in &manifest.partitions {
            lanes
                .entry((p.source_id, p.lane))
                .or_default()
                .push(p.clone());
        }
        // A lane whose partitions are the previous version's (a publish touches few lanes)
        // shares its list: versions kept side by side (pinned reads) hold one copy.
        let lanes = lanes
            .into_iter()
            .map(|(k, mut v)| {
                v.sort_by_key(|p| p.date);
                let same = previous
                    .and_then(|p| p.lanes.get(&k))
                    .filter(|old| old.len() == v.len() && old.iter().zip(&v).all(|(a, b)| a == b));
                match same {
                    Some(old) => (k, Arc::clone(old)),
                    None => (k, Arc::from(v)),
                }
            })
            .collect();
        let late =
            LateIndex::load_after(&store, &manifest, &lanes, previous.map(|p| &p.late)).await?;
        let day_tables = manifest
            .spans
            .iter()
            .filter_map(|s| {
                DayTable::build(&manifest, s.source_id, s.lane).map(|t| ((s.source_id, s.lane), t))
            })
            .collect();
        Ok(Corpus {
            store,
            version: version.to_owned(),
            held_sources: manifest.held_sources(),
            manifest,
            identity,
            superseded,
            lanes,
            supersessions,
            #[cfg(any(test, feature = "oracle"))]
            ctx,
            access,
            late,
            path: ReadPath::Indexed,
            day_tables,
            scans: crate::ScanPool::shared_default(),
            encoder: None,
        })
    }

    /// Chooses the reading that answers pages; differential tests and benchmarks compare them.
    pub fn set_read_path(&mut self, path: ReadPath) {
        self.path = path;
    }

    /// Runs this corpus's walks and scans on `pool` (a server shares one pool between the
    /// versions it serves); the process's default pool otherwise.
    pub fn set_scan_pool(&mut self, pool: crate::ScanPool) {
        self.scans = pool;
    }

    /// Encodes each row of a walk's page with `encoder` before the page leaves the scan pool,
    /// keeping the encoding with the row ([`crate::model::record::SharedRow::json`]). Why: a broad
    /// page of a thousand rows is a megabyte of JSON; made on a serving thread it took the
    /// by-filer path's cores, made on the pool it runs at the pool's priority and within its
    /// CPU share. `encoder` must be the one encoding the caller uses for those rows.
    pub fn set_row_encoder(&mut self, encoder: crate::model::record::RowEncoder) {
        self.encoder = Some(encoder);
    }

    /// The access index in use, if any.
    pub fn access(&self) -> Option<&AccessIndex> {
        self.access
            .as_ref()
            .filter(|_| self.path == ReadPath::Indexed)
    }

    /// The partitions of a source-lane in day order.
    fn lane(&self, source: SourceId, lane: Lane) -> Arc<[PartitionEntry]> {
        self.lanes
            .get(&(source, lane))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }

    pub fn version(&self) -> &str {
        &self.version
    }
    /// The sources this version holds, sorted (what `Manifest::held_sources` derives).
    pub fn held_sources(&self) -> &[SourceId] {
        &self.held_sources
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    pub fn store(&self) -> &CorpusStore {
        &self.store
    }
    pub fn identity(&self) -> &IdentityIndex {
        &self.identity
    }
    #[cfg(any(test, feature = "oracle"))]
    fn url_of(&self, p: &PartitionEntry) -> String {
        format!("{}{}", self.store.url(), p.path)
    }

    /// Reads `supersedes` of every partition through DataFusion: the reference the
    /// per-partition gathering at load is held to.
    #[cfg(test)]
    async fn scan_supersessions(&self) -> Result<Superseded> {
        use crate::model::clock::Instant;
        use datafusion::logical_expr::col;
        let files = self.partition_urls(|_| true);
        let mut map = Superseded::default();
        if files.is_empty() {
            return Ok(map);
        }
        let df = read_partitions(&self.ctx, files)
            .await?
            .filter(col("supersedes").is_not_null())?
            .select_columns(&["supersedes", "committed_at"])?;
        for batch in df.collect().await? {
            let sup = batch
                .column(0)
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .ok_or_else(|| Error::integrity("partitions", "supersedes is not utf8"))?;
            let at = batch
                .column(1)
                .as_any()
                .downcast_ref::<arrow::array::TimestampMicrosecondArray>()
                .ok_or_else(|| Error::integrity("partitions", "committed_at is not a timestamp"))?;
            for i in 0..batch.num_rows() {
                let when = Instant::from_micros(at.value(i));
                map.entry(sup.value(i).to_owned())
                    .and_modify(|w: &mut Instant| *w = (*w).min(when))
                    .or_insert(when);
            }
        }
        Ok(map)
    }

    /// Coverage view of a source-lane.
    pub fn source_coverage<'a>(
        &'a self,
        source: SourceId,
        lane: Lane,
        scope: Scope<'a>,
    ) -> SourceCoverage<'a> {
        match scope {
            Scope::Corpus => SourceCoverage::with_day_table(
                &self.manifest,
                source,
                lane,
                self.day_tables.get(&(source, lane)),
            ),
            Scope::Sample(_) => SourceCoverage::new(&self.manifest, source, lane, scope),
        }
    }

    /// Partitions of a source-lane, for SQL registration and file delivery.
    pub fn partitions(&self) -> &[PartitionEntry] {
        &self.manifest.partitions
    }

    #[cfg(any(test, feature = "oracle"))]
    pub(crate) fn partition_urls(&self, filter: impl Fn(&PartitionEntry) -> bool) -> Vec<String> {
        self.manifest
            .partitions
            .iter()
            .filter(|p| filter(p))
            .map(|p| self.url_of(p))
            .collect()
    }
}

/// A DataFrame over partition files in the partitions' schema.
#[cfg(any(test, feature = "oracle"))]
async fn read_partitions(
    ctx: &datafusion::prelude::SessionContext,
    files: Vec<String>,
) -> Result<datafusion::dataframe::DataFrame> {
    use datafusion::datasource::file_format::options::ParquetReadOptions;
    let schema = crate::model::record::schema();
    let opts = ParquetReadOptions::default()
        .schema(&schema)
        .skip_metadata(false);
    Ok(ctx.read_parquet(files, opts).await?)
}

/// Normalises a CIK: digits only, leading zeros dropped. `None` when it is not a CIK.
pub fn normalize_cik(s: &str) -> Option<String> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let t = s.trim_start_matches('0');
    if t.is_empty() {
        None
    } else {
        Some(t.to_owned())
    }
}
