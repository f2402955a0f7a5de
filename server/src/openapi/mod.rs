//! The OpenAPI 3.1 description (version 0.1.0), generated from the route table.
//!
//! Each route's handler carries `#[utoipa::path]` with its typed query, its success body and
//! the statuses only it answers; the paths come from the route entries, never from a second
//! list. Everything every route shares is added here in one pass ([`conventions`]) from the
//! same entry the middleware obeys: the entry's access decides which operations need a key
//! and are rate-limited, and its kind how answers are cached, so the description cannot
//! drift from what `guard` and `context` do. The per-corpus part (the sample `example` ids)
//! is filled in by [`document`].

pub mod render;
pub mod yaml;

use asof_engine::Corpus;
use utoipa::OpenApi;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, OpenApi as Document, Ref, RefOr, Required, ResponseBuilder};

use crate::http::route::{Access, Kind, Route};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "asof: what was knowable then",
        version = "0.1.0",
        description = include_str!("guide.md"),
        license(name = "Internal use only; commercial redistribution needs a separate license"),
    ),
    components(schemas(crate::http::envelope::ErrorEnvelope)),
    tags(
        (name = "discovery", description = "Public: health, metadata and this description."),
        (name = "data", description = "As-of queries over the corpus (Bearer key)."),
        (name = "sample", description = "The public sample: no key, `sample: true`."),
        (name = "account", description = "The caller and its keys."),
        (name = "audit", description = "Decision audit receipts (Desk plan)."),
        (name = "mcp", description = "The MCP endpoint for AI agents."),
        (name = "connector", description = "Bring-your-own-key daily bars from your own market-data vendor (Desk plan)."),
        (name = "delta-sharing", description = "The corpus's Delta Lake tables over the open Delta Sharing protocol (Power plan): share `asof`, one schema per source (`sec_edgar`), one table per lane, time travel by table version. Point any Delta Sharing client at `/delta-sharing` with a profile file holding your key (`asof keys create --delta-sharing-profile`)."),
        (name = "site", description = "The browser site: landing, sign-in and account pages, served offline by this binary."),
    ),
)]
pub struct ApiDoc;

/// The description of `routes`, without per-corpus details: each entry's path item and the
/// schemas it refers to, then the shared conventions.
pub fn base(routes: &[Route]) -> Document {
    let mut doc = ApiDoc::openapi();
    let components = doc.components.get_or_insert_with(Default::default);
    add_security_schemes(components);
    for route in routes {
        let (schemas, paths, _) = (route.endpoint)();
        for (name, schema) in schemas {
            components.schemas.entry(name).or_insert(schema);
        }
        for (path, mut item) in paths.paths {
            for op in [
                item.get.as_mut(),
                item.post.as_mut(),
                item.put.as_mut(),
                item.delete.as_mut(),
                item.patch.as_mut(),
            ]
            .into_iter()
            .flatten()
            {
                conventions(&path, route, op);
            }
            // Several entries may share a path (one per method): their operations merge.
            match doc.paths.paths.get_mut(&path) {
                Some(held) => {
                    held.get = held.get.take().or(item.get);
                    held.post = held.post.take().or(item.post);
                    held.put = held.put.take().or(item.put);
                    held.delete = held.delete.take().or(item.delete);
                    held.patch = held.patch.take().or(item.patch);
                    if held.parameters.is_none() {
                        held.parameters = item.parameters;
                    }
                }
                None => {
                    doc.paths.paths.insert(path, item);
                }
            }
        }
    }
    doc
}

/// The description as served with `corpus` loaded, as JSON: the sample `example` ids become
/// an enum, and response headers that every such response carries are marked `required`
/// (utoipa's header object has no `required` member, so that is done on the JSON).
pub fn document(corpus: &Corpus, routes: &[Route]) -> serde_json::Value {
    let mut doc = base(routes);
    let examples: Vec<String> = corpus
        .manifest()
        .sample
        .as_ref()
        .map(|s| s.examples.iter().map(|e| e.id.clone()).collect())
        .unwrap_or_default();
    for (path, item) in doc.paths.paths.iter_mut() {
        let sample = routes.iter().any(|r| r.sample && r.path() == *path);
        let Some(op) = item.get.as_mut().filter(|_| sample) else {
            continue;
        };
        let sample_source = corpus.manifest().sample.as_ref().map(|s| s.source_id);
        for p in op.parameters.iter_mut().flatten() {
            // The sample holds one source: the only value its routes accept.
            if p.name == "source"
                && let Some(source) = sample_source
            {
                p.schema = Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some([source.as_str()]))
                        .into(),
                );
            }
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
    mark_required_headers(&mut json, routes);
    headers_are_never_null(&mut json);
    bodies_take_declared_fields_only(&mut json);
    inline_single_one_of(&mut json);
    one_filer_at_a_time(&mut json);
    bodies_read_by_hand(&mut json, routes);
    json
}

