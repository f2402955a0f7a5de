//! `us.fda.enforcement.{drug,device,food}` adapter: FDA Enforcement Report CSV exports, openFDA
//! enforcement records flattened to CSV, and openFDA enforcement JSON (API responses, download
//! files and the documentation's example files).
//!
//! Every format becomes the same row: id = `recall_number`, `published_at` = `report_date` (the
//! weekly Enforcement Report that published the recall), `event_at` = `recall_initiation_date`,
//! both at day resolution, and a payload of the record's fields under their openFDA names, so
//! one recall read from two formats compares equal where the facts agree.

use std::collections::BTreeMap;

use asof_engine::model::clock::{Day, SourceId};
use asof_engine::model::record::NewsRow;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::adapter::{Context, InputFile, Parsed, base_row, non_empty, parse_date, utf8};
use crate::error::{Error, Result};

/// Characters of the product description kept in a title.
const TITLE_DESCRIPTION_CHARS: usize = 120;

/// Fields that hold dates; the payload gives them as `YYYY-MM-DD` whatever the format wrote.
const DATE_FIELDS: [&str; 5] = [
    "recall_initiation_date",
    "center_classification_date",
    "termination_date",
    "report_date",
    "last_modified_date",
];

/// Enforcement Report export headers and their openFDA names. Headers without an openFDA twin
/// ("Recently Updated Record", "Last Modified Date") get snake_case names of their own.
const REPORT_HEADERS: [(&str, &str); 26] = [
    ("Product Type", "product_type"),
    ("Recently Updated Record", "recently_updated_record"),
    ("Last Modified Date", "last_modified_date"),
    ("Event ID", "event_id"),
    ("Status", "status"),
    ("Recalling Firm", "recalling_firm"),
    ("Address1", "address_1"),
    ("Address2", "address_2"),
    ("City", "city"),
    ("State/Province", "state"),
    ("Postal Code", "postal_code"),
    ("Country", "country"),
    ("Voluntary/Mandated", "voluntary_mandated"),
    (
        "Initial Firm Notification of Consignee or Public",
        "initial_firm_notification",
    ),
    ("Distribution Pattern", "distribution_pattern"),
    ("Recall Number", "recall_number"),
    ("Classification", "classification"),
    ("Product Description", "product_description"),
    ("Product Quantity", "product_quantity"),
    ("Reason for Recall", "reason_for_recall"),
    ("Recall Initiation Date", "recall_initiation_date"),
    ("Center Classification Date", "center_classification_date"),
    ("Termination Date", "termination_date"),
    ("Report Date", "report_date"),
    ("Code Info", "code_info"),
    ("More Code Info", "more_code_info"),
];

/// Columns every CSV layout must have (openFDA names).
const REQUIRED_COLUMNS: [&str; 8] = [
    "product_type",
    "event_id",
    "recall_number",
    "recalling_firm",
    "product_description",
    "classification",
    "recall_initiation_date",
    "report_date",
];

/// What the three sources differ by.
#[derive(Debug, Clone, Copy)]
struct Center {
    source: SourceId,
    /// `product_type` of the source's records, as openFDA and the exports write it.
    product_type: &'static str,
    /// Path segment of the openFDA endpoint.
    endpoint: &'static str,
}

fn center(source: SourceId) -> Option<Center> {
    let (product_type, endpoint) = match source {
        SourceId::FdaDrug => ("Drugs", "drug"),
        SourceId::FdaDevice => ("Devices", "device"),
        SourceId::FdaFood => ("Food", "food"),
        _ => return None,
    };
    Some(Center {
        source,
        product_type,
        endpoint,
    })
}

/// Parses one ingest's files of an FDA enforcement source (`ctx.source` says which). Each file
/// is detected by content: JSON (`{"meta":..,"results":[..]}`, or a documentation example with
/// one record under `"result"`), an Enforcement Report CSV export ("Product Type" header), or
/// openFDA records flattened to CSV (`product_type` header). Returns event rows only: no
/// snapshot, no whole days (an export is a query result, not a whole day of FDA).
pub fn parse(files: &[InputFile], ctx: &Context) -> Result<Parsed> {
    let center = center(ctx.source).ok_or_else(|| {
        Error::parse(
            files.first().map_or("-", |f| f.name.as_str()),
            "file",
            format!(
                "source {} is not an FDA enforcement source (us.fda.enforcement.drug, .device or .food)",
                ctx.source
            ),
        )
    })?;
    let mut rows: Vec<NewsRow> = Vec::new();
    // id → (index in `rows`, "file: location") of its first occurrence.
    let mut seen: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for file in files {
        for (location, fields) in records(file)? {
            let row = row_of(&file.name, &location, fields, center, ctx)?;
            match seen.get(&row.id) {
                Some((i, _)) if rows[*i] == row => {}
                Some((_, first)) => {
                    return Err(Error::parse(
                        &file.name,
                        location,
                        format!(
                            "recall {} appears again with different content (first at {first})",
                            row.id
                        ),
                    ));
                }
                None => {
                    seen.insert(
                        row.id.clone(),
                        (rows.len(), format!("{}: {location}", file.name)),
                    );
                    rows.push(row);
                }
            }
        }
    }
    Ok(Parsed {
        rows,
        published_is_capture: false,
        snapshot: None,
        whole_days: vec![],
        ..Default::default()
    })
}

