//! The response envelope and the record shapes every JSON answer uses (HTTP and CLI alike).

use asof_engine::coverage::Coverage;
use asof_engine::identity::Mapping;
use asof_engine::{Certificate, Instant, NewsRow};
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

/// `status` of an envelope: an outcome of this response, not a lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    CoverageMissing,
    Error,
}

impl Status {
    /// The wire spelling (`ok`, `coverage_missing`, `error`), for text output.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::CoverageMissing => "coverage_missing",
            Status::Error => "error",
        }
    }
}

/// Why the service did not answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code: `invalid_request`, `invalid_clock`, `coverage_missing`,
    /// `cursor_expired`, `unauthorized`, `forbidden`, `not_found`, `method_not_allowed`,
    /// `range_not_satisfiable`, `payload_too_large`, `uri_too_long`, `headers_too_large`,
    /// `rate_limited`, `timeout`, `overloaded`, `not_ready`, `query_too_broad`,
    /// `state_unavailable`, `storage_unavailable`,
    /// `internal`, and the account, billing and connector codes their routes document.
    pub code: String,
    /// A sentence for people; never carries internals.
    pub message: String,
    /// The query or path parameter at fault, when one is.
    pub param: Option<String>,
}

/// The envelope of every JSON response. `count` is null whenever the service did not answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Envelope<T: Serialize> {
    /// Echoed from `X-Request-Id` when that is a UUID, else minted.
    #[schema(pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")]
    pub request_id: String,
    /// `sha256:<hex>` of the corpus manifest that answered (also `X-Corpus-Version`).
    #[schema(pattern = r"^(sha256:[0-9a-f]{64})?$")]
    pub corpus_version: String,
    /// The cut answered (the end of the window on diff routes).
    pub as_of: Option<Instant>,
    /// The clock visibility was evaluated on.
    #[schema(value_type = Option<asof_engine::VisibleBy>)]
    pub visible_by: Option<String>,
    pub status: Status,
    /// The records of the route; `[]` on every refusal.
    pub results: Vec<T>,
    /// Opaque token for the next page (pass back as `cursor` with the same query); null on
    /// the last page.
    pub next_cursor: Option<String>,
    /// Number of `results`; null whenever the service did not answer (holes, every error).
    #[schema(minimum = 0)]
    pub count: Option<usize>,
    pub coverage: CoverageBody,
    pub error: Option<ErrorBody>,
    /// Present and true on sample routes and the sample tier of the MCP endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub sample: Option<bool>,
    /// Connector answers only: where the results came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub origin: Option<Origin>,
    /// Connector answers only: false, nothing from the vendor is kept or served to anyone else.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub cached: Option<bool>,
}

/// `origin` of a connector answer: the vendor, when it answered, and the license its data is
/// under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Origin {
    /// `vendor_a` or `vendor_b`.
    pub vendor: String,
    /// When the vendor answered (RFC 3339 UTC with `Z`).
    #[schema(value_type = String, example = "2026-11-25T12:00:00.123456Z")]
    pub fetched_at: Instant,
    /// The license class in force for this vendor's data (from the server's configuration).
    pub license_class: String,
}

