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

/// Serves `feed` on a free loopback port (a task of the calling runtime); returns its base URL.
pub async fn serve(feed: Arc<Feed>) -> String {
    let app = axum::Router::new()
        .route("/cgi-bin/browse-edgar", axum::routing::get(browse))
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
