//! The data answers: the as-of cut, the became-knowable diff, single records, coverage
//! certificates and identity as of an instant, with the query structs their routes take.

use asof_cursor::FilterDigest;
use asof_engine::model::coverage::Scope;
use asof_engine::{
    Corpus, Coverage, CoverageQuery, Day, Entity, Instant, Lane, NewsQuery, RecordLookup, SourceId,
    VisibleBy,
};

use crate::Error;
use crate::answer::{Answer, NewsPage};
use crate::envelope::{CertificateRecord, MappingRecord, NewsRecord};
use crate::pager::{Op, Pager};
use crate::params::{self, Cik, Limit, Pin, Ticker, held_source};
use crate::query;

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
        /// Pins the answer to this corpus version (an extension of the contract): it is answered
        /// from that version while this deployment retains it (`retention` in `/v1/meta`), the
        /// envelope and `X-Corpus-Version` name it, and its cursors stay valid when the served
        /// version moves. Omitted: the version served now, as the contract says. A version
        /// never published here is `404 corpus_version_unknown`; one outside retention,
        /// `410 corpus_version_not_retained`. Send it to replay a receipt's question.
        #[param(inline)]
        pub corpus_version: Option<Pin>,
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
        /// As on `/v1/news`: the corpus version to answer from (omitted: the one served now).
        #[param(inline)]
        pub corpus_version: Option<Pin>,
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
        /// As on `/v1/news`: the corpus version to answer from (omitted: the one served now).
        #[param(inline)]
        pub corpus_version: Option<Pin>,
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
        /// As on `/v1/news`: the corpus version to answer from (omitted: the one served now).
        #[param(inline)]
        pub corpus_version: Option<Pin>,
    }
}

query! {
    /// Query of the mapping routes.
    pub struct MappingParams {
        /// The instant the identity intervals must hold at.
        #[param(inline)]
        pub as_of: Instant,
        /// As on `/v1/news`: the corpus version to answer from (omitted: the one served now).
        #[param(inline)]
        pub corpus_version: Option<Pin>,
    }
}

query! {
    /// Query of `GET /v1/meta`.
    pub struct MetaParams {
        /// As on `/v1/news`: what this retained corpus version held (its sources, spans and
        /// sample); omitted: the version served now.
        #[param(inline)]
        pub corpus_version: Option<Pin>,
    }
}

