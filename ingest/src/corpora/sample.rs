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
//!   weekly copies to 2026-02-01) ingested one after the other as list snapshots: their
//!   `ticker.added|removed|modified` change rows and the `sec.edgar` list state after the last,
//!   so a later list ingested into the sample reports only what changed since;
//! - identity intervals from every dated ticker list (both forms) and the submissions captures;
//! - the public sample set (three companies on twelve days);
//! - rows of the seven other sources, made by their adapters through the same pipeline steps
//!   as `asof ingest` (see [`other_sources`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use asof_engine::clock::{Day, Instant, Lane, SourceId};
use asof_engine::identity::{self, IdentityFile, NameInterval, Observation};
use asof_engine::lists::{ListObject, ListState};
use asof_engine::manifest::{Certification, Evidence, SampleExample, SampleSet};
use asof_engine::publish::{ChangeSet, Published, publish};
use asof_engine::record::NewsRow;
use asof_engine::store::{CorpusStore, sha256_hex};

use crate::error::{Error, Result};
use crate::sources::edgar::{parse_atom, parse_index, parse_submissions, submissions_name};
use crate::sources::tickers::parse_ticker_file;

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

struct Input {
    rel: String,
    bytes: Vec<u8>,
}

fn read_dir_sorted(root: &Path, rel: &str) -> Result<Vec<Input>> {
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
            Ok(Input {
                bytes: std::fs::read(root.join(&rel))?,
                rel,
            })
        })
        .collect()
}

