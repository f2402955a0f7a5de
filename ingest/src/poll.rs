//! `asof poll`, the live lane: fetch EDGAR's current-filings Atom feed (every page of the
//! `getcurrent` listing), and publish each filing not yet held as a `forward_first_seen` row
//! whose `available_at` is the minute this poller fetched it (`availability_basis =
//! local_first_seen`). One publish per poll that found something, none otherwise.
//!
//! Politeness is SEC's fair-access rule, enforced here rather than left to the operator: a
//! User-Agent naming a contact (an e-mail address), at most 10 requests per second, conditional
//! requests (`If-None-Match` / `If-Modified-Since`), and backoff with jitter on 429 and 5xx,
//! honouring `Retry-After`. A poll that fails leaves the corpus as it was; the next one retries.
//! Publishing goes through the pipeline's compare-and-swap publish, so a poller and a manual
//! `asof ingest` may run at once and neither loses a version.

use std::collections::HashMap;
use std::time::Duration;

use asof_engine::model::clock::{Day, Instant, Lane, SourceId};
use asof_engine::store::CorpusStore;
use rand::Rng;

use crate::adapter::InputFile;
use crate::error::{Error, Result};
use crate::pipeline::{self, Request};

/// Entries per page of the `getcurrent` listing (EDGAR's largest).
pub const PAGE_SIZE: usize = 100;
/// SEC's fair-access ceiling.
pub const MAX_REQUESTS_PER_SECOND: u32 = 10;

/// How the poller reaches the feed and how hard it may push.
#[derive(Debug, Clone)]
pub struct Config {
    /// `https://www.sec.gov` in production; a local server in tests.
    pub base_url: url::Url,
    /// Must name a contact: SEC asks for "Company Name admin@company.com".
    pub user_agent: String,
    /// Requests per second, at most [`MAX_REQUESTS_PER_SECOND`].
    pub requests_per_second: u32,
    /// Pages of 100 entries read per poll at most (EDGAR lists a few thousand recent filings).
    pub max_pages: usize,
    /// Attempts per request on 429 / 5xx / a transport error before the poll fails.
    pub attempts: u32,
    /// How many finished UTC days back the certified lane looks for daily indexes it has not
    /// certified yet.
    pub backfill_days: u32,
    /// First backoff delay (doubled per attempt, with jitter) when no `Retry-After` is given.
    pub backoff: Duration,
}

impl Config {
    /// Checks the fair-access settings before any request is made.
    pub fn new(base_url: &str, user_agent: &str, requests_per_second: u32) -> Result<Self> {
        let base_url = url::Url::parse(base_url).map_err(|e| {
            Error::config(
                "--edgar-base-url",
                format!("{base_url:?} is not a URL: {e}"),
            )
        })?;
        let ua = user_agent.trim();
        let contact = ua
            .split_whitespace()
            .any(|w| w.contains('@') && w.contains('.') && !w.starts_with('@'));
        if !contact {
            return Err(Error::config(
                "--user-agent",
                "SEC's fair-access rule needs a contact in the User-Agent, e.g. \"Example Corp admin@example.com\"",
            ));
        }
        if requests_per_second == 0 || requests_per_second > MAX_REQUESTS_PER_SECOND {
            return Err(Error::config(
                "--max-rps",
                format!(
                    "requests per second must be 1..={MAX_REQUESTS_PER_SECOND} (SEC's fair-access limit)"
                ),
            ));
        }
        Ok(Config {
            base_url,
            user_agent: ua.to_owned(),
            requests_per_second,
            max_pages: 60,
            attempts: 5,
            backfill_days: 7,
            backoff: Duration::from_secs(1),
        })
    }

    fn page_url(&self, start: usize) -> url::Url {
        let mut u = self
            .base_url
            .join("/cgi-bin/browse-edgar")
            .expect("static path");
        u.query_pairs_mut()
            .append_pair("action", "getcurrent")
            .append_pair("owner", "include")
            .append_pair("start", &start.to_string())
            .append_pair("count", &PAGE_SIZE.to_string())
            .append_pair("output", "atom");
        u
    }
}

