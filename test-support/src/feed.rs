//! A local stand-in for EDGAR's current-filings listing (`/cgi-bin/browse-edgar?action=
//! getcurrent&start=N&output=atom`): it replays the recorded Atom pages in
//! `snapshots/sources/sec.edgar/current-feed-atom_2026-01-12` (pages a test may replace or
//! extend), refuses a User-Agent without a contact (403), answers 304 to a matching
//! `If-None-Match`, can answer 429 with `Retry-After: 1` once, and logs when each request came.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

pub fn recorded(start: usize) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../snapshots/sources/sec.edgar/current-feed-atom_2026-01-12");
    std::fs::read(dir.join(format!("start_{start:05}.atom"))).unwrap()
}

/// A feed with no entries: the recorded head, closed.
pub fn empty_page() -> Vec<u8> {
    let page = String::from_utf8_lossy(&recorded(0)).into_owned();
    let head = &page[..page.find("<entry>").unwrap()];
    format!("{head}</feed>\n").into_bytes()
}

#[derive(Default)]
pub struct Feed {
    pub pages: Mutex<Vec<Vec<u8>>>,
    /// (when, start, status) of every request.
    pub log: Mutex<Vec<(std::time::Instant, usize, u16)>>,
    pub throttle_once: AtomicBool,
    /// Files under `/Archives/` by path (`edgar/daily-index/2022/QTR4/index.json`, ...).
    pub archives: Mutex<std::collections::HashMap<String, Vec<u8>>>,
    /// An archive path answered with a `Content-Length` larger than its body (a cut-short
    /// transfer).
    pub cut_short: Mutex<Option<String>>,
}

async fn browse(
    State(feed): State<Arc<Feed>>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let start: usize = q.get("start").and_then(|s| s.parse().ok()).unwrap_or(0);
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let res = if !ua.contains('@') || q.get("action").map(String::as_str) != Some("getcurrent") {
        StatusCode::FORBIDDEN.into_response()
    } else if start == 100 && feed.throttle_once.swap(false, Ordering::SeqCst) {
        (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response()
    } else {
        let body = feed
            .pages
            .lock()
            .unwrap()
            .get(start / 100)
            .cloned()
            .unwrap_or_else(empty_page);
        let etag = format!("\"{}\"", hex::encode(Sha256::digest(&body)));
        let fresh = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == etag);
        if fresh {
            (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response()
        } else {
            (
                [
                    (header::ETAG, etag),
                    (header::CONTENT_TYPE, "application/atom+xml".into()),
                ],
                body,
            )
                .into_response()
        }
    };
    feed.log
        .lock()
        .unwrap()
        .push((std::time::Instant::now(), start, res.status().as_u16()));
    res
}

async fn archive(
    State(feed): State<Arc<Feed>>,
    axum::extract::Path(path): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ua.contains('@') {
        return StatusCode::FORBIDDEN.into_response();
    }
    let Some(body) = feed.archives.lock().unwrap().get(&path).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if feed.cut_short.lock().unwrap().as_deref() == Some(path.as_str()) {
        // Declares the whole file, sends half of it: the connection ends short.
        let half = body[..body.len() / 2].to_vec();
        let stream = futures_stream(half);
        return Response::builder()
            .header(header::CONTENT_LENGTH, body.len())
            .body(axum::body::Body::from_stream(stream))
            .unwrap();
    }
    body.into_response()
}

/// A body that yields `bytes` and then fails, as a dropped connection does.
fn futures_stream(
    bytes: Vec<u8>,
) -> impl futures::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send {
    struct Once(Option<Vec<u8>>);
    impl futures::Stream for Once {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            std::task::Poll::Ready(Some(match self.0.take() {
                Some(b) => Ok(b),
                None => Err(std::io::Error::other("connection dropped")),
            }))
        }
    }
    Once(Some(bytes))
}

/// Serves `feed` on a free loopback port (a task of the calling runtime); returns its base URL.
pub async fn serve(feed: Arc<Feed>) -> String {
    let app = axum::Router::new()
        .route("/cgi-bin/browse-edgar", axum::routing::get(browse))
        .route("/Archives/{*path}", axum::routing::get(archive))
        .with_state(feed);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// The first three recorded pages (300 filings); later starts answer an empty page.
pub fn three_pages() -> Arc<Feed> {
    Arc::new(Feed {
        pages: Mutex::new(vec![recorded(0), recorded(100), recorded(200)]),
        ..Default::default()
    })
}
