//! Data routes (Bearer key): the as-of cut, the became-knowable diff, single records,
//! coverage certificates and identity as of an instant.

use asof_engine::coverage::Scope;
use asof_engine::record::SharedRow;
use asof_engine::{
    Answer, Corpus, Coverage, CoverageQuery, Day, Entity, Instant, Lane, NewsQuery, Position,
    RecordLookup, SourceId, VisibleBy,
};
use axum::extract::{Extension, Path, State};
use axum::response::IntoResponse;

use crate::error::ApiError;
use crate::http::cursor::{CursorSigner, filter_digest};
use crate::http::envelope::{
    CertificateRecord, Envelope, MappingRecord, NewsRecord, NewsRecordRef, Record,
};
use crate::http::params::{self, Cik, Limit, Q, Ticker, held_source, query};
use crate::http::{AppState, Ctx, Reply, ok};

query! {
    /// Query of `GET /v1/news`.
    pub struct NewsParams {
        /// Exchange ticker of an SEC filer, resolved to CIKs through the identity intervals
        /// valid at `as_of` (never a current ticker file). Send `ticker` or `cik`, not both;
        /// with neither, every row of `source`. Only `sec.edgar` rows name filers: with another
        /// source a filer matches no row.
        #[param(inline)]
        pub ticker: Option<Ticker>,
        /// SEC Central Index Key of the filer, with or without leading zeros.
        #[param(inline)]
        pub cik: Option<Cik>,
        /// The cut: only rows whose `visible_by` clock is at or before this instant.
        #[param(inline)]
        pub as_of: Instant,
        /// The clock visibility is evaluated on.
        #[param(inline, required = false, default = "published_at")]
        pub visible_by: VisibleBy,
        /// The corpus lane (lanes are never mixed in one answer).
        #[param(inline, required = false, default = "certified_pit")]
        pub lane: Lane,
        /// Source namespace; one `/v1/meta` lists as held. Default `sec.edgar`.
        #[param(inline)]
        pub source: Option<SourceId>,
        /// Page size.
        #[param(inline, required = false)]
        pub limit: Limit,
        /// `next_cursor` of the previous page, with the same query (any `limit`).
        pub cursor: Option<String>,
    }
}

query! {
    /// Query of `GET /v1/news/diff`.
    pub struct DiffParams {
        /// As on `/v1/news`.
        #[param(inline)]
        pub ticker: Option<Ticker>,
        /// As on `/v1/news`.
        #[param(inline)]
        pub cik: Option<Cik>,
        /// Start of the window, exclusive: rows already visible here are left out.
        #[param(inline)]
        pub as_of_start: Instant,
        /// End of the window, inclusive. A window that ends at or before `as_of_start` holds no rows.
        #[param(inline)]
        pub as_of_end: Instant,
        /// The clock visibility is evaluated on (the same at both ends).
        #[param(inline, required = false, default = "published_at")]
        pub visible_by: VisibleBy,
        /// The corpus lane.
        #[param(inline, required = false, default = "certified_pit")]
        pub lane: Lane,
        /// Source namespace; default `sec.edgar`.
        #[param(inline)]
        pub source: Option<SourceId>,
        /// Page size.
        #[param(inline, required = false)]
        pub limit: Limit,
        /// `next_cursor` of the previous page, with the same query.
        pub cursor: Option<String>,
    }
}

query! {
    /// Query of `GET /v1/news/{id}`.
    pub struct RecordParams {
        /// The cut the record must be knowable at.
        #[param(inline)]
        pub as_of: Instant,
        /// The clock visibility is evaluated on.
        #[param(inline, required = false, default = "published_at")]
        pub visible_by: VisibleBy,
    }
}

query! {
    /// Query of `GET /v1/coverage`.
    pub struct CoverageParams {
        /// Only this source; one `/v1/meta` lists as held.
        #[param(inline)]
        pub source: Option<SourceId>,
        /// Only this UTC day; an uningested day answers a missing certificate, not 404.
        #[param(inline)]
        pub date: Option<Day>,
        /// The lane certified (lanes are never mixed in one answer, so a day gives one
        /// certificate per source).
        #[param(inline, required = false, default = "certified_pit")]
        pub lane: Lane,
        /// Certificates as knowable at this instant; omitted means the latest.
        #[param(inline)]
        pub as_of: Option<Instant>,
        /// Page size.
        #[param(inline, required = false)]
        pub limit: Limit,
        /// `next_cursor` of the previous page, with the same query.
        pub cursor: Option<String>,
    }
}

