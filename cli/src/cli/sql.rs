//! `asof sql`: read-only SQL over a corpus version, one statement from the command line, a
//! script on standard input, or an interactive prompt with a history; progress of long
//! queries on standard error.
//!
//! Only the manifest is read before a query: SQL reads the partitions itself, and loading the
//! version as the service does (indexes, supersessions) would cost more than most queries.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use asof_engine::CorpusStore;
use asof_engine::model::manifest::Manifest;
use futures::TryStreamExt;

use super::CliResult;
use super::flags::CorpusArg;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

type Fallible<T = ()> = Result<T, Box<dyn std::error::Error>>;

#[derive(Debug, Args)]
pub struct SqlArgs {
    #[command(flatten)]
    pub corpus: CorpusArg,
    /// A read-only SELECT (DDL, DML and other statements are refused). Without one, statements
    /// are read from standard input: at a terminal, a prompt (end each statement with `;`,
    /// `.quit` to leave; arrow keys recall earlier statements, kept in `ASOF_SQL_HISTORY`,
    /// by default `~/.asof_sql_history`); otherwise a script, each statement's answer in turn.
    pub sql: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: SqlFormat,
    /// Write the answer to this file instead of standard output, streamed in bounded memory
    /// (required for parquet). The file appears only once the answer is whole: a failed query
    /// leaves no partial file and never replaces an existing one.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// After the answer, print to standard error the rows written, the wall time and the
    /// process's peak resident memory (where the system reports it).
    #[arg(long)]
    pub stats: bool,
    /// Mebibytes the query's sorts, joins and aggregations may hold before they spill to
    /// temporary files.
    #[arg(
        long = "memory-limit-mb",
        env = "ASOF_SQL_MEMORY_MB",
        default_value_t = (asof_engine::sql::MEMORY_POOL_BYTES >> 20) as u64,
        value_parser = clap::value_parser!(u64).range(16..)
    )]
    pub memory_limit_mb: u64,
    /// Progress of a query that runs longer than a second, on standard error: time, bytes
    /// read, rows answered. `auto`: a live line when standard error is a terminal; `always`:
    /// also a line a second, and a last one, when it is not (a log); `never`.
    #[arg(long, value_enum, default_value = "auto")]
    pub progress: SqlProgress,
    /// Print the statement as another engine runs it over this version's files, instead of
    /// running it: each `news_asof`/`news_diff` becomes the as-of rule's own plan over two
    /// views (the partitions that may hold a row of the cut, and the source-lane's
    /// supersessions table), each defined first as a view of its Parquet files (docs/spark.md).
    /// A cut this version does not cover is refused with the missing coverage keys.
    #[arg(long = "emit-sql", value_enum, value_name = "DIALECT")]
    pub emit_sql: Option<EmitDialect>,
    /// With --emit-sql: the corpus root as the other engine names it (default: this corpus's
    /// location as a URL, `s3://` written `s3a://` for Spark).
    #[arg(long = "emit-root", requires = "emit_sql", value_name = "URL")]
    pub emit_root: Option<String>,
}

/// Whose SQL `asof sql --emit-sql` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EmitDialect {
    /// Spark SQL 3.4 and 4.x (no Delta or other package needed).
    Spark,
    /// DuckDB.
    Duckdb,
}

/// When `asof sql` shows a query's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SqlProgress {
    Auto,
    Always,
    Never,
}

/// How `asof sql` writes its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SqlFormat {
    /// A text table (reads the whole answer first, to size its columns).
    Table,
    Csv,
    /// One JSON array of objects.
    Json,
    /// A Parquet file (with --out), Snappy-compressed, the answer's Arrow schema.
    Parquet,
}

pub(super) async fn run(a: SqlArgs) -> CliResult {
    if a.format == SqlFormat::Parquet && a.out.is_none() {
        return Err("--format parquet writes a file: name it with --out FILE".into());
    }
    let store = CorpusStore::open(&a.corpus.corpus)?;
    let (version, manifest) = store.current().await?;
    if let Some(dialect) = a.emit_sql {
        let Some(q) = &a.sql else {
            return Err("--emit-sql writes one statement: give it".into());
        };
        print!(
            "{}",
            emit(&a, dialect, &store, &version, &manifest, q).await?
        );
        return Ok(ExitCode::SUCCESS);
    }
    match &a.sql {
        Some(q) => {
            answer(&a, &store, &manifest, q).await?;
            Ok(ExitCode::SUCCESS)
        }
        None if a.out.is_some() => {
            Err("--out writes one statement's answer: give the statement".into())
        }
        None if std::io::stdin().is_terminal() => prompt(&a, &store, &manifest, &version).await,
        None => script(&a, &store, &manifest).await,
    }
}

