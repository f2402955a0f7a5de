//! The MCP endpoint: JSON-RPC 2.0 over Streamable HTTP (`POST /mcp`), four read-only tools.
//!
//! A tool call is not a second implementation of the API: it is rebuilt as a GET against the
//! `/v1` route and sent through the whole router in this process (request id, CORS, auth, plan
//! gate, rate limit, envelopes), so an agent sees exactly what a REST client sees, and one tool
//! call counts once against the key's rate limit. The bearer key and `X-Forwarded-For` are
//! forwarded; the audit header is not (MCP calls are never receipted).
//!
//! Sessions are stateless: `initialize` hands out an HMAC-signed `Mcp-Session-Id` that any
//! replica can verify. Sending it back is optional (curl users need not); an invalid one gets
//! 404 so the client re-initializes. Answers are single JSON bodies, never SSE streams, so
//! `GET /mcp` (server-initiated stream) and `DELETE /mcp` (session end) answer 405.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Extension, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tower::ServiceExt;
use utoipa::openapi::Required;
use utoipa::openapi::path::ParameterIn;

use crate::error::ApiError;
use crate::http::route::{Endpoint, Route};
use crate::http::state::{AppState, Ctx, SampleTier};

/// Protocol revisions this endpoint speaks, newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26"];

/// `MCP-Protocol-Version` as the description enumerates it (the values of
/// [`PROTOCOL_VERSIONS`]).
#[derive(Debug, Clone, Copy)]
pub struct ProtocolVersion;

impl utoipa::PartialSchema for ProtocolVersion {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(PROTOCOL_VERSIONS.iter().copied()))
            .into()
    }
}
impl utoipa::ToSchema for ProtocolVersion {}

/// A JSON-RPC reply body: one response object, or (to a batch, on 2025-03-26) an array of
/// them in request order.
#[derive(Debug, Clone, Copy)]
pub struct RpcReply;

impl utoipa::PartialSchema for RpcReply {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Object))
            .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::Object)))
            .into()
    }
}
impl utoipa::ToSchema for RpcReply {}

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// JSON-RPC error for a rejected API key (the spec's single non-tool-result refusal).
pub const REJECTED_KEY: i64 = -32001;
/// Largest JSON-RPC body accepted.
const MAX_BODY: usize = 1 << 20;

/// One of the four tools: its REST route with a key, and its sample-tier route without one,
/// named by their handlers (as the route table names them), so a tool cannot name a route
/// the table lacks: [`Dispatch::new`] finds both entries and refuses to start otherwise. Its
/// input schema is derived from those two routes' typed queries (see [`input_schema`]). The
/// tools are declared beside the route table (`routes::TOOLS`).
pub struct Tool {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub keyed: fn() -> Endpoint,
    pub sample: fn() -> Endpoint,
}

/// A tool with its two table entries found: their paths and query parameters.
struct Resolved {
    tool: &'static Tool,
    keyed: String,
    sample: String,
    /// The keyless route is of the sample tier (its calls map a ticker to an example id).
    sample_tier: bool,
    keyed_params: Vec<(String, Value, bool)>,
    sample_params: Vec<(String, Value, bool)>,
}

impl Resolved {
    /// Finds `tool`'s entries in `routes`; the error names the tool and the missing path.
    fn new(tool: &'static Tool, routes: &[Route]) -> Result<Self, String> {
        let entry = |endpoint: fn() -> Endpoint| {
            let (_, paths, _) = endpoint();
            let path = paths.paths.keys().next().cloned().unwrap_or_default();
            routes.iter().find(|r| r.path() == path).ok_or_else(|| {
                format!(
                    "MCP tool {} names {path}, which is not in the route table",
                    tool.name
                )
            })
        };
        let (keyed, sample) = (entry(tool.keyed)?, entry(tool.sample)?);
        Ok(Resolved {
            tool,
            keyed: keyed.path(),
            sample: sample.path(),
            sample_tier: sample.sample,
            keyed_params: query_params(keyed),
            sample_params: query_params(sample),
        })
    }
}

