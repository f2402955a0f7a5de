//! The contract every source adapter meets, and the small parsing helpers they share.
//!
//! An adapter is a pure function from the bytes of one ingest's input files (plus the capture
//! instant the caller knows from provenance) to [`Parsed`]: dated event rows, and for sources
//! published as whole lists a [`Snapshot`] of the list. The pipeline (`crate::pipeline`) turns
//! snapshots into change rows against what the corpus already holds, sets `committed_at`,
//! certifies days and publishes; adapters never touch the corpus.

use std::collections::BTreeMap;

use asof_engine::model::clock::{Day, Instant, Lane, SourceId};
use asof_engine::model::identity::{Observation, ObservedName};
use asof_engine::model::record::NewsRow;
use asof_engine::write::spill::RowSpill;

use crate::error::{Error, Result};

/// One input file in memory: its name as given on the command line (used in every error and
/// as the evidence name of certificates) and its bytes. Adapters of small formats parse these.
#[derive(Debug, Clone)]
pub struct InputFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// One input file of an ingest: in memory (a poller's fetch, a test's bytes) or on disk (the
/// command line's files), read only when an adapter asks. Why on disk: a GLEIF golden copy
/// runs to gigabytes, and its adapter streams it ([`Input::reader`]) instead of holding it;
/// the adapters of small formats load the file whole ([`Input::load`]).
#[derive(Debug, Clone)]
pub enum Input {
    Memory(InputFile),
    Disk {
        /// The path as given (errors and certificate evidence name it).
        name: String,
        path: std::path::PathBuf,
    },
}

impl From<InputFile> for Input {
    fn from(f: InputFile) -> Self {
        Input::Memory(f)
    }
}

impl Input {
    /// A file on disk, checked to be a readable regular file now, so a wrong path fails before
    /// any file is parsed.
    pub fn open(path: &std::path::Path) -> Result<Self> {
        let name = path.display().to_string();
        let meta = std::fs::metadata(path)
            .map_err(|e| Error::parse(&name, "file", format!("cannot read: {e}")))?;
        if !meta.is_file() {
            return Err(Error::parse(
                &name,
                "file",
                "cannot read: not a regular file",
            ));
        }
        std::fs::File::open(path)
            .map_err(|e| Error::parse(&name, "file", format!("cannot read: {e}")))?;
        Ok(Input::Disk {
            name,
            path: path.to_owned(),
        })
    }

    pub fn name(&self) -> &str {
        match self {
            Input::Memory(f) => &f.name,
            Input::Disk { name, .. } => name,
        }
    }

    /// The whole file in memory (a copy of an in-memory one).
    pub fn load(&self) -> Result<InputFile> {
        match self {
            Input::Memory(f) => Ok(f.clone()),
            Input::Disk { name, path } => Ok(InputFile {
                name: name.clone(),
                bytes: std::fs::read(path)
                    .map_err(|e| Error::parse(name, "file", format!("cannot read: {e}")))?,
            }),
        }
    }

    /// The file's bytes as a buffered stream.
    pub fn reader(&self) -> Result<Box<dyn std::io::BufRead + Send + '_>> {
        match self {
            Input::Memory(f) => Ok(Box::new(f.bytes.as_slice())),
            Input::Disk { name, path } => {
                let file = std::fs::File::open(path)
                    .map_err(|e| Error::parse(name, "file", format!("cannot read: {e}")))?;
                Ok(Box::new(std::io::BufReader::with_capacity(1 << 20, file)))
            }
        }
    }

    /// The first `n` bytes (fewer for a shorter file): enough to tell a file's format.
    pub fn head(&self, n: usize) -> Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::with_capacity(n);
        self.reader()?
            .take(n as u64)
            .read_to_end(&mut out)
            .map_err(|e| Error::parse(self.name(), "file", format!("cannot read: {e}")))?;
        Ok(out)
    }

    /// sha256 of the file's bytes (hex), read as a stream.
    pub fn sha256(&self) -> Result<String> {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        let mut reader = self.reader()?;
        loop {
            let chunk = reader
                .fill_buf()
                .map_err(|e| Error::parse(self.name(), "file", format!("cannot read: {e}")))?;
            if chunk.is_empty() {
                break;
            }
            hasher.update(chunk);
            let n = chunk.len();
            reader.consume(n);
        }
        Ok(hex::encode(hasher.finalize()))
    }
}

/// What the caller knows about the files beyond their bytes.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    pub source: SourceId,
    pub lane: Lane,
    /// When the files were captured (fetched, downloaded, committed to a scrape repository).
    /// Adapters of snapshot and cumulative sources use it as the instant the rows became
    /// knowable when the file carries no better one; `None` when the caller gave none.
    pub captured_at: Option<Instant>,
}

