//! Publishing a new corpus version: partitions first, then the manifest, then the pointer.
//!
//! The pointer moves only by compare-and-swap from the version the publisher started from
//! ([`crate::store::CorpusStore::swap_pointer`]); a publisher that finds it moved rebases:
//! re-reads the new current version and re-applies its change set on top ([`rebasing`]).
//!
//! A crash at any step leaves the pointer on the previous version: objects written before the
//! crash are unreferenced (content-addressed, so a retry rewrites the same paths with the same
//! bytes) and nothing published is ever rewritten in place.
//!
//! A publish costs its change set, never the corpus: it reads only the partitions of the days
//! it adds rows to and of the days the id runs (`crate::format::ids`) name for its ids.
//! [`publish_onto`] reads as its named passes over the added rows: `survey` (ids and days),
//! `read_held` (the parent's heads of those ids), `decide` (revisions, in arrival order:
//! chained by `supersedes` within a source-lane, an identical re-ingest a no-op) and
//! `write_partitions` (one partition at a time, its added rows merged with the parent's rows of
//! that day a batch at a time). It holds ids and hashes of every row but the rows themselves a
//! chunk or a batch at a time, so a golden copy's day of millions of rows is never held. The
//! derived objects follow from the partitions written: access files (`crate::write::access`),
//! id runs, late rows, rule tables, then the Delta commits once the pointer has moved.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::access;
use crate::format::ids;
use crate::format::late;
use crate::format::lists::{self, ListObject};
use crate::model::clock::{Day, Instant, Lane, SourceId};
use crate::model::identity::IdentityFile;
use crate::model::manifest::{
    Certification, FORMAT, Manifest, ObjectEntry, SampleSet, derive_spans,
};
use crate::model::record::NewsRow;
use crate::store::CorpusStore;
use crate::store::hashing::sha256_hex;
use crate::write::encode::{encode_partition, put_partition};
use crate::write::spill::{RowSpill, SortedRows};

/// Everything one publish adds on top of the parent version.
#[derive(Debug, Default, Clone)]
pub struct ChangeSet {
    /// New rows; `committed_at` must be set. Sealed here (content hash, revision id).
    pub rows: Vec<NewsRow>,
    /// More new rows, held by a large ingest in a temporary file ([`crate::write::spill`]); published
    /// before `rows`, in arrival order, under the same rules.
    pub spilled: Option<Arc<RowSpill>>,
    pub certifications: Vec<Certification>,
    /// Replaces the identity file when given.
    pub identity: Option<IdentityFile>,
    /// Replaces the sample set when given.
    pub sample: Option<SampleSet>,
    /// Replaces the list state of each source-lane given ([`crate::format::lists`]).
    pub lists: Vec<(SourceId, Lane, ListObject)>,
    pub notes: BTreeMap<String, String>,
}

/// The outcome of a publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub version: String,
    /// False when the change set added nothing new (identical re-ingest): no version written.
    pub changed: bool,
    pub rows_added: usize,
    pub rows_unchanged: usize,
}

/// Hook called between the publish steps; tests use it to simulate a crash at each step.
pub type StepHook<'a> = &'a (dyn Fn(PublishStep) -> Result<()> + Sync);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishStep {
    PartitionsWritten,
    ManifestWritten,
}

/// Publishes `changes` on top of the store's current version (if any) at `created_at`,
/// rebasing onto a version another publisher moved the pointer to meanwhile.
pub async fn publish(
    store: &CorpusStore,
    changes: ChangeSet,
    created_at: Instant,
) -> Result<Published> {
    publish_with_hook(store, changes, created_at, &|_| Ok(())).await
}

pub async fn publish_with_hook(
    store: &CorpusStore,
    changes: ChangeSet,
    created_at: Instant,
    hook: StepHook<'_>,
) -> Result<Published> {
    let changes = &changes;
    rebasing(|| async move {
        let parent = store.current_version().await?;
        publish_onto(store, parent.as_deref(), changes.clone(), created_at, hook).await
    })
    .await
}

/// How many times a publisher rebases before it gives up ([`Error::PointerMoved`]).
pub const MAX_PUBLISH_ATTEMPTS: usize = 200;

/// Runs one publish attempt after another while the pointer moved under it (each attempt
/// re-reads the current version and re-derives what depends on it), waiting a random
/// 0–20 ms between attempts so racing publishers spread out; after
/// [`MAX_PUBLISH_ATTEMPTS`] the last `PointerMoved` is the answer. Callers whose change set
/// depends on the parent (the ingest pipeline) put that derivation inside `attempt`.
pub async fn rebasing<T, E, F, Fut>(mut attempt: F) -> Result<T, E>
where
    E: Rebase,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await {
            Err(e) if e.pointer_moved() && tries < MAX_PUBLISH_ATTEMPTS => {
                tracing::debug!(tries, "pointer moved; rebasing");
                let jitter = rand::random_range(0..=20_000u64);
                tokio::time::sleep(std::time::Duration::from_micros(jitter)).await;
            }
            Err(e) if e.pointer_moved() => {
                tracing::warn!(tries, "publish gave up rebasing");
                return Err(e);
            }
            other => return other,
        }
    }
}

/// An error type that can say "the pointer moved" (the engine's, and the error types of
/// crates that publish through it).
pub trait Rebase {
    fn pointer_moved(&self) -> bool;
}

