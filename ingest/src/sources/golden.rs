//! `gleif.lei` golden copies: GLEIF's LEI-CDF files in CSV form (the whole LEI list, published
//! three times a day, and its deltas), read as a stream into a list snapshot too big to hold.
//!
//! A golden copy lists about 2.8 million LEIs in a file of gigabytes, so nothing here holds
//! the file or its entities: records are read one at a time from the input's reader, each
//! becomes one entry (its non-empty columns as a JSON object keyed by the CDF column names,
//! e.g. `Entity.LegalName`, `Registration.RegistrationStatus`), and the entries go to an
//! [`EntrySpill`] that sorts them by LEI through temporary files. The pipeline compares them
//! with the list state as two sorted streams.
//!
//! GLEIF names the files `YYYYMMDD-HHMM-gleif-goldencopy-lei2-<kind>.csv`: the instant is the
//! golden copy's publish time (UTC), when its state became knowable; `<kind>` is
//! `golden-copy` (the whole list: an LEI held and absent now was removed) or a delta
//! (`intra-day`, `last-day`, `last-week`, `last-month`: only the records that changed, so
//! absence says nothing). A file named otherwise is a whole golden copy captured at
//! `--captured-at`. Unzip GLEIF's `.csv.zip` first (`unzip -p X.csv.zip > X.csv`).

use asof_engine::model::clock::Instant;

use crate::adapter::{Context, Input, SpilledSnapshot};
use crate::entries::{EntrySpill, Seen};
use crate::error::{Error, Result};
use crate::sources::gleif::{API_BASE, is_lei};

/// The column holding each record's LEI; a golden copy's header starts with it.
pub const COL_LEI: &str = "LEI";
/// The column holding the entity's legal name (the change row's title).
pub const COL_NAME: &str = "Entity.LegalName";

/// True when the file starts like a golden copy CSV: its first header cell is `LEI`.
pub fn is_golden_copy(head: &[u8]) -> bool {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    head.starts_with(b"\"LEI\",") || head.starts_with(b"LEI,")
}

/// The publish instant and kind a GLEIF file name gives (`20250515-0800-...-golden-copy.csv`):
/// `Some((instant, full))`, or `None` for a name in another form.
pub fn named(name: &str) -> Option<(Instant, bool)> {
    let base = name.rsplit('/').next().unwrap_or(name);
    let b = base.as_bytes();
    if b.len() < 14
        || b[8] != b'-'
        || b[13] != b'-'
        || !b[..8].iter().chain(&b[9..13]).all(u8::is_ascii_digit)
    {
        return None;
    }
    let at = Instant::parse(&format!(
        "{}-{}-{}T{}:{}:00Z",
        &base[..4],
        &base[4..6],
        &base[6..8],
        &base[9..11],
        &base[11..13]
    ))
    .ok()?;
    let kind = base.to_ascii_lowercase();
    let delta = ["intra-day", "last-day", "last-week", "last-month", "delta"]
        .iter()
        .any(|k| kind.contains(k));
    Some((at, !delta))
}

