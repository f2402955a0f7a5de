//! The MCP and JSON-RPC 2.0 vocabulary this endpoint speaks: protocol revisions, the
//! message and reply shapes the description gives, and the error objects.

use serde_json::{Value, json};

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

/// JSON-RPC error for a rejected API key (the spec's single non-tool-result refusal).
pub const REJECTED_KEY: i64 = -32001;

/// Messages one batch may hold (protocol 2025-03-26; 2025-06-18 has no batches): each tool
/// call in it is a request of its own, so a batch is bounded like a burst of requests.
pub const MAX_BATCH: usize = 32;

/// The members a JSON-RPC 2.0 message may hold; any other is an invalid request.
pub(super) const MESSAGE_MEMBERS: &[&str] =
    &["jsonrpc", "id", "method", "params", "result", "error"];

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
            "id": {"type": ["string", "integer"], "minimum": i64::MIN, "maximum": u64::MAX, "description": "Present on a request, absent on a notification. A number must be a whole number a 64-bit integer holds (signed or unsigned): a bigger one could not be echoed back exactly, and is refused with JSON-RPC error -32600."},
            "method": {"type": "string", "description": "`initialize`, `ping`, `tools/list`, `tools/call`; notifications such as `notifications/initialized`. Another method is JSON-RPC error -32601."},
            "params": {"type": "object"},
        },
        "additionalProperties": false,
    })
}

pub(super) fn rpc_error(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

pub(super) fn rpc_result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The error of a rejected API key.
pub(super) fn rejected(id: Value, message: &str) -> Value {
    rpc_error(id, REJECTED_KEY, message, None)
}
