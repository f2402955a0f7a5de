//! `asof poll`: the live-lane daemon. Polls EDGAR's current-filings feed every `--interval`
//! seconds and publishes each filing not yet held into the corpus (see
//! `asof_ingest::poll`); `SIGTERM` or Ctrl-C stops it between polls. With `--backfill FROM..TO`
//! it fills a span of past days from EDGAR's daily indexes instead, in resumable batches.

use std::process::ExitCode;
use std::time::Duration;

use asof_engine::CorpusStore;
use asof_ingest::poll::{Backfill, BackfillProgress, Config, MAX_REQUESTS_PER_SECOND, Poller};
use clap::Args;

use super::CliResult;

#[derive(Debug, Args)]
pub struct PollArgs {
    /// The corpus to publish into: a directory (created when missing) or an object-store URL.
    #[arg(long, env = "ASOF_POLL_CORPUS")]
    pub corpus: String,
    /// Who is polling, with a contact e-mail (SEC's fair-access rule), e.g.
    /// "Example Corp admin@example.com".
    #[arg(long = "user-agent", env = "ASOF_POLL_USER_AGENT")]
    pub user_agent: String,
    /// Seconds between polls.
    #[arg(long, env = "ASOF_POLL_INTERVAL", default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub interval: u64,
    /// Where EDGAR is (a local server in tests).
    #[arg(
        long = "edgar-base-url",
        env = "ASOF_EDGAR_BASE_URL",
        default_value = "https://www.sec.gov"
    )]
    pub edgar_base_url: String,
    /// Requests per second to EDGAR, at most 10.
    #[arg(long = "max-rps", env = "ASOF_POLL_MAX_RPS", default_value_t = MAX_REQUESTS_PER_SECOND)]
    pub max_rps: u32,
    /// Poll once, print what was published, and exit (for cron and tests).
    #[arg(long)]
    pub once: bool,
    /// Instead of polling: fetch EDGAR's daily indexes for the finished days FROM..TO
    /// (inclusive; one day alone is also accepted), publish them in batches, certify each day
    /// read whole and each day EDGAR has no index for, and exit. Days already certified are
    /// skipped, so running it again after a crash or SIGTERM resumes where it stopped.
    #[arg(long, value_name = "FROM..TO")]
    pub backfill: Option<String>,
    /// Days per published batch of a backfill (batches count from FROM).
    #[arg(long = "batch-days", default_value_t = 30,
        value_parser = clap::value_parser!(u32).range(1..=366))]
    pub batch_days: u32,
    /// committed_at of a backfill's rows (RFC 3339; default now). A resumed backfill given
    /// the same value reaches the same corpus_version as one run uninterrupted; the value used
    /// is printed at the start.
    #[arg(long = "commit-time")]
    pub commit_time: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (loopback addresses only): rounds, the
    /// last good one, filings first seen and their lag since acceptance, certified days,
    /// backoffs. Unset: no metrics are kept.
    #[arg(long = "metrics-listen", env = "ASOF_POLL_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
}

