//! `asof ingest`: files of one source in, one new corpus version out (or none), all or nothing.
//!
//! The steps, in order, each able to refuse the whole ingest before anything is written:
//! 1. the source's adapter parses every file (`crate::adapter` contract); any bad file or row
//!    stops here with an error naming the file and line or record;
//! 2. rows are checked against the request (source, lane, clocks not after the commit time, an
//!    accession number on every EDGAR record);
//! 3. list snapshots are compared with what the corpus already holds (added, removed,
//!    modified): OFAC's and GLEIF's changes become change rows (before/after in `payload`),
//!    visible from the snapshot's capture; SEC's ticker lists make no rows and feed the
//!    identity intervals only ([`list_makes_rows`]); every list's new state is kept;
//! 4. rows of cumulative files keep the first-seen instant of rows already held;
//! 5. stated and implied certifications get their evidence (file names and sha256);
//! 6. `asof_engine::write::publish` writes partitions, then the manifest, then moves the pointer, so a
//!    failure at any point leaves the previous version current.
//!
//! What the corpus holds is read narrowly, so an ingest costs its input and the partitions it
//! touches, not the corpus: the version's id runs (`asof_engine::format::ids`) name the partitions
//! that can hold the ingest's record ids, and a list snapshot is compared with the source-lane's
//! list state (`asof_engine::format::lists`), which the ingest publishes again with what changed.

use std::collections::{BTreeMap, HashMap, HashSet};

use asof_engine::format::identity::read_identity;
use asof_engine::format::lists::{self, ListObject, ListState, Listed, StateFileWriter};
use asof_engine::model::clock::{Day, Instant, Lane, SourceId};
use asof_engine::model::identity::IdentityFile;
use asof_engine::model::manifest::{Certification, Evidence, SampleSet};
use asof_engine::model::record::NewsRow;
use asof_engine::store::CorpusStore;
use asof_engine::store::objects::read_partition;
use asof_engine::write::publish::{ChangeSet, Published, publish_onto, rebasing};
use serde_json::{Value, json};

use crate::adapter::{Context, Input, Parsed, Snapshot, base_row, canonical_json};
use crate::entries::Seen;
use crate::error::{Error, Result};

/// One `asof ingest` invocation.
#[derive(Debug, Clone)]
pub struct Request {
    pub source: SourceId,
    pub lane: Lane,
    /// `committed_at` of every row this ingest adds, and `certified_at` of its certifications.
    pub commit_time: Instant,
    /// When the files were captured, for sources whose files do not say (`--captured-at`).
    pub captured_at: Option<Instant>,
    /// Days stated complete (`--certify FROM..TO`), inclusive.
    pub certify: Option<(Day, Day)>,
    pub files: Vec<Input>,
    /// What to take of the files and what to say with them, beyond the defaults.
    pub options: Options,
}

/// The `asof ingest` flags that narrow what an ingest takes from its files, or add what the
/// files cannot say (the default takes every row, certifies what the files imply, and
/// leaves notes and the sample set as they are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--since DAY`: rows whose partition day is before `DAY` are left out, and no day
    /// before it is certified (a company's submissions list decades of filings; a corpus
    /// may hold only the recent ones). Their days stay holes, never empty answers.
    pub since: Option<Day>,
    /// `--certify none`: no day is stated complete, not even the whole days the files imply
    /// (a daily index's day, a full list's capture day): the rows are held, their days stay
    /// outside the certified span.
    pub no_implied_certification: bool,
    /// `--identity-only`: only the files' identity observations (ticker lists, submissions
    /// captures) are taken; no row, no list change, no certification. For ticker files of
    /// another form than the list the lane keeps, and for captures older than its state.
    pub identity_only: bool,
    /// `--note TEXT`: the source's note in the manifest (what `/v1/meta` says of its scope).
    pub note: Option<String>,
    /// `--sample-set FILE`: the corpus's public sample set (companies and days anonymous
    /// callers may query), replacing the one held.
    pub sample: Option<SampleSet>,
}

/// What an ingest did; `published.changed` is false for an identical re-ingest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub published: Published,
    /// Change rows made from list snapshots, by kind (`added`, `removed`, `modified`).
    pub changes: BTreeMap<String, usize>,
    pub certified: Vec<(Day, Day)>,
    /// Identity observations (ticker lists, submissions captures) new to the version.
    pub observations: usize,
}

