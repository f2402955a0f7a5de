//! The state one server process shares between requests (`AppState`) and what one request
//! carries through the stack (`Ctx`, `Caller`).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use asof_engine::{Corpus, ScanPool};

use crate::http::cursor::CursorSigner;
use crate::http::file_url::FileUrlSigner;
use crate::plan::PUBLIC_REQUESTS_PER_MINUTE;
use crate::signin::SignInConfig;
use crate::signin::mail::Mailer;
use crate::signin::oidc::{Provider, ProviderConfig, ProviderName};
use crate::signin::session::SessionOptions;
use crate::state::audit::Audit;
use crate::state::key_cache::KeyCache;
use crate::state::rate::RateWindows;
use crate::state::usage::Usage;
use crate::state::{KeyRecord, StateStore, User};
use asof_answer::Pager;

/// Shared state of one server process. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    corpus: RwLock<Arc<Corpus>>,
    store: Arc<dyn StateStore>,
    /// Opens and mints every paged route's cursors (and signs MCP sessions).
    pager: Pager,
    file_urls: FileUrlSigner,
    opts: Options,
    audit: Audit,
    rate: Arc<RateWindows>,
    usage: Arc<Usage>,
    keys: KeyCache,
    /// Refused credentials per client address (what a flood of made-up keys costs).
    refusals: crate::state::refusals::Refusals,
    /// Session ids the store answered unknown (repeating one costs no lookup).
    unknown_sessions: crate::state::key_cache::Unknown,
    /// Sign-in mails waiting for their address to be under its ceiling, by (address, client).
    waiting_links: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Where walks and scans run (threads, slots, row budget), shared by every version served.
    scans: ScanPool,
    /// The live stream's log of what each loaded version added.
    stream: crate::http::stream::Hub,
    /// Sign-in by e-mail link, when configured.
    mailer: Option<Mailer>,
    /// OpenID Connect providers A and B, when configured.
    providers: [Option<Provider>; 2],
    /// Bring-your-own-key daily bars (`/v1/connectors/{vendor}/bars`).
    connector: crate::connector::Connector,
    /// Payment processing, when every setting is given (else the settings missing).
    billing: Result<crate::billing::Billing, Vec<&'static str>>,
    /// Seals OAuth flow cookies (a state-store secret, the same on every replica).
    flow_key: Vec<u8>,
    /// Values derived from one corpus version (the rendered description), by type.
    per_version: Mutex<HashMap<TypeId, PerVersion>>,
    /// The Delta logs `/delta-sharing` reads, kept across corpus versions (commits are
    /// immutable; a new version only adds some).
    delta_logs: asof_engine::read::delta::LogCache,
    /// Whether the replica should get traffic (`GET /ready`).
    readiness: crate::http::ready::Readiness,
    /// The retained versions pinned requests are answered from, and the loaded ones.
    versions: asof_answer::versions::Versions,
}

/// A value derived from the corpus version it names.
type PerVersion = (String, Arc<dyn Any + Send + Sync>);

/// Default of [`Options::file_requests_per_minute`].
pub const FILE_REQUESTS_PER_MINUTE: u32 = 1200;

/// The share of the cores the scan pool may keep busy by default: on two cores half of one,
/// so broad questions in flight leave the by-filer path most of the machine (BENCHMARKS.md,
/// isolation).
pub const DEFAULT_SCAN_CPU_SHARE: f64 = 0.25;

