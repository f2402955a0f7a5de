//! `asof build-sample`: the shipped sample corpus, rebuilt from the raw files under
//! `snapshots/sources/` with fixed commit times, so the same inputs give the same version.
//!
//! What it holds (see docs/sources.md for the reasons):
//! - `sec.edgar` / `certified_pit`: filings of the companies whose submissions JSON we hold,
//!   published from [`WINDOW_START`], certified complete *for those companies* over the days
//!   every capture covers; plus the rows of the whole-EDGAR daily index of 2022-10-03
//!   (held, not certified: see below);
//! - `sec.edgar` / `forward_first_seen`: the current-filings Atom feed fetched 2026-01-12,
//!   certified for the UTC days the 51 contiguous pages cover entirely;
//! - SEC's ticker lists in the `company_tickers.json` form (2023-02-08, 2024-05-14 and nine
//!   weekly copies to 2026-02-01) ingested one after the other as list snapshots: no rows (a
//!   ticker list is identity evidence, not a filing), the identity intervals they evidence and
//!   the `sec.edgar` list state after the last, so a later list ingested into the sample
//!   reports only what changed since;
//! - identity intervals from every dated ticker list (both forms) and the submissions captures;
//! - the public sample set (three companies on twelve days);
//! - rows of the seven other sources (see [`other_steps`]).
//!
//! Every step is an ordinary ingest (`crate::pipeline::ingest`, the code `asof ingest` runs,
//! with the flags an operator would give: `--since`, `--certify`, `--certify none`,
//! `--identity-only`, `--note`, `--sample-set`) into a scratch store, each publishing a
//! version; the last is then published into the output as a first version of its own
//! (`publish_as_first`), so the shipped sample is one version with no history of its build.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use asof_engine::model::clock::{Day, Instant, Lane, SourceId};
use asof_engine::model::manifest::{SampleExample, SampleSet};
use asof_engine::model::record::NewsRow;
use asof_engine::store::CorpusStore;
use asof_engine::write::publish::{Published, publish_as_first};

use crate::adapter::InputFile;
use crate::error::{Error, Result};
use crate::pipeline::{Options, Request, ingest, parse_files};
use crate::sources::edgar::{parse_atom, parse_submissions, submissions_name};

/// Submissions rows published before this day are left out of the sample (they would add
/// thousands of tiny daily partitions and are outside every certified day).
pub const WINDOW_START: &str = "2025-01-01";
/// The commit time of the sample build: `committed_at` of rows whose file has no known capture
/// time, and `created_at` of the manifest.
pub const SAMPLE_COMMIT_TIME: &str = "2026-11-20T00:00:00Z";
/// The one daily index file that lists a whole day of EDGAR.
const DAILY_INDEX: &str = "company.20221003.idx";

/// The default location of the raw inputs: `snapshots/sources` of this repository.
pub fn default_sources_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots/sources")
}

/// The files of `root/rel`, by name: each as its path under `root` and its bytes.
fn read_dir_sorted(root: &Path, rel: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let dir = root.join(rel);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| Error::parse(dir.display().to_string(), "directory", e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let rel = format!("{rel}/{n}");
            Ok((rel.clone(), std::fs::read(root.join(&rel))?))
        })
        .collect()
}

/// `..._committed_2026-01-29.csv` → 2026-01-29T23:59:59Z (the commit day bounds the capture).
fn committed_day(rel: &str) -> Result<Instant> {
    let pos = rel
        .rfind("committed_")
        .ok_or_else(|| Error::parse(rel, "file name", "expected ..._committed_YYYY-MM-DD..."))?;
    let day: Day = rel
        .get(pos + 10..pos + 20)
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| Error::parse(rel, "file name", "bad committed date"))?;
    Ok(day.end_of_day())
}

/// Weekly snapshot commit instants from `COMMITS.txt`, keyed by `YYYY-MM-DDTHHMM` (UTC).
fn weekly_commits(root: &Path, rel: &str) -> Result<BTreeMap<String, Instant>> {
    let text = std::fs::read_to_string(root.join(rel))?;
    let mut map = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let when = line
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| Error::parse(rel, format!("line {}", n + 1), "no commit time"))?;
        let at = Instant::parse_rfc3339_any(when).ok_or_else(|| {
            Error::parse(
                rel,
                format!("line {}", n + 1),
                format!("{when:?} is not RFC 3339"),
            )
        })?;
        let s = at.to_string();
        map.insert(format!("{}{}", &s[..13], &s[14..16]), at);
    }
    Ok(map)
}

