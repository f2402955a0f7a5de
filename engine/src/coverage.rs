//! Coverage: which source-days a cut depends on, which of those are certified, and the keys
//! (`touched`, `missing`) every answer reports.
//!
//! Rules (documented in ARCHITECTURE.md):
//! - A cut at `as_of` depends on every day of the certified span from its first day through
//!   `as_of`'s UTC day; a diff `(start, end]` on the days from `start`'s to `end`'s. Days before
//!   the span's first day are outside what the corpus claims (the frontier key says where it
//!   starts); a cut ending before that first day is itself a hole.
//! - A needed day is missing when it is a hole inside the span or lies after its last day;
//!   under `visible_by=committed_at` also when it was certified only after `as_of`.
//! - Under `visible_by=available_at`, a needed day whose rows lack that clock is missing as
//!   `availability.<source>/<day>`.
//! - `missing` lists at most [`MAX_MISSING_KEYS`] keys, earliest first; `missing_total` says how
//!   many there were, so a far-future cut stays small.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::clock::{Day, Instant, Lane, SourceId, VisibleBy};
use crate::manifest::{Manifest, SampleSet};

pub const MAX_MISSING_KEYS: usize = 32;

/// The coverage object of an answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub touched: Vec<String>,
    pub missing: Vec<String>,
    /// How many keys `missing` would hold unbounded (≥ `missing.len()`).
    pub missing_total: usize,
}

impl Coverage {
    pub fn is_complete(&self) -> bool {
        self.missing_total == 0
    }
    pub fn touch(&mut self, key: String) {
        if !self.touched.contains(&key) {
            self.touched.push(key);
        }
    }
    fn miss(&mut self, key: String) {
        self.missing_total += 1;
        if self.missing.len() < MAX_MISSING_KEYS {
            self.missing.push(key);
        }
    }
}

pub fn day_key(source: SourceId, day: Day) -> String {
    format!("{source}/{day}")
}

/// What the certified days of one source-lane are, as seen by one kind of answer.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The whole corpus: certifications of the manifest.
    Corpus,
    /// The public sample: only the sample set's days count as read.
    Sample(&'a SampleSet),
}

/// The certification status of one day for one source-lane, as of a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DayStatus {
    Certified,
    /// Certified in this version, but only after the `committed_at` cut.
    CertifiedLater,
    Missing,
}

/// Coverage view of one source-lane.
#[derive(Debug)]
pub struct SourceCoverage<'a> {
    manifest: &'a Manifest,
    source: SourceId,
    lane: Lane,
    scope: Scope<'a>,
    first: Option<Day>,
    last: Option<Day>,
    frontier: Option<String>,
}

impl<'a> SourceCoverage<'a> {
    pub fn new(manifest: &'a Manifest, source: SourceId, lane: Lane, scope: Scope<'a>) -> Self {
        let (first, last, frontier) = match scope {
            Scope::Corpus => match manifest.span(source, lane) {
                Some(s) => (Some(s.first), Some(s.last), Some(s.frontier_key())),
                None => (None, None, None),
            },
            Scope::Sample(set) => {
                let first = set.days.iter().min().copied();
                let last = set.days.iter().max().copied();
                let frontier = first.zip(last).map(|(f, l)| {
                    let holes = (l.days() - f.days() + 1) as usize
                        - set.days.iter().collect::<BTreeSet<_>>().len();
                    format!("{source}/frontier:{f}..{l};holes={holes}")
                });
                (first, last, frontier)
            }
        };
        SourceCoverage {
            manifest,
            source,
            lane,
            scope,
            first,
            last,
            frontier,
        }
    }

    pub fn frontier_key(&self) -> Option<&str> {
        self.frontier.as_deref()
    }
    pub fn first(&self) -> Option<Day> {
        self.first
    }
    pub fn last(&self) -> Option<Day> {
        self.last
    }