/// Request bodies their handlers read as JSON values rather than through a typed body: the
/// schema the route entry names ([`Route::body`]), given by the module that reads the body.
fn bodies_read_by_hand(doc: &mut serde_json::Value, routes: &[Route]) {
    for (path, item) in doc["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|m| m.iter_mut())
    {
        for (method, op) in item.as_object_mut().into_iter().flat_map(|m| m.iter_mut()) {
            let Some(schema) = routes
                .iter()
                .find(|r| {
                    r.path() == *path && r.methods().contains(&method.to_ascii_uppercase().as_str())
                })
                .and_then(|r| r.body)
            else {
                continue;
            };
            if let Some(content) = op["requestBody"]["content"]["application/json"].as_object_mut()
            {
                content.insert("schema".into(), schema());
            }
        }
    }
}

/// `ticker` and `cik` exclude each other (the contract refuses both, `400 invalid_request`),
/// which two separate optional parameters cannot say. Where an operation takes both, they
/// become one optional object-valued query parameter, `filer`, exploded in form style (so it
/// is sent as `ticker=…` or `cik=…`, as before) whose schema is `oneOf` the two one-member
/// objects: a client generating requests from the description sends one or neither.
///
/// Only the API's routes (`/v1/...`) refuse both. The explorer's page (`/explore`) takes the
/// two as a view's state and opens with both, saying in the page which it used, so an edited
/// link still opens: described as `oneOf`, a page that answers `200` would contradict it.
fn one_filer_at_a_time(doc: &mut serde_json::Value) {
    use serde_json::{Value, json};
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for op in paths
        .iter_mut()
        .filter(|(path, _)| path.starts_with("/v1/"))
        .filter_map(|(_, item)| item.as_object_mut())
        .flat_map(|item| item.values_mut())
    {
        let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
            continue;
        };
        let at = |name: &str| {
            params
                .iter()
                .position(|p| p["in"] == "query" && p["name"] == name)
        };
        let (Some(t), Some(c)) = (at("ticker"), at("cik")) else {
            continue;
        };
        let (ticker, cik) = (params[t].clone(), params[c].clone());
        let member = |p: &Value, name: &str| {
            json!({
                "type": "object",
                "title": name,
                "properties": {name: p["schema"].clone()},
                "required": [name],
                "additionalProperties": false,
            })
        };
        let text = |p: &Value| p["description"].as_str().unwrap_or("").trim().to_owned();
        let mut filer = json!({
            "name": "filer",
            "in": "query",
            "required": false,
            "style": "form",
            "explode": true,
            "description": format!(
                "The filer, sent as one of two query parameters, never both (`400 invalid_request`): \
                 `ticker`: {} `cik`: {}",
                text(&ticker),
                text(&cik)
            ),
            "schema": {"oneOf": [member(&ticker, "ticker"), member(&cik, "cik")]},
        });
        if let Some(x) = ticker
            .get("example")
            .or_else(|| ticker["schema"].get("examples").and_then(|e| e.get(0)))
        {
            filer["example"] = json!({"ticker": x});
        }
        params.remove(t.max(c));
        params.remove(t.min(c));
        params.insert(t.min(c), filer);
    }
}

