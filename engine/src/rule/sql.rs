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
use crate::model::cut::{
    Cut, ROW_FILE, ROW_INDEX, ROW_KEY, SUPERSEDED_FILE, SUPERSEDED_KEY, SUPERSEDED_ROW,
};
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

/// The names the SQL gives the tables of one cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The source-lane's partition rows (the record table).
    pub news: String,
    /// The source-lane's supersessions table.
    pub supersessions: String,
    /// The source-lane's partitions with their days ([`Holds::Files`]), read where the
    /// places are keyed by day ([`Keying::Day`]).
    pub files: String,
}

impl Names {
    /// `<prefix>_news`, `<prefix>_supersessions` and `<prefix>_files`.
    pub fn prefixed(prefix: &str) -> Self {
        Names {
            news: format!("{prefix}_news"),
            supersessions: format!("{prefix}_supersessions"),
            files: format!("{prefix}_files"),
        }
    }
}

/// How the exported plan finds a superseded revision's place among the rows it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keying {
    /// By file name and row index ([`Cut::plan_by_position`]): exact in every version.
    Place,
    /// By one number, `day << 32 | row index`, the day that of the row's `published_at`
    /// ([`Cut::plan_by_key`]): exact where [`day_keys`] holds, and what another engine probes
    /// fastest. `stale_rows` is the supersessions table's row count (the manifest's, which
    /// `asof verify` holds to the file): the keyed table never has more rows, and the plan
    /// says so with a `LIMIT` ([`cut_plan`]).
    Day { stale_rows: u64 },
}

/// The bits of a day key below its day: where a partition's row index goes.
pub const KEY_ROW_BITS: u32 = 32;
/// Microseconds of a day: a row's day is `published_at`'s micros divided by it.
const DAY_MICROS: i64 = 86_400_000_000;

/// The source-lane's partitions (paths) and each one's day, when a row's place in the version
/// is exactly `day(published_at) << 32 | row index` ([`Keying::Day`]): every partition holds
/// rows of its own UTC day alone (`published_at` never null, its least and greatest value on
/// the partition's date, which is 1970-01-01 or later, so integer division finds it in every
/// dialect), no two partitions share a date, and none holds 2^32 rows. Then the day names the
/// file and the row index the row, and no other row of the source-lane has the number.
/// Decided from the manifest's statistics alone (which `asof verify` recomputes from the
/// files), in O(partitions) and without reading a row; `None` where anything fails, or the
/// source-lane holds no partition (the export then keys by place).
pub fn day_keys(manifest: &Manifest, source: SourceId, lane: Lane) -> Option<Vec<(String, i64)>> {
    let mut out = Vec::new();
    let mut days = std::collections::HashSet::new();
    for p in manifest
        .partitions
        .iter()
        .filter(|p| p.source_id == source && p.lane == lane)
    {
        let c = &p.clocks.published_at;
        let day = i64::from(p.date.days());
        let on_day = |t: Option<crate::model::clock::Instant>| {
            t.is_some_and(|t| t.micros().div_euclid(DAY_MICROS) == day)
        };
        if c.nulls != 0
            || !on_day(c.min)
            || !on_day(c.max)
            || day < 0
            || p.row_count >= 1 << KEY_ROW_BITS
            || !days.insert(day)
        {
            return None;
        }
        out.push((p.path.clone(), day));
    }
    (!out.is_empty()).then_some(out)
}

/// The columns of a [`Holds::Files`] view: a partition's file name (as [`ROW_FILE`] and
/// [`SUPERSEDED_FILE`] give it) and its day (days since 1970-01-01).
pub const FILE_NAME: &str = "file";
pub const FILE_DAY: &str = "day";

