//! The tools: each names its two route-table entries (keyed and keyless), resolved at
//! start-up into the paths a call goes to and the input schema `tools/list` shows, derived
//! from the routes' own typed queries.

use std::sync::Arc;

use serde_json::{Value, json};
use utoipa::openapi::Required;
use utoipa::openapi::path::ParameterIn;

use crate::http::route::{Endpoint, Route};

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
pub(super) struct Resolved {
    pub(super) tool: &'static Tool,
    pub(super) keyed: String,
    pub(super) sample: String,
    /// The keyless route is of the sample tier (its calls map a ticker to an example id).
    pub(super) sample_tier: bool,
    pub(super) keyed_params: Vec<(String, Value, bool)>,
    pub(super) sample_params: Vec<(String, Value, bool)>,
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

/// The application tool calls are sent through (`crate::app::App`, boxed: the MCP endpoint
/// is one of its routes).
pub type Application = tower::util::BoxCloneSyncService<
    axum::extract::Request,
    axum::response::Response,
    std::convert::Infallible,
>;

/// What the MCP endpoint needs of the application: the router its tool calls go through (the
/// very one serving this request, built once) and the tool list derived from the routes.
#[derive(Clone)]
pub struct Dispatch {
    pub(super) router: Arc<Application>,
    pub(super) list: Arc<Value>,
    pub(super) tools: Arc<Vec<Resolved>>,
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
    pub fn new(router: Application, routes: &'static [Route], tools: &'static [Tool]) -> Self {
        let resolved = tools
            .iter()
            .map(|t| Resolved::new(t, routes))
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("{e}"));
        Dispatch {
            router: Arc::new(router),
            list: Arc::new(list_of(&resolved)),
            tools: Arc::new(resolved),
        }
    }
}