query! {
    /// Query of the mapping routes.
    pub struct MappingParams {
        /// The instant the identity intervals must hold at.
        #[param(inline)]
        pub as_of: Instant,
    }
}

impl NewsParams {
    /// The engine query these parameters ask of `corpus` (the CLI's `asof query` runs the same).
    pub fn to_query(&self, corpus: &Corpus) -> Result<NewsQuery, ApiError> {
        let entity = params::entity(&self.ticker, &self.cik)?;
        Ok(NewsQuery {
            as_of: self.as_of,
            visible_by: self.visible_by,
            lane: self.lane,
            source: news_source(self.source, corpus)?,
            start: None,
            entity,
            after: None,
            limit: self.limit.0,
        })
    }
}

impl DiffParams {
    /// The engine query of this window (the CLI's `asof query --since` runs the same).
    pub fn to_query(&self, corpus: &Corpus) -> Result<NewsQuery, ApiError> {
        let entity = params::entity(&self.ticker, &self.cik)?;
        Ok(NewsQuery {
            as_of: self.as_of_end,
            start: Some(self.as_of_start),
            visible_by: self.visible_by,
            lane: self.lane,
            source: news_source(self.source, corpus)?,
            entity,
            after: None,
            limit: self.limit.0,
        })
    }
}

/// The parameters of the two paged cut routes, `/v1/news` and `/v1/news/diff`: the engine
/// query they ask and the cursor they resume from, so one answer and one page function serve
/// both (over HTTP and through `crate::local`, `asof.open()`'s client).
pub(crate) trait CutParams {
    /// The route's name in its cursors and row cache.
    const ROUTE: &'static str;
    fn query(&self, corpus: &Corpus) -> Result<NewsQuery, ApiError>;
    fn cursor(&self) -> Option<&str>;
}

impl CutParams for NewsParams {
    const ROUTE: &'static str = "news";
    fn query(&self, corpus: &Corpus) -> Result<NewsQuery, ApiError> {
        self.to_query(corpus)
    }
    fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }
}

impl CutParams for DiffParams {
    const ROUTE: &'static str = "diff";
    fn query(&self, corpus: &Corpus) -> Result<NewsQuery, ApiError> {
        self.to_query(corpus)
    }
    fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }
}

/// The answer of `/v1/news` or `/v1/news/diff`.
pub(crate) async fn cut_answer<P: CutParams>(signer: &CursorSigner, ctx: &Ctx, p: &P) -> Reply {
    let query = p.query(&ctx.corpus)?;
    run_news(
        signer,
        ctx,
        P::ROUTE,
        query,
        p.cursor(),
        Scope::Corpus,
        false,
    )
    .await
}

/// The page `/v1/news` or `/v1/news/diff` answers, not yet encoded (`asof.open()`'s Arrow
/// pages).
pub(crate) async fn cut_page_of<P: CutParams>(
    signer: &CursorSigner,
    ctx: &Ctx,
    p: &P,
) -> Result<NewsPage, ApiError> {
    let query = p.query(&ctx.corpus)?;
    news_page(signer, ctx, P::ROUTE, query, p.cursor(), Scope::Corpus).await
}

fn hole(coverage: Coverage, as_of: Instant, visible_by: VisibleBy) -> ApiError {
    ApiError::CoverageMissing {
        coverage,
        as_of: Some(as_of),
        visible_by: Some(visible_by.to_string()),
    }
}

/// The filter set a news/diff cursor is bound to.
fn news_filters(q: &NewsQuery) -> String {
    let cut = match q.start {
        Some(s) => format!("{s}..{}", q.as_of),
        None => q.as_of.to_string(),
    };
    let entity = match &q.entity {
        Entity::All => "all".to_owned(),
        Entity::Cik(c) => format!("cik:{c}"),
        Entity::Ticker(t) => format!("ticker:{t}"),
    };
    filter_digest(&[
        ("cut", cut),
        ("visible_by", q.visible_by.to_string()),
        ("entity", entity),
        ("lane", q.lane.to_string()),
        ("source", q.source.to_string()),
    ])
}

