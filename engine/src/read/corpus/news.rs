//! As-of cuts and became-knowable windows (diff), in keyset pages: through the access index
//! for by-CIK and by-ticker pages, else a DataFusion scan; both apply the one as-of rule
//! ([`crate::model::cut::Cut`]).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use datafusion::logical_expr::{col, lit};

use super::Corpus;
use super::walk::Walk;
use crate::error::Result;
use crate::format::access::Bounds;
use crate::model::clock::{Instant, Lane, SourceId, VisibleBy};
use crate::model::coverage::{Coverage, Scope, SourceCoverage};
use crate::model::cut::Cut;
use crate::model::identity::IdentityIndex;
use crate::model::identity::ticker_hole_key;
pub use crate::model::record::Position;
use crate::model::record::{NewsRow, SharedRow};
use crate::read::access::AccessIndex;

/// Which entities a news query asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity {
    /// All rows of the selected source.
    All,
    /// One CIK (normalised: no leading zeros).
    Cik(String),
    /// A ticker, resolved to CIKs through identity-as-of at the cut.
    Ticker(String),
}

/// An as-of cut (news) or a became-knowable window (diff, when `start` is set).
#[derive(Debug, Clone)]
pub struct NewsQuery {
    pub source: SourceId,
    pub lane: Lane,
    pub visible_by: VisibleBy,
    /// Exclusive start of a diff window; `None` for a plain cut.
    pub start: Option<Instant>,
    /// The cut (inclusive end of a diff window).
    pub as_of: Instant,
    pub entity: Entity,
    pub after: Option<Position>,
    pub limit: usize,
}

impl NewsQuery {
    /// The query as it is answered: a window `(start, as_of]` that runs backwards holds
    /// nothing, like an empty one, and is answered as `(as_of, as_of]` (the description cannot
    /// relate two parameters, so it is answered rather than refused).
    pub fn clamped(&self) -> std::borrow::Cow<'_, NewsQuery> {
        match self.start {
            Some(start) if start > self.as_of => std::borrow::Cow::Owned(NewsQuery {
                start: Some(self.as_of),
                ..self.clone()
            }),
            _ => std::borrow::Cow::Borrowed(self),
        }
    }

    /// What the query needs before any row is read, the one decision of a hole for every
    /// reading of a cut (pages, and the SQL other engines run, `crate::rule`): the coverage of
    /// its cut or window in `view`, with the identity hole of a ticker no interval of
    /// `identity` places at `as_of` first, and the CIKs its entity names (`None`: every row).
    pub fn needs(
        &self,
        view: &SourceCoverage<'_>,
        identity: &IdentityIndex,
    ) -> (Coverage, Option<Vec<String>>) {
        let mut coverage = match self.start {
            Some(start) => view.window(self.visible_by, start, self.as_of),
            None => view.cut(self.visible_by, self.as_of),
        };
        let ciks = match &self.entity {
            Entity::All => None,
            Entity::Cik(c) => Some(vec![c.clone()]),
            Entity::Ticker(t) => {
                let found = identity.ticker_at(t, self.as_of);
                let key = ticker_hole_key(t, self.as_of);
                if found.is_empty() {
                    coverage.miss_first(key);
                } else {
                    coverage.touch(key);
                }
                let mut ciks: Vec<String> = found.into_iter().map(|m| m.cik).collect();
                ciks.dedup();
                Some(ciks)
            }
        };
        (coverage, ciks)
    }

    /// The rows of the entity filter, given the CIKs [`Self::needs`] found: `None` for every
    /// row; no row for a filer filter on a source whose rows name no filer, or for a ticker
    /// no interval places (the pages answer those without reading).
    pub fn filer_filter(&self, ciks: Option<&[String]>) -> Option<datafusion::prelude::Expr> {
        let ciks = ciks?;
        if ciks.is_empty() || !self.source.names_filers() {
            return Some(lit(false));
        }
        Some(col("cik").in_list(ciks.iter().map(|c| lit(c.clone())).collect(), false))
    }

    /// The cut of the query: its instant (and window), clock and lane.
    pub fn cut(&self) -> Cut {
        Cut {
            start: self.start,
            lane: Some(self.lane),
            ..Cut::at(self.as_of, self.visible_by)
        }
    }
}

/// One page of an answer, or a coverage hole.
#[derive(Debug, Clone)]
pub enum Answer<T> {
    Page {
        rows: Vec<T>,
        next: Option<Position>,
        coverage: Coverage,
    },
    Hole {
        coverage: Coverage,
    },
}

