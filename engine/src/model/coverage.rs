//! Coverage: which source-days a cut depends on, which of those are certified, and the keys
//! (`touched`, `missing`) every answer reports, and the certificate of a source-lane-day
//! (`/v1/coverage` and SQL's `coverage` table).
//!
//! Rules (documented in ARCHITECTURE.md):
//! - A cut at `as_of` depends on every day of the certified span from its first day through
//!   `as_of`'s UTC day; a diff `(start, end]` on the days from `start`'s to `end`'s. Days before
//!   the span's first day are outside what the corpus claims (the frontier key says where it
//!   starts); a cut ending before that first day is itself a hole.
//! - A needed day is missing when it is a hole inside the span or lies after its last day;
//!   under `visible_by=committed_at` also when it was certified only after `as_of`.
//! - Under `visible_by=available_at`, a needed day whose rows lack that clock is missing as
//!   `availability.<source>/<day>`.
//! - `missing` lists at most [`MAX_MISSING_KEYS`] keys, earliest first; `missing_total` says how
//!   many there were, so a far-future cut stays small.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Serialize;

use crate::model::clock::{Day, Instant, Lane, SourceId, VisibleBy};
use crate::model::manifest::{Manifest, PartitionEntry, SampleSet};

pub const MAX_MISSING_KEYS: usize = 32;

/// One key of `coverage.touched`: a source-day kept as its two values until it is written,
/// or any other key as its text. A page names up to a hundred days, and a `String` made and
/// freed for each was a tenth of a by-filer page's instructions (BENCHMARKS.md, issue 65).
///
/// Keys are equal when their texts are: a day and the text of that day's key are one key, so
/// touching either after the other touches nothing new.
#[derive(Debug, Clone)]
pub enum CoverageKey {
    /// `<source>/<YYYY-MM-DD>` (written by [`CoverageKey::write_to`], the one writer of a
    /// day's key, which [`day_key`] also uses).
    Day(SourceId, Day),
    Text(String),
}

impl CoverageKey {
    /// Appends the key's text to `out` (an answer's body is bytes: a day's key goes into it
    /// with no `String` made or checked on the way).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            CoverageKey::Day(source, day) => {
                out.extend_from_slice(source.as_str().as_bytes());
                out.push(b'/');
                day.with_iso(|date| out.extend_from_slice(date.as_bytes()));
            }
            CoverageKey::Text(t) => out.extend_from_slice(t.as_bytes()),
        }
    }

    /// About how many bytes the key's text takes (exact for every key of a four-digit year).
    pub fn text_len(&self) -> usize {
        match self {
            CoverageKey::Day(source, _) => source.as_str().len() + 11,
            CoverageKey::Text(t) => t.len(),
        }
    }

    /// Whether the key's text is `text`, with no text made for a day.
    pub fn is(&self, text: &str) -> bool {
        match self {
            CoverageKey::Text(t) => t == text,
            CoverageKey::Day(source, day) => {
                let s = source.as_str();
                text.len() == s.len() + 11
                    && text.starts_with(s)
                    && text.as_bytes()[s.len()] == b'/'
                    && text[s.len() + 1..].parse::<Day>() == Ok(*day)
            }
        }
    }
}

impl PartialEq for CoverageKey {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CoverageKey::Day(s, d), CoverageKey::Day(t, e)) => s == t && d == e,
            (CoverageKey::Text(t), k) | (k, CoverageKey::Text(t)) => k.is(t),
        }
    }
}

impl Eq for CoverageKey {}

impl PartialEq<str> for CoverageKey {
    fn eq(&self, other: &str) -> bool {
        self.is(other)
    }
}

impl PartialEq<&str> for CoverageKey {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

impl From<String> for CoverageKey {
    fn from(text: String) -> Self {
        CoverageKey::Text(text)
    }
}

impl std::fmt::Display for CoverageKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CoverageKey::Day(source, day) => f.write_str(&day_key(*source, *day)),
            CoverageKey::Text(t) => f.write_str(t),
        }
    }
}

impl Serialize for CoverageKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            CoverageKey::Text(t) => s.serialize_str(t),
            CoverageKey::Day(source, day) => s.serialize_str(&day_key(*source, *day)),
        }
    }
}

/// The coverage object of an answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub touched: Vec<CoverageKey>,
    pub missing: Vec<String>,
    /// How many keys `missing` would hold unbounded (≥ `missing.len()`).
    pub missing_total: usize,
}