/// One page of a news or diff walk as the engine answered it, before it is encoded.
pub(crate) struct NewsPage {
    pub rows: Vec<SharedRow>,
    pub next_cursor: Option<String>,
    pub coverage: Coverage,
    pub as_of: Instant,
    pub visible_by: VisibleBy,
}

/// Shared body of the news and diff routes (and their sample forms): opens the cursor, asks
/// the engine once, mints the next cursor. A hole is the error it is on the wire.
pub(crate) async fn news_page(
    signer: &CursorSigner,
    ctx: &Ctx,
    op: &str,
    q: NewsQuery,
    cursor: Option<&str>,
    scope: Scope<'_>,
) -> Result<NewsPage, ApiError> {
    let filters = news_filters(&q);
    let version = ctx.corpus.version();
    let after: Option<Position> = cursor
        .map(|c| signer.open(c, op, &filters, version))
        .transpose()?;
    let q = NewsQuery { after, ..q };
    match ctx.corpus.news_shared(&q, scope).await? {
        Answer::Hole { coverage } => Err(hole(coverage, q.as_of, q.visible_by)),
        Answer::Page {
            rows,
            next,
            coverage,
        } => Ok(NewsPage {
            rows,
            next_cursor: next.map(|p| signer.mint(op, &filters, version, &p)),
            coverage,
            as_of: q.as_of,
            visible_by: q.visible_by,
        }),
    }
}

/// [`news_page`], encoded as the route answers it.
pub(crate) async fn run_news(
    signer: &CursorSigner,
    ctx: &Ctx,
    op: &str,
    q: NewsQuery,
    cursor: Option<&str>,
    scope: Scope<'_>,
    sample: bool,
) -> Reply {
    let page = news_page(signer, ctx, op, q, cursor, scope).await?;
    // Encoded straight from the rows the engine shares with its cache; a keyed record's
    // encoding is kept with the cached row (the sample tier's rows carry `sample: true` and
    // are encoded each time).
    let records: Vec<Record<'_>> = page
        .rows
        .iter()
        .map(|r| {
            if sample {
                Record::Fields(Box::new(NewsRecordRef::of(r, true)))
            } else {
                Record::Encoded(r.json(crate::http::envelope::keyed_record_json))
            }
        })
        .collect();
    Ok(ok(ctx, records)
        .at(Some(page.as_of), Some(page.visible_by))
        .coverage(page.coverage)
        .next(page.next_cursor)
        .sample(sample)
        .into_response())
}

/// `source` for a news query: the given one, else `sec.edgar`. A ticker or CIK with another
/// source is answered, not refused: its rows carry no CIK, so the cut has none of them (the
/// engine answers `count: 0`, the source's coverage still applying).
fn news_source(source: Option<SourceId>, corpus: &Corpus) -> Result<SourceId, ApiError> {
    let held = corpus.held_sources();
    let source = held_source(source, &held)?.unwrap_or(SourceId::SecEdgar);
    if !held.contains(&source) {
        return Err(ApiError::invalid(
            "source",
            "this deployment holds no sec.edgar rows; name a source from /v1/meta",
        ));
    }
    Ok(source)
}

/// As-of record query: rows whose `visible_by` clock is at or before `as_of`.
///
/// Sorted by `(published_at, id)`, rows without `published_at` last, paged by cursor. With
/// `ticker`, the ticker is resolved to CIKs through the identity intervals valid at `as_of`
/// (never today's ticker file). With neither `ticker` nor `cik`, every row of `source`
/// (default `sec.edgar`). A cut that needs a source-day the corpus does not certify, or a
/// ticker no interval places at `as_of`, is a coverage hole (409), never an empty answer.
#[utoipa::path(get, path = "/v1/news", tag = "data", operation_id = "news",
    params(NewsParams), security(("bearer" = [])),
    responses(
        (status = 200, description = "The cut (possibly `count: 0`: a complete cut with no rows).", body = Envelope<NewsRecord>),
        (status = 409, description = "`coverage_missing`: the cut depends on an uncertified source-day or an unplaced ticker (`coverage.missing` names it); or `cursor_expired`: the corpus moved since the cursor was minted."),
    ))]
pub(crate) async fn news(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(p): Q<NewsParams>,
) -> Reply {
    cut_answer(state.signer(), &ctx, &p).await
}

