//! Flat files (Power plan): the Parquet partitions a corpus version is made of, as file objects
//! with signed URLs, and `/files/{id}`, where the service serves the bytes of the URLs it
//! signs itself (a corpus on a local directory).
//!
//! A corpus in S3, GCS or Azure answers with the object store's own presigned URLs, so the
//! bytes never pass through the service. A local corpus has no such signer: the service signs
//! `/files/{id}?expires=..&signature=..` (see `crate::http::file_url`) and serves single byte
//! ranges, which is what Parquet readers ask for.

use asof_engine::{Corpus, Day, FileEntry, FilePosition, FilesQuery, Instant, SourceId};
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, Method};
use axum::response::IntoResponse;
use futures::TryStreamExt;

use crate::error::ApiError;
use crate::http::envelope::{Envelope, FileRecord};
use crate::http::file_url::Signing;
use crate::http::params::{Limit, Q, held_source, query};
use crate::http::range::{Asked, FileResponse};
use crate::http::{AppState, Ctx, Reply, ok};
use asof_answer::Op;
use asof_answer::params::Pin;

/// The media type of every file.
pub const PARQUET: &str = "application/vnd.apache.parquet";

query! {
    /// Query of `GET /v1/files`.
    pub struct FilesParams {
        /// Only this source; one `/v1/meta` lists as held.
        #[param(inline)]
        pub source: Option<SourceId>,
        /// Only files of UTC days on or after this one.
        #[param(inline)]
        pub from: Option<Day>,
        /// Only files of UTC days on or before this one.
        #[param(inline)]
        pub to: Option<Day>,
        /// Page size.
        #[param(inline, required = false)]
        pub limit: Limit,
        /// `next_cursor` of the previous page, with the same query (any `limit`).
        pub cursor: Option<String>,
        /// As on `/v1/news`: list the files of this retained corpus version (omitted: the one
        /// served now); their URLs stay valid after the served version moves on.
        #[param(inline)]
        pub corpus_version: Option<Pin>,
    }
}

query! {
    /// Query of `GET /v1/files/{id}`.
    pub struct FileParams {
        /// As on `/v1/news`: the file as this retained corpus version lists it (omitted: the
        /// one served now).
        #[param(inline)]
        pub corpus_version: Option<Pin>,
    }
}

query! {
    /// Query of a signed file URL (as `/v1/files` hands it out; never built by hand).
    pub struct FileUrlParams {
        /// Unix seconds after which the URL is refused.
        pub expires: Option<String>,
        /// Hex HMAC-SHA256 the service made over the file id and `expires` (and
        /// `corpus_version`, when there is one).
        pub signature: Option<String>,
        /// The version a pinned listing signed the URL for (the served version may no longer
        /// list the file).
        #[param(inline)]
        pub corpus_version: Option<Pin>,
    }
}

/// The flat files of the corpus version: its Parquet partitions, with signed URLs.
///
/// One file per source, lane and UTC day, in `(date, source_id, lane, id)` order, paged like
/// every listing. Each `url` is a signed GET URL valid until `expires_at` (15 minutes unless
/// the deployment sets `--file-url-ttl`); it carries no API key, reads with plain HTTP (DuckDB
/// `read_parquet`, pandas, curl) and serves byte ranges. A file's `id` is its sha256, stable
/// for the same bytes across corpus versions; `/v1/files/{id}` gives a fresh URL. The
/// `next_cursor` is bound to `source`, `from`, `to` and the corpus version.
#[utoipa::path(get, path = "/v1/files", tag = "data", operation_id = "files",
    params(FilesParams), security(("bearer" = [])),
    responses(
        (status = 200, description = "File objects in (date, source_id, lane, id) order.", body = Envelope<FileRecord>),
        (status = 409, description = "`cursor_expired`: the corpus moved since the cursor was minted."),
    ))]
