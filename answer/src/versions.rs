//! Pinned corpus versions: which published versions a deployment still answers from
//! (retention), and the loaded ones kept in a bounded cache beside the served version.
//!
//! A request that names `corpus_version` is answered by that version when it is on the chain
//! of versions the served one descends from (each manifest names its `parent`) and the
//! retention policy keeps it; otherwise it is refused, `404 corpus_version_unknown` (never
//! published here: no served version descends from it) or `410 corpus_version_not_retained`.
//!
//! Why the chain and not "a manifest exists": a publish that lost the pointer's
//! compare-and-swap leaves its manifest behind, and that version never answered anyone; a
//! receipt cannot name it, so a pin to it is as unknown as a made-up hash.
//!
//! Cost: the chain is learnt once per process by reading each older manifest's `parent` and
//! `created_at` (kept, a few dozen bytes a version; later versions are learnt from the served
//! manifest already in memory), so an unknown version costs no I/O once the chain is known.
//! A retained version is loaded on first use with `Corpus::open_after` from the served one,
//! which takes over every object the two share (the identity index, access files, each
//! partition's supersessions, the late lanes): N versions of a corpus that grows by a day cost
//! far less than N corpora (`benches/pinned.py` measures it). The served version never enters
//! the cache and never waits on it: the cache's lock is held for map lookups only, and a
//! cold load runs outside it, once per version however many requests ask (a per-version
//! `OnceCell`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use asof_engine::{Corpus, Instant};
use tokio::sync::OnceCell;

use crate::Error;
use crate::params::Pin;

/// Default of [`Retention::days`]: seven years (2,557 days). Why: broker-dealer books and
/// records are kept six years (SEC Rule 17a-4) and investment firms' records five to seven
/// (MiFID II art. 16(6)); a replay must be possible for as long as the decision it evidences
/// may be examined. Objects are immutable and shared between versions, so retaining a
/// version costs its manifest, not its data.
pub const DEFAULT_RETAIN_DAYS: u32 = 2557;
/// Default of [`CacheBounds::versions`]: loaded versions kept besides the served one.
pub const DEFAULT_CACHE_VERSIONS: usize = 8;

/// Which published versions a deployment answers pinned requests from. A version is retained
/// while it is within every bound given; the served version always is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Only the newest this many versions of the chain, the served one included.
    pub versions: Option<usize>,
    /// Only versions served at some moment of the last this many days: superseded (their
    /// successor published) at most this long ago.
    pub days: Option<u32>,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            versions: None,
            days: Some(DEFAULT_RETAIN_DAYS),
        }
    }
}

impl Retention {
    /// Why the version `position` places behind the served one (0: the served version),
    /// superseded at `superseded_at`, is not retained at `now`; `None` when it is.
    fn refuses(
        &self,
        position: usize,
        superseded_at: Option<Instant>,
        now: Instant,
    ) -> Option<String> {
        if position == 0 {
            return None;
        }
        if let Some(n) = self.versions
            && position >= n
        {
            return Some(format!(
                "this deployment retains the newest {n} corpus version(s) and this one is {} behind the served version",
                position
            ));
        }
        if let (Some(d), Some(at)) = (self.days, superseded_at) {
            let age_days = (now.micros() - at.micros()).div_euclid(86_400_000_000);
            if age_days >= i64::from(d) {
                return Some(format!(
                    "this deployment retains versions served within the last {d} day(s) and this one was superseded at {at}"
                ));
            }
        }
        None
    }
}

/// How many loaded versions the cache keeps besides the served one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBounds {
    pub versions: usize,
}

impl Default for CacheBounds {
    fn default() -> Self {
        CacheBounds {
            versions: DEFAULT_CACHE_VERSIONS,
        }
    }
}

/// The version a query string pins with `corpus_version`: `None` without one, or with a value
/// the route's query parser refuses itself (malformed, or sent twice), so the refusal is the
/// parser's, with its message.
pub fn pin_of(query: Option<&str>) -> Option<Pin> {
    let query = query?;
    // Every page of a pinned route passes here and most name no version: the query is decoded
    // only when its raw text could name one (the name itself, or a percent-encoding that may
    // spell it, which the route's parser would decode and accept).
    if !query.contains("corpus_version") && !query.contains('%') {
        return None;
    }
    // Names decoded, values only the one named (a cut's instant is percent-encoded, and
    // decoding it here, for nothing, cost more than the rest of this check).
    let mut named = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if crate::params::decode(k) == "corpus_version" {
            if named.is_some() {
                return None;
            }
            named = Some(crate::params::decode(v).into_owned());
        }
    }
    Pin::parse("corpus_version", &named?).ok()
}