impl Coverage {
    pub fn is_complete(&self) -> bool {
        self.missing_total == 0
    }
    pub fn touch(&mut self, key: String) {
        if !self.touched.iter().any(|k| k.is(&key)) {
            self.touched.push(CoverageKey::Text(key));
        }
    }
    /// Touches the key of one source-day ([`day_key`]'s text).
    pub fn touch_day(&mut self, source: SourceId, day: Day) {
        let key = CoverageKey::Day(source, day);
        if !self.touched.contains(&key) {
            self.touched.push(key);
        }
    }
    /// Touches the key of each source-day in order, once, as `touch_day` would key by key, but
    /// comparing each distinct day with the keys before once: a page's rows name
    /// up to a hundred days. The days seen are kept sorted, and a day out of order is searched
    /// for by halves (a page of a filer that files on a hundred days compared each day with
    /// every one before it, a twentieth of the page's instructions); rows come in
    /// `published_at` order, so most days are the last one seen or after it, and need no search.
    pub fn touch_days(&mut self, days: impl IntoIterator<Item = (SourceId, Day)>) {
        let days = days.into_iter();
        let before = self.touched.len();
        // Made at the page's size (at most a day a row), where growing it by doubling
        // reallocated it six times for a page of a hundred days.
        let (fewest, most) = days.size_hint();
        let mut seen: Vec<(SourceId, Day)> = Vec::with_capacity(most.unwrap_or(fewest).min(128));
        self.touched.reserve(seen.capacity());
        for d @ (source, day) in days {
            // In `published_at` order a day is the last one seen again, or a day after every
            // one seen (new, and last in order): only a day out of order is searched for.
            match seen.last() {
                Some(&last) if last == d => continue,
                Some(&last) if last > d => match seen.binary_search(&d) {
                    Ok(_) => continue,
                    Err(at) => seen.insert(at, d),
                },
                _ => seen.push(d),
            }
            // Keys of distinct days differ: only the keys touched before can repeat one.
            let key = CoverageKey::Day(source, day);
            if !self.touched[..before].contains(&key) {
                self.touched.push(key);
            }
        }
    }
    /// Puts `key` first among the missing (an identity hole comes before the days a cut
    /// needs), keeping the list within [`MAX_MISSING_KEYS`].
    pub fn miss_first(&mut self, key: String) {
        self.missing.insert(0, key);
        self.missing_total += 1;
        self.missing.truncate(MAX_MISSING_KEYS);
    }
    /// Adds `key` to the missing, keeping the list within [`MAX_MISSING_KEYS`] (`missing_total`
    /// counts it either way).
    pub fn miss(&mut self, key: String) {
        self.missing_total += 1;
        if self.missing.len() < MAX_MISSING_KEYS {
            self.missing.push(key);
        }
    }
}

/// `<source>/<YYYY-MM-DD>`: the coverage key of one source-day.
pub fn day_key(source: SourceId, day: Day) -> String {
    let key = CoverageKey::Day(source, day);
    let mut text = Vec::with_capacity(key.text_len());
    key.write_to(&mut text);
    String::from_utf8(text).expect("a source's name and a date are UTF-8")
}

/// What the certified days of one source-lane are, as seen by one kind of answer.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The whole corpus: certifications of the manifest.
    Corpus,
    /// The public sample: only the sample set's days count as read.
    Sample(&'a SampleSet),
}

/// A stretch of instants, both ends included (microsecond resolution: `to` of a whole day
/// is its `23:59:59.999999Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stretch {
    pub from: Instant,
    pub to: Instant,
}

impl Stretch {
    pub fn contains(&self, at: Instant) -> bool {
        self.from <= at && at <= self.to
    }
}

/// The certification status of one day for one source-lane, as of a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DayStatus {
    Certified,
    /// Certified in this version, but only after the `committed_at` cut.
    CertifiedLater,
    Missing,
}

/// Per-day certification facts of one source-lane over its span, computed once per loaded
/// version: a coverage decision then reads a dense array instead of walking the
/// certification and partition lists for every day a cut needs.
#[derive(Debug, Clone)]
pub struct DayTable {
    first: Day,
    /// Earliest `certified_at` (µs) of a certification covering each day of the span;
    /// `i64::MAX` for a day no certification covers.
    earliest: Vec<i64>,
    /// Whether every row of each day carries `available_at`.
    available: Vec<bool>,
    /// `uncovered[i]`: days before offset `i` that no certification covers.
    uncovered: Vec<u32>,
    /// The span's frontier key ([`crate::model::manifest::Span::frontier_key`]): every
    /// answer touches it, and formatting it anew was a fiftieth of a page's instructions.
    frontier: String,
}

