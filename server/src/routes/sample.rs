//! The public sample (no key; every answer watermarked `sample: true`): the same engine calls
//! as the data routes, scoped to the sample's companies and days.

use asof_engine::coverage::Scope;
use asof_engine::manifest::{SampleExample, SampleSet};
use asof_engine::sample::{SampleCoverageQuery, sample_latest};
use asof_engine::{Answer, Day, Entity, Instant, Lane, NewsQuery, SourceId, VisibleBy};
use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use serde::Serialize;

use crate::error::ApiError;
use crate::http::cursor::filter_digest;
use crate::http::envelope::{Envelope, MappingRecord, NewsRecord};
use crate::http::params::{self, Limit, Q, held_source, query};
use crate::http::{AppState, Ctx, Reply, ok};
use crate::routes::data::{mapping_answer, run_news};

query! {
    /// Query of `GET /v1/sample/news`.
    pub struct SampleNewsParams {
        /// Sample company; omitted means the first. The ids are listed in `/v1/meta`.
        pub example: Option<String>,
        /// The cut; omitted means the end of the sample's last day.
        #[param(inline)]
        pub as_of: Option<Instant>,
        /// The clock visibility is evaluated on.
        #[param(inline, required = false, default = "published_at")]
        pub visible_by: VisibleBy,
    }
}

query! {
    /// Query of `GET /v1/sample/diff`.
    pub struct SampleDiffParams {
        /// Sample company; omitted means the first.
        pub example: Option<String>,
        /// Start of the window, exclusive.
        #[param(inline)]
        pub as_of_start: Instant,
        /// End of the window, inclusive.
        #[param(inline)]
        pub as_of_end: Instant,
        /// The clock visibility is evaluated on.
        #[param(inline, required = false, default = "published_at")]
        pub visible_by: VisibleBy,
    }
}

query! {
    /// Query of `GET /v1/sample/coverage`.
    pub struct SampleCoverageParams {
        /// Sample company; omitted means the first.
        pub example: Option<String>,
        /// Certificates as knowable at this instant; omitted means the latest.
        #[param(inline)]
        pub as_of: Option<Instant>,
        /// The sample's source (it holds one).
        #[param(inline)]
        pub source: Option<SourceId>,
        /// Only this UTC day.
        #[param(inline)]
        pub date: Option<Day>,
        /// Page size.
        #[param(inline, required = false)]
        pub limit: Limit,
        /// `next_cursor` of the previous page, with the same query.
        pub cursor: Option<String>,
    }
}

query! {
    /// Query of `GET /v1/sample/mapping`.
    pub struct SampleMappingParams {
        /// Sample company; omitted means the first.
        pub example: Option<String>,
        /// The instant; omitted means the end of the sample's last day.
        #[param(inline)]
        pub as_of: Option<Instant>,
    }
}

fn sample_set(ctx: &Ctx) -> Result<SampleSet, ApiError> {
    ctx.corpus
        .manifest()
        .sample
        .clone()
        .ok_or_else(|| ApiError::NotFound("this deployment ships no sample set".into()))
}

/// The example a sample route answers for; a ticker the sample does not hold is refused by
/// name.
fn example<'a>(set: &'a SampleSet, id: Option<&str>) -> Result<&'a SampleExample, ApiError> {
    match id {
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
    let set = sample_set(&ctx)?;
    let ex = example(&set, p.example.as_deref())?;
    let as_of = p.as_of.unwrap_or_else(|| sample_latest(&set));
    let query = sample_query(&set, ex, p.visible_by, None, as_of);
    run_news(
        state.signer(),
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
    Q(p): Q<SampleDiffParams>,
) -> Reply {
    let set = sample_set(&ctx)?;
    let ex = example(&set, p.example.as_deref())?;
    let query = sample_query(&set, ex, p.visible_by, Some(p.as_of_start), p.as_of_end);
    run_news(
        state.signer(),
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
pub struct SampleCertificate {
    key: String,
    source_id: SourceId,
    lane: Lane,
    date: Day,
    example: String,
    /// `certified` on a day the sample has read, `missing` otherwise.
    status: &'static str,
    /// The example's rows on the day; null on a day the sample has not read.
    row_count: Option<u64>,
}

impl From<asof_engine::sample::SampleCertificate> for SampleCertificate {
    fn from(c: asof_engine::sample::SampleCertificate) -> Self {
        SampleCertificate {
            key: c.key,
            source_id: c.source_id,
            lane: c.lane,
            date: c.date,
            example: c.example,
            status: if c.read { "certified" } else { "missing" },
            row_count: c.row_count,
        }
    }
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
    let set = sample_set(&ctx)?;
    let ex = example(&set, p.example.as_deref())?;
    held_source(p.source, &[set.source_id])?;
    let filters = filter_digest(&[
        ("example", ex.id.clone()),
        ("date", p.date.map(|d| d.to_string()).unwrap_or_default()),
        ("as_of", p.as_of.map(|d| d.to_string()).unwrap_or_default()),
    ]);
    let version = ctx.corpus.version();
    let after: Option<Day> = p
        .cursor
        .as_deref()
        .map(|c| state.signer().open(c, "sample.coverage", &filters, version))
        .transpose()?;
    let query = SampleCoverageQuery {
        set: &set,
        example: ex,
        date: p.date,
        as_of: p.as_of,
        after,
        limit: p.limit.0,
    };
    let (certs, coverage) = match ctx.corpus.sample_coverage(&query).await? {
        (Answer::Page { rows, coverage, .. }, next) => {
            let next_cursor = next.map(|d| {
                state
                    .signer()
                    .mint("sample.coverage", &filters, version, &d)
            });
            (rows, (coverage, next_cursor))
        }
        // A count over a hole would be a made-up zero: the hole is the answer.
        (Answer::Hole { coverage }, _) => {
            return Err(ApiError::CoverageMissing {
                coverage,
                as_of: p.as_of,
                visible_by: None,
            });
        }
    };
    let (coverage, next_cursor) = coverage;
    let certs: Vec<SampleCertificate> = certs.into_iter().map(SampleCertificate::from).collect();
    Ok(ok(&ctx, certs)
        .at(p.as_of, None)
        .coverage(coverage)
        .next(next_cursor)
        .sample(true)
        .into_response())
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
    let set = sample_set(&ctx)?;
    let ex = example(&set, p.example.as_deref())?;
    let as_of = p.as_of.unwrap_or_else(|| sample_latest(&set));
    mapping_answer(&ctx, &ex.ticker, as_of, true)
}
