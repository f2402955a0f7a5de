//! Reading late objects: a version's late rows in memory ([`LateIndex`]), what the walk asks
//! of them, and `asof verify`'s check of an object against its partitions (the format in
//! `crate::format::late`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::late::{KIND_LATE, LateRow, decode, late_dir};
use crate::model::clock::{Day, Instant, Lane, SourceId, VisibleBy};
use crate::model::manifest::{Manifest, ObjectEntry, PartitionEntry, hour_of};
use crate::model::record::{RowBlock, SharedRow};
use crate::store::CorpusStore;

/// Checks a late object against the rows of the partitions `verified` (path → rows, read and
/// hash-checked by the caller): for each, the object holds exactly the late rows [`Finder`]
/// finds in them, flagged alike. Rows of partitions not in `verified` are checked only to
/// name a listed partition of the source-lane.
pub(crate) async fn verify(
    store: &CorpusStore,
    manifest: &Manifest,
    entry: &ObjectEntry,
    verified: &HashMap<&str, Vec<LateRow>>,
) -> Result<()> {
    let bytes = crate::store::objects::get_checked(store, &entry.path, &entry.sha256).await?;
    let rows = decode(&entry.path, bytes)?;
    if rows.len() as u64 != entry.row_count {
        return Err(Error::integrity(
            &entry.path,
            format!("{} rows, manifest says {}", rows.len(), entry.row_count),
        ));
    }
    let listed: HashMap<&str, &PartitionEntry> = manifest
        .partitions
        .iter()
        .filter(|p| entry.path.starts_with(&late_dir(p.source_id, p.lane)))
        .map(|p| (p.path.as_str(), p))
        .collect();
    let mut found: HashMap<&str, Vec<LateRow>> = HashMap::new();
    for (path, row) in rows {
        let Some((&p, _)) = listed.get_key_value(path.as_str()) else {
            return Err(Error::integrity(
                &entry.path,
                format!("a late row of {path}, which the source-lane does not list"),
            ));
        };
        found.entry(p).or_default().push(row);
    }
    for (path, expected) in verified {
        if !listed.contains_key(path) {
            continue;
        }
        if found.get(path).map_or(&[][..], Vec::as_slice) != expected.as_slice() {
            return Err(Error::integrity(
                &entry.path,
                format!("its late rows of {path} are not the partition's"),
            ));
        }
    }
    Ok(())
}

/// One source-lane's late rows in memory, with what the walk asks of them.
#[derive(Debug)]
pub struct LateLane {
    /// The object's path (content-addressed: the same path is the same rows).
    path: String,
    rows: Arc<RowBlock>,
    /// The day of each row's partition.
    days: Vec<Day>,
    /// Rows late on `committed_at`, as (commit instant, row), ascending.
    committed: Vec<(Instant, u32)>,
    /// Rows late on `available_at`, as (`available_at`, row), ascending.
    available: Vec<(Instant, u32)>,
    /// Of `committed` and `available`, the rows an as-of cut (no window start) can need:
    /// those before every other mark of their partition. A late mark after the partition's
    /// main commit (a correction) is never needed there: any cut that admits it also reaches
    /// the main commit, so the walk reads the partition and finds the row itself.
    committed_early: Vec<(Instant, u32)>,
    available_early: Vec<(Instant, u32)>,
    /// Per partition day: its late commits and its late hours.
    marks: HashMap<Day, (Vec<Instant>, Vec<Instant>)>,
    /// The path of each partition with late rows, by day.
    partitions: HashMap<Day, String>,
}

impl LateLane {
    /// Builds the lane from a late object's rows, each of whose partitions must be one of
    /// `partitions` (the source-lane's, from the manifest).
    fn new(
        path: &str,
        rows: Vec<(String, LateRow)>,
        partitions: &[PartitionEntry],
    ) -> Result<Self> {
        let by_path: HashMap<&str, Day> = partitions
            .iter()
            .map(|p| (p.path.as_str(), p.date))
            .collect();
        let mut days = Vec::with_capacity(rows.len());
        let mut committed = Vec::new();
        let mut available = Vec::new();
        let mut marks: HashMap<Day, (Vec<Instant>, Vec<Instant>)> = HashMap::new();
        let mut records = Vec::with_capacity(rows.len());
        let mut paths = HashMap::new();
        for (i, (p, l)) in rows.into_iter().enumerate() {
            let day = *by_path.get(p.as_str()).ok_or_else(|| {
                Error::integrity(path, format!("a late row of {p}, which is not listed"))
            })?;
            paths.entry(day).or_insert(p);
            let (c, a) = marks.entry(day).or_default();
            if l.on_committed {
                let at = l.row.committed_at.ok_or_else(|| {
                    Error::integrity(path, "a row late on committed_at without one")
                })?;
                committed.push((at, i as u32));
                c.push(at);
            }
            if l.on_available {
                let at = l.row.available_at.ok_or_else(|| {
                    Error::integrity(path, "a row late on available_at without one")
                })?;
                available.push((at, i as u32));
                a.push(hour_of(at));
            }
            days.push(day);
            records.push(l.row);
        }
        for (c, a) in marks.values_mut() {
            c.sort();
            c.dedup();
            a.sort();
            a.dedup();
        }
        committed.sort();
        available.sort();
        let by_day: HashMap<Day, &PartitionEntry> =
            partitions.iter().map(|p| (p.date, p)).collect();
        // The first mark of a partition that is not late, on each clock (`None`: no such mark,
        // or the marks are not listed, in which case the walk reads the partition for any cut
        // and never needs its late rows).
        let first_main = |day: Day, clock: VisibleBy| -> Option<Option<Instant>> {
            let p = by_day.get(&day)?;
            let (c, a) = &marks[&day];
            let (listed, apart) = match clock {
                VisibleBy::CommittedAt => (p.commits.as_ref()?, c),
                _ => (p.available_hours.as_ref()?, a),
            };
            Some(listed.iter().find(|m| !apart.contains(m)).copied())
        };
        let early = |list: &[(Instant, u32)], clock: VisibleBy, mark: fn(Instant) -> Instant| {
            list.iter()
                .filter(|(at, i)| match first_main(days[*i as usize], clock) {
                    None => false,
                    Some(None) => true,
                    Some(Some(main)) => mark(*at) < main,
                })
                .copied()
                .collect::<Vec<_>>()
        };
        let committed_early = early(&committed, VisibleBy::CommittedAt, |at| at);
        let available_early = early(&available, VisibleBy::AvailableAt, hour_of);
        Ok(LateLane {
            path: path.to_owned(),
            rows: Arc::new(records.into_iter().collect()),
            days,
            committed,
            available,
            committed_early,
            available_early,
            marks,
            partitions: paths,
        })
    }