impl<T> Answer<T> {
    /// The same answer with each row turned into another form.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Answer<U> {
        match self {
            Answer::Page {
                rows,
                next,
                coverage,
            } => Answer::Page {
                rows: rows.into_iter().map(f).collect(),
                next,
                coverage,
            },
            Answer::Hole { coverage } => Answer::Hole { coverage },
        }
    }
}

impl Corpus {
    /// The paged as-of query (a diff when `q.start` is set).
    pub async fn news(&self, q: &NewsQuery, scope: Scope<'_>) -> Result<Answer<NewsRow>> {
        Ok(self.news_shared(q, scope).await?.map(SharedRow::into_row))
    }

    /// [`Self::news`] with rows shared with the access path's row cache rather than copied
    /// out of it: for a caller that only reads them (the HTTP route encodes them as JSON).
    pub async fn news_shared(&self, q: &NewsQuery, scope: Scope<'_>) -> Result<Answer<SharedRow>> {
        let q = q.clamped();
        let q = q.as_ref();
        let (mut coverage, ciks) = q.needs(
            &self.source_coverage(q.source, q.lane, scope),
            &self.identity,
        );
        if !coverage.is_complete() {
            return Ok(Answer::Hole { coverage });
        }
        // A filer filter on a source whose rows carry no CIK matches nothing: a complete cut
        // with no rows, without walking the source to find none.
        if ciks.is_some() && !q.source.names_filers() {
            return Ok(Answer::Page {
                rows: Vec::new(),
                next: None,
                coverage,
            });
        }
        let mut rows = match (self.access(), &ciks, scope) {
            (Some(a), Some(ciks), Scope::Corpus) if a.covers(q.source, q.lane) => {
                self.fetch_indexed(a, q, ciks).await?
            }
            #[cfg(any(test, feature = "oracle"))]
            // Boxed too: the reference scan is compiled into every binary that has the
            // oracle (the CLI does, through `ingest`), and in place its future was most of the
            // by-filer answer's.
            _ if self.path == super::ReadPath::Scan => {
                Box::pin(self.fetch_scan(q, ciks.as_deref(), scope))
                    .await?
                    .into_iter()
                    .map(SharedRow::owned)
                    .collect()
            }
            // Boxed, as the access index's reads are (`AccessIndex::rows`): the walk's future
            // is large, and in place it would make the by-filer answer's future as large.
            _ => Box::pin(self.fetch_walk(q, ciks, scope)).await?,
        };
        let next = if rows.len() > q.limit {
            rows.truncate(q.limit);
            rows.last().map(|r| Position {
                published_at: r.published_at,
                id: r.id.clone(),
            })
        } else {
            None
        };
        coverage.touch_days(
            rows.iter()
                .filter_map(|r| r.partition_day().map(|d| (r.source_id, d))),
        );
        Ok(Answer::Page {
            rows,
            next,
            coverage,
        })
    }

    /// Whether a row belongs to the answer of `q` (any CIK), `cut` being `q.cut()` (made once
    /// a page, not once a row): the exact predicate the scan expresses in DataFusion, for rows
    /// the index path reads.
    fn keeps(&self, q: &NewsQuery, cut: &Cut, r: &NewsRow) -> bool {
        if !cut.admits(r, &self.superseded) {
            return false;
        }
        q.after.as_ref().is_none_or(|pos| pos.precedes(r))
    }

    /// The first `limit + 1` rows of `q` for `ciks`, read through the access index.
    async fn fetch_indexed(
        &self,
        access: &AccessIndex,
        q: &NewsQuery,
        ciks: &[String],
    ) -> Result<Vec<SharedRow>> {
        let by_pub = q.visible_by == VisibleBy::PublishedAt;
        let mut lower = match &q.after {
            Some(Position {
                published_at: Some(p),
                ..
            }) => Some(p.micros()),
            _ => None,
        };
        if by_pub && let Some(s) = q.start {
            lower = Some(lower.map_or(s.micros() + 1, |l| l.max(s.micros() + 1)));
        }
        let bounds = Bounds {
            lower,
            upper: by_pub.then(|| q.as_of.micros()),
            dated_only: by_pub,
            after_nulls: matches!(
                q.after,
                Some(Position {
                    published_at: None,
                    ..
                })
            ),
        };
        let cut = q.cut();
        let keep = |r: &NewsRow| self.keeps(q, &cut, r);
        let mut rows = Vec::new();
        for cik in ciks {
            rows.extend(
                access
                    .first_rows(
                        &self.store,
                        q.source,
                        q.lane,
                        cik,
                        bounds,
                        q.limit + 1,
                        &keep,
                    )
                    .await?,
            );
        }
        if ciks.len() > 1 {
            rows.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
            rows.truncate(q.limit + 1);
        }
        Ok(rows)
    }

