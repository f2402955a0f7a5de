//! List states: what the lists of a list source (OFAC SDN, GLEIF records, SEC ticker lists)
//! say each listed entity looks like now, kept as one derived object per source-lane.
//!
//! Why: a new list snapshot is compared with the list as the corpus holds it (added, modified,
//! removed); OFAC's and GLEIF's changes become change rows, SEC's ticker lists feed the
//! identity intervals only. Folding every change row the source-lane ever got would read all
//! its partitions on every snapshot, and a ticker list has no rows to fold. The ingest
//! pipeline folds each snapshot's changes into the state and publishes the state with them, so
//! the next snapshot reads one object.
//!
//! Object: `snapshots/lists/<source>/<lane>/<sha256>.parquet`, kind [`KIND_LIST`], listed in
//! the manifest's `access` list; one row per entity ever listed, sorted by entity: `entity`,
//! `at` (the instant of its last change, microseconds), `after` (its fields as JSON after that
//! change; null once removed), `locator`, `name`. Derived, never authoritative: the change rows
//! in the partitions say the same, and a source-lane whose state is missing (a corpus written
//! before list states existed) is folded from its partitions once.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::model::clock::{Instant, Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry};
use crate::store::CorpusStore;
use crate::store::hashing::{HashedFile, HashingFile, sha256_hex};
use crate::store::objects::get_checked;

/// Manifest `kind` of a list state.
pub const KIND_LIST: &str = "lists.state/1";

/// One entity's state after its last change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The instant of its last change (the snapshot's capture).
    pub at: Instant,
    /// Its fields after the change, as JSON text; `None` once removed.
    pub after: Option<String>,
    pub locator: String,
    pub name: String,
}

/// Entity → its state, for one source-lane.
pub type ListState = BTreeMap<String, Listed>;

/// The folder holding the list state of one source-lane.
pub fn list_dir(source: SourceId, lane: Lane) -> String {
    format!("snapshots/lists/{source}/{lane}/")
}

/// The state object of one source-lane listed in `manifest`, if any.
pub fn entry_of(manifest: &Manifest, source: SourceId, lane: Lane) -> Option<&ObjectEntry> {
    let dir = list_dir(source, lane);
    manifest
        .access
        .iter()
        .find(|e| e.kind == KIND_LIST && e.path.starts_with(&dir))
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("entity", DataType::Utf8, false),
        Field::new("at", DataType::Int64, false),
        Field::new("after", DataType::Utf8, true),
        Field::new("locator", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, false),
    ]))
}

/// Rows a [`StateWriter`] holds before handing them to the Parquet writer: a multiple of the
/// writer's 1,024-value mini-batches, at which it decides page boundaries, so the bytes of a
/// state do not depend on how it was cut into batches.
const WRITE_BATCH: usize = 8 * 1024;

/// Writes a list state as Parquet one entity at a time, in entity order, so a state of
/// millions of entities (a GLEIF golden copy) is written without being held.
pub struct StateWriter<W: std::io::Write + Send> {
    writer: ArrowWriter<W>,
    buf: Vec<(String, Listed)>,
    rows: u64,
    last: Option<String>,
}

impl<W: std::io::Write + Send> StateWriter<W> {
    pub fn new(sink: W) -> Result<Self> {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by("asof".into())
            .build();
        Ok(StateWriter {
            writer: ArrowWriter::try_new(sink, schema(), Some(props))?,
            buf: Vec::with_capacity(WRITE_BATCH),
            rows: 0,
            last: None,
        })
    }

