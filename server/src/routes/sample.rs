//! The public sample (no key; every answer watermarked `sample: true`): the same engine calls
//! as the data routes, scoped to the sample's companies and days.

use asof_engine::coverage::Scope;
use asof_engine::manifest::{SampleExample, SampleSet};
use asof_engine::{Answer, Coverage, Day, Entity, Instant, Lane, NewsQuery, SourceId, VisibleBy};
use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use serde::Serialize;

use crate::error::ApiError;
use crate::http::cursor::filter_digest;
use crate::http::envelope::{Envelope, MappingRecord, NewsRecord};
use crate::http::params::{self, Limit, Q, held_source, query};
use crate::http::{AppState, Ctx, Reply, ok};
use crate::routes::data::{mapping_answer, run_news, window};

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
    Q(p): Q<SampleNewsParams>,
) -> Reply {
    let set = sample_set(&ctx)?;
    let ex = example(&set, p.example.as_deref())?;
    let as_of = p.as_of.unwrap_or_else(|| sample_latest(&set));
    let query = sample_query(&set, ex, p.visible_by, None, as_of);
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
    Q(p): Q<SampleDiffParams>,
) -> Reply {
    let set = sample_set(&ctx)?;
    let ex = example(&set, p.example.as_deref())?;
    window(p.as_of_start, p.as_of_end)?;
    let query = sample_query(&set, ex, p.visible_by, Some(p.as_of_start), p.as_of_end);
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
pub struct SampleCertificate {
    key: String,
    source_id: SourceId,
    lane: Lane,
    date: Day,
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
    let limit = p.limit.0;
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
        // A count over a hole would be a made-up zero: the hole is the answer.
        Answer::Hole { coverage } => {
            return Err(ApiError::CoverageMissing {
                coverage,
                as_of: p.as_of,
                visible_by: None,
            });
        }
    };
    let first = set.days.iter().min().copied();
    let last = set.days.iter().max().copied();
    let mut days: Vec<Day> = match (p.date, first, last) {
        (Some(d), _, _) => vec![d],
        (None, Some(f), Some(l)) => (f.days()..=l.days()).map(Day::from_days).collect(),
        _ => vec![],
    };
    if let Some(cut) = p.as_of {
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
    Ok(ok(&ctx, certs)
        .at(p.as_of, None)
        .coverage(cov)
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