    /// The first `limit + 1` rows of `q`, by the ordered walk over the source-lane's
    /// partitions (`walk.rs`), on the scan pool.
    async fn fetch_walk(
        &self,
        q: &NewsQuery,
        ciks: Option<Vec<String>>,
        scope: Scope<'_>,
    ) -> Result<Vec<SharedRow>> {
        let walk = Walk {
            store: self.store.clone(),
            partitions: self.lane(q.source, q.lane),
            days: match scope {
                Scope::Sample(set) => {
                    Some(Arc::new(set.days.iter().copied().collect::<BTreeSet<_>>()))
                }
                Scope::Corpus => None,
            },
            cut: q.cut(),
            superseded: Arc::clone(&self.superseded),
            ciks: ciks.map(|c| Arc::new(c.into_iter().collect::<HashSet<_>>())),
            after: q.after.clone(),
            want: q.limit + 1,
            late: self.late.lane(q.source, q.lane),
        };
        // The sample tier's rows are encoded differently (marked `sample`), each time.
        let encoder = match scope {
            Scope::Corpus => self.encoder.clone(),
            Scope::Sample(_) => None,
        };
        let pool = self.scans.clone();
        let mut budget = pool.budget();
        pool.run(async move {
            let rows = walk.run(&mut budget).await?;
            if let Some(encode) = encoder {
                for r in &rows {
                    r.json(|row| encode(row));
                }
            }
            Ok(rows)
        })
        .await
    }

