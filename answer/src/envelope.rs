//! The envelope and the record shapes every JSON answer uses, whoever renders it (HTTP, MCP,
//! `asof query`, the Python module).

use asof_engine::model::coverage::{Coverage, CoverageKey};
use asof_engine::model::identity::Mapping;
use asof_engine::{Certificate, Instant, NewsRow};
use serde::Serialize;
use serde_json::value::RawValue;

use asof_engine::model::record::SharedRow;

use crate::answer::Answer;

/// `status` of an envelope: an outcome of this response, not a lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Envelope<T: Serialize> {
    /// Echoed from `X-Request-Id` when that is a UUID, else minted.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    )]
    pub request_id: String,
    /// `sha256:<hex>` of the corpus manifest that answered (also `X-Corpus-Version`).
    #[cfg_attr(feature = "openapi", schema(pattern = r"^(sha256:[0-9a-f]{64})?$"))]
    pub corpus_version: String,
    /// The cut answered (the end of the window on diff routes).
    pub as_of: Option<Instant>,
    /// The clock visibility was evaluated on.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<asof_engine::VisibleBy>))]
    pub visible_by: Option<String>,
    pub status: Status,
    /// The records of the route; `[]` on every refusal.
    pub results: Vec<T>,
    /// Opaque token for the next page (pass back as `cursor` with the same query); null on
    /// the last page.
    pub next_cursor: Option<String>,
    /// Number of `results`; null whenever the service did not answer (holes, every error).
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub count: Option<usize>,
    pub coverage: CoverageBody,
    pub error: Option<ErrorBody>,
    /// Present and true on sample routes and the sample tier of the MCP endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(required = false))]
    pub sample: Option<bool>,
    /// Connector answers only: where the results came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(required = false))]
    pub origin: Option<Origin>,
    /// Connector answers only: false, nothing from the vendor is kept or served to anyone else.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(required = false))]
    pub cached: Option<bool>,
}

/// `origin` of a connector answer: the vendor, when it answered, and the license its data is
/// under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Origin {
    /// `vendor_a` or `vendor_b`.
    pub vendor: String,
    /// When the vendor answered (RFC 3339 UTC with `Z`).
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "2026-11-25T12:00:00.123456Z"))]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CoverageBody {
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub touched: Vec<CoverageKey>,
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewsRecord {
    /// Record identifier (accession and CIK for filings).
    pub id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = asof_engine::SourceId))]
    pub source_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = asof_engine::Lane))]
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
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub content_sha256: String,
    /// Where the agency publishes the source document.
    pub source_locator: String,
    /// Source-specific entity identifier (e.g. the CIK of a filer), when the source has one.
    pub entity_id: Option<String>,
    /// Source-specific fields of the row as published (any JSON value).
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub payload: Option<Box<RawValue>>,
    /// Present and true on the sample tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(required = false))]
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
/// ([`asof_engine::model::record::SharedRow::json`], made by [`keyed_record_json`]).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Record<'a> {
    /// Boxed: only the sample tier's pages encode from fields, and a page is one or the other.
    Fields(Box<NewsRecordRef<'a>>),
    Encoded(&'a RawValue),
}

/// The records of a page's rows, as its envelope encodes them: a keyed row's encoding is kept
/// with the cached row (made once, by whichever thread first needs it); the sample tier's rows
/// carry `sample: true` and are encoded each time.
pub fn records(rows: &[SharedRow], sample: bool) -> Vec<Record<'_>> {
    rows.iter()
        .map(|r| {
            if sample {
                Record::Fields(Box::new(NewsRecordRef::of(r, true)))
            } else {
                Record::Encoded(r.json(keyed_record_json))
            }
        })
        .collect()
}

/// The envelope of every refusal: `status` is `coverage_missing` or `error`, `count` and
/// `next_cursor` are null, `results` is empty and `error` is set. Holes also carry `as_of`,
/// `visible_by` and the missing keys in `coverage.missing`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorEnvelope {
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    )]
    pub request_id: String,
    /// Empty when the refusal came before a corpus version was chosen.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^(sha256:[0-9a-f]{64})?$"))]
    pub corpus_version: String,
    pub as_of: Option<Instant>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<asof_engine::VisibleBy>))]
    pub visible_by: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, pattern = "^(coverage_missing|error)$"))]
    pub status: Status,
    /// Always empty.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>, max_items = 0))]
    pub results: [u8; 0],
    #[cfg_attr(feature = "openapi", schema(schema_with = null_schema))]
    pub next_cursor: Option<String>,
    /// Always null: the service did not answer.
    #[cfg_attr(feature = "openapi", schema(schema_with = null_schema))]
    pub count: Option<usize>,
    pub coverage: CoverageBody,
    pub error: ErrorBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(required = false))]
    pub sample: Option<bool>,
}

