//! Running the real binary as an operator would: `/ready` before the corpus is loaded, while
//! draining and when loaded; the metrics listener (route entries as labels, closed label sets
//! whatever 10,000 random requests send, loopback only); JSON logs that parse line by line and
//! never carry a key, cookie or vendor key, even at trace level. (Prometheus's own `promtool`
//! judges the exposition in `tests/ops/test_ops.py`.)

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::Value;

use common::spawn::{Guard, asof, http, keys_create, request, start_logging};

fn db(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}/state.db", dir.path().display())
}

/// The address after `prefix` in the first kept line that has it.
fn address_after(lines: &[String], prefix: &str) -> Option<String> {
    lines.iter().find_map(|l| {
        let at = l.find(prefix)?;
        let rest = &l[at + prefix.len()..];
        Some(
            rest.split(|c: char| c == '/' || c == '"' || c == ';' || c.is_whitespace())
                .next()
                .unwrap()
                .to_owned(),
        )
    })
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)))
}

#[test]
fn every_request_is_answered_not_ready_while_the_state_store_does_not_answer_at_startup() {
    // A "database" that takes connections and never says a word: loading the state store
    // waits on it, so the replica stays in its loading phase for the whole test.
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let mute_addr = mute.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in mute.incoming().take(4).flatten() {
            conns.push(c);
        }
        std::thread::sleep(Duration::from_secs(60));
    });
    let mut child = asof()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &format!("postgres://asof@{mute_addr}/asof"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let _guard = Guard(child);
    let addr = loop {
        let line = lines.next().expect("the server exited").unwrap();
        if let Some(a) = address_after(&[line], "asof bound to http://") {
            break a;
        }
    };
    for path in [
        "/ready",
        "/health",
        "/v1/news?ticker=TSLA&as_of=2026-01-01T00:00:00Z",
    ] {
        let (status, head, body) = http(&addr, path, &[("X-Request-Id", "not-a-uuid")]);
        assert_eq!(status, 503, "{path}: {head}");
        let v = json(&body);
        assert_eq!(v["error"]["code"], "not_ready", "{path}");
        assert!(v["error"]["message"].as_str().unwrap().contains("loading"));
        assert_eq!(v["corpus_version"], "", "no version is served yet");
        assert!(v["count"].is_null());
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("retry-after: 1"), "{head}");
        assert!(lower.contains("x-request-id: "), "{head}");
    }
    drop(held);
}

#[test]
fn ready_answers_when_loaded_and_turns_503_on_sigterm_while_other_routes_still_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr, kept) = start_logging(&db(&dir), "info", &["--drain-delay", "3"]);
    let mut server = Guard(child);
    let (status, _, body) = http(&addr, "/ready", &[]);
    assert_eq!(status, 200);
    let v = json(&body);
    assert_eq!(v["results"][0]["ready"], true);
    assert_eq!(v["results"][0]["state"], "sqlite");
    assert!(v["corpus_version"].as_str().unwrap().starts_with("sha256:"));
    let signalled = Instant::now();
    server.sigterm();
    // `/ready` turns at once; everything else is still answered until the drain delay ends.
    let mut turned = None;
    while signalled.elapsed() < Duration::from_secs(2) {
        let (status, _, body) = http(&addr, "/ready", &[]);
        if status == 503 {
            let v = json(&body);
            assert_eq!(v["error"]["code"], "not_ready");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("shutting down")
            );
            turned = Some(signalled.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let turned = turned.expect("/ready still 200 two seconds after SIGTERM");
    assert!(
        turned < Duration::from_millis(1500),
        "turned after {turned:?}"
    );
    let (status, _, _) = http(&addr, "/health", &[]);
    assert_eq!(status, 200, "a draining replica still serves");
    let (status, _, _) = http(&addr, "/v1/meta", &[]);
    assert_eq!(status, 200, "a draining replica still serves");
    let exit = server.0.wait().unwrap();
    assert!(exit.success());
    let took = signalled.elapsed();
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(10),
        "exited {took:?} after SIGTERM with a 3 s drain delay"
    );
    let logs = kept.lock().unwrap().join("\n");
    assert!(logs.contains("draining"), "{logs}");
}

#[test]
fn the_metrics_listener_refuses_a_public_address() {
    let dir = tempfile::tempdir().unwrap();
    let out = asof()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &db(&dir),
        ])
        .args(["--metrics-listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("loopback"), "{err}");
}

/// `name{labels} value` lines of an exposition, as (name, labels).
fn series(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name_labels, _) = l.rsplit_once(' ').unwrap();
            match name_labels.split_once('{') {
                None => (name_labels.to_owned(), BTreeMap::new()),
                Some((name, rest)) => {
                    let rest = rest.strip_suffix('}').unwrap();
                    let mut labels = BTreeMap::new();
                    // Label values here never hold `,` or `"` (checked below by the sets).
                    for pair in rest.split(',').filter(|p| !p.is_empty()) {
                        let (k, v) = pair.split_once('=').unwrap();
                        labels.insert(k.to_owned(), v.trim_matches('"').to_owned());
                    }
                    (name.to_owned(), labels)
                }
            }
        })
        .collect()
}