fn evidence(inputs: &[&Input]) -> Vec<Evidence> {
    let mut v: Vec<Evidence> = inputs
        .iter()
        .map(|i| Evidence {
            file: i.rel.clone(),
            sha256: sha256_hex(&i.bytes),
        })
        .collect();
    v.sort();
    v
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
fn ticker_captures(root: &Path) -> Result<Vec<(Input, Instant)>> {
    let mut out = Vec::new();
    let weekly = "sec.edgar.ticker_history/company_tickers_weekly_hvcwatch";
    let commits = weekly_commits(root, &format!("{weekly}/COMMITS.txt"))?;
    for input in read_dir_sorted(root, weekly)? {
        let Some(stamp) = input
            .rel
            .rsplit('/')
            .next()
            .and_then(|n| n.strip_prefix("company_tickers_"))
            .and_then(|n| n.strip_suffix("Z.json"))
        else {
            continue; // COMMITS.txt
        };
        let at = commits.get(stamp).copied().ok_or_else(|| {
            Error::parse(
                &input.rel,
                "file name",
                format!("no commit in COMMITS.txt at {stamp}"),
            )
        })?;
        out.push((input, at));
    }
    for dir in [
        "sec.edgar.ticker_history/company_tickers_exchange_snapshots_edgartools",
        "sec.edgar.ticker_history/other_snapshots",
    ] {
        for input in read_dir_sorted(root, dir)? {
            let at = committed_day(&input.rel)?;
            out.push((input, at));
        }
    }
    out.sort_by(|(a, at), (b, bt)| (at, &a.rel).cmp(&(bt, &b.rel)));
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

/// Every row of a prepared change set in arrival order: those an adapter streamed (EDGAR
/// index files), then the rest. The sample publishes the rows of all its steps at once.
fn rows_of(changes: &mut ChangeSet) -> Result<Vec<NewsRow>> {
    let mut rows = match changes.spilled.take() {
        Some(spilled) => spilled.to_vec()?,
        None => Vec::new(),
    };
    rows.append(&mut changes.rows);
    Ok(rows)
}

/// The plain ticker lists, one `asof ingest` each in capture order, through the same pipeline
/// steps: their `ticker.added|removed|modified` change rows and the list state after the last,
/// so a ticker list ingested into the sample later is compared with the latest one held.
/// (Their identity observations are folded with every other list's in `build_sample`.)
fn ticker_lists(
    captures: &[(Input, Instant)],
    commit_time: Instant,
) -> Result<(Vec<NewsRow>, Option<ListState>)> {
    use crate::pipeline::{Held, Request, parse_files, prepare};
    let mut held = Held::default();
    let mut rows = Vec::new();
    for (input, at) in captures
        .iter()
        .filter(|(i, _)| is_plain_ticker_list(&i.rel))
    {
        let req = Request {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            commit_time,
            captured_at: Some(*at),
            certify: None,
            files: vec![
                crate::adapter::InputFile {
                    name: input.rel.clone(),
                    bytes: input.bytes.clone(),
                }
                .into(),
            ],
        };
        let (mut changes, _) = prepare(&req, parse_files(&req)?, &mut held)?;
        rows.extend(rows_of(&mut changes)?);
        if let Some((_, _, state)) = changes.lists.iter().next_back() {
            held.list = held_state(state)?.clone();
        }
    }
    Ok((rows, (!held.list.is_empty()).then_some(held.list)))
}

/// The state a sample step's ingest made: the sample's lists are small, so `prepare` holds
/// them in memory (only a golden copy is encoded to a file as it is compared).
fn held_state(o: &ListObject) -> Result<&ListState> {
    match o {
        ListObject::State(s) => Ok(s),
        ListObject::Encoded(_) => Err(Error::parse(
            "(sample)",
            "list state",
            "a sample list was compared as a stream; the sample holds no golden copy",
        )),
    }
}

/// Builds the sample corpus into `out` and returns the publish outcome.
pub async fn build_sample(root: &Path, out: &CorpusStore) -> Result<Published> {
    let commit_time = Instant::parse(SAMPLE_COMMIT_TIME).expect("constant");
    let window_start: Day = WINDOW_START.parse().expect("constant");
    let mut rows: Vec<NewsRow> = Vec::new();
    let mut certifications = Vec::new();

    // Submissions: every capture, in capture order, so later captures supersede earlier ones.
    let subs = read_dir_sorted(root, "sec.edgar/submissions")?;
    let mut parsed = Vec::new();
    for input in &subs {
        let (cik, page, at) = submissions_name(&input.rel)?;
        let s = parse_submissions(&input.rel, &input.bytes, &cik, at)?;
        parsed.push((input, page, at, s));
    }
    parsed.sort_by_key(|(i, _, at, _)| (*at, i.rel.clone()));
    // Per company: the day from which its captures list every filing, and its captures.
    let mut complete_from: BTreeMap<String, Day> = BTreeMap::new();
    let mut captures: BTreeMap<String, Vec<Instant>> = BTreeMap::new();
    let mut observations: Vec<Observation> = Vec::new();
    let mut names: Vec<(String, NameInterval)> = Vec::new();
    let held_pages: BTreeSet<String> = subs
        .iter()
        .filter_map(|i| {
            submissions_name(&i.rel)
                .ok()
                .filter(|(_, p, _)| *p)
                .map(|_| i.rel.clone())
        })
        .collect();
    for (input, page, at, s) in &parsed {
        rows.extend(
            s.rows
                .iter()
                .filter(|r| r.partition_day().is_some_and(|d| d >= window_start))
                .cloned(),
        );
        if *page {
            continue;
        }
        captures.entry(s.cik.clone()).or_default().push(*at);
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
            .entry(s.cik.clone())
            .and_modify(|d| *d = (*d).max(from))
            .or_insert(from);
        observations.push(s.observation(&input.rel, &input.bytes, *at));
        names.extend(s.names.iter().map(|n| (input.rel.clone(), n.clone())));
    }
    // Certified for the sample's companies: from the latest "complete from" day (and the window)
    // through the day before the earliest latest-capture.
    let first = complete_from
        .values()
        .copied()
        .max()
        .unwrap_or(window_start)
        .max(window_start);
    let last = captures
        .values()
        .map(|c| c.iter().max().copied().unwrap_or(commit_time).day().prev())
        .min()
        .unwrap_or(first);
    let certified_at = captures
        .values()
        .filter_map(|c| c.iter().copied().filter(|at| at.day().prev() >= last).min())
        .max()
        .unwrap_or(commit_time);
    let sub_inputs: Vec<&Input> = subs.iter().collect();
    certifications.push(Certification {
        source_id: SourceId::SecEdgar,
        lane: Lane::CertifiedPit,
        from: first,
        to: last,
        certified_at,
        evidence: evidence(&sub_inputs),
    });

    // The whole-EDGAR daily index of one day: certified for that day.
    let idx = read_dir_sorted(root, "sec.edgar/daily-index")?
        .into_iter()
        .find(|i| i.rel.ends_with(DAILY_INDEX))
        .ok_or_else(|| Error::parse(DAILY_INDEX, "file", "missing from sources"))?;
    let index = parse_index(&idx.rel, &idx.bytes, commit_time)?;
    // Its day is complete for all of EDGAR, but it is *not* certified here: certifying one day
    // of 2022 would open a span whose 800-odd uncertified days make every later cut a hole.
    // Its rows are held (and queryable with `asof sql`); their day stays outside the claim.
    if index.daily.is_none() {
        return Err(Error::parse(&idx.rel, "header", "not a daily index"));
    }
    rows.extend(index.rows);

    // The Atom feed: forward lane, first sighting wins.
    let atom = read_dir_sorted(root, "sec.edgar/current-feed-atom_2026-01-12")?;
    let mut seen: BTreeMap<String, NewsRow> = BTreeMap::new();
    let (mut oldest, mut newest, mut fetched_last) =
        (None::<Instant>, None::<Instant>, None::<Instant>);
    for input in &atom {
        let page = parse_atom(&input.rel, &input.bytes)?;
        oldest = page
            .oldest
            .map(|o| oldest.map_or(o, |x| x.min(o)))
            .or(oldest);
        newest = page
            .newest
            .map(|o| newest.map_or(o, |x| x.max(o)))
            .or(newest);
        fetched_last = Some(fetched_last.map_or(page.fetched_at, |f| f.max(page.fetched_at)));
        for r in page.rows {
            match seen.get(&r.id) {
                Some(prev) if prev.available_at <= r.available_at => {}
                _ => {
                    seen.insert(r.id.clone(), r);
                }
            }
        }
    }
    if let (Some(o), Some(n), Some(f)) = (oldest, newest, fetched_last)
        && n.day().days() - o.day().days() >= 2
    {
        let atom_inputs: Vec<&Input> = atom.iter().collect();
        certifications.push(Certification {
            source_id: SourceId::SecEdgar,
            lane: Lane::ForwardFirstSeen,
            from: o.day().next(),
            to: n.day().prev(),
            certified_at: f,
            evidence: evidence(&atom_inputs),
        });
    }
    rows.extend(seen.into_values());

    // SEC's ticker lists: change rows and the list state, as `asof ingest` makes them.
    let ticker_captures = ticker_captures(root)?;
    let (ticker_rows, ticker_list) = ticker_lists(&ticker_captures, commit_time)?;
    rows.extend(ticker_rows);

    // Identity: every ticker list (both forms) and every submissions capture, folded at once.
    for (input, at) in &ticker_captures {
        observations.push(parse_ticker_file(&input.rel, &input.bytes, *at)?);
    }
    let (evidence_files, tickers) = identity::build_intervals(observations);
    let index_of: BTreeMap<&str, u32> = evidence_files
        .iter()
        .enumerate()
        .map(|(i, e)| (e.file.as_str(), i as u32))
        .collect();
    let names = identity::dedup_names(
        names
            .into_iter()
            .map(|(file, mut n)| {
                n.evidence = index_of.get(file.as_str()).copied().into_iter().collect();
                n
            })
            .collect(),
    );
    let identity = IdentityFile {
        format: identity::FORMAT.into(),
        evidence: evidence_files,
        tickers,
        names,
    };

    let sample = SampleSet {
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
    };

    let mut notes = BTreeMap::new();
    notes.insert(
        "sec.edgar".into(),
        format!(
            "Sample corpus. certified_pit days {first}..{last} are certified complete for the {} companies whose submissions JSON is under snapshots/sources/sec.edgar/submissions (not for all of EDGAR). Rows of the 2022-10-03 daily index (all of EDGAR, day resolution) are held but that day is outside the certified span. forward_first_seen rows come from one poll of the current-filings feed on 2026-01-12. Ticker changes (ticker.added/removed/modified) come from eleven captures of SEC's company_tickers.json (2023-02-08 to 2026-02-01), each compared with the one before; the first capture reports every ticker it lists as added.",
            captures.len()
        ),
    );
    let (other_rows, other_certs, other_notes, mut lists) = other_sources(root, commit_time)?;
    lists.extend(ticker_list.map(|state| (SourceId::SecEdgar, Lane::CertifiedPit, state)));
    rows.extend(other_rows);
    certifications.extend(other_certs);
    notes.extend(other_notes);
    let changes = ChangeSet {
        rows,
        certifications,
        identity: Some(identity),
        sample: Some(sample),
        notes,
        lists: lists
            .into_iter()
            .map(|(s, l, state)| (s, l, ListObject::State(state)))
            .collect(),
        spilled: None,
    };
    Ok(publish(out, changes, commit_time).await?)
}

/// One ingest of the sample's other sources: what `asof ingest` would be given.
struct SampleIngest {
    source: SourceId,
    files: Vec<String>,
    captured_at: Instant,
    /// Certify the span of `published_at` days of the rows (exports of a date range).
    certify_row_span: bool,
}

/// Rows, certifications and notes of every source but `sec.edgar`, made by the same adapters
/// and pipeline steps as `asof ingest`, one ingest after the other (later snapshots and
/// cumulative copies are compared with what the earlier ones added).
/// Rows, certifications, per-source notes and list states of the seven non-EDGAR sources.
type OtherSources = (
    Vec<NewsRow>,
    Vec<Certification>,
    BTreeMap<String, String>,
    Vec<(SourceId, Lane, ListState)>,
);

fn other_sources(root: &Path, commit_time: Instant) -> Result<OtherSources> {
    use crate::pipeline::{Held, Request, parse_files, prepare};
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
            .map(|i| i.rel)
            .collect())
    };
    let steps = vec![
        SampleIngest {
            source: SourceId::FederalRegisterPi,
            files: vec!["us.federal_register.pi/gwu_midnight_rules_2017_2021/public_inspection_midnight_documents_all.csv".into()],
            captured_at: commit_time,
            certify_row_span: false,
        },
        SampleIngest {
            source: SourceId::CftcCot,
            files: vec!["us.cftc.cot/disaggregated_futures_only_2021/f_year.txt".into()],
            captured_at: day_end("2021-03-26"),
            certify_row_span: false,
        },
        SampleIngest {
            source: SourceId::CftcCot,
            files: vec![format!("{cot_dir}/annual.txt.committed_2025-01-13")],
            captured_at: cot_capture("2025-01-13")?,
            certify_row_span: false,
        },
        SampleIngest {
            source: SourceId::CftcCot,
            files: vec![format!("{cot_dir}/annual.txt.committed_2025-01-17")],
            captured_at: cot_capture("2025-01-17")?,
            certify_row_span: false,
        },
        SampleIngest {
            source: SourceId::OfacSdn,
            files: ["sdn.csv", "alt.csv", "sdn_comments.csv"]
                .iter()
                .map(|f| format!("us.ofac.sdn/moov_2019-01/{f}"))
                .collect(),
            captured_at: day_end("2019-01-04"),
            certify_row_span: false,
        },
        SampleIngest {
            source: SourceId::FdaDrug,
            files: vec!["us.fda.enforcement.drug/fda_enforcement_report_csv/Jun_2023_to_Sep_2024.csv".into()],
            captured_at: commit_time,
            certify_row_span: true,
        },
        SampleIngest {
            source: SourceId::FdaDevice,
            files: vec!["us.fda.enforcement.device/openfda_api_NY_subset/medical-device-recalls.csv".into()],
            captured_at: commit_time,
            certify_row_span: true,
        },
        SampleIngest {
            source: SourceId::FdaFood,
            files: vec!["us.fda.enforcement.food/openfda_doc_example/_examples.json".into()],
            captured_at: commit_time,
            certify_row_span: true,
        },
        SampleIngest {
            source: SourceId::GleifLei,
            files: dir_files("gleif.lei/api_v1_pygleif")?,
            captured_at: commit_time,
            certify_row_span: true,
        },
        SampleIngest {
            source: SourceId::GleifLei,
            files: dir_files(&format!("{gleif_rs}/lei_records"))?,
            captured_at: commit_time,
            certify_row_span: true,
        },
        SampleIngest {
            source: SourceId::GleifLei,
            files: dir_files(&format!("{gleif_rs}/field_modifications"))?,
            captured_at: commit_time,
            certify_row_span: false,
        },
    ];

    let mut held: BTreeMap<SourceId, Held> = BTreeMap::new();
    let (mut rows, mut certs) = (Vec::new(), Vec::new());
    let mut lists: BTreeMap<(SourceId, Lane), ListState> = BTreeMap::new();
    for step in steps {
        let files = step
            .files
            .iter()
            .map(|rel| {
                Ok(crate::adapter::InputFile {
                    name: rel.clone(),
                    bytes: std::fs::read(root.join(rel))?,
                }
                .into())
            })
            .collect::<Result<Vec<_>>>()?;
        let mut req = Request {
            source: step.source,
            lane: Lane::CertifiedPit,
            commit_time,
            captured_at: Some(step.captured_at),
            certify: None,
            files,
        };
        let parsed = parse_files(&req)?;
        if step.certify_row_span {
            // A partial list snapshot (GLEIF records) has no rows until `prepare` compares
            // it with what is held: its capture day is the day it speaks for.
            let days = parsed
                .rows
                .iter()
                .filter_map(NewsRow::partition_day)
                .chain(parsed.snapshot.as_ref().map(|s| s.captured_at.day()));
            req.certify = days.clone().min().zip(days.max());
        }
        if step.source == SourceId::CftcCot && step.files[0].ends_with("2025-01-17") {
            // The weekly copies hold every report released so far: the days between the two
            // captures saw no row that the second does not show.
            req.certify = Some((
                "2025-01-13".parse().expect("constant"),
                "2025-01-17".parse().expect("constant"),
            ));
        }
        let h = held.entry(step.source).or_default();
        let (mut changes, _) = prepare(&req, parsed, h)?;
        let added = rows_of(&mut changes)?;
        for r in &added {
            let sealed = r.clone().seal();
            h.rows.retain(|x| x.id != sealed.id);
            h.rows.push(sealed);
        }
        h.certifications
            .extend(changes.certifications.iter().cloned());
        for (source, lane, state) in &changes.lists {
            h.list = held_state(state)?.clone();
            lists.insert((*source, *lane), h.list.clone());
        }
        rows.extend(added);
        certs.extend(changes.certifications);
    }

    let notes = BTreeMap::from([
        (
            SourceId::FederalRegisterPi.to_string(),
            "Sample corpus. The public-inspection documents of 19 days in 2017 and 2021 (the API's full available_on answer for each day, from the GWU midnight-rules study); each of those days is certified, the days between are holes.".to_owned(),
        ),
        (
            SourceId::CftcCot.to_string(),
            "Sample corpus. Disaggregated futures-only reports of 2021 from one copy captured 2021-03-26 (certified that day), and legacy futures-only reports from the weekly copies captured 2025-01-13 and 2025-01-17 (certified 2025-01-13..2025-01-17); published_at is the first capture that showed a row.".to_owned(),
        ),
        (
            SourceId::OfacSdn.to_string(),
            "Sample corpus. One full SDN list captured 2019-01-04 (sdn.csv, alt.csv, sdn_comments.csv; its add.csv is cut short upstream and is left out, so entries carry no addresses): every entry is an sdn.added change row at that capture, which is the one certified day.".to_owned(),
        ),
        (
            SourceId::FdaDrug.to_string(),
            "Sample corpus. The FDA Enforcement Report export of drug recalls reported June 2023 to September 2024; the span of its report dates is certified complete for that export.".to_owned(),
        ),
        (
            SourceId::FdaDevice.to_string(),
            "Sample corpus. openFDA device enforcement records of firms in New York State only (search=state:\"NY\"); the span of their report dates is certified complete for that query, not for all device recalls.".to_owned(),
        ),
        (
            SourceId::FdaFood.to_string(),
            "Sample corpus. The one real food enforcement record of openFDA's documentation; its report day is certified for that record only.".to_owned(),
        ),
        (
            SourceId::GleifLei.to_string(),
            "Sample corpus. LEI records of two golden copies (2024-07-06: 2 LEIs; 2025-05-15: 12 LEIs) as lei.added change rows, and the first page of the field-modification history of 12 LEIs. The two golden-copy days are certified for the LEIs held only, not for the whole golden copy; modification days are not certified.".to_owned(),
        ),
    ]);
    let lists = lists
        .into_iter()
        .map(|((s, l), state)| (s, l, state))
        .collect();
    Ok((rows, certs, notes, lists))
}