/// `coverage` of the envelope: the spec's two lists, plus how many keys `missing` left out.
///
/// Key shapes: `<source_id>/<YYYY-MM-DD>` (a source-day partition),
/// `identity.ticker/<TICKER>@<YYYY-MM-DD>` (an identity cut),
/// `<source_id>/frontier:<first>..<last>;holes=<n>` (a certified span) and
/// `availability.<source_id>/<YYYY-MM-DD>` (an availability-clock partition).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
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
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NewsRecord {
    /// Record identifier (accession and CIK for filings).
    pub id: String,
    #[schema(value_type = asof_engine::SourceId)]
    pub source_id: String,
    #[schema(value_type = asof_engine::Lane)]
    pub lane: String,
    /// Filing form type (EDGAR).
    pub form: Option<String>,
    /// Filing accession number (EDGAR).
    pub accession: Option<String>,
    /// CIK without leading zeros.
    pub cik: Option<String>,
    pub title: String,
    pub event_at: Option<Instant>,
    /// Day-resolution publications carry 23:59:59Z of their UTC date.
    pub published_at: Option<Instant>,
    /// Set on forward-lane rows (the fetch minute); never imputed.
    pub available_at: Option<Instant>,
    /// Filer-acceptance instant.
    pub acceptance_at: Option<Instant>,
    /// When this revision entered the corpus.
    pub committed_at: Option<Instant>,
    /// How `available_at` is known: `unknown` or `local_first_seen` (forward-lane rows: the
    /// fetch minute a live poller first saw the row).
    pub availability_basis: asof_engine::AvailabilityBasis,
    pub revision_id: String,
    /// The revision this one corrects, if any.
    pub supersedes: Option<String>,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub content_sha256: String,
    /// Where the agency publishes the source document.
    pub source_locator: String,
    /// Source-specific entity identifier (e.g. the CIK of a filer), when the source has one.
    pub entity_id: Option<String>,
    /// Source-specific fields of the row as published (any JSON value).
    #[schema(value_type = Value)]
    pub payload: Option<Box<RawValue>>,
    /// Present and true on the sample tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub sample: Option<bool>,
    /// True on rows returned for a cut.
    pub as_of_visible: bool,
}

