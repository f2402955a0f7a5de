//! A loaded corpus version and the queries it answers, one file per operation: as-of news and
//! diff (`news.rs`), single records (`record.rs`), coverage certificates (`coverage.rs`),
//! identity mappings (`mapping.rs`) and the version's partitions as flat files (`files.rs`).
//! This file loads a version and holds what they share. No HTTP here: the server and the CLI
//! both call these.

mod coverage;
mod files;
#[cfg(test)]
mod laws;
mod mapping;
mod news;
mod record;

pub use coverage::{Certificate, CoverageQuery, PartitionRef};
pub use files::{FileEntry, FilePosition, FilesQuery};
pub use news::{Answer, Entity, NewsQuery, Position};
pub use record::RecordLookup;

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::file_format::options::ParquetReadOptions;
use datafusion::logical_expr::col;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::access::AccessIndex;
use crate::clock::{Instant, Lane, SourceId};
use crate::coverage::{DayTable, Scope, SourceCoverage};
use crate::error::{Error, Result};
use crate::identity::{IdentityFile, IdentityIndex};
use crate::manifest::{Manifest, PartitionEntry};
use crate::read::read_identity;
use crate::record::schema;
use crate::store::CorpusStore;

pub struct Corpus {
    store: CorpusStore,
    version: String,
    manifest: Manifest,
    identity: IdentityIndex,
    /// Superseded revision id → commit instant of the revision that superseded it.
    superseded: HashMap<String, Instant>,
    ctx: SessionContext,
    /// The access-file index, when the version lists access files.
    access: Option<AccessIndex>,
    /// Whether by-CIK queries and record lookups go through `access` (on by default).
    use_access: bool,
    /// Per-day certification tables of every certified source-lane.
    day_tables: HashMap<(SourceId, Lane), DayTable>,
    /// Bounds concurrent DataFusion scans (shared with the process's other versions).
    scans: crate::ScanGate,
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
        let identity = match manifest.identity.first() {
            Some(e) => read_identity(&store, e).await?,
            None => IdentityFile::default(),
        };
        let config = SessionConfig::new()
            .with_target_partitions(2)
            .with_batch_size(8192);
        let ctx = SessionContext::new_with_config(config);
        ctx.register_object_store(store.url(), store.object_store());
        let mut corpus = Corpus {
            store,
            version: version.to_owned(),
            manifest,
            identity: IdentityIndex::new(identity)?,
            superseded: HashMap::new(),
            ctx,
            access: None,
            use_access: true,
            day_tables: HashMap::new(),
            scans: crate::ScanGate::unbounded(),
        };
        corpus.day_tables = corpus
            .manifest
            .spans
            .iter()
            .filter_map(|s| {
                DayTable::build(&corpus.manifest, s.source_id, s.lane)
                    .map(|t| ((s.source_id, s.lane), t))
            })
            .collect();
        corpus.access = AccessIndex::load(&corpus.store, &corpus.manifest).await?;
        corpus.superseded = match &corpus.access {
            // Sidecars carry the supersessions of their rows: no column scan at start.
            Some(a) if a.covers_all(&corpus.manifest) => {
                let mut map = HashMap::new();
                for (rev, at) in a.supersessions() {
                    map.entry(rev.to_owned())
                        .and_modify(|w: &mut Instant| *w = (*w).min(at))
                        .or_insert(at);
                }
                map
            }
            _ => corpus.load_supersessions().await?,
        };
        Ok(corpus)
    }

    /// Turns the access-file path on or off. Off, every answer comes from the DataFusion scan
    /// over partitions; differential tests and benchmarks compare the two.
    pub fn set_use_access(&mut self, on: bool) {
        self.use_access = on;
    }

    /// Bounds this corpus's DataFusion scans by `gate` (a server shares one gate between the
    /// versions it serves); unbounded by default.
    pub fn set_scan_gate(&mut self, gate: crate::ScanGate) {
        self.scans = gate;
    }

    /// The access index in use, if any.
    pub fn access(&self) -> Option<&AccessIndex> {
        self.access.as_ref().filter(|_| self.use_access)
    }

    pub fn version(&self) -> &str {
        &self.version
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
    pub fn session(&self) -> &SessionContext {
        &self.ctx
    }

    fn url_of(&self, p: &PartitionEntry) -> String {
        format!("{}{}", self.store.url(), p.path)
    }

    /// Reads `supersedes` of every partition once at load: the (small) set of revisions that
    /// later revisions replaced.
    async fn load_supersessions(&self) -> Result<HashMap<String, Instant>> {
        let files = self.partition_urls(|_| true);
        let mut map = HashMap::new();
        if files.is_empty() {
            return Ok(map);
        }
        let df = self
            .read(files)
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

    async fn read(&self, files: Vec<String>) -> Result<datafusion::dataframe::DataFrame> {
        let schema = schema();
        let opts = ParquetReadOptions::default()
            .schema(&schema)
            .skip_metadata(false);
        Ok(self.ctx.read_parquet(files, opts).await?)
    }

    /// Coverage view of a source-lane.
    pub fn source_coverage<'a>(
        &'a self,
        source: SourceId,
        lane: Lane,
        scope: Scope<'a>,
    ) -> SourceCoverage<'a> {
        SourceCoverage::new(&self.manifest, source, lane, scope)
            .with_table(self.day_tables.get(&(source, lane)))
    }

    /// Runs read-only SQL (see [`crate::sql`]).
    pub async fn sql(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        crate::sql::run(self, sql).await
    }

    /// Partitions of a source-lane, for SQL registration and file delivery.
    pub fn partitions(&self) -> &[PartitionEntry] {
        &self.manifest.partitions
    }

    pub(crate) fn partition_urls(&self, filter: impl Fn(&PartitionEntry) -> bool) -> Vec<String> {
        self.manifest
            .partitions
            .iter()
            .filter(|p| filter(p))
            .map(|p| self.url_of(p))
            .collect()
    }

    pub(crate) fn arc_schema(&self) -> Arc<arrow::datatypes::Schema> {
        schema()
    }
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
