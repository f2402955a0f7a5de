//! The Delta Sharing protocol under `/delta-sharing/` (Power plan): the corpus's Delta tables
//! (`asof_engine::format::delta`) listed as one share, read at any table version through the same
//! signed file URLs as `/v1/files`, so the official clients (pandas, Spark) read the very
//! files the service serves.
//!
//! Names: share `asof`; one schema per source, its id with dots as underscores (`sec_edgar`:
//! clients split `share.schema.table` on dots); one table per lane (`certified_pit`). A table
//! version is the one the manifest of a corpus version records for it (`delta` in the
//! manifest); the latest is the served corpus version's. Answers are the protocol's JSON and
//! NDJSON (not envelopes) with `Delta-Table-Version`; errors are the service's error envelope
//! with the protocol's status codes.

use std::collections::BTreeMap;

use asof_engine::format::delta::{self, Add, MetaData, TableVersions};
use asof_engine::read::delta::{DeltaLog, TableState};
use asof_engine::{Corpus, Instant, Lane, SourceId};
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::http::body::{FromJson, Json};
use crate::http::file_url::Signing;
use crate::http::params::{NoQuery, Q, query};
use crate::http::response::X_CORPUS_VERSION;
use crate::http::{AppState, Ctx, Reply};

/// The one share.
pub const SHARE: &str = "asof";

/// The header naming the table version an answer is of.
const TABLE_VERSION: &str = "delta-table-version";

query! {
    /// Paging of the protocol's listings.
    #[allow(non_snake_case)]
    pub struct ListParams {
        /// At most this many items (1 to 1000; all when absent).
        #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
        pub maxResults: Option<String>,
        /// `nextPageToken` of the previous page.
        pub pageToken: Option<String>,
    }
}

query! {
    /// Query of the table version route.
    #[allow(non_snake_case)]
    pub struct VersionParams {
        /// The first table version committed at or after this instant (RFC 3339 UTC, `Z`);
        /// the latest version when absent. `404` when no version was committed since.
        #[param(format = DateTime, pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?Z$", example = "2026-01-31T00:00:00Z")]
        pub startingTimestamp: Option<String>,
    }
}

/// The schema name of a source.
fn schema_name(source: SourceId) -> String {
    source.as_str().replace('.', "_")
}

/// The tables of the served version, by (schema, table) name.
async fn tables(
    corpus: &Corpus,
) -> Result<BTreeMap<(String, String), ((SourceId, Lane), u64)>, ApiError> {
    let versions: TableVersions =
        delta::versions_of(corpus.store(), corpus.version(), corpus.manifest()).await?;
    Ok(versions
        .iter()
        .filter_map(|(k, v)| delta::parse_table_key(k).map(|t| (t, *v)))
        .map(|((s, l), v)| ((schema_name(s), l.as_str().to_owned()), ((s, l), v)))
        .collect())
}

fn share_exists(share: &str) -> Result<(), ApiError> {
    if share == SHARE {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "no share {share:?}; the one share is {SHARE:?}"
        )))
    }
}

/// One page of `items` after `pageToken`, at most `maxResults` long.
fn page(items: Vec<Value>, p: &ListParams) -> Result<Value, ApiError> {
    let max = match &p.maxResults {
        None => usize::MAX,
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| {
                ApiError::invalid("maxResults", "maxResults must be an integer from 1 to 1000")
            })?,
    };
    let start = match &p.pageToken {
        None => 0,
        Some(t) if t.is_empty() => 0,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= items.len())
            .ok_or_else(|| {
                ApiError::invalid(
                    "pageToken",
                    "pageToken must be a nextPageToken this listing returned",
                )
            })?,
    };
    let end = start.saturating_add(max).min(items.len());
    let mut out = json!({ "items": items[start..end] });
    if end < items.len() {
        out["nextPageToken"] = Value::String(end.to_string());
    }
    Ok(out)
}

/// A protocol answer: JSON or NDJSON, the corpus version, never cached.
fn answer(
    ctx: &Ctx,
    content_type: &'static str,
    body: String,
    table_version: Option<u64>,
) -> Response {
    let mut res = Response::new(Body::from(body));
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        &X_CORPUS_VERSION,
        HeaderValue::from_str(ctx.corpus.version()).expect("version is a header value"),
    );
    if let Some(v) = table_version {
        h.insert(TABLE_VERSION, HeaderValue::from(v));
    }
    res
}

