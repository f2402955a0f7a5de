//! The public sample (no key; every answer watermarked `sample: true`): the answers of
//! `asof_answer::sample`, the data routes' engine calls scoped to the sample's companies and
//! days.

use asof_answer::sample::{
    self, SampleCertificate, SampleCoverageParams, SampleDiffParams, SampleMappingParams,
    SampleNewsParams,
};
use axum::extract::{Extension, State};
use axum::response::IntoResponse;

use crate::http::envelope::{Envelope, MappingRecord, NewsRecord};
use crate::http::params::Q;
use crate::http::{AppState, Ctx, Reply, answered};
use crate::routes::data::news_reply;

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
    Q(p): Q<SampleNewsParams>,
) -> Reply {
    let page = sample::news(&ctx.corpus, state.pager(), &p).await?;
    Ok(news_reply(&ctx, page))
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
    Q(p): Q<SampleDiffParams>,
) -> Reply {
    let page = sample::diff(&ctx.corpus, state.pager(), &p).await?;
    Ok(news_reply(&ctx, page))
}

/// Coverage certificates of the public sample: one per day of its span, counting the
/// example company's rows (no key; `sample: true`).
#[utoipa::path(get, path = "/v1/sample/coverage", tag = "sample", operation_id = "sample_coverage",
    params(SampleCoverageParams),
    responses(
        (status = 200, description = "Sample certificates, oldest day first; `row_count` null on days the sample has not read.", body = Envelope<SampleCertificate>),
        (status = 404, description = "`not_found`: this deployment ships no sample set."),
        (status = 409, description = "`coverage_missing`: counting the example's rows needs a day the sample cannot answer; or `cursor_expired`: the corpus moved since the cursor was minted."),
    ))]
pub(crate) async fn sample_coverage(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Q(p): Q<SampleCoverageParams>,
) -> Reply {
    let answer = sample::coverage(&ctx.corpus, state.pager(), &p).await?;
    Ok(answered(&ctx, answer).into_response())
}

/// Identity as of an instant for a sample company (no key; `sample: true`).
#[utoipa::path(get, path = "/v1/sample/mapping", tag = "sample", operation_id = "sample_mapping",
    params(SampleMappingParams),
    responses(
        (status = 200, description = "The intervals placing the example's ticker at `as_of`.", body = Envelope<MappingRecord>),
        (status = 404, description = "`not_found`: this deployment ships no sample set."),
        (status = 409, description = "`coverage_missing`: no interval places the ticker at `as_of`."),
    ))]
pub(crate) async fn sample_mapping(
    Extension(ctx): Extension<Ctx>,
    Q(p): Q<SampleMappingParams>,
) -> Reply {
    Ok(answered(&ctx, sample::mapping(&ctx.corpus, &p)?).into_response())
}
