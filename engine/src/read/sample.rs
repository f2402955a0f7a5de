//! Coverage of the public sample: one certificate per day of the sample's span, counting one
//! example company's rows; a count that would need a cut the sample cannot answer is a hole,
//! never a made-up zero.

use crate::error::Result;
use crate::model::clock::{Day, Instant, Lane, SourceId, VisibleBy};
use crate::model::coverage::{Coverage, Scope, day_key};
use crate::model::manifest::{SampleExample, SampleSet};
use crate::read::corpus::{Answer, Corpus, Entity, NewsQuery};

/// A page of sample certificates.
#[derive(Debug, Clone, Copy)]
pub struct SampleCoverageQuery<'a> {
    pub set: &'a SampleSet,
    pub example: &'a SampleExample,
    /// Only this day (listed even when the sample has not read it).
    pub date: Option<Day>,
    /// Only days on or before this instant's day.
    pub as_of: Option<Instant>,
    /// Position: the last day of the previous page.
    pub after: Option<Day>,
    pub limit: usize,
}

/// One sample source-day and the example's rows on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleCertificate {
    /// `<source>/<day>`, as in `coverage.touched`.
    pub key: String,
    pub source_id: SourceId,
    pub lane: Lane,
    pub date: Day,
    pub example: String,
    /// Whether the sample has read this day; `row_count` is `None` when it has not.
    pub read: bool,
    pub row_count: Option<u64>,
}

/// The latest cut the sample can serve: the end of its last day.
pub fn sample_latest(set: &SampleSet) -> Instant {
    set.days
        .iter()
        .max()
        .map_or_else(Instant::now, |d| d.end_of_day())
}