/// Every ticker list of the sample with its capture instant, in capture order (file name on
/// ties): the weekly copies at their commit instants (`COMMITS.txt`), the others at the end of
/// the day their archive committed them.
fn ticker_captures(root: &Path) -> Result<Vec<(String, Instant)>> {
    let mut out = Vec::new();
    let weekly = "sec.edgar.ticker_history/company_tickers_weekly_hvcwatch";
    let commits = weekly_commits(root, &format!("{weekly}/COMMITS.txt"))?;
    for (rel, _) in read_dir_sorted(root, weekly)? {
        let Some(stamp) = rel
            .rsplit('/')
            .next()
            .and_then(|n| n.strip_prefix("company_tickers_"))
            .and_then(|n| n.strip_suffix("Z.json"))
        else {
            continue; // COMMITS.txt
        };
        let at = commits.get(stamp).copied().ok_or_else(|| {
            Error::parse(
                &rel,
                "file name",
                format!("no commit in COMMITS.txt at {stamp}"),
            )
        })?;
        out.push((rel, at));
    }
    for dir in [
        "sec.edgar.ticker_history/company_tickers_exchange_snapshots_edgartools",
        "sec.edgar.ticker_history/other_snapshots",
    ] {
        for (rel, _) in read_dir_sorted(root, dir)? {
            let at = committed_day(&rel)?;
            out.push((rel, at));
        }
    }
    out.sort_by(|(a, at), (b, bt)| (at, a).cmp(&(bt, b)));
    Ok(out)
}

/// Whether a ticker list is in the form of SEC's `company_tickers.json` (ticker, CIK, title),
/// the list the sample keeps as its `sec.edgar` list state. The exchange form
/// (`company_tickers_exchange`) also names each ticker's exchange: taken into the same list, every
/// switch between the two forms would report each ticker as modified.
fn is_plain_ticker_list(rel: &str) -> bool {
    let base = rel.rsplit('/').next().unwrap_or(rel);
    !base.starts_with("company_tickers_exchange")
}

/// One ordinary ingest of the sample build, as `asof ingest` would be given it.
struct Step {
    req: Request,
}

impl Step {
    fn new(
        root: &Path,
        source: SourceId,
        lane: Lane,
        commit_time: Instant,
        files: &[String],
    ) -> Result<Self> {
        let files = files
            .iter()
            .map(|rel| {
                Ok(InputFile {
                    name: rel.clone(),
                    bytes: std::fs::read(root.join(rel))?,
                }
                .into())
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            req: Request {
                source,
                lane,
                commit_time,
                captured_at: None,
                certify: None,
                files,
                options: Options::default(),
            },
        })
    }

    fn captured_at(mut self, at: Instant) -> Self {
        self.req.captured_at = Some(at);
        self
    }

    fn certify(mut self, days: Option<(Day, Day)>) -> Self {
        self.req.certify = days;
        self
    }

    fn options(mut self, f: impl FnOnce(&mut Options)) -> Self {
        f(&mut self.req.options);
        self
    }

    /// `--certify` of the span of days the files' rows fall on (exports of a date range),
    /// found by the adapter's own parse. A partial list snapshot (GLEIF records) has no rows
    /// until it is compared with what is held: its capture day is the day it speaks for.
    fn certify_row_span(self) -> Result<Self> {
        let parsed = parse_files(&self.req)?;
        let days = parsed
            .rows
            .iter()
            .filter_map(NewsRow::partition_day)
            .chain(parsed.snapshot.as_ref().map(|s| s.captured_at.day()));
        let span = days.clone().min().zip(days.max());
        Ok(self.certify(span))
    }
}

/// The certification of the sample's submissions: the days every company's captures list
/// whole, and the capture instant from which that was known.
struct SubmissionsClaim {
    from: Day,
    to: Day,
    certified_at: Instant,
    companies: usize,
}