impl Rebase for Error {
    fn pointer_moved(&self) -> bool {
        matches!(self, Error::PointerMoved { .. })
    }
}

/// One publish attempt on top of `parent_version` (`None`: the first version): writes the
/// objects and the manifest, then moves the pointer from `parent_version` to the new version
/// by compare-and-swap; [`Error::PointerMoved`] when another publisher moved it first (the
/// objects written stay unreferenced and are reused by the rebased attempt).
///
/// The steps, each a function below: [`survey`] the rows added (pass 1), [`read_held`] what
/// of the parent they touch, [`decide`] each row against it (pass 2), then step 1 writes the
/// objects ([`write_id_runs`], [`write_partitions`] (pass 3), the access, late, list and
/// identity objects, and after them the rule tables of `crate::rule`), step 2 the manifest, step 3 moves the pointer, step 4 writes the
/// version's Delta commits.
pub async fn publish_onto(
    store: &CorpusStore,
    parent_version: Option<&str>,
    changes: ChangeSet,
    created_at: Instant,
    hook: StepHook<'_>,
) -> Result<Published> {
    let parent = match parent_version {
        Some(v) => Some((v.to_owned(), store.manifest(v).await?)),
        None => None,
    };
    let parent_manifest = parent.as_ref().map(|(_, m)| m);
    let mut manifest = next_manifest(parent.as_ref(), created_at);
    let ChangeSet {
        rows,
        spilled,
        certifications,
        identity,
        sample,
        lists,
        notes,
    } = changes;

    // The rows this publish adds, in arrival order: a large ingest's spilled rows, then the
    // in-memory ones. Each pass reads them one flush at a time (`crate::write::spill`), so a publish
    // holds ids and hashes of every row but the rows themselves only a chunk or a partition
    // at a time.
    let mut local = RowSpill::new();
    local.extend(rows);
    let inputs: Vec<&RowSpill> = spilled.as_deref().into_iter().chain([&local]).collect();

    let arrivals = survey(&inputs)?;
    let held = match parent_manifest {
        Some(pm) => read_held(store, pm, &arrivals.wanted).await?,
        None => Held::default(),
    };
    let decided = decide(&inputs, held.heads, &arrivals.repeated)?;
    drop((arrivals, local));

    // Step 1: partitions, id runs, access files, late rows, lists and identity objects.
    write_id_runs(store, &mut manifest, decided.fresh_ids, held.unindexed).await?;
    // A group that will be derived whole from its partitions needs no copy of its added
    // rows: copies of a big ingest's rows would double what it holds while the partitions
    // are written.
    let mut derive_whole: HashSet<(SourceId, Lane, i32)> = decided
        .added_per_group
        .into_iter()
        .filter(|(g, n)| crate::write::access::derives_whole(&manifest, *g, *n))
        .map(|(g, _)| g)
        .collect();
    let written = write_partitions(
        store,
        &mut manifest,
        parent_manifest,
        decided.rows,
        &derive_whole,
    )
    .await?;
    derive_whole.extend(groups_without_access_files(&manifest));
    crate::write::access::update(store, &mut manifest, written.added_by_group, &derive_whole)
        .await?;
    // Only a publish that adds rows changes them (an identical re-ingest of a corpus written
    // before late objects existed still publishes nothing).
    if decided.added > 0 {
        crate::write::late::update(store, &mut manifest, parent_manifest, written.late).await?;
    }
    for (source, lane, state) in &lists {
        lists::write(store, &mut manifest, *source, *lane, state).await?;
    }
    if let Some(identity) = identity {
        manifest.identity = vec![write_identity(store, &identity).await?];
    }
    hook(PublishStep::PartitionsWritten)?;

    // Step 2: the manifest.
    for c in certifications {
        if !manifest.certifications.contains(&c) {
            manifest.certifications.push(c);
        }
    }
    canonical_order(&mut manifest);
    if sample.is_some() {
        manifest.sample = sample;
    }
    manifest.notes.extend(notes);
    // Nothing new (identical re-ingest): keep the parent; no version is written.
    if let Some((v, m)) = &parent
        && decided.added == 0
        && *m
            == (Manifest {
                parent: m.parent.clone(),
                created_at: m.created_at,
                ..manifest.clone()
            })
    {
        // Nothing to publish, but the log of the current version may be behind (a publisher
        // stopped after its pointer): the same run finishes it.
        sync_delta(store, v).await;
        return Ok(Published {
            version: v.clone(),
            changed: false,
            rows_added: 0,
            rows_unchanged: decided.unchanged,
        });
    }
    // The rule tables other engines read beside each record table (`crate::rule`): from the
    // parent's and the partitions this publish wrote, never the corpus.
    crate::rule::tables::update(store, &mut manifest, parent_manifest).await?;
    // The Delta table versions this corpus version is (`crate::format::delta`), recorded in it.
    let parent_tables = match &parent {
        Some((v, m)) => Some((m, crate::format::delta::versions_of(store, v, m).await?)),
        None => None,
    };
    manifest.delta = Some(crate::format::delta::next_versions(
        parent_tables.as_ref().map(|(m, t)| (*m, t)),
        &manifest,
    ));
    let version = store.put_manifest(&manifest).await?;
    hook(PublishStep::ManifestWritten)?;

    // Step 3: move the pointer, if it still names the parent.
    store.swap_pointer(parent_version, &version).await?;
    // Step 4: the Delta commits of the version, which name it (so they follow the pointer).
    sync_delta(store, &version).await;
    Ok(Published {
        version,
        changed: true,
        rows_added: decided.added,
        rows_unchanged: decided.unchanged,
    })
}

