//! `sec.edgar` adapters: submissions JSON (and its paginated pages), daily/quarterly index
//! files (`company`, `form`, `master`), and the current-filings Atom feed (forward lane).

use std::collections::BTreeMap;

use asof_engine::model::clock::{Day, Instant, Lane, SourceId};
use asof_engine::model::identity::{EvidenceFile, NameInterval, Observation, ObservedName};
use asof_engine::model::record::NewsRow;
use asof_engine::normalize_cik;
use asof_engine::store::hashing::sha256_hex;
use serde_json::{Map, Value, json};

use crate::adapter::{Context, InputFile, Parsed, non_empty, require_capture};
use crate::error::{Error, Result};

/// What one submissions file told us.
#[derive(Debug, Clone)]
pub struct Submissions {
    pub cik: String,
    /// `None` for a paginated `-submissions-NNN` page (it carries filings only).
    pub name: Option<String>,
    pub tickers: Vec<String>,
    /// Former names with their dated validity (`formerNames`), plus the current name from the
    /// day after the last former name ended through the capture day.
    pub names: Vec<NameInterval>,
    pub rows: Vec<NewsRow>,
    /// Oldest filing date listed in `filings.recent` when older pages exist (`filings.files`).
    pub older_pages: Vec<String>,
    pub oldest_filing_date: Option<Day>,
}

impl Submissions {
    /// The capture as an identity observation: the tickers this company had at `at`, scoped
    /// to its CIK, with the file (`file`, sha256 of `bytes`) as evidence.
    pub fn observation(&self, file: &str, bytes: &[u8], at: Instant) -> Observation {
        Observation {
            evidence: EvidenceFile {
                file: file.to_owned(),
                sha256: sha256_hex(bytes),
                observed_at: at,
                scope: format!("cik:{}", self.cik),
            },
            cik_scope: Some(self.cik.clone()),
            pairs: self
                .tickers
                .iter()
                .map(|t| (t.clone(), self.cik.clone()))
                .collect(),
        }
    }
}

fn archive_base(cik: &str, accession: &str) -> String {
    format!(
        "https://www.sec.gov/Archives/edgar/data/{cik}/{}",
        accession.replace('-', "")
    )
}

fn is_accession(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b[10] == b'-'
        && b[13] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 10 || i == 13 || c.is_ascii_digit())
}