/// From the latest "complete from" day of every company (older-filings pages we do not hold
/// cut some histories short) and the window, through the day before the earliest latest
/// capture; dated at the capture that completed it.
fn submissions_claim(
    subs: &[(String, Vec<u8>)],
    window_start: Day,
    commit_time: Instant,
) -> Result<SubmissionsClaim> {
    let mut complete_from: BTreeMap<String, Day> = BTreeMap::new();
    let mut captures: BTreeMap<String, Vec<Instant>> = BTreeMap::new();
    let held_pages: Vec<&str> = subs
        .iter()
        .filter(|(rel, _)| submissions_name(rel).is_ok_and(|(_, page, _)| page))
        .map(|(rel, _)| rel.as_str())
        .collect();
    for (rel, bytes) in subs {
        let (cik, page, at) = submissions_name(rel)?;
        if page {
            continue;
        }
        let s = parse_submissions(rel, bytes, &cik, at)?;
        captures.entry(s.cik.clone()).or_default().push(at);
        let missing_pages = s.older_pages.iter().any(|p| {
            !held_pages
                .iter()
                .any(|h| h.contains(p.trim_end_matches(".json")))
        });
        let from = if missing_pages {
            s.oldest_filing_date.map_or(Day::from_days(0), Day::next)
        } else {
            Day::from_days(0)
        };
        complete_from
            .entry(s.cik)
            .and_modify(|d| *d = (*d).max(from))
            .or_insert(from);
    }
    let from = complete_from
        .values()
        .copied()
        .max()
        .unwrap_or(window_start)
        .max(window_start);
    let to = captures
        .values()
        .map(|c| c.iter().max().copied().unwrap_or(commit_time).day().prev())
        .min()
        .unwrap_or(from);
    let certified_at = captures
        .values()
        .filter_map(|c| c.iter().copied().filter(|at| at.day().prev() >= to).min())
        .max()
        .unwrap_or(commit_time);
    Ok(SubmissionsClaim {
        from,
        to,
        certified_at,
        companies: captures.len(),
    })
}

