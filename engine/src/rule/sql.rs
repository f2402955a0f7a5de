//! The as-of rule as SQL another engine runs: [`Cut::plan`], the plan the reference scan and
//! `news_asof` run in DataFusion, built over tables named by the caller and written out by
//! DataFusion's unparser in Spark's or DuckDB's dialect. The rule is never written a second
//! time: what Spark runs is this plan's text, and the tests run that text (in DataFusion here,
//! in Spark and DuckDB in `tests/spark/`) against the service's answers.
//!
//! Coverage is decided before any SQL: a cut of a version either is a hole (the answer names
//! the API's missing keys) or is answered, whatever the rows; so [`emit_cut`] answers the hole
//! the way `/v1/news` does ([`NewsQuery::needs`]) and emits SQL only for a cut the version
//! answers. Likewise a ticker is resolved to CIKs here by the identity rule of the service.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::TableProvider;
use datafusion::datasource::empty::EmptyTable;
use datafusion::prelude::{Expr, SessionContext, col};
use datafusion::sql::sqlparser::ast;
use datafusion::sql::unparser::Unparser;
use datafusion::sql::unparser::dialect::{CustomDialectBuilder, Dialect as UnparserDialect};

use crate::error::{Error, Result};
use crate::format::rule::supersessions_schema;
use crate::model::clock::{Lane, SourceId};
use crate::model::coverage::{Coverage, Scope, SourceCoverage};
use crate::model::cut::{Cut, ROW_FILE, ROW_INDEX};
use crate::model::identity::IdentityIndex;
use crate::model::manifest::Manifest;
use crate::model::record::schema;
use crate::read::corpus::NewsQuery;

/// Whose SQL to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Spark SQL (3.4 and 4.x): backquoted names, `TIMESTAMP` literals with an offset (an
    /// instant whatever the session's time zone); the anti-join as `NOT EXISTS`, which Spark
    /// plans as one.
    Spark,
    /// DuckDB: double-quoted names, `TIMESTAMP WITH TIME ZONE` literals.
    DuckDb,
    /// DataFusion's own (what the tests here run the text with).
    DataFusion,
}

impl Dialect {
    pub const NAMES: &'static str = "spark, duckdb, datafusion";

    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "spark" => Ok(Dialect::Spark),
            "duckdb" => Ok(Dialect::DuckDb),
            "datafusion" => Ok(Dialect::DataFusion),
            other => Err(Error::invalid(
                "dialect",
                format!("unknown SQL dialect {other:?}; one of {}", Self::NAMES),
            )),
        }
    }

    fn unparser(self) -> Box<dyn UnparserDialect> {
        use ast::TimezoneInfo::{None as Naive, WithTimeZone};
        // Every name quoted. Instants are written with their offset: Spark's `TIMESTAMP` is an
        // instant; DuckDB's is not (it would be read in the session's time zone when compared),
        // so DuckDB gets `TIMESTAMP WITH TIME ZONE`. A table function used without an alias is
        // named after its call (`news_asof()`), a name only quotes can carry.
        let (quote, zone) = match self {
            Dialect::Spark => ('`', Naive),
            Dialect::DuckDb => ('"', WithTimeZone),
            Dialect::DataFusion => ('"', Naive),
        };
        let instant = ast::DataType::Timestamp(None, zone);
        Box::new(
            CustomDialectBuilder::new()
                .with_identifier_quote_style(quote)
                .with_timestamp_cast_dtype(instant.clone(), instant)
                .with_requires_derived_table_alias(true)
                .build(),
        )
    }
}

/// The names the SQL gives the two tables of one cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The source-lane's partition rows (the record table).
    pub news: String,
    /// The source-lane's supersessions table.
    pub supersessions: String,
}

impl Names {
    /// `<prefix>_news` and `<prefix>_supersessions`.
    pub fn prefixed(prefix: &str) -> Self {
        Names {
            news: format!("{prefix}_news"),
            supersessions: format!("{prefix}_supersessions"),
        }
    }
}

/// The columns of a rows view in another engine: the record columns, then each row's place
/// ([`ROW_FILE`], [`ROW_INDEX`]), which that engine computes as it reads ([`view_sql`]) and
/// [`Cut::plan_by_position`] anti-joins on.
pub fn placed_rows_schema() -> SchemaRef {
    crate::model::record::schema_with([
        Field::new(ROW_FILE, DataType::Utf8, false),
        Field::new(ROW_INDEX, DataType::Int64, false),
    ])
}

