//! The MCP endpoint: JSON-RPC 2.0 over Streamable HTTP (`POST /mcp`), four read-only tools.
//!
//! A tool call is not a second implementation of the API: it is rebuilt as a GET against the
//! `/v1` route and sent through the whole router in this process (request id, CORS, auth, plan
//! gate, rate limit, envelopes), so an agent sees exactly what a REST client sees, and one tool
//! call counts once against the account's rate limit (and each message once against the
//! endpoint's own per-account or per-address limit). The bearer key and `X-Forwarded-For` are
//! forwarded; the audit header is not (MCP calls are never receipted).
//!
//! Sessions are stateless: `initialize` hands out an HMAC-signed `Mcp-Session-Id` that any
//! replica can verify. Sending it back is optional (curl users need not); an invalid one gets
//! 404 so the client re-initializes. Answers are single JSON bodies, never SSE streams, so
//! `GET /mcp` (server-initiated stream) and `DELETE /mcp` (session end) answer 405.
//!
//! Files: `protocol.rs` (revisions, message shapes, error objects), `transport.rs` (the HTTP
//! checks and reply), `rpc.rs` (each message answered), `tools.rs` (the tools and their
//! schemas, from the route table).

mod protocol;
mod rpc;
mod tools;
mod transport;

use axum::extract::{Extension, Request, State};
use axum::response::{IntoResponse, Response};

pub use protocol::{
    MAX_BATCH, PROTOCOL_VERSIONS, ProtocolVersion, REJECTED_KEY, RpcReply, message_schema,
};
pub use tools::{Dispatch, Tool, tool_list};

use crate::error::ApiError;
use crate::http::state::AppState;

/// The endpoint's path, as [`post`] declares it: the one path whose requests are handed the
/// [`Dispatch`] (were the two to differ, `/mcp` would answer every message 500: the test
/// below and every test in `tests/mcp.rs` would fail).
pub const PATH: &str = "/mcp";

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
        (status = 400, description = "Unparseable JSON, an invalid request, or an unsupported protocol version: a JSON-RPC error body; to a batch (2025-03-26) whose every message is invalid, an array of them, one per message.", content_type = "application/json", body = inline(RpcReply)),
        (status = 404, description = "Unknown or expired `Mcp-Session-Id`: send `initialize` again.", content_type = "application/json", body = Object),
        (status = 413, description = "Body larger than 1 MiB.", content_type = "application/json", body = Object),
        (status = 415, description = "Content-Type is not application/json.", content_type = "application/json", body = Object),
        (status = 429, description = "Too many messages this minute: with a valid key, four times the account's plan limit (a budget of its own, apart from the routes its tool calls reach, which count as themselves); without one, four times the public per-address limit. Also when the client address presented too many refused keys this minute. The service's error envelope (`rate_limited`) with `Retry-After`; every answer carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`.", content_type = "application/json", body = Object),
    ))]
pub async fn post(
    State(state): State<AppState>,
    dispatch: Option<Extension<Dispatch>>,
    req: Request,
) -> Response {
    // Only a request re-dispatched by a tool call lacks it, and no tool call targets /mcp.
    let Some(Extension(dispatch)) = dispatch else {
        return ApiError::INTERNAL.into_response();
    };
    let key_check = match req.extensions().get::<crate::http::state::RefusedKey>() {
        Some(refused) => Err(refused.0.clone()),
        None => Ok(()),
    };
    let incoming = match transport::receive(&state, req).await {
        Ok(i) => i,
        Err(refusal) => return refusal,
    };
    let call = rpc::Call {
        state: &state,
        dispatch: &dispatch,
        headers: &incoming.headers,
        peer: incoming.peer,
        version: incoming.version,
        key_check,
    };
    let (replies, session) = call.body(incoming.body).await;
    transport::respond(replies, session)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_path_handed_the_dispatch_is_the_endpoints_declared_path() {
        assert!(crate::routes::paths().iter().any(|p| p == super::PATH));
    }
}