impl DayTable {
    /// The table of a source-lane, or `None` when nothing of it is certified.
    pub fn build(manifest: &Manifest, source: SourceId, lane: Lane) -> Option<Self> {
        let span = manifest.span(source, lane)?;
        let len = (span.last.days() - span.first.days() + 1) as usize;
        let mut earliest = vec![i64::MAX; len];
        for c in manifest
            .certifications
            .iter()
            .filter(|c| c.source_id == source && c.lane == lane)
        {
            let from = (c.from.days() - span.first.days()).max(0) as usize;
            let to = ((c.to.days() - span.first.days()) as usize).min(len - 1);
            for e in &mut earliest[from..=to] {
                *e = (*e).min(c.certified_at.micros());
            }
        }
        let mut available = vec![true; len];
        for p in manifest
            .partitions
            .iter()
            .filter(|p| p.source_id == source && p.lane == lane)
        {
            let off = p.date.days() - span.first.days();
            if off >= 0 && (off as usize) < len {
                available[off as usize] = p.clocks.available_at.nulls == 0;
            }
        }
        let mut uncovered = Vec::with_capacity(len + 1);
        uncovered.push(0);
        for e in &earliest {
            let last = *uncovered.last().expect("non-empty");
            uncovered.push(last + u32::from(*e == i64::MAX));
        }
        Some(DayTable {
            first: span.first,
            earliest,
            available,
            uncovered,
            frontier: span.frontier_key(),
        })
    }

    fn offset(&self, day: Day) -> Option<usize> {
        let off = day.days() - self.first.days();
        (off >= 0 && (off as usize) < self.earliest.len()).then_some(off as usize)
    }
}

/// Coverage view of one source-lane.
#[derive(Debug)]
pub struct SourceCoverage<'a> {
    manifest: &'a Manifest,
    source: SourceId,
    lane: Lane,
    scope: Scope<'a>,
    /// The source-lane's day table on the whole corpus (`None` when nothing of it is
    /// certified, and on the sample, whose days are its own list): the one decision of a
    /// day's certification status.
    table: Option<Cow<'a, DayTable>>,
    first: Option<Day>,
    last: Option<Day>,
    frontier: Option<Cow<'a, str>>,
}

impl<'a> SourceCoverage<'a> {
    /// The view of a source-lane; on the whole corpus its [`DayTable`] is built here (one pass
    /// over the span, the certifications and the partitions), so a caller answering many cuts
    /// keeps the table and uses [`Self::with_day_table`].
    pub fn new(manifest: &'a Manifest, source: SourceId, lane: Lane, scope: Scope<'a>) -> Self {
        let table = match scope {
            Scope::Corpus => DayTable::build(manifest, source, lane).map(Cow::Owned),
            Scope::Sample(_) => None,
        };
        Self::with(manifest, source, lane, scope, table)
    }

    /// The view of a source-lane of the whole corpus with its table built beforehand, as
    /// [`DayTable::build`] gives it (the corpus keeps one per loaded version).
    pub fn with_day_table(
        manifest: &'a Manifest,
        source: SourceId,
        lane: Lane,
        table: Option<&'a DayTable>,
    ) -> Self {
        Self::with(
            manifest,
            source,
            lane,
            Scope::Corpus,
            table.map(Cow::Borrowed),
        )
    }

    fn with(
        manifest: &'a Manifest,
        source: SourceId,
        lane: Lane,
        scope: Scope<'a>,
        table: Option<Cow<'a, DayTable>>,
    ) -> Self {
        let (first, last, frontier) = match scope {
            Scope::Corpus => match manifest.span(source, lane) {
                Some(s) => {
                    let frontier = match &table {
                        Some(Cow::Borrowed(t)) => Cow::Borrowed(t.frontier.as_str()),
                        _ => Cow::Owned(s.frontier_key()),
                    };
                    (Some(s.first), Some(s.last), Some(frontier))
                }
                None => (None, None, None),
            },
            Scope::Sample(set) => {
                let first = set.days.iter().min().copied();
                let last = set.days.iter().max().copied();
                let frontier = first.zip(last).map(|(f, l)| {
                    let holes = (l.days() - f.days() + 1) as usize
                        - set.days.iter().collect::<BTreeSet<_>>().len();
                    Cow::Owned(format!("{source}/frontier:{f}..{l};holes={holes}"))
                });
                (first, last, frontier)
            }
        };
        SourceCoverage {
            manifest,
            source,
            lane,
            scope,
            table,
            first,
            last,
            frontier,
        }
    }