impl Corpus {
    /// Certificates of the sample's days for one example company, oldest first, paged by day.
    /// `Answer::Page::next` is unused (`None`); the next page starts after the last
    /// certificate's day, returned beside the answer.
    pub async fn sample_coverage(
        &self,
        q: &SampleCoverageQuery<'_>,
    ) -> Result<(Answer<SampleCertificate>, Option<Day>)> {
        let set = q.set;
        // The example's rows on every sample day, counted per day (all pages: a count over a
        // truncated page would be wrong).
        let mut query = NewsQuery {
            source: set.source_id,
            lane: set.lane,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: sample_latest(set),
            entity: Entity::Cik(q.example.cik.clone()),
            after: None,
            limit: 1000,
        };
        let mut rows = Vec::new();
        loop {
            match self.news(&query, Scope::Sample(set)).await? {
                Answer::Page {
                    rows: page, next, ..
                } => {
                    rows.extend(page);
                    match next {
                        Some(p) => query.after = Some(p),
                        None => break,
                    }
                }
                Answer::Hole { coverage } => return Ok((Answer::Hole { coverage }, None)),
            }
        }

        let first = set.days.iter().min().copied();
        let last = set.days.iter().max().copied();
        let mut days: Vec<Day> = match (q.date, first, last) {
            (Some(d), _, _) => vec![d],
            (None, Some(f), Some(l)) => (f.days()..=l.days()).map(Day::from_days).collect(),
            _ => vec![],
        };
        if let Some(cut) = q.as_of {
            days.retain(|d| *d <= cut.day());
        }
        days.retain(|d| q.after.is_none_or(|a| *d > a));
        let more = days.len() > q.limit;
        days.truncate(q.limit);

        let mut coverage = Coverage::default();
        let certificates: Vec<SampleCertificate> = days
            .iter()
            .map(|&d| {
                let key = day_key(set.source_id, d);
                let read = set.days.contains(&d);
                if read {
                    coverage.touch(key.clone());
                } else {
                    coverage.miss(key.clone());
                }
                SampleCertificate {
                    key,
                    source_id: set.source_id,
                    lane: set.lane,
                    date: d,
                    example: q.example.id.clone(),
                    read,
                    row_count: read.then(|| {
                        rows.iter().filter(|r| r.partition_day() == Some(d)).count() as u64
                    }),
                }
            })
            .collect();
        let next = if more { days.last().copied() } else { None };
        Ok((
            Answer::Page {
                rows: certificates,
                next: None,
                coverage,
            },
            next,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::CorpusStore;

    async fn shipped() -> Corpus {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        Corpus::open(CorpusStore::local(&root).unwrap())
            .await
            .unwrap()
    }

    fn page(a: Answer<SampleCertificate>) -> (Vec<SampleCertificate>, Coverage) {
        match a {
            Answer::Page { rows, coverage, .. } => (rows, coverage),
            Answer::Hole { coverage } => panic!("hole: {coverage:?}"),
        }
    }

    #[tokio::test]
    async fn sample_certificates_count_the_example_on_read_days_and_null_elsewhere() {
        let c = shipped().await;
        let set = c
            .manifest()
            .sample
            .clone()
            .expect("the shipped corpus has a sample");
        let ex = &set.examples[0];
        let q = SampleCoverageQuery {
            set: &set,
            example: ex,
            date: None,
            as_of: None,
            after: None,
            limit: 1000,
        };
        let (answer, next) = c.sample_coverage(&q).await.unwrap();
        let (certs, coverage) = page(answer);
        assert_eq!(next, None);
        let (first, last) = (
            set.days.iter().min().unwrap(),
            set.days.iter().max().unwrap(),
        );
        assert_eq!(certs.first().unwrap().date, *first);
        assert_eq!(certs.last().unwrap().date, *last);
        for cert in &certs {
            assert_eq!(cert.read, set.days.contains(&cert.date));
            assert_eq!(cert.row_count.is_some(), cert.read, "{cert:?}");
        }
        assert_eq!(coverage.touched.len(), set.days.len());
        assert_eq!(coverage.missing_total, certs.len() - set.days.len());
        // The counts are the example's rows of the sample cut, day by day.
        let total: u64 = certs.iter().filter_map(|c| c.row_count).sum();
        let all = NewsQuery {
            source: set.source_id,
            lane: set.lane,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: sample_latest(&set),
            entity: Entity::Cik(ex.cik.clone()),
            after: None,
            limit: 1000,
        };
        let Answer::Page { rows, next, .. } = c.news(&all, Scope::Sample(&set)).await.unwrap()
        else {
            panic!("the sample cut is a hole")
        };
        assert!(next.is_none());
        assert_eq!(total, rows.len() as u64);
    }

    #[tokio::test]
    async fn sample_certificates_page_by_day_and_filter_by_date_and_cut() {
        let c = shipped().await;
        let set = c.manifest().sample.clone().unwrap();
        let ex = &set.examples[0];
        let base = SampleCoverageQuery {
            set: &set,
            example: ex,
            date: None,
            as_of: None,
            after: None,
            limit: 2,
        };
        let (a, next) = c.sample_coverage(&base).await.unwrap();
        let (one, _) = page(a);
        assert_eq!(one.len(), 2);
        assert_eq!(next, Some(one[1].date));
        let (b, _) = c
            .sample_coverage(&SampleCoverageQuery {
                after: next,
                ..base
            })
            .await
            .unwrap();
        let (two, _) = page(b);
        assert!(two.first().unwrap().date > one[1].date);

        let day = *set.days.iter().max().unwrap();
        let (d, next) = c
            .sample_coverage(&SampleCoverageQuery {
                date: Some(day),
                limit: 10,
                ..base
            })
            .await
            .unwrap();
        let (only, _) = page(d);
        assert_eq!((only.len(), only[0].date, next), (1, day, None));

        let first = *set.days.iter().min().unwrap();
        let (e, _) = c
            .sample_coverage(&SampleCoverageQuery {
                as_of: Some(first.end_of_day()),
                limit: 1000,
                ..base
            })
            .await
            .unwrap();
        let (upto, _) = page(e);
        assert!(upto.iter().all(|c| c.date <= first), "{upto:?}");
        assert_eq!(upto.len(), 1);
    }

    #[tokio::test]
    async fn a_sample_missing_a_day_its_cut_needs_is_a_hole_not_zero_counts() {
        let c = shipped().await;
        let mut set = c.manifest().sample.clone().unwrap();
        set.days.sort();
        assert!(set.days.len() >= 3, "{:?}", set.days);
        let gone = set.days.remove(1);
        let q = SampleCoverageQuery {
            set: &set,
            example: &set.examples[0],
            date: None,
            as_of: None,
            after: None,
            limit: 1000,
        };
        match c.sample_coverage(&q).await.unwrap() {
            (Answer::Hole { coverage }, None) => {
                assert!(
                    coverage.missing.contains(&day_key(set.source_id, gone)),
                    "{coverage:?}"
                );
            }
            (Answer::Page { rows, .. }, _) => panic!("a hole became a page: {rows:?}"),
            other => panic!("{other:?}"),
        }
    }
}
