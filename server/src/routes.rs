//! Route handlers: extract parameters, call one engine function, encode the envelope.

use asof_engine::coverage::Scope;
use asof_engine::manifest::{SampleExample, SampleSet};
use asof_engine::{
    Answer, Coverage, CoverageQuery, Entity, Instant, Lane, NewsQuery, Position, RecordLookup,
    SourceId, VisibleBy,
};
use axum::Router;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::MethodRouter;
use serde::Serialize;

use crate::app::{AppState, CacheKind, Ctx, envelope_response, get_route};
use crate::cursor::filter_digest;
use crate::envelope::{
    CertificateRecord, CoverageBody, Envelope, MappingRecord, NewsRecord, Status,
};
use crate::error::ApiError;
use crate::meta::MetaRecord;
use crate::openapi::{
    CoverageParams, DiffParams, MappingParams, NewsParams, RecordParams, SampleCoverageParams,
    SampleDiffParams, SampleMappingParams, SampleNewsParams,
};
use crate::params::{self, Params};

/// Builds one route's method router.
type Make = fn() -> MethodRouter<AppState>;

/// Every route of the service: its path and its handlers. The router, plain `OPTIONS`, and
/// the test that walks the router against the OpenAPI description all read this one table.
pub const TABLE: &[(&str, Make)] = &[
    ("/health", || get_route(health)),
    ("/llms.txt", || get_route(crate::discovery::llms_txt)),
    ("/docs", || get_route(crate::discovery::docs)),
    ("/v1/openapi.json", || {
        get_route(crate::discovery::openapi_json)
    }),
    ("/v1/openapi.yaml", || {
        get_route(crate::discovery::openapi_yaml)
    }),
    ("/v1/meta", || get_route(meta)),
    ("/v1/news", || get_route(news)),
    ("/v1/news/diff", || get_route(diff)),
    ("/v1/news/{id}", || get_route(record)),
    ("/v1/coverage", || get_route(coverage)),
    ("/v1/mapping/ticker/{ticker}", || get_route(mapping_ticker)),
    ("/v1/mapping/cik/{cik}", || get_route(mapping_cik)),
    ("/v1/sample/news", || get_route(sample_news)),
    ("/v1/sample/diff", || get_route(sample_diff)),
    ("/v1/sample/coverage", || get_route(sample_coverage)),
    ("/v1/sample/mapping", || get_route(sample_mapping)),
    ("/v1/me", || get_route(crate::account::me)),
    ("/v1/keys", || get_route(crate::account::list_keys)),
    ("/v1/audit-log", || get_route(crate::audit_log::audit_log)),
    ("/v1/audit-log/stats", || {
        get_route(crate::audit_log::audit_stats)
    }),
    ("/mcp", || {
        axum::routing::post(crate::mcp::post)
            .get(crate::mcp::not_offered)
            .delete(crate::mcp::not_offered)
    }),
];

/// Whether `path` matches a route of [`TABLE`] (`{x}` matches one segment).
pub fn is_route(path: &str) -> bool {
    TABLE.iter().any(|(r, _)| {
        let (a, b): (Vec<&str>, Vec<&str>) = (r.split('/').collect(), path.split('/').collect());
        a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| (x.starts_with('{') && !y.is_empty()) || x == y)
    })
}

pub fn router() -> Router<AppState> {
    TABLE
        .iter()
        .fold(Router::new(), |r, (path, make)| r.route(path, make()))
}

pub(crate) type Reply = Result<Response, ApiError>;

/// A successful envelope.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ok<T: Serialize>(
    ctx: &Ctx,
    results: Vec<T>,
    as_of: Option<Instant>,
    visible_by: Option<VisibleBy>,
    coverage: Coverage,
    next_cursor: Option<String>,
    sample: bool,
    cache: CacheKind,
) -> Response {
    let env = Envelope {
        request_id: ctx.request_id.clone(),
        corpus_version: ctx.corpus.version().to_owned(),
        as_of,
        visible_by: visible_by.map(|v| v.to_string()),
        status: Status::Ok,
        count: Some(results.len()),
        results,
        next_cursor,
        coverage: CoverageBody::from(coverage),
        error: None,
        sample: sample.then_some(true),
    };
    envelope_response(StatusCode::OK, &env, cache)
}