pub(crate) async fn files(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    headers: HeaderMap,
    Q(p): Q<FilesParams>,
) -> Reply {
    let held = ctx.corpus.held_sources();
    let source = held_source(p.source, &held)?;
    // `from` after `to` is an empty range: no files (the description cannot relate two
    // parameters, so it is answered rather than refused).
    let day = |d: Option<Day>| d.map(|d| d.to_string()).unwrap_or_default();
    let paging = state.pager().bind(
        Op::Files,
        &[
            ("source", source.map(|s| s.to_string()).unwrap_or_default()),
            ("from", day(p.from)),
            ("to", day(p.to)),
        ],
        ctx.corpus.version(),
    );
    let after: Option<FilePosition> = paging.open(p.cursor.as_deref())?;
    let (entries, next) = ctx.corpus.files(&FilesQuery {
        source,
        from: p.from,
        to: p.to,
        after,
        limit: p.limit.0,
    });
    let signing = state.signing(&headers);
    // A pinned listing's URLs name its version (they stay valid once the served one moves).
    let pinned = p.corpus_version.as_ref().map(Pin::as_str);
    let mut records = Vec::with_capacity(entries.len());
    for e in entries {
        records.push(record(&signing, &ctx.corpus, e, pinned).await?);
    }
    Ok(ok(&ctx, records).next(paging.mint(next)).into_response())
}

/// One file of the corpus version, with a fresh signed URL.
#[utoipa::path(get, path = "/v1/files/{id}", tag = "data", operation_id = "file",
    params(("id" = String, Path, pattern = "^[0-9a-f]{64}$", example = "0f4c7a52d3b1e8a96f20c5d7e4b3a1908c6d5e2f7a4b1c8d9e0f3a6b5c4d7e8f", description = "File id, as in `results[].id` of `/v1/files` (the file's sha256).")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`results[0]` is the file object.", body = Envelope<FileRecord>),
        (status = 404, description = "`not_found`: the served corpus version holds no file with this id."),
    ))]
pub(crate) async fn file(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Q(p): Q<FileParams>,
) -> Reply {
    let entry = lookup(&ctx.corpus, &id)?;
    let pinned = p.corpus_version.as_ref().map(Pin::as_str);
    let record = record(&state.signing(&headers), &ctx.corpus, entry, pinned).await?;
    Ok(ok(&ctx, vec![record]).into_response())
}

/// The bytes of a file, at the URL `/v1/files` signed (a corpus on a local directory).
///
/// The signature in the query is the only credential (no `Authorization`); it names one file
/// until `expires`. Answers carry `Content-Length`, `Accept-Ranges: bytes`, the file's sha256
/// as a strong `ETag`, and `Content-Type: application/vnd.apache.parquet`; a single `Range`
/// (`bytes=a-b`, `bytes=a-`, `bytes=-n`) answers `206` with `Content-Range`; `HEAD` answers the
/// headers alone. Rate-limited per client address, not per key.
#[utoipa::path(get, path = "/files/{id}", tag = "data", operation_id = "file_bytes",
    params(("id" = String, Path, pattern = "^[0-9a-f]{64}$", example = "0f4c7a52d3b1e8a96f20c5d7e4b3a1908c6d5e2f7a4b1c8d9e0f3a6b5c4d7e8f", description = "File id (its sha256)."), FileUrlParams,
        ("Range" = Option<String>, Header, description = "One byte range: `bytes=a-b`, `bytes=a-` or `bytes=-n`. Several ranges, or a malformed one, get the whole file.")),
    responses(
        (status = 200, description = "The whole file.", content_type = "application/vnd.apache.parquet", body = Vec<u8>,
            headers(("Content-Length" = u64, description = "Size of the file."), ("Accept-Ranges" = String, description = "`bytes`."), ("ETag" = String, description = "The file's sha256, quoted (strong)."))),
        (status = 206, description = "The requested range.", content_type = "application/vnd.apache.parquet", body = Vec<u8>,
            headers(("Content-Range" = String, description = "`bytes a-b/size`."), ("Content-Length" = u64, description = "Size of the range."), ("ETag" = String, description = "The file's sha256, quoted (strong)."))),
        (status = 403, description = "`forbidden`: the URL expired, was altered, or was signed for another file."),
        (status = 404, description = "`not_found`: the served corpus version holds no file with this id."),
        (status = 416, description = "`range_not_satisfiable`: the range starts past the end of the file (`Content-Range: bytes */size`)."),
    ))]
