//! The as-of rule in SQL: `news_asof(as_of [, clock [, lane [, source]]])` and
//! `news_diff(start, end [, clock [, lane [, source]]])`, each every row the API's `/v1/news`
//! (or `/v1/news/diff`) would answer for that cut, all pages at once, built from [`Cut`]:
//! when the query runs, the version's superseded map is gathered as the service gathers it
//! (each superseded revision and its earliest superseding commit), and [`Cut::apply`] (the
//! same filter and anti-join the reference scan uses) takes the rows. Never a second reading
//! of the rule.
//!
//! Why the map first, not one plan joining the table to itself: a version supersedes a few
//! revisions in a thousand, so the stale ids are a small table DataFusion builds its hash
//! join from; joined in one plan, DataFusion cannot know which side is small and at 20M rows
//! built the join from the rows, past the memory pool.
//!
//! Defaults are the API's: `published_at`, `certified_pit`, `sec.edgar`. A cut the snapshot
//! cannot answer (a coverage hole, where the API says `409` with `count: null`) fails the
//! query with the missing coverage keys; it never reads as an empty table.

use std::str::FromStr;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionContext, col};

use super::NewsTable;
use crate::model::clock::{Instant, Lane, SourceId, VisibleBy};
use crate::model::coverage::{Scope, SourceCoverage};
use crate::model::cut::{Cut, Revisions, Superseded};
use crate::model::manifest::{Manifest, PartitionEntry};
use crate::read::corpus::supersessions;
use crate::store::CorpusStore;

/// `news_asof` (a cut) or `news_diff` (a window).
#[derive(Debug)]
pub(crate) struct NewsCut {
    manifest: Arc<Manifest>,
    /// Where the partitions are read: the cut's rows, and every partition's superseding
    /// revisions (the version's superseded map spans sources and lanes).
    store: CorpusStore,
    window: bool,
    /// Set when the session writes SQL for another engine rather than running it.
    emit: Option<Arc<Emit>>,
}

impl NewsCut {
    pub(crate) fn new(
        manifest: Arc<Manifest>,
        store: CorpusStore,
        window: bool,
        emit: Option<Arc<Emit>>,
    ) -> Self {
        NewsCut {
            manifest,
            store,
            window,
            emit,
        }
    }

    fn name(&self) -> &'static str {
        if self.window {
            "news_diff"
        } else {
            "news_asof"
        }
    }

    fn usage(&self) -> &'static str {
        if self.window {
            "news_diff(start, end [, clock [, lane [, source]]]), e.g. \
             news_diff('2026-01-28T00:00:00Z', '2026-01-29T00:00:00Z', 'available_at')"
        } else {
            "news_asof(as_of [, clock [, lane [, source]]]), e.g. \
             news_asof('2026-01-29T12:00:00Z', 'available_at')"
        }
    }

    fn fault(&self, what: impl std::fmt::Display) -> DataFusionError {
        DataFusionError::Plan(format!("{}: {what}; usage: {}", self.name(), self.usage()))
    }

    /// Argument `i`: an instant (see [`literal_instant`]).
    fn instant(&self, args: &[Expr], i: usize, name: &str) -> Result<Instant> {
        literal_instant(args.get(i), name).map_err(|m| self.fault(m))
    }

    /// Argument `i`, a name from `T`'s set, or `default` when not given.
    fn named<T: FromStr + Copy>(
        &self,
        args: &[Expr],
        i: usize,
        name: &str,
        default: T,
        valid: String,
    ) -> Result<T> {
        let Some(e) = args.get(i) else {
            return Ok(default);
        };
        let text = match e {
            Expr::Literal(v, _) => v.try_as_str().flatten(),
            _ => None,
        }
        .ok_or_else(|| self.fault(format!("{name} must be a string, one of {valid}")))?;
        T::from_str(text).map_err(|_| self.fault(format!("{name} {text:?} is not one of {valid}")))
    }
}

