//! `gleif.lei` adapter: GLEIF API responses for LEI records (a partial list snapshot at the
//! golden copy's publish instant) and for field-modification histories (dated event rows).

use std::collections::BTreeMap;
use std::collections::btree_map::Entry as MapEntry;

use asof_engine::model::clock::Instant;
use serde_json::{Map, Value};

use crate::adapter::{self, Context, Entry, InputFile, Parsed, Snapshot};
use crate::error::{Error, Result};

/// Base URL of GLEIF's LEI record endpoint; record and history locators hang off it.
pub const API_BASE: &str = "https://api.gleif.org/api/v1/lei-records";

/// `data[].type` of an LEI record response (`/lei-records/<LEI>`, `/lei-records?filter...`).
pub const TYPE_LEI_RECORDS: &str = "lei-records";
/// `data[].type` of a field-modification history page (`/lei-records/<LEI>/field-modifications`).
pub const TYPE_FIELD_MODIFICATIONS: &str = "field-modifications";

/// `form` of every field-modification row.
pub const FORM_FIELD_MODIFICATION: &str = "field_modification";

/// Values longer than this stay out of the title (they remain in the payload): a title is
/// read in lists, and GLEIF values run up to URLs of a hundred characters and more.
const SHORT_VALUE: usize = 40;

/// Parses one ingest's GLEIF API responses. Each file is recognised by its `data` type:
///
/// - `lei-records` files give a [`Snapshot`] (`full: false`: a response speaks only for the
///   LEIs it contains) captured at `meta.goldenCopy.publishDate`, one [`Entry`] per LEI;
/// - `field-modifications` pages give one row per modification.
///
/// Files of any other endpoint (relationships, ISINs, ...) are refused. All snapshot files of
/// one ingest must come from the same golden copy, and an LEI given twice must have the same
/// content (identical duplicates collapse). No day is certified: neither kind of response is
/// a whole list or a whole history.
pub fn parse(files: &[InputFile], ctx: &Context) -> Result<Parsed> {
    let mut snap = SnapshotBuilder::default();
    let mut rows = RowsBuilder::default();
    for file in files {
        let doc = read_json(file)?;
        let data = doc
            .get("data")
            .ok_or_else(|| Error::parse(&file.name, "top level", "no \"data\" member"))?;
        let records = records_of(&file.name, data)?;
        match kind_of(&file.name, &records)? {
            Kind::LeiRecords => snap.add_file(file, &doc, &records)?,
            Kind::FieldModifications => rows.add_file(file, &doc, &records, ctx)?,
        }
    }
    Ok(Parsed {
        rows: rows.rows,
        published_is_capture: false,
        snapshot: snap.finish(),
        whole_days: Vec::new(),
        ..Default::default()
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    LeiRecords,
    FieldModifications,
}

/// Where a record sits in the response: `data` for a single-record response, `data[i]` for a
/// list (the JSON:API shapes GLEIF uses); error locations use it.
struct Record<'a> {
    at: String,
    value: &'a Value,
}

fn read_json(file: &InputFile) -> Result<Map<String, Value>> {
    adapter::non_empty(file)?;
    let text = adapter::utf8(file)?;
    let v = adapter::json(&file.name, text.as_bytes())?;
    let Value::Object(obj) = v else {
        return Err(Error::parse(
            &file.name,
            "top level",
            "expected a JSON object",
        ));
    };
    // The API answers faults (unknown LEI, bad filter) with a JSON:API `errors` document:
    // a captured fault is a failed download, not an empty list.
    if let Some(errors) = obj.get("errors") {
        let detail = errors
            .get(0)
            .and_then(|e| e.get("title").or_else(|| e.get("detail")))
            .and_then(Value::as_str)
            .unwrap_or("no detail");
        return Err(Error::parse(
            &file.name,
            "errors",
            format!("the file is a GLEIF API error response ({detail})"),
        ));
    }
    Ok(obj)
}

fn records_of<'a>(file: &str, data: &'a Value) -> Result<Vec<Record<'a>>> {
    match data {
        Value::Object(_) => Ok(vec![Record {
            at: "data".into(),
            value: data,
        }]),
        Value::Array(items) if items.is_empty() => Err(Error::parse(
            file,
            "data",
            "the response holds no records, so neither its endpoint nor its entities can be told",
        )),
        Value::Array(items) => Ok(items
            .iter()
            .enumerate()
            .map(|(i, value)| Record {
                at: format!("data[{i}]"),
                value,
            })
            .collect()),
        _ => Err(Error::parse(file, "data", "expected an object or an array")),
    }
}