/// Settings of one server process besides its corpus and state store.
#[derive(Debug, Clone)]
pub struct Options {
    /// The proxies in front of the service, by address or network: a request whose socket
    /// peer is one of them has its `X-Forwarded-For` / `X-Forwarded-Proto` believed
    /// (`crate::http::client`); from anyone else they are ignored.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The IPv6 prefix length one client counts as in every per-address bucket.
    pub ipv6_prefix: u8,
    /// Refused credentials (unknown, revoked or expired keys, unknown or ended sessions) one
    /// client address may present per minute on one replica; past it, credentials this
    /// replica has not verified recently are answered `429` without a state-store lookup.
    pub bad_credentials_per_minute: u32,
    /// Sign-in links mailed to one e-mail address per 15 minutes by all clients together;
    /// past it, delivery waits (`crate::signin::mail::LINKS_PER_ADDRESS_CEILING`).
    pub mail_ceiling: u32,
    /// Bound of the audit receipt queue (the spec's 1,200; tests use tiny ones).
    pub audit_queue_capacity: usize,
    /// Requests per minute one client address may make to the public rate-limited routes.
    pub public_requests_per_minute: u32,
    /// Longest a request may take before it is answered `503 timeout`.
    pub request_timeout: Duration,
    /// Walks and scans (every page the access index does not answer) allowed to run at once.
    pub max_concurrent_scans: usize,
    /// How long a scan waits for a free slot before the request is answered `503 overloaded`.
    pub scan_wait: Duration,
    /// Threads of the scan pool (0: half the cores, at least one).
    pub scan_threads: usize,
    /// The share of the machine's cores the scan pool's work may keep busy together, in
    /// (0, 1]; 1 bounds nothing beyond its threads.
    pub scan_cpu_share: f64,
    /// Rows one walk or scan may look at before the request is answered `400 query_too_broad`.
    pub max_walk_rows: u64,
    /// How long a file URL (`/v1/files`) stays valid.
    pub file_url_ttl: Duration,
    /// Requests per minute one client address may make to signed file URLs (a Parquet reader
    /// makes several range requests per file).
    pub file_requests_per_minute: u32,
    /// The origin clients reach this service at (`https://api.example.com`), for the URLs it
    /// signs itself; `None`: the request's `Host` (and, behind a trusted proxy,
    /// `X-Forwarded-Proto`).
    pub public_url: Option<String>,
    /// The live stream's limits (`/v1/stream`).
    pub stream: crate::http::stream::StreamOptions,
    /// Session lifetimes and the cookie's `Secure` attribute.
    pub sessions: SessionOptions,
    /// Which sign-in ways are configured.
    pub sign_in: SignInConfig,
    /// The payment processor's settings.
    pub billing: crate::billing::BillingConfig,
    /// The connector's vendors.
    pub connector: crate::connector::ConnectorConfig,
    /// Which published versions pinned requests (`corpus_version=`) are answered from.
    pub retention: asof_answer::versions::Retention,
    /// How many pinned versions stay loaded besides the served one.
    pub version_cache: asof_answer::versions::CacheBounds,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            trusted_proxies: Vec::new(),
            ipv6_prefix: crate::http::client::DEFAULT_IPV6_PREFIX,
            bad_credentials_per_minute: crate::plan::BAD_CREDENTIALS_PER_MINUTE,
            mail_ceiling: crate::signin::mail::LINKS_PER_ADDRESS_CEILING,
            audit_queue_capacity: crate::state::audit::DEFAULT_QUEUE_CAPACITY,
            public_requests_per_minute: PUBLIC_REQUESTS_PER_MINUTE,
            request_timeout: Duration::from_secs(30),
            max_concurrent_scans: 8,
            scan_wait: Duration::from_secs(2),
            scan_threads: 0,
            scan_cpu_share: DEFAULT_SCAN_CPU_SHARE,
            max_walk_rows: asof_engine::read::scan_pool::DEFAULT_MAX_ROWS,
            file_url_ttl: Duration::from_secs(15 * 60),
            file_requests_per_minute: FILE_REQUESTS_PER_MINUTE,
            public_url: None,
            stream: crate::http::stream::StreamOptions::default(),
            sessions: SessionOptions::default(),
            sign_in: SignInConfig::default(),
            billing: crate::billing::BillingConfig::default(),
            connector: crate::connector::ConnectorConfig::default(),
            retention: Default::default(),
            version_cache: Default::default(),
        }
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("corpus", &self.corpus().version())
            .finish()
    }
}

impl AppState {
    /// Builds the state; the cursor and file-URL secrets are read from (or created in) the
    /// state store, so every replica sharing the store signs and verifies the same tokens.
    pub async fn new(corpus: Corpus, store: Arc<dyn StateStore>) -> crate::error::Result<Self> {
        Self::with_options(corpus, store, Options::default()).await
    }