/// `q` as Spark or DuckDB runs it over this version's files: the views, then the statement.
async fn emit(
    a: &SqlArgs,
    dialect: EmitDialect,
    store: &CorpusStore,
    version: &str,
    manifest: &Manifest,
    q: &str,
) -> Fallible<String> {
    use asof_engine::rule::Dialect;
    let dialect = match dialect {
        EmitDialect::Spark => Dialect::Spark,
        EmitDialect::Duckdb => Dialect::DuckDb,
    };
    let emitted = asof_engine::sql::emit(store, manifest, q, dialect).await?;
    let root = match &a.emit_root {
        Some(r) => r.clone(),
        None => match store.local_root() {
            Some(dir) => format!(
                "file://{}",
                std::fs::canonicalize(dir)?
                    .display()
                    .to_string()
                    .trim_end_matches('/')
            ),
            None => {
                let url = store.display().trim_end_matches('/').to_owned();
                match (dialect, url.strip_prefix("s3://")) {
                    (Dialect::Spark, Some(rest)) => format!("s3a://{rest}"),
                    _ => url,
                }
            }
        },
    };
    let header = [
        format!("asof corpus version {version}"),
        format!("generated by `asof sql --emit-sql` from: {}", q.split_whitespace().collect::<Vec<_>>().join(" ")),
        "The views name this version's files only; its cuts' coverage is complete (checked when written).".to_owned(),
    ];
    Ok(emitted.script(dialect, &root, &header)?)
}

/// The statements of a script, each as SQL text of its own (split by DataFusion's parser, so a
/// `;` inside a string or a comment does not end one).
fn statements(text: &str) -> Fallible<Vec<String>> {
    let parsed = datafusion::sql::parser::DFParser::parse_sql(text)?;
    Ok(parsed.into_iter().map(|s| s.to_string()).collect())
}