impl NewsRecord {
    pub fn from_row(r: NewsRow, sample: bool) -> Self {
        NewsRecord {
            payload: r.payload.map(owned_payload),
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

/// A row's stored `payload` as answered. Adapters store it as serde_json's compact encoding of
/// a JSON value (keys sorted, minimal escapes), which is already what re-encoding the parsed
/// value would print; so valid JSON goes out as stored, checked but not rebuilt (building a
/// `Value` per row per request was ~7% of a replica's CPU serving real rows). Text that is not
/// JSON (no adapter writes any) goes out as a JSON string, as before.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Payload<'a> {
    Json(&'a RawValue),
    Text(&'a str),
}

impl<'a> Payload<'a> {
    pub fn of(stored: &'a str) -> Self {
        serde_json::from_str(stored).map_or(Payload::Text(stored), Payload::Json)
    }
}

/// The owned form of [`Payload`]: the same bytes.
fn owned_payload(stored: String) -> Box<RawValue> {
    match serde_json::from_str::<&RawValue>(&stored) {
        Ok(raw) => raw.to_owned(),
        Err(_) => serde_json::value::to_raw_value(&stored).expect("a string encodes as JSON"),
    }
}

/// [`NewsRecord`] borrowed from a row: the same JSON field for field (a test holds the two
/// equal), without copying the row's strings. The news routes encode their pages with it, from
/// rows shared with the engine's row cache.
#[derive(Debug, Serialize)]
pub struct NewsRecordRef<'a> {
    pub id: &'a str,
    pub source_id: &'static str,
    pub lane: &'static str,
    pub form: Option<&'a str>,
    pub accession: Option<&'a str>,
    pub cik: Option<&'a str>,
    pub title: &'a str,
    pub event_at: Option<Instant>,
    pub published_at: Option<Instant>,
    pub available_at: Option<Instant>,
    pub acceptance_at: Option<Instant>,
    pub committed_at: Option<Instant>,
    pub availability_basis: asof_engine::AvailabilityBasis,
    pub revision_id: &'a str,
    pub supersedes: Option<&'a str>,
    pub content_sha256: &'a str,
    pub source_locator: &'a str,
    pub entity_id: Option<&'a str>,
    pub payload: Option<Payload<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<bool>,
    pub as_of_visible: bool,
}

impl<'a> NewsRecordRef<'a> {
    pub fn of(r: &'a NewsRow, sample: bool) -> Self {
        NewsRecordRef {
            payload: r.payload.as_deref().map(Payload::of),
            id: &r.id,
            source_id: r.source_id.as_str(),
            lane: r.lane.as_str(),
            form: r.form.as_deref(),
            accession: r.accession.as_deref(),
            cik: r.cik.as_deref(),
            title: &r.title,
            event_at: r.event_at,
            published_at: r.published_at,
            available_at: r.available_at,
            acceptance_at: r.acceptance_at,
            committed_at: r.committed_at,
            availability_basis: r.availability_basis,
            revision_id: &r.revision_id,
            supersedes: r.supersedes.as_deref(),
            content_sha256: &r.content_sha256,
            source_locator: &r.source_locator,
            entity_id: r.entity_id.as_deref(),
            sample: sample.then_some(true),
            as_of_visible: true,
        }
    }
}

impl NewsRecordRef<'_> {
    /// The record's JSON, as a page encodes it.
    pub fn to_json(&self) -> Box<RawValue> {
        serde_json::value::to_raw_value(self).expect("a record encodes as JSON")
    }
}

/// A keyed (not sample) record's JSON: the one encoding kept with a cached row, whether a
/// serving thread makes it or the scan pool does ([`asof_engine::Corpus::set_row_encoder`]).
pub fn keyed_record_json(row: &NewsRow) -> Box<RawValue> {
    NewsRecordRef::of(row, false).to_json()
}

/// A news record as a page encodes it: from its fields, or the encoding kept with a cached row
/// ([`asof_engine::record::SharedRow::json`], made by [`keyed_record_json`]).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Record<'a> {
    /// Boxed: only the sample tier's pages encode from fields, and a page is one or the other.
    Fields(Box<NewsRecordRef<'a>>),
    Encoded(&'a RawValue),
}

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

/// The envelope of every refusal: `status` is `coverage_missing` or `error`, `count` and
/// `next_cursor` are null, `results` is empty and `error` is set. Holes also carry `as_of`,
/// `visible_by` and the missing keys in `coverage.missing`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    #[schema(pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")]
    pub request_id: String,
    /// Empty when the refusal came before a corpus version was chosen.
    #[schema(pattern = r"^(sha256:[0-9a-f]{64})?$")]
    pub corpus_version: String,
    pub as_of: Option<Instant>,
    #[schema(value_type = Option<asof_engine::VisibleBy>)]
    pub visible_by: Option<String>,
    #[schema(value_type = String, pattern = "^(coverage_missing|error)$")]
    pub status: Status,
    /// Always empty.
    #[schema(value_type = Vec<Object>, max_items = 0)]
    pub results: [u8; 0],
    #[schema(schema_with = null_schema)]
    pub next_cursor: Option<String>,
    /// Always null: the service did not answer.
    #[schema(schema_with = null_schema)]
    pub count: Option<usize>,
    pub coverage: CoverageBody,
    pub error: ErrorBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub sample: Option<bool>,
}

/// The schema of a member that is always JSON null.
fn null_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::Null)
        .build()
}

/// A coverage certificate as answered.
pub type CertificateRecord = Certificate;
/// A mapping record as answered.
pub type MappingRecord = Mapping;

#[cfg(test)]
mod tests {
    use asof_engine::{Instant, Lane, SourceId};
    use serde_json::Value;

    use super::*;

    fn row(payload: Option<&str>) -> NewsRow {
        let at = |s: &str| Some(Instant::parse(s).unwrap());
        NewsRow {
            id: "0000320193-26-000001_320193".into(),
            source_id: SourceId::SecEdgar,
            lane: Lane::ForwardFirstSeen,
            form: Some("8-K".into()),
            accession: Some("0000320193-26-000001".into()),
            cik: Some("320193".into()),
            title: "8-K - \"Apple\" Inc.\n".into(),
            event_at: at("2026-01-05T09:00:00Z"),
            published_at: at("2026-01-05T09:30:00Z"),
            available_at: at("2026-01-05T09:31:00Z"),
            acceptance_at: at("2026-01-05T09:29:59.123456Z"),
            committed_at: at("2026-01-06T00:00:00Z"),
            availability_basis: asof_engine::AvailabilityBasis::LocalFirstSeen,
            revision_id: "r".repeat(64),
            supersedes: Some("s".repeat(64)),
            content_sha256: "c".repeat(64),
            source_locator: "https://www.sec.gov/Archives/x.txt".into(),
            entity_id: Some("320193".into()),
            payload: payload.map(str::to_owned),
        }
    }