    /// As [`AppState::new`] with every setting explicit; starts the audit writer task and the
    /// rate-window flusher.
    pub async fn with_options(
        corpus: Corpus,
        store: Arc<dyn StateStore>,
        opts: Options,
    ) -> crate::error::Result<Self> {
        let secret = store.secret("cursor_hmac").await?;
        let file_secret = store.secret("file_url_hmac").await?;
        let flow_key = store.secret("oauth_flow_hmac").await?.into_bytes();
        if opts.sign_in.mail.is_some() && opts.public_url.is_none() {
            // Links are built on the configured origin, never on a request's Host header
            // (a client could make the service mail a link to its own site).
            return Err(crate::error::Error::Config(
                "e-mail sign-in needs --public-url (the origin sign-in links point to)".into(),
            ));
        }
        let mailer = match &opts.sign_in.mail {
            Some((url, from)) => Some(Mailer::new(url.expose(), from)?),
            None => None,
        };
        let provider =
            |name, cfg: &Option<ProviderConfig>| -> crate::error::Result<Option<Provider>> {
                cfg.clone().map(|c| Provider::new(name, c)).transpose()
            };
        let providers = [
            provider(ProviderName::A, &opts.sign_in.provider_a)?,
            provider(ProviderName::B, &opts.sign_in.provider_b)?,
        ];
        let billing = match crate::billing::Billing::from_config(&opts.billing)? {
            Some(b) => Ok(b),
            None => {
                let missing = opts.billing.missing();
                if missing.len() < 6 {
                    // Some settings given, some not: most likely a mistake worth a warning.
                    tracing::warn!(?missing, "billing is partly configured and stays off");
                }
                Err(missing)
            }
        };
        if billing.is_ok() && opts.public_url.is_none() {
            // Checkout and portal send the browser back to the service's own pages.
            return Err(crate::error::Error::Config(
                "billing needs --public-url (the origin checkout and the portal return to)".into(),
            ));
        }
        let connector = crate::connector::Connector::new(&opts.connector)?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let threads = match opts.scan_threads {
            0 => cores.div_ceil(2),
            n => n,
        };
        if !(opts.scan_cpu_share > 0.0 && opts.scan_cpu_share <= 1.0) {
            return Err(crate::error::Error::Config(format!(
                "--scan-cpu-share must lie in (0, 1], not {}",
                opts.scan_cpu_share
            )));
        }
        let scans = ScanPool::new(
            threads,
            opts.max_concurrent_scans,
            opts.scan_wait,
            opts.max_walk_rows,
            Some(opts.scan_cpu_share * cores as f64),
        )
        .map_err(|e| crate::error::Error::Config(format!("the scan pool cannot start: {e}")))?;
        let mut corpus = corpus;
        corpus.set_scan_pool(scans.clone());
        corpus.set_row_encoder(Arc::new(crate::http::envelope::keyed_record_json));
        let stream = crate::http::stream::Hub::new(corpus.version(), opts.stream.clone());
        let rate = RateWindows::new(store.clone());
        rate.start_flusher();
        let usage = Usage::new(store.clone());
        usage.start_flusher();
        // A pinned version runs its walks on the same pool, and encodes rows as the served one.
        let pool = scans.clone();
        let versions = asof_answer::versions::Versions::new(
            opts.retention,
            opts.version_cache,
            Some(Arc::new(move |c: &mut Corpus| {
                c.set_scan_pool(pool.clone());
                c.set_row_encoder(Arc::new(crate::http::envelope::keyed_record_json));
            })),
        );
        Ok(AppState {
            inner: Arc::new(Inner {
                corpus: RwLock::new(Arc::new(corpus)),
                audit: Audit::start(store.clone(), opts.audit_queue_capacity),
                store,
                pager: Pager::new(&secret),
                file_urls: FileUrlSigner::new(&file_secret),
                rate,
                usage,
                keys: KeyCache::new(crate::state::key_cache::TTL),
                refusals: crate::state::refusals::Refusals::new(opts.bad_credentials_per_minute),
                waiting_links: Default::default(),
                unknown_sessions: Default::default(),
                per_version: Mutex::default(),
                delta_logs: Default::default(),
                readiness: Default::default(),
                versions,
                stream,
                scans,
                mailer,
                providers,
                billing,
                connector,
                flow_key,
                opts,
            }),
        })
    }

    /// Whether the replica should get traffic (`GET /ready`).
    pub fn readiness(&self) -> &crate::http::ready::Readiness {
        &self.inner.readiness
    }

    /// The corpus version being served now. A request keeps the snapshot it started with.
    pub fn corpus(&self) -> Arc<Corpus> {
        self.inner.corpus.read().expect("corpus lock").clone()
    }

