//! The response envelope and the record shapes every JSON answer uses (HTTP and CLI alike).

use asof_engine::coverage::Coverage;
use asof_engine::identity::Mapping;
use asof_engine::{Certificate, Instant, NewsRow};
use serde::Serialize;
use serde_json::Value;

/// `status` of an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    CoverageMissing,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    pub param: Option<String>,
}

/// The envelope of every JSON response. `count` is null whenever the service did not answer.
#[derive(Debug, Clone, Serialize)]
pub struct Envelope<T: Serialize> {
    pub request_id: String,
    pub corpus_version: String,
    pub as_of: Option<Instant>,
    pub visible_by: Option<String>,
    pub status: Status,
    pub results: Vec<T>,
    pub next_cursor: Option<String>,
    pub count: Option<usize>,
    pub coverage: CoverageBody,
    pub error: Option<ErrorBody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<bool>,
}

/// `coverage` of the envelope: the spec's two lists, plus how many keys `missing` left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CoverageBody {
    pub touched: Vec<String>,
    pub missing: Vec<String>,
    /// Number of missing keys in all; `missing` lists at most 32, earliest first.
    pub missing_total: usize,
}

impl From<Coverage> for CoverageBody {
    fn from(c: Coverage) -> Self {
        CoverageBody {
            touched: c.touched,
            missing: c.missing,
            missing_total: c.missing_total,
        }
    }
}

/// A news record as answered: the row's fields, `payload` as JSON, `as_of_visible: true`.
#[derive(Debug, Clone, Serialize)]
pub struct NewsRecord {
    pub id: String,
    pub source_id: String,
    pub lane: String,
    pub form: Option<String>,
    pub accession: Option<String>,
    pub cik: Option<String>,
    pub title: String,
    pub event_at: Option<Instant>,
    pub published_at: Option<Instant>,
    pub available_at: Option<Instant>,
    pub acceptance_at: Option<Instant>,
    pub committed_at: Option<Instant>,
    pub availability_basis: String,
    pub revision_id: String,
    pub supersedes: Option<String>,
    pub content_sha256: String,
    pub source_locator: String,
    pub entity_id: Option<String>,
    pub payload: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<bool>,
    pub as_of_visible: bool,
}

impl NewsRecord {
    pub fn from_row(r: NewsRow, sample: bool) -> Self {
        NewsRecord {
            payload: r
                .payload
                .as_deref()
                .map(|p| serde_json::from_str(p).unwrap_or_else(|_| Value::String(p.to_owned()))),
            id: r.id,
            source_id: r.source_id.to_string(),
            lane: r.lane.to_string(),
            form: r.form,
            accession: r.accession,
            cik: r.cik,
            title: r.title,
            event_at: r.event_at,
            published_at: r.published_at,
            available_at: r.available_at,
            acceptance_at: r.acceptance_at,
            committed_at: r.committed_at,
            availability_basis: r.availability_basis,
            revision_id: r.revision_id,
            supersedes: r.supersedes,
            content_sha256: r.content_sha256,
            source_locator: r.source_locator,
            entity_id: r.entity_id,
            sample: sample.then_some(true),
            as_of_visible: true,
        }
    }
}

/// A coverage certificate as answered.
pub type CertificateRecord = Certificate;
/// A mapping record as answered.
pub type MappingRecord = Mapping;