/// What one poll did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// When the first page was fetched (its minute is the new rows' `available_at`).
    pub fetched_at: Instant,
    /// Pages answered with a body, and pages unchanged since the last poll (304).
    pub pages: usize,
    pub unchanged: usize,
    /// Filings new to the corpus.
    pub new_rows: usize,
    /// The version published, when the poll found something.
    pub published: Option<String>,
}

/// What one certified-lane pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certified {
    /// Days certified with their daily index, and days certified empty on the listing's
    /// evidence (EDGAR published no index for them).
    pub indexed: Vec<Day>,
    pub empty: Vec<Day>,
    /// Finished days EDGAR's listing does not show yet: certified by a later pass.
    pub waiting: Vec<Day>,
    pub published: Option<String>,
}

/// A backfill of EDGAR's daily indexes ([`Poller::backfill`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backfill {
    pub from: Day,
    pub to: Day,
    /// Days per publish; batches are counted from `from`, so a resumed run cuts the same ones.
    pub batch_days: u32,
    /// `committed_at` of every row and `certified_at` of every certification: the same value
    /// on a resumed run gives the same versions as an uninterrupted one.
    pub commit_time: Instant,
}

impl Backfill {
    fn check(&self) -> Result<()> {
        if self.from > self.to {
            return Err(Error::config(
                "--backfill",
                "the range ends before it starts",
            ));
        }
        if self.batch_days == 0 || self.batch_days > 366 {
            return Err(Error::config("--batch-days", "a batch is 1..=366 days"));
        }
        if self.to >= self.commit_time.day() {
            return Err(Error::config(
                "--backfill",
                format!(
                    "backfill finished days only: {} is not before the commit day {}",
                    self.to,
                    self.commit_time.day()
                ),
            ));
        }
        Ok(())
    }
}

/// Where a backfill is, after each batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillProgress {
    /// Days of the range done (fetched and published, or already certified).
    pub days_done: usize,
    pub days_total: usize,
    /// Rows published so far by this run.
    pub rows: usize,
    /// The batch just done.
    pub batch: Option<(Day, Day)>,
}

/// What a backfill did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackfillReport {
    /// Days ingested from their daily index.
    pub indexed: Vec<Day>,
    /// Days EDGAR published no index for, certified empty on the quarter's listing.
    pub empty: Vec<Day>,
    /// Days EDGAR's listing does not show yet: left for a later run.
    pub waiting: Vec<Day>,
    /// Days skipped because the corpus already certified them (an earlier run, or a listing
    /// an earlier batch ingested: it certifies every day of its quarter EDGAR skipped).
    pub skipped_days: usize,
    pub batches: usize,
    pub rows: usize,
    /// Versions published, one per batch that added something.
    pub versions: Vec<String>,
    /// Set when `stop` ended the run: the first day of the batch abandoned.
    pub stopped_at: Option<Day>,
}

/// The EDGAR certified-lane certifications of the current version, as day ranges.
async fn certified_days(store: &CorpusStore) -> Result<Vec<(Day, Day)>> {
    Ok(match store.current_version().await? {
        Some(v) => store
            .manifest(&v)
            .await?
            .certifications
            .iter()
            .filter(|c| c.source_id == SourceId::SecEdgar && c.lane == Lane::CertifiedPit)
            .map(|c| (c.from, c.to))
            .collect(),
        None => vec![],
    })
}

/// The ingest of fetched daily indexes (and listings) committed at `at`.
fn daily_request(files: Vec<InputFile>, at: Instant) -> Request {
    Request {
        source: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        commit_time: at,
        captured_at: Some(at),
        certify: None,
        options: Default::default(),
        files: files.into_iter().map(Into::into).collect(),
    }
}

/// A fetched page's validators, sent back on the next poll.
#[derive(Debug, Clone, Default)]
struct Validators {
    etag: Option<String>,
    last_modified: Option<String>,
}

/// One poller: its HTTP client, its pacing, and what the feed said last time.
pub struct Poller {
    cfg: Config,
    client: reqwest::Client,
    /// By URL.
    validators: HashMap<String, Validators>,
    last_request: Option<std::time::Instant>,
    /// Ids the feed listed at the previous poll, `None` before the first: a filing listed now
    /// and not then is one this poller sees for the first time, and its lag since acceptance
    /// is measured. The first poll after a start measures none (it cannot tell old from new).
    listed: Option<std::collections::HashSet<String>>,
}