/// A manifest's place in the chain: its parent and when it was published.
#[derive(Debug, Clone)]
struct Link {
    parent: Option<String>,
    created_at: Instant,
}

/// The chain below one served version: each version's position (0: the served one) and when
/// it was superseded (its child's `created_at`).
#[derive(Debug)]
struct Chain {
    head: String,
    places: HashMap<String, (usize, Instant)>,
}

/// What becomes of a version the cache loads, before it answers (the server gives it its
/// scan pool and row encoder, as it does the served version).
pub type Prepare = Arc<dyn Fn(&mut Corpus) + Send + Sync>;

struct Slot {
    cell: Arc<OnceCell<Arc<Corpus>>>,
    used: u64,
}

#[derive(Default)]
struct Cache {
    slots: HashMap<String, Slot>,
    tick: u64,
}

/// The retained versions of one deployment and the loaded ones among them.
pub struct Versions {
    retention: Retention,
    bounds: CacheBounds,
    prepare: Option<Prepare>,
    /// Every manifest's link read so far (facts about immutable objects: never stale).
    links: Mutex<HashMap<String, Link>>,
    /// The chains below the served version and below the store's pointer, when it differs.
    chains: Mutex<Vec<Arc<Chain>>>,
    /// When the store's pointer was last read for a version not below the served one.
    pointer_read: Mutex<Option<std::time::Instant>>,
    /// One walk of the chain at a time (a second asker waits and reuses it).
    walking: tokio::sync::Mutex<()>,
    cache: Mutex<Cache>,
    loads: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for Versions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Versions")
            .field("retention", &self.retention)
            .field("bounds", &self.bounds)
            .finish()
    }
}