/// Standard input as a script: every statement answered in turn; a statement that fails is
/// reported and the next one runs; the exit status says whether any failed.
async fn script(a: &SqlArgs, store: &CorpusStore, manifest: &Manifest) -> CliResult {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let mut failed = false;
    for q in statements(&text)? {
        if let Err(e) = answer(a, store, manifest, &q).await {
            eprintln!("error: {e}");
            failed = true;
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Where the prompt keeps its history: `ASOF_SQL_HISTORY` (empty: none kept), else
/// `~/.asof_sql_history`, as `duckdb` keeps `~/.duckdb_history`.
fn history_file() -> Option<std::path::PathBuf> {
    match std::env::var_os("ASOF_SQL_HISTORY") {
        Some(p) if p.is_empty() => None,
        Some(p) => Some(p.into()),
        None => {
            std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".asof_sql_history"))
        }
    }
}

/// The interactive prompt, as the `duckdb` and `psql` command lines have it: a statement may
/// span lines and ends with `;`; the arrow keys edit the line and recall earlier statements
/// (this session's and, from the history file, earlier sessions'); Ctrl-C drops the
/// statement being typed; Ctrl-D or `.quit` leaves.
async fn prompt(a: &SqlArgs, store: &CorpusStore, manifest: &Manifest, version: &str) -> CliResult {
    use rustyline::error::ReadlineError;
    eprintln!(
        "asof sql on {version} ({} partitions): tables news, partitions, coverage, identity, \
         identity_names; functions news_asof, news_diff, coverage_asof, identity_asof. End a \
         statement with ';'; .quit to leave.",
        manifest.partitions.len()
    );
    let mut editor = rustyline::DefaultEditor::new()?;
    let history = history_file();
    if let Some(h) = &history
        && h.exists()
        && let Err(e) = editor.load_history(h)
    {
        eprintln!("history {} not read: {e}", h.display());
    }
    let mut typed = String::new();
    loop {
        let line = match editor.readline(if typed.is_empty() {
            "asof> "
        } else {
            "  ...> "
        }) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                typed.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        let trimmed = line.trim();
        if typed.is_empty() && matches!(trimmed, ".quit" | ".exit" | "\\q" | "quit" | "exit") {
            break;
        }
        if typed.is_empty() && trimmed.is_empty() {
            continue;
        }
        typed.push_str(&line);
        typed.push('\n');
        if !trimmed.ends_with(';') {
            continue;
        }
        let text = std::mem::take(&mut typed);
        // One history entry per statement, on one line, so one recall brings it back whole.
        let entry = text.split_whitespace().collect::<Vec<_>>().join(" ");
        editor.add_history_entry(entry.as_str())?;
        if let Some(h) = &history
            && let Err(e) = editor.append_history(h)
        {
            eprintln!("history {} not written: {e}", h.display());
        }
        let result = match statements(&text) {
            Ok(qs) => {
                let mut r = Ok(());
                for q in qs {
                    r = answer(a, store, manifest, &q).await;
                    if r.is_err() {
                        break;
                    }
                }
                r
            }
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            eprintln!("error: {e}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Shows a running query's progress on standard error until `done` fires (see
/// `SqlArgs::progress`): nothing during its first second, then time, bytes read and rows.
fn report_progress(
    mode: SqlProgress,
    query: Arc<asof_engine::sql::Query>,
    rows: Arc<AtomicU64>,
    mut done: tokio::sync::oneshot::Receiver<()>,
) -> Option<tokio::task::JoinHandle<()>> {
    let terminal = std::io::stderr().is_terminal();
    let live = match mode {
        SqlProgress::Never => return None,
        SqlProgress::Auto if !terminal => return None,
        _ => terminal,
    };
    let started = std::time::Instant::now();
    let line = move || {
        format!(
            "{:.1} s, {} read, {} row(s)",
            started.elapsed().as_secs_f64(),
            indicatif::HumanBytes(query.bytes_read()),
            indicatif::HumanCount(rows.load(Ordering::Relaxed))
        )
    };
    Some(tokio::spawn(async move {
        let bar = indicatif::ProgressBar::hidden();
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
        let mut last_line = std::time::Instant::now();
        loop {
            tokio::select! {
                _ = &mut done => break,
                _ = tick.tick() => {}
            }
            if started.elapsed() < std::time::Duration::from_secs(1) {
                continue;
            }
            if live {
                if bar.is_hidden() {
                    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                    bar.set_style(
                        indicatif::ProgressStyle::with_template("{spinner} {msg}")
                            .expect("a fixed template"),
                    );
                }
                bar.set_message(line());
                bar.tick();
            } else if last_line.elapsed() >= std::time::Duration::from_secs(1) {
                eprintln!("progress: {}", line());
                last_line = std::time::Instant::now();
            }
        }
        bar.finish_and_clear();
        if !live {
            eprintln!("progress: done, {}", line());
        }
    }))
}

/// Runs one statement and writes its answer as `a` asks.
async fn answer(a: &SqlArgs, store: &CorpusStore, manifest: &Manifest, q: &str) -> Fallible {
    let started = std::time::Instant::now();
    let memory = usize::try_from(a.memory_limit_mb << 20).unwrap_or(usize::MAX);
    let query = Arc::new(asof_engine::sql::prepare(store, manifest, q, memory).await?);
    let batches = query.execute()?;
    let rows = Arc::new(AtomicU64::new(0));
    let counted = rows.clone();
    let (done, stop) = tokio::sync::oneshot::channel();
    let progress = report_progress(a.progress, query, rows.clone(), stop);
    let written = write_answer(a, batches, counted).await;
    let _ = done.send(());
    if let Some(p) = progress {
        let _ = p.await;
    }
    written?;
    if a.stats {
        let peak = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map_or_else(|| "unknown".to_owned(), |kb| format!("{} MiB", kb / 1024));
        eprintln!(
            "{} row(s) in {} ms; peak resident memory {peak}",
            rows.load(Ordering::Relaxed),
            started.elapsed().as_millis()
        );
    }
    Ok(())
}

/// Writes an answer as `a` asks, counting its rows into `counted` as they stream in.
async fn write_answer(
    a: &SqlArgs,
    batches: datafusion::execution::SendableRecordBatchStream,
    counted: Arc<AtomicU64>,
) -> Fallible {
    let schema = batches.schema();
    let mut batches = batches.inspect_ok(move |b| {
        counted.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
    });
    // To a file: written beside it under a temporary name and renamed into place once whole.
    let staged = match &a.out {
        Some(path) => {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            Some(tempfile::NamedTempFile::new_in(dir)?)
        }
        None => None,
    };
    // `Send`: the Parquet writer requires it (standard output's lock is not).
    let mut out: Box<dyn Write + Send> = match &staged {
        Some(f) => Box::new(std::io::BufWriter::new(f.reopen()?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    // CSV, JSON and Parquet are written a batch at a time as the answer streams in; the table
    // layout needs every row to size its columns.
    match a.format {
        SqlFormat::Table => {
            let all: Vec<_> = batches.try_collect().await?;
            writeln!(out, "{}", arrow::util::pretty::pretty_format_batches(&all)?)?;
        }
        SqlFormat::Csv => {
            let mut w = arrow::csv::Writer::new(&mut out);
            // The header even when no row comes: an empty answer is a header alone.
            w.write(&arrow::array::RecordBatch::new_empty(schema.clone()))?;
            while let Some(b) = batches.try_next().await? {
                w.write(&b)?;
            }
        }
        SqlFormat::Json => {
            let mut w = arrow::json::ArrayWriter::new(&mut out);
            while let Some(b) = batches.try_next().await? {
                w.write(&b)?;
            }
            w.finish()?;
            writeln!(out)?;
        }
        SqlFormat::Parquet => {
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .build();
            let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, Some(props))?;
            while let Some(b) = batches.try_next().await? {
                w.write(&b)?;
            }
            w.close()?;
        }
    }
    out.flush()?;
    drop(out);
    if let (Some(staged), Some(path)) = (staged, &a.out) {
        staged.persist(path)?;
    }
    Ok(())
}
