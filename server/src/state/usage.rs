//! Requests per user, key, UTC day and route group, for `/v1/billing/usage` and the account
//! page's chart: counted in memory on the request path and written behind to a table of their
//! own (`usage_days`), which the rate windows' purge never touches.
//!
//! Why write-behind: a request only increments a counter under a mutex it holds for a hash
//! lookup; a flusher adds the counts to the store every [`FLUSH_INTERVAL`], so the state store
//! is never on the hot path. A count whose write fails is kept and retried; counts not yet
//! written when a process dies are lost (at most one interval's worth), which is the price of
//! not waiting on the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::Result;
use crate::state::StateStore;
use crate::state::store::UsageCount;

/// How often counts are written to the store.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// One counter: `(user_id, key_id or "" for a browser session, day, route group)`.
type Slot = (String, String, String, String);

pub struct Usage {
    store: Arc<dyn StateStore>,
    pending: Mutex<HashMap<Slot, i64>>,
    /// One flush at a time: a flush that returns has written everything counted before it
    /// started, including what a concurrent flush had taken (shutdown and tests rely on it).
    flushing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Usage").finish_non_exhaustive()
    }
}

/// The route group of a request path: the segment after `/v1/` (`news`, `files`, `keys`,
/// `audit-log`, ...), `mcp` for the MCP endpoint, `files` for signed file URLs.
pub fn route_group(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("/v1/") {
        return rest.split('/').next().unwrap_or("").to_owned();
    }
    path.trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("")
        .to_owned()
}

impl Usage {
    pub fn new(store: Arc<dyn StateStore>) -> Arc<Self> {
        Arc::new(Usage {
            store,
            pending: Mutex::default(),
            flushing: tokio::sync::Mutex::new(()),
        })
    }

    /// Starts the flusher; it stops when the last handle to `self` is dropped.
    pub fn start_flusher(self: &Arc<Self>) {
        crate::state::flush::start(
            self,
            FLUSH_INTERVAL,
            "usage",
            |this: Arc<Self>| async move { this.flush().await },
        );
    }

    /// Counts one request.
    pub fn count(&self, user_id: &str, key_id: &str, day: &str, group: &str) {
        *self
            .pending
            .lock()
            .expect("usage lock")
            .entry((
                user_id.to_owned(),
                key_id.to_owned(),
                day.to_owned(),
                group.to_owned(),
            ))
            .or_default() += 1;
    }

    /// Writes every pending count; a failed one is kept for the next flush.
    pub async fn flush(&self) -> Result<()> {
        let _one = self.flushing.lock().await;
        let work = std::mem::take(&mut *self.pending.lock().expect("usage lock"));
        let mut first_error = None;
        // Keys that answered since the last flush were last used now (to within a flush).
        let mut used: Vec<String> = work
            .keys()
            .map(|(_, key, _, _)| key.clone())
            .filter(|k| !k.is_empty())
            .collect();
        used.sort_unstable();
        used.dedup();
        if !used.is_empty()
            && let Err(e) = self
                .store
                .keys_used(&used, asof_engine::Instant::now())
                .await
        {
            first_error = Some(e);
        }
        let counts: Vec<UsageCount> = work
            .into_iter()
            .map(
                |((user_id, key_id, day, route_group), requests)| UsageCount {
                    user_id,
                    key_id,
                    day,
                    route_group,
                    requests,
                },
            )
            .collect();
        // One batch for every counter (all or none is written): the store is not asked once
        // per counter per flush.
        if let Err(e) = self.store.add_usage(&counts).await {
            let mut pending = self.pending.lock().expect("usage lock");
            for c in counts {
                *pending
                    .entry((c.user_id, c.key_id, c.day, c.route_group))
                    .or_default() += c.requests;
            }
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_group_is_the_first_segment_after_v1() {
        assert_eq!(route_group("/v1/news/diff"), "news");
        assert_eq!(route_group("/v1/files/abc"), "files");
        assert_eq!(route_group("/v1/audit-log/stats"), "audit-log");
        assert_eq!(route_group("/mcp"), "mcp");
        assert_eq!(route_group("/files/abc"), "files");
    }

    #[tokio::test]
    async fn counts_are_written_behind_and_add_up_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::state::open(dir.path().join("s.db").to_str().unwrap())
            .await
            .unwrap();
        let u = Usage::new(store.clone());
        for _ in 0..3 {
            u.count("usr_1", "key_1", "2026-11-01", "news");
        }
        u.count("usr_1", "", "2026-11-01", "keys");
        assert!(
            store
                .usage("usr_1", "2026-10-01", "2026-11-30")
                .await
                .unwrap()
                .is_empty(),
            "nothing written before a flush"
        );
        u.flush().await.unwrap();
        u.count("usr_1", "key_1", "2026-11-01", "news");
        u.flush().await.unwrap();
        assert_eq!(
            store
                .usage("usr_1", "2026-10-01", "2026-11-30")
                .await
                .unwrap(),
            [
                (
                    "2026-11-01".to_string(),
                    String::new(),
                    "keys".to_string(),
                    1
                ),
                (
                    "2026-11-01".to_string(),
                    "key_1".to_string(),
                    "news".to_string(),
                    4
                )
            ]
        );
    }
}