impl Versions {
    pub fn new(retention: Retention, bounds: CacheBounds, prepare: Option<Prepare>) -> Self {
        Versions {
            retention,
            bounds,
            prepare,
            links: Mutex::default(),
            chains: Mutex::default(),
            pointer_read: Mutex::default(),
            walking: tokio::sync::Mutex::new(()),
            cache: Mutex::default(),
            loads: Default::default(),
        }
    }

    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// Versions loaded from the store since start (a cold load each; tests and metrics).
    pub fn loads(&self) -> u64 {
        self.loads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The versions loaded now, besides the served one.
    pub fn cached(&self) -> Vec<String> {
        let cache = self.cache.lock().expect("version cache lock");
        cache
            .slots
            .iter()
            .filter(|(_, s)| s.cell.initialized())
            .map(|(v, _)| v.clone())
            .collect()
    }

    /// The version answering a request: `served` without a pin (or pinned to it), else the
    /// pinned version when it is retained, or the refusal saying why not.
    pub async fn resolve(
        &self,
        served: &Arc<Corpus>,
        pin: Option<&Pin>,
    ) -> Result<Arc<Corpus>, Error> {
        let Some(pin) = pin else {
            return Ok(served.clone());
        };
        if pin.as_str() == served.version() {
            return Ok(served.clone());
        }
        self.check(served, pin.as_str()).await?;
        self.load(served, pin.as_str()).await
    }

    /// Learns the chain below `served` now (each older manifest's parent and creation time),
    /// so the first pinned request does not wait for it: a server calls it in the background
    /// after it starts serving. Errors are the first pinned request's to report.
    pub async fn learn_chain(&self, served: &Corpus) {
        let started = std::time::Instant::now();
        match self.chain(served, served.version()).await {
            Ok(chain) => tracing::info!(
                versions = chain.places.len(),
                ms = started.elapsed().as_millis() as u64,
                "the manifest chain is learnt"
            ),
            Err(e) => tracing::warn!(
                error = %e,
                "the manifest chain could not be read; pinned requests will try again"
            ),
        }
    }

    /// Whether `version` is retained: `Ok` or the refusal.
    ///
    /// Replicas reload on their own clocks, so a version another replica already serves may
    /// be newer than this one's: a version not below the served one is looked for below the
    /// store's pointer too (read at most once a second), and answered when found there.
    pub async fn check(&self, served: &Corpus, version: &str) -> Result<(), Error> {
        let chain = self.chain(served, served.version()).await?;
        let place = match chain.places.get(version) {
            Some(p) => Some(*p),
            None => self.newer(served, version).await?,
        };
        match place {
            None => Err(Error::VersionUnknown {
                version: version.to_owned(),
            }),
            Some((position, superseded_at)) => {
                match self
                    .retention
                    .refuses(position, Some(superseded_at), Instant::now())
                {
                    Some(why) => Err(Error::VersionNotRetained {
                        version: version.to_owned(),
                        why,
                    }),
                    None => Ok(()),
                }
            }
        }
    }

    /// `version`'s place when the store's pointer has moved past `served` to a chain holding
    /// it above `served` (a newer version this replica has not reloaded yet): position 0.
    async fn newer(
        &self,
        served: &Corpus,
        version: &str,
    ) -> Result<Option<(usize, Instant)>, Error> {
        {
            let mut last = self.pointer_read.lock().expect("pointer lock");
            if last.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1)) {
                return Ok(None);
            }
            *last = Some(std::time::Instant::now());
        }
        let Some(head) = served
            .store()
            .current_version()
            .await
            .map_err(Error::from)?
        else {
            return Ok(None);
        };
        if head == served.version() {
            return Ok(None);
        }
        let chain = self.chain(served, &head).await?;
        let Some(&(p, at)) = chain.places.get(version) else {
            return Ok(None);
        };
        Ok(Some(match chain.places.get(served.version()) {
            // Newer than what this replica serves: retained as the served version is.
            Some(&(s, _)) if p < s => (0, Instant::now()),
            _ => (p, at),
        }))
    }

    /// The chain below `head` (the served version, or the store's pointer), learnt once per
    /// head (older links are kept).
    async fn chain(&self, served: &Corpus, head: &str) -> Result<Arc<Chain>, Error> {
        let cached = |this: &Self| {
            this.chains
                .lock()
                .expect("chain lock")
                .iter()
                .find(|c| c.head == head)
                .cloned()
        };
        if let Some(c) = cached(self) {
            return Ok(c);
        }
        let _walk = self.walking.lock().await;
        if let Some(c) = cached(self) {
            return Ok(c);
        }
        let m = served.manifest();
        self.links.lock().expect("links lock").insert(
            served.version().to_owned(),
            Link {
                parent: m.parent.clone(),
                created_at: m.created_at,
            },
        );
        let mut places = HashMap::new();
        let mut at = head.to_owned();
        let mut child_created: Option<Instant> = None;
        let mut position = 0usize;
        loop {
            let known = self.links.lock().expect("links lock").get(&at).cloned();
            let link = match known {
                Some(l) => l,
                None => {
                    let (store, v) = (served.store().clone(), at.clone());
                    let (parent, created_at) =
                        detached(async move { store.manifest_link(&v).await }).await?;
                    let l = Link { parent, created_at };
                    self.links
                        .lock()
                        .expect("links lock")
                        .insert(at.clone(), l.clone());
                    l
                }
            };
            // The head is superseded by nothing: `now` stands in (it is never refused).
            let superseded_at = child_created.unwrap_or_else(Instant::now);
            if places
                .insert(at.clone(), (position, superseded_at))
                .is_some()
            {
                // A manifest naming a descendant as its parent: stop rather than loop.
                tracing::error!(version = %at, "the manifest chain has a cycle");
                break;
            }
            let Some(parent) = link.parent else { break };
            child_created = Some(link.created_at);
            position += 1;
            at = parent;
        }
        let chain = Arc::new(Chain {
            head: head.to_owned(),
            places,
        });
        let mut chains = self.chains.lock().expect("chain lock");
        // The served version's chain and the pointer's: two suffice.
        chains.retain(|c| c.head == served.version() || c.head == head);
        chains.push(chain.clone());
        Ok(chain)
    }

    /// The loaded version `version` (retained: the caller checked), from the cache or loaded
    /// now from the store after `served`.
    async fn load(&self, served: &Arc<Corpus>, version: &str) -> Result<Arc<Corpus>, Error> {
        let cell = {
            let mut cache = self.cache.lock().expect("version cache lock");
            cache.tick += 1;
            let tick = cache.tick;
            let slot = cache
                .slots
                .entry(version.to_owned())
                .or_insert_with(|| Slot {
                    cell: Arc::new(OnceCell::new()),
                    used: tick,
                });
            slot.used = tick;
            slot.cell.clone()
        };
        let loaded = cell
            .get_or_try_init(|| {
                let (served, version) = (served.clone(), version.to_owned());
                let prepare = self.prepare.clone();
                let loads = self.loads.clone();
                detached(async move {
                    let store = served.store().clone();
                    let manifest = store.manifest(&version).await?;
                    let mut corpus =
                        Corpus::open_after(store, &version, manifest, Some(&served)).await?;
                    if let Some(p) = &prepare {
                        p(&mut corpus);
                    }
                    loads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Ok(Arc::new(corpus))
                })
            })
            .await?
            .clone();
        self.evict(version);
        Ok(loaded)
    }

    /// Drops the least recently used loaded versions past the bound (never `keep`, just
    /// asked for). A dropped version lives on in the requests holding it.
    fn evict(&self, keep: &str) {
        let mut cache = self.cache.lock().expect("version cache lock");
        // Slots whose load failed or is in flight count too: a flood of distinct pins cannot
        // grow the map past the bound.
        while cache.slots.len() > self.bounds.versions.max(1) {
            let Some(oldest) = cache
                .slots
                .iter()
                .filter(|(v, _)| v.as_str() != keep)
                .min_by_key(|(_, s)| s.used)
                .map(|(v, _)| v.clone())
            else {
                break;
            };
            cache.slots.remove(&oldest);
        }
    }
}

