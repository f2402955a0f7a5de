//! `asof query`: a cut or diff of the corpus on disk, its flags parsed by the API's own query
//! structs, written as JSON (the API's envelope), CSV or a table.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use asof_answer::Error;
use asof_answer::data::{DiffParams, NewsParams, news_page};
use asof_answer::envelope::{Envelope, ErrorEnvelope, NewsRecord, Status};
use asof_answer::params::{FromQuery, Params};
use asof_answer::{Op, Pager};
use asof_engine::model::coverage::Scope;
use asof_engine::{Corpus, Instant, NewsQuery, VisibleBy};
use clap::Args;

use super::flags::{CorpusArg, Format};
use super::{CliResult, EXIT_HOLE, open};

#[derive(Debug, Args)]
pub struct QueryArgs {
    #[command(flatten)]
    pub corpus: CorpusArg,
    /// Ticker, resolved to CIKs through identity as of the cut.
    #[arg(long)]
    pub ticker: Option<String>,
    /// CIK, with or without leading zeros.
    #[arg(long)]
    pub cik: Option<String>,
    /// The cut: RFC 3339 UTC with a literal Z.
    #[arg(long = "as-of")]
    pub as_of: String,
    /// published_at (default), available_at or committed_at.
    #[arg(long = "visible-by")]
    pub visible_by: Option<String>,
    /// certified_pit (default) or forward_first_seen.
    #[arg(long)]
    pub lane: Option<String>,
    /// Source id; defaults to sec.edgar.
    #[arg(long)]
    pub source: Option<String>,
    /// Start of a diff window (exclusive): rows that became visible after it, up to --as-of.
    #[arg(long)]
    pub since: Option<String>,
    /// Rows to print: 1 to 1000, default 100.
    #[arg(long)]
    pub limit: Option<String>,
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Answer from this published version of the corpus (sha256:...), as `corpus_version=`
    /// does over HTTP; default: the current one. Every version the current one descends
    /// from can be asked (a corpus on disk keeps them all).
    #[arg(long = "corpus-version")]
    pub corpus_version: Option<String>,
}

/// Each `asof query` flag and the HTTP query parameter it fills: the flags are parsed by the
/// routes' own query structs, so the CLI refuses what the API refuses, with its messages.
pub(crate) const QUERY_FLAGS: &[(&str, &str)] = &[
    ("ticker", "--ticker"),
    ("cik", "--cik"),
    ("as_of", "--as-of"),
    ("as_of_end", "--as-of"),
    ("as_of_start", "--since"),
    ("visible_by", "--visible-by"),
    ("lane", "--lane"),
    ("source", "--source"),
    ("limit", "--limit"),
    ("corpus_version", "--corpus-version"),
];

/// An API refusal, said with the flag's name instead of the parameter's (a fault of no
/// parameter, a corpus that cannot be read, is said as it is; its detail is logged above it).
pub(crate) fn flag_error(e: Error) -> Box<dyn std::error::Error> {
    let Some(param) = e.param() else {
        return e.message().into();
    };
    let flag = QUERY_FLAGS
        .iter()
        .find(|(p, _)| *p == param)
        .map_or(param.as_str(), |(_, f)| f);
    format!("{flag}: {}", e.message()).into()
}

/// The engine query `asof query` runs: a diff window with `--since`, else a cut.
pub(crate) fn query_of(a: &QueryArgs, corpus: &Corpus) -> Result<NewsQuery, Error> {
    let (cut_name, names) = match a.since {
        None => ("as_of", NewsParams::NAMES),
        Some(_) => ("as_of_end", DiffParams::NAMES),
    };
    let pairs = [
        ("ticker", a.ticker.as_ref()),
        ("cik", a.cik.as_ref()),
        (cut_name, Some(&a.as_of)),
        ("as_of_start", a.since.as_ref()),
        ("visible_by", a.visible_by.as_ref()),
        ("lane", a.lane.as_ref()),
        ("source", a.source.as_ref()),
        ("limit", a.limit.as_ref()),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_owned(), v?.clone())));
    let params = Params::from_pairs(pairs, names)?;
    match a.since {
        None => NewsParams::from_params(&params)?.to_query(corpus),
        Some(_) => {
            let d = DiffParams::from_params(&params)?;
            // The API answers a backwards window as empty (its description cannot relate two
            // parameters); at a terminal a reversed pair is far likelier a slip, so say so.
            if d.as_of_start > d.as_of_end {
                return Err(Error::invalid(
                    "as_of_start",
                    "as_of_start must not be after as_of_end",
                ));
            }
            d.to_query(corpus)
        }
    }
}