/// The query parameters of `route`: (name, JSON schema with its description, required).
fn query_params(route: &Route) -> Vec<(String, Value, bool)> {
    let mut out = Vec::new();
    for (_, op) in route.operations() {
        for p in op.parameters.into_iter().flatten() {
            if p.parameter_in != ParameterIn::Query {
                continue;
            }
            let mut schema = p
                .schema
                .as_ref()
                .and_then(|s| serde_json::to_value(s).ok())
                .unwrap_or_else(|| json!({"type": "string"}));
            crate::openapi::inline_single_one_of(&mut schema);
            if let (Some(d), Some(m)) = (&p.description, schema.as_object_mut()) {
                m.insert("description".into(), Value::String(d.clone()));
            }
            out.push((p.name, schema, matches!(p.required, Required::True)));
        }
    }
    out
}

/// A tool's input schema: the keyed route's query parameters, plus the sample route's that
/// the keyed one lacks (marked as keyless-only). Required: what the keyed route requires,
/// and `as_of` wherever the keyed route takes it (the spec: with a key, `as_of` is a
/// required tool argument).
fn input_schema(tool: &Resolved) -> Value {
    let mut props = serde_json::Map::new();
    let mut required: Vec<String> = Vec::new();
    for (name, schema, req) in &tool.keyed_params {
        if *req || name == "as_of" {
            required.push(name.clone());
        }
        props.insert(name.clone(), schema.clone());
    }
    if tool.sample != tool.keyed {
        for (name, schema, _) in &tool.sample_params {
            if props.contains_key(name) {
                continue;
            }
            let mut schema = schema.clone();
            if let Some(m) = schema.as_object_mut() {
                let d = m
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                m.insert(
                    "description".into(),
                    Value::String(format!("Without a key only: {d}").trim_end().to_owned()),
                );
            }
            props.insert(name.clone(), schema);
        }
    }
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// The `tools/list` result of `tools` over the route table `routes`; an error names a tool
/// whose route the table lacks.
pub fn tool_list(routes: &[Route], tools: &'static [Tool]) -> Result<Value, String> {
    let resolved = tools
        .iter()
        .map(|t| Resolved::new(t, routes))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(list_of(&resolved))
}

fn list_of(tools: &[Resolved]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|r| {
            let t = r.tool;
            json!({
                "name": t.name,
                "title": t.title,
                "description": t.description,
                "inputSchema": input_schema(r),
                "annotations": {
                    "title": t.title,
                    "readOnlyHint": true,
                    "destructiveHint": false,
                    "idempotentHint": true,
                    "openWorldHint": false,
                },
            })
        })
        .collect();
    json!({ "tools": tools })
}

/// What the MCP endpoint needs of the application: the router its tool calls go through (the
/// very one serving this request, built once) and the tool list derived from the routes.
#[derive(Clone)]
pub struct Dispatch {
    router: axum::Router,
    list: Arc<Value>,
    tools: Arc<Vec<Resolved>>,
}

impl std::fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatch").finish_non_exhaustive()
    }
}

impl Dispatch {
    /// The dispatch of `tools` through `router`, which serves the route table `routes`.
    ///
    /// # Panics
    /// When a tool names a route the table lacks: the binary refuses to start rather than
    /// serve a tool without parameters (a test holds the shipped table and tools together).
    pub fn new(router: axum::Router, routes: &'static [Route], tools: &'static [Tool]) -> Self {
        let resolved = tools
            .iter()
            .map(|t| Resolved::new(t, routes))
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("{e}"));
        Dispatch {
            router,
            list: Arc::new(list_of(&resolved)),
            tools: Arc::new(resolved),
        }
    }
}

fn rpc_error(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

fn rpc_result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut bytes = serde_json::to_vec(body).expect("json serializes");
    bytes.push(b'\n');
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response()
}

/// What a POST carried, as far as the HTTP layer is concerned.
struct Call<'a> {
    state: &'a AppState,
    dispatch: &'a Dispatch,
    headers: &'a HeaderMap,
    peer: Option<ConnectInfo<SocketAddr>>,
    /// Protocol revision in force (header, else the oldest we speak, per the transport spec).
    version: &'static str,
    /// The sent key's check, made once per HTTP request whatever the number of messages.
    key_check: tokio::sync::OnceCell<Result<(), String>>,
}

/// Messages one batch may hold (protocol 2025-03-26; 2025-06-18 has no batches): each tool
/// call in it is a request of its own, so a batch is bounded like a burst of requests.
pub const MAX_BATCH: usize = 32;

/// The members a JSON-RPC 2.0 message may hold; any other is an invalid request.
const MESSAGE_MEMBERS: &[&str] = &["jsonrpc", "id", "method", "params", "result", "error"];

