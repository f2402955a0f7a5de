//! End-to-end: spawn the real `asof serve` on a free port, mint a key with `asof keys create`
//! against the same state store, call the API over TCP, then stop the server with SIGTERM.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::spawn::{Guard, http, http_get, keys_create, start, start_logging};

#[test]
fn served_binary_answers_keyed_requests_with_a_key_from_keys_create_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let (child, addr) = start(&db);
    let mut guard = Guard(child);
    let (status, body) = http_get(&addr, "/health", None);
    assert_eq!(status, 200, "{body}");

    let key = keys_create(&db, "e2e@example.com", "researcher");
    assert!(key.starts_with("svc_live_"));

    let (status, body) = http_get(
        &addr,
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=1000",
        Some(&key),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("0001628280-26-003952_1318605"));
    assert!(body.to_ascii_lowercase().contains("x-ratelimit-limit: 60"));
    let (status, _) = http_get(
        &addr,
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z",
        Some("svc_live_wrong"),
    );
    assert_eq!(status, 401);

    let code = guard.terminate();
    assert!(code.success(), "graceful shutdown exits 0, got {code:?}");
}

#[test]
fn an_audited_receipt_matches_the_bytes_the_client_received() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let (child, addr) = start(&db);
    let mut guard = Guard(child);
    let key = keys_create(&db, "desk@example.com", "desk");
    let auth = format!("Bearer {key}");
    let (status, head, body) = http(
        &addr,
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z",
        &[("Authorization", &auth), ("X-Service-Audit", "on")],
    );
    assert_eq!(status, 200);
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no {name} header in {head}"))
    };
    let request_id = header("x-request-id");
    assert_eq!(header("x-service-audit-dropped"), "0");

    // The receipt is written off the request path: poll the log until it shows (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let receipt = loop {
        let (s, _, log) = http(&addr, "/v1/audit-log", &[("Authorization", &auth)]);
        assert_eq!(s, 200);
        let log: serde_json::Value = serde_json::from_slice(&log).unwrap();
        if let Some(r) = log["results"].as_array().and_then(|a| a.first()) {
            break r.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no receipt arrived");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // What a client does to check its receipt: sha256 over the exact body bytes received.
    let mine = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&body));
    assert_eq!(receipt["envelope_sha256"], mine.as_str());
    assert_eq!(receipt["request_id"], request_id.as_str());
    assert_eq!(
        receipt["corpus_version"],
        header("x-corpus-version").as_str()
    );
    assert!(guard.terminate().success());
}

#[test]
fn keys_and_query_strings_never_reach_the_logs_even_at_debug() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let (child, addr, log) = start_logging(&db, "debug", &[]);
    let mut guard = Guard(child);
    let key = keys_create(&db, "logs@example.com", "desk");
    let secret_query = "ticker=TSLA&as_of=2026-01-29T12:00:00Z";
    let (status, answered) = http_get(&addr, &format!("/v1/news?{secret_query}"), Some(&key));
    assert_eq!(status, 200);
    let request_id = answered
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("x-request-id")
                .then(|| v.trim().to_owned())
        })
        .expect("an X-Request-Id header");
    let (status, _) = http_get(
        &addr,
        &format!("/v1/news?{secret_query}"),
        Some("svc_live_not_a_real_key_but_secret"),
    );
    assert_eq!(status, 401);
    assert!(guard.terminate().success());
    let log = log.lock().unwrap().join("\n");
    assert!(
        log.contains("/v1/news"),
        "the request is logged by path:\n{log}"
    );
    let secret = key.trim_start_matches("svc_live_");
    assert!(!log.contains(secret), "a key reached the log");
    assert!(
        !log.contains("not_a_real_key_but_secret"),
        "a rejected key reached the log"
    );
    assert!(
        !log.contains("ticker=TSLA"),
        "a query string reached the log"
    );
    // Every line written while serving a request names its request id (the id a 500's message
    // points the client to).
    let request_lines: Vec<&str> = log.lines().filter(|l| l.contains("/v1/news")).collect();
    assert!(request_lines.len() >= 2, "{log}");
    for line in &request_lines {
        assert!(
            line.contains("request_id="),
            "a request's log line without its id: {line}"
        );
    }
    assert!(
        log.lines()
            .any(|l| l.contains(&format!("request_id={request_id}"))),
        "the id the client received is in the log:\n{log}"
    );
    // The readiness line is information, not a warning.
    assert!(
        log.lines()
            .any(|l| l.contains(" INFO ") && l.contains("asof listening on http://")),
        "{log}"
    );
}

