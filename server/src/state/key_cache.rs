//! A short-lived in-process cache of API key lookups, so a keyed request does not wait on the
//! state store for a key it presented a moment ago.
//!
//! Keys the store knows are cached, with their owner, for [`TTL`]. Expiry is checked by the
//! caller on every request against the cached `expires_at`, so it is exact. A revocation or a
//! plan change made through another process (`asof keys`, another replica) takes effect here
//! within [`TTL`].
//!
//! Keys the store does not know are remembered too, for [`UNKNOWN_TTL`]: a client repeating
//! a made-up or deleted key costs no store query after the first. Why this is safe where a
//! cached *live* key needs a short TTL: a key's secret is 32 random bytes the store makes
//! when it creates the key, so nobody presents a key before it exists except by guessing
//! its 256 bits; a hash that was unknown stays unknown. (Flooding many different made-up keys
//! is the per-address refusal limit's, `crate::state::refusals`.)

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::state::FastMap;
use crate::state::store::{KeyRecord, StateStore, User};

/// How long a looked-up key is trusted without asking the store again. The promise is that a
/// revocation or plan change reaches every replica within 5 s; a lookup that began just before
/// the change still caches the old record for a full TTL, so the TTL keeps a second of slack
/// for that lookup and the request that follows it.
pub const TTL: Duration = Duration::from_secs(4);

/// How long a hash the store did not know is answered unknown without asking again.
pub const UNKNOWN_TTL: Duration = Duration::from_secs(10 * 60);

/// Entries kept at most (of each map); past it, expired entries are dropped (and all of them
/// if none is).
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    /// By secret hash: when looked up, and the records, shared with every request that
    /// presents the key while they are fresh (a request takes two reference counts, not a
    /// copy of six strings).
    entries: Mutex<FastMap<String, (Instant, Arc<KeyRecord>, Arc<User>)>>,
    /// Hashes the store answered unknown.
    unknown: Unknown,
}

/// Secret hashes the store answered unknown (API keys; session ids), remembered for
/// [`UNKNOWN_TTL`] so repeating one costs no store query. Safe for anything whose secret the
/// service makes itself from random bytes: nobody presents it before it exists.
#[derive(Debug, Default)]
pub struct Unknown {
    hashes: Mutex<FastMap<String, Instant>>,
}

impl Unknown {
    /// Whether the store answered `hash` unknown within [`UNKNOWN_TTL`].
    pub fn contains(&self, hash: &str) -> bool {
        let now = Instant::now();
        self.hashes
            .lock()
            .expect("unknown hashes lock")
            .get(hash)
            .is_some_and(|at| now.duration_since(*at) < UNKNOWN_TTL)
    }

    /// Remembers that the store does not know `hash`.
    pub fn insert(&self, hash: &str) {
        let now = Instant::now();
        let mut hashes = self.hashes.lock().expect("unknown hashes lock");
        if hashes.len() >= MAX_ENTRIES {
            hashes.retain(|_, at| now.duration_since(*at) < UNKNOWN_TTL);
            if hashes.len() >= MAX_ENTRIES {
                hashes.clear();
            }
        }
        hashes.insert(hash.to_owned(), now);
    }
}

/// What a key lookup found, and whether it cost the store a query.
#[derive(Debug)]
pub struct Found {
    pub key: Option<(Arc<KeyRecord>, Arc<User>)>,
    pub asked_store: bool,
}

impl KeyCache {
    pub fn new(ttl: Duration) -> Self {
        KeyCache {
            ttl,
            entries: Mutex::new(FastMap::default()),
            unknown: Unknown::default(),
        }
    }

    /// The key and owner for `hash` when this cache holds them fresh (no store query).
    pub fn fresh(&self, hash: &str) -> Option<(Arc<KeyRecord>, Arc<User>)> {
        let now = Instant::now();
        self.entries
            .lock()
            .expect("key cache lock")
            .get(hash)
            .filter(|(at, _, _)| now.duration_since(*at) < self.ttl)
            .map(|(_, k, u)| (k.clone(), u.clone()))
    }

    /// Whether the store answered `hash` unknown lately (see [`UNKNOWN_TTL`]).
    pub fn known_unknown(&self, hash: &str) -> bool {
        self.unknown.contains(hash)
    }

    /// Whether `hash` is a key the store knew when this process last asked (fresh or not):
    /// a real key, which a client address past its refusal limit may still present (it is
    /// then looked up as usual). Made-up keys never are.
    pub fn seen_valid(&self, hash: &str) -> bool {
        self.entries
            .lock()
            .expect("key cache lock")
            .contains_key(hash)
    }