/// The request body `POST /mcp` takes, as the description gives it: one JSON-RPC 2.0 request
/// (with `id`) or notification (without), `params` an object. A batch (2025-03-26 only) and a
/// client's response to a server request (this server sends none) are taken too and described
/// in words only: a schema admitting them could not say that a batch is refused under
/// 2025-06-18, which is a header's matter.
pub fn message_schema() -> Value {
    json!({
        "type": "object",
        "title": "JSON-RPC message",
        "required": ["jsonrpc", "method"],
        "properties": {
            "jsonrpc": {"type": "string", "enum": ["2.0"]},
            "id": {"type": ["string", "integer"], "description": "Present on a request, absent on a notification."},
            "method": {"type": "string", "description": "`initialize`, `ping`, `tools/list`, `tools/call`; notifications such as `notifications/initialized`. Another method is JSON-RPC error -32601."},
            "params": {"type": "object"},
        },
        "additionalProperties": false,
    })
}

/// MCP endpoint: JSON-RPC 2.0 over Streamable HTTP for AI agents.
///
/// Protocol `2025-06-18` or `2025-03-26` (`MCP-Protocol-Version`); methods `initialize`,
/// `notifications/initialized`, `ping`, `tools/list`, `tools/call`; four read-only tools
/// (`svc_query`, `svc_diff`, `svc_coverage`, `svc_meta`) answering exactly as `/v1/news`,
/// `/v1/news/diff`, `/v1/coverage` and `/v1/meta`. With `Authorization: Bearer` the key's plan
/// and rate limit apply and `as_of` is required; without it the tools answer from the public
/// sample. A refusal is a tool result with `isError: true` and the envelope as text; a rejected
/// key is JSON-RPC error -32001. Answers are single JSON bodies (no SSE).
#[utoipa::path(post, path = "/mcp", tag = "mcp", operation_id = "mcp",
    request_body(content = Object, content_type = "application/json", description = "A JSON-RPC 2.0 request or notification (or, on 2025-03-26 only, a batch of at most 32; a batch is refused with -32600 on 2025-06-18). A member other than `jsonrpc`, `id`, `method`, `params` (`result`, `error` on a response) or `params` not an object is -32600 with 400."),
    params(
        ("MCP-Protocol-Version" = inline(Option<ProtocolVersion>), Header, description = "Protocol revision: `2025-06-18` or `2025-03-26` (assumed when absent); any other value is refused with 400."),
        ("Mcp-Session-Id" = Option<String>, Header, description = "The session id `initialize` returned; optional, verified by any replica."),
    ),
    responses(
        (status = 200, description = "A JSON-RPC response, or an array of them answering a batch.", content_type = "application/json", body = inline(RpcReply),
            headers(("Mcp-Session-Id" = String, description = "On the answer to `initialize`: the session id."))),
        (status = 202, description = "Only notifications or responses were sent: accepted, no body."),
        (status = 400, description = "Unparseable JSON, an invalid request, or an unsupported protocol version (JSON-RPC error body).", content_type = "application/json", body = Object),
        (status = 404, description = "Unknown or expired `Mcp-Session-Id`: send `initialize` again.", content_type = "application/json", body = Object),
        (status = 413, description = "Body larger than 1 MiB.", content_type = "application/json", body = Object),
        (status = 415, description = "Content-Type is not application/json.", content_type = "application/json", body = Object),
    ))]