/// The steps of `sec.edgar`, in commit order: the Atom feed at the poll that fetched it;
/// the submissions captures each at its capture instant (the one that completed the
/// certified span states it, with every capture in hand until then as evidence); the daily
/// index, held without certifying its day; SEC's ticker lists in capture order (the plain
/// form as list snapshots, the exchange form as identity observations only).
fn edgar_steps(root: &Path, commit_time: Instant) -> Result<(Vec<Step>, String)> {
    let window_start: Day = WINDOW_START.parse().expect("constant");
    let mut steps = Vec::new();

    // The Atom feed: forward lane, committed when it was fetched; certified for the UTC days
    // its contiguous pages cover entirely.
    let atom = read_dir_sorted(root, "sec.edgar/current-feed-atom_2026-01-12")?;
    let (mut oldest, mut newest, mut fetched_last) =
        (None::<Instant>, None::<Instant>, None::<Instant>);
    for (rel, bytes) in &atom {
        let page = parse_atom(rel, bytes)?;
        oldest = page
            .oldest
            .map(|o| oldest.map_or(o, |x| x.min(o)))
            .or(oldest);
        newest = page
            .newest
            .map(|o| newest.map_or(o, |x| x.max(o)))
            .or(newest);
        fetched_last = Some(fetched_last.map_or(page.fetched_at, |f| f.max(page.fetched_at)));
    }
    let fetched_last = fetched_last.ok_or_else(|| {
        Error::parse(
            "sec.edgar/current-feed-atom_2026-01-12",
            "files",
            "no pages",
        )
    })?;
    let atom_days = oldest
        .zip(newest)
        .filter(|(o, n)| n.day().days() - o.day().days() >= 2)
        .map(|(o, n)| (o.day().next(), n.day().prev()));
    let atom_files: Vec<String> = atom.into_iter().map(|(rel, _)| rel).collect();
    steps.push(
        Step::new(
            root,
            SourceId::SecEdgar,
            Lane::ForwardFirstSeen,
            fetched_last,
            &atom_files,
        )?
        .certify(atom_days),
    );

    // Submissions: one ingest per capture instant, rows from the window on.
    let subs = read_dir_sorted(root, "sec.edgar/submissions")?;
    let claim = submissions_claim(&subs, window_start, commit_time)?;
    let mut by_capture: BTreeMap<Instant, Vec<String>> = BTreeMap::new();
    for (rel, _) in &subs {
        let (_, _, at) = submissions_name(rel)?;
        by_capture.entry(at).or_default().push(rel.clone());
    }
    if !by_capture.contains_key(&claim.certified_at) {
        return Err(Error::parse(
            "sec.edgar/submissions",
            "captures",
            format!(
                "no capture at {}, the instant the certification rests on",
                claim.certified_at
            ),
        ));
    }
    for (at, files) in &by_capture {
        let step = if *at == claim.certified_at {
            // The certification's evidence is the latest capture in hand of each file (each
            // company's submissions, each older-filings page): ingested again, they add
            // nothing (their rows are held as they are). Not every capture: an older one
            // beside a newer one in one ingest would bring back the revisions it superseded.
            let mut latest: BTreeMap<&str, &String> = BTreeMap::new();
            for file in by_capture.range(..=at).flat_map(|(_, f)| f) {
                let base = file.rsplit('/').next().unwrap_or(file);
                latest.insert(base.split("__").next().unwrap_or(base), file);
            }
            let in_hand: Vec<String> = latest.into_values().cloned().collect();
            Step::new(root, SourceId::SecEdgar, Lane::CertifiedPit, *at, &in_hand)?
                .certify(Some((claim.from, claim.to)))
        } else {
            Step::new(root, SourceId::SecEdgar, Lane::CertifiedPit, *at, files)?
        };
        steps.push(step.options(|o| o.since = Some(window_start)));
    }

    // The whole-EDGAR daily index of one day. Its day is complete for all of EDGAR, but it is
    // *not* certified here: certifying one day of 2022 would open a span whose 800-odd
    // uncertified days make every later cut a hole. Its rows are held (and queryable with
    // `asof sql`); their day stays outside the claim.
    let idx = read_dir_sorted(root, "sec.edgar/daily-index")?
        .into_iter()
        .find(|(rel, _)| rel.ends_with(DAILY_INDEX))
        .ok_or_else(|| Error::parse(DAILY_INDEX, "file", "missing from sources"))?;
    steps.push(
        Step::new(
            root,
            SourceId::SecEdgar,
            Lane::CertifiedPit,
            commit_time,
            &[idx.0],
        )?
        .options(|o| o.no_implied_certification = true),
    );

    // SEC's ticker lists in capture order.
    for (rel, at) in ticker_captures(root)? {
        let step = Step::new(
            root,
            SourceId::SecEdgar,
            Lane::CertifiedPit,
            commit_time,
            std::slice::from_ref(&rel),
        )?
        .captured_at(at);
        steps.push(if is_plain_ticker_list(&rel) {
            step
        } else {
            step.options(|o| o.identity_only = true)
        });
    }

    let note = format!(
        "Sample corpus. certified_pit days {}..{} are certified complete for the {} companies whose submissions JSON is under snapshots/sources/sec.edgar/submissions (not for all of EDGAR). Rows of the 2022-10-03 daily index (all of EDGAR, day resolution) are held but that day is outside the certified span. forward_first_seen rows come from one poll of the current-filings feed on 2026-01-12. Ticker lists are identity evidence, not records: eleven captures of SEC's company_tickers.json (2023-02-08 to 2026-02-01) and the exchange lists give the ticker intervals of /v1/mapping, each naming the captures that evidence it.",
        claim.from, claim.to, claim.companies
    );
    Ok((steps, note))
}