    /// Adds one entity; entities come in strictly ascending order (readers merge on it).
    pub fn push(&mut self, entity: String, listed: Listed) -> Result<()> {
        if self.last.as_ref().is_some_and(|l| *l >= entity) {
            return Err(Error::invalid(
                "list state",
                format!("entity {entity:?} written out of order"),
            ));
        }
        self.last = Some(entity.clone());
        self.buf.push((entity, listed));
        self.rows += 1;
        if self.buf.len() >= WRITE_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.buf);
        let entity: StringArray = rows.iter().map(|(k, _)| Some(k.as_str())).collect();
        let at: Int64Array = rows.iter().map(|(_, v)| Some(v.at.micros())).collect();
        let after: StringArray = rows.iter().map(|(_, v)| v.after.as_deref()).collect();
        let locator: StringArray = rows.iter().map(|(_, v)| Some(v.locator.as_str())).collect();
        let name: StringArray = rows.iter().map(|(_, v)| Some(v.name.as_str())).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(entity),
            Arc::new(at),
            Arc::new(after),
            Arc::new(locator),
            Arc::new(name),
        ];
        self.writer.write(&RecordBatch::try_new(schema(), cols)?)?;
        // Row groups closed at a size, as partitions are (`crate::store::ROW_GROUP_BYTES`).
        if self.writer.in_progress_size() >= crate::store::ROW_GROUP_BYTES {
            self.writer.flush()?;
        }
        self.buf = rows;
        self.buf.clear();
        Ok(())
    }

    /// Entities written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Closes the Parquet file; returns the sink and the number of entities.
    pub fn finish(mut self) -> Result<(W, u64)> {
        self.flush()?;
        Ok((self.writer.into_inner()?, self.rows))
    }
}

/// Encodes a state as Parquet (deterministic: the same state gives the same bytes).
pub fn encode(state: &ListState) -> Result<Vec<u8>> {
    let mut w = StateWriter::new(Vec::new())?;
    for (entity, listed) in state {
        w.push(entity.clone(), listed.clone())?;
    }
    Ok(w.finish()?.0)
}

/// A list state written to a temporary file ([`StateFileWriter`]), ready to publish.
#[derive(Debug)]
pub struct EncodedState {
    file: HashedFile,
    rows: u64,
}

impl EncodedState {
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

/// A [`StateWriter`] into an anonymous temporary file (removed by the system when dropped or
/// when the process dies).
pub struct StateFileWriter(StateWriter<HashingFile>);

impl StateFileWriter {
    pub fn new() -> Result<Self> {
        Ok(StateFileWriter(StateWriter::new(HashingFile::new()?)?))
    }
    pub fn push(&mut self, entity: String, listed: Listed) -> Result<()> {
        self.0.push(entity, listed)
    }
    pub fn finish(self) -> Result<EncodedState> {
        let (sink, rows) = self.0.finish()?;
        Ok(EncodedState {
            file: sink.finish()?,
            rows,
        })
    }
}

/// A new list state for publish to write: held (small lists) or already encoded to a
/// temporary file (lists too big to hold, written as they were compared).
#[derive(Debug, Clone)]
pub enum ListObject {
    State(ListState),
    Encoded(Arc<EncodedState>),
}

/// Reads a state one entity at a time, in entity order (checked: a comparison merges on it).
pub struct StateReader {
    path: String,
    batches: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    batch: Option<RecordBatch>,
    next: usize,
    last: Option<String>,
}

impl StateReader {
    fn new<R: parquet::file::reader::ChunkReader + 'static>(path: &str, input: R) -> Result<Self> {
        let batches = ParquetRecordBatchReaderBuilder::try_new(input)
            .map_err(|e| Error::integrity(path, format!("not a readable list state: {e}")))?
            .with_batch_size(WRITE_BATCH)
            .build()?;
        Ok(StateReader {
            path: path.to_owned(),
            batches,
            batch: None,
            next: 0,
            last: None,
        })
    }

    fn row(&self, batch: &RecordBatch, i: usize) -> Result<(String, Listed)> {
        let bad = |c: &str| {
            Error::integrity(
                &self.path,
                format!("list state column {c} has a wrong type"),
            )
        };
        let s = |i: usize, c: &str| {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| bad(c))
        };
        let (entity, after, locator, name) = (
            s(0, "entity")?,
            s(2, "after")?,
            s(3, "locator")?,
            s(4, "name")?,
        );
        let at = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| bad("at"))?;
        Ok((
            entity.value(i).to_owned(),
            Listed {
                at: Instant::from_micros(at.value(i)),
                after: (!after.is_null(i)).then(|| after.value(i).to_owned()),
                locator: locator.value(i).to_owned(),
                name: name.value(i).to_owned(),
            },
        ))
    }
}

