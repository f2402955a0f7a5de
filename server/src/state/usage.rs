//! Requests per user, key, UTC day and route group, for `/v1/billing/usage` and the account
//! page's chart: counted in memory on the request path and written behind to a table of their
//! own (`usage_days`), which the rate windows' purge never touches.
//!
//! Why write-behind: a request only increments a counter under a mutex it holds for a hash
//! lookup; a flusher adds the counts to the store every [`FLUSH_INTERVAL`], so the state store
//! is never on the hot path. A count whose write fails is kept and retried; counts not yet
//! written when a process dies are lost (at most one interval's worth), which is the price of
//! not waiting on the store.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use asof_engine::Day;

use crate::error::Result;
use crate::state::FastMap;
use crate::state::StateStore;
use crate::state::store::UsageCount;

/// How often counts are written to the store.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// One counter's key: `user_id`, `key_id` (empty for a browser session), the day
/// (`YYYY-MM-DD`) and the route group, joined by [`SEP`] (none of them holds one: ids are ours,
/// days digits, groups a route's first path segment). One text, so a request finds its counter
/// by a borrowed key built in a buffer the thread keeps, and allocates only for a counter's
/// first request: four texts, copied and hashed each time, were a tenth of a keyed page's
/// request path beyond the data.
type Slot = String;

/// What joins a [`Slot`]'s parts.
const SEP: char = '\n';

/// The slot of `(user_id, key_id, day, group)`, written into `out`.
fn write_slot(out: &mut String, user_id: &str, key_id: &str, day: Day, group: &str) {
    out.clear();
    out.push_str(user_id);
    out.push(SEP);
    out.push_str(key_id);
    out.push(SEP);
    day.push_iso(out);
    out.push(SEP);
    out.push_str(group);
}

/// A slot's four parts.
fn parts(slot: &str) -> Option<(&str, &str, &str, &str)> {
    let mut p = slot.splitn(4, SEP);
    Some((p.next()?, p.next()?, p.next()?, p.next()?))
}

pub struct Usage {
    store: Arc<dyn StateStore>,
    pending: Mutex<FastMap<Slot, i64>>,
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
pub fn route_group(path: &str) -> &str {
    let rest = path
        .strip_prefix("/v1/")
        .unwrap_or_else(|| path.trim_start_matches('/'));
    rest.split('/').next().unwrap_or("")
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
    pub fn count(&self, user_id: &str, key_id: &str, day: Day, group: &str) {
        thread_local! {
            static SLOT: RefCell<String> = const { RefCell::new(String::new()) };
        }
        SLOT.with_borrow_mut(|slot| {
            write_slot(slot, user_id, key_id, day, group);
            let mut pending = self.pending.lock().expect("usage lock");
            match pending.get_mut(slot.as_str()) {
                Some(n) => *n += 1,
                None => {
                    pending.insert(slot.clone(), 1);
                }
            }
        });
    }

    /// Writes every pending count; a failed one is kept for the next flush.
    pub async fn flush(&self) -> Result<()> {
        let _one = self.flushing.lock().await;
        let work = std::mem::take(&mut *self.pending.lock().expect("usage lock"));
        let mut first_error = None;
        // Keys that answered since the last flush were last used now (to within a flush).
        let mut used: Vec<String> = work
            .keys()
            .filter_map(|slot| parts(slot))
            .map(|(_, key, _, _)| key.to_owned())
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
            .iter()
            .filter_map(|(slot, &requests)| {
                let (user_id, key_id, day, route_group) = parts(slot)?;
                Some(UsageCount {
                    user_id: user_id.to_owned(),
                    key_id: key_id.to_owned(),
                    day: day.to_owned(),
                    route_group: route_group.to_owned(),
                    requests,
                })
            })
            .collect();
        // One batch for every counter (all or none is written): the store is not asked once
        // per counter per flush.
        if let Err(e) = self.store.add_usage(&counts).await {
            let mut pending = self.pending.lock().expect("usage lock");
            for (slot, requests) in work {
                *pending.entry(slot).or_default() += requests;
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
        let day = Day::parse_param("day", "2026-11-01").unwrap();
        for _ in 0..3 {
            u.count("usr_1", "key_1", day, "news");
        }
        u.count("usr_1", "", day, "keys");
        assert!(
            store
                .usage("usr_1", "2026-10-01", "2026-11-30")
                .await
                .unwrap()
                .is_empty(),
            "nothing written before a flush"
        );
        u.flush().await.unwrap();
        u.count("usr_1", "key_1", day, "news");
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
