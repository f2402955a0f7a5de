//! Discovery routes: the OpenAPI description against the router it describes, `/docs`,
//! `/llms.txt`, and the description's promises (parameters, statuses, headers) checked against
//! real answers over the shipped sample corpus.

mod common;

use asof_server::plan::Plan;
use asof_server::routes::{TABLE, TOOLS};
use axum::http::{Method, StatusCode, header};
use common::{key_for, send, setup};
use serde_json::{Value, json};

async fn description(t: &common::T) -> Value {
    let r = send(t, Method::GET, "/v1/openapi.json", None, &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/json");
    r.json
}

/// Methods a path of the description documents.
fn documented_methods(doc: &Value, path: &str) -> Vec<Method> {
    doc["paths"][path]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(m, _)| Method::from_bytes(m.to_ascii_uppercase().as_bytes()).ok())
        .collect()
}

/// `path` with every `{param}` replaced by the example the description gives for it.
fn concrete(doc: &Value, path: &str, method: &Method) -> String {
    let op = &doc["paths"][path][method.as_str().to_ascii_lowercase()];
    let mut out = path.to_owned();
    for p in op["parameters"].as_array().into_iter().flatten() {
        if p["in"] == "path" {
            let example = p["example"].as_str().unwrap_or("x");
            out = out.replace(&format!("{{{}}}", p["name"].as_str().unwrap()), example);
        }
    }
    out
}

#[tokio::test]
async fn every_route_of_the_router_is_in_the_description_and_back() {
    let t = setup().await;
    let doc = description(&t).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "0.1.0");
    let table: Vec<String> = TABLE.iter().map(|r| r.path()).collect();
    let table: Vec<&str> = table.iter().map(String::as_str).collect();
    let documented: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for p in &table {
        assert!(
            documented.contains(p),
            "{p} is routed but not in the description"
        );
    }
    for p in &documented {
        assert!(table.contains(p), "{p} is described but not routed");
    }
    // Walk the router: every documented operation reaches a handler, never the fallback.
    let desk = key_for(&t.store, "desk@example.com", Plan::Desk).await;
    for p in &documented {
        for m in documented_methods(&doc, p) {
            let uri = concrete(&doc, p, &m);
            let r = send(&t, m.clone(), &uri, Some(&desk), &[]).await;
            let fallback = r.status == StatusCode::NOT_FOUND
                && r.json["error"]["message"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("no such route"));
            assert!(!fallback, "{m} {uri} fell through to the fallback");
            assert_ne!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{m} {uri}");
            if *p != "/mcp" {
                assert_eq!(
                    r.headers["x-corpus-version"],
                    t.state.corpus().version(),
                    "{m} {uri}"
                );
                assert!(r.headers.contains_key("x-request-id"), "{m} {uri}");
            }
        }
    }
}