    /// Atomically serves a new corpus; in-flight requests finish on the one they hold.
    pub fn swap_corpus(&self, mut corpus: Corpus) {
        corpus.set_scan_pool(self.inner.scans.clone());
        corpus.set_row_encoder(Arc::new(crate::http::envelope::keyed_record_json));
        *self.inner.corpus.write().expect("corpus lock") = Arc::new(corpus);
    }

    /// The retained versions pinned requests are answered from.
    pub fn versions(&self) -> &asof_answer::versions::Versions {
        &self.inner.versions
    }

    /// The Delta logs of the corpus's tables (`/delta-sharing`).
    pub fn delta_logs(&self) -> &asof_engine::read::delta::LogCache {
        &self.inner.delta_logs
    }

    /// The live stream's shared log (`/v1/stream`).
    pub fn stream(&self) -> &crate::http::stream::Hub {
        &self.inner.stream
    }

    /// The e-mail sign-in sender, when configured.
    pub fn mailer(&self) -> Option<&Mailer> {
        self.inner.mailer.as_ref()
    }

    /// A configured sign-in provider.
    pub fn provider(&self, name: ProviderName) -> Option<&Provider> {
        self.inner.providers[match name {
            ProviderName::A => 0,
            ProviderName::B => 1,
        }]
        .as_ref()
    }

    /// Payment processing, or `503 billing_not_configured` naming the settings missing.
    pub fn billing(&self) -> Result<&crate::billing::Billing, crate::error::ApiError> {
        self.inner.billing.as_ref().map_err(|missing| {
            crate::error::ApiError::BillingNotConfigured(format!(
                "payment processing is not configured on this server (missing: {})",
                missing.join(", ")
            ))
        })
    }

    /// The bring-your-own-key connector.
    pub fn connector(&self) -> &crate::connector::Connector {
        &self.inner.connector
    }

    /// The key OAuth flow cookies are sealed with.
    pub fn flow_key(&self) -> &[u8] {
        &self.inner.flow_key
    }

    /// This service's own origin (`https://api.example.com`): `--public-url`, else
    /// `http://localhost`. Sign-in links are built on it (never on a request's `Host`, which
    /// a client chooses), and cookie-authenticated writes must come from it.
    pub fn own_origin(&self) -> String {
        self.options().public_url.as_deref().map_or_else(
            || "http://localhost".to_owned(),
            |u| u.trim_end_matches('/').to_owned(),
        )
    }

    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.inner.store
    }

    pub fn pager(&self) -> &Pager {
        &self.inner.pager
    }

    /// The cursor key's signer, for tokens that are not page cursors (MCP sessions).
    pub fn signer(&self) -> &CursorSigner {
        self.inner.pager.signer()
    }

    /// How this request's file URLs are signed: for the configured `--public-url`, else the
    /// origin the client reached (its `Host`, and `https` only from a trusted proxy's
    /// `X-Forwarded-Proto`).
    pub fn signing(&self, headers: &axum::http::HeaderMap) -> crate::http::file_url::Signing<'_> {
        let origin = match &self.options().public_url {
            Some(_) => self.own_origin(),
            None => {
                let host = headers
                    .get(axum::http::header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .filter(|h| !h.is_empty() && !h.contains(['/', ' ', '?', '#', '@']))
                    .unwrap_or("localhost");
                let proto = headers
                    .get(crate::http::client::X_FORWARDED_PROTO)
                    .and_then(|v| v.to_str().ok())
                    // The guard drops the header from a request no trusted proxy sent.
                    .filter(|p| *p == "https")
                    .unwrap_or("http");
                format!("{proto}://{host}")
            }
        };
        crate::http::file_url::Signing {
            signer: self.file_urls(),
            ttl: self.options().file_url_ttl,
            origin,
        }
    }

    /// Signs and verifies the service's own file URLs (see [`FileUrlSigner`]).
    pub fn file_urls(&self) -> &FileUrlSigner {
        &self.inner.file_urls
    }

    pub fn audit(&self) -> &Audit {
        &self.inner.audit
    }

    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// The scan pool every served version shares.
    pub fn scans(&self) -> &ScanPool {
        &self.inner.scans
    }

    pub(crate) fn rate(&self) -> &Arc<RateWindows> {
        &self.inner.rate
    }

    /// Requests per user, key, day and route group (written behind).
    pub fn usage(&self) -> &Usage {
        &self.inner.usage
    }

    pub(crate) fn keys(&self) -> &KeyCache {
        &self.inner.keys
    }

    pub(crate) fn refusals(&self) -> &crate::state::refusals::Refusals {
        &self.inner.refusals
    }

    pub(crate) fn unknown_sessions(&self) -> &crate::state::key_cache::Unknown {
        &self.inner.unknown_sessions
    }

    /// Sign-in mails waiting for their address's ceiling (`routes::auth`).
    pub fn waiting_links(&self) -> WaitingLinks<'_> {
        WaitingLinks(&self.inner.waiting_links)
    }

    /// Writes the rate-limit counts this replica holds to the state store (the flusher does
    /// this every 250 ms; shutdown and tests call it directly).
    pub async fn flush_rate_windows(&self) -> crate::error::Result<()> {
        self.inner.rate.flush().await
    }

    /// Requests per minute one client address may make to the public rate-limited routes.
    pub fn public_requests_per_minute(&self) -> u32 {
        self.inner.opts.public_requests_per_minute
    }

    /// A value derived from `corpus` alone, made once per corpus version and shared (the
    /// rendered description is one). `make` runs outside the lock; two racing requests may
    /// both make it, and either result is the same.
    pub fn per_version<T: Send + Sync + 'static>(
        &self,
        corpus: &Corpus,
        make: impl FnOnce(&Corpus) -> T,
    ) -> Arc<T> {
        let key = TypeId::of::<T>();
        if let Some((v, any)) = self.inner.per_version.lock().expect("memo lock").get(&key)
            && v == corpus.version()
            && let Ok(t) = any.clone().downcast::<T>()
        {
            return t;
        }
        let made = Arc::new(make(corpus));
        self.inner.per_version.lock().expect("memo lock").insert(
            key,
            (
                corpus.version().to_owned(),
                made.clone() as Arc<dyn Any + Send + Sync>,
            ),
        );
        made
    }
}