/// Runs a store read or a load on a task of its own: it finishes (and its result is cached)
/// even when the request that began it goes away, and the request's future stays `Send`
/// whatever the engine's futures hold across their awaits.
async fn detached<T: Send + 'static>(
    work: impl std::future::Future<Output = asof_engine::Result<T>> + Send + 'static,
) -> Result<T, Error> {
    match tokio::spawn(work).await {
        Ok(r) => r.map_err(Error::from),
        Err(e) => {
            tracing::error!(error = %e, "a version load panicked");
            Err(Error::Internal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    #[test]
    fn the_served_version_is_always_retained_and_each_bound_refuses_past_it() {
        let now = at("2026-12-04T00:00:00Z");
        let both = Retention {
            versions: Some(3),
            days: Some(30),
        };
        assert_eq!(both.refuses(0, None, now), None);
        assert_eq!(both.refuses(2, Some(at("2026-11-20T00:00:00Z")), now), None);
        let by_count = both
            .refuses(3, Some(at("2026-12-01T00:00:00Z")), now)
            .unwrap();
        assert!(by_count.contains("newest 3"), "{by_count}");
        let by_age = both
            .refuses(1, Some(at("2026-11-04T00:00:00Z")), now)
            .unwrap();
        assert!(by_age.contains("last 30 day"), "{by_age}");
        // 29 days and 23 hours ago is still within 30 days.
        assert_eq!(both.refuses(1, Some(at("2026-11-04T00:00:01Z")), now), None);
        let default = Retention::default();
        assert_eq!(
            default.refuses(5000, Some(at("2020-01-01T00:00:00Z")), now),
            None
        );
        assert!(
            default
                .refuses(1, Some(at("2019-01-01T00:00:00Z")), now)
                .is_some()
        );
    }

    /// A store with `n` versions published one after another (each a note of its own, a day
    /// apart), and the current one loaded.
    async fn chain_of(n: usize) -> (tempfile::TempDir, Vec<String>, Arc<Corpus>) {
        use asof_engine::write::publish::{ChangeSet, publish};
        let dir = tempfile::tempdir().unwrap();
        let store = asof_engine::CorpusStore::local(dir.path()).unwrap();
        let mut versions = Vec::new();
        for i in 0..n {
            let changes = ChangeSet {
                notes: [("step".to_owned(), i.to_string())].into(),
                ..Default::default()
            };
            let when = Instant::from_micros(
                at("2026-11-01T00:00:00Z").micros() + i as i64 * 86_400_000_000,
            );
            versions.push(publish(&store, changes, when).await.unwrap().version);
        }
        let served = Arc::new(Corpus::open(store).await.unwrap());
        assert_eq!(served.version(), versions[n - 1]);
        (dir, versions, served)
    }

    #[test]
    fn a_query_pins_only_with_one_well_formed_corpus_version_however_it_is_encoded() {
        let v = format!("sha256:{}", "0a".repeat(32));
        assert_eq!(pin_of(None), None);
        assert_eq!(pin_of(Some("ticker=TSLA&as_of=2026-01-29T12:00:00Z")), None);
        assert_eq!(
            pin_of(Some(&format!("ticker=TSLA&corpus_version={v}"))),
            Some(Pin(v.clone()))
        );
        let encoded = format!("corpus%5Fversion={}", v.replace(':', "%3A"));
        assert_eq!(pin_of(Some(&encoded)), Some(Pin(v.clone())));
        // Sent twice or malformed: no pin here; the route's parser refuses it with its message.
        assert_eq!(
            pin_of(Some(&format!("corpus_version={v}&corpus_version={v}"))),
            None
        );
        assert_eq!(pin_of(Some("corpus_version=sha256:XYZ")), None);
    }

    fn pin(v: &str) -> Pin {
        Pin::parse("corpus_version", v).unwrap()
    }

    #[tokio::test]
    async fn a_pinned_version_is_loaded_once_however_many_ask_and_answers_as_itself() {
        let (_dir, versions, served) = chain_of(3).await;
        let all = Versions::new(Retention::default(), CacheBounds::default(), None);
        assert!(Arc::ptr_eq(
            &all.resolve(&served, None).await.unwrap(),
            &served
        ));
        let same = all
            .resolve(&served, Some(&pin(&versions[2])))
            .await
            .unwrap();
        assert!(
            Arc::ptr_eq(&same, &served),
            "the served version is never loaded again"
        );
        // Eight requests for a cold version at once: one load.
        let cold = pin(&versions[0]);
        let asks = (0..8).map(|_| all.resolve(&served, Some(&cold)));
        let got = futures::future::join_all(asks).await;
        assert!(
            got.iter()
                .all(|c| c.as_ref().unwrap().version() == versions[0])
        );
        assert_eq!(all.loads(), 1);
        let first = all
            .resolve(&served, Some(&pin(&versions[0])))
            .await
            .unwrap();
        assert_eq!(first.manifest().parent, None);
        assert_eq!(all.loads(), 1, "warm: no second load");
        all.resolve(&served, Some(&pin(&versions[1])))
            .await
            .unwrap();
        assert_eq!(all.loads(), 2);
    }

    #[tokio::test]
    async fn unknown_unpublished_and_unretained_versions_are_refused_apart() {
        let (dir, versions, served) = chain_of(3).await;
        let two = Versions::new(
            Retention {
                versions: Some(2),
                days: None,
            },
            CacheBounds::default(),
            None,
        );
        assert!(two.resolve(&served, Some(&pin(&versions[1]))).await.is_ok());
        let refused = two
            .resolve(&served, Some(&pin(&versions[0])))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, Error::VersionNotRetained { .. }),
            "{refused:?}"
        );
        assert_eq!(
            (refused.status(), refused.code()),
            (410, "corpus_version_not_retained")
        );
        let made_up = format!("sha256:{}", "ab".repeat(32));
        let unknown = two
            .resolve(&served, Some(&pin(&made_up)))
            .await
            .unwrap_err();
        assert_eq!(
            (unknown.status(), unknown.code()),
            (404, "corpus_version_unknown")
        );
        // A manifest in the store that no served version descends from (a publish that lost
        // the pointer's race leaves one): never published, so unknown too.
        let store = asof_engine::CorpusStore::local(dir.path()).unwrap();
        let mut orphan = served.manifest().clone();
        orphan.notes.insert("orphan".into(), "never served".into());
        let orphan = store.put_manifest(&orphan).await.unwrap();
        assert!(
            store
                .exists(&asof_engine::store::manifest_path(&orphan).unwrap())
                .await
                .unwrap()
        );
        let refused = two.resolve(&served, Some(&pin(&orphan))).await.unwrap_err();
        assert_eq!(refused.code(), "corpus_version_unknown", "{refused:?}");
        // By age: a version superseded more than a day ago, with a one-day policy.
        let day = Versions::new(
            Retention {
                versions: None,
                days: Some(1),
            },
            CacheBounds::default(),
            None,
        );
        let old = day
            .resolve(&served, Some(&pin(&versions[1])))
            .await
            .unwrap_err();
        assert_eq!(old.code(), "corpus_version_not_retained");
        assert!(old.message().contains("last 1 day"), "{}", old.message());
    }

    #[tokio::test]
    async fn the_cache_keeps_at_most_its_bound_and_drops_the_least_recently_asked() {
        let (_dir, versions, served) = chain_of(4).await;
        let bound = Versions::new(Retention::default(), CacheBounds { versions: 2 }, None);
        for v in &versions[..3] {
            bound.resolve(&served, Some(&pin(v))).await.unwrap();
        }
        let mut cached = bound.cached();
        cached.sort();
        let mut want = vec![versions[1].clone(), versions[2].clone()];
        want.sort();
        assert_eq!(cached, want, "the first asked was dropped");
        assert_eq!(bound.loads(), 3);
        bound
            .resolve(&served, Some(&pin(&versions[0])))
            .await
            .unwrap();
        assert_eq!(
            bound.loads(),
            4,
            "a dropped version is loaded again when asked"
        );
    }
}