/// Progress of a long ingest, for the CLI's progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Files parsed so far, of the total.
    Parsed(usize, usize),
    /// Reading what the current version holds of the source, to compare.
    Comparing,
    Publishing,
}

/// Parses `--certify 2026-01-05..2026-01-09` (a single day is also accepted).
pub fn parse_day_range(s: &str) -> Result<(Day, Day)> {
    let bad = || {
        Error::parse(
            "--certify",
            s,
            "expected YYYY-MM-DD..YYYY-MM-DD (inclusive) or one YYYY-MM-DD",
        )
    };
    let (a, b) = s.split_once("..").unwrap_or((s, s));
    let from: Day = a.trim().parse().map_err(|()| bad())?;
    let to: Day = b.trim().parse().map_err(|()| bad())?;
    if from > to {
        return Err(Error::parse(
            "--certify",
            s,
            "the range ends before it starts",
        ));
    }
    Ok((from, to))
}

/// Runs the source's adapter over the request's files.
pub fn parse_files(req: &Request) -> Result<Parsed> {
    let ctx = Context {
        source: req.source,
        lane: req.lane,
        captured_at: req.captured_at,
    };
    if req.files.is_empty() {
        return Err(Error::parse("(arguments)", "files", "no input files given"));
    }
    if req.lane == Lane::ForwardFirstSeen && req.source != SourceId::SecEdgar {
        return Err(Error::parse(
            "--lane",
            req.lane.as_str(),
            format!(
                "only sec.edgar has a forward_first_seen lane (a live poller); {} is certified_pit only",
                req.source
            ),
        ));
    }
    let parsed = crate::sources::parse(&req.files, &ctx)?;
    if !req.options.identity_only {
        return Ok(parsed);
    }
    // Identity only: the observations and names, nothing that would become a row, a list
    // change or a certification.
    if parsed.observations.is_empty() && parsed.names.is_empty() {
        return Err(Error::parse(
            "--identity-only",
            req.files
                .iter()
                .map(Input::name)
                .collect::<Vec<_>>()
                .join(", "),
            "the files carry no identity observations (only SEC ticker lists and submissions captures do)",
        ));
    }
    if let Some((from, to)) = req.certify {
        return Err(Error::parse(
            "--certify",
            format!("{from}..{to}"),
            "an --identity-only ingest adds no rows, so it certifies no day",
        ));
    }
    Ok(Parsed {
        observations: parsed.observations,
        names: parsed.names,
        ..Parsed::default()
    })
}

/// What the store's current version holds of one source and lane that an ingest compares
/// its rows with: the current revision of each record it names (all records, when it brings a
/// list snapshot, whose change rows must be compared with the whole list), and the
/// certifications.
#[derive(Default)]
pub struct Held {
    pub rows: Vec<NewsRow>,
    pub certifications: Vec<Certification>,
    /// The list as the corpus holds it, when the ingest brings a list snapshot (folded from
    /// the partitions when the version has no list state; empty when `list_stream` holds it).
    pub list: ListState,
    /// The version's list state as a stream, for a golden copy (too big to hold).
    pub list_stream: Option<lists::StateReader>,
    /// The version's identity file, when the ingest brings identity observations.
    pub identity: Option<IdentityFile>,
}

/// What `prepare` needs of the current version for one ingest.
#[derive(Debug, Clone, Copy, Default)]
struct Wants {
    /// The ingest brings a list snapshot: the list state (or every row, to fold one).
    list: bool,
    /// The list is too big to hold: the list state as a stream rather than in memory.
    stream: bool,
    /// The ingest brings identity observations: the identity file.
    identity: bool,
    /// The held revisions of the ingest's own ids (the forward lane keeps first sightings;
    /// cumulative files keep first-seen instants). Other ingests leave revisions to publish,
    /// which compares ids and hashes only.
    rows: bool,
}