impl Iterator for StateReader {
    type Item = Result<(String, Listed)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(batch) = &self.batch
                && self.next < batch.num_rows()
            {
                let row = self.row(batch, self.next);
                self.next += 1;
                if let Ok((entity, _)) = &row {
                    if self.last.as_ref().is_some_and(|l| l >= entity) {
                        return Some(Err(Error::integrity(
                            &self.path,
                            format!("list state entities are not in order at {entity:?}"),
                        )));
                    }
                    self.last = Some(entity.clone());
                }
                return Some(row);
            }
            match self.batches.next()? {
                Ok(b) => {
                    self.batch = Some(b);
                    self.next = 0;
                }
                Err(e) => return Some(Err(e.into())),
            }
        }
    }
}

fn decode(path: &str, bytes: Bytes) -> Result<ListState> {
    StateReader::new(path, bytes)?.collect()
}

/// The list state of one source-lane in `manifest`, read as a stream: the object is copied to
/// a temporary file (hash-checked on the way) and read from there a batch at a time, so a
/// state bigger than memory can be compared. `None` when the version has none.
pub async fn open(
    store: &CorpusStore,
    manifest: &Manifest,
    source: SourceId,
    lane: Lane,
) -> Result<Option<StateReader>> {
    let Some(e) = entry_of(manifest, source, lane) else {
        return Ok(None);
    };
    let file = crate::store::objects::download_checked(store, &e.path, &e.sha256).await?;
    StateReader::new(&e.path, file).map(Some)
}

/// The list state of one source-lane in `manifest` (hash-checked); `None` when it has none.
pub async fn read(
    store: &CorpusStore,
    manifest: &Manifest,
    source: SourceId,
    lane: Lane,
) -> Result<Option<ListState>> {
    match entry_of(manifest, source, lane) {
        Some(e) => {
            let bytes = get_checked(store, &e.path, &e.sha256).await?;
            decode(&e.path, bytes).map(Some)
        }
        None => Ok(None),
    }
}

