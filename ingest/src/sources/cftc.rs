//! `us.cftc.cot` adapter: CFTC Commitments of Traders annual text files (legacy futures-only
//! `deacotYYYY.zip` → `annual.txt`, disaggregated futures-only `fut_disagg_txt_YYYY.zip` →
//! `f_year.txt`), one row per market and report date; plus the commit instants of the weekly
//! scrape that captured them.

use std::collections::{BTreeMap, HashMap};

use asof_engine::model::clock::{Day, Instant, SourceId};
use asof_engine::model::record::NewsRow;
use serde_json::{Map, Value};

use crate::adapter::{
    Columns, Context, InputFile, Parsed, base_row, non_empty, require_capture, utf8,
};
use crate::error::{Error, Result};

/// The report families this adapter reads; the text of each is the id prefix and the `form`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    LegacyFuturesOnly,
    DisaggregatedFuturesOnly,
}

impl Kind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::LegacyFuturesOnly => "legacy_futures_only",
            Kind::DisaggregatedFuturesOnly => "disaggregated_futures_only",
        }
    }
    fn words(self) -> &'static str {
        match self {
            Kind::LegacyFuturesOnly => "legacy futures-only",
            Kind::DisaggregatedFuturesOnly => "disaggregated futures-only",
        }
    }
    fn locator(self, year: i32) -> String {
        match self {
            Kind::LegacyFuturesOnly => {
                format!("https://www.cftc.gov/files/dea/history/deacot{year}.zip")
            }
            Kind::DisaggregatedFuturesOnly => {
                format!("https://www.cftc.gov/files/dea/history/fut_disagg_txt_{year}.zip")
            }
        }
    }
}

/// The columns a layout is recognised and read by.
struct Layout {
    kind: Kind,
    name: &'static str,
    date: &'static str,
    yymmdd: &'static str,
    code: &'static str,
    /// Columns only this family has: the legacy, disaggregated and financial (TFF) files share
    /// their first columns, so the leading names alone would let a TFF file through.
    distinctive: &'static [&'static str],
}

const LEGACY: Layout = Layout {
    kind: Kind::LegacyFuturesOnly,
    name: "Market and Exchange Names",
    date: "As of Date in Form YYYY-MM-DD",
    yymmdd: "As of Date in Form YYMMDD",
    code: "CFTC Contract Market Code",
    distinctive: &[
        "Noncommercial Positions-Long (All)",
        "Commercial Positions-Long (All)",
    ],
};

const DISAGGREGATED: Layout = Layout {
    kind: Kind::DisaggregatedFuturesOnly,
    name: "Market_and_Exchange_Names",
    date: "Report_Date_as_YYYY-MM-DD",
    yymmdd: "As_of_Date_In_Form_YYMMDD",
    code: "CFTC_Contract_Market_Code",
    distinctive: &[
        "Prod_Merc_Positions_Long_All",
        "M_Money_Positions_Long_All",
        FUT_ONLY,
    ],
};

/// Disaggregated files say per row whether they count futures only or futures and options
/// combined (`com_disagg_txt`); a combined row must not pass as futures-only.
const FUT_ONLY: &str = "FutOnly_or_Combined";

/// Parses CFTC COT annual text files captured at `ctx.captured_at`.
///
/// Each file is one cumulative annual file; its layout is recognised by its header. Rows are
/// `<kind>:<market code>@<report date>`; `published_at` is the capture (the files carry no
/// release time), so `Parsed::published_is_capture` is set and the capture day is whole.
pub fn parse(files: &[InputFile], ctx: &Context) -> Result<Parsed> {
    let Some(first) = files.first() else {
        return Err(Error::parse("(no files)", "file", "no input files"));
    };
    let captured_at = require_capture(ctx, &first.name)?;
    if ctx.source != SourceId::CftcCot {
        return Err(Error::parse(
            &first.name,
            "file",
            format!("the CFTC adapter was called for source {}", ctx.source),
        ));
    }
    let mut rows: Vec<NewsRow> = Vec::new();
    // id → (file, index in rows): files of one capture may overlap (two copies of the same
    // cumulative file); identical rows are one observation, different ones a contradiction.
    let mut seen: HashMap<String, (String, usize)> = HashMap::new();
    for file in files {
        for row in parse_file(file, ctx, captured_at)? {
            match seen.get(&row.id) {
                Some((_, i)) if rows[*i] == row => {}
                Some((other, _)) => {
                    return Err(Error::parse(
                        &file.name,
                        format!("record {}", row.id),
                        format!("{other} holds the same record with other values"),
                    ));
                }
                None => {
                    seen.insert(row.id.clone(), (file.name.clone(), rows.len()));
                    rows.push(row);
                }
            }
        }
    }
    Ok(Parsed {
        rows,
        published_is_capture: true,
        snapshot: None,
        whole_days: vec![captured_at.day()],
        ..Default::default()
    })
}