/// Builds the sample corpus into `out` (an empty store): every step an ordinary ingest into a
/// scratch store, a version each, then the last version published into `out` as its first.
pub async fn build_sample(root: &Path, out: &CorpusStore) -> Result<Published> {
    if let Some(v) = out.current_version().await? {
        return Err(Error::parse(
            out.display(),
            "--out",
            format!("already holds a corpus ({v}): the sample is built into an empty directory"),
        ));
    }
    let commit_time = Instant::parse(SAMPLE_COMMIT_TIME).expect("constant");
    let (mut steps, edgar_note) = edgar_steps(root, commit_time)?;
    let mut notes = other_notes();
    notes.insert(SourceId::SecEdgar, edgar_note);
    steps.extend(other_steps(root, commit_time)?);
    // Each source's note goes with its last ingest, the sample set with the very last.
    for (source, note) in notes {
        if let Some(last) = steps.iter_mut().rev().find(|s| s.req.source == source) {
            last.req.options.note = Some(note);
        }
    }
    if let Some(last) = steps.last_mut() {
        last.req.options.sample = Some(sample_set());
    }

    let scratch = tempfile::tempdir()?;
    let store = CorpusStore::local(scratch.path())?;
    let (mut added, mut unchanged) = (0, 0);
    for step in steps {
        let outcome = ingest(&store, step.req, &|_| {}).await?;
        added += outcome.published.rows_added;
        unchanged += outcome.published.rows_unchanged;
    }
    let version = publish_as_first(&store, out).await?;
    Ok(Published {
        version,
        changed: true,
        rows_added: added,
        rows_unchanged: unchanged,
    })
}

/// The public sample set: three companies on twelve certified days.
fn sample_set() -> SampleSet {
    SampleSet {
        source_id: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        days: {
            let from: Day = "2026-01-26".parse().expect("constant");
            (0..12).map(|i| Day::from_days(from.days() + i)).collect()
        },
        examples: vec![
            SampleExample {
                id: "tesla".into(),
                ticker: "TSLA".into(),
                cik: "1318605".into(),
                name: "Tesla, Inc.".into(),
                note: "8-K and 10-K accepted 2026-01-28/29; a cut before them is a complete answer with no rows".into(),
            },
            SampleExample {
                id: "microsoft".into(),
                ticker: "MSFT".into(),
                cik: "789019".into(),
                name: "MICROSOFT CORP".into(),
                note: "10-Q and 8-K accepted 2026-01-28, eleven Form 4 filings on 2026-02-03".into(),
            },
            SampleExample {
                id: "siemens-energy".into(),
                ticker: "SMEGF".into(),
                cik: "1830056".into(),
                name: "Siemens Energy AG/ADR".into(),
                note: "SMEGF first appears in SEC's ticker file on 2026-02-01: before that no interval places it (identity hole)".into(),
            },
        ],
    }
}

