//! The refusals an answer can be, and their one mapping to a status, a stable code and a
//! message: every front end (the HTTP envelope, MCP's `isError`, `asof query`, the Python
//! module's exceptions) says them as written here.
//!
//! The server's `ApiError` wraps this type for the refusals of answers and adds its own (keys,
//! limits, billing); it never restates these.

use asof_engine::model::coverage::Coverage;
use asof_engine::{Instant, VisibleBy};

/// Why an answer could not be given.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("{message}")]
    InvalidRequest {
        param: Option<String>,
        message: String,
    },
    #[error("{message}")]
    InvalidClock { param: String, message: String },
    /// A hole: the answer depends on source-days or identity intervals the corpus does not
    /// hold. Never an empty answer.
    #[error("coverage missing")]
    CoverageMissing {
        coverage: Coverage,
        as_of: Option<Instant>,
        visible_by: Option<String>,
    },
    #[error("cursor expired")]
    CursorExpired,
    #[error("{0}")]
    NotFound(String),
    /// A pinned `corpus_version` this deployment never published (no manifest of its corpus
    /// has that hash, or it was written and never served).
    #[error("corpus_version {version} was never published by this deployment")]
    VersionUnknown { version: String },
    /// A pinned `corpus_version` that was published but is outside the retention policy.
    #[error("corpus_version {version} is no longer retained: {why}")]
    VersionNotRetained { version: String, why: String },
    /// The question would read more rows than one request may (`--max-walk-rows`): the same
    /// request would be refused again, so it is a 400, not a retryable 503.
    #[error("query too broad")]
    TooBroad { limit: u64 },
    #[error("overloaded")]
    Overloaded { retry_after: u64 },
    /// The object store holding the corpus cannot be reached just now.
    #[error("corpus storage unavailable")]
    StorageUnavailable,
    #[error("internal error")]
    Internal,
}

/// What answers return.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidRequest {
            param: Some(param.into()),
            message: message.into(),
        }
    }

    /// The one mapping from a hole to its refusal: the coverage it lacks, at the cut (and the
    /// clock, on cut and diff routes).
    pub fn hole(coverage: Coverage, as_of: Option<Instant>, visible_by: Option<VisibleBy>) -> Self {
        Error::CoverageMissing {
            coverage,
            as_of,
            visible_by: visible_by.map(|v| v.to_string()),
        }
    }

    /// The HTTP status of the refusal (also what the in-process API and MCP report).
    pub fn status(&self) -> u16 {
        match self {
            Error::InvalidRequest { .. } | Error::InvalidClock { .. } | Error::TooBroad { .. } => {
                400
            }
            Error::CoverageMissing { .. } | Error::CursorExpired => 409,
            Error::NotFound(_) | Error::VersionUnknown { .. } => 404,
            Error::VersionNotRetained { .. } => 410,
            Error::Overloaded { .. } | Error::StorageUnavailable => 503,
            Error::Internal => 500,
        }
    }

    /// Seconds a client should wait before trying again, for the refusals that pass.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Error::Overloaded { retry_after } => Some(*retry_after),
            Error::StorageUnavailable => Some(5),
            _ => None,
        }
    }

    /// The stable `error.code` (documented in the OpenAPI description).
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidRequest { .. } => "invalid_request",
            Error::InvalidClock { .. } => "invalid_clock",
            Error::CoverageMissing { .. } => "coverage_missing",
            Error::CursorExpired => "cursor_expired",
            Error::NotFound(_) => "not_found",
            Error::VersionUnknown { .. } => "corpus_version_unknown",
            Error::VersionNotRetained { .. } => "corpus_version_not_retained",
            Error::TooBroad { .. } => "query_too_broad",
            Error::Overloaded { .. } => "overloaded",
            Error::StorageUnavailable => "storage_unavailable",
            Error::Internal => "internal",
        }
    }

    /// The query or path parameter at fault, when one is.
    pub fn param(&self) -> Option<String> {
        match self {
            Error::InvalidRequest { param, .. } => param.clone(),
            Error::InvalidClock { param, .. } => Some(param.clone()),
            Error::CursorExpired => Some("cursor".into()),
            Error::VersionUnknown { .. } | Error::VersionNotRetained { .. } => {
                Some("corpus_version".into())
            }
            _ => None,
        }
    }

    /// A sentence for people; never carries internals.
    pub fn message(&self) -> String {
        match self {
            Error::CoverageMissing { .. } => {
                "the answer depends on source-days or identity intervals the corpus does not hold (see coverage.missing); missing coverage is not zero events".into()
            }
            Error::CursorExpired => "the corpus moved to a new corpus_version since this cursor was minted; restart from the first page, or send corpus_version= (the version the walk began on) to finish it there".into(),
            Error::VersionUnknown { version } => format!("corpus_version {version} was never published by this deployment (no served version descends from it); /v1/meta names the version served now"),
            Error::Overloaded { retry_after } => format!("too many queries are scanning the corpus right now; retry after {retry_after} s"),
            Error::TooBroad { limit } => format!("answering this page would read more than {limit} rows of the corpus, more than one request may; narrow the question (a ticker or cik, a shorter diff window, a clock whose rows are dense at this cut) or download the partitions (/v1/files) and query them locally"),
            Error::StorageUnavailable => "the service cannot read the corpus storage just now; nothing partial is answered; retry in a few seconds".into(),
            Error::Internal => "internal error; the request id identifies it in the service logs".into(),
            other => other.to_string(),
        }
    }
}

