//! Helpers shared by the oneshot HTTP test files: a state over the shipped sample corpus and a
//! SQLite state store in a temp directory, and a request helper that keeps the exact body bytes.
#![allow(dead_code)]

#[macro_use]
pub mod backends;

use asof_server::state::store::{
    AccountStore, BillingStore, ReceiptStore, SignInStore, UsageStore, WindowStore,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use asof_engine::{Corpus, CorpusStore, Instant};
use asof_server::Options;
use asof_server::error::{Error, Result};
use asof_server::plan::Plan;
use asof_server::signin::session;
use asof_server::state::store::{
    self, Identity, IdentitySignIn, KeyRecord, LinkState, SessionRecord, SignInLink, StateStore,
    StoredReceipt, UsageCount, User, WindowHits,
};
use asof_server::state::{
    Attestation, BillingEvent, BillingOutcome, PlanChange, SubscriptionRecord,
};
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
    /// `app(state)`, built once: building the router (every route's description and MCP
    /// tool schemas) takes most of a second in a debug build, a request a fraction of a
    /// millisecond, so a test that built it per request measured the build, not the service.
    pub app: asof_server::App,
}

impl T {
    /// The test state of `state` (a replica) over `store`, with the researcher key `key`.
    pub fn new(
        dir: tempfile::TempDir,
        state: AppState,
        store: Arc<dyn StateStore>,
        key: String,
    ) -> T {
        T {
            _dir: dir,
            app: app(state.clone()),
            state,
            store,
            key,
        }
    }
}

pub async fn sample_corpus() -> Corpus {
    Corpus::open(CorpusStore::open(repo().to_str().unwrap()).unwrap())
        .await
        .unwrap()
}

/// A writable copy of the shipped corpus (same version) in `dir`.
pub async fn copy_of_sample_corpus_into(dir: &Path) -> CorpusStore {
    let dst = CorpusStore::local(dir).unwrap();
    copy_sample_corpus(&dst).await;
    dst
}

/// The shipped sample corpus, copied object by object into `dst` (same version): its
/// partitions, identity and access files, then its manifest and pointer.
/// Moves `t` to a new version: a copy of the shipped corpus with one more published note,
/// reloaded. Returns the copy (it holds the served files: keep it alive) and the new version.
pub async fn reload_to_a_new_version(t: &T) -> (tempfile::TempDir, String) {
    let copy = tempfile::tempdir().unwrap();
    let dst = copy_of_sample_corpus_into(copy.path()).await;
    let changes = asof_engine::write::publish::ChangeSet {
        notes: [("test".to_owned(), "reload".to_owned())].into(),
        ..Default::default()
    };
    asof_engine::write::publish::publish(&dst, changes, asof_engine::Instant::now())
        .await
        .unwrap();
    let version = asof_server::reload::reload_once(&t.state, &dst)
        .await
        .expect("the new version is served");
    (copy, version)
}

pub async fn copy_sample_corpus(dst: &CorpusStore) {
    let src = CorpusStore::open(repo().to_str().unwrap()).unwrap();
    let (version, m) = src.current().await.unwrap();
    for p in m
        .partitions
        .iter()
        .map(|p| p.path.clone())
        .chain(m.identity.iter().map(|e| e.path.clone()))
        .chain(m.access.iter().map(|e| e.path.clone()))
    {
        dst.put_immutable(&p, src.get(&p).await.unwrap())
            .await
            .unwrap();
    }
    dst.put_manifest(&m).await.unwrap();
    dst.swap_pointer(None, &version).await.unwrap();
}

/// `base` with e-mail sign-in configured towards a port nothing listens on (each link's
/// sending fails after every limit has passed).
pub fn dead_mail(base: Options) -> Options {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    Options {
        public_url: Some("https://asof.example".into()),
        sign_in: asof_server::signin::SignInConfig {
            mail: Some((
                asof_server::secret::SecretUrl::new(format!("smtp://127.0.0.1:{port}")),
                "asof <no-reply@example.com>".into(),
            )),
            ..Default::default()
        },
        ..base
    }
}