pub(crate) async fn query(a: QueryArgs) -> CliResult {
    let current = Arc::new(open(&a.corpus.corpus).await?);
    let corpus = match &a.corpus_version {
        None => current,
        Some(v) => {
            use asof_answer::versions::{CacheBounds, Retention, Versions};
            let pin = asof_answer::params::Pin::parse("corpus_version", v).map_err(flag_error)?;
            let all = Retention {
                versions: None,
                days: None,
            };
            Versions::new(all, CacheBounds::default(), None)
                .resolve(&current, Some(&pin))
                .await
                .map_err(flag_error)?
        }
    };
    let q = query_of(&a, &corpus).map_err(flag_error)?;
    let (as_of, visible_by) = (q.as_of, q.visible_by);
    let op = if q.start.is_some() {
        Op::Diff
    } else {
        Op::News
    };
    // One page, never resumed: the cursor key is nobody's and no cursor is printed.
    let pager = Pager::new("asof query");
    let mut page = match news_page(&corpus, &pager, op, q, None, Scope::Corpus).await {
        Ok(page) => page.next(None),
        Err(hole @ Error::CoverageMissing { .. }) => {
            // The API's own error envelope, rendered where every refusal is.
            let env = ErrorEnvelope::of("", corpus.version(), &hole, false);
            write_hole(&env, a.format, as_of, visible_by)?;
            return Ok(ExitCode::from(EXIT_HOLE));
        }
        Err(e) => return Err(flag_error(e)),
    };
    let rows = std::mem::take(&mut page.results);
    let records: Vec<NewsRecord> = rows
        .iter()
        .map(|r| NewsRecord::from_row((**r).clone(), false))
        .collect();
    let mut out = std::io::stdout().lock();
    match a.format {
        Format::Json => {
            let env = Envelope::of(
                String::new(),
                corpus.version().to_owned(),
                page.map(|_| records),
            );
            serde_json::to_writer_pretty(&mut out, &env)?;
            writeln!(out)?;
        }
        Format::Csv => {
            let mut w = csv_writer(&mut out)?;
            for r in &records {
                let s = |i: Option<Instant>| i.map(|i| i.to_string()).unwrap_or_default();
                w.write_record([
                    s(r.published_at),
                    r.id.clone(),
                    r.form.clone().unwrap_or_default(),
                    r.cik.clone().unwrap_or_default(),
                    s(r.acceptance_at),
                    s(r.available_at),
                    s(r.committed_at),
                    r.revision_id.clone(),
                    r.title.clone(),
                    r.source_locator.clone(),
                ])?;
            }
            w.flush()?;
        }
        Format::Table => {
            writeln!(
                out,
                "corpus_version {}  as_of {}  visible_by {}  status {}",
                corpus.version(),
                as_of,
                visible_by,
                Status::Ok.as_str()
            )?;
            for r in &records {
                let p = r
                    .published_at
                    .map(|i| i.to_string())
                    .unwrap_or_else(|| "-".into());
                writeln!(
                    out,
                    "{p:<22} {:<32} {:<10} {}",
                    r.id,
                    r.form.as_deref().unwrap_or("-"),
                    r.title
                )?;
            }
            writeln!(out, "{} row(s)", records.len())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A CSV writer of `asof query`'s columns, the header written.
pub(crate) fn csv_writer<W: std::io::Write>(out: W) -> Result<csv::Writer<W>, csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "published_at",
        "id",
        "form",
        "cik",
        "acceptance_at",
        "available_at",
        "committed_at",
        "revision_id",
        "title",
        "source_locator",
    ])?;
    Ok(w)
}

/// Writes a coverage hole in `format`: the error envelope as JSON, the header alone as CSV
/// (no row: the exit code 3 says why), or the status line and the missing keys as a table.
pub(crate) fn write_hole(
    env: &ErrorEnvelope,
    format: Format,
    as_of: Instant,
    visible_by: VisibleBy,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, env)?;
            writeln!(out)?;
        }
        Format::Csv => csv_writer(&mut out)?.flush()?,
        Format::Table => {
            writeln!(
                out,
                "corpus_version {}  as_of {}  visible_by {}  status {}",
                env.corpus_version,
                as_of,
                visible_by,
                env.status.as_str()
            )?;
            writeln!(out, "coverage missing: {}", env.coverage.missing.join(", "))?;
        }
    }
    Ok(())
}
