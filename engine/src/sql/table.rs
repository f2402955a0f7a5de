//! `news` for SQL: a DataFusion table over a manifest's partitions that knows every file, its
//! size and its statistics from the manifest, so planning reads nothing.
//!
//! Why not DataFusion's listing table: handed 8,573 paths it reads every file's footer at
//! planning to learn what the manifest already says (row counts, clock ranges), keeps them, and
//! at 20M rows a `count(*)` took 2.3 s and 4.4 GB before this (BENCHMARKS.md). Here each file
//! carries exact statistics: `count(*)` is answered from them without opening a file, and a
//! filter on a clock or on the source or lane skips, before any read, every partition that
//! cannot hold a matching row (at planning, and again per file as the scan opens it).

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::pruning::PrunableStatistics;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, DFSchema, ScalarValue, Statistics, project_schema};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;

use crate::model::clock::Instant;
use crate::model::manifest::{ClockStats, PartitionEntry};

/// Bytes read from a partition's end to find its footer in one read: the footers of the
/// corpus's partitions are a few kilobytes (one row group, nineteen columns).
pub(crate) const FOOTER_HINT: usize = 64 * 1024;

/// One partition as the table knows it.
#[derive(Debug)]
struct NewsFile {
    path: String,
    bytes: u64,
    rows: u64,
    stats: Arc<Statistics>,
}

/// Every row of the given partitions, all revisions, as stored.
#[derive(Debug)]
pub struct NewsTable {
    schema: SchemaRef,
    url: ObjectStoreUrl,
    files: Vec<NewsFile>,
}