    /// Whether the walk reads partition `p` for a window `(after, through]` on `clock`: it
    /// may hold a row there by a mark that is not late (a late mark's rows are here).
    pub fn walks(
        &self,
        p: &PartitionEntry,
        clock: VisibleBy,
        after: Option<Instant>,
        through: Instant,
    ) -> bool {
        let apart = match (self.marks.get(&p.date), clock) {
            (Some((c, _)), VisibleBy::CommittedAt) => c.as_slice(),
            (Some((_, a)), VisibleBy::AvailableAt) => a.as_slice(),
            _ => &[],
        };
        p.may_hold_besides(clock, after, through, apart)
    }

    /// The rows late on `clock` whose value lies in `(after, through]` and that a cut of that
    /// window may need (with no `after`, only those before their partition's other marks),
    /// with their partition's day, in the clock's order. `PublishedAt` has none: its rows are
    /// where they belong.
    pub fn within(
        &self,
        clock: VisibleBy,
        after: Option<Instant>,
        through: Instant,
    ) -> impl Iterator<Item = (Day, SharedRow)> + '_ {
        let list: &[(Instant, u32)] = match (clock, after) {
            (VisibleBy::CommittedAt, Some(_)) => &self.committed,
            (VisibleBy::CommittedAt, None) => &self.committed_early,
            (VisibleBy::AvailableAt, Some(_)) => &self.available,
            (VisibleBy::AvailableAt, None) => &self.available_early,
            (VisibleBy::PublishedAt, _) => &[],
        };
        let lo = after.map_or(0, |a| list.partition_point(|(at, _)| *at <= a));
        let hi = list.partition_point(|(at, _)| *at <= through);
        list[lo..hi.max(lo)].iter().map(|&(_, i)| {
            (
                self.days[i as usize],
                SharedRow::new(Arc::clone(&self.rows), i as usize),
            )
        })
    }
}

/// The late lanes of a version, by source-lane.
#[derive(Debug, Default, Clone)]
pub struct LateIndex {
    lanes: HashMap<(SourceId, Lane), Arc<LateLane>>,
}

impl LateIndex {
    /// Loads every late object `manifest` lists, taking over from `previous` the lanes whose
    /// object is the same (and whose partitions' days are unchanged for its rows).
    pub async fn load_after(
        store: &CorpusStore,
        manifest: &Manifest,
        lanes: &HashMap<(SourceId, Lane), Arc<[PartitionEntry]>>,
        previous: Option<&LateIndex>,
    ) -> Result<Self> {
        let mut out = HashMap::new();
        for e in manifest.access.iter().filter(|e| e.kind == KIND_LATE) {
            let Some(key) = lanes
                .keys()
                .find(|(s, l)| e.path.starts_with(&late_dir(*s, *l)))
                .copied()
            else {
                return Err(Error::integrity(
                    &e.path,
                    "a late object of a source-lane without partitions",
                ));
            };
            let partitions = &lanes[&key];
            // The same path is the same rows; each row's partition must still be listed on
            // its day (a rewritten partition changes the object, a new one without late rows
            // does not).
            if let Some(prev) = previous
                .and_then(|p| p.lanes.get(&key))
                .filter(|l| l.path == e.path)
                && still_listed(prev, partitions)
            {
                out.insert(key, Arc::clone(prev));
                continue;
            }
            let bytes = crate::store::objects::get_checked(store, &e.path, &e.sha256).await?;
            let rows = decode(&e.path, bytes)?;
            out.insert(key, Arc::new(LateLane::new(&e.path, rows, partitions)?));
        }
        Ok(LateIndex { lanes: out })
    }

    /// The late lane of a source-lane, if its version lists one.
    pub fn lane(&self, source: SourceId, lane: Lane) -> Option<Arc<LateLane>> {
        self.lanes.get(&(source, lane)).cloned()
    }
}

/// Whether every partition `lane` holds rows of is still listed in `partitions`, on its day.
fn still_listed(lane: &LateLane, partitions: &[PartitionEntry]) -> bool {
    lane.partitions.iter().all(|(d, path)| {
        partitions
            .binary_search_by_key(d, |p| p.date)
            .is_ok_and(|i| partitions[i].path == *path)
    })
}