/// Reads one golden copy (or delta) file as a stream.
pub fn parse(file: &Input, ctx: &Context) -> Result<SpilledSnapshot> {
    let name = file.name();
    let (captured_at, full) = match (named(name), ctx.captured_at) {
        (Some((at, full)), None) => (at, full),
        (Some((at, full)), Some(given)) if given == at => (at, full),
        (Some((at, _)), Some(given)) => {
            return Err(Error::parse(
                name,
                "file name",
                format!(
                    "the name says the golden copy was published at {at}, --captured-at says {given}; give one or the other"
                ),
            ));
        }
        (None, Some(at)) => (at, true),
        (None, None) => {
            return Err(Error::parse(
                name,
                "file name",
                "a golden copy's publish time is in GLEIF's file name (YYYYMMDD-HHMM-gleif-goldencopy-lei2-golden-copy.csv); this name has none, so give --captured-at",
            ));
        }
    };
    // Records end at `\n` only: with the default terminator a CRLF file's record positions lag
    // one line behind (a record starts before the previous line's `\n` is read), and a stream
    // cannot be looked back into to correct it. The `\r` then ends the last field, and every
    // value and column name is trimmed.
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_reader(file.reader()?);
    let csv_error = |e: csv::Error| {
        let line = e.position().map_or(0, csv::Position::line);
        let what = match e.kind() {
            csv::ErrorKind::Utf8 { .. } => {
                "not UTF-8 text (the file is in another encoding or corrupt)".to_owned()
            }
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => format!(
                "{len} fields where the header has {expected_len} (a truncated or corrupt file)"
            ),
            _ => format!("not readable CSV: {e}"),
        };
        Error::parse(name, format!("line {line}"), what)
    };
    let header = reader.headers().map_err(csv_error)?.clone();
    if header.is_empty() || header.iter().all(str::is_empty) {
        return Err(Error::parse(name, "file", "the file is empty"));
    }
    let columns: Vec<String> = header
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').trim().to_owned())
        .collect();
    let find = |c: &str| {
        columns.iter().position(|h| h == c).ok_or_else(|| {
            Error::parse(
                name,
                "line 1",
                format!("missing column {c:?}: not a GLEIF LEI-CDF golden copy"),
            )
        })
    };
    let (lei_at, name_at) = (find(COL_LEI)?, find(COL_NAME)?);
    if let Some(dup) = columns
        .iter()
        .enumerate()
        .find(|(i, c)| columns[..*i].contains(c))
    {
        return Err(Error::parse(
            name,
            "line 1",
            format!("column {:?} appears twice", dup.1),
        ));
    }
    // Columns in name order, so each record's fields come out as canonical JSON (keys
    // sorted) without sorting per record.
    let mut by_name: Vec<usize> = (0..columns.len()).collect();
    by_name.sort_by(|a, b| columns[*a].cmp(&columns[*b]));

    let mut entries = EntrySpill::new(name);
    let mut record = csv::StringRecord::new();
    let mut records = 0u64;
    let mut fields = serde_json::Map::new();
    while reader.read_record(&mut record).map_err(csv_error)? {
        let line = record.position().map_or(0, csv::Position::line);
        let at = || format!("line {line}");
        let lei = record.get(lei_at).unwrap_or_default().trim();
        if !is_lei(lei) {
            return Err(Error::parse(
                name,
                at(),
                format!("LEI {lei:?} is not an LEI (20 characters, ISO 17442 check digits)"),
            ));
        }
        let legal_name = record.get(name_at).unwrap_or_default().trim();
        if legal_name.is_empty() {
            return Err(Error::parse(
                name,
                at(),
                format!("LEI {lei}: {COL_NAME} is empty"),
            ));
        }
        fields.clear();
        for &i in &by_name {
            let v = record.get(i).unwrap_or_default().trim();
            if !v.is_empty() {
                fields.insert(columns[i].clone(), v.into());
            }
        }
        let text = serde_json::to_string(&CanonicalObject(&fields)).expect("strings serialize");
        entries.push(
            lei.to_owned(),
            &Seen {
                name: legal_name.to_owned(),
                locator: format!("{API_BASE}/{lei}"),
                fields: text,
            },
        )?;
        records += 1;
    }
    if records == 0 {
        return Err(Error::parse(
            name,
            "file",
            "the golden copy holds no records (a failed or truncated download)",
        ));
    }
    Ok(SpilledSnapshot {
        captured_at,
        full,
        entries,
        records,
    })
}

/// A JSON object written in the order its entries were inserted (`fields` is filled in column
/// name order): serde_json's map sorts its keys by default, but another crate of the workspace
/// may turn on `preserve_order`, so the order is made explicit here.
struct CanonicalObject<'a>(&'a serde_json::Map<String, serde_json::Value>);

