//! `asof bench-corpus`: a synthetic EDGAR-like corpus at any scale, deterministic by seed.
//!
//! What it imitates (so benchmarks measure what production will see):
//! - filers drawn from a Zipf law over `ciks` CIKs (rank 1 files the most), CIK numbers
//!   scattered so big filers are not neighbours;
//! - a daily volume that ramps up fourfold from the first day to the last, quiet Saturdays
//!   and certified Sundays with no rows (`count: 0` days);
//! - the last two days held but not yet certified (coverage holes: a cut on them is a 409, as
//!   on a live corpus whose newest days are still being ingested); a hole inside the span
//!   would make every later cut a hole, which is not what a benchmark wants to measure;
//! - every clock populated as real certified-lane EDGAR rows are: `published_at` =
//!   `acceptance_at` (an instant in the filing day), `event_at` at day resolution (period of
//!   report), `committed_at` the next morning's capture, `available_at` null (never imputed);
//! - one row in a thousand corrected by a later capture (a revision chained by `supersedes`);
//! - optionally (`forward_days`), the forward lane over the last days, as the poller keeps it:
//!   every row of those days again in `forward_first_seen`, `available_at` the minute the
//!   current-filings feed showed it (1 to 30 minutes after acceptance; a correction when its
//!   capture saw it), certified like the certified lane.
//!
//! Rows go through the publish path's own writers (`write_partition`, the access-file writer,
//! `publish_manifest`), streamed one day and one year at a time so memory stays bounded by a
//! year of rows. The same spec and seed give the same `corpus_version`.

use std::collections::BTreeMap;

use asof_engine::format::{access, ids, late};
use asof_engine::model::clock::{Day, Instant, Lane, SourceId};
use asof_engine::model::manifest::{Certification, Evidence, FORMAT, Manifest};
use asof_engine::model::record::NewsRow;
use asof_engine::store::CorpusStore;
use asof_engine::write::access::GroupBuilder;
use asof_engine::write::encode::write_partition;
use asof_engine::write::publish::publish_manifest;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub rows: u64,
    pub days: u32,
    pub ciks: u32,
    pub seed: u64,
    /// The last day of the corpus.
    pub last_day: Day,
    /// When the certified days were certified; `None`: on the corpus's commit instant, after
    /// its last day (so every `committed_at` cut inside the span is a hole, as on a corpus
    /// certified after the fact). An instant before the first day makes `committed_at` cuts
    /// inside the span answerable, for benchmarks of that clock.
    pub certified_at: Option<Instant>,
    /// The last this many days also held in the forward lane (0: none).
    pub forward_days: u32,
}

/// What was generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub version: String,
    pub rows: u64,
    pub partitions: usize,
    pub hole_days: u32,
    pub empty_certified_days: u32,
}

/// The synthetic corpus's commit instant: fixed, so a rebuild gives the same version.
const CREATED_AT: &str = "2026-02-08T00:00:00Z";

const FORMS: [(&str, u32); 10] = [
    ("4", 40),
    ("8-K", 12),
    ("10-Q", 8),
    ("SC 13G/A", 8),
    ("424B2", 10),
    ("6-K", 5),
    ("3", 5),
    ("10-K", 3),
    ("D", 6),
    ("S-1", 3),
];