impl NewsParams {
    /// The engine query these parameters ask of `corpus` (the CLI's `asof query` runs the same).
    pub fn to_query(&self, corpus: &Corpus) -> Result<NewsQuery, Error> {
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
    pub fn to_query(&self, corpus: &Corpus) -> Result<NewsQuery, Error> {
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
/// both (over HTTP, MCP and in-process).
pub trait CutParams {
    /// The route's operation in its cursors.
    const OP: Op;
    fn query(&self, corpus: &Corpus) -> Result<NewsQuery, Error>;
    fn cursor(&self) -> Option<&str>;
}

impl CutParams for NewsParams {
    const OP: Op = Op::News;
    fn query(&self, corpus: &Corpus) -> Result<NewsQuery, Error> {
        self.to_query(corpus)
    }
    fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }
}

impl CutParams for DiffParams {
    const OP: Op = Op::Diff;
    fn query(&self, corpus: &Corpus) -> Result<NewsQuery, Error> {
        self.to_query(corpus)
    }
    fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }
}

/// The page `/v1/news` or `/v1/news/diff` answers.
pub async fn cut<P: CutParams>(corpus: &Corpus, pager: &Pager, p: &P) -> Result<NewsPage, Error> {
    let query = p.query(corpus)?;
    news_page(corpus, pager, P::OP, query, p.cursor(), Scope::Corpus).await
}

/// The filter set a news/diff cursor is bound to: `cut` (`<as_of>`, or `<start>..<as_of>` on a
/// diff), `visible_by`, `entity` (`all`, `cik:<cik>`, `ticker:<ticker>`), `lane`, `source`,
/// hashed as they are formatted. Never change a field's text: cursors in flight would be
/// refused.
fn news_filters(q: &NewsQuery) -> FilterDigest {
    let mut d = FilterDigest::new();
    match q.start {
        Some(s) => d.field("cut", format_args!("{s}..{}", q.as_of)),
        None => d.field("cut", q.as_of),
    };
    d.field("visible_by", q.visible_by);
    match &q.entity {
        Entity::All => d.field("entity", "all"),
        Entity::Cik(c) => d.field("entity", format_args!("cik:{c}")),
        Entity::Ticker(t) => d.field("entity", format_args!("ticker:{t}")),
    };
    d.field("lane", q.lane).field("source", q.source);
    d
}

/// One page of a news or diff walk (the routes' and the sample's): opens the cursor, asks the
/// engine once, mints the next cursor. A hole is the refusal it is on every front end.
pub async fn news_page(
    corpus: &Corpus,
    pager: &Pager,
    op: Op,
    q: NewsQuery,
    cursor: Option<&str>,
    scope: Scope<'_>,
) -> Result<NewsPage, Error> {
    let paging = pager.bind_digest(op, news_filters(&q), corpus.version());
    let q = NewsQuery {
        after: paging.open(cursor)?,
        ..q
    };
    match corpus.news_shared(&q, scope).await? {
        asof_engine::Answer::Hole { coverage } => {
            Err(Error::hole(coverage, Some(q.as_of), Some(q.visible_by)))
        }
        asof_engine::Answer::Page {
            rows,
            next,
            coverage,
        } => Ok(Answer::of(rows)
            .at(Some(q.as_of), Some(q.visible_by))
            .coverage(coverage)
            .next(paging.mint(next))),
    }
}

/// `source` for a news query: the given one, else `sec.edgar`. A ticker or CIK with another
/// source is answered, not refused: its rows carry no CIK, so the cut has none of them (the
/// engine answers `count: 0`, the source's coverage still applying).
fn news_source(source: Option<SourceId>, corpus: &Corpus) -> Result<SourceId, Error> {
    let held = corpus.held_sources();
    let source = held_source(source, &held)?.unwrap_or(SourceId::SecEdgar);
    if !held.contains(&source) {
        return Err(Error::invalid(
            "source",
            "this deployment holds no sec.edgar rows; name a source from /v1/meta",
        ));
    }
    Ok(source)
}

/// `/v1/news/{id}`: one record as knowable at `as_of` (`id` as the path gave it, decoded).
pub async fn record(
    corpus: &Corpus,
    id: &str,
    p: &RecordParams,
) -> Result<Answer<NewsRecord>, Error> {
    let (as_of, visible_by) = (p.as_of, p.visible_by);
    match corpus.record(id, as_of, visible_by).await? {
        RecordLookup::Visible(r) => {
            let mut cov = Coverage::default();
            if let Some(d) = r.partition_day() {
                cov.touch_day(r.source_id, d);
            }
            Ok(Answer::of(vec![NewsRecord::from_row(*r, false)])
                .at(Some(as_of), Some(visible_by))
                .coverage(cov))
        }
        RecordLookup::NotYetVisible => Err(Error::NotFound(format!(
            "record {id} exists but is not knowable yet at {as_of} by {visible_by}"
        ))),
        RecordLookup::NotFound => Err(Error::NotFound(format!("no record with id {id}"))),
    }
}

/// `/v1/coverage`: certificates, one per source-lane-day, paged.
pub fn coverage(
    corpus: &Corpus,
    pager: &Pager,
    p: &CoverageParams,
) -> Result<Answer<CertificateRecord>, Error> {
    let held = corpus.held_sources();
    let source = held_source(p.source, &held)?;
    let lane = p.lane;
    let paging = pager.bind(
        Op::Coverage,
        &[
            ("source", source.map(|s| s.to_string()).unwrap_or_default()),
            ("date", p.date.map(|d| d.to_string()).unwrap_or_default()),
            ("lane", lane.to_string()),
            ("as_of", p.as_of.map(|d| d.to_string()).unwrap_or_default()),
        ],
        corpus.version(),
    );
    let (certs, next) = corpus.coverage(&CoverageQuery {
        source,
        date: p.date,
        lane,
        as_of: p.as_of,
        after: paging.open(p.cursor.as_deref())?,
        limit: p.limit.0,
    })?;
    let mut cov = Coverage::default();
    for c in &certs {
        if c.row_count.is_some() {
            cov.touch(c.key.clone());
        } else {
            cov.miss(c.key.clone());
        }
    }
    Ok(Answer::of(certs)
        .at(p.as_of, None)
        .coverage(cov)
        .next(paging.mint(next)))
}

/// `/v1/mapping/ticker/{ticker}`, for the path's `ticker` as sent.
pub fn mapping_ticker(
    corpus: &Corpus,
    ticker: &str,
    p: &MappingParams,
) -> Result<Answer<MappingRecord>, Error> {
    let ticker = params::ticker(ticker, "ticker")?;
    mapping(corpus, &ticker, p.as_of)
}

/// The intervals placing `ticker` at `as_of` (also the sample's mapping answer); a ticker no
/// interval places is a hole.
pub fn mapping(
    corpus: &Corpus,
    ticker: &str,
    as_of: Instant,
) -> Result<Answer<MappingRecord>, Error> {
    match corpus.mapping_ticker(ticker, as_of) {
        Ok(m) => {
            let mut cov = Coverage::default();
            cov.touch(asof_engine::model::identity::ticker_hole_key(ticker, as_of));
            Ok(Answer::of(m).at(Some(as_of), None).coverage(cov))
        }
        Err(key) => {
            let mut coverage = Coverage::default();
            coverage.miss(key);
            Err(Error::hole(coverage, Some(as_of), None))
        }
    }
}

/// `/v1/mapping/cik/{cik}`, for the path's `cik` as sent.
pub fn mapping_cik(
    corpus: &Corpus,
    cik: &str,
    p: &MappingParams,
) -> Result<Answer<MappingRecord>, Error> {
    let cik = params::cik(cik, "cik")?;
    if !corpus.identity().knows_cik(&cik) {
        return Err(Error::NotFound(format!(
            "no identity evidence for CIK {cik}"
        )));
    }
    let m = corpus.mapping_cik(&cik, p.as_of);
    Ok(Answer::of(m).at(Some(p.as_of), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest news and diff cursors carried when each filter was made a string first:
    /// the fields' texts must never change, or cursors in flight are refused.
    fn as_strings(q: &NewsQuery) -> String {
        let cut = match q.start {
            Some(s) => format!("{s}..{}", q.as_of),
            None => q.as_of.to_string(),
        };
        let entity = match &q.entity {
            Entity::All => "all".to_owned(),
            Entity::Cik(c) => format!("cik:{c}"),
            Entity::Ticker(t) => format!("ticker:{t}"),
        };
        asof_cursor::filter_digest(&[
            ("cut", cut),
            ("visible_by", q.visible_by.to_string()),
            ("entity", entity),
            ("lane", q.lane.to_string()),
            ("source", q.source.to_string()),
        ])
    }

    #[test]
    fn the_news_filter_digest_is_that_of_the_filters_texts() {
        let at = |s: &str| Instant::parse(s).unwrap();
        let base = NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: at("2026-02-06T00:00:00Z"),
            entity: Entity::Cik("320193".into()),
            after: None,
            limit: 100,
        };
        let queries = [
            base.clone(),
            NewsQuery {
                start: Some(at("2026-01-01T12:30:00.123456Z")),
                visible_by: VisibleBy::AvailableAt,
                entity: Entity::Ticker("BRK.B".into()),
                ..base.clone()
            },
            NewsQuery {
                entity: Entity::All,
                lane: Lane::ForwardFirstSeen,
                source: SourceId::OfacSdn,
                visible_by: VisibleBy::CommittedAt,
                ..base.clone()
            },
        ];
        for q in &queries {
            assert_eq!(news_filters(q).finish(), as_strings(q), "{q:?}");
        }
    }
}
