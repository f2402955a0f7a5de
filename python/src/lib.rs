//! `asof._native`, the Python package's native module: `LocalCorpus` opens a corpus directory or
//! object-store URL in-process and answers the data routes through `asof_answer::local` (the
//! routes' own parameter parsing, engine calls and envelopes), so `asof.open()` answers what
//! `asof.connect()` answers for the same corpus (news and diff pages also as Arrow batches made
//! from the engine's rows); and runs `asof sql`'s read-only SQL. Arrow leaves through the Arrow
//! PyCapsule interface (`ArrowBatch`, `ArrowStream`): pyarrow shares the engine's buffers, no
//! copy and no serialisation. Everything above the envelope (pages, exceptions, frames) is the package's
//! Python code, shared by both backends.

use std::sync::{Mutex, OnceLock};

use arrow::array::{Array, RecordBatch, RecordBatchReader, StructArray};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ffi::to_ffi;
use arrow::ffi_stream::FFI_ArrowArrayStream;
use asof_answer::local::LocalApi;
use asof_engine::sql::SendableRecordBatchStream;
use futures::StreamExt;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule};

create_exception!(
    _native,
    CorpusError,
    PyException,
    "The corpus could not be opened or read (no corpus there, an unknown version, a store error)."
);

create_exception!(
    _native,
    SqlError,
    PyException,
    "A SQL query that cannot run: not valid SQL, not a read-only query, an unknown table or \
     column, or a failure while reading (it says which)."
);

/// One runtime for every corpus a process opens: the engine's reads are async, and a Python
/// call blocks on them with the GIL released.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name("asof-python")
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// A corpus version opened in-process.
#[pyclass(module = "asof._native", frozen)]
struct LocalCorpus {
    api: LocalApi,
}

#[pymethods]
impl LocalCorpus {
    /// Opens the corpus at `location` (a directory, `file://`, `s3://`, `gs://` or `az://`
    /// URL): its current version, or `version` (a `sha256:…` corpus version it still holds).
    #[new]
    #[pyo3(signature = (location, version=None))]
    fn new(py: Python<'_>, location: &str, version: Option<&str>) -> PyResult<Self> {
        let api = py
            .detach(|| runtime().block_on(LocalApi::open(location, version)))
            .map_err(|e| CorpusError::new_err(format!("{location}: {e}")))?;
        Ok(LocalCorpus { api })
    }

    /// The corpus version every answer names.
    #[getter]
    fn corpus_version(&self) -> &str {
        self.api.version()
    }

    /// `GET path?query` as the service answers it: `(status, envelope bytes)`.
    #[pyo3(signature = (path, query=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        query: Option<&str>,
    ) -> (u16, Bound<'py, PyBytes>) {
        let answer = py.detach(|| runtime().block_on(self.api.get(path, query)));
        (answer.status, PyBytes::new(py, &answer.body))
    }

    /// A news or diff page with its records as an [`ArrowBatch`] (made from the engine's rows;
    /// `pyarrow.record_batch(it)` takes it without a copy): `(status, envelope bytes without
    /// the records, batch)`; on an error, the error envelope and `None`.
    #[pyo3(signature = (path, query=None))]
    fn get_batch<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        query: Option<&str>,
    ) -> (u16, Bound<'py, PyBytes>, Option<ArrowBatch>) {
        let answer = py.detach(|| runtime().block_on(self.api.get_batch(path, query)));
        let batch = answer.batch.map(|batch| ArrowBatch { batch });
        (answer.status, PyBytes::new(py, &answer.head), batch)
    }

    /// Plans `query` (read-only SQL over this version, as `asof sql` runs it) and answers an
    /// [`ArrowStream`] over its batches (`pyarrow.RecordBatchReader.from_stream(it)`): each
    /// is computed when the reader asks for it, so an answer larger than memory can be read a
    /// batch at a time. Sorts, joins and aggregations hold at most `memory_mb` MiB before they
    /// spill to disk.
    #[pyo3(signature = (query, memory_mb=None))]
    fn sql(&self, py: Python<'_>, query: &str, memory_mb: Option<u64>) -> PyResult<ArrowStream> {
        let memory = memory_mb.map_or(asof_engine::sql::MEMORY_POOL_BYTES, |mb| {
            usize::try_from(mb.max(16) << 20).unwrap_or(usize::MAX)
        });
        let corpus = self.api.corpus();
        let stream = py
            .detach(|| {
                runtime().block_on(asof_engine::sql::stream_on(
                    corpus.store(),
                    corpus.manifest(),
                    query,
                    memory,
                ))
            })
            .map_err(|e| SqlError::new_err(e.to_string()))?;
        let reader: Box<dyn RecordBatchReader + Send> = Box::new(Batches {
            schema: stream.schema(),
            stream,
        });
        Ok(ArrowStream {
            stream: Mutex::new(Some(FFI_ArrowArrayStream::new(reader))),
        })
    }
}