/// The schema of a member that is always JSON null.
#[cfg(feature = "openapi")]
fn null_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::Null)
        .build()
}

/// A body's first capacity is at most this (a bigger one grows past it).
const MAX_FIRST_CAPACITY: usize = 4 << 20;

thread_local! {
    /// The first capacity of the thread's next body: the size of the bodies it encoded lately
    /// (the last one's, or three quarters of the one before when that was larger, so a big
    /// answer among small ones is remembered for a few answers, then forgotten).
    static NEXT_CAPACITY: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// An envelope's JSON and one trailing newline: the body every front end sends.
///
/// Encoded into a `Vec` made, most of the time, as large as the body will be: one grown by
/// doubling from 128 bytes reallocated and copied a page of rows a dozen times (a quarter of
/// a keyed page's instructions, BENCHMARKS.md), and one encoded into a kept buffer and copied
/// out at its final size copied every body once (a 100-row page, 71 KiB, a quarter of its
/// instructions again).
pub fn encode<E: Serialize>(env: &E) -> Vec<u8> {
    body_of(0, |body| {
        serde_json::to_writer(body, env).expect("envelope serializes")
    })
}

/// The body `write` writes and one trailing newline, in a `Vec` of `size` bytes when the
/// caller knows about how long the body will be, else sized by the thread's recent bodies (see
/// [`encode`]).
fn body_of(size: usize, write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let first = NEXT_CAPACITY.get();
    let capacity = if size > 0 {
        size
    } else {
        first.min(MAX_FIRST_CAPACITY)
    };
    let mut body = Vec::with_capacity(capacity);
    write(&mut body);
    body.push(b'\n');
    NEXT_CAPACITY.set(body.len().max(first - first / 4));
    body
}

impl<T: Serialize> Envelope<T> {
    /// What [`encode`] makes of the envelope, byte for byte (the tests hold the two equal on
    /// random envelopes), written by hand around its `results`: the envelope's own keys go out
    /// as the constants they are and its plain strings are copied, where serde_json scans every
    /// key and string byte by byte for characters to escape (a tenth of a `/health` answer's
    /// instructions, BENCHMARKS.md). `results`, instants and any string that needs escaping go
    /// through serde_json.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_sized(None)
    }

    /// [`Envelope::encode`], when the caller knows how long `results` encode (`results_len`
    /// bytes, as [`encoded_len`] says of a page's encoded records): the body is then made at
    /// its size, where one sized by the thread's recent bodies was reallocated and copied
    /// whenever a page was longer than the ones before (pages of filers differ by tens of KiB).
    pub fn encode_sized(&self, results_len: Option<usize>) -> Vec<u8> {
        let size = results_len.map_or(0, |r| r + self.head_len());
        body_of(size, |out| {
            out.extend_from_slice(b"{\"request_id\":");
            write_str(out, &self.request_id);
            out.extend_from_slice(b",\"corpus_version\":");
            write_str(out, &self.corpus_version);
            out.extend_from_slice(b",\"as_of\":");
            write_json(out, &self.as_of);
            out.extend_from_slice(b",\"visible_by\":");
            write_opt_str(out, self.visible_by.as_deref());
            out.extend_from_slice(b",\"status\":\"");
            out.extend_from_slice(self.status.as_str().as_bytes());
            out.extend_from_slice(b"\",\"results\":");
            write_json(out, &self.results);
            out.extend_from_slice(b",\"next_cursor\":");
            write_opt_str(out, self.next_cursor.as_deref());
            out.extend_from_slice(b",\"count\":");
            write_json(out, &self.count);
            out.extend_from_slice(b",\"coverage\":{\"touched\":");
            write_keys(out, &self.coverage.touched);
            out.extend_from_slice(b",\"missing\":");
            write_strs(out, &self.coverage.missing);
            out.extend_from_slice(b",\"missing_total\":");
            write_json(out, &self.coverage.missing_total);
            out.extend_from_slice(b"},\"error\":");
            write_json(out, &self.error);
            if let Some(sample) = self.sample {
                out.extend_from_slice(b",\"sample\":");
                write_json(out, &sample);
            }
            if let Some(origin) = &self.origin {
                out.extend_from_slice(b",\"origin\":");
                write_json(out, origin);
            }
            if let Some(cached) = self.cached {
                out.extend_from_slice(b",\"cached\":");
                write_json(out, &cached);
            }
            out.push(b'}');
        })
    }
}