/// SplitMix64: small, fast, and good enough for synthetic data; seeded per day so days are
/// independent of each other (and of the order they are generated in).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number of the sequence (a seeded generator, not an iterator: it never ends).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Zipf(1.0) over ranks `1..=n`: the cumulative weights, sampled by binary search.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: u32) -> Self {
        let mut acc = 0.0;
        let cdf = (1..=n)
            .map(|k| {
                acc += 1.0 / f64::from(k);
                acc
            })
            .collect();
        Zipf { cdf }
    }
    /// A rank in `0..n`.
    fn sample(&self, rng: &mut Rng) -> usize {
        let total = *self.cdf.last().expect("at least one CIK");
        let u = rng.unit() * total;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// The CIK of a filer rank: an affine scatter over a range as wide as EDGAR's.
pub fn cik_of(rank: usize, ciks: u32) -> String {
    let n = u64::from(ciks.max(1));
    let p = 2_654_435_761u64 % n.max(2); // odd multiplier, scattered modulo n
    let scattered = (rank as u64 * p.max(1)) % n;
    (1_000 + scattered * 2 + (rank as u64 % 2)).to_string()
}

/// Whether a day (by its offset from the first) is held but uncertified: the last two days of
/// a corpus longer than ten days.
fn is_hole(offset: u32, days: u32) -> bool {
    days > 10 && offset + 2 >= days
}

/// Relative volume of a day: a fourfold ramp, quiet Saturdays, no rows on Sundays.
fn weight(day: Day, offset: u32, days: u32) -> f64 {
    let ramp = 1.0 + 3.0 * f64::from(offset) / f64::from(days.max(1));
    match day.to_date().weekday() {
        time::Weekday::Sunday => 0.0,
        time::Weekday::Saturday => 0.05 * ramp,
        _ => ramp,
    }
}

/// Rows per day summing to exactly `spec.rows` (largest remainders get the rounding).
fn daily_counts(spec: &Spec, first: Day) -> Vec<u64> {
    let mut day = first;
    let mut weights = Vec::with_capacity(spec.days as usize);
    for offset in 0..spec.days {
        weights.push(weight(day, offset, spec.days));
        day = day.next();
    }
    let total: f64 = weights.iter().sum();
    if total == 0.0 {
        return vec![0; spec.days as usize];
    }
    let exact: Vec<f64> = weights
        .iter()
        .map(|w| w / total * spec.rows as f64)
        .collect();
    let mut counts: Vec<u64> = exact.iter().map(|e| e.floor() as u64).collect();
    let short = spec.rows - counts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..exact.len()).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor())
            .total_cmp(&(exact[a] - exact[a].floor()))
            .then(a.cmp(&b))
    });
    for &i in order.iter().take(short as usize) {
        counts[i] += 1;
    }
    counts
}

fn form(rng: &mut Rng) -> &'static str {
    let total: u32 = FORMS.iter().map(|f| f.1).sum();
    let mut x = rng.below(u64::from(total)) as u32;
    for (f, w) in FORMS {
        if x < w {
            return f;
        }
        x -= w;
    }
    FORMS[0].0
}

/// The forward lane's copy of a certified-lane row, first seen `seen` (sealed anew: the lane
/// and `available_at` are content).
fn forward_copy(row: &NewsRow, seen: Instant) -> NewsRow {
    let mut f = row.clone();
    f.lane = Lane::ForwardFirstSeen;
    f.available_at = Some(seen);
    f.availability_basis = asof_engine::AvailabilityBasis::LocalFirstSeen;
    f.supersedes = None;
    f.seal()
}

