//! `asof._native`, the Python package's native module: `LocalCorpus` opens a corpus directory or
//! object-store URL in-process and answers the data routes through `asof_server::local` (the
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
use asof_engine::sql::SendableRecordBatchStream;
use asof_server::local::LocalApi;
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LocalCorpus>()?;
    m.add_class::<ArrowStream>()?;
    m.add_class::<ArrowBatch>()?;
    m.add("CorpusError", m.py().get_type::<CorpusError>())?;
    m.add("SqlError", m.py().get_type::<SqlError>())?;
    Ok(())
}