/// Writes `state` as the list state of one source-lane and lists it in `manifest` in place of
/// the previous one.
pub async fn write(
    store: &CorpusStore,
    manifest: &mut Manifest,
    source: SourceId,
    lane: Lane,
    state: &ListObject,
) -> Result<()> {
    let dir = list_dir(source, lane);
    let entry = match state {
        ListObject::State(state) => {
            let bytes = encode(state)?;
            let sha = sha256_hex(&bytes);
            let entry = ObjectEntry {
                kind: KIND_LIST.into(),
                path: format!("{dir}{sha}.parquet"),
                bytes: bytes.len() as u64,
                sha256: sha,
                row_count: state.len() as u64,
            };
            store.put_immutable(&entry.path, Bytes::from(bytes)).await?;
            entry
        }
        ListObject::Encoded(e) => {
            let f = &e.file;
            let entry = ObjectEntry {
                kind: KIND_LIST.into(),
                path: format!("{dir}{}.parquet", f.sha256),
                bytes: f.len,
                sha256: f.sha256.clone(),
                row_count: e.rows,
            };
            store
                .put_immutable_file(&entry.path, f.file.try_clone()?, f.len, &f.sha256)
                .await?;
            entry
        }
    };
    manifest
        .access
        .retain(|e| !(e.kind == KIND_LIST && e.path.starts_with(&dir)));
    manifest.access.push(entry);
    manifest.access.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::t;

    #[tokio::test]
    async fn a_written_state_reads_back_equal_and_replaces_the_previous_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut m = crate::testkit::empty_manifest();
        let mut state = ListState::new();
        state.insert(
            "36".into(),
            Listed {
                at: t("2026-01-05T00:00:00Z"),
                after: Some(r#"{"name":"AEROCARIBBEAN AIRLINES"}"#.into()),
                locator: "https://sanctionssearch.ofac.treas.gov/Details.aspx?id=36".into(),
                name: "AEROCARIBBEAN AIRLINES".into(),
            },
        );
        state.insert(
            "173".into(),
            Listed {
                at: t("2026-01-06T00:00:00Z"),
                after: None,
                locator: String::new(),
                name: "ANGLO-CARIBBEAN CO., LTD.".into(),
            },
        );
        let (s, l) = (SourceId::OfacSdn, Lane::CertifiedPit);
        write(&store, &mut m, s, l, &ListObject::State(state.clone()))
            .await
            .unwrap();
        assert_eq!(read(&store, &m, s, l).await.unwrap().as_ref(), Some(&state));
        state.remove("173");
        write(&store, &mut m, s, l, &ListObject::State(state.clone()))
            .await
            .unwrap();
        assert_eq!(m.access.len(), 1, "the previous state is no longer listed");
        assert_eq!(read(&store, &m, s, l).await.unwrap(), Some(state));
        assert_eq!(read(&store, &m, SourceId::GleifLei, l).await.unwrap(), None);
    }

    fn listed(i: usize) -> Listed {
        Listed {
            at: t("2025-05-15T00:00:00Z"),
            after: (!i.is_multiple_of(7)).then(|| format!(r#"{{"n":{i}}}"#)),
            locator: format!("https://api.gleif.org/api/v1/lei-records/{i:020}"),
            name: format!("ENTITY {i}"),
        }
    }

    #[tokio::test]
    async fn a_state_streamed_to_a_file_is_the_same_object_as_one_encoded_whole() {
        // More entities than one write batch, so the streamed writer cuts several.
        let state: ListState = (0..20_000)
            .map(|i| (format!("{i:020}"), listed(i)))
            .collect();
        let mut w = StateFileWriter::new().unwrap();
        for (k, v) in &state {
            w.push(k.clone(), v.clone()).unwrap();
        }
        let encoded = w.finish().unwrap();
        let whole = encode(&state).unwrap();
        assert_eq!(encoded.file.sha256, sha256_hex(&whole));
        assert_eq!(
            (encoded.file.len, encoded.rows()),
            (whole.len() as u64, 20_000)
        );

        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut m = crate::testkit::empty_manifest();
        let (s, l) = (SourceId::GleifLei, Lane::CertifiedPit);
        write(
            &store,
            &mut m,
            s,
            l,
            &ListObject::Encoded(Arc::new(encoded)),
        )
        .await
        .unwrap();
        let streamed: ListState = open(&store, &m, s, l)
            .await
            .unwrap()
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(streamed, state);
        assert!(
            open(&store, &m, SourceId::OfacSdn, l)
                .await
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn entities_written_out_of_order_are_refused() {
        let mut w = StateWriter::new(Vec::new()).unwrap();
        w.push("B".into(), listed(1)).unwrap();
        let err = w.push("A".into(), listed(2)).unwrap_err().to_string();
        assert!(err.contains("out of order"), "{err}");
        assert!(
            w.push("B".into(), listed(3)).is_err(),
            "a repeated entity is refused too"
        );
    }

    #[tokio::test]
    async fn a_state_object_altered_in_the_store_is_refused_when_streamed() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut m = crate::testkit::empty_manifest();
        let (s, l) = (SourceId::OfacSdn, Lane::CertifiedPit);
        let state: ListState = (0..10).map(|i| (format!("{i:03}"), listed(i))).collect();
        write(&store, &mut m, s, l, &ListObject::State(state))
            .await
            .unwrap();
        let path = dir.path().join(&m.access[0].path);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n / 2] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let err = open(&store, &m, s, l).await.err().unwrap().to_string();
        assert!(err.contains("sha256"), "{err}");
    }
}
