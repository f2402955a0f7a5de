//! Reading Delta logs: a table's state at a version for Delta Sharing ([`DeltaLog`],
//! [`LogCache`]), replaying a table's commits (immutable, so a process reads each once).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::format::delta::{Action, Add, CommitInfo, MetaData, Table, decode};
use crate::store::CorpusStore;

/// A table's state at one version, replayed from its log: its metadata and its files.
#[derive(Debug, Clone, PartialEq)]
pub struct TableState {
    pub version: u64,
    pub metadata: MetaData,
    /// The corpus version this table version is a view of.
    pub corpus_version: String,
    /// Milliseconds since the epoch of that corpus version.
    pub timestamp: i64,
    /// Live files by path relative to the table's root.
    pub files: BTreeMap<String, Add>,
}

/// The decoded commits of one table, versions `0..len`, read once: commits are immutable, so
/// a reader keeps them and reads only the versions published since ([`DeltaLog::extend`]).
#[derive(Debug, Clone)]
pub struct DeltaLog {
    pub table: Table,
    commits: Vec<Vec<Action>>,
}

impl DeltaLog {
    pub fn new(table: Table) -> Self {
        DeltaLog {
            table,
            commits: Vec::new(),
        }
    }

    /// The number of versions held (the latest is `len() - 1`).
    pub fn len(&self) -> u64 {
        self.commits.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.commits.is_empty()
    }

    /// Reads the commits after those held, up to and including `version`.
    pub async fn extend(&mut self, store: &CorpusStore, version: u64) -> Result<()> {
        for n in self.len()..=version {
            let path = self.table.commit_path(n);
            let actions = decode(&path, &store.get(&path).await?)?;
            let info = actions.iter().any(|a| matches!(a, Action::CommitInfo(_)));
            if !info || (n == 0 && !actions.iter().any(|a| matches!(a, Action::MetaData(_)))) {
                return Err(Error::integrity(
                    &path,
                    "a commit without its commitInfo (or version 0 without metaData)",
                ));
            }
            self.commits.push(actions);
        }
        Ok(())
    }

    fn info(&self, n: u64) -> Option<&CommitInfo> {
        self.commits.get(n as usize)?.iter().find_map(|a| match a {
            Action::CommitInfo(c) => Some(c),
            _ => None,
        })
    }

    /// The state at `version`, replaying commits `0..=version` (`None` past the held ones).
    pub fn state(&self, version: u64) -> Option<TableState> {
        let mut metadata = None;
        let mut files = BTreeMap::new();
        for actions in self.commits.get(..=version as usize)? {
            for a in actions {
                match a {
                    Action::MetaData(md) => metadata = Some(md.clone()),
                    Action::Add(add) => {
                        files.insert(add.path.clone(), add.clone());
                    }
                    Action::Remove(r) => {
                        files.remove(&r.path);
                    }
                    Action::CommitInfo(_) | Action::Protocol(_) => {}
                }
            }
        }
        let info = self.info(version)?;
        Some(TableState {
            version,
            metadata: metadata?,
            corpus_version: info.corpus_version.clone(),
            timestamp: info.timestamp,
            files,
        })
    }

    /// The latest version at or before `millis` (a snapshot "as of" a timestamp).
    pub fn version_at(&self, millis: i64) -> Option<u64> {
        (0..self.len())
            .rev()
            .find(|n| self.info(*n).is_some_and(|c| c.timestamp <= millis))
    }

    /// The first version at or after `millis`.
    pub fn version_from(&self, millis: i64) -> Option<u64> {
        (0..self.len()).find(|n| self.info(*n).is_some_and(|c| c.timestamp >= millis))
    }

    /// A file any held version added, by its id (the partition's sha256).
    pub fn file(&self, id: &str) -> Option<&Add> {
        self.commits.iter().flatten().find_map(|a| match a {
            Action::Add(add) if file_id(&add.path) == Some(id) => Some(add),
            _ => None,
        })
    }
}

/// The logs of a process's tables, each read once and extended as versions are published
/// (commits are immutable, so nothing held ever goes stale). One lock: readers of a log wait
/// while it reads new commits.
#[derive(Debug, Default)]
pub struct LogCache {
    logs: tokio::sync::Mutex<std::collections::HashMap<Table, DeltaLog>>,
}

impl LogCache {
    /// Runs `f` on `table`'s log read up to at least `version`.
    pub async fn read<R>(
        &self,
        store: &CorpusStore,
        table: Table,
        version: u64,
        f: impl FnOnce(&DeltaLog) -> R,
    ) -> Result<R> {
        let mut logs = self.logs.lock().await;
        let log = logs.entry(table).or_insert_with(|| DeltaLog::new(table));
        if log.len() <= version {
            log.extend(store, version).await?;
        }
        Ok(f(log))
    }
}

/// A file's id (its sha256) from its path in the table, `<date>/<sha256>.parquet`.
pub fn file_id(path: &str) -> Option<&str> {
    path.rsplit('/').next()?.strip_suffix(".parquet")
}