/// The records of one file, each with its location ("line N", "results[i]") and its fields
/// under openFDA names (not yet cleaned).
fn records(file: &InputFile) -> Result<Vec<(String, Map<String, Value>)>> {
    non_empty(file)?;
    let text = utf8(file)?;
    match text.trim_start().as_bytes().first() {
        Some(b'{' | b'[') => json_records(file, text),
        _ => csv_records(file, text),
    }
}

fn json_records(file: &InputFile, text: &str) -> Result<Vec<(String, Map<String, Value>)>> {
    let name = &file.name;
    let v = crate::adapter::json(name, text.as_bytes())?;
    let (prefix, list): (&str, Vec<Value>) = match v {
        Value::Array(a) => ("", a),
        Value::Object(mut o) => {
            if let Some(results) = o.remove("results") {
                match results {
                    Value::Array(a) => ("results", a),
                    _ => {
                        return Err(Error::parse(
                            name,
                            "results",
                            "expected an array of records",
                        ));
                    }
                }
            } else if let Some(result) = o.remove("result") {
                // The documentation examples hold one real record under "result"; their
                // "anatomy" and "count" parts describe the API, not recalls.
                return match result {
                    Value::Object(r) => Ok(vec![("result".to_owned(), r)]),
                    _ => Err(Error::parse(name, "result", "expected a record object")),
                };
            } else {
                return Err(Error::parse(
                    name,
                    "top level",
                    "neither \"results\" (API response, download file) nor \"result\" (documentation example)",
                ));
            }
        }
        _ => return Err(Error::parse(name, "top level", "expected a JSON object")),
    };
    list.into_iter()
        .enumerate()
        .map(|(i, r)| {
            let at = format!("{prefix}[{i}]");
            match r {
                Value::Object(o) => Ok((at, o)),
                _ => Err(Error::parse(name, at, "expected a record object")),
            }
        })
        .collect()
}

