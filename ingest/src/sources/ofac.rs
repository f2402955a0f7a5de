//! `us.ofac.sdn` adapter: OFAC's legacy SDN CSV set (`sdn.csv`, `add.csv`, `alt.csv`,
//! `sdn_comments.csv`); one ingest is one full snapshot of the list on its capture instant.
//!
//! The files carry no publication time, so the snapshot is dated by the capture instant the
//! caller gives. The pipeline diffs successive snapshots into change rows (docs/sources.d/
//! us.ofac.sdn.md); this module only reads the list.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::adapter::{self, Context, Entry, InputFile, Parsed, Snapshot};
use crate::error::{Error, Result};

/// Where OFAC's sanctions search shows one entry; `id` is the `ent_num`.
pub const LOCATOR_BASE: &str = "https://sanctionssearch.ofac.treas.gov/Details.aspx?id=";

/// OFAC's null: an unquoted `-0-`, padded with a trailing space in the files.
const NULL: &str = "-0-";

/// The URL of one entry at OFAC.
pub fn locator(ent_num: &str) -> String {
    format!("{LOCATOR_BASE}{ent_num}")
}

/// The four files of the legacy set, recognised by base name whatever its case (OFAC serves
/// `SDN.CSV`, mirrors serve `sdn.csv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sdn,
    Add,
    Alt,
    Comments,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Sdn, Kind::Add, Kind::Alt, Kind::Comments];

    fn of(name: &str) -> Option<Kind> {
        let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
        Kind::ALL
            .into_iter()
            .find(|k| base.eq_ignore_ascii_case(k.base_name()))
    }

    fn base_name(self) -> &'static str {
        match self {
            Kind::Sdn => "sdn.csv",
            Kind::Add => "add.csv",
            Kind::Alt => "alt.csv",
            Kind::Comments => "sdn_comments.csv",
        }
    }

    /// The files have no header row; these are OFAC's column names, in order.
    fn columns(self) -> &'static [&'static str] {
        match self {
            Kind::Sdn => &[
                "ent_num",
                "SDN_Name",
                "SDN_Type",
                "Program",
                "Title",
                "Call_Sign",
                "Vess_type",
                "Tonnage",
                "GRT",
                "Vess_flag",
                "Vess_owner",
                "Remarks",
            ],
            Kind::Add => &[
                "ent_num",
                "add_num",
                "Address",
                "City/State/Province/Postal Code",
                "Country",
                "Add_remarks",
            ],
            Kind::Alt => &["ent_num", "alt_num", "alt_type", "alt_name", "alt_remarks"],
            Kind::Comments => &["ent_num", "Remarks_Extended"],
        }
    }
}

/// One CSV record with the physical line it starts on.
struct Record<'f> {
    file: &'f str,
    line: u64,
    fields: csv::StringRecord,
}

impl Record<'_> {
    fn err(&self, message: impl Into<String>) -> Error {
        Error::parse(self.file, format!("line {}", self.line), message)
    }

    /// A field as given, `None` for OFAC's `-0-`. Text is not trimmed: OFAC quotes it and the
    /// quotes delimit the value exactly; only the null carries padding.
    fn opt(&self, col: usize) -> Option<&str> {
        let v = self.fields.get(col).unwrap_or("");
        (v.trim() != NULL).then_some(v)
    }

    fn required(&self, col: usize, name: &str) -> Result<&str> {
        match self.opt(col) {
            Some(v) if !v.trim().is_empty() => Ok(v),
            _ => Err(self.err(format!("{name} is missing"))),
        }
    }

    /// A numeric identifier (`ent_num`, `add_num`, `alt_num`).
    fn id(&self, col: usize, name: &str) -> Result<u64> {
        let v = self.fields.get(col).unwrap_or("").trim();
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.err(format!("{name} {v:?} is not a number")));
        }
        v.parse()
            .map_err(|_| self.err(format!("{name} {v:?} is out of range")))
    }
}

fn opt_json(v: Option<&str>) -> Value {
    v.map_or(Value::Null, |s| Value::String(s.to_owned()))
}

/// Length of the line terminator (`\r\n`, `\n` or `\r`) `s` ends with, 0 if none.
fn terminator_len(s: &str) -> usize {
    if s.ends_with("\r\n") {
        2
    } else if s.ends_with(['\n', '\r']) {
        1
    } else {
        0
    }
}

/// 1-based line of byte `at`.
fn line_at(text: &str, at: usize) -> u64 {
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u64
        + 1
}