    #[test]
    fn a_borrowed_record_encodes_exactly_as_the_owned_one() {
        let mut bare = row(None);
        bare.form = None;
        bare.supersedes = None;
        bare.event_at = None;
        for r in [
            row(Some(r#"{"b":[1,2.5,null],"a":"x\u00e9"}"#)),
            row(Some(r#"{"a":"xé","b":[1,2.5,null]}"#)),
            row(Some("not json")),
            bare,
        ] {
            for sample in [false, true] {
                let owned =
                    serde_json::to_string(&NewsRecord::from_row(r.clone(), sample)).unwrap();
                let borrowed = serde_json::to_string(&NewsRecordRef::of(&r, sample)).unwrap();
                assert_eq!(borrowed, owned);
            }
        }
    }

    #[test]
    fn a_record_kept_with_its_cached_row_is_the_same_bytes_and_is_encoded_once() {
        use asof_engine::record::{RowBlock, SharedRow};
        let block: std::sync::Arc<RowBlock> = std::sync::Arc::new(
            [row(Some(r#"{"a":"x\u00e9"}"#)), row(None)]
                .into_iter()
                .collect(),
        );
        let encodes = std::cell::Cell::new(0);
        for _ in 0..3 {
            for i in 0..2 {
                let shared = SharedRow::new(block.clone(), i);
                let kept = shared.json(|r| {
                    encodes.set(encodes.get() + 1);
                    NewsRecordRef::of(r, false).to_json()
                });
                let owned = NewsRecord::from_row(block[i].clone(), false);
                assert_eq!(kept.get(), serde_json::to_string(&owned).unwrap());
                assert_eq!(
                    serde_json::to_string(&Record::Encoded(kept)).unwrap(),
                    serde_json::to_string(&Record::Fields(Box::new(NewsRecordRef::of(
                        &block[i], false,
                    ))))
                    .unwrap()
                );
            }
        }
        assert_eq!(
            encodes.get(),
            2,
            "each row encoded once, whoever holds its block"
        );
    }

    #[test]
    fn a_payload_an_adapter_stored_goes_out_byte_for_byte_as_re_encoding_it_would_print() {
        // What adapters store: serde_json's encoding of a value (here with the awkward parts:
        // unsorted keys, escapes, non-ASCII, floats, big integers, nesting).
        let value = serde_json::json!({
            "z": 1, "a": "line\nbreak \"quoted\" \u{1}é", "m": [0.1, 2.5e-8, 1e300, -0.0],
            "big": u64::MAX, "neg": i64::MIN, "nested": {"y": null, "x": [true, false, {}]},
        });
        let stored = value.to_string();
        let reencoded =
            serde_json::to_string(&serde_json::from_str::<Value>(&stored).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_string(&Payload::of(&stored)).unwrap(),
            reencoded
        );
        assert_eq!(
            serde_json::to_string(&owned_payload(stored)).unwrap(),
            reencoded
        );
    }

    #[test]
    fn a_payload_that_is_not_json_goes_out_as_a_json_string() {
        for text in ["not json", "{\"a\":", ""] {
            let want = serde_json::to_string(text).unwrap();
            assert_eq!(serde_json::to_string(&Payload::of(text)).unwrap(), want);
            assert_eq!(
                serde_json::to_string(&owned_payload(text.into())).unwrap(),
                want
            );
        }
    }
}
