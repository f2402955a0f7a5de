//! Delta Lake logs beside the corpus's objects: every corpus version is also a version of
//! each of its Delta tables, so Spark, DuckDB, Polars and the Delta Sharing protocol read the
//! very same Parquet files, time-travelling by version, with no copy.
//!
//! **Tables** ([`Table`]). One per source and lane of records, rooted where its partitions live
//! (`snapshots/partitions/<source>/<lane>/`), files named relative to the root
//! (`<date>/<sha256>.parquet`) with partition column `date`. Beside each, the rule tables an
//! engine needs to apply the as-of rule (`crate::rule::tables`: `supersessions` and
//! `coverage`, rooted at `snapshots/rule/<source>/<lane>/<table>/`), and one table of the
//! identity intervals (`snapshots/identity/`). A rule or identity table holds one file per
//! version, the object the manifest lists: a version that replaces it removes the old file and
//! adds the new one. Each table's log is in `_delta_log/` under its root. The derived access
//! files are in no table.
//!
//! **Versions.** A publish that changes a table's files commits that table's next version
//! (`add` for files the new corpus version lists and its parent did not, `remove` for the
//! reverse); a table the publish leaves alone keeps its version. The mapping is recorded in
//! the manifest (`delta`: table key → table version) and in every commit (`commitInfo` names
//! the corpus version and its parent), so `corpus_version` V is exactly table version
//! `V.delta[table]` of each table, and back. Manifests written before the mapping existed get
//! it derived by the same rule, walking their parents; a table first recorded by a later
//! version (the rule and identity tables, for corpora published before they had logs) starts
//! at version 0 there, holding that version's file.
//!
//! **Written after the pointer.** A commit names its corpus version, known only once the
//! manifest is written, and a publisher can still lose the pointer race after that; so commits
//! are written once the pointer has moved, by [`sync`], which writes whatever commits the chain
//! up to a version lacks (the publisher's own, an earlier publisher's that died between its
//! pointer and its log, or a whole old corpus: `asof delta backfill`).
//!
//! **Deterministic bytes.** A commit is a pure function of the manifest chain (timestamps are
//! the manifests' `created_at`, the table id is derived from its name, statistics come from
//! the manifest and the Parquet footers). Two writers racing on one commit write the same
//! bytes (the object is immutable: the second finds it equal), and `asof verify` re-derives
//! every commit and compares it byte for byte ([`check`]). This is also why the log is written
//! here rather than through `deltalake-core`: its commit builder stamps wall-clock times and
//! resolves conflicts by retrying on the next version number, which would break both.
//!
//! Logs are never cleaned (`delta.enableExpiredLogCleanup=false`) and files never vacuumed:
//! every version stays readable, as every corpus version does. No checkpoints are written
//! yet: a reader replays the JSON commits, one per publish that touched the table.

use std::collections::{BTreeMap, BTreeSet};

use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::format::rule as rule_tables;
use crate::format::rule::RuleTable;
use crate::model::clock::{Instant, Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry, PartitionEntry};
use crate::model::record::schema;
use crate::store::CorpusStore;

/// Table key → table version, as the manifest records it.
pub type TableVersions = BTreeMap<String, u64>;

/// The folder of a table's log, under its root.
pub const LOG_DIR: &str = "_delta_log";

/// Table configuration: the log is never cleaned up, so every version stays readable.
pub const CONFIGURATION: [(&str, &str); 1] = [("delta.enableExpiredLogCleanup", "false")];

/// The root of the identity table.
const IDENTITY_ROOT: &str = "snapshots/identity";
/// The manifest kind of the identity object the identity table holds.
const IDENTITY_KIND: &str = "identity.ticker_intervals";

/// One Delta table of a corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// A source-lane's records: its partitions, partitioned by `date`.
    Records(SourceId, Lane),
    /// One of a source-lane's rule tables (`crate::rule::tables`): one file per version.
    Rule(SourceId, Lane, RuleTable),
    /// The identity intervals (ticker ↔ CIK, as `/v1/mapping`): one file per version.
    Identity,
}

impl Table {
    /// The key of the table in the manifest's `delta` map: `<source_id>/<lane>` for records,
    /// `<source_id>/<lane>/<rule table>` for a rule table, `identity`.
    pub fn key(self) -> String {
        match self {
            Table::Records(s, l) => format!("{s}/{l}"),
            Table::Rule(s, l, t) => format!("{s}/{l}/{}", t.name()),
            Table::Identity => "identity".into(),
        }
    }

