//! Writing Delta logs once the pointer has moved: a table's commit of a corpus version (file
//! statistics from the manifest and the Parquet footers), and [`sync`], which writes whatever
//! commits the chain up to a version lacks; and [`check`], `asof verify`'s re-derivation of
//! every commit, compared byte for byte (the log's rules, and why they hold, in
//! `crate::format::delta`).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use object_store::GetRange;
use parquet::file::metadata::{FooterTail, ParquetMetaDataReader};
use parquet::file::statistics::Statistics;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::format::delta::{
    Action, Add, CommitInfo, File, PROTOCOL, Remove, Table, TableVersions, encode, metadata,
    millis, table_files, versions_of,
};
use crate::model::clock::Instant;
use crate::model::manifest::{Manifest, PartitionEntry};
use crate::store::CorpusStore;

/// A stats timestamp: milliseconds (what Delta readers compare with), the minimum rounded
/// down and the maximum up, so pruning never drops a row of the file.
pub(crate) fn stat_time(i: Instant, up: bool) -> String {
    let ms = if up {
        i.micros().div_euclid(1000) + i64::from(i.micros().rem_euclid(1000) != 0)
    } else {
        i.micros().div_euclid(1000)
    };
    let t = Instant::from_micros(ms * 1000);
    // Always three fraction digits, as Delta's own writers spell them.
    let s = t.to_string();
    let base = s.trim_end_matches('Z');
    match base.split_once('.') {
        Some((whole, frac)) => format!("{whole}.{frac:0<3}Z"),
        None => format!("{base}.000Z"),
    }
}

/// The `stats` of one partition: its row count, clock bounds from the manifest (exact), and
/// `cik` bounds and nulls from the Parquet footer's column-chunk statistics.
async fn stats(store: &CorpusStore, p: &PartitionEntry) -> Result<String> {
    let mut min = serde_json::Map::new();
    let mut max = serde_json::Map::new();
    let mut nulls = serde_json::Map::new();
    let clocks = [
        ("event_at", &p.clocks.event_at),
        ("published_at", &p.clocks.published_at),
        ("available_at", &p.clocks.available_at),
        ("acceptance_at", &p.clocks.acceptance_at),
        ("committed_at", &p.clocks.committed_at),
    ];
    for (name, c) in clocks {
        if let Some(v) = c.min {
            min.insert(name.into(), Value::String(stat_time(v, false)));
        }
        if let Some(v) = c.max {
            max.insert(name.into(), Value::String(stat_time(v, true)));
        }
        nulls.insert(name.into(), json!(c.nulls));
    }
    let (cik_min, cik_max, cik_nulls) = footer_bounds(store, p, "cik").await?;
    if let Some(v) = cik_min {
        min.insert("cik".into(), Value::String(v));
    }
    if let Some(v) = cik_max {
        max.insert("cik".into(), Value::String(v));
    }
    if let Some(n) = cik_nulls {
        nulls.insert("cik".into(), json!(n));
    }
    // serde_json's map keeps keys sorted (no `preserve_order`): the bytes are deterministic.
    Ok(serde_json::to_string(&json!({
        "numRecords": p.row_count,
        "minValues": min,
        "maxValues": max,
        "nullCount": nulls,
    }))?)
}

/// Exact min, max and null count of a string column over a file's row groups, from its
/// footer (two small ranged reads). A bound a writer truncated, or a row group without
/// statistics, leaves that bound out: a missing statistic only costs pruning.
async fn footer_bounds(
    store: &CorpusStore,
    p: &PartitionEntry,
    column: &str,
) -> Result<(Option<String>, Option<String>, Option<u64>)> {
    // The 8-byte tail gives the footer's length; the footer is the read before it.
    let tail = store
        .get_range(&p.path, Some(GetRange::Suffix(8)))
        .await?
        .bytes()
        .await?;
    let tail: &[u8; 8] = tail
        .as_ref()
        .try_into()
        .map_err(|_| Error::integrity(&p.path, "shorter than a Parquet footer"))?;
    let len = FooterTail::try_new(tail)?.metadata_length() as u64;
    if len + 8 > p.bytes {
        return Err(Error::integrity(
            &p.path,
            "a Parquet footer longer than the file",
        ));
    }
    let footer = store
        .get_range(
            &p.path,
            Some(GetRange::Bounded(p.bytes - 8 - len..p.bytes - 8)),
        )
        .await?
        .bytes()
        .await?;
    let meta = ParquetMetaDataReader::decode_metadata(&footer)?;
    let Some(i) = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.name() == column)
    else {
        return Ok((None, None, None));
    };
    let (mut lo, mut hi, mut nulls): (Option<Vec<u8>>, Option<Vec<u8>>, Option<u64>) =
        (None, None, Some(0));
    let (mut lo_ok, mut hi_ok) = (true, true);
    for rg in meta.row_groups() {
        let Some(Statistics::ByteArray(s)) = rg.column(i).statistics() else {
            return Ok((None, None, None));
        };
        nulls = match (nulls, s.null_count_opt()) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        match s.min_opt() {
            Some(v) if s.min_is_exact() => {
                let v = v.data().to_vec();
                if lo.as_ref().is_none_or(|l| v < *l) {
                    lo = Some(v);
                }
            }
            Some(_) => lo_ok = false,
            None => {}
        }
        match s.max_opt() {
            Some(v) if s.max_is_exact() => {
                let v = v.data().to_vec();
                if hi.as_ref().is_none_or(|h| v > *h) {
                    hi = Some(v);
                }
            }
            Some(_) => hi_ok = false,
            None => {}
        }
    }
    let text =
        |b: Option<Vec<u8>>, ok: bool| b.filter(|_| ok).and_then(|b| String::from_utf8(b).ok());
    Ok((text(lo, lo_ok), text(hi, hi_ok), nulls))
}

