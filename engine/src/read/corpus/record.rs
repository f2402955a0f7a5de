//! One record by id as of a cut: the revision in force, told apart from one not yet visible
//! and from an id the corpus has never held.

use super::{Corpus, ReadPath, normalize_cik};
use crate::error::Result;
use crate::model::clock::{Instant, SourceId, VisibleBy};
use crate::model::cut::Cut;
use crate::model::record::NewsRow;

/// The outcome of a single-record lookup.
#[derive(Debug, Clone)]
pub enum RecordLookup {
    Visible(Box<NewsRow>),
    /// The record exists but its clock is after the cut (or null): not knowable yet.
    NotYetVisible,
    NotFound,
}

impl Corpus {
    /// One record by id, as of a cut on a clock.
    pub async fn record(
        &self,
        id: &str,
        as_of: Instant,
        visible_by: VisibleBy,
    ) -> Result<RecordLookup> {
        let mut revisions = match self.path {
            #[cfg(any(test, feature = "oracle"))]
            ReadPath::Scan => self.scan_revisions(id).await?,
            ReadPath::Indexed | ReadPath::Walk => match self.access() {
                // EDGAR ids are `<accession>_<cik>`: the CIK names the runs that can hold the id.
                Some(a) if a.covers_all(&self.manifest) => match id.rsplit_once('_') {
                    Some((_, cik)) if normalize_cik(cik).as_deref() == Some(cik) => {
                        let mut days = std::collections::HashMap::new();
                        for &(source, lane) in self.lanes.keys().filter(|&&(s, l)| a.covers(s, l)) {
                            if let Some(d) = crate::read::ids::days_holding(
                                &self.store,
                                &self.manifest,
                                source,
                                lane,
                                [id],
                            )
                            .await?
                            {
                                days.insert((source, lane), d);
                            }
                        }
                        a.revisions(&self.store, cik, id, &days).await?
                    }
                    // Not an EDGAR id, so not in any EDGAR partition: the other sources only.
                    _ => self.read_revisions(id, |s| s != SourceId::SecEdgar).await?,
                },
                _ => self.read_revisions(id, |_| true).await?,
            },
        };
        // Oldest commit first, so the first current revision found is the one in force.
        revisions.sort_by(|a, b| {
            (a.committed_at, &a.revision_id).cmp(&(b.committed_at, &b.revision_id))
        });
        if revisions.is_empty() {
            return Ok(RecordLookup::NotFound);
        }
        let cut = Cut::at(as_of, visible_by);
        let current = revisions
            .into_iter()
            .find(|r| cut.knows(r) && cut.in_force(self.superseded.get(&r.revision_id).copied()));
        Ok(match current {
            Some(r) if cut.sees(&r) => RecordLookup::Visible(Box::new(r)),
            _ => RecordLookup::NotYetVisible,
        })
    }

    /// Every stored revision of one record id in the sources `keep` admits, read from the
    /// partitions that can hold it: per source-lane, the version's id runs name the days whose
    /// partitions may hold a revision of the id (a few kilobytes read, see `ids.rs`), and only
    /// those partitions are read, on the scan pool. A source-lane without runs (a corpus
    /// published before they existed, until its next publish) has all its partitions read.
    async fn read_revisions(
        &self,
        id: &str,
        keep: impl Fn(SourceId) -> bool,
    ) -> Result<Vec<NewsRow>> {
        let mut partitions = Vec::new();
        for (&(source, lane), lane_partitions) in &self.lanes {
            if !keep(source) {
                continue;
            }
            let days =
                crate::read::ids::days_holding(&self.store, &self.manifest, source, lane, [id])
                    .await?;
            partitions.extend(
                lane_partitions
                    .iter()
                    .filter(|p| days.as_ref().is_none_or(|d| d.contains(&p.date)))
                    .cloned(),
            );
        }
        if partitions.is_empty() {
            return Ok(vec![]);
        }
        let (store, id) = (self.store.clone(), id.to_owned());
        self.scans
            .run(async move {
                let mut revisions = Vec::new();
                for p in &partitions {
                    revisions.extend(super::walk::rows_with_id(&store, p, &id).await?);
                }
                Ok(revisions)
            })
            .await
    }