    /// The table a key names, if it names one.
    pub fn parse(key: &str) -> Option<Table> {
        if key == "identity" {
            return Some(Table::Identity);
        }
        let mut parts = key.split('/');
        let (s, l) = (parts.next()?, parts.next()?);
        let source = *SourceId::ALL.iter().find(|x| x.as_str() == s)?;
        let lane = *Lane::ALL.iter().find(|x| x.as_str() == l)?;
        let table = match parts.next() {
            None => Table::Records(source, lane),
            Some(t) => Table::Rule(
                source,
                lane,
                RuleTable::ALL.into_iter().find(|r| r.name() == t)?,
            ),
        };
        parts.next().is_none().then_some(table)
    }

    /// The table's root under the corpus root: where its files live, its log beneath.
    pub fn root(self) -> String {
        match self {
            Table::Records(s, l) => format!("snapshots/partitions/{s}/{l}"),
            Table::Rule(s, l, t) => rule_tables::table_dir(s, l, t),
            Table::Identity => IDENTITY_ROOT.into(),
        }
    }

    /// The object path of one commit of the table.
    pub fn commit_path(self, version: u64) -> String {
        format!("{}/{LOG_DIR}/{version:020}.json", self.root())
    }

    /// The table's id: a UUID-shaped digest of its key, the same in every corpus and run.
    pub fn id(self) -> String {
        let h = crate::store::hashing::sha256_hex(
            format!("asof delta table {}", self.key()).as_bytes(),
        );
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    /// The partition columns of the table's files.
    fn partition_columns(self) -> Vec<String> {
        match self {
            Table::Records(..) => vec!["date".into()],
            Table::Rule(..) | Table::Identity => vec![],
        }
    }

    /// The Arrow schema of the table's files.
    fn file_schema(self) -> SchemaRef {
        match self {
            Table::Records(..) => schema(),
            Table::Rule(_, _, t) => t.schema(),
            Table::Identity => crate::format::identity::intervals_schema(),
        }
    }

    fn name(self) -> String {
        let dotless = |s: SourceId| s.as_str().replace('.', "_");
        match self {
            Table::Records(s, l) => format!("{}.{l}", dotless(s)),
            Table::Rule(s, l, t) => format!("{}.{l}.{}", dotless(s), t.name()),
            Table::Identity => "identity".into(),
        }
    }

    fn description(self) -> String {
        match self {
            Table::Records(s, l) => {
                format!("asof corpus: {s} rows of the {l} lane, one partition per UTC day")
            }
            Table::Rule(s, l, RuleTable::Supersessions) => format!(
                "asof corpus: the revisions of {s} ({l} lane) superseded by a later revision, and when (the as-of rule's anti-join)"
            ),
            Table::Rule(s, l, RuleTable::Coverage) => format!(
                "asof corpus: the coverage certificate of every day of {s} ({l} lane), as /v1/coverage answers it (the as-of rule's holes)"
            ),
            Table::Identity => {
                "asof corpus: ticker and name intervals of each CIK, as /v1/mapping answers them"
                    .into()
            }
        }
    }
}

/// The key of a source-lane's records table in the manifest's `delta` map: `<source_id>/<lane>`.
pub fn table_key(source: SourceId, lane: Lane) -> String {
    Table::Records(source, lane).key()
}

/// The records table of a key, if it names one.
pub fn parse_table_key(key: &str) -> Option<(SourceId, Lane)> {
    match Table::parse(key)? {
        Table::Records(s, l) => Some((s, l)),
        _ => None,
    }
}

/// A records table's root under the corpus root (where its partitions live).
pub fn table_root(source: SourceId, lane: Lane) -> String {
    Table::Records(source, lane).root()
}

/// The object path of one commit of a records table.
pub fn commit_path(source: SourceId, lane: Lane, version: u64) -> String {
    Table::Records(source, lane).commit_path(version)
}

/// One file of a table in a manifest.
#[derive(Debug, Clone, Copy)]
pub(crate) enum File<'a> {
    Partition(&'a PartitionEntry),
    Object(&'a ObjectEntry),
}

impl<'a> File<'a> {
    /// An object's manifest kind (a partition has none).
    pub(crate) fn kind(&self) -> Option<&'a str> {
        match self {
            File::Partition(_) => None,
            File::Object(o) => Some(&o.kind),
        }
    }

    pub(crate) fn path(&self) -> &'a str {
        match self {
            File::Partition(p) => &p.path,
            File::Object(o) => &o.path,
        }
    }

