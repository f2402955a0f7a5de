//! Read-only SQL for offline analysts: DataFusion over the snapshot's partitions.
//!
//! Tables: `news` (every row of every partition, all revisions, all lanes; `table.rs`),
//! `partitions` (the manifest's partition list), `coverage` (every certificate, `coverage.rs`),
//! `identity` and `identity_names` (the identity intervals, `identity.rs`); table functions
//! `news_asof` and `news_diff` (a cut of the API, `functions.rs`), `coverage_asof` and
//! `identity_asof` (the certificates and mappings as known at an instant). Coverage and
//! identity rows are made only when a query reads them (`lazy.rs`). DDL, DML and other
//! statements are refused by DataFusion's `SQLOptions`, so a query can never write or
//! register anything.
//!
//! The session is set for many small files read once by one process: filters are evaluated
//! inside the Parquet reader (the other columns are decoded only for rows that pass), the page
//! index is not read (partitions sort by publication, so it prunes nothing the row group's
//! statistics do not), and operators that hold data (sorts, joins, aggregations) draw on a
//! bounded memory pool and spill to disk past it.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::execution::TaskContext;
use datafusion::execution::context::SQLOptions;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::TryStreamExt;

use crate::error::{Error, Result};
use crate::model::manifest::{Manifest, PartitionEntry};
use crate::store::CorpusStore;

mod coverage;
mod functions;
mod identity;
mod lazy;
mod table;

/// The answer's batch stream (DataFusion's), for callers that hand it on (the Python module).
pub use datafusion::execution::SendableRecordBatchStream;
pub use table::NewsTable;

/// Memory the operators of one query may hold by default before they spill (sorts, hash joins
/// and aggregations); decoding buffers are bounded by the batch size and partitions instead.
pub const MEMORY_POOL_BYTES: usize = 512 << 20;

/// Runs `sql` over the version whose `manifest` is given, reading its partitions from `store`.
/// Only the manifest is needed: an `asof sql` process opens no index, identity file or
/// supersession map (the service's load of a version), which at 20M rows took seconds and
/// most of a gigabyte before the first row was read.
pub async fn run_on(
    store: &CorpusStore,
    manifest: &Manifest,
    sql: &str,
) -> Result<Vec<RecordBatch>> {
    Ok(stream_on(store, manifest, sql, MEMORY_POOL_BYTES)
        .await?
        .try_collect()
        .await?)
}

/// [`run_on`], the answer as a stream of batches: a caller writing it out holds one batch at a
/// time, whatever the answer's size. The query's operators hold at most `memory` bytes before
/// they spill to temporary files (a query that cannot spill past it fails, saying so).
pub async fn stream_on(
    store: &CorpusStore,
    manifest: &Manifest,
    sql: &str,
    memory: usize,
) -> Result<SendableRecordBatchStream> {
    prepare(store, manifest, sql, memory).await?.execute()
}

/// `sql` as another engine runs it over a version's files (`asof sql --emit-sql`): each
/// `news_asof`/`news_diff` becomes the rule's one plan ([`crate::model::cut::Cut::plan`]) over two
/// views, the partitions that may hold a row of the cut and the source-lane's supersessions
/// table (`crate::rule`), and the whole statement is unparsed in `dialect`. A cut the version
/// does not cover is refused here with the API's missing keys, as `asof sql` refuses it:
/// coverage is a property of the version and the cut, decided once. Other tables of this
/// session (`news`, `coverage`, `identity`, …) are not offered: the other engine reads the
/// files named by the views, and the rule tables themselves (`docs/spark.md`).
pub async fn emit(
    store: &CorpusStore,
    manifest: &Manifest,
    sql: &str,
    dialect: crate::rule::Dialect,
) -> Result<crate::rule::EmittedSql> {
    let emit = Arc::new(functions::Emit::default());
    let ctx = session_of(
        store,
        manifest,
        MEMORY_POOL_BYTES,
        Some(emit.clone()),
        false,
    )?;
    let opts = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let df = ctx.sql_with_options(sql, opts).await?;
    let query = crate::rule::sql::unparse(df.logical_plan(), dialect)?;
    Ok(crate::rule::EmittedSql {
        views: emit.views(),
        query,
    })
}

/// A planned query: run it with [`Query::execute`]; while it runs, [`Query::bytes_read`]
/// says how far its reads have got (what `asof sql` shows as progress).
pub struct Query {
    plan: Arc<dyn ExecutionPlan>,
    task: Arc<TaskContext>,
}

impl Query {
    /// The answer, a batch at a time.
    pub fn execute(&self) -> Result<SendableRecordBatchStream> {
        Ok(execute_stream(
            Arc::clone(&self.plan),
            Arc::clone(&self.task),
        )?)
    }

    /// Bytes the query's Parquet readers have read so far (the readers' own live
    /// `bytes_scanned` counters, summed over the plan).
    pub fn bytes_read(&self) -> u64 {
        fn walk(p: &Arc<dyn ExecutionPlan>) -> u64 {
            let own = p
                .metrics()
                .and_then(|m| m.sum_by_name("bytes_scanned"))
                .map_or(0, |v| v.as_usize() as u64);
            own + p.children().into_iter().map(walk).sum::<u64>()
        }
        walk(&self.plan)
    }
}