pub async fn sqlite_store(dir: &Path) -> Arc<dyn StateStore> {
    store::open(dir.join("state.db").to_str().unwrap())
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
    T::new(dir, state, store, key)
}

/// A key of a `power` plan user (flat files, Delta Sharing).
pub async fn power_key(t: &T) -> String {
    key_for(&t.store, "power@example.com", Plan::Power).await
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
    let res = t
        .app
        .clone()
        .oneshot(from_loopback(b.body(Body::empty()).unwrap()))
        .await
        .unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = if headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "text/event-stream")
    {
        // An open event stream never ends: what a request test sees of it is its first frame
        // (the opening comment); dropping the body closes the stream.
        match res.into_body().frame().await {
            Some(Ok(f)) => f.into_data().map(|d| d.to_vec()).unwrap_or_default(),
            _ => Vec::new(),
        }
    } else {
        res.into_body().collect().await.unwrap().to_bytes().to_vec()
    };
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

/// Sends one request through `t`'s router and keeps the answer whole (JSON parsed when it is).
pub async fn respond(t: &T, req: Request<Body>) -> Res {
    respond_with(&t.app, req).await
}

/// As [`respond`], through `app` (a router built once for a replica that is not a [`T`]).
pub async fn respond_with(app: &asof_server::App, req: Request<Body>) -> Res {
    let res = app.clone().oneshot(from_loopback(req)).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes().to_vec();
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Res {
        status,
        headers,
        bytes,
        json,
    }
}

/// The socket peer a served request has: 127.0.0.1, unless the test set its own.
pub fn from_loopback(mut req: Request<Body>) -> Request<Body> {
    if req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .is_none()
    {
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                40_000,
            ))));
    }
    req
}

