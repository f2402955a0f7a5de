//! A loaded corpus version and the queries it answers: as-of news, diff, single record,
//! coverage certificates and identity. No HTTP here: the server and the CLI both call these.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::file_format::options::ParquetReadOptions;
use datafusion::logical_expr::{col, lit};
use datafusion::prelude::{SessionConfig, SessionContext};
use serde::Serialize;

use crate::access::{AccessIndex, Bounds};
use crate::clock::{Day, Instant, Lane, SourceId, VisibleBy};
use crate::coverage::{Coverage, DayStatus, DayTable, Scope, SourceCoverage, day_key};
use crate::cut::{Cut, ts};
use crate::error::{Error, Result};
use crate::identity::{IdentityFile, IdentityIndex, Mapping, ticker_hole_key};
use crate::manifest::{Manifest, PartitionEntry};
use crate::read::read_identity;
use crate::record::{NewsRow, from_batch, schema};
use crate::store::CorpusStore;

/// Which entities a news query asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity {
    /// All rows of the selected source.
    All,
    /// One CIK (normalised: no leading zeros).
    Cik(String),
    /// A ticker, resolved to CIKs through identity-as-of at the cut.
    Ticker(String),
}

/// A keyset position: the last row of the previous page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Position {
    pub published_at: Option<Instant>,
    pub id: String,
}

/// An as-of cut (news) or a became-knowable window (diff, when `start` is set).
#[derive(Debug, Clone)]
pub struct NewsQuery {
    pub source: SourceId,
    pub lane: Lane,
    pub visible_by: VisibleBy,
    /// Exclusive start of a diff window; `None` for a plain cut.
    pub start: Option<Instant>,
    /// The cut (inclusive end of a diff window).
    pub as_of: Instant,
    pub entity: Entity,
    pub after: Option<Position>,
    pub limit: usize,
}

/// One page of an answer, or a coverage hole.
#[derive(Debug, Clone)]
pub enum Answer<T> {
    Page {
        rows: Vec<T>,
        next: Option<Position>,
        coverage: Coverage,
    },
    Hole {
        coverage: Coverage,
    },
}

/// The outcome of a single-record lookup.
#[derive(Debug, Clone)]
pub enum RecordLookup {
    Visible(Box<NewsRow>),
    /// The record exists but its clock is after the cut (or null): not knowable yet.
    NotYetVisible,
    NotFound,
}