fn kind_of(file: &str, records: &[Record<'_>]) -> Result<Kind> {
    let mut kind = None;
    for r in records {
        let ty = r
            .value
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::parse(file, &r.at, "type: missing or not a string"))?;
        let k = match ty {
            TYPE_LEI_RECORDS => Kind::LeiRecords,
            TYPE_FIELD_MODIFICATIONS => Kind::FieldModifications,
            other => {
                return Err(Error::parse(
                    file,
                    format!("{}.type", r.at),
                    format!(
                        "{other:?} is not an accepted GLEIF response: accepted types are \
                         {TYPE_LEI_RECORDS:?} (LEI records) and {TYPE_FIELD_MODIFICATIONS:?} \
                         (field-modification history)"
                    ),
                ));
            }
        };
        match kind {
            None => kind = Some(k),
            Some(prev) if prev != k => {
                return Err(Error::parse(
                    file,
                    format!("{}.type", r.at),
                    format!("{ty:?} mixed with records of another type in one response"),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(kind.expect("records_of never returns an empty list"))
}

/// A string member of `obj` at `path` (dot-separated), or an error naming the path.
fn str_at<'a>(file: &str, at: &str, obj: &'a Value, path: &str) -> Result<&'a str> {
    let mut v = obj;
    for key in path.split('.') {
        v = v
            .get(key)
            .ok_or_else(|| Error::parse(file, at, format!("{path}: missing")))?;
    }
    v.as_str()
        .ok_or_else(|| Error::parse(file, at, format!("{path}: not a string ({v})")))
}

/// An LEI per ISO 17442: 18 upper-case alphanumerics and two check digits, ISO 7064 MOD 97-10
/// over the whole code. Checked because the LEI becomes the record's and the entity's id: a
/// mangled one would open a phantom entity.
pub fn is_lei(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 20
        || !b
            .iter()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        || !b[18..].iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    let mut rem: u32 = 0;
    for &c in b {
        let v = if c.is_ascii_digit() {
            u32::from(c - b'0')
        } else {
            u32::from(c - b'A') + 10
        };
        rem = if v < 10 {
            (rem * 10 + v) % 97
        } else {
            (rem * 100 + v) % 97
        };
    }
    rem == 1
}

fn lei_at<'a>(file: &str, at: &str, obj: &'a Value, path: &str) -> Result<&'a str> {
    let lei = str_at(file, at, obj, path)?;
    if !is_lei(lei) {
        return Err(Error::parse(
            file,
            at,
            format!("{path}: {lei:?} is not an LEI (20 characters, ISO 17442 check digits)"),
        ));
    }
    Ok(lei)
}

/// `meta.goldenCopy.publishDate`: the golden copy (00:00, 08:00 or 16:00 UTC) whose state the
/// response shows.
fn publish_date(file: &str, doc: &Map<String, Value>) -> Result<Instant> {
    const PATH: &str = "meta.goldenCopy.publishDate";
    let s = doc
        .get("meta")
        .and_then(|m| m.get("goldenCopy"))
        .and_then(|g| g.get("publishDate"))
        .ok_or_else(|| Error::parse(file, PATH, "missing"))?
        .as_str()
        .ok_or_else(|| Error::parse(file, PATH, "not a string"))?;
    Instant::parse(s)
        .map_err(|f| Error::parse(file, PATH, format!("{s:?} is not a UTC instant: {f}")))
}

#[derive(Default)]
struct SnapshotBuilder {
    /// The publish instant of the first snapshot file, and that file's name.
    captured: Option<(Instant, String)>,
    /// Entries with the file that first gave them.
    entries: BTreeMap<String, (Entry, String)>,
}

impl SnapshotBuilder {
    fn add_file(
        &mut self,
        file: &InputFile,
        doc: &Map<String, Value>,
        records: &[Record<'_>],
    ) -> Result<()> {
        let name = &file.name;
        let at = publish_date(name, doc)?;
        match &self.captured {
            None => self.captured = Some((at, name.clone())),
            Some((first, first_file)) if *first != at => {
                return Err(Error::parse(
                    name,
                    "meta.goldenCopy.publishDate",
                    format!(
                        "{at} differs from {first} of {first_file}: one ingest is one snapshot \
                         instant, so files of different golden copies go in separate ingests"
                    ),
                ));
            }
            Some(_) => {}
        }
        for r in records {
            let lei = lei_at(name, &r.at, r.value, "id")?;
            let attr_lei = lei_at(name, &r.at, r.value, "attributes.lei")?;
            if attr_lei != lei {
                return Err(Error::parse(
                    name,
                    &r.at,
                    format!("id {lei} and attributes.lei {attr_lei} differ"),
                ));
            }
            let legal_name = str_at(name, &r.at, r.value, "attributes.entity.legalName.name")?;
            if legal_name.trim().is_empty() {
                return Err(Error::parse(
                    name,
                    &r.at,
                    "attributes.entity.legalName.name: empty",
                ));
            }
            let locator = match r.value.get("links").and_then(|l| l.get("self")) {
                None | Some(Value::Null) => format!("{API_BASE}/{lei}"),
                Some(_) => str_at(name, &r.at, r.value, "links.self")?.to_owned(),
            };
            let entry = Entry {
                name: legal_name.trim().to_owned(),
                locator,
                fields: r.value["attributes"].clone(),
            };
            match self.entries.entry(lei.to_owned()) {
                MapEntry::Vacant(v) => {
                    v.insert((entry, name.clone()));
                }
                // The locator is how we reached the record, not its content; the fields decide.
                MapEntry::Occupied(o) if o.get().0.fields == entry.fields => {}
                MapEntry::Occupied(o) => {
                    return Err(Error::parse(
                        name,
                        &r.at,
                        format!(
                            "LEI {lei} is also in {} with different content in the same \
                             golden copy",
                            o.get().1
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> Option<Snapshot> {
        let (captured_at, _) = self.captured?;
        Some(Snapshot {
            captured_at,
            full: false,
            entries: self
                .entries
                .into_iter()
                .map(|(lei, (entry, _))| (lei, entry))
                .collect(),
        })
    }
}

#[derive(Default)]
struct RowsBuilder {
    rows: Vec<asof_engine::model::record::NewsRow>,
    /// Row id → (index in `rows`, file that gave it), to collapse pages that overlap.
    seen: BTreeMap<String, (usize, String)>,
}

impl RowsBuilder {
    fn add_file(
        &mut self,
        file: &InputFile,
        doc: &Map<String, Value>,
        records: &[Record<'_>],
        ctx: &Context,
    ) -> Result<()> {
        let name = &file.name;
        // A page of `/lei-records/<LEI>/field-modifications` names its LEI in its links; a
        // modification of another LEI on it means the file is not what it claims to be.
        let page_lei = doc
            .get("links")
            .and_then(|l| l.get("first"))
            .and_then(Value::as_str)
            .and_then(|u| u.strip_prefix(API_BASE))
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.split('/').next())
            .filter(|lei| is_lei(lei));
        for r in records {
            let row = modification_row(name, r, ctx)?;
            let lei = row.entity_id.as_deref().unwrap_or_default();
            if let Some(page_lei) = page_lei
                && page_lei != lei
            {
                return Err(Error::parse(
                    name,
                    &r.at,
                    format!("attributes.lei {lei} on the field-modification page of {page_lei}"),
                ));
            }
            match self.seen.entry(row.id.clone()) {
                MapEntry::Vacant(v) => {
                    v.insert((self.rows.len(), name.clone()));
                    self.rows.push(row);
                }
                MapEntry::Occupied(o) if self.rows[o.get().0] == row => {}
                MapEntry::Occupied(o) => {
                    return Err(Error::parse(
                        name,
                        &r.at,
                        format!(
                            "modification {} is also in {} with different content",
                            row.id,
                            o.get().1
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The field's last path segment without its namespace prefix
/// (`/lei:LEIData/.../lei:Entity/lei:LegalName` → `LegalName`); an attribute keeps its
/// element (`.../lei:LegalAddress/@xml:lang` → `LegalAddress@lang`), since `@lang` alone says
/// nothing.
fn field_label(field: &str) -> String {
    let unprefixed = |seg: &str| seg.rsplit(':').next().unwrap_or(seg).to_owned();
    let mut segs = field.rsplit('/').filter(|s| !s.is_empty());
    let last = segs.next().unwrap_or(field);
    match last.strip_prefix('@') {
        Some(attr) => {
            let element = segs.next().map(unprefixed).unwrap_or_default();
            format!("{element}@{}", unprefixed(attr))
        }
        None => unprefixed(last),
    }
}

fn modification_row(
    file: &str,
    r: &Record<'_>,
    ctx: &Context,
) -> Result<asof_engine::model::record::NewsRow> {
    let mod_id = str_at(file, &r.at, r.value, "id")?;
    if mod_id.trim().is_empty() {
        return Err(Error::parse(file, &r.at, "id: empty"));
    }
    let attrs = r
        .value
        .get("attributes")
        .filter(|a| a.is_object())
        .ok_or_else(|| Error::parse(file, &r.at, "attributes: missing or not an object"))?;
    let lei = lei_at(file, &r.at, r.value, "attributes.lei")?;
    let record_type = str_at(file, &r.at, r.value, "attributes.recordType")?;
    let mod_type = str_at(file, &r.at, r.value, "attributes.modificationType")?;
    let field = str_at(file, &r.at, r.value, "attributes.field")?;
    let date = str_at(file, &r.at, r.value, "attributes.date")?;
    let value = |key: &str| -> Result<Option<&str>> {
        match attrs.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(Error::parse(
                file,
                &r.at,
                format!("attributes.{key}: not a string or null ({other})"),
            )),
        }
    };
    let (old, new) = (value("valueOld")?, value("valueNew")?);

    // GLEIF stamps a modification with the golden copy (00:00, 08:00 or 16:00 UTC) that first
    // carried it. Day resolution of that UTC date never shows the change before the golden copy
    // was out, whatever the delay between its stamp and its files; the exact stamp stays in
    // the payload's `date`.
    let stamped = Instant::parse(date).map_err(|f| {
        Error::parse(
            file,
            &r.at,
            format!("attributes.date: {date:?} is not a UTC instant: {f}"),
        )
    })?;
    let day_resolution = stamped.day().end_of_day();

    let mut title = format!("{lei}: ");
    // Relationship (RR) and reporting-exception (REPEX) records share field names with the
    // LEI record (`LastUpdateDate`), so their kind is said.
    if record_type != "LEI" {
        title.push_str(record_type);
        title.push(' ');
    }
    title.push_str(&field_label(field));
    title.push(' ');
    title.push_str(mod_type);
    let short = |v: Option<&str>| v.is_none_or(|s| s.chars().count() <= SHORT_VALUE);
    if (old.is_some() || new.is_some()) && short(old) && short(new) {
        title.push_str(&format!(
            " ({}→{})",
            old.map(|s| format!("{s} ")).unwrap_or_default(),
            new.map(|s| format!(" {s}")).unwrap_or_default()
        ));
    }

    let locator = match r.value.get("links").and_then(|l| l.get("self")) {
        None | Some(Value::Null) => format!("{API_BASE}/{lei}/field-modifications"),
        Some(_) => str_at(file, &r.at, r.value, "links.self")?.to_owned(),
    };
    let mut row = adapter::base_row(
        ctx,
        format!("{lei}:fm:{mod_id}"),
        lei.to_owned(),
        Some(FORM_FIELD_MODIFICATION.to_owned()),
        title,
        locator,
        attrs,
    );
    row.published_at = Some(day_resolution);
    row.event_at = Some(day_resolution);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use asof_engine::model::clock::{Lane, SourceId};

    const RS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/gleif.lei/api_json_gleif-rs_2025-05"
    );
    const PY: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/gleif.lei/api_v1_pygleif"
    );

    const LEIS: [&str; 12] = [
        "21380068P1DRHMJ8KU70",
        "254900LNRYNOQ9YPU758",
        "254900MSZM6DMP853B11",
        "335800CCCPHKUOXPC332",
        "5299001ERX0K10IZUL40",
        "529900GRZ2BQY5ZM9N49",
        "5493001KJTIIGC8Y1R12",
        "549300O897ZC5H7CY412",
        "549300YX4S1LLSMK2627",
        "851WYGNLUQLFZBSYGB56",
        "984500983AD71E4FBC41",
        "INR2EJN1ERAN0W5ZP974",
    ];

    fn ctx() -> Context {
        Context {
            source: SourceId::GleifLei,
            lane: Lane::CertifiedPit,
            captured_at: None,
        }
    }

    fn t(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    fn real(path: &str) -> InputFile {
        InputFile {
            name: path.rsplit('/').next().unwrap().to_owned(),
            bytes: std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}")),
        }
    }

    fn single(lei: &str) -> InputFile {
        real(&format!("{RS}/lei_records/single_lei_record_{lei}.json"))
    }

    fn multi() -> InputFile {
        real(&format!("{RS}/lei_records/multi_lei_records.json"))
    }

    fn history(lei: &str) -> InputFile {
        real(&format!(
            "{RS}/field_modifications/field_modifications_{lei}.json"
        ))
    }

    fn edited(f: &InputFile, from: &str, to: &str) -> InputFile {
        let text = String::from_utf8(f.bytes.clone()).unwrap();
        assert!(text.contains(from), "{from} not in {}", f.name);
        InputFile {
            name: f.name.clone(),
            bytes: text.replacen(from, to, 1).into_bytes(),
        }
    }

    fn err(files: &[InputFile]) -> String {
        parse(files, &ctx()).unwrap_err().to_string()
    }

    #[test]
    fn every_real_lei_record_file_is_a_partial_snapshot_at_its_publish_date() {
        for lei in LEIS {
            let p = parse(&[single(lei)], &ctx()).unwrap();
            let s = p.snapshot.unwrap();
            assert_eq!(s.captured_at, t("2025-05-15T00:00:00Z"));
            assert!(!s.full);
            assert_eq!(s.entries.keys().collect::<Vec<_>>(), [lei]);
            assert!(p.rows.is_empty() && p.whole_days.is_empty() && !p.published_is_capture);
        }
        let s = parse(&[multi()], &ctx()).unwrap().snapshot.unwrap();
        assert_eq!(s.captured_at, t("2025-05-15T00:00:00Z"));
        assert_eq!(
            s.entries.keys().map(String::as_str).collect::<Vec<_>>(),
            LEIS
        );
        for f in [
            "549300LBI3LRIZ2V8V66_lapsed.json",
            "9845001B2AD43E664E58_issued.json",
        ] {
            let s = parse(&[real(&format!("{PY}/{f}"))], &ctx())
                .unwrap()
                .snapshot
                .unwrap();
            assert_eq!(s.captured_at, t("2024-07-06T08:00:00Z"), "{f}");
            assert_eq!(s.entries.len(), 1, "{f}");
            assert!(s.entries.contains_key(&f[..20]), "{f}");
        }
    }

    #[test]
    fn single_and_list_responses_of_one_golden_copy_collapse_to_one_entry_per_lei() {
        let mut files: Vec<InputFile> = LEIS.iter().map(|l| single(l)).collect();
        files.push(multi());
        let s = parse(&files, &ctx()).unwrap().snapshot.unwrap();
        assert_eq!(s.entries.len(), 12);
        assert_eq!(
            s.entries["21380068P1DRHMJ8KU70"],
            parse(&[single("21380068P1DRHMJ8KU70")], &ctx())
                .unwrap()
                .snapshot
                .unwrap()
                .entries["21380068P1DRHMJ8KU70"]
        );
    }

    #[test]
    fn an_entry_carries_the_legal_name_the_self_link_and_the_whole_attributes() {
        let s = parse(&[multi()], &ctx()).unwrap().snapshot.unwrap();
        let shell = &s.entries["21380068P1DRHMJ8KU70"];
        assert_eq!(shell.name, "SHELL PLC");
        assert_eq!(
            shell.locator,
            "https://api.gleif.org/api/v1/lei-records/21380068P1DRHMJ8KU70"
        );
        let f = &shell.fields;
        assert_eq!(f["lei"], "21380068P1DRHMJ8KU70");
        assert_eq!(
            f["entity"]["otherNames"][0]["name"],
            "ROYAL DUTCH SHELL PLC"
        );
        assert_eq!(f["entity"]["legalAddress"]["postalCode"], "SE1 7NA");
        assert_eq!(f["registration"]["lastUpdateDate"], "2025-05-06T15:51:56Z");
        assert_eq!(f["registration"]["status"], "ISSUED");
        assert_eq!(f["ocid"], "gb/04366849");
        assert_eq!(f["spglobal"][0], "22385966");
        assert!(f.get("relationships").is_none(), "links are not fields");

        let lapsed = parse(
            &[real(&format!("{PY}/549300LBI3LRIZ2V8V66_lapsed.json"))],
            &ctx(),
        )
        .unwrap()
        .snapshot
        .unwrap();
        let e = &lapsed.entries["549300LBI3LRIZ2V8V66"];
        assert_eq!(e.name, "UK EQUITY FUND (OFFSHORE)");
        assert_eq!(
            e.locator,
            "https://api.gleif.org/api/v1/lei-records/549300LBI3LRIZ2V8V66"
        );
        assert_eq!(e.fields["registration"]["status"], "LAPSED");
        assert_eq!(
            e.fields["registration"]["nextRenewalDate"],
            "2014-11-01T10:44:00Z"
        );
    }

    #[test]
    fn a_record_without_a_self_link_is_located_by_its_lei() {
        let f = edited(
            &single("529900GRZ2BQY5ZM9N49"),
            r#""links":{"self":"https:\/\/api.gleif.org\/api\/v1\/lei-records\/529900GRZ2BQY5ZM9N49"}"#,
            r#""links":{}"#,
        );
        let s = parse(&[f], &ctx()).unwrap().snapshot.unwrap();
        let e = &s.entries["529900GRZ2BQY5ZM9N49"];
        assert_eq!(e.name, "PUMA SE");
        assert_eq!(
            e.locator,
            "https://api.gleif.org/api/v1/lei-records/529900GRZ2BQY5ZM9N49"
        );
    }

    #[test]
    fn files_of_two_golden_copies_are_refused_in_one_ingest() {
        let e = err(&[
            single("21380068P1DRHMJ8KU70"),
            real(&format!("{PY}/9845001B2AD43E664E58_issued.json")),
        ]);
        assert!(
            e.starts_with("9845001B2AD43E664E58_issued.json: meta.goldenCopy.publishDate: 2024-07-06T08:00:00Z differs from 2025-05-15T00:00:00Z of single_lei_record_21380068P1DRHMJ8KU70.json"),
            "{e}"
        );
    }

    #[test]
    fn an_lei_given_twice_with_different_content_is_refused() {
        let changed = edited(
            &single("335800CCCPHKUOXPC332"),
            r#""status":"LAPSED""#,
            r#""status":"ISSUED""#,
        );
        let e = err(&[multi(), changed]);
        assert!(
            e.starts_with("single_lei_record_335800CCCPHKUOXPC332.json: data: LEI 335800CCCPHKUOXPC332 is also in multi_lei_records.json with different content"),
            "{e}"
        );
    }

    #[test]
    fn every_real_field_modification_page_gives_its_fifteen_rows() {
        let mut all = Vec::new();
        for lei in LEIS {
            let p = parse(&[history(lei)], &ctx()).unwrap();
            assert_eq!(p.rows.len(), 15, "{lei}");
            assert!(p.snapshot.is_none() && p.whole_days.is_empty());
            for r in &p.rows {
                assert_eq!(r.entity_id.as_deref(), Some(lei));
                assert!(r.id.starts_with(&format!("{lei}:fm:")), "{}", r.id);
                assert_eq!(r.published_at, r.event_at);
                assert_eq!(
                    r.published_at.unwrap(),
                    r.published_at.unwrap().day().end_of_day()
                );
            }
            all.extend(p.rows);
        }
        assert_eq!(all.len(), 180);
        let files: Vec<InputFile> = LEIS.iter().map(|l| history(l)).collect();
        assert_eq!(parse(&files, &ctx()).unwrap().rows, all);
    }

    #[test]
    fn a_name_change_at_a_16h_golden_copy_is_published_at_the_end_of_its_day() {
        let p = parse(&[history("21380068P1DRHMJ8KU70")], &ctx()).unwrap();
        let r = p
            .rows
            .iter()
            .find(|r| r.id.ends_with("74d4467a-01c0-4945-8bd0-26046232b196"))
            .unwrap();
        assert_eq!(
            r.id,
            "21380068P1DRHMJ8KU70:fm:74d4467a-01c0-4945-8bd0-26046232b196"
        );
        assert_eq!(r.source_id, SourceId::GleifLei);
        assert_eq!(r.lane, Lane::CertifiedPit);
        assert_eq!(r.form.as_deref(), Some("field_modification"));
        assert_eq!(
            r.title,
            "21380068P1DRHMJ8KU70: LegalName UPDATE (ROYAL DUTCH SHELL PLC → SHELL PLC)"
        );
        // "date": "2022-01-24T16:00:00Z"
        assert_eq!(r.published_at, Some(t("2022-01-24T23:59:59Z")));
        assert_eq!(r.event_at, Some(t("2022-01-24T23:59:59Z")));
        assert_eq!(r.available_at, None);
        assert_eq!(r.acceptance_at, None);
        assert_eq!(r.committed_at, None);
        assert_eq!(
            r.availability_basis,
            asof_engine::AvailabilityBasis::Unknown
        );
        assert_eq!((r.cik.as_deref(), r.accession.as_deref()), (None, None));
        assert_eq!(r.entity_id.as_deref(), Some("21380068P1DRHMJ8KU70"));
        assert_eq!(
            r.source_locator,
            "https://api.gleif.org/api/v1/lei-records/21380068P1DRHMJ8KU70/field-modifications"
        );
        assert_eq!(
            r.payload.as_deref(),
            Some(
                r#"{"context":null,"date":"2022-01-24T16:00:00Z","field":"/lei:LEIData/lei:LEIRecords/lei:LEIRecord/lei:Entity/lei:LegalName","lei":"21380068P1DRHMJ8KU70","modificationType":"UPDATE","recordType":"LEI","valueNew":"SHELL PLC","valueOld":"ROYAL DUTCH SHELL PLC"}"#
            )
        );
        assert!(r.revision_id.is_empty() && r.content_sha256.is_empty() && r.supersedes.is_none());

        // The page's first row: a renewal at the 00:00 golden copy of 2025-05-07.
        let first = &p.rows[0];
        assert_eq!(
            first.id,
            "21380068P1DRHMJ8KU70:fm:d2cee385-9dc6-4382-9d27-eabdf2cd7064"
        );
        assert_eq!(
            first.title,
            "21380068P1DRHMJ8KU70: NextRenewalDate UPDATE (2025-07-04T00:00:00Z → 2026-07-04T00:00:00Z)"
        );
        assert_eq!(first.published_at, Some(t("2025-05-07T23:59:59Z")));
        assert_eq!(first.event_at, Some(t("2025-05-07T23:59:59Z")));
    }

    #[test]
    fn inserts_of_attributes_and_relationship_records_read_clearly_in_titles() {
        let shell = parse(&[history("21380068P1DRHMJ8KU70")], &ctx()).unwrap();
        let lang = shell
            .rows
            .iter()
            .find(|r| r.id.ends_with("a80caedc-1842-4360-8b5c-5da29876ab88"))
            .unwrap();
        assert_eq!(
            lang.title,
            "21380068P1DRHMJ8KU70: OtherEntityName@lang INSERT (→ en)"
        );
        // "date": "2022-03-22T16:00:00Z"
        assert_eq!(lang.published_at, Some(t("2022-03-22T23:59:59Z")));

        let nordic = parse(&[history("549300O897ZC5H7CY412")], &ctx()).unwrap();
        let rr = nordic
            .rows
            .iter()
            .find(|r| r.id.ends_with("9673b2fc-fba7-4ccc-9d60-90a47c557000"))
            .unwrap();
        assert_eq!(
            rr.title,
            "549300O897ZC5H7CY412: RR LastUpdateDate UPDATE (2025-01-27T13:47:00Z → 2025-04-11T05:58:00Z)"
        );
        // "date": "2025-04-11T08:00:00Z"
        assert_eq!(rr.published_at, Some(t("2025-04-11T23:59:59Z")));
        assert_eq!(rr.event_at, Some(t("2025-04-11T23:59:59Z")));
        assert!(
            rr.payload
                .as_deref()
                .unwrap()
                .contains(r#""context":{"endNode":"549300OWK6ZGNYP4G142","relationshipType":"IS_DIRECTLY_CONSOLIDATED_BY"}"#)
        );
        // A 113-character URL stays out of the title.
        let long = nordic
            .rows
            .iter()
            .find(|r| r.id.ends_with("293241b4-ffe0-462a-9920-2ac755b42160"))
            .unwrap();
        assert_eq!(
            long.title,
            "549300O897ZC5H7CY412: RR ValidationReference INSERT"
        );
    }

    #[test]
    fn overlapping_pages_collapse_and_conflicting_ones_are_refused() {
        let page = history("984500983AD71E4FBC41");
        let p = parse(&[page.clone(), page.clone()], &ctx()).unwrap();
        assert_eq!(p.rows.len(), 15);
        let mut other = edited(&page, r#""valueNew":"#, r#""valueNew":"X","was":"#);
        other.name = "page_again.json".into();
        let e = err(&[page, other]);
        assert!(
            e.starts_with("page_again.json: data[0]: modification 984500983AD71E4FBC41:fm:")
                && e.contains("is also in field_modifications_984500983AD71E4FBC41.json"),
            "{e}"
        );
    }

    #[test]
    fn a_modification_without_lei_is_refused_with_its_record() {
        let f = edited(
            &history("529900GRZ2BQY5ZM9N49"),
            r#""lei":"529900GRZ2BQY5ZM9N49","#,
            "",
        );
        assert_eq!(
            err(&[f]),
            "field_modifications_529900GRZ2BQY5ZM9N49.json: data[0]: attributes.lei: missing"
        );
    }

    #[test]
    fn a_record_with_a_mangled_lei_is_refused() {
        let f = edited(
            &single("5493001KJTIIGC8Y1R12"),
            r#""lei":"5493001KJTIIGC8Y1R12""#,
            r#""lei":"5493001KJTIIGC8Y1R21""#,
        );
        let e = err(&[f]);
        assert!(
            e.starts_with("single_lei_record_5493001KJTIIGC8Y1R12.json: data: attributes.lei: \"5493001KJTIIGC8Y1R21\" is not an LEI"),
            "{e}"
        );
    }

    #[test]
    fn a_modification_with_an_impossible_date_is_refused() {
        let page = history("254900MSZM6DMP853B11");
        let text = String::from_utf8(page.bytes.clone()).unwrap();
        let first_date = text.split(r#""date":""#).nth(1).unwrap()[..20].to_owned();
        let f = edited(
            &page,
            &format!(r#""date":"{first_date}""#),
            r#""date":"2025-02-30T00:00:00Z""#,
        );
        let e = err(&[f]);
        assert!(
            e.starts_with("field_modifications_254900MSZM6DMP853B11.json: data[0]: attributes.date: \"2025-02-30T00:00:00Z\" is not a UTC instant"),
            "{e}"
        );
        let bare = edited(
            &page,
            &format!(r#""date":"{first_date}""#),
            r#""date":"2025-03-14""#,
        );
        assert!(err(&[bare]).contains("data[0]: attributes.date: \"2025-03-14\""));
    }

    #[test]
    fn a_record_without_a_legal_name_or_publish_date_is_refused() {
        let f = edited(
            &multi(),
            r#""legalName":{"name":"PUMA SE","language":"de-DE"}"#,
            r#""legalName":{"language":"de-DE"}"#,
        );
        let e = err(&[f]);
        assert!(
            e.starts_with("multi_lei_records.json: data[")
                && e.ends_with("attributes.entity.legalName.name: missing"),
            "{e}"
        );
        let f = edited(
            &single("254900LNRYNOQ9YPU758"),
            r#""publishDate":"2025-05-15T00:00:00Z""#,
            r#""publishDate":"2025-05-15""#,
        );
        assert!(
            err(&[f]).starts_with(
                "single_lei_record_254900LNRYNOQ9YPU758.json: meta.goldenCopy.publishDate: \"2025-05-15\" is not a UTC instant"
            )
        );
    }

    #[test]
    fn a_truncated_file_is_refused_with_its_line() {
        let m = multi();
        let cut = InputFile {
            name: m.name.clone(),
            bytes: m.bytes[..m.bytes.len() / 2].to_vec(),
        };
        let e = err(&[cut]);
        assert!(
            e.starts_with("multi_lei_records.json: line 1 column ") && e.contains("not valid JSON"),
            "{e}"
        );
        let py = real(&format!("{PY}/549300LBI3LRIZ2V8V66_lapsed.json"));
        let cut = InputFile {
            name: py.name.clone(),
            bytes: py.bytes[..2000].to_vec(),
        };
        let e = err(&[cut]);
        let lines = py.bytes[..2000].iter().filter(|&&b| b == b'\n').count() + 1;
        assert!(
            e.starts_with(&format!(
                "549300LBI3LRIZ2V8V66_lapsed.json: line {lines} column "
            )),
            "{e}"
        );
        let h = history("INR2EJN1ERAN0W5ZP974");
        let cut = InputFile {
            name: h.name.clone(),
            bytes: h.bytes[..h.bytes.len() - 3].to_vec(),
        };
        assert!(err(&[cut]).starts_with("field_modifications_INR2EJN1ERAN0W5ZP974.json: line 1"));
    }

    #[test]
    fn an_empty_file_is_refused() {
        let f = InputFile {
            name: "empty.json".into(),
            bytes: b"\n".to_vec(),
        };
        assert_eq!(err(&[f]), "empty.json: file: the file is empty");
        let f = InputFile {
            name: "nothing.json".into(),
            bytes: br#"{"meta":{"goldenCopy":{"publishDate":"2025-05-15T00:00:00Z"}},"data":[]}"#
                .to_vec(),
        };
        assert!(err(&[f]).starts_with("nothing.json: data: the response holds no records"));
    }

    #[test]
    fn a_file_in_another_encoding_is_refused_with_its_line() {
        // "RAHÜL" written in Latin-1: Ü is the single byte 0xDC.
        let py = real(&format!("{PY}/9845001B2AD43E664E58_issued.json"));
        let at = py.bytes.windows(7).position(|w| w == b"\"RAHUL\"").unwrap() + 4;
        let mut bytes = py.bytes.clone();
        bytes[at] = 0xDC;
        let e = err(&[InputFile {
            name: py.name.clone(),
            bytes,
        }]);
        assert!(
            e.starts_with(&format!(
                "9845001B2AD43E664E58_issued.json: line 14, byte {at}: not UTF-8"
            )),
            "{e}"
        );
    }

    #[test]
    fn another_endpoint_response_is_refused_naming_the_accepted_types() {
        let isins = real(&format!("{RS}/isins/isins_21380068P1DRHMJ8KU70.json"));
        assert_eq!(
            err(&[isins]),
            "isins_21380068P1DRHMJ8KU70.json: data[0].type: \"isins\" is not an accepted GLEIF response: accepted types are \"lei-records\" (LEI records) and \"field-modifications\" (field-modification history)"
        );
        let api_error = InputFile {
            name: "missing.json".into(),
            bytes: br#"{"errors":[{"status":"404","title":"Not Found"}]}"#.to_vec(),
        };
        assert_eq!(
            err(&[api_error]),
            "missing.json: errors: the file is a GLEIF API error response (Not Found)"
        );
    }

    #[test]
    fn lei_check_digits_are_verified() {
        for lei in LEIS {
            assert!(is_lei(lei), "{lei}");
        }
        assert!(is_lei("549300LBI3LRIZ2V8V66") && is_lei("9845001B2AD43E664E58"));
        assert!(!is_lei("21380068P1DRHMJ8KU71"));
        assert!(!is_lei("21380068p1drhmj8ku70"));
        assert!(!is_lei("21380068P1DRHMJ8KU7"));
    }

    #[test]
    fn field_labels_drop_namespaces_and_keep_the_element_of_an_attribute() {
        assert_eq!(
            field_label("/lei:LEIData/lei:LEIRecords/lei:LEIRecord/lei:Entity/lei:LegalName"),
            "LegalName"
        );
        assert_eq!(
            field_label(
                "/lei:LEIData/lei:LEIRecords/lei:LEIRecord/lei:Entity/lei:LegalAddress/@xml:lang"
            ),
            "LegalAddress@lang"
        );
        assert_eq!(
            field_label(
                "/lei:LEIData/lei:LEIRecords/lei:LEIRecord/lei:Entity/lei:LegalEntityEvents/lei:LegalEntityEvent/@group_type"
            ),
            "LegalEntityEvent@group_type"
        );
    }
}