/// Parses `CIK##########.json` or `CIK##########-submissions-NNN.json` bytes captured at
/// `captured_at`. `cik_hint` is the CIK from the file name (pages do not carry it).
pub fn parse_submissions(
    file: &str,
    bytes: &[u8],
    cik_hint: &str,
    captured_at: Instant,
) -> Result<Submissions> {
    let v = crate::adapter::json(file, bytes)?;
    let obj = v
        .as_object()
        .ok_or_else(|| Error::parse(file, "top level", "expected a JSON object"))?;
    let (cik, name, tickers, filings, older_pages, former) = if let Some(filings) =
        obj.get("filings")
    {
        let cik_raw = obj
            .get("cik")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::parse(file, "cik", "missing"))?;
        let cik = normalize_cik(cik_raw)
            .ok_or_else(|| Error::parse(file, "cik", format!("not a CIK: {cik_raw:?}")))?;
        let name = obj.get("name").and_then(Value::as_str).map(str::to_owned);
        let tickers = obj
            .get("tickers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let recent = filings
            .get("recent")
            .and_then(Value::as_object)
            .ok_or_else(|| Error::parse(file, "filings.recent", "missing"))?;
        let pages = filings
            .get("files")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let former = obj
            .get("formerNames")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        (cik, name, tickers, recent.clone(), pages, former)
    } else {
        let cik = normalize_cik(cik_hint)
            .ok_or_else(|| Error::parse(file, "file name", format!("no CIK in {cik_hint:?}")))?;
        (cik, None, vec![], obj.clone(), vec![], vec![])
    };

    let mut names = Vec::new();
    let mut last_former_end: Option<Day> = None;
    for (i, f) in former.iter().enumerate() {
        let n = f.get("name").and_then(Value::as_str);
        let from = f
            .get("from")
            .and_then(Value::as_str)
            .and_then(|s| s.get(..10))
            .and_then(|s| s.parse::<Day>().ok());
        let to = f
            .get("to")
            .and_then(Value::as_str)
            .and_then(|s| s.get(..10))
            .and_then(|s| s.parse::<Day>().ok());
        match (n, from, to) {
            (Some(n), Some(from), Some(to)) => {
                if from > to {
                    // EDGAR lists a few inverted ranges (test filers); they place the name on
                    // no day, so they add no interval.
                    tracing::warn!(
                        file,
                        index = i,
                        "formerNames entry ends before it starts; ignored"
                    );
                    continue;
                }
                names.push(NameInterval {
                    cik: cik.clone(),
                    name: n.to_owned(),
                    from,
                    to,
                    evidence: vec![],
                });
                last_former_end = Some(last_former_end.map_or(to, |d: Day| d.max(to)));
            }
            _ => {
                return Err(Error::parse(
                    file,
                    format!("formerNames[{i}]"),
                    "expected name, from and to dates",
                ));
            }
        }
    }
    if let Some(current) = &name {
        let from = last_former_end.map_or(Day::from_days(0), Day::next);
        if from <= captured_at.day() {
            names.push(NameInterval {
                cik: cik.clone(),
                name: current.clone(),
                from,
                to: captured_at.day(),
                evidence: vec![],
            });
        }
    }

    let col = |k: &str| -> Result<&Vec<Value>> {
        filings
            .get(k)
            .and_then(Value::as_array)
            .ok_or_else(|| Error::parse(file, format!("filings.{k}"), "missing column"))
    };
    let acc = col("accessionNumber")?;
    let n = acc.len();
    let columns: BTreeMap<&str, &Vec<Value>> = filings
        .iter()
        .filter_map(|(k, v)| v.as_array().map(|a| (k.as_str(), a)))
        .collect();
    for (k, a) in &columns {
        if a.len() != n {
            return Err(Error::parse(
                file,
                format!("filings.{k}"),
                format!("{} entries, accessionNumber has {n}", a.len()),
            ));
        }
    }
    let text = |k: &str, i: usize| -> String {
        columns
            .get(k)
            .and_then(|a| a[i].as_str())
            .unwrap_or("")
            .to_owned()
    };
    let company = name.clone();
    let mut rows = Vec::with_capacity(n);
    let mut oldest: Option<Day> = None;
    for i in 0..n {
        let at = format!("filings[{i}]");
        let accession = text("accessionNumber", i);
        if !is_accession(&accession) {
            return Err(Error::parse(
                file,
                at,
                format!("accessionNumber {accession:?} is not NNNNNNNNNN-NN-NNNNNN"),
            ));
        }
        let filing_date: Day = text("filingDate", i).parse().map_err(|()| {
            Error::parse(
                file,
                &at,
                format!("filingDate {:?} is not YYYY-MM-DD", text("filingDate", i)),
            )
        })?;
        oldest = Some(oldest.map_or(filing_date, |d: Day| d.min(filing_date)));
        let acceptance_raw = text("acceptanceDateTime", i);
        let acceptance_at = if acceptance_raw.is_empty() {
            None
        } else {
            Some(Instant::parse(&acceptance_raw).map_err(|f| {
                Error::parse(
                    file,
                    &at,
                    format!("acceptanceDateTime {acceptance_raw:?}: {f}"),
                )
            })?)
        };
        let report = text("reportDate", i);
        let event_at = if report.is_empty() {
            None
        } else {
            Some(
                report
                    .parse::<Day>()
                    .map_err(|()| {
                        Error::parse(
                            file,
                            &at,
                            format!("reportDate {report:?} is not YYYY-MM-DD"),
                        )
                    })?
                    .end_of_day(),
            )
        };
        let form = text("form", i);
        if form.is_empty() {
            return Err(Error::parse(file, at, "empty form"));
        }
        let primary = text("primaryDocument", i);
        let description = text("primaryDocDescription", i);
        let filer = company
            .as_deref()
            .map(|c| name_on(&names, filing_date).unwrap_or(c))
            .unwrap_or("");
        let title = match (
            filer.is_empty(),
            description.is_empty() || description.eq_ignore_ascii_case(&form),
        ) {
            (true, true) => form.clone(),
            (true, false) => format!("{form}: {description}"),
            (false, true) => format!("{form} - {filer}"),
            (false, false) => format!("{form} - {filer}: {description}"),
        };
        let locator = if primary.is_empty() {
            format!("{}/{accession}-index.htm", archive_base(&cik, &accession))
        } else {
            format!("{}/{primary}", archive_base(&cik, &accession))
        };
        let mut payload = Map::new();
        for k in [
            "filingDate",
            "reportDate",
            "act",
            "fileNumber",
            "filmNumber",
            "items",
            "size",
            "isXBRL",
            "isInlineXBRL",
            "primaryDocument",
            "primaryDocDescription",
        ] {
            if let Some(v) = columns.get(k).map(|a| a[i].clone()) {
                payload.insert(k.to_owned(), v);
            }
        }
        rows.push(NewsRow {
            id: format!("{accession}_{cik}"),
            source_id: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            form: Some(form),
            accession: Some(accession),
            cik: Some(cik.clone()),
            title,
            event_at,
            // EDGAR disseminates a filing when it is accepted; without an acceptance instant
            // only the filing date is known (day resolution).
            published_at: Some(acceptance_at.unwrap_or_else(|| filing_date.end_of_day())),
            available_at: None,
            acceptance_at,
            committed_at: Some(captured_at),
            availability_basis: asof_engine::AvailabilityBasis::Unknown,
            revision_id: String::new(),
            supersedes: None,
            content_sha256: String::new(),
            source_locator: locator,
            entity_id: Some(cik.clone()),
            payload: Some(Value::Object(payload).to_string()),
        });
    }
    Ok(Submissions {
        cik,
        name,
        tickers,
        names,
        rows,
        older_pages,
        oldest_filing_date: oldest,
    })
}