    /// Every stored revision of one record id, scanned by DataFusion over all partitions: the
    /// reference reading ([`ReadPath::Scan`]) the id runs are held to.
    #[cfg(any(test, feature = "oracle"))]
    async fn scan_revisions(&self, id: &str) -> Result<Vec<NewsRow>> {
        let files = self.partition_urls(|_| true);
        if files.is_empty() {
            return Ok(vec![]);
        }
        let ctx = self.ctx.clone();
        let id = id.to_owned();
        self.scans
            .run(async move {
                let df = super::read_partitions(&ctx, files)
                    .await?
                    .filter(datafusion::prelude::col("id").eq(datafusion::prelude::lit(id)))?;
                let mut revisions = Vec::new();
                for b in df.collect().await? {
                    revisions.extend(crate::model::record::from_batch(&b)?);
                }
                Ok(revisions)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{corpus, edgar, january, t};

    /// An OFAC-like row (not EDGAR: its id names no CIK) published on `day` of January.
    fn notice(n: u32, day: u32, title: &str, committed: &str) -> NewsRow {
        let published = format!("2026-01-{day:02}T12:00:00Z");
        let mut r = edgar("x", "1", Some(&published), committed);
        r.id = format!("{n}@2026-01-{day:02}T23:59:59Z");
        r.source_id = SourceId::OfacSdn;
        r.form = None;
        r.accession = None;
        r.cik = None;
        r.entity_id = None;
        r.title = title.into();
        r.source_locator = format!("https://sanctionslist.ofac.treas.gov/{n}");
        r
    }

    #[tokio::test]
    async fn a_record_not_from_edgar_is_read_from_the_partitions_its_id_runs_name_only() {
        let dir = tempfile::tempdir().unwrap();
        let local = crate::store::CorpusStore::local(dir.path()).unwrap();
        let first: Vec<NewsRow> = (1..=20)
            .flat_map(|d| {
                (0..3).map(move |k| notice(d * 10 + k, d, "listed", "2026-01-25T00:00:00Z"))
            })
            .chain([edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-07T09:00:00Z"),
                "2026-01-25T00:00:00Z",
            )])
            .collect();
        for (rows, at) in [
            (first, "2026-01-25T00:00:00Z"),
            // Entry 71 of Jan 7 amended: a second revision, committed later.
            (
                vec![notice(71, 7, "amended", "2026-01-28T00:00:00Z")],
                "2026-01-28T00:00:00Z",
            ),
        ] {
            crate::write::publish::publish(
                &local,
                crate::write::publish::ChangeSet {
                    rows,
                    certifications: january(),
                    ..Default::default()
                },
                t(at),
            )
            .await
            .unwrap();
        }
        let (counting, store) = crate::testkit::counted_store(dir.path());
        let indexed = Corpus::open(store.clone()).await.unwrap();
        let mut scanned = Corpus::open(store).await.unwrap();
        scanned.set_read_path(ReadPath::Scan);
        let title = |l: RecordLookup| match l {
            RecordLookup::Visible(r) => r.title,
            other => format!("{other:?}"),
        };
        let id = "71@2026-01-07T23:59:59Z";
        for (at, clock, want) in [
            ("2026-01-30T00:00:00Z", VisibleBy::PublishedAt, "amended"),
            ("2026-01-26T00:00:00Z", VisibleBy::CommittedAt, "listed"),
            ("2026-01-29T00:00:00Z", VisibleBy::CommittedAt, "amended"),
            (
                "2026-01-07T11:00:00Z",
                VisibleBy::PublishedAt,
                "NotYetVisible",
            ),
        ] {
            counting.reset();
            let got = title(indexed.record(id, t(at), clock).await.unwrap());
            assert_eq!(got, want, "{at} on {clock:?}");
            let read = counting.reads_under("snapshots/partitions/");
            assert!(
                !read.is_empty()
                    && read.iter().all(|p| indexed
                        .manifest()
                        .partitions
                        .iter()
                        .any(|e| &e.path == p && e.date.to_string() == "2026-01-07")),
                "only the partitions of the id's day are read: {read:?}"
            );
            assert_eq!(title(scanned.record(id, t(at), clock).await.unwrap()), want);
        }
        // The id runs were read by the first lookup and kept: later ones read none.
        counting.reset();
        indexed
            .record(id, t("2026-01-30T00:00:00Z"), VisibleBy::PublishedAt)
            .await
            .unwrap();
        assert_eq!(counting.reads_under("snapshots/ids/"), Vec::<String>::new());
        // Every id, indexed and scanned alike; an id never held is not found either way.
        for n in [10, 52, 202, 999] {
            for c in [&indexed, &scanned] {
                let d = if n == 999 { 3 } else { n / 10 };
                let got = title(
                    c.record(
                        &format!("{n}@2026-01-{d:02}T23:59:59Z"),
                        t("2026-01-30T00:00:00Z"),
                        VisibleBy::PublishedAt,
                    )
                    .await
                    .unwrap(),
                );
                assert_eq!(got, if n == 999 { "NotFound" } else { "listed" });
            }
        }
    }

    #[tokio::test]
    async fn single_record_tells_not_yet_visible_from_not_found() {
        let (_d, _s, c) = corpus(
            vec![edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-05T09:00:00Z"),
                "2026-01-06T00:00:00Z",
            )],
            january(),
        )
        .await;
        assert!(matches!(
            c.record(
                "0000000001-26-000001_1",
                t("2026-01-05T08:59:59Z"),
                VisibleBy::PublishedAt
            )
            .await
            .unwrap(),
            RecordLookup::NotYetVisible
        ));
        assert!(matches!(
            c.record(
                "0000000001-26-000001_1",
                t("2026-01-05T09:00:00Z"),
                VisibleBy::PublishedAt
            )
            .await
            .unwrap(),
            RecordLookup::Visible(_)
        ));
        assert!(matches!(
            c.record("nope", t("2026-01-05T09:00:00Z"), VisibleBy::PublishedAt)
                .await
                .unwrap(),
            RecordLookup::NotFound
        ));
    }
}