/// Became-knowable diff: rows visible at `as_of_end` and not at `as_of_start`.
///
/// The window is `(as_of_start, as_of_end]` on the same clock (not an `event_at` window).
/// Same filters, sort and paging as `/v1/news`.
#[utoipa::path(get, path = "/v1/news/diff", tag = "data", operation_id = "news_diff",
    params(DiffParams), security(("bearer" = [])),
    responses(
        (status = 200, description = "Rows that became visible in the window.", body = Envelope<NewsRecord>),
        (status = 409, description = "`coverage_missing` (a hole in the window) or `cursor_expired`."),
    ))]
pub(crate) async fn diff(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(p): Q<DiffParams>,
) -> Reply {
    cut_answer(state.signer(), &ctx, &p).await
}

/// One record as knowable at `as_of`.
///
/// On `published_at` and `available_at` the corpus version's current revision answers; on
/// `committed_at` the revision current at the cut.
#[utoipa::path(get, path = "/v1/news/{id}", tag = "data", operation_id = "news_record",
    params(("id" = String, Path, min_length = 1, example = "0001628280-26-003952_1318605", description = "Record id, as in `results[].id`."), RecordParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`results[0]` is the record.", body = Envelope<NewsRecord>),
        (status = 404, description = "`not_found`: no such record, or a record that exists but is not knowable yet at `as_of` (the message says which)."),
    ))]
pub(crate) async fn record(
    Extension(ctx): Extension<Ctx>,
    Path(id): Path<String>,
    Q(p): Q<RecordParams>,
) -> Reply {
    record_answer(&ctx, &id, &p).await
}

/// The answer of `/v1/news/{id}`.
pub(crate) async fn record_answer(ctx: &Ctx, id: &str, p: &RecordParams) -> Reply {
    let (as_of, visible_by) = (p.as_of, p.visible_by);
    match ctx.corpus.record(id, as_of, visible_by).await? {
        RecordLookup::Visible(r) => {
            let mut cov = Coverage::default();
            if let Some(d) = r.partition_day() {
                cov.touch(asof_engine::coverage::day_key(r.source_id, d));
            }
            Ok(ok(ctx, vec![NewsRecord::from_row(*r, false)])
                .at(Some(as_of), Some(visible_by))
                .coverage(cov)
                .into_response())
        }
        RecordLookup::NotYetVisible => Err(ApiError::NotFound(format!(
            "record {id} exists but is not knowable yet at {as_of} by {visible_by}"
        ))),
        RecordLookup::NotFound => Err(ApiError::NotFound(format!("no record with id {id}"))),
    }
}

/// Coverage certificates, one per source-lane-day, paged.
///
/// `row_count` is null for a missing (uningested or uncertified) day: a missing partition is
/// not an empty one. With `source` and `date`, an uningested day returns a missing
/// certificate, not 404. With `as_of`, certifications made after the cut do not count. One
/// lane answers (`certified_pit` unless `lane` says otherwise): a certificate's `key` names
/// one source-day, and lanes are never mixed in one answer.
#[utoipa::path(get, path = "/v1/coverage", tag = "data", operation_id = "coverage",
    params(CoverageParams), security(("bearer" = [])),
    responses(
        (status = 200, description = "Certificates in (source, lane, date) order.", body = Envelope<CertificateRecord>),
        (status = 409, description = "`cursor_expired`: the corpus moved since the cursor was minted."),
    ))]
pub(crate) async fn coverage(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(p): Q<CoverageParams>,
) -> Reply {
    coverage_answer(state.signer(), &ctx, &p)
}

/// The answer of `/v1/coverage`.
pub(crate) fn coverage_answer(signer: &CursorSigner, ctx: &Ctx, p: &CoverageParams) -> Reply {
    let held = ctx.corpus.held_sources();
    let source = held_source(p.source, &held)?;
    let lane = p.lane;
    let filters = filter_digest(&[
        ("source", source.map(|s| s.to_string()).unwrap_or_default()),
        ("date", p.date.map(|d| d.to_string()).unwrap_or_default()),
        ("lane", lane.to_string()),
        ("as_of", p.as_of.map(|d| d.to_string()).unwrap_or_default()),
    ]);
    let version = ctx.corpus.version();
    let after = p
        .cursor
        .as_deref()
        .map(|c| signer.open(c, "coverage", &filters, version))
        .transpose()?;
    let (certs, next) = ctx.corpus.coverage(&CoverageQuery {
        source,
        date: p.date,
        lane,
        as_of: p.as_of,
        after,
        limit: p.limit.0,
    })?;
    let mut cov = Coverage::default();
    for c in &certs {
        if c.row_count.is_some() {
            cov.touch(c.key.clone());
        } else {
            cov.missing.push(c.key.clone());
            cov.missing_total += 1;
        }
    }
    let next_cursor = next.map(|pos| signer.mint("coverage", &filters, version, &pos));
    Ok(ok(ctx, certs)
        .at(p.as_of, None)
        .coverage(cov)
        .next(next_cursor)
        .into_response())
}