impl From<asof_cursor::Error> for Error {
    fn from(e: asof_cursor::Error) -> Self {
        match e {
            asof_cursor::Error::Invalid => Error::invalid(
                "cursor",
                "cursor is not a token this service minted for this operation and filter set; restart without cursor",
            ),
            asof_cursor::Error::Expired => Error::CursorExpired,
        }
    }
}

impl From<asof_engine::Error> for Error {
    fn from(e: asof_engine::Error) -> Self {
        match e {
            asof_engine::Error::InvalidClock { param, fault } => Error::InvalidClock {
                message: format!("{param}: {fault}"),
                param,
            },
            asof_engine::Error::InvalidInput { param, message } => Error::InvalidRequest {
                param: Some(param),
                message,
            },
            asof_engine::Error::Busy => Error::Overloaded { retry_after: 1 },
            asof_engine::Error::TooBroad { limit } => Error::TooBroad { limit },
            other if other.is_unavailable() => {
                tracing::warn!(error = %other, "corpus storage unreachable");
                Error::StorageUnavailable
            }
            other => {
                tracing::error!(error = %other, "engine fault");
                Error::Internal
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hole_is_a_409_coverage_missing_naming_its_cut_and_clock() {
        let mut coverage = Coverage::default();
        coverage.miss("sec.edgar/2026-01-05".into());
        let at = Instant::parse("2026-01-06T00:00:00Z").unwrap();
        let e = Error::hole(coverage.clone(), Some(at), Some(VisibleBy::CommittedAt));
        assert_eq!((e.status(), e.code()), (409, "coverage_missing"));
        let Error::CoverageMissing {
            coverage: c,
            as_of,
            visible_by,
        } = e
        else {
            unreachable!()
        };
        assert_eq!(c, coverage);
        assert_eq!(as_of, Some(at));
        assert_eq!(visible_by.as_deref(), Some("committed_at"));
    }

    #[test]
    fn an_engine_fault_is_answered_without_its_detail() {
        let e = Error::from(asof_engine::Error::Integrity {
            object: "secret path /x/y".into(),
            detail: "bad".into(),
        });
        assert_eq!((e.status(), e.code()), (500, "internal"));
        assert!(!e.message().contains("/x/y"));
    }
}
