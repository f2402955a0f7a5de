//! Helpers shared by the oneshot HTTP test files: a state over the shipped sample corpus and a
//! SQLite state store in a temp directory, and a request helper that keeps the exact body bytes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use asof_engine::{Corpus, CorpusStore};
use asof_server::app::Options;
use asof_server::auth::Plan;
use asof_server::state_store::{self, StateStore};
use asof_server::{AppState, app};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

pub struct T {
    pub _dir: tempfile::TempDir,
    pub state: AppState,
    pub store: Arc<dyn StateStore>,
    /// A researcher-plan key.
    pub key: String,
}

pub async fn sample_corpus() -> Corpus {
    Corpus::open(CorpusStore::open(repo().to_str().unwrap()).unwrap())
        .await
        .unwrap()
}

pub async fn sqlite_store(dir: &Path) -> Arc<dyn StateStore> {
    state_store::open(dir.join("state.db").to_str().unwrap())
        .await
        .unwrap()
}

pub async fn setup() -> T {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    setup_with(dir, store, Options::default()).await
}

/// A state over `store` (which may wrap the SQLite store of `dir`) with explicit options.
pub async fn setup_with(dir: tempfile::TempDir, store: Arc<dyn StateStore>, opts: Options) -> T {
    let state = AppState::with_options(sample_corpus().await, store.clone(), opts)
        .await
        .unwrap();
    let key = key_for(&store, "t@example.com", Plan::Researcher).await;
    T {
        _dir: dir,
        state,
        store,
        key,
    }
}

/// A raw key for a (new or existing) user on `plan`.
pub async fn key_for(store: &Arc<dyn StateStore>, email: &str, plan: Plan) -> String {
    let user = store.upsert_user(email, plan).await.unwrap();
    store.create_key(&user.id, "test", None).await.unwrap().1
}

pub struct Res {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub bytes: Vec<u8>,
    pub json: Value,
}

pub async fn send(
    t: &T,
    method: Method,
    uri: &str,
    key: Option<&str>,
    extra: &[(&str, &str)],
) -> Res {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(k) = key {
        b = b.header(header::AUTHORIZATION, format!("Bearer {k}"));
    }
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    let res = app(t.state.clone())
        .oneshot(b.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes().to_vec();
    let json = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    Res {
        status,
        headers,
        bytes,
        json,
    }
}

pub async fn get(t: &T, uri: &str) -> Res {
    send(t, Method::GET, uri, Some(&t.key.clone()), &[]).await
}

pub fn assert_error(r: &Res, status: StatusCode, code: &str, param: Option<&str>) {
    assert_eq!(r.status, status, "{}", r.json);
    assert_eq!(r.json["error"]["code"], code, "{}", r.json);
    assert_eq!(r.json["count"], Value::Null);
    assert_eq!(r.json["results"], Value::Array(vec![]));
    assert_eq!(r.json["error"]["param"].as_str(), param, "{}", r.json);
    assert_eq!(r.headers[header::CACHE_CONTROL], "no-store");
}
