//! `us.federal_register.pi` adapter: Federal Register public-inspection documents, from the API's
//! JSON (search responses and single-document responses) and from the CSV list of
//! `available_on` results the GW Regulatory Studies Center published (docs/sources.d).

use std::collections::{BTreeMap, BTreeSet};

use asof_engine::model::clock::{Day, Instant};
use asof_engine::model::record::NewsRow;
use serde_json::{Map, Value};

use crate::adapter::{Columns, Context, InputFile, Parsed, base_row, non_empty, utf8};
use crate::error::{Error, Result};

/// The columns of the public-inspection document list (CSV form), in file order.
pub const CSV_COLUMNS: [&str; 14] = [
    "year",
    "date",
    "type",
    "agencies_slug_uq",
    "agencies_id_uq",
    "agencies_acronym_uq",
    "agency_names",
    "agency_slugs",
    "document_number",
    "title",
    "editorial_note",
    "filing_type",
    "json_url",
    "indicator",
];

/// CSV columns that become the row's id, form, title and locator; the others form the payload.
const CSV_MAPPED: [&str; 4] = ["document_number", "type", "title", "json_url"];

/// API fields kept out of the payload: the first three are the row's id, form and title; the
/// others change with every fetch (view counter, search-term highlights) without the document
/// changing, and would make each re-ingest a new revision.
const JSON_DROPPED: [&str; 5] = ["document_number", "type", "title", "page_views", "excerpts"];

const API_DOCUMENT_URL: &str =
    "https://www.federalregister.gov/api/v1/public_inspection_documents/";

/// Parses one ingest's files: CSV lists and API JSON responses, told apart by their first byte.
///
/// A document number seen more than once (a document stays on public inspection over several
/// days, so consecutive `available_on` lists repeat it) gives one row: the sighting with the
/// earliest `published_at`, ties going to the first in input order.
pub fn parse(files: &[InputFile], ctx: &Context) -> Result<Parsed> {
    let mut rows: Vec<NewsRow> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut whole_days = BTreeSet::new();
    for file in files {
        non_empty(file)?;
        let text = utf8(file)?;
        let sightings = match text.trim_start().as_bytes().first() {
            Some(b'{' | b'[') => parse_json(file, text, ctx)?,
            _ => {
                let (rows, days) = parse_csv(file, text, ctx)?;
                whole_days.extend(days);
                rows
            }
        };
        for row in sightings {
            match index.get(&row.id) {
                Some(&i) => {
                    if earlier(row.published_at, rows[i].published_at) {
                        rows[i] = row;
                    }
                }
                None => {
                    index.insert(row.id.clone(), rows.len());
                    rows.push(row);
                }
            }
        }
    }
    Ok(Parsed {
        rows,
        published_is_capture: false,
        snapshot: None,
        whole_days: whole_days.into_iter().collect(),
        ..Default::default()
    })
}

/// True when `a` is strictly earlier than `b`; a missing clock is later than any instant.
fn earlier(a: Option<Instant>, b: Option<Instant>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a < b,
        (Some(_), None) => true,
        _ => false,
    }
}

/// FR document numbers: `2017-01009`, corrections `C1-2016-29882`, older `93-32104`.
fn is_document_number(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.contains('-')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn csv_error(file: &str, e: &csv::Error) -> Error {
    let at = e
        .position()
        .map_or_else(|| "file".to_owned(), |p| format!("line {}", p.line()));
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!(
            "{len} fields where the header has {expected_len} (a truncated or malformed row)"
        ),
        _ => format!("malformed CSV: {e}"),
    };
    Error::parse(file, at, message)
}

