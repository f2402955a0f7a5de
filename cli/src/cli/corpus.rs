//! Corpus upkeep: `asof verify`, `asof delta backfill`, `asof build-sample` and
//! `asof bench-corpus`.

use std::path::PathBuf;
use std::process::ExitCode;

use asof_engine::CorpusStore;
use clap::Args;

use super::CliResult;
use super::flags::CorpusArg;

#[derive(Debug, Args)]
pub struct BuildSampleArgs {
    /// Where to write the corpus (manifests/ and snapshots/ are created under it); a directory
    /// that holds a corpus already is refused.
    #[arg(long)]
    pub out: PathBuf,
    /// The raw input files (defaults to this repository's snapshots/sources).
    #[arg(long, env = "ASOF_SAMPLE_SOURCES")]
    pub sources: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchCorpusArgs {
    /// Filing rows to generate (corrections add about one revision per thousand on top).
    #[arg(long, env = "ASOF_BENCH_ROWS")]
    pub rows: u64,
    /// Consecutive UTC days, ending on --last-day.
    #[arg(long, env = "ASOF_BENCH_DAYS")]
    pub days: u32,
    /// Distinct filers (CIKs), drawn with Zipf skew.
    #[arg(long, env = "ASOF_BENCH_CIKS")]
    pub ciks: u32,
    #[arg(long, env = "ASOF_BENCH_SEED", default_value_t = 1)]
    pub seed: u64,
    /// The last day of the corpus (its last two days are left uncertified).
    #[arg(
        long = "last-day",
        env = "ASOF_BENCH_LAST_DAY",
        default_value = "2026-01-31"
    )]
    pub last_day: String,
    /// When the certified days count as certified (default: the corpus's commit instant,
    /// after its last day, so `committed_at` cuts inside the span are holes); an instant
    /// before the first day makes them answerable, for benchmarks of that clock.
    #[arg(long = "certified-at", env = "ASOF_BENCH_CERTIFIED_AT")]
    pub certified_at: Option<String>,
    /// The last this many days also held in the forward lane (`forward_first_seen`, with
    /// `available_at` the minute the feed showed each filing), for benchmarks of that lane.
    #[arg(
        long = "forward-days",
        env = "ASOF_BENCH_FORWARD_DAYS",
        default_value_t = 0
    )]
    pub forward_days: u32,
    /// Where to write the corpus (an empty directory, or an object-store URL).
    #[arg(long, env = "ASOF_BENCH_OUT")]
    pub out: String,
}

pub(crate) async fn verify(a: CorpusArg) -> CliResult {
    let store = CorpusStore::open(&a.corpus)?;
    let v = asof_engine::verify::verify(&store, None).await?;
    println!(
        "ok: {} partitions, {} rows, {} other objects",
        v.partitions, v.rows, v.other_objects
    );
    let d = asof_engine::write::delta::check(&store, &v.version).await?;
    println!(
        "ok: {} Delta tables, {} commits re-derived and equal{}",
        d.tables,
        d.commits,
        if d.behind > 0 {
            format!(
                "; {} commits not written yet (`asof delta backfill` writes them)",
                d.behind
            )
        } else {
            String::new()
        }
    );
    println!("{}", v.version);
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn delta_backfill(a: CorpusArg) -> CliResult {
    let store = CorpusStore::open(&a.corpus)?;
    let (version, _) = store.current().await?;
    let s = asof_engine::write::delta::sync(&store, &version).await?;
    println!(
        "wrote {} Delta commits for {} corpus versions",
        s.commits, s.versions
    );
    println!("{version}");
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn build_sample(a: BuildSampleArgs) -> CliResult {
    let sources = a
        .sources
        .unwrap_or_else(asof_ingest::corpora::sample::default_sources_dir);
    let store = CorpusStore::local(&a.out)?;
    let p = asof_ingest::corpora::sample::build_sample(&sources, &store).await?;
    eprintln!(
        "published {} rows ({} unchanged)",
        p.rows_added, p.rows_unchanged
    );
    println!("{}", p.version);
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn bench_corpus(a: BenchCorpusArgs) -> CliResult {
    let last_day = asof_engine::Day::parse_param("last-day", &a.last_day)?;
    let store = CorpusStore::open(&a.out)?;
    if store.current_version().await?.is_some() {
        return Err(format!("{} already holds a corpus; give an empty --out", a.out).into());
    }
    let spec = asof_ingest::corpora::synthetic::Spec {
        rows: a.rows,
        days: a.days,
        ciks: a.ciks,
        seed: a.seed,
        last_day,
        certified_at: a
            .certified_at
            .as_deref()
            .map(|s| asof_engine::Instant::parse_param("certified-at", s))
            .transpose()?,
        forward_days: a.forward_days,
    };
    let bar = indicatif::ProgressBar::new(a.rows);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {human_pos}/{human_len} rows ({per_sec}, eta {eta})",
        )?
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let built =
        asof_ingest::corpora::synthetic::build(&store, &spec, &|done| bar.set_position(done))
            .await?;
    bar.finish_and_clear();
    eprintln!(
        "wrote {} rows in {} partitions ({} uncertified days, {} certified empty days) in {:.1} s",
        built.rows,
        built.partitions,
        built.hole_days,
        built.empty_certified_days,
        started.elapsed().as_secs_f64()
    );
    println!("{}", built.version);
    Ok(ExitCode::SUCCESS)
}