/// The table's promise: every entry is routed with its methods, guarded by its access,
/// described with matching security and statuses, listed in `/v1/meta` under the plans that
/// may call it, and the MCP tools' schemas are its routes' parameters; and nothing exists
/// that no entry declares.
#[tokio::test]
async fn route_entries_agree_with_router_gate_description_meta_and_mcp_both_ways() {
    use asof_server::http::route::Access;
    let t = setup().await;
    let doc = description(&t).await;
    let researcher = key_for(&t.store, "r@example.com", Plan::Researcher).await;
    let meta = send(&t, Method::GET, "/v1/meta", None, &[]).await.json;
    let plans = meta["results"][0]["plans"].as_array().unwrap().clone();
    let listed = |plan: &str| -> Vec<String> {
        plans.iter().find(|p| p["plan_id"] == plan).unwrap()["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect()
    };
    for route in TABLE {
        let path = route.path();
        // Description: the same methods, security exactly when a key is needed, 401/403
        // exactly then, 429 exactly when rate-limited.
        let methods: Vec<String> = documented_methods(&doc, &path)
            .iter()
            .map(|m| m.to_string())
            .collect();
        // A path's entries (one per method) together have the documented methods.
        let all: Vec<&str> = TABLE
            .iter()
            .filter(|r| r.path() == path)
            .flat_map(|r| r.methods())
            .collect();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        let mut documented_sorted = methods.clone();
        documented_sorted.sort_unstable();
        assert_eq!(documented_sorted, sorted, "{path}");
        let keyed = matches!(
            route.access,
            Access::Key(_) | Access::KeyOrSession | Access::Session
        );
        for m in route.methods() {
            let op = &doc["paths"][&path][m.to_ascii_lowercase()];
            assert_eq!(op.get("security").is_some(), keyed, "{m} {path} security");
            // The session is documented exactly where the gate takes it.
            let takes_session =
                route.browser || matches!(route.access, Access::KeyOrSession | Access::Session);
            let schemes: Vec<&str> = op["security"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_object())
                .flat_map(|s| s.keys().map(String::as_str))
                .collect();
            assert_eq!(
                schemes.contains(&"session"),
                takes_session,
                "{m} {path} session: {schemes:?}"
            );
            // A public route that takes `corpus_version` answers 401 to a pin without a key.
            let pin_needs_key = route.pinned && route.access == Access::Public;
            assert_eq!(
                op["responses"].get("401").is_some(),
                keyed || pin_needs_key,
                "{m} {path} 401"
            );
            assert_eq!(
                op["responses"].get("429").is_some(),
                route.access != Access::Open,
                "{m} {path} 429"
            );
            // Router: the method reaches the route; another method is a 405 naming them.
            let uri = concrete(&doc, &path, &Method::from_bytes(m.as_bytes()).unwrap());
            let method = Method::from_bytes(m.as_bytes()).unwrap();
            let r = send(&t, method.clone(), &uri, None, &[]).await;
            // Gate: a keyed route refuses a request without a key; others never ask for one.
            assert_eq!(r.status == StatusCode::UNAUTHORIZED, keyed, "{m} {uri}");
            if let Access::Key(min) = route.access {
                let r = send(&t, method, &uri, Some(&researcher), &[]).await;
                assert_eq!(
                    r.status == StatusCode::FORBIDDEN,
                    min > Plan::Researcher,
                    "{m} {uri} with a researcher key"
                );
            }
        }
        let other = if !all.contains(&"PUT") {
            Method::PUT
        } else {
            Method::PATCH
        };
        let uri = concrete(
            &doc,
            &path,
            &Method::from_bytes(route.methods()[0].as_bytes()).unwrap(),
        );
        let r = send(&t, other.clone(), &uri, Some(&researcher), &[]).await;
        if !matches!(r.status, StatusCode::FORBIDDEN) {
            assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{other} {uri}");
            assert_eq!(
                r.headers[header::ALLOW],
                asof_server::app::allow_of(&path).as_str(),
                "{other} {uri}"
            );
        }
        let r = send(&t, Method::OPTIONS, &uri, None, &[]).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "OPTIONS {uri}");
        assert_eq!(
            r.headers[header::ALLOW],
            asof_server::app::allow_of(&path).as_str(),
            "OPTIONS {uri}"
        );
        // /v1/meta: a keyed route is listed under exactly the plans that may call it.
        for plan in Plan::ALL {
            let may = match route.access {
                Access::Key(min) => min <= plan,
                Access::KeyOrSession | Access::Session => true,
                _ => false,
            };
            assert_eq!(
                listed(plan.as_str()).contains(&path),
                may,
                "{path} listed under {plan}"
            );
        }
    }
    // Both ways: every described path and every route /v1/meta lists is an entry.
    let entries: Vec<String> = TABLE.iter().map(|r| r.path()).collect();
    for p in doc["paths"].as_object().unwrap().keys() {
        assert!(entries.contains(p), "{p} is described but has no entry");
    }
    for plan in Plan::ALL {
        for p in listed(plan.as_str()) {
            assert!(
                entries.contains(&p),
                "/v1/meta lists {p}, which has no entry"
            );
        }
    }
    // MCP: each tool's input schema is its routes' query parameters, both ways.
    let tools = asof_server::mcp::tool_list(TABLE, TOOLS).unwrap();
    for tool in tools["tools"].as_array().unwrap() {
        let props = tool["inputSchema"]["properties"].as_object().unwrap();
        // Every tool takes `corpus_version`; only the metadata tool takes nothing else.
        assert!(
            props.contains_key("corpus_version"),
            "{}: {props:?}",
            tool["name"]
        );
        assert_eq!(
            props.len() == 1,
            tool["name"] == "svc_meta",
            "{}: {props:?}",
            tool["name"]
        );
        let (keyed, sample) = match tool["name"].as_str().unwrap() {
            "svc_query" => ("/v1/news", "/v1/sample/news"),
            "svc_diff" => ("/v1/news/diff", "/v1/sample/diff"),
            "svc_coverage" => ("/v1/coverage", "/v1/sample/coverage"),
            "svc_meta" => ("/v1/meta", "/v1/meta"),
            other => panic!("unexpected tool {other}"),
        };
        let mut route_params: Vec<String> = Vec::new();
        for path in [keyed, sample] {
            for (name, _) in common::query_parameters(&doc["paths"][path]["get"]) {
                if !route_params.contains(&name) {
                    route_params.push(name);
                }
            }
        }
        let mut tool_params: Vec<String> = props.keys().cloned().collect();
        tool_params.sort();
        route_params.sort();
        assert_eq!(tool_params, route_params, "{}", tool["name"]);
        for (name, schema) in common::query_parameters(&doc["paths"][keyed]["get"]) {
            for k in ["pattern", "enum", "minimum", "maximum"] {
                assert_eq!(
                    props[&name].get(k),
                    schema.get(k),
                    "{} {name} {k}",
                    tool["name"]
                );
            }
        }
    }
}