fn json_answer(ctx: &Ctx, v: &Value) -> Response {
    answer(ctx, "application/json; charset=utf-8", v.to_string(), None)
}

/// The shares the key may read: one, `asof`.
#[utoipa::path(get, path = "/delta-sharing/shares", tag = "delta-sharing", operation_id = "sharing_shares",
    params(ListParams), security(("bearer" = [])),
    responses((status = 200, description = "`{\"items\": [{\"name\": \"asof\"}]}` (Delta Sharing `ListShares`).", content_type = "application/json", body = Object)))]
pub(crate) async fn list_shares(Extension(ctx): Extension<Ctx>, Q(p): Q<ListParams>) -> Reply {
    Ok(json_answer(
        &ctx,
        &page(vec![json!({"name": SHARE, "id": SHARE})], &p)?,
    ))
}

/// One share.
#[utoipa::path(get, path = "/delta-sharing/shares/{share}", tag = "delta-sharing", operation_id = "sharing_share",
    params(("share" = String, Path, description = "`asof`."), NoQuery), security(("bearer" = [])),
    responses(
        (status = 200, description = "`{\"share\": {\"name\": \"asof\"}}` (Delta Sharing `GetShare`).", content_type = "application/json", body = Object),
        (status = 404, description = "`not_found`: no such share.")))]
pub(crate) async fn get_share(
    Extension(ctx): Extension<Ctx>,
    Path(share): Path<String>,
    _: Q<NoQuery>,
) -> Reply {
    share_exists(&share)?;
    Ok(json_answer(
        &ctx,
        &json!({"share": {"name": SHARE, "id": SHARE}}),
    ))
}

/// The schemas of the share: one per source the served corpus version holds rows of.
#[utoipa::path(get, path = "/delta-sharing/shares/{share}/schemas", tag = "delta-sharing", operation_id = "sharing_schemas",
    params(("share" = String, Path, description = "`asof`."), ListParams), security(("bearer" = [])),
    responses(
        (status = 200, description = "`{\"items\": [{\"name\": \"sec_edgar\", \"share\": \"asof\"}, ...]}` (Delta Sharing `ListSchemas`).", content_type = "application/json", body = Object),
        (status = 404, description = "`not_found`: no such share.")))]
pub(crate) async fn list_schemas(
    Extension(ctx): Extension<Ctx>,
    Path(share): Path<String>,
    Q(p): Q<ListParams>,
) -> Reply {
    share_exists(&share)?;
    let mut names: Vec<String> = tables(&ctx.corpus)
        .await?
        .into_keys()
        .map(|(s, _)| s)
        .collect();
    names.dedup();
    let items = names
        .into_iter()
        .map(|n| json!({"name": n, "share": SHARE}))
        .collect();
    Ok(json_answer(&ctx, &page(items, &p)?))
}

fn table_item(schema: &str, table: &str, t: (SourceId, Lane)) -> Value {
    json!({
        "name": table,
        "schema": schema,
        "share": SHARE,
        "shareId": SHARE,
        "id": delta::table_id(t.0, t.1),
    })
}

/// The tables of one schema: one per lane of the source.
#[utoipa::path(get, path = "/delta-sharing/shares/{share}/schemas/{schema}/tables", tag = "delta-sharing", operation_id = "sharing_tables",
    params(("share" = String, Path, description = "`asof`."), ("schema" = String, Path, description = "A source id with `_` for `.` (`sec_edgar`)."), ListParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{\"items\": [{\"name\": \"certified_pit\", \"schema\": \"sec_edgar\", \"share\": \"asof\"}, ...]}` (Delta Sharing `ListTables`).", content_type = "application/json", body = Object),
        (status = 404, description = "`not_found`: no such share or schema.")))]