/// Plans `sql` over the version whose manifest is given (nothing of the answer is read yet,
/// beyond what planning a table function needs).
pub async fn prepare(
    store: &CorpusStore,
    manifest: &Manifest,
    sql: &str,
    memory: usize,
) -> Result<Query> {
    let ctx = session_of(store, manifest, memory, None, true)?;
    let opts = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let df = ctx.sql_with_options(sql, opts).await.map_err(|e| match e {
        datafusion::error::DataFusionError::Plan(m)
            if m.contains("not supported") || m.contains("DDL") || m.contains("DML") =>
        {
            Error::Refused(format!("only read-only queries are allowed: {m}"))
        }
        other => Error::from(other),
    })?;
    let task = Arc::new(df.task_ctx());
    let plan = df.create_physical_plan().await?;
    Ok(Query { plan, task })
}

/// A session over the version whose manifest is given: its tables registered (all of them,
/// or with `all_tables` false only the cut functions), nothing read; `emit` makes its cut
/// functions plan SQL for another engine ([`emit`]).
fn session_of(
    store: &CorpusStore,
    manifest: &Manifest,
    memory: usize,
    emit: Option<Arc<functions::Emit>>,
    all_tables: bool,
) -> Result<SessionContext> {
    let mut config = SessionConfig::new()
        .with_parquet_page_index_pruning(false)
        .with_parquet_bloom_filter_pruning(false)
        // Whole partitions per reader: a partition cut in byte ranges has its footer read
        // by each.
        .with_repartition_file_scans(false)
        .set_bool("datafusion.execution.parquet.pushdown_filters", true)
        .set_bool("datafusion.execution.parquet.reorder_filters", true)
        // An inner join drops rows whose key is null, so filter them out below the join: the
        // planner then estimates the filtered side as the smaller one and builds its hash
        // table from it. Without this, `news AS a JOIN news AS b ON a.supersedes =
        // b.revision_id` (corrections joined to what they correct) built from a whole 20M-row
        // side and failed at the memory pool; most `supersedes` are null.
        .set_bool("datafusion.optimizer.filter_null_join_keys", true);
    config.options_mut().execution.parquet.metadata_size_hint = Some(table::FOOTER_HINT);
    // What a sort sets aside for merging its spills (10 MB by default per partition): a
    // share of a small pool, so a sort under a tight limit can still spill and merge.
    config.options_mut().execution.sort_spill_reservation_bytes =
        (memory / 32).clamp(1 << 20, 10 << 20);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(FairSpillPool::new(memory)))
        .build_arc()?;
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    ctx.register_object_store(store.url(), store.object_store());
    let news = Arc::new(NewsTable::new(store.url(), &manifest.partitions)?);
    let shared = Arc::new(manifest.clone());
    for window in [false, true] {
        let f = functions::NewsCut::new(shared.clone(), store.clone(), window, emit.clone());
        ctx.register_udtf(if window { "news_diff" } else { "news_asof" }, Arc::new(f));
    }
    if !all_tables {
        return Ok(ctx);
    }
    ctx.register_table("news", news.clone())?;
    ctx.register_table(
        "partitions",
        Arc::new(partitions_table(&manifest.partitions)?),
    )?;
    ctx.register_table("coverage", Arc::new(coverage::table(shared.clone(), None)))?;
    ctx.register_udtf(
        "coverage_asof",
        Arc::new(coverage::CoverageAsOf(shared.clone())),
    );
    let identity = identity::Source::new(store.clone(), manifest.identity.first().cloned());
    for (name, table) in identity::tables(&identity) {
        ctx.register_table(name, Arc::new(table))?;
    }
    ctx.register_udtf("identity_asof", Arc::new(identity::IdentityAsOf(identity)));
    Ok(ctx)
}

fn partitions_table(p: &[PartitionEntry]) -> Result<MemTable> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("source_id", DataType::Utf8, false),
        Field::new("lane", DataType::Utf8, false),
        Field::new("date", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("row_count", DataType::UInt64, false),
        Field::new("sha256", DataType::Utf8, false),
    ]));
    let s = |f: &dyn Fn(&PartitionEntry) -> String| -> ArrayRef {
        Arc::new(StringArray::from(p.iter().map(f).collect::<Vec<_>>()))
    };
    let cols: Vec<ArrayRef> = vec![
        s(&|e| e.source_id.to_string()),
        s(&|e| e.lane.to_string()),
        s(&|e| e.date.to_string()),
        s(&|e| e.path.clone()),
        Arc::new(UInt64Array::from(
            p.iter().map(|e| e.row_count).collect::<Vec<_>>(),
        )),
        s(&|e| e.sha256.clone()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), cols)?;
    Ok(MemTable::try_new(schema, vec![vec![batch]])?)
}