#[test]
fn serve_on_postgres_accepts_keys_created_in_the_same_database() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A schema of the test's own (the binaries make its tables), dropped at the end, so the
    // test leaves the shared database clean.
    let Some(schema) = rt.block_on(common::backends::PgSchema::make_for(
        "serve_on_postgres_accepts_keys_created_in_the_same_database",
        "asof_e2e",
    )) else {
        return;
    };
    let db = schema.url();
    let (child, addr) = start(&db);
    let mut guard = Guard(child);
    let key = keys_create(&db, "pg@example.com", "researcher");
    let (status, body) = http_get(
        &addr,
        "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z",
        Some(&key),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = http_get(&addr, "/v1/keys", Some(&key));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"name\":\"e2e\""), "{body}");
    assert!(guard.terminate().success());
    rt.block_on(schema.drop());
}

fn health_version(addr: &str) -> String {
    let (status, _, body) = http(addr, "/health", &[]);
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    v["results"][0]["corpus_version"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_served_process_polls_the_pointer_and_serves_a_new_version() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let corpus = tempfile::tempdir().unwrap();
    let store = rt.block_on(common::copy_of_sample_corpus_into(corpus.path()));
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let corpus_arg = corpus.path().to_str().unwrap().to_owned();
    let (child, addr, _) = start_logging(
        &db,
        "error",
        &["--corpus", &corpus_arg, "--reload-interval", "1"],
    );
    let mut guard = Guard(child);
    let before = health_version(&addr);
    let changes = asof_engine::write::publish::ChangeSet {
        notes: [("e2e".to_owned(), "reload loop".to_owned())].into(),
        ..Default::default()
    };
    let published = rt
        .block_on(asof_engine::write::publish::publish(
            &store,
            changes,
            asof_engine::Instant::now(),
        ))
        .unwrap();
    assert_ne!(published.version, before);
    // The loop polls every second: wait (bounded) until /health reports the new version.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while health_version(&addr) != published.version {
        assert!(
            std::time::Instant::now() < deadline,
            "the new version was not served within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(guard.terminate().success());
}

#[test]
fn sigterm_ends_open_streams_and_the_process_exits_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    // A long grace: the exit must come from the streams ending, not from the grace running out.
    let (child, addr, _) = start_logging(&db, "error", &["--shutdown-grace", "60"]);
    let mut guard = Guard(child);
    let key = keys_create(&db, "stream@example.com", "researcher");
    // Wait until the stream is open (its first comment has arrived).
    let (status, opened, mut s) = stream_open(&addr, &key);
    assert_eq!(status, 200, "{opened}");
    let mut got = opened.into_bytes();
    let mut buf = [0u8; 4096];
    let started = std::time::Instant::now();
    let code = guard.terminate();
    assert!(code.success(), "graceful shutdown exits 0, got {code:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "an open stream held the process for {:?}",
        started.elapsed()
    );
    // The client read the server's last word, then the end of the stream.
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    assert!(
        String::from_utf8_lossy(&got).contains("the server is shutting down"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

/// Opens a connection and sends the start of a request head, never its end (a slowloris).
fn half_open(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET /health HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").unwrap();
    s
}

/// Opens a keep-alive connection, completes one request on it and leaves it idle.
fn idle_keep_alive(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // /health answers with a Content-Length: read the head, then that many bytes.
    loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before answering");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(split) = text.find("\r\n\r\n") {
            let len: usize = text[..split]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("a Content-Length");
            if got.len() >= split + 4 + len {
                assert!(text.starts_with("HTTP/1.1 200"), "{text}");
                return s;
            }
        }
    }
}

/// True when the server closes `s` (end of stream or reset) within `within`.
fn closed_within(s: &mut TcpStream, within: std::time::Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // a bare 408/400 some servers send first
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }
}

#[test]
fn slow_senders_and_idle_keep_alive_connections_are_closed_after_the_header_read_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let (child, addr, _) = start_logging(&db, "error", &["--header-read-timeout", "2"]);
    let mut guard = Guard(child);
    let opened = std::time::Instant::now();
    let mut slow: Vec<TcpStream> = (0..300).map(|_| half_open(&addr)).collect();
    // Trickling one byte at a time does not extend the deadline: it counts from the start.
    let trickle: Vec<_> = (0..10)
        .map(|_| {
            let mut s = half_open(&addr);
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_secs(15) {
                    if s.write_all(b"a").is_err() {
                        return Some(start.elapsed());
                    }
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                None
            })
        })
        .collect();
    let mut idle = idle_keep_alive(&addr);
    // The service still answers others while they hang on.
    let (status, _) = http_get(&addr, "/health", None);
    assert_eq!(status, 200);
    for s in &mut slow {
        assert!(
            closed_within(s, std::time::Duration::from_secs(8)),
            "a connection that never finished its head was still open after {:?}",
            opened.elapsed()
        );
    }
    assert!(
        closed_within(&mut idle, std::time::Duration::from_secs(8)),
        "an idle keep-alive connection was still open"
    );
    for t in trickle {
        let cut = t.join().unwrap();
        assert!(
            cut.is_some_and(|d| d < std::time::Duration::from_secs(10)),
            "a trickling sender was not cut off: {cut:?}"
        );
    }
    assert!(guard.terminate().success());
}