fn parse_file(file: &InputFile, ctx: &Context, captured_at: Instant) -> Result<Vec<NewsRow>> {
    non_empty(file)?;
    let text = utf8(file)?;
    let name = file.name.as_str();
    if !text.ends_with('\n') {
        // CFTC ends every file with a line break; without it the download stopped mid-record,
        // and the csv reader would take the cut last field as a whole one.
        let line = text.matches('\n').count() + 1;
        return Err(Error::parse(
            name,
            format!("line {line}"),
            "the file ends mid-record (no final line break): truncated download",
        ));
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| csv_error(name, text, &e))?
        .clone();
    let layout = detect(name, &header)?;
    let cols = Columns::new(name, &header);
    let keys: Vec<String> = header.iter().map(|h| h.trim().to_owned()).collect();
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].contains(k) {
            return Err(Error::parse(
                name,
                "line 1",
                format!("column {k:?} appears twice"),
            ));
        }
    }

    let capture_day = captured_at.day();
    let mut rows = Vec::new();
    let mut lines: HashMap<String, u64> = HashMap::new();
    let mut numbering = Lines::new(text);
    for record in reader.records() {
        let record = record.map_err(|e| csv_error(name, text, &e))?;
        let line = record.position().map_or(0, |p| numbering.of(p));
        let loc = format!("line {line}");
        let fault = |message: String| Error::parse(name, &loc, message);

        let market = cols.get(&record, layout.name);
        if market.is_empty() {
            return Err(fault(format!("{} is empty", layout.name)));
        }
        let code = cols.get(&record, layout.code);
        // `+` marks CFTC's consolidated markets (`13874+`, S&P 500 Consolidated); anything
        // else outside letters and digits would be a shifted or corrupt column.
        if code.is_empty() || !code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+') {
            return Err(fault(format!(
                "{}: {code:?} is not a market code (letters, digits, `+`)",
                layout.code
            )));
        }
        let raw_date = cols.get(&record, layout.date);
        // Strictly YYYY-MM-DD: the column's name promises it, and `01/07/2025` would mean the
        // file is not what its header says.
        let Ok(date) = raw_date.parse::<Day>() else {
            return Err(fault(format!(
                "{}: {raw_date:?} is not a date (YYYY-MM-DD)",
                layout.date
            )));
        };
        let iso = date.to_string();
        let yymmdd = cols.get(&record, layout.yymmdd);
        let expected = format!("{}{}{}", &iso[2..4], &iso[5..7], &iso[8..10]);
        if yymmdd != expected {
            return Err(fault(format!(
                "{}: {yymmdd:?} disagrees with {} {iso}",
                layout.yymmdd, layout.date
            )));
        }
        if date > capture_day {
            return Err(fault(format!(
                "report date {iso} is after the capture {captured_at}: wrong capture instant?"
            )));
        }
        if layout.kind == Kind::DisaggregatedFuturesOnly {
            let scope = cols.get(&record, FUT_ONLY);
            if scope != "FutOnly" {
                return Err(fault(format!(
                    "{FUT_ONLY}: {scope:?}, expected \"FutOnly\" (a combined futures-and-options file is another report)"
                )));
            }
        }

        let kind = layout.kind.as_str();
        let id = format!("{kind}:{code}@{iso}");
        if let Some(first) = lines.insert(id.clone(), line) {
            return Err(fault(format!(
                "duplicate record {id} (first at line {first})"
            )));
        }
        let payload: Map<String, Value> = keys
            .iter()
            .zip(record.iter())
            .map(|(k, v)| (k.clone(), field_value(k, v)))
            .collect();
        let mut row = base_row(
            ctx,
            id,
            code.to_owned(),
            Some(kind.to_owned()),
            format!("{market} (COT {}, positions of {iso})", layout.kind.words()),
            layout.kind.locator(date.to_date().year()),
            &Value::Object(payload),
        );
        row.event_at = Some(date.end_of_day());
        row.published_at = Some(captured_at);
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(Error::parse(
            name,
            "line 2",
            "no rows after the header (CFTC publishes no empty annual files)",
        ));
    }
    Ok(rows)
}

/// Which layout the header is, or an error naming what is missing.
fn detect(file: &str, header: &csv::StringRecord) -> Result<&'static Layout> {
    let cols = Columns::new(file, header);
    let layout = if cols.has(LEGACY.name) {
        &LEGACY
    } else if cols.has(DISAGGREGATED.name) {
        &DISAGGREGATED
    } else {
        let start: Vec<&str> = header.iter().take(3).collect();
        return Err(Error::parse(
            file,
            "line 1",
            format!(
                "not a CFTC COT legacy or disaggregated futures-only annual file (header starts {start:?})"
            ),
        ));
    };
    cols.require(&[layout.name, layout.date, layout.yymmdd, layout.code])?;
    if let Some(missing) = layout.distinctive.iter().find(|c| !cols.has(c)) {
        return Err(Error::parse(
            file,
            "line 1",
            format!("not a {} file: no column {missing:?}", layout.kind.words()),
        ));
    }
    Ok(layout)
}