pub(crate) async fn list_tables(
    Extension(ctx): Extension<Ctx>,
    Path((share, schema)): Path<(String, String)>,
    Q(p): Q<ListParams>,
) -> Reply {
    share_exists(&share)?;
    let all = tables(&ctx.corpus).await?;
    let items: Vec<Value> = all
        .iter()
        .filter(|((s, _), _)| *s == schema)
        .map(|((s, t), (id, _))| table_item(s, t, *id))
        .collect();
    if items.is_empty() {
        return Err(ApiError::not_found(format!(
            "share {SHARE:?} has no schema {schema:?}; list them at /delta-sharing/shares/{SHARE}/schemas"
        )));
    }
    Ok(json_answer(&ctx, &page(items, &p)?))
}

/// Every table of the share.
#[utoipa::path(get, path = "/delta-sharing/shares/{share}/all-tables", tag = "delta-sharing", operation_id = "sharing_all_tables",
    params(("share" = String, Path, description = "`asof`."), ListParams), security(("bearer" = [])),
    responses(
        (status = 200, description = "Every table (Delta Sharing `ListALLTables`).", content_type = "application/json", body = Object),
        (status = 404, description = "`not_found`: no such share.")))]
pub(crate) async fn list_all_tables(
    Extension(ctx): Extension<Ctx>,
    Path(share): Path<String>,
    Q(p): Q<ListParams>,
) -> Reply {
    share_exists(&share)?;
    let items = tables(&ctx.corpus)
        .await?
        .iter()
        .map(|((s, t), (id, _))| table_item(s, t, *id))
        .collect();
    Ok(json_answer(&ctx, &page(items, &p)?))
}

/// The table named by the path and its latest version (the served corpus version's).
async fn table(
    ctx: &Ctx,
    share: &str,
    schema: &str,
    table: &str,
) -> Result<((SourceId, Lane), u64), ApiError> {
    share_exists(share)?;
    tables(&ctx.corpus)
        .await?
        .remove(&(schema.to_owned(), table.to_owned()))
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no table {schema}.{table} in share {SHARE}; list them at /delta-sharing/shares/{SHARE}/all-tables"
            ))
        })
}

/// Runs `f` on the table's log, read up to `latest`. A commit not written yet (its
/// publisher stopped between the pointer and the log) is `503`: `asof delta backfill` or the
/// next publish writes it.
async fn with_log<R>(
    state: &AppState,
    ctx: &Ctx,
    t: (SourceId, Lane),
    latest: u64,
    f: impl FnOnce(&DeltaLog) -> R,
) -> Result<R, ApiError> {
    state
        .delta_logs()
        .read(
            ctx.corpus.store(),
            delta::Table::Records(t.0, t.1),
            latest,
            f,
        )
        .await
        .map_err(|e| {
            if e.is_not_found() {
                tracing::warn!(error = %e, "Delta log behind the served corpus version");
                ApiError::STORAGE_UNAVAILABLE
            } else {
                e.into()
            }
        })
}

fn parse_instant(param: &str, s: &str) -> Result<i64, ApiError> {
    Instant::parse(s)
        .map(|i| i.micros().div_euclid(1000))
        .map_err(|fault| ApiError::invalid(param, format!("{param} must be RFC 3339 UTC with a literal Z, e.g. 2026-01-31T00:00:00Z: {fault}")))
}

/// The table's latest version, or the first committed at or after `startingTimestamp`.
#[utoipa::path(get, path = "/delta-sharing/shares/{share}/schemas/{schema}/tables/{table}/version", tag = "delta-sharing", operation_id = "sharing_table_version",
    params(("share" = String, Path, description = "`asof`."), ("schema" = String, Path, description = "`sec_edgar`, ..."), ("table" = String, Path, description = "A lane: `certified_pit`, ..."), VersionParams),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Empty body; the version in `Delta-Table-Version` (Delta Sharing `QueryTableVersion`).",
            headers(("Delta-Table-Version" = u64, description = "The table version."))),
        (status = 404, description = "`not_found`: no such share, schema or table, or no version committed at or after `startingTimestamp`.")))]