fn hole(coverage: Coverage, as_of: Instant, visible_by: VisibleBy) -> ApiError {
    ApiError::CoverageMissing {
        coverage,
        as_of: Some(as_of),
        visible_by: Some(visible_by.to_string()),
    }
}

/// `results[0]` of `/health`.
#[derive(Serialize, utoipa::ToSchema)]
struct Health {
    ok: bool,
    /// The corpus version this process serves now.
    corpus_version: String,
    /// When that version was published.
    corpus_created_at: Instant,
}

/// Liveness and the corpus version this process serves.
#[utoipa::path(get, path = "/health", tag = "discovery", operation_id = "health",
    responses((status = 200, description = "The process is up; `results[0]` is the health record.", body = Envelope<Health>)))]
pub(crate) async fn health(Extension(ctx): Extension<Ctx>, RawQuery(q): RawQuery) -> Reply {
    Params::parse(q.as_deref(), &[])?;
    let h = Health {
        ok: true,
        corpus_version: ctx.corpus.version().to_owned(),
        corpus_created_at: ctx.corpus.manifest().created_at,
    };
    Ok(ok(
        &ctx,
        vec![h],
        None,
        None,
        Coverage::default(),
        None,
        false,
        CacheKind::Live,
    ))
}

/// Vocabularies, plans, limits, and the corpus: held sources with their certified spans.
///
/// The authority on which sources this deployment holds and which days each certifies.
#[utoipa::path(get, path = "/v1/meta", tag = "discovery", operation_id = "meta",
    responses((status = 200, description = "`results[0]` is the meta record.", body = Envelope<MetaRecord>)))]
pub(crate) async fn meta(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Reply {
    Params::parse(q.as_deref(), &[])?;
    Ok(ok(
        &ctx,
        vec![crate::meta::meta_record(
            &ctx.corpus,
            state.public_requests_per_minute(),
        )],
        None,
        None,
        Coverage::default(),
        None,
        false,
        CacheKind::Live,
    ))
}

/// The filter set a news/diff cursor is bound to.
fn news_filters(
    cut: &str,
    visible_by: VisibleBy,
    entity: &Entity,
    lane: Lane,
    source: SourceId,
) -> String {
    let entity = match entity {
        Entity::All => "all".to_owned(),
        Entity::Cik(c) => format!("cik:{c}"),
        Entity::Ticker(t) => format!("ticker:{t}"),
    };
    filter_digest(&[
        ("cut", cut.to_owned()),
        ("visible_by", visible_by.to_string()),
        ("entity", entity),
        ("lane", lane.to_string()),
        ("source", source.to_string()),
    ])
}

/// Shared body of the news and diff routes (and their sample forms).
#[allow(clippy::too_many_arguments)]
async fn run_news(
    state: &AppState,
    ctx: &Ctx,
    op: &str,
    q: NewsQuery,
    cursor: Option<&str>,
    scope: Scope<'_>,
    sample: bool,
) -> Reply {
    let cut = match q.start {
        Some(s) => format!("{s}..{}", q.as_of),
        None => q.as_of.to_string(),
    };
    let filters = news_filters(&cut, q.visible_by, &q.entity, q.lane, q.source);
    let version = ctx.corpus.version();
    let after: Option<Position> = cursor
        .map(|c| state.signer().open(c, op, &filters, version))
        .transpose()?;
    let q = NewsQuery { after, ..q };
    match ctx.corpus.news(&q, scope).await? {
        Answer::Hole { coverage } => Err(hole(coverage, q.as_of, q.visible_by)),
        Answer::Page {
            rows,
            next,
            coverage,
        } => {
            let next_cursor = next.map(|p| state.signer().mint(op, &filters, version, &p));
            let records: Vec<NewsRecord> = rows
                .into_iter()
                .map(|r| NewsRecord::from_row(r, sample))
                .collect();
            Ok(ok(
                ctx,
                records,
                Some(q.as_of),
                Some(q.visible_by),
                coverage,
                next_cursor,
                sample,
                CacheKind::for_cut(Some(q.as_of)),
            ))
        }
    }
}

/// `source` for a news query: the given one, else `sec.edgar`; ticker/cik select EDGAR filers.
fn news_source(p: &Params, ctx: &Ctx, entity: &Entity) -> Result<SourceId, ApiError> {
    let held = ctx.corpus.manifest().held_sources();
    let source = p.source(&held)?.unwrap_or(SourceId::SecEdgar);
    if !held.contains(&source) {
        return Err(ApiError::invalid(
            "source",
            "this deployment holds no sec.edgar rows; name a source from /v1/meta",
        ));
    }
    if source != SourceId::SecEdgar && *entity != Entity::All {
        let param = if matches!(entity, Entity::Ticker(_)) {
            "ticker"
        } else {
            "cik"
        };
        return Err(ApiError::invalid(
            param,
            format!("ticker and cik select sec.edgar filers; source {source} rows carry no CIK"),
        ));
    }
    Ok(source)
}

const NEWS_PARAMS: &[&str] = &[
    "ticker",
    "cik",
    "as_of",
    "visible_by",
    "lane",
    "source",
    "limit",
    "cursor",
];
const DIFF_PARAMS: &[&str] = &[
    "ticker",
    "cik",
    "as_of_start",
    "as_of_end",
    "visible_by",
    "lane",
    "source",
    "limit",
    "cursor",
];

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
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(q.as_deref(), NEWS_PARAMS)?;
    let entity = p.entity()?;
    let query = NewsQuery {
        as_of: p.required_clock("as_of")?,
        visible_by: p.visible_by()?,
        lane: p.lane()?,
        source: news_source(&p, &ctx, &entity)?,
        start: None,
        entity,
        after: None,
        limit: p.limit()?,
    };
    run_news(
        &state,
        &ctx,
        "news",
        query,
        p.get("cursor"),
        Scope::Corpus,
        false,
    )
    .await
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
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(q.as_deref(), DIFF_PARAMS)?;
    let entity = p.entity()?;
    let (start, end) = window(&p)?;
    let query = NewsQuery {
        as_of: end,
        start: Some(start),
        visible_by: p.visible_by()?,
        lane: p.lane()?,
        source: news_source(&p, &ctx, &entity)?,
        entity,
        after: None,
        limit: p.limit()?,
    };
    run_news(
        &state,
        &ctx,
        "diff",
        query,
        p.get("cursor"),
        Scope::Corpus,
        false,
    )
    .await
}

