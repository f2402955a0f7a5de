//! The OpenAPI 3.1 description (version 0.1.0), generated from the handlers' annotations.
//!
//! Handlers carry `#[utoipa::path]` with their parameters, their success body and the statuses
//! only they answer. Everything every route shares is added here in one pass
//! ([`Conventions`]) from the same tables the middleware obeys: the plan-gating table decides
//! which operations need a key and are rate-limited, so the description cannot drift from
//! what `guard` and `context` actually do. The per-corpus part (the sample `example` ids) is
//! filled in by [`document`].

use std::sync::LazyLock;

use asof_engine::{Corpus, Day, Instant, Lane, SourceId, VisibleBy};
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, OpenApi as Document, Ref, RefOr, Required, ResponseBuilder};
use utoipa::{IntoParams, Modify, OpenApi};

use crate::auth::{Access, access_for};

pub const TICKER_PATTERN: &str = "^[A-Za-z0-9.-]{1,16}$";

/// Query of `GET /v1/news`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct NewsParams {
    /// Exchange ticker of an SEC filer, resolved to CIKs through the identity intervals valid
    /// at `as_of` (never a current ticker file). Send `ticker` or `cik`, not both; with
    /// neither, every row of `source`.
    #[param(pattern = "^[A-Za-z0-9.-]{1,16}$", max_length = 16, example = "TSLA")]
    ticker: Option<String>,
    /// SEC Central Index Key of the filer, with or without leading zeros.
    #[param(pattern = "^[0-9]{1,10}$", example = "1318605")]
    cik: Option<String>,
    /// The cut: only rows whose `visible_by` clock is at or before this instant.
    #[param(inline)]
    as_of: Instant,
    /// The clock visibility is evaluated on.
    #[param(inline, default = "published_at")]
    visible_by: Option<VisibleBy>,
    /// The corpus lane (lanes are never mixed in one answer).
    #[param(inline, default = "certified_pit")]
    lane: Option<Lane>,
    /// Source namespace; one `/v1/meta` lists as held. Default `sec.edgar`.
    #[param(inline)]
    source: Option<SourceId>,
    /// Page size.
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<u32>,
    /// `next_cursor` of the previous page, with the same query (any `limit`).
    cursor: Option<String>,
}

/// Query of `GET /v1/news/diff`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct DiffParams {
    /// As on `/v1/news`.
    #[param(pattern = "^[A-Za-z0-9.-]{1,16}$", max_length = 16, example = "TSLA")]
    ticker: Option<String>,
    /// As on `/v1/news`.
    #[param(pattern = "^[0-9]{1,10}$", example = "1318605")]
    cik: Option<String>,
    /// Start of the window, exclusive: rows already visible here are left out.
    #[param(inline)]
    as_of_start: Instant,
    /// End of the window, inclusive; must be after `as_of_start`.
    #[param(inline)]
    as_of_end: Instant,
    #[param(inline, default = "published_at")]
    visible_by: Option<VisibleBy>,
    #[param(inline, default = "certified_pit")]
    lane: Option<Lane>,
    #[param(inline)]
    source: Option<SourceId>,
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<u32>,
    cursor: Option<String>,
}

/// Query of `GET /v1/news/{id}`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct RecordParams {
    /// The cut the record must be knowable at.
    #[param(inline)]
    as_of: Instant,
    #[param(inline, default = "published_at")]
    visible_by: Option<VisibleBy>,
}

/// Query of `GET /v1/coverage`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct CoverageParams {
    /// Only this source; one `/v1/meta` lists as held.
    #[param(inline)]
    source: Option<SourceId>,
    /// Only this UTC day; an uningested day answers a missing certificate, not 404.
    #[param(inline)]
    date: Option<Day>,
    /// Certificates as knowable at this instant; omitted means the latest.
    #[param(inline)]
    as_of: Option<Instant>,
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<u32>,
    cursor: Option<String>,
}

/// Query of the mapping routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct MappingParams {
    /// The instant the identity intervals must hold at.
    #[param(inline)]
    as_of: Instant,
}

/// Query of `GET /v1/sample/news`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct SampleNewsParams {
    /// Sample company; omitted means the first. The ids are listed in `/v1/meta`.
    example: Option<String>,
    /// The cut; omitted means the end of the sample's last day.
    #[param(inline)]
    as_of: Option<Instant>,
    #[param(inline, default = "published_at")]
    visible_by: Option<VisibleBy>,
}