#[tokio::test]
async fn every_documented_query_parameter_is_declared_by_its_route() {
    let t = setup().await;
    let doc = description(&t).await;
    let desk = key_for(&t.store, "desk@example.com", Plan::Desk).await;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(op) = item.get("get") else { continue };
        let base = concrete(&doc, path, &Method::GET);
        for (name, _) in common::query_parameters(op) {
            let r = send(
                &t,
                Method::GET,
                &format!("{base}?{name}=zz"),
                Some(&desk),
                &[],
            )
            .await;
            let undeclared = r.json["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("undeclared"));
            assert!(!undeclared, "{path} documents {name} but refuses it");
        }
        // And an undocumented one is refused by name; except on the providers' callbacks,
        // which take whatever parameters a provider adds (`iss`, `scope`, `session_state`...).
        if path.ends_with("/callback") && path.contains("/provider_") {
            continue;
        }
        // And an undocumented one is refused by name.
        let r = send(
            &t,
            Method::GET,
            &format!("{base}?zz_undocumented=1"),
            Some(&desk),
            &[],
        )
        .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(r.json["error"]["param"], "zz_undocumented", "{path}");
    }
}

#[tokio::test]
async fn clock_parameters_carry_the_spec_pattern_and_enums_their_values() {
    let t = setup().await;
    let doc = description(&t).await;
    let params = doc["paths"]["/v1/news"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let by_name = |n: &str| params.iter().find(|p| p["name"] == n).unwrap().clone();
    assert_eq!(by_name("as_of")["required"], true);
    assert_eq!(
        by_name("as_of")["schema"]["pattern"],
        asof_engine::CLOCK_PATTERN
    );
    assert_eq!(
        by_name("visible_by")["schema"]["enum"],
        serde_json::json!(["published_at", "available_at", "committed_at"])
    );
    assert_eq!(by_name("visible_by")["schema"]["default"], "published_at");
    assert_eq!(
        by_name("lane")["schema"]["enum"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        by_name("source")["schema"]["enum"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    assert_eq!(by_name("limit")["schema"]["minimum"], 1);
    assert_eq!(by_name("limit")["schema"]["maximum"], 1000);
    assert_eq!(by_name("limit")["schema"]["default"], 100);
    // The sample's example ids come from the loaded corpus.
    let sample = doc["paths"]["/v1/sample/news"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let example = sample.iter().find(|p| p["name"] == "example").unwrap();
    let ids = example["schema"]["enum"].as_array().unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(example["schema"]["default"], ids[0]);
}

#[tokio::test]
async fn statuses_security_and_headers_follow_the_gating_table() {
    let t = setup().await;
    let doc = description(&t).await;
    let news = &doc["paths"]["/v1/news"]["get"];
    for s in [
        "200", "304", "400", "401", "403", "409", "414", "429", "431", "500", "503",
    ] {
        assert!(news["responses"].get(s).is_some(), "/v1/news lacks {s}");
    }
    // Only routes that read a body can refuse a long one.
    assert!(news["responses"].get("413").is_none());
    assert!(
        doc["paths"]["/v1/keys"]["post"]["responses"]
            .get("413")
            .is_some()
    );
    assert_eq!(news["security"][0]["bearer"], serde_json::json!([]));
    let ok_headers = &news["responses"]["200"]["headers"];
    for h in [
        "ETag",
        "Cache-Control",
        "X-Request-Id",
        "X-Corpus-Version",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
    ] {
        assert_eq!(ok_headers[h]["required"], true, "200 of /v1/news: {h}");
    }
    assert_eq!(
        news["responses"]["429"]["headers"]["Retry-After"]["required"],
        true
    );
    assert_eq!(
        news["responses"]["409"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorEnvelope"
    );
    // Public routes: no security, no 401/403 (but a pinned `/v1/meta` takes a key: 401 names
    // `corpus_version`); /health is not rate-limited.
    let meta = &doc["paths"]["/v1/meta"]["get"];
    assert!(meta.get("security").is_none());
    assert!(
        meta["responses"]["401"]["description"]
            .as_str()
            .unwrap()
            .contains("corpus_version")
    );
    assert!(meta["responses"].get("403").is_none());
    assert!(meta["responses"].get("429").is_some());
    assert!(
        doc["paths"]["/health"]["get"]["responses"]
            .get("429")
            .is_none()
    );
    // Files need Power? not routed yet; the audit log needs Desk and says 403.
    assert!(
        doc["paths"]["/v1/audit-log"]["get"]["responses"]
            .get("403")
            .is_some()
    );
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    assert_eq!(schemes["session"]["in"], "cookie");
    assert_eq!(schemes["session"]["name"], "__Host-svc_session");
}

// What schemathesis found the description allowing and the service refusing (issue 43,
// point 2): each is now said in the description.
#[tokio::test]
async fn the_description_says_what_the_service_accepts_and_no_more() {
    let t = common::setup().await;
    let doc = description(&t).await;
    let param = |path: &str, method: &str, name: &str| -> Value {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path} has no {name}"))
            .clone()
    };
    // A header is present or absent, never the text `null`.
    let mcp = param("/mcp", "post", "MCP-Protocol-Version");
    assert_eq!(mcp["schema"]["type"], "string", "{mcp}");
    assert_eq!(mcp["schema"]["enum"], json!(["2025-06-18", "2025-03-26"]));
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            for p in op["parameters"].as_array().into_iter().flatten() {
                if p["in"] == "header" {
                    let s = p["schema"].to_string();
                    assert!(!s.contains("\"null\""), "{} allows null: {s}", p["name"]);
                }
            }
        }
    }
    // Bodies refuse undeclared fields, and say so.
    for name in [
        "EmailStart",
        "EmailConfirm",
        "KeyCreate",
        "Beacon",
        "BarsBody",
        "CheckoutBody",
    ] {
        assert_eq!(
            doc["components"]["schemas"][name]["additionalProperties"], false,
            "{name}"
        );
    }
    // The audit opt-in: the values the service reads, in any case, and `off`.
    let audit = param("/v1/me", "get", "X-Service-Audit");
    assert_eq!(
        audit["schema"]["pattern"],
        "^([Oo][Nn]|1|[Tt][Rr][Uu][Ee]|[Yy][Ee][Ss]|[Oo][Ff][Ff])$"
    );
    // The beacon's pages, the vendor key's characters, the sample's one source.
    assert_eq!(
        doc["components"]["schemas"]["Beacon"]["properties"]["path"]["pattern"],
        "^/(explore|sign-in|account)?$"
    );
    let vk = param("/v1/connectors/{vendor}/bars", "post", "X-Vendor-Key");
    assert_eq!(vk["schema"]["pattern"], "^[!-~]{1,512}$");
    let source = param("/v1/sample/coverage", "get", "source");
    assert_eq!(source["schema"]["enum"], json!(["sec.edgar"]));
}

// `ticker` with `cik` is refused (the contract), so the description offers them as one
// parameter whose schema admits one or the other: a generator never sends both.
#[tokio::test]
async fn ticker_and_cik_are_described_as_one_filer_sent_as_either() {
    let t = setup().await;
    let doc = description(&t).await;
    let desk = key_for(&t.store, "desk@example.com", Plan::Desk).await;
    for path in ["/v1/news", "/v1/news/diff", "/v1/stream"] {
        let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        let names: Vec<&str> = params.iter().filter_map(|p| p["name"].as_str()).collect();
        assert!(
            !names.contains(&"ticker") && !names.contains(&"cik"),
            "{path}: {names:?}"
        );
        let filer = params.iter().find(|p| p["name"] == "filer").unwrap();
        assert_eq!(
            (
                &filer["in"],
                &filer["style"],
                &filer["explode"],
                &filer["required"]
            ),
            (&json!("query"), &json!("form"), &json!(true), &json!(false)),
            "{path}"
        );
        let members: Vec<Value> = filer["schema"]["oneOf"].as_array().unwrap().clone();
        assert_eq!(members.len(), 2);
        for (m, name) in members.iter().zip(["ticker", "cik"]) {
            assert_eq!(m["required"], json!([name]), "{path}");
            assert_eq!(m["additionalProperties"], false, "{path}");
            assert!(
                m["properties"][name]["pattern"].is_string(),
                "{path} {name}"
            );
        }
    }
    // As described: one is answered, both refused.
    let one = send(
        &t,
        Method::GET,
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z",
        Some(&desk),
        &[],
    )
    .await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.json);
    let both = send(
        &t,
        Method::GET,
        "/v1/news?ticker=TSLA&cik=1318605&as_of=2026-01-29T12:00:00Z",
        Some(&desk),
        &[],
    )
    .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST);
    // The docs page lists the members, not the object.
    let html = String::from_utf8(send(&t, Method::GET, "/docs", None, &[]).await.bytes).unwrap();
    assert!(html.contains("<code>ticker</code> or <code>cik</code>"));
    // The explorer's page takes both as a view's state (schemathesis seed 63705600 sent
    // `ticker=false&cik=true` to a page described as refusing it, and got the page).
    let params = doc["paths"]["/explore"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let names: Vec<&str> = params.iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(
        names.contains(&"ticker") && names.contains(&"cik") && !names.contains(&"filer"),
        "{names:?}"
    );
    let page = send(&t, Method::GET, "/explore?ticker=false&cik=true", None, &[]).await;
    assert_eq!(page.status, StatusCode::OK);
}

#[tokio::test]
async fn health_is_never_rate_limited() {
    let t = setup().await;
    let r = send(&t, Method::GET, "/health", None, &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.headers.get("x-ratelimit-limit").is_none());
}

/// `/health`'s body is encoded once per thread and version with a stand-in id, then each
/// request's id is written over it: every answer must carry its own id, the same record, and
/// the version served after a reload, not the one the copy was made on.
#[tokio::test]
async fn health_carries_each_requests_own_id_and_the_version_served_after_a_reload() {
    let t = setup().await;
    let ids = [
        // A client's id, written lowercase; the nil UUID the copy is made with; minted ones.
        Some((
            "D3B07384-D113-4EC6-A2A1-8B7B2E9F6F1A",
            "d3b07384-d113-4ec6-a2a1-8b7b2e9f6f1a",
        )),
        Some((
            "00000000-0000-0000-0000-000000000000",
            "00000000-0000-0000-0000-000000000000",
        )),
        None,
        None,
    ];
    let mut bodies = Vec::new();
    for id in ids {
        let extra: Vec<(&str, &str)> = id
            .map(|(sent, _)| ("x-request-id", sent))
            .into_iter()
            .collect();
        let r = send(&t, Method::GET, "/health", None, &extra).await;
        assert_eq!(r.status, StatusCode::OK);
        let header = r.headers["x-request-id"].to_str().unwrap().to_owned();
        if let Some((_, kept)) = id {
            assert_eq!(header, kept);
        }
        assert_eq!(r.json["request_id"], header.as_str());
        assert_eq!(r.json["results"][0]["ok"], true);
        assert_eq!(r.json["corpus_version"], t.state.corpus().version());
        assert_eq!(
            r.json["results"][0]["corpus_version"],
            t.state.corpus().version()
        );
        assert_eq!(r.headers["x-corpus-version"], t.state.corpus().version());
        // The rest of the body is the same bytes whatever the id.
        let text = String::from_utf8(r.bytes).unwrap();
        assert_eq!(text.matches(&header).count(), 1, "{text}");
        bodies.push(text.replace(&header, "ID"));
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:?}");

    let before = t.state.corpus().version().to_owned();
    let (_copy, _) = common::reload_to_a_new_version(&t).await;
    let after = t.state.corpus().version().to_owned();
    assert_ne!(after, before);
    let r = send(&t, Method::GET, "/health", None, &[]).await;
    assert_eq!(r.json["corpus_version"], after.as_str());
    assert_eq!(r.json["results"][0]["corpus_version"], after.as_str());
    assert_eq!(
        r.json["results"][0]["corpus_created_at"],
        t.state.corpus().manifest().created_at.to_string().as_str()
    );
    assert_eq!(
        r.json["request_id"],
        r.headers["x-request-id"].to_str().unwrap()
    );
}

#[tokio::test]
async fn the_yaml_description_is_the_same_document() {
    let t = setup().await;
    let json = description(&t).await;
    let r = send(&t, Method::GET, "/v1/openapi.yaml", None, &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/yaml");
    let yaml: Value = serde_norway::from_slice(&r.bytes).unwrap();
    assert_eq!(yaml, json);
}

#[tokio::test]
async fn discovery_documents_carry_etag_and_answer_304() {
    let t = setup().await;
    for path in ["/v1/openapi.json", "/v1/openapi.yaml", "/docs", "/llms.txt"] {
        let r = send(&t, Method::GET, path, None, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        let etag = r.headers[header::ETAG].to_str().unwrap().to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "{path}: {etag}"
        );
        assert_eq!(
            r.headers[header::CACHE_CONTROL],
            "public, max-age=300",
            "{path}"
        );
        assert_eq!(r.headers["x-corpus-version"], t.state.corpus().version());
        let again = send(&t, Method::GET, path, None, &[("if-none-match", &etag)]).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{path}");
        assert!(again.bytes.is_empty());
        assert_eq!(again.headers[header::ETAG], etag.as_str());
    }
    // The two encodings of the description are different bytes, hence different ETags.
    let a = send(&t, Method::GET, "/v1/openapi.json", None, &[]).await;
    let b = send(&t, Method::GET, "/v1/openapi.yaml", None, &[]).await;
    assert_ne!(a.headers[header::ETAG], b.headers[header::ETAG]);
}

#[tokio::test]
async fn docs_page_lists_every_route_and_fetches_nothing_from_elsewhere() {
    let t = setup().await;
    let doc = description(&t).await;
    let r = send(&t, Method::GET, "/docs", None, &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let html = String::from_utf8(r.bytes).unwrap();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            assert!(html.contains(&format!("id=\"op-{id}\"")), "{method} {path}");
            assert!(html.contains(&format!("<code>{path}</code>")), "{path}");
        }
    }
    for topic in [
        "coverage hole",
        "cursor",
        "corpus_version",
        "forward_first_seen",
        "committed_at",
    ] {
        assert!(
            html.to_lowercase().contains(&topic.to_lowercase()),
            "guide lacks {topic}"
        );
    }
    // Self-contained: no script, no stylesheet link, no absolute URL the browser would load.
    for forbidden in [
        "<script",
        "<link",
        "src=\"http",
        "src=\"//",
        "@import",
        "url(",
    ] {
        assert!(!html.contains(forbidden), "/docs contains {forbidden}");
    }
    assert!(html.contains("invalid_clock") && html.contains("coverage_missing"));
}

#[tokio::test]
async fn llms_txt_indexes_the_api_for_agents() {
    let t = setup().await;
    let doc = description(&t).await;
    let r = send(&t, Method::GET, "/llms.txt", None, &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.headers[header::CONTENT_TYPE],
        "text/markdown; charset=utf-8"
    );
    let text = String::from_utf8(r.bytes).unwrap();
    assert!(text.starts_with("# asof\n"));
    for path in doc["paths"].as_object().unwrap().keys() {
        assert!(
            text.contains(&format!(" {path}](")),
            "llms.txt lacks {path}"
        );
    }
    for must in [
        "published_at",
        "available_at",
        "committed_at",
        "POST /mcp",
        "svc_query",
        "internal use only",
        "commercial redistribution needs a separate license",
    ] {
        assert!(text.contains(must), "llms.txt lacks {must}");
    }
}

#[tokio::test]
async fn discovery_routes_refuse_undeclared_parameters() {
    let t = setup().await;
    for path in ["/v1/openapi.json", "/docs", "/llms.txt"] {
        let r = send(&t, Method::GET, &format!("{path}?x=1"), None, &[]).await;
        common::assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request", Some("x"));
    }
}

#[tokio::test]
async fn a_desk_audit_request_for_the_description_counts_as_skipped() {
    let t = setup().await;
    let desk = key_for(&t.store, "desk@example.com", Plan::Desk).await;
    let before = t.state.audit().stats();
    let r = send(
        &t,
        Method::GET,
        "/v1/openapi.json",
        Some(&desk),
        &[("x-service-audit", "on")],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let after = t.state.audit().stats();
    assert_eq!(after.skipped, before.skipped + 1);
    assert_eq!(after.enqueued, before.enqueued);
}

/// Every `$ref` of the description names a schema it defines (a path parameter's type is
/// the easiest to leave undefined).
#[tokio::test]
async fn every_reference_in_the_description_resolves() {
    fn walk(v: &Value, refs: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    refs.push(r.clone());
                }
                o.values().for_each(|v| walk(v, refs));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, refs)),
            _ => {}
        }
    }
    let t = setup().await;
    let doc = description(&t).await;
    let mut refs = Vec::new();
    walk(&doc, &mut refs);
    assert!(refs.len() > 50);
    for r in refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("a reference outside the schemas: {r}"));
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "{r} is not defined"
        );
    }
}

// A tool names its routes by their handlers; a table without one of them is refused by name
// (the server would not start) rather than serving a tool with no parameters.
#[test]
fn a_tool_whose_route_is_not_in_the_table_is_refused_by_name() {
    let without_news: Vec<_> = TABLE
        .iter()
        .filter(|r| r.path() != "/v1/news")
        .cloned()
        .collect();
    let err = asof_server::mcp::tool_list(&without_news, TOOLS).unwrap_err();
    assert!(
        err.contains("svc_query") && err.contains("/v1/news"),
        "{err}"
    );
}