pub(crate) async fn table_version(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Path((share, schema, name)): Path<(String, String, String)>,
    Q(p): Q<VersionParams>,
) -> Reply {
    let (t, latest) = table(&ctx, &share, &schema, &name).await?;
    let version = match &p.startingTimestamp {
        None => latest,
        Some(s) => {
            let at = parse_instant("startingTimestamp", s)?;
            with_log(&state, &ctx, t, latest, |log| log.version_from(at))
                .await?
                .ok_or_else(|| {
                    ApiError::not_found(format!(
                        "no version of {schema}.{name} was committed at or after {s}"
                    ))
                })?
        }
    };
    Ok(answer(
        &ctx,
        "application/json; charset=utf-8",
        String::new(),
        Some(version),
    ))
}

/// The protocol and metaData lines of a table version.
fn head_lines(md: &MetaData, version: u64, files: Option<(u64, usize)>) -> String {
    let mut meta = json!({
        "id": md.id,
        "name": md.name,
        "description": md.description,
        "format": {"provider": md.format.provider},
        "schemaString": md.schema_string,
        "partitionColumns": md.partition_columns,
        "configuration": md.configuration,
        "version": version,
    });
    if let Some((size, n)) = files {
        meta["size"] = json!(size);
        meta["numFiles"] = json!(n);
    }
    format!(
        "{}\n{}\n",
        json!({"protocol": {"minReaderVersion": 1}}),
        json!({"metaData": meta})
    )
}

/// The table's protocol and metadata at its latest version.
#[utoipa::path(get, path = "/delta-sharing/shares/{share}/schemas/{schema}/tables/{table}/metadata", tag = "delta-sharing", operation_id = "sharing_table_metadata",
    params(("share" = String, Path, description = "`asof`."), ("schema" = String, Path, description = "`sec_edgar`, ..."), ("table" = String, Path, description = "A lane: `certified_pit`, ..."), NoQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "NDJSON: a `protocol` line and a `metaData` line (Delta Sharing `QueryTableMetadata`).", content_type = "application/x-ndjson", body = String,
            headers(("Delta-Table-Version" = u64, description = "The table version."))),
        (status = 404, description = "`not_found`: no such share, schema or table.")))]
pub(crate) async fn table_metadata(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    Path((share, schema, name)): Path<(String, String, String)>,
    _: Q<NoQuery>,
) -> Reply {
    let (t, latest) = table(&ctx, &share, &schema, &name).await?;
    let st = with_log(&state, &ctx, t, latest, |log| log.state(latest))
        .await?
        .ok_or(ApiError::INTERNAL)?;
    let size = st.files.values().map(|f| f.size).sum();
    let body = head_lines(&st.metadata, latest, Some((size, st.files.len())));
    Ok(answer(&ctx, "application/x-ndjson", body, Some(latest)))
}

/// The request body `POST .../query` takes, as the description gives it: the members of
/// [`QueryBody::FIELDS`]; `version` or `timestamp`, not both; the unsupported paging and
/// change-data members only as `null`; hints of any shape (accepted, not applied).
pub fn query_body_schema() -> Value {
    let mut properties = Map::new();
    for name in QueryBody::FIELDS {
        let schema = match *name {
            "version" => {
                json!({"type": ["integer", "null"], "minimum": 0, "maximum": u64::MAX, "description": "A table version; `404` past the latest."})
            }
            "timestamp" => {
                json!({"type": ["string", "null"], "format": "date-time", "pattern": asof_engine::CLOCK_PATTERN,
                "description": "The latest version committed at or before this instant (RFC 3339 UTC, `Z`); `404` before the first."})
            }
            n if UNSUPPORTED.contains(&n) => {
                json!({"type": "null", "description": "Not supported by this server: any value but null is `400`."})
            }
            _ => {
                json!({"description": "A hint: accepted, not applied (the protocol allows returning more)."})
            }
        };
        properties.insert((*name).to_owned(), schema);
    }
    json!({
        "type": "object",
        "title": "QueryTable request",
        "properties": properties,
        "additionalProperties": false,
        // Both given (not null) is refused.
        "not": {
            "required": ["version", "timestamp"],
            "properties": {"version": {"type": "integer"}, "timestamp": {"type": "string"}},
        },
    })
}

/// Members of the Delta Sharing query body this server refuses (change data, paged queries).
const UNSUPPORTED: &[&str] = &[
    "startingVersion",
    "endingVersion",
    "maxFiles",
    "pageToken",
    "refreshToken",
];