/// The `stats` of one file of a table: a partition's as [`stats`] gives them, an object's its
/// row count.
async fn file_stats(store: &CorpusStore, f: File<'_>) -> Result<String> {
    match f {
        File::Partition(p) => stats(store, p).await,
        File::Object(o) => Ok(serde_json::to_string(&json!({"numRecords": o.row_count}))?),
    }
}

/// The actions of version `table_version` of `table`: the commit that takes the table from
/// `parent`'s files to `m`'s (`version` names `m`). Version 0 creates the table.
pub async fn commit(
    store: &CorpusStore,
    table: Table,
    table_version: u64,
    (version, m): (&str, &Manifest),
    parent: Option<&Manifest>,
) -> Result<Vec<Action>> {
    let now = table_files(m, table)?;
    let before = match parent {
        Some(pm) if table_version > 0 => table_files(pm, table)?,
        _ => BTreeMap::new(),
    };
    let at = millis(m.created_at);
    // A records table grows by day; a rule or identity table's one file is replaced whole.
    let parameters = match table {
        Table::Records(..) => BTreeMap::from([
            ("mode".into(), "Append".into()),
            ("partitionBy".into(), "[\"date\"]".into()),
        ]),
        Table::Rule(..) | Table::Identity => BTreeMap::from([("mode".into(), "Overwrite".into())]),
    };
    let mut actions = vec![Action::CommitInfo(CommitInfo {
        timestamp: at,
        operation: "WRITE".into(),
        operation_parameters: parameters,
        is_blind_append: false,
        engine_info: format!("asof-engine/{}", env!("CARGO_PKG_VERSION")),
        corpus_version: version.to_owned(),
        parent_version: m.parent.clone(),
    })];
    // A table whose files change kind changes schema (a supersessions table of the unplaced
    // kind replaced by a placed one): its new metaData, which readers take from the latest
    // commit that has one.
    let kinds: BTreeSet<&str> = before
        .values()
        .chain(now.values())
        .filter_map(File::kind)
        .collect();
    if table_version == 0 {
        actions.push(Action::Protocol(PROTOCOL));
        actions.push(Action::MetaData(metadata(table, m.created_at)?));
    } else if kinds.len() > 1 {
        actions.push(Action::MetaData(metadata(table, m.created_at)?));
    }
    for (path, f) in &before {
        if now.get(path).is_none_or(|n| n.sha256() != f.sha256()) {
            actions.push(Action::Remove(Remove {
                path: (*path).to_owned(),
                deletion_timestamp: at,
                data_change: true,
                extended_file_metadata: true,
                partition_values: f.partition_values(),
                size: f.bytes(),
            }));
        }
    }
    for (path, f) in &now {
        if before.get(path).is_none_or(|b| b.sha256() != f.sha256()) {
            actions.push(Action::Add(Add {
                path: (*path).to_owned(),
                partition_values: f.partition_values(),
                size: f.bytes(),
                modification_time: at,
                data_change: true,
                stats: file_stats(store, *f).await?,
            }));
        }
    }
    Ok(actions)
}

/// One version of the chain with its parent, and the commits it needs.
struct Step {
    version: String,
    manifest: Manifest,
    versions: TableVersions,
    parent: Option<(Manifest, TableVersions)>,
}

impl Step {
    /// The tables this version commits a new version of, with that version number.
    fn commits(&self) -> Vec<(Table, u64)> {
        commits_between(&self.versions, self.parent.as_ref().map(|(_, pv)| pv))
    }
}

/// What [`sync`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synced {
    /// Corpus versions whose commits were written (or found already written by a racer).
    pub versions: usize,
    /// Commit objects written.
    pub commits: usize,
}

