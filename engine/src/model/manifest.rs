//! The corpus manifest: canonical JSON listing every object of one corpus version.
//!
//! `corpus_version = "sha256:" + hex(sha256(canonical bytes))`. Canonical means: keys sorted
//! bytewise at every level, no insignificant whitespace, integers only (no floats), strings
//! escaped as serde_json does, one trailing newline. The hash is over exactly the stored bytes,
//! so anyone can recompute it with `sha256sum`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::clock::{Day, Instant, Lane, SourceId, VisibleBy};
use crate::model::record::{CLOCK_COLUMNS, NewsRow};

/// The manifest format this engine reads and writes. Readers refuse other major formats.
pub const FORMAT: &str = "asof.manifest/1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    /// When this version was published (the publisher's commit time).
    pub created_at: Instant,
    /// The version this one was derived from, if any.
    pub parent: Option<String>,
    /// One entry per source-lane-day that has at least one row.
    pub partitions: Vec<PartitionEntry>,
    /// Statements that source-days are complete, with their evidence.
    pub certifications: Vec<Certification>,
    /// The certified span of each source and lane, derived from `certifications` at publish.
    pub spans: Vec<Span>,
    /// Identity files (ticker/CIK intervals).
    pub identity: Vec<ObjectEntry>,
    /// Derived, hash-checked access files (entity-clustered compactions, sidecar indexes).
    /// Readers that do not know a `kind` ignore it; source-day partitions stay authoritative.
    #[serde(default)]
    pub access: Vec<ObjectEntry>,
    /// Free-form notes per source (e.g. the scope of a sample corpus).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
    /// The public sample set, when this corpus ships one.
    #[serde(default)]
    pub sample: Option<SampleSet>,
    /// The Delta Lake table version each source-lane's table has at this corpus version
    /// (`<source_id>/<lane>` → version; [`crate::format::delta`]). Absent in manifests written before
    /// the tables existed: their mapping is derived by the same rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<std::collections::BTreeMap<String, u64>>,
}

/// One partition's manifest entry: a shared handle on its [`Partition`]. Why shared: a
/// partition is content-addressed and immutable, so the versions that list it list the same
/// entry, and a process holding many versions (pinned reads keep thirty side by side) holds
/// it once ([`Manifest::share_entries`]); a clone costs a reference count. It reads as the
/// partition (`Deref`) and serializes as it, so the manifest's bytes are those of the plain
/// entry.
#[derive(Clone, PartialEq, Eq)]
pub struct PartitionEntry(Arc<Partition>);

impl PartitionEntry {
    pub fn new(partition: Partition) -> Self {
        PartitionEntry(Arc::new(partition))
    }

    /// The partition to change, copied first when another manifest shares it (a writer
    /// building its next manifest never changes one a reader holds).
    pub fn edit(&mut self) -> &mut Partition {
        Arc::make_mut(&mut self.0)
    }
}

impl std::ops::Deref for PartitionEntry {
    type Target = Partition;
    fn deref(&self) -> &Partition {
        &self.0
    }
}

impl std::fmt::Debug for PartitionEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for PartitionEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for PartitionEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Partition::deserialize(d).map(PartitionEntry::new)
    }
}

/// What the manifest says of one partition (one source, lane and UTC day).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub source_id: SourceId,
    pub lane: Lane,
    pub date: Day,
    /// Object path relative to the corpus root.
    pub path: String,
    pub row_count: u64,
    pub bytes: u64,
    pub sha256: String,
    /// min/max/null count of each clock column, keyed by column name.
    pub clocks: PartitionClocks,
    /// The distinct `committed_at` instants of the partition's rows, ascending, when there are
    /// at most [`COMMITS_LISTED`]; absent when there are more, and in manifests written before
    /// it existed. A partition is written by few publishes, each committing its rows at few
    /// instants, so the list is short; min/max alone would say a day whose rows were committed
    /// the next morning, one of them corrected a month later, may hold a row of every
    /// `committed_at` window of that month. The walk skips a partition none of whose commits
    /// lies in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits: Option<Vec<Instant>>,
    /// The distinct UTC hours (each as the instant it starts) its rows' `available_at` values
    /// fall in, ascending, when there are at most [`HOURS_LISTED`]; absent when more, and in
    /// manifests written before it existed. The same skip on `available_at` windows: a day of
    /// the forward lane is first seen over a dozen hours of that day, and a correction at the
    /// capture that brought it, weeks later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_hours: Option<Vec<Instant>>,
}