/// The rows of one day in the certified lane and, when `forward`, in the forward lane (sealed;
/// revisions chained in each lane), deterministic in `(seed, day)`: the certified lane's rows
/// are the same whether or not the forward lane is generated.
fn day_lanes(
    spec: &Spec,
    zipf: &Zipf,
    day: Day,
    count: u64,
    serial: u64,
    forward: bool,
) -> (Vec<NewsRow>, Vec<NewsRow>) {
    let mut seen_rng =
        Rng(spec.seed ^ 0x5eed ^ (i64::from(day.days()) as u64).wrapping_mul(0x85eb_ca6b));
    let mut ahead = Vec::new();
    let mut rng = Rng(spec.seed ^ (i64::from(day.days()) as u64).wrapping_mul(0x9e37_79b9));
    let mut rows = Vec::with_capacity(count as usize + count as usize / 500);
    let yy = day.to_date().year() % 100;
    let captured = Instant::from_micros(day.next().start().micros() + 6 * 3_600_000_000);
    for i in 0..count {
        let rank = zipf.sample(&mut rng);
        let cik = cik_of(rank, spec.ciks);
        let n = serial + i;
        let accession = format!(
            "{:010}-{yy:02}-{:06}",
            1_000_000 + n / 1_000_000,
            n % 1_000_000
        );
        // Filings arrive between 10:00 and 22:00 UTC (06:00–17:30 in New York, plus after-hours).
        let accepted = Instant::from_micros(
            day.start().micros() + (36_000 + rng.below(43_200) as i64) * 1_000_000,
        );
        let form = form(&mut rng);
        let period = Day::from_date(day.to_date() - time::Duration::days(rng.below(90) as i64));
        let row = NewsRow {
            id: format!("{accession}_{cik}"),
            source_id: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            form: Some(form.to_owned()),
            accession: Some(accession.clone()),
            cik: Some(cik.clone()),
            title: format!("{form} - SYNTHETIC FILER {cik} (Filer)"),
            event_at: Some(period.end_of_day()),
            published_at: Some(accepted),
            available_at: None,
            acceptance_at: Some(accepted),
            committed_at: Some(captured),
            availability_basis: asof_engine::AvailabilityBasis::Unknown,
            revision_id: String::new(),
            supersedes: None,
            content_sha256: String::new(),
            source_locator: format!(
                "https://www.sec.gov/Archives/edgar/data/{cik}/{}/{accession}-index.htm",
                accession.replace('-', "")
            ),
            entity_id: Some(cik),
            payload: None,
        }
        .seal();
        // One in a thousand: a capture 30 days later corrects the acceptance instant by up to
        // an hour earlier (kept on the same day, so the revision shares the partition).
        if rng.below(1000) == 0 {
            let mut fix = row.clone();
            let back = (rng.below(3600) as i64 + 1) * 1_000_000;
            let at = Instant::from_micros((accepted.micros() - back).max(day.start().micros()));
            fix.published_at = Some(at);
            fix.acceptance_at = Some(at);
            fix.committed_at = Some(Instant::from_micros(
                captured.micros() + 30 * 86_400_000_000,
            ));
            let mut fix = fix.seal();
            fix.supersedes = Some(row.revision_id.clone());
            if forward {
                let first = forward_copy(&row, first_seen(&mut seen_rng, accepted));
                let mut f = forward_copy(&fix, captured_fix(&fix));
                f.supersedes = Some(first.revision_id.clone());
                ahead.push(f);
                ahead.push(first);
            }
            rows.push(fix);
        } else if forward {
            ahead.push(forward_copy(&row, first_seen(&mut seen_rng, accepted)));
        }
        rows.push(row);
    }
    (rows, ahead)
}

/// When the current-filings feed first showed a filing accepted at `accepted`: 1 to 30
/// minutes later.
fn first_seen(rng: &mut Rng, accepted: Instant) -> Instant {
    Instant::from_micros(accepted.micros() + (60 + rng.below(1_740) as i64) * 1_000_000)
}

/// A correction is first seen by the capture that committed it.
fn captured_fix(fix: &NewsRow) -> Instant {
    fix.committed_at.expect("a generated row has committed_at")
}

