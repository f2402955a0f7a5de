//! The renderings of the description: JSON, YAML, the HTML reference (`/docs`) and the
//! agents' index (`/llms.txt`).
//!
//! All four come from the one generated description ([`crate::openapi::document`]), so the
//! HTML reference and the agents' index cannot disagree with it. `/docs` is self-contained:
//! inline CSS, no script, nothing fetched from elsewhere.

use std::fmt::Write;

use bytes::Bytes;
use serde_json::Value;

use crate::http::route::Route;

/// The four renderings of the description for one corpus version.
#[derive(Debug)]
pub struct Rendered {
    pub corpus_version: String,
    pub json: Bytes,
    pub yaml: Bytes,
    pub html: Bytes,
    pub llms: Bytes,
}

impl Rendered {
    pub fn new(corpus: &asof_engine::Corpus, routes: &[Route]) -> Self {
        let doc = crate::openapi::document(corpus, routes);
        let mut json = serde_json::to_vec_pretty(&doc).expect("the description serializes");
        json.push(b'\n');
        let yaml = crate::openapi::yaml::to_yaml(&doc);
        Rendered {
            corpus_version: corpus.version().to_owned(),
            json: json.into(),
            yaml: yaml.into(),
            html: html(&doc).into(),
            llms: llms(&doc).into(),
        }
    }
}

// ---- rendering -----------------------------------------------------------------------------

/// Every operation of the description, in document order: (method, path, operation).
pub fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in ["get", "post", "put", "patch", "delete"] {
            if let Some(op) = item.get(method) {
                out.push((method.to_ascii_uppercase(), path.clone(), op));
            }
        }
    }
    out
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

fn markdown(md: &str) -> String {
    let mut out = String::new();
    let parser = pulldown_cmark::Parser::new_ext(md, pulldown_cmark::Options::ENABLE_TABLES);
    pulldown_cmark::html::push_html(&mut out, parser);
    out
}

/// Resolves a `$ref` to `#/components/schemas/X` (one level).
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/components/schemas/")
            .and_then(|n| doc["components"]["schemas"].get(n))
            .unwrap_or(v),
        None => v,
    }
}

/// A one-line type summary of a schema: type, format, enum, pattern, range, default.
fn type_summary(s: &Value) -> String {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("<a href=\"#schema-{0}\">{0}</a>", esc(name));
    }
    if let Some(one) = s.get("oneOf").and_then(Value::as_array) {
        let parts: Vec<String> = one.iter().map(type_summary).collect();
        return parts.join(" or ");
    }
    // A one-member object (a member of the filer parameter): its member's rule.
    if let Some(props) = s["properties"].as_object().filter(|p| p.len() == 1) {
        let (k, v) = props.iter().next().expect("one member");
        return format!("<code>{}</code>: {}", esc(k), type_summary(v));
    }
    let mut parts = Vec::new();
    let ty = match &s["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".into(),
    };
    if ty == "array" {
        parts.push(format!("array of {}", type_summary(&s["items"])));
    } else {
        parts.push(esc(&ty));
    }
    if let Some(f) = s["format"].as_str() {
        parts.push(format!("format {}", esc(f)));
    }
    if let Some(e) = s["enum"].as_array() {
        let vals: Vec<String> = e
            .iter()
            .map(|v| format!("<code>{}</code>", esc(v.as_str().unwrap_or(&v.to_string()))))
            .collect();
        parts.push(format!("one of {}", vals.join(", ")));
    }
    if let Some(p) = s["pattern"].as_str() {
        parts.push(format!("pattern <code>{}</code>", esc(p)));
    }
    match (s.get("minimum"), s.get("maximum")) {
        (Some(a), Some(b)) => parts.push(format!("{a}..{b}")),
        (Some(a), None) => parts.push(format!("≥ {a}")),
        _ => {}
    }
    if let Some(d) = s.get("default") {
        parts.push(format!(
            "default <code>{}</code>",
            esc(d.as_str().unwrap_or(&d.to_string()))
        ));
    }
    parts.join("; ")
}