/// Query of `GET /v1/sample/diff`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct SampleDiffParams {
    /// Sample company; omitted means the first.
    example: Option<String>,
    /// Start of the window, exclusive.
    #[param(inline)]
    as_of_start: Instant,
    /// End of the window, inclusive.
    #[param(inline)]
    as_of_end: Instant,
    #[param(inline, default = "published_at")]
    visible_by: Option<VisibleBy>,
}

/// Query of `GET /v1/sample/coverage`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct SampleCoverageParams {
    /// Sample company; omitted means the first.
    example: Option<String>,
    /// Certificates as knowable at this instant; omitted means the latest.
    #[param(inline)]
    as_of: Option<Instant>,
    /// The sample's source (it holds one).
    #[param(inline)]
    source: Option<SourceId>,
    /// Only this UTC day.
    #[param(inline)]
    date: Option<Day>,
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<u32>,
    cursor: Option<String>,
}

/// Query of `GET /v1/sample/mapping`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct SampleMappingParams {
    /// Sample company; omitted means the first.
    example: Option<String>,
    /// The instant; omitted means the end of the sample's last day.
    #[param(inline)]
    as_of: Option<Instant>,
}

/// Query of `GET /v1/audit-log`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct AuditLogParams {
    /// One UTC day of receipts; omitted means every day.
    #[param(inline)]
    day: Option<Day>,
    /// `next_cursor` (or `X-Service-Audit-Next-Cursor`) of the previous page.
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<u32>,
    /// `json` (an envelope) or `jsonl` (`application/x-ndjson`, one receipt per line).
    #[param(inline, default = "json")]
    format: Option<crate::audit_log::Format>,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "asof: what was knowable then",
        version = "0.1.0",
        description = include_str!("guide.md"),
        license(name = "Internal use only; commercial redistribution needs a separate license"),
    ),
    paths(
        crate::routes::health,
        crate::discovery::llms_txt,
        crate::discovery::docs,
        crate::discovery::openapi_json,
        crate::discovery::openapi_yaml,
        crate::routes::meta,
        crate::routes::news,
        crate::routes::diff,
        crate::routes::record,
        crate::routes::coverage,
        crate::routes::mapping_ticker,
        crate::routes::mapping_cik,
        crate::routes::sample_news,
        crate::routes::sample_diff,
        crate::routes::sample_coverage,
        crate::routes::sample_mapping,
        crate::account::me,
        crate::account::list_keys,
        crate::audit_log::audit_log,
        crate::audit_log::audit_stats,
        crate::mcp::post,
    ),
    components(schemas(crate::envelope::ErrorEnvelope)),
    modifiers(&Conventions),
    tags(
        (name = "discovery", description = "Public: health, metadata and this description."),
        (name = "data", description = "As-of queries over the corpus (Bearer key)."),
        (name = "sample", description = "The public sample: no key, `sample: true`."),
        (name = "account", description = "The caller and its keys."),
        (name = "audit", description = "Decision audit receipts (Desk plan)."),
        (name = "mcp", description = "The MCP endpoint for AI agents."),
    ),
)]
pub struct ApiDoc;

/// The description without per-corpus details, built once.
static BASE: LazyLock<Document> = LazyLock::new(ApiDoc::openapi);

/// The description as served with `corpus` loaded, as JSON: the sample `example` ids become
/// an enum, and response headers that every such response carries are marked `required`
/// (utoipa's header object has no `required` member, so that is done on the JSON).
pub fn document(corpus: &Corpus) -> serde_json::Value {
    let mut doc = BASE.clone();
    let examples: Vec<String> = corpus
        .manifest()
        .sample
        .as_ref()
        .map(|s| s.examples.iter().map(|e| e.id.clone()).collect())
        .unwrap_or_default();
    for (path, item) in doc.paths.paths.iter_mut() {
        let Some(op) = item
            .get
            .as_mut()
            .filter(|_| path.starts_with("/v1/sample/"))
        else {
            continue;
        };
        for p in op.parameters.iter_mut().flatten() {
            if p.name == "example" && !examples.is_empty() {
                p.schema = Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(examples.iter().cloned()))
                        .default(Some(examples[0].clone().into()))
                        .into(),
                );
            }
        }
    }
    let mut json = serde_json::to_value(&doc).expect("the description serializes");
    mark_required_headers(&mut json);
    inline_single_one_of(&mut json);
    json
}