/// Reads what `prepare` compares with: when `wants.rows`, the partitions the version's id
/// runs say hold a revision of one of `ids` (every partition of the source-lane if it has no
/// runs yet), and, for a list snapshot (`wants.list`), the source-lane's list state (folded
/// from all its partitions if the version has none yet).
async fn held(
    store: &CorpusStore,
    version: Option<&str>,
    source: SourceId,
    lane: Lane,
    ids: &HashSet<&str>,
    wants: Wants,
) -> Result<Held> {
    let Wants {
        list,
        stream,
        identity,
        rows: want_rows,
    } = wants;
    let Some(version) = version else {
        return Ok(Held::default());
    };
    let manifest = store.manifest(version).await?;
    let identity = match manifest.identity.first() {
        Some(e) if identity => Some(read_identity(store, e).await?),
        _ => None,
    };
    let mut list_stream = None;
    let stored_list = if list && stream {
        list_stream = lists::open(store, &manifest, source, lane).await?;
        list_stream.is_some().then(ListState::new)
    } else if list {
        lists::read(store, &manifest, source, lane).await?
    } else {
        None
    };
    // A version without the state (published before list states existed) gives it by folding
    // its change rows; a list that makes no rows starts from nothing.
    let whole = list && stored_list.is_none() && list_makes_rows(source);
    let days = if whole {
        None
    } else if want_rows {
        asof_engine::read::ids::days_holding(store, &manifest, source, lane, ids.iter().copied())
            .await?
    } else {
        Some(Default::default())
    };
    let mut rows = Vec::new();
    for p in manifest.partitions.iter().filter(|p| {
        p.source_id == source && p.lane == lane && days.as_ref().is_none_or(|d| d.contains(&p.date))
    }) {
        rows.extend(read_partition(store, p).await?);
    }
    let superseded: HashSet<String> = rows.iter().filter_map(|r| r.supersedes.clone()).collect();
    rows.retain(|r| !superseded.contains(&r.revision_id));
    let list = match stored_list {
        Some(l) => l,
        None if whole => {
            let mut l = ListState::new();
            fold(&mut l, &rows);
            l
        }
        None => ListState::new(),
    };
    rows.retain(|r| ids.contains(r.id.as_str()));
    let certifications = manifest
        .certifications
        .into_iter()
        .filter(|c| c.source_id == source && c.lane == lane)
        .collect();
    Ok(Held {
        rows,
        certifications,
        list,
        list_stream,
        identity,
    })
}

/// Folds change rows into a list state: each entity takes the state its latest change (by
/// instant) gives it. Rows that are not change rows (GLEIF's field-modification events share
/// the source) are skipped.
fn fold(state: &mut ListState, rows: &[NewsRow]) {
    for r in rows {
        let (Some(entity), Some(at), Some(payload)) =
            (&r.entity_id, r.published_at, r.payload.as_deref())
        else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(payload) else {
            continue;
        };
        if v.get("change").is_none() {
            continue;
        }
        let after = v
            .get("after")
            .filter(|a| !a.is_null())
            .map(Value::to_string);
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match state.get(entity) {
            Some(held) if held.at >= at => {}
            _ => {
                state.insert(
                    entity.clone(),
                    Listed {
                        at,
                        after,
                        locator: r.source_locator.clone(),
                        name,
                    },
                );
            }
        }
    }
}

/// Whether a list's changes are records of its source. An OFAC SDN entry or a GLEIF LEI record
/// that changes is news of that source. A ticker list is not: `sec.edgar` records are filings
/// (each with its accession number), and SEC's ticker files are evidence of which company a
/// ticker named when, kept as the identity intervals (`/v1/mapping`, ticker resolution) with
/// the list's capture named as their evidence, and as the list state the next list is
/// compared with.
pub fn list_makes_rows(source: SourceId) -> bool {
    source != SourceId::SecEdgar
}

/// Form prefix and human label of a list source's change rows.
fn list_label(source: SourceId) -> (&'static str, &'static str) {
    match source {
        SourceId::OfacSdn => ("sdn", "SDN entry"),
        SourceId::GleifLei => ("lei", "LEI record"),
        SourceId::SecEdgar => ("ticker", "Ticker"),
        _ => ("list", "list entry"),
    }
}

/// Whether a change row of [`diff`] is a removal (kept apart by a caller that lists
/// removals after the other changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Removal(bool);