/// Builds the corpus into `store` (which should be empty); `progress(rows_done)` is called
/// after each day.
pub async fn build(store: &CorpusStore, spec: &Spec, progress: &dyn Fn(u64)) -> Result<Built> {
    if spec.days == 0 || spec.ciks == 0 {
        return Err(Error::parse(
            "bench-corpus",
            "arguments",
            "--days and --ciks must be at least 1",
        ));
    }
    let first =
        Day::from_date(spec.last_day.to_date() - time::Duration::days(i64::from(spec.days) - 1));
    let counts = daily_counts(spec, first);
    let zipf = Zipf::new(spec.ciks);
    let mut spec_text = format!(
        "synthetic EDGAR-like corpus: rows={} days={} ciks={} seed={} last_day={}",
        spec.rows, spec.days, spec.ciks, spec.seed, spec.last_day
    );
    if let Some(at) = spec.certified_at {
        spec_text.push_str(&format!(" certified_at={at}"));
    }
    if spec.forward_days > 0 {
        spec_text.push_str(&format!(" forward_days={}", spec.forward_days));
    }
    let evidence = Evidence {
        file: format!(
            "bench-corpus --rows {} --days {} --ciks {} --seed {}",
            spec.rows, spec.days, spec.ciks, spec.seed
        ),
        sha256: hex::encode(Sha256::digest(spec_text.as_bytes())),
    };
    let created_at = Instant::parse(CREATED_AT).expect("static instant");
    let certified_at = spec.certified_at.unwrap_or(created_at);
    // A whole corpus, not a change on top; but the pointer's history stays one chain, so a
    // corpus written over another names it as parent (and the pointer moves only from it).
    let parent = store.current_version().await?;
    let mut manifest = Manifest {
        format: FORMAT.into(),
        created_at,
        parent,
        partitions: Vec::new(),
        certifications: Vec::new(),
        spans: Vec::new(),
        identity: Vec::new(),
        access: Vec::new(),
        notes: BTreeMap::from([(SourceId::SecEdgar.to_string(), spec_text)]),
        sample: None,
        delta: None,
    };
    let (mut serial, mut written) = (0u64, 0u64);
    // The certified lane's access file of the era being written (days come in order), and the
    // forward lane's by era: both sort in bounded memory (`GroupBuilder` spills).
    let mut era_rows: Option<GroupBuilder> = None;
    // Every row's id run entry (12 bytes a row), written as one run at the end, so ingests
    // into the corpus find what it holds by id from the start.
    let mut id_entries: Vec<ids::IdEntry> = Vec::new();
    let mut run: Option<(Day, Day)> = None; // the certified range being extended
    // The forward lane: its certified range, rows (for its access files) and id entries.
    let mut forward_run: Option<(Day, Day)> = None;
    let mut fresh_late = std::collections::HashMap::new();
    let mut forward_rows: BTreeMap<i32, GroupBuilder> = BTreeMap::new();
    let mut forward_ids = Vec::new();
    let mut built = Built {
        version: String::new(),
        rows: 0,
        partitions: 0,
        hole_days: 0,
        empty_certified_days: 0,
    };
    let mut day = first;
    for (offset, &count) in counts.iter().enumerate() {
        let era = access::era_of(day.to_date().year());
        if let Some(b) = era_rows.take_if(|b| b.group().2 != era) {
            manifest.access.extend(b.finish(store, "").await?);
        }
        let hole = is_hole(offset as u32, spec.days);
        if hole {
            built.hole_days += 1;
            if let Some((from, to)) = run.take() {
                manifest.certifications.push(certification(
                    Lane::CertifiedPit,
                    from,
                    to,
                    certified_at,
                    &evidence,
                ));
            }
        } else {
            run = Some(run.map_or((day, day), |(from, _)| (from, day)));
        }
        let forward = offset as u32 + spec.forward_days >= spec.days;
        if forward && !hole {
            forward_run = Some(forward_run.map_or((day, day), |(from, _)| (from, day)));
        }
        if count == 0 {
            built.empty_certified_days += u32::from(!hole);
        } else {
            let (rows, ahead) = day_lanes(spec, &zipf, day, count, serial, forward);
            serial += count;
            written += (rows.len() + ahead.len()) as u64;
            era_rows
                .get_or_insert_with(|| {
                    GroupBuilder::new((SourceId::SecEdgar, Lane::CertifiedPit, era))
                })
                .push(rows.iter().cloned())?;
            id_entries.extend(rows.iter().map(|r| ids::entry(&r.id, day)));
            let late_rows = late::Finder::of(&rows);
            let entry =
                write_partition(store, SourceId::SecEdgar, Lane::CertifiedPit, day, rows).await?;
            fresh_late.insert(entry.path.clone(), late_rows);
            manifest.partitions.push(entry);
            if !ahead.is_empty() {
                forward_rows
                    .entry(era)
                    .or_insert_with(|| {
                        GroupBuilder::new((SourceId::SecEdgar, Lane::ForwardFirstSeen, era))
                    })
                    .push(ahead.iter().cloned())?;
                forward_ids.extend(ahead.iter().map(|r| ids::entry(&r.id, day)));
                let late_rows = late::Finder::of(&ahead);
                let entry = write_partition(
                    store,
                    SourceId::SecEdgar,
                    Lane::ForwardFirstSeen,
                    day,
                    ahead,
                )
                .await?;
                fresh_late.insert(entry.path.clone(), late_rows);
                manifest.partitions.push(entry);
            }
        }
        progress(serial);
        day = day.next();
    }
    if let Some((from, to)) = run {
        manifest.certifications.push(certification(
            Lane::CertifiedPit,
            from,
            to,
            certified_at,
            &evidence,
        ));
    }
    if let Some((from, to)) = forward_run {
        manifest.certifications.push(certification(
            Lane::ForwardFirstSeen,
            from,
            to,
            certified_at,
            &evidence,
        ));
    }
    if let Some(b) = era_rows {
        manifest.access.extend(b.finish(store, "").await?);
    }
    asof_engine::write::ids::add(
        store,
        &mut manifest,
        SourceId::SecEdgar,
        Lane::CertifiedPit,
        id_entries,
    )
    .await?;
    if !forward_rows.is_empty() {
        for b in forward_rows.into_values() {
            manifest.access.extend(b.finish(store, "").await?);
        }
        asof_engine::write::ids::add(
            store,
            &mut manifest,
            SourceId::SecEdgar,
            Lane::ForwardFirstSeen,
            forward_ids,
        )
        .await?;
    }
    asof_engine::write::late::update(store, &mut manifest, None, fresh_late).await?;
    built.partitions = manifest.partitions.len();
    built.rows = written;
    built.version = publish_manifest(store, manifest).await?;
    Ok(built)
}