fn name_on(names: &[NameInterval], day: Day) -> Option<&str> {
    names
        .iter()
        .filter(|n| n.from <= day && day <= n.to)
        .max_by_key(|n| n.from)
        .map(|n| n.name.as_str())
}

/// The kind of index file, by header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexLayout {
    /// `CIK|Company Name|Form Type|Date Filed|File Name`
    Master,
    /// fixed width, company name first
    Company,
    /// fixed width, form type first
    Form,
}

/// One parsed index file.
#[derive(Debug, Clone)]
pub struct IndexFile {
    pub layout: IndexLayout,
    /// For a daily index ("Daily Index of EDGAR Dissemination Feed"), the dissemination day
    /// (`Last Data Received`): every row became public that day, whatever its `Date Filed`.
    pub daily: Option<Day>,
    pub rows: Vec<NewsRow>,
}

/// `Oct  3, 2022` / `December 31, 1993` → the day.
fn header_date(s: &str) -> Option<Day> {
    let s = s.replace(',', " ");
    let mut it = s.split_whitespace();
    let (m, d, y) = (it.next()?, it.next()?, it.next()?);
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let m = MONTHS
        .iter()
        .position(|p| m.to_ascii_lowercase().starts_with(p))?
        + 1;
    format!("{y}-{m:02}-{:02}", d.parse::<u8>().ok()?)
        .parse()
        .ok()
}

/// Rows of one EDGAR index file; `committed_at` is when the file entered the corpus.
///
/// A daily index lists what was disseminated on its day, including filings whose
/// `Date Filed` is earlier (e.g. EFFECT notices): `published_at` is the dissemination day at
/// day resolution and `date_filed` stays in the payload. A quarterly (full) index gives only the
/// filing date, which becomes `published_at` at day resolution.
pub fn parse_index(file: &str, bytes: &[u8], committed_at: Instant) -> Result<IndexFile> {
    let mut rows = Vec::new();
    let (layout, daily) = parse_index_into(file, bytes, Some(committed_at), &mut |r| rows.push(r))?;
    Ok(IndexFile {
        layout,
        daily,
        rows,
    })
}