/// A header is present with a value or absent: utoipa describes an optional header as
/// nullable (`oneOf [null, X]`, `type: [string, null]`), which invites a client to send the
/// text `null`. Every header parameter's schema loses its `null`.
fn headers_are_never_null(doc: &mut serde_json::Value) {
    let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for item in paths.values_mut() {
        for op in item
            .as_object_mut()
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            let Some(params) = op.get_mut("parameters").and_then(|p| p.as_array_mut()) else {
                continue;
            };
            for p in params.iter_mut().filter(|p| p["in"] == "header") {
                let Some(schema) = p.get_mut("schema") else {
                    continue;
                };
                if let Some(one_of) = schema.get("oneOf").and_then(|o| o.as_array()) {
                    let kept: Vec<serde_json::Value> = one_of
                        .iter()
                        .filter(|s| s.get("type") != Some(&serde_json::json!("null")))
                        .cloned()
                        .collect();
                    if kept.len() == 1 {
                        *schema = kept.into_iter().next().expect("one left");
                    }
                }
                if let Some(types) = schema.get_mut("type").and_then(|t| t.as_array_mut()) {
                    types.retain(|t| t != "null");
                    if types.len() == 1 {
                        let t = types[0].clone();
                        schema["type"] = t;
                    }
                }
            }
        }
    }
}

/// Every request body the routes read with `http::body::{Json, Form}` refuses fields it does
/// not declare: the schemas of those bodies (the ones named in `components`) say so. The
/// billing webhook takes the processor's event as sent and names no schema.
fn bodies_take_declared_fields_only(doc: &mut serde_json::Value) {
    let mut named = std::collections::BTreeSet::new();
    for item in doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for op in item.as_object().into_iter().flat_map(|m| m.values()) {
            for content in op["requestBody"]["content"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
            {
                if let Some(r) = content["schema"]["$ref"].as_str()
                    && let Some(name) = r.strip_prefix("#/components/schemas/")
                {
                    named.insert(name.to_owned());
                }
            }
        }
    }
    for name in named {
        if let Some(schema) = doc["components"]["schemas"]
            .get_mut(&name)
            .and_then(|s| s.as_object_mut())
        {
            schema.insert("additionalProperties".into(), false.into());
        }
    }
}

/// utoipa wraps an inline enum that has a default in a one-element `oneOf`; merge it into its
/// parent so parameters read `{"type": "string", "enum": [...], "default": ...}`.
pub(crate) fn inline_single_one_of(v: &mut serde_json::Value) {
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

/// Whether response header `name` is on every `status` response of a route of `kind`.
fn header_required(kind: Kind, status: &str, name: &str) -> bool {
    match name {
        "X-Request-Id" => true,
        // File bytes are not an answer of a corpus version (their ETag is their sha256).
        "X-Corpus-Version" => {
            kind != Kind::Rpc
                && !(kind == Kind::Bytes && matches!(status, "200" | "206" | "304"))
                && !(kind == Kind::Redirect && matches!(status, "302" | "303"))
        }
        "Cache-Control" => kind != Kind::Rpc,
        "ETag" => {
            matches!(status, "200" | "206" | "304")
                && !matches!(
                    kind,
                    Kind::Rpc | Kind::Stream | Kind::Redirect | Kind::Protocol
                )
        }
        "Retry-After" => matches!(status, "429" | "503"),
        // Credentials and the plan gate are checked before the window is counted, and a
        // fault of the state store leaves no window to report.
        // A signed file URL is checked after the window is counted.
        n if n.starts_with("X-RateLimit-") && kind == Kind::Bytes => status != "500",
        n if n.starts_with("X-RateLimit-") => !matches!(status, "401" | "403" | "500"),
        _ => false,
    }
}

fn mark_required_headers(doc: &mut serde_json::Value, routes: &[Route]) {
    let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let kind = routes
            .iter()
            .find(|r| r.path() == *path)
            .map_or(Kind::Envelope, |r| r.kind);
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
                    if header_required(kind, status, name) {
                        header["required"] = true.into();
                    }
                }
            }
        }
    }
}

/// The 404 of a pinned route (see `Route::pinned`).
const PINNED_404: &str = "`corpus_version_unknown`: the `corpus_version` sent was never published by this deployment (no version it served descends from it); `param: corpus_version`.";