/// The manifest a publish starts from: the parent's, re-parented and re-dated, or an empty
/// first one.
fn next_manifest(parent: Option<&(String, Manifest)>, created_at: Instant) -> Manifest {
    match parent {
        Some((v, m)) => Manifest {
            parent: Some(v.clone()),
            created_at,
            ..m.clone()
        },
        None => Manifest {
            format: FORMAT.into(),
            created_at,
            parent: None,
            partitions: vec![],
            certifications: vec![],
            spans: vec![],
            identity: vec![],
            access: vec![],
            notes: BTreeMap::new(),
            sample: None,
            delta: None,
        },
    }
}

/// A (source, lane, id) key: ids are unique within a source-lane only (the forward and
/// certified lanes of EDGAR share accession ids).
type RowKey = (SourceId, Lane, String);

/// What pass 1 learns of the rows added.
struct Arrivals {
    /// Per source-lane, the ids added and the days their rows land on.
    wanted: BTreeMap<(SourceId, Lane), (HashSet<String>, BTreeSet<Day>)>,
    /// The ids that arrive more than once (whose later rows are compared with the earlier).
    repeated: HashSet<RowKey>,
}

/// Pass 1: what the added rows are, before anything of the parent is read.
fn survey(inputs: &[&RowSpill]) -> Result<Arrivals> {
    let mut wanted: BTreeMap<(SourceId, Lane), (HashSet<String>, BTreeSet<Day>)> = BTreeMap::new();
    let mut repeated = HashSet::new();
    for_each_row(inputs, |r| {
        let (ids, days) = wanted.entry((r.source_id, r.lane)).or_default();
        days.extend(r.partition_day());
        if !ids.insert(r.id.clone()) {
            repeated.insert((r.source_id, r.lane, r.id));
        }
        Ok(())
    })?;
    Ok(Arrivals { wanted, repeated })
}

/// The parent's side of the ids a publish adds.
#[derive(Default)]
struct Heads {
    /// key -> (current revision, content).
    current: HashMap<RowKey, (String, String)>,
    /// key -> the revisions of it already superseded (held, or replaced earlier in this
    /// publish). A revision id is a hash of the content, so a row equal to one of them would
    /// bring back a revision the record's history already holds, under the same id: the
    /// cut's supersession map (keyed by revision id) would then hide the record from the
    /// first supersession on. Such a row (an older capture ingested after a newer one) is
    /// taken as already held.
    history: HashMap<RowKey, HashSet<String>>,
}

/// What [`read_held`] finds in the parent.
#[derive(Default)]
struct Held {
    heads: Heads,
    /// Id entries of every row of the source-lanes that had no id runs (read whole).
    unindexed: HashMap<(SourceId, Lane), Vec<ids::IdEntry>>,
}

/// Reads what of the parent this publish touches: for each source-lane it adds rows to, the
/// partitions of the days those rows land on (rewritten with them, read again then) and of
/// the days the id runs say hold a revision of one of its ids; nothing of other
/// source-lanes. A source-lane without runs (a corpus written before them) is read whole
/// once, and indexed on the way.
async fn read_held(
    store: &CorpusStore,
    pm: &Manifest,
    wanted: &BTreeMap<(SourceId, Lane), (HashSet<String>, BTreeSet<Day>)>,
) -> Result<Held> {
    let mut held = Held::default();
    for ((source, lane), (ids, days)) in wanted {
        let (source, lane) = (*source, *lane);
        let mut days = days.clone();
        let whole = match crate::read::ids::days_holding(
            store,
            pm,
            source,
            lane,
            ids.iter().map(String::as_str),
        )
        .await?
        {
            Some(found) => {
                days.extend(found);
                false
            }
            None => {
                days.extend(
                    pm.partitions
                        .iter()
                        .filter(|p| p.source_id == source && p.lane == lane)
                        .map(|p| p.date),
                );
                true
            }
        };
        let mut superseded = HashSet::new();
        let mut heads: Vec<(String, String, String)> = Vec::new();
        for p in pm
            .partitions
            .iter()
            .filter(|p| p.source_id == source && p.lane == lane && days.contains(&p.date))
        {
            // Streamed: the day's partition may be a golden copy's millions of rows.
            for r in crate::store::objects::partition_rows(store, p).await? {
                let r = r?;
                if whole && let Some(d) = r.partition_day() {
                    held.unindexed
                        .entry((source, lane))
                        .or_default()
                        .push(ids::entry(&r.id, d));
                }
                if let Some(s) = r.supersedes {
                    superseded.insert(s);
                }
                if ids.contains(&r.id) {
                    heads.push((r.id, r.revision_id, r.content_sha256));
                }
            }
        }
        // Every revision of a wanted id is in a partition read (the runs name each day
        // holding one), so its chain is whole here.
        for (id, rev, content) in heads {
            if superseded.contains(&rev) {
                held.heads
                    .history
                    .entry((source, lane, id))
                    .or_default()
                    .insert(rev);
            } else {
                held.heads
                    .current
                    .insert((source, lane, id), (rev, content));
            }
        }
    }
    Ok(held)
}

