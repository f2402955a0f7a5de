//! Every query parameter of every GET route, fuzzed through the router (oneshot): whatever a
//! client puts in a query string or a path segment, the answer is a response the contract
//! names (never a 500, never a panic), and every refusal is the error envelope.
//!
//! The routes and their parameters are read from the service's own OpenAPI description, so a
//! new route or parameter is fuzzed without touching this file. Cases default to 150 (about a minute);
//! `ASOF_FUZZ_CASES=20000` runs a long search.

mod common;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use asof_server::plan::Plan;
use axum::http::Method;
use common::{T, key_for, send, setup};
use proptest::prelude::*;
use serde_json::Value;

/// One GET operation: its path template, and its parameters by location.
#[derive(Debug, Clone)]
struct Op {
    path: String,
    path_params: Vec<String>,
    query: Vec<(String, Vec<String>)>,
}

struct World {
    rt: tokio::runtime::Runtime,
    t: T,
    key: String,
    ops: Vec<Op>,
}

static WORLD: LazyLock<World> = LazyLock::new(|| {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (t, key, ops) = rt.block_on(async {
        let t = setup().await;
        let key = key_for(&t.store, "fuzz@example.com", Plan::Desk).await;
        let doc = send(&t, Method::GET, "/v1/openapi.json", None, &[])
            .await
            .json;
        (t, key, ops_of(&doc))
    });
    assert!(
        ops.len() > 15,
        "the description lists the GET routes: {ops:?}"
    );
    World { rt, t, key, ops }
});

/// The GET operations of the description, with each parameter's enum values (if any).
fn ops_of(doc: &Value) -> Vec<Op> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(get) = item.get("get") else { continue };
        let mut path_params = Vec::new();
        let mut query = Vec::new();
        for p in get["parameters"].as_array().into_iter().flatten() {
            if p["in"] == "path" {
                path_params.push(p["name"].as_str().unwrap().to_owned());
            }
        }
        for (name, schema) in common::query_parameters(get) {
            let values: Vec<String> = schema["enum"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            query.push((name, values));
        }
        out.push(Op {
            path: path.clone(),
            path_params,
            query,
        });
    }
    out
}

/// Values worth trying anywhere: valid ones of every kind the routes take, edge cases, and
/// garbage.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("2026-01-28T00:00:00Z".to_owned()),
        Just("2026-01-28T23:59:59.999999999Z".to_owned()),
        Just("2026-01-28".to_owned()),
        Just("2026-01-28T00:00:00+05:00".to_owned()),
        Just("0000-01-01T00:00:00Z".to_owned()),
        Just("9999-12-31T23:59:59Z".to_owned()),
        Just("-1".to_owned()),
        Just("0".to_owned()),
        Just("1000".to_owned()),
        Just("1001".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("1318605".to_owned()),
        Just("0001318605".to_owned()),
        Just("TSLA".to_owned()),
        Just("sec.edgar".to_owned()),
        Just("us.ofac.sdn".to_owned()),
        Just("certified_pit".to_owned()),
        Just("committed_at".to_owned()),
        Just(String::new()),
        Just("%".to_owned()),
        Just("%ZZ".to_owned()),
        Just("a".repeat(3000)),
        "[a-zA-Z0-9._:-]{1,24}",
        "\\PC{0,24}",
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    op: prop::sample::Index,
    path_values: Vec<String>,
    /// (which parameter, use an enum value, the value) triples.
    params: Vec<(prop::sample::Index, bool, prop::sample::Index, String)>,
    unknown: Option<String>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<prop::sample::Index>(),
        prop::collection::vec(value(), 3),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                any::<bool>(),
                any::<prop::sample::Index>(),
                value(),
            ),
            0..6,
        ),
        prop::option::weighted(0.1, "[a-z_]{1,10}"),
    )
        .prop_map(|(op, path_values, params, unknown)| Case {
            op,
            path_values,
            params,
            unknown,
        })
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The request a case makes: the path with its parameters filled, and the query.
fn uri_of(op: &Op, c: &Case) -> String {
    let mut path = op.path.clone();
    for (i, name) in op.path_params.iter().enumerate() {
        let v = &c.path_values[i % c.path_values.len()];
        // A path segment that still routes here: never empty, '/' encoded.
        let seg = if v.is_empty() { "x".to_owned() } else { enc(v) };
        path = path.replace(&format!("{{{name}}}"), &seg);
    }
    let mut pairs: Vec<String> = Vec::new();
    if !op.query.is_empty() {
        for (which, use_enum, pick, v) in &c.params {
            let (name, values) = &op.query[which.index(op.query.len())];
            let v = if *use_enum && !values.is_empty() {
                values[pick.index(values.len())].clone()
            } else {
                v.clone()
            };
            pairs.push(format!("{}={}", enc(name), enc(&v)));
        }
    }
    if let Some(u) = &c.unknown {
        pairs.push(format!("{u}=1"));
    }
    if pairs.is_empty() {
        path
    } else {
        format!("{path}?{}", pairs.join("&"))
    }
}

fn cases() -> u32 {
    std::env::var("ASOF_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_query_string_on_any_get_route_is_answered_never_a_500(c in case()) {
        let w = &*WORLD;
        let op = &w.ops[c.op.index(w.ops.len())];
        let uri = uri_of(op, &c);
        let r = w.rt.block_on(send(&w.t, Method::GET, &uri, Some(&w.key), &[]));
        let status = r.status.as_u16();
        prop_assert!(status != 500, "{uri}: 500 {}", r.json);
        prop_assert!(
            status < 500 || status == 503,
            "{uri}: {status} {}",
            r.json
        );
        let json = r
            .headers
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        if status >= 400 && json && op.path.starts_with("/v1/") {
            // A hole is `coverage_missing`, every other refusal `error`.
            let expected = if r.json["error"]["code"] == "coverage_missing" {
                "coverage_missing"
            } else {
                "error"
            };
            prop_assert_eq!(&r.json["status"], expected, "{}: {}", uri, r.json);
            prop_assert!(r.json["error"]["code"].is_string(), "{}: {}", uri, r.json);
            prop_assert_eq!(&r.json["count"], &Value::Null, "{}", uri);
        }
        if status == 503 {
            let code = r.json["error"]["code"].as_str().unwrap_or_default().to_owned();
            let allowed = [
                "billing_not_configured", "sign_in_not_configured", "connector_not_configured",
                "overloaded", "timeout", "mail_unavailable",
            ];
            prop_assert!(allowed.contains(&code.as_str()), "{}: 503 {}", uri, r.json);
        }
    }
}

#[test]
fn the_fuzzer_reaches_every_get_route_of_the_description() {
    let w = &*WORLD;
    let by_path: BTreeMap<&str, usize> = w
        .ops
        .iter()
        .map(|o| (o.path.as_str(), o.query.len()))
        .collect();
    for p in ["/v1/news", "/v1/news/diff", "/v1/coverage", "/v1/files"] {
        assert!(by_path.get(p).is_some_and(|n| *n > 0), "{p}: {by_path:?}");
    }
}
