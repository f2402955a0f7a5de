//! The public sample's answers (every one watermarked `sample: true`): the same engine calls
//! as the data answers, scoped to the sample's companies and days.

use asof_engine::model::coverage::Scope;
use asof_engine::model::manifest::{SampleExample, SampleSet};
use asof_engine::read::sample::{SampleCoverageQuery, sample_latest};
use asof_engine::{Corpus, Day, Entity, Instant, Lane, NewsQuery, SourceId, VisibleBy};
use serde::Serialize;

use crate::Error;
use crate::answer::{Answer, NewsPage};
use crate::envelope::MappingRecord;
use crate::pager::{Op, Pager};
use crate::params::{self, Limit, held_source};
use crate::query;

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

fn sample_set(corpus: &Corpus) -> Result<SampleSet, Error> {
    corpus
        .manifest()
        .sample
        .clone()
        .ok_or_else(|| Error::NotFound("this deployment ships no sample set".into()))
}

/// The example a sample route answers for; a ticker the sample does not hold is refused by
/// name.
fn example<'a>(set: &'a SampleSet, id: Option<&str>) -> Result<&'a SampleExample, Error> {
    match id {
        None => set
            .examples
            .first()
            .ok_or_else(|| Error::NotFound("the sample set has no examples".into())),
        Some(e) => set.examples.iter().find(|x| x.id == e).ok_or_else(|| {
            let valid: Vec<&str> = set.examples.iter().map(|x| x.id.as_str()).collect();
            Error::invalid(
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

/// `/v1/sample/news`: the cut on the sample, for one example company (the first by default),
/// at `as_of` (the sample's last instant by default).
pub async fn news(corpus: &Corpus, pager: &Pager, p: &SampleNewsParams) -> Result<NewsPage, Error> {
    let set = sample_set(corpus)?;
    let ex = example(&set, p.example.as_deref())?;
    let as_of = p.as_of.unwrap_or_else(|| sample_latest(&set));
    let query = sample_query(&set, ex, p.visible_by, None, as_of);
    let page = crate::data::news_page(
        corpus,
        pager,
        Op::SampleNews,
        query,
        None,
        Scope::Sample(&set),
    )
    .await?;
    Ok(page.sample(true))
}

/// `/v1/sample/diff`: the became-knowable diff on the sample.
pub async fn diff(corpus: &Corpus, pager: &Pager, p: &SampleDiffParams) -> Result<NewsPage, Error> {
    let set = sample_set(corpus)?;
    let ex = example(&set, p.example.as_deref())?;
    let query = sample_query(&set, ex, p.visible_by, Some(p.as_of_start), p.as_of_end);
    let page = crate::data::news_page(
        corpus,
        pager,
        Op::SampleDiff,
        query,
        None,
        Scope::Sample(&set),
    )
    .await?;
    Ok(page.sample(true))
}

/// A sample certificate: one per sample source-day, counting the example company's rows.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

impl From<asof_engine::read::sample::SampleCertificate> for SampleCertificate {
    fn from(c: asof_engine::read::sample::SampleCertificate) -> Self {
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

/// `/v1/sample/coverage`: the sample's certificates, oldest day first.
pub async fn coverage(
    corpus: &Corpus,
    pager: &Pager,
    p: &SampleCoverageParams,
) -> Result<Answer<SampleCertificate>, Error> {
    let set = sample_set(corpus)?;
    let ex = example(&set, p.example.as_deref())?;
    held_source(p.source, &[set.source_id])?;
    let paging = pager.bind(
        Op::SampleCoverage,
        &[
            ("example", ex.id.clone()),
            ("date", p.date.map(|d| d.to_string()).unwrap_or_default()),
            ("as_of", p.as_of.map(|d| d.to_string()).unwrap_or_default()),
        ],
        corpus.version(),
    );
    let query = SampleCoverageQuery {
        set: &set,
        example: ex,
        date: p.date,
        as_of: p.as_of,
        after: paging.open(p.cursor.as_deref())?,
        limit: p.limit.0,
    };
    match corpus.sample_coverage(&query).await? {
        (asof_engine::Answer::Page { rows, coverage, .. }, next) => Ok(Answer::of(
            rows.into_iter().map(SampleCertificate::from).collect(),
        )
        .at(p.as_of, None)
        .coverage(coverage)
        .next(paging.mint(next))
        .sample(true)),
        // A count over a hole would be a made-up zero: the hole is the answer.
        (asof_engine::Answer::Hole { coverage }, _) => Err(Error::hole(coverage, p.as_of, None)),
    }
}

/// `/v1/sample/mapping`: the intervals placing the example company's ticker at `as_of`.
pub fn mapping(corpus: &Corpus, p: &SampleMappingParams) -> Result<Answer<MappingRecord>, Error> {
    let set = sample_set(corpus)?;
    let ex = example(&set, p.example.as_deref())?;
    let as_of = p.as_of.unwrap_or_else(|| sample_latest(&set));
    Ok(crate::data::mapping(corpus, &ex.ticker, as_of)?.sample(true))
}
