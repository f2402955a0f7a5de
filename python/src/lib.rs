//! `asof._native`, the Python package's native module: `LocalCorpus` opens a corpus directory or
//! object-store URL in-process and answers the data routes through `asof_server::local` (the
//! routes' own parameter parsing, engine calls and envelopes), so `asof.open()` answers what
//! `asof.connect()` answers for the same corpus. Everything above the envelope (pages,
//! exceptions, frames) is the package's Python code, shared by both.

use std::sync::OnceLock;

use asof_server::local::LocalApi;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(
    _native,
    CorpusError,
    PyException,
    "The corpus could not be opened or read (no corpus there, an unknown version, a store error)."
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
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LocalCorpus>()?;
    m.add("CorpusError", m.py().get_type::<CorpusError>())?;
    Ok(())
}