pub async fn post(
    State(state): State<AppState>,
    dispatch: Option<Extension<Dispatch>>,
    req: Request,
) -> Response {
    // Only a request re-dispatched by a tool call lacks it, and no tool call targets /mcp.
    let Some(Extension(dispatch)) = dispatch else {
        return ApiError::Internal.into_response();
    };
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    let version = match headers
        .get(VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or(""))
    {
        None => PROTOCOL_VERSIONS[PROTOCOL_VERSIONS.len() - 1],
        Some(v) => match PROTOCOL_VERSIONS.iter().find(|p| **p == v) {
            Some(p) => p,
            None => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &rpc_error(
                        Value::Null,
                        -32600,
                        &format!(
                            "unsupported MCP-Protocol-Version {v:?}; supported: {}",
                            PROTOCOL_VERSIONS.join(", ")
                        ),
                        None,
                    ),
                );
            }
        },
    };
    if let Some(sid) = headers.get(SESSION_HEADER) {
        let valid = sid.to_str().ok().is_some_and(|s| {
            state
                .signer()
                .open::<String>(s, "mcp.session", "", "mcp")
                .is_ok()
        });
        if !valid {
            return json_response(
                StatusCode::NOT_FOUND,
                &rpc_error(
                    Value::Null,
                    -32600,
                    "unknown or expired Mcp-Session-Id; send initialize again",
                    None,
                ),
            );
        }
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    if !is_json {
        return json_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &rpc_error(
                Value::Null,
                -32600,
                "Content-Type must be application/json",
                None,
            ),
        );
    }
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return json_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                &rpc_error(Value::Null, -32600, "request body larger than 1 MiB", None),
            );
        }
    };
    let msg: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &rpc_error(Value::Null, -32700, "parse error: body is not JSON", None),
            );
        }
    };
    if let Value::Array(items) = &msg {
        let refusal = if version != "2025-03-26" {
            Some(format!(
                "batches are not part of MCP protocol {version}; send one message per request"
            ))
        } else if items.len() > MAX_BATCH {
            Some(format!(
                "a batch holds at most {MAX_BATCH} messages; this one holds {}",
                items.len()
            ))
        } else {
            None
        };
        if let Some(m) = refusal {
            return json_response(
                StatusCode::BAD_REQUEST,
                &rpc_error(Value::Null, -32600, &m, None),
            );
        }
    }
    let call = Call {
        state: &state,
        dispatch: &dispatch,
        headers,
        peer: parts.extensions.get::<ConnectInfo<SocketAddr>>().cloned(),
        version,
        key_check: tokio::sync::OnceCell::new(),
    };
    // 2025-03-26 allows batches; answer each element, in order.
    let (replies, session) = match msg {
        Value::Array(items) if !items.is_empty() => {
            let mut out = Vec::new();
            let mut session = None;
            for m in items {
                let (r, s) = call.message(m).await;
                out.extend(r);
                session = session.or(s);
            }
            let replies = if out.is_empty() {
                None
            } else {
                Some(Value::Array(out))
            };
            (replies, session)
        }
        other => {
            let (r, s) = call.message(other).await;
            (r, s)
        }
    };
    let mut res = match replies {
        // Only notifications or responses: accepted, no body.
        None => StatusCode::ACCEPTED.into_response(),
        Some(v) => {
            // A message the server cannot take is an HTTP error (MCP's transport rule); so is
            // a batch of which no element could be taken.
            let refused = |v: &Value| {
                v.get("error")
                    .is_some_and(|e| e["code"] == -32600 || e["code"] == -32700)
            };
            let status = if match &v {
                Value::Array(replies) => replies.iter().all(refused),
                one => refused(one),
            } {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::OK
            };
            json_response(status, &v)
        }
    };
    if let Some(s) = session {
        res.headers_mut().insert(
            SESSION_HEADER,
            HeaderValue::from_str(&s).expect("session token is base64url"),
        );
    }
    res
}