/// What pass 2 decided.
struct Decided {
    /// The rows to write, sealed, each with the revision it supersedes.
    rows: RowSpill,
    added: usize,
    unchanged: usize,
    /// The id entries of the rows added, per source-lane.
    fresh_ids: HashMap<(SourceId, Lane), Vec<ids::IdEntry>>,
    /// Rows added per access group (sources clustered by CIK), for their delta files.
    added_per_group: BTreeMap<(SourceId, Lane, i32), u64>,
}

/// Pass 2, in arrival order: seals each row and decides it against what is current (the
/// parent's head, or an earlier row of this publish with the same id): unchanged, new, or a
/// revision superseding the current one.
fn decide(inputs: &[&RowSpill], heads: Heads, repeated: &HashSet<RowKey>) -> Result<Decided> {
    let Heads {
        mut current,
        mut history,
    } = heads;
    let mut d = Decided {
        rows: RowSpill::new(),
        added: 0,
        unchanged: 0,
        fresh_ids: HashMap::new(),
        added_per_group: BTreeMap::new(),
    };
    for_each_row(inputs, |row| {
        if row.committed_at.is_none() {
            return Err(Error::invalid(
                "rows",
                format!("row {} has no committed_at", row.id),
            ));
        }
        let mut row = row.seal();
        let key = (row.source_id, row.lane, row.id.clone());
        if history
            .get(&key)
            .is_some_and(|h| h.contains(&row.revision_id))
        {
            d.unchanged += 1;
            return Ok(());
        }
        match current.get(&key) {
            Some((_, content)) if *content == row.content_sha256 => {
                d.unchanged += 1;
                return Ok(());
            }
            Some((rev, _)) => row.supersedes = Some(rev.clone()),
            None => row.supersedes = None,
        }
        let day = row.partition_day().ok_or_else(|| {
            Error::invalid(
                "rows",
                format!("row {} has no clock to place it on a day", row.id),
            )
        })?;
        if repeated.contains(&key) {
            if let Some(old) = &row.supersedes {
                history.entry(key.clone()).or_default().insert(old.clone());
            }
            current.insert(key, (row.revision_id.clone(), row.content_sha256.clone()));
        }
        d.fresh_ids
            .entry((row.source_id, row.lane))
            .or_default()
            .push(ids::entry(&row.id, day));
        if let Some(g) = access::group_of_day(row.source_id, row.lane, day) {
            *d.added_per_group.entry(g).or_default() += 1;
        }
        d.rows.push(row);
        d.added += 1;
        Ok(())
    })?;
    Ok(d)
}

/// Adds the id runs of the rows added. A source-lane read whole because it had no runs gets
/// a run of all its rows, once it changes (an identical re-ingest still publishes nothing).
async fn write_id_runs(
    store: &CorpusStore,
    manifest: &mut Manifest,
    mut fresh_ids: HashMap<(SourceId, Lane), Vec<ids::IdEntry>>,
    unindexed: HashMap<(SourceId, Lane), Vec<ids::IdEntry>>,
) -> Result<()> {
    for (lane, all) in unindexed {
        if let Some(fresh) = fresh_ids.get_mut(&lane) {
            fresh.extend(all);
        }
    }
    let mut fresh_ids: Vec<_> = fresh_ids.into_iter().collect();
    fresh_ids.sort_by_key(|(k, _)| *k);
    for ((source, lane), entries) in fresh_ids {
        crate::write::ids::add(store, manifest, source, lane, entries).await?;
    }
    Ok(())
}

/// What pass 3 leaves for the derived objects.
struct Written {
    /// The added rows of each access group not derived whole, for its delta file.
    added_by_group: BTreeMap<(SourceId, Lane, i32), Vec<NewsRow>>,
    /// Each new partition's late rows, by its path.
    late: HashMap<String, Vec<late::LateRow>>,
}

/// Pass 3, one partition at a time: a day's added rows merged with the parent's rows of
/// that day into the day's new partition, which replaces the old one in `manifest`.
async fn write_partitions(
    store: &CorpusStore,
    manifest: &mut Manifest,
    parent: Option<&Manifest>,
    decided: RowSpill,
    derive_whole: &HashSet<(SourceId, Lane, i32)>,
) -> Result<Written> {
    let mut out = Written {
        added_by_group: BTreeMap::new(),
        late: HashMap::new(),
    };
    for key in decided.keys() {
        let (source, lane, Some(day)) = key else {
            return Err(Error::integrity("row spill", "a decided row without a day"));
        };
        // The day's added rows and the parent's rows of that day, both in partition order,
        // merged into the new partition a batch at a time (a golden copy's day runs to
        // millions of rows); the added rows of an access group are copied on the way.
        let mut copies = access::group_of_day(source, lane, day)
            .filter(|g| !derive_whole.contains(g))
            .map(|g| out.added_by_group.entry(g).or_default());
        let held = parent.and_then(|pm| {
            pm.partitions
                .iter()
                .find(|p| p.source_id == source && p.lane == lane && p.date == day)
        });
        let held = match held {
            Some(p) => Some(crate::store::objects::partition_rows(store, p).await?),
            None => None,
        };
        let added = decided.sorted_rows(&key)?.inspect(|r| {
            if let (Some(c), Ok(r)) = (copies.as_mut(), r) {
                c.push(r.clone());
            }
        });
        let mut sources: Vec<Box<dyn Iterator<Item = Result<NewsRow>> + Send + '_>> =
            vec![Box::new(added)];
        sources.extend(held.map(|h| Box::new(h) as Box<dyn Iterator<Item = _> + Send>));
        // The partition's late rows are found on the way (`crate::format::late`), so the late
        // objects need not read back what this publish writes.
        let mut finder = late::Finder::default();
        let rows = SortedRows::new(sources)?.inspect(|r| {
            if let Ok(r) = r {
                finder.add(r);
            }
        });
        let encoded = encode_partition(rows)?;
        let entry = put_partition(store, source, lane, day, encoded).await?;
        out.late.insert(entry.path.clone(), finder.finish());
        manifest
            .partitions
            .retain(|p| !(p.source_id == source && p.lane == lane && p.date == day));
        manifest.partitions.push(entry);
    }
    manifest
        .partitions
        .sort_by_key(|p| (p.source_id, p.lane, p.date));
    Ok(out)
}

