//! Streamable HTTP, as far as this endpoint takes it: the checks a `POST /mcp` passes before
//! any message is read (protocol revision, session id, media type, size, JSON, batches), and
//! the HTTP status and headers of the reply. Answers are single JSON bodies, never SSE.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::protocol::{MAX_BATCH, PROTOCOL_VERSIONS, rpc_error};
use crate::error::ApiError;
use crate::http::state::AppState;

const SESSION_HEADER: &str = "mcp-session-id";

const VERSION_HEADER: &str = "mcp-protocol-version";

/// Largest JSON-RPC body accepted.
const MAX_BODY: usize = 1 << 20;

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

/// A `POST /mcp` that passed the transport's checks.
pub(super) struct Incoming {
    pub(super) headers: HeaderMap,
    pub(super) peer: Option<ConnectInfo<SocketAddr>>,
    /// Protocol revision in force (header, else the oldest we speak, per the transport spec).
    pub(super) version: &'static str,
    /// The parsed body: one message, or a batch the revision allows.
    pub(super) body: Value,
}

/// A refusal by the transport: the HTTP status and a JSON-RPC error without an id.
fn refuse(status: StatusCode, message: &str) -> Response {
    json_response(status, &rpc_error(Value::Null, -32600, message, None))
}

/// The transport's checks, in order: the protocol revision, the session id (when sent), the
/// media type, the size, JSON, and whether a batch is allowed (2025-03-26 only, at most
/// [`MAX_BATCH`] messages). A refusal is the HTTP answer.
pub(super) async fn receive(state: &AppState, req: Request) -> Result<Incoming, Response> {
    let (parts, body) = req.into_parts();
    let headers = parts.headers;
    let version = match headers
        .get(VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or(""))
    {
        None => PROTOCOL_VERSIONS[PROTOCOL_VERSIONS.len() - 1],
        Some(v) => match PROTOCOL_VERSIONS.iter().find(|p| **p == v) {
            Some(p) => p,
            None => {
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "unsupported MCP-Protocol-Version {v:?}; supported: {}",
                        PROTOCOL_VERSIONS.join(", ")
                    ),
                ));
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
            return Err(refuse(
                StatusCode::NOT_FOUND,
                "unknown or expired Mcp-Session-Id; send initialize again",
            ));
        }
    }
    if !crate::http::body::sent_as(&headers, "application/json") {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ));
    }
    let bytes = match crate::http::body::read_limited(body, MAX_BODY).await {
        Ok(b) => b,
        Err(ApiError::PayloadTooLarge { .. }) => {
            return Err(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body larger than 1 MiB",
            ));
        }
        Err(e) => return Err(refuse(StatusCode::BAD_REQUEST, &e.message())),
    };
    let Ok(msg) = serde_json::from_slice::<Value>(&bytes) else {
        return Err(json_response(
            StatusCode::BAD_REQUEST,
            &rpc_error(Value::Null, -32700, "parse error: body is not JSON", None),
        ));
    };
    if let Value::Array(items) = &msg {
        if version != "2025-03-26" {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!(
                    "batches are not part of MCP protocol {version}; send one message per request"
                ),
            ));
        }
        if items.len() > MAX_BATCH {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!(
                    "a batch holds at most {MAX_BATCH} messages; this one holds {}",
                    items.len()
                ),
            ));
        }
    }
    Ok(Incoming {
        peer: parts.extensions.get::<ConnectInfo<SocketAddr>>().cloned(),
        headers,
        version,
        body: msg,
    })
}

/// The HTTP answer to what the messages replied: 202 without a body when only notifications
/// or responses were sent; 400 when no message could be taken (MCP's transport rule: a
/// message the server cannot take is an HTTP error, and so is a batch of which no element
/// could be); else 200. The session id `initialize` minted goes in `Mcp-Session-Id`.
pub(super) fn respond(replies: Option<Value>, session: Option<String>) -> Response {
    let mut res = match replies {
        None => StatusCode::ACCEPTED.into_response(),
        Some(v) => {
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