pub async fn poll(a: PollArgs) -> CliResult {
    let cfg = Config::new(&a.edgar_base_url, &a.user_agent, a.max_rps)?;
    let store = CorpusStore::open(&a.corpus)?;
    let mut poller = Poller::new(cfg)?;
    if let Some(listen) = &a.metrics_listen {
        let exporter = asof_server::ops::Exporter::install(asof_server::obs::describe_poll, false)?;
        exporter.serve(listen, std::sync::Arc::new(|| {})).await?;
    }
    if let Some(range) = &a.backfill {
        return backfill(&a, range, &store, &mut poller).await;
    }
    if a.once {
        let r = poller.poll_once(&store).await?;
        eprintln!(
            "forward lane: fetched {} page(s) ({} unchanged), {} new filing(s)",
            r.pages, r.unchanged, r.new_rows
        );
        let yesterday = asof_engine::Instant::now().day().prev();
        let c = poller.poll_certified(&store, yesterday).await?;
        eprintln!(
            "certified lane: {} day(s) from their daily index, {} empty on the listing's evidence, {} waiting",
            c.indexed.len(),
            c.empty.len(),
            c.waiting.len()
        );
        // The version the corpus ends at, when this run published one.
        if let Some(v) = c.published.or(r.published) {
            println!("{v}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    // The handler is installed before the first poll, so a SIGTERM during it is not the
    // default (immediate) termination but a stop once that poll is done.
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let stop = async move {
        #[cfg(unix)]
        let term = term.recv();
        #[cfg(not(unix))]
        let term = std::future::pending::<Option<()>>();
        tokio::select! {
            _ = term => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::info!("stop requested; stopping after the current poll");
    };
    tracing::info!(
        corpus = store.display(),
        interval_s = a.interval,
        "poller started"
    );
    asof_server::ops::announce(&format!(
        "asof poll: polling {} every {} s",
        a.edgar_base_url, a.interval
    ));
    poller
        .run(&store, Duration::from_secs(a.interval), stop)
        .await;
    Ok(ExitCode::SUCCESS)
}

/// `asof poll --backfill FROM..TO`: batches of daily indexes, a progress bar over the days
/// (rows published and an ETA), and a stop on SIGTERM or Ctrl-C that abandons the batch in hand
/// and says how to resume.
async fn backfill(
    a: &PollArgs,
    range: &str,
    store: &CorpusStore,
    poller: &mut Poller,
) -> CliResult {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let (from, to) = asof_ingest::pipeline::parse_day_range(range).map_err(|_| {
        asof_ingest::Error::config(
            "--backfill",
            format!("{range:?}: expected YYYY-MM-DD..YYYY-MM-DD (inclusive) or one YYYY-MM-DD"),
        )
    })?;
    let commit_time = match &a.commit_time {
        Some(t) => asof_engine::Instant::parse_param("commit-time", t)?,
        None => asof_engine::Instant::now(),
    };
    let plan = Backfill {
        from,
        to,
        batch_days: a.batch_days,
        commit_time,
    };
    eprintln!(
        "asof poll: backfilling {from}..{to} in batches of {} day(s), committed at {commit_time}\n  (to resume after a stop: the same command with --commit-time {commit_time})",
        a.batch_days
    );
    let stop = Arc::new(AtomicBool::new(false));
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let flag = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            flag.store(true, Ordering::SeqCst);
        });
    }
    let total = (to.days() - from.days() + 1) as u64;
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} days, {msg} (eta {eta})",
        )?
        .progress_chars("=> "),
    );
    bar.set_message("0 rows");
    let progress = |p: &BackfillProgress| {
        bar.set_position(p.days_done as u64);
        bar.set_message(format!(
            "{} rows{}",
            p.rows,
            p.batch
                .map(|(f, t)| format!(", last batch {f}..{t}"))
                .unwrap_or_default()
        ));
    };
    let report = poller
        .backfill(store, &plan, &progress, &|| stop.load(Ordering::SeqCst))
        .await;
    bar.finish_and_clear();
    let report = report?;
    eprintln!(
        "backfill: {} batch(es) published {} rows; {} day(s) from their daily index, {} certified empty (EDGAR published no index), {} already certified, {} waiting for EDGAR",
        report.batches,
        report.rows,
        report.indexed.len(),
        report.empty.len(),
        report.skipped_days,
        report.waiting.len()
    );
    if let Some(day) = report.stopped_at {
        eprintln!(
            "stopped before publishing the batch from {day}; resume with: asof poll --backfill {from}..{to} --batch-days {} --commit-time {commit_time} (and the same --corpus)",
            a.batch_days
        );
    }
    if let Some(v) = store.current_version().await? {
        println!("{v}");
    }
    Ok(if report.stopped_at.is_some() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}