/// Body of `POST .../query`.
#[derive(Debug, Clone, Default)]
pub struct QueryBody {
    version: Option<u64>,
    timestamp: Option<String>,
}

impl FromJson for QueryBody {
    const FIELDS: &'static [&'static str] = &[
        "predicateHints",
        "jsonPredicateHints",
        "limitHint",
        "version",
        "timestamp",
        "startingVersion",
        "endingVersion",
        "maxFiles",
        "pageToken",
        "includeRefreshToken",
        "refreshToken",
    ];
    fn from_object(o: &Map<String, Value>) -> Result<Self, ApiError> {
        for &unsupported in UNSUPPORTED {
            if o.get(unsupported).is_some_and(|v| !v.is_null()) {
                return Err(ApiError::invalid(
                    unsupported,
                    format!(
                        "{unsupported} is not supported by this server: ask for a snapshot by version or timestamp"
                    ),
                ));
            }
        }
        // Hints are hints: a server may return more than they ask for, never less.
        let version = match o.get("version") {
            None | Some(Value::Null) => None,
            Some(v) => Some(crate::json::whole_number(v).ok_or_else(|| {
                ApiError::invalid(
                    "version",
                    "version must be a non-negative integer table version",
                )
            })?),
        };
        let timestamp = crate::http::body::string(o, "timestamp")?;
        if version.is_some() && timestamp.is_some() {
            return Err(ApiError::invalid(
                "timestamp",
                "send version or timestamp, not both",
            ));
        }
        Ok(QueryBody { version, timestamp })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FileLine<'a> {
    url: String,
    id: &'a str,
    partition_values: &'a BTreeMap<String, String>,
    size: u64,
    stats: &'a str,
    expiration_timestamp: i64,
}

/// The files of a table version, with signed URLs (as `/v1/files`), after its protocol and
/// metadata lines.
///
/// `version` (a table version) or `timestamp` (the latest version committed at or before it)
/// selects the snapshot; neither: the latest. Each `file` line's `url` is the signed URL
/// `/v1/files` would give for that partition (same expiry, byte ranges); `id` is the file's
/// sha256; `stats` carry row counts and clock and `cik` bounds. Predicate and limit hints are
/// accepted and not applied (the protocol allows returning more files); change-data and
/// paged queries (`startingVersion`, `maxFiles`) are refused with `400`.
#[utoipa::path(post, path = "/delta-sharing/shares/{share}/schemas/{schema}/tables/{table}/query", tag = "delta-sharing", operation_id = "sharing_table_query",
    params(("share" = String, Path, description = "`asof`."), ("schema" = String, Path, description = "`sec_edgar`, ..."), ("table" = String, Path, description = "A lane: `certified_pit`, ..."), NoQuery),
    request_body(content = Object, content_type = "application/json", description = "`{\"version\": 3}` or `{\"timestamp\": \"2026-01-31T00:00:00Z\"}` or `{}`; hints (`predicateHints`, `jsonPredicateHints`, `limitHint`) accepted."),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "NDJSON: `protocol`, `metaData`, then one `file` line per partition (Delta Sharing `QueryTable`).", content_type = "application/x-ndjson", body = String,
            headers(("Delta-Table-Version" = u64, description = "The table version answered."))),
        (status = 404, description = "`not_found`: no such share, schema or table, a version past the latest, or a timestamp before the first version.")))]
pub(crate) async fn table_query(
    State(state): State<AppState>,
    Extension(ctx): Extension<Ctx>,
    headers: HeaderMap,
    Path((share, schema, name)): Path<(String, String, String)>,
    _: Q<NoQuery>,
    Json(q): Json<QueryBody>,
) -> Reply {
    let (t, latest) = table(&ctx, &share, &schema, &name).await?;
    let (version, st) = snapshot(&state, &ctx, (t, latest), (&schema, &name), &q).await?;
    let body = snapshot_lines(&state.signing(&headers), &ctx, t, version, &st).await?;
    Ok(answer(&ctx, "application/x-ndjson", body, Some(version)))
}