/// One cut as a SELECT in `dialect`: the rows of `names.news` (a view of
/// [`placed_rows_schema`]) that `cut` admits (and `filter`, if any), every record column in
/// the API's order, the superseded revisions taken out by their places
/// ([`Cut::plan_by_position`]). Unordered, as a table in another
/// engine is; the API's order is `published_at` (nulls last), then `id`.
pub async fn cut_sql(
    cut: &Cut,
    filter: Option<Expr>,
    names: &Names,
    dialect: Dialect,
) -> Result<String> {
    let ctx = SessionContext::new();
    ctx.register_table(
        names.news.as_str(),
        Arc::new(EmptyTable::new(placed_rows_schema())) as Arc<dyn TableProvider>,
    )?;
    ctx.register_table(
        names.supersessions.as_str(),
        Arc::new(EmptyTable::new(supersessions_schema())) as Arc<dyn TableProvider>,
    )?;
    let mut df = cut.plan_by_position(
        ctx.table(names.news.as_str()).await?,
        ctx.table(names.supersessions.as_str()).await?,
    )?;
    // Above the rule's plan, not below it: the unparser drops a filter under an anti-join.
    if let Some(f) = filter {
        df = df.filter(f)?;
    }
    let df = df.select(record_columns(&names.news))?;
    unparse(df.logical_plan(), dialect)
}

/// A logical plan as SQL text in `dialect`.
pub fn unparse(plan: &datafusion::logical_expr::LogicalPlan, dialect: Dialect) -> Result<String> {
    let d = dialect.unparser();
    let statement = Unparser::new(d.as_ref()).plan_to_sql(plan)?;
    Ok(statement.to_string())
}

/// A table the emitted SQL reads: its name there, what it holds and its files, relative to
/// the corpus root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub name: String,
    pub holds: Holds,
    pub paths: Vec<String>,
}

/// What a view of the emitted SQL holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// Partition rows (the record schema).
    Rows,
    /// A supersessions table.
    Supersessions,
}

impl Holds {
    pub fn schema(self) -> SchemaRef {
        match self {
            Holds::Rows => schema(),
            Holds::Supersessions => supersessions_schema(),
        }
    }
}

/// A statement for another engine and the views it reads ([`crate::sql::emit`]).
#[derive(Debug, Clone)]
pub struct EmittedSql {
    pub views: Vec<View>,
    pub query: String,
}

impl EmittedSql {
    /// The whole script another engine runs: `header` as comments, a definition of each view
    /// over its files under `root` (the corpus root as that engine names it: a directory,
    /// `file:///…`, `s3a://bucket/prefix`), then the statement.
    pub fn script(&self, dialect: Dialect, root: &str, header: &[String]) -> Result<String> {
        let mut out = String::new();
        for line in header {
            out.push_str("-- ");
            out.push_str(line);
            out.push('\n');
        }
        for v in &self.views {
            out.push_str(&view_sql(v, dialect, root)?);
            out.push_str(";\n");
        }
        out.push_str(&self.query);
        out.push_str(";\n");
        Ok(out)
    }
}

/// A view's columns as a schema string of `dialect` (`id STRING, …` for Spark, which its
/// `DataFrameReader.schema` takes too).
pub fn ddl(schema: &Schema, dialect: Dialect) -> Result<String> {
    let mut cols = Vec::new();
    for f in schema.fields() {
        let ty = match (f.data_type(), dialect) {
            (DataType::Utf8, Dialect::Spark) => "STRING",
            (DataType::Utf8, _) => "VARCHAR",
            (DataType::Int64, _) => "BIGINT",
            (DataType::Timestamp(TimeUnit::Microsecond, Some(_)), Dialect::Spark) => "TIMESTAMP",
            (DataType::Timestamp(TimeUnit::Microsecond, Some(_)), _) => "TIMESTAMPTZ",
            (other, _) => {
                return Err(Error::invalid(
                    "dialect",
                    format!("no {dialect:?} type for {other} ({})", f.name()),
                ));
            }
        };
        cols.push(format!("{} {ty}", f.name()));
    }
    Ok(cols.join(", "))
}

