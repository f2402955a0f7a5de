//! End-to-end: spawn the real `asof serve` on a free port, mint a key with `asof keys create`
//! against the same state store, call the API over TCP, then stop the server with SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

fn asof() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_asof"));
    c.env("ASOF_LOG", "error");
    c
}

/// Starts the server and waits for its readiness line (never a fixed sleep).
fn start(db: &str) -> (Child, String) {
    let mut child = asof()
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url", db])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("server exited before listening")
            .unwrap();
        if let Some(rest) = line.strip_prefix("asof listening on http://") {
            break rest.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

fn http_get(addr: &str, path: &str, key: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, out)
}

#[test]
fn served_binary_answers_keyed_requests_with_a_key_from_keys_create_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("state.db").display());
    let (child, addr) = start(&db);
    // Kill the server if an assertion fails, so no orphan outlives the test.
    struct Guard(Child);
    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = self.0.kill();
        }
    }
    let mut guard = Guard(child);
    let (status, body) = http_get(&addr, "/health", None);
    assert_eq!(status, 200, "{body}");

    let out = asof()
        .args([
            "keys",
            "create",
            "--database-url",
            &db,
            "--email",
            "e2e@example.com",
            "--plan",
            "researcher",
            "--name",
            "e2e",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
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

    let pid = guard.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let code = guard.0.wait().unwrap();
    assert!(code.success(), "graceful shutdown exits 0, got {code:?}");
}