/// What [`diff`] found.
#[derive(Debug, Default)]
struct Diffed {
    /// Change rows by kind (`added`, `removed`, `modified`).
    kinds: BTreeMap<String, usize>,
    /// Entities in the new state.
    entities: u64,
}

impl Diffed {
    fn changed(&self) -> bool {
        self.kinds.values().any(|n| *n > 0)
    }
}

/// Compares a list snapshot with the list state as two streams sorted by entity, and gives
/// the change rows and the new state. An entity absent from the state (or removed) and present
/// now is `added`; present in both with other fields or another name is `modified`; held and
/// absent from a full snapshot is `removed`. Each row is visible from the capture, never earlier. `state` gets every entity
/// of the new state in entity order, changed or not.
///
/// Why streams: a GLEIF golden copy and its state run to millions of entities; merging two
/// sorted streams holds one entity of each. Fields are compared as canonical JSON text and
/// parsed only when the texts differ (and for the rows of entities that changed).
#[allow(clippy::too_many_arguments)]
fn diff(
    ctx: &Context,
    at: Instant,
    full: bool,
    file: &str,
    held: &mut dyn Iterator<Item = Result<(String, Listed)>>,
    seen: &mut dyn Iterator<Item = Result<(String, Seen)>>,
    rows: &mut dyn FnMut(NewsRow, Removal),
    state: &mut dyn FnMut(String, Listed) -> Result<()>,
) -> Result<Diffed> {
    let (prefix, label) = list_label(ctx.source);
    let mut out = Diffed::default();
    // `name` is the entity's name after the change (as it was, for a removal); a modified row
    // also gives `name_before`, since a rename alone is a modification.
    let make = |entity: &str,
                kind: &str,
                name: &str,
                locator: &str,
                before: Option<(&Value, &str)>,
                after: Option<&Value>| {
        let mut payload = json!({
            "change": kind,
            "name": name,
            "captured_at": at.to_string(),
            "before": before.map(|b| b.0),
            "after": after,
        });
        if kind == "modified"
            && let Some((_, before_name)) = before
        {
            payload["name_before"] = json!(before_name);
        }
        let mut row = base_row(
            ctx,
            format!("{entity}@{at}"),
            entity.to_owned(),
            Some(format!("{prefix}.{kind}")),
            format!("{label} {kind}: {name}"),
            locator.to_owned(),
            &payload,
        );
        row.published_at = Some(at);
        row
    };
    let older = |entity: &str, held_at: Instant| {
        Error::parse(
            file,
            format!("entity {entity}"),
            format!(
                "snapshot captured at {at} is older than the corpus's state of this entity (changed at {held_at}); snapshots are ingested in capture order"
            ),
        )
    };
    let parse_fields = |entity: &str, text: &str, what: &str| -> Result<Value> {
        serde_json::from_str(text).map_err(|e| {
            asof_engine::Error::integrity(
                format!("{what} of {}/{}", ctx.source, ctx.lane),
                format!("entity {entity}: fields are not JSON ({e})"),
            )
            .into()
        })
    };
    let mut h = held.next().transpose()?;
    let mut s = seen.next().transpose()?;
    loop {
        let order = match (&h, &s) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((he, _)), Some((se, _))) => he.cmp(se),
        };
        match order {
            // Held, absent from the snapshot: removed if the snapshot is the whole list.
            std::cmp::Ordering::Less => {
                let (entity, listed) = h.take().expect("ordered on a held entity");
                let listed = match &listed.after {
                    Some(after) if full => {
                        if listed.at > at {
                            return Err(older(&entity, listed.at));
                        }
                        let before = parse_fields(&entity, after, "list state")?;
                        rows(
                            make(
                                &entity,
                                "removed",
                                &listed.name,
                                &listed.locator,
                                Some((&before, &listed.name)),
                                None,
                            ),
                            Removal(true),
                        );
                        *out.kinds.entry("removed".into()).or_default() += 1;
                        Listed {
                            at,
                            after: None,
                            ..listed
                        }
                    }
                    _ => listed,
                };
                state(entity, listed)?;
                out.entities += 1;
                h = held.next().transpose()?;
            }
            std::cmp::Ordering::Greater | std::cmp::Ordering::Equal => {
                let (entity, new) = s.take().expect("ordered on a seen entity");
                let was = if order == std::cmp::Ordering::Equal {
                    let (_, listed) = h.take().expect("equal entities");
                    h = held.next().transpose()?;
                    if listed.at > at {
                        return Err(older(&entity, listed.at));
                    }
                    Some(listed)
                } else {
                    None
                };
                let unchanged = was.as_ref().is_some_and(|w| {
                    w.name == new.name && w.after.as_deref() == Some(new.fields.as_str())
                });
                let listed = match was {
                    Some(w) if unchanged => w,
                    was => {
                        let before = match &was {
                            Some(Listed {
                                after: Some(text),
                                name,
                                ..
                            }) => Some((parse_fields(&entity, text, "list state")?, name.clone())),
                            _ => None,
                        };
                        let after = parse_fields(&entity, &new.fields, "snapshot")?;
                        match (was, before) {
                            // The same fields written another way (the state of an older
                            // build): nothing changed.
                            (Some(w), Some((b, name))) if b == after && name == new.name => w,
                            (_, before) => {
                                let kind = if before.is_some() {
                                    "modified"
                                } else {
                                    "added"
                                };
                                rows(
                                    make(
                                        &entity,
                                        kind,
                                        &new.name,
                                        &new.locator,
                                        before.as_ref().map(|(b, n)| (b, n.as_str())),
                                        Some(&after),
                                    ),
                                    Removal(false),
                                );
                                *out.kinds.entry(kind.into()).or_default() += 1;
                                Listed {
                                    at,
                                    after: Some(new.fields),
                                    locator: new.locator,
                                    name: new.name,
                                }
                            }
                        }
                    }
                };
                state(entity, listed)?;
                out.entities += 1;
                s = seen.next().transpose()?;
            }
        }
    }
    Ok(out)
}