impl Call<'_> {
    /// Handles one JSON-RPC message; returns the reply (None for notifications and responses)
    /// and, for `initialize`, the session id to hand out.
    async fn message(&self, m: Value) -> (Option<Value>, Option<String>) {
        let Some(obj) = m.as_object() else {
            return (
                Some(rpc_error(
                    Value::Null,
                    -32600,
                    "invalid request: expected a JSON-RPC object",
                    None,
                )),
                None,
            );
        };
        let id = obj.get("id").cloned();
        if let Some(other) = obj.keys().find(|k| !MESSAGE_MEMBERS.contains(&k.as_str())) {
            return (
                Some(rpc_error(
                    Value::Null,
                    -32600,
                    &format!(
                        "invalid request: a JSON-RPC message has no member {other:?} (it holds {})",
                        MESSAGE_MEMBERS.join(", ")
                    ),
                    None,
                )),
                None,
            );
        }
        if obj.get("params").is_some_and(|p| !p.is_object()) {
            return (
                Some(rpc_error(
                    Value::Null,
                    -32600,
                    "invalid request: params must be an object (MCP names its parameters)",
                    None,
                )),
                None,
            );
        }
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return (
                Some(rpc_error(
                    id.unwrap_or(Value::Null),
                    -32600,
                    "invalid request: jsonrpc must be \"2.0\"",
                    None,
                )),
                None,
            );
        }
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            // A response from the client (we never send requests): accepted and ignored.
            if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) {
                return (None, None);
            }
            return (
                Some(rpc_error(
                    id.unwrap_or(Value::Null),
                    -32600,
                    "invalid request: no method",
                    None,
                )),
                None,
            );
        };
        let Some(id) = id else {
            // Notifications (`notifications/initialized`, cancellations...) need no answer.
            return (None, None);
        };
        // JSON-RPC: an id is a string or a number without a fraction.
        if !(id.is_string() || crate::json::whole_i64(&id).is_some() || id.is_u64()) {
            return (
                Some(rpc_error(
                    Value::Null,
                    -32600,
                    "invalid request: id must be a string or an integer",
                    None,
                )),
                None,
            );
        }
        let params = obj.get("params").cloned().unwrap_or(json!({}));
        match method {
            "initialize" => self.initialize(id, &params).await,
            "ping" => (Some(rpc_result(id, json!({}))), None),
            "tools/list" => match self.check_key().await {
                Err(e) => (Some(rejected(id, &e)), None),
                Ok(()) => (Some(rpc_result(id, (*self.dispatch.list).clone())), None),
            },
            "tools/call" => (Some(self.tools_call(id, &params).await), None),
            other => (
                Some(rpc_error(
                    id,
                    -32601,
                    &format!(
                        "method not found: {other}; this server offers initialize, ping, tools/list, tools/call"
                    ),
                    None,
                )),
                None,
            ),
        }
    }

    async fn initialize(&self, id: Value, params: &Value) -> (Option<Value>, Option<String>) {
        if let Err(e) = self.check_key().await {
            return (Some(rejected(id, &e)), None);
        }
        let Some(asked) = params.get("protocolVersion").and_then(Value::as_str) else {
            return (
                Some(rpc_error(
                    id,
                    -32602,
                    "invalid params: protocolVersion is required",
                    None,
                )),
                None,
            );
        };
        // The client's version when we speak it, else our newest (the client then decides).
        let version = PROTOCOL_VERSIONS
            .iter()
            .find(|v| **v == asked)
            .unwrap_or(&PROTOCOL_VERSIONS[0]);
        let session = self.state.signer().mint(
            "mcp.session",
            "",
            "mcp",
            &uuid::Uuid::new_v4().simple().to_string(),
        );
        let result = json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {
                "name": "asof",
                "title": "asof: what was knowable then",
                "version": env!("CARGO_PKG_VERSION"),
            },
            "instructions": "Read-only as-of queries over public records (SEC EDGAR and more). Every answer is an envelope naming the corpus_version that produced it. Call svc_meta first. Always pass an explicit as_of (RFC 3339 UTC with Z). status coverage_missing means a hole in the corpus, never an empty answer. Without an Authorization header the tools answer from the public sample (sample: true).",
        });
        (Some(rpc_result(id, result)), Some(session))
    }

    /// A sent key must be valid even on calls that do not reach a `/v1` route. Checked once
    /// per HTTP request: a batch of messages with an unknown key costs one lookup, not one each.
    async fn check_key(&self) -> Result<(), String> {
        if !self.headers.contains_key(header::AUTHORIZATION) {
            return Ok(());
        }
        self.key_check
            .get_or_init(|| async {
                crate::http::middleware::authenticate(
                    self.state,
                    self.headers,
                    asof_engine::Instant::now(),
                )
                .await
                .map(|_| ())
                .map_err(|e| e.message())
            })
            .await
            .clone()
    }

    async fn tools_call(&self, id: Value, params: &Value) -> Value {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return rpc_error(id, -32602, "invalid params: name is required", None);
        };
        let Some(tool) = self.dispatch.tools.iter().find(|t| t.tool.name == name) else {
            let names: Vec<&str> = self.dispatch.tools.iter().map(|t| t.tool.name).collect();
            return rpc_error(
                id,
                -32602,
                &format!("unknown tool {name:?}; tools: {}", names.join(", ")),
                None,
            );
        };
        let empty = serde_json::Map::new();
        let args = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(_) => {
                return rpc_error(
                    id,
                    -32602,
                    "invalid params: arguments must be an object",
                    None,
                );
            }
        };
        // A sent key must be valid whatever the tool (svc_meta's route needs none).
        if let Err(e) = self.check_key().await {
            return rejected(id, &e);
        }
        let keyed = self.headers.contains_key(header::AUTHORIZATION);
        if keyed && !args.contains_key("as_of") && self.takes_as_of(tool) {
            // With a key every tool answers as knowable at a cut the caller names (the REST
            // coverage route defaults to the latest; a tool call must not).
            return self.refusal(id, &crate::http::params::missing_instant("as_of"));
        }
        let uri = self.uri(tool, keyed, args);
        let (status, body) = self.send(&uri, !keyed).await;
        let envelope: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if status == StatusCode::UNAUTHORIZED {
            let msg = envelope["error"]["message"]
                .as_str()
                .unwrap_or("API key rejected")
                .to_owned();
            return rpc_error(id, REJECTED_KEY, &msg, Some(envelope));
        }
        let text = String::from_utf8_lossy(&body).trim_end().to_owned();
        let mut result = json!({
            "content": [{"type": "text", "text": text}],
            "isError": status != StatusCode::OK,
        });
        if self.version == "2025-06-18" && envelope.is_object() {
            result["structuredContent"] = envelope;
        }
        rpc_result(id, result)
    }

    /// The GET a tool call becomes. Arguments pass through as query parameters, so the REST
    /// route applies its own rules (an unknown argument is refused naming it, as in REST).
    fn uri(&self, tool: &Resolved, keyed: bool, args: &serde_json::Map<String, Value>) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        let sample_set = (!keyed)
            .then(|| self.state.corpus().manifest().sample.clone())
            .flatten();
        for (k, v) in args {
            let v = match v {
                Value::Null => continue,
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            // The sample routes name companies by example id; map a ticker or CIK to it.
            if let Some(set) = &sample_set
                && tool.sample_tier
                && (k == "ticker" || k == "cik")
            {
                let found = set.examples.iter().find(|e| {
                    if k == "ticker" {
                        e.ticker.eq_ignore_ascii_case(&v)
                    } else {
                        asof_engine::normalize_cik(&v).is_some_and(|c| c == e.cik)
                    }
                });
                q.append_pair("example", found.map_or(v.as_str(), |e| e.id.as_str()));
                continue;
            }
            q.append_pair(k, &v);
        }
        let path = if keyed { &tool.keyed } else { &tool.sample };
        let q = q.finish();
        if q.is_empty() {
            path.clone()
        } else {
            format!("{path}?{q}")
        }
    }

    /// Whether the tool's keyed route takes `as_of` (then a keyed call must give it).
    fn takes_as_of(&self, tool: &Resolved) -> bool {
        tool.keyed_params.iter().any(|(name, ..)| name == "as_of")
    }

    /// A refusal made here rather than by a route: the same envelope as a route's, as an
    /// error tool result.
    fn refusal(&self, id: Value, err: &ApiError) -> Value {
        let ctx = Ctx {
            request_id: uuid::Uuid::new_v4().hyphenated().to_string(),
            corpus: self.state.corpus(),
        };
        let envelope = crate::http::middleware::error_envelope(&ctx, err, false);
        let text = serde_json::to_string(&envelope).expect("envelope serializes");
        let mut result = json!({
            "content": [{"type": "text", "text": text}],
            "isError": true,
        });
        if self.version == "2025-06-18" {
            result["structuredContent"] = serde_json::to_value(&envelope).expect("json");
        }
        rpc_result(id, result)
    }

    /// Sends the GET through the whole router, as one more request of this caller; a keyless
    /// call is the sample tier, and answers that are not sample routes' say so.
    async fn send(&self, uri: &str, sample_tier: bool) -> (StatusCode, Vec<u8>) {
        let mut b = axum::http::Request::builder().method("GET").uri(uri);
        for name in [
            header::AUTHORIZATION,
            header::HeaderName::from_static("x-forwarded-for"),
        ] {
            if let Some(v) = self.headers.get(&name) {
                b = b.header(name, v);
            }
        }
        let mut req = b.body(Body::empty()).expect("valid request");
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(peer);
        }
        if sample_tier {
            req.extensions_mut().insert(SampleTier);
        }
        let res = self
            .dispatch
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("the router is infallible");
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .map(|b| b.to_vec())
            .unwrap_or_default();
        (status, body)
    }
}

fn rejected(id: Value, message: &str) -> Value {
    rpc_error(id, REJECTED_KEY, message, None)
}