    /// The first `limit + 1` rows of `q`, scanned by DataFusion over the partitions: the
    /// reference reading ([`ReadPath::Scan`]), on the scan pool.
    #[cfg(any(test, feature = "oracle"))]
    async fn fetch_scan(
        &self,
        q: &NewsQuery,
        ciks: Option<&[String]>,
        scope: Scope<'_>,
    ) -> Result<Vec<NewsRow>> {
        let files: Vec<String> = self
            .manifest
            .partitions
            .iter()
            .filter(|p| p.source_id == q.source && p.lane == q.lane)
            // The public sample answers only from the days it has read.
            .filter(|p| match scope {
                Scope::Sample(set) => set.days.contains(&p.date),
                Scope::Corpus => true,
            })
            // The walk's pruning, by the manifest alone (`PartitionEntry::may_hold_in`).
            .filter(|p| p.may_hold_in(q.visible_by, q.start, q.as_of))
            .filter(|p| match &q.after {
                // Every row of a partition whose newest publication precedes the position is
                // on an earlier page.
                Some(Position {
                    published_at: Some(pos),
                    ..
                }) => {
                    let s = &p.clocks.published_at;
                    s.nulls > 0 || s.max.is_some_and(|m| m >= *pos)
                }
                Some(Position {
                    published_at: None, ..
                }) => p.clocks.published_at.nulls > 0,
                None => true,
            })
            .map(|p| self.url_of(p))
            .collect();
        if files.is_empty() || ciks.is_some_and(<[String]>::is_empty) {
            return Ok(vec![]);
        }
        let mut pred = q.filer_filter(ciks).unwrap_or(lit(true));
        if let Some(pos) = &q.after {
            pred = pred.and(pos.precedes_expr());
        }
        let ctx = self.ctx.clone();
        let cut = q.cut();
        let superseded = Arc::clone(&self.superseded);
        let want = q.limit + 1;
        self.scans
            .run(async move {
                let df = super::read_partitions(&ctx, files).await?.filter(pred)?;
                let df = cut
                    .apply(df, &superseded)?
                    .sort(vec![
                        col("published_at").sort(true, false),
                        col("id").sort(true, true),
                    ])?
                    .limit(0, Some(want))?;
                let mut rows = Vec::with_capacity(want);
                for b in df.collect().await? {
                    rows.extend(crate::model::record::from_batch(&b)?);
                }
                Ok(rows)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::corpus::RecordLookup;
    use crate::testkit::{corpus, edgar, january, t};
    use crate::write::publish::{ChangeSet, publish};

    fn q(as_of: &str) -> NewsQuery {
        NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: t(as_of),
            entity: Entity::All,
            after: None,
            limit: 100,
        }
    }

    fn ids(a: &Answer<NewsRow>) -> Vec<String> {
        match a {
            Answer::Page { rows, .. } => rows.iter().map(|r| r.id.clone()).collect(),
            Answer::Hole { coverage } => panic!("unexpected hole: {:?}", coverage.missing),
        }
    }

    #[tokio::test]
    async fn cut_returns_rows_at_or_before_as_of_sorted_by_published_then_id() {
        let rows = vec![
            edgar(
                "0000000001-26-000003",
                "1",
                Some("2026-01-10T15:00:00Z"),
                "2026-01-20T00:00:00Z",
            ),
            edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-10T15:00:00Z"),
                "2026-01-20T00:00:00Z",
            ),
            edgar(
                "0000000001-26-000002",
                "1",
                Some("2026-01-05T09:00:00Z"),
                "2026-01-20T00:00:00Z",
            ),
            edgar(
                "0000000001-26-000004",
                "1",
                Some("2026-01-12T09:00:00Z"),
                "2026-01-20T00:00:00Z",
            ),
        ];
        let (_d, _s, c) = corpus(rows, january()).await;
        let a = c
            .news(&q("2026-01-10T15:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        assert_eq!(
            ids(&a),
            vec![
                "0000000001-26-000002_1",
                "0000000001-26-000001_1",
                "0000000001-26-000003_1"
            ]
        );
    }

    #[tokio::test]
    async fn a_complete_cut_with_no_rows_is_an_empty_page_not_a_hole() {
        let rows = vec![edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-20T15:00:00Z"),
            "2026-01-20T16:00:00Z",
        )];
        let (_d, _s, c) = corpus(rows, january()).await;
        let a = c
            .news(&q("2026-01-15T00:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        assert!(
            matches!(&a, Answer::Page { rows, coverage, .. } if rows.is_empty() && coverage.is_complete())
        );
        let hole = c
            .news(&q("2026-02-02T00:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        assert!(
            matches!(&hole, Answer::Hole { coverage } if coverage.missing == vec!["sec.edgar/2026-02-01", "sec.edgar/2026-02-02"])
        );
    }

    #[tokio::test]
    async fn null_clock_rows_are_never_visible_on_that_clock() {
        let rows = vec![edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-05T09:00:00Z"),
            "2026-01-06T00:00:00Z",
        )];
        let (_d, _s, c) = corpus(rows, january()).await;
        // available_at is null on these certified rows and is never imputed: the cut is refused
        // as an availability hole instead of answering as if nothing were available.
        let mut query = q("2026-01-20T00:00:00Z");
        query.visible_by = VisibleBy::AvailableAt;
        let a = c.news(&query, Scope::Corpus).await.unwrap();
        assert!(
            matches!(&a, Answer::Hole { coverage } if coverage.missing == vec!["availability.sec.edgar/2026-01-05"])
        );
    }

    #[tokio::test]
    async fn lanes_are_never_mixed_in_one_answer() {
        let mut fwd = edgar(
            "0000000001-26-000009",
            "1",
            Some("2026-01-05T09:00:00Z"),
            "2026-01-05T09:01:00Z",
        );
        fwd.lane = Lane::ForwardFirstSeen;
        fwd.available_at = Some(t("2026-01-05T09:01:00Z"));
        fwd.availability_basis = crate::model::clock::AvailabilityBasis::LocalFirstSeen;
        let rows = vec![
            edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-05T09:00:00Z"),
                "2026-01-06T00:00:00Z",
            ),
            fwd,
        ];
        let (_d, _s, c) = corpus(rows, january()).await;
        assert_eq!(
            ids(&c
                .news(&q("2026-01-20T00:00:00Z"), Scope::Corpus)
                .await
                .unwrap()),
            vec!["0000000001-26-000001_1"]
        );
        let mut fq = q("2026-01-20T00:00:00Z");
        fq.lane = Lane::ForwardFirstSeen;
        assert_eq!(
            ids(&c.news(&fq, Scope::Corpus).await.unwrap()),
            vec!["0000000001-26-000009_1"]
        );
        fq.visible_by = VisibleBy::AvailableAt;
        assert_eq!(
            ids(&c.news(&fq, Scope::Corpus).await.unwrap()),
            vec!["0000000001-26-000009_1"]
        );
    }

    #[tokio::test]
    async fn diff_excludes_rows_visible_at_start_and_equals_the_set_difference_of_two_cuts() {
        let rows: Vec<NewsRow> = (1..=9)
            .map(|i| {
                edgar(
                    &format!("0000000001-26-00000{i}"),
                    "1",
                    Some(&format!("2026-01-0{i}T12:00:00Z")),
                    "2026-01-10T00:00:00Z",
                )
            })
            .collect();
        let (_d, _s, c) = corpus(rows, january()).await;
        let mut d = q("2026-01-07T12:00:00Z");
        d.start = Some(t("2026-01-03T12:00:00Z"));
        let diff = ids(&c.news(&d, Scope::Corpus).await.unwrap());
        let end = ids(&c
            .news(&q("2026-01-07T12:00:00Z"), Scope::Corpus)
            .await
            .unwrap());
        let start = ids(&c
            .news(&q("2026-01-03T12:00:00Z"), Scope::Corpus)
            .await
            .unwrap());
        let expected: Vec<String> = end.into_iter().filter(|i| !start.contains(i)).collect();
        assert_eq!(diff, expected);
        assert_eq!(
            diff.first().map(String::as_str),
            Some("0000000001-26-000004_1"),
            "the row at as_of_start is excluded"
        );
        assert_eq!(
            diff.last().map(String::as_str),
            Some("0000000001-26-000007_1"),
            "the row at as_of_end is included"
        );
    }

    #[tokio::test]
    async fn keyset_pages_walk_to_the_same_rows_as_one_large_page_with_nulls_last() {
        let mut rows: Vec<NewsRow> = (0..23)
            .map(|i| {
                edgar(
                    &format!("0000000001-26-0000{i:02}"),
                    "1",
                    Some(&format!("2026-01-{:02}T12:00:00Z", 1 + i % 5)),
                    "2026-01-10T00:00:00Z",
                )
            })
            .collect();
        // A row with no publication instant sorts after every dated row (visible by commit).
        rows.push(edgar(
            "0000000001-26-000099",
            "1",
            None,
            "2026-01-10T00:00:00Z",
        ));
        let (_d, _s, c) = corpus(rows, january()).await;
        let mut all = q("2026-01-20T00:00:00Z");
        all.visible_by = VisibleBy::CommittedAt;
        all.limit = 1000;
        let one = ids(&c.news(&all, Scope::Corpus).await.unwrap());
        assert_eq!(one.len(), 24);
        assert_eq!(
            one.last().map(String::as_str),
            Some("0000000001-26-000099_1")
        );
        let mut walked = Vec::new();
        let mut page = all.clone();
        page.limit = 5;
        loop {
            match c.news(&page, Scope::Corpus).await.unwrap() {
                Answer::Page { rows, next, .. } => {
                    walked.extend(rows.into_iter().map(|r| r.id));
                    match next {
                        Some(p) => page.after = Some(p),
                        None => break,
                    }
                }
                Answer::Hole { .. } => panic!("hole"),
            }
        }
        assert_eq!(walked, one);
    }

    #[tokio::test]
    async fn committed_at_cut_before_a_correction_returns_the_old_revision_and_after_it_the_new() {
        let (_d, store, _) = corpus(
            vec![edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-05T16:46:18Z"),
                "2026-01-06T00:00:00Z",
            )],
            january(),
        )
        .await;
        let corrected = edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-05T21:46:18Z"),
            "2026-01-20T00:00:00Z",
        );
        publish(
            &store,
            ChangeSet {
                rows: vec![corrected],
                ..Default::default()
            },
            t("2026-03-02T00:00:00Z"),
        )
        .await
        .unwrap();
        let c = Corpus::open(store).await.unwrap();
        let by_commit = |at: &str| {
            let mut query = q(at);
            query.visible_by = VisibleBy::CommittedAt;
            query
        };
        let before = c
            .news(&by_commit("2026-01-10T00:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        let after = c
            .news(&by_commit("2026-01-25T00:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        let (Answer::Page { rows: b, .. }, Answer::Page { rows: a, .. }) = (before, after) else {
            panic!("hole")
        };
        assert_eq!(b.len(), 1);
        assert_eq!(a.len(), 1);
        assert_eq!(b[0].published_at, Some(t("2026-01-05T16:46:18Z")));
        assert_eq!(a[0].published_at, Some(t("2026-01-05T21:46:18Z")));
        assert_eq!(a[0].supersedes.as_deref(), Some(b[0].revision_id.as_str()));
        // On the publication clock the current revision answers alone.
        let p = c
            .news(&q("2026-01-05T18:00:00Z"), Scope::Corpus)
            .await
            .unwrap();
        assert!(
            ids(&p).is_empty(),
            "the superseded earlier instant no longer makes the row visible"
        );
        match c
            .record(
                "0000000001-26-000001_1",
                t("2026-01-10T00:00:00Z"),
                VisibleBy::CommittedAt,
            )
            .await
            .unwrap()
        {
            RecordLookup::Visible(r) => assert_eq!(r.revision_id, b[0].revision_id),
            other => panic!("{other:?}"),
        }
    }
}