/// Years with partitions and no access file of the current layout (a corpus published before
/// access files existed, or before their layout changed): derived whole on this publish.
fn groups_without_access_files(manifest: &Manifest) -> Vec<(SourceId, Lane, i32)> {
    manifest
        .partitions
        .iter()
        .filter_map(access::group_of)
        .filter(|&(s, l, y)| {
            !manifest.access.iter().any(|e| {
                e.kind == access::KIND_CLUSTERED && e.path.starts_with(&access::group_dir(s, l, y))
            })
        })
        .collect()
}

/// The last two publish steps for writers that store their objects themselves (the bench
/// corpus generator streams partitions day by day): puts `manifest` in canonical order with
/// spans derived from its certifications, then moves the pointer to it from its `parent`
/// (compare-and-swap: [`Error::PointerMoved`] if the pointer names another version).
pub async fn publish_manifest(store: &CorpusStore, mut manifest: Manifest) -> Result<String> {
    canonical_order(&mut manifest);
    let parent_tables = match &manifest.parent {
        Some(v) => {
            let pm = store.manifest(v).await?;
            let t = crate::format::delta::versions_of(store, v, &pm).await?;
            Some((pm, t))
        }
        None => None,
    };
    crate::rule::tables::update(store, &mut manifest, parent_tables.as_ref().map(|(m, _)| m))
        .await?;
    manifest.delta = Some(crate::format::delta::next_versions(
        parent_tables.as_ref().map(|(m, t)| (m, t)),
        &manifest,
    ));
    let version = store.put_manifest(&manifest).await?;
    store
        .swap_pointer(manifest.parent.as_deref(), &version)
        .await?;
    sync_delta(store, &version).await;
    Ok(version)
}

/// Publishes the current version of `from` as the first version of the empty store `to`: its
/// objects copied path for path (content-addressed, so the same bytes under the same names),
/// its manifest with no parent and its Delta tables starting at version 0. `asof build-sample`
/// builds the sample by ordinary ingests, a version each, and ships the last one alone.
pub async fn publish_as_first(from: &CorpusStore, to: &CorpusStore) -> Result<String> {
    if let Some(v) = to.current_version().await? {
        return Err(Error::InvalidInput {
            param: to.display().to_owned(),
            message: format!(
                "already holds a corpus ({v}); a first version goes into an empty store"
            ),
        });
    }
    let (_, mut manifest) = from.current().await?;
    let paths = manifest
        .partitions
        .iter()
        .map(|p| &p.path)
        .chain(manifest.identity.iter().map(|e| &e.path))
        .chain(manifest.access.iter().map(|e| &e.path));
    for path in paths {
        to.put_immutable(path, from.get(path).await?).await?;
    }
    manifest.parent = None;
    manifest.delta = None;
    publish_manifest(to, manifest).await
}

/// Writes the Delta commits up to `version` once its pointer has moved. The version is
/// published whatever happens here: a failure is logged, and the next publish (or
/// `asof delta backfill`) writes what is missing; `asof verify` reports a log behind.
async fn sync_delta(store: &CorpusStore, version: &str) {
    if let Err(e) = crate::write::delta::sync(store, version).await {
        tracing::warn!(%version, error = %e, "Delta log not written; the next publish or `asof delta backfill` writes it");
    }
}

/// Puts a manifest's lists in their one order and derives its spans from its certifications.
fn canonical_order(manifest: &mut Manifest) {
    manifest
        .partitions
        .sort_by_key(|p| (p.source_id, p.lane, p.date));
    manifest.certifications.sort_by(|a, b| {
        (a.source_id, a.lane, a.from, a.to, a.certified_at).cmp(&(
            b.source_id,
            b.lane,
            b.from,
            b.to,
            b.certified_at,
        ))
    });
    manifest.spans = derive_spans(&manifest.certifications);
    manifest.access.sort_by(|a, b| a.path.cmp(&b.path));
}

/// Calls `f` with every row of `inputs`, one after the other, in arrival order.
fn for_each_row(inputs: &[&RowSpill], mut f: impl FnMut(NewsRow) -> Result<()>) -> Result<()> {
    for spill in inputs {
        spill.for_each(&mut f)?;
    }
    Ok(())
}