impl<T: Serialize> Envelope<T> {
    /// About how long the envelope around `results` encodes: its strings as they are, and room
    /// for the keys, the numbers and a few escapes.
    fn head_len(&self) -> usize {
        let strs = |v: &[String]| v.iter().map(|s| s.len() + 3).sum::<usize>();
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        let error = self
            .error
            .as_ref()
            .map_or(0, |e| e.code.len() + e.message.len() + opt(&e.param) + 64);
        let origin = self
            .origin
            .as_ref()
            .map_or(0, |o| o.vendor.len() + o.license_class.len() + 96);
        512 + self.request_id.len()
            + self.corpus_version.len()
            + opt(&self.visible_by)
            + opt(&self.next_cursor)
            + self
                .coverage
                .touched
                .iter()
                .map(|k| k.text_len() + 3)
                .sum::<usize>()
            + strs(&self.coverage.missing)
            + error
            + origin
    }
}

/// How long `records` encode as a JSON array, when every one is already encoded (a keyed
/// page's rows); `None` when some are encoded only as they are written (the sample tier's).
pub fn encoded_len(records: &[Record<'_>]) -> Option<usize> {
    let commas = records.len().saturating_sub(1);
    records.iter().try_fold(2 + commas, |len, r| match r {
        Record::Encoded(json) => Some(len + json.get().len()),
        Record::Fields(_) => None,
    })
}

/// `value` as serde_json encodes it.
fn write_json<V: Serialize + ?Sized>(out: &mut Vec<u8>, value: &V) {
    serde_json::to_writer(out, value).expect("an envelope's values serialize");
}

/// A JSON string as serde_json writes it: copied between quotes when it holds nothing to
/// escape (the ids, versions, clocks and coverage keys of an envelope), else by serde_json.
fn write_str(out: &mut Vec<u8>, s: &str) {
    if needs_no_escape(s) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        write_json(out, s);
    }
}

fn write_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => write_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// A JSON array of strings, as serde_json writes it.
fn write_strs(out: &mut Vec<u8>, items: &[String]) {
    out.push(b'[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, s);
    }
    out.push(b']');
}

/// Coverage keys as serde_json writes them: a day's key straight into the body (a source's
/// name, `/` and a date hold nothing serde_json escapes), any other as a string.
fn write_keys(out: &mut Vec<u8>, keys: &[CoverageKey]) {
    out.push(b'[');
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match k {
            CoverageKey::Text(t) => write_str(out, t),
            CoverageKey::Day(..) => {
                out.push(b'"');
                let start = out.len();
                k.write_to(out);
                debug_assert!(
                    out[start..]
                        .iter()
                        .all(|&b| b >= 0x20 && b != b'"' && b != b'\\')
                );
                out.push(b'"');
            }
        }
    }
    out.push(b']');
}