    pub(crate) fn sha256(&self) -> &'a str {
        match self {
            File::Partition(p) => &p.sha256,
            File::Object(o) => &o.sha256,
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        match self {
            File::Partition(p) => p.bytes,
            File::Object(o) => o.bytes,
        }
    }

    pub(crate) fn partition_values(&self) -> BTreeMap<String, String> {
        match self {
            File::Partition(p) => BTreeMap::from([("date".to_owned(), p.date.to_string())]),
            File::Object(_) => BTreeMap::new(),
        }
    }
}

/// The path of a file relative to its table's root.
fn relative<'a>(table: Table, path: &'a str) -> Result<&'a str> {
    let root = table.root();
    path.strip_prefix(root.as_str())
        .and_then(|r| r.strip_prefix('/'))
        .ok_or_else(|| {
            Error::integrity(
                path,
                format!("a file outside its Delta table's root {root}"),
            )
        })
}

/// The files of one table in a manifest, by path relative to the table's root.
pub(crate) fn table_files(m: &Manifest, table: Table) -> Result<BTreeMap<&str, File<'_>>> {
    files_of(m, table)
        .into_iter()
        .map(|f| Ok((relative(table, f.path())?, f)))
        .collect()
}

/// The files of one table in a manifest, as the manifest lists them.
fn files_of(m: &Manifest, table: Table) -> Vec<File<'_>> {
    match table {
        Table::Records(source, lane) => m
            .partitions
            .iter()
            .filter(|p| p.source_id == source && p.lane == lane)
            .map(File::Partition)
            .collect(),
        Table::Rule(source, lane, t) => rule_tables::entry(m, source, lane, t)
            .map(File::Object)
            .into_iter()
            .collect(),
        Table::Identity => m
            .identity
            .iter()
            .filter(|e| e.kind == IDENTITY_KIND)
            .map(File::Object)
            .collect(),
    }
}

/// The tables a manifest holds files of.
fn tables_of(m: &Manifest) -> BTreeSet<Table> {
    let records = m
        .partitions
        .iter()
        .map(|p| Table::Records(p.source_id, p.lane));
    let rules = m
        .access
        .iter()
        .filter_map(rule_tables::lane_of)
        .map(|(s, l, t)| Table::Rule(s, l, t));
    let identity = m
        .identity
        .iter()
        .any(|e| e.kind == IDENTITY_KIND)
        .then_some(Table::Identity);
    records.chain(rules).chain(identity).collect()
}

/// The (path, sha256) of a table's files in a manifest: what a new table version changes.
fn file_list(m: &Manifest, table: Table) -> BTreeSet<(&str, &str)> {
    files_of(m, table)
        .into_iter()
        .map(|f| (f.path(), f.sha256()))
        .collect()
}

/// The table versions of `m`, given its parent's manifest and versions: a table whose
/// files changed moves to its next version (a new table starts at 0, and so does a table the
/// parent held but recorded no version of); the others keep theirs. Tables once created are
/// kept (with no files, if a version drops all of them).
pub fn next_versions(parent: Option<(&Manifest, &TableVersions)>, m: &Manifest) -> TableVersions {
    let mut out = parent.map(|(_, v)| v.clone()).unwrap_or_default();
    let mut tables: BTreeSet<Table> = tables_of(m);
    if let Some((pm, _)) = parent {
        tables.extend(tables_of(pm));
    }
    for table in tables {
        let key = table.key();
        let changed = match parent {
            Some((pm, _)) => file_list(pm, table) != file_list(m, table),
            None => true,
        };
        if changed || !out.contains_key(&key) {
            let next = out.get(&key).map_or(0, |v| v + 1);
            out.insert(key, next);
        }
    }
    out
}

/// The table versions of a stored version: as its manifest records them, or, for a manifest
/// written before the mapping existed, derived by walking its parents to one that records it
/// (or to the first version) and applying [`next_versions`] forward.
pub async fn versions_of(
    store: &CorpusStore,
    version: &str,
    m: &Manifest,
) -> Result<TableVersions> {
    if let Some(v) = &m.delta {
        return Ok(v.clone());
    }
    // Walk back to a recorded mapping or the first version; the manifests in between are few
    // (only those published before the mapping existed) and are read once.
    let mut chain: Vec<Manifest> = vec![m.clone()];
    let mut base: Option<TableVersions> = None;
    let mut seen = BTreeSet::from([version.to_owned()]);
    while let Some(parent) = chain.last().and_then(|x| x.parent.clone()) {
        if !seen.insert(parent.clone()) {
            return Err(Error::integrity(parent, "the manifest chain loops"));
        }
        let pm = store.manifest(&parent).await?;
        if let Some(v) = &pm.delta {
            base = Some(v.clone());
            chain.push(pm);
            break;
        }
        chain.push(pm);
    }
    chain.reverse();
    let mut versions = match base {
        Some(v) => v,
        None => next_versions(None, &chain[0]),
    };
    for pair in chain.windows(2) {
        versions = next_versions(Some((&pair[0], &versions)), &pair[1]);
    }
    Ok(versions)
}