/// Descriptions of the statuses added by [`conventions`], with their `error.code`s.
fn status_description(status: &str) -> &'static str {
    match status {
        "404" => PINNED_404,
        "410" => {
            "`corpus_version_not_retained`: the `corpus_version` sent was published here but is outside this deployment's retention (`retention` in `/v1/meta`; the message says which bound); `param: corpus_version`."
        }
        "304" => "Not Modified: the `If-None-Match` ETag still names this answer.",
        "400" => {
            "`invalid_request` (undeclared or repeated parameter, unknown or unheld `source`, `ticker` with `cik`, `limit` outside 1..1000, a cursor not the service's own or minted for another operation or cut; `param` names it), `invalid_clock` (a clock with an offset, a bare date, or malformed; `param` names it and the message says which), on news, diff and sample routes `query_too_broad` (answering the page would read more rows of the corpus than one request may, `--max-walk-rows`: the same request is refused again, so narrow it by `ticker` or `cik`, a shorter window or another clock, or download the partitions from `/v1/files`), or on the billing webhook `invalid_signature` (a missing, malformed, stale or non-matching `Stripe-Signature`)."
        }
        "401" => {
            "`unauthorized`: missing, unknown, revoked or expired API key (on `/v1/meta`, only when it names a `corpus_version`: a past version is loaded for it); on account routes, no live session cookie (`__Host-svc_session`; signed out, idle for 24 hours, or 14 days after sign-in)."
        }
        "403" => {
            "`forbidden`: the key's plan lacks this route (see `plans` in `/v1/meta`); on account routes, a cookie-authenticated write sent from another site, or the plan's cap on live keys; on checkout, `commercial_license_required` (`attestation: false`: self-serve plans are internal use only; the message says where to ask for a commercial license); on the connector, `vendor_refused` (the vendor refused the `X-Vendor-Key` sent)."
        }
        "429" => {
            "`rate_limited`: the fixed one-minute window is spent; on the connector also `vendor_rate_limited` (the vendor's limit for your vendor key; its `Retry-After` passed on) or `too_many_connector_calls` (this key already has 4 vendor calls in flight). Retry after `Retry-After` seconds."
        }
        "413" => {
            "`payload_too_large`: the body is longer than this route reads (`param: body`); nothing past the limit was read."
        }
        "414" => "`uri_too_long`: the path and query are longer than 8 KiB.",
        "431" => {
            "`headers_too_large`: the request headers exceed 32 KiB in total. A head of more than 100 fields, or past 256 KiB, is refused by the HTTP parser itself with a bare 431 (no body) and the connection closed."
        }
        "500" => "`internal`: the request id identifies the fault in the service logs.",
        "503" => {
            "`not_ready` (this replica is starting, its corpus still loading, when `corpus_version` is empty; `GET /ready` also answers it while the replica drains before a shutdown or cannot reach its state store; another replica can answer), `timeout` (the answer took longer than the service's request timeout) or `overloaded` (every slot of the scan pool, which answers the pages the by-filer index does not, stayed taken); on sign-in routes `sign_in_not_configured` (this server has no settings for that sign-in way), `mail_unavailable` (the mail server refused the message) or `provider_unavailable` (the provider could not be reached); on billing routes `billing_not_configured` (the payment processor's settings are missing; the message names them) or `processor_unavailable` (the payment processor could not be reached or is failing); on the connector `connector_not_configured` (this server has no settings for that vendor); `state_unavailable` (the account store cannot be reached: keys and sessions cannot be checked; public and sample routes keep answering) or `storage_unavailable` (the corpus storage cannot be reached; nothing partial is answered); retry after `Retry-After` seconds."
        }
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

/// The two credentials: a Bearer key, and the browser session cookie of the account routes.
fn add_security_schemes(components: &mut utoipa::openapi::Components) {
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
                "__Host-svc_session",
                "Browser session cookie for the account routes, also taken by the data routes (`/v1/news`, `/v1/news/diff`, `/v1/news/{id}`, `/v1/coverage`, `/v1/mapping/*`) from a request without `Authorization`, so the site's explorer (`/explore`) reads them for a signed-in account without its script holding a key (the account's plan and per-account limit apply; nothing is receipted without a key): `__Host-svc_session` (HttpOnly, Secure, SameSite=Lax, Path=/, no Domain, so no sibling subdomain can plant one). A local plain-HTTP server (`asof serve --insecure-cookies`) names it `svc_session` instead, without Secure, since browsers refuse `__Host-` cookies there; each server reads only the name it sets.",
            ))),
        );
}