/// `CREATE OR REPLACE TEMPORARY VIEW` of one view in `dialect`: its files read as Parquet (a
/// view with no file is empty, with its columns). A rows view adds each row's place, as the
/// engine reads it: Spark's `_metadata.file_name` and `_metadata.row_index`, DuckDB's
/// `filename` (its last part) and `file_row_number`. DataFusion reads no such columns, so it
/// gets no view here (the tests build theirs from the files, `crate::testkit`).
pub fn view_sql(v: &View, dialect: Dialect, root: &str) -> Result<String> {
    if dialect == Dialect::DataFusion {
        return Err(Error::invalid(
            "dialect",
            "DataFusion reads no row places from Parquet files: define the views in spark or \
             duckdb",
        ));
    }
    let root = root.trim_end_matches('/');
    let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let rows = v.holds == Holds::Rows;
    let body = if v.paths.is_empty() {
        let schema = if rows {
            placed_rows_schema()
        } else {
            v.holds.schema()
        };
        let cols: Vec<String> = ddl(&schema, dialect)?
            .split(", ")
            .map(|c| {
                let (name, ty) = c.split_once(' ').unwrap_or((c, ""));
                format!("CAST(NULL AS {ty}) AS {name}")
            })
            .collect();
        format!("SELECT {} WHERE FALSE", cols.join(", "))
    } else {
        match dialect {
            // One path: Spark's SQL takes a single path per file source, and a Hadoop glob's
            // `{a,b,…}` names exactly the version's files (never the others in the folder).
            Dialect::Spark => {
                let (dir, names) = common_dir(&v.paths);
                let path = if names.len() == 1 {
                    format!("{root}/{}", v.paths[0])
                } else {
                    format!("{root}/{dir}{{{}}}", names.join(","))
                };
                let place = if rows {
                    format!(
                        ", _metadata.file_name AS {ROW_FILE}, _metadata.row_index AS {ROW_INDEX}"
                    )
                } else {
                    String::new()
                };
                format!("SELECT *{place} FROM parquet.`{}`", path.replace('`', "``"))
            }
            Dialect::DuckDb | Dialect::DataFusion => {
                let files: Vec<String> = v
                    .paths
                    .iter()
                    .map(|p| quote(&format!("{root}/{p}")))
                    .collect();
                if rows {
                    format!(
                        "SELECT * EXCLUDE (filename, file_row_number), parse_filename(filename) \
                         AS {ROW_FILE}, file_row_number AS {ROW_INDEX} FROM read_parquet([{}], \
                         filename = true, file_row_number = true)",
                        files.join(", ")
                    )
                } else {
                    format!("SELECT * FROM read_parquet([{}])", files.join(", "))
                }
            }
        }
    };
    let temporary = match dialect {
        Dialect::Spark => "TEMPORARY",
        _ => "TEMP",
    };
    Ok(format!(
        "CREATE OR REPLACE {temporary} VIEW {} AS {body}",
        v.name
    ))
}

/// The longest folder prefix (ending in `/`) the paths share, and each path after it.
fn common_dir(paths: &[String]) -> (String, Vec<&str>) {
    let first = paths[0].as_str();
    let mut dir = match first.rfind('/') {
        Some(i) => &first[..=i],
        None => "",
    };
    for p in paths {
        while !p.starts_with(dir) {
            dir = match dir[..dir.len() - 1].rfind('/') {
                Some(i) => &dir[..=i],
                None => "",
            };
        }
    }
    let names = paths.iter().map(|p| &p[dir.len()..]).collect();
    (dir.to_owned(), names)
}

/// What [`emit_cut`] answers: the cut's SQL over the views it names, or the hole the API
/// answers for it.
#[derive(Debug, Clone)]
pub enum Emitted {
    Query {
        sql: String,
        /// The record rows and the supersessions the SQL reads: `names.news` (the
        /// source-lane's partitions that may hold a row of the cut, by the manifest's clock
        /// statistics) and `names.supersessions` (the source-lane's table).
        views: Vec<View>,
        coverage: Coverage,
    },
    Hole {
        coverage: Coverage,
    },
}

