//! The engine's one error type: every fallible engine function returns `Result<T>`.

use std::fmt;

/// What went wrong inside the engine. Callers (the server, the CLI) map these to user-facing
/// messages; the `Display` text of internal variants is for logs, never for clients.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A clock string broke the spec's rules (offset, bare date, malformed).
    #[error("{param}: {fault}")]
    InvalidClock { param: String, fault: ClockFault },
    /// A caller-supplied value other than a clock is not acceptable.
    #[error("{param}: {message}")]
    InvalidInput { param: String, message: String },
    /// The manifest or a partition does not match what was published.
    #[error("integrity check failed for {object}: {detail}")]
    Integrity { object: String, detail: String },
    /// The corpus has no published version at the given location.
    #[error("no corpus published at {0}")]
    NoCorpus(String),
    /// The manifest could not be parsed or is not of a known format.
    #[error("manifest {path}: {detail}")]
    Manifest { path: String, detail: String },
    /// A SQL statement was refused (not a read-only query).
    #[error("refused: {0}")]
    Refused(String),
    /// Every scan slot stayed taken for the whole wait ([`crate::ScanPool`]).
    #[error("every scan slot is taken")]
    Busy,
    /// The question would look at more rows than one request may ([`crate::read::scan_pool::Budget`]).
    #[error("the question reads more than {limit} rows")]
    TooBroad { limit: u64 },
    /// Another publisher moved the pointer since this one read its parent (publishers rebase
    /// on it; it reaches a caller only after the bounded retries, `crate::write::publish`).
    #[error("the corpus pointer moved: expected {expected:?}, found {found:?}")]
    PointerMoved {
        expected: Option<String>,
        found: Option<String>,
    },
    /// The object store cannot write conditionally and no shared publish lock is configured.
    #[error(
        "{0} does not support conditional writes, so concurrent publishers could lose a version; \
         set ASOF_PUBLISH_LOCK to a lock file every publisher shares"
    )]
    NoConditionalWrites(String),
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    #[error("query: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

/// Which rule a clock string broke; the message tells the user which of the three it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockFault {
    /// A numeric offset such as `+02:00` instead of a literal `Z`.
    Offset,
    /// A bare `YYYY-MM-DD`, which is an interval, not an instant.
    BareDate,
    /// Anything else that does not match the clock pattern or is not a real instant.
    Malformed,
}

impl fmt::Display for ClockFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClockFault::Offset => {
                "a numeric UTC offset was sent; send the instant in UTC with a literal Z \
                 (YYYY-MM-DDTHH:MM:SS[.fraction]Z); offsets are refused, never converted \
                 (in a query string an unencoded `+` arrives as a space)"
            }
            ClockFault::BareDate => {
                "a bare date was sent where an instant is required (a date is an interval, \
                 not an instant); send YYYY-MM-DDTHH:MM:SS[.fraction]Z"
            }
            ClockFault::Malformed => {
                "malformed timestamp; expected RFC 3339 UTC with a literal Z \
                 (YYYY-MM-DDTHH:MM:SS[.fraction]Z)"
            }
        })
    }
}

impl Error {
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidInput {
            param: param.into(),
            message: message.into(),
        }
    }
    pub fn integrity(object: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Integrity {
            object: object.into(),
            detail: detail.into(),
        }
    }

    /// Whether an object that was read does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Store(object_store::Error::NotFound { .. }))
    }

    /// Whether the error means the object store could not be reached (down, the network
    /// gone, timing out), as opposed to a corpus or query fault: the first is worth a retry
    /// by the client, the second is not. A missing object is an integrity fault, not this.
    pub fn is_unavailable(&self) -> bool {
        if let Error::Store(e) = self {
            return transport(e);
        }
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            if let Some(os) = e.downcast_ref::<object_store::Error>()
                && transport(os)
            {
                return true;
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::NotConnected
                        | std::io::ErrorKind::BrokenPipe
                        | std::io::ErrorKind::TimedOut
                )
            {
                return true;
            }
            next = e.source();
        }
        false
    }
}

/// An object-store error of the transport (the backend's client failed or gave up), not one
/// that names an object's state (missing, exists, precondition).
fn transport(e: &object_store::Error) -> bool {
    matches!(e, object_store::Error::Generic { .. })
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