impl NewsTable {
    /// The partitions `partitions` of the store registered at `store_url`.
    pub fn new(store_url: &url::Url, partitions: &[PartitionEntry]) -> Result<Self> {
        let schema = crate::model::record::schema();
        let url = ObjectStoreUrl::parse(store_url.as_str())?;
        let files = partitions
            .iter()
            .map(|p| {
                Ok(NewsFile {
                    path: p.path.clone(),
                    bytes: p.bytes,
                    rows: p.row_count,
                    stats: Arc::new(file_stats(&schema, p)?),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(NewsTable { schema, url, files })
    }

    /// Whether each file may hold a row matching every one of `filters`, from its statistics
    /// alone (`true` when the filters say nothing the statistics can decide).
    fn may_match(&self, state: &dyn Session, filters: &[Expr]) -> Result<Vec<bool>> {
        let all = vec![true; self.files.len()];
        let Some(expr) = conjunction(filters.iter().cloned()) else {
            return Ok(all);
        };
        let df_schema = DFSchema::try_from(Arc::clone(&self.schema))?;
        // A filter the pruning rewrite cannot take (a UDF, a subquery) prunes nothing here;
        // the scan still applies it to every row.
        let Ok(predicate) = state.create_physical_expr(expr, &df_schema) else {
            return Ok(all);
        };
        let Some(pruning) = PruningPredicateBuilder::new()
            .with_file_schema(Arc::clone(&self.schema))
            .build(predicate)
        else {
            return Ok(all); // nothing the statistics can decide
        };
        let stats = PrunableStatistics::new(
            self.files.iter().map(|f| Arc::clone(&f.stats)).collect(),
            Arc::clone(&self.schema),
        );
        pruning.prune(&stats)
    }
}

fn instant(v: Option<Instant>) -> Precision<ScalarValue> {
    v.map_or(Precision::Absent, |i| {
        Precision::Exact(ScalarValue::TimestampMicrosecond(
            Some(i.micros()),
            Some("UTC".into()),
        ))
    })
}

fn constant(v: &str) -> ColumnStatistics {
    let v = Precision::Exact(ScalarValue::Utf8(Some(v.to_owned())));
    ColumnStatistics::new_unknown()
        .with_null_count(Precision::Exact(0))
        .with_min_value(v.clone())
        .with_max_value(v)
}

/// A partition's exact statistics, from its manifest entry: its row count, each clock's
/// range and nulls, and the source and lane every row of it has. Exact, because DataFusion
/// answers `count(*)`, `min` and `max` from them and treats a column whose minimum is its
/// maximum as that constant; the manifest's figures are checked against the files by
/// `asof verify`.
fn file_stats(schema: &Schema, p: &PartitionEntry) -> Result<Statistics> {
    let mut cols = Statistics::unknown_column(schema);
    for (i, f) in schema.fields().iter().enumerate() {
        if !f.is_nullable() {
            cols[i].null_count = Precision::Exact(0);
        }
    }
    let c = &p.clocks;
    let clocks: [(&str, &ClockStats); 5] = [
        ("event_at", &c.event_at),
        ("published_at", &c.published_at),
        ("available_at", &c.available_at),
        ("acceptance_at", &c.acceptance_at),
        ("committed_at", &c.committed_at),
    ];
    for (name, s) in clocks {
        cols[schema.index_of(name)?] = ColumnStatistics::new_unknown()
            .with_null_count(Precision::Exact(s.nulls as usize))
            .with_min_value(instant(s.min))
            .with_max_value(instant(s.max));
    }
    cols[schema.index_of("source_id")?] = constant(p.source_id.as_str());
    cols[schema.index_of("lane")?] = constant(p.lane.as_str());
    Ok(Statistics {
        num_rows: Precision::Exact(p.row_count as usize),
        // The file's compressed size: an estimate of its decoded bytes, no more.
        total_byte_size: Precision::Inexact(p.bytes as usize),
        column_statistics: cols,
    })
}

#[async_trait]
impl TableProvider for NewsTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Inexact: DataFusion keeps its filter above the scan and hands the filters to the
    /// Parquet reader, which prunes row groups with them and (with `pushdown_filters`) reads
    /// the other columns only for rows that pass; the table prunes files itself in `scan`.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let keep = self.may_match(state, filters)?;
        let mut files = Vec::new();
        let mut rows = 0u64;
        for (f, k) in self.files.iter().zip(keep) {
            if !k {
                continue;
            }
            // Without a filter a LIMIT needs only the files that hold that many rows.
            if filters.is_empty() && limit.is_some_and(|l| rows >= l as u64) {
                break;
            }
            rows += f.rows;
            files.push(
                PartitionedFile::new(f.path.clone(), f.bytes)
                    .with_statistics(Arc::clone(&f.stats))
                    .with_metadata_size_hint(FOOTER_HINT),
            );
        }
        if files.is_empty() {
            return Ok(Arc::new(EmptyExec::new(project_schema(
                &self.schema,
                projection,
            )?)));
        }
        let merged = |fs: &mut dyn Iterator<Item = &PartitionedFile>| {
            Statistics::try_merge_iter(fs.filter_map(|f| f.statistics.as_deref()), &self.schema)
        };
        let table_stats = merged(&mut files.iter())?;
        let groups = FileGroup::new(files)
            .split_files(state.config().target_partitions().max(1))
            .into_iter()
            .map(|g| {
                let s = merged(&mut g.iter())?;
                Ok(g.with_statistics(Arc::new(s)))
            })
            .collect::<Result<Vec<FileGroup>>>()?;
        let source = ParquetSource::new(Arc::clone(&self.schema))
            .with_table_parquet_options(state.default_table_options().parquet)
            .with_metadata_size_hint(FOOTER_HINT);
        let config = FileScanConfigBuilder::new(self.url.clone(), Arc::new(source))
            .with_file_groups(groups)
            .with_statistics(table_stats)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::RecordBatch;
    use arrow::util::pretty::pretty_format_batches;
    use datafusion::datasource::file_format::options::ParquetReadOptions;
    use datafusion::prelude::SessionContext;

    use crate::model::record::NewsRow;
    use crate::testkit::{corpus, counted_store, edgar, january};

    /// Rows over ten January days, a few without `published_at`, one filer in three.
    fn rows() -> Vec<NewsRow> {
        (0..120)
            .map(|i| {
                let published = format!("2026-01-{:02}T{:02}:00:00Z", 10 + i % 10, i % 24);
                edgar(
                    &format!("0000000001-26-{i:06}"),
                    &(1 + i % 3).to_string(),
                    (i % 17 != 0).then_some(published.as_str()),
                    "2026-01-25T00:00:00Z",
                )
            })
            .collect()
    }

    fn text(batches: &[RecordBatch]) -> String {
        pretty_format_batches(batches).unwrap().to_string()
    }

    #[tokio::test]
    async fn a_count_is_answered_from_the_manifest_without_a_read() {
        let (dir, _store, c) = corpus(rows(), january()).await;
        let (counting, store) = counted_store(dir.path());
        let q = "SELECT count(*) AS n, count(committed_at) AS committed FROM news";
        let out = crate::sql::run_on(&store, c.manifest(), q).await.unwrap();
        assert!(text(&out).contains("| 120 | 120       |"), "{}", text(&out));
        assert_eq!(counting.reads(), Default::default(), "nothing read");
        // The clocks' extremes come out right too (read, since a partition of undated rows
        // has no published_at range to answer from).
        let q = "SELECT min(published_at) AS first, max(committed_at) AS last FROM news";
        let t = text(&crate::sql::run_on(&store, c.manifest(), q).await.unwrap());
        assert!(
            t.contains("| 2026-01-10T02:00:00Z | 2026-01-25T00:00:00Z |"),
            "{t}"
        );
    }

    #[tokio::test]
    async fn a_clock_filter_reads_only_the_partitions_that_may_hold_a_match() {
        let (dir, _store, c) = corpus(rows(), january()).await;
        let (counting, store) = counted_store(dir.path());
        let out = crate::sql::run_on(
            &store,
            c.manifest(),
            "SELECT count(*) AS n FROM news WHERE published_at >= '2026-01-18T00:00:00Z'",
        )
        .await
        .unwrap();
        let want = rows()
            .iter()
            .filter(|r| {
                r.published_at
                    .is_some_and(|p| p >= crate::testkit::t("2026-01-18T00:00:00Z"))
            })
            .count();
        assert!(text(&out).contains(&format!("| {want} ")), "{}", text(&out));
        let read: Vec<String> = counting
            .reads_under("snapshots/partitions/")
            .iter()
            .map(|p| {
                let e = c
                    .manifest()
                    .partitions
                    .iter()
                    .find(|e| &e.path == p)
                    .unwrap();
                e.date.to_string()
            })
            .collect();
        assert!(!read.is_empty(), "the matching days are read");
        assert!(
            read.iter().all(|d| d.as_str() >= "2026-01-18"),
            "only days that may hold a match: {read:?}"
        );
    }

    #[tokio::test]
    async fn corrections_join_what_they_correct_in_a_pool_too_small_for_one_whole_side() {
        use futures::TryStreamExt;
        let n = 40_000;
        let row = |i: usize| {
            edgar(
                &format!("0000000001-26-{i:06}"),
                &(1 + i % 50).to_string(),
                Some(&format!("2026-01-{:02}T12:00:00Z", 10 + i % 10)),
                "2026-01-25T00:00:00Z",
            )
        };
        let (_dir, store, _) = corpus((0..n).map(row).collect(), january()).await;
        // One row in a hundred corrected: same id, new title, so it supersedes the first.
        let fixes: Vec<NewsRow> = (0..n)
            .step_by(100)
            .map(|i| {
                let mut r = row(i);
                r.title = format!("8-K/A - corrected {i}");
                r.committed_at = Some(crate::testkit::t("2026-01-26T00:00:00Z"));
                r
            })
            .collect();
        let published = crate::write::publish::publish(
            &store,
            crate::write::publish::ChangeSet {
                rows: fixes,
                ..Default::default()
            },
            crate::testkit::t("2026-03-02T00:00:00Z"),
        )
        .await
        .unwrap();
        assert_eq!(published.rows_added, 400);
        let c = crate::read::corpus::Corpus::open(store.clone())
            .await
            .unwrap();
        assert_eq!(c.version(), published.version);
        let manifest = c.manifest().clone();
        // The revision ids of one whole side are 40,000 × 64 bytes, 2.5 MB: past a 1 MiB
        // pool. The corrections, 400 rows, fit it; the hash table must be built from them.
        let q = "SELECT count(*) AS n, count(DISTINCT b.id) AS corrected \
                 FROM news AS a JOIN news AS b ON a.supersedes = b.revision_id";
        let out: Vec<RecordBatch> = crate::sql::stream_on(&store, &manifest, q, 1 << 20)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let t = text(&out);
        assert!(t.contains("| 400 | 400       |"), "{t}");
    }

    #[tokio::test]
    async fn the_news_table_answers_as_a_listing_table_over_the_same_files() {
        let (dir, store, c) = corpus(rows(), january()).await;
        let listing = SessionContext::new();
        let files: Vec<String> = c
            .manifest()
            .partitions
            .iter()
            .map(|p| format!("{}", dir.path().join(&p.path).display()))
            .collect();
        let df = listing
            .read_parquet(
                files,
                ParquetReadOptions::default().schema(&crate::model::record::schema()),
            )
            .await
            .unwrap();
        listing.register_table("news", df.into_view()).unwrap();
        for q in [
            "SELECT cik, count(*) AS n, count(published_at) AS dated FROM news GROUP BY cik ORDER BY cik",
            "SELECT lane, source_id, min(available_at) AS a, max(published_at) AS p FROM news GROUP BY lane, source_id ORDER BY lane",
            "SELECT id FROM news WHERE cik = '2' AND published_at < '2026-01-15T00:00:00Z' ORDER BY id",
            "SELECT id FROM news WHERE published_at IS NULL ORDER BY id",
            "SELECT count(*) FROM news WHERE lane = 'forward_first_seen'",
            "SELECT id FROM news ORDER BY published_at DESC NULLS LAST, id LIMIT 7",
        ] {
            let ours = crate::sql::run_on(&store, c.manifest(), q).await.unwrap();
            let theirs = listing.sql(q).await.unwrap().collect().await.unwrap();
            assert_eq!(text(&ours), text(&theirs), "{q}");
        }
    }
}