/// What one ingest's files give.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Dated records. `committed_at` is left `None` (the pipeline sets it), `revision_id`,
    /// `content_sha256` and `supersedes` are left empty (publish seals rows).
    pub rows: Vec<NewsRow>,
    /// More dated records under the same rules, from inputs large enough to stream (EDGAR
    /// index files): held in memory up to a limit and past it in a temporary file, and
    /// published before `rows`.
    pub spilled: RowSpill,
    /// True when `published_at` of `rows` is the capture instant of the file (cumulative files
    /// such as the CFTC annual text file, whose rows carry no publication time): a row already
    /// held with the same content keeps its earlier, first-seen `published_at`.
    pub published_is_capture: bool,
    /// The state of a list the files show (OFAC SDN, GLEIF records); `None` for event sources.
    pub snapshot: Option<Snapshot>,
    /// A list too big to hold (a GLEIF golden copy), its entries sorted through temporary
    /// files; compared with the list state as a stream.
    pub golden: Option<SpilledSnapshot>,
    /// UTC days the files cover completely by their nature (a daily index is a whole day; a
    /// full list snapshot is the whole list on its capture day). The pipeline certifies them.
    pub whole_days: Vec<Day>,
    /// Ticker → CIK observations the files make (SEC ticker lists, submissions captures); the
    /// pipeline folds them into the version's identity intervals.
    pub observations: Vec<Observation>,
    /// Company names with their validity the files show (submissions captures).
    pub names: Vec<ObservedName>,
}

/// The state of a list too big to hold at one instant (a GLEIF golden copy): its entries
/// spilled to temporary files, sorted by key on the way out.
#[derive(Debug)]
pub struct SpilledSnapshot {
    /// The instant the list was in this state (a golden copy's publish time).
    pub captured_at: Instant,
    /// True for the whole list (an entity held before and absent now was removed), false for
    /// a delta (absence says nothing).
    pub full: bool,
    /// The entries, sorted by key on the way out.
    pub entries: crate::entries::EntrySpill,
    /// Records read (a key given twice, identically, counts twice).
    pub records: u64,
}

/// The state of a list at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// When the list was in this state (and became knowable as such).
    pub captured_at: Instant,
    /// True when the list is complete: an entity held before and absent now was removed.
    /// False for responses that speak only for the entities they contain.
    pub full: bool,
    /// Entities by the source's own identifier (OFAC `ent_num`, LEI).
    pub entries: BTreeMap<String, Entry>,
}

/// One entity of a list snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Human-readable name of the entity (becomes the change row's title).
    pub name: String,
    /// URL of the entity's record at the source.
    pub locator: String,
    /// The entity's fields as the source gives them; compared whole to detect modifications.
    pub fields: serde_json::Value,
}

/// Decodes a file as UTF-8 (a leading byte-order mark is dropped). A file in another encoding
/// is refused, naming the line and byte where decoding failed: guessing an encoding could
/// silently corrupt names.
pub fn utf8(file: &InputFile) -> Result<&str> {
    let bytes = file
        .bytes
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(&file.bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::parse(
            &file.name,
            format!("line {line}, byte {at}"),
            "not UTF-8 text (the file is in another encoding or corrupt)",
        )
    })
}

/// Parses a JSON document, or an error naming the line and column where it breaks (a
/// truncated download ends mid-value).
pub fn json(file: &str, bytes: &[u8]) -> Result<serde_json::Value> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::parse(
            file,
            format!("line {} column {}", e.line(), e.column()),
            format!("not valid JSON (truncated or corrupt): {e}"),
        )
    })
}

/// Refuses an empty (or whitespace-only) file: an empty download is a failed download, never
/// "no rows".
pub fn non_empty(file: &InputFile) -> Result<()> {
    if file.bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::parse(&file.name, "file", "the file is empty"));
    }
    Ok(())
}

/// A date in one of the layouts agencies use: `YYYY-MM-DD`, `YYYYMMDD`, `MM/DD/YYYY`, or an
/// RFC 3339 instant at midnight UTC (`2025-03-14T00:00:00Z`, GLEIF's dates). Returns `None`
/// for anything else, including impossible dates.
pub fn parse_date(s: &str) -> Option<Day> {
    let s = s.trim();
    if let Ok(d) = s.parse::<Day>() {
        return Some(d);
    }
    if s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit()) {
        return Day::parse_compact(s);
    }
    if let Some((m, rest)) = s.split_once('/')
        && let Some((d, y)) = rest.split_once('/')
        && m.len() == 2
        && d.len() == 2
        && y.len() == 4
    {
        return format!("{y}-{m}-{d}").parse().ok();
    }
    if let Some(date) = s.strip_suffix("T00:00:00Z") {
        return date.parse().ok();
    }
    None
}