/// An instant given to a table function: an RFC 3339 UTC string (`...Z`) or a timestamp
/// literal, read as UTC. The fault names the argument (`name`).
pub(super) fn literal_instant(
    e: Option<&Expr>,
    name: &str,
) -> std::result::Result<Instant, String> {
    let Some(Expr::Literal(v, _)) = e else {
        return Err(format!("{name} must be a literal instant"));
    };
    let micros = match v {
        ScalarValue::TimestampMicrosecond(Some(m), tz) if utc(tz) => Some(*m),
        ScalarValue::TimestampNanosecond(Some(n), tz) if utc(tz) => Some(n.div_euclid(1_000)),
        ScalarValue::TimestampMillisecond(Some(m), tz) if utc(tz) => Some(m * 1_000),
        ScalarValue::TimestampSecond(Some(s), tz) if utc(tz) => Some(s * 1_000_000),
        _ => None,
    };
    if let Some(m) = micros {
        return Ok(Instant::from_micros(m));
    }
    let text = v
        .try_as_str()
        .flatten()
        .ok_or_else(|| format!("{name} must be an instant, not {v}"))?;
    Instant::parse(text).map_err(|f| format!("{name} {text:?}: {f}"))
}

/// The one argument of a table function of an instant (`coverage_asof`, `identity_asof`):
/// refused with its usage when there is not exactly one, or it is not an instant.
pub(super) fn only_instant(args: &TableFunctionArgs, function: &str) -> Result<Instant> {
    let fault = |m: String| {
        DataFusionError::Plan(format!(
            "{function}: {m}; usage: {function}(as_of), e.g. {function}('2026-01-29T12:00:00Z')"
        ))
    };
    let args = args.exprs();
    if args.len() != 1 {
        return Err(fault(format!("{} arguments given", args.len())));
    }
    literal_instant(args.first(), "as_of").map_err(fault)
}

fn utc(tz: &Option<Arc<str>>) -> bool {
    tz.as_deref()
        .is_none_or(|z| z == "UTC" || z == "+00:00" || z == "Z")
}

impl NewsCut {
    /// The cut the arguments ask for, with its source: refused with the usage when they are
    /// not one, and with the missing coverage keys where the API answers 409.
    fn cut_of(&self, args: &[Expr]) -> Result<(Cut, SourceId)> {
        let fixed = if self.window { 2 } else { 1 };
        if args.len() < fixed || args.len() > fixed + 3 {
            return Err(self.fault(format!("{} arguments given", args.len())));
        }
        let (start, as_of) = if self.window {
            let start = self.instant(args, 0, "start")?;
            let end = self.instant(args, 1, "end")?;
            if start >= end {
                return Err(self.fault("start must be before end"));
            }
            (Some(start), end)
        } else {
            (None, self.instant(args, 0, "as_of")?)
        };
        let clock = self.named(
            args,
            fixed,
            "clock",
            VisibleBy::PublishedAt,
            VisibleBy::valid_set(),
        )?;
        let lane = self.named(
            args,
            fixed + 1,
            "lane",
            Lane::CertifiedPit,
            Lane::valid_set(),
        )?;
        let source = self.named(
            args,
            fixed + 2,
            "source",
            SourceId::SecEdgar,
            SourceId::valid_set(),
        )?;
        let view = SourceCoverage::new(&self.manifest, source, lane, Scope::Corpus);
        let coverage = match start {
            Some(s) => view.window(clock, s, as_of),
            None => view.cut(clock, as_of),
        };
        if !coverage.is_complete() {
            return Err(DataFusionError::Plan(format!(
                "{}: the snapshot does not cover this cut of {source} ({lane}, {clock}), as the \
                 API would answer 409 with count null; coverage missing ({} key(s)): {}",
                self.name(),
                coverage.missing_total,
                coverage.missing.join(", ")
            )));
        }
        let cut = Cut {
            as_of,
            start,
            clock,
            lane: Some(lane),
            revisions: Revisions::of(clock),
        };
        Ok((cut, source))
    }
}

impl TableFunctionImpl for NewsCut {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let (cut, source) = self.cut_of(args.exprs())?;
        let lane = cut.lane.unwrap_or(Lane::CertifiedPit);
        if let Some(emit) = &self.emit {
            return emit.view(&self.manifest, &cut, source);
        }
        let mine: Vec<PartitionEntry> = self
            .manifest
            .partitions
            .iter()
            .filter(|p| p.source_id == source && p.lane == lane)
            .cloned()
            .collect();
        Ok(Arc::new(CutTable {
            cut,
            rows: Arc::new(NewsTable::new(self.store.url(), &mine)?),
            store: self.store.clone(),
            manifest: Arc::clone(&self.manifest),
            schema: crate::model::record::schema(),
        }))
    }
}