    pub fn frontier_key(&self) -> Option<&str> {
        self.frontier.as_deref()
    }
    pub fn first(&self) -> Option<Day> {
        self.first
    }
    pub fn last(&self) -> Option<Day> {
        self.last
    }

    /// When `day` was first certified (µs), `None` when it never was; on the sample, whose
    /// days count as read from the start, `i64::MIN` for each of them.
    fn certified_since(&self, day: Day) -> Option<i64> {
        match self.scope {
            Scope::Sample(set) => set.days.contains(&day).then_some(i64::MIN),
            Scope::Corpus => self
                .table
                .as_deref()
                .and_then(|t| t.offset(day).map(|o| t.earliest[o]))
                .filter(|&at| at != i64::MAX),
        }
    }

    /// Status of `day` as seen by a cut at `as_of` on `visible_by`.
    pub fn status(&self, day: Day, visible_by: VisibleBy, as_of: Instant) -> DayStatus {
        match self.certified_since(day) {
            None => DayStatus::Missing,
            Some(at) if visible_by == VisibleBy::CommittedAt && at > as_of.micros() => {
                DayStatus::CertifiedLater
            }
            Some(_) => DayStatus::Certified,
        }
    }

    /// The instants at which a cut on `visible_by` answers without a hole in this source-lane:
    /// ordered, disjoint, inclusive stretches (`/v1/meta`'s `answerable`, the explorer's
    /// axis). It is [`Self::cut`]'s decision taken day by day rather than instant by
    /// instant: a cut needs every day from the span's first through its own, so the first
    /// hole ends every stretch (and, on `available_at`, the first day whose rows lack that
    /// clock); only under `committed_at` does the time of day matter, a day answering from
    /// the latest certification among the days it needs. Identity holes are a ticker's, not a
    /// source-lane's, and are not here.
    pub fn answerable(&self, visible_by: VisibleBy) -> Vec<Stretch> {
        let mut out: Vec<Stretch> = Vec::new();
        let (Some(first), Some(last)) = (self.first, self.last) else {
            return out;
        };
        let mut needed_since = i64::MIN;
        let mut day = first;
        while day <= last {
            let Some(at) = self.certified_since(day) else {
                break;
            };
            if visible_by == VisibleBy::AvailableAt && !self.has_availability(day) {
                break;
            }
            needed_since = needed_since.max(at);
            let (start, end) = (day.start().micros(), day.next().start().micros() - 1);
            let from = if visible_by == VisibleBy::CommittedAt {
                start.max(needed_since)
            } else {
                start
            };
            if from <= end {
                match out.last_mut() {
                    Some(s) if s.to.micros() + 1 == from => s.to = Instant::from_micros(end),
                    _ => out.push(Stretch {
                        from: Instant::from_micros(from),
                        to: Instant::from_micros(end),
                    }),
                }
            }
            day = day.next();
        }
        out
    }

    /// Whether rows of `day` all carry `available_at` (a day without rows trivially does).
    fn has_availability(&self, day: Day) -> bool {
        if let Some(t) = self.table.as_deref()
            && let Some(o) = t.offset(day)
        {
            return t.available[o];
        }
        self.manifest
            .partitions
            .iter()
            .find(|p| p.source_id == self.source && p.lane == self.lane && p.date == day)
            .is_none_or(|p| p.clocks.available_at.nulls == 0)
    }

    /// Coverage of the days `[from, to]` needed by a cut at `as_of`.
    pub fn needed(&self, from: Day, to: Day, visible_by: VisibleBy, as_of: Instant) -> Coverage {
        let mut cov = Coverage::default();
        let Some(first) = self.first else {
            // Nothing of this source-lane was ever certified: the cut's own day is a hole.
            cov.miss(day_key(self.source, to));
            return cov;
        };
        if let Some(f) = &self.frontier {
            cov.touch(f.to_string());
        }
        if to < first {
            cov.miss(day_key(self.source, to));
            return cov;
        }
        let mut day = from.max(first);
        // Fast path: on the publication clock, a range inside the span with no uncovered day
        // is complete without a walk.
        if let Some(t) = self.table.as_deref()
            && visible_by == VisibleBy::PublishedAt
            && let (Some(a), Some(b)) = (t.offset(day), t.offset(to))
            && t.uncovered[b + 1] == t.uncovered[a]
        {
            cov.touch_day(self.source, to);
            return cov;
        }
        while day <= to {
            if self.status(day, visible_by, as_of) != DayStatus::Certified {
                cov.miss(day_key(self.source, day));
                // Past the last certified day everything is missing: count without walking.
                if let Some(last) = self.last
                    && day > last
                    && cov.missing.len() >= MAX_MISSING_KEYS
                {
                    cov.missing_total += (to.days() - day.days()) as usize;
                    break;
                }
            } else if visible_by == VisibleBy::AvailableAt && !self.has_availability(day) {
                cov.miss(format!("availability.{}/{day}", self.source));
            }
            day = day.next();
        }
        if self.status(to, visible_by, as_of) == DayStatus::Certified {
            cov.touch_day(self.source, to);
        }
        cov
    }