/// Adds the statuses, error bodies and headers the middleware gives every answer of `route`.
fn conventions(path: &str, route: &Route, op: &mut Operation) {
    let kind = route.kind;
    let keyed = matches!(
        route.access,
        Access::Key(_) | Access::KeyOrSession | Access::Session
    );
    let rate_limited = route.access != Access::Open;
    if kind == Kind::Rpc {
        for response in op.responses.responses.values_mut() {
            if let RefOr::T(r) = response {
                r.headers.insert("X-Request-Id".into(), request_id_header());
            }
        }
        return;
    }
    // The audit opt-in header, on the routes whose answers can be receipted.
    if keyed && route.receipts && kind != Kind::Stream {
        op.parameters.get_or_insert_with(Vec::new).push(
            ParameterBuilder::new()
                .name("X-Service-Audit")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "`on`, `1`, `true` or `yes` (any case) asks for a decision audit receipt (Desk plan); the response then carries `X-Service-Audit-Dropped`. `off` asks for none; any other value is refused (`400`, `param: X-Service-Audit`).",
                ))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .pattern(Some("^([Oo][Nn]|1|[Tt][Rr][Uu][Ee]|[Yy][Ee][Ss]|[Oo][Ff][Ff])$")),
                ))
                .build(),
        );
    }
    // Every route refuses an oversized head (`http::limits`); a route with a body, a long one.
    let mut statuses = vec!["400", "414", "431", "500"];
    if op.request_body.is_some() {
        statuses.push("413");
    }
    if !matches!(kind, Kind::Stream | Kind::Redirect | Kind::Protocol) {
        statuses.push("304");
    }
    // Any route can outlive the request timeout, and any is refused `not_ready` while the
    // replica is still loading its corpus; only a scan can find every slot taken.
    statuses.push("503");
    if keyed {
        statuses.extend(["401", "403"]);
    }
    if rate_limited {
        statuses.push("429");
    }
    if route.pinned && route.access == Access::Public {
        // Anyone may call it, but a pin loads a past version: that takes a key.
        statuses.push("401");
    }
    if route.pinned {
        // A route with a 404 of its own says both.
        if let Some(RefOr::T(r)) = op.responses.responses.get_mut("404") {
            r.description = format!("{} {PINNED_404}", r.description);
        }
        statuses.extend(["404", "410"]);
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
        let error = status.starts_with('4') || status.starts_with('5');
        if error && r.content.is_empty() {
            r.content.insert(
                "application/json".into(),
                Content::new(Some(RefOr::Ref(Ref::from_schema_name("ErrorEnvelope")))),
            );
        }
        let mut h = vec![("X-Request-Id", request_id_header())];
        let redirected = status == "302";
        if !((kind == Kind::Bytes && answered) || redirected) {
            h.push((
                "X-Corpus-Version",
                string_header(
                    "The corpus version that answered (or that the document was made for).",
                    Some("^sha256:[0-9a-f]{64}$"),
                    None,
                ),
            ));
        }
        h.push((
            "Cache-Control",
            string_header(
                if kind == Kind::Stream {
                    "`no-store` on errors; `no-cache, no-store` on the stream."
                } else if kind == Kind::Redirect {
                    "`no-store`."
                } else if kind == Kind::Protocol {
                    "`no-store` (file URLs in answers expire)."
                } else if kind == Kind::Bytes {
                    "`no-store` on errors; on file bytes `private, max-age=<seconds the URL has left>`."
                } else {
                    "`no-store` on errors; otherwise `public` (sample and discovery routes) or `private`, with `max-age=300` for a historical cut and `max-age=0, must-revalidate` for a live one."
                },
                None,
                None,
            ),
        ));
        if answered && !matches!(kind, Kind::Stream | Kind::Redirect | Kind::Protocol) {
            h.push((
                "ETag",
                string_header(
                    match kind {
                        Kind::Envelope => "Strong validator derived from the corpus version and the request; send it back in `If-None-Match` for a 304.",
                        // These answers change while the corpus version stays the same.
                        _ => "Strong validator derived from the body bytes (this answer can change without a new corpus version); send it back in `If-None-Match` for a 304.",
                    },
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
        if status == "503" {
            h.push((
                "Retry-After",
                integer_header("Seconds after which a retry may succeed."),
            ));
        }
        if path.starts_with("/v1/") && matches!(kind, Kind::Envelope | Kind::LiveEnvelope) {
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