#[test]
fn sigterm_with_hundreds_of_slow_and_idle_connections_open_exits_within_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    // The header deadline is far off: only the shutdown can end these connections.
    let (child, addr, _) = start_logging(
        &db,
        "error",
        &["--header-read-timeout", "300", "--shutdown-grace", "3"],
    );
    let mut guard = Guard(child);
    let _slow: Vec<TcpStream> = (0..300).map(|_| half_open(&addr)).collect();
    let mut idle: Vec<TcpStream> = (0..20).map(|_| idle_keep_alive(&addr)).collect();
    let started = std::time::Instant::now();
    guard.sigterm();
    // Idle connections are closed at once, not at the end of the grace period.
    for s in &mut idle {
        assert!(closed_within(s, std::time::Duration::from_secs(2)));
    }
    let code = guard.0.wait().unwrap();
    assert!(code.success(), "exit {code:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(6),
        "the process took {:?} to exit with a 3 s grace period",
        started.elapsed()
    );
}

#[test]
fn sigterm_during_a_request_lets_it_finish_and_answer() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let (child, addr, lines) =
        start_logging(&db, "error,tower_http=debug", &["--shutdown-grace", "20"]);
    let mut guard = Guard(child);
    // A request whose body is still arriving when the signal comes.
    let body = br#"{"path": "/"}"#;
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "POST /site/beacon HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(&body[..4]).unwrap();
    // The server has read the head and is in the handler, waiting for the body.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("started processing request"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the request never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    guard.sigterm();
    std::thread::sleep(std::time::Duration::from_millis(500));
    s.write_all(&body[4..]).unwrap();
    let mut out = Vec::new();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"path\":\"/\""), "{text}");
    // Keep-alive is off once the server is stopping: it closed the connection after answering.
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(guard.0.wait().unwrap().success());
}