/// A snapshot's entries as [`diff`] reads them: fields as canonical JSON text.
fn seen_of(snap: &Snapshot) -> impl Iterator<Item = Result<(String, Seen)>> + '_ {
    snap.entries.iter().map(|(entity, e)| {
        Ok((
            entity.clone(),
            Seen {
                name: e.name.clone(),
                locator: e.locator.clone(),
                fields: canonical_json(&e.fields),
            },
        ))
    })
}

/// Contiguous runs of `days` as inclusive ranges.
fn runs(mut days: Vec<Day>) -> Vec<(Day, Day)> {
    days.sort();
    days.dedup();
    let mut out: Vec<(Day, Day)> = Vec::new();
    for d in days {
        match out.last_mut() {
            Some((_, to)) if to.next() == d => *to = d,
            _ => out.push((d, d)),
        }
    }
    out
}

/// Step 2 for one row (`n`: its place among the ingest's rows): the request's source and
/// lane, a record id, no clock after the commit time; `committed_at` set to the commit time.
fn check_row(req: &Request, files_label: &str, n: usize, row: &mut NewsRow) -> Result<()> {
    let at = format!("record {}", row.id);
    if row.source_id != req.source || row.lane != req.lane {
        return Err(Error::parse(
            files_label,
            at,
            format!(
                "row is {}/{}, the ingest is {}/{}",
                row.source_id, row.lane, req.source, req.lane
            ),
        ));
    }
    if row.id.trim().is_empty() {
        return Err(Error::parse(
            files_label,
            format!("row {}", n + 1),
            "empty record id",
        ));
    }
    // The contract's `accession` of an EDGAR record is a string: every `sec.edgar` row is a
    // filing (a ticker list is identity evidence, [`list_makes_rows`]).
    if row.source_id == SourceId::SecEdgar
        && row.accession.as_deref().is_none_or(|a| a.trim().is_empty())
    {
        return Err(Error::parse(
            files_label,
            at,
            "an EDGAR record is a filing and carries its accession number; this one has none",
        ));
    }
    if let Some(p) = row.published_at.or(row.available_at)
        && p > req.commit_time
    {
        return Err(Error::parse(
            files_label,
            at,
            format!(
                "published at {p}, after the commit time {}: a corpus cannot hold a row before it exists (check --commit-time)",
                req.commit_time
            ),
        ));
    }
    // Two different rows with one id in one ingest (two captures of a company): the
    // later in capture order supersedes the earlier, as if ingested one after the other.
    if row.committed_at.is_none() {
        row.committed_at = Some(req.commit_time);
    }
    Ok(())
}