/// One line of a commit file (the Delta protocol's actions this writer uses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    CommitInfo(CommitInfo),
    Protocol(Protocol),
    MetaData(MetaData),
    Add(Add),
    Remove(Remove),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitInfo {
    /// Milliseconds since the epoch: the corpus version's `created_at`.
    pub timestamp: i64,
    pub operation: String,
    pub operation_parameters: BTreeMap<String, String>,
    pub is_blind_append: bool,
    pub engine_info: String,
    /// The corpus version this table version is a view of.
    #[serde(rename = "asof.corpusVersion")]
    pub corpus_version: String,
    /// That corpus version's parent.
    #[serde(rename = "asof.parentVersion")]
    pub parent_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    pub min_reader_version: u32,
    pub min_writer_version: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaData {
    pub id: String,
    pub name: String,
    pub description: String,
    pub format: Format,
    pub schema_string: String,
    pub partition_columns: Vec<String>,
    pub configuration: BTreeMap<String, String>,
    pub created_time: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Format {
    pub provider: String,
    pub options: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    /// Relative to the table's root: `<date>/<sha256>.parquet`.
    pub path: String,
    pub partition_values: BTreeMap<String, String>,
    pub size: u64,
    pub modification_time: i64,
    pub data_change: bool,
    /// JSON: `numRecords`, `minValues`, `maxValues`, `nullCount`.
    pub stats: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    pub path: String,
    pub deletion_timestamp: i64,
    pub data_change: bool,
    pub extended_file_metadata: bool,
    pub partition_values: BTreeMap<String, String>,
    pub size: u64,
}

pub(crate) fn millis(i: Instant) -> i64 {
    i.micros().div_euclid(1000)
}

/// The Delta type of an Arrow column type the corpus writes.
fn delta_type(name: &str, t: &DataType) -> Result<&'static str> {
    Ok(match t {
        DataType::Utf8 => "string",
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC" => "timestamp",
        DataType::Date32 => "date",
        DataType::Boolean => "boolean",
        DataType::Int32 => "integer",
        DataType::Int64 => "long",
        other => {
            return Err(Error::InvalidInput {
                param: name.to_owned(),
                message: format!("no Delta type for {other}"),
            });
        }
    })
}

/// A table's Delta schema: its files' columns, then its partition columns (`date` of a
/// records table).
pub fn schema_string_of(table: Table) -> Result<String> {
    let mut fields: Vec<Value> = Vec::new();
    for f in table.file_schema().fields() {
        let ty = delta_type(f.name(), f.data_type())?;
        fields.push(
            json!({"name": f.name(), "type": ty, "nullable": f.is_nullable(), "metadata": {}}),
        );
    }
    for c in table.partition_columns() {
        fields.push(json!({"name": c, "type": "date", "nullable": false, "metadata": {}}));
    }
    Ok(serde_json::to_string(
        &json!({"type": "struct", "fields": fields}),
    )?)
}

/// A records table's Delta schema: the partition schema's columns, then the partition
/// column `date`.
pub fn schema_string() -> Result<String> {
    // Any source-lane: every records table has the one record schema.
    schema_string_of(Table::Records(SourceId::ALL[0], Lane::ALL[0]))
}

/// A records table's id: a UUID-shaped digest of its name, the same in every corpus and run.
pub fn table_id(source: SourceId, lane: Lane) -> String {
    Table::Records(source, lane).id()
}

/// The metaData action of a table created at `created_at`.
pub fn metadata(table: Table, created_at: Instant) -> Result<MetaData> {
    Ok(MetaData {
        id: table.id(),
        name: table.name(),
        description: table.description(),
        format: Format {
            provider: "parquet".into(),
            options: BTreeMap::new(),
        },
        schema_string: schema_string_of(table)?,
        partition_columns: table.partition_columns(),
        configuration: CONFIGURATION
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        created_time: millis(created_at),
    })
}

/// The protocol every table speaks: reader 1, writer 2 (no table features needed).
pub const PROTOCOL: Protocol = Protocol {
    min_reader_version: 1,
    min_writer_version: 2,
};

/// A commit's bytes: one JSON action per line, each line ended by a newline.
pub fn encode(actions: &[Action]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for a in actions {
        serde_json::to_writer(&mut out, a)?;
        out.push(b'\n');
    }
    Ok(out)
}

/// Parses a commit's bytes (this writer's actions only).
pub fn decode(path: &str, bytes: &[u8]) -> Result<Vec<Action>> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(|l| {
            serde_json::from_slice(l)
                .map_err(|e| Error::integrity(path, format!("not a commit this writer made: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::delta::DeltaLog;
    use crate::write::delta::{check, stat_time};

    #[test]
    fn stats_times_round_outward_to_milliseconds() {
        let t = Instant::from_micros(1_700_000_000_123_456);
        assert_eq!(stat_time(t, false), "2023-11-14T22:13:20.123Z");
        assert_eq!(stat_time(t, true), "2023-11-14T22:13:20.124Z");
        let whole = Instant::from_unix_seconds(1_700_000_000);
        assert_eq!(stat_time(whole, false), "2023-11-14T22:13:20.000Z");
        assert_eq!(stat_time(whole, true), "2023-11-14T22:13:20.000Z");
        let tenth = Instant::from_micros(1_700_000_000_100_000);
        assert_eq!(stat_time(tenth, true), "2023-11-14T22:13:20.100Z");
    }

    #[test]
    fn every_schema_column_has_a_delta_type_and_date_is_the_partition_column() {
        let s: Value = serde_json::from_str(&schema_string().unwrap()).unwrap();
        let fields = s["fields"].as_array().unwrap();
        assert_eq!(fields.len(), schema().fields().len() + 1);
        assert_eq!(fields.last().unwrap()["name"], "date");
        assert!(
            fields
                .iter()
                .any(|f| f["name"] == "published_at" && f["type"] == "timestamp")
        );
    }

    #[test]
    fn table_keys_round_trip_and_ids_are_uuid_shaped_and_stable() {
        for s in SourceId::ALL {
            for l in Lane::ALL {
                assert_eq!(parse_table_key(&table_key(*s, *l)), Some((*s, *l)));
                let id = table_id(*s, *l);
                assert_eq!(id.len(), 36);
                assert_eq!(id, table_id(*s, *l));
            }
        }
        assert_eq!(parse_table_key("sec.edgar"), None);
        assert_eq!(parse_table_key("nope/certified_pit"), None);
    }

    /// Every table of every source-lane, and the identity table.
    fn all_tables() -> Vec<Table> {
        let mut out = vec![Table::Identity];
        for s in SourceId::ALL {
            for l in Lane::ALL {
                out.push(Table::Records(*s, *l));
                out.extend(RuleTable::ALL.map(|t| Table::Rule(*s, *l, t)));
            }
        }
        out
    }

    #[test]
    fn every_table_key_names_its_table_alone_and_no_two_tables_share_a_key_root_or_id() {
        let tables = all_tables();
        for t in &tables {
            assert_eq!(Table::parse(&t.key()), Some(*t), "{}", t.key());
            assert!(
                t.commit_path(3)
                    .starts_with(&format!("{}/_delta_log/", t.root()))
            );
        }
        let distinct =
            |f: &dyn Fn(&Table) -> String| tables.iter().map(f).collect::<BTreeSet<_>>().len();
        assert_eq!(distinct(&|t| t.key()), tables.len());
        assert_eq!(distinct(&|t| t.root()), tables.len());
        assert_eq!(distinct(&|t| t.id()), tables.len());
        // Only records tables are records tables to the callers that share them.
        assert_eq!(
            parse_table_key("sec.edgar/certified_pit/supersessions"),
            None
        );
        assert_eq!(parse_table_key("identity"), None);
        assert_eq!(Table::parse("sec.edgar/certified_pit/nope"), None);
        assert_eq!(Table::parse("sec.edgar/certified_pit/coverage/x"), None);
    }

    #[test]
    fn a_records_tables_id_is_the_one_its_shipped_log_was_created_with() {
        // The shipped sample's logs (and every corpus's) name the id derived from the key
        // alone; a change here would make every existing log a different table.
        assert_eq!(
            table_id(SourceId::ALL[0], Lane::ALL[0]),
            Table::Records(SourceId::ALL[0], Lane::ALL[0]).id()
        );
        let h = crate::store::hashing::sha256_hex(
            format!("asof delta table {}/{}", SourceId::ALL[0], Lane::ALL[0]).as_bytes(),
        );
        assert!(table_id(SourceId::ALL[0], Lane::ALL[0]).starts_with(&h[..8]));
    }

    #[test]
    fn every_table_has_a_delta_schema_of_its_files_columns() {
        for t in all_tables() {
            let s: Value = serde_json::from_str(&schema_string_of(t).unwrap()).unwrap();
            let names: Vec<&str> = s["fields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["name"].as_str().unwrap())
                .collect();
            let mut want: Vec<String> = t
                .file_schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            want.extend(t.partition_columns());
            assert_eq!(names, want, "{}", t.key());
        }
        let cov: Value = serde_json::from_str(
            &schema_string_of(Table::Rule(
                SourceId::ALL[0],
                Lane::ALL[0],
                RuleTable::Coverage,
            ))
            .unwrap(),
        )
        .unwrap();
        let ty = |n: &str| {
            cov["fields"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["name"] == n)
                .unwrap()["type"]
                .clone()
        };
        assert_eq!(ty("date"), "date");
        assert_eq!(ty("row_count"), "long");
        assert_eq!(ty("available_at_complete"), "boolean");
    }

    #[tokio::test]
    async fn every_rule_tables_version_holds_exactly_the_file_its_corpus_version_lists() {
        let (_dir, store, _) = crate::testkit::random_corpus(0x60_0010, true).await;
        let head = store.current_version().await.unwrap().unwrap();
        let checked = check(&store, &head).await.unwrap();
        assert_eq!(checked.behind, 0, "publish wrote every commit");
        let mut logs: std::collections::HashMap<Table, DeltaLog> = Default::default();
        let mut travelled: BTreeSet<Table> = BTreeSet::new();
        let mut version = Some(head);
        while let Some(v) = version {
            let m = store.manifest(&v).await.unwrap();
            for (key, n) in versions_of(&store, &v, &m).await.unwrap() {
                let t = Table::parse(&key).unwrap();
                if matches!(t, Table::Records(..)) {
                    continue;
                }
                let log = logs.entry(t).or_insert_with(|| DeltaLog::new(t));
                if log.len() <= n {
                    log.extend(&store, n).await.unwrap();
                }
                let st = log.state(n).unwrap();
                let listed = table_files(&m, t).unwrap();
                assert_eq!(listed.len(), 1, "{v}: {key} lists one file");
                assert_eq!(
                    st.files.keys().map(String::as_str).collect::<Vec<_>>(),
                    listed.keys().copied().collect::<Vec<_>>(),
                    "{v}: {key} at table version {n}"
                );
                // The commit names the corpus version that made this table version: this one,
                // or an ancestor that listed the very same file.
                let maker = store.manifest(&st.corpus_version).await.unwrap();
                assert_eq!(file_list(&maker, t), file_list(&m, t), "{v}: {key}");
                assert_eq!(st.metadata.partition_columns, Vec::<String>::new());
                if n > 0 {
                    travelled.insert(t);
                }
            }
            version = m.parent;
        }
        let moved = |r: RuleTable| {
            travelled
                .iter()
                .any(|t| matches!(t, Table::Rule(_, _, x) if *x == r))
        };
        assert!(
            moved(RuleTable::Supersessions),
            "a correction moves a supersessions table"
        );
        assert!(moved(RuleTable::Coverage), "new rows move a coverage table");
    }

    #[test]
    fn a_commit_decodes_to_the_actions_it_was_encoded_from() {
        let actions = vec![
            Action::Protocol(PROTOCOL),
            Action::Remove(Remove {
                path: "2024-01-02/ab.parquet".into(),
                deletion_timestamp: 5,
                data_change: true,
                extended_file_metadata: true,
                partition_values: BTreeMap::from([("date".into(), "2024-01-02".into())]),
                size: 9,
            }),
        ];
        let bytes = encode(&actions).unwrap();
        assert!(bytes.starts_with(
            b"{\"protocol\":{\"minReaderVersion\":1,\"minWriterVersion\":2}}\n{\"remove\":"
        ));
        assert_eq!(decode("x", &bytes).unwrap(), actions);
        assert!(decode("x", b"{\"txn\":{}}\n").is_err());
    }
}