/// The most distinct commit instants a partition's manifest entry lists.
pub const COMMITS_LISTED: usize = 16;
/// The most distinct `available_at` hours a partition's manifest entry lists.
pub const HOURS_LISTED: usize = 48;
const HOUR_MICROS: i64 = 3_600_000_000;

/// The UTC hour `at` falls in, as the instant it starts: what `available_hours` lists.
pub fn hour_of(at: Instant) -> Instant {
    Instant::from_micros(at.micros() - at.micros().rem_euclid(HOUR_MICROS))
}

/// The distinct values of one clock of rows added one at a time (exact, or truncated to the
/// hour), up to a bound: what a partition's entry lists in `commits` and `available_hours`.
#[derive(Debug, Clone)]
pub struct Marks {
    seen: std::collections::BTreeSet<Instant>,
    cap: usize,
    hourly: bool,
    overflow: bool,
}

impl Marks {
    /// Commit instants, exact.
    pub fn commits() -> Self {
        Self::new(COMMITS_LISTED, false)
    }

    /// `available_at` hours.
    pub fn available_hours() -> Self {
        Self::new(HOURS_LISTED, true)
    }

    fn new(cap: usize, hourly: bool) -> Self {
        Marks {
            seen: Default::default(),
            cap,
            hourly,
            overflow: false,
        }
    }

    pub fn add(&mut self, v: Option<Instant>) {
        if let Some(at) = v.filter(|_| !self.overflow) {
            let at = if self.hourly { hour_of(at) } else { at };
            self.seen.insert(at);
            if self.seen.len() > self.cap {
                self.overflow = true;
                self.seen.clear();
            }
        }
    }

    /// The list a manifest entry holds: `None` past the bound.
    pub fn listed(self) -> Option<Vec<Instant>> {
        (!self.overflow).then(|| self.seen.into_iter().collect())
    }
}

/// What a partition's entry lists of `rows`: (`commits`, `available_hours`).
pub fn marks_of<'a>(
    rows: impl IntoIterator<Item = &'a NewsRow>,
) -> (Option<Vec<Instant>>, Option<Vec<Instant>>) {
    let (mut c, mut a) = (Marks::commits(), Marks::available_hours());
    for r in rows {
        c.add(r.committed_at);
        a.add(r.available_at);
    }
    (c.listed(), a.listed())
}

impl Partition {
    /// Whether a row whose `clock` lies in `(after, through]` may be in the partition, by the
    /// manifest alone: the clock's min/max, then its listed commits or hours when it has them.
    pub fn may_hold_in(&self, clock: VisibleBy, after: Option<Instant>, through: Instant) -> bool {
        self.may_hold_besides(clock, after, through, &[])
    }

