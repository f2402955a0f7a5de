//! `asof verify`: re-hash every object of a version against its manifest, and decode what the
//! read paths trust without decoding (partition statistics, access files' block offsets and
//! slots).

use crate::error::{Error, Result};
use crate::format::access;
use crate::format::late;
use crate::model::manifest::{PartitionClocks, marks_of};
use crate::store::CorpusStore;
use crate::store::objects::{decode_parquet, get_checked};

/// What a successful verification checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    pub version: String,
    pub partitions: usize,
    pub rows: u64,
    pub other_objects: usize,
}

/// Checks the pointer's manifest hash, then every partition's sha256 and row count, then every
/// identity and access object. Stops at the first fault, naming the object.
pub async fn verify(store: &CorpusStore, version: Option<&str>) -> Result<Verified> {
    verify_beyond(store, version, None).await
}

/// As [`verify`], but objects `known` (a version already verified and served) also lists are
/// not read again: objects are content-addressed, so the same path is the same bytes. A server
/// reloading a version that adds one day's partition re-hashes that partition, not the corpus.
/// `Verified` counts only what was read.
pub async fn verify_beyond(
    store: &CorpusStore,
    version: Option<&str>,
    known: Option<&crate::model::manifest::Manifest>,
) -> Result<Verified> {
    let version = match version {
        Some(v) => v.to_owned(),
        None => store
            .current_version()
            .await?
            .ok_or_else(|| Error::NoCorpus(store.display().to_owned()))?,
    };
    let m = store.manifest(&version).await?;
    verify_manifest(store, &version, &m, known).await
}

