//! Coverage certificates: one per source-lane-day, certified (with its row count, possibly
//! zero) or missing (a hole, never a count), paged by `(source, lane, date)`.

use serde::Serialize;

use super::Corpus;
use crate::clock::{Day, Instant, Lane, SourceId, VisibleBy};
use crate::coverage::{DayStatus, Scope, day_key};
use crate::error::Result;

/// A coverage certificate: one per source-lane-day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Certificate {
    pub key: String,
    pub source_id: SourceId,
    pub lane: Lane,
    pub date: Day,
    /// `certified`, or `missing` (never certified, or certified only after the cut).
    pub status: &'static str,
    /// Rows of a certified day (0 for a complete empty day); null when missing.
    pub row_count: Option<u64>,
    /// Rows the corpus holds for a day it does not certify (partial, never a count).
    pub rows_held: u64,
    pub certified_at: Option<Instant>,
    pub partition: Option<PartitionRef>,
    pub evidence: Vec<crate::manifest::Evidence>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PartitionRef {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// Coverage listing request.
#[derive(Debug, Clone)]
pub struct CoverageQuery {
    pub source: Option<SourceId>,
    pub date: Option<Day>,
    /// The one lane answered (lanes are never mixed in one answer: a certificate's key names
    /// a source-day, whatever its lane).
    pub lane: Lane,
    pub as_of: Option<Instant>,
    /// Position: the last certificate of the previous page.
    pub after: Option<(SourceId, Lane, Day)>,
    pub limit: usize,
}

/// Where the next page of coverage certificates starts.
pub type CoveragePosition = (SourceId, Lane, Day);

impl Corpus {
    /// Coverage certificates, paged by `(source, lane, date)`.
    pub fn coverage(
        &self,
        q: &CoverageQuery,
    ) -> Result<(Vec<Certificate>, Option<CoveragePosition>)> {
        let mut keys: Vec<(SourceId, Lane, Day)> = Vec::new();
        let sources: Vec<SourceId> = match q.source {
            Some(s) => vec![s],
            None => self.manifest.held_sources(),
        };
        let as_of_day = q.as_of.map(Instant::day);
        let lane = q.lane;
        for &source in &sources {
            if let Some(date) = q.date {
                keys.push((source, lane, date));
                continue;
            }
            if let Some(span) = self.manifest.span(source, lane) {
                let mut d = span.first;
                let last = as_of_day.map_or(span.last, |a| a.min(span.last));
                while d <= last {
                    keys.push((source, lane, d));
                    d = d.next();
                }
            }
        }
        keys.sort();
        let start = match q.after {
            Some(pos) => keys.partition_point(|k| *k <= pos),
            None => 0,
        };
        let page: Vec<_> = keys[start..].iter().take(q.limit + 1).copied().collect();
        let more = page.len() > q.limit;
        let certs: Vec<Certificate> = page
            .iter()
            .take(q.limit)
            .map(|&(s, l, d)| self.certificate(s, l, d, q.as_of))
            .collect();
        let next = if more {
            page.get(q.limit - 1).copied()
        } else {
            None
        };
        Ok((certs, next))
    }

    /// The certificate of one source-lane-day, as known at `as_of` (latest when `None`).
    pub fn certificate(
        &self,
        source: SourceId,
        lane: Lane,
        date: Day,
        as_of: Option<Instant>,
    ) -> Certificate {
        let view = self.source_coverage(source, lane, Scope::Corpus);
        // Coverage listings are cuts on what the corpus had committed: a certification made
        // after `as_of` is not yet in force.
        let status = view.status(
            date,
            VisibleBy::CommittedAt,
            as_of.unwrap_or(Instant::from_micros(i64::MAX)),
        );
        let part = self
            .manifest
            .partitions
            .iter()
            .find(|p| p.source_id == source && p.lane == lane && p.date == date);
        let cert = self
            .manifest
            .certifications
            .iter()
            .filter(|c| c.source_id == source && c.lane == lane && c.from <= date && date <= c.to)
            .min_by_key(|c| c.certified_at);
        let certified = status == DayStatus::Certified;
        Certificate {
            key: day_key(source, date),
            source_id: source,
            lane,
            date,
            status: if certified { "certified" } else { "missing" },
            row_count: certified.then(|| part.map_or(0, |p| p.row_count)),
            rows_held: part.map_or(0, |p| p.row_count),
            certified_at: cert.filter(|_| certified).map(|c| c.certified_at),
            partition: part.map(|p| PartitionRef {
                path: p.path.clone(),
                sha256: p.sha256.clone(),
                bytes: p.bytes,
            }),
            evidence: cert
                .filter(|_| certified)
                .map(|c| c.evidence.clone())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{cert, corpus, edgar};

    #[tokio::test]
    async fn coverage_certificates_give_zero_for_empty_certified_days_and_null_for_holes() {
        let rows = vec![edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-05T09:00:00Z"),
            "2026-01-06T00:00:00Z",
        )];
        let (_d, _s, c) = corpus(
            rows,
            vec![
                cert(
                    Lane::CertifiedPit,
                    "2026-01-04",
                    "2026-01-05",
                    "2026-01-06T00:00:00Z",
                ),
                cert(
                    Lane::CertifiedPit,
                    "2026-01-07",
                    "2026-01-07",
                    "2026-01-08T00:00:00Z",
                ),
            ],
        )
        .await;
        let (certs, next) = c
            .coverage(&CoverageQuery {
                source: Some(SourceId::SecEdgar),
                date: None,
                lane: Lane::CertifiedPit,
                as_of: None,
                after: None,
                limit: 10,
            })
            .unwrap();
        let got: Vec<(String, Option<u64>)> = certs
            .iter()
            .map(|c| (c.date.to_string(), c.row_count))
            .collect();
        assert_eq!(
            got,
            vec![
                ("2026-01-04".into(), Some(0)),
                ("2026-01-05".into(), Some(1)),
                ("2026-01-06".into(), None),
                ("2026-01-07".into(), Some(0))
            ]
        );
        assert!(next.is_none());
        let (page, next) = c
            .coverage(&CoverageQuery {
                source: Some(SourceId::SecEdgar),
                date: None,
                lane: Lane::CertifiedPit,
                as_of: None,
                after: None,
                limit: 2,
            })
            .unwrap();
        assert_eq!(page.len(), 2);
        let (rest, _) = c
            .coverage(&CoverageQuery {
                source: Some(SourceId::SecEdgar),
                date: None,
                lane: Lane::CertifiedPit,
                as_of: None,
                after: next,
                limit: 10,
            })
            .unwrap();
        assert_eq!(
            rest.iter().map(|c| c.date.to_string()).collect::<Vec<_>>(),
            vec!["2026-01-06", "2026-01-07"]
        );
        let (one, _) = c
            .coverage(&CoverageQuery {
                source: Some(SourceId::SecEdgar),
                date: Some("2025-06-01".parse().unwrap()),
                lane: Lane::CertifiedPit,
                as_of: None,
                after: None,
                limit: 10,
            })
            .unwrap();
        assert_eq!(
            (one[0].status, one[0].row_count),
            ("missing", None),
            "an uningested day is a missing certificate"
        );
    }
}
