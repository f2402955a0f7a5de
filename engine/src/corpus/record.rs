//! One record by id as of a cut: the revision in force, told apart from one not yet visible
//! and from an id the corpus has never held.

use datafusion::logical_expr::{col, lit};

use super::{Corpus, normalize_cik};
use crate::clock::{Instant, SourceId, VisibleBy};
use crate::cut::Cut;
use crate::error::Result;
use crate::manifest::PartitionEntry;
use crate::record::{NewsRow, from_batch};

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
        let mut revisions = match self.access() {
            // EDGAR ids are `<accession>_<cik>`: the CIK names the runs that can hold the id.
            Some(a) if a.covers_all(&self.manifest) => match id.rsplit_once('_') {
                Some((_, cik)) if normalize_cik(cik).as_deref() == Some(cik) => {
                    a.revisions(&self.store, cik, id).await?
                }
                // Not an EDGAR id, so not in any EDGAR partition: scan the other sources only.
                _ => {
                    self.scan_revisions(id, |p| p.source_id != SourceId::SecEdgar)
                        .await?
                }
            },
            _ => self.scan_revisions(id, |_| true).await?,
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

    /// Every stored revision of one record id, scanned by DataFusion over all partitions.
    async fn scan_revisions(
        &self,
        id: &str,
        keep: impl Fn(&PartitionEntry) -> bool,
    ) -> Result<Vec<NewsRow>> {
        let files = self.partition_urls(keep);
        if files.is_empty() {
            return Ok(vec![]);
        }
        let ctx = self.ctx.clone();
        let id = id.to_owned();
        self.scans
            .run(async move {
                let df = super::read_partitions(&ctx, files)
                    .await?
                    .filter(col("id").eq(lit(id)))?;
                let mut revisions = Vec::new();
                for b in df.collect().await? {
                    revisions.extend(from_batch(&b)?);
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