    /// Status of `day` as seen by a cut at `as_of` on `visible_by`.
    pub fn status(&self, day: Day, visible_by: VisibleBy, as_of: Instant) -> DayStatus {
        match self.scope {
            Scope::Sample(set) => {
                if set.days.contains(&day) {
                    DayStatus::Certified
                } else {
                    DayStatus::Missing
                }
            }
            Scope::Corpus => {
                let mut best = DayStatus::Missing;
                for c in &self.manifest.certifications {
                    if c.source_id == self.source
                        && c.lane == self.lane
                        && c.from <= day
                        && day <= c.to
                    {
                        if visible_by != VisibleBy::CommittedAt || c.certified_at <= as_of {
                            return DayStatus::Certified;
                        }
                        best = DayStatus::CertifiedLater;
                    }
                }
                best
            }
        }
    }

    /// Whether rows of `day` all carry `available_at` (a day without rows trivially does).
    fn has_availability(&self, day: Day) -> bool {
        self.manifest
            .partitions
            .iter()
            .find(|p| p.source_id == self.source && p.lane == self.lane && p.date == day)
            .is_none_or(|p| p.clocks.get("available_at").is_some_and(|s| s.nulls == 0))
    }

    /// Coverage of the days `[from, to]` needed by a cut at `as_of`.
    pub fn needed(&self, from: Day, to: Day, visible_by: VisibleBy, as_of: Instant) -> Coverage {
        let mut cov = Coverage::default();
        let Some(first) = self.first else {
            // Nothing of this source-lane was ever certified: the cut's own day is a hole.
            cov.miss(day_key(self.source, to));
            return cov;
        };
        if let Some(f) = &self.frontier {
            cov.touch(f.clone());
        }
        if to < first {
            cov.miss(day_key(self.source, to));
            return cov;
        }
        let mut day = from.max(first);
        while day <= to {
            if self.status(day, visible_by, as_of) != DayStatus::Certified {
                cov.miss(day_key(self.source, day));
                // Past the last certified day everything is missing: count without walking.
                if let Some(last) = self.last
                    && day > last
                    && cov.missing.len() >= MAX_MISSING_KEYS
                {
                    cov.missing_total += (to.days() - day.days()) as usize;
                    break;
                }
            } else if visible_by == VisibleBy::AvailableAt && !self.has_availability(day) {
                cov.miss(format!("availability.{}/{day}", self.source));
            }
            day = day.next();
        }
        if self.status(to, visible_by, as_of) == DayStatus::Certified {
            cov.touch(day_key(self.source, to));
        }
        cov
    }

    /// Coverage of a point cut at `as_of`.
    pub fn cut(&self, visible_by: VisibleBy, as_of: Instant) -> Coverage {
        self.needed(
            self.first.unwrap_or(as_of.day()),
            as_of.day(),
            visible_by,
            as_of,
        )
    }