fn window(p: &Params) -> Result<(Instant, Instant), ApiError> {
    let start = p.required_clock("as_of_start")?;
    let end = p.required_clock("as_of_end")?;
    if start >= end {
        return Err(ApiError::invalid(
            "as_of_start",
            "as_of_start must be before as_of_end (the window is (as_of_start, as_of_end])",
        ));
    }
    Ok((start, end))
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
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(q.as_deref(), &["as_of", "visible_by"])?;
    let as_of = p.required_clock("as_of")?;
    let visible_by = p.visible_by()?;
    match ctx.corpus.record(&id, as_of, visible_by).await? {
        RecordLookup::Visible(r) => {
            let mut cov = Coverage::default();
            if let Some(d) = r.partition_day() {
                cov.touch(asof_engine::coverage::day_key(r.source_id, d));
            }
            Ok(ok(
                &ctx,
                vec![NewsRecord::from_row(*r, false)],
                Some(as_of),
                Some(visible_by),
                cov,
                None,
                false,
                CacheKind::for_cut(Some(as_of)),
            ))
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
/// certificate, not 404. With `as_of`, certifications made after the cut do not count.
#[utoipa::path(get, path = "/v1/coverage", tag = "data", operation_id = "coverage",
    params(CoverageParams), security(("bearer" = [])),
    responses(
        (status = 200, description = "Certificates in (source, lane, date) order.", body = Envelope<CertificateRecord>),
        (status = 409, description = "`cursor_expired`: the corpus moved since the cursor was minted."),
    ))]
pub(crate) async fn coverage(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(
        q.as_deref(),
        &["source", "date", "as_of", "limit", "cursor"],
    )?;
    let held = ctx.corpus.manifest().held_sources();
    let source = p.source(&held)?;
    let date = p.day("date")?;
    let as_of = p.clock("as_of")?;
    let limit = p.limit()?;
    let filters = filter_digest(&[
        ("source", source.map(|s| s.to_string()).unwrap_or_default()),
        ("date", date.map(|d| d.to_string()).unwrap_or_default()),
        ("as_of", as_of.map(|d| d.to_string()).unwrap_or_default()),
    ]);
    let version = ctx.corpus.version();
    let after = p
        .get("cursor")
        .map(|c| state.signer().open(c, "coverage", &filters, version))
        .transpose()?;
    let (certs, next) = ctx.corpus.coverage(&CoverageQuery {
        source,
        date,
        as_of,
        after,
        limit,
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
    let next_cursor = next.map(|pos| state.signer().mint("coverage", &filters, version, &pos));
    Ok(ok(
        &ctx,
        certs,
        as_of,
        None,
        cov,
        next_cursor,
        false,
        CacheKind::for_cut(as_of),
    ))
}

/// Identity as of an instant: the CIKs a ticker denoted at `as_of`.
///
/// From point-in-time intervals built from dated observations, never from a current ticker
/// file. A ticker no interval places at `as_of` is a coverage hole keyed
/// `identity.ticker/<TICKER>@<YYYY-MM-DD>` (the same answer `/v1/news` gives).
#[utoipa::path(get, path = "/v1/mapping/ticker/{ticker}", tag = "data", operation_id = "mapping_ticker",
    params(("ticker" = String, Path, pattern = "^[A-Za-z0-9.-]{1,16}$", example = "TSLA", description = "Exchange ticker (case-insensitive)."), MappingParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The intervals placing the ticker at `as_of`, with their evidence.", body = Envelope<MappingRecord>),
        (status = 409, description = "`coverage_missing`: no interval places the ticker at `as_of`."),
    ))]
pub(crate) async fn mapping_ticker(
    Extension(ctx): Extension<Ctx>,
    Path(ticker): Path<String>,
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(q.as_deref(), &["as_of"])?;
    let ticker = params::ticker(&ticker, "ticker")?;
    let as_of = p.required_clock("as_of")?;
    mapping_answer(&ctx, &ticker, as_of, false)
}

fn mapping_answer(ctx: &Ctx, ticker: &str, as_of: Instant, sample: bool) -> Reply {
    match ctx.corpus.mapping_ticker(ticker, as_of) {
        Ok(m) => {
            let mut cov = Coverage::default();
            cov.touch(asof_engine::identity::ticker_hole_key(ticker, as_of));
            Ok(ok(
                ctx,
                m,
                Some(as_of),
                None,
                cov,
                None,
                sample,
                CacheKind::for_cut(Some(as_of)),
            ))
        }
        Err(key) => {
            let coverage = Coverage {
                touched: vec![],
                missing: vec![key],
                missing_total: 1,
            };
            Err(ApiError::CoverageMissing {
                coverage,
                as_of: Some(as_of),
                visible_by: None,
            })
        }
    }
}

/// Identity as of an instant: the tickers a CIK carried at `as_of`.
#[utoipa::path(get, path = "/v1/mapping/cik/{cik}", tag = "data", operation_id = "mapping_cik",
    params(("cik" = String, Path, pattern = "^[0-9]{1,10}$", example = "1318605", description = "SEC Central Index Key, with or without leading zeros."), MappingParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Intervals valid at `as_of` (possibly none: a known CIK without a ticker then).", body = Envelope<MappingRecord>),
        (status = 404, description = "`not_found`: the corpus holds no identity evidence for this CIK."),
    ))]