/// Whether serde_json writes `s` as it is between quotes: it escapes only `"`, `\` and the
/// control characters below U+0020 (never `/`, DEL or anything beyond ASCII). Checked without
/// stopping at the first such byte, so the loop is one the compiler checks many bytes at a
/// time.
fn needs_no_escape(s: &str) -> bool {
    !s.bytes().fold(false, |bad, b| {
        bad | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

/// What an error envelope says of a refusal: the answer layer's own ([`crate::Error`]) and
/// the server's, which wraps those and adds the refusals of keys, limits and billing.
pub trait Refusal {
    fn code(&self) -> &'static str;
    fn message(&self) -> String;
    fn param(&self) -> Option<String>;
    /// The hole, when the refusal is one: what is missing, at which cut and clock.
    fn hole(&self) -> Option<(&Coverage, Option<Instant>, Option<&str>)>;
}

impl Refusal for crate::Error {
    fn code(&self) -> &'static str {
        crate::Error::code(self)
    }
    fn message(&self) -> String {
        crate::Error::message(self)
    }
    fn param(&self) -> Option<String> {
        crate::Error::param(self)
    }
    fn hole(&self) -> Option<(&Coverage, Option<Instant>, Option<&str>)> {
        match self {
            crate::Error::CoverageMissing {
                coverage,
                as_of,
                visible_by,
            } => Some((coverage, *as_of, visible_by.as_deref())),
            _ => None,
        }
    }
}

impl ErrorEnvelope {
    /// The envelope of `refusal` (the one place refusals become JSON), for a request with
    /// this id, answered from `corpus_version` (empty when none was chosen yet: a replica
    /// still loading its corpus, as the contract allows for early errors).
    pub fn of(
        request_id: &str,
        corpus_version: &str,
        refusal: &impl Refusal,
        sample: bool,
    ) -> Self {
        let (coverage, as_of, visible_by, status) = match refusal.hole() {
            Some((coverage, as_of, visible_by)) => (
                CoverageBody::from(coverage.clone()),
                as_of,
                visible_by.map(str::to_owned),
                Status::CoverageMissing,
            ),
            None => (CoverageBody::default(), None, None, Status::Error),
        };
        ErrorEnvelope {
            request_id: request_id.to_owned(),
            corpus_version: corpus_version.to_owned(),
            as_of,
            visible_by,
            status,
            results: [],
            next_cursor: None,
            count: None,
            coverage,
            error: ErrorBody {
                code: refusal.code().into(),
                message: refusal.message(),
                param: refusal.param(),
            },
            sample: sample.then_some(true),
        }
    }
}

impl<T: Serialize> Envelope<T> {
    /// The envelope of an answer, for a request with this id, answered from `corpus_version`.
    pub fn of(request_id: String, corpus_version: String, answer: Answer<T>) -> Self {
        Envelope {
            request_id,
            corpus_version,
            as_of: answer.as_of,
            visible_by: answer.visible_by.map(|v| v.to_string()),
            status: Status::Ok,
            count: Some(answer.results.len()),
            results: answer.results,
            next_cursor: answer.next_cursor,
            coverage: CoverageBody::from(answer.coverage),
            error: None,
            sample: answer.sample.then_some(true),
            origin: None,
            cached: None,
        }
    }
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
    fn each_encoding_is_its_value_and_a_newline_whatever_the_thread_encoded_before() {
        let big = serde_json::json!({ "rows": vec!["x".repeat(1000); 50] });
        let small = serde_json::json!({ "rows": [] });
        let mut expected = serde_json::to_vec(&big).unwrap();
        expected.push(b'\n');
        assert_eq!(encode(&big), expected);
        assert_eq!(encode(&small), b"{\"rows\":[]}\n");
        // A body past the largest first capacity is answered whole, and the next ones too.
        let huge = serde_json::json!({ "rows": "y".repeat(MAX_FIRST_CAPACITY + 1) });
        let out = encode(&huge);
        assert_eq!(
            out.len(),
            MAX_FIRST_CAPACITY + 1 + r#"{"rows":""}"#.len() + 1
        );
        assert!(out.ends_with(b"y\"}\n"));
        assert_eq!(encode(&small), b"{\"rows\":[]}\n");
        assert_eq!(encode(&big), expected);
    }

    #[test]
    fn a_big_body_is_remembered_for_a_few_answers_then_forgotten() {
        let big = serde_json::json!({ "rows": "x".repeat(64 * 1024) });
        let small = serde_json::json!({ "rows": [] });
        encode(&big);
        // The next body is made as large as the big one was: no growing, no copy.
        assert!(encode(&small).capacity() > 64 * 1024);
        // Three quarters of it at each small answer after that, until small ones are small.
        for _ in 0..40 {
            encode(&small);
        }
        assert!(encode(&small).capacity() < 1024);
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
        use asof_engine::model::record::{RowBlock, SharedRow};
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

    /// Any text: mostly plain, sometimes with quotes, backslashes, control characters, DEL,
    /// `/` and characters beyond ASCII.
    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            "[0-9a-z:./-]{0,80}",
            proptest::string::string_regex("(.|[\"\\\\\u{0}-\u{1f}\u{7f}/é€😀]){0,24}").unwrap(),
        ]
    }

    proptest::proptest! {
        #[test]
        fn an_envelope_written_by_hand_is_byte_equal_to_serde_jsons(
            request_id in text(),
            corpus_version in text(),
            as_of in proptest::option::of(-62_135_596_800_000_000i64..253_402_300_799_999_999),
            visible_by in proptest::option::of(text()),
            status in 0..3usize,
            results in proptest::collection::vec(text(), 0..4),
            next_cursor in proptest::option::of(text()),
            count in proptest::option::of(0..100_000usize),
            touched in proptest::collection::vec(
                (text(), proptest::option::of((0..7usize, -1_000..40_000i32))),
                0..3,
            ),
            missing in proptest::collection::vec(text(), 0..3),
            missing_total in 0..1_000usize,
            error in proptest::option::of((text(), text(), proptest::option::of(text()))),
            sample in proptest::option::of(proptest::bool::ANY),
            origin in proptest::option::of((text(), 0..4_102_444_800_000_000i64, text())),
            cached in proptest::option::of(proptest::bool::ANY),
        ) {
            let env = Envelope {
                request_id,
                corpus_version,
                as_of: as_of.map(Instant::from_micros),
                visible_by,
                status: [Status::Ok, Status::CoverageMissing, Status::Error][status],
                results,
                next_cursor,
                count,
                coverage: CoverageBody {
                    touched: touched
                        .into_iter()
                        .map(|(t, day)| match day {
                            Some((s, d)) => {
                                let source = asof_engine::SourceId::ALL[s % asof_engine::SourceId::ALL.len()];
                                CoverageKey::Day(source, asof_engine::Day::from_days(d))
                            }
                            None => CoverageKey::Text(t),
                        })
                        .collect(),
                    missing,
                    missing_total,
                },
                error: error.map(|(code, message, param)| ErrorBody { code, message, param }),
                sample,
                origin: origin.map(|(vendor, at, license_class)| Origin {
                    vendor,
                    fetched_at: Instant::from_micros(at),
                    license_class,
                }),
                cached,
            };
            let (by_hand, by_serde) = (env.encode(), encode(&env));
            proptest::prop_assert_eq!(
                String::from_utf8_lossy(&by_hand),
                String::from_utf8_lossy(&by_serde)
            );
            // And it is JSON that reads back as the envelope's own value.
            let back: Value = serde_json::from_slice(&by_hand).unwrap();
            proptest::prop_assert_eq!(back, serde_json::to_value(&env).unwrap());
        }
    }

    #[test]
    fn a_page_of_encoded_records_is_written_into_a_body_made_at_its_size() {
        let rows: Vec<Box<RawValue>> = (0..100)
            .map(|i| {
                let pad = "x".repeat(i * 37 % 900);
                RawValue::from_string(format!("{{\"id\":\"r{i}\",\"title\":\"{pad}\"}}")).unwrap()
            })
            .collect();
        let records: Vec<Record<'_>> = rows.iter().map(|r| Record::Encoded(r)).collect();
        let len = encoded_len(&records).unwrap();
        assert_eq!(len, serde_json::to_vec(&records).unwrap().len());
        assert_eq!(encoded_len(&[]), Some(2));
        let mut env = Envelope::of("id".into(), "sha256:v".into(), Answer::of(records));
        env.coverage.touched = (0..40)
            .map(|d| format!("sec.edgar/2024-01-{d:02}").into())
            .collect();
        env.next_cursor = Some("c".repeat(300));
        // A thread that answered only small bodies before.
        for _ in 0..8 {
            encode(&"small");
        }
        let body = env.encode_sized(Some(len));
        assert_eq!(body, encode(&env));
        assert!(
            body.capacity() < body.len() + 1024,
            "made at about its size, never grown: {} for {}",
            body.capacity(),
            body.len()
        );
        // A page with a record encoded only as it is written has no size to tell.
        let sample_row = row(None);
        let fields = NewsRecordRef::of(&sample_row, true);
        assert_eq!(encoded_len(&[Record::Fields(Box::new(fields))]), None);
    }

    #[test]
    fn only_quotes_backslashes_and_control_characters_need_escaping() {
        for b in 0u8..=0x7f {
            let s = (b as char).to_string();
            let plain = serde_json::to_string(&s).unwrap() == format!("\"{s}\"");
            assert_eq!(needs_no_escape(&s), plain, "byte {b:#x}");
        }
        assert!(needs_no_escape("sha256:0f/é€😀\u{7f}"));
    }
}
