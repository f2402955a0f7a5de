//! Writing late objects at publish: each source-lane's late rows brought up to date with
//! the version's partitions (what a late row is, and why the walk keeps them apart, in
//! `crate::format::late`).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::Result;
use crate::format::late::{Finder, KIND_LATE, LateRow, decode, encode, entry_of, late_dir};
use crate::model::clock::{Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::model::record::partition_order;
use crate::store::CorpusStore;
use crate::store::hashing::sha256_hex;

/// Brings the late objects of `manifest` up to date with its partitions: for each source-lane,
/// the rows of the previous object (listed in `manifest`, as the parent's) whose partitions
/// are still listed, and the late rows of every partition it did not cover: from `fresh`
/// (path → late rows, found while the partition was written) or read from the store. A
/// source-lane whose partitions all stayed keeps its object; one without partitions loses it.
pub async fn update(
    store: &CorpusStore,
    manifest: &mut Manifest,
    parent: Option<&Manifest>,
    mut fresh: HashMap<String, Vec<LateRow>>,
) -> Result<()> {
    let mut lanes: BTreeMap<(SourceId, Lane), Vec<&PartitionEntry>> = BTreeMap::new();
    for p in &manifest.partitions {
        lanes.entry((p.source_id, p.lane)).or_default().push(p);
    }
    let mut entries = Vec::new();
    for (&(source, lane), partitions) in &lanes {
        let held = entry_of(manifest, source, lane);
        // The partitions the held object covers: the parent's of this source-lane, when the
        // parent lists the same object.
        let covered: HashSet<&str> = match (held, parent) {
            (Some(e), Some(pm)) if entry_of(pm, source, lane) == Some(e) => pm
                .partitions
                .iter()
                .filter(|p| p.source_id == source && p.lane == lane)
                .map(|p| p.path.as_str())
                .collect(),
            _ => HashSet::new(),
        };
        let now: HashSet<&str> = partitions.iter().map(|p| p.path.as_str()).collect();
        if held.is_some() && covered == now {
            entries.push(held.cloned().expect("held"));
            continue;
        }
        let mut rows: Vec<(String, LateRow)> = Vec::new();
        if let Some(e) = held.filter(|_| !covered.is_empty()) {
            let bytes = crate::store::objects::get_checked(store, &e.path, &e.sha256).await?;
            rows.extend(
                decode(&e.path, bytes)?
                    .into_iter()
                    .filter(|(p, _)| now.contains(p.as_str())),
            );
        }
        for p in partitions
            .iter()
            .filter(|p| !covered.contains(p.path.as_str()))
        {
            let late = match fresh.remove(&p.path) {
                Some(l) => l,
                None => {
                    let mut f = Finder::default();
                    for r in crate::store::objects::partition_rows(store, p).await? {
                        f.add(&r?);
                    }
                    f.finish()
                }
            };
            rows.extend(late.into_iter().map(|l| (p.path.clone(), l)));
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0).then(partition_order(&a.1.row, &b.1.row)));
        let bytes = encode(&rows)?;
        let sha = sha256_hex(&bytes);
        let entry = ObjectEntry {
            kind: KIND_LATE.into(),
            path: format!("{}{sha}.arrow", late_dir(source, lane)),
            bytes: bytes.len() as u64,
            sha256: sha,
            row_count: rows.len() as u64,
        };
        store.put_immutable(&entry.path, bytes).await?;
        entries.push(entry);
    }
    manifest.access.retain(|e| e.kind != KIND_LATE);
    manifest.access.extend(entries);
    manifest.access.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(())
}