pub(crate) async fn file_bytes(
    Extension(ctx): Extension<Ctx>,
    State(state): State<AppState>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
    Q(p): Q<FileUrlParams>,
) -> Reply {
    let now = Instant::now().micros().div_euclid(1_000_000);
    let pin = p.corpus_version.as_ref();
    state.file_urls().verify(
        &id,
        p.expires.as_deref(),
        p.signature.as_deref(),
        pin.map(Pin::as_str),
        now,
    )?;
    // A file of the served version, of the retained version a pinned listing signed the URL
    // for, or of an older version of its Delta tables (a snapshot shared through
    // /delta-sharing names those; the URL's signature vouches for the id and the version).
    let entry = match lookup(&ctx.corpus, &id) {
        Ok(e) => e,
        Err(ApiError::Answer(asof_answer::Error::NotFound(m))) => match pin {
            Some(pin) => {
                let corpus = state.versions().resolve(&ctx.corpus, Some(pin)).await?;
                lookup(&corpus, &id)?
            }
            None => crate::routes::sharing::shared_file(&state, &ctx.corpus, &id)
                .await?
                .ok_or(ApiError::not_found(m))?,
        },
        Err(e) => return Err(e),
    };
    // Cacheable by the one client holding the URL, and no longer than the URL lives.
    let expires: i64 = p.expires.as_deref().unwrap_or("0").parse().unwrap_or(0);
    let file = FileResponse {
        etag: format!("\"{}\"", entry.sha256),
        size: entry.bytes,
        content_type: PARQUET,
        cache_control: format!("private, max-age={}", (expires - now).max(0)),
        disposition: Some(format!(
            "attachment; filename=\"{}_{}_{}.parquet\"",
            entry.source_id, entry.lane, entry.date
        )),
    };
    let range = match file.asked(&headers)? {
        Asked::NotModified => return Ok(file.not_modified()),
        Asked::Bytes(range) => range,
    };
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        let got = ctx
            .corpus
            .store()
            .get_range(&entry.path, range.clone().map(Into::into))
            .await?;
        if got.meta.size != entry.bytes {
            tracing::error!(path = %entry.path, stored = got.meta.size, listed = entry.bytes, "file size differs from the manifest");
            return Err(ApiError::INTERNAL);
        }
        Body::from_stream(got.into_stream().map_err(std::io::Error::other))
    };
    Ok(file.respond(range, body))
}

/// The file `id` of the served version, or 404 (400 when `id` cannot be a file id).
fn lookup(corpus: &Corpus, id: &str) -> Result<FileEntry, ApiError> {
    if id.len() != 64 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(ApiError::invalid(
            "id",
            "a file id is the file's sha256: 64 lowercase hex digits, as listed by /v1/files",
        ));
    }
    corpus.file(id).ok_or_else(|| {
        ApiError::not_found(format!(
            "corpus version {} holds no file {id}; list the current files with /v1/files",
            corpus.version()
        ))
    })
}

/// A file's record, with its URL signed by `signing`.
async fn record(
    signing: &Signing<'_>,
    corpus: &Corpus,
    e: FileEntry,
    pinned: Option<&str>,
) -> Result<FileRecord, ApiError> {
    let (url, url_kind, expires) = signing.url(corpus.store(), &e.id, &e.path, pinned).await?;
    Ok(FileRecord {
        kind: "partition",
        source_id: e.source_id.to_string(),
        lane: e.lane.to_string(),
        date: e.date.to_string(),
        row_count: e.row_count,
        bytes: e.bytes,
        certified: e.certified_row_count.is_some(),
        certified_row_count: e.certified_row_count,
        coverage_key: e.coverage_key,
        format: "parquet",
        media_type: PARQUET,
        path: e.path,
        corpus_version: corpus.version().to_owned(),
        url,
        url_kind,
        expires_at: Instant::from_micros(expires.saturating_mul(1_000_000)),
        sha256: e.sha256,
        id: e.id,
    })
}