/// Per-request context, inserted by the `context` middleware.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub request_id: crate::http::request_id::RequestId,
    pub corpus: Arc<Corpus>,
}

/// The pinned version that answered a request (set by the guard on the response, so the
/// `context` layer names it in the headers, caching and receipt instead of the served one).
#[derive(Debug, Clone)]
pub struct Pinned(pub Arc<Corpus>);

/// The authenticated caller of a keyed route.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Shared with the key cache: a caller is copied into a request's and its response's
    /// extensions, and a copy is two reference counts.
    pub key: Arc<KeyRecord>,
    pub user: Arc<User>,
}

/// Who an account route acts for: a key's owner, or a browser signed in with the session
/// cookie. Keyed requests also carry their [`Caller`] (rate limits, receipts); a session
/// carries none, so its requests are never attributed to a key (`unattributed`).
#[derive(Debug, Clone)]
pub enum Principal {
    Key(Caller),
    Session(crate::signin::session::Session),
}

impl Principal {
    pub fn user(&self) -> &User {
        match self {
            Principal::Key(c) => &c.user,
            Principal::Session(s) => &s.user,
        }
    }
}

/// Marks a request of the sample tier that reached a route which is not itself a sample
/// route (the keyless MCP `svc_meta`): its answer is watermarked `sample: true`. Set only
/// in process (a request extension), never from a client header.
#[derive(Debug, Clone, Copy)]
pub struct SampleTier;

/// Set by the guard of a route that answers a refused key itself (the MCP endpoint, whose
/// refusals are JSON-RPC errors): why the request's key was refused.
#[derive(Debug, Clone)]
pub struct RefusedKey(pub String);

/// The set of sign-in mails waiting for their address to be under its ceiling, one per
/// (address, client) pair, bounded so a flood from many clients holds little.
pub struct WaitingLinks<'a>(&'a Mutex<std::collections::HashSet<String>>);

/// Sign-in mails one process keeps waiting at most; past it, a new one is not kept (its
/// request is answered the same; the asker may ask again later).
const MAX_WAITING_LINKS: usize = 10_000;

impl WaitingLinks<'_> {
    /// Keeps `pair` waiting; false when it already is (or the set is full).
    pub fn insert(&self, pair: String) -> bool {
        let mut set = self.0.lock().expect("waiting links lock");
        set.len() < MAX_WAITING_LINKS && set.insert(pair)
    }

    pub fn remove(&self, pair: &str) {
        self.0.lock().expect("waiting links lock").remove(pair);
    }

    /// How many mails wait now.
    pub fn len(&self) -> usize {
        self.0.lock().expect("waiting links lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