/// The CSV list: one row per document, published at the end of its public-inspection day;
/// every day it lists is whole (see docs/sources.d/us.federal_register.pi.md).
fn parse_csv(file: &InputFile, text: &str, ctx: &Context) -> Result<(Vec<NewsRow>, BTreeSet<Day>)> {
    let name = file.name.as_str();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let header = reader.headers().map_err(|e| csv_error(name, &e))?.clone();
    let found: BTreeSet<&str> = header.iter().map(str::trim).collect();
    if found != CSV_COLUMNS.into_iter().collect::<BTreeSet<_>>()
        || header.len() != CSV_COLUMNS.len()
    {
        // The folder this list comes from also holds analysis tables (withdrawn documents,
        // their NPRMs); they list a filtered subset and would certify days falsely.
        return Err(Error::parse(
            name,
            "line 1",
            format!(
                "not a public-inspection document list: expected the columns {}, found {}",
                CSV_COLUMNS.join(","),
                header.iter().collect::<Vec<_>>().join(",")
            ),
        ));
    }
    let cols = Columns::new(name, &header);
    let mut rows = Vec::new();
    let mut days = BTreeSet::new();
    for record in reader.records() {
        let record = record.map_err(|e| csv_error(name, &e))?;
        let at = format!("line {}", record.position().map_or(0, |p| p.line()));
        let get = |c: &str| cols.get(&record, c);
        let fault = |message: String| Error::parse(name, &at, message);

        let number = get("document_number");
        if !is_document_number(number) {
            return Err(fault(format!(
                "document_number {number:?} is not a Federal Register document number"
            )));
        }
        let date = get("date");
        let day: Day = date
            .parse()
            .map_err(|()| fault(format!("date: {date:?} is not a YYYY-MM-DD date")))?;
        let year = get("year");
        if year != &date[..4] {
            return Err(fault(format!(
                "year {year:?} is not the year of date {date}"
            )));
        }
        let kind = get("type");
        if kind.is_empty() {
            return Err(fault("type is empty".into()));
        }
        let title = get("title");
        if title.is_empty() {
            return Err(fault("title is empty".into()));
        }
        if get("agency_names").is_empty() {
            return Err(fault("agency_names is empty".into()));
        }
        let filing = get("filing_type");
        if !matches!(filing, "regular" | "special") {
            return Err(fault(format!(
                "filing_type {filing:?} is neither \"regular\" nor \"special\""
            )));
        }
        let indicator = get("indicator");
        if !matches!(indicator, "0" | "1") {
            return Err(fault(format!("indicator {indicator:?} is neither 0 nor 1")));
        }
        let url = get("json_url");
        if url.strip_prefix(API_DOCUMENT_URL) != Some(number) {
            return Err(fault(format!(
                "json_url {url:?} is not the API address of document {number}"
            )));
        }
        let payload: Map<String, Value> = CSV_COLUMNS
            .iter()
            .filter(|c| !CSV_MAPPED.contains(c))
            .map(|c| ((*c).to_owned(), Value::String(get(c).to_owned())))
            .collect();
        let mut row = base_row(
            ctx,
            number.to_owned(),
            number.to_owned(),
            Some(kind.to_owned()),
            title.to_owned(),
            url.to_owned(),
            &Value::Object(payload),
        );
        // The list gives the inspection day only (no filing time): day resolution.
        row.published_at = Some(day.end_of_day());
        days.insert(day);
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(Error::parse(
            name,
            "file",
            "the list holds no documents (a header without rows is a failed download)",
        ));
    }
    Ok((rows, days))
}

/// A search response (`{"count":..,"results":[..]}`) or one document (`{"document_number":..}`).
fn parse_json(file: &InputFile, text: &str, ctx: &Context) -> Result<Vec<NewsRow>> {
    let name = file.name.as_str();
    let v = crate::adapter::json(name, text.as_bytes())?;
    let Some(obj) = v.as_object() else {
        return Err(Error::parse(
            name,
            "top level",
            "expected a JSON object (a search response or one public-inspection document)",
        ));
    };
    if let Some(results) = obj.get("results") {
        let results = results
            .as_array()
            .ok_or_else(|| Error::parse(name, "results", "expected an array"))?;
        if let Some(count) = obj.get("count").and_then(Value::as_u64)
            && (results.len() as u64) > count
        {
            return Err(Error::parse(
                name,
                "count",
                format!("{count} documents announced, {} listed", results.len()),
            ));
        }
        results
            .iter()
            .enumerate()
            .map(|(i, d)| document(name, &format!("results[{i}]"), d, ctx))
            .collect()
    } else if obj.contains_key("document_number") {
        Ok(vec![document(name, "top level", &v, ctx)?])
    } else {
        Err(Error::parse(
            name,
            "top level",
            "neither a search response (no \"results\") nor a public-inspection document (no \"document_number\")",
        ))
    }
}

