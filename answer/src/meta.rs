//! The meta record (`results[0]` of `/v1/meta`): vocabularies, plans, limits and the corpus.

use asof_engine::model::coverage::{Scope, SourceCoverage, Stretch};
use asof_engine::model::manifest::Manifest;
use asof_engine::{AvailabilityBasis, Clock, Corpus, Day, Instant, Lane, SourceId, VisibleBy};
use serde::Serialize;

use crate::params::{DEFAULT_LIMIT, MAX_LIMIT, TICKER_MAX_LENGTH};

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MetaRecord {
    /// Every clock a row may carry.
    pub clocks: Vec<&'static str>,
    /// The clocks visibility may be evaluated on (`visible_by`), default first.
    pub visible_by: Vec<&'static str>,
    pub lanes: Vec<&'static str>,
    pub availability_basis: Vec<&'static str>,
    pub plans: Vec<PlanInfo>,
    pub limits: Limits,
    pub corpus: CorpusInfo,
    pub sample: Option<SampleInfo>,
    pub license: &'static str,
    /// Which published corpus versions answer a request pinned with `corpus_version` (this
    /// deployment's policy; null in-process, where every version of the store answers).
    pub retention: Option<RetentionInfo>,
}

/// A deployment's retention of past corpus versions (`asof serve --retain-versions`,
/// `--retain-days`): a version is answered while it is within every bound given.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionInfo {
    /// Only the newest this many versions, the served one included (null: no count bound).
    pub versions: Option<usize>,
    /// Only versions served within this many days: superseded at most this long ago (null:
    /// no age bound).
    pub days: Option<u32>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanInfo {
    pub plan_id: &'static str,
    pub requests_per_minute: u32,
    /// Live (neither revoked nor expired) keys a user of this plan may hold at once.
    pub max_live_keys: u32,
    /// The routes this plan may call with a credential (path patterns as in the
    /// description): its keyed routes and the account routes; public routes need no plan.
    pub routes: Vec<String>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Limits {
    pub limit_default: usize,
    pub limit_max: usize,
    pub ticker_max_length: usize,
    pub public_requests_per_minute_per_address: u32,
    pub coverage_missing_keys_listed: usize,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CorpusInfo {
    pub corpus_version: String,
    pub created_at: Instant,
    pub parent: Option<String>,
    pub sources: Vec<SourceInfo>,
    pub identity: IdentityInfo,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SourceInfo {
    pub source_id: SourceId,
    /// The newest day with a partition, any lane.
    pub last_partition_date: Option<Day>,
    /// Certified span of the default lane (`certified_pit`), when there is one.
    pub certified: Option<SpanInfo>,
    pub lanes: Vec<LaneInfo>,
    pub note: Option<String>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LaneInfo {
    pub lane: Lane,
    pub partitions: usize,
    pub rows: u64,
    pub first_partition_date: Option<Day>,
    pub last_partition_date: Option<Day>,
    pub certified: Option<SpanInfo>,
    /// Where a cut on this lane answers without a coverage hole, per clock.
    pub answerable: Answerable,
}

/// The instants at which a cut answers without a coverage hole, per `visible_by` clock: for
/// each, ordered, disjoint stretches whose ends are both included (`to` of a whole day is its
/// `23:59:59.999999Z`). A cut needs every day from the certified span's first through its
/// own, so a stretch ends at the first hole (and, on `available_at`, at the first day whose
/// rows lack that clock); on `committed_at` a day answers only from the instant every day it
/// needs was certified. An `as_of` outside every stretch is answered `409 coverage_missing`.
/// A ticker can still be a hole inside a stretch: no identity interval places it at the cut.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Answerable {
    pub published_at: Vec<Stretch>,
    pub available_at: Vec<Stretch>,
    pub committed_at: Vec<Stretch>,
}

impl Answerable {
    fn of(view: &SourceCoverage<'_>) -> Self {
        Answerable {
            published_at: view.answerable(VisibleBy::PublishedAt),
            available_at: view.answerable(VisibleBy::AvailableAt),
            committed_at: view.answerable(VisibleBy::CommittedAt),
        }
    }
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpanInfo {
    pub first: Day,
    pub last: Day,
    pub holes: u64,
    pub frontier_key: String,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IdentityInfo {
    pub ticker_intervals: usize,
    pub evidence_files: usize,
    pub max_carry_days: i64,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SampleInfo {
    pub source_id: SourceId,
    pub lane: Lane,
    pub first_day: Option<Day>,
    pub last_day: Option<Day>,
    pub examples: Vec<asof_engine::model::manifest::SampleExample>,
    /// Where a sample cut answers without a coverage hole, per clock (as on a lane).
    pub answerable: Answerable,
}

fn span(m: &Manifest, s: SourceId, l: Lane) -> Option<SpanInfo> {
    m.span(s, l).map(|sp| SpanInfo {
        first: sp.first,
        last: sp.last,
        holes: sp.hole_days() as u64,
        frontier_key: sp.frontier_key(),
    })
}

/// The meta record of `corpus`, with the plans a deployment sells (the server derives them
/// from its route table; in-process, none apply) and its public allowance per client address.
pub fn meta_record(
    corpus: &Corpus,
    plans: Vec<PlanInfo>,
    public_requests_per_minute: u32,
    retention: Option<crate::versions::Retention>,
) -> MetaRecord {
    let m = corpus.manifest();
    let sources = m
        .held_sources()
        .into_iter()
        .map(|s| {
            let lanes: Vec<LaneInfo> = Lane::ALL
                .iter()
                .filter_map(|&l| {
                    let parts: Vec<_> = m
                        .partitions
                        .iter()
                        .filter(|p| p.source_id == s && p.lane == l)
                        .collect();
                    let certified = span(m, s, l);
                    if parts.is_empty() && certified.is_none() {
                        return None;
                    }
                    Some(LaneInfo {
                        lane: l,
                        partitions: parts.len(),
                        rows: parts.iter().map(|p| p.row_count).sum(),
                        first_partition_date: parts.iter().map(|p| p.date).min(),
                        last_partition_date: parts.iter().map(|p| p.date).max(),
                        certified,
                        answerable: Answerable::of(&corpus.source_coverage(s, l, Scope::Corpus)),
                    })
                })
                .collect();
            SourceInfo {
                source_id: s,
                last_partition_date: m
                    .partitions
                    .iter()
                    .filter(|p| p.source_id == s)
                    .map(|p| p.date)
                    .max(),
                certified: span(m, s, Lane::CertifiedPit),
                lanes,
                note: m.notes.get(s.as_str()).cloned(),
            }
        })
        .collect();
    MetaRecord {
        clocks: Clock::ALL.iter().map(|c| c.as_str()).collect(),
        visible_by: VisibleBy::ALL.iter().map(|v| v.as_str()).collect(),
        lanes: Lane::ALL.iter().map(|l| l.as_str()).collect(),
        availability_basis: AvailabilityBasis::ALL.iter().map(|b| b.as_str()).collect(),
        plans,
        retention: retention.map(|r| RetentionInfo {
            versions: r.versions,
            days: r.days,
        }),
        limits: Limits {
            limit_default: DEFAULT_LIMIT,
            limit_max: MAX_LIMIT,
            ticker_max_length: TICKER_MAX_LENGTH,
            public_requests_per_minute_per_address: public_requests_per_minute,
            coverage_missing_keys_listed: asof_engine::model::coverage::MAX_MISSING_KEYS,
        },
        corpus: CorpusInfo {
            corpus_version: corpus.version().to_owned(),
            created_at: m.created_at,
            parent: m.parent.clone(),
            sources,
            identity: IdentityInfo {
                ticker_intervals: corpus.identity().file().tickers.len(),
                evidence_files: corpus.identity().file().evidence.len(),
                max_carry_days: asof_engine::model::identity::MAX_CARRY_DAYS,
            },
        },
        sample: m.sample.as_ref().map(|s| SampleInfo {
            source_id: s.source_id,
            lane: s.lane,
            first_day: s.days.iter().min().copied(),
            last_day: s.days.iter().max().copied(),
            examples: s.examples.clone(),
            answerable: Answerable::of(&corpus.source_coverage(
                s.source_id,
                s.lane,
                Scope::Sample(s),
            )),
        }),
        license: "Self-serve use is internal use only; commercial redistribution needs a separate license.",
    }
}