/// A session that writes SQL for another engine instead of running it (`asof sql
/// --emit-sql`): each `news_asof`/`news_diff` is planned as [`Cut::plan_by_position`] over two views, the
/// partitions that may hold a row of the cut and the source-lane's supersessions table, which
/// it records for the caller to define in the other engine.
#[derive(Debug, Default)]
pub(crate) struct Emit {
    views: std::sync::Mutex<Vec<crate::rule::View>>,
}

impl Emit {
    /// The views the planned query reads, in the order its cuts named them.
    pub(crate) fn views(&self) -> Vec<crate::rule::View> {
        self.views.lock().map(|v| v.clone()).unwrap_or_default()
    }

    fn view(
        &self,
        manifest: &Manifest,
        cut: &Cut,
        source: SourceId,
    ) -> Result<Arc<dyn TableProvider>> {
        use datafusion::datasource::empty::EmptyTable;
        use datafusion::datasource::provider_as_source;
        use datafusion::logical_expr::LogicalPlanBuilder;
        let mut views = self
            .views
            .lock()
            .map_err(|_| DataFusionError::Internal("the emitted views' lock".into()))?;
        let lane = cut.lane.unwrap_or(Lane::CertifiedPit);
        let names = crate::rule::Names {
            news: format!(
                "asof_news_{}",
                views
                    .iter()
                    .filter(|v| v.holds == crate::rule::sql::Holds::Rows)
                    .count()
                    + 1
            ),
            supersessions: format!(
                "asof_supersessions_{}_{lane}",
                source.as_str().replace('.', "_")
            ),
        };
        let [rows_view, sup_view] = crate::rule::sql::views_of(manifest, cut, source, &names)
            .map_err(|e| DataFusionError::Plan(e.to_string()))?;
        let scan = |name: &str, schema: SchemaRef| -> Result<datafusion::dataframe::DataFrame> {
            let plan = LogicalPlanBuilder::scan(
                name,
                provider_as_source(Arc::new(EmptyTable::new(schema))),
                None,
            )?
            .build()?;
            Ok(datafusion::dataframe::DataFrame::new(
                SessionContext::new().state(),
                plan,
            ))
        };
        let df = cut
            .over_lane_table()
            .plan_by_position(
                scan(&names.news, crate::rule::sql::placed_rows_schema())?,
                scan(
                    &names.supersessions,
                    crate::format::rule::RuleTable::Supersessions.schema(),
                )?,
            )
            .map_err(|e| DataFusionError::External(Box::new(e)))?
            .select(crate::rule::sql::record_columns(&names.news))?;
        views.push(rows_view);
        // One view of a source-lane's supersessions, whatever the cuts of it.
        if !views.iter().any(|v| v.name == names.supersessions) {
            views.push(sup_view);
        }
        Ok(Arc::new(datafusion::datasource::ViewTable::new(
            df.logical_plan().clone(),
            None,
        )))
    }
}

/// The rows of one cut: read when the query runs ([`TableProvider::scan`] may read; a table
/// function's call may not).
#[derive(Debug)]
struct CutTable {
    cut: Cut,
    /// The partitions of the cut's source and lane.
    rows: Arc<NewsTable>,
    /// Where every partition's superseding revisions are read, and the version that lists
    /// them (the version's map spans sources and lanes, as the service's does).
    store: CorpusStore,
    manifest: Arc<Manifest>,
    schema: SchemaRef,
}

impl CutTable {
    /// The version's superseded map, gathered as the service gathers it when it loads a
    /// version ([`supersessions::gather`], the one reading of it): each revision some row
    /// supersedes, with the earliest commit that superseded it. A superseding row without a
    /// commit instant (which publish never writes) fails the query there, as it fails a load.
    async fn superseded(&self) -> Result<Superseded> {
        let (map, _) = supersessions::gather(&self.store, &self.manifest, None, None)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(map)
    }
}