    /// Coverage of a point cut at `as_of`.
    pub fn cut(&self, visible_by: VisibleBy, as_of: Instant) -> Coverage {
        self.needed(
            self.first.unwrap_or(as_of.day()),
            as_of.day(),
            visible_by,
            as_of,
        )
    }

    /// Coverage of a diff `(start, end]`.
    pub fn window(&self, visible_by: VisibleBy, start: Instant, end: Instant) -> Coverage {
        self.needed(start.day(), end.day(), visible_by, end)
    }
}

/// A coverage certificate: one per source-lane-day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Certificate {
    pub key: String,
    pub source_id: SourceId,
    pub lane: Lane,
    pub date: Day,
    /// `certified`, or `missing` (never certified, or certified only after the cut).
    pub status: &'static str,
    /// Rows of a certified day (0 for a complete empty day); null when missing.
    pub row_count: Option<u64>,
    /// Rows the corpus holds for a day it does not certify (partial, never a count).
    pub rows_held: u64,
    pub certified_at: Option<Instant>,
    pub partition: Option<PartitionRef>,
    pub evidence: Vec<crate::model::manifest::Evidence>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PartitionRef {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// Where the next page of coverage certificates starts.
pub type CoveragePosition = (SourceId, Lane, Day);

/// The `(source, lane, day)` keys a coverage listing of one lane holds, in order: every day of
/// each of the `held` sources' span (through `as_of`'s day when given), or the one `date` asked for.
/// `SELECT … FROM coverage` (SQL) lists the same keys as `/v1/coverage`.
pub fn certificate_keys(
    manifest: &Manifest,
    held: &[SourceId],
    source: Option<SourceId>,
    lane: Lane,
    date: Option<Day>,
    as_of: Option<Instant>,
) -> Vec<CoveragePosition> {
    let mut keys = Vec::new();
    let sources = match source {
        Some(s) => vec![s],
        None => held.to_vec(),
    };
    let as_of_day = as_of.map(Instant::day);
    for source in sources {
        if let Some(date) = date {
            keys.push((source, lane, date));
            continue;
        }
        if let Some(span) = manifest.span(source, lane) {
            let mut d = span.first;
            let last = as_of_day.map_or(span.last, |a| a.min(span.last));
            while d <= last {
                keys.push((source, lane, d));
                d = d.next();
            }
        }
    }
    keys.sort();
    keys
}

/// The certificate of one source-lane-day of `manifest`, as known at `as_of` (latest when
/// `None`): the one rule behind `/v1/coverage` and SQL's `coverage`. `part` is the day's
/// partition (the caller finds it, by a scan or a map); `table` the source-lane's
/// [`DayTable`], as [`DayTable::build`] gives it (callers listing many days build it once).
pub fn certificate_of(
    manifest: &Manifest,
    table: Option<&DayTable>,
    (source, lane, date): CoveragePosition,
    part: Option<&PartitionEntry>,
    as_of: Option<Instant>,
) -> Certificate {
    let view = SourceCoverage::with_day_table(manifest, source, lane, table);
    // Coverage listings are cuts on what the corpus had committed: a certification made
    // after `as_of` is not yet in force.
    let status = view.status(
        date,
        VisibleBy::CommittedAt,
        as_of.unwrap_or(Instant::from_micros(i64::MAX)),
    );
    let cert = manifest
        .certifications
        .iter()
        .filter(|c| c.source_id == source && c.lane == lane && c.from <= date && date <= c.to)
        .min_by_key(|c| c.certified_at);
    let certified = status == DayStatus::Certified;
    Certificate {
        key: day_key(source, date),
        source_id: source,
        lane,
        date,
        status: if certified { "certified" } else { "missing" },
        row_count: certified.then(|| part.map_or(0, |p| p.row_count)),
        rows_held: part.map_or(0, |p| p.row_count),
        certified_at: cert.filter(|_| certified).map(|c| c.certified_at),
        partition: part.map(|p| PartitionRef {
            path: p.path.clone(),
            sha256: p.sha256.clone(),
            bytes: p.bytes,
        }),
        evidence: cert
            .filter(|_| certified)
            .map(|c| c.evidence.clone())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::manifest::{Certification, FORMAT, derive_spans};

    #[test]
    fn touching_a_pages_days_at_once_gives_what_touching_their_keys_one_by_one_gives() {
        let fr = SourceId::FederalRegisterPi;
        let days = [
            (SourceId::SecEdgar, day("2026-01-05")),
            (SourceId::SecEdgar, day("2026-01-02")),
            (SourceId::SecEdgar, day("2026-01-05")),
            (fr, day("2026-01-05")),
            (SourceId::SecEdgar, day("2026-01-02")),
            (SourceId::SecEdgar, day("2026-01-07")),
        ];
        let mut one_by_one = Coverage::default();
        one_by_one.touch("sec.edgar/2026-01-02".into());
        let mut at_once = one_by_one.clone();
        for (s, d) in days {
            one_by_one.touch(day_key(s, d));
        }
        at_once.touch_days(days);
        assert_eq!(at_once, one_by_one);
        assert_eq!(
            at_once.touched,
            [
                "sec.edgar/2026-01-02",
                "sec.edgar/2026-01-05",
                "us.federal_register.pi/2026-01-05",
                "sec.edgar/2026-01-07"
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn touching_any_days_at_once_gives_what_touching_them_one_by_one_gives(
            mut days in proptest::collection::vec((0..3usize, 20_000..20_150i32), 0..200),
            before in proptest::collection::vec((0..3usize, 20_000..20_150i32), 0..4),
            in_page_order: bool,
        ) {
            // A page's rows in `published_at` order name their days in order; others need not.
            if in_page_order {
                days.sort_unstable();
            }
            let key = |(s, d): (usize, i32)| (SourceId::ALL[s], Day::from_days(d));
            let mut one_by_one = Coverage::default();
            for k in before.iter().copied().map(key) {
                one_by_one.touch(day_key(k.0, k.1));
            }
            let mut at_once = one_by_one.clone();
            for (s, d) in days.iter().copied().map(key) {
                one_by_one.touch(day_key(s, d));
            }
            at_once.touch_days(days.iter().copied().map(key));
            proptest::prop_assert_eq!(at_once, one_by_one);
        }
    }

    fn day(s: &str) -> Day {
        s.parse().unwrap()
    }
    fn t(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    fn manifest(ranges: &[(&str, &str, &str)]) -> Manifest {
        let certifications: Vec<Certification> = ranges
            .iter()
            .map(|(f, to, at)| Certification {
                source_id: SourceId::SecEdgar,
                lane: Lane::CertifiedPit,
                from: day(f),
                to: day(to),
                certified_at: t(at),
                evidence: vec![],
            })
            .collect();
        Manifest {
            format: FORMAT.into(),
            created_at: t("2026-03-01T00:00:00Z"),
            parent: None,
            partitions: vec![],
            spans: derive_spans(&certifications),
            certifications,
            identity: vec![],
            access: vec![],
            notes: BTreeMap::new(),
            sample: None,
            delta: None,
        }
    }

    #[test]
    fn a_cut_inside_a_fully_certified_span_misses_nothing() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-02-01T00:00:00Z")]);
        let c = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
            .cut(VisibleBy::PublishedAt, t("2026-01-15T12:00:00Z"));
        assert!(c.is_complete());
        assert_eq!(
            c.touched,
            vec![
                "sec.edgar/frontier:2026-01-01..2026-01-31;holes=0",
                "sec.edgar/2026-01-15"
            ]
        );
    }

    #[test]
    fn a_cut_over_a_hole_inside_the_span_is_missing_that_day() {
        let m = manifest(&[
            ("2026-01-01", "2026-01-09", "2026-02-01T00:00:00Z"),
            ("2026-01-11", "2026-01-31", "2026-02-01T00:00:00Z"),
        ]);
        let c = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
            .cut(VisibleBy::PublishedAt, t("2026-01-15T12:00:00Z"));
        assert_eq!(c.missing, vec!["sec.edgar/2026-01-10"]);
        assert!(c.touched[0].to_string().ends_with(";holes=1"));
    }

    #[test]
    fn days_after_the_last_certified_day_are_holes_and_the_list_stays_bounded() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-02-01T00:00:00Z")]);
        let c = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
            .cut(VisibleBy::PublishedAt, t("2126-01-01T00:00:00Z"));
        assert_eq!(c.missing.len(), MAX_MISSING_KEYS);
        assert_eq!(c.missing[0], "sec.edgar/2026-02-01");
        let expected = (day("2126-01-01").days() - day("2026-02-01").days() + 1) as usize;
        assert_eq!(c.missing_total, expected);
    }

    #[test]
    fn a_cut_before_the_span_is_a_hole_on_its_own_day() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-02-01T00:00:00Z")]);
        let c = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
            .cut(VisibleBy::PublishedAt, t("2025-06-01T00:00:00Z"));
        assert_eq!(c.missing, vec!["sec.edgar/2025-06-01"]);
    }

    #[test]
    fn committed_at_cut_before_certification_treats_the_day_as_missing() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-01-15T00:00:00Z")]);
        let cov = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus);
        assert!(
            !cov.cut(VisibleBy::CommittedAt, t("2026-01-10T00:00:00Z"))
                .is_complete()
        );
        assert!(
            cov.cut(VisibleBy::PublishedAt, t("2026-01-10T00:00:00Z"))
                .is_complete()
        );
        assert!(
            cov.cut(VisibleBy::CommittedAt, t("2026-01-20T00:00:00Z"))
                .is_complete()
        );
    }

    #[test]
    fn a_lane_never_certified_is_a_hole_not_an_empty_answer() {
        let m = manifest(&[("2026-01-01", "2026-01-31", "2026-02-01T00:00:00Z")]);
        let c = SourceCoverage::new(
            &m,
            SourceId::SecEdgar,
            Lane::ForwardFirstSeen,
            Scope::Corpus,
        )
        .cut(VisibleBy::PublishedAt, t("2026-01-20T00:00:00Z"));
        assert_eq!(c.missing, vec!["sec.edgar/2026-01-20"]);
    }

    #[test]
    fn diff_window_needs_only_the_days_from_start_to_end() {
        let m = manifest(&[
            ("2026-01-01", "2026-01-04", "2026-02-01T00:00:00Z"),
            ("2026-01-06", "2026-01-31", "2026-02-01T00:00:00Z"),
        ]);
        let cov = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus);
        assert!(
            cov.window(
                VisibleBy::PublishedAt,
                t("2026-01-07T00:00:00Z"),
                t("2026-01-09T00:00:00Z")
            )
            .is_complete()
        );
        assert_eq!(
            cov.window(
                VisibleBy::PublishedAt,
                t("2026-01-04T00:00:00Z"),
                t("2026-01-09T00:00:00Z")
            )
            .missing,
            vec!["sec.edgar/2026-01-05"]
        );
    }

    /// The certification walk the day table replaced, kept only here as its oracle: a day is
    /// certified when a certification covers it (made by `as_of` on the commit clock), certified
    /// later when one covers it only after, missing otherwise.
    fn walked(m: &Manifest, day: Day, by: VisibleBy, as_of: Instant) -> DayStatus {
        let mut best = DayStatus::Missing;
        for c in &m.certifications {
            if c.from <= day && day <= c.to {
                if by != VisibleBy::CommittedAt || c.certified_at <= as_of {
                    return DayStatus::Certified;
                }
                best = DayStatus::CertifiedLater;
            }
        }
        best
    }

    #[test]
    fn the_day_table_decides_exactly_as_the_certification_walk() {
        let m = manifest(&[
            ("2026-01-01", "2026-01-10", "2026-01-11T00:00:00Z"),
            ("2026-01-05", "2026-01-20", "2026-01-21T00:00:00Z"),
            ("2026-01-25", "2026-02-03", "2026-02-04T00:00:00Z"),
            ("2026-02-01", "2026-02-01", "2026-01-15T00:00:00Z"),
        ]);
        let table = DayTable::build(&m, SourceId::SecEdgar, Lane::CertifiedPit);
        assert!(table.is_some());
        let built = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus);
        let kept = SourceCoverage::with_day_table(
            &m,
            SourceId::SecEdgar,
            Lane::CertifiedPit,
            table.as_ref(),
        );
        let start = day("2025-12-28").start().micros();
        for h in (0..50 * 24).step_by(7) {
            let at = Instant::from_micros(start + h * 3_600_000_000);
            for by in [
                VisibleBy::PublishedAt,
                VisibleBy::AvailableAt,
                VisibleBy::CommittedAt,
            ] {
                let d = at.day();
                assert_eq!(
                    built.status(d, by, at),
                    walked(&m, d, by, at),
                    "{d} at {at} by {by:?}"
                );
                assert_eq!(built.cut(by, at), kept.cut(by, at), "cut at {at} by {by:?}");
                let from = Instant::from_micros(at.micros() - 5 * 86_400_000_000);
                assert_eq!(built.window(by, from, at), kept.window(by, from, at));
            }
        }
    }

    /// A partition of `date` whose `nulls` rows lack `available_at` (of two rows).
    fn partition(date: &str, nulls: u64) -> PartitionEntry {
        let mut clocks = crate::model::manifest::PartitionClocks::EMPTY;
        for i in 0..2 {
            clocks
                .available_at
                .add((i >= nulls).then(|| t("2026-01-03T01:00:00Z")));
        }
        PartitionEntry::new(crate::model::manifest::Partition {
            source_id: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            date: day(date),
            path: String::new(),
            row_count: 2,
            bytes: 0,
            sha256: String::new(),
            clocks,
            commits: None,
            available_hours: None,
        })
    }

    /// Every instant of a long walk: a cut answers without a hole exactly when one of
    /// `answerable`'s stretches holds it, on each clock, on the corpus and on a sample.
    fn holds_answerable_to_cut(view: &SourceCoverage<'_>, from: &str, hours: i64) {
        let start = day(from).start().micros();
        for by in [
            VisibleBy::PublishedAt,
            VisibleBy::AvailableAt,
            VisibleBy::CommittedAt,
        ] {
            let stretches = view.answerable(by);
            for w in stretches.windows(2) {
                assert!(w[0].to.micros() + 1 < w[1].from.micros(), "{w:?} touch");
            }
            // Every 37 minutes, and each stretch's ends and their neighbours.
            let mut probes: Vec<i64> = (0..hours * 60 / 37)
                .map(|m| start + m * 37 * 60_000_000)
                .collect();
            for s in &stretches {
                for at in [s.from.micros(), s.to.micros()] {
                    probes.extend([at - 1, at, at + 1]);
                }
            }
            for at in probes.into_iter().map(Instant::from_micros) {
                assert_eq!(
                    view.cut(by, at).is_complete(),
                    stretches.iter().any(|s| s.contains(at)),
                    "at {at} by {by:?}: {stretches:?}"
                );
            }
        }
    }

    #[test]
    fn a_cut_answers_without_a_hole_exactly_inside_the_answerable_stretches() {
        let mut m = manifest(&[
            ("2026-01-01", "2026-01-10", "2026-01-11T06:00:00Z"),
            ("2026-01-05", "2026-01-11", "2026-01-03T00:00:00Z"),
            ("2026-01-12", "2026-01-20", "2026-01-12T18:30:00Z"),
            ("2026-01-25", "2026-02-03", "2026-02-04T00:00:00Z"),
        ]);
        // Rows of 2026-01-08 carry no available_at: the available_at stretch ends before it.
        m.partitions = vec![partition("2026-01-03", 0), partition("2026-01-08", 2)];
        let view = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus);
        assert_eq!(
            view.answerable(VisibleBy::PublishedAt),
            [Stretch {
                from: t("2026-01-01T00:00:00Z"),
                to: t("2026-01-20T23:59:59.999999Z")
            }]
        );
        assert_eq!(
            view.answerable(VisibleBy::AvailableAt),
            [Stretch {
                from: t("2026-01-01T00:00:00Z"),
                to: t("2026-01-07T23:59:59.999999Z")
            }]
        );
        // Nothing is in force before 2026-01-11T06:00 (the first days' certification); the
        // 12th waits for its own.
        assert_eq!(
            view.answerable(VisibleBy::CommittedAt),
            [
                Stretch {
                    from: t("2026-01-11T06:00:00Z"),
                    to: t("2026-01-11T23:59:59.999999Z")
                },
                Stretch {
                    from: t("2026-01-12T18:30:00Z"),
                    to: t("2026-01-20T23:59:59.999999Z")
                },
            ]
        );
        holds_answerable_to_cut(&view, "2025-12-30", 40 * 24);
        let sample = SampleSet {
            source_id: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            days: vec![day("2026-01-02"), day("2026-01-03"), day("2026-01-05")],
            examples: vec![],
        };
        let view = SourceCoverage::new(
            &m,
            SourceId::SecEdgar,
            Lane::CertifiedPit,
            Scope::Sample(&sample),
        );
        assert_eq!(
            view.answerable(VisibleBy::CommittedAt),
            [Stretch {
                from: t("2026-01-02T00:00:00Z"),
                to: t("2026-01-03T23:59:59.999999Z")
            }]
        );
        holds_answerable_to_cut(&view, "2025-12-30", 10 * 24);
    }

    #[test]
    fn a_lane_never_certified_answers_nowhere() {
        let m = manifest(&[]);
        let view = SourceCoverage::new(&m, SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus);
        for by in VisibleBy::ALL {
            assert!(view.answerable(*by).is_empty());
        }
    }
}