pub(crate) async fn mapping_cik(
    Extension(ctx): Extension<Ctx>,
    Path(cik): Path<String>,
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(q.as_deref(), &["as_of"])?;
    let cik = params::cik(&cik, "cik")?;
    let as_of = p.required_clock("as_of")?;
    if !ctx.corpus.identity().knows_cik(&cik) {
        return Err(ApiError::NotFound(format!(
            "no identity evidence for CIK {cik}"
        )));
    }
    let m = ctx.corpus.mapping_cik(&cik, as_of);
    Ok(ok(
        &ctx,
        m,
        Some(as_of),
        None,
        Coverage::default(),
        None,
        false,
        CacheKind::for_cut(Some(as_of)),
    ))
}

// ---- sample routes -------------------------------------------------------------------------

fn sample_set(ctx: &Ctx) -> Result<SampleSet, ApiError> {
    ctx.corpus
        .manifest()
        .sample
        .clone()
        .ok_or_else(|| ApiError::NotFound("this deployment ships no sample set".into()))
}

fn example<'a>(set: &'a SampleSet, p: &Params) -> Result<&'a SampleExample, ApiError> {
    match p.get("example") {
        None => set
            .examples
            .first()
            .ok_or_else(|| ApiError::NotFound("the sample set has no examples".into())),
        Some(e) => set.examples.iter().find(|x| x.id == e).ok_or_else(|| {
            let valid: Vec<&str> = set.examples.iter().map(|x| x.id.as_str()).collect();
            ApiError::invalid(
                "example",
                format!(
                    "the sample does not hold {e:?}; examples: {}",
                    valid.join(", ")
                ),
            )
        }),
    }
}