/// A stream of Arrow batches offered through the Arrow PyCapsule interface
/// (`__arrow_c_stream__`): pyarrow, Polars or DuckDB import it and pull its batches through the
/// C stream interface. It can be imported once.
#[pyclass(module = "asof._native", frozen)]
struct ArrowStream {
    stream: Mutex<Option<FFI_ArrowArrayStream>>,
}

#[pymethods]
impl ArrowStream {
    /// The stream as an `arrow_array_stream` capsule (the consumer moves it out; the capsule
    /// releases it if nobody does). A requested schema is not honoured: the answer's own is
    /// given, and the consumer casts if it must.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let stream = self
            .stream
            .lock()
            .map_err(|_| PyException::new_err("the stream's lock is poisoned"))?
            .take()
            .ok_or_else(|| PyException::new_err("this answer was already read"))?;
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }
}

/// One Arrow record batch offered through the Arrow PyCapsule interface (`__arrow_c_array__`):
/// `pyarrow.record_batch(it)` shares its buffers, no copy.
#[pyclass(module = "asof._native", frozen)]
struct ArrowBatch {
    batch: RecordBatch,
}

#[pymethods]
impl ArrowBatch {
    /// Rows in the batch.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The batch as `(arrow_schema, arrow_array)` capsules of a struct array, one child per
    /// column (the interface's form of a record batch).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let data = StructArray::from(self.batch.clone()).into_data();
        let (array, schema) =
            to_ffi(&data).map_err(|e| PyException::new_err(format!("arrow export: {e}")))?;
        Ok((
            PyCapsule::new_with_value(py, schema, c"arrow_schema")?,
            PyCapsule::new_with_value(py, array, c"arrow_array")?,
        ))
    }
}

/// A running query's answer as an Arrow `RecordBatchReader`: pyarrow pulls each batch through
/// the C stream interface, and the pull drives the query on the runtime until the next batch.
struct Batches {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
}