/// The steps of the seven other sources, each read by its adapter as `asof ingest` reads it,
/// in capture order (later snapshots and cumulative copies are compared with what the earlier
/// ones added).
fn other_steps(root: &Path, commit_time: Instant) -> Result<Vec<Step>> {
    let day_end = |d: &str| d.parse::<Day>().expect("constant").end_of_day();
    let cot_dir = "us.cftc.cot/legacy_futures_only_2025_weekly_asof";
    let commits = crate::sources::cftc::commit_instants(
        "COMMITS.txt",
        &std::fs::read_to_string(root.join(cot_dir).join("COMMITS.txt"))?,
    )?;
    let cot_capture = |day: &str| -> Result<Instant> {
        commits
            .get(&day.parse::<Day>().expect("constant"))
            .copied()
            .ok_or_else(|| Error::parse("COMMITS.txt", day, "no commit on that day"))
    };
    let gleif_rs = "gleif.lei/api_json_gleif-rs_2025-05";
    let dir_files = |rel: &str| -> Result<Vec<String>> {
        Ok(read_dir_sorted(root, rel)?
            .into_iter()
            .map(|(rel, _)| rel)
            .collect())
    };
    let step = |source: SourceId, files: &[String], at: Instant| -> Result<Step> {
        Ok(Step::new(root, source, Lane::CertifiedPit, commit_time, files)?.captured_at(at))
    };
    let day = |d: &str| d.parse::<Day>().expect("constant");
    Ok(vec![
        step(
            SourceId::FederalRegisterPi,
            &["us.federal_register.pi/gwu_midnight_rules_2017_2021/public_inspection_midnight_documents_all.csv".into()],
            commit_time,
        )?,
        step(
            SourceId::CftcCot,
            &["us.cftc.cot/disaggregated_futures_only_2021/f_year.txt".into()],
            day_end("2021-03-26"),
        )?,
        step(
            SourceId::CftcCot,
            &[format!("{cot_dir}/annual.txt.committed_2025-01-13")],
            cot_capture("2025-01-13")?,
        )?,
        // The weekly copies hold every report released so far: the days between the two
        // captures saw no row that the second does not show.
        step(
            SourceId::CftcCot,
            &[format!("{cot_dir}/annual.txt.committed_2025-01-17")],
            cot_capture("2025-01-17")?,
        )?
        .certify(Some((day("2025-01-13"), day("2025-01-17")))),
        step(
            SourceId::OfacSdn,
            &["sdn.csv", "alt.csv", "sdn_comments.csv"].map(|f| format!("us.ofac.sdn/moov_2019-01/{f}")),
            day_end("2019-01-04"),
        )?,
        step(
            SourceId::FdaDrug,
            &["us.fda.enforcement.drug/fda_enforcement_report_csv/Jun_2023_to_Sep_2024.csv".into()],
            commit_time,
        )?
        .certify_row_span()?,
        step(
            SourceId::FdaDevice,
            &["us.fda.enforcement.device/openfda_api_NY_subset/medical-device-recalls.csv".into()],
            commit_time,
        )?
        .certify_row_span()?,
        step(
            SourceId::FdaFood,
            &["us.fda.enforcement.food/openfda_doc_example/_examples.json".into()],
            commit_time,
        )?
        .certify_row_span()?,
        step(SourceId::GleifLei, &dir_files("gleif.lei/api_v1_pygleif")?, commit_time)?
            .certify_row_span()?,
        step(
            SourceId::GleifLei,
            &dir_files(&format!("{gleif_rs}/lei_records"))?,
            commit_time,
        )?
        .certify_row_span()?,
        step(
            SourceId::GleifLei,
            &dir_files(&format!("{gleif_rs}/field_modifications"))?,
            commit_time,
        )?,
    ])
}

/// What `/v1/meta` says each of the seven other sources holds.
fn other_notes() -> BTreeMap<SourceId, String> {
    BTreeMap::from([
        (
            SourceId::FederalRegisterPi,
            "Sample corpus. The public-inspection documents of 19 days in 2017 and 2021 (the API's full available_on answer for each day, from the GWU midnight-rules study); each of those days is certified, the days between are holes.".to_owned(),
        ),
        (
            SourceId::CftcCot,
            "Sample corpus. Disaggregated futures-only reports of 2021 from one copy captured 2021-03-26 (certified that day), and legacy futures-only reports from the weekly copies captured 2025-01-13 and 2025-01-17 (certified 2025-01-13..2025-01-17); published_at is the first capture that showed a row.".to_owned(),
        ),
        (
            SourceId::OfacSdn,
            "Sample corpus. One full SDN list captured 2019-01-04 (sdn.csv, alt.csv, sdn_comments.csv; its add.csv is cut short upstream and is left out, so entries carry no addresses): every entry is an sdn.added change row at that capture, which is the one certified day.".to_owned(),
        ),
        (
            SourceId::FdaDrug,
            "Sample corpus. The FDA Enforcement Report export of drug recalls reported June 2023 to September 2024; the span of its report dates is certified complete for that export.".to_owned(),
        ),
        (
            SourceId::FdaDevice,
            "Sample corpus. openFDA device enforcement records of firms in New York State only (search=state:\"NY\"); the span of their report dates is certified complete for that query, not for all device recalls.".to_owned(),
        ),
        (
            SourceId::FdaFood,
            "Sample corpus. The one real food enforcement record of openFDA's documentation; its report day is certified for that record only.".to_owned(),
        ),
        (
            SourceId::GleifLei,
            "Sample corpus. LEI records of two golden copies (2024-07-06: 2 LEIs; 2025-05-15: 12 LEIs) as lei.added change rows, and the first page of the field-modification history of 12 LEIs. The two golden-copy days are certified for the LEIs held only, not for the whole golden copy; modification days are not certified.".to_owned(),
        ),
    ])
}
