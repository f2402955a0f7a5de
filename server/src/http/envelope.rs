//! The envelope and record shapes of every JSON answer: the answer layer's
//! ([`asof_answer::envelope`]), and the file record only the server answers.

use asof_engine::Instant;
use serde::Serialize;
use utoipa::ToSchema;

pub use asof_answer::envelope::*;

/// A flat file: one Parquet partition of the corpus version (one source, lane and UTC day),
/// with a signed URL any HTTP client reads directly (DuckDB, pandas, curl). The bytes are those
/// the answers of this `corpus_version` were computed from.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FileRecord {
    /// The file's content hash: stable for the same bytes in every version that holds them;
    /// use it in `/v1/files/{id}`.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub id: String,
    /// `partition`: a source-lane-day partition (the corpus's own data; derived index files
    /// are not offered).
    #[schema(examples("partition"))]
    pub kind: &'static str,
    #[schema(value_type = asof_engine::SourceId)]
    pub source_id: String,
    #[schema(value_type = asof_engine::Lane)]
    pub lane: String,
    /// The UTC day the partition holds (rows by the day of `published_at`).
    #[schema(value_type = String, format = Date, example = "2026-01-05")]
    pub date: String,
    /// Rows in the file.
    pub row_count: u64,
    /// Size of the file in bytes (its `Content-Length`).
    pub bytes: u64,
    /// sha256 of the file's bytes, lowercase hex (also the download's `ETag`).
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub sha256: String,
    /// Whether the corpus certifies this source-day complete (`coverage_key`'s certificate in
    /// `/v1/coverage`). An uncertified file holds the rows the corpus has, not a whole day.
    pub certified: bool,
    /// The certificate's `row_count` (equal to `row_count`) when certified; null otherwise.
    pub certified_row_count: Option<u64>,
    /// The coverage key of the source-day (`<source_id>/<YYYY-MM-DD>`).
    pub coverage_key: String,
    /// Always `parquet` (Apache Parquet, the schema of `/v1/news` records: clocks as UTC
    /// microsecond timestamps, `payload` as JSON text).
    #[schema(examples("parquet"))]
    pub format: &'static str,
    /// `application/vnd.apache.parquet`.
    pub media_type: &'static str,
    /// The object's path under the corpus root (content-addressed).
    pub path: String,
    /// The corpus version this listing comes from.
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub corpus_version: String,
    /// A signed GET URL for the bytes, valid until `expires_at`; it carries no API key.
    /// `presigned` (the object store's own, the bytes never pass through the service) or
    /// `service` (this service's `/files/{id}`, serving ranges).
    pub url: String,
    /// Who signed `url`: `presigned` or `service`.
    #[schema(examples("presigned", "service"))]
    pub url_kind: &'static str,
    /// When `url` stops working (RFC 3339 UTC); ask `/v1/files/{id}` for a fresh one.
    pub expires_at: Instant,
}