fn csv_records(file: &InputFile, text: &str) -> Result<Vec<(String, Map<String, Value>)>> {
    let name = &file.name;
    let csv_err = |e: csv::Error| {
        let at = e
            .position()
            .map_or_else(|| "file".to_owned(), |p| format!("line {}", p.line()));
        Error::parse(name, at, format!("not valid CSV: {e}"))
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(text.as_bytes());
    let header = rdr.headers().map_err(csv_err)?.clone();
    let raw: Vec<&str> = header.iter().map(str::trim).collect();
    // The export writes "N/A" for a blank; openFDA leaves the field empty.
    let report = raw.contains(&"Product Type");
    let names: Vec<String> = if report {
        raw.iter()
            .map(|h| {
                REPORT_HEADERS
                    .iter()
                    .find(|(r, _)| r == h)
                    .map_or_else(|| snake_case(h), |(_, o)| (*o).to_owned())
            })
            .collect()
    } else if raw.contains(&"product_type") {
        raw.iter().map(|h| (*h).to_owned()).collect()
    } else {
        return Err(Error::parse(
            name,
            "line 1",
            "neither an Enforcement Report export (\"Product Type\" column) nor openFDA records (\"product_type\" column)",
        ));
    };
    for col in REQUIRED_COLUMNS {
        if !names.iter().any(|n| n == col) {
            let shown = if report {
                REPORT_HEADERS
                    .iter()
                    .find(|(_, o)| *o == col)
                    .map_or(col, |(r, _)| *r)
            } else {
                col
            };
            return Err(Error::parse(
                name,
                "line 1",
                format!("missing column {shown:?}"),
            ));
        }
    }
    for (i, n) in names.iter().enumerate() {
        if n != "more_code_info" && names[..i].contains(n) {
            return Err(Error::parse(
                name,
                "line 1",
                format!("column {:?} appears twice", raw[i]),
            ));
        }
    }
    // The export splits code lists longer than a spreadsheet cell into trailing
    // "More Code Info" columns that most rows leave out altogether.
    let optional_tail = names
        .iter()
        .rev()
        .take_while(|n| *n == "more_code_info")
        .count();
    let min_fields = names.len() - optional_tail;

    let mut out = Vec::new();
    let mut last_line = 1;
    // csv's positions count a CRLF record's line from its `\n`, one line early; the physical
    // line of a record's first byte is counted here instead, incrementally.
    let bytes = text.as_bytes();
    let (mut counted_to, mut lines_before) = (0usize, 0usize);
    for rec in rdr.records() {
        let rec = rec.map_err(csv_err)?;
        let mut start = rec
            .position()
            .map_or(0, |p| usize::try_from(p.byte()).unwrap_or(usize::MAX))
            .min(bytes.len());
        while start < bytes.len() && matches!(bytes[start], b'\r' | b'\n') {
            start += 1;
        }
        lines_before += bytes[counted_to..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        counted_to = start;
        let line = lines_before + 1;
        last_line = line;
        let at = format!("line {line}");
        if rec.len() < min_fields || rec.len() > names.len() {
            return Err(Error::parse(
                name,
                at,
                format!(
                    "{} fields, the header has {}{}",
                    rec.len(),
                    names.len(),
                    if optional_tail > 0 {
                        format!(" ({min_fields} without the trailing \"More Code Info\")")
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        let mut fields = Map::new();
        for (n, v) in names.iter().zip(rec.iter()) {
            let v = v.trim();
            let v = if report && v.eq_ignore_ascii_case("n/a") {
                ""
            } else {
                v
            };
            if n == "more_code_info" {
                // Pieces of one cut value: joined without separator they give it back whole.
                if let Some(Value::String(s)) = fields.get_mut(n) {
                    s.push_str(v);
                    continue;
                }
            }
            fields.insert(n.clone(), Value::String(v.to_owned()));
        }
        out.push((at, fields));
    }
    // Every export and openFDA file ends its last record with a line end; a file that does not
    // was cut short, and its last field may be silently incomplete.
    if !text.ends_with('\n') {
        return Err(Error::parse(
            name,
            format!("line {last_line}"),
            "the file ends inside a record (truncated download?)",
        ));
    }
    Ok(out)
}

/// "State/Province" → "state_province".
fn snake_case(h: &str) -> String {
    let mut s = String::new();
    for c in h.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('_') {
            s.push('_');
        }
    }
    s.trim_matches('_').to_owned()
}

/// Drops empty values (blank strings, empty objects and arrays, nulls) and trims strings, so a
/// field the source leaves out, leaves blank or writes "N/A" compares equal across formats.
fn clean(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::String(s) => {
            let t = s.trim();
            (!t.is_empty()).then(|| Value::String(t.to_owned()))
        }
        Value::Object(o) => {
            let m: Map<String, Value> = o
                .into_iter()
                .filter_map(|(k, v)| clean(v).map(|v| (k, v)))
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        Value::Array(a) => {
            let a: Vec<Value> = a.into_iter().filter_map(clean).collect();
            (!a.is_empty()).then_some(Value::Array(a))
        }
        other => Some(other),
    }
}

/// A date as FDA writes it: `YYYY-MM-DD`, `YYYYMMDD`, `MM/DD/YYYY`, or `M/D/YYYY` (the newer
/// Enforcement Report exports drop leading zeros).
fn fda_date(s: &str) -> Option<Day> {
    if let Some(d) = parse_date(s) {
        return Some(d);
    }
    let mut parts = s.trim().split('/');
    let (m, d, y) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |p: &str, n: std::ops::RangeInclusive<usize>| {
        n.contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit())
    };
    if parts.next().is_some() || !digits(m, 1..=2) || !digits(d, 1..=2) || !digits(y, 4..=4) {
        return None;
    }
    format!("{y}-{m:0>2}-{d:0>2}").parse().ok()
}

/// One record's fields to a row; `at` is its location in `file`.
fn row_of(
    file: &str,
    at: &str,
    fields: Map<String, Value>,
    center: Center,
    ctx: &Context,
) -> Result<NewsRow> {
    let err = |msg: String| Error::parse(file, at, msg);
    let Some(Value::Object(mut fields)) = clean(Value::Object(fields)) else {
        return Err(err("the record has no fields".into()));
    };
    let mut days: BTreeMap<&str, Day> = BTreeMap::new();
    for k in DATE_FIELDS {
        if let Some(v) = fields.get(k) {
            let s = v
                .as_str()
                .ok_or_else(|| err(format!("{k}: expected a date string, got {v}")))?;
            let d = fda_date(s).ok_or_else(|| {
                err(format!(
                    "{k}: {s:?} is not a date (YYYY-MM-DD, YYYYMMDD or M/D/YYYY)"
                ))
            })?;
            fields.insert(k.to_owned(), Value::String(d.to_string()));
            days.insert(k, d);
        }
    }
    let text = |k: &str| -> Result<Option<String>> {
        match fields.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(v) => Err(err(format!("{k}: expected text, got {v}"))),
        }
    };
    let required = |k: &str| -> Result<String> {
        text(k)?.ok_or_else(|| err(format!("{k} is missing or empty")))
    };

    let product_type = required("product_type")?;
    if !product_type.eq_ignore_ascii_case(center.product_type) {
        return Err(err(format!(
            "product_type {product_type:?} does not belong to source {} (its records are {:?})",
            center.source, center.product_type
        )));
    }
    let firm = required("recalling_firm")?;
    let description = required("product_description")?;
    let Some(report_date) = days.get("report_date").copied() else {
        // Every Enforcement Report record is published in a weekly report; none of the real
        // rows lacks the date, so a record without one is malformed, not "never published".
        return Err(err("report_date is missing or empty".into()));
    };
    let event_at = days.get("recall_initiation_date").map(|d| d.end_of_day());

    let (id, locator) = match text("recall_number")? {
        Some(n) => {
            let locator = format!(
                "https://api.fda.gov/{}/enforcement.json?search=recall_number:\"{n}\"",
                center.endpoint
            );
            // FDA has given one recall number to two recalls (D-1442-2016: Pharmakon, event
            // 73960, and GlaxoSmithKline, event 74742, in the 2016 export), so the number alone
            // is not a key; with its event it is, and stays the same in every later export.
            let id = match text("event_id")? {
                Some(event) => format!("{n}:{event}"),
                None => n.clone(),
            };
            (id, locator)
        }
        None => {
            // The documentation examples carry no recall number; the event groups a firm's
            // recalls and the description tells its products apart.
            let event = text("event_id")?.ok_or_else(|| {
                err("neither recall_number nor event_id: the record has no identifier".into())
            })?;
            let digest = hex::encode(Sha256::digest(description.as_bytes()));
            let locator = format!(
                "https://api.fda.gov/{}/enforcement.json?search=event_id:{event}",
                center.endpoint
            );
            (format!("event-{event}-{}", &digest[..12]), locator)
        }
    };
    let form = text("classification")?;
    let title = format!("{}: {}", collapse(&firm), shorten(&collapse(&description)));
    let payload = Value::Object(fields);
    let entity = match payload.get("recall_number").and_then(Value::as_str) {
        Some(n) => n.to_owned(),
        None => id.clone(),
    };
    let mut row = base_row(ctx, id, entity, form, title, locator, &payload);
    row.published_at = Some(report_date.end_of_day());
    row.event_at = event_at;
    Ok(row)
}

/// Runs of whitespace (descriptions hold line breaks and padded spaces) as one space.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn shorten(s: &str) -> String {
    match s.char_indices().nth(TITLE_DESCRIPTION_CHARS) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}…", s[..cut].trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use asof_engine::model::clock::{Instant, Lane};

    use super::*;

    const DRUG: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/us.fda.enforcement.drug/"
    );
    const DEVICE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/us.fda.enforcement.device/"
    );
    const FOOD: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/us.fda.enforcement.food/"
    );
    const CLASS_1: &str =
        "fda_enforcement_report_csv/Class_1_Drug_recalls_Jan_2024_to_12_July_2026.csv";
    const JAN_2016: &str = "fda_enforcement_report_csv/Jan_2016_to_Oct_2016.csv";
    const JUN_2023: &str = "fda_enforcement_report_csv/Jun_2023_to_Sep_2024.csv";
    const OPENFDA_DRUG: &str = "openfda_api_NY_subset/drug-recalls.csv";
    const OPENFDA_DEVICE: &str = "openfda_api_NY_subset/medical-device-recalls.csv";
    const EXAMPLE: &str = "openfda_doc_example/_examples.json";
    const EXAMPLE_OLDER: &str = "openfda_doc_example/_examples_older.json";

    fn real(dir: &str, path: &str) -> InputFile {
        InputFile {
            name: path.to_owned(),
            bytes: std::fs::read(format!("{dir}{path}")).unwrap(),
        }
    }

    fn ctx(source: SourceId) -> Context {
        Context {
            source,
            lane: Lane::CertifiedPit,
            captured_at: None,
        }
    }

    fn drug(files: &[InputFile]) -> Result<Parsed> {
        parse(files, &ctx(SourceId::FdaDrug))
    }

    fn at(s: &str) -> Option<Instant> {
        Some(Instant::parse(s).unwrap())
    }

    fn row<'a>(p: &'a Parsed, id: &str) -> &'a NewsRow {
        p.rows
            .iter()
            .find(|r| r.entity_id.as_deref() == Some(id))
            .unwrap()
    }

    fn payload(r: &NewsRow) -> Map<String, Value> {
        serde_json::from_str(r.payload.as_deref().unwrap()).unwrap()
    }

    fn err_of(r: Result<Parsed>) -> String {
        r.unwrap_err().to_string()
    }

    fn edited(f: InputFile, from: &str, to: &str) -> InputFile {
        let text = String::from_utf8(f.bytes).unwrap();
        assert!(text.contains(from), "{from:?} not in {}", f.name);
        InputFile {
            name: f.name,
            bytes: text.replacen(from, to, 1).into_bytes(),
        }
    }

    #[test]
    fn every_real_file_gives_its_exact_row_count() {
        for (dir, path, source, n) in [
            (DRUG, CLASS_1, SourceId::FdaDrug, 171),
            (DRUG, JUN_2023, SourceId::FdaDrug, 933),
            (DRUG, OPENFDA_DRUG, SourceId::FdaDrug, 254),
            (DEVICE, OPENFDA_DEVICE, SourceId::FdaDevice, 34),
            (DRUG, EXAMPLE, SourceId::FdaDrug, 1),
            (DEVICE, EXAMPLE, SourceId::FdaDevice, 1),
            (FOOD, EXAMPLE, SourceId::FdaFood, 1),
        ] {
            let p = parse(&[real(dir, path)], &ctx(source)).unwrap();
            assert_eq!(p.rows.len(), n, "{path}");
            assert!(p.snapshot.is_none() && p.whole_days.is_empty() && !p.published_is_capture);
            assert!(p.rows.iter().all(|r| r.published_at.is_some()
                && r.available_at.is_none()
                && r.acceptance_at.is_none()
                && r.committed_at.is_none()
                && r.availability_basis == asof_engine::AvailabilityBasis::Unknown
                && r.source_id == source));
        }
        // 989 records, two of them numbered D-1442-2016 (see the next test).
        assert_eq!(drug(&[real(DRUG, JAN_2016)]).unwrap().rows.len(), 989);
    }

    #[test]
    fn a_recall_number_given_to_two_recalls_gives_two_records() {
        // Lines 574 (Pharmakon, event 73960) and 878 (GlaxoSmithKline, event 74742) of the
        // real 2016 export both carry D-1442-2016.
        let p = drug(&[real(DRUG, JAN_2016)]).unwrap();
        let mut twins: Vec<(&str, &str)> = p
            .rows
            .iter()
            .filter(|r| r.entity_id.as_deref() == Some("D-1442-2016"))
            .map(|r| (r.id.as_str(), r.title.split(':').next().unwrap()))
            .collect();
        twins.sort();
        assert_eq!(twins.len(), 2);
        assert_eq!(twins[0].0, "D-1442-2016:73960");
        assert_eq!(twins[1].0, "D-1442-2016:74742");
        assert!(twins[1].1.contains("Glaxo"), "{twins:?}");
    }

    #[test]
    fn report_export_rows_carry_report_date_and_initiation_date_at_day_resolution() {
        let p = drug(&[real(DRUG, JUN_2023)]).unwrap();
        let r = row(&p, "D-0087-2024");
        assert_eq!(r.entity_id.as_deref(), Some("D-0087-2024"));
        assert_eq!(r.form.as_deref(), Some("Class II"));
        assert_eq!(
            r.title,
            "PAR Sterile Products LLC: Buprenorphine HCl, Injection, 0.3mg/mL, For Intramuscular or \
             Intravenous Use, Rx Only, 1mL Single Dose Vial, (supplied i…"
        );
        assert_eq!(
            r.source_locator,
            "https://api.fda.gov/drug/enforcement.json?search=recall_number:\"D-0087-2024\""
        );
        assert_eq!(r.published_at, at("2023-11-15T23:59:59Z"));
        assert_eq!(r.event_at, at("2021-11-09T23:59:59Z"));
        assert_eq!(
            (r.available_at, r.acceptance_at, r.committed_at),
            (None, None, None)
        );
        assert_eq!(r.lane, Lane::CertifiedPit);
        let f = payload(r);
        let s = |k: &str| f.get(k).and_then(Value::as_str);
        assert_eq!(s("recall_number"), Some("D-0087-2024"));
        assert_eq!(s("event_id"), Some("89016"));
        assert_eq!(s("status"), Some("Terminated"));
        assert_eq!(s("recently_updated_record"), Some("No"));
        assert_eq!(s("last_modified_date"), Some("2026-06-18"));
        assert_eq!(s("report_date"), Some("2023-11-15"));
        assert_eq!(s("recall_initiation_date"), Some("2021-11-09"));
        assert_eq!(s("center_classification_date"), Some("2023-11-04"));
        assert_eq!(s("termination_date"), Some("2024-09-29"));
        assert_eq!(s("address_1"), Some("870 Parkdale Rd"));
        assert_eq!(s("state"), Some("MI"));
        // The export's leading tab is gone; its "N/A" blanks are left out like openFDA's.
        assert_eq!(s("postal_code"), Some("48307-1740"));
        assert_eq!(s("address_2"), None);
        assert_eq!(s("product_quantity"), None);
        assert_eq!(f.len(), 23, "{f:?}");
    }

    #[test]
    fn dates_without_leading_zeros_in_the_class_1_export_are_read() {
        let p = drug(&[real(DRUG, CLASS_1)]).unwrap();
        let r = &p.rows[0];
        assert_eq!(
            r.id,
            format!("D-0238-2024:{}", payload(r)["event_id"].as_str().unwrap())
        );
        assert_eq!(r.form.as_deref(), Some("Class I"));
        assert_eq!(r.published_at, at("2024-01-24T23:59:59Z"));
        assert_eq!(r.event_at, at("2021-11-23T23:59:59Z"));
        let f = payload(r);
        assert_eq!(f["center_classification_date"], "2024-01-17");
        assert_eq!(f["termination_date"], "2024-10-01");
        assert_eq!(f["product_quantity"], "unknown");
        assert_eq!(f["postal_code"], "45202-3315");
        assert!(!f.contains_key("last_modified_date"));
    }

    #[test]
    fn code_lists_cut_into_more_code_info_columns_are_joined() {
        let p = drug(&[real(DRUG, JAN_2016)]).unwrap();
        let f = payload(row(&p, "D-1462-2016"));
        assert_eq!(f["code_info"].as_str().unwrap().chars().count(), 32_600);
        let more = f["more_code_info"].as_str().unwrap();
        assert_eq!(more.chars().count(), 32_600 + 32_600 + 13_799);
        assert!(
            more.starts_with("2242016:16  02232016:37"),
            "{}",
            &more[..40]
        );
        let f = payload(row(&p, "D-1396-2016"));
        assert!(
            f["more_code_info"]
                .as_str()
                .unwrap()
                .starts_with("870 , Lot Number 160950031C")
        );
        assert!(!payload(row(&p, "D-1466-2016")).contains_key("more_code_info"));
    }

    #[test]
    fn openfda_csv_rows_carry_report_date_and_initiation_date_at_day_resolution() {
        let p = drug(&[real(DRUG, OPENFDA_DRUG)]).unwrap();
        let r = &p.rows[0];
        assert_eq!(
            r.id,
            format!("D-1253-2020:{}", payload(r)["event_id"].as_str().unwrap())
        );
        assert_eq!(r.entity_id.as_deref(), Some("D-1253-2020"));
        assert_eq!(r.form.as_deref(), Some("Class II"));
        assert_eq!(
            r.title,
            "Amneal Pharmaceuticals of New York, LLC: Nizatidine Oral Solution, 15 mg/mL (75 mg/5mL) \
             USP 480 mL bottles, Rx Only Distributed by: Gemini Laboratories, LLC Brid…"
        );
        assert_eq!(r.published_at, at("2020-05-06T23:59:59Z"));
        assert_eq!(r.event_at, at("2020-04-15T23:59:59Z"));
        let f = payload(r);
        assert_eq!(f["termination_date"], "2021-09-08");
        assert_eq!(f["center_classification_date"], "2020-04-24");
        assert_eq!(f["postal_code"], "11719-9509");
        assert_eq!(f["event_id"], "85386");
        assert!(!f.contains_key("address_2") && !f.contains_key("more_code_info"));
        // A blank termination date stays blank: the recall was not terminated then.
        let f = payload(row(&p, "D-0394-2020"));
        assert!(!f.contains_key("termination_date"));
        assert_eq!(f["status"], "Ongoing");
    }

    #[test]
    fn device_rows_point_at_the_device_endpoint() {
        let p = parse(&[real(DEVICE, OPENFDA_DEVICE)], &ctx(SourceId::FdaDevice)).unwrap();
        let r = &p.rows[0];
        assert_eq!(
            r.id,
            format!("Z-2038-2014:{}", payload(r)["event_id"].as_str().unwrap())
        );
        assert_eq!(r.source_id, SourceId::FdaDevice);
        assert_eq!(r.form.as_deref(), Some("Class II"));
        assert!(r.title.starts_with("Pall Corporation: PALL Medical Breathing Circuit Filter, REF BB50T and BB50T-BULK , Rx ONLY"));
        assert_eq!(
            r.source_locator,
            "https://api.fda.gov/device/enforcement.json?search=recall_number:\"Z-2038-2014\""
        );
        assert_eq!(r.published_at, at("2014-07-16T23:59:59Z"));
        assert_eq!(r.event_at, at("2014-06-04T23:59:59Z"));
        assert_eq!(payload(r)["termination_date"], "2015-04-01");
    }

    #[test]
    fn one_recall_from_the_export_and_from_openfda_compares_equal_where_the_facts_agree() {
        let export = drug(&[real(DRUG, JAN_2016)]).unwrap();
        let openfda = drug(&[real(DRUG, OPENFDA_DRUG)]).unwrap();
        for id in ["D-0856-2016", "D-1465-2016"] {
            let (a, b) = (row(&export, id), row(&openfda, id));
            assert_eq!(
                (&a.title, &a.form, a.published_at, a.event_at),
                (&b.title, &b.form, b.published_at, b.event_at)
            );
            assert_eq!(a.source_locator, b.source_locator);
            let mut fa = payload(a);
            // The export's own field, which openFDA does not give.
            assert_eq!(
                fa.remove("recently_updated_record"),
                Some(Value::from("No"))
            );
            assert_eq!(fa, payload(b), "{id}");
        }
    }

    #[test]
    fn documentation_examples_without_recall_number_are_identified_by_event_and_description() {
        for (dir, source, id, endpoint, published, event) in [
            (
                FOOD,
                SourceId::FdaFood,
                "event-62644-f12d249aa234",
                "food",
                "2012-09-05",
                "2012-07-20",
            ),
            (
                DRUG,
                SourceId::FdaDrug,
                "event-64372-bce21e24a23a",
                "drug",
                "2013-06-12",
                "2013-02-19",
            ),
            (
                DEVICE,
                SourceId::FdaDevice,
                "event-62561-c8162a97b092",
                "device",
                "2012-08-15",
                "2012-07-16",
            ),
        ] {
            let p = parse(&[real(dir, EXAMPLE)], &ctx(source)).unwrap();
            let r = &p.rows[0];
            assert_eq!(r.id, id);
            assert_eq!(r.entity_id.as_deref(), Some(id));
            let event_id = &id[6..11];
            assert_eq!(
                r.source_locator,
                format!(
                    "https://api.fda.gov/{endpoint}/enforcement.json?search=event_id:{event_id}"
                )
            );
            assert_eq!(r.published_at, at(&format!("{published}T23:59:59Z")));
            assert_eq!(r.event_at, at(&format!("{event}T23:59:59Z")));
            let f = payload(r);
            assert_eq!(f["report_date"], published);
            assert!(!f.contains_key("openfda") && !f.contains_key("recall_number"));
        }
        let p = parse(&[real(FOOD, EXAMPLE)], &ctx(SourceId::FdaFood)).unwrap();
        let r = &p.rows[0];
        assert_eq!(r.form.as_deref(), Some("Class II"));
        assert_eq!(
            r.title,
            "Cass Clay Creamery AMPI Fargo Division: Cass-Clay , Swiss Chip, 3 Gallon(11.34 L)."
        );
        assert_eq!(
            payload(r)["code_info"],
            "all products that has a plant code of \"38-25\"."
        );
    }

    #[test]
    fn openfda_api_responses_are_read_from_results() {
        let body =
            br#"{"meta":{"last_updated":"2024-10-01","results":{"skip":0,"limit":2,"total":2}},
          "results":[{"recall_number":"F-0001-2024","event_id":"1","product_type":"Food",
            "recalling_firm":"A","product_description":"B","classification":"Class I",
            "report_date":"20240103","recall_initiation_date":"","openfda":{}}]}"#;
        let f = InputFile {
            name: "api.json".into(),
            bytes: body.to_vec(),
        };
        let p = parse(std::slice::from_ref(&f), &ctx(SourceId::FdaFood)).unwrap();
        assert_eq!(p.rows.len(), 1);
        assert_eq!(p.rows[0].published_at, at("2024-01-03T23:59:59Z"));
        // Nothing imputed: no initiation date, no event clock.
        assert_eq!(p.rows[0].event_at, None);
        let bad = edited(f, "\"20240103\"", "\"2024013\"");
        let err = err_of(parse(&[bad], &ctx(SourceId::FdaFood)));
        assert!(
            err.starts_with("api.json: results[0]: report_date"),
            "{err}"
        );
    }

    #[test]
    fn empty_older_example_files_are_refused_as_empty() {
        for (dir, source) in [(DRUG, SourceId::FdaDrug), (FOOD, SourceId::FdaFood)] {
            let err = err_of(parse(&[real(dir, EXAMPLE_OLDER)], &ctx(source)));
            assert_eq!(err, format!("{EXAMPLE_OLDER}: file: the file is empty"));
        }
    }

    #[test]
    fn rows_of_another_center_are_refused_naming_the_record() {
        let err = err_of(parse(
            &[real(DRUG, OPENFDA_DRUG)],
            &ctx(SourceId::FdaDevice),
        ));
        assert!(
            err.starts_with(&format!("{OPENFDA_DRUG}: line 2: product_type \"Drugs\"")),
            "{err}"
        );
        let err = err_of(parse(&[real(DRUG, JUN_2023)], &ctx(SourceId::FdaFood)));
        assert!(
            err.starts_with(&format!("{JUN_2023}: line 2: ")) && err.contains("\"Food\""),
            "{err}"
        );
        let err = err_of(drug(&[real(FOOD, EXAMPLE)]));
        assert!(
            err.starts_with(&format!("{EXAMPLE}: result: product_type \"Food\"")),
            "{err}"
        );
        let err = err_of(parse(&[real(DRUG, EXAMPLE)], &ctx(SourceId::OfacSdn)));
        assert!(err.contains("not an FDA enforcement source"), "{err}");
    }

    #[test]
    fn a_truncated_csv_is_refused_naming_the_line() {
        let mut f = real(DRUG, JUN_2023);
        // Cut inside line 5's product description: the record comes up short of fields.
        let text = String::from_utf8(f.bytes.clone()).unwrap();
        let line5 = text
            .split_inclusive('\n')
            .take(4)
            .map(str::len)
            .sum::<usize>();
        f.bytes.truncate(line5 + 300);
        let err = err_of(drug(&[f]));
        assert!(
            err.starts_with(&format!("{JUN_2023}: line 5: ")) && err.contains("fields"),
            "{err}"
        );
        // Cut inside the last field of a record: the fields are all there, the line end is not.
        let mut f = real(DRUG, OPENFDA_DRUG);
        let len = f.bytes.len();
        f.bytes.truncate(len - 3);
        let err = err_of(drug(&[f]));
        assert!(
            err.starts_with(&format!("{OPENFDA_DRUG}: line 255: ")) && err.contains("truncated"),
            "{err}"
        );
    }

    #[test]
    fn a_truncated_json_file_is_refused_naming_the_line() {
        let mut f = real(FOOD, EXAMPLE);
        f.bytes.truncate(1200);
        let err = err_of(parse(&[f], &ctx(SourceId::FdaFood)));
        assert!(
            err.starts_with(&format!("{EXAMPLE}: line ")) && err.contains("not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_date_is_refused_naming_file_line_and_field() {
        let f = edited(real(DRUG, JUN_2023), "\"11/15/2023\"", "\"11/31/2023\"");
        let err = err_of(drug(&[f]));
        assert_eq!(
            err,
            format!(
                "{JUN_2023}: line 2: report_date: \"11/31/2023\" is not a date (YYYY-MM-DD, YYYYMMDD or M/D/YYYY)"
            )
        );
        let f = edited(real(DRUG, OPENFDA_DRUG), ",20200415,", ",2020-0415,");
        let err = err_of(drug(&[f]));
        assert!(
            err.starts_with(&format!("{OPENFDA_DRUG}: line 2: recall_initiation_date")),
            "{err}"
        );
    }

    #[test]
    fn a_row_missing_a_field_or_a_value_is_refused_naming_the_line() {
        let f = edited(
            real(DRUG, JUN_2023),
            "\"Terminated\",\"PAR Sterile",
            "\"PAR Sterile",
        );
        let err = err_of(drug(&[f]));
        assert_eq!(
            err,
            format!("{JUN_2023}: line 2: 24 fields, the header has 25")
        );
        let f = edited(
            real(DRUG, JUN_2023),
            "\"PAR Sterile Products LLC\"",
            "\"N/A\"",
        );
        let err = err_of(drug(&[f]));
        assert_eq!(
            err,
            format!("{JUN_2023}: line 2: recalling_firm is missing or empty")
        );
        let f = edited(real(DRUG, OPENFDA_DRUG), ",20200506,", ",,");
        let err = err_of(drug(&[f]));
        assert_eq!(
            err,
            format!("{OPENFDA_DRUG}: line 2: report_date is missing or empty")
        );
        let f = edited(real(DRUG, OPENFDA_DRUG), "recall_number,", "recall_no,");
        let err = err_of(drug(&[f]));
        assert_eq!(
            err,
            format!("{OPENFDA_DRUG}: line 1: missing column \"recall_number\"")
        );
    }

    #[test]
    fn a_file_in_another_encoding_is_refused_naming_the_line() {
        // Line 116 of the Class I export holds the export's own "¿" (UTF-8 C2 BF); as Latin-1
        // it is the single byte BF.
        let mut f = real(DRUG, CLASS_1);
        let at = f.bytes.windows(2).position(|w| w == b"\xC2\xBF").unwrap();
        f.bytes.remove(at);
        let err = err_of(drug(&[f]));
        assert!(
            err.starts_with(&format!("{CLASS_1}: line 116, byte ")) && err.contains("not UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn identical_duplicates_collapse_and_changed_ones_are_refused_naming_both() {
        let p = drug(&[real(DRUG, CLASS_1), real(DRUG, CLASS_1)]).unwrap();
        assert_eq!(p.rows.len(), 171);
        let mut later = edited(
            real(DRUG, CLASS_1),
            ",Terminated,The Procter",
            ",Ongoing,The Procter",
        );
        later.name = "later.csv".into();
        let err = err_of(drug(&[real(DRUG, CLASS_1), later]));
        assert_eq!(
            err,
            format!(
                "later.csv: line 2: recall D-0238-2024:89106 appears again with different content (first at {CLASS_1}: line 2)"
            )
        );
    }

    #[test]
    fn a_csv_of_another_layout_is_refused() {
        let f = InputFile {
            name: "x.csv".into(),
            bytes: b"a,b\n1,2\n".to_vec(),
        };
        let err = err_of(drug(&[f]));
        assert!(err.starts_with("x.csv: line 1: neither"), "{err}");
    }

    #[test]
    fn unpadded_and_padded_dates_agree() {
        let d: Day = "2024-01-07".parse().unwrap();
        assert_eq!(fda_date("1/7/2024"), Some(d));
        assert_eq!(fda_date("01/07/2024"), Some(d));
        assert_eq!(fda_date("20240107"), Some(d));
        assert_eq!(fda_date("2/30/2024"), None);
        assert_eq!(fda_date("1/7/24"), None);
        assert_eq!(fda_date("1/7/2024/1"), None);
    }
}