/// The rule's plan over the tables of one cut: `rows` (of [`placed_rows_schema`]) and the
/// source-lane's `supersessions`, their places matched by name and row, or, given `keyed`
/// (the source-lane's [`Holds::Files`] table and [`Keying::Day`]'s `stale_rows`), by day key.
///
/// The keyed supersessions are the table joined to the files (a day for each superseded
/// revision's file), then `LIMIT stale_rows`, which takes nothing away (the join yields at
/// most one row per supersession) and is there for Spark's planner: without statistics of a
/// join's output it estimates the product of its inputs' sizes (gigabytes for a table of 20,000
/// supersessions and 7,000 files) and shuffles the whole cut for a sort-merge anti-join, where
/// a limit's estimate (rows times width) lets it broadcast the keys (BENCHMARKS.md, "The as-of
/// rule in Spark").
pub fn cut_plan(
    cut: &Cut,
    rows: datafusion::dataframe::DataFrame,
    supersessions: datafusion::dataframe::DataFrame,
    keyed: Option<(datafusion::dataframe::DataFrame, u64)>,
) -> Result<datafusion::dataframe::DataFrame> {
    use datafusion::logical_expr::JoinType;
    use datafusion::prelude::lit;
    let Some((files, stale_rows)) = keyed else {
        return cut.plan_by_position(rows, supersessions);
    };
    let keyed = supersessions
        .join(
            files,
            JoinType::Inner,
            &[SUPERSEDED_FILE],
            &[FILE_NAME],
            None,
        )?
        .select(vec![
            // Aliased, so the column is the derived table's, not the join's: the unparser
            // writes a qualified column above a `LIMIT` with the qualifier of the table below
            // it, a name the SQL cannot see there.
            col(crate::model::cut::SUPERSEDED_AT).alias(crate::model::cut::SUPERSEDED_AT),
            (col(FILE_DAY) * lit(1i64 << KEY_ROW_BITS) + col(SUPERSEDED_ROW)).alias(SUPERSEDED_KEY),
        ])?
        .limit(0, Some(usize::try_from(stale_rows).unwrap_or(usize::MAX)))?;
    cut.plan_by_key(rows, keyed)
}

/// The columns of a rows view in another engine: the record columns, then each row's place
/// ([`ROW_FILE`], [`ROW_INDEX`]) and its day key ([`ROW_KEY`], null where `published_at` is),
/// which that engine computes as it reads ([`view_sql`]) and [`Cut::plan_by_position`] or
/// [`Cut::plan_by_key`] anti-joins on.
pub fn placed_rows_schema() -> SchemaRef {
    crate::model::record::schema_with([
        Field::new(ROW_FILE, DataType::Utf8, false),
        Field::new(ROW_INDEX, DataType::Int64, false),
        Field::new(ROW_KEY, DataType::Int64, true),
    ])
}

/// A row's day key as [`view_sql`]'s views compute it and [`Keying::Day`] matches it: the
/// day of `published_at` (micros since 1970 divided by a day's) shifted above the row index.
/// `None` where `published_at` is null. The tests' views (`crate::testkit::placed_rows`)
/// compute it here.
pub fn day_key(published_at_micros: Option<i64>, row_index: i64) -> Option<i64> {
    published_at_micros.map(|t| t.div_euclid(DAY_MICROS) * (1i64 << KEY_ROW_BITS) + row_index)
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
    keying: Keying,
    dialect: Dialect,
) -> Result<String> {
    let ctx = SessionContext::new();
    for (name, schema) in [
        (&names.news, placed_rows_schema()),
        (&names.supersessions, supersessions_schema()),
        (&names.files, Holds::Files.schema()),
    ] {
        ctx.register_table(
            name.as_str(),
            Arc::new(EmptyTable::new(schema)) as Arc<dyn TableProvider>,
        )?;
    }
    let keyed = match keying {
        Keying::Place => None,
        Keying::Day { stale_rows } => Some((ctx.table(names.files.as_str()).await?, stale_rows)),
    };
    let mut df = cut_plan(
        cut,
        ctx.table(names.news.as_str()).await?,
        ctx.table(names.supersessions.as_str()).await?,
        keyed,
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
/// the corpus root. A [`Holds::Files`] view reads no file: it lists `paths` (by file name)
/// with `days`, one for each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub name: String,
    pub holds: Holds,
    pub paths: Vec<String>,
    /// Each path's day (days since 1970-01-01), in a [`Holds::Files`] view; empty elsewhere.
    pub days: Vec<i64>,
}

/// What a view of the emitted SQL holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// Partition rows (the record schema).
    Rows,
    /// A supersessions table.
    Supersessions,
    /// A source-lane's partitions by file name ([`FILE_NAME`]) and day ([`FILE_DAY`]), what
    /// [`Keying::Day`] maps a superseded revision's place to its key with; written out from
    /// the manifest, not read from a file.
    Files,
}

impl Holds {
    pub const ALL: [Holds; 3] = [Holds::Rows, Holds::Supersessions, Holds::Files];

    pub fn schema(self) -> SchemaRef {
        match self {
            Holds::Rows => schema(),
            Holds::Supersessions => supersessions_schema(),
            Holds::Files => Arc::new(Schema::new(vec![
                Field::new(FILE_NAME, DataType::Utf8, false),
                Field::new(FILE_DAY, DataType::Int64, false),
            ])),
        }
    }