impl Iterator for Batches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        runtime()
            .block_on(self.stream.next())
            .map(|batch| batch.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for Batches {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// The as-of rule of one corpus version for another engine (`asof.spark`): given the
/// version's manifest (read by the caller, through whatever file system that engine uses, and
/// hash-checked here against its version), it answers each cut as the service would decide
/// it before reading a row (a hole with the API's keys, or a refusal of its arguments), or
/// with the SQL of the rule's one plan over the views it names ([`asof_engine::rule`]).
#[pyclass(module = "asof._native", frozen)]
struct RulePlanner {
    version: String,
    manifest: asof_engine::Manifest,
    identity: OnceLock<asof_engine::model::identity::IdentityIndex>,
}

#[pymethods]
impl RulePlanner {
    /// `manifest`: the bytes of `manifests/<hex>.json`; `version`: the `sha256:…` they must
    /// hash to (the pointer's, or the one asked for).
    #[new]
    fn new(manifest: &[u8], version: &str) -> PyResult<Self> {
        let actual = asof_engine::model::manifest::version_of(manifest);
        if actual != version {
            return Err(CorpusError::new_err(format!(
                "the manifest of {version} hashes to {actual}: not that version's manifest"
            )));
        }
        let manifest = asof_engine::Manifest::from_bytes(version, manifest)
            .map_err(|e| CorpusError::new_err(e.to_string()))?;
        Ok(RulePlanner {
            version: version.to_owned(),
            manifest,
            identity: OnceLock::new(),
        })
    }

    #[getter]
    fn corpus_version(&self) -> &str {
        &self.version
    }

    /// The identity object's path and sha256 (what a ticker cut needs), if the version has one.
    fn identity_object(&self) -> Option<(String, String)> {
        self.manifest
            .identity
            .first()
            .map(|e| (e.path.clone(), e.sha256.clone()))
    }

    /// Whether the identity object is loaded.
    #[getter]
    fn has_identity(&self) -> bool {
        self.identity.get().is_some()
    }

    /// Loads the identity object's bytes (hash-checked against the manifest).
    fn load_identity(&self, bytes: Vec<u8>) -> PyResult<()> {
        let index = match self.manifest.identity.first() {
            Some(e) => {
                let actual = asof_engine::store::hashing::sha256_hex(&bytes);
                if actual != e.sha256 {
                    return Err(CorpusError::new_err(format!(
                        "{}: hashes to {actual}, the manifest says {}",
                        e.path, e.sha256
                    )));
                }
                let file =
                    asof_engine::model::identity::IdentityFile::from_parquet(&e.path, bytes.into())
                        .map_err(|e| CorpusError::new_err(e.to_string()))?;
                asof_engine::model::identity::IdentityIndex::new(file)
                    .map_err(|e| CorpusError::new_err(e.to_string()))?
            }
            None => asof_engine::model::identity::IdentityIndex::default(),
        };
        let _ = self.identity.set(index);
        Ok(())
    }

    /// The path of a source-lane's rule table (`supersessions` or `coverage`), if listed.
    fn table_path(&self, source: &str, lane: &str, table: &str) -> Option<String> {
        use asof_engine::format::rule::RuleTable;
        let source = source.parse().ok()?;
        let lane = lane.parse().ok()?;
        let table = RuleTable::ALL.into_iter().find(|t| t.name() == table)?;
        asof_engine::format::rule::entry(&self.manifest, source, lane, table)
            .map(|e| e.path.clone())
    }

    /// Every partition of a source-lane in this version (relative paths).
    fn lane_paths(&self, source: &str, lane: &str) -> Vec<String> {
        let (Ok(source), Ok(lane)) = (
            source.parse::<asof_engine::SourceId>(),
            lane.parse::<asof_engine::Lane>(),
        ) else {
            return Vec::new();
        };
        self.manifest
            .partitions
            .iter()
            .filter(|p| p.source_id == source && p.lane == lane)
            .map(|p| p.path.clone())
            .collect()
    }

    /// The columns of a view (`rows` or `supersessions`) as a schema string of `dialect`.
    #[pyo3(signature = (holds, dialect="spark"))]
    fn schema(&self, holds: &str, dialect: &str) -> PyResult<String> {
        use asof_engine::rule::{Dialect, Holds};
        let holds = match holds {
            "rows" => Holds::Rows,
            "supersessions" => Holds::Supersessions,
            other => return Err(PyException::new_err(format!("no view holds {other:?}"))),
        };
        let dialect = Dialect::parse(dialect).map_err(|e| PyException::new_err(e.to_string()))?;
        asof_engine::rule::sql::ddl(&holds.schema(), dialect)
            .map_err(|e| PyException::new_err(e.to_string()))
    }

    /// One cut (a diff with `window`): a JSON object, `{"kind": "sql", "sql", "views":
    /// [{"name", "holds", "paths"}], "coverage"}` for a cut the version answers, or `{"kind":
    /// "error", "status", "envelope"}` with the envelope the service answers instead (a hole,
    /// `409 coverage_missing`, or a refused argument).
    #[pyo3(signature = (window, as_of=None, as_of_start=None, as_of_end=None, visible_by=None,
        lane=None, source=None, ticker=None, cik=None, prefix="asof", dialect="spark"))]
    #[allow(clippy::too_many_arguments)]
    fn cut(
        &self,
        py: Python<'_>,
        window: bool,
        as_of: Option<&str>,
        as_of_start: Option<&str>,
        as_of_end: Option<&str>,
        visible_by: Option<&str>,
        lane: Option<&str>,
        source: Option<&str>,
        ticker: Option<&str>,
        cik: Option<&str>,
        prefix: &str,
        dialect: &str,
    ) -> PyResult<String> {
        use asof_engine::rule::{CutArgs, Dialect, Emitted, Names};
        let args = CutArgs {
            window,
            as_of,
            as_of_start,
            as_of_end,
            visible_by,
            lane,
            source,
            ticker,
            cik,
        };
        let dialect = Dialect::parse(dialect).map_err(|e| PyException::new_err(e.to_string()))?;
        let refused = |status: u16, code: &str, message: String, param: Option<String>| {
            serde_json::json!({
                "kind": "error",
                "status": status,
                "envelope": {
                    "corpus_version": self.version, "count": null, "results": [],
                    "error": {"code": code, "message": message, "param": param},
                },
            })
            .to_string()
        };
        let q = match args.query(&self.manifest) {
            Ok(q) => q,
            Err(asof_engine::Error::InvalidClock { param, fault }) => {
                return Ok(refused(
                    400,
                    "invalid_clock",
                    fault.to_string(),
                    Some(param),
                ));
            }
            Err(asof_engine::Error::InvalidInput { param, message }) => {
                return Ok(refused(400, "invalid_request", message, Some(param)));
            }
            Err(e) => return Err(CorpusError::new_err(e.to_string())),
        };
        let empty = asof_engine::model::identity::IdentityIndex::default();
        let identity = match (&q.entity, self.identity.get()) {
            (asof_engine::Entity::Ticker(_), None) => {
                return Err(PyException::new_err(
                    "a ticker cut needs the identity object: load_identity first",
                ));
            }
            (_, Some(i)) => i,
            (_, None) => &empty,
        };
        let names = Names::prefixed(prefix);
        let emitted = py
            .detach(|| {
                runtime().block_on(asof_engine::rule::emit_cut(
                    &self.manifest,
                    identity,
                    &q,
                    &names,
                    dialect,
                ))
            })
            .map_err(|e| CorpusError::new_err(e.to_string()))?;
        Ok(match emitted {
            Emitted::Hole { coverage } => serde_json::json!({
                "kind": "error",
                "status": 409,
                "envelope": {
                    "corpus_version": self.version, "count": null, "results": [],
                    "status": "coverage_missing", "coverage": coverage,
                    "error": {
                        "code": "coverage_missing",
                        "message": format!(
                            "the corpus does not cover this cut ({} coverage key(s) missing)",
                            coverage.missing_total
                        ),
                        "param": null,
                    },
                },
            })
            .to_string(),
            Emitted::Query {
                sql,
                views,
                coverage,
            } => serde_json::json!({
                "kind": "sql",
                "sql": sql,
                "coverage": coverage,
                "source": q.source.as_str(),
                "lane": q.lane.as_str(),
                "views": views.iter().map(|v| serde_json::json!({
                    "name": v.name,
                    "holds": match v.holds {
                        asof_engine::rule::Holds::Rows => "rows",
                        asof_engine::rule::Holds::Supersessions => "supersessions",
                    },
                    "paths": v.paths,
                })).collect::<Vec<_>>(),
            })
            .to_string(),
        })
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LocalCorpus>()?;
    m.add_class::<RulePlanner>()?;
    m.add_class::<ArrowStream>()?;
    m.add_class::<ArrowBatch>()?;
    m.add("CorpusError", m.py().get_type::<CorpusError>())?;
    m.add("SqlError", m.py().get_type::<SqlError>())?;
    Ok(())
}