fn certification(
    lane: Lane,
    from: Day,
    to: Day,
    at: Instant,
    evidence: &Evidence,
) -> Certification {
    Certification {
        source_id: SourceId::SecEdgar,
        lane,
        from,
        to,
        certified_at: at,
        evidence: vec![evidence.clone()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asof_engine::VisibleBy;
    use asof_engine::model::coverage::Scope;
    use asof_engine::read::corpus::{Answer, Corpus, Entity, NewsQuery};

    fn spec(seed: u64) -> Spec {
        Spec {
            rows: 20_000,
            days: 400,
            ciks: 500,
            seed,
            last_day: "2026-01-31".parse().unwrap(),
            certified_at: None,
            forward_days: 0,
        }
    }

    #[test]
    fn daily_counts_sum_to_the_requested_rows_and_ramp_up() {
        let s = Spec {
            rows: 1_000_003,
            days: 3_000,
            ..spec(1)
        };
        let first = Day::from_date(s.last_day.to_date() - time::Duration::days(2_999));
        let c = daily_counts(&s, first);
        assert_eq!(c.iter().sum::<u64>(), 1_000_003);
        let early: u64 = c[..300].iter().sum();
        let late: u64 = c[c.len() - 300..].iter().sum();
        assert!(late > 3 * early, "volume ramps up: {early} then {late}");
        assert!(
            c.iter().filter(|&&n| n == 0).count() > 400,
            "Sundays are empty"
        );
    }

    #[test]
    fn zipf_filers_are_skewed() {
        let z = Zipf::new(1_000);
        let mut rng = Rng(7);
        let mut hits = vec![0u32; 1_000];
        for _ in 0..100_000 {
            hits[z.sample(&mut rng)] += 1;
        }
        assert!(
            hits[0] > 10 * hits[99],
            "rank 1 files far more than rank 100"
        );
        assert!(hits[999] > 0 || hits[998] > 0, "the tail still files");
    }

    #[tokio::test]
    async fn the_same_seed_builds_the_same_version_and_the_corpus_answers_with_holes() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let sa = CorpusStore::local(a.path()).unwrap();
        let one = build(&sa, &spec(42), &|_| {}).await.unwrap();
        let two = build(&CorpusStore::local(b.path()).unwrap(), &spec(42), &|_| {})
            .await
            .unwrap();
        assert_eq!(one, two);
        assert!(
            one.rows >= 20_000,
            "corrections add revisions on top of the rows"
        );
        assert!(
            one.empty_certified_days > 40,
            "Sundays are certified with no rows"
        );
        asof_engine::verify::verify(&sa, None).await.unwrap();

        let c = Corpus::open(sa).await.unwrap();
        assert!(
            c.access()
                .is_some_and(|x| x.covers(SourceId::SecEdgar, Lane::CertifiedPit))
        );
        let q = |as_of: &str| NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: Instant::parse(as_of).unwrap(),
            entity: Entity::Cik(cik_of(0, 500)),
            after: None,
            limit: 100,
        };
        match c
            .news(&q("2026-01-29T23:59:59Z"), Scope::Corpus)
            .await
            .unwrap()
        {
            Answer::Page { rows, next, .. } => {
                assert_eq!(rows.len(), 100, "the biggest filer has a full first page");
                assert!(next.is_some());
            }
            Answer::Hole { coverage } => panic!("unexpected hole {:?}", coverage.missing),
        }
        // The last two days hold rows but are not certified: a cut on them is a hole.
        assert_eq!(one.hole_days, 2);
        let mut cut = q("2026-01-31T12:00:00Z");
        cut.entity = Entity::Cik(cik_of(0, 500));
        assert!(matches!(
            c.news(&cut, Scope::Corpus).await.unwrap(),
            Answer::Hole { .. }
        ));
    }

    #[tokio::test]
    async fn forward_days_add_a_forward_lane_on_available_at_and_leave_the_certified_lane_as_it_was()
     {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (sa, sb) = (
            CorpusStore::local(a.path()).unwrap(),
            CorpusStore::local(b.path()).unwrap(),
        );
        let plain = build(&sa, &spec(7), &|_| {}).await.unwrap();
        let with = Spec {
            forward_days: 20,
            ..spec(7)
        };
        let both = build(&sb, &with, &|_| {}).await.unwrap();
        assert!(both.rows > plain.rows);
        asof_engine::verify::verify(&sb, None).await.unwrap();
        let (p, f) = (
            Corpus::open(sa).await.unwrap(),
            Corpus::open(sb.clone()).await.unwrap(),
        );
        let lane_paths = |c: &Corpus, lane: Lane| -> Vec<String> {
            c.manifest()
                .partitions
                .iter()
                .filter(|e| e.lane == lane)
                .map(|e| e.path.clone())
                .collect()
        };
        assert_eq!(
            lane_paths(&p, Lane::CertifiedPit),
            lane_paths(&f, Lane::CertifiedPit),
            "the certified lane's partitions are the same bytes"
        );
        let forward = lane_paths(&f, Lane::ForwardFirstSeen);
        assert!((15..=20).contains(&forward.len()), "{}", forward.len());
        assert!(
            f.access()
                .is_some_and(|x| x.covers(SourceId::SecEdgar, Lane::ForwardFirstSeen))
        );
        // All rows of the forward lane on available_at: the walk and the scan agree, and a
        // row is seen 1 to 30 minutes after acceptance (a correction at its capture).
        let q = NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::ForwardFirstSeen,
            visible_by: VisibleBy::AvailableAt,
            start: None,
            as_of: Instant::parse("2026-01-25T12:00:00Z").unwrap(),
            entity: Entity::All,
            after: None,
            limit: 10_000,
        };
        let page = |a: Answer<asof_engine::model::record::NewsRow>| match a {
            Answer::Page { rows, .. } => rows,
            Answer::Hole { coverage } => panic!("unexpected hole {:?}", coverage.missing),
        };
        let walked = page(f.news(&q, Scope::Corpus).await.unwrap());
        assert!(walked.len() > 100);
        for r in &walked {
            let (seen, accepted) = (r.available_at.unwrap(), r.published_at.unwrap());
            assert!(
                seen > accepted
                    && (seen.micros() - accepted.micros() <= 1_800_000_000
                        || r.committed_at == Some(seen)),
                "{}",
                r.id
            );
        }
        let mut scanned = Corpus::open(sb.clone()).await.unwrap();
        scanned.set_read_path(asof_engine::read::corpus::ReadPath::Scan);
        let ids = |rows: Vec<asof_engine::model::record::NewsRow>| -> Vec<(String, String)> {
            rows.into_iter().map(|r| (r.id, r.revision_id)).collect()
        };
        assert_eq!(
            ids(walked),
            ids(page(scanned.news(&q, Scope::Corpus).await.unwrap()))
        );
    }
}