    /// [`Self::may_hold_in`], counting none of the listed commits or hours in `kept_apart`
    /// (the marks whose rows `crate::format::late` keeps apart, so the walk need not read the
    /// partition for them). Marks in `kept_apart` are ignored only where the entry lists its
    /// marks; min/max alone cannot tell which rows they hold.
    pub fn may_hold_besides(
        &self,
        clock: VisibleBy,
        after: Option<Instant>,
        through: Instant,
        kept_apart: &[Instant],
    ) -> bool {
        let s = self.clocks.get(clock);
        let in_range = s.min.is_some_and(|m| m <= through)
            && after.is_none_or(|a| s.max.is_some_and(|m| m > a));
        let counted = |m: &Instant| !kept_apart.contains(m);
        in_range
            && match clock {
                VisibleBy::PublishedAt => true,
                VisibleBy::CommittedAt => self.commits.as_ref().is_none_or(|l| {
                    l.iter()
                        .filter(|m| counted(m))
                        .any(|&c| c <= through && after.is_none_or(|a| c > a))
                }),
                // An hour holds values in `[h, h + 1 h)`: one may lie in the window when the
                // hour starts by its end and ends after its start.
                VisibleBy::AvailableAt => self.available_hours.as_ref().is_none_or(|l| {
                    l.iter().filter(|m| counted(m)).any(|&h| {
                        h <= through && after.is_none_or(|a| h.micros() + HOUR_MICROS > a.micros())
                    })
                }),
            }
    }
}

/// The statistics of every clock column of one partition, one field per column of
/// [`CLOCK_COLUMNS`] (serialized as an object keyed by column name, so the manifest bytes are
/// those of the map this replaced). Every key is required and no other is accepted: a manifest
/// missing a clock fails to load with an error naming it, and no lookup can fail later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionClocks {
    pub event_at: ClockStats,
    pub published_at: ClockStats,
    pub available_at: ClockStats,
    pub acceptance_at: ClockStats,
    pub committed_at: ClockStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockStats {
    pub min: Option<Instant>,
    pub max: Option<Instant>,
    pub nulls: u64,
}

impl PartitionClocks {
    /// The statistics of the clock visibility is evaluated on.
    pub fn get(&self, by: VisibleBy) -> &ClockStats {
        match by {
            VisibleBy::PublishedAt => &self.published_at,
            VisibleBy::AvailableAt => &self.available_at,
            VisibleBy::CommittedAt => &self.committed_at,
        }
    }

    /// No row yet.
    pub const EMPTY: PartitionClocks = PartitionClocks {
        event_at: ClockStats::EMPTY,
        published_at: ClockStats::EMPTY,
        available_at: ClockStats::EMPTY,
        acceptance_at: ClockStats::EMPTY,
        committed_at: ClockStats::EMPTY,
    };

    /// Counts one more row (writers that stream a partition add its rows one at a time).
    pub fn add(&mut self, r: &NewsRow) {
        self.event_at.add(r.event_at);
        self.published_at.add(r.published_at);
        self.available_at.add(r.available_at);
        self.acceptance_at.add(r.acceptance_at);
        self.committed_at.add(r.committed_at);
    }

    /// The statistics of `rows`, column by column.
    pub fn from_rows(rows: &[NewsRow]) -> Self {
        let mut c = Self::EMPTY;
        for r in rows {
            c.add(r);
        }
        c
    }
}

impl ClockStats {
    pub const EMPTY: ClockStats = ClockStats {
        min: None,
        max: None,
        nulls: 0,
    };

    pub(crate) fn add(&mut self, v: Option<Instant>) {
        match v {
            Some(v) => {
                self.min = Some(self.min.map_or(v, |m| m.min(v)));
                self.max = Some(self.max.map_or(v, |m| m.max(v)));
            }
            None => self.nulls += 1,
        }
    }
}