/// A proxy on loopback, as the tests' requests come (`from_loopback`): their
/// `X-Forwarded-For` is believed.
pub fn loopback_proxy() -> Vec<asof_server::http::client::IpNet> {
    vec!["127.0.0.1/32".parse().unwrap()]
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

/// A state store whose receipt writes wait for permits (to hold the queue full) or fail, and
/// whose rate-limit windows can fail with a message that must never reach a client.
#[derive(Debug)]
pub struct Gated {
    pub inner: Arc<dyn StateStore>,
    pub permits: tokio::sync::Semaphore,
    pub fail: AtomicBool,
    pub fail_hits: AtomicBool,
    /// Rate-window writes never complete (a store that stopped answering).
    pub stall_hits: AtomicBool,
    /// Pings the store was sent (`GET /ready`'s probe).
    pub pings: AtomicUsize,
}

/// The detail of [`Gated`]'s injected window fault.
pub const INJECTED_FAULT: &str = "injected fault: table rate_windows is locked at /var/secret";

impl Gated {
    pub fn new(inner: Arc<dyn StateStore>, permits: usize, fail: bool) -> Self {
        Gated {
            inner,
            permits: tokio::sync::Semaphore::new(permits),
            fail: AtomicBool::new(fail),
            fail_hits: AtomicBool::new(false),
            stall_hits: AtomicBool::new(false),
            pings: AtomicUsize::new(0),
        }
    }
}

#[async_trait::async_trait]
impl AccountStore for Gated {
    async fn upsert_user(&self, email: &str, plan: Plan) -> Result<User> {
        self.inner.upsert_user(email, plan).await
    }
    async fn create_key(
        &self,
        user_id: &str,
        name: &str,
        expires_at: Option<Instant>,
    ) -> Result<(KeyRecord, String)> {
        self.inner.create_key(user_id, name, expires_at).await
    }
    async fn create_key_within(
        &self,
        user_id: &str,
        name: &str,
        expires_at: Option<Instant>,
        cap: u32,
        now: Instant,
    ) -> Result<Option<(KeyRecord, String)>> {
        self.inner
            .create_key_within(user_id, name, expires_at, cap, now)
            .await
    }
    async fn key_by_hash(&self, hash: &str) -> Result<Option<(KeyRecord, User)>> {
        self.inner.key_by_hash(hash).await
    }
    async fn list_keys(&self, user_id: &str) -> Result<Vec<KeyRecord>> {
        self.inner.list_keys(user_id).await
    }
    async fn keys_used(&self, key_ids: &[String], at: Instant) -> Result<()> {
        self.inner.keys_used(key_ids, at).await
    }
    async fn revoke_key(&self, user_id: &str, key_id: &str, at: Instant) -> Result<bool> {
        self.inner.revoke_key(user_id, key_id, at).await
    }
}
#[async_trait::async_trait]
impl SignInStore for Gated {
    async fn sign_in_user(&self, email: &str) -> Result<User> {
        self.inner.sign_in_user(email).await
    }
    async fn put_sign_in_link(&self, link: &SignInLink) -> Result<()> {
        self.inner.put_sign_in_link(link).await
    }
    async fn sign_in_link(
        &self,
        token_hash: &str,
        browser_hash: &str,
        now: Instant,
    ) -> Result<LinkState> {
        self.inner.sign_in_link(token_hash, browser_hash, now).await
    }
    async fn use_sign_in_link(
        &self,
        token_hash: &str,
        browser_hash: &str,
        now: Instant,
    ) -> Result<LinkState> {
        self.inner
            .use_sign_in_link(token_hash, browser_hash, now)
            .await
    }
    async fn identity_sign_in(
        &self,
        identity: &Identity,
        email: &str,
        now: Instant,
    ) -> Result<IdentitySignIn> {
        self.inner.identity_sign_in(identity, email, now).await
    }
    async fn add_identity(&self, identity: &Identity, user_id: &str, now: Instant) -> Result<()> {
        self.inner.add_identity(identity, user_id, now).await
    }
    async fn identities(&self, user_id: &str) -> Result<Vec<Identity>> {
        self.inner.identities(user_id).await
    }
    async fn create_session(
        &self,
        id_hash: &str,
        user_id: &str,
        via: &str,
        now: Instant,
        expires_at: Instant,
    ) -> Result<()> {
        self.inner
            .create_session(id_hash, user_id, via, now, expires_at)
            .await
    }
    async fn session(&self, id_hash: &str) -> Result<Option<SessionRecord>> {
        self.inner.session(id_hash).await
    }
    async fn touch_session(&self, id_hash: &str, at: Instant) -> Result<()> {
        self.inner.touch_session(id_hash, at).await
    }
    async fn end_session(&self, id_hash: &str, at: Instant) -> Result<bool> {
        self.inner.end_session(id_hash, at).await
    }
    async fn purge_sign_ins(&self, before: Instant) -> Result<u64> {
        self.inner.purge_sign_ins(before).await
    }
}
#[async_trait::async_trait]
impl WindowStore for Gated {
    async fn hit_n(&self, bucket: &str, window_start: i64, n: i64) -> Result<i64> {
        if self.fail_hits.load(Ordering::SeqCst) {
            return Err(Error::Config(INJECTED_FAULT.into()));
        }
        if self.stall_hits.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.hit_n(bucket, window_start, n).await
    }
    async fn hit_many(&self, hits: &[WindowHits]) -> Result<Vec<WindowHits>> {
        if self.fail_hits.load(Ordering::SeqCst) {
            return Err(Error::Config(INJECTED_FAULT.into()));
        }
        if self.stall_hits.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.hit_many(hits).await
    }
    async fn purge_windows(&self, before: i64) -> Result<u64> {
        self.inner.purge_windows(before).await
    }
}
#[async_trait::async_trait]
impl ReceiptStore for Gated {
    async fn append_receipt(&self, r: &StoredReceipt) -> Result<()> {
        self.permits.acquire().await.unwrap().forget();
        if self.fail.load(Ordering::SeqCst) {
            return Err(Error::Config("injected receipt write failure".into()));
        }
        self.inner.append_receipt(r).await
    }
    async fn receipts(
        &self,
        key_id: &str,
        from_ms: i64,
        to_ms: i64,
        after: Option<(i64, String)>,
        limit: i64,
    ) -> Result<Vec<StoredReceipt>> {
        self.inner
            .receipts(key_id, from_ms, to_ms, after, limit)
            .await
    }
    async fn receipt_count(&self, key_id: &str) -> Result<i64> {
        self.inner.receipt_count(key_id).await
    }
}
#[async_trait::async_trait]
impl UsageStore for Gated {
    async fn add_usage(&self, counts: &[UsageCount]) -> Result<()> {
        self.inner.add_usage(counts).await
    }
    async fn usage(
        &self,
        user_id: &str,
        from_day: &str,
        to_day: &str,
    ) -> Result<Vec<(String, String, String, i64)>> {
        self.inner.usage(user_id, from_day, to_day).await
    }
    async fn count_page_view(&self, path: &str, day: &str) -> Result<()> {
        self.inner.count_page_view(path, day).await
    }
    async fn page_views(&self, from_day: &str, to_day: &str) -> Result<Vec<(String, String, i64)>> {
        self.inner.page_views(from_day, to_day).await
    }
}
#[async_trait::async_trait]
impl BillingStore for Gated {
    async fn record_attestation(
        &self,
        user_id: &str,
        plan: Plan,
        statement_version: &str,
        statement_sha256: &str,
        at: Instant,
    ) -> Result<Attestation> {
        self.inner
            .record_attestation(user_id, plan, statement_version, statement_sha256, at)
            .await
    }
    async fn attestations(&self, user_id: &str) -> Result<Vec<Attestation>> {
        self.inner.attestations(user_id).await
    }
    async fn billing_customer(&self, user_id: &str) -> Result<Option<String>> {
        self.inner.billing_customer(user_id).await
    }
    async fn put_billing_customer(
        &self,
        user_id: &str,
        customer_id: &str,
        at: Instant,
    ) -> Result<String> {
        self.inner
            .put_billing_customer(user_id, customer_id, at)
            .await
    }
    async fn apply_billing_event(&self, e: &BillingEvent) -> Result<BillingOutcome> {
        self.inner.apply_billing_event(e).await
    }
    async fn subscription(&self, user_id: &str) -> Result<Option<SubscriptionRecord>> {
        self.inner.subscription(user_id).await
    }
    async fn plan_changes(&self, user_id: &str) -> Result<Vec<PlanChange>> {
        self.inner.plan_changes(user_id).await
    }
}
#[async_trait::async_trait]
impl StateStore for Gated {
    fn backend(&self) -> &'static str {
        "gated"
    }
    async fn secret(&self, name: &str) -> Result<String> {
        self.inner.secret(name).await
    }
    /// Fails with the injected window fault, or never answers, as the window writes do.
    async fn ping(&self) -> Result<()> {
        self.pings.fetch_add(1, Ordering::SeqCst);
        if self.stall_hits.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if self.fail_hits.load(Ordering::SeqCst) {
            return Err(Error::Config(INJECTED_FAULT.into()));
        }
        self.inner.ping().await
    }
}