/// The SQL of one cut of a version (`q`'s cut, window, lane, source and entity; its position
/// and limit are not used): a hole when the API answers one (the same keys), else the SQL
/// over the views it names. A version published before the rule tables existed cannot be
/// answered this way (its supersessions are in no table): refused, naming the fix.
pub async fn emit_cut(
    manifest: &Manifest,
    identity: &IdentityIndex,
    q: &NewsQuery,
    names: &Names,
    dialect: Dialect,
) -> Result<Emitted> {
    let q = q.clamped();
    let view = SourceCoverage::new(manifest, q.source, q.lane, Scope::Corpus);
    let (coverage, ciks) = q.needs(&view, identity);
    if !coverage.is_complete() {
        return Ok(Emitted::Hole { coverage });
    }
    let views = views_of(manifest, &q.cut(), q.source, names)?;
    let sql = cut_sql(
        &q.cut().over_lane_table(),
        q.filer_filter(ciks.as_deref()),
        names,
        dialect,
    )
    .await?;
    Ok(Emitted::Query {
        sql,
        views: views.into(),
        coverage,
    })
}

/// The two views a cut of `source` (in `cut`'s lane) reads: the partitions that may hold a
/// row of it (by the manifest's clock statistics) and the source-lane's supersessions table.
/// A version published before the rule tables existed has no such table: refused, naming
/// the fix.
pub fn views_of(
    manifest: &Manifest,
    cut: &Cut,
    source: SourceId,
    names: &Names,
) -> Result<[View; 2]> {
    let lane = cut.lane.unwrap_or(Lane::CertifiedPit);
    let table = crate::format::rule::entry(
        manifest,
        source,
        lane,
        crate::format::rule::RuleTable::Supersessions,
    )
    .ok_or_else(|| {
        Error::invalid(
            "corpus_version",
            format!(
                "this version lists no supersessions table of {source}/{lane} (published \
                     before the rule tables existed); the next publish derives them"
            ),
        )
    })?;
    if table.kind != crate::format::rule::KIND_SUPERSESSIONS {
        return Err(Error::invalid(
            "corpus_version",
            format!(
                "this version's supersessions table of {source}/{lane} does not place the \
                 revisions it names (published before the tables did); the next publish places \
                 them"
            ),
        ));
    }
    let paths = manifest
        .partitions
        .iter()
        .filter(|p| {
            p.source_id == source
                && p.lane == lane
                && p.may_hold_in(cut.clock, cut.start, cut.as_of)
        })
        .map(|p| p.path.clone())
        .collect();
    Ok([
        View {
            name: names.news.clone(),
            holds: Holds::Rows,
            paths,
        },
        View {
            name: names.supersessions.clone(),
            holds: Holds::Supersessions,
            paths: vec![table.path.clone()],
        },
    ])
}

/// Every record column of `table`, in the API's order: what a cut's SQL selects.
pub fn record_columns(table: &str) -> Vec<Expr> {
    schema()
        .fields()
        .iter()
        .map(|f| col(format!("{table}.{}", f.name())))
        .collect()
}

/// The arguments of a cut as a caller outside the service writes them (`asof.spark`'s
/// keywords), each as text: parsed and refused as `/v1/news` and `/v1/news/diff` parse and
/// refuse them (the same clock faults, vocabularies, ticker and CIK forms).
#[derive(Debug, Clone, Default)]
pub struct CutArgs<'a> {
    /// A diff window (`as_of_start`, `as_of_end`) rather than a cut (`as_of`).
    pub window: bool,
    pub as_of: Option<&'a str>,
    pub as_of_start: Option<&'a str>,
    pub as_of_end: Option<&'a str>,
    pub visible_by: Option<&'a str>,
    pub lane: Option<&'a str>,
    pub source: Option<&'a str>,
    pub ticker: Option<&'a str>,
    pub cik: Option<&'a str>,
}