/// The table version a query asks for (`version`, else the last committed at or before
/// `timestamp`, else the latest) and its state; `404` when there is none.
async fn snapshot(
    state: &AppState,
    ctx: &Ctx,
    (t, latest): ((SourceId, Lane), u64),
    (schema, name): (&str, &str),
    q: &QueryBody,
) -> Result<(u64, TableState), ApiError> {
    let at = q
        .timestamp
        .as_deref()
        .map(|s| parse_instant("timestamp", s))
        .transpose()?;
    let (version, st) = with_log(state, ctx, t, latest, |log| {
        let version = match (q.version, at) {
            (Some(v), _) => Some(v),
            (None, Some(ms)) => log.version_at(ms),
            (None, None) => Some(latest),
        };
        version.map(|v| (v, log.state(v)))
    })
    .await?
    .ok_or_else(|| {
        ApiError::not_found(format!(
            "{schema}.{name} has no version committed at or before {}",
            q.timestamp.as_deref().unwrap_or("")
        ))
    })?;
    let st = st.ok_or_else(|| {
        ApiError::not_found(format!(
            "{schema}.{name} has versions 0 to {latest} in corpus version {}; {version} is not one of them",
            ctx.corpus.version()
        ))
    })?;
    Ok((version, st))
}

/// A query's answer body: the protocol and metadata lines, then one line per file of the
/// snapshot with its URL signed by `signing`.
async fn snapshot_lines(
    signing: &Signing<'_>,
    ctx: &Ctx,
    t: (SourceId, Lane),
    version: u64,
    st: &TableState,
) -> Result<String, ApiError> {
    let size = st.files.values().map(|f| f.size).sum();
    let mut body = head_lines(&st.metadata, version, Some((size, st.files.len())));
    let root = delta::table_root(t.0, t.1);
    for add in st.files.values() {
        let id = file_id_of(add)?;
        let (url, _, expires) = signing
            .url(
                ctx.corpus.store(),
                &id,
                &format!("{root}/{}", add.path),
                None,
            )
            .await?;
        let line = FileLine {
            url,
            id: &id,
            partition_values: &add.partition_values,
            size: add.size,
            stats: &add.stats,
            expiration_timestamp: expires.saturating_mul(1000),
        };
        body.push_str(&json!({"file": line}).to_string());
        body.push('\n');
    }
    Ok(body)
}

fn file_id_of(add: &Add) -> Result<String, ApiError> {
    asof_engine::read::delta::file_id(&add.path)
        .map(str::to_owned)
        .ok_or_else(|| {
            tracing::error!(path = %add.path, "a Delta file path without a sha256 name");
            ApiError::INTERNAL
        })
}

/// The partition behind file `id` in any version of the served corpus's Delta tables (a
/// snapshot shared at an older table version names files the current version no longer
/// lists), as a file entry (its row count from the commit's statistics; `None` for a certified
/// row count, which belongs to the served version's certificates).
pub async fn shared_file(
    state: &AppState,
    corpus: &Corpus,
    id: &str,
) -> Result<Option<asof_engine::FileEntry>, ApiError> {
    let versions = delta::versions_of(corpus.store(), corpus.version(), corpus.manifest()).await?;
    for (key, latest) in versions {
        let Some(t) = delta::parse_table_key(&key) else {
            continue;
        };
        // A log behind its pointer cannot name the file yet; any other fault is the answer.
        let found = match state
            .delta_logs()
            .read(
                corpus.store(),
                delta::Table::Records(t.0, t.1),
                latest,
                |log| log.file(id).cloned(),
            )
            .await
        {
            Err(e) if e.is_not_found() => continue,
            other => other?,
        };
        let Some(add) = found else { continue };
        let date = add
            .partition_values
            .get("date")
            .and_then(|d| d.parse().ok());
        let Some(date) = date else { continue };
        let rows = serde_json::from_str::<Value>(&add.stats)
            .ok()
            .and_then(|s| s["numRecords"].as_u64())
            .unwrap_or(0);
        return Ok(Some(asof_engine::FileEntry {
            id: id.to_owned(),
            source_id: t.0,
            lane: t.1,
            date,
            row_count: rows,
            bytes: add.size,
            sha256: id.to_owned(),
            path: format!("{}/{}", delta::table_root(t.0, t.1), add.path),
            coverage_key: format!("{}/{date}", t.0),
            certified_row_count: None,
        }));
    }
    Ok(None)
}