/// Reads one file of the set into records of exactly its column count.
///
/// OFAC's files may end with a DOS end-of-file byte (0x1A) and a trailing blank line; exactly
/// those are tolerated. Anything else that is not a well-formed record (a blank line inside
/// the file, an unterminated quote, a record with too few fields, a last field cut short) is
/// an error naming the line, because the csv crate alone would accept a truncated file.
fn records(file: &InputFile, kind: Kind) -> Result<Vec<Record<'_>>> {
    let name = file.name.as_str();
    adapter::non_empty(file)?;
    let text = adapter::utf8(file)?;
    let body = text.strip_suffix('\u{1a}').unwrap_or(text);
    if let Some(at) = body.find('\u{1a}') {
        return Err(Error::parse(
            name,
            format!("line {}", line_at(body, at)),
            "a DOS end-of-file byte (0x1A) before the end of the file",
        ));
    }
    let mut content = &body[..body.len() - terminator_len(body)];
    content = &content[..content.len() - terminator_len(content)];
    if terminator_len(content) > 0 {
        return Err(Error::parse(
            name,
            format!("line {}", line_at(content, content.len())),
            "more than one blank line at the end of the file",
        ));
    }
    if content.is_empty() {
        return Err(Error::parse(name, "file", "the file holds no records"));
    }

    let columns = kind.columns();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(content.as_bytes());
    // (start byte, fields). The csv crate dates a record from where its read began, which in a
    // CRLF file is the previous record's `\n` (and, after a blank line, the blank line); the
    // true start is past those bytes.
    let mut read: Vec<(usize, csv::StringRecord)> = Vec::new();
    for r in reader.records() {
        let fields = r.map_err(|e| {
            let at = e
                .position()
                .map_or_else(|| "file".to_owned(), |p| format!("line {}", p.line()));
            Error::parse(name, at, format!("not CSV: {e}"))
        })?;
        let pos = fields
            .position()
            .map_or(0, |p| usize::try_from(p.byte()).unwrap_or(usize::MAX))
            .min(content.len());
        let skip = content[pos..]
            .bytes()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        read.push((pos + skip, fields));
    }

    let mut out = Vec::with_capacity(read.len());
    let mut line = 1u64;
    let mut counted_to = 0usize;
    for (k, (start, fields)) in read.iter().enumerate() {
        line += content.as_bytes()[counted_to..*start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        counted_to = *start;
        let end = read.get(k + 1).map_or(content.len(), |(s, _)| *s);
        let raw = &content[*start..end];
        let rec = Record {
            file: name,
            line,
            fields: fields.clone(),
        };
        if k == 0 && *start != 0 {
            return Err(Error::parse(
                name,
                "line 1",
                "a blank line before the first record",
            ));
        }
        let own = &raw[..raw.len() - terminator_len(raw)];
        if k + 1 < read.len() && terminator_len(own) > 0 {
            let blank = line + raw.bytes().filter(|&b| b == b'\n').count() as u64 - 1;
            return Err(Error::parse(
                name,
                format!("line {blank}"),
                "a blank line inside the file",
            ));
        }
        if own.bytes().filter(|&b| b == b'"').count() % 2 != 0 {
            return Err(
                rec.err("an unterminated quoted field (the file is cut short or malformed)")
            );
        }
        if fields.len() != columns.len() {
            return Err(rec.err(format!(
                "{} fields, expected {} ({})",
                fields.len(),
                columns.len(),
                columns.join(", ")
            )));
        }
        // OFAC quotes every text value and leaves only `-0-` bare in the last column, so a bare
        // value there is a record cut short (a middle field cut short loses the fields after it
        // and fails the count above).
        let last = fields.get(columns.len() - 1).unwrap_or("");
        if !own.trim_end().ends_with('"') && last.trim() != NULL {
            return Err(rec.err(format!(
                "{}: {last:?} is neither quoted text nor -0- (the record is cut short)",
                columns[columns.len() - 1]
            )));
        }
        out.push(rec);
    }
    Ok(out)
}

/// One `sdn.csv` entry while the other files are joined to it.
struct Entity {
    line: u64,
    name: String,
    fields: Map<String, Value>,
    remarks: Option<String>,
    /// `sdn_comments.csv`'s continuation and the line it came from.
    extended: Option<(String, u64)>,
    addresses: BTreeMap<u64, Value>,
    aliases: BTreeMap<u64, Value>,
}