/// [`parse_index`] handing each row to `sink` as it is parsed instead of collecting them, so
/// a quarter's `master.idx` (300k+ filings) never sits in memory as rows at once; returns the
/// layout and, for a daily index, its dissemination day. Rows carry `committed_at` as given.
pub fn parse_index_into(
    file: &str,
    bytes: &[u8],
    committed_at: Option<Instant>,
    sink: &mut dyn FnMut(NewsRow),
) -> Result<(IndexLayout, Option<Day>)> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Error::parse(
            file,
            format!("byte {}", e.valid_up_to()),
            "not UTF-8/ASCII text",
        )
    })?;
    let lines: Vec<&str> = text.lines().collect();
    let is_daily = lines
        .iter()
        .take(8)
        .any(|l| l.starts_with("Description:") && l.contains("Daily Index"));
    let daily = if is_daily {
        let raw = lines
            .iter()
            .take(8)
            .find_map(|l| l.strip_prefix("Last Data Received:"))
            .ok_or_else(|| {
                Error::parse(file, "header", "daily index without 'Last Data Received'")
            })?;
        Some(header_date(raw).ok_or_else(|| {
            Error::parse(
                file,
                "header",
                format!("'Last Data Received' {:?} is not a date", raw.trim()),
            )
        })?)
    } else {
        None
    };
    let header_at = lines
        .iter()
        .position(|l| {
            l.starts_with("CIK|") || (l.contains("Company Name") && l.contains("Form Type"))
        })
        .ok_or_else(|| {
            Error::parse(
                file,
                "header",
                "no column header line (CIK|... or Company Name/Form Type)",
            )
        })?;
    let header = lines[header_at];
    let layout = if header.starts_with("CIK|") {
        IndexLayout::Master
    } else if header.trim_start().starts_with("Form Type") {
        IndexLayout::Form
    } else {
        IndexLayout::Company
    };
    let dashes = lines
        .iter()
        .skip(header_at)
        .position(|l| l.starts_with("----"))
        .map(|p| p + header_at)
        .ok_or_else(|| Error::parse(file, "header", "no ---- separator after the header"))?;
    let split_col = match layout {
        IndexLayout::Company => header.find("Form Type"),
        IndexLayout::Form => header.find("Company Name"),
        IndexLayout::Master => Some(0),
    }
    .ok_or_else(|| Error::parse(file, "header", "column positions not found"))?;

    for (n, line) in lines.iter().enumerate().skip(dashes + 1) {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("line {}", n + 1);
        let (company, form, cik, date, path) = match layout {
            IndexLayout::Master => {
                let f: Vec<&str> = line.split('|').collect();
                if f.len() != 5 {
                    return Err(Error::parse(
                        file,
                        at,
                        format!("expected 5 |-separated fields, found {}", f.len()),
                    ));
                }
                (
                    f[1].trim().to_owned(),
                    f[2].trim().to_owned(),
                    f[0].trim().to_owned(),
                    f[3].trim().to_owned(),
                    f[4].trim().to_owned(),
                )
            }
            _ => {
                // Right to left: file name, date, CIK are single tokens; the rest splits at the
                // header's column (company names and form types both contain spaces).
                let mut toks = line.split_whitespace().rev();
                let (Some(path), Some(date), Some(cik)) = (toks.next(), toks.next(), toks.next())
                else {
                    return Err(Error::parse(
                        file,
                        at,
                        "expected company, form, CIK, date and file name",
                    ));
                };
                let cik_pos = line
                    .rfind(&format!(" {cik} "))
                    .ok_or_else(|| Error::parse(file, &at, "CIK column not found"))?;
                let left = &line[..cik_pos];
                if left.len() < split_col {
                    return Err(Error::parse(
                        file,
                        at,
                        "line shorter than the header's columns",
                    ));
                }
                let (a, b) = left.split_at(split_col);
                let (company, form) = if layout == IndexLayout::Company {
                    (a, b)
                } else {
                    (b, a)
                };
                (
                    company.trim().to_owned(),
                    form.trim().to_owned(),
                    cik.to_owned(),
                    date.to_owned(),
                    path.to_owned(),
                )
            }
        };
        let cik = normalize_cik(&cik)
            .ok_or_else(|| Error::parse(file, &at, format!("CIK {cik:?} is not a number")))?;
        if form.is_empty() {
            return Err(Error::parse(file, at, "empty form type"));
        }
        let day = Day::parse_compact(&date)
            .or_else(|| date.parse().ok())
            .ok_or_else(|| {
                Error::parse(
                    file,
                    &at,
                    format!("date {date:?} is neither YYYYMMDD nor YYYY-MM-DD"),
                )
            })?;
        let accession = path
            .rsplit('/')
            .next()
            .and_then(|f| f.strip_suffix(".txt"))
            .filter(|a| is_accession(a))
            .ok_or_else(|| {
                Error::parse(
                    file,
                    &at,
                    format!("file name {path:?} does not end in <accession>.txt"),
                )
            })?
            .to_owned();
        let published = daily.unwrap_or(day);
        sink(NewsRow {
            id: format!("{accession}_{cik}"),
            source_id: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            form: Some(form.clone()),
            accession: Some(accession),
            cik: Some(cik.clone()),
            title: format!("{form} - {company}"),
            event_at: None,
            // Index files give days only: day resolution.
            published_at: Some(published.end_of_day()),
            available_at: None,
            acceptance_at: None,
            committed_at,
            availability_basis: asof_engine::AvailabilityBasis::Unknown,
            revision_id: String::new(),
            supersedes: None,
            content_sha256: String::new(),
            source_locator: format!("https://www.sec.gov/Archives/{path}"),
            entity_id: Some(cik),
            payload: Some(json!({"date_filed": day.to_string(), "file_name": path}).to_string()),
        });
    }
    Ok((layout, daily))
}