/// [`parse_date`] or a parse error naming the field.
pub fn date_field(file: &str, location: &str, field: &str, value: &str) -> Result<Day> {
    parse_date(value).ok_or_else(|| {
        Error::parse(
            file,
            location,
            format!("{field}: {value:?} is not a date (YYYY-MM-DD, YYYYMMDD or MM/DD/YYYY)"),
        )
    })
}

/// An optional date: empty, `N/A` and the like give `None`; anything else must parse.
pub fn opt_date_field(file: &str, location: &str, field: &str, value: &str) -> Result<Option<Day>> {
    let v = value.trim();
    if v.is_empty() || v.eq_ignore_ascii_case("n/a") || v == "-0-" {
        return Ok(None);
    }
    date_field(file, location, field, v).map(Some)
}

/// A new row with the fields every non-EDGAR adapter sets the same way; the caller fills the
/// clocks and any other field. `cik`, `accession` stay `None`.
pub fn base_row(
    ctx: &Context,
    id: String,
    entity_id: String,
    form: Option<String>,
    title: String,
    source_locator: String,
    payload: &serde_json::Value,
) -> NewsRow {
    NewsRow {
        id,
        source_id: ctx.source,
        lane: ctx.lane,
        form,
        accession: None,
        cik: None,
        title,
        event_at: None,
        published_at: None,
        available_at: None,
        acceptance_at: None,
        committed_at: None,
        availability_basis: asof_engine::AvailabilityBasis::Unknown,
        revision_id: String::new(),
        supersedes: None,
        content_sha256: String::new(),
        source_locator,
        entity_id: Some(entity_id),
        payload: Some(canonical_json(payload)),
    }
}

/// JSON text with object keys sorted, so the same fields always give the same content hash.
pub fn canonical_json(v: &serde_json::Value) -> String {
    // Sorted explicitly: another crate of the workspace may turn on serde_json's
    // `preserve_order`, which would make key order follow the input file.
    fn sorted(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                serde_json::Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(v)).expect("a Value serializes")
}

/// The capture instant, or an error telling the operator how to give it.
pub fn require_capture(ctx: &Context, file: &str) -> Result<Instant> {
    ctx.captured_at.ok_or_else(|| {
        Error::parse(
            file,
            "file",
            "this source's files carry no publication time: give the capture instant (--captured-at)",
        )
    })
}

/// Header → column index for CSV files, with an error naming a missing column.
#[derive(Debug)]
pub struct Columns {
    file: String,
    index: BTreeMap<String, usize>,
}

impl Columns {
    pub fn new(file: &str, header: &csv::StringRecord) -> Self {
        let index = header
            .iter()
            .enumerate()
            .map(|(i, h)| (h.trim().to_owned(), i))
            .collect();
        Columns {
            file: file.to_owned(),
            index,
        }
    }
    /// Fails unless every one of `names` is a column.
    pub fn require(&self, names: &[&str]) -> Result<()> {
        for n in names {
            if !self.index.contains_key(*n) {
                return Err(Error::parse(
                    &self.file,
                    "line 1",
                    format!("missing column {n:?}"),
                ));
            }
        }
        Ok(())
    }
    /// The trimmed value of column `name` (empty when the record is short).
    pub fn get<'r>(&self, record: &'r csv::StringRecord, name: &str) -> &'r str {
        self.index
            .get(name)
            .and_then(|&i| record.get(i))
            .map_or("", str::trim)
    }
    pub fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_in_every_agency_layout() {
        let d: Day = "2024-09-29".parse().unwrap();
        assert_eq!(parse_date("2024-09-29"), Some(d));
        assert_eq!(parse_date("20240929"), Some(d));
        assert_eq!(parse_date("09/29/2024"), Some(d));
        assert_eq!(parse_date("2024-09-29T00:00:00Z"), Some(d));
        assert_eq!(parse_date("02/30/2024"), None);
        assert_eq!(parse_date("2024-09-29T12:00:00Z"), None);
        assert_eq!(parse_date(""), None);
    }

    #[test]
    fn a_file_in_another_encoding_is_refused_with_its_line() {
        let f = InputFile {
            name: "sdn.csv".into(),
            bytes: b"36,\"AERO\"\n37,\"CAF\xC9\"\n".to_vec(),
        };
        let err = utf8(&f).unwrap_err().to_string();
        assert!(err.contains("sdn.csv") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn an_empty_file_is_refused() {
        let f = InputFile {
            name: "x.json".into(),
            bytes: b" \n".to_vec(),
        };
        assert!(non_empty(&f).unwrap_err().to_string().contains("empty"));
    }
}