/// The query a sample news or diff route runs: the example's ticker on the sample's lane.
fn sample_query(
    set: &SampleSet,
    ex: &SampleExample,
    visible_by: VisibleBy,
    start: Option<Instant>,
    as_of: Instant,
) -> NewsQuery {
    NewsQuery {
        source: set.source_id,
        lane: set.lane,
        visible_by,
        start,
        as_of,
        entity: Entity::Ticker(ex.ticker.clone()),
        after: None,
        limit: params::MAX_LIMIT,
    }
}

/// The latest cut the sample can serve: the end of its last day.
fn sample_latest(set: &SampleSet) -> Instant {
    set.days
        .iter()
        .max()
        .map_or_else(Instant::now, |d| d.end_of_day())
}

/// The as-of query on the public sample (no key; `sample: true`).
///
/// Three sample companies on a few certified days. A day the sample has not read is a 409
/// with that day in `coverage.missing`.
#[utoipa::path(get, path = "/v1/sample/news", tag = "sample", operation_id = "sample_news",
    params(SampleNewsParams),
    responses(
        (status = 200, description = "The sample cut.", body = Envelope<NewsRecord>),
        (status = 404, description = "`not_found`: this deployment ships no sample set."),
        (status = 409, description = "`coverage_missing`: the cut needs a day the sample has not read."),
    ))]
pub(crate) async fn sample_news(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(q.as_deref(), &["example", "as_of", "visible_by"])?;
    let set = sample_set(&ctx)?;
    let ex = example(&set, &p)?;
    let as_of = p.clock("as_of")?.unwrap_or_else(|| sample_latest(&set));
    let query = sample_query(&set, ex, p.visible_by()?, None, as_of);
    run_news(
        &state,
        &ctx,
        "sample.news",
        query,
        None,
        Scope::Sample(&set),
        true,
    )
    .await
}

/// The became-knowable diff on the public sample (no key; `sample: true`).
#[utoipa::path(get, path = "/v1/sample/diff", tag = "sample", operation_id = "sample_diff",
    params(SampleDiffParams),
    responses(
        (status = 200, description = "Sample rows that became visible in the window.", body = Envelope<NewsRecord>),
        (status = 404, description = "`not_found`: this deployment ships no sample set."),
        (status = 409, description = "`coverage_missing`: the window needs a day the sample has not read."),
    ))]
pub(crate) async fn sample_diff(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(
        q.as_deref(),
        &["example", "as_of_start", "as_of_end", "visible_by"],
    )?;
    let set = sample_set(&ctx)?;
    let ex = example(&set, &p)?;
    let (start, end) = window(&p)?;
    let query = sample_query(&set, ex, p.visible_by()?, Some(start), end);
    run_news(
        &state,
        &ctx,
        "sample.diff",
        query,
        None,
        Scope::Sample(&set),
        true,
    )
    .await
}

/// A sample certificate: one per sample source-day, counting the example company's rows.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct SampleCertificate {
    key: String,
    source_id: SourceId,
    lane: Lane,
    date: asof_engine::Day,
    example: String,
    status: &'static str,
    row_count: Option<u64>,
}

/// Coverage certificates of the public sample: one per day of its span, counting the
/// example company's rows (no key; `sample: true`).
#[utoipa::path(get, path = "/v1/sample/coverage", tag = "sample", operation_id = "sample_coverage",
    params(SampleCoverageParams),
    responses(
        (status = 200, description = "Sample certificates, oldest day first; `row_count` null on days the sample has not read.", body = Envelope<SampleCertificate>),
        (status = 404, description = "`not_found`: this deployment ships no sample set."),
        (status = 409, description = "`cursor_expired`: the corpus moved since the cursor was minted."),
    ))]