/// Builds the statistics from `(column name, stats)` pairs, as writers that walk
/// [`CLOCK_COLUMNS`] produce them.
///
/// # Panics
/// On a name that is not a clock column or a column given no statistics: a writer's bug (the
/// names come from [`CLOCK_COLUMNS`]), never a stored manifest's, which loads through serde.
impl FromIterator<(String, ClockStats)> for PartitionClocks {
    fn from_iter<I: IntoIterator<Item = (String, ClockStats)>>(iter: I) -> Self {
        let mut slots: [Option<ClockStats>; CLOCK_COLUMNS.len()] = [None; CLOCK_COLUMNS.len()];
        for (name, stats) in iter {
            let i = CLOCK_COLUMNS
                .iter()
                .position(|c| *c == name)
                .unwrap_or_else(|| panic!("{name:?} is not a clock column"));
            slots[i] = Some(stats);
        }
        let at = |name: &str| {
            let i = CLOCK_COLUMNS
                .iter()
                .position(|c| *c == name)
                .expect("a clock column");
            slots[i].unwrap_or_else(|| panic!("no statistics for clock column {name}"))
        };
        PartitionClocks {
            event_at: at("event_at"),
            published_at: at("published_at"),
            available_at: at("available_at"),
            acceptance_at: at("acceptance_at"),
            committed_at: at("committed_at"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certification {
    pub source_id: SourceId,
    pub lane: Lane,
    /// First and last day (inclusive) stated complete.
    pub from: Day,
    pub to: Day,
    /// When the statement entered the corpus; a `committed_at` cut before it does not see it.
    pub certified_at: Instant,
    /// The input files the statement rests on.
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Evidence {
    pub file: String,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub source_id: SourceId,
    pub lane: Lane,
    pub first: Day,
    pub last: Day,
    /// Uncertified day ranges inside `[first, last]`, inclusive.
    pub holes: Vec<DayRange>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayRange {
    pub from: Day,
    pub to: Day,
}

impl Span {
    /// Number of uncertified days inside the span.
    pub fn hole_days(&self) -> i64 {
        self.holes
            .iter()
            .map(|h| i64::from(h.to.days() - h.from.days() + 1))
            .sum()
    }
    /// The frontier coverage key of the spec.
    pub fn frontier_key(&self) -> String {
        format!(
            "{}/frontier:{}..{};holes={}",
            self.source_id,
            self.first,
            self.last,
            self.hole_days()
        )
    }
}

/// Any other stored object: identity files and derived access files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectEntry {
    pub kind: String,
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
    #[serde(default)]
    pub row_count: u64,
}

/// The public sample set: a few companies on a few certified days.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleSet {
    pub source_id: SourceId,
    pub lane: Lane,
    /// Days the sample has read (certified for the sample's companies).
    pub days: Vec<Day>,
    pub examples: Vec<SampleExample>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SampleExample {
    /// The identifier used as `example=`.
    pub id: String,
    pub ticker: String,
    pub cik: String,
    pub name: String,
    pub note: String,
}

impl Manifest {
    /// The partitions of one source-lane, in the manifest's order.
    pub fn lane_partitions(
        &self,
        source: SourceId,
        lane: Lane,
    ) -> impl Iterator<Item = &PartitionEntry> {
        self.partitions
            .iter()
            .filter(move |p| p.source_id == source && p.lane == lane)
    }

    /// Canonical bytes: sorted keys, compact, trailing newline.
    pub fn to_canonical_bytes(&self) -> Result<Vec<u8>> {
        let value = serde_json::to_value(self)?;
        let mut out = Vec::with_capacity(4096);
        write_canonical(&value, &mut out)?;
        out.push(b'\n');
        Ok(out)
    }

    /// Parses stored manifest bytes, refusing unknown formats and non-canonical bytes (a
    /// non-canonical manifest would hash differently from what its producer published).
    pub fn from_bytes(path: &str, bytes: &[u8]) -> Result<Self> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| Error::Manifest {
            path: path.into(),
            detail: e.to_string(),
        })?;
        if m.format != FORMAT {
            return Err(Error::Manifest {
                path: path.into(),
                detail: format!("unknown format {:?}, expected {FORMAT}", m.format),
            });
        }
        if m.to_canonical_bytes()? != bytes {
            return Err(Error::Manifest {
                path: path.into(),
                detail: "not in canonical form".into(),
            });
        }
        Ok(m)
    }

    /// `sha256:<hex>` of the canonical bytes.
    pub fn version(&self) -> Result<String> {
        Ok(version_of(&self.to_canonical_bytes()?))
    }

    pub fn span(&self, source: SourceId, lane: Lane) -> Option<&Span> {
        self.spans
            .iter()
            .find(|s| s.source_id == source && s.lane == lane)
    }

    /// Takes over `other`'s entry for every partition both list (the same object path and
    /// the same statistics), so the two manifests hold one copy of each shared entry. What
    /// a manifest says is unchanged; only where its entries live. Returns how many were
    /// taken over.
    pub fn share_entries(&mut self, other: &Manifest) -> usize {
        let theirs: HashMap<&str, &PartitionEntry> = other
            .partitions
            .iter()
            .map(|p| (p.path.as_str(), p))
            .collect();
        let mut shared = 0;
        for p in &mut self.partitions {
            if let Some(&t) = theirs.get(p.path.as_str()) {
                if Arc::ptr_eq(&p.0, &t.0) {
                    shared += 1;
                } else if p == t {
                    *p = t.clone();
                    shared += 1;
                }
            }
        }
        shared
    }

    /// Sources (any lane) this corpus holds rows or certifications for.
    pub fn held_sources(&self) -> Vec<SourceId> {
        let mut v: Vec<SourceId> = self
            .partitions
            .iter()
            .map(|p| p.source_id)
            .chain(self.spans.iter().map(|s| s.source_id))
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// `sha256:` + hex digest of the given manifest bytes.
pub fn version_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Recomputes each source-lane span from certifications: first/last day and uncovered ranges.
pub fn derive_spans(certs: &[Certification]) -> Vec<Span> {
    let mut by: BTreeMap<(SourceId, Lane), Vec<(Day, Day)>> = BTreeMap::new();
    for c in certs {
        by.entry((c.source_id, c.lane))
            .or_default()
            .push((c.from, c.to));
    }
    by.into_iter()
        .map(|((source_id, lane), mut ranges)| {
            ranges.sort();
            let first = ranges[0].0;
            let mut last = ranges[0].1;
            let mut holes = Vec::new();
            for &(from, to) in &ranges[1..] {
                if from.days() > last.days() + 1 {
                    holes.push(DayRange {
                        from: last.next(),
                        to: from.prev(),
                    });
                }
                if to > last {
                    last = to;
                }
            }
            Span {
                source_id,
                lane,
                first,
                last,
                holes,
            }
        })
        .collect()
}

fn write_canonical(v: &Value, out: &mut Vec<u8>) -> Result<()> {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, k)?;
                out.push(b':');
                write_canonical(&map[k], out)?;
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            return Err(Error::Manifest {
                path: "<canonical>".into(),
                detail: format!("non-integer number {n}"),
            });
        }
        other => serde_json::to_writer(&mut *out, other)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    #[test]
    fn marks_list_distinct_values_up_to_their_bound_and_hours_from_their_start() {
        let mut hours = Marks::available_hours();
        for s in [
            "2026-01-02T10:59:59Z",
            "2026-01-02T10:00:00Z",
            "2026-01-30T06:30:00Z",
        ] {
            hours.add(Some(at(s)));
        }
        hours.add(None);
        assert_eq!(
            hours.listed(),
            Some(vec![at("2026-01-02T10:00:00Z"), at("2026-01-30T06:00:00Z")])
        );
        let mut commits = Marks::commits();
        for n in 0..=COMMITS_LISTED as i64 {
            commits.add(Some(Instant::from_micros(n)));
        }
        assert_eq!(
            commits.listed(),
            None,
            "past the bound, no list: min/max decide"
        );
    }

    #[test]
    fn a_partition_may_hold_a_window_only_where_a_listed_commit_or_hour_lies_in_it() {
        let day = |commits: Option<Vec<Instant>>, hours: Option<Vec<Instant>>| {
            let mut clocks = PartitionClocks::EMPTY;
            for s in ["2026-01-03T01:00:00Z", "2026-01-26T01:00:00Z"] {
                clocks.committed_at.add(Some(at(s)));
                clocks.available_at.add(Some(at(s)));
            }
            PartitionEntry::new(Partition {
                source_id: SourceId::SecEdgar,
                lane: Lane::ForwardFirstSeen,
                date: "2026-01-02".parse().unwrap(),
                path: String::new(),
                row_count: 2,
                bytes: 0,
                sha256: String::new(),
                clocks,
                commits,
                available_hours: hours,
            })
        };
        let marks = Some(vec![at("2026-01-03T01:00:00Z"), at("2026-01-26T01:00:00Z")]);
        let listed = day(marks.clone(), marks);
        let unlisted = day(None, None);
        let (start, end) = (Some(at("2026-01-11T12:00:00Z")), at("2026-01-12T12:00:00Z"));
        for clock in [VisibleBy::CommittedAt, VisibleBy::AvailableAt] {
            assert!(!listed.may_hold_in(clock, start, end), "{clock:?}");
            assert!(
                unlisted.may_hold_in(clock, start, end),
                "{clock:?}: min/max only"
            );
            // A window through the late correction's instant holds it.
            assert!(listed.may_hold_in(clock, start, at("2026-01-26T01:00:00Z")));
            assert!(!listed.may_hold_in(clock, start, at("2026-01-26T00:59:59Z")));
        }
    }

    fn day(s: &str) -> Day {
        s.parse().unwrap()
    }

    fn empty() -> Manifest {
        Manifest {
            format: FORMAT.into(),
            created_at: Instant::parse("2026-02-08T20:20:42Z").unwrap(),
            parent: None,
            partitions: vec![],
            certifications: vec![],
            spans: vec![],
            identity: vec![],
            access: vec![],
            notes: BTreeMap::from([("z".into(), "last".into()), ("a".into(), "first".into())]),
            sample: None,
            delta: None,
        }
    }

    #[test]
    fn canonical_bytes_sort_keys_and_hash_to_the_version() {
        let m = empty();
        let bytes = m.to_canonical_bytes().unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with("{\"access\":[],\"certifications\":[],\"created_at\":"));
        assert!(text.contains("\"notes\":{\"a\":\"first\",\"z\":\"last\"}"));
        assert!(text.ends_with("}\n"));
        assert_eq!(m.version().unwrap(), version_of(&bytes));
        assert_eq!(Manifest::from_bytes("m", &bytes).unwrap(), m);
    }

    #[test]
    fn non_canonical_or_foreign_manifests_are_refused() {
        let m = empty();
        let pretty = serde_json::to_vec_pretty(&m).unwrap();
        assert!(Manifest::from_bytes("m", &pretty).is_err());
        let mut other = m.clone();
        other.format = "asof.manifest/2".into();
        assert!(Manifest::from_bytes("m", &other.to_canonical_bytes().unwrap()).is_err());
    }

    /// The shipped sample corpus's current manifest: its version and bytes.
    fn shipped() -> (String, Vec<u8>) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let version = std::fs::read_to_string(root.join("manifests/CURRENT")).unwrap();
        let version = version.trim().to_owned();
        let hex = version.strip_prefix("sha256:").unwrap();
        let bytes = std::fs::read(root.join(format!("manifests/{hex}.json"))).unwrap();
        (version, bytes)
    }

    /// The shipped manifest with `edit` applied to the clocks of its first partition, in
    /// canonical form.
    fn shipped_with_clocks(edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Vec<u8> {
        let (_, bytes) = shipped();
        let mut v: Value = serde_json::from_slice(&bytes).unwrap();
        edit(v["partitions"][0]["clocks"].as_object_mut().unwrap());
        let mut out = Vec::new();
        write_canonical(&v, &mut out).unwrap();
        out.push(b'\n');
        out
    }

    #[test]
    fn the_shipped_manifest_loads_with_typed_clocks_into_the_same_bytes_and_version() {
        let (version, bytes) = shipped();
        let m = Manifest::from_bytes("shipped", &bytes).unwrap();
        assert_eq!(m.to_canonical_bytes().unwrap(), bytes);
        assert_eq!(m.version().unwrap(), version);
        let p = &m.partitions[0];
        assert_eq!(p.clocks.get(VisibleBy::PublishedAt), &p.clocks.published_at);
        assert_eq!(p.clocks.published_at.nulls, 0);
    }

    #[test]
    fn a_manifest_missing_a_clock_fails_to_load_with_an_error_naming_it() {
        let bytes = shipped_with_clocks(|c| {
            c.remove("available_at");
        });
        match Manifest::from_bytes("m", &bytes) {
            Err(Error::Manifest { path, detail }) => {
                assert_eq!(path, "m");
                assert!(detail.contains("missing field `available_at`"), "{detail}");
            }
            other => panic!("expected a manifest error, got {other:?}"),
        }
    }

    #[test]
    fn a_manifest_with_an_unknown_clock_fails_to_load_with_an_error_naming_it() {
        let bytes = shipped_with_clocks(|c| {
            let stats = c["published_at"].clone();
            c.insert("seen_at".into(), stats);
        });
        match Manifest::from_bytes("m", &bytes) {
            Err(Error::Manifest { detail, .. }) => {
                assert!(detail.contains("unknown field `seen_at`"), "{detail}");
            }
            other => panic!("expected a manifest error, got {other:?}"),
        }
    }

    #[test]
    fn clock_statistics_built_by_column_name_equal_those_built_from_rows() {
        let rows = vec![
            crate::model::record::tests::row(
                "0000000000-26-000001_1",
                "1",
                Some("2026-01-09T15:00:00Z"),
            ),
            crate::model::record::tests::row("0000000000-26-000002_1", "1", None),
        ];
        let by_name: PartitionClocks = CLOCK_COLUMNS
            .iter()
            .map(|&c| {
                let vals: Vec<Instant> = rows
                    .iter()
                    .filter_map(|r| match c {
                        "event_at" => r.event_at,
                        "published_at" => r.published_at,
                        "available_at" => r.available_at,
                        "acceptance_at" => r.acceptance_at,
                        _ => r.committed_at,
                    })
                    .collect();
                let stats = ClockStats {
                    min: vals.iter().min().copied(),
                    max: vals.iter().max().copied(),
                    nulls: (rows.len() - vals.len()) as u64,
                };
                (c.to_owned(), stats)
            })
            .collect();
        let from_rows = PartitionClocks::from_rows(&rows);
        assert_eq!(by_name, from_rows);
        assert_eq!(from_rows.published_at.nulls, 1);
        assert_eq!(from_rows.event_at.min, None);
    }

    #[test]
    fn spans_count_uncertified_days_between_certified_ranges_as_holes() {
        let cert = |from: &str, to: &str| Certification {
            source_id: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            from: day(from),
            to: day(to),
            certified_at: Instant::parse("2026-02-08T00:00:00Z").unwrap(),
            evidence: vec![],
        };
        let spans = derive_spans(&[
            cert("2026-01-10", "2026-01-12"),
            cert("2026-01-01", "2026-01-05"),
            cert("2026-01-04", "2026-01-06"),
        ]);
        assert_eq!(spans.len(), 1);
        let s = &spans[0];
        assert_eq!((s.first, s.last), (day("2026-01-01"), day("2026-01-12")));
        assert_eq!(
            s.holes,
            vec![DayRange {
                from: day("2026-01-07"),
                to: day("2026-01-09")
            }]
        );
        assert_eq!(
            s.frontier_key(),
            "sec.edgar/frontier:2026-01-01..2026-01-12;holes=3"
        );
    }
}