    /// The name a caller outside Rust gives it (`asof.spark`'s views).
    pub fn name(self) -> &'static str {
        match self {
            Holds::Rows => "rows",
            Holds::Supersessions => "supersessions",
            Holds::Files => "files",
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
/// `filename` (its last part) and `file_row_number`, and its day key ([`day_key`], computed
/// only where a query reads it). A files view is its rows written out (`VALUES`). DataFusion
/// reads no such columns, so it gets no view here (the tests build theirs from the files,
/// `crate::testkit`).
pub fn view_sql(v: &View, dialect: Dialect, root: &str) -> Result<String> {
    // Refuses DataFusion, which reads no row places from Parquet files.
    let place = place_columns(dialect)?;
    let root = root.trim_end_matches('/');
    let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let rows = v.holds == Holds::Rows;
    let body = if v.holds == Holds::Files && !v.paths.is_empty() {
        let values: Vec<String> = v
            .paths
            .iter()
            .zip(&v.days)
            .map(|(p, day)| format!("({}, {day})", quote(crate::format::rule::file_name(p))))
            .collect();
        match dialect {
            Dialect::Spark => format!(
                "SELECT * FROM VALUES {} AS t({FILE_NAME}, {FILE_DAY})",
                values.join(", ")
            ),
            _ => format!(
                "SELECT * FROM (VALUES {}) AS t({FILE_NAME}, {FILE_DAY})",
                values.join(", ")
            ),
        }
    } else if v.paths.is_empty() {
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
                    format!(", {}", place.join(", "))
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
                        "SELECT * EXCLUDE (filename, file_row_number), {} FROM \
                         read_parquet([{}], filename = true, file_row_number = true)",
                        place.join(", "),
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

/// The columns a rows view adds to a partition's record columns in `dialect`, each as
/// `<expression> AS <name>`: the row's place ([`ROW_FILE`], [`ROW_INDEX`]) as the engine
/// computes it while it reads (Spark's `_metadata.file_name` and `_metadata.row_index`,
/// DuckDB's `filename`, its last part, and `file_row_number`, both read with
/// `read_parquet(…, filename = true, file_row_number = true)`), and its day key ([`ROW_KEY`],
/// as [`day_key`] computes it: integer division of a non-negative count of micros, which
/// [`day_keys`] ensures, is a floor in both). `asof.spark` selects these on its own
/// DataFrames.
pub fn place_columns(dialect: Dialect) -> Result<[String; 3]> {
    let (file, row, micros, div) = match dialect {
        Dialect::Spark => (
            "_metadata.file_name",
            "_metadata.row_index",
            "unix_micros(published_at)",
            "div",
        ),
        Dialect::DuckDb => (
            "parse_filename(filename)",
            "file_row_number",
            "epoch_us(published_at)",
            "//",
        ),
        Dialect::DataFusion => {
            return Err(Error::invalid(
                "dialect",
                "DataFusion reads no row places from Parquet files: define the views in spark \
                 or duckdb",
            ));
        }
    };
    Ok([
        format!("{file} AS {ROW_FILE}"),
        format!("{row} AS {ROW_INDEX}"),
        format!(
            "({micros} {div} {DAY_MICROS}) * {} + {row} AS {ROW_KEY}",
            1i64 << KEY_ROW_BITS
        ),
    ])
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
        /// statistics), `names.supersessions` (the source-lane's table) and, where the
        /// places are keyed by day, `names.files` ([`views_of`]).
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
    let (views, keying) = views_of(manifest, &q.cut(), q.source, names)?;
    let sql = cut_sql(
        &q.cut().over_lane_table(),
        q.filer_filter(ciks.as_deref()),
        names,
        keying,
        dialect,
    )
    .await?;
    Ok(Emitted::Query {
        sql,
        views,
        coverage,
    })
}

/// The views a cut of `source` (in `cut`'s lane) reads, and how its plan matches places: the
/// partitions that may hold a row of it (by the manifest's clock statistics), the
/// source-lane's supersessions table and, where the version's places can be keyed by day
/// ([`day_keys`]), the source-lane's files with their days ([`Keying::Day`]). A version
/// published before the rule tables existed has no such table: refused, naming the fix.
pub fn views_of(
    manifest: &Manifest,
    cut: &Cut,
    source: SourceId,
    names: &Names,
) -> Result<(Vec<View>, Keying)> {
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
    let mut views = vec![
        View {
            name: names.news.clone(),
            holds: Holds::Rows,
            paths,
            days: vec![],
        },
        View {
            name: names.supersessions.clone(),
            holds: Holds::Supersessions,
            paths: vec![table.path.clone()],
            days: vec![],
        },
    ];
    let Some(files) = day_keys(manifest, source, lane) else {
        return Ok((views, Keying::Place));
    };
    let (paths, days) = files.into_iter().unzip();
    views.push(View {
        name: names.files.clone(),
        holds: Holds::Files,
        paths,
        days,
    });
    Ok((
        views,
        Keying::Day {
            stale_rows: table.row_count,
        },
    ))
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

    use super::*;
    use crate::model::clock::{Instant, Lane, SourceId, VisibleBy};
    use crate::read::corpus::{Answer, Corpus, Entity};
    use crate::testkit::{RANDOM_CIKS, RANDOM_FROM, RANDOM_SPAN, Rng, random_corpus};

    /// A session with the views of `emitted` read from the corpus directory `dir`.
    async fn session_of(dir: &Path, views: &[View]) -> SessionContext {
        let ctx = SessionContext::new();
        crate::testkit::register_views(&ctx, dir, views).await;
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
    /// seed and a fresh one (printed, to replay), each over a corpus with rows without
    /// `published_at` (places keyed by file and row) and one without (keyed by day).
    #[tokio::test]
    async fn the_sql_other_engines_run_answers_what_the_api_answers_for_drawn_cuts() {
        for (seed, null_published) in [0x6000_0060, crate::testkit::fresh_seed()]
            .into_iter()
            .flat_map(|s| [(s, true), (s, false)])
        {
            println!(
                "exported-rule differential seed {seed:#x} (null published_at: {null_published})"
            );
            let (dir, store, _) =
                crate::testkit::random_corpus_with(seed, seed % 2 == 0, null_published).await;
            let c = Corpus::open(store.clone()).await.unwrap();
            // Rows without `published_at` (certified-lane rows of the random corpus) keep that
            // source-lane's places from being keyed by day; every other source-lane is keyed.
            let keyed = |lane: Lane| day_keys(c.manifest(), SourceId::SecEdgar, lane).is_some();
            assert_eq!(keyed(Lane::CertifiedPit), !null_published);
            assert!(keyed(Lane::ForwardFirstSeen));
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
                let (a, b) = (at(&mut rng), at(&mut rng));
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
                        assert_eq!(
                            views.iter().any(|v| v.holds == Holds::Files),
                            keyed(lane),
                            "{sql}"
                        );
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
        let spark = cut_sql(&cut, None, &names, Keying::Place, Dialect::Spark)
            .await
            .unwrap();
        assert!(spark.contains("AND NOT EXISTS (SELECT 1 FROM"), "{spark}");
        assert!(
            spark.contains("`v_news`") && !spark.contains('"'),
            "{spark}"
        );
        assert!(
            spark.contains("CAST('2025-02-01T12:30:00.500+00:00' AS TIMESTAMP)"),
            "{spark}"
        );
        let duck = cut_sql(&cut, None, &names, Keying::Place, Dialect::DuckDb)
            .await
            .unwrap();
        assert!(
            duck.contains("NOT EXISTS") && duck.contains("\"v_news\""),
            "{duck}"
        );
        assert!(duck.contains("TIMESTAMP WITH TIME ZONE"), "{duck}");
        // Keyed by day: the anti-join probes the one number, never the file name.
        let keyed = cut_sql(
            &cut,
            None,
            &names,
            Keying::Day { stale_rows: 7 },
            Dialect::Spark,
        )
        .await
        .unwrap();
        assert!(
            keyed.contains("`v_files`")
                && keyed.contains("`asof_key`")
                && keyed.contains("LIMIT 7")
                && !keyed.contains("`asof_file`"),
            "{keyed}"
        );
    }

    /// A partition of `day` (days since 1970) whose rows' `published_at` run from `min` to
    /// `max` (micros), with `nulls` null.
    fn partition(
        day: i32,
        min: i64,
        max: i64,
        nulls: u64,
    ) -> crate::model::manifest::PartitionEntry {
        use crate::model::clock::{Day, Instant};
        use crate::model::manifest::{ClockStats, PartitionClocks};
        let none = ClockStats {
            min: None,
            max: None,
            nulls: 0,
        };
        crate::model::manifest::PartitionEntry {
            source_id: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            date: Day::from_days(day),
            path: format!("snapshots/partitions/sec.edgar/certified_pit/d{day}/{day:064}.parquet"),
            row_count: 10,
            bytes: 1,
            sha256: format!("{day:064}"),
            clocks: PartitionClocks {
                event_at: none,
                published_at: ClockStats {
                    min: Some(Instant::from_micros(min)),
                    max: Some(Instant::from_micros(max)),
                    nulls,
                },
                available_at: none,
                acceptance_at: none,
                committed_at: none,
            },
            commits: None,
            available_hours: None,
        }
    }

    /// The day key is a rule only where it is exact, read off the manifest: every partition's
    /// `published_at` on its own date and never null, no date twice, no day before 1970.
    /// Anything else keys by place.
    #[test]
    fn places_are_keyed_by_day_only_where_the_manifest_proves_the_key_names_one_place() {
        const D: i64 = 86_400_000_000;
        let mut m = crate::testkit::empty_manifest();
        let keys = |m: &Manifest| day_keys(m, SourceId::SecEdgar, Lane::CertifiedPit);
        assert_eq!(keys(&m), None, "no partition: nothing to key");
        m.partitions = vec![
            partition(20_000, 20_000 * D, 20_001 * D - 1, 0),
            partition(20_001, 20_001 * D + 5, 20_001 * D + 9, 0),
        ];
        let got = keys(&m).expect("every partition on its own day");
        assert_eq!(
            got.iter().map(|(_, d)| *d).collect::<Vec<_>>(),
            [20_000, 20_001]
        );
        let refused = [
            (
                "a row of the next day",
                partition(20_002, 20_002 * D, 20_003 * D, 0),
            ),
            (
                "a null published_at",
                partition(20_002, 20_002 * D, 20_002 * D, 1),
            ),
            ("a date twice", partition(20_001, 20_001 * D, 20_001 * D, 0)),
            ("a day before 1970", partition(-1, -D, -1, 0)),
        ];
        for (why, p) in refused {
            let mut m = m.clone();
            m.partitions.push(p);
            assert_eq!(keys(&m), None, "{why}");
        }
        let mut big = m.clone();
        big.partitions[0].row_count = 1 << KEY_ROW_BITS;
        assert_eq!(keys(&big), None, "a partition of 2^32 rows");
        // Another source-lane's partitions are not this one's concern.
        let mut other = m.clone();
        other
            .partitions
            .push(crate::model::manifest::PartitionEntry {
                lane: Lane::ForwardFirstSeen,
                ..partition(20_000, 0, 0, 3)
            });
        assert!(keys(&other).is_some());
        // The key each engine computes from a row: the day above the row index.
        assert_eq!(day_key(Some(20_001 * D + 7), 3), Some((20_001 << 32) + 3));
        assert_eq!(day_key(None, 3), None);
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
            days: vec![],
        };
        assert_eq!(
            view_sql(&v, Dialect::Spark, "s3a://b/c/").unwrap(),
            "CREATE OR REPLACE TEMPORARY VIEW n AS SELECT *, _metadata.file_name AS asof_file, \
             _metadata.row_index AS asof_row, (unix_micros(published_at) div 86400000000) * \
             4294967296 + _metadata.row_index AS asof_key FROM parquet.`s3a://b/c/snapshots/\
             partitions/sec.edgar/certified_pit/{2025-01-02/ab.parquet,2025-01-03/cd.parquet}`"
        );
        let duck = view_sql(&v, Dialect::DuckDb, "/x").unwrap();
        assert!(
            duck.contains("parse_filename(filename) AS asof_file, file_row_number AS asof_row")
                && duck.contains(
                    "(epoch_us(published_at) // 86400000000) * 4294967296 + \
                                  file_row_number AS asof_key"
                )
                && duck.contains("filename = true, file_row_number = true"),
            "{duck}"
        );
        let files = View {
            holds: Holds::Files,
            days: vec![20_090, 20_091],
            ..v.clone()
        };
        assert_eq!(
            view_sql(&files, Dialect::Spark, "/x").unwrap(),
            "CREATE OR REPLACE TEMPORARY VIEW n AS SELECT * FROM VALUES ('ab.parquet', 20090), \
             ('cd.parquet', 20091) AS t(file, day)"
        );
        assert!(view_sql(&files, Dialect::DuckDb, "/x").unwrap().ends_with(
            "FROM (VALUES ('ab.parquet', 20090), ('cd.parquet', 20091)) AS t(file, day)"
        ));
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
            sql.ends_with(
                "CAST(NULL AS BIGINT) AS asof_row, CAST(NULL AS BIGINT) AS asof_key WHERE FALSE"
            ),
            "{sql}"
        );
    }
}
