//! A short-lived in-process cache of API key lookups, so a keyed request does not wait on the
//! state store for a key it presented a moment ago.
//!
//! Only keys the store knows are cached, with their owner, for [`TTL`]. Expiry is checked by the
//! caller on every request against the cached `expires_at`, so it is exact. A revocation or a
//! plan change made through another process (`asof keys`, another replica) takes effect here
//! within [`TTL`]; an unknown key is looked up every time (nothing to serve from a miss, and
//! a key created a moment ago must work at once).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::state::store::{KeyRecord, StateStore, User};

/// How long a looked-up key is trusted without asking the store again. The promise is that a
/// revocation or plan change reaches every replica within 5 s; a lookup that began just before
/// the change still caches the old record for a full TTL, so the TTL keeps a second of slack
/// for that lookup and the request that follows it.
pub const TTL: Duration = Duration::from_secs(4);

/// Entries kept at most; past it, expired entries are dropped (and all of them if none is).
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, KeyRecord, User)>>,
}

impl KeyCache {
    pub fn new(ttl: Duration) -> Self {
        KeyCache {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
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
    ) -> Result<Option<(KeyRecord, User)>> {
        let now = Instant::now();
        if let Some((at, k, u)) = self.entries.lock().expect("key cache lock").get(hash)
            && now.duration_since(*at) < self.ttl
        {
            return Ok(Some((k.clone(), u.clone())));
        }
        let found = store.key_by_hash(hash).await?;
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
            }
        }
        Ok(found)
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
}