/// One API document. `published_at` is `filed_at` (the instant it went on public inspection),
/// else the last public-inspection day at day resolution: the document was public by then, so
/// that bound is late, never early.
fn document(file: &str, at: &str, v: &Value, ctx: &Context) -> Result<NewsRow> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::parse(file, at, "expected a JSON object"))?;
    let number = match obj.get("document_number") {
        Some(Value::String(s)) if is_document_number(s) => s.clone(),
        other => {
            return Err(Error::parse(
                file,
                at,
                format!(
                    "document_number {} is not a Federal Register document number",
                    other.map_or_else(|| "missing".to_owned(), Value::to_string)
                ),
            ));
        }
    };
    let at = format!("record {number}");
    let text = |k: &str| -> Result<Option<&str>> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(Error::parse(
                file,
                &at,
                format!("{k}: expected a string, found {other}"),
            )),
        }
    };
    let required = |k: &str| -> Result<String> {
        text(k)?
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| Error::parse(file, &at, format!("{k} is missing or empty")))
    };
    let day = |k: &str| -> Result<Option<Day>> {
        text(k)?
            .map(|s| {
                s.parse::<Day>().map_err(|()| {
                    Error::parse(file, &at, format!("{k}: {s:?} is not a YYYY-MM-DD date"))
                })
            })
            .transpose()
    };
    let kind = required("type")?;
    let title = required("title")?;
    let filed_at = text("filed_at")?
        .map(|s| {
            Instant::parse_rfc3339_any(s).ok_or_else(|| {
                Error::parse(
                    file,
                    &at,
                    format!("filed_at: {s:?} is not an ISO 8601 instant with an offset"),
                )
            })
        })
        .transpose()?;
    let publication = day("publication_date")?;
    let last_issue = day("last_public_inspection_issue")?;
    let locator = match text("html_url")?.filter(|s| !s.is_empty()) {
        Some(u) => u.to_owned(),
        None => text("json_url")?
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| Error::parse(file, &at, "neither html_url nor json_url is given"))?,
    };
    let payload: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| !JSON_DROPPED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut row = base_row(
        ctx,
        number.clone(),
        number,
        Some(kind),
        title,
        locator,
        &Value::Object(payload),
    );
    row.published_at = filed_at.or(last_issue.map(Day::end_of_day));
    // Scheduled FR publication; null for a document withdrawn while on inspection.
    row.event_at = publication.map(Day::end_of_day);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use asof_engine::model::clock::{Lane, SourceId};

    const DIR: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/us.federal_register.pi/"
    );
    const LIST: &str = "gwu_midnight_rules_2017_2021/public_inspection_midnight_documents_all.csv";

    fn ctx() -> Context {
        Context {
            source: SourceId::FederalRegisterPi,
            lane: Lane::CertifiedPit,
            captured_at: None,
        }
    }

    fn real(path: &str) -> InputFile {
        InputFile {
            name: path.to_owned(),
            bytes: std::fs::read(format!("{DIR}{path}")).unwrap(),
        }
    }

    fn t(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    fn err(files: &[InputFile]) -> String {
        parse(files, &ctx()).unwrap_err().to_string()
    }

    fn row<'a>(p: &'a Parsed, id: &str) -> &'a NewsRow {
        p.rows.iter().find(|r| r.id == id).unwrap()
    }

    /// The real list with line `n` (1-based) replaced by `f(line)`.
    fn list_with_line(n: usize, f: impl Fn(&str) -> String) -> InputFile {
        let text = String::from_utf8(real(LIST).bytes).unwrap();
        let lines: Vec<String> = text
            .split_inclusive('\n')
            .enumerate()
            .map(|(i, l)| if i + 1 == n { f(l) } else { l.to_owned() })
            .collect();
        InputFile {
            name: "edited.csv".into(),
            bytes: lines.concat().into_bytes(),
        }
    }

    #[test]
    fn the_list_gives_its_2245_documents_once_each_on_19_whole_days() {
        let p = parse(&[real(LIST)], &ctx()).unwrap();
        assert_eq!(p.rows.len(), 2245);
        assert_eq!(p.whole_days.len(), 19);
        assert_eq!(p.whole_days[0].to_string(), "2017-01-17");
        assert_eq!(p.whole_days[18].to_string(), "2021-01-29");
        let on = |d: &str| {
            let end = d.parse::<Day>().unwrap().end_of_day();
            p.rows
                .iter()
                .filter(|r| r.published_at == Some(end))
                .count()
        };
        assert_eq!(on("2017-01-18"), 241);
        assert_eq!(on("2021-01-26"), 100);
        let withdrawn = p
            .rows
            .iter()
            .filter(|r| {
                r.payload
                    .as_deref()
                    .unwrap()
                    .contains("\"indicator\":\"1\"")
            })
            .count();
        assert_eq!(withdrawn, 60);
        assert!(p.rows.iter().all(|r| r.event_at.is_none()));
        assert!(p.snapshot.is_none() && !p.published_is_capture);
    }

    #[test]
    fn list_rows_carry_the_inspection_day_at_day_resolution_and_no_other_clock() {
        let p = parse(&[real(LIST)], &ctx()).unwrap();
        let r = row(&p, "2017-01009");
        assert_eq!(r.source_id, SourceId::FederalRegisterPi);
        assert_eq!(r.lane, Lane::CertifiedPit);
        assert_eq!(r.entity_id.as_deref(), Some("2017-01009"));
        assert_eq!(r.form.as_deref(), Some("Notice"));
        assert_eq!(
            r.title,
            "Agency Information Collection Activities; Proposals, Submissions, and Approvals: Interstate Movement of Fruit from Hawaii"
        );
        assert_eq!(r.published_at, Some(t("2017-01-17T23:59:59Z")));
        assert_eq!(r.event_at, None);
        assert_eq!(r.available_at, None);
        assert_eq!(r.acceptance_at, None);
        assert_eq!(r.committed_at, None);
        assert_eq!(
            r.availability_basis,
            asof_engine::AvailabilityBasis::Unknown
        );
        assert_eq!((r.cik.as_deref(), r.accession.as_deref()), (None, None));
        assert_eq!(
            r.source_locator,
            "https://www.federalregister.gov/api/v1/public_inspection_documents/2017-01009"
        );
        assert_eq!(
            r.payload.as_deref(),
            Some(
                "{\"agencies_acronym_uq\":\"USDA\",\"agencies_id_uq\":\"12\",\"agencies_slug_uq\":\"agriculture-department\",\"agency_names\":\"Animal and Plant Health Inspection Service\",\"agency_slugs\":\"animal-and-plant-health-inspection-service\",\"date\":\"2017-01-17\",\"editorial_note\":\"\",\"filing_type\":\"regular\",\"indicator\":\"0\",\"year\":\"2017\"}"
            )
        );
    }

    #[test]
    fn a_document_withdrawn_on_inspection_stays_a_row_with_its_note_and_indicator() {
        let p = parse(&[real(LIST)], &ctx()).unwrap();
        let r = row(&p, "2017-00854");
        assert_eq!(r.form.as_deref(), Some("Rule"));
        assert_eq!(
            r.title,
            "Horse Protection: Licensing of Designated Qualified Persons and Other Amendments"
        );
        assert_eq!(r.published_at, Some(t("2017-01-19T23:59:59Z")));
        assert_eq!(r.event_at, None);
        let payload: Value = serde_json::from_str(r.payload.as_deref().unwrap()).unwrap();
        assert_eq!(payload["indicator"], "1");
        assert_eq!(payload["filing_type"], "special");
        assert!(
            payload["editorial_note"]
                .as_str()
                .unwrap()
                .starts_with("APHIS requested the withdrawal of this document")
        );
    }

    #[test]
    fn a_document_of_several_agencies_or_a_correction_is_one_row() {
        let p = parse(&[real(LIST)], &ctx()).unwrap();
        let r = row(&p, "2017-00480");
        assert_eq!(r.form.as_deref(), Some("Proposed Rule"));
        assert_eq!(
            r.title,
            "Federal Acquisition Regulations: Sustainable Acquisition"
        );
        assert_eq!(r.published_at, Some(t("2017-01-17T23:59:59Z")));
        let payload: Value = serde_json::from_str(r.payload.as_deref().unwrap()).unwrap();
        assert_eq!(payload["agencies_acronym_uq"], "GSA; NASA; DOD");
        assert_eq!(payload["agencies_id_uq"], "210; 301; 103");
        let c = row(&p, "C1-2020-29006");
        assert_eq!(c.published_at, Some(t("2021-01-26T23:59:59Z")));
        assert_eq!(c.form.as_deref(), Some("Proposed Rule"));
    }

    #[test]
    fn the_analysis_tables_beside_the_list_are_refused_naming_the_expected_columns() {
        for f in [
            "documents_withdrawn_archived_checked.csv",
            "nprm_data.csv",
            "rules_withdrawn_priority.csv",
        ] {
            let e = err(&[real(&format!("gwu_midnight_rules_2017_2021/{f}"))]);
            assert!(e.contains(f) && e.contains("line 1"), "{e}");
            assert!(
                e.contains("not a public-inspection document list")
                    && e.contains(&CSV_COLUMNS.join(",")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_list_cut_mid_record_is_refused_at_the_line_of_the_cut_record() {
        let bytes = real(LIST).bytes;
        let start = bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(546)
            .unwrap()
            .0
            + 1;
        let cut = InputFile {
            name: "cut.csv".into(),
            bytes: bytes[..start + 120].to_vec(),
        };
        let e = err(&[cut]);
        assert!(e.starts_with("cut.csv: line 548:"), "{e}");
        assert!(e.contains("fields"), "{e}");
    }

    #[test]
    fn a_list_row_with_an_impossible_date_is_refused_with_its_line() {
        let f = list_with_line(2, |l| l.replacen("2017,2017-01-17,", "2017,2017-02-30,", 1));
        let e = err(&[f]);
        assert!(e.starts_with("edited.csv: line 2: date:"), "{e}");
    }

    #[test]
    fn a_list_row_missing_a_field_is_refused_with_its_line() {
        let f = list_with_line(3, |l| l.replacen(",regular,", ",", 1));
        let e = err(&[f]);
        assert!(
            e.starts_with("edited.csv: line 3:") && e.contains("13 fields"),
            "{e}"
        );
    }

    #[test]
    fn list_rows_breaking_a_field_rule_are_refused_naming_the_field() {
        let cases: [(&str, &str, &str); 4] = [
            (",0\n", ",2\n", "indicator"),
            (",regular,", ",urgent,", "filing_type"),
            ("2017,2017-01-17,", "2016,2017-01-17,", "year"),
            ("documents/2017-01010,", "documents/2017-99999,", "json_url"),
        ];
        for (from, to, field) in cases {
            let f = list_with_line(3, |l| l.replacen(from, to, 1));
            let e = err(&[f]);
            assert!(
                e.starts_with(&format!("edited.csv: line 3: {field}")),
                "{e}"
            );
        }
    }

    #[test]
    fn an_empty_file_or_a_header_alone_is_refused() {
        let empty = InputFile {
            name: "empty.csv".into(),
            bytes: b"\n".to_vec(),
        };
        assert!(err(&[empty]).starts_with("empty.csv: file: the file is empty"));
        let header = InputFile {
            name: "header.csv".into(),
            bytes: format!("{}\n", CSV_COLUMNS.join(",")).into_bytes(),
        };
        let e = err(&[header]);
        assert!(
            e.starts_with("header.csv: file:") && e.contains("no documents"),
            "{e}"
        );
    }

    #[test]
    fn a_list_in_latin1_is_refused_with_the_line_of_the_bad_byte() {
        let mut f = real(LIST);
        let line5 = f
            .bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(3)
            .unwrap()
            .0
            + 1;
        // An accented letter written as Latin-1 (0xE9, "é") is not UTF-8.
        f.bytes[line5 + 20] = 0xE9;
        let e = err(&[f]);
        assert!(
            e.starts_with(&format!("{LIST}: line 5, byte")) && e.contains("not UTF-8"),
            "{e}"
        );
    }

    #[test]
    fn a_single_document_response_is_published_at_filed_at_in_utc() {
        let p = parse(&[real("api_json/inspection-detail.json")], &ctx()).unwrap();
        assert_eq!(p.rows.len(), 1);
        assert!(p.whole_days.is_empty());
        let r = &p.rows[0];
        assert_eq!(r.id, "2026-19958");
        assert_eq!(r.entity_id.as_deref(), Some("2026-19958"));
        assert_eq!(r.form.as_deref(), Some("Notice"));
        assert_eq!(r.title, "Meetings; Sunshine Act");
        // 2026-09-28T11:15:00.000-04:00
        assert_eq!(r.published_at, Some(t("2026-09-28T15:15:00Z")));
        assert_eq!(r.event_at, Some(t("2026-09-30T23:59:59Z")));
        assert_eq!(r.available_at, None);
        assert_eq!(r.acceptance_at, None);
        assert_eq!(r.committed_at, None);
        assert_eq!(
            r.availability_basis,
            asof_engine::AvailabilityBasis::Unknown
        );
        assert_eq!(
            r.source_locator,
            "https://www.federalregister.gov/public-inspection/2026-19958/meetings-sunshine-act"
        );
        let payload: Value = serde_json::from_str(r.payload.as_deref().unwrap()).unwrap();
        assert_eq!(payload["filed_at"], "2026-09-28T11:15:00.000-04:00");
        assert_eq!(payload["last_public_inspection_issue"], "2026-09-29");
        assert_eq!(payload["agencies"][0]["name"], "Railroad Retirement Board");
        assert!(payload.get("page_views").is_none() && payload.get("title").is_none());
    }

    #[test]
    fn a_search_response_gives_one_row_per_result_and_certifies_no_day() {
        let p = parse(&[real("api_json/inspection-search.json")], &ctx()).unwrap();
        assert_eq!(p.rows.len(), 2);
        assert!(p.whole_days.is_empty());
        let r = row(&p, "2026-19930");
        assert_eq!(r.published_at, Some(t("2026-09-29T12:45:00Z")));
        assert_eq!(r.event_at, Some(t("2026-09-30T23:59:59Z")));
        assert_eq!(
            r.title,
            "Antidumping or Countervailing Duty Investigations, Orders, or Reviews: Light-Walled Rectangular Pipe and Tube from Mexico"
        );
        assert_eq!(
            r.source_locator,
            "https://www.federalregister.gov/public-inspection/2026-19930/antidumping-or-countervailing-duty-investigations-orders-or-reviews-light-walled-rectangular-pipe"
        );
        let payload: Value = serde_json::from_str(r.payload.as_deref().unwrap()).unwrap();
        assert_eq!(payload["agency_names"], Value::Null);
        assert!(payload.get("excerpts").is_none());
        assert_eq!(row(&p, "2026-19936").form.as_deref(), Some("Notice"));
    }

    #[test]
    fn a_document_without_filed_at_is_published_at_its_last_inspection_day() {
        let p = parse(&[real("api_json/gwu_2017-00854.json")], &ctx()).unwrap();
        let r = &p.rows[0];
        assert_eq!(r.id, "2017-00854");
        assert_eq!(r.form.as_deref(), Some("Rule"));
        assert_eq!(r.published_at, Some(t("2017-01-24T23:59:59Z")));
        assert_eq!(r.event_at, None, "withdrawn: no publication date");
    }

    #[test]
    fn a_document_seen_twice_keeps_its_earliest_sighting_in_either_file_order() {
        let list = real(LIST);
        let json = real("api_json/gwu_2017-00854.json");
        for files in [[list.clone(), json.clone()], [json, list]] {
            let p = parse(&files, &ctx()).unwrap();
            assert_eq!(p.rows.len(), 2245);
            let r = row(&p, "2017-00854");
            assert_eq!(r.published_at, Some(t("2017-01-19T23:59:59Z")));
            assert!(
                r.payload
                    .as_deref()
                    .unwrap()
                    .contains("\"indicator\":\"1\"")
            );
        }
    }

    #[test]
    fn a_truncated_json_response_is_refused_with_its_position() {
        let bytes = real("api_json/inspection-search.json").bytes;
        let cut = InputFile {
            name: "cut.json".into(),
            bytes: bytes[..2000].to_vec(),
        };
        let e = err(&[cut]);
        assert!(
            e.starts_with("cut.json: line 1 column 2000: not valid JSON"),
            "{e}"
        );
    }

    #[test]
    fn json_records_breaking_a_field_rule_are_refused_naming_the_record() {
        let text = String::from_utf8(real("api_json/inspection-search.json").bytes).unwrap();
        let edit = |from: &str, to: &str| InputFile {
            name: "edited.json".into(),
            bytes: text.replacen(from, to, 1).into_bytes(),
        };
        let e = err(&[edit("\"2026-09-29T12:45:00Z\"", "\"2026-09-29 08:45\"")]);
        assert!(
            e.starts_with("edited.json: record 2026-19930: filed_at"),
            "{e}"
        );
        let e = err(&[edit(
            "\"publication_date\":\"2026-09-30\"",
            "\"publication_date\":\"09/30/2026\"",
        )]);
        assert!(
            e.starts_with("edited.json: record 2026-19930: publication_date"),
            "{e}"
        );
        let e = err(&[edit(
            "\"document_number\":\"2026-19930\"",
            "\"document_number\":null",
        )]);
        assert!(
            e.starts_with("edited.json: results[0]: document_number null"),
            "{e}"
        );
        let e = err(&[edit("\"type\":\"Notice\"}]", "\"type\":\"\"}]")]);
        assert!(
            e.starts_with("edited.json: record 2026-19936: type is missing"),
            "{e}"
        );
    }

    #[test]
    fn json_that_is_neither_a_search_nor_a_document_is_refused() {
        let f = InputFile {
            name: "errors.json".into(),
            bytes: br#"{"errors":{"conditions":"unknown"}}"#.to_vec(),
        };
        let e = err(&[f]);
        assert!(
            e.starts_with("errors.json: top level: neither a search response"),
            "{e}"
        );
    }

    #[test]
    fn a_json_response_in_latin1_is_refused() {
        let mut f = real("api_json/inspection-detail.json");
        let at = f.bytes.windows(7).position(|w| w == b"Sunshin").unwrap();
        f.bytes[at] = 0xD3;
        let e = err(&[f]);
        assert!(
            e.contains("inspection-detail.json: line 1, byte") && e.contains("not UTF-8"),
            "{e}"
        );
    }
}