/// Metric names of the poller (described by the server's `obs`): rounds by outcome, the time
/// of the last good round, filings first seen and their lag since acceptance, days certified,
/// and backoffs after EDGAR refused or failed a request.
pub const METRIC_ROUNDS: &str = "asof_poll_rounds_total";
pub const METRIC_LAST_SUCCESS: &str = "asof_poll_last_success_timestamp_seconds";
pub const METRIC_FIRST_SEEN: &str = "asof_poll_filings_first_seen_total";
pub const METRIC_LAG: &str = "asof_poll_first_sight_lag_seconds";
pub const METRIC_CERTIFIED_DAYS: &str = "asof_poll_certifications_total";
pub const METRIC_BACKOFFS: &str = "asof_poll_backoffs_total";

enum Page {
    Body(Vec<u8>),
    NotModified,
    /// 404: not published (yet).
    Missing,
}

impl Poller {
    pub fn new(cfg: Config) -> Result<Self> {
        let client = reqwest::Client::builder()
            .user_agent(cfg.user_agent.clone())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| {
                Error::config(
                    "--edgar-base-url",
                    format!("cannot build an HTTP client: {e}"),
                )
            })?;
        Ok(Poller {
            cfg,
            client,
            validators: HashMap::new(),
            last_request: None,
            listed: None,
        })
    }

    /// Waits until one more request stays within the requests-per-second ceiling.
    async fn pace(&mut self) {
        let gap = Duration::from_secs(1) / self.cfg.requests_per_second;
        if let Some(last) = self.last_request {
            let next = last + gap;
            let now = std::time::Instant::now();
            if next > now {
                tokio::time::sleep(next - now).await;
            }
        }
        self.last_request = Some(std::time::Instant::now());
    }

    /// One URL, conditionally, with backoff on 429 / 5xx / transport errors.
    async fn fetch(&mut self, url: url::Url) -> Result<Page> {
        let key = url.to_string();
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.pace().await;
            let mut req = self.client.get(url.clone());
            if let Some(v) = self.validators.get(&key) {
                if let Some(e) = &v.etag {
                    req = req.header(reqwest::header::IF_NONE_MATCH, e);
                }
                if let Some(m) = &v.last_modified {
                    req = req.header(reqwest::header::IF_MODIFIED_SINCE, m);
                }
            }
            let wait = match req.send().await {
                Ok(res) if res.status() == reqwest::StatusCode::NOT_MODIFIED => {
                    return Ok(Page::NotModified);
                }
                Ok(res) if res.status() == reqwest::StatusCode::NOT_FOUND => {
                    return Ok(Page::Missing);
                }
                Ok(res) if res.status().is_success() => {
                    let header = |n: reqwest::header::HeaderName| {
                        res.headers()
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned)
                    };
                    let v = Validators {
                        etag: header(reqwest::header::ETAG),
                        last_modified: header(reqwest::header::LAST_MODIFIED),
                    };
                    let expected = res.content_length();
                    let body = res.bytes().await.map_err(|e| fetch_error(&url, e))?;
                    if expected.is_some_and(|n| n != body.len() as u64) {
                        return Err(Error::parse(
                            url.as_str(),
                            "body",
                            "the page was cut short (Content-Length differs)",
                        ));
                    }
                    self.validators.insert(key, v);
                    return Ok(Page::Body(body.to_vec()));
                }
                Ok(res)
                    if res.status() == reqwest::StatusCode::TOO_MANY_REQUESTS
                        || res.status().is_server_error() =>
                {
                    let retry_after = res
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    tracing::warn!(status = %res.status(), url = %url, ?retry_after, attempt, "feed asked us to slow down");
                    retry_after
                }
                Ok(res) => {
                    return Err(Error::parse(
                        url.as_str(),
                        "response",
                        format!("the feed answered {}", res.status()),
                    ));
                }
                Err(e) => {
                    tracing::warn!(error = %e, url = %url, attempt, "feed request failed");
                    None
                }
            };
            if attempt >= self.cfg.attempts {
                return Err(Error::parse(
                    url.as_str(),
                    "response",
                    format!("no answer after {attempt} attempts; the next poll retries"),
                ));
            }
            // Retry-After when the server names it (never less), else exponential backoff;
            // jitter so many pollers do not retry in step.
            let base = wait.unwrap_or(self.cfg.backoff * 2u32.pow(attempt - 1));
            metrics::counter!(METRIC_BACKOFFS).increment(1);
            let jitter = rand::rng().random_range(0..=base.as_millis() as u64 / 4 + 1);
            tokio::time::sleep(base + Duration::from_millis(jitter)).await;
        }
    }

    /// The certified lane: every finished UTC day up to `through` (yesterday, in the daemon)
    /// that the corpus does not certify yet, at most `backfill_days` back. A day EDGAR lists a
    /// daily index for is ingested from that index (which certifies it; a body cut short of
    /// its `Content-Length` fails the pass); a day before the quarter's last listed index with
    /// none is certified empty, the listing as evidence; a later day waits.
    pub async fn poll_certified(&mut self, store: &CorpusStore, through: Day) -> Result<Certified> {
        let last = certified_days(store).await?.iter().map(|&(_, to)| to).max();
        let floor = Day::from_days(through.days() - self.cfg.backfill_days as i32 + 1);
        let start = last.map_or(floor, |d| d.next().max(floor));
        if start > through {
            return Ok(Certified {
                indexed: vec![],
                empty: vec![],
                waiting: vec![],
                published: None,
            });
        }
        let days: Vec<Day> = (start.days()..=through.days())
            .map(Day::from_days)
            .collect();
        let (files, mut out) = self.fetch_days(&days, &|_| false).await?;
        let Some(files) = files else {
            return Ok(out);
        };
        let now = Instant::now();
        let outcome = pipeline::ingest(store, daily_request(files, now), &|_| {}).await?;
        out.published = outcome
            .published
            .changed
            .then(|| outcome.published.version.clone());
        Ok(out)
    }

    /// Fetches the daily indexes of `days` (sorted) and, for days with none, the quarter's
    /// listing as evidence; `None` files when nothing was found. `stop` is asked before each
    /// request: when it says stop, the days are abandoned with [`Error::Stopped`].
    async fn fetch_days(
        &mut self,
        days: &[Day],
        stop: &(dyn Fn(Day) -> bool + Sync),
    ) -> Result<(Option<Vec<InputFile>>, Certified)> {
        let mut out = Certified {
            indexed: vec![],
            empty: vec![],
            waiting: vec![],
            published: None,
        };
        let wanted: std::collections::BTreeSet<Day> = days.iter().copied().collect();
        let mut files = Vec::new();
        let mut quarters: Vec<(i32, u8)> = days
            .iter()
            .map(|d| {
                let date = d.to_date();
                (date.year(), (u8::from(date.month()) - 1) / 3 + 1)
            })
            .collect();
        quarters.dedup();
        for (year, q) in quarters {
            let dir = format!("/Archives/edgar/daily-index/{year}/QTR{q}/");
            let listing_url = self
                .cfg
                .base_url
                .join(&format!("{dir}index.json"))
                .expect("static path");
            if let Some(&d) = days.first()
                && stop(d)
            {
                return Err(Error::Stopped);
            }
            let listing = match self.fetch(listing_url.clone()).await? {
                Page::Body(b) => b,
                // A quarter not begun at EDGAR yet: its days wait.
                Page::Missing | Page::NotModified => {
                    self.validators.remove(&listing_url.to_string());
                    continue;
                }
            };
            // Fetched afresh next time: the listing is evidence, it must be in hand.
            self.validators.remove(&listing_url.to_string());
            let name = listing_url.to_string();
            let (listed, unpublished) = crate::sources::edgar::daily_listing(&name, &listing)?;
            for &day in listed.iter().filter(|x| wanted.contains(x)) {
                if stop(day) {
                    return Err(Error::Stopped);
                }
                let compact = day.to_string().replace('-', "");
                let url = self
                    .cfg
                    .base_url
                    .join(&format!("{dir}company.{compact}.idx"))
                    .expect("static path");
                match self.fetch(url.clone()).await? {
                    Page::Body(bytes) => {
                        self.validators.remove(&url.to_string());
                        files.push(InputFile {
                            name: url.to_string(),
                            bytes,
                        });
                        out.indexed.push(day);
                    }
                    _ => {
                        return Err(Error::parse(
                            url.as_str(),
                            "response",
                            "listed in the quarter's daily-index listing but not served",
                        ));
                    }
                }
            }
            let empty: Vec<Day> = unpublished
                .into_iter()
                .filter(|x| wanted.contains(x))
                .collect();
            if !empty.is_empty() {
                out.empty.extend(empty);
                files.push(InputFile {
                    name,
                    bytes: listing,
                });
            }
        }
        let covered: std::collections::BTreeSet<Day> =
            out.indexed.iter().chain(&out.empty).copied().collect();
        out.waiting = days
            .iter()
            .copied()
            .filter(|d| !covered.contains(d))
            .collect();
        Ok(((!files.is_empty()).then_some(files), out))
    }

    /// Backfills EDGAR's daily indexes over `plan.from..=plan.to` in fixed batches of
    /// `plan.batch_days` days counted from `plan.from`, one publish per batch (all or nothing),
    /// every row and certification committed at `plan.commit_time`. Days the corpus already
    /// certifies are skipped, so a run stopped or killed part-way and started again with the
    /// same plan fetches only what is missing and reaches the version an uninterrupted run
    /// reaches. `stop` is asked before every request; when it says stop, the batch in hand is
    /// abandoned (nothing of it published) and the report says where to resume.
    pub async fn backfill(
        &mut self,
        store: &CorpusStore,
        plan: &Backfill,
        progress: &(dyn Fn(&BackfillProgress) + Sync),
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<BackfillReport> {
        plan.check()?;
        let mut report = BackfillReport::default();
        let total = (plan.to.days() - plan.from.days() + 1) as usize;
        let mut state = BackfillProgress {
            days_done: 0,
            days_total: total,
            rows: 0,
            batch: None,
        };
        let mut batch_from = plan.from;
        while batch_from <= plan.to {
            let batch_to = Day::from_days(
                (batch_from.days() + plan.batch_days as i32 - 1).min(plan.to.days()),
            );
            // What is certified is read again before each batch: a batch's evidence can
            // certify days of later batches (a quarter's listing shows every weekend of it), so
            // the days a batch fetches depend only on the corpus it starts from, which is the
            // same whether the run was resumed or not.
            let certified = certified_days(store).await?;
            let days: Vec<Day> = (batch_from.days()..=batch_to.days())
                .map(Day::from_days)
                .filter(|&d| !certified.iter().any(|&(from, to)| from <= d && d <= to))
                .collect();
            let span = (batch_to.days() - batch_from.days() + 1) as usize;
            state.batch = Some((batch_from, batch_to));
            report.skipped_days += span - days.len();
            if !days.is_empty() {
                let fetched = self.fetch_days(&days, &|_| stop()).await;
                let (files, got) = match fetched {
                    Err(Error::Stopped) => {
                        report.stopped_at = Some(batch_from);
                        return Ok(report);
                    }
                    other => other?,
                };
                if stop() {
                    report.stopped_at = Some(batch_from);
                    return Ok(report);
                }
                if let Some(files) = files {
                    let outcome =
                        pipeline::ingest(store, daily_request(files, plan.commit_time), &|_| {})
                            .await?;
                    state.rows += outcome.published.rows_added;
                    report.rows += outcome.published.rows_added;
                    if outcome.published.changed {
                        report.versions.push(outcome.published.version.clone());
                    }
                }
                report.indexed.extend(got.indexed);
                report.empty.extend(got.empty);
                report.waiting.extend(got.waiting);
                report.batches += 1;
            }
            state.days_done += span;
            progress(&state);
            batch_from = batch_to.next();
        }
        Ok(report)
    }

    /// One poll: every page of the listing, then one publish of the filings not yet held.
    pub async fn poll_once(&mut self, store: &CorpusStore) -> Result<Report> {
        let fetched_at = Instant::now();
        let mut files = Vec::new();
        let mut unchanged = 0;
        // Every filing the pages list, with its acceptance instant.
        let mut listed: Vec<(String, Option<Instant>)> = Vec::new();
        for page in 0..self.cfg.max_pages {
            let start = page * PAGE_SIZE;
            match self.fetch(self.cfg.page_url(start)).await? {
                // The first page unchanged: the listing has not moved since the last poll.
                Page::NotModified if page == 0 => {
                    unchanged += 1;
                    break;
                }
                Page::NotModified => unchanged += 1,
                Page::Missing => {
                    return Err(Error::parse(
                        self.cfg.page_url(start).as_str(),
                        "response",
                        "the feed answered 404",
                    ));
                }
                Page::Body(bytes) => {
                    let name = format!("{}#start={start}", self.cfg.base_url);
                    let rows = crate::sources::edgar::parse_atom(&name, &bytes)?.rows;
                    let entries = rows.len();
                    listed.extend(rows.into_iter().map(|r| (r.id, r.published_at)));
                    files.push(InputFile { name, bytes });
                    if entries < PAGE_SIZE {
                        break;
                    }
                }
            }
        }
        let pages = files.len();
        if files.is_empty() {
            return Ok(Report {
                fetched_at,
                pages,
                unchanged,
                new_rows: 0,
                published: None,
            });
        }
        let req = Request {
            source: SourceId::SecEdgar,
            lane: Lane::ForwardFirstSeen,
            commit_time: Instant::now(),
            captured_at: Some(fetched_at),
            certify: None,
            options: Default::default(),
            files: files.into_iter().map(Into::into).collect(),
        };
        let outcome = pipeline::ingest(store, req, &|_| {}).await?;
        let published = outcome
            .published
            .changed
            .then(|| outcome.published.version.clone());
        metrics::counter!(METRIC_FIRST_SEEN).increment(outcome.published.rows_added as u64);
        self.measure_first_sights(&listed, fetched_at);
        Ok(Report {
            fetched_at,
            pages,
            unchanged,
            new_rows: outcome.published.rows_added,
            published,
        })
    }

    /// Records, for each filing listed now and not at the previous poll, the time from its
    /// acceptance to this fetch; then remembers what is listed now.
    fn measure_first_sights(&mut self, listed: &[(String, Option<Instant>)], fetched_at: Instant) {
        if let Some(before) = &self.listed {
            for (id, accepted) in listed {
                if let Some(at) = accepted
                    && !before.contains(id)
                {
                    let lag = (fetched_at.micros() - at.micros()).max(0) as f64 / 1e6;
                    metrics::histogram!(METRIC_LAG).record(lag);
                }
            }
        }
        self.listed = Some(listed.iter().map(|(id, _)| id.clone()).collect());
    }

    /// Polls both lanes every `interval` until `stop` resolves (the certified lane through
    /// yesterday, UTC); a failed poll is logged and retried at the next tick, and a stop
    /// request ends the loop between polls.
    pub async fn run(
        &mut self,
        store: &CorpusStore,
        interval: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        loop {
            let forward = self.poll_once(store).await;
            let forward_ok = forward.is_ok();
            match forward {
                Ok(r) => match &r.published {
                    Some(v) => {
                        tracing::info!(new = r.new_rows, pages = r.pages, version = %v, "published new filings")
                    }
                    None => tracing::info!(pages = r.pages, unchanged = r.unchanged, "nothing new"),
                },
                Err(e) => {
                    tracing::error!(error = %e, "poll failed; the corpus is unchanged and the next poll retries")
                }
            }
            let yesterday = Instant::now().day().prev();
            let certified = self.poll_certified(store, yesterday).await;
            let ok = forward_ok && certified.is_ok();
            metrics::counter!(METRIC_ROUNDS, "outcome" => if ok { "ok" } else { "failed" })
                .increment(1);
            if ok {
                metrics::gauge!(METRIC_LAST_SUCCESS).set(Instant::now().micros() as f64 / 1e6);
            }
            match certified {
                Ok(c) => {
                    metrics::counter!(METRIC_CERTIFIED_DAYS)
                        .increment((c.indexed.len() + c.empty.len()) as u64);
                    if let Some(v) = &c.published {
                        tracing::info!(indexed = ?c.indexed, empty = ?c.empty, version = %v, "certified days");
                    } else if !c.waiting.is_empty() {
                        tracing::info!(waiting = ?c.waiting, "days wait for EDGAR's daily index");
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "certified-lane pass failed; the next poll retries")
                }
            }
            tokio::select! {
                () = &mut stop => break,
                () = tokio::time::sleep(interval) => {}
            }
        }
        tracing::info!("poller stopped");
    }
}

fn fetch_error(url: &url::Url, e: reqwest::Error) -> Error {
    Error::parse(url.as_str(), "body", format!("cannot read the page: {e}"))
}
