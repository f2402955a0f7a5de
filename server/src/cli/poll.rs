//! `asof poll`: the live-lane daemon. Polls EDGAR's current-filings feed every `--interval`
//! seconds and publishes each filing not yet held into the corpus (see
//! `asof_ingest::poll`); `SIGTERM` or Ctrl-C stops it between polls.

use std::process::ExitCode;
use std::time::Duration;

use asof_engine::CorpusStore;
use asof_ingest::poll::{Config, MAX_REQUESTS_PER_SECOND, Poller};
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
}

pub async fn poll(a: PollArgs) -> CliResult {
    let cfg = Config::new(&a.edgar_base_url, &a.user_agent, a.max_rps)?;
    let store = CorpusStore::open(&a.corpus)?;
    let mut poller = Poller::new(cfg)?;
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
    eprintln!(
        "asof poll: polling {} every {} s",
        a.edgar_base_url, a.interval
    );
    poller
        .run(&store, Duration::from_secs(a.interval), stop)
        .await;
    Ok(ExitCode::SUCCESS)
}