/// One page of the current-filings Atom feed.
#[derive(Debug, Clone)]
pub struct AtomPage {
    /// The feed's own `<updated>`: when the poller fetched the page.
    pub fetched_at: Instant,
    pub rows: Vec<NewsRow>,
    /// Earliest and latest acceptance instants listed.
    pub oldest: Option<Instant>,
    pub newest: Option<Instant>,
}

/// Parses one page of `browse-edgar?action=getcurrent&output=atom` as forward-lane rows:
/// `available_at` is the fetch minute, `availability_basis = local_first_seen`.
pub fn parse_atom(file: &str, bytes: &[u8]) -> Result<AtomPage> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(bytes);
    reader.config_mut().trim_text(true);
    let mut buf = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut feed_updated: Option<String> = None;
    let mut entries: Vec<BTreeMap<String, String>> = Vec::new();
    let mut cur: Option<BTreeMap<String, String>> = None;
    loop {
        let ev = reader.read_event_into(&mut buf).map_err(|e| {
            Error::parse(
                file,
                format!("byte {}", reader.buffer_position()),
                format!("malformed XML: {e}"),
            )
        })?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if name == "entry" {
                    cur = Some(BTreeMap::new());
                }
                if let Some(c) = cur.as_mut() {
                    for a in e.attributes().flatten() {
                        let v = a
                            .decode_and_unescape_value(reader.decoder())
                            .map(|v| v.into_owned())
                            .unwrap_or_default();
                        match (name.as_str(), a.key.as_ref()) {
                            ("link", b"href") => c.insert("link".into(), v),
                            ("category", b"term") => c.insert("form".into(), v),
                            _ => None,
                        };
                    }
                }
                // An empty element (`<link .../>`) has no end event: keep it off the path.
                if matches!(ev, Event::Start(_)) {
                    path.push(name);
                }
            }
            Event::End(_) => {
                let ended = path.pop();
                if ended.as_deref() == Some("entry")
                    && let Some(c) = cur.take()
                {
                    entries.push(c);
                }
            }
            Event::Text(t) => {
                let text = t.decode().map(|s| s.into_owned()).unwrap_or_default();
                let text = quick_xml::escape::unescape(&text)
                    .map(|s| s.into_owned())
                    .unwrap_or(text);
                let leaf = path.last().map(String::as_str);
                match (cur.as_mut(), leaf) {
                    (Some(c), Some(k @ ("title" | "updated" | "summary" | "id"))) => {
                        c.insert(k.to_owned(), text);
                    }
                    (None, Some("updated")) if path.len() == 2 => feed_updated = Some(text),
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    let fetched_raw = feed_updated.ok_or_else(|| Error::parse(file, "feed/updated", "missing"))?;
    let fetched_at = Instant::parse_rfc3339_any(&fetched_raw).ok_or_else(|| {
        Error::parse(
            file,
            "feed/updated",
            format!("{fetched_raw:?} is not RFC 3339"),
        )
    })?;
    let minute =
        Instant::from_micros(fetched_at.micros() - fetched_at.micros().rem_euclid(60_000_000));
    let mut rows = Vec::with_capacity(entries.len());
    let (mut oldest, mut newest): (Option<Instant>, Option<Instant>) = (None, None);
    for (i, e) in entries.iter().enumerate() {
        let at = format!("entry {}", i + 1);
        let get = |k: &str| {
            e.get(k)
                .map(String::as_str)
                .ok_or_else(|| Error::parse(file, &at, format!("missing <{k}>")))
        };
        let title = get("title")?;
        let updated = get("updated")?;
        let id = get("id")?;
        let accession = id
            .rsplit('=')
            .next()
            .filter(|a| is_accession(a))
            .ok_or_else(|| {
                Error::parse(file, &at, format!("<id> {id:?} has no accession number"))
            })?;
        let accepted = Instant::parse_rfc3339_any(updated).ok_or_else(|| {
            Error::parse(file, &at, format!("<updated> {updated:?} is not RFC 3339"))
        })?;
        // Title: "FORM - COMPANY (0001234567) (Role)".
        let (head, role) = title.rsplit_once(" (").ok_or_else(|| {
            Error::parse(file, &at, format!("title {title:?} lacks (CIK) (Role)"))
        })?;
        let role = role.trim_end_matches(')');
        let (head, cik_raw) = head
            .rsplit_once(" (")
            .ok_or_else(|| Error::parse(file, &at, format!("title {title:?} lacks (CIK)")))?;
        let cik = normalize_cik(cik_raw.trim_end_matches(')'))
            .ok_or_else(|| Error::parse(file, &at, format!("CIK {cik_raw:?} is not a number")))?;
        let form = e
            .get("form")
            .cloned()
            .unwrap_or_else(|| head.split(" - ").next().unwrap_or("").to_owned());
        let company = head.split_once(" - ").map_or(head, |(_, c)| c);
        let link = e
            .get("link")
            .cloned()
            .unwrap_or_else(|| format!("{}/{accession}-index.htm", archive_base(&cik, accession)));
        let summary = e.get("summary").cloned().unwrap_or_default();
        let field = |label: &str| {
            summary
                .split(&format!("<b>{label}:</b>"))
                .nth(1)
                .map(|s| s.split('<').next().unwrap_or("").trim().to_owned())
        };
        oldest = Some(oldest.map_or(accepted, |o| o.min(accepted)));
        newest = Some(newest.map_or(accepted, |o| o.max(accepted)));
        rows.push(NewsRow {
            id: format!("{accession}_{cik}"),
            source_id: SourceId::SecEdgar,
            lane: Lane::ForwardFirstSeen,
            form: Some(form.clone()),
            accession: Some(accession.to_owned()),
            cik: Some(cik.clone()),
            title: format!("{form} - {company} ({role})"),
            event_at: None,
            published_at: Some(accepted),
            available_at: Some(minute),
            acceptance_at: Some(accepted),
            committed_at: Some(fetched_at),
            availability_basis: asof_engine::AvailabilityBasis::LocalFirstSeen,
            revision_id: String::new(),
            supersedes: None,
            content_sha256: String::new(),
            source_locator: link,
            entity_id: Some(cik),
            payload: Some(json!({"role": role, "filed": field("Filed"), "size": field("Size"), "feed_updated": updated}).to_string()),
        });
    }
    Ok(AtomPage {
        fetched_at,
        rows,
        oldest,
        newest,
    })
}

/// `CIK0000320193__20260305T112023Z.json` → ("0000320193", false, 2026-03-05T11:20:23Z).
pub fn submissions_name(rel: &str) -> Result<(String, bool, Instant)> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let bad = || {
        Error::parse(
            rel,
            "file name",
            "expected CIK##########[-submissions-NNN]__YYYYMMDDTHHMMSSZ.json",
        )
    };
    let stem = name.strip_suffix(".json").ok_or_else(bad)?;
    let (head, stamp) = stem.split_once("__").ok_or_else(bad)?;
    let cik = head.strip_prefix("CIK").ok_or_else(bad)?;
    let (cik, page) = match cik.split_once("-submissions-") {
        Some((c, _)) => (c, true),
        None => (cik, false),
    };
    if stamp.len() != 16 {
        return Err(bad());
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &stamp[0..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15]
    );
    let at = Instant::parse(&iso).map_err(|_| bad())?;
    Ok((cik.to_owned(), page, at))
}