/// Steps 2–5: the change set an ingest publishes, given what the corpus holds of the source.
pub fn prepare(req: &Request, parsed: Parsed, held: &mut Held) -> Result<(ChangeSet, Outcome)> {
    let ctx = Context {
        source: req.source,
        lane: req.lane,
        captured_at: req.captured_at,
    };
    let files_label = req
        .files
        .iter()
        .map(Input::name)
        .collect::<Vec<_>>()
        .join(", ");
    let mut rows = parsed.rows;
    // The forward lane records when a filing was first seen here: a filing already held keeps
    // its row, whatever a later fetch of the feed says.
    let seen: HashSet<&str> = if req.lane == Lane::ForwardFirstSeen {
        held.rows.iter().map(|r| r.id.as_str()).collect()
    } else {
        HashSet::new()
    };
    rows.retain(|r| !seen.contains(r.id.as_str()));
    let mut changes: BTreeMap<String, usize> = BTreeMap::new();
    let mut whole_days = if req.options.no_implied_certification {
        Vec::new()
    } else {
        parsed.whole_days
    };
    let since = req.options.since;
    // A list's change rows and its new state go together: a list captured before `--since`
    // cannot leave out its rows and keep its state.
    if let Some((since, at)) = since.zip(
        parsed
            .snapshot
            .as_ref()
            .map(|s| s.captured_at)
            .or(parsed.golden.as_ref().map(|g| g.captured_at)),
    ) && at.day() < since
    {
        return Err(Error::parse(
            "--since",
            since.to_string(),
            format!(
                "the list was captured at {at}, before it: what it changed would be left out while its state is kept"
            ),
        ));
    }
    let before_since =
        |row: &NewsRow| since.is_some_and(|s| row.partition_day().is_some_and(|d| d < s));
    rows.retain(|r| !before_since(r));
    let mut spilled_in = parsed.spilled;
    let mut lists = Vec::new();
    let mut observations = 0;
    if let Some(snap) = &parsed.snapshot {
        // A list small enough to hold: compared with the state in memory.
        let mut state = ListState::new();
        let (mut made, mut gone) = (Vec::new(), Vec::new());
        let found = diff(
            &ctx,
            snap.captured_at,
            snap.full,
            &files_label,
            &mut held.list.iter().map(|(k, v)| Ok((k.clone(), v.clone()))),
            &mut seen_of(snap),
            &mut |row, Removal(removal)| if removal { &mut gone } else { &mut made }.push(row),
            &mut |entity, listed| {
                state.insert(entity, listed);
                Ok(())
            },
        )?;
        // The list after this snapshot, published with its change rows (a snapshot that
        // changes nothing leaves the state, and the version, as they are).
        if found.changed() {
            lists.push((req.source, req.lane, ListObject::State(state)));
        }
        changes = found.kinds;
        if list_makes_rows(req.source) {
            rows.extend(made);
            rows.extend(gone);
        }
    }
    if let Some(golden) = parsed.golden {
        // A golden copy: the snapshot's sorted entries and the list state merged as streams;
        // change rows to the spill, the new state to a temporary file.
        let mut writer = StateFileWriter::new()?;
        let mut from_state;
        let mut from_memory;
        let held_list: &mut dyn Iterator<Item = Result<(String, Listed)>> =
            match held.list_stream.take() {
                Some(r) => {
                    from_state = r.map(|e| e.map_err(Error::from));
                    &mut from_state
                }
                None => {
                    from_memory = held.list.iter().map(|(k, v)| Ok((k.clone(), v.clone())));
                    &mut from_memory
                }
            };
        let found = diff(
            &ctx,
            golden.captured_at,
            golden.full,
            &files_label,
            held_list,
            &mut golden.entries.into_sorted()?,
            &mut |row, _| spilled_in.push(row),
            &mut |entity, listed| writer.push(entity, listed).map_err(Error::from),
        )?;
        if found.changed() {
            let encoded = writer.finish()?;
            lists.push((
                req.source,
                req.lane,
                ListObject::Encoded(std::sync::Arc::new(encoded)),
            ));
        }
        changes = found.kinds;
    }

    // Identity: the files' ticker observations and names folded into the version's intervals
    // (the same knowable-then rules as a build of every observation at once).
    let mut identity = None;
    if !parsed.observations.is_empty() || !parsed.names.is_empty() {
        let before = held.identity.as_ref().map_or(0, |f| f.evidence.len());
        let updated = asof_engine::model::identity::update(
            held.identity.as_ref(),
            parsed.observations,
            parsed.names,
        );
        observations = updated.evidence.len() - before;
        if held.identity.as_ref() != Some(&updated) {
            identity = Some(updated);
        }
    }

    // Cumulative files: a row already held with the same facts keeps its first-seen instant.
    let by_id: HashMap<&str, &NewsRow> = if parsed.published_is_capture {
        held.rows.iter().map(|r| (r.id.as_str(), r)).collect()
    } else {
        HashMap::new()
    };
    let first_seen = |row: &mut NewsRow| {
        if let Some(h) = by_id.get(row.id.as_str()) {
            let mut probe = row.clone();
            probe.published_at = h.published_at;
            probe.committed_at = h.committed_at;
            if probe.clone().seal().content_sha256 == h.content_sha256 {
                *row = probe;
            }
        }
    };
    // Streamed rows come first (they are published first), under the same rules, one flush
    // of the spill at a time.
    let mut n = 0;
    let spilled = spilled_in.try_map(|mut row| -> Result<Option<NewsRow>> {
        if seen.contains(row.id.as_str()) || before_since(&row) {
            return Ok(None);
        }
        first_seen(&mut row);
        check_row(req, &files_label, n, &mut row)?;
        n += 1;
        Ok(Some(row))
    })?;
    for (i, row) in rows.iter_mut().enumerate() {
        first_seen(row);
        check_row(req, &files_label, n + i, row)?;
    }

    let evidence: Vec<Evidence> = {
        let mut v: Vec<Evidence> = req
            .files
            .iter()
            .map(|f| {
                Ok(Evidence {
                    file: f.name().rsplit('/').next().unwrap_or(f.name()).to_owned(),
                    sha256: f.sha256()?,
                })
            })
            .collect::<Result<_>>()?;
        v.sort();
        v.dedup();
        v
    };
    if let Some((from, to)) = req.certify {
        if to > req.commit_time.day() {
            return Err(Error::parse(
                "--certify",
                format!("{from}..{to}"),
                format!(
                    "cannot certify days after the commit day {}",
                    req.commit_time.day()
                ),
            ));
        }
        if let Some(since) = since.filter(|s| from < *s) {
            return Err(Error::parse(
                "--certify",
                format!("{from}..{to}"),
                format!("starts before --since {since}: the rows of those days are left out"),
            ));
        }
        whole_days.extend((from.days()..=to.days()).map(Day::from_days));
    }
    whole_days.retain(|d| since.is_none_or(|s| *d >= s));
    // A day already certified stays certified as it was: restating it (an identical re-ingest,
    // a snapshot whose day is already certified) must not make a new version.
    whole_days.retain(|d| {
        *d <= req.commit_time.day()
            && !held
                .certifications
                .iter()
                .any(|c| c.from <= *d && *d <= c.to)
    });
    let certified = runs(whole_days);
    let certifications = certified
        .iter()
        .map(|&(from, to)| Certification {
            source_id: req.source,
            lane: req.lane,
            from,
            to,
            certified_at: req.commit_time,
            evidence: evidence.clone(),
        })
        .collect();
    Ok((
        ChangeSet {
            rows,
            spilled: (!spilled.is_empty()).then(|| std::sync::Arc::new(spilled)),
            certifications,
            lists,
            identity,
            notes: req
                .options
                .note
                .iter()
                .map(|n| (req.source.to_string(), n.clone()))
                .collect(),
            sample: req.options.sample.clone(),
        },
        Outcome {
            published: Published {
                version: String::new(),
                changed: false,
                rows_added: 0,
                rows_unchanged: 0,
            },
            changes,
            certified,
            observations,
        },
    ))
}