async fn write_identity(store: &CorpusStore, identity: &IdentityFile) -> Result<ObjectEntry> {
    let bytes = identity.to_parquet()?;
    let sha = sha256_hex(&bytes);
    let path = format!("snapshots/identity/{sha}.parquet");
    let len = bytes.len() as u64;
    store.put_immutable(&path, Bytes::from(bytes)).await?;
    Ok(ObjectEntry {
        kind: "identity.ticker_intervals".into(),
        path,
        bytes: len,
        sha256: sha,
        row_count: identity.tickers.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{cert, edgar, t};
    use crate::verify::verify;

    fn changes(n: usize) -> ChangeSet {
        ChangeSet {
            rows: (0..n)
                .map(|i| {
                    edgar(
                        &format!("0000000001-26-00000{i}"),
                        "1",
                        Some("2026-01-05T09:00:00Z"),
                        "2026-01-06T00:00:00Z",
                    )
                })
                .collect(),
            certifications: vec![cert(
                Lane::CertifiedPit,
                "2026-01-01",
                "2026-01-31",
                "2026-02-01T00:00:00Z",
            )],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_crash_at_any_publish_step_leaves_the_previous_version_served() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let first = publish(&store, changes(1), t("2026-03-01T00:00:00Z"))
            .await
            .unwrap();
        for step in [PublishStep::PartitionsWritten, PublishStep::ManifestWritten] {
            let crash = move |s: PublishStep| {
                if s == step {
                    Err(Error::invalid("test", "simulated crash"))
                } else {
                    Ok(())
                }
            };
            assert!(
                publish_with_hook(&store, changes(3), t("2026-03-02T00:00:00Z"), &crash)
                    .await
                    .is_err()
            );
            assert_eq!(
                store.current_version().await.unwrap().as_deref(),
                Some(first.version.as_str())
            );
            verify(&store, None).await.unwrap();
        }
        // A retry after the crash publishes normally (content-addressed objects are rewritten
        // with the same bytes).
        let second = publish(&store, changes(3), t("2026-03-02T00:00:00Z"))
            .await
            .unwrap();
        assert_ne!(second.version, first.version);
        assert_eq!(
            store
                .manifest(&second.version)
                .await
                .unwrap()
                .parent
                .as_deref(),
            Some(first.version.as_str())
        );
    }

    #[tokio::test]
    async fn identical_reingest_publishes_no_new_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let first = publish(&store, changes(2), t("2026-03-01T00:00:00Z"))
            .await
            .unwrap();
        let again = publish(&store, changes(2), t("2026-03-05T00:00:00Z"))
            .await
            .unwrap();
        assert!(!again.changed);
        assert_eq!(again.version, first.version);
        assert_eq!(again.rows_unchanged, 2);
    }

    #[tokio::test]
    async fn the_last_of_a_chain_is_published_alone_as_a_first_version_of_its_own() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (chain, alone) = (
            CorpusStore::local(a.path()).unwrap(),
            CorpusStore::local(b.path()).unwrap(),
        );
        publish(&chain, changes(1), t("2026-03-01T00:00:00Z"))
            .await
            .unwrap();
        let last = publish(&chain, changes(3), t("2026-03-02T00:00:00Z"))
            .await
            .unwrap();
        let version = publish_as_first(&chain, &alone).await.unwrap();
        assert_ne!(version, last.version);
        let (m, from) = (
            alone.manifest(&version).await.unwrap(),
            chain.manifest(&last.version).await.unwrap(),
        );
        assert_eq!(m.parent, None);
        assert!(
            m.delta.as_ref().unwrap().values().all(|v| *v == 0),
            "{:?}",
            m.delta
        );
        assert_eq!(
            Manifest {
                parent: from.parent.clone(),
                delta: from.delta.clone(),
                ..m.clone()
            },
            from
        );
        // Every object it names is there with its bytes, and the Delta log starts at 0.
        assert_eq!(verify(&alone, None).await.unwrap().version, version);
        assert!(
            b.path()
                .join("snapshots/partitions/sec.edgar/certified_pit/_delta_log/00000000000000000000.json")
                .exists()
        );
        // Only into an empty store: a corpus there is refused and left as it is.
        let err = publish_as_first(&chain, &alone)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("already holds a corpus"), "{err}");
        assert_eq!(alone.current_version().await.unwrap(), Some(version));
    }

    fn rows_of(dir: &std::path::Path, m: &Manifest) -> Vec<NewsRow> {
        m.partitions
            .iter()
            .flat_map(|p| {
                let bytes = std::fs::read(dir.join(&p.path)).unwrap();
                crate::store::objects::decode_parquet(&p.path, Bytes::from(bytes)).unwrap()
            })
            .collect()
    }

    #[tokio::test]
    async fn an_older_capture_ingested_after_a_newer_one_brings_back_no_revision_the_record_held() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let put = |rows: Vec<NewsRow>, at: &'static str| {
            let store = store.clone();
            async move {
                publish(
                    &store,
                    ChangeSet {
                        rows,
                        ..Default::default()
                    },
                    t(at),
                )
                .await
                .unwrap()
            }
        };
        let old = edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-05T16:00:00Z"),
            "2026-01-06T00:00:00Z",
        );
        let mut new = old.clone();
        new.title = "8-K - corrected".into();
        new.committed_at = Some(t("2026-01-07T00:00:00Z"));
        put(vec![old.clone()], "2026-01-06T00:00:00Z").await;
        put(vec![new.clone()], "2026-01-07T00:00:00Z").await;
        let again = |r: &NewsRow| NewsRow {
            committed_at: Some(t("2026-01-08T00:00:00Z")),
            ..r.clone()
        };
        // Both captures again, older first, then the older alone: nothing to publish.
        let both = put(vec![again(&old), again(&new)], "2026-01-08T00:00:00Z").await;
        assert!(!both.changed, "{both:?}");
        assert_eq!(both.rows_unchanged, 2);
        let alone = put(vec![again(&old)], "2026-01-08T00:00:00Z").await;
        assert!(!alone.changed, "{alone:?}");
        // Within one publish, a content seen earlier in it is not brought back either.
        let other = edgar(
            "0000000001-26-000002",
            "1",
            Some("2026-01-05T17:00:00Z"),
            "2026-01-09T00:00:00Z",
        );
        let mut fixed = other.clone();
        fixed.title = "8-K - fixed".into();
        let p = put(vec![other.clone(), fixed, other], "2026-01-09T00:00:00Z").await;
        assert_eq!((p.rows_added, p.rows_unchanged), (2, 1));

        let (_, m) = store.current().await.unwrap();
        let rows = rows_of(dir.path(), &m);
        let revs: HashSet<&str> = rows.iter().map(|r| r.revision_id.as_str()).collect();
        assert_eq!(revs.len(), rows.len(), "every revision id once: {rows:?}");
        assert_eq!(rows.len(), 4);
        // And the record is in force as corrected.
        let c = crate::read::corpus::Corpus::open(store).await.unwrap();
        match c
            .record(
                "0000000001-26-000001_1",
                t("2026-01-10T00:00:00Z"),
                crate::model::clock::VisibleBy::CommittedAt,
            )
            .await
            .unwrap()
        {
            crate::read::corpus::RecordLookup::Visible(r) => assert_eq!(r.title, "8-K - corrected"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_revision_on_another_day_supersedes_the_one_the_id_runs_point_to() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut first: Vec<NewsRow> = (0..30)
            .map(|i| {
                edgar(
                    &format!("0000000001-26-{i:06}"),
                    "1",
                    Some(&format!("2026-01-{:02}T09:00:00Z", 1 + i % 28)),
                    "2026-02-01T00:00:00Z",
                )
            })
            .collect();
        publish(
            &store,
            ChangeSet {
                rows: first.clone(),
                ..Default::default()
            },
            t("2026-02-01T00:00:00Z"),
        )
        .await
        .unwrap();
        // A correction moves record 3 from 2026-01-04 to 2026-01-20.
        let mut fix = first.remove(3);
        fix.published_at = Some(t("2026-01-20T10:00:00Z"));
        fix.committed_at = Some(t("2026-02-02T00:00:00Z"));
        let out = publish(
            &store,
            ChangeSet {
                rows: vec![fix],
                ..Default::default()
            },
            t("2026-02-02T00:00:00Z"),
        )
        .await
        .unwrap();
        assert_eq!((out.rows_added, out.rows_unchanged), (1, 0));
        let (_, m) = store.current().await.unwrap();
        let all = rows_of(dir.path(), &m);
        let revs: Vec<&NewsRow> = all
            .iter()
            .filter(|r| r.id == "0000000001-26-000003_1")
            .collect();
        assert_eq!(revs.len(), 2);
        let new = revs.iter().find(|r| r.supersedes.is_some()).unwrap();
        let old = revs.iter().find(|r| r.supersedes.is_none()).unwrap();
        assert_eq!(new.supersedes.as_deref(), Some(old.revision_id.as_str()));
        assert_eq!(new.partition_day(), Some("2026-01-20".parse().unwrap()));
    }

    #[tokio::test]
    async fn the_same_id_in_two_lanes_is_two_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let certified = edgar(
            "0000000001-26-000001",
            "1",
            Some("2026-01-05T09:00:00Z"),
            "2026-01-06T00:00:00Z",
        );
        let mut forward = certified.clone();
        forward.lane = Lane::ForwardFirstSeen;
        forward.available_at = Some(t("2026-01-05T09:01:00Z"));
        forward.committed_at = Some(t("2026-01-05T09:01:00Z"));
        for (row, at) in [
            (forward, "2026-01-05T10:00:00Z"),
            (certified, "2026-01-06T00:00:00Z"),
        ] {
            publish(
                &store,
                ChangeSet {
                    rows: vec![row],
                    ..Default::default()
                },
                t(at),
            )
            .await
            .unwrap();
        }
        let (_, m) = store.current().await.unwrap();
        let all = rows_of(dir.path(), &m);
        assert_eq!(all.len(), 2);
        assert!(
            all.iter().all(|r| r.supersedes.is_none()),
            "a certified row does not supersede the forward lane's first-seen row"
        );
    }

    #[tokio::test]
    async fn a_corpus_without_id_runs_is_indexed_on_its_next_publish() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let first = publish(&store, changes(3), t("2026-03-01T00:00:00Z"))
            .await
            .unwrap();
        // The same version as an engine without id runs would have written it.
        let mut m = store.manifest(&first.version).await.unwrap();
        m.access.retain(|e| e.kind != crate::format::ids::KIND_IDS);
        m.parent = Some(first.version.clone());
        let bare = publish_manifest(&store, m).await.unwrap();
        let (_, m) = store.current().await.unwrap();
        assert!(!crate::format::ids::indexed(
            &m,
            SourceId::SecEdgar,
            Lane::CertifiedPit
        ));
        // An identical re-ingest still publishes nothing.
        let again = publish(&store, changes(3), t("2026-03-02T00:00:00Z"))
            .await
            .unwrap();
        assert!(!again.changed);
        assert_eq!(again.version, bare);
        // A change indexes the whole source-lane, old rows included.
        let mut fix = changes(1).rows.remove(0);
        fix.title = "8-K/A - corrected".into();
        fix.committed_at = Some(t("2026-03-03T00:00:00Z"));
        publish(
            &store,
            ChangeSet {
                rows: vec![fix],
                ..Default::default()
            },
            t("2026-03-03T00:00:00Z"),
        )
        .await
        .unwrap();
        let (_, m) = store.current().await.unwrap();
        let runs = crate::format::ids::runs_of(&m, SourceId::SecEdgar, Lane::CertifiedPit);
        assert_eq!(runs.iter().map(|r| r.row_count).sum::<u64>(), 3);
        let days = crate::read::ids::days_holding(
            &store,
            &m,
            SourceId::SecEdgar,
            Lane::CertifiedPit,
            ["0000000001-26-000002_1"],
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(days.len(), 1);
        verify(&store, None).await.unwrap();
    }

    #[tokio::test]
    async fn published_objects_are_never_overwritten_with_other_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        store
            .put_immutable("snapshots/x", Bytes::from_static(b"one"))
            .await
            .unwrap();
        store
            .put_immutable("snapshots/x", Bytes::from_static(b"one"))
            .await
            .unwrap();
        assert!(
            store
                .put_immutable("snapshots/x", Bytes::from_static(b"two"))
                .await
                .is_err()
        );
        assert_eq!(
            store.get("snapshots/x").await.unwrap(),
            Bytes::from_static(b"one")
        );
    }

    /// Rows over many days, some ids twice with other content (the later supersedes), some
    /// revising what `base` published.
    fn mixed_rows(commit: &str) -> Vec<NewsRow> {
        let mut rows = Vec::new();
        for i in 0..60u32 {
            let day = 1 + i % 9;
            let mut r = edgar(
                &format!("0000000002-26-{i:06}"),
                &(i % 5).to_string(),
                Some(&format!("2026-01-{day:02}T1{}:00:00Z", i % 10)),
                commit,
            );
            r.title = format!("row {i}");
            rows.push(r);
        }
        for i in [3u32, 17, 40] {
            let mut again = rows[i as usize].clone();
            again.title = format!("row {i}, corrected");
            // A correction that moves the filing to another day.
            again.published_at = Some(t("2026-01-20T08:00:00Z"));
            rows.push(again);
        }
        // Unchanged repeat: counted once.
        rows.push(rows[5].clone());
        rows
    }

    #[tokio::test]
    async fn rows_spilled_to_a_file_publish_the_same_version_as_rows_in_memory() {
        let base: Vec<NewsRow> = mixed_rows("2026-02-01T00:00:00Z")
            .into_iter()
            .step_by(4)
            .map(|mut r| {
                r.title.push_str(" (first)");
                r
            })
            .collect();
        let mut results = Vec::new();
        for limit in [None, Some(1), Some(7)] {
            let dir = tempfile::tempdir().unwrap();
            let store = CorpusStore::local(dir.path()).unwrap();
            let first = ChangeSet {
                rows: base.clone(),
                ..Default::default()
            };
            publish(&store, first, t("2026-02-01T00:00:00Z"))
                .await
                .unwrap();
            let rows = mixed_rows("2026-03-01T00:00:00Z");
            let changes = match limit {
                None => ChangeSet {
                    rows,
                    ..Default::default()
                },
                Some(limit) => {
                    // Half spilled, half in memory: spilled rows arrive first.
                    let mut spill = RowSpill::with_limit(limit);
                    let mut rows = rows;
                    let tail = rows.split_off(30);
                    spill.extend(rows);
                    assert!(spill.spilled() > 0);
                    ChangeSet {
                        rows: tail,
                        spilled: Some(Arc::new(spill)),
                        ..Default::default()
                    }
                }
            };
            let p = publish(&store, changes, t("2026-03-01T00:00:00Z"))
                .await
                .unwrap();
            verify(&store, None).await.unwrap();
            results.push(p);
        }
        assert_eq!(results[0].rows_added, 63, "64 rows, one unchanged repeat");
        assert_eq!(results[0].rows_unchanged, 1);
        assert_eq!(results[1], results[0]);
        assert_eq!(results[2], results[0]);
    }

    #[tokio::test]
    async fn verify_names_the_partition_whose_bytes_changed() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        publish(&store, changes(2), t("2026-03-01T00:00:00Z"))
            .await
            .unwrap();
        let (_, m) = store.current().await.unwrap();
        let path = dir.path().join(&m.partitions[0].path);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[10] ^= 0x01;
        std::fs::write(&path, bytes).unwrap();
        let err = verify(&store, None).await.unwrap_err().to_string();
        assert!(err.contains(&m.partitions[0].path), "{err}");
    }
}