/// The adapter contract (`crate::adapter`) for `sec.edgar`: EDGAR index files (`.idx`; a daily
/// index is a whole day), submissions JSON (captured at the `__YYYYMMDDTHHMMSSZ` instant of
/// its file name, else at `--captured-at`) and pages of the current-filings Atom feed (forward
/// lane only; a row seen on several pages keeps its first sighting).
/// The days of a quarter EDGAR published no daily index for, as its `daily-index/YYYY/QTRn/
/// index.json` listing shows: every day from the quarter's first to its last listed
/// `company.YYYYMMDD.idx` that has no such file (weekends, holidays). The listing is the
/// evidence those days are complete and empty; days after the last listed one are not
/// claimed (their index may not be out yet), and listed days are certified by their own
/// index file, never by the listing.
pub fn unpublished_days(file: &str, bytes: &[u8]) -> Result<Vec<Day>> {
    Ok(daily_listing(file, bytes)?.1)
}

/// A quarter's daily-index listing: the days with a `company.YYYYMMDD.idx`, and the days from
/// the quarter's first to its last listed day without one (see [`unpublished_days`]).
pub fn daily_listing(file: &str, bytes: &[u8]) -> Result<(Vec<Day>, Vec<Day>)> {
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| Error::parse(file, "listing", format!("not JSON: {e}")))?;
    let dir = v["directory"]["name"].as_str().unwrap_or_default();
    // "daily-index/2026/QTR1/" (EDGAR may or may not lead with a slash).
    let parts: Vec<&str> = dir.trim_matches('/').split('/').collect();
    let (year, quarter) = match parts.as_slice() {
        [.., "daily-index", y, q] => (
            y.parse::<i32>().ok(),
            q.strip_prefix("QTR").and_then(|n| n.parse::<u8>().ok()),
        ),
        _ => (None, None),
    };
    let (Some(year), Some(quarter @ 1..=4)) = (year, quarter) else {
        return Err(Error::parse(
            file,
            "directory/name",
            format!("{dir:?} is not a daily-index/YYYY/QTRn/ listing"),
        ));
    };
    let first: Day = format!("{year}-{:02}-01", (quarter - 1) * 3 + 1)
        .parse()
        .map_err(|()| Error::parse(file, "directory/name", "no such quarter"))?;
    let listed: std::collections::BTreeSet<Day> = v["directory"]["item"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["name"].as_str())
        .filter_map(|n| n.strip_prefix("company.")?.strip_suffix(".idx"))
        .filter_map(Day::parse_compact)
        .filter(|d| *d >= first)
        .collect();
    let Some(&last) = listed.last() else {
        return Ok((vec![], vec![]));
    };
    let unpublished = (first.days()..=last.days())
        .map(Day::from_days)
        .filter(|d| !listed.contains(d))
        .collect();
    Ok((listed.into_iter().collect(), unpublished))
}