pub(crate) async fn sample_coverage(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Reply {
    let p = Params::parse(
        q.as_deref(),
        &["example", "as_of", "source", "date", "limit", "cursor"],
    )?;
    let set = sample_set(&ctx)?;
    let ex = example(&set, &p)?;
    p.source(&[set.source_id])?;
    let date = p.day("date")?;
    let as_of = p.clock("as_of")?;
    let limit = p.limit()?;
    let filters = filter_digest(&[
        ("example", ex.id.clone()),
        ("date", date.map(|d| d.to_string()).unwrap_or_default()),
        ("as_of", as_of.map(|d| d.to_string()).unwrap_or_default()),
    ]);
    let version = ctx.corpus.version();
    let after: Option<asof_engine::Day> = p
        .get("cursor")
        .map(|c| state.signer().open(c, "sample.coverage", &filters, version))
        .transpose()?;
    // The example's rows on the sample days, counted per day.
    let all = NewsQuery {
        source: set.source_id,
        lane: set.lane,
        visible_by: VisibleBy::PublishedAt,
        start: None,
        as_of: sample_latest(&set),
        entity: Entity::Cik(ex.cik.clone()),
        after: None,
        limit: params::MAX_LIMIT,
    };
    let rows = match ctx.corpus.news(&all, Scope::Sample(&set)).await? {
        Answer::Page { rows, .. } => rows,
        Answer::Hole { .. } => vec![],
    };
    let first = set.days.iter().min().copied();
    let last = set.days.iter().max().copied();
    let mut days: Vec<asof_engine::Day> = match (date, first, last) {
        (Some(d), _, _) => vec![d],
        (None, Some(f), Some(l)) => (f.days()..=l.days())
            .map(asof_engine::Day::from_days)
            .collect(),
        _ => vec![],
    };
    if let Some(cut) = as_of {
        days.retain(|d| *d <= cut.day());
    }
    days.retain(|d| after.is_none_or(|a| *d > a));
    let more = days.len() > limit;
    days.truncate(limit);
    let mut cov = Coverage::default();
    let certs: Vec<SampleCertificate> = days
        .iter()
        .map(|&d| {
            let key = asof_engine::coverage::day_key(set.source_id, d);
            let read = set.days.contains(&d);
            if read {
                cov.touch(key.clone());
            } else {
                cov.missing.push(key.clone());
                cov.missing_total += 1;
            }
            SampleCertificate {
                key,
                source_id: set.source_id,
                lane: set.lane,
                date: d,
                example: ex.id.clone(),
                status: if read { "certified" } else { "missing" },
                row_count: read
                    .then(|| rows.iter().filter(|r| r.partition_day() == Some(d)).count() as u64),
            }
        })
        .collect();
    let next_cursor = if more {
        days.last()
            .map(|d| state.signer().mint("sample.coverage", &filters, version, d))
    } else {
        None
    };
    Ok(ok(
        &ctx,
        certs,
        as_of,
        None,
        cov,
        next_cursor,
        true,
        CacheKind::for_cut(as_of),
    ))
}

/// Identity as of an instant for a sample company (no key; `sample: true`).
#[utoipa::path(get, path = "/v1/sample/mapping", tag = "sample", operation_id = "sample_mapping",
    params(SampleMappingParams),
    responses(
        (status = 200, description = "The intervals placing the example's ticker at `as_of`.", body = Envelope<MappingRecord>),
        (status = 404, description = "`not_found`: this deployment ships no sample set."),
        (status = 409, description = "`coverage_missing`: no interval places the ticker at `as_of`."),
    ))]
pub(crate) async fn sample_mapping(Extension(ctx): Extension<Ctx>, RawQuery(q): RawQuery) -> Reply {
    let p = Params::parse(q.as_deref(), &["example", "as_of"])?;
    let set = sample_set(&ctx)?;
    let ex = example(&set, &p)?;
    let as_of = p.clock("as_of")?.unwrap_or_else(|| sample_latest(&set));
    mapping_answer(&ctx, &ex.ticker, as_of, true)
}
