//! Coverage certificates: one per source-lane-day, certified (with its row count, possibly
//! zero) or missing (a hole, never a count), paged by `(source, lane, date)`.

use super::Corpus;
use crate::error::Result;
use crate::model::clock::{Day, Instant, Lane, SourceId};
pub use crate::model::coverage::{Certificate, CoveragePosition, PartitionRef};
use crate::model::coverage::{certificate_keys, certificate_of};

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

impl Corpus {
    /// Coverage certificates, paged by `(source, lane, date)`.
    pub fn coverage(
        &self,
        q: &CoverageQuery,
    ) -> Result<(Vec<Certificate>, Option<CoveragePosition>)> {
        let keys = certificate_keys(
            &self.manifest,
            &self.held_sources,
            q.source,
            q.lane,
            q.date,
            q.as_of,
        );
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
        let part = self
            .manifest
            .partitions
            .iter()
            .find(|p| p.source_id == source && p.lane == lane && p.date == date);
        certificate_of(
            &self.manifest,
            self.day_tables.get(&(source, lane)),
            (source, lane, date),
            part,
            as_of,
        )
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