#[async_trait]
impl TableProvider for CutTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let state = state
            .as_any()
            .downcast_ref::<SessionState>()
            .ok_or_else(|| DataFusionError::Internal("news_asof outside a session".into()))?;
        // The plan made here is optimized again as part of the query's, and DataFusion may
        // not reorder a hash join whose dynamic filter it already made: none is made here.
        let mut state = state.clone();
        state
            .config_mut()
            .options_mut()
            .optimizer
            .enable_join_dynamic_filter_pushdown = false;
        let ctx = SessionContext::new_with_state(state);
        let superseded = self.superseded().await?;
        let mut df = self
            .cut
            .apply(
                ctx.read_table(self.rows.clone() as Arc<dyn TableProvider>)?,
                &superseded,
            )
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        if let Some(p) = projection {
            df = df.select(
                p.iter()
                    .map(|&i| col(self.schema.field(i).name()))
                    .collect::<Vec<_>>(),
            )?;
        }
        // Filters are not taken (DataFusion applies them above), so a limit given here is the
        // query's own.
        if let Some(n) = limit {
            df = df.limit(0, Some(n))?;
        }
        df.create_physical_plan().await
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, StringArray};

    use crate::model::clock::{Instant, Lane, VisibleBy};
    use crate::model::coverage::Scope;
    use crate::read::corpus::{Answer, Corpus, Entity, NewsQuery};
    use crate::testkit::{RANDOM_FROM, RANDOM_SPAN, Rng, random_corpus};

    /// The ids a SQL query returns (its first column), sorted.
    async fn sql_ids(c: &Corpus, sql: &str) -> Vec<String> {
        let mut ids = Vec::new();
        for b in crate::sql::run_on(c.store(), c.manifest(), sql)
            .await
            .unwrap()
        {
            let col = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
            ids.extend((0..col.len()).map(|i| col.value(i).to_owned()));
        }
        ids.sort();
        ids
    }

    /// Every row of the API's answer to a cut (all pages at once), as `id/revision`, sorted.
    async fn api_ids(c: &Corpus, q: NewsQuery) -> Option<Vec<String>> {
        match c.news(&q, Scope::Corpus).await.unwrap() {
            Answer::Page { rows, next, .. } => {
                assert!(next.is_none(), "one page holds the whole answer");
                let mut ids: Vec<String> = rows
                    .into_iter()
                    .map(|r| format!("{}/{}", r.id, r.revision_id))
                    .collect();
                ids.sort();
                Some(ids)
            }
            Answer::Hole { .. } => None,
        }
    }

    /// `news_asof` and `news_diff` give the rows the API answers, for drawn cuts on every
    /// clock and lane over a corpus with revisions superseded before and after the cuts and
    /// rows without `published_at`; on a fixed seed and a fresh one (printed, to replay).
    #[tokio::test]
    async fn news_asof_and_news_diff_answer_what_the_api_answers_for_drawn_cuts() {
        for seed in [0x5eed_0048, crate::testkit::fresh_seed()] {
            println!("news_asof differential seed {seed:#x}");
            let (_dir, store, _) = random_corpus(seed, false).await;
            let c = Corpus::open(store).await.unwrap();
            let mut rng = Rng(seed);
            let mut compared = 0;
            for _ in 0..12 {
                let clock = VisibleBy::ALL[rng.below(3) as usize];
                let lane = Lane::ALL[rng.below(2) as usize];
                // Cuts past the span's end too: every revision committed, every correction
                // in force.
                let at = |rng: &mut Rng| {
                    Instant::from_micros(
                        RANDOM_FROM + rng.below((RANDOM_SPAN + RANDOM_SPAN / 4) as u64) as i64,
                    )
                };
                let (a, b) = (at(&mut rng), at(&mut rng));
                let (start, as_of) = (a.min(b), a.max(b));
                let window = rng.below(2) == 0 && start < as_of;
                let q = NewsQuery {
                    source: crate::model::clock::SourceId::SecEdgar,
                    lane,
                    visible_by: clock,
                    start: window.then_some(start),
                    as_of,
                    entity: Entity::All,
                    after: None,
                    limit: 100_000,
                };
                let sql = if window {
                    format!(
                        "SELECT id || '/' || revision_id FROM news_diff('{start}', '{as_of}', \
                         '{clock}', '{lane}')"
                    )
                } else {
                    format!(
                        "SELECT id || '/' || revision_id FROM news_asof('{as_of}', '{clock}', \
                         '{lane}')"
                    )
                };
                let Some(api) = api_ids(&c, q).await else {
                    continue;
                };
                assert_eq!(sql_ids(&c, &sql).await, api, "seed {seed:#x}: {sql}");
                compared += 1;
            }
            assert!(
                compared >= 6,
                "seed {seed:#x}: most cuts are covered ({compared})"
            );
        }
    }

    /// `asof sql --emit-sql`: a query over `news_asof` and `news_diff` written for another
    /// engine, run over the views it names, answers what `asof sql` answers.
    #[tokio::test]
    async fn a_query_written_for_another_engine_answers_what_asof_sql_answers() {
        use datafusion::datasource::file_format::options::ParquetReadOptions;
        let (dir, store, _) = random_corpus(0x48_60, false).await;
        let c = Corpus::open(store).await.unwrap();
        for sql in [
            "SELECT id || '/' || revision_id FROM news_asof('2025-01-20T00:00:00Z') \
             WHERE cik = '1'",
            "SELECT a.id || '/' || a.revision_id FROM news_diff('2025-01-01T00:00:00Z', \
             '2025-02-01T00:00:00Z', 'committed_at', 'forward_first_seen') AS a \
             JOIN news_asof('2025-03-01T00:00:00Z', 'available_at', 'forward_first_seen') AS b \
             ON a.id = b.id",
        ] {
            let emitted = crate::sql::emit(
                c.store(),
                c.manifest(),
                sql,
                crate::rule::Dialect::DataFusion,
            )
            .await
            .unwrap();
            assert!(emitted.views.len() >= 2, "{:?}", emitted.views);
            let ctx = datafusion::prelude::SessionContext::new();
            for v in &emitted.views {
                if v.holds == crate::rule::Holds::Rows {
                    let rows = crate::testkit::placed_rows(dir.path(), &v.paths);
                    ctx.register_table(v.name.as_str(), rows).unwrap();
                    continue;
                }
                let files: Vec<String> = v
                    .paths
                    .iter()
                    .map(|p| dir.path().join(p).to_string_lossy().into_owned())
                    .collect();
                let df = ctx
                    .read_parquet(
                        files,
                        ParquetReadOptions::default().schema(&v.holds.schema()),
                    )
                    .await
                    .unwrap();
                ctx.register_table(v.name.as_str(), df.into_view()).unwrap();
            }
            let mut got = Vec::new();
            let answer = ctx.sql(&emitted.query).await;
            let answer = answer.unwrap_or_else(|e| panic!("{e}: {}", emitted.query));
            for b in answer.collect().await.unwrap() {
                let col = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
                got.extend((0..col.len()).map(|i| col.value(i).to_owned()));
            }
            got.sort();
            let want = sql_ids(&c, sql).await;
            assert!(!want.is_empty(), "{sql}");
            assert_eq!(got, want, "{sql}\n{}", emitted.query);
        }
        // A hole is refused when the SQL is written, with the API's keys.
        let err = crate::sql::emit(
            c.store(),
            c.manifest(),
            "SELECT count(*) FROM news_asof('2025-05-10T00:00:00Z')",
            crate::rule::Dialect::Spark,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("coverage missing"), "{err}");
    }

    #[tokio::test]
    async fn a_cut_the_snapshot_does_not_cover_fails_naming_the_missing_coverage() {
        let (_dir, store, _) = random_corpus(7, false).await;
        let c = Corpus::open(store).await.unwrap();
        // The certifications end on 2025-03-31: a cut in May is a hole for the API.
        let q = NewsQuery {
            source: crate::model::clock::SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: crate::testkit::t("2025-05-10T00:00:00Z"),
            entity: Entity::All,
            after: None,
            limit: 10,
        };
        let Answer::Hole { coverage } = c.news(&q, Scope::Corpus).await.unwrap() else {
            panic!("the API answers a hole");
        };
        let err = crate::sql::run_on(
            c.store(),
            c.manifest(),
            "SELECT count(*) FROM news_asof('2025-05-10T00:00:00Z')",
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("coverage missing"), "{err}");
        assert!(
            err.contains(&coverage.missing[0]),
            "names the API's keys: {err}"
        );
    }

    #[tokio::test]
    async fn bad_arguments_are_refused_with_the_usage() {
        let (_dir, store, _) = random_corpus(3, false).await;
        let c = Corpus::open(store).await.unwrap();
        for (sql, says) in [
            ("SELECT * FROM news_asof()", "0 arguments"),
            ("SELECT * FROM news_asof('2025-01-10')", "as_of"),
            (
                "SELECT * FROM news_asof('2025-01-10T00:00:00Z', 'seen_at')",
                "clock",
            ),
            (
                "SELECT * FROM news_asof('2025-01-10T00:00:00Z', 'published_at', 'x')",
                "lane",
            ),
            (
                "SELECT * FROM news_diff('2025-01-10T00:00:00Z', '2025-01-09T00:00:00Z')",
                "before",
            ),
            ("SELECT * FROM news_diff('2025-01-10T00:00:00Z', 5)", "end"),
        ] {
            let err = crate::sql::run_on(c.store(), c.manifest(), sql)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(says) && err.contains("usage:"), "{sql}: {err}");
        }
    }
}