/// A payload value: counts, changes, percentages and concentration ratios become JSON numbers;
/// codes and dates stay strings, since `"001602"` or `"00"` as numbers would lose their zeros
/// and a code column would change type between markets. CFTC's `.` (no value) stays `"."`.
fn field_value(column: &str, raw: &str) -> Value {
    let v = raw.trim();
    let textual = column.contains("Code") || column.contains("Date") || column.contains("YYMMDD");
    if !textual && let Ok(n) = serde_json::from_str::<serde_json::Number>(v) {
        return Value::Number(n);
    }
    Value::String(v.to_owned())
}

/// The 1-based physical line where the record at `pos` starts. The csv crate's own
/// `Position::line()` lags one behind after the header of a CRLF file (the 2021 disaggregated
/// file): a record's position is taken before the `\n` ending the previous line is consumed.
fn physical_line(text: &str, pos: &csv::Position) -> u64 {
    let bytes = text.as_bytes();
    newlines(&bytes[..record_start(bytes, pos)]) + 1
}

/// Where the record at `pos` starts: past the line break the csv crate had not yet consumed.
fn record_start(bytes: &[u8], pos: &csv::Position) -> usize {
    let mut at = usize::try_from(pos.byte())
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    while at < bytes.len() && matches!(bytes[at], b'\r' | b'\n') {
        at += 1;
    }
    at
}

fn newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// [`physical_line`] of the records of one file in reading order, counted from the last
/// record on: counting from the file's start for every record made a parse quadratic in the
/// file's size (the 3 MB disaggregated file took 80 s in a debug build, a whole year's file
/// would take minutes in a release one).
struct Lines<'a> {
    bytes: &'a [u8],
    /// Bytes counted so far, and the line breaks among them.
    at: usize,
    newlines: u64,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        Lines {
            bytes: text.as_bytes(),
            at: 0,
            newlines: 0,
        }
    }

    fn of(&mut self, pos: &csv::Position) -> u64 {
        let start = record_start(self.bytes, pos);
        if start < self.at {
            // Records come in order; were one not to, count it from the start.
            return newlines(&self.bytes[..start]) + 1;
        }
        self.newlines += newlines(&self.bytes[self.at..start]);
        self.at = start;
        self.newlines + 1
    }
}

fn csv_error(file: &str, text: &str, e: &csv::Error) -> Error {
    let line = e.position().map_or(0, |p| physical_line(text, p));
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields where the header has {expected_len}"),
        _ => format!("not readable as CSV: {e}"),
    };
    Error::parse(file, format!("line {line}"), message)
}