pub fn parse(files: &[InputFile], ctx: &Context) -> Result<Parsed> {
    let mut out = Parsed::default();
    let mut captures: Vec<(Instant, String, Vec<NewsRow>)> = Vec::new();
    let mut first_seen: BTreeMap<String, NewsRow> = BTreeMap::new();
    for f in files {
        non_empty(f)?;
        let base = f.name.rsplit('/').next().unwrap_or(&f.name);
        let head = f
            .bytes
            .iter()
            .find(|b| !b.is_ascii_whitespace() && **b != 0xEF && **b != 0xBB && **b != 0xBF)
            .copied();
        let lane_must_be = |lane: Lane, what: &str| {
            if ctx.lane == lane {
                Ok(())
            } else {
                Err(Error::parse(
                    &f.name,
                    "file",
                    format!("{what} belongs to lane {lane}, not {}", ctx.lane),
                ))
            }
        };
        if crate::sources::tickers::is_ticker_file(base) {
            lane_must_be(Lane::CertifiedPit, "an SEC ticker list")?;
            if out.snapshot.is_some() {
                return Err(Error::parse(
                    &f.name,
                    "file",
                    "one ticker list per ingest: each list is one capture, ingested in capture order",
                ));
            }
            let at = require_capture(ctx, &f.name)?;
            // Not a whole day of filings: a ticker list certifies no EDGAR day.
            out.snapshot = Some(crate::sources::tickers::parse_ticker_snapshot(
                &f.name, &f.bytes, at,
            )?);
            // The same list is an identity observation: every ticker on it names its CIK
            // from the capture on.
            out.observations
                .push(crate::sources::tickers::parse_ticker_file(
                    base, &f.bytes, at,
                )?);
        } else if base.to_ascii_lowercase().ends_with(".idx") {
            lane_must_be(Lane::CertifiedPit, "an EDGAR index file")?;
            // Rows go straight to the spill (memory up to a limit, then a temporary file): a
            // quarter's index or a month of daily ones is the largest input EDGAR has.
            let (_, daily) =
                parse_index_into(&f.name, &f.bytes, None, &mut |r| out.spilled.push(r))?;
            out.whole_days.extend(daily);
        } else if base == "index.json" {
            lane_must_be(Lane::CertifiedPit, "an EDGAR daily-index listing")?;
            out.whole_days.extend(unpublished_days(&f.name, &f.bytes)?);
        } else if head == Some(b'{') {
            lane_must_be(Lane::CertifiedPit, "a submissions file")?;
            let (cik, page, at) = match submissions_name(base) {
                Ok(named) => named,
                Err(_) => {
                    let at = require_capture(ctx, &f.name)?;
                    let cik = base
                        .strip_prefix("CIK")
                        .map(|r| r.chars().take_while(char::is_ascii_digit).collect())
                        .unwrap_or_default();
                    (cik, base.contains("-submissions-"), at)
                }
            };
            let s = parse_submissions(&f.name, &f.bytes, &cik, at)?;
            // A company's own capture (not an older-filings page) says which tickers it had
            // and its names: identity observations scoped to that CIK.
            if !page && s.name.is_some() {
                out.observations.push(s.observation(base, &f.bytes, at));
                out.names.extend(s.names.iter().map(|n| ObservedName {
                    file: base.to_owned(),
                    name: n.clone(),
                }));
            }
            captures.push((at, f.name.clone(), s.rows));
        } else if head == Some(b'<') {
            lane_must_be(Lane::ForwardFirstSeen, "a current-filings Atom page")?;
            let mut page = parse_atom(&f.name, &f.bytes)?;
            // A poller knows when it fetched the page (`captured_at`): that minute, not the
            // feed's own `<updated>`, is when the filing was first seen here.
            if let Some(at) = ctx.captured_at {
                let minute = Instant::from_micros(at.micros() - at.micros().rem_euclid(60_000_000));
                for r in &mut page.rows {
                    r.available_at = Some(minute);
                    // Committed when this ingest publishes it.
                    r.committed_at = None;
                }
            }
            for r in page.rows {
                match first_seen.get(&r.id) {
                    Some(prev) if prev.available_at <= r.available_at => {}
                    _ => {
                        first_seen.insert(r.id.clone(), r);
                    }
                }
            }
        } else {
            return Err(Error::parse(
                &f.name,
                "file",
                "not an EDGAR index (.idx), submissions JSON, current-filings Atom page or ticker list (company_tickers*.json|csv)",
            ));
        }
    }
    // Captures in capture order, so a later capture of a company supersedes an earlier one.
    captures.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    out.rows.extend(captures.into_iter().flat_map(|c| c.2));
    out.rows.extend(first_seen.into_values());
    for r in &mut out.rows {
        r.committed_at = None;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    #[test]
    fn index_line_with_spaces_in_form_and_company_parses_by_column() {
        let text = "Description:           Daily Index of EDGAR Dissemination Feed by Company Name\nLast Data Received:    Oct  3, 2022\n\nCompany Name                                                  Form Type   CIK\n      Date Filed  File Name\n-----\n1st stREIT Office Inc.                                        1-A POS     1700461     20221003    edgar/data/1700461/0001104659-22-105357.txt         \n";
        let IndexFile {
            layout,
            daily,
            rows,
        } = parse_index("company.idx", text.as_bytes(), t("2026-11-01T00:00:00Z")).unwrap();
        assert_eq!(layout, IndexLayout::Company);
        assert_eq!(daily, Some("2022-10-03".parse().unwrap()));
        assert_eq!(rows[0].form.as_deref(), Some("1-A POS"));
        assert_eq!(rows[0].title, "1-A POS - 1st stREIT Office Inc.");
        assert_eq!(rows[0].published_at, Some(t("2022-10-03T23:59:59Z")));
        assert_eq!(rows[0].acceptance_at, None);
        assert_eq!(rows[0].id, "0001104659-22-105357_1700461");
    }

    #[test]
    fn daily_index_rows_filed_earlier_are_published_on_the_dissemination_day() {
        let text = "Description:           Daily Index of EDGAR Dissemination Feed by Company Name\nLast Data Received:    Oct  3, 2022\n\nCompany Name                                                  Form Type   CIK\n      Date Filed  File Name\n-----\nAEye, Inc.                                                    EFFECT      1818644     20220930    edgar/data/1818644/9999999995-22-002867.txt         \n";
        let f = parse_index("company.idx", text.as_bytes(), t("2026-11-01T00:00:00Z")).unwrap();
        assert_eq!(f.rows[0].published_at, Some(t("2022-10-03T23:59:59Z")));
        assert!(
            f.rows[0]
                .payload
                .as_deref()
                .unwrap()
                .contains("\"date_filed\":\"2022-09-30\"")
        );
    }

    #[test]
    fn a_quarter_listing_certifies_the_unlisted_days_up_to_its_last_index_only() {
        let listing = br#"{"directory":{"name":"daily-index/2022/QTR4/","item":[
            {"name":"company.20221003.idx"},{"name":"master.20221003.idx"},
            {"name":"company.20221005.idx"},{"name":"sitemap.quarterlyindex1.xml"}]}}"#;
        let days = unpublished_days("index.json", listing).unwrap();
        let want: Vec<Day> = ["2022-10-01", "2022-10-02", "2022-10-04"]
            .iter()
            .map(|d| d.parse().unwrap())
            .collect();
        assert_eq!(days, want);
        let empty = br#"{"directory":{"name":"daily-index/2022/QTR4/","item":[]}}"#;
        assert!(unpublished_days("index.json", empty).unwrap().is_empty());
        let bad = br#"{"directory":{"name":"full-index/2022/","item":[]}}"#;
        assert!(unpublished_days("index.json", bad).is_err());
    }

    #[test]
    fn index_without_header_is_refused_with_its_name() {
        let err = parse_index("bad.idx", b"hello\nworld\n", t("2026-11-01T00:00:00Z"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("bad.idx: header:"), "{err}");
    }
}