/// Writes the Delta commits the chain up to `version` lacks, oldest first, and returns what it
/// wrote. It walks back from `version` until a version whose commits are all stored (commits
/// are written oldest first, so everything before it is too), or to the first version.
/// Idempotent, and safe to run beside another writer: the bytes are deterministic and puts
/// are create-only with an equality check on a collision.
pub async fn sync(store: &CorpusStore, version: &str) -> Result<Synced> {
    // chain[i + 1] is chain[i]'s parent; each manifest is read once.
    let mut chain: Vec<Node> = vec![Node::read(store, version).await?];
    let mut last_complete = false;
    loop {
        let i = chain.len() - 1;
        let parent = match chain[i].manifest.parent.clone() {
            Some(p) => Some(Node::read(store, &p).await?),
            None => None,
        };
        let wanted = commits_between(&chain[i].tables, parent.as_ref().map(|p| &p.tables));
        // A version that commits nothing proves nothing: keep walking past it.
        let mut complete = !wanted.is_empty();
        for (t, n) in &wanted {
            if !store.exists(&t.commit_path(*n)).await? {
                complete = false;
                break;
            }
        }
        if complete {
            last_complete = true;
            break;
        }
        match parent {
            Some(p) => chain.push(p),
            None => break,
        }
        if chain.len() > 100_000 {
            return Err(Error::integrity(
                version,
                "the manifest chain is longer than 100000 versions",
            ));
        }
    }
    let to_write = chain.len() - usize::from(last_complete);
    let mut out = Synced::default();
    for i in (0..to_write).rev() {
        let (node, parent) = (&chain[i], chain.get(i + 1));
        for (table, n) in commits_between(&node.tables, parent.map(|p| &p.tables)) {
            let actions = commit(
                store,
                table,
                n,
                (&node.version, &node.manifest),
                parent.map(|p| &p.manifest),
            )
            .await?;
            store
                .put_immutable(&table.commit_path(n), Bytes::from(encode(&actions)?))
                .await?;
            out.commits += 1;
        }
        out.versions += 1;
    }
    Ok(out)
}

/// One version of the chain: its manifest and table versions.
struct Node {
    version: String,
    manifest: Manifest,
    tables: TableVersions,
}

impl Node {
    async fn read(store: &CorpusStore, version: &str) -> Result<Node> {
        let manifest = store.manifest(version).await?;
        let tables = versions_of(store, version, &manifest).await?;
        Ok(Node {
            version: version.to_owned(),
            manifest,
            tables,
        })
    }
}

/// The tables a version with `tables` commits a new version of, given its parent's.
fn commits_between(tables: &TableVersions, parent: Option<&TableVersions>) -> Vec<(Table, u64)> {
    tables
        .iter()
        .filter(|(k, v)| parent.is_none_or(|pv| pv.get(*k) != Some(*v)))
        .filter_map(|(k, v)| Table::parse(k).map(|t| (t, *v)))
        .collect()
}

async fn step(store: &CorpusStore, version: String, manifest: Manifest) -> Result<Step> {
    let versions = versions_of(store, &version, &manifest).await?;
    let parent = match &manifest.parent {
        Some(p) => {
            let pm = store.manifest(p).await?;
            let pv = versions_of(store, p, &pm).await?;
            Some((pm, pv))
        }
        None => None,
    };
    Ok(Step {
        version,
        manifest,
        versions,
        parent,
    })
}

/// What [`check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// Tables of the version.
    pub tables: usize,
    /// Commits re-derived and found byte-equal.
    pub commits: usize,
    /// Commits not written yet at the end of the chain (a publisher stopped between its
    /// pointer and its log; `asof delta backfill` writes them).
    pub behind: usize,
}

/// Checks every Delta commit of the chain up to `version` against its corpus version: each
/// stored commit must be byte-equal to the one re-derived from the manifests (so each table
/// version lists exactly its corpus version's partitions), and commits may be missing only
/// at the end of the chain (a log behind its pointer), never in between.
pub async fn check(store: &CorpusStore, version: &str) -> Result<Checked> {
    // The chain, oldest first (versions only: manifests are re-read one pair at a time).
    let mut chain = vec![version.to_owned()];
    let mut guard = BTreeSet::from([version.to_owned()]);
    loop {
        let m = store.manifest(chain.last().expect("non-empty")).await?;
        match m.parent {
            Some(p) if guard.insert(p.clone()) => chain.push(p),
            Some(p) => return Err(Error::integrity(p, "the manifest chain loops")),
            None => break,
        }
    }
    chain.reverse();
    let mut out = Checked::default();
    let mut missing_from: BTreeMap<String, String> = BTreeMap::new();
    for v in chain {
        let m = store.manifest(&v).await?;
        let step = step(store, v, m).await?;
        out.tables = step.versions.len();
        for (table, n) in step.commits() {
            let path = table.commit_path(n);
            let key = table.key();
            if !store.exists(&path).await? {
                out.behind += 1;
                missing_from.entry(key).or_insert(path);
                continue;
            }
            if let Some(first) = missing_from.get(&key) {
                return Err(Error::integrity(
                    &path,
                    format!("a commit stored after a missing one ({first})"),
                ));
            }
            let expected = encode(
                &commit(
                    store,
                    table,
                    n,
                    (&step.version, &step.manifest),
                    step.parent.as_ref().map(|(pm, _)| pm),
                )
                .await?,
            )?;
            let stored = store.get(&path).await?;
            if stored != expected {
                return Err(Error::integrity(
                    &path,
                    format!(
                        "this Delta commit does not list the partitions of corpus version {} (re-derived commit differs)",
                        step.version
                    ),
                ));
            }
            out.commits += 1;
        }
    }
    Ok(out)
}