/// An example request for an operation, from its required parameters' examples.
pub fn example_request(op: &Value, method: &str, path: &str) -> String {
    let mut url = path.to_owned();
    let mut query = Vec::new();
    for p in op["parameters"].as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or("");
        let example = p
            .get("example")
            .or_else(|| p["schema"].get("examples").and_then(|e| e.get(0)))
            .and_then(Value::as_str);
        match (p["in"].as_str(), example) {
            (Some("path"), Some(x)) => url = url.replace(&format!("{{{name}}}"), x),
            (Some("query"), Some(x)) if p["required"] == true => query.push(format!("{name}={x}")),
            _ => {}
        }
        // An object-valued parameter (the filer) is sent as its members.
        if p["in"] == "query"
            && let Some(members) = p["example"].as_object()
        {
            for (k, v) in members {
                query.push(format!("{k}={}", v.as_str().unwrap_or(&v.to_string())));
            }
        }
    }
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    let auth = match credentials(op) {
        (true, _) => " -H 'Authorization: Bearer svc_live_…'",
        (false, true) => " -H 'Cookie: __Host-svc_session=…'",
        (false, false) => "",
    };
    let method = if method == "GET" {
        String::new()
    } else {
        format!(" -X {method}")
    };
    format!("curl -s{method}{auth} 'http://127.0.0.1:8080{url}'")
}

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}\
header{background:#0d2538;color:#fff;padding:1.2em 2em}header a{color:#9fd3ff}\
main{display:flex}nav{min-width:17em;padding:1em 1.5em;border-right:1px solid #ddd;position:sticky;top:0;align-self:flex-start;max-height:100vh;overflow:auto;font-size:14px}\
nav ul{list-style:none;padding-left:0}nav h4{margin:1em 0 .3em;text-transform:uppercase;font-size:12px;color:#667}\
article{padding:1em 2.5em;max-width:62em}section.op{border-top:1px solid #ddd;padding-top:.5em;margin-top:2em}\
.m{display:inline-block;font:bold 12px monospace;padding:2px 6px;border-radius:3px;background:#1f6feb;color:#fff;margin-right:.5em}.m.POST{background:#8250df}\
table{border-collapse:collapse;width:100%;margin:.5em 0;font-size:14px}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f5f7}\
code,pre{font-family:ui-monospace,monospace;font-size:13px}pre{background:#f6f8fa;padding:.7em;overflow:auto}.req{color:#b42318;font-weight:bold}";

/// `/docs`: the description rendered as one self-contained HTML page.
pub fn html(doc: &Value) -> String {
    let info = &doc["info"];
    let title = info["title"].as_str().unwrap_or("API");
    let version = info["version"].as_str().unwrap_or("");
    let ops = operations(doc);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>{t} — API reference</title><style>{STYLE}</style></head><body>\n\
         <header><h1>{t}</h1><p>API reference, version {v}. Machine-readable: <a href=\"/v1/openapi.json\">openapi.json</a>, \
         <a href=\"/v1/openapi.yaml\">openapi.yaml</a>; for agents: <a href=\"/llms.txt\">llms.txt</a>.</p></header>\n<main><nav>",
        t = esc(title),
        v = esc(version),
    );
    h.push_str("<h4>Guide</h4><ul><li><a href=\"#guide\">The as-of model</a></li></ul>");
    let tags: Vec<(String, String)> = doc["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_owned(),
                t["description"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for (tag, _) in &tags {
        let _ = write!(h, "<h4>{}</h4><ul>", esc(tag));
        for (method, path, op) in ops
            .iter()
            .filter(|(_, _, op)| op["tags"][0] == tag.as_str())
        {
            let _ = write!(
                h,
                "<li><a href=\"#op-{id}\"><span class=\"m {method}\">{method}</span>{path}</a></li>",
                id = esc(op["operationId"].as_str().unwrap_or("")),
                path = esc(path),
            );
        }
        h.push_str("</ul>");
    }
    h.push_str("<h4>Schemas</h4><ul><li><a href=\"#schemas\">Records and envelopes</a></li></ul></nav>\n<article>");
    let _ = write!(
        h,
        "<section id=\"guide\">{}</section>",
        markdown(info["description"].as_str().unwrap_or(""))
    );
    for (tag, description) in &tags {
        let _ = write!(
            h,
            "<h2 id=\"tag-{0}\">{0}</h2><p>{1}</p>",
            esc(tag),
            markdown(description)
        );
        for (method, path, op) in ops
            .iter()
            .filter(|(_, _, op)| op["tags"][0] == tag.as_str())
        {
            operation_html(&mut h, method, path, op);
        }
    }
    h.push_str("<section id=\"schemas\"><h2>Schemas</h2>");
    for (name, schema) in doc["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let _ = write!(h, "<h3 id=\"schema-{0}\">{0}</h3>", esc(name));
        if let Some(d) = schema["description"].as_str() {
            h.push_str(&markdown(d));
        }
        schema_table(&mut h, doc, schema);
    }
    h.push_str("</section></article></main></body></html>\n");
    h
}

fn operation_html(h: &mut String, method: &str, path: &str, op: &Value) {
    let id = op["operationId"].as_str().unwrap_or("");
    let _ = write!(
        h,
        "<section class=\"op\" id=\"op-{id}\"><h3><span class=\"m {method}\">{method}</span><code>{path}</code></h3>",
        id = esc(id),
        path = esc(path),
    );
    if let Some(s) = op["summary"].as_str() {
        let _ = write!(h, "<p><strong>{}</strong></p>", esc(s));
    }
    if let Some(d) = op["description"].as_str() {
        h.push_str(&markdown(d));
    }
    let auth = match credentials(op) {
        (true, false) => "Bearer API key (<code>Authorization: Bearer svc_live_…</code>)",
        (true, true) => {
            "Bearer API key (<code>Authorization: Bearer svc_live_…</code>) or the session cookie (<code>__Host-svc_session</code>, set by signing in)"
        }
        (false, true) => {
            "the session cookie only (<code>__Host-svc_session</code>, set by signing in); writes must come from this service's own pages"
        }
        (false, false) => "none",
    };
    let _ = write!(h, "<p>Authentication: {auth}.</p>");
    if let Some(params) = op["parameters"].as_array().filter(|p| !p.is_empty()) {
        h.push_str("<table><tr><th>Parameter</th><th>In</th><th>Type and rule</th><th>Description</th></tr>");
        for p in params {
            // An object-valued parameter is sent as its members (`ticker` or `cik`).
            let members: Vec<String> = p["schema"]["oneOf"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|_| p["explode"] == true)
                .filter_map(|m| m["properties"].as_object())
                .flat_map(|m| m.keys())
                .map(|k| format!("<code>{}</code>", esc(k)))
                .collect();
            let name = if members.is_empty() {
                format!("<code>{}</code>", esc(p["name"].as_str().unwrap_or("")))
            } else {
                members.join(" or ")
            };
            let _ = write!(
                h,
                "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                name,
                if p["required"] == true {
                    " <span class=\"req\">required</span>"
                } else {
                    ""
                },
                esc(p["in"].as_str().unwrap_or("")),
                type_summary(&p["schema"]),
                markdown(p["description"].as_str().unwrap_or("")),
            );
        }
        h.push_str("</table>");
    }
    let _ = write!(
        h,
        "<p>Example:</p><pre>{}</pre>",
        esc(&example_request(op, method, path))
    );
    h.push_str("<table><tr><th>Status</th><th>Meaning</th><th>Body</th><th>Headers</th></tr>");
    for (status, r) in op["responses"].as_object().into_iter().flatten() {
        let bodies: Vec<String> = r["content"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(ct, c)| format!("{} <code>{}</code>", type_summary(&c["schema"]), esc(ct)))
            .collect();
        let headers: Vec<String> = r["headers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(n, _)| format!("<code>{}</code>", esc(n)))
            .collect();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(status),
            markdown(r["description"].as_str().unwrap_or("")),
            bodies.join("<br>"),
            headers.join(" "),
        );
    }
    h.push_str("</table></section>\n");
}

fn schema_table(h: &mut String, doc: &Value, schema: &Value) {
    let schema = resolve(doc, schema);
    let Some(props) = schema["properties"].as_object() else {
        let _ = write!(h, "<p>{}</p>", type_summary(schema));
        return;
    };
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    h.push_str("<table><tr><th>Field</th><th>Type</th><th>Description</th></tr>");
    for (name, p) in props {
        let _ = write!(
            h,
            "<tr><td><code>{}</code>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            if required.contains(&name.as_str()) {
                ""
            } else {
                " (optional)"
            },
            type_summary(p),
            markdown(p["description"].as_str().unwrap_or("")),
        );
    }
    h.push_str("</table>");
}

/// `/llms.txt`: what the API is, the clocks, every route, MCP and the license, in Markdown.
pub fn llms(doc: &Value) -> String {
    let mut m = String::new();
    let _ = writeln!(
        m,
        "# asof\n\n> As-of information service over public records (SEC EDGAR and the other sources `/v1/meta` lists): \
         given an instant `as_of` and a clock `visible_by`, it answers only with rows whose clock is at or before that \
         instant, names the `corpus_version` that answered, and never confuses a coverage hole (409 `coverage_missing`, \
         `count: null`) with an empty answer (200, `count: 0`).\n"
    );
    m.push_str(
        "## Clocks\n\n\
         - `published_at` (default `visible_by`): when the source published the row; day-resolution rows carry 23:59:59Z of their UTC date.\n\
         - `available_at`: when the row could first be fetched; set on `forward_first_seen` rows, never imputed.\n\
         - `committed_at`: when this corpus recorded the row (revisions are answered as they stood at the cut).\n\
         - Rows also carry `event_at` and `acceptance_at`. A null clock is never visible.\n\
         - Instants are RFC 3339 UTC with a literal Z (2026-01-29T12:00:00Z); offsets and bare dates are refused (400 `invalid_clock`).\n\n\
         ## Rules an agent must know\n\n\
         - Lanes `certified_pit` (default) and `forward_first_seen` are never mixed in one answer.\n\
         - 409 `coverage_missing` means the corpus lacks data the cut needs (`coverage.missing` names it): not zero events.\n\
         - Page with `next_cursor` → `cursor`, same query; 409 `cursor_expired` after a corpus reload means restart.\n\
         - `corpus_version=sha256:…` (every data route, `/v1/meta`, the MCP tools) answers from that past version while it is retained (`retention` in `/v1/meta`): the same question asked later gets the same answer; 404 `corpus_version_unknown`, 410 `corpus_version_not_retained`.\n\
         - Undeclared or repeated parameters are 400 `invalid_request` naming the parameter.\n\
         - Data routes need `Authorization: Bearer svc_live_<key>`; `/v1/sample/*` and `/v1/meta` need none.\n\n\
         ## Routes\n\n",
    );
    for (method, path, op) in operations(doc) {
        let summary = op["summary"].as_str().unwrap_or("");
        let auth = match credentials(op) {
            (true, false) => " (Bearer key)",
            (true, true) => " (Bearer key or session cookie)",
            (false, true) => " (session cookie)",
            (false, false) => "",
        };
        let _ = writeln!(
            m,
            "- [{method} {path}](/docs#op-{id}){auth}: {summary}",
            id = op["operationId"].as_str().unwrap_or(""),
        );
    }
    m.push_str(
        "\n## MCP\n\n\
         - `POST /mcp`: JSON-RPC 2.0 over Streamable HTTP, protocol `2025-06-18` or `2025-03-26`. Four read-only tools: \
         `svc_query` (as `GET /v1/news`), `svc_diff` (as `/v1/news/diff`), `svc_coverage` (as `/v1/coverage`), `svc_meta` \
         (as `/v1/meta`). With a Bearer key `as_of` is required; without an `Authorization` header the tools answer from \
         the public sample (`sample: true`). A refusal is a tool result with `isError: true` and the whole envelope as \
         text; a rejected key is JSON-RPC error -32001.\n\n\
         ## Docs\n\n\
         - [API reference (HTML)](/docs)\n\
         - [OpenAPI description (JSON)](/v1/openapi.json)\n\
         - [OpenAPI description (YAML)](/v1/openapi.yaml)\n\n\
         ## License\n\n\
         Self-serve use is internal use only; commercial redistribution needs a separate license.\n",
    );
    m
}

/// Which credentials an operation's `security` accepts: (Bearer key, session cookie).
fn credentials(op: &serde_json::Value) -> (bool, bool) {
    let schemes: Vec<&str> = op["security"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_object())
        .flat_map(|o| o.keys().map(String::as_str))
        .collect();
    (schemes.contains(&"bearer"), schemes.contains(&"session"))
}