/// Reads a git-scrape `COMMITS.txt` (`<sha> <commit instant> ...` per line) into commit day →
/// commit instant, so a file saved as `annual.txt.committed_<day>` gets its capture instant.
///
/// When several commits fall on one day the latest is kept: a file named by the day alone is
/// one of them, and the latest instant is never earlier than its capture, so rows are never
/// shown too early.
pub fn commit_instants(file: &str, commits_txt: &str) -> Result<BTreeMap<Day, Instant>> {
    let mut out: BTreeMap<Day, Instant> = BTreeMap::new();
    for (i, line) in commits_txt.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let loc = format!("line {}", i + 1);
        let mut parts = line.split_whitespace();
        let sha = parts.next().unwrap_or_default();
        if sha.len() < 7 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::parse(
                file,
                &loc,
                format!("{sha:?} is not a commit hash"),
            ));
        }
        let when = parts.next().unwrap_or_default();
        let instant = Instant::parse(when).map_err(|e| {
            Error::parse(
                file,
                &loc,
                format!("{when:?} is not a UTC commit instant: {e:?}"),
            )
        })?;
        let slot = out.entry(instant.day()).or_insert(instant);
        *slot = (*slot).max(instant);
    }
    if out.is_empty() {
        return Err(Error::parse(file, "file", "no commits listed"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use asof_engine::model::clock::Lane;

    const DIR: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../snapshots/sources/us.cftc.cot"
    );
    const LEGACY_13: &str = "legacy_futures_only_2025_weekly_asof/annual.txt.committed_2025-01-13";
    const LEGACY_17: &str = "legacy_futures_only_2025_weekly_asof/annual.txt.committed_2025-01-17";
    const DISAGG: &str = "disaggregated_futures_only_2021/f_year.txt";

    fn t(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }
    fn d(s: &str) -> Day {
        s.parse().unwrap()
    }
    fn real(path: &str) -> InputFile {
        InputFile {
            name: path.to_owned(),
            bytes: std::fs::read(format!("{DIR}/{path}")).unwrap(),
        }
    }
    fn ctx(captured: &str) -> Context {
        Context {
            source: SourceId::CftcCot,
            lane: Lane::CertifiedPit,
            captured_at: Some(t(captured)),
        }
    }
    /// The capture instants of the legacy snapshots, from the scrape's own COMMITS.txt.
    fn capture_of(day: &str) -> Context {
        let commits = real("legacy_futures_only_2025_weekly_asof/COMMITS.txt");
        let map =
            commit_instants("COMMITS.txt", std::str::from_utf8(&commits.bytes).unwrap()).unwrap();
        Context {
            captured_at: Some(map[&d(day)]),
            ..ctx("2000-01-01T00:00:00Z")
        }
    }
    /// The disaggregated file's commit gives a date only: its last second bounds the capture.
    fn disagg_ctx() -> Context {
        ctx("2021-03-26T23:59:59Z")
    }
    fn payload(r: &NewsRow) -> Value {
        serde_json::from_str(r.payload.as_deref().unwrap()).unwrap()
    }
    fn find<'a>(p: &'a Parsed, id: &str) -> &'a NewsRow {
        p.rows.iter().find(|r| r.id == id).unwrap()
    }
    /// The real file with line `n` (1-based) passed through `edit`.
    fn edited(path: &str, n: usize, edit: impl Fn(&str) -> String) -> InputFile {
        let f = real(path);
        let text = String::from_utf8(f.bytes).unwrap();
        let out: Vec<String> = text
            .split_inclusive('\n')
            .enumerate()
            .map(|(i, l)| if i + 1 == n { edit(l) } else { l.to_owned() })
            .collect();
        InputFile {
            name: f.name,
            bytes: out.concat().into_bytes(),
        }
    }
    fn err(file: InputFile, c: &Context) -> String {
        parse(&[file], c).unwrap_err().to_string()
    }

    #[test]
    fn the_2025_01_13_snapshot_holds_310_rows_of_the_2025_01_07_report() {
        let p = parse(&[real(LEGACY_13)], &capture_of("2025-01-13")).unwrap();
        assert_eq!(p.rows.len(), 310);
        assert!(p.rows.iter().all(|r| r.id.ends_with("@2025-01-07")));
    }

    #[test]
    fn the_2025_01_17_snapshot_holds_626_rows_of_two_reports() {
        let p = parse(&[real(LEGACY_17)], &capture_of("2025-01-17")).unwrap();
        assert_eq!(p.rows.len(), 626);
        let of = |day: &str| p.rows.iter().filter(|r| r.id.ends_with(day)).count();
        assert_eq!((of("@2025-01-07"), of("@2025-01-14")), (310, 316));
    }

    #[test]
    fn the_disaggregated_2021_file_holds_2178_rows_of_220_markets_over_eleven_reports() {
        let p = parse(&[real(DISAGG)], &disagg_ctx()).unwrap();
        assert_eq!(p.rows.len(), 2178);
        let markets: std::collections::BTreeSet<_> =
            p.rows.iter().map(|r| r.entity_id.clone()).collect();
        assert_eq!(markets.len(), 220);
        let days: std::collections::BTreeSet<_> = p.rows.iter().map(|r| r.event_at).collect();
        assert_eq!(days.len(), 11);
        assert_eq!(days.first().unwrap().unwrap(), d("2021-01-05").end_of_day());
        assert_eq!(days.last().unwrap().unwrap(), d("2021-03-16").end_of_day());
    }

    #[test]
    fn every_row_of_the_01_13_snapshot_is_in_the_01_17_snapshot_unchanged() {
        let a = parse(&[real(LEGACY_13)], &capture_of("2025-01-13")).unwrap();
        let b = parse(&[real(LEGACY_17)], &capture_of("2025-01-17")).unwrap();
        let later: HashMap<&str, &NewsRow> = b.rows.iter().map(|r| (r.id.as_str(), r)).collect();
        for r in &a.rows {
            let mut again = (*later.get(r.id.as_str()).unwrap()).clone();
            // Only the capture differs; the pipeline keeps the first-seen one.
            assert_eq!(again.published_at, Some(t("2025-01-17T23:00:02Z")));
            again.published_at = r.published_at;
            assert_eq!(&again, r);
        }
    }

    #[test]
    fn the_wheat_row_of_the_01_13_snapshot_is_read_field_by_field() {
        let p = parse(&[real(LEGACY_13)], &capture_of("2025-01-13")).unwrap();
        let r = &p.rows[0];
        assert_eq!(r.id, "legacy_futures_only:001602@2025-01-07");
        assert_eq!(r.entity_id.as_deref(), Some("001602"));
        assert_eq!(r.form.as_deref(), Some("legacy_futures_only"));
        assert_eq!(
            r.title,
            "WHEAT-SRW - CHICAGO BOARD OF TRADE (COT legacy futures-only, positions of 2025-01-07)"
        );
        assert_eq!(
            r.source_locator,
            "https://www.cftc.gov/files/dea/history/deacot2025.zip"
        );
        assert_eq!(r.event_at, Some(t("2025-01-07T23:59:59Z")));
        assert_eq!(r.published_at, Some(t("2025-01-13T23:00:02Z")));
        assert_eq!(r.available_at, None);
        assert_eq!(r.acceptance_at, None);
        assert_eq!(r.committed_at, None);
        assert_eq!(
            r.availability_basis,
            asof_engine::AvailabilityBasis::Unknown
        );
        assert_eq!((r.cik.as_deref(), r.accession.as_deref()), (None, None));
        assert_eq!(r.lane, Lane::CertifiedPit);
        assert_eq!(r.source_id, SourceId::CftcCot);
        let v = payload(r);
        assert_eq!(v.as_object().unwrap().len(), 129);
        assert_eq!(
            v["Market and Exchange Names"],
            "WHEAT-SRW - CHICAGO BOARD OF TRADE"
        );
        assert_eq!(v["As of Date in Form YYMMDD"], "250107");
        assert_eq!(v["CFTC Contract Market Code"], "001602");
        assert_eq!(v["CFTC Market Code in Initials"], "CBT");
        assert_eq!(v["CFTC Region Code"], "00");
        assert_eq!(v["CFTC Commodity Code"], "001");
        assert_eq!(v["Open Interest (All)"], 471935);
        assert_eq!(v["Noncommercial Positions-Long (All)"], 138397);
        assert_eq!(v["Noncommercial Positions-Short (All)"], 217871);
        // The header's own leading space is not part of the key.
        assert!(v.get("Total Reportable Positions-Long (All)").is_some());
        assert_eq!(v["% of OI-Noncommercial-Long (All)"], 29.3);
        assert_eq!(v["Concentration-Net LT =8 TDR-Short (Other)"], 41.0);
        assert_eq!(v["Contract Units"], "(CONTRACTS OF 5,000 BUSHELS)");
    }

    #[test]
    fn a_market_new_in_the_01_14_report_keeps_cftc_dots_as_strings() {
        let p = parse(&[real(LEGACY_17)], &capture_of("2025-01-17")).unwrap();
        let r = find(&p, "legacy_futures_only:0063EN@2025-01-14");
        assert_eq!(
            r.title,
            "WASHINGTON CARBON ALL V2025 - ICE FUTURES ENERGY DIV (COT legacy futures-only, positions of 2025-01-14)"
        );
        assert_eq!(r.entity_id.as_deref(), Some("0063EN"));
        assert_eq!(r.event_at, Some(t("2025-01-14T23:59:59Z")));
        assert_eq!(r.published_at, Some(t("2025-01-17T23:00:02Z")));
        assert_eq!(
            (r.available_at, r.acceptance_at, r.committed_at),
            (None, None, None)
        );
        let v = payload(r);
        assert_eq!(v["CFTC Region Code"], "01");
        assert_eq!(v["CFTC Commodity Code"], "006");
        assert_eq!(v["Open Interest (All)"], 1689);
        assert_eq!(v["Noncommercial Positions-Long (All)"], 921);
        assert_eq!(v["% of OI-Noncommercial-Long (All)"], 54.5);
        // No previous week to change from.
        assert_eq!(v["Change in Open Interest (All)"], ".");
        assert_eq!(v["Contract Units"], "1,000 Washington carbon allowances");
        assert!(
            !p.rows
                .iter()
                .any(|r| r.id == "legacy_futures_only:0063EN@2025-01-07")
        );
    }

    #[test]
    fn disaggregated_rows_are_read_field_by_field() {
        let p = parse(&[real(DISAGG)], &disagg_ctx()).unwrap();
        let r = &p.rows[0];
        assert_eq!(r.id, "disaggregated_futures_only:001602@2021-03-16");
        assert_eq!(r.entity_id.as_deref(), Some("001602"));
        assert_eq!(r.form.as_deref(), Some("disaggregated_futures_only"));
        assert_eq!(
            r.title,
            "WHEAT-SRW - CHICAGO BOARD OF TRADE (COT disaggregated futures-only, positions of 2021-03-16)"
        );
        assert_eq!(
            r.source_locator,
            "https://www.cftc.gov/files/dea/history/fut_disagg_txt_2021.zip"
        );
        assert_eq!(r.event_at, Some(t("2021-03-16T23:59:59Z")));
        assert_eq!(r.published_at, Some(t("2021-03-26T23:59:59Z")));
        assert_eq!(
            (r.available_at, r.acceptance_at, r.committed_at),
            (None, None, None)
        );
        assert_eq!(
            r.availability_basis,
            asof_engine::AvailabilityBasis::Unknown
        );
        let v = payload(r);
        assert_eq!(v.as_object().unwrap().len(), 191);
        assert_eq!(v["As_of_Date_In_Form_YYMMDD"], "210316");
        assert_eq!(v["CFTC_Market_Code"], "CBT");
        assert_eq!(v["Open_Interest_All"], 419121);
        assert_eq!(v["Prod_Merc_Positions_Long_All"], 31644);
        assert_eq!(v["Prod_Merc_Positions_Short_All"], 136997);
        assert_eq!(v["Pct_of_OI_Prod_Merc_Long_All"], 7.5);
        assert_eq!(v["Traders_Other_Rept_Spread_Old"], ".");
        assert_eq!(v["CFTC_SubGroup_Code"], "A10");
        assert_eq!(v["FutOnly_or_Combined"], "FutOnly");

        let r = find(&p, "disaggregated_futures_only:00160F@2021-01-05");
        assert_eq!(
            r.title,
            "BLACK SEA WHEAT FINANCIAL - CHICAGO BOARD OF TRADE (COT disaggregated futures-only, positions of 2021-01-05)"
        );
        assert_eq!(r.event_at, Some(t("2021-01-05T23:59:59Z")));
        assert_eq!(r.published_at, Some(t("2021-03-26T23:59:59Z")));
        let v = payload(r);
        assert_eq!(v["Open_Interest_All"], 22303);
        assert_eq!(v["Prod_Merc_Positions_Long_All"], 9256);
        assert_eq!(v["Pct_of_OI_Prod_Merc_Long_All"], 41.5);
        assert_eq!(v["Traders_Swap_Short_All"], ".");
        assert_eq!(v["Contract_Units"], "50 Metric Tons");
    }

    #[test]
    fn consolidated_markets_keep_the_plus_of_their_code() {
        let p = parse(&[real(LEGACY_13)], &capture_of("2025-01-13")).unwrap();
        let r = find(&p, "legacy_futures_only:13874+@2025-01-07");
        assert_eq!(r.entity_id.as_deref(), Some("13874+"));
        assert!(
            r.title
                .starts_with("S&P 500 Consolidated - CHICAGO MERCANTILE EXCHANGE (")
        );
        assert_eq!(payload(r)["CFTC Contract Market Code"], "13874+");
    }

    #[test]
    fn a_renamed_market_keeps_its_code_and_each_report_its_own_name() {
        let p = parse(&[real(DISAGG)], &disagg_ctx()).unwrap();
        let title = |day: &str| {
            find(&p, &format!("disaggregated_futures_only:06439S@{day}"))
                .title
                .clone()
        };
        assert!(title("2021-02-23").starts_with("ERCOT - SOUTH ZONE - ICE FUTURES ENERGY DIV ("));
        assert!(
            title("2021-03-02")
                .starts_with("ERCOT SOUTH 345 KV RT PEAK FIX - ICE FUTURES ENERGY DIV (")
        );
        let rows = p
            .rows
            .iter()
            .filter(|r| r.entity_id.as_deref() == Some("06439S"))
            .count();
        assert_eq!(rows, 11);
    }

    #[test]
    fn rows_are_published_at_the_capture_which_is_a_whole_day() {
        let p = parse(&[real(LEGACY_17)], &capture_of("2025-01-17")).unwrap();
        assert!(p.published_is_capture);
        assert!(p.snapshot.is_none());
        assert_eq!(p.whole_days, vec![d("2025-01-17")]);
        assert!(
            p.rows
                .iter()
                .all(|r| r.published_at == Some(t("2025-01-17T23:00:02Z")))
        );
    }

    #[test]
    fn two_copies_of_one_capture_give_each_row_once() {
        let c = capture_of("2025-01-17");
        let p = parse(&[real(LEGACY_13), real(LEGACY_17)], &c).unwrap();
        assert_eq!(p.rows.len(), 626);
        let changed = edited(LEGACY_13, 2, |l| l.replace("  471935", "  471936"));
        let e = parse(&[changed, real(LEGACY_17)], &c)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(LEGACY_17)
                && e.contains("record legacy_futures_only:001602@2025-01-07")
                && e.contains("other values"),
            "{e}"
        );
    }

    #[test]
    fn commit_instants_map_each_commit_day_of_the_real_scrape_to_its_instant() {
        let f = real("legacy_futures_only_2025_weekly_asof/COMMITS.txt");
        let m = commit_instants("COMMITS.txt", std::str::from_utf8(&f.bytes).unwrap()).unwrap();
        assert_eq!(m.len(), 12);
        assert_eq!(m[&d("2025-01-13")], t("2025-01-13T23:00:02Z"));
        assert_eq!(m[&d("2025-01-17")], t("2025-01-17T23:00:02Z"));
        assert_eq!(m[&d("2024-12-20")], t("2024-12-20T23:00:03Z"));
        assert_eq!(m[&d("2025-03-14")], t("2025-03-14T23:00:03Z"));
    }

    #[test]
    fn commit_instants_keep_the_latest_commit_of_a_day() {
        let text = "aaaaaaa 2025-01-13T08:00:00Z\n\nbbbbbbb 2025-01-13T23:00:02Z\ncccccccc 2025-01-12T01:00:00Z\n";
        let m = commit_instants("COMMITS.txt", text).unwrap();
        assert_eq!(m[&d("2025-01-13")], t("2025-01-13T23:00:02Z"));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn commit_instants_refuse_a_malformed_line_with_its_number() {
        let text = "f0a02d8 2025-01-13T23:00:02Z 23:00 13/01/2025\nf03c915 2025-01-17 23:00\n";
        let e = commit_instants("COMMITS.txt", text)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("COMMITS.txt: line 2") && e.contains("2025-01-17"),
            "{e}"
        );
        let e = commit_instants("COMMITS.txt", "not-a-sha 2025-01-17T23:00:02Z\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("commit hash"), "{e}");
        assert!(commit_instants("COMMITS.txt", "\n").is_err());
    }

    #[test]
    fn a_truncated_file_is_refused_with_its_last_line() {
        let mut f = real(LEGACY_17);
        let text = String::from_utf8(f.bytes.clone()).unwrap();
        // Cut inside line 301's quoted market name.
        let start: usize = text.split_inclusive('\n').take(300).map(str::len).sum();
        f.bytes.truncate(start + 10);
        let e = err(f, &capture_of("2025-01-17"));
        assert!(
            e.contains(LEGACY_17) && e.contains("line 301") && e.contains("truncated"),
            "{e}"
        );
    }

    #[test]
    fn a_row_cut_short_is_refused_with_its_line() {
        let f = edited(LEGACY_13, 5, |l| {
            let cut = l.rfind(",\"").unwrap();
            format!("{}\n", &l[..cut])
        });
        let e = err(f, &capture_of("2025-01-13"));
        assert!(
            e.contains(LEGACY_13)
                && e.contains("line 5")
                && e.contains("128 fields where the header has 129"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_report_date_is_refused_with_its_line() {
        let f = edited(DISAGG, 7, |l| l.replacen(",2021-02-09,", ",2021-02-30,", 1));
        let e = err(f, &disagg_ctx());
        assert!(
            e.contains(DISAGG)
                && e.contains("line 7")
                && e.contains("\"2021-02-30\" is not a date"),
            "{e}"
        );
        let f = edited(LEGACY_13, 3, |l| {
            l.replacen(",2025-01-07,", ",01/07/2025,", 1)
        });
        let e = err(f, &capture_of("2025-01-13"));
        assert!(
            e.contains("line 3") && e.contains("\"01/07/2025\" is not a date"),
            "{e}"
        );
    }

    #[test]
    fn a_short_date_that_disagrees_with_the_report_date_is_refused() {
        let f = edited(LEGACY_13, 4, |l| l.replacen(",250107,", ",250108,", 1));
        let e = err(f, &capture_of("2025-01-13"));
        assert!(e.contains("line 4") && e.contains("disagrees"), "{e}");
    }

    #[test]
    fn a_missing_market_code_is_refused_with_its_line() {
        let f = edited(LEGACY_13, 2, |l| l.replacen(",001602,", ",      ,", 1));
        let e = err(f, &capture_of("2025-01-13"));
        assert!(
            e.contains(LEGACY_13)
                && e.contains("line 2")
                && e.contains("CFTC Contract Market Code"),
            "{e}"
        );
    }

    #[test]
    fn a_duplicate_record_in_one_file_is_refused() {
        let f = real(LEGACY_13);
        let text = String::from_utf8(f.bytes).unwrap();
        let second = text.lines().nth(1).unwrap();
        let f = InputFile {
            name: f.name,
            bytes: format!("{text}{second}\n").into_bytes(),
        };
        let e = err(f, &capture_of("2025-01-13"));
        assert!(
            e.contains("line 312")
                && e.contains(
                    "duplicate record legacy_futures_only:001602@2025-01-07 (first at line 2)"
                ),
            "{e}"
        );
    }

    #[test]
    fn faults_of_the_crlf_file_name_the_physical_line() {
        let e = err(
            edited(DISAGG, 2, |l| l.replacen(",001602,", ",00-602,", 1)),
            &disagg_ctx(),
        );
        assert!(e.contains(": line 2: "), "{e}");
        let e = err(
            edited(DISAGG, 2179, |l| l.replacen(",2021-", ",2O21-", 1)),
            &disagg_ctx(),
        );
        assert!(e.contains(": line 2179: "), "{e}");
    }

    #[test]
    fn lines_counted_record_by_record_equal_lines_counted_from_the_start() {
        for path in [DISAGG, LEGACY_13] {
            let file = real(path);
            let text = std::str::from_utf8(&file.bytes).unwrap();
            let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
            let mut numbering = Lines::new(text);
            let mut n = 0;
            let mut last = None;
            for record in reader.records() {
                let pos = record.unwrap().position().unwrap().clone();
                let line = numbering.of(&pos);
                // Counting from the start is itself quadratic: every 50th record and the last.
                if n % 50 == 0 {
                    assert_eq!(line, physical_line(text, &pos), "{path}");
                }
                last = Some((pos, line));
                n += 1;
            }
            let (pos, line) = last.unwrap();
            assert_eq!(line, physical_line(text, &pos), "{path}");
            assert!(n > 300, "{path}: {n} records");
        }
    }

    #[test]
    fn a_combined_futures_and_options_row_is_refused() {
        let f = edited(DISAGG, 9, |l| l.replace("\"FutOnly\"", "\"Combined\""));
        let e = err(f, &disagg_ctx());
        assert!(e.contains("line 9") && e.contains("Combined"), "{e}");
    }

    #[test]
    fn a_report_dated_after_the_capture_is_refused() {
        let e = err(real(LEGACY_17), &capture_of("2025-01-13"));
        assert!(
            e.contains("line 2") && e.contains("after the capture"),
            "{e}"
        );
    }

    #[test]
    fn without_a_capture_instant_the_file_is_refused() {
        let c = Context {
            captured_at: None,
            ..disagg_ctx()
        };
        let e = err(real(DISAGG), &c);
        assert!(e.contains(DISAGG) && e.contains("--captured-at"), "{e}");
    }

    #[test]
    fn a_call_for_another_source_is_refused() {
        let c = Context {
            source: SourceId::OfacSdn,
            ..disagg_ctx()
        };
        let e = err(real(DISAGG), &c);
        assert!(e.contains(DISAGG) && e.contains("us.ofac.sdn"), "{e}");
    }

    #[test]
    fn an_empty_file_is_refused() {
        let f = InputFile {
            name: "annual.txt".into(),
            bytes: b"\r\n".to_vec(),
        };
        let e = err(f, &disagg_ctx());
        assert!(e.contains("annual.txt: file: the file is empty"), "{e}");
    }

    #[test]
    fn a_header_without_rows_is_refused() {
        let f = real(DISAGG);
        let text = String::from_utf8(f.bytes).unwrap();
        let header = text.split_inclusive('\n').next().unwrap().to_owned();
        let f = InputFile {
            name: f.name,
            bytes: header.into_bytes(),
        };
        let e = err(f, &disagg_ctx());
        assert!(e.contains("line 2") && e.contains("no rows"), "{e}");
    }

    #[test]
    fn a_latin1_file_is_refused_with_its_line() {
        let mut f = edited(DISAGG, 4, |l| l.replacen("WHEAT", "WH\u{00C9}AT", 1));
        let at = f
            .bytes
            .windows(2)
            .position(|w| w == "\u{00C9}".as_bytes())
            .unwrap();
        f.bytes = [&f.bytes[..at], &[0xC9], &f.bytes[at + 2..]].concat();
        let e = err(f, &disagg_ctx());
        assert!(
            e.contains(DISAGG) && e.contains("line 4") && e.contains("not UTF-8"),
            "{e}"
        );
    }

    #[test]
    fn other_files_are_refused_by_their_header() {
        let f = InputFile {
            name: "FinFutYY.txt".into(),
            bytes: b"\"Market_and_Exchange_Names\",\"As_of_Date_In_Form_YYMMDD\",\"Report_Date_as_YYYY-MM-DD\",\"CFTC_Contract_Market_Code\",\"Dealer_Positions_Long_All\"\n\"X\",\"210316\",\"2021-03-16\",\"1\",\"5\"\n".to_vec(),
        };
        let e = err(f, &disagg_ctx());
        assert!(
            e.contains("FinFutYY.txt: line 1")
                && e.contains("not a disaggregated futures-only file"),
            "{e}"
        );
        let f = InputFile {
            name: "sdn.csv".into(),
            bytes: b"36,\"AEROCARIBBEAN AIRLINES\",\"-0-\"\n".to_vec(),
        };
        let e = err(f, &disagg_ctx());
        assert!(
            e.contains("sdn.csv: line 1") && e.contains("not a CFTC COT"),
            "{e}"
        );
    }

    #[test]
    fn codes_and_dates_stay_strings_and_counts_become_numbers() {
        assert_eq!(field_value("CFTC Region Code", "00"), Value::from("00"));
        assert_eq!(
            field_value("CFTC_Contract_Market_Code", "123456"),
            Value::from("123456")
        );
        assert_eq!(
            field_value("As of Date in Form YYMMDD", "250107"),
            Value::from("250107")
        );
        assert_eq!(
            field_value("Open Interest (All)", "  471935"),
            Value::from(471935)
        );
        assert_eq!(
            field_value("Change in Open Interest (All)", "   -120"),
            Value::from(-120)
        );
        assert_eq!(field_value("% of OI (All)", "  100.0"), Value::from(100.0));
        assert_eq!(
            field_value("Change in Open Interest (All)", "."),
            Value::from(".")
        );
    }
}