/// A coverage certificate: one per source-lane-day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Certificate {
    pub key: String,
    pub source_id: SourceId,
    pub lane: Lane,
    pub date: Day,
    /// `certified`, or `missing` (never certified, or certified only after the cut).
    pub status: &'static str,
    /// Rows of a certified day (0 for a complete empty day); null when missing.
    pub row_count: Option<u64>,
    /// Rows the corpus holds for a day it does not certify (partial, never a count).
    pub rows_held: u64,
    pub certified_at: Option<Instant>,
    pub partition: Option<PartitionRef>,
    pub evidence: Vec<crate::manifest::Evidence>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PartitionRef {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// Coverage listing request.
#[derive(Debug, Clone)]
pub struct CoverageQuery {
    pub source: Option<SourceId>,
    pub date: Option<Day>,
    /// The one lane answered (lanes are never mixed in one answer: a certificate's key names
    /// a source-day, whatever its lane).
    pub lane: Lane,
    pub as_of: Option<Instant>,
    /// Position: the last certificate of the previous page.
    pub after: Option<(SourceId, Lane, Day)>,
    pub limit: usize,
}

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

    /// The paged as-of query (a diff when `q.start` is set).
    pub async fn news(&self, q: &NewsQuery, scope: Scope<'_>) -> Result<Answer<NewsRow>> {
        if let Some(start) = q.start
            && start >= q.as_of
        {
            return Err(Error::invalid(
                "as_of_start",
                "as_of_start must be before as_of_end",
            ));
        }
        let cov_view = self.source_coverage(q.source, q.lane, scope);
        let mut coverage = match q.start {
            Some(start) => cov_view.window(q.visible_by, start, q.as_of),
            None => cov_view.cut(q.visible_by, q.as_of),
        };
        let ciks: Option<Vec<String>> = match &q.entity {
            Entity::All => None,
            Entity::Cik(c) => Some(vec![c.clone()]),
            Entity::Ticker(t) => {
                let found = self.identity.ticker_at(t, q.as_of);
                let key = ticker_hole_key(t, q.as_of);
                if found.is_empty() {
                    coverage.missing.insert(0, key);
                    coverage.missing_total += 1;
                    coverage.missing.truncate(crate::coverage::MAX_MISSING_KEYS);
                } else {
                    coverage.touch(key);
                }
                let mut ciks: Vec<String> = found.into_iter().map(|m| m.cik).collect();
                ciks.dedup();
                Some(ciks)
            }
        };
        if !coverage.is_complete() {
            return Ok(Answer::Hole { coverage });
        }
        let mut rows = match (self.access(), &ciks, scope) {
            (Some(a), Some(ciks), Scope::Corpus) if a.covers(q.source, q.lane) => {
                self.fetch_indexed(a, q, ciks).await?
            }
            _ => self.fetch_scan(q, ciks.as_deref(), scope).await?,
        };
        let next = if rows.len() > q.limit {
            rows.truncate(q.limit);
            rows.last().map(|r| Position {
                published_at: r.published_at,
                id: r.id.clone(),
            })
        } else {
            None
        };
        for r in &rows {
            if let Some(d) = r.partition_day() {
                coverage.touch(day_key(r.source_id, d));
            }
        }
        Ok(Answer::Page {
            rows,
            next,
            coverage,
        })
    }

    /// Whether a row belongs to the answer of `q` (any CIK): the exact predicate the scan
    /// expresses in DataFusion, for rows the index path reads.
    fn keeps(&self, q: &NewsQuery, r: &NewsRow) -> bool {
        if !Cut::of(q).admits(r, &self.superseded) {
            return false;
        }
        match &q.after {
            None => true,
            Some(pos) => match (r.published_at, pos.published_at) {
                (Some(a), Some(p)) => a > p || (a == p && r.id > pos.id),
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (None, None) => r.id > pos.id,
            },
        }
    }

    /// The first `limit + 1` rows of `q` for `ciks`, read through the access index.
    async fn fetch_indexed(
        &self,
        access: &AccessIndex,
        q: &NewsQuery,
        ciks: &[String],
    ) -> Result<Vec<NewsRow>> {
        let by_pub = q.visible_by == VisibleBy::PublishedAt;
        let mut lower = match &q.after {
            Some(Position {
                published_at: Some(p),
                ..
            }) => Some(p.micros()),
            _ => None,
        };
        if by_pub && let Some(s) = q.start {
            lower = Some(lower.map_or(s.micros() + 1, |l| l.max(s.micros() + 1)));
        }
        let bounds = Bounds {
            lower,
            upper: by_pub.then(|| q.as_of.micros()),
            dated_only: by_pub,
            after_nulls: matches!(
                q.after,
                Some(Position {
                    published_at: None,
                    ..
                })
            ),
        };
        let keep = |r: &NewsRow| self.keeps(q, r);
        let mut rows = Vec::new();
        for cik in ciks {
            rows.extend(
                access
                    .first_rows(
                        &self.store,
                        q.source,
                        q.lane,
                        cik,
                        bounds,
                        q.limit + 1,
                        &keep,
                    )
                    .await?,
            );
        }
        if ciks.len() > 1 {
            rows.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
            rows.truncate(q.limit + 1);
        }
        Ok(rows)
    }

    /// The first `limit + 1` rows of `q`, scanned by DataFusion over the partitions.
    async fn fetch_scan(
        &self,
        q: &NewsQuery,
        ciks: Option<&[String]>,
        scope: Scope<'_>,
    ) -> Result<Vec<NewsRow>> {
        let _slot = self.scans.enter().await?;
        let files: Vec<String> = self
            .manifest
            .partitions
            .iter()
            .filter(|p| p.source_id == q.source && p.lane == q.lane)
            // The public sample answers only from the days it has read.
            .filter(|p| match scope {
                Scope::Sample(set) => set.days.contains(&p.date),
                Scope::Corpus => true,
            })
            .filter(|p| {
                let s = p.clocks.get(q.visible_by);
                s.min.is_some_and(|m| m <= q.as_of)
                    && q.start.is_none_or(|st| s.max.is_some_and(|m| m > st))
            })
            .filter(|p| match &q.after {
                // Every row of a partition whose newest publication precedes the position is
                // on an earlier page.
                Some(Position {
                    published_at: Some(pos),
                    ..
                }) => {
                    let s = &p.clocks.published_at;
                    s.nulls > 0 || s.max.is_some_and(|m| m >= *pos)
                }
                Some(Position {
                    published_at: None, ..
                }) => p.clocks.published_at.nulls > 0,
                None => true,
            })
            .map(|p| self.url_of(p))
            .collect();
        if files.is_empty() || ciks.is_some_and(<[String]>::is_empty) {
            return Ok(vec![]);
        }
        let mut pred = Cut::of(q).expr(&self.superseded);
        if let Some(ciks) = ciks {
            pred =
                pred.and(col("cik").in_list(ciks.iter().map(|c| lit(c.clone())).collect(), false));
        }
        if let Some(pos) = &q.after {
            let p = col("published_at");
            pred = pred.and(match pos.published_at {
                Some(at) => p
                    .clone()
                    .gt(ts(at))
                    .or(p.clone().eq(ts(at)).and(col("id").gt(lit(pos.id.clone()))))
                    .or(p.is_null()),
                None => p.is_null().and(col("id").gt(lit(pos.id.clone()))),
            });
        }
        let df = self
            .read(files)
            .await?
            .filter(pred)?
            .sort(vec![
                col("published_at").sort(true, false),
                col("id").sort(true, true),
            ])?
            .limit(0, Some(q.limit + 1))?;
        let mut rows = Vec::with_capacity(q.limit + 1);
        for b in df.collect().await? {
            rows.extend(from_batch(&b)?);
        }
        Ok(rows)
    }

    /// One record by id, as of a cut on a clock.
    pub async fn record(
        &self,
        id: &str,
        as_of: Instant,
        visible_by: VisibleBy,
    ) -> Result<RecordLookup> {
        let mut revisions = match self.access() {
            // EDGAR ids are `<accession>_<cik>`: the CIK names the runs that can hold the id.
            Some(a) if a.covers_all(&self.manifest) => match id.rsplit_once('_') {
                Some((_, cik)) if normalize_cik(cik).as_deref() == Some(cik) => {
                    a.revisions(&self.store, cik, id).await?
                }
                // Not an EDGAR id, so not in any EDGAR partition: scan the other sources only.
                _ => {
                    self.scan_revisions(id, |p| p.source_id != SourceId::SecEdgar)
                        .await?
                }
            },
            _ => self.scan_revisions(id, |_| true).await?,
        };
        // Oldest commit first, so the first current revision found is the one in force.
        revisions.sort_by(|a, b| {
            (a.committed_at, &a.revision_id).cmp(&(b.committed_at, &b.revision_id))
        });
        if revisions.is_empty() {
            return Ok(RecordLookup::NotFound);
        }
        let cut = Cut::at(as_of, visible_by);
        let current = revisions
            .into_iter()
            .find(|r| cut.knows(r) && cut.in_force(self.superseded.get(&r.revision_id).copied()));
        Ok(match current {
            Some(r) if cut.sees(&r) => RecordLookup::Visible(Box::new(r)),
            _ => RecordLookup::NotYetVisible,
        })
    }

    /// Every stored revision of one record id, scanned by DataFusion over all partitions.
    async fn scan_revisions(
        &self,
        id: &str,
        keep: impl Fn(&PartitionEntry) -> bool,
    ) -> Result<Vec<NewsRow>> {
        let files = self.partition_urls(keep);
        if files.is_empty() {
            return Ok(vec![]);
        }
        let _slot = self.scans.enter().await?;
        let df = self
            .read(files)
            .await?
            .filter(col("id").eq(lit(id.to_owned())))?;
        let mut revisions = Vec::new();
        for b in df.collect().await? {
            revisions.extend(from_batch(&b)?);
        }
        Ok(revisions)
    }

    /// Coverage certificates, paged by `(source, lane, date)`.
    pub fn coverage(
        &self,
        q: &CoverageQuery,
    ) -> Result<(Vec<Certificate>, Option<(SourceId, Lane, Day)>)> {
        let mut keys: Vec<(SourceId, Lane, Day)> = Vec::new();
        let sources: Vec<SourceId> = match q.source {
            Some(s) => vec![s],
            None => self.manifest.held_sources(),
        };
        let as_of_day = q.as_of.map(Instant::day);
        let lane = q.lane;
        for &source in &sources {
            if let Some(date) = q.date {
                keys.push((source, lane, date));
                continue;
            }
            if let Some(span) = self.manifest.span(source, lane) {
                let mut d = span.first;
                let last = as_of_day.map_or(span.last, |a| a.min(span.last));
                while d <= last {
                    keys.push((source, lane, d));
                    d = d.next();
                }
            }
        }
        keys.sort();
        let start = match q.after {
            Some(pos) => keys.partition_point(|k| *k <= pos),
            None => 0,
        };
        let page: Vec<_> = keys[start..].iter().take(q.limit + 1).copied().collect();
        let more = page.len() > q.limit;
        let certs: Vec<Certificate> = page
            .iter()
            .take(q.limit)
            .map(|&(s, l, d)| self.certificate(s, l, d, q.as_of))
            .collect();
        let next = if more {
            page.get(q.limit - 1).copied()
        } else {
            None
        };
        Ok((certs, next))
    }

    /// The certificate of one source-lane-day, as known at `as_of` (latest when `None`).
    pub fn certificate(
        &self,
        source: SourceId,
        lane: Lane,
        date: Day,
        as_of: Option<Instant>,
    ) -> Certificate {
        let view = self.source_coverage(source, lane, Scope::Corpus);
        // Coverage listings are cuts on what the corpus had committed: a certification made
        // after `as_of` is not yet in force.
        let status = view.status(
            date,
            VisibleBy::CommittedAt,
            as_of.unwrap_or(Instant::from_micros(i64::MAX)),
        );
        let part = self
            .manifest
            .partitions
            .iter()
            .find(|p| p.source_id == source && p.lane == lane && p.date == date);
        let cert = self
            .manifest
            .certifications
            .iter()
            .filter(|c| c.source_id == source && c.lane == lane && c.from <= date && date <= c.to)
            .min_by_key(|c| c.certified_at);
        let certified = status == DayStatus::Certified;
        Certificate {
            key: day_key(source, date),
            source_id: source,
            lane,
            date,
            status: if certified { "certified" } else { "missing" },
            row_count: certified.then(|| part.map_or(0, |p| p.row_count)),
            rows_held: part.map_or(0, |p| p.row_count),
            certified_at: cert.filter(|_| certified).map(|c| c.certified_at),
            partition: part.map(|p| PartitionRef {
                path: p.path.clone(),
                sha256: p.sha256.clone(),
                bytes: p.bytes,
            }),
            evidence: cert
                .filter(|_| certified)
                .map(|c| c.evidence.clone())
                .unwrap_or_default(),
        }
    }

    /// Intervals placing `ticker` at `as_of`; `Err(key)` is an identity hole.
    pub fn mapping_ticker(
        &self,
        ticker: &str,
        as_of: Instant,
    ) -> std::result::Result<Vec<Mapping>, String> {
        let m = self.identity.ticker_at(ticker, as_of);
        if m.is_empty() {
            Err(ticker_hole_key(ticker, as_of))
        } else {
            Ok(m)
        }
    }

    /// Intervals placing any ticker on `cik` at `as_of` (may be empty: a CIK with no ticker).
    pub fn mapping_cik(&self, cik: &str, as_of: Instant) -> Vec<Mapping> {
        self.identity.cik_at(cik, as_of)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::{ChangeSet, publish};
    use crate::testkit::{cert, corpus, edgar, t};

    fn q(as_of: &str) -> NewsQuery {
        NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: t(as_of),
            entity: Entity::All,
            after: None,
            limit: 100,
        }
    }

    fn ids(a: &Answer<NewsRow>) -> Vec<String> {
        match a {
            Answer::Page { rows, .. } => rows.iter().map(|r| r.id.clone()).collect(),
            Answer::Hole { coverage } => panic!("unexpected hole: {:?}", coverage.missing),
        }
    }

    /// January certified in both lanes. Certified (committed) on Jan 1 so that `committed_at`
    /// cuts during January see the certification; a later `certified_at` would make them holes.
    fn january() -> Vec<crate::manifest::Certification> {
        vec![
            cert(
                Lane::CertifiedPit,
                "2026-01-01",
                "2026-01-31",
                "2026-01-01T00:00:00Z",
            ),
            cert(
                Lane::ForwardFirstSeen,
                "2026-01-01",
                "2026-01-31",
                "2026-01-01T00:00:00Z",
            ),
        ]
    }

    #[tokio::test]
    async fn cut_returns_rows_at_or_before_as_of_sorted_by_published_then_id() {
        let rows = vec![
            edgar(
                "0000000001-26-000003",
                "1",
                Some("2026-01-10T15:00:00Z"),
                "2026-01-20T00:00:00Z",
            ),
            edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-10T15:00:00Z"),
                "2026-01-20T00:00:00Z",
            ),
            edgar(
                "0000000001-26-000002",
                "1",
                Some("2026-01-05T09:00:00Z"),
                "2026-01-20T00:00:00Z",
            ),
            edgar(
                "0000000001-26-000004",
                "1",
                Some("2026-01-12T09:00:00Z"),
                "2026-01-20T00:00:00Z",
            ),
        ];
        let (_d, _s, c) = corpus(rows, january()).await;
        let a = c
            .news(&q("2026-01-10T15:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        assert_eq!(
            ids(&a),
            vec![
                "0000000001-26-000002_1",
                "0000000001-26-000001_1",
                "0000000001-26-000003_1"
            ]
        );
    }

    #[tokio::test]
    async fn a_complete_cut_with_no_rows_is_an_empty_page_not_a_hole() {
        let rows = vec![edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-20T15:00:00Z"),
            "2026-01-20T16:00:00Z",
        )];
        let (_d, _s, c) = corpus(rows, january()).await;
        let a = c
            .news(&q("2026-01-15T00:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        assert!(
            matches!(&a, Answer::Page { rows, coverage, .. } if rows.is_empty() && coverage.is_complete())
        );
        let hole = c
            .news(&q("2026-02-02T00:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        assert!(
            matches!(&hole, Answer::Hole { coverage } if coverage.missing == vec!["sec.edgar/2026-02-01", "sec.edgar/2026-02-02"])
        );
    }

    #[tokio::test]
    async fn null_clock_rows_are_never_visible_on_that_clock() {
        let rows = vec![edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-05T09:00:00Z"),
            "2026-01-06T00:00:00Z",
        )];
        let (_d, _s, c) = corpus(rows, january()).await;
        // available_at is null on these certified rows and is never imputed: the cut is refused
        // as an availability hole instead of answering as if nothing were available.
        let mut query = q("2026-01-20T00:00:00Z");
        query.visible_by = VisibleBy::AvailableAt;
        let a = c.news(&query, Scope::Corpus).await.unwrap();
        assert!(
            matches!(&a, Answer::Hole { coverage } if coverage.missing == vec!["availability.sec.edgar/2026-01-05"])
        );
    }

    #[tokio::test]
    async fn lanes_are_never_mixed_in_one_answer() {
        let mut fwd = edgar(
            "0000000001-26-000009",
            "1",
            Some("2026-01-05T09:00:00Z"),
            "2026-01-05T09:01:00Z",
        );
        fwd.lane = Lane::ForwardFirstSeen;
        fwd.available_at = Some(t("2026-01-05T09:01:00Z"));
        fwd.availability_basis = "local_first_seen".into();
        let rows = vec![
            edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-05T09:00:00Z"),
                "2026-01-06T00:00:00Z",
            ),
            fwd,
        ];
        let (_d, _s, c) = corpus(rows, january()).await;
        assert_eq!(
            ids(&c
                .news(&q("2026-01-20T00:00:00Z"), Scope::Corpus)
                .await
                .unwrap()),
            vec!["0000000001-26-000001_1"]
        );
        let mut fq = q("2026-01-20T00:00:00Z");
        fq.lane = Lane::ForwardFirstSeen;
        assert_eq!(
            ids(&c.news(&fq, Scope::Corpus).await.unwrap()),
            vec!["0000000001-26-000009_1"]
        );
        fq.visible_by = VisibleBy::AvailableAt;
        assert_eq!(
            ids(&c.news(&fq, Scope::Corpus).await.unwrap()),
            vec!["0000000001-26-000009_1"]
        );
    }

    #[tokio::test]
    async fn diff_excludes_rows_visible_at_start_and_equals_the_set_difference_of_two_cuts() {
        let rows: Vec<NewsRow> = (1..=9)
            .map(|i| {
                edgar(
                    &format!("0000000001-26-00000{i}"),
                    "1",
                    Some(&format!("2026-01-0{i}T12:00:00Z")),
                    "2026-01-10T00:00:00Z",
                )
            })
            .collect();
        let (_d, _s, c) = corpus(rows, january()).await;
        let mut d = q("2026-01-07T12:00:00Z");
        d.start = Some(t("2026-01-03T12:00:00Z"));
        let diff = ids(&c.news(&d, Scope::Corpus).await.unwrap());
        let end = ids(&c
            .news(&q("2026-01-07T12:00:00Z"), Scope::Corpus)
            .await
            .unwrap());
        let start = ids(&c
            .news(&q("2026-01-03T12:00:00Z"), Scope::Corpus)
            .await
            .unwrap());
        let expected: Vec<String> = end.into_iter().filter(|i| !start.contains(i)).collect();
        assert_eq!(diff, expected);
        assert_eq!(
            diff.first().map(String::as_str),
            Some("0000000001-26-000004_1"),
            "the row at as_of_start is excluded"
        );
        assert_eq!(
            diff.last().map(String::as_str),
            Some("0000000001-26-000007_1"),
            "the row at as_of_end is included"
        );
    }

    #[tokio::test]
    async fn keyset_pages_walk_to_the_same_rows_as_one_large_page_with_nulls_last() {
        let mut rows: Vec<NewsRow> = (0..23)
            .map(|i| {
                edgar(
                    &format!("0000000001-26-0000{i:02}"),
                    "1",
                    Some(&format!("2026-01-{:02}T12:00:00Z", 1 + i % 5)),
                    "2026-01-10T00:00:00Z",
                )
            })
            .collect();
        // A row with no publication instant sorts after every dated row (visible by commit).
        rows.push(edgar(
            "0000000001-26-000099",
            "1",
            None,
            "2026-01-10T00:00:00Z",
        ));
        let (_d, _s, c) = corpus(rows, january()).await;
        let mut all = q("2026-01-20T00:00:00Z");
        all.visible_by = VisibleBy::CommittedAt;
        all.limit = 1000;
        let one = ids(&c.news(&all, Scope::Corpus).await.unwrap());
        assert_eq!(one.len(), 24);
        assert_eq!(
            one.last().map(String::as_str),
            Some("0000000001-26-000099_1")
        );
        let mut walked = Vec::new();
        let mut page = all.clone();
        page.limit = 5;
        loop {
            match c.news(&page, Scope::Corpus).await.unwrap() {
                Answer::Page { rows, next, .. } => {
                    walked.extend(rows.into_iter().map(|r| r.id));
                    match next {
                        Some(p) => page.after = Some(p),
                        None => break,
                    }
                }
                Answer::Hole { .. } => panic!("hole"),
            }
        }
        assert_eq!(walked, one);
    }

    #[tokio::test]
    async fn committed_at_cut_before_a_correction_returns_the_old_revision_and_after_it_the_new() {
        let (_d, store, _) = corpus(
            vec![edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-05T16:46:18Z"),
                "2026-01-06T00:00:00Z",
            )],
            january(),
        )
        .await;
        let corrected = edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-05T21:46:18Z"),
            "2026-01-20T00:00:00Z",
        );
        publish(
            &store,
            ChangeSet {
                rows: vec![corrected],
                ..Default::default()
            },
            t("2026-03-02T00:00:00Z"),
        )
        .await
        .unwrap();
        let c = Corpus::open(store).await.unwrap();
        let by_commit = |at: &str| {
            let mut query = q(at);
            query.visible_by = VisibleBy::CommittedAt;
            query
        };
        let before = c
            .news(&by_commit("2026-01-10T00:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        let after = c
            .news(&by_commit("2026-01-25T00:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        let (Answer::Page { rows: b, .. }, Answer::Page { rows: a, .. }) = (before, after) else {
            panic!("hole")
        };
        assert_eq!(b.len(), 1);
        assert_eq!(a.len(), 1);
        assert_eq!(b[0].published_at, Some(t("2026-01-05T16:46:18Z")));
        assert_eq!(a[0].published_at, Some(t("2026-01-05T21:46:18Z")));
        assert_eq!(a[0].supersedes.as_deref(), Some(b[0].revision_id.as_str()));
        // On the publication clock the current revision answers alone.
        let p = c
            .news(&q("2026-01-05T18:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        assert!(
            ids(&p).is_empty(),
            "the superseded earlier instant no longer makes the row visible"
        );
        match c
            .record(
                "0000000001-26-000001_1",
                t("2026-01-10T00:00:00Z"),
                VisibleBy::CommittedAt,
            )
            .await
            .unwrap()
        {
            RecordLookup::Visible(r) => assert_eq!(r.revision_id, b[0].revision_id),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn single_record_tells_not_yet_visible_from_not_found() {
        let (_d, _s, c) = corpus(
            vec![edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-05T09:00:00Z"),
                "2026-01-06T00:00:00Z",
            )],
            january(),
        )
        .await;
        assert!(matches!(
            c.record(
                "0000000001-26-000001_1",
                t("2026-01-05T08:59:59Z"),
                VisibleBy::PublishedAt
            )
            .await
            .unwrap(),
            RecordLookup::NotYetVisible
        ));
        assert!(matches!(
            c.record(
                "0000000001-26-000001_1",
                t("2026-01-05T09:00:00Z"),
                VisibleBy::PublishedAt
            )
            .await
            .unwrap(),
            RecordLookup::Visible(_)
        ));
        assert!(matches!(
            c.record("nope", t("2026-01-05T09:00:00Z"), VisibleBy::PublishedAt)
                .await
                .unwrap(),
            RecordLookup::NotFound
        ));
    }

    #[tokio::test]
    async fn coverage_certificates_give_zero_for_empty_certified_days_and_null_for_holes() {
        let rows = vec![edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-05T09:00:00Z"),
            "2026-01-06T00:00:00Z",
        )];
        let (_d, _s, c) = corpus(
            rows,
            vec![
                cert(
                    Lane::CertifiedPit,
                    "2026-01-04",
                    "2026-01-05",
                    "2026-01-06T00:00:00Z",
                ),
                cert(
                    Lane::CertifiedPit,
                    "2026-01-07",
                    "2026-01-07",
                    "2026-01-08T00:00:00Z",
                ),
            ],
        )
        .await;
        let (certs, next) = c
            .coverage(&CoverageQuery {
                source: Some(SourceId::SecEdgar),
                date: None,
                lane: Lane::CertifiedPit,
                as_of: None,
                after: None,
                limit: 10,
            })
            .unwrap();
        let got: Vec<(String, Option<u64>)> = certs
            .iter()
            .map(|c| (c.date.to_string(), c.row_count))
            .collect();
        assert_eq!(
            got,
            vec![
                ("2026-01-04".into(), Some(0)),
                ("2026-01-05".into(), Some(1)),
                ("2026-01-06".into(), None),
                ("2026-01-07".into(), Some(0))
            ]
        );
        assert!(next.is_none());
        let (page, next) = c
            .coverage(&CoverageQuery {
                source: Some(SourceId::SecEdgar),
                date: None,
                lane: Lane::CertifiedPit,
                as_of: None,
                after: None,
                limit: 2,
            })
            .unwrap();
        assert_eq!(page.len(), 2);
        let (rest, _) = c
            .coverage(&CoverageQuery {
                source: Some(SourceId::SecEdgar),
                date: None,
                lane: Lane::CertifiedPit,
                as_of: None,
                after: next,
                limit: 10,
            })
            .unwrap();
        assert_eq!(
            rest.iter().map(|c| c.date.to_string()).collect::<Vec<_>>(),
            vec!["2026-01-06", "2026-01-07"]
        );
        let (one, _) = c
            .coverage(&CoverageQuery {
                source: Some(SourceId::SecEdgar),
                date: Some("2025-06-01".parse().unwrap()),
                lane: Lane::CertifiedPit,
                as_of: None,
                after: None,
                limit: 10,
            })
            .unwrap();
        assert_eq!(
            (one[0].status, one[0].row_count),
            ("missing", None),
            "an uningested day is a missing certificate"
        );
    }
}