    /// Coverage of a diff `(start, end]`.
    pub fn window(&self, visible_by: VisibleBy, start: Instant, end: Instant) -> Coverage {
        self.needed(start.day(), end.day(), visible_by, end)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::manifest::{Certification, FORMAT, derive_spans};

    fn day(s: &str) -> Day {
        s.parse().unwrap()
    }
    fn t(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    fn manifest(ranges: &[(&str, &str, &str)]) -> Manifest {
        let certifications: Vec<Certification> = ranges
            .iter()
            .map(|(f, to, at)| Certification {
                source_id: SourceId::SecEdgar,
                lane: Lane::CertifiedPit,
                from: day(f),
                to: day(to),
                certified_at: t(at),
                evidence: vec![],
            })
            .collect();
        Manifest {
            format: FORMAT.into(),
            created_at: t("2026-03-01T00:00:00Z"),
            parent: None,
            partitions: vec![],
            spans: derive_spans(&certifications),
            certifications,
            identity: vec![],
            access: vec![],
            notes: BTreeMap::new(),
            sample: None,
        }
    }

    #[test]
    fn a_cut_inside_a_fully_certified_span_misses_nothing() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-02-01T00:00:00Z")]);
        let c = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
            .cut(VisibleBy::PublishedAt, t("2026-01-15T12:00:00Z"));
        assert!(c.is_complete());
        assert_eq!(
            c.touched,
            vec![
                "sec.edgar/frontier:2026-01-01..2026-01-31;holes=0",
                "sec.edgar/2026-01-15"
            ]
        );
    }

    #[test]
    fn a_cut_over_a_hole_inside_the_span_is_missing_that_day() {
        let m = manifest(&[
            ("2026-01-01", "2026-01-09", "2026-02-01T00:00:00Z"),
            ("2026-01-11", "2026-01-31", "2026-02-01T00:00:00Z"),
        ]);
        let c = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
            .cut(VisibleBy::PublishedAt, t("2026-01-15T12:00:00Z"));
        assert_eq!(c.missing, vec!["sec.edgar/2026-01-10"]);
        assert!(c.touched[0].ends_with(";holes=1"));
    }

    #[test]
    fn days_after_the_last_certified_day_are_holes_and_the_list_stays_bounded() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-02-01T00:00:00Z")]);
        let c = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
            .cut(VisibleBy::PublishedAt, t("2126-01-01T00:00:00Z"));
        assert_eq!(c.missing.len(), MAX_MISSING_KEYS);
        assert_eq!(c.missing[0], "sec.edgar/2026-02-01");
        let expected = (day("2126-01-01").days() - day("2026-02-01").days() + 1) as usize;
        assert_eq!(c.missing_total, expected);
    }

    #[test]
    fn a_cut_before_the_span_is_a_hole_on_its_own_day() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-02-01T00:00:00Z")]);
        let c = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
            .cut(VisibleBy::PublishedAt, t("2025-06-01T00:00:00Z"));
        assert_eq!(c.missing, vec!["sec.edgar/2025-06-01"]);
    }

    #[test]
    fn committed_at_cut_before_certification_treats_the_day_as_missing() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-01-15T00:00:00Z")]);
        let cov = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus);
        assert!(
            !cov.cut(VisibleBy::CommittedAt, t("2026-01-10T00:00:00Z"))
                .is_complete()
        );
        assert!(
            cov.cut(VisibleBy::PublishedAt, t("2026-01-10T00:00:00Z"))
                .is_complete()
        );
        assert!(
            cov.cut(VisibleBy::CommittedAt, t("2026-01-20T00:00:00Z"))
                .is_complete()
        );
    }

    #[test]
    fn a_lane_never_certified_is_a_hole_not_an_empty_answer() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-02-01T00:00:00Z")]);
        let c = SourceCoverage::new(
            &m,
            SourceId::SecEdgar,
            Lane::ForwardFirstSeen,
            Scope::Corpus,
        )
        .cut(VisibleBy::PublishedAt, t("2026-01-20T00:00:00Z"));
        assert_eq!(c.missing, vec!["sec.edgar/2026-01-20"]);
    }

    #[test]
    fn diff_window_needs_only_the_days_from_start_to_end() {
        let m = manifest(&[
            ("2026-01-01", "2026-01-04", "2026-02-01T00:00:00Z"),
            ("2026-01-06", "2026-01-31", "2026-02-01T00:00:00Z"),
        ]);
        let cov = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus);
        assert!(
            cov.window(
                VisibleBy::PublishedAt,
                t("2026-01-07T00:00:00Z"),
                t("2026-01-09T00:00:00Z")
            )
            .is_complete()
        );
        assert_eq!(
            cov.window(
                VisibleBy::PublishedAt,
                t("2026-01-04T00:00:00Z"),
                t("2026-01-09T00:00:00Z")
            )
            .missing,
            vec!["sec.edgar/2026-01-05"]
        );
    }
}