impl CutArgs<'_> {
    /// The query these arguments ask of `manifest`'s version (whose held sources bound
    /// `source`), with the API's defaults (`published_at`, `certified_pit`, `sec.edgar`).
    pub fn query(&self, manifest: &Manifest) -> Result<NewsQuery> {
        use crate::model::clock::{Instant, Lane, SourceId, VisibleBy};
        use crate::read::corpus::Entity;
        fn named<T: std::str::FromStr>(
            param: &str,
            v: Option<&str>,
            default: T,
            valid: String,
        ) -> Result<T> {
            match v {
                None => Ok(default),
                Some(s) => s.parse().map_err(|_| {
                    Error::invalid(param, format!("unknown {param} {s:?}; valid: {valid}"))
                }),
            }
        }
        let required = |param: &str, v: Option<&str>| -> Result<Instant> {
            let s = v.ok_or_else(|| Error::invalid(param, format!("{param} is required")))?;
            Instant::parse_param(param, s)
        };
        let (start, as_of) = if self.window {
            (
                Some(required("as_of_start", self.as_of_start)?),
                required("as_of_end", self.as_of_end)?,
            )
        } else {
            (None, required("as_of", self.as_of)?)
        };
        let source = named(
            "source",
            self.source,
            SourceId::SecEdgar,
            SourceId::valid_set(),
        )?;
        let held = manifest.held_sources();
        if !held.contains(&source) {
            let names: Vec<&str> = held.iter().map(|s| s.as_str()).collect();
            return Err(Error::invalid(
                "source",
                format!(
                    "source {:?} is not held by this corpus; held sources: {}",
                    source.as_str(),
                    names.join(", ")
                ),
            ));
        }
        let entity = match (self.ticker, self.cik) {
            (Some(_), Some(_)) => return Err(Error::invalid("cik", "send ticker or cik, not both")),
            (Some(t), None) => Entity::Ticker(crate::model::identity::ticker(t, "ticker")?),
            (None, Some(c)) => Entity::Cik(crate::read::corpus::normalize_cik(c).ok_or_else(|| {
                Error::invalid(
                    "cik",
                    format!(
                        "cik must be 1 to 10 digits (leading zeros allowed), not all zero; got {c:?}"
                    ),
                )
            })?),
            (None, None) => Entity::All,
        };
        Ok(NewsQuery {
            source,
            lane: named("lane", self.lane, Lane::CertifiedPit, Lane::valid_set())?,
            visible_by: named(
                "visible_by",
                self.visible_by,
                VisibleBy::PublishedAt,
                VisibleBy::valid_set(),
            )?,
            start,
            as_of,
            entity,
            after: None,
            limit: usize::MAX,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use arrow::array::{Array, StringArray};
    use datafusion::datasource::file_format::options::ParquetReadOptions;

    use super::*;
    use crate::model::clock::{Instant, Lane, SourceId, VisibleBy};
    use crate::read::corpus::{Answer, Corpus, Entity};
    use crate::testkit::{RANDOM_CIKS, RANDOM_FROM, RANDOM_SPAN, Rng, random_corpus};

    /// A session with the views of `emitted` read from the corpus directory `dir`.
    async fn session_of(dir: &Path, views: &[View]) -> SessionContext {
        let ctx = SessionContext::new();
        for v in views {
            let schema = v.holds.schema();
            let table: Arc<dyn TableProvider> = if v.holds == Holds::Rows {
                crate::testkit::placed_rows(dir, &v.paths)
            } else if v.paths.is_empty() {
                Arc::new(EmptyTable::new(schema))
            } else {
                let files: Vec<String> = v
                    .paths
                    .iter()
                    .map(|p| dir.join(p).to_string_lossy().into_owned())
                    .collect();
                ctx.read_parquet(files, ParquetReadOptions::default().schema(&schema))
                    .await
                    .unwrap()
                    .into_view()
            };
            ctx.register_table(v.name.as_str(), table).unwrap();
        }
        ctx
    }

    /// `id/revision_id` of every row a SQL text answers, sorted.
    async fn ids_of(ctx: &SessionContext, sql: &str) -> Vec<String> {
        let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{e}: {sql}"));
        let mut out = Vec::new();
        for b in df.collect().await.unwrap() {
            let id = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
            let rev = b.column(13).as_any().downcast_ref::<StringArray>().unwrap();
            for i in 0..b.num_rows() {
                out.push(format!("{}/{}", id.value(i), rev.value(i)));
            }
        }
        out.sort();
        out
    }

    /// The exported rule and the engine's: for drawn cuts and windows on every clock, lane
    /// and entity (all rows, a CIK, a ticker, a ticker no interval places), the SQL written
    /// for another engine, run over the views it names, answers the rows the API answers;
    /// and it is a hole exactly when the API's answer is, with the same keys. On a fixed
    /// seed and a fresh one (printed, to replay).
    #[tokio::test]
    async fn the_sql_other_engines_run_answers_what_the_api_answers_for_drawn_cuts() {
        // 0x1943_5bb3 once drew no hole in 40 cuts; every tenth cut now starts before the
        // certified days, so each seed draws holes whatever else it draws.
        for seed in [0x6000_0060, 0x1943_5bb3, crate::testkit::fresh_seed()] {
            println!("exported-rule differential seed {seed:#x}");
            let (dir, store, _) = random_corpus(seed, seed % 2 == 0).await;
            let c = Corpus::open(store.clone()).await.unwrap();
            let identity = IdentityIndex::default();
            let mut rng = Rng(seed);
            let (mut compared, mut holes) = (0, 0);
            for i in 0..40 {
                let clock = VisibleBy::ALL[rng.below(3) as usize];
                let lane = Lane::ALL[rng.below(2) as usize];
                let at = |rng: &mut Rng| {
                    Instant::from_micros(
                        RANDOM_FROM + rng.below((RANDOM_SPAN + RANDOM_SPAN / 3) as u64) as i64
                            - RANDOM_SPAN / 10,
                    )
                };
                let (mut a, b) = (at(&mut rng), at(&mut rng));
                if i % 10 == 9 {
                    // Before the certified days begin (2024-11-01): a hole on any clock.
                    a = Instant::from_micros(RANDOM_FROM - 1 - rng.below(86_400_000_000) as i64);
                }
                let window = rng.below(2) == 0;
                let entity = match rng.below(3) {
                    0 => Entity::All,
                    _ => Entity::Cik(RANDOM_CIKS[rng.below(5) as usize].to_owned()),
                };
                let q = NewsQuery {
                    source: SourceId::SecEdgar,
                    lane,
                    visible_by: clock,
                    start: window.then_some(a.min(b)),
                    as_of: if window { a.max(b) } else { a },
                    entity,
                    after: None,
                    limit: 100_000,
                };
                let api = c.news(&q, Scope::Corpus).await.unwrap();
                let names = Names::prefixed(&format!("cut{i}"));
                let emitted = emit_cut(c.manifest(), &identity, &q, &names, Dialect::DataFusion)
                    .await
                    .unwrap();
                match (api, emitted) {
                    (Answer::Page { rows, next, .. }, Emitted::Query { sql, views, .. }) => {
                        assert!(next.is_none());
                        let mut want: Vec<String> = rows
                            .iter()
                            .map(|r| format!("{}/{}", r.id, r.revision_id))
                            .collect();
                        want.sort();
                        let ctx = session_of(dir.path(), &views).await;
                        assert_eq!(
                            ids_of(&ctx, &sql).await,
                            want,
                            "seed {seed:#x}: {q:?}\n{sql}"
                        );
                        compared += 1;
                    }
                    (Answer::Hole { coverage: a }, Emitted::Hole { coverage: b }) => {
                        assert_eq!(a, b, "seed {seed:#x}: {q:?}");
                        holes += 1;
                    }
                    (a, b) => {
                        panic!("seed {seed:#x}: {q:?}: the API answers {a:?}, the export {b:?}")
                    }
                }
            }
            assert!(
                compared >= 15 && holes >= 1,
                "seed {seed:#x}: {compared} compared, {holes} holes"
            );
        }
    }

    #[tokio::test]
    async fn a_ticker_is_resolved_by_the_identity_rule_and_a_ticker_no_interval_places_is_a_hole() {
        use crate::model::identity::{FORMAT, IdentityFile, TickerInterval};
        let (_dir, store, _) = random_corpus(0x6000_0061, false).await;
        let (_, m) = store.current().await.unwrap();
        let identity = IdentityIndex::new(IdentityFile {
            format: FORMAT.into(),
            evidence: vec![],
            tickers: vec![TickerInterval {
                ticker: "ABC".into(),
                cik: "20".into(),
                valid_from: crate::testkit::t("2024-12-01T00:00:00Z"),
                valid_to: crate::testkit::t("2025-01-01T00:00:00Z"),
                evidence: vec![],
            }],
            names: vec![],
        })
        .unwrap();
        let q = |as_of: &str| NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: crate::testkit::t(as_of),
            entity: Entity::Ticker("ABC".into()),
            after: None,
            limit: 10,
        };
        let names = Names::prefixed("t");
        let Emitted::Query { sql, .. } = emit_cut(
            &m,
            &identity,
            &q("2024-12-15T00:00:00Z"),
            &names,
            Dialect::Spark,
        )
        .await
        .unwrap() else {
            panic!("placed at that instant")
        };
        assert!(
            sql.contains("`cik` IN ('20')") || sql.contains("IN ('20')"),
            "{sql}"
        );
        let Emitted::Hole { coverage } = emit_cut(
            &m,
            &identity,
            &q("2025-01-15T00:00:00Z"),
            &names,
            Dialect::Spark,
        )
        .await
        .unwrap() else {
            panic!("no interval places ABC then")
        };
        assert_eq!(coverage.missing[0], "identity.ticker/ABC@2025-01-15");
    }

    #[tokio::test]
    async fn spark_and_duckdb_get_their_own_quoting_literals_and_anti_join() {
        let cut = Cut {
            start: Some(crate::testkit::t("2025-01-01T00:00:00Z")),
            lane: Some(Lane::CertifiedPit),
            ..Cut::at(
                crate::testkit::t("2025-02-01T12:30:00.5Z"),
                VisibleBy::CommittedAt,
            )
        };
        let names = Names::prefixed("v");
        let spark = cut_sql(&cut, None, &names, Dialect::Spark).await.unwrap();
        assert!(spark.contains("AND NOT EXISTS (SELECT 1 FROM"), "{spark}");
        assert!(
            spark.contains("`v_news`") && !spark.contains('"'),
            "{spark}"
        );
        assert!(
            spark.contains("CAST('2025-02-01T12:30:00.500+00:00' AS TIMESTAMP)"),
            "{spark}"
        );
        let duck = cut_sql(&cut, None, &names, Dialect::DuckDb).await.unwrap();
        assert!(
            duck.contains("NOT EXISTS") && duck.contains("\"v_news\""),
            "{duck}"
        );
        assert!(duck.contains("TIMESTAMP WITH TIME ZONE"), "{duck}");
    }

    #[test]
    fn a_spark_view_names_exactly_the_versions_files_by_one_glob() {
        let v = View {
            name: "n".into(),
            holds: Holds::Rows,
            paths: vec![
                "snapshots/partitions/sec.edgar/certified_pit/2025-01-02/ab.parquet".into(),
                "snapshots/partitions/sec.edgar/certified_pit/2025-01-03/cd.parquet".into(),
            ],
        };
        assert_eq!(
            view_sql(&v, Dialect::Spark, "s3a://b/c/").unwrap(),
            "CREATE OR REPLACE TEMPORARY VIEW n AS SELECT *, _metadata.file_name AS asof_file, \
             _metadata.row_index AS asof_row FROM parquet.`s3a://b/c/snapshots/\
             partitions/sec.edgar/certified_pit/{2025-01-02/ab.parquet,2025-01-03/cd.parquet}`"
        );
        let duck = view_sql(&v, Dialect::DuckDb, "/x").unwrap();
        assert!(
            duck.contains("parse_filename(filename) AS asof_file, file_row_number AS asof_row")
                && duck.contains("filename = true, file_row_number = true"),
            "{duck}"
        );
        let sup = View {
            holds: Holds::Supersessions,
            ..v.clone()
        };
        assert!(
            !view_sql(&sup, Dialect::Spark, "/x")
                .unwrap()
                .contains("_metadata")
        );
        assert!(view_sql(&v, Dialect::DataFusion, "/x").is_err());
        let empty = View {
            paths: vec![],
            ..v.clone()
        };
        let sql = view_sql(&empty, Dialect::DuckDb, "/x").unwrap();
        assert!(
            sql.starts_with("CREATE OR REPLACE TEMP VIEW n AS SELECT CAST(NULL AS VARCHAR) AS id")
        );
        assert!(
            sql.ends_with("CAST(NULL AS BIGINT) AS asof_row WHERE FALSE"),
            "{sql}"
        );
    }
}
