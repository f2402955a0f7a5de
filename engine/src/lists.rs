//! List states: what the change rows of a list source (OFAC SDN, GLEIF records, SEC ticker
//! lists) say each listed entity looks like now, kept as one derived object per source-lane.
//!
//! Why: a new list snapshot becomes change rows (added, modified, removed) against the list as
//! the corpus holds it. Folding every change row the source-lane ever got would read all its
//! partitions on every snapshot; for SEC ticker lists, whose change rows live among EDGAR's
//! filings, that is the whole corpus. The ingest pipeline folds each snapshot's change rows
//! into the state and publishes the state with them, so the next snapshot reads one object.
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

use crate::clock::{Instant, Lane, SourceId};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, ObjectEntry};
use crate::read::get_checked;
use crate::store::{CorpusStore, sha256_hex};

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

/// Encodes a state as Parquet (deterministic: the same state gives the same bytes).
pub fn encode(state: &ListState) -> Result<Vec<u8>> {
    let entity: StringArray = state.keys().map(|k| Some(k.as_str())).collect();
    let at: Int64Array = state.values().map(|v| Some(v.at.micros())).collect();
    let after: StringArray = state.values().map(|v| v.after.as_deref()).collect();
    let locator: StringArray = state.values().map(|v| Some(v.locator.as_str())).collect();
    let name: StringArray = state.values().map(|v| Some(v.name.as_str())).collect();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(entity),
        Arc::new(at),
        Arc::new(after),
        Arc::new(locator),
        Arc::new(name),
    ];
    let batch = RecordBatch::try_new(schema(), cols)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by("asof".into())
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, schema(), Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

fn decode(path: &str, bytes: Bytes) -> Result<ListState> {
    let bad = |c: &str| Error::integrity(path, format!("list state column {c} has a wrong type"));
    let mut out = ListState::new();
    for batch in ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()? {
        let batch = batch?;
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
        for i in 0..batch.num_rows() {
            out.insert(
                entity.value(i).to_owned(),
                Listed {
                    at: Instant::from_micros(at.value(i)),
                    after: (!after.is_null(i)).then(|| after.value(i).to_owned()),
                    locator: locator.value(i).to_owned(),
                    name: name.value(i).to_owned(),
                },
            );
        }
    }
    Ok(out)
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
    state: &ListState,
) -> Result<()> {
    let bytes = encode(state)?;
    let sha = sha256_hex(&bytes);
    let dir = list_dir(source, lane);
    let path = format!("{dir}{sha}.parquet");
    let entry = ObjectEntry {
        kind: KIND_LIST.into(),
        path: path.clone(),
        bytes: bytes.len() as u64,
        sha256: sha,
        row_count: state.len() as u64,
    };
    store.put_immutable(&path, Bytes::from(bytes)).await?;
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
        write(&store, &mut m, s, l, &state).await.unwrap();
        assert_eq!(read(&store, &m, s, l).await.unwrap().as_ref(), Some(&state));
        state.remove("173");
        write(&store, &mut m, s, l, &state).await.unwrap();
        assert_eq!(m.access.len(), 1, "the previous state is no longer listed");
        assert_eq!(read(&store, &m, s, l).await.unwrap(), Some(state));
        assert_eq!(read(&store, &m, SourceId::GleifLei, l).await.unwrap(), None);
    }
}