    /// Drops key `id` from this process's cache (it was just revoked here: refused at once on
    /// this replica, within [`TTL`] on the others).
    pub fn forget(&self, id: &str) {
        self.entries
            .lock()
            .expect("key cache lock")
            .retain(|_, (_, k, _)| k.id != id);
    }

    /// Drops every key of user `user_id` from this process's cache (the user's plan just
    /// changed here: the new plan applies at once on this replica, within [`TTL`] on others).
    pub fn forget_user(&self, user_id: &str) {
        self.entries
            .lock()
            .expect("key cache lock")
            .retain(|_, (_, _, u)| u.id != user_id);
    }

    /// The key and owner for a secret's hash: from the cache when fresh, else from the store.
    pub async fn get(
        &self,
        store: &dyn StateStore,
        hash: &str,
    ) -> Result<Option<(Arc<KeyRecord>, Arc<User>)>> {
        Ok(self.lookup(store, hash).await?.key)
    }

    /// As [`Self::get`], saying whether the answer cost the store a query.
    pub async fn lookup(&self, store: &dyn StateStore, hash: &str) -> Result<Found> {
        let now = Instant::now();
        if let Some((at, k, u)) = self.entries.lock().expect("key cache lock").get(hash)
            && now.duration_since(*at) < self.ttl
        {
            return Ok(Found {
                key: Some((k.clone(), u.clone())),
                asked_store: false,
            });
        }
        if self.unknown.contains(hash) {
            return Ok(Found {
                key: None,
                asked_store: false,
            });
        }
        let found = store
            .key_by_hash(hash)
            .await?
            .map(|(k, u)| (Arc::new(k), Arc::new(u)));
        let mut m = self.entries.lock().expect("key cache lock");
        match &found {
            Some((k, u)) => {
                if m.len() >= MAX_ENTRIES {
                    let ttl = self.ttl;
                    m.retain(|_, (at, _, _)| now.duration_since(*at) < ttl);
                    if m.len() >= MAX_ENTRIES {
                        m.clear();
                    }
                }
                m.insert(hash.to_owned(), (now, k.clone(), u.clone()));
            }
            None => {
                m.remove(hash);
                drop(m);
                self.unknown.insert(hash);
            }
        }
        Ok(Found {
            key: found,
            asked_store: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;
    use crate::state::store::hash_key;

    #[tokio::test]
    async fn a_revocation_elsewhere_is_seen_once_the_entry_is_older_than_the_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        let store = crate::state::store::open(&url).await.unwrap();
        let user = store
            .upsert_user("a@example.com", Plan::Desk)
            .await
            .unwrap();
        let (rec, raw) = store.create_key(&user.id, "k", None).await.unwrap();
        let h = hash_key(&raw);

        let long = KeyCache::new(Duration::from_secs(3600));
        let none = KeyCache::new(Duration::ZERO);
        assert!(long.get(&*store, &h).await.unwrap().is_some());
        assert!(none.get(&*store, &h).await.unwrap().is_some());
        store
            .revoke_key(&user.id, &rec.id, asof_engine::Instant::now())
            .await
            .unwrap();
        let cached = long.get(&*store, &h).await.unwrap().unwrap();
        assert!(
            cached.0.revoked_at.is_none(),
            "within the TTL the cached record answers"
        );
        let fresh = none.get(&*store, &h).await.unwrap().unwrap();
        assert!(
            fresh.0.revoked_at.is_some(),
            "past the TTL the store answers"
        );
        assert!(
            long.get(&*store, "0".repeat(64).as_str())
                .await
                .unwrap()
                .is_none()
        );
    }

    /// The store's key lookups a run of `work` made, read from the store's own metrics.
    fn key_lookups(work: impl std::future::Future<Output = ()>) -> u64 {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        // A current-thread runtime: the store records on this thread, where the local
        // recorder is installed.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        metrics::with_local_recorder(&recorder, || rt.block_on(work));
        let text = handle.render();
        let name = "asof_state_operation_duration_seconds_count{operation=\"key_by_hash\"} ";
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map_or(0, |n| n.parse().unwrap())
    }

    #[test]
    fn an_unknown_key_costs_one_store_lookup_however_often_it_is_presented() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        let lookups = key_lookups(async {
            let store = crate::state::store::open(&url).await.unwrap();
            let cache = KeyCache::new(TTL);
            let made_up = hash_key("svc_live_made_up");
            for _ in 0..50 {
                assert!(cache.get(&*store, &made_up).await.unwrap().is_none());
            }
        });
        assert_eq!(lookups, 1);
    }
}