impl serde::Serialize for CanonicalObject<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut keys: Vec<&String> = self.0.keys().collect();
        keys.sort();
        let mut m = s.serialize_map(Some(keys.len()))?;
        for k in keys {
            m.serialize_entry(k, &self.0[k])?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::{InputFile, canonical_json};
    use asof_engine::model::clock::{Lane, SourceId};

    pub(crate) const DIR: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/gleif.lei/golden_copy_from_api"
    );
    const FILE: &str = "20250515-0000-gleif-goldencopy-lei2-golden-copy.csv";

    fn ctx(captured: Option<&str>) -> Context {
        Context {
            source: SourceId::GleifLei,
            lane: Lane::CertifiedPit,
            captured_at: captured.map(|s| Instant::parse(s).unwrap()),
        }
    }

    fn real() -> Input {
        Input::open(std::path::Path::new(&format!("{DIR}/{FILE}"))).unwrap()
    }

    fn text() -> String {
        String::from_utf8(real().load().unwrap().bytes).unwrap()
    }

    fn mem(name: &str, text: &str) -> Input {
        InputFile {
            name: name.into(),
            bytes: text.as_bytes().to_vec(),
        }
        .into()
    }

    fn all(g: SpilledSnapshot) -> Vec<(String, Seen)> {
        g.entries
            .into_sorted()
            .unwrap()
            .collect::<Result<_>>()
            .unwrap()
    }

    fn err(f: &Input, captured: Option<&str>) -> String {
        parse(f, &ctx(captured)).unwrap_err().to_string()
    }

    #[test]
    fn the_golden_copy_gives_every_lei_once_at_its_publish_instant() {
        let g = parse(&real(), &ctx(None)).unwrap();
        assert_eq!(
            g.captured_at,
            Instant::parse("2025-05-15T00:00:00Z").unwrap()
        );
        assert!(g.full);
        let records = g.records;
        let e = all(g);
        assert_eq!(e.len() as u64, records);
        assert!(e.len() > 50, "{}", e.len());
        assert!(e.windows(2).all(|w| w[0].0 < w[1].0));
        let (_, shell) = e.iter().find(|(l, _)| l == "21380068P1DRHMJ8KU70").unwrap();
        assert_eq!(shell.name, "SHELL PLC");
        assert_eq!(
            shell.locator,
            "https://api.gleif.org/api/v1/lei-records/21380068P1DRHMJ8KU70"
        );
        let fields: serde_json::Value = serde_json::from_str(&shell.fields).unwrap();
        assert_eq!(fields["Entity.LegalAddress.City"], "LONDON");
        assert_eq!(fields["Registration.RegistrationStatus"], "ISSUED");
        assert_eq!(
            canonical_json(&fields),
            shell.fields,
            "fields are canonical JSON"
        );
        assert!(
            fields.get("Entity.LegalAddress.AddressNumber").is_none(),
            "empty cells are left out"
        );
    }

    #[test]
    fn names_give_the_publish_instant_and_whether_the_file_is_whole() {
        let at = |s: &str| Instant::parse(s).unwrap();
        assert_eq!(
            named("dl/20250515-1600-gleif-goldencopy-lei2-golden-copy.csv"),
            Some((at("2025-05-15T16:00:00Z"), true))
        );
        assert_eq!(
            named("20250515-0800-gleif-goldencopy-lei2-last-day.csv"),
            Some((at("2025-05-15T08:00:00Z"), false))
        );
        assert_eq!(named("lei2.csv"), None);
        assert_eq!(
            named("20251315-0800-gleif-goldencopy-lei2-golden-copy.csv"),
            None
        );
    }

    #[test]
    fn a_file_named_otherwise_needs_its_capture_instant() {
        let f = mem("lei2.csv", &text());
        assert!(err(&f, None).contains("give --captured-at"));
        let g = parse(&f, &ctx(Some("2025-05-15T08:00:00Z"))).unwrap();
        assert_eq!(
            g.captured_at,
            Instant::parse("2025-05-15T08:00:00Z").unwrap()
        );
        assert!(g.full);
        let named = mem(FILE, &text());
        let e = err(&named, Some("2025-05-15T08:00:00Z"));
        assert!(e.contains("give one or the other"), "{e}");
        assert!(parse(&named, &ctx(Some("2025-05-15T00:00:00Z"))).is_ok());
    }

    #[test]
    fn a_truncated_file_is_refused_with_its_line() {
        let t = text();
        let cut = &t[..t.len() * 2 / 3];
        let cut = &cut[..cut.rfind(',').unwrap()];
        let lines = cut.lines().count();
        let e = err(&mem(FILE, cut), None);
        assert!(
            e.contains(&format!("line {lines}")) && e.contains("truncated"),
            "{e}"
        );
    }

    #[test]
    fn a_mangled_lei_or_an_empty_legal_name_is_refused_with_its_line() {
        let t = text();
        let bad = t.replacen("21380068P1DRHMJ8KU70", "21380068P1DRHMJ8KU71", 1);
        let line = t[..t.find("21380068P1DRHMJ8KU70").unwrap()].lines().count();
        let e = err(&mem(FILE, &bad), None);
        assert!(
            e.contains(&format!("line {line}")) && e.contains("not an LEI"),
            "{e}"
        );
        let e = err(&mem(FILE, &t.replacen("\"SHELL PLC\"", "\"\"", 1)), None);
        assert!(e.contains("Entity.LegalName is empty"), "{e}");
    }

    #[test]
    fn a_file_without_records_or_columns_or_in_another_encoding_is_refused() {
        let t = text();
        let header = t.lines().next().unwrap();
        assert!(err(&mem(FILE, header), None).contains("holds no records"));
        assert!(
            err(&mem(FILE, "\"LEI\",\"Name\"\n"), None)
                .contains("missing column \"Entity.LegalName\"")
        );
        let mut bytes = t.clone().into_bytes();
        let at = t.find("SHELL").unwrap();
        bytes[at] = 0xC9;
        let f: Input = InputFile {
            name: FILE.into(),
            bytes,
        }
        .into();
        let e = err(&f, None);
        assert!(e.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn one_lei_twice_with_other_fields_is_refused() {
        let t = text();
        let shell = t
            .lines()
            .find(|l| l.contains("21380068P1DRHMJ8KU70"))
            .unwrap();
        let twice = format!("{t}{}\n", shell.replace("LONDON", "PARIS"));
        let g = parse(&mem(FILE, &twice), &ctx(None)).unwrap();
        let e = g
            .entries
            .into_sorted()
            .unwrap()
            .collect::<Result<Vec<_>>>()
            .unwrap_err();
        assert!(e.to_string().contains("entity 21380068P1DRHMJ8KU70"), "{e}");
        let g = parse(&mem(FILE, &format!("{t}{shell}\n")), &ctx(None)).unwrap();
        assert_eq!(all(g).len(), all(parse(&real(), &ctx(None)).unwrap()).len());
    }

    #[test]
    fn golden_copies_are_told_by_their_header() {
        assert!(is_golden_copy(b"\"LEI\",\"Entity.LegalName\""));
        assert!(is_golden_copy(b"\xEF\xBB\xBFLEI,Entity.LegalName"));
        assert!(!is_golden_copy(b"{\"data\":"));
    }
}