/// `Program` as OFAC writes several programs: `SDGT] [IRGC` (the outer brackets dropped) or
/// `[SDGT] [IRGC]`.
pub fn split_programs(raw: &str) -> Vec<String> {
    raw.split(']')
        .map(|p| p.trim().trim_start_matches('[').trim())
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parses one ingest of the legacy SDN set into a full snapshot of the list on the capture
/// day. `sdn.csv` is required; `add.csv`, `alt.csv` and `sdn_comments.csv` are joined to it
/// when given. Entries are keyed by `ent_num` without padding.
pub fn parse(files: &[InputFile], ctx: &Context) -> Result<Parsed> {
    let mut by_kind: [Option<&InputFile>; 4] = [None; 4];
    for f in files {
        let kind = Kind::of(&f.name).ok_or_else(|| {
            Error::parse(
                &f.name,
                "file",
                "not a file of OFAC's legacy SDN set (sdn.csv, add.csv, alt.csv, sdn_comments.csv)",
            )
        })?;
        let slot = &mut by_kind[kind as usize];
        if let Some(prev) = slot {
            return Err(Error::parse(
                &f.name,
                "file",
                format!("{} given twice (also as {})", kind.base_name(), prev.name),
            ));
        }
        *slot = Some(f);
    }
    let sdn = by_kind[Kind::Sdn as usize].ok_or_else(|| {
        let given: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        Error::parse(
            "sdn.csv",
            "file",
            format!(
                "missing: the SDN set needs sdn.csv (given: {})",
                if given.is_empty() {
                    "nothing".to_owned()
                } else {
                    given.join(", ")
                }
            ),
        )
    })?;
    let captured_at = adapter::require_capture(ctx, &sdn.name)?;

    let mut entities: BTreeMap<u64, Entity> = BTreeMap::new();
    for rec in records(sdn, Kind::Sdn)? {
        let ent_num = rec.id(0, "ent_num")?;
        if let Some(prev) = entities.get(&ent_num) {
            return Err(rec.err(format!(
                "ent_num {ent_num} is listed twice (also at line {})",
                prev.line
            )));
        }
        let name = rec.required(1, "SDN_Name")?.to_owned();
        let program = rec.opt(3);
        let mut fields = Map::new();
        fields.insert("sdn_type".into(), opt_json(rec.opt(2)));
        fields.insert(
            "programs".into(),
            json!(program.map(split_programs).unwrap_or_default()),
        );
        fields.insert("programs_raw".into(), opt_json(program));
        for (col, key) in [
            (4, "title"),
            (5, "call_sign"),
            (6, "vess_type"),
            (7, "tonnage"),
            (8, "grt"),
            (9, "vess_flag"),
            (10, "vess_owner"),
        ] {
            fields.insert(key.into(), opt_json(rec.opt(col)));
        }
        entities.insert(
            ent_num,
            Entity {
                line: rec.line,
                name,
                fields,
                remarks: rec.opt(11).map(str::to_owned),
                extended: None,
                addresses: BTreeMap::new(),
                aliases: BTreeMap::new(),
            },
        );
    }

    let file_of = |kind: Kind| by_kind[kind as usize];
    // The owner of a row of a dependent file; an orphan means the set is inconsistent
    // (files of different days, or a filtered copy), never something to drop quietly.
    let owner = |rec: &Record, entities: &BTreeMap<u64, Entity>| -> Result<u64> {
        let ent_num = rec.id(0, "ent_num")?;
        if entities.contains_key(&ent_num) {
            Ok(ent_num)
        } else {
            Err(rec.err(format!("ent_num {ent_num} is not in {}", sdn.name)))
        }
    };

    if let Some(f) = file_of(Kind::Comments) {
        for rec in records(f, Kind::Comments)? {
            let ent_num = owner(&rec, &entities)?;
            let text = rec.required(1, "Remarks_Extended")?.to_owned();
            let e = entities.get_mut(&ent_num).expect("owner checked");
            if let Some((_, prev)) = &e.extended {
                return Err(rec.err(format!(
                    "ent_num {ent_num} has a second continuation (also at line {prev})"
                )));
            }
            e.extended = Some((text, rec.line));
        }
    }

    // add_num and alt_num identify an address or alias across the whole list.
    let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
    if let Some(f) = file_of(Kind::Add) {
        for rec in records(f, Kind::Add)? {
            let ent_num = owner(&rec, &entities)?;
            let add_num = rec.id(1, "add_num")?;
            if let Some(prev) = seen.insert(add_num, rec.line) {
                return Err(rec.err(format!(
                    "add_num {add_num} is listed twice (also at line {prev})"
                )));
            }
            let address = json!({
                "add_num": add_num,
                "address": opt_json(rec.opt(2)),
                "city_state_province_postal_code": opt_json(rec.opt(3)),
                "country": opt_json(rec.opt(4)),
                "add_remarks": opt_json(rec.opt(5)),
            });
            let e = entities.get_mut(&ent_num).expect("owner checked");
            e.addresses.insert(add_num, address);
        }
    }
    seen.clear();
    if let Some(f) = file_of(Kind::Alt) {
        for rec in records(f, Kind::Alt)? {
            let ent_num = owner(&rec, &entities)?;
            let alt_num = rec.id(1, "alt_num")?;
            if let Some(prev) = seen.insert(alt_num, rec.line) {
                return Err(rec.err(format!(
                    "alt_num {alt_num} is listed twice (also at line {prev})"
                )));
            }
            let alias = json!({
                "alt_num": alt_num,
                "alt_type": opt_json(rec.opt(2)),
                "alt_name": rec.required(3, "alt_name")?,
                "alt_remarks": opt_json(rec.opt(4)),
            });
            let e = entities.get_mut(&ent_num).expect("owner checked");
            e.aliases.insert(alt_num, alias);
        }
    }

    let entries = entities
        .into_iter()
        .map(|(ent_num, e)| {
            let Entity {
                name,
                mut fields,
                remarks,
                extended,
                addresses,
                aliases,
                ..
            } = e;
            // sdn.csv cuts Remarks at 1,000 characters, mid-word; the continuation follows on
            // directly, with no separator.
            let remarks = match (remarks, extended) {
                (r, None) => r,
                (r, Some((more, _))) => Some(r.unwrap_or_default() + &more),
            };
            fields.insert("remarks".into(), opt_json(remarks.as_deref()));
            fields.insert(
                "addresses".into(),
                Value::Array(addresses.into_values().collect()),
            );
            fields.insert(
                "aliases".into(),
                Value::Array(aliases.into_values().collect()),
            );
            let key = ent_num.to_string();
            let entry = Entry {
                name,
                locator: locator(&key),
                fields: Value::Object(fields),
            };
            (key, entry)
        })
        .collect();

    Ok(Parsed {
        rows: Vec::new(),
        published_is_capture: false,
        snapshot: Some(Snapshot {
            captured_at,
            full: true,
            entries,
        }),
        whole_days: vec![captured_at.day()],
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use asof_engine::model::clock::{Instant, Lane, SourceId};

    const Y2019: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/us.ofac.sdn/moov_2019-01/"
    );
    const Y2025: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/us.ofac.sdn/moov_2025-05_subset/"
    );
    /// A capture instant for the tests; the real one comes from the caller's provenance.
    const CAPTURE: &str = "2019-01-15T12:00:00Z";

    fn real(dir: &str, name: &str) -> InputFile {
        InputFile {
            name: name.to_owned(),
            bytes: std::fs::read(format!("{dir}{name}")).unwrap(),
        }
    }

    fn file(name: &str, bytes: &[u8]) -> InputFile {
        InputFile {
            name: name.to_owned(),
            bytes: bytes.to_vec(),
        }
    }

    fn ctx() -> Context {
        Context {
            source: SourceId::OfacSdn,
            lane: Lane::CertifiedPit,
            captured_at: Some(Instant::parse(CAPTURE).unwrap()),
        }
    }

    /// The real 2019-01 add.csv with the two bytes its copy lost restored (see
    /// `the_real_2019_01_add_csv_is_refused_for_its_cut_last_record`).
    fn add_2019_mended() -> InputFile {
        let mut f = real(Y2019, "add.csv");
        assert!(f.bytes.ends_with(b"\"Russia\",-0"));
        f.bytes.extend_from_slice(b"- ");
        f
    }

    fn full_2019() -> Snapshot {
        let files = [
            real(Y2019, "sdn.csv"),
            add_2019_mended(),
            real(Y2019, "alt.csv"),
            real(Y2019, "sdn_comments.csv"),
        ];
        parse(&files, &ctx()).unwrap().snapshot.unwrap()
    }

    fn entry<'s>(s: &'s Snapshot, ent_num: &str) -> &'s Entry {
        &s.entries[ent_num]
    }

    fn err(files: &[InputFile]) -> String {
        parse(files, &ctx()).unwrap_err().to_string()
    }

    /// The real file with `from` replaced by `to` once (the fault is placed on a known line).
    fn edited(dir: &str, name: &str, from: &str, to: &[u8]) -> InputFile {
        let mut f = real(dir, name);
        let at = f
            .bytes
            .windows(from.len())
            .position(|w| w == from.as_bytes())
            .unwrap();
        f.bytes.splice(at..at + from.len(), to.iter().copied());
        f
    }

    #[test]
    fn the_2019_01_list_holds_7379_entries_keyed_by_unpadded_ent_num() {
        let p = parse(&[real(Y2019, "sdn.csv")], &ctx()).unwrap();
        let s = p.snapshot.unwrap();
        assert_eq!(s.entries.len(), 7379);
        let nums: Vec<u64> = s.entries.keys().map(|k| k.parse().unwrap()).collect();
        assert_eq!(nums.iter().min(), Some(&36));
        assert_eq!(nums.iter().max(), Some(&26235));
        assert!(s.entries.keys().all(|k| !k.starts_with('0')));
        assert!(p.rows.is_empty());
    }

    #[test]
    fn the_2019_01_set_joins_every_address_alias_and_continuation() {
        let s = full_2019();
        let count = |key: &str| -> usize {
            s.entries
                .values()
                .map(|e| e.fields[key].as_array().unwrap().len())
                .sum()
        };
        assert_eq!(count("addresses"), 11696);
        assert_eq!(count("aliases"), 9682);
        assert_eq!(
            s.entries
                .values()
                .filter(|e| !e.fields["aliases"].as_array().unwrap().is_empty())
                .count(),
            3196
        );
        // Every entry of the 2019 list has at least an (all -0-) address row.
        assert!(
            s.entries
                .values()
                .all(|e| !e.fields["addresses"].as_array().unwrap().is_empty())
        );
        let long = s
            .entries
            .values()
            .filter(|e| e.fields["remarks"].as_str().is_some_and(|r| r.len() > 1000))
            .count();
        assert_eq!(long, 3);
    }

    #[test]
    fn the_real_2019_01_add_csv_is_refused_for_its_cut_last_record() {
        // The copy ends `...,"Russia",-0` with no `- ` and no newline: OFAC's null cut short.
        let e = err(&[real(Y2019, "sdn.csv"), real(Y2019, "add.csv")]);
        assert_eq!(
            e,
            "add.csv: line 11696: Add_remarks: \"-0\" is neither quoted text nor -0- (the record is cut short)"
        );
    }

    #[test]
    fn the_snapshot_is_full_dated_by_the_capture_and_certifies_its_day() {
        let p = parse(&[real(Y2019, "sdn.csv")], &ctx()).unwrap();
        let s = p.snapshot.as_ref().unwrap();
        assert_eq!(s.captured_at, Instant::parse(CAPTURE).unwrap());
        assert!(s.full);
        assert_eq!(p.whole_days, vec!["2019-01-15".parse().unwrap()]);
        assert!(!p.published_is_capture);
        assert_eq!(
            s.entries["36"].locator,
            "https://sanctionssearch.ofac.treas.gov/Details.aspx?id=36"
        );
    }

    #[test]
    fn a_vessel_keeps_its_vessel_fields_and_former_names() {
        // sdn.csv line 3252, add.csv line 6229, alt.csv lines 4998-5000.
        let s = full_2019();
        let e = entry(&s, "15036");
        assert_eq!(e.name, "ARTAVIL");
        assert_eq!(
            e.locator,
            "https://sanctionssearch.ofac.treas.gov/Details.aspx?id=15036"
        );
        assert_eq!(
            e.fields,
            json!({
                "sdn_type": "vessel",
                "programs": ["IRAN"],
                "programs_raw": "IRAN",
                "title": null,
                "call_sign": "T2EU4",
                "vess_type": "Crude/Oil Products Tanker",
                "tonnage": "99,144",
                "grt": "56,068",
                "vess_flag": "Iran",
                "vess_owner": null,
                "remarks": "Former Vessel Flag Malta; alt. Former Vessel Flag Tuvalu; alt. Former Vessel Flag None Identified; alt. Former Vessel Flag Tanzania; Additional Sanctions Information - Subject to Secondary Sanctions; Vessel Registration Identification IMO 9187629; MMSI 572469210; Linked To: NATIONAL IRANIAN TANKER COMPANY.",
                "addresses": [{
                    "add_num": 22372,
                    "address": null,
                    "city_state_province_postal_code": null,
                    "country": null,
                    "add_remarks": null
                }],
                "aliases": [
                    {"alt_num": 22153, "alt_type": "fka", "alt_name": "ABADAN", "alt_remarks": null},
                    {"alt_num": 23827, "alt_type": "fka", "alt_name": "ALPHA", "alt_remarks": null},
                    {"alt_num": 40680, "alt_type": "fka", "alt_name": "SHONA", "alt_remarks": null}
                ]
            })
        );
    }

    #[test]
    fn an_individual_keeps_title_and_address() {
        // sdn.csv line 17, add.csv line 21; no alias.
        let s = full_2019();
        let e = entry(&s, "587");
        assert_eq!(e.name, "CRUZ, Juan M. de la");
        assert_eq!(
            e.fields,
            json!({
                "sdn_type": "individual",
                "programs": ["CUBA"],
                "programs_raw": "CUBA",
                "title": "Director, Banco Nacional de Cuba",
                "call_sign": null,
                "vess_type": null,
                "tonnage": null,
                "grt": null,
                "vess_flag": null,
                "vess_owner": null,
                "remarks": "Director, Banco Nacional de Cuba.",
                "addresses": [{
                    "add_num": 356,
                    "address": "Dai-Ichi Bldg. 6th Floor, 10-2 Nihombashi, 2-chome, Chuo-ku",
                    "city_state_province_postal_code": "Tokyo 103",
                    "country": "Japan",
                    "add_remarks": null
                }],
                "aliases": []
            })
        );
    }

    #[test]
    fn a_remarks_continuation_is_appended_without_separator() {
        // sdn.csv line 2678 cuts Remarks at 1,000 characters inside "PROMO RAIZ"; line 1 of
        // sdn_comments.csv carries the remaining 596.
        let s = full_2019();
        let e = entry(&s, "12300");
        assert_eq!(e.name, "CIFUENTES VILLA, Jorge Milton");
        let r = e.fields["remarks"].as_str().unwrap();
        assert_eq!(r.len(), 1596);
        assert!(
            r.starts_with("DOB 13 May 1965; alt. DOB 13 Apr 1968;"),
            "{r}"
        );
        assert!(
            r.contains("Linked To: PROMO RAIZ S.A.S.; Linked To: RED MUNDIAL"),
            "{r}"
        );
        assert!(r.ends_with("Linked To: R D I S.A."), "{r}");
        let adds = e.fields["addresses"].as_array().unwrap();
        assert_eq!(adds.len(), 11);
        assert_eq!(adds[0]["add_num"], 18918);
        assert_eq!(adds[10]["add_num"], 20851);
        assert_eq!(
            adds[10]["city_state_province_postal_code"],
            "Guadalajara, Jalisco"
        );
        let alts = e.fields["aliases"].as_array().unwrap();
        assert_eq!(alts.len(), 2);
        assert_eq!(alts[1]["alt_name"], "OSUNA VILLARREAL, Sergio");
        assert_eq!(e.fields["programs"], json!(["SDNTK"]));
    }

    #[test]
    fn multi_program_lists_are_split_and_kept_raw() {
        let s = parse(&[real(Y2025, "sdn.csv")], &ctx())
            .unwrap()
            .snapshot
            .unwrap();
        let e = entry(&s, "48727");
        assert_eq!(
            e.fields["programs"],
            json!(["SDGT", "NPWMD", "IRGC", "IFSR"])
        );
        assert_eq!(e.fields["programs_raw"], "SDGT] [NPWMD] [IRGC] [IFSR");
        assert_eq!(split_programs("[SDGT] [IRGC]"), vec!["SDGT", "IRGC"]);
        assert_eq!(split_programs("CUBA"), vec!["CUBA"]);
    }

    #[test]
    fn the_2025_05_subset_holds_17_crlf_entries_with_a_continuation() {
        let files = [real(Y2025, "sdn.csv"), real(Y2025, "sdn_comments.csv")];
        let s = parse(&files, &ctx()).unwrap().snapshot.unwrap();
        assert_eq!(s.entries.len(), 17);
        // sdn.csv line 16: no carriage return kept in the last field of a CRLF file.
        let e = entry(&s, "50972");
        assert_eq!(e.name, "FRUNZE");
        assert_eq!(e.fields["sdn_type"], "vessel");
        assert_eq!(e.fields["programs"], json!(["SDGT", "IFSR"]));
        assert_eq!(e.fields["call_sign"], "E5U4323");
        assert_eq!(e.fields["vess_type"], "Crude Oil Tanker");
        assert_eq!(e.fields["vess_flag"], "Cook Islands");
        assert_eq!(e.fields["tonnage"], Value::Null);
        let r = e.fields["remarks"].as_str().unwrap();
        assert!(
            r.starts_with("Secondary sanctions risk: section 1(b"),
            "{r}"
        );
        assert!(!r.contains('\r'));
        let suex = entry(&s, "33151").fields["remarks"].as_str().unwrap();
        assert!(
            suex.contains("XBT 1B64QRxfaa35MVkf7sDjuGUYAP5izQt7Qi; Digital Currency"),
            "{suex}"
        );
        assert!(suex.ends_with("EXCHANGE'."), "{suex}");
    }

    #[test]
    fn the_2025_05_subset_add_and_alt_hold_rows_of_entries_not_in_its_sdn_csv() {
        // The subset was cut by matching numbers anywhere in a row: add.csv line 12 is
        // `12562,19709,...` (19709 is an ent_num of the subset, but here an add_num).
        let e = err(&[real(Y2025, "sdn.csv"), real(Y2025, "add.csv")]);
        assert_eq!(e, "add.csv: line 12: ent_num 12562 is not in sdn.csv");
        let e = err(&[real(Y2025, "sdn.csv"), real(Y2025, "alt.csv")]);
        assert_eq!(e, "alt.csv: line 1: ent_num 10416 is not in sdn.csv");
    }

    #[test]
    fn the_2025_05_subset_joins_once_its_orphan_rows_are_dropped() {
        let sdn = real(Y2025, "sdn.csv");
        let ents: Vec<String> = String::from_utf8(sdn.bytes.clone())
            .unwrap()
            .lines()
            .map(|l| l.split(',').next().unwrap().to_owned())
            .collect();
        let keep = |f: InputFile| {
            let text = String::from_utf8(f.bytes).unwrap();
            let kept: String = text
                .split_inclusive('\n')
                .filter(|l| ents.iter().any(|e| l.starts_with(&format!("{e},"))))
                .collect();
            file(&f.name, kept.as_bytes())
        };
        let files = [
            sdn.clone(),
            keep(real(Y2025, "add.csv")),
            keep(real(Y2025, "alt.csv")),
            real(Y2025, "sdn_comments.csv"),
        ];
        let s = parse(&files, &ctx()).unwrap().snapshot.unwrap();
        let count = |key: &str| -> usize {
            s.entries
                .values()
                .map(|e| e.fields[key].as_array().unwrap().len())
                .sum()
        };
        assert_eq!(count("addresses"), 24);
        assert_eq!(count("aliases"), 13);
        let khoroshev = &entry(&s, "48603").fields;
        assert_eq!(khoroshev["aliases"].as_array().unwrap().len(), 3);
        assert_eq!(khoroshev["addresses"][0]["country"], "Russia");
        assert_eq!(khoroshev["addresses"][0]["address"], Value::Null);
    }

    #[test]
    fn file_names_are_matched_by_base_name_whatever_the_case() {
        let mut sdn = real(Y2025, "sdn.csv");
        sdn.name = "downloads/2025-05-01/SDN.CSV".into();
        let mut com = real(Y2025, "sdn_comments.csv");
        com.name = "SDN_COMMENTS.CSV".into();
        let s = parse(&[sdn, com], &ctx()).unwrap().snapshot.unwrap();
        assert_eq!(s.entries.len(), 17);
    }

    #[test]
    fn a_dos_eof_byte_and_one_trailing_blank_line_are_tolerated() {
        let plain = parse(&[real(Y2025, "sdn.csv")], &ctx()).unwrap().snapshot;
        for tail in [&b"\x1a"[..], b"\r\n", b"\r\n\x1a"] {
            let mut f = real(Y2025, "sdn.csv");
            f.bytes.extend_from_slice(tail);
            assert_eq!(parse(&[f], &ctx()).unwrap().snapshot, plain, "{tail:?}");
        }
    }

    #[test]
    fn more_blank_lines_or_a_misplaced_eof_byte_are_refused_with_their_line() {
        let mut f = real(Y2025, "sdn.csv");
        // Lines 18 and 19 blank: the excess starts at line 18.
        f.bytes.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            err(&[f]),
            "sdn.csv: line 18: more than one blank line at the end of the file"
        );
        let mut f = real(Y2025, "sdn.csv");
        f.bytes.splice(0..0, *b"\r\n");
        assert_eq!(
            err(&[f]),
            "sdn.csv: line 1: a blank line before the first record"
        );
        let f = edited(Y2025, "sdn.csv", "\r\n11195,", b"\r\n\r\n11195,");
        assert_eq!(err(&[f]), "sdn.csv: line 2: a blank line inside the file");
        let f = edited(Y2025, "sdn.csv", "\r\n11195,", b"\r\n\x1a11195,");
        assert_eq!(
            err(&[f]),
            "sdn.csv: line 2: a DOS end-of-file byte (0x1A) before the end of the file"
        );
    }

    #[test]
    fn records_of_a_crlf_file_are_named_by_their_own_line() {
        // Line 5 of the subset is ent_num 19709; a copy of it on line 6 is the duplicate.
        let text = String::from_utf8(real(Y2025, "sdn.csv").bytes).unwrap();
        let lines: Vec<&str> = text.split_inclusive("\r\n").collect();
        assert!(lines[4].starts_with("19709,"));
        let dup: String = lines[..5].concat() + lines[4] + &lines[5..].concat();
        let e = err(&[file("sdn.csv", dup.as_bytes())]);
        assert_eq!(
            e,
            "sdn.csv: line 6: ent_num 19709 is listed twice (also at line 5)"
        );
    }

    #[test]
    fn a_sdn_csv_cut_inside_a_quote_is_refused_with_its_line() {
        // The full list cut inside the remarks of its last record (line 7379).
        let mut f = real(Y2019, "sdn.csv");
        let cut = f.bytes.len() - 20;
        f.bytes.truncate(cut);
        assert_eq!(
            err(&[f]),
            "sdn.csv: line 7379: an unterminated quoted field (the file is cut short or malformed)"
        );
        // The CRLF subset cut inside the name of its line 3.
        let bytes = real(Y2025, "sdn.csv").bytes;
        let at = bytes.windows(8).position(|w| w == b"GADDAFI ").unwrap();
        let e = err(&[file("sdn.csv", &bytes[..at + 4])]);
        assert_eq!(
            e,
            "sdn.csv: line 3: an unterminated quoted field (the file is cut short or malformed)"
        );
    }

    #[test]
    fn a_sdn_csv_cut_between_fields_is_refused_with_its_line() {
        let bytes = real(Y2019, "sdn.csv").bytes;
        // Line 4 cut after `424,"BOUTIQUE LA MAISON",-0- ,`, before its Program.
        let line4 = bytes.windows(8).position(|w| w == b"\n424,\"BO").unwrap();
        let at = line4
            + bytes[line4..]
                .windows(6)
                .position(|w| w == b"\"CUBA\"")
                .unwrap();
        let e = err(&[file("sdn.csv", &bytes[..at])]);
        assert_eq!(
            e,
            "sdn.csv: line 4: 4 fields, expected 12 (ent_num, SDN_Name, SDN_Type, Program, Title, Call_Sign, Vess_type, Tonnage, GRT, Vess_flag, Vess_owner, Remarks)"
        );
    }

    #[test]
    fn a_bad_ent_num_is_refused_with_its_line() {
        let f = edited(Y2019, "sdn.csv", "\n424,", b"\n42A,");
        assert_eq!(
            err(&[f]),
            "sdn.csv: line 4: ent_num \"42A\" is not a number"
        );
        let f = edited(Y2019, "alt.csv", "\n306,220,", b"\n-0- ,220,");
        assert_eq!(
            err(&[real(Y2019, "sdn.csv"), f]),
            "alt.csv: line 3: ent_num \"-0-\" is not a number"
        );
    }

    #[test]
    fn a_missing_name_is_refused_with_its_line() {
        let f = edited(Y2019, "sdn.csv", "\"BOUTIQUE LA MAISON\"", b"-0- ");
        assert_eq!(err(&[f]), "sdn.csv: line 4: SDN_Name is missing");
    }

    #[test]
    fn an_orphan_alt_row_is_refused_with_its_line() {
        let alt = file(
            "alt.csv",
            b"36,12,\"aka\",\"AERO-CARIBBEAN\",-0- \n99999,13,\"aka\",\"NOBODY\",-0- \n",
        );
        assert_eq!(
            err(&[real(Y2019, "sdn.csv"), alt]),
            "alt.csv: line 2: ent_num 99999 is not in sdn.csv"
        );
    }

    #[test]
    fn duplicate_ent_nums_and_alias_numbers_are_refused() {
        let f = edited(Y2019, "sdn.csv", "\n424,", b"\n173,");
        assert_eq!(
            err(&[f]),
            "sdn.csv: line 4: ent_num 173 is listed twice (also at line 2)"
        );
        let alt = file(
            "alt.csv",
            b"36,12,\"aka\",\"AERO-CARIBBEAN\",-0- \n173,12,\"aka\",\"AVIA IMPORT\",-0- \n",
        );
        assert_eq!(
            err(&[real(Y2019, "sdn.csv"), alt]),
            "alt.csv: line 2: alt_num 12 is listed twice (also at line 1)"
        );
    }

    #[test]
    fn an_empty_file_is_refused() {
        assert_eq!(
            err(&[file("sdn.csv", b"")]),
            "sdn.csv: file: the file is empty"
        );
        assert_eq!(
            err(&[real(Y2019, "sdn.csv"), file("add.csv", b"\r\n")]),
            "add.csv: file: the file is empty"
        );
    }

    #[test]
    fn a_latin1_file_is_refused_with_its_line() {
        let f = edited(
            Y2019,
            "sdn.csv",
            "\"ANGLO-CARIBBEAN",
            b"\"ANGL\xD6-CARIBBEAN",
        );
        let e = err(&[f]);
        assert!(e.starts_with("sdn.csv: line 2, byte "), "{e}");
        assert!(e.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn a_set_without_sdn_csv_is_refused() {
        assert_eq!(
            err(&[real(Y2019, "alt.csv"), real(Y2019, "sdn_comments.csv")]),
            "sdn.csv: file: missing: the SDN set needs sdn.csv (given: alt.csv, sdn_comments.csv)"
        );
        assert_eq!(
            err(&[]),
            "sdn.csv: file: missing: the SDN set needs sdn.csv (given: nothing)"
        );
    }

    #[test]
    fn an_unknown_or_repeated_file_is_refused() {
        assert_eq!(
            err(&[real(Y2019, "sdn.csv"), file("cons_prim.csv", b"1\n")]),
            "cons_prim.csv: file: not a file of OFAC's legacy SDN set (sdn.csv, add.csv, alt.csv, sdn_comments.csv)"
        );
        let mut again = real(Y2025, "sdn.csv");
        again.name = "SDN.CSV".into();
        assert_eq!(
            err(&[real(Y2019, "sdn.csv"), again]),
            "SDN.CSV: file: sdn.csv given twice (also as sdn.csv)"
        );
    }

    #[test]
    fn a_set_without_capture_instant_is_refused() {
        let mut c = ctx();
        c.captured_at = None;
        let e = parse(&[real(Y2025, "sdn.csv")], &c)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("sdn.csv: file: "), "{e}");
        assert!(e.contains("--captured-at"), "{e}");
    }
}