/// The whole ingest: parse, prepare against the current version, publish. When another
/// publisher moves the pointer first, the comparison and the change set are re-derived on
/// top of its version and published again. The parsed rows move into the change set (a big
/// input is held once, not twice); the rare retry parses the files again.
pub async fn ingest(
    store: &CorpusStore,
    req: Request,
    progress: &(dyn Fn(Step) + Sync),
) -> Result<Outcome> {
    progress(Step::Parsed(0, req.files.len()));
    let first = std::sync::Mutex::new(Some(parse_files(&req)?));
    progress(Step::Parsed(req.files.len(), req.files.len()));
    let (req, first) = (&req, &first);
    rebasing(|| async move {
        let taken = first.lock().map(|mut p| p.take()).unwrap_or(None);
        let parsed = match taken {
            Some(p) => p,
            None => parse_files(req)?,
        };
        progress(Step::Comparing);
        let parent = store.current_version().await?;
        let wants = Wants {
            list: parsed.snapshot.is_some() || parsed.golden.is_some(),
            stream: parsed.golden.is_some(),
            identity: !parsed.observations.is_empty() || !parsed.names.is_empty(),
            rows: req.lane == Lane::ForwardFirstSeen || parsed.published_is_capture,
        };
        let mut held = {
            let mut streamed = Vec::new();
            if wants.rows {
                parsed.spilled.for_each(|r| {
                    streamed.push(r.id);
                    Ok::<(), Error>(())
                })?;
            }
            let ids: HashSet<&str> = parsed
                .rows
                .iter()
                .map(|r| r.id.as_str())
                .chain(streamed.iter().map(String::as_str))
                .collect();
            held(store, parent.as_deref(), req.source, req.lane, &ids, wants).await?
        };
        let (changes, mut outcome) = prepare(req, parsed, &mut held)?;
        progress(Step::Publishing);
        outcome.published =
            publish_onto(store, parent.as_deref(), changes, req.commit_time, &|_| {
                Ok(())
            })
            .await?;
        Ok(outcome)
    })
    .await
}