/// As [`verify_beyond`], for a manifest the caller has already read (and hash-checked, as
/// [`CorpusStore::manifest`] does): a reloading server reads the new manifest once and both
/// verifies and opens the version from it.
pub async fn verify_manifest(
    store: &CorpusStore,
    version: &str,
    m: &crate::model::manifest::Manifest,
    known: Option<&crate::model::manifest::Manifest>,
) -> Result<Verified> {
    let seen: std::collections::HashSet<&str> = known
        .map(|k| {
            k.partitions
                .iter()
                .map(|p| p.path.as_str())
                .chain(
                    k.identity
                        .iter()
                        .chain(k.access.iter())
                        .map(|o| o.path.as_str()),
                )
                .collect()
        })
        .unwrap_or_default();
    let mut out = Verified {
        version: version.to_owned(),
        ..Default::default()
    };
    let mut late_rows = std::collections::HashMap::new();
    // What the decoded partitions supersede, per source-lane, and where they store the
    // revisions the rule tables name as superseded: a rule table must list and place it all.
    let wanted = crate::rule::tables::superseded_revisions(store, m, &seen).await?;
    let mut found = crate::rule::tables::Decoded::default();
    for p in m
        .partitions
        .iter()
        .filter(|p| !seen.contains(p.path.as_str()))
    {
        let bytes = get_checked(store, &p.path, &p.sha256).await?;
        if bytes.len() as u64 != p.bytes {
            return Err(Error::integrity(
                &p.path,
                format!("{} bytes, manifest says {}", bytes.len(), p.bytes),
            ));
        }
        let decoded = decode_parquet(&p.path, bytes)?;
        let rows = decoded.len() as u64;
        if rows != p.row_count {
            return Err(Error::integrity(
                &p.path,
                format!("{rows} rows, manifest says {}", p.row_count),
            ));
        }
        // A partition holds its source-lane's rows only: the walk and the exported rule
        // (`Cut::over_lane_table`) read a source-lane's partitions without a lane predicate.
        if let Some(r) = decoded
            .iter()
            .find(|r| r.source_id != p.source_id || r.lane != p.lane)
        {
            return Err(Error::integrity(
                &p.path,
                format!(
                    "holds a row of {}/{} ({}) in a partition of {}/{}",
                    r.source_id, r.lane, r.id, p.source_id, p.lane
                ),
            ));
        }
        // The walk skips partitions by these statistics: a wrong one would drop rows.
        if PartitionClocks::from_rows(&decoded) != p.clocks {
            return Err(Error::integrity(
                &p.path,
                "clock statistics differ from the manifest's".to_owned(),
            ));
        }
        let (commits, hours) = marks_of(&decoded);
        if (p.commits.is_some() && commits != p.commits)
            || (p.available_hours.is_some() && hours != p.available_hours)
        {
            return Err(Error::integrity(
                &p.path,
                "commit instants or available_at hours differ from the manifest's".to_owned(),
            ));
        }
        // The walk takes a late mark's rows from the late object, not the partition.
        late_rows.insert(p.path.as_str(), late::Finder::of(&decoded));
        found.partition(p, &decoded, wanted.get(&(p.source_id, p.lane)))?;
        out.partitions += 1;
        out.rows += rows;
    }
    for o in m
        .identity
        .iter()
        .chain(m.access.iter())
        .filter(|o| !seen.contains(o.path.as_str()))
    {
        match o.kind.as_str() {
            // Checked with its sidecar, whose path names it (both are content-addressed).
            access::KIND_CLUSTERED => {}
            access::KIND_SIDECAR => {
                access::verify_file(store, m, o).await?;
                out.other_objects += 2;
            }
            crate::format::ids::KIND_IDS_FILTER => {
                crate::format::ids::verify_filter(store, m, o).await?;
                out.other_objects += 1;
            }
            late::KIND_LATE => {
                crate::read::late::verify(store, m, o, &late_rows).await?;
                out.other_objects += 1;
            }
            // All at once below, with what the decoded partitions supersede.
            crate::format::rule::KIND_SUPERSESSIONS
            | crate::format::rule::KIND_SUPERSESSIONS_UNPLACED
            | crate::format::rule::KIND_COVERAGE => {}
            _ => {
                get_checked(store, &o.path, &o.sha256).await?;
                out.other_objects += 1;
            }
        }
    }
    // The rule tables: every one, when the version is checked whole (no partition was
    // seen), else the ones the served version did not list; each holds what the decoded
    // partitions supersede, and a whole check holds it to exactly that.
    out.other_objects +=
        crate::rule::tables::verify(store, m, &seen, &found, known.is_none()).await?;
    // A data file without its sidecar would be skipped above, so it is a fault of its own.
    for o in m.access.iter().filter(|o| o.kind == access::KIND_CLUSTERED) {
        if !m
            .access
            .iter()
            .any(|sc| sc.kind == access::KIND_SIDECAR && access::names_data(sc, o))
        {
            return Err(Error::integrity(
                &o.path,
                "an access file without its sidecar",
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::model::clock::{Lane, SourceId};
    use crate::store::objects::read_partition;
    use crate::testkit::{random_corpus, refusal_of};
    use crate::write::encode::write_partition;

    #[tokio::test]
    async fn verify_refuses_a_partition_holding_a_row_of_another_lane() {
        let (_dir, store, _) = random_corpus(0x60_0020, false).await;
        let (v, m) = store.current().await.unwrap();
        crate::verify::verify(&store, None).await.unwrap();
        let i = m
            .partitions
            .iter()
            .position(|p| (p.source_id, p.lane) == (SourceId::SecEdgar, Lane::CertifiedPit))
            .unwrap();
        let p = m.partitions[i].clone();
        let mut rows = read_partition(&store, &p).await.unwrap();
        rows[0].lane = Lane::ForwardFirstSeen;
        let stray = rows[0].id.clone();
        let forged_entry = write_partition(&store, p.source_id, p.lane, p.date, rows)
            .await
            .unwrap();
        assert_ne!(forged_entry.sha256, p.sha256);
        let mut forged = m.clone();
        forged.partitions[i] = forged_entry;
        let err = refusal_of(&store, forged, &v).await;
        assert!(
            err.contains("holds a row of sec.edgar/forward_first_seen") && err.contains(&stray),
            "{err}"
        );
    }
}
