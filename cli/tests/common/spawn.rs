//! Helpers of the end-to-end tests that spawn the real `asof` binary: start `asof serve` on a
//! free port and wait for its listening line (never a fixed sleep), raw HTTP/1.1 requests
//! over fresh connections, `asof keys create`, and a guard that kills the server on failure.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

pub fn asof() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_asof"));
    c.env("ASOF_LOG", "error");
    c
}

/// Starts the server and waits for its readiness line (never a fixed sleep).
pub fn start(db: &str) -> (Child, String) {
    let (child, addr, _) = start_logging(db, "error", &[]);
    (child, addr)
}

/// As [`start`] with the log filter `log`; every line the server writes to stderr is kept.
pub fn start_logging(
    db: &str,
    log: &str,
    extra: &[&str],
) -> (Child, String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let mut child = asof()
        .env("ASOF_LOG", log)
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url", db])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let addr = loop {
        let line = lines
            .next()
            .expect("server exited before listening")
            .unwrap();
        kept.lock().unwrap().push(line.clone());
        if let Some(rest) = line.strip_prefix("asof listening on http://") {
            break rest.trim().to_owned();
        }
    };
    let sink = kept.clone();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            sink.lock().unwrap().push(l);
        }
    });
    (child, addr, kept)
}

/// One HTTP/1.1 request over a fresh connection: (status, header block, exact body bytes).
pub fn http(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, Vec<u8>) {
    let (status, head, body) = request(addr, "GET", path, headers);
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "envelopes are sent with a content length"
    );
    (status, head, body)
}

/// As [`http`] with any method (any token: invented ones too), and no check of the framing.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8(out[..split].to_vec()).unwrap();
    let body = out[split + 4..].to_vec();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head, body)
}

pub fn http_get(addr: &str, path: &str, key: Option<&str>) -> (u16, String) {
    let auth = key.map(|k| format!("Bearer {k}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    let (status, head, body) = http(addr, path, &headers);
    (
        status,
        format!("{head}\r\n\r\n{}", String::from_utf8_lossy(&body)),
    )
}

/// `asof keys create` against the server's state store; returns the raw key (last stdout line).
pub fn keys_create(db: &str, email: &str, plan: &str) -> String {
    let out = asof()
        .args([
            "keys",
            "create",
            "--database-url",
            db,
            "--email",
            email,
            "--plan",
            plan,
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
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned()
}

/// Kills the server if an assertion fails, so no orphan outlives the test.
pub struct Guard(pub Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

impl Guard {
    /// Sends SIGTERM, without waiting.
    pub fn sigterm(&self) {
        let pid = self.0.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.sigterm();
        self.0.wait().unwrap()
    }
}