/// utoipa wraps an inline enum that has a default in a one-element `oneOf`; merge it into its
/// parent so parameters read `{"type": "string", "enum": [...], "default": ...}`.
fn inline_single_one_of(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            let single = m
                .get("oneOf")
                .and_then(|o| o.as_array())
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].as_object())
                .cloned();
            if let Some(inner) = single {
                m.remove("oneOf");
                for (k, x) in inner {
                    m.entry(k).or_insert(x);
                }
            }
            m.values_mut().for_each(inline_single_one_of);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(inline_single_one_of),
        _ => {}
    }
}

/// Whether response header `name` is on every `status` response of `path`.
fn header_required(path: &str, status: &str, name: &str) -> bool {
    match name {
        "X-Request-Id" => true,
        "X-Corpus-Version" | "Cache-Control" => kind(path) != Kind::Mcp,
        "ETag" => matches!(status, "200" | "304") && kind(path) != Kind::Mcp,
        "Retry-After" => status == "429",
        // Credentials and the plan gate are checked before the window is counted, and a
        // fault of the state store leaves no window to report.
        n if n.starts_with("X-RateLimit-") => !matches!(status, "401" | "403" | "500"),
        _ => false,
    }
}

fn mark_required_headers(doc: &mut serde_json::Value) {
    let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        for op in item
            .as_object_mut()
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            let Some(responses) = op.get_mut("responses").and_then(|r| r.as_object_mut()) else {
                continue;
            };
            for (status, response) in responses.iter_mut() {
                let Some(headers) = response.get_mut("headers").and_then(|h| h.as_object_mut())
                else {
                    continue;
                };
                for (name, header) in headers.iter_mut() {
                    if header_required(path, status, name) {
                        header["required"] = true.into();
                    }
                }
            }
        }
    }
}

/// What every operation shares: statuses, error bodies, headers and security schemes.
struct Conventions;

/// Descriptions of the statuses added by [`Conventions`], with their `error.code`s.
fn status_description(status: &str) -> &'static str {
    match status {
        "304" => "Not Modified: the `If-None-Match` ETag still names this answer.",
        "400" => {
            "`invalid_request` (undeclared or repeated parameter, unknown or unheld `source`, `ticker` with `cik`, `limit` outside 1..1000, a cursor not the service's own or minted for another operation or cut; `param` names it) or `invalid_clock` (a clock with an offset, a bare date, or malformed; `param` names it and the message says which)."
        }
        "401" => "`unauthorized`: missing, unknown, revoked or expired API key.",
        "403" => "`forbidden`: the key's plan lacks this route (see `plans` in `/v1/meta`).",
        "429" => {
            "`rate_limited`: the fixed one-minute window is spent; retry after `Retry-After` seconds."
        }
        "500" => "`internal`: the request id identifies the fault in the service logs.",
        _ => "",
    }
}

fn string_header(description: &str, pattern: Option<&str>, format: Option<&str>) -> Header {
    let mut s = ObjectBuilder::new().schema_type(Type::String);
    if let Some(p) = pattern {
        s = s.pattern(Some(p));
    }
    if let Some(f) = format {
        s = s.format(Some(SchemaFormat::Custom(f.to_owned())));
    }
    HeaderBuilder::new()
        .schema(s)
        .description(Some(description))
        .build()
}

fn integer_header(description: &str) -> Header {
    HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        )
        .description(Some(description))
        .build()
}

/// How a route's answers look, as far as the shared conventions go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A JSON envelope (every `/v1` route and `/health`).
    Envelope,
    /// A discovery document (description, HTML docs, llms.txt): ETag, no envelope on success.
    Document,
    /// The MCP endpoint: JSON-RPC bodies, its own statuses.
    Mcp,
}

fn kind(path: &str) -> Kind {
    match path {
        "/mcp" => Kind::Mcp,
        "/docs" | "/llms.txt" | "/v1/openapi.json" | "/v1/openapi.yaml" => Kind::Document,
        _ => Kind::Envelope,
    }
}