/// Identity as of an instant: the CIKs a ticker denoted at `as_of`.
///
/// From point-in-time intervals built from dated observations, never from a current ticker
/// file. A ticker no interval places at `as_of` is a coverage hole keyed
/// `identity.ticker/<TICKER>@<YYYY-MM-DD>` (the same answer `/v1/news` gives).
#[utoipa::path(get, path = "/v1/mapping/ticker/{ticker}", tag = "data", operation_id = "mapping_ticker",
    params(("ticker" = inline(Ticker), Path, example = "TSLA", description = "Exchange ticker (case-insensitive)."), MappingParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The intervals placing the ticker at `as_of`, with their evidence.", body = Envelope<MappingRecord>),
        (status = 409, description = "`coverage_missing`: no interval places the ticker at `as_of`."),
    ))]
pub(crate) async fn mapping_ticker(
    Extension(ctx): Extension<Ctx>,
    Path(ticker): Path<String>,
    Q(p): Q<MappingParams>,
) -> Reply {
    mapping_ticker_answer(&ctx, &ticker, &p)
}

/// The answer of `/v1/mapping/ticker/{ticker}`, for the path's `ticker` as sent.
pub(crate) fn mapping_ticker_answer(ctx: &Ctx, ticker: &str, p: &MappingParams) -> Reply {
    let ticker = params::ticker(ticker, "ticker")?;
    mapping_answer(ctx, &ticker, p.as_of, false)
}

/// The mapping answer for a ticker (also the sample's).
pub(crate) fn mapping_answer(ctx: &Ctx, ticker: &str, as_of: Instant, sample: bool) -> Reply {
    match ctx.corpus.mapping_ticker(ticker, as_of) {
        Ok(m) => {
            let mut cov = Coverage::default();
            cov.touch(asof_engine::identity::ticker_hole_key(ticker, as_of));
            Ok(ok(ctx, m)
                .at(Some(as_of), None)
                .coverage(cov)
                .sample(sample)
                .into_response())
        }
        Err(key) => Err(ApiError::CoverageMissing {
            coverage: Coverage {
                touched: vec![],
                missing: vec![key],
                missing_total: 1,
            },
            as_of: Some(as_of),
            visible_by: None,
        }),
    }
}

/// Identity as of an instant: the tickers a CIK carried at `as_of`.
#[utoipa::path(get, path = "/v1/mapping/cik/{cik}", tag = "data", operation_id = "mapping_cik",
    params(("cik" = inline(Cik), Path, example = "1318605", description = "SEC Central Index Key, with or without leading zeros."), MappingParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Intervals valid at `as_of` (possibly none: a known CIK without a ticker then).", body = Envelope<MappingRecord>),
        (status = 404, description = "`not_found`: the corpus holds no identity evidence for this CIK."),
    ))]
pub(crate) async fn mapping_cik(
    Extension(ctx): Extension<Ctx>,
    Path(cik): Path<String>,
    Q(p): Q<MappingParams>,
) -> Reply {
    mapping_cik_answer(&ctx, &cik, &p)
}

/// The answer of `/v1/mapping/cik/{cik}`, for the path's `cik` as sent.
pub(crate) fn mapping_cik_answer(ctx: &Ctx, cik: &str, p: &MappingParams) -> Reply {
    let cik = params::cik(cik, "cik")?;
    if !ctx.corpus.identity().knows_cik(&cik) {
        return Err(ApiError::NotFound(format!(
            "no identity evidence for CIK {cik}"
        )));
    }
    let m = ctx.corpus.mapping_cik(&cik, p.as_of);
    Ok(ok(ctx, m).at(Some(p.as_of), None).into_response())
}
