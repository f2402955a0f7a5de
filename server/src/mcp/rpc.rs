//! JSON-RPC dispatch: each message checked (members, id, params) and answered
//! (`initialize`, `ping`, `tools/list`, `tools/call`); a tool call is rebuilt as a GET of its
//! route and sent through the whole router in this process.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::protocol::{
    MESSAGE_MEMBERS, PROTOCOL_VERSIONS, REJECTED_KEY, rejected, rpc_error, rpc_result,
};
use super::tools::{Dispatch, Resolved};
use crate::error::ApiError;
use crate::http::state::{AppState, Ctx, SampleTier};

/// One HTTP request's messages being answered: what the request carried that the messages
/// need (its key, its peer, the protocol revision in force).
pub(super) struct Call<'a> {
    pub(super) state: &'a AppState,
    pub(super) dispatch: &'a Dispatch,
    pub(super) headers: &'a HeaderMap,
    pub(super) peer: Option<ConnectInfo<SocketAddr>>,
    /// Protocol revision in force (header, else the oldest we speak, per the transport spec).
    pub(super) version: &'static str,
    /// The sent key's check, made once per HTTP request by the route's guard: `Err` with the
    /// refusal's message when a key was sent and refused.
    pub(super) key_check: Result<(), String>,
}

impl Call<'_> {
    /// Answers a whole body: one message, or (2025-03-26) a batch, each element in order.
    /// Returns the reply body (None when only notifications or responses were sent) and, for
    /// `initialize`, the session id to hand out.
    pub(super) async fn body(&self, msg: Value) -> (Option<Value>, Option<String>) {
        match msg {
            Value::Array(items) if !items.is_empty() => {
                let mut out = Vec::new();
                let mut session = None;
                for m in items {
                    let (r, s) = self.message(m).await;
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
            other => self.message(other).await,
        }
    }

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
        metrics::counter!(crate::obs::MCP_SESSIONS).increment(1);
        (Some(rpc_result(id, result)), Some(session))
    }

    /// A sent key must be valid even on calls that do not reach a `/v1` route. The route's
    /// guard checked it once for the HTTP request (a batch of messages with an unknown key
    /// costs one check, not one each), and its refusal counts against the client's address.
    async fn check_key(&self) -> Result<(), String> {
        self.key_check.clone()
    }

    async fn tools_call(&self, id: Value, params: &Value) -> Value {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return rpc_error(id, -32602, "invalid params: name is required", None);
        };
        let Some(tool) = self.dispatch.tools.iter().find(|t| t.tool.name == name) else {
            tool_call("unknown", "error");
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
            return self.refusal(
                id,
                &ApiError::from(crate::http::params::missing_instant("as_of")),
            );
        }
        let uri = self.uri(tool, keyed, args);
        let (status, body) = self.send(&uri, !keyed).await;
        let outcome = if status == StatusCode::OK {
            "ok"
        } else {
            "error"
        };
        tool_call(tool.tool.name, outcome);
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
            request_id: crate::http::request_id::RequestId::new(),
            corpus: self.state.corpus(),
        };
        let envelope = crate::http::response::error_envelope(&ctx, err, false);
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
            .as_ref()
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

/// Counts a tool call by tool (one of the server's, or `unknown`) and outcome.
fn tool_call(tool: &'static str, outcome: &'static str) {
    metrics::counter!(crate::obs::MCP_TOOL_CALLS, "tool" => tool, "outcome" => outcome)
        .increment(1);
}