#[test]
fn a_200_kb_header_gets_the_431_envelope_and_one_past_the_parsers_ceilings_a_bare_431() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let (child, addr, _) = start_logging(&db, "error", &[]);
    let mut guard = Guard(child);
    let big = "c".repeat(200 * 1024);
    let (status, head, body) = http(&addr, "/v1/news?cik=320193", &[("Cookie", &big)]);
    assert_eq!(status, 431, "{head}");
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], "headers_too_large");
    // Past hyper's buffer the parser refuses on its own, and closes the connection.
    let huge = "c".repeat(300 * 1024);
    parser_refuses(&addr, &format!("Cookie: {huge}\r\n"));
    // So is a 101st field (hyper's default ceiling, the documented limit).
    let fields: String = (0..101).map(|i| format!("X-F{i}: v\r\n")).collect();
    parser_refuses(&addr, &fields);
    // While 100 fields are answered (`http` adds Host, Content-Length and Connection).
    let fields: Vec<(String, String)> = (0..97).map(|i| (format!("X-F{i}"), "v".into())).collect();
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(http(&addr, "/health", &fields).0, 200);
    // And the server is unharmed.
    assert_eq!(http_get(&addr, "/health", None).0, 200);
    assert!(guard.terminate().success());
}

/// Sends `GET /health` with `fields` (header lines, each ending in CRLF) on a new connection,
/// and checks that what comes back is at most hyper's bare 431, never a route's answer. The
/// server closes with part of the head unread, so the client may see a reset before the
/// answer: nothing at all is as good.
fn parser_refuses(addr: &str, fields: &str) {
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = write!(s, "GET /health HTTP/1.1\r\nHost: {addr}\r\n{fields}\r\n");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(
        out.is_empty() || String::from_utf8_lossy(&out).starts_with("HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&out[..out.len().min(200)])
    );
}

/// Sends `GET /v1/stream` with `key` on a new connection and reads until the answer's head and
/// first frame (or the refusal) have arrived: the status and what was read. The connection is
/// returned open (a stream holds it).
fn stream_open(addr: &str, key: &str) -> (u16, String, TcpStream) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /v1/stream HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\r\n"
    )
    .unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if text.contains("asof stream of lane") || text.contains("\"error\"") {
            let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
            return (status, text, s);
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before answering: {text}");
        got.extend_from_slice(&buf[..n]);
    }
}

/// Issue 63, point 5, on the real binary: streams cannot take every connection. With room for
/// 6 connections and 3 streams, accounts that ask for more streams get `429 too_many_streams`
/// (the contract's envelope, `Retry-After`), and ordinary requests are still answered on the
/// connections kept for them.
#[test]
fn streams_leave_a_reserve_of_connections_for_ordinary_requests() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let (child, addr, _) = start_logging(
        &db,
        "error",
        &["--max-connections", "6", "--max-streams", "3"],
    );
    let _guard = Guard(child);
    let keys: Vec<String> = (0..5)
        .map(|i| keys_create(&db, &format!("s{i}@example.com"), "researcher"))
        .collect();
    let mut open = Vec::new();
    for k in &keys[..3] {
        let (status, text, s) = stream_open(&addr, k);
        assert_eq!(status, 200, "{text}");
        open.push(s);
    }
    for k in &keys[3..] {
        let (status, text, _) = stream_open(&addr, k);
        assert_eq!(status, 429, "{text}");
        assert!(text.contains("too_many_streams"), "{text}");
        assert!(
            text.to_ascii_lowercase().contains("retry-after: 5"),
            "{text}"
        );
    }
    // Three streams hold three of six connections; ordinary requests are answered.
    for _ in 0..10 {
        let (status, _) = http_get(
            &addr,
            "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=1",
            Some(&keys[4]),
        );
        assert_eq!(status, 200);
    }
    // A stream that ends gives its room back.
    drop(open.pop());
    let mut room = None;
    for _ in 0..100 {
        let (status, _, s) = stream_open(&addr, &keys[3]);
        if status == 200 {
            room = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        room.is_some(),
        "the ended stream's room was never given back"
    );
}

/// `--max-streams` must leave connections for ordinary requests.
#[test]
fn max_streams_at_or_above_the_connection_limit_is_refused_at_start() {
    let out = common::spawn::asof()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--max-connections",
            "8",
            "--max-streams",
            "8",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--max-streams 8 must be below --max-connections 8"),
        "{err}"
    );
}