/// The named files, each checked to be readable before any is parsed (so a missing file fails
/// fast) and read when its adapter asks: whole for small formats, as a stream for a golden copy.
pub fn read_files(paths: &[std::path::PathBuf]) -> Result<Vec<Input>> {
    paths.iter().map(|p| Input::open(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(source: SourceId) -> Request {
        Request {
            source,
            lane: Lane::CertifiedPit,
            commit_time: Instant::parse("2026-02-02T00:00:00Z").unwrap(),
            captured_at: None,
            certify: None,
            files: Vec::new(),
            options: Options::default(),
        }
    }

    fn row(source: SourceId, accession: Option<&str>) -> NewsRow {
        let ctx = Context {
            source,
            lane: Lane::CertifiedPit,
            captured_at: None,
        };
        let mut r = base_row(
            &ctx,
            "0000320193-26-000001_320193".into(),
            "320193".into(),
            Some("8-K".into()),
            "8-K".into(),
            "https://www.sec.gov/".into(),
            &json!({}),
        );
        r.accession = accession.map(str::to_owned);
        r
    }

    #[test]
    fn an_edgar_row_without_an_accession_number_is_refused_and_other_sources_need_none() {
        let edgar = request(SourceId::SecEdgar);
        for missing in [None, Some(""), Some("  ")] {
            let err = check_row(&edgar, "f.json", 0, &mut row(SourceId::SecEdgar, missing))
                .unwrap_err()
                .to_string();
            assert!(err.contains("accession"), "{err}");
        }
        let mut filing = row(SourceId::SecEdgar, Some("0000320193-26-000001"));
        check_row(&edgar, "f.json", 0, &mut filing).unwrap();
        assert_eq!(filing.committed_at, Some(edgar.commit_time));
        let ofac = request(SourceId::OfacSdn);
        check_row(&ofac, "sdn.csv", 0, &mut row(SourceId::OfacSdn, None)).unwrap();
    }

    #[test]
    fn only_ticker_lists_make_no_rows_of_their_changes() {
        assert!(!list_makes_rows(SourceId::SecEdgar));
        assert!(list_makes_rows(SourceId::OfacSdn));
        assert!(list_makes_rows(SourceId::GleifLei));
    }
}
