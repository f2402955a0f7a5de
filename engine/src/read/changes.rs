//! What one corpus version added to another: the rows new in a version, by lane.
//!
//! Partitions are content-addressed and only ever grow (a version's partition for a
//! source-lane-day holds every row of its parent's partition for that day plus the rows it
//! adds; revisions are new rows, nothing is deleted). So the rows a version adds are found by
//! reading only the partitions whose bytes changed, and only their rows whose `revision_id`
//! the parent's partition of the same day did not hold. The live stream (`/v1/stream`) turns
//! each step of the manifest chain into events with this.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::Result;
use crate::model::clock::{Day, Lane, SourceId};
use crate::model::manifest::{Manifest, PartitionEntry};
use crate::model::record::NewsRow;
use crate::store::CorpusStore;
use crate::store::objects::read_partition;

type Key = (SourceId, Lane, Day);

/// The partitions of `child` whose bytes differ from `parent`'s for the same source-lane-day
/// (or that `parent` does not have), each with `parent`'s partition of that day.
fn changed<'a>(
    parent: Option<&'a Manifest>,
    child: &'a Manifest,
) -> Vec<(&'a PartitionEntry, Option<&'a PartitionEntry>)> {
    let before: HashMap<Key, &PartitionEntry> = parent
        .map(|m| {
            m.partitions
                .iter()
                .map(|p| ((p.source_id, p.lane, p.date), p))
                .collect()
        })
        .unwrap_or_default();
    child
        .partitions
        .iter()
        .filter_map(|p| {
            let old = before.get(&(p.source_id, p.lane, p.date)).copied();
            (old.map(|o| &o.sha256) != Some(&p.sha256)).then_some((p, old))
        })
        .collect()
}

/// How many rows `child` adds to `parent` in each lane, from the manifests alone (no reads).
pub fn added_counts(parent: Option<&Manifest>, child: &Manifest) -> BTreeMap<Lane, u64> {
    let mut out = BTreeMap::new();
    for (p, old) in changed(parent, child) {
        *out.entry(p.lane).or_default() +=
            p.row_count.saturating_sub(old.map_or(0, |o| o.row_count));
    }
    out.retain(|_, n| *n > 0);
    out
}

/// The rows `child` adds to `parent` in `lanes`, hash-checked, ordered by lane, then
/// `available_at` (rows without it last), `id` and `revision_id`: a total order every reader of
/// the same two manifests agrees on.
pub async fn added_rows(
    store: &CorpusStore,
    parent: Option<&Manifest>,
    child: &Manifest,
    lanes: &[Lane],
) -> Result<Vec<NewsRow>> {
    let mut out = Vec::new();
    for (p, old) in changed(parent, child) {
        if !lanes.contains(&p.lane) {
            continue;
        }
        let held: HashSet<String> = match old {
            Some(o) => read_partition(store, o)
                .await?
                .into_iter()
                .map(|r| r.revision_id)
                .collect(),
            None => HashSet::new(),
        };
        out.extend(
            read_partition(store, p)
                .await?
                .into_iter()
                .filter(|r| !held.contains(&r.revision_id)),
        );
    }
    out.sort_by(|a, b| {
        (
            a.lane,
            a.available_at.is_none(),
            a.available_at,
            &a.id,
            &a.revision_id,
        )
            .cmp(&(
                b.lane,
                b.available_at.is_none(),
                b.available_at,
                &b.id,
                &b.revision_id,
            ))
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{edgar, t as at};
    use crate::write::publish::{ChangeSet, publish};

    fn row(accession: &str, cik: &str, published: &str) -> NewsRow {
        edgar(accession, cik, Some(published), "2026-01-06T00:00:00Z")
    }

    #[tokio::test]
    async fn a_version_adds_exactly_the_rows_its_parent_did_not_hold() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let first = vec![
            row("a", "0000000001", "2026-01-05T10:00:00Z"),
            row("b", "0000000002", "2026-01-05T11:00:00Z"),
        ];
        let v1 = publish(
            &store,
            ChangeSet {
                rows: first,
                ..ChangeSet::default()
            },
            at("2026-01-06T00:00:00Z"),
        )
        .await
        .unwrap();
        // Same day gets a new row, another day its first.
        let v2 = publish(
            &store,
            ChangeSet {
                rows: vec![
                    row("c", "0000000003", "2026-01-05T12:00:00Z"),
                    row("d", "0000000001", "2026-01-06T09:00:00Z"),
                ],
                ..ChangeSet::default()
            },
            at("2026-01-07T00:00:00Z"),
        )
        .await
        .unwrap();
        let m1 = store.manifest(&v1.version).await.unwrap();
        let m2 = store.manifest(&v2.version).await.unwrap();
        let lane = m2.partitions[0].lane;
        assert_eq!(added_counts(Some(&m1), &m2), BTreeMap::from([(lane, 2)]));
        let added = added_rows(&store, Some(&m1), &m2, &[lane]).await.unwrap();
        let ids: Vec<&str> = added
            .iter()
            .map(|r| r.accession.as_deref().unwrap())
            .collect();
        assert_eq!(ids, ["c", "d"], "rows of the parent are not added again");
        // From nothing, a version adds all its rows; another lane asked for adds none.
        assert_eq!(
            added_rows(&store, None, &m1, &[lane]).await.unwrap().len(),
            2
        );
        let other = if lane == Lane::CertifiedPit {
            Lane::ForwardFirstSeen
        } else {
            Lane::CertifiedPit
        };
        assert!(
            added_rows(&store, Some(&m1), &m2, &[other])
                .await
                .unwrap()
                .is_empty()
        );
        // A version compared with itself adds nothing.
        assert!(added_counts(Some(&m2), &m2).is_empty());
        assert!(
            added_rows(&store, Some(&m2), &m2, &[lane])
                .await
                .unwrap()
                .is_empty()
        );
    }
}
