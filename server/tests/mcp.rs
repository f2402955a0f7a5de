//! The MCP endpoint over `app(state)`: JSON-RPC framing and errors, protocol versions and
//! sessions, the four tools as in-process GETs (same envelope as REST, same rate limit), the
//! sample tier without a key, and -32001 for a rejected key.

mod common;

use std::time::Duration;

use asof_server::AppState;
use asof_server::plan::Plan;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::{Res, T, get, key_for, respond, sample_corpus, send, setup};
use serde_json::{Value, json};

async fn post(t: &T, body: &str, headers: &[(&str, &str)]) -> Res {
    let mut b = Request::builder()
        .method(Method::POST)
        .uri("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    respond(&t, b.body(Body::from(body.to_owned())).unwrap()).await
}

async fn rpc(t: &T, method: &str, params: Value, key: Option<&str>) -> Res {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut h: Vec<(&str, &str)> = vec![("mcp-protocol-version", "2025-06-18")];
    if let Some(a) = &auth {
        h.push(("authorization", a));
    }
    post(t, &body, &h).await
}

async fn call(t: &T, tool: &str, args: Value, key: Option<&str>) -> Value {
    let r = rpc(
        t,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        key,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    r.json
}

/// The envelope a tool result carries, parsed from `content[0].text`.
fn envelope(result: &Value) -> Value {
    serde_json::from_str(result["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
}

fn without_request_id(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("request_id");
    v
}

#[tokio::test]
async fn initialize_answers_each_supported_version_with_tools_only_and_a_session() {
    let t = setup().await;
    for v in ["2025-06-18", "2025-03-26"] {
        let r = rpc(
            &t,
            "initialize",
            json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.headers[header::CONTENT_TYPE], "application/json");
        let res = &r.json["result"];
        assert_eq!(res["protocolVersion"], v);
        assert_eq!(
            res["capabilities"],
            json!({"tools": {"listChanged": false}})
        );
        assert_eq!(res["serverInfo"]["name"], "asof");
        assert!(r.headers.contains_key("mcp-session-id"));
    }
    // A version we do not speak gets our newest; the client decides whether to go on.
    let r = rpc(
        &t,
        "initialize",
        json!({"protocolVersion": "2024-11-05"}),
        None,
    )
    .await;
    assert_eq!(r.json["result"]["protocolVersion"], "2025-06-18");
    let r = rpc(&t, "initialize", json!({}), None).await;
    assert_eq!(r.json["error"]["code"], -32602);
}

#[tokio::test]
async fn sessions_are_signed_so_any_replica_accepts_them_and_a_forged_one_gets_404() {
    let t = setup().await;
    let init = rpc(
        &t,
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
        None,
    )
    .await;
    let sid = init.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let other = T::new(
        tempfile::tempdir().unwrap(),
        AppState::new(sample_corpus().await, t.store.clone())
            .await
            .unwrap(),
        t.store.clone(),
        t.key.clone(),
    );
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let r = post(&other, ping, &[("mcp-session-id", &sid)]).await;
    assert_eq!(
        (r.status, r.json["result"].clone()),
        (StatusCode::OK, json!({}))
    );
    let r = post(&t, ping, &[("mcp-session-id", "forged.token")]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // Without a session header the endpoint still answers (stateless clients, curl).
    assert_eq!(post(&t, ping, &[]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn an_unsupported_protocol_version_header_is_400() {
    let t = setup().await;
    let r = post(
        &t,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        &[("mcp-protocol-version", "1999-01-01")],
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json["error"]["code"], -32600);
}

#[tokio::test]
async fn notifications_and_client_responses_are_accepted_with_202_and_no_body() {
    let t = setup().await;
    let r = post(
        &t,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &[],
    )
    .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    assert!(r.bytes.is_empty());
    let r = post(&t, r#"{"jsonrpc":"2.0","id":3,"result":{}}"#, &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn malformed_messages_get_the_json_rpc_error_codes() {
    let t = setup().await;
    let r = post(&t, "{not json", &[]).await;
    assert_eq!(
        (r.status, r.json["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!(-32700))
    );
    assert_eq!(r.json["id"], Value::Null);
    for bad in [
        r#"[1]"#,
        r#"{"id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
    ] {
        let r = post(&t, bad, &[]).await;
        let err = if r.json.is_array() {
            r.json[0]["error"].clone()
        } else {
            r.json["error"].clone()
        };
        assert_eq!(err["code"], -32600, "{bad}: {}", r.json);
    }
    let r = rpc(&t, "resources/list", json!({}), None).await;
    assert_eq!(r.json["error"]["code"], -32601);
    assert_eq!(r.json["id"], 7);
    let r = rpc(
        &t,
        "tools/call",
        json!({"name": "svc_files", "arguments": {}}),
        None,
    )
    .await;
    assert_eq!(r.json["error"]["code"], -32602);
    let r = rpc(
        &t,
        "tools/call",
        json!({"name": "svc_meta", "arguments": [1]}),
        None,
    )
    .await;
    assert_eq!(r.json["error"]["code"], -32602);
    let plain = send(&t, Method::POST, "/mcp", None, &[]).await;
    assert_eq!(plain.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn a_batch_gets_one_reply_per_request_in_order() {
    let t = setup().await;
    let r = post(
        &t,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#,
        &[("mcp-protocol-version", "2025-03-26")],
    )
    .await;
    let replies = r.json.as_array().unwrap();
    assert_eq!(replies.len(), 2);
    assert_eq!(
        (replies[0]["id"].clone(), replies[1]["id"].clone()),
        (json!(1), json!("b"))
    );
}

// Found by schemathesis once the body was described exactly (issue 43): what the schema
// refuses the service refuses with 400, and what it admits is answered.
#[tokio::test]
async fn a_message_out_of_the_described_shape_is_refused_with_400() {
    let t = setup().await;
    let v = [("mcp-protocol-version", "2025-06-18")];
    for (body, why) in [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}"#,
            "extra",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
            "params",
        ),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, "id"),
        // Found by schemathesis (seeds 2033395496, 471117119, 1023550424) while the schema
        // admitted any integer: past 64 bits, now outside its minimum and maximum.
        (
            r#"{"jsonrpc":"2.0","id":7888093444437024840876032,"method":"ping"}"#,
            "id past u64",
        ),
        (
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}"#,
            "id of u64::MAX + 1",
        ),
        (
            r#"{"jsonrpc":"2.0","id":-9223372036854775809,"method":"ping"}"#,
            "id of i64::MIN - 1",
        ),
        (r#"{"jsonrpc":"2.0","id":1,"method":5}"#, "method"),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, "jsonrpc"),
    ] {
        let r = post(&t, body, &v).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{why}: {}", r.json);
        assert_eq!(r.json["error"]["code"], -32600, "{why}");
    }
    // A batch none of whose elements could be taken is refused as a whole; one with an
    // answerable element is answered element by element.
    let old = [("mcp-protocol-version", "2025-03-26")];
    let r = post(&t, "[null, 0]", &old).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    assert_eq!(r.json.as_array().unwrap().len(), 2);
    let r = post(
        &t,
        r#"[null, {"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        &old,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    // The bounds the description gives are admitted and echoed exactly.
    for id in ["18446744073709551615", "-9223372036854775808"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        let r = post(&t, &body, &v).await;
        assert_eq!(r.status, StatusCode::OK, "{id}: {}", r.json);
        assert_eq!(r.json["id"].to_string(), id);
    }
    // A whole number with a fraction is an integer id, as the description's schema says.
    let r = post(&t, r#"{"jsonrpc":"2.0","id":3.0,"method":"ping"}"#, &v).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    // Any method name is admitted: an unknown one is answered (-32601), not refused.
    let r = post(
        &t,
        r#"{"jsonrpc":"2.0","id":"x","method":"","params":{}}"#,
        &v,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["error"]["code"], -32601);
}

/// Batches exist only in protocol 2025-03-26, and there hold at most 32 messages: a body of
/// thousands of messages is refused whole, before any is answered or any key looked up.
/// Found by schemathesis (seeds 1926668885, 1477151449, 12787100): a batch whose every
/// message is invalid is answered 400 with an array of errors, one per message, where the
/// description promised one object.
#[tokio::test]
async fn a_batch_of_only_invalid_messages_is_400_with_one_error_each_as_described() {
    let t = setup().await;
    let r = post(&t, r#"[1, "two", {"x": 3}]"#, &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    let errors = r.json.as_array().expect("an array");
    assert_eq!(errors.len(), 3);
    assert!(
        errors.iter().all(|e| e["error"]["code"] == -32600),
        "{}",
        r.json
    );
    let doc = common::get(&t, "/v1/openapi.json").await.json;
    let schema =
        &doc["paths"]["/mcp"]["post"]["responses"]["400"]["content"]["application/json"]["schema"];
    let kinds: Vec<&Value> = schema["oneOf"]
        .as_array()
        .unwrap_or_else(|| panic!("{schema}"))
        .iter()
        .map(|s| &s["type"])
        .collect();
    assert_eq!(kinds, [&json!("object"), &json!("array")], "{schema}");
}

#[tokio::test]
async fn batches_are_refused_on_2025_06_18_and_capped_on_2025_03_26() {
    let t = setup().await;
    let batch = |n: usize| {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/list"}))
            .collect();
        Value::Array(items).to_string()
    };
    let bad_key = [
        ("mcp-protocol-version", "2025-06-18"),
        ("authorization", "Bearer svc_live_not_a_key"),
    ];
    let r = post(&t, &batch(2), &bad_key).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    assert_eq!(r.json["error"]["code"], -32600);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2025-06-18")
    );
    // Without the header the oldest protocol (2025-03-26) is in force: capped, not refused.
    let r = post(
        &t,
        &batch(5_000),
        &[("authorization", "Bearer svc_live_not_a_key")],
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 32")
    );
    let r = post(&t, &batch(32), &[("mcp-protocol-version", "2025-03-26")]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json.as_array().unwrap().len(), 32);
    // An unknown key in a batch: every message is refused as the rejected key it carries.
    let r = post(
        &t,
        &batch(3),
        &[
            ("mcp-protocol-version", "2025-03-26"),
            ("authorization", "Bearer svc_live_not_a_key"),
        ],
    )
    .await;
    let replies = r.json.as_array().unwrap();
    assert_eq!(replies.len(), 3);
    assert!(
        replies.iter().all(|m| m["error"]["code"] == -32001),
        "{}",
        r.json
    );
}

#[tokio::test]
async fn get_and_delete_on_the_endpoint_are_405_and_options_lists_post() {
    let t = setup().await;
    for m in [Method::GET, Method::DELETE] {
        let r = send(&t, m, "/mcp", None, &[]).await;
        assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers[header::ALLOW], "POST, OPTIONS");
    }
    let r = send(&t, Method::OPTIONS, "/mcp", None, &[]).await;
    assert_eq!(r.headers[header::ALLOW], "POST, OPTIONS");
}

#[tokio::test]
async fn tools_list_names_four_read_only_tools_with_rest_shaped_schemas() {
    let t = setup().await;
    let r = rpc(&t, "tools/list", json!({}), None).await;
    let tools = r.json["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["svc_query", "svc_diff", "svc_coverage", "svc_meta"]);
    for tool in tools {
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert!(tool["description"].as_str().unwrap().len() > 40);
    }
    let q = &tools[0]["inputSchema"];
    assert_eq!(q["required"], json!(["as_of"]));
    assert!(
        q["properties"]["as_of"]["pattern"]
            .as_str()
            .unwrap()
            .ends_with("Z$")
    );
    assert_eq!(
        q["properties"]["visible_by"]["enum"],
        json!(["published_at", "available_at", "committed_at"])
    );
    assert_eq!(q["properties"]["limit"]["maximum"], 1000);
}

#[tokio::test]
async fn a_tool_result_carries_the_same_envelope_as_the_rest_route() {
    let t = setup().await;
    let args = json!({"ticker": "TSLA", "as_of": "2026-01-29T12:00:00Z", "limit": 5});
    let tool = call(&t, "svc_query", args, Some(&t.key)).await;
    assert_eq!(tool["result"]["isError"], false);
    let rest = get(
        &t,
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=5",
    )
    .await;
    assert_eq!(
        without_request_id(envelope(&tool)),
        without_request_id(rest.json.clone())
    );
    assert_eq!(
        without_request_id(tool["result"]["structuredContent"].clone()),
        without_request_id(rest.json)
    );

    let diff = call(
        &t,
        "svc_diff",
        json!({"cik": "789019", "as_of_start": "2026-01-27T00:00:00Z", "as_of_end": "2026-02-03T00:00:00Z"}),
        Some(&t.key),
    )
    .await;
    let rest = get(
        &t,
        "/v1/news/diff?cik=789019&as_of_start=2026-01-27T00:00:00Z&as_of_end=2026-02-03T00:00:00Z",
    )
    .await;
    assert_eq!(
        without_request_id(envelope(&diff)),
        without_request_id(rest.json)
    );

    let cov = call(
        &t,
        "svc_coverage",
        json!({"date": "2026-01-29", "as_of": "2026-02-01T00:00:00Z"}),
        Some(&t.key),
    )
    .await;
    let rest = get(
        &t,
        "/v1/coverage?date=2026-01-29&as_of=2026-02-01T00:00:00Z",
    )
    .await;
    assert_eq!(
        without_request_id(envelope(&cov)),
        without_request_id(rest.json)
    );

    let meta = call(&t, "svc_meta", json!({}), Some(&t.key)).await;
    let rest = send(&t, Method::GET, "/v1/meta", None, &[]).await;
    assert_eq!(
        without_request_id(envelope(&meta)),
        without_request_id(rest.json)
    );
}

#[tokio::test]
async fn without_a_key_the_tools_answer_from_the_sample_tier() {
    let t = setup().await;
    let tool = call(
        &t,
        "svc_query",
        json!({"ticker": "TSLA", "as_of": "2026-02-06T23:59:59Z"}),
        None,
    )
    .await;
    assert_eq!(tool["result"]["isError"], false, "{tool}");
    let env = envelope(&tool);
    assert_eq!(env["sample"], true);
    let rest = send(
        &t,
        Method::GET,
        "/v1/sample/news?example=tesla&as_of=2026-02-06T23:59:59Z",
        None,
        &[],
    )
    .await;
    assert_eq!(without_request_id(env), without_request_id(rest.json));
    for (tool, args) in [
        (
            "svc_diff",
            json!({"ticker": "MSFT", "as_of_start": "2026-01-27T00:00:00Z", "as_of_end": "2026-02-03T00:00:00Z"}),
        ),
        ("svc_coverage", json!({"example": "siemens-energy"})),
    ] {
        let r = call(&t, tool, args, None).await;
        assert_eq!(r["result"]["isError"], false, "{r}");
        assert_eq!(envelope(&r)["sample"], true);
    }
    // A company the sample does not hold is refused by name, as on the REST route.
    let r = call(
        &t,
        "svc_query",
        json!({"ticker": "AAPL", "as_of": "2026-02-06T23:59:59Z"}),
        None,
    )
    .await;
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(envelope(&r)["error"]["param"], "example");
}

#[tokio::test]
async fn a_bare_date_is_an_is_error_result_with_the_invalid_clock_envelope() {
    let t = setup().await;
    for key in [Some(t.key.as_str()), None] {
        let r = call(
            &t,
            "svc_query",
            json!({"ticker": "TSLA", "as_of": "2026-01-29"}),
            key,
        )
        .await;
        assert_eq!(r["result"]["isError"], true);
        let env = envelope(&r);
        assert_eq!(env["error"]["code"], "invalid_clock");
        assert_eq!(env["error"]["param"], "as_of");
        assert_eq!(env["count"], Value::Null);
    }
    // With a key, a missing as_of is refused exactly as the REST route refuses it.
    let r = call(&t, "svc_query", json!({"ticker": "TSLA"}), Some(&t.key)).await;
    let rest = get(&t, "/v1/news?ticker=TSLA").await;
    assert_eq!(envelope(&r)["error"], rest.json["error"]);
}

#[tokio::test]
async fn a_rejected_key_is_json_rpc_error_32001() {
    let t = setup().await;
    let bogus = "svc_live_0000000000000000000000000000000000000000000000000000000000000000";
    for (method, params) in [
        ("initialize", json!({"protocolVersion": "2025-06-18"})),
        ("tools/list", json!({})),
        ("tools/call", json!({"name": "svc_meta", "arguments": {}})),
        (
            "tools/call",
            json!({"name": "svc_query", "arguments": {"as_of": "2026-01-29T12:00:00Z"}}),
        ),
    ] {
        let r = rpc(&t, method, params, Some(bogus)).await;
        assert_eq!(r.json["error"]["code"], -32001, "{method}: {}", r.json);
        assert_eq!(r.json["error"]["message"], "unknown API key");
    }
}

/// Waits, when the current one-minute rate window is more than `within_s` seconds old, for
/// the next one to begin.
async fn early_in_a_window(within_s: i64) {
    let into = asof_engine::Instant::now().micros().rem_euclid(60_000_000);
    if into > within_s * 1_000_000 {
        tokio::time::sleep(std::time::Duration::from_micros(
            (60_000_000 - into) as u64 + 50_000,
        ))
        .await;
    }
}

#[tokio::test]
async fn each_tool_call_counts_once_against_the_keys_rate_limit() {
    let t = setup().await;
    let coverage_call = || {
        call(
            &t,
            "svc_coverage",
            json!({"date": "2026-01-29", "as_of": "2026-02-01T00:00:00Z"}),
            Some(&t.key),
        )
    };
    // The counts below must fall in one fixed one-minute window: start early in one (the
    // test takes seconds in a debug build; a window rolling over mid-test reset the count).
    early_in_a_window(30).await;
    let before = get(&t, "/v1/coverage?date=2026-01-29").await;
    let left: i64 = before.headers["x-ratelimit-remaining"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    for _ in 0..3 {
        coverage_call().await;
    }
    let after = get(&t, "/v1/coverage?date=2026-01-29").await;
    let now: i64 = after.headers["x-ratelimit-remaining"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(left - now, 4, "three tool calls and one REST call");
    // Spend the rest of the window on the key's cheapest route (`/v1/me`, one store read: tool
    // calls of the coverage tool took over a second each in a debug build on a loaded 2-core
    // machine, and 60 of them outlasted two windows): the next tool call is refused with the
    // 429 envelope. Should the spending still outlast the window, the window must have rolled
    // over (its reset moved on) and the spending starts again at the new window's start.
    let reset = |r: &Res| r.headers["x-ratelimit-reset"].to_str().unwrap().to_owned();
    let mut remaining = now;
    for attempt in 0..3 {
        if attempt > 0 {
            // The last attempt's window rolled over: start the next one at a window's start.
            early_in_a_window(5).await;
            let probe = get(&t, "/v1/coverage?date=2026-01-29").await;
            remaining = probe.headers["x-ratelimit-remaining"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
        }
        let window = reset(&get(&t, "/v1/coverage?date=2026-01-29").await);
        remaining -= 1;
        for _ in 0..remaining {
            let spent = get(&t, "/v1/me").await;
            assert_eq!(spent.status, StatusCode::OK, "{}", spent.json);
        }
        let r = coverage_call().await;
        if r["result"]["isError"] == true {
            assert_eq!(envelope(&r)["error"]["code"], "rate_limited");
            return;
        }
        let probe = get(&t, "/v1/coverage?date=2026-01-29").await;
        assert_ne!(
            reset(&probe),
            window,
            "attempt {attempt}: the window's last call was let through within the window"
        );
    }
    panic!("three windows rolled over while spending one: the machine is too slow for this test");
}

#[tokio::test]
async fn tool_calls_are_never_receipted_even_with_the_audit_header() {
    let t = setup().await;
    let desk = key_for(&t.store, "desk@example.com", Plan::Desk).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "svc_query", "arguments": {"ticker": "TSLA", "as_of": "2026-01-29T12:00:00Z"}}})
    .to_string();
    let auth = format!("Bearer {desk}");
    let r = post(
        &t,
        &body,
        &[("authorization", &auth), ("x-service-audit", "on")],
    )
    .await;
    assert_eq!(r.json["result"]["isError"], false);
    assert!(t.state.audit().drain(Duration::from_secs(10)).await);
    let log = send(&t, Method::GET, "/v1/audit-log", Some(&desk), &[]).await;
    assert_eq!(log.json["count"], 0);
    let s = t.state.audit().stats();
    assert_eq!((s.requested, s.out_of_scope, s.enqueued), (1, 1, 0));
}

#[tokio::test]
async fn tool_schemas_use_the_same_vocabularies_as_the_rest_description() {
    let t = setup().await;
    let r = rpc(&t, "tools/list", json!({}), None).await;
    let tools = r.json["result"]["tools"].as_array().unwrap();
    let doc = send(&t, Method::GET, "/v1/openapi.json", None, &[])
        .await
        .json;
    let rest_param = |path: &str, name: &str| {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["schema"]
            .clone()
    };
    for (tool, path) in [("svc_query", "/v1/news"), ("svc_diff", "/v1/news/diff")] {
        let s = &tools.iter().find(|x| x["name"] == tool).unwrap()["inputSchema"];
        for name in ["visible_by", "lane"] {
            assert_eq!(
                s["properties"][name]["enum"],
                rest_param(path, name)["enum"],
                "{tool}.{name}"
            );
        }
        for clock in s["properties"].as_object().unwrap().keys() {
            if clock.starts_with("as_of") {
                assert_eq!(
                    s["properties"][clock]["pattern"],
                    asof_engine::CLOCK_PATTERN,
                    "{tool}.{clock}"
                );
            }
        }
    }
    let diff = &tools[1]["inputSchema"];
    assert_eq!(diff["required"], json!(["as_of_start", "as_of_end"]));
    let cov = &tools[2]["inputSchema"];
    assert_eq!(cov["properties"]["limit"]["maximum"], 1000);
    assert!(cov["properties"]["date"]["pattern"].is_string());
}

#[tokio::test]
async fn x_forwarded_for_is_forwarded_so_the_sample_tier_counts_the_callers_address() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::sqlite_store(dir.path()).await;
    let opts = asof_server::Options {
        trusted_proxies: common::loopback_proxy(),
        ..asof_server::Options::default()
    };
    let t = common::setup_with(dir, store, opts).await;
    let remaining = |r: &Res| -> i64 {
        r.headers["x-ratelimit-remaining"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let meta = |ip: &'static str| {
        let t = &t;
        async move { send(t, Method::GET, "/v1/meta", None, &[("x-forwarded-for", ip)]).await }
    };
    // When the address's window ends (epoch seconds).
    let window_end = |r: &Res| -> u64 {
        r.headers["x-ratelimit-reset"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let first = meta("203.0.113.7").await;
    let (a0, end0) = (remaining(&first), window_end(&first));
    let other = meta("198.51.100.9").await;
    let (b0, bend0) = (remaining(&other), window_end(&other));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "svc_meta", "arguments": {}}})
    .to_string();
    let r = post(
        &t,
        &body,
        &[
            ("mcp-protocol-version", "2025-06-18"),
            ("x-forwarded-for", "203.0.113.7"),
        ],
    )
    .await;
    assert_eq!(r.json["result"]["isError"], false, "{}", r.json);
    let last = meta("203.0.113.7").await;
    let (a1, end1) = (remaining(&last), window_end(&last));
    let other = meta("198.51.100.9").await;
    let (b1, bend1) = (remaining(&other), window_end(&other));
    // A window boundary in between resets the counts; then nothing can be compared (the
    // window's end moves: tell it apart from an unchanged count, which is the fault).
    if end0 == end1 && bend0 == bend1 {
        assert_eq!(
            a0 - a1,
            2,
            "the tool call counted once against its caller's address"
        );
        assert_eq!(b0 - b1, 1, "and not against another address");
    }
}

#[tokio::test]
async fn keyless_svc_meta_is_watermarked_sample_and_keyed_svc_coverage_requires_as_of() {
    let t = setup().await;
    let meta = call(&t, "svc_meta", json!({}), None).await;
    assert_eq!(meta["result"]["isError"], false, "{meta}");
    assert_eq!(
        envelope(&meta)["sample"],
        true,
        "the keyless tier is the sample"
    );
    let keyed = call(&t, "svc_meta", json!({}), Some(&t.key)).await;
    assert_eq!(envelope(&keyed)["sample"], Value::Null, "{keyed}");

    // With a key the tool answers "as knowable at as_of": an answer without a cut is not one.
    let r = call(
        &t,
        "svc_coverage",
        json!({"source": "sec.edgar"}),
        Some(&t.key),
    )
    .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let env = envelope(&r);
    assert_eq!(env["error"]["code"], "invalid_request");
    assert_eq!(env["error"]["param"], "as_of");
    assert_eq!(env["count"], Value::Null);
    let r = call(
        &t,
        "svc_coverage",
        json!({"source": "sec.edgar", "as_of": "2026-01-29T12:00:00Z", "limit": 2}),
        Some(&t.key),
    )
    .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(envelope(&r)["count"], 2);
}