fn scrape(metrics: &str) -> String {
    let (status, _, body) = request(metrics, "GET", "/metrics", &[]);
    assert_eq!(status, 200);
    String::from_utf8(body).unwrap()
}

#[test]
fn metrics_name_route_entries_and_closed_label_sets_whatever_ten_thousand_random_requests_send() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir);
    let desk = keys_create(&db, "desk@example.com", "desk");
    let researcher = keys_create(&db, "r@example.com", "researcher");
    let (child, addr, kept) = start_logging(&db, "error", &["--metrics-listen", "127.0.0.1:0"]);
    let _server = Guard(child);
    let metrics = address_after(&kept.lock().unwrap(), "asof metrics on http://")
        .expect("the metrics address is announced");
    let bearer = |k: &str| format!("Bearer {k}");
    let (d, r) = (bearer(&desk), bearer(&researcher));
    let news = "/v1/news?ticker=TSLA&as_of=2026-01-01T00:00:00Z";
    for (method, path, auth, want) in [
        ("GET", news, Some(d.as_str()), 200),
        // Not by filer: the walk, whose partitions and rows are counted.
        (
            "GET",
            "/v1/news?as_of=2026-01-29T12:00:00Z&limit=5",
            Some(&d),
            200,
        ),
        (
            "GET",
            "/v1/mapping/cik/1318605?as_of=2026-01-01T00:00:00Z",
            Some(&d),
            200,
        ),
        ("GET", news, None, 401),
        ("GET", "/v1/files?source=sec.edgar", Some(&r), 403),
        ("GET", "/health", None, 200),
        ("GET", "/ready", None, 200),
        ("GET", "/v1/openapi.json", None, 200),
        ("GET", "/no/such/route", None, 404),
        ("DELETE", "/health", None, 405),
    ] {
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", *a)).collect();
        let (status, head, _) = request(&addr, method, path, &headers);
        assert_eq!(status, want, "{method} {path}: {head}");
    }
    let text = scrape(&metrics);
    let all = series(&text);
    let has = |name: &str, want: &[(&str, &str)]| {
        all.iter().any(|(n, l)| {
            n == name
                && want
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
    };
    assert!(
        has(
            "asof_http_requests_total",
            &[
                ("route", "/v1/news"),
                ("method", "GET"),
                ("status_class", "2xx"),
                ("plan", "desk")
            ]
        ),
        "{text}"
    );
    assert!(
        has(
            "asof_http_requests_total",
            &[("route", "/v1/mapping/cik/{cik}"), ("status_class", "2xx")]
        ),
        "{text}"
    );
    assert!(
        has(
            "asof_http_requests_total",
            &[
                ("route", "unmatched"),
                ("status_class", "4xx"),
                ("plan", "none")
            ]
        ),
        "{text}"
    );
    assert!(
        has(
            "asof_http_request_duration_seconds_bucket",
            &[("route", "/v1/news"), ("le", "0.0001")]
        ),
        "{text}"
    );
    assert!(
        has("asof_http_errors_total", &[("code", "unauthorized")]),
        "{text}"
    );
    assert!(
        has("asof_http_errors_total", &[("code", "method_not_allowed")]),
        "{text}"
    );
    assert!(
        has("asof_http_refusals_total", &[("reason", "plan")]),
        "{text}"
    );
    assert!(
        has("asof_http_refusals_total", &[("reason", "unauthenticated")]),
        "{text}"
    );
    assert!(has("asof_corpus_info", &[]), "{text}");
    assert!(has("asof_corpus_created_timestamp_seconds", &[]), "{text}");
    assert!(has("asof_audit_lost_total", &[]), "{text}");
    assert!(has("asof_scan_queue_depth", &[]), "{text}");
    assert!(has("asof_scan_partitions_read_total", &[]), "{text}");
    assert!(has("asof_scan_rows_read_total", &[]), "{text}");
    assert!(has("asof_streams_open", &[]), "{text}");
    assert!(has("asof_ready", &[]), "{text}");
    assert!(
        has(
            "asof_state_operation_duration_seconds_count",
            &[("operation", "key_by_hash")]
        ),
        "{text}"
    );
    assert!(
        !text.contains(&desk) && !text.contains(&researcher),
        "no key in the exposition"
    );
    let before = all.len();

    // 10,000 requests a scanner or a fuzzer might send: random paths and segments, parameters,
    // keys, and methods (invented ones too), each value unique.
    let seed: u64 = rand::rng().random();
    println!("random requests: seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let shapes = [
        "/v1/news",
        "/v1/news/diff",
        "/v1/news/{x}",
        "/v1/mapping/cik/{x}",
        "/v1/mapping/ticker/{x}",
        "/v1/coverage",
        "/v1/sample/news",
        "/v1/{x}",
        "/{x}/{x}",
        "/health",
        "/ready",
        "/v1/files/{x}",
        "/v1/keys/{x}",
        "/mcp",
    ];
    let methods = [
        "GET", "GET", "GET", "HEAD", "POST", "DELETE", "OPTIONS", "PUT", "BREW", "X-FUZZ",
    ];
    let mut markers = Vec::new();
    for i in 0..10_000 {
        let marker = format!("zq{i}x{}", rng.random::<u32>());
        let path = shapes[rng.random_range(0..shapes.len())].replace("{x}", &marker);
        let query = match rng.random_range(0..4) {
            0 => String::new(),
            1 => format!("?as_of=2026-01-01T00:00:00Z&{marker}=1"),
            2 => format!(
                "?ticker={marker}&as_of=2026-01-0{}T00:00:00Z",
                rng.random_range(1..9)
            ),
            _ => format!(
                "?cik={}&as_of=2026-01-01T00:00:00Z",
                rng.random_range(0..99_999_999u64)
            ),
        };
        let key = match rng.random_range(0..3) {
            0 => None,
            1 => Some(format!("Bearer svc_live_{marker}")),
            _ => Some(d.clone()),
        };
        let method = methods[rng.random_range(0..methods.len())];
        let headers: Vec<(&str, &str)> =
            key.iter().map(|k| ("Authorization", k.as_str())).collect();
        let (status, head, _) = request(&addr, method, &format!("{path}{query}"), &headers);
        assert!(
            status < 500 || status == 503,
            "{method} {path}{query}: {head}"
        );
        if i % 1000 == 0 {
            markers.push(marker);
        }
    }
    let text = scrape(&metrics);
    let after = series(&text);
    let routes: BTreeSet<String> = {
        let (_, _, body) = http(&addr, "/v1/openapi.json", &[]);
        json(&body)["paths"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let allowed = |k: &str, v: &str| -> bool {
        match k {
            "route" => v == "unmatched" || routes.contains(v),
            "method" => [
                "GET", "HEAD", "POST", "DELETE", "OPTIONS", "PUT", "PATCH", "other",
            ]
            .contains(&v),
            "status_class" => ["1xx", "2xx", "3xx", "4xx", "5xx"].contains(&v),
            "plan" => ["none", "researcher", "power", "desk"].contains(&v),
            "code" | "reason" | "operation" | "outcome" | "tool" => {
                !v.is_empty() && v.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            }
            "corpus_version" => v.starts_with("sha256:") && v.len() == 71,
            "le" | "quantile" => v.parse::<f64>().is_ok() || v == "+Inf",
            _ => false,
        }
    };
    for (name, labels) in &after {
        for (k, v) in labels {
            assert!(
                allowed(k, v),
                "{name}: label {k}={v:?} is not from a closed set (seed {seed})"
            );
        }
    }
    for m in &markers {
        assert!(
            !text.contains(m.as_str()),
            "a request's value {m} reached the exposition (seed {seed})"
        );
    }
    // Every label is from a closed set, so the series are bounded by construction (a route
    // entry and method seen for the first time adds its histogram's 20 series): far fewer than
    // the 10,000 distinct requests.
    println!(
        "{before} series before, {} after 10,000 random requests",
        after.len()
    );
    assert!(
        after.len() < 2_000,
        "{before} series before, {} after 10,000 random requests (seed {seed})",
        after.len()
    );
}

#[test]
fn json_logs_parse_line_by_line_and_never_carry_a_key_cookie_or_vendor_key_even_at_trace() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir);
    let key = keys_create(&db, "logs@example.com", "desk");
    let mut child = asof()
        .env("ASOF_LOG", "trace")
        .args([
            "--log-format",
            "json",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &db,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut server = Guard(child);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l.clone());
            all.push(l);
        }
        all
    });
    let addr = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server announces its address");
        if let Some(a) = address_after(&[line], "asof listening on http://") {
            break a;
        }
    };
    let cookie = "asof_session=cookie-secret-7f3a9c; asof_flow=flow-secret-22b1";
    let vendor = "vendor-secret-91d0e7";
    let auth = format!("Bearer {key}");
    let news = "/v1/news?ticker=TSLA&as_of=2026-01-01T00:00:00Z&query_secret_5e1=1";
    request(
        &addr,
        "GET",
        news,
        &[("Authorization", &auth), ("X-Service-Audit", "on")],
    );
    request(
        &addr,
        "GET",
        "/v1/news?ticker=TSLA&as_of=2026-01-01T00:00:00Z",
        &[("Authorization", &auth)],
    );
    request(&addr, "GET", "/v1/keys", &[("Cookie", cookie)]);
    request(
        &addr,
        "GET",
        "/v1/connectors/vendor_a/bars?ticker=TSLA&start=2026-01-02&end=2026-01-05",
        &[("Authorization", &auth), ("X-Vendor-Key", vendor)],
    );
    request(
        &addr,
        "GET",
        "/v1/news?ticker=TSLA",
        &[("Authorization", "Bearer svc_live_wrong-secret-0c4d")],
    );
    server.sigterm();
    assert!(server.0.wait().unwrap().success());
    let lines = reader.join().unwrap();
    assert!(
        lines.len() > 20,
        "trace level logs plenty: {} lines",
        lines.len()
    );
    let mut access = Vec::new();
    for l in &lines {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(v["timestamp"].is_string() && v["level"].is_string(), "{l}");
        assert!(
            v.get("message").is_some() || v.get("fields").is_some() || v.get("target").is_some(),
            "{l}"
        );
        if v["target"] == "asof::access" {
            access.push(v);
        }
        for secret in [
            key.as_str(),
            "cookie-secret-7f3a9c",
            "flow-secret-22b1",
            vendor,
            "wrong-secret-0c4d",
            "query_secret_5e1",
        ] {
            assert!(!l.contains(secret), "a secret reached the logs: {l}");
        }
    }
    let keyed = access
        .iter()
        .find(|v| v["route"] == "/v1/news" && v["status"] == 200)
        .unwrap_or_else(|| panic!("an access line of the keyed news page: {access:?}"));
    assert!(keyed["key_id"].as_str().is_some_and(|k| !k.is_empty()));
    assert!(
        keyed["corpus_version"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(keyed["latency_ms"].as_f64().is_some());
    assert_eq!(keyed["method"], "GET");
    let id = keyed["span"]["request_id"]
        .as_str()
        .expect("the request id from the span");
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{keyed}");
}

/// The store's key lookups so far, from the service's own metrics.
fn key_lookups(exposition: &str) -> u64 {
    exposition
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "asof_state_operation_duration_seconds_count{operation=\"key_by_hash\"} ",
            )
        })
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Issue 63, point 1, on the real binary: 5,000 made-up keys from one address cost at most a
/// few dozen state-store lookups (read from the service's own `asof_state_*` metrics), and the
/// address is then answered `429` with `Retry-After`; a real key still works from it.
#[test]
fn five_thousand_made_up_keys_from_one_address_cost_a_few_dozen_store_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir);
    let good = keys_create(&db, "real@example.com", "researcher");
    let (child, addr, kept) = start_logging(&db, "error", &["--metrics-listen", "127.0.0.1:0"]);
    let _server = Guard(child);
    let metrics = address_after(&kept.lock().unwrap(), "asof metrics on http://")
        .expect("the metrics address is announced");
    let news = "/v1/news?ticker=TSLA&as_of=2026-01-01T00:00:00Z&limit=1";
    let auth = |k: &str| format!("Bearer {k}");
    let (status, _, _) = http(&addr, news, &[("Authorization", &auth(&good))]);
    assert_eq!(status, 200);
    let before = key_lookups(&scrape(&metrics));
    let seed: u64 = rand::rng().random();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut refused, mut limited, mut last_head) = (0, 0, String::new());
    for _ in 0..5_000 {
        let key = format!("svc_live_{:032x}", rng.random::<u128>());
        let (status, head, _) = http(&addr, news, &[("Authorization", &auth(&key))]);
        match status {
            401 => refused += 1,
            429 => limited += 1,
            other => panic!("a made-up key answered {other}: {head}"),
        }
        last_head = head;
    }
    let spent = key_lookups(&scrape(&metrics)) - before;
    // 20 refusals a minute (the default limit); a minute's end during the run gives a second 20.
    assert!(spent <= 40, "{spent} store lookups for 5,000 made-up keys");
    assert!(
        refused <= 40 && limited >= 4_960,
        "{refused} refused, {limited} limited"
    );
    let head = last_head.to_ascii_lowercase();
    assert!(last_head.starts_with("HTTP/1.1 429"), "{last_head}");
    let retry: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .expect("Retry-After")
        .trim()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Nothing legitimate refused: the real key (verified here before) still answers.
    let (status, _, _) = http(&addr, news, &[("Authorization", &auth(&good))]);
    assert_eq!(status, 200);
}
