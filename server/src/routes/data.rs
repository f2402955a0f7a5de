//! Data routes (Bearer key): the as-of cut, the became-knowable diff, single records,
//! coverage certificates and identity as of an instant. Each handler parses its query, calls
//! one answer of `asof_answer::data` and renders it.

use asof_answer::NewsPage;
use asof_answer::data::{
    self, CoverageParams, DiffParams, MappingParams, NewsParams, RecordParams,
};
use asof_answer::envelope::{encoded_len, records};
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Response};

use crate::http::envelope::{CertificateRecord, Envelope, MappingRecord, NewsRecord};
use crate::http::params::{Cik, Q, Ticker};
use crate::http::{AppState, Ctx, Reply, answered};

/// A news or diff page as the routes encode it: from the rows the engine shares with its
/// cache (a keyed record's encoding is kept with the cached row; the sample tier's rows carry
/// `sample: true` and are encoded each time).
pub(crate) fn news_reply(ctx: &Ctx, mut page: NewsPage) -> Response {
    let rows = std::mem::take(&mut page.results);
    let records = records(&rows, page.sample);
    let len = encoded_len(&records);
    answered(ctx, page.map(|_| records))
        .sized(len)
        .into_response()
}

/// As-of record query: rows whose `visible_by` clock is at or before `as_of`.
///
/// Sorted by `(published_at, id)`, rows without `published_at` last, paged by cursor. With
/// `ticker`, the ticker is resolved to CIKs through the identity intervals valid at `as_of`
/// (never today's ticker file). With neither `ticker` nor `cik`, every row of `source`
/// (default `sec.edgar`). A cut that needs a source-day the corpus does not certify, or a
/// ticker no interval places at `as_of`, is a coverage hole (409), never an empty answer.
#[utoipa::path(get, path = "/v1/news", tag = "data", operation_id = "news",
    params(NewsParams), security(("bearer" = []), ("session" = [])),
    responses(
        (status = 200, description = "The cut (possibly `count: 0`: a complete cut with no rows).", body = Envelope<NewsRecord>),
        (status = 409, description = "`coverage_missing`: the cut depends on an uncertified source-day or an unplaced ticker (`coverage.missing` names it); or `cursor_expired`: the corpus moved since the cursor was minted."),
    ))]
pub(crate) async fn news(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(p): Q<NewsParams>,
) -> Reply {
    let page = data::cut(&ctx.corpus, state.pager(), &p).await?;
    Ok(news_reply(&ctx, page))
}

/// Became-knowable diff: rows visible at `as_of_end` and not at `as_of_start`.
///
/// The window is `(as_of_start, as_of_end]` on the same clock (not an `event_at` window).
/// Same filters, sort and paging as `/v1/news`.
#[utoipa::path(get, path = "/v1/news/diff", tag = "data", operation_id = "news_diff",
    params(DiffParams), security(("bearer" = []), ("session" = [])),
    responses(
        (status = 200, description = "Rows that became visible in the window.", body = Envelope<NewsRecord>),
        (status = 409, description = "`coverage_missing` (a hole in the window) or `cursor_expired`."),
    ))]
pub(crate) async fn diff(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(p): Q<DiffParams>,
) -> Reply {
    let page = data::cut(&ctx.corpus, state.pager(), &p).await?;
    Ok(news_reply(&ctx, page))
}

/// One record as knowable at `as_of`.
///
/// On `published_at` and `available_at` the corpus version's current revision answers; on
/// `committed_at` the revision current at the cut.
#[utoipa::path(get, path = "/v1/news/{id}", tag = "data", operation_id = "news_record",
    params(("id" = String, Path, min_length = 1, example = "0001628280-26-003952_1318605", description = "Record id, as in `results[].id`."), RecordParams),
    security(("bearer" = []), ("session" = [])),
    responses(
        (status = 200, description = "`results[0]` is the record.", body = Envelope<NewsRecord>),
        (status = 404, description = "`not_found`: no such record, or a record that exists but is not knowable yet at `as_of` (the message says which)."),
    ))]
pub(crate) async fn record(
    Extension(ctx): Extension<Ctx>,
    Path(id): Path<String>,
    Q(p): Q<RecordParams>,
) -> Reply {
    Ok(answered(&ctx, data::record(&ctx.corpus, &id, &p).await?).into_response())
}

/// Coverage certificates, one per source-lane-day, paged.
///
/// `row_count` is null for a missing (uningested or uncertified) day: a missing partition is
/// not an empty one. With `source` and `date`, an uningested day returns a missing
/// certificate, not 404. With `as_of`, certifications made after the cut do not count. One
/// lane answers (`certified_pit` unless `lane` says otherwise): a certificate's `key` names
/// one source-day, and lanes are never mixed in one answer.
#[utoipa::path(get, path = "/v1/coverage", tag = "data", operation_id = "coverage",
    params(CoverageParams), security(("bearer" = []), ("session" = [])),
    responses(
        (status = 200, description = "Certificates in (source, lane, date) order.", body = Envelope<CertificateRecord>),
        (status = 409, description = "`cursor_expired`: the corpus moved since the cursor was minted."),
    ))]
pub(crate) async fn coverage(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(p): Q<CoverageParams>,
) -> Reply {
    Ok(answered(&ctx, data::coverage(&ctx.corpus, state.pager(), &p)?).into_response())
}

/// Identity as of an instant: the CIKs a ticker denoted at `as_of`.
///
/// From point-in-time intervals built from dated observations, never from a current ticker
/// file. A ticker no interval places at `as_of` is a coverage hole keyed
/// `identity.ticker/<TICKER>@<YYYY-MM-DD>` (the same answer `/v1/news` gives).
#[utoipa::path(get, path = "/v1/mapping/ticker/{ticker}", tag = "data", operation_id = "mapping_ticker",
    params(("ticker" = inline(Ticker), Path, example = "TSLA", description = "Exchange ticker (case-insensitive)."), MappingParams),
    security(("bearer" = []), ("session" = [])),
    responses(
        (status = 200, description = "The intervals placing the ticker at `as_of`, with their evidence.", body = Envelope<MappingRecord>),
        (status = 409, description = "`coverage_missing`: no interval places the ticker at `as_of`."),
    ))]
pub(crate) async fn mapping_ticker(
    Extension(ctx): Extension<Ctx>,
    Path(ticker): Path<String>,
    Q(p): Q<MappingParams>,
) -> Reply {
    Ok(answered(&ctx, data::mapping_ticker(&ctx.corpus, &ticker, &p)?).into_response())
}

/// Identity as of an instant: the tickers a CIK carried at `as_of`.
#[utoipa::path(get, path = "/v1/mapping/cik/{cik}", tag = "data", operation_id = "mapping_cik",
    params(("cik" = inline(Cik), Path, example = "1318605", description = "SEC Central Index Key, with or without leading zeros."), MappingParams),
    security(("bearer" = []), ("session" = [])),
    responses(
        (status = 200, description = "Intervals valid at `as_of` (possibly none: a known CIK without a ticker then).", body = Envelope<MappingRecord>),
        (status = 404, description = "`not_found`: the corpus holds no identity evidence for this CIK."),
    ))]
pub(crate) async fn mapping_cik(
    Extension(ctx): Extension<Ctx>,
    Path(cik): Path<String>,
    Q(p): Q<MappingParams>,
) -> Reply {
    Ok(answered(&ctx, data::mapping_cik(&ctx.corpus, &cik, &p)?).into_response())
}
