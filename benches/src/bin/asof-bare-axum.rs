//! `asof-bare-axum`: the machine's HTTP limit for the shared-path benchmark (issue 65) — a
//! bare axum server, built from the same axum, hyper and tokio as `asof serve`, answering
//! `GET /health` with a constant JSON body and nothing else (no middleware, no state).
//!
//! Usage: `asof-bare-axum --listen 127.0.0.1:PORT`. Prints `listening ADDR` once bound, so a
//! script can start measuring without a fixed sleep.

use axum::Router;
use axum::http::header;
use axum::routing::get;

const BODY: &str = r#"{"status":"ok"}"#;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let listen = match (args.next().as_deref(), args.next()) {
        (Some("--listen"), Some(addr)) => addr,
        _ => {
            eprintln!("usage: asof-bare-axum --listen ADDR");
            std::process::exit(2);
        }
    };
    let app = Router::new().route(
        "/health",
        get(|| async { ([(header::CONTENT_TYPE, "application/json")], BODY) }),
    );
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening {}", listener.local_addr()?);
    axum::serve(listener, app).await
}