/// A signed-in browser's cookie for `email` (plan set by `plan`), as the sign-in routes make it.
pub async fn signed_in(t: &T, email: &str, plan: Plan) -> String {
    let user = t.store.upsert_user(email, plan).await.unwrap();
    let set = session::start(
        t.store.as_ref(),
        &t.state.options().sessions,
        &user,
        "email",
    )
    .await
    .unwrap();
    cookie_of(set.to_str().unwrap())
}

/// `name=value` of a `Set-Cookie` value.
pub fn cookie_of(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

pub async fn call(
    t: &T,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Res {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let body = match body {
        Some(v) => {
            b = b.header(header::CONTENT_TYPE, "application/json");
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    respond(t, b.body(body).unwrap()).await
}

pub fn with_cookie(c: &str) -> Vec<(&str, &str)> {
    vec![("cookie", c), ("sec-fetch-site", "same-origin")]
}

/// The path and query of a signed file URL (the oneshot router takes no origin).
pub fn local(url: &str) -> String {
    let u = url::Url::parse(url).unwrap();
    format!("{}?{}", u.path(), u.query().unwrap())
}

/// The query parameters of a described operation as a client sends them, each with its schema:
/// an object-valued parameter exploded in form style (the filer: `ticker` or `cik`) is sent as
/// its members, so those are listed in its place.
pub fn query_parameters(op: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    for p in op["parameters"].as_array().into_iter().flatten() {
        if p["in"] != "query" {
            continue;
        }
        match p["schema"]["oneOf"]
            .as_array()
            .filter(|_| p["explode"] == true)
        {
            Some(members) => {
                for m in members {
                    for (name, schema) in m["properties"].as_object().into_iter().flatten() {
                        out.push((name.clone(), schema.clone()));
                    }
                }
            }
            None => out.push((
                p["name"].as_str().unwrap_or("").to_owned(),
                p["schema"].clone(),
            )),
        }
    }
    out
}

/// An OFAC SDN row of January `day` 2026 (committed on the 5th).
pub fn ofac_row(id: &str, day: u8) -> asof_engine::NewsRow {
    let at = |s: &str| Instant::parse(s).unwrap();
    asof_engine::NewsRow {
        id: id.into(),
        source_id: asof_engine::SourceId::OfacSdn,
        lane: asof_engine::Lane::CertifiedPit,
        form: Some("sdn.added".into()),
        accession: None,
        cik: None,
        title: format!("entry {id}"),
        event_at: None,
        published_at: Some(at(&format!("2026-01-0{day}T12:00:00Z"))),
        available_at: None,
        acceptance_at: None,
        committed_at: Some(at("2026-01-05T00:00:00Z")),
        availability_basis: asof_engine::AvailabilityBasis::Unknown,
        revision_id: String::new(),
        supersedes: None,
        content_sha256: String::new(),
        source_locator: "https://sanctionslist.ofac.treas.gov/".into(),
        entity_id: Some(id.into()),
        payload: None,
    }
}

/// A state serving the second of two versions of a corpus of one OFAC day: the second
/// rewrites the day's partition, so the first version's file is not in the served one.
/// Returns the state and the two versions.
pub async fn one_day_rewritten() -> (T, String, String) {
    use asof_engine::write::publish::{ChangeSet, publish};
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(&dir.path().join("corpus")).unwrap();
    let one = |rows| ChangeSet {
        rows,
        ..Default::default()
    };
    let t0 = Instant::parse("2026-01-05T00:00:00Z").unwrap();
    let v1 = publish(&store, one(vec![ofac_row("a", 1)]), t0)
        .await
        .unwrap()
        .version;
    let t1 = Instant::parse("2026-01-06T00:00:00Z").unwrap();
    let v2 = publish(&store, one(vec![ofac_row("b", 1)]), t1)
        .await
        .unwrap()
        .version;
    let state_store = sqlite_store(dir.path()).await;
    let state = AppState::with_options(
        Corpus::open(store).await.unwrap(),
        state_store.clone(),
        Options::default(),
    )
    .await
    .unwrap();
    let key = key_for(&state_store, "r@example.com", Plan::Researcher).await;
    let t = T::new(dir, state, state_store, key);
    assert_eq!(t.state.corpus().version(), v2);
    (t, v1, v2)
}