impl Modify for Conventions {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("svc_live_<key>")
                    .description(Some(
                        "API key: `Authorization: Bearer svc_live_<key>`. Shown once at creation, stored hashed.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                "svc_session",
                "Browser session cookie (HttpOnly; Secure outside local use; SameSite=Lax) for the account routes.",
            ))),
        );
        for (path, item) in doc.paths.paths.iter_mut() {
            for op in [item.get.as_mut(), item.post.as_mut()]
                .into_iter()
                .flatten()
            {
                conventions(path, op);
            }
        }
    }
}

/// Adds the statuses, error bodies and headers the middleware gives every answer of `path`.
fn conventions(path: &str, op: &mut Operation) {
    let kind = kind(path);
    let access = access_for(path);
    let keyed = matches!(access, Some(Access::Key(_)));
    let rate_limited = access.is_some();
    if kind == Kind::Mcp {
        for response in op.responses.responses.values_mut() {
            if let RefOr::T(r) = response {
                r.headers.insert("X-Request-Id".into(), request_id_header());
            }
        }
        return;
    }
    // The audit opt-in header, on the routes whose answers can be receipted.
    if keyed && !path.starts_with("/v1/audit-log") {
        op.parameters.get_or_insert_with(Vec::new).push(
            ParameterBuilder::new()
                .name("X-Service-Audit")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "`on`, `1`, `true` or `yes` asks for a decision audit receipt (Desk plan); the response then carries `X-Service-Audit-Dropped`.",
                ))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(["on", "1", "true", "yes", "off"])),
                ))
                .build(),
        );
    }
    let mut statuses = vec!["304", "400", "500"];
    if keyed {
        statuses.extend(["401", "403"]);
    }
    if rate_limited {
        statuses.push("429");
    }
    for s in statuses {
        op.responses
            .responses
            .entry(s.to_owned())
            .or_insert_with(|| {
                RefOr::T(
                    ResponseBuilder::new()
                        .description(status_description(s))
                        .build(),
                )
            });
    }
    for (status, response) in op.responses.responses.iter_mut() {
        let RefOr::T(r) = response else { continue };
        let answered = status.starts_with('2') || status == "304";
        if !answered && r.content.is_empty() {
            r.content.insert(
                "application/json".into(),
                Content::new(Some(RefOr::Ref(Ref::from_schema_name("ErrorEnvelope")))),
            );
        }
        let mut h = vec![
            ("X-Request-Id", request_id_header()),
            (
                "X-Corpus-Version",
                string_header(
                    "The corpus version that answered (or that the document was made for).",
                    Some("^sha256:[0-9a-f]{64}$"),
                    None,
                ),
            ),
            (
                "Cache-Control",
                string_header(
                    "`no-store` on errors; otherwise `public` (sample and discovery routes) or `private`, with `max-age=300` for a historical cut and `max-age=0, must-revalidate` for a live one.",
                    None,
                    None,
                ),
            ),
        ];
        if answered {
            h.push((
                "ETag",
                string_header(
                    "Strong validator derived from the corpus version and the request; send it back in `If-None-Match` for a 304.",
                    None,
                    None,
                ),
            ));
        }
        if rate_limited {
            h.push((
                "X-RateLimit-Limit",
                integer_header("Requests allowed per one-minute window."),
            ));
            h.push((
                "X-RateLimit-Remaining",
                integer_header("Requests left in this window. Exact on one server; behind several replicas, while a key is far from its limit, it may not yet count other replicas' last 250 ms of requests; within a tenth of the limit it is the shared count every replica enforces."),
            ));
            h.push((
                "X-RateLimit-Reset",
                integer_header("End of this window, UTC unix seconds."),
            ));
        }
        if status == "429" {
            h.push((
                "Retry-After",
                integer_header("Seconds until the window resets."),
            ));
        }
        if path.starts_with("/v1/") && kind == Kind::Envelope {
            h.push((
                "X-Service-Audit-Dropped",
                integer_header(
                    "On answers to requests that asked for an audit receipt: receipts this process has dropped so far.",
                ),
            ));
        }
        for (name, header) in h {
            r.headers.entry(name.to_owned()).or_insert(header);
        }
    }
}

fn request_id_header() -> Header {
    string_header(
        "Echoed from the request when it is a UUID, else minted.",
        None,
        Some("uuid"),
    )
}
