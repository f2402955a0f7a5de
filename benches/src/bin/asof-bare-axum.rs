//! `asof-bare-axum`: the machine's HTTP limit for the shared-path benchmark (issue 65) — a
//! bare axum server, built from the same axum, hyper and tokio as `asof serve`, answering
//! `GET /health` with a constant answer and nothing else (no middleware, no state).
//!
//! Usage: `asof-bare-axum --listen 127.0.0.1:PORT [--headers FILE --body FILE] [--answers DIR]
//! [--hyper-loop] [--header-read-timeout SECS]`.
//! Prints `listening ADDR` once bound, so a script can start measuring without a fixed sleep.
//!
//! By default the answer is a 15-byte JSON body with one header. With `--headers` (one
//! `name: value` a line, as `curl -D` writes them; `date` and `content-length` are skipped,
//! hyper writes its own) and `--body`, it is those bytes instead: `benches/hot_path.sh` gives
//! it the head and body `asof serve` answered a `/health` with, so the run also measures what
//! a server that does no work at all pays to send the bytes ours sends (the contract's headers
//! and envelope), which tells the cost of the bytes from the cost of our request path.
//!
//! With `--answers DIR` it also answers other requests from what `asof serve` answered them:
//! `DIR/index` holds `<path and query>\t<N>` lines, `DIR/N.head` and `DIR/N.body` the answer
//! (as `--headers` and `--body`); any other request is a bare 404. The same requests then
//! cost it only the sending of the same bytes (the by-filer pages' ceiling on this machine).
//!
//! With `--hyper-loop` it serves through a hand-written accept loop on hyper's HTTP/1
//! connections instead of `axum::serve`, and with `--header-read-timeout SECS` that loop arms
//! hyper's header-read timeout as `asof serve` does: the pair measures that timer alone.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::IntoResponse;
use axum::routing::get;

const BODY: &str = r#"{"status":"ok"}"#;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let Some(listen) = arg("--listen") else {
        eprintln!("usage: asof-bare-axum --listen ADDR [--headers FILE --body FILE]");
        std::process::exit(2);
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let mut body = Bytes::from_static(BODY.as_bytes());
    if let (Some(head), Some(file)) = (arg("--headers"), arg("--body")) {
        headers = read_head(&std::fs::read_to_string(head)?);
        body = Bytes::from(std::fs::read(file)?);
    }
    let answers = Arc::new(match arg("--answers") {
        Some(dir) => read_answers(std::path::Path::new(&dir))?,
        None => HashMap::new(),
    });
    let app = Router::new()
        .route(
            "/health",
            get(move || {
                let (headers, body) = (headers.clone(), body.clone());
                async move { (headers, body) }
            }),
        )
        .fallback(move |uri: Uri| {
            let answers = answers.clone();
            async move {
                let asked = uri.path_and_query().map_or("", |p| p.as_str());
                match answers.get(asked) {
                    Some((headers, body)) => (headers.clone(), body.clone()).into_response(),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }
        });
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening {}", listener.local_addr()?);
    let timeout = arg("--header-read-timeout").map(|s| {
        std::time::Duration::from_secs(s.parse().expect("--header-read-timeout takes seconds"))
    });
    if args.iter().any(|a| a == "--hyper-loop") || timeout.is_some() {
        return hyper_loop(listener, app, timeout).await;
    }
    axum::serve(listener, app).await
}

/// The same application on hyper's HTTP/1 connections in a hand-written accept loop (as
/// `asof serve`'s own, without its limits and draining), with hyper's header-read timeout when
/// `timeout` is given: a tokio timer made, registered and cleared for every request head, which
/// `axum::serve` does not arm. The two runs of this loop, with and without the timer, tell
/// what that timer costs a server doing no other work.
async fn hyper_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    timeout: Option<std::time::Duration>,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    if let Some(t) = timeout {
        http.timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(t);
    }
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}

/// The header fields of a head as `curl -D` writes it, but for the status line and the two
/// fields hyper writes itself.
fn read_head(text: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in text.lines().skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        if name == "date" || name == "content-length" {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value.trim()),
        ) {
            headers.append(n, v);
        }
    }
    headers
}

/// The answers of `--answers DIR`, by path and query.
fn read_answers(dir: &std::path::Path) -> std::io::Result<HashMap<String, (HeaderMap, Bytes)>> {
    let mut answers = HashMap::new();
    for line in std::fs::read_to_string(dir.join("index"))?.lines() {
        let Some((asked, n)) = line.split_once('\t') else {
            continue;
        };
        let head = std::fs::read_to_string(dir.join(format!("{n}.head")))?;
        let body = std::fs::read(dir.join(format!("{n}.body")))?;
        answers.insert(asked.to_owned(), (read_head(&head), Bytes::from(body)));
    }
    Ok(answers)
}
