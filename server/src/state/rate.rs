//! Fixed-window rate counting that is exact on one replica and shared through the state store
//! without a store round trip on every request.
//!
//! The state store holds the truth every replica shares: one row per `(bucket, window_start)`
//! with the number of requests counted. Writing that row on every request made the store the
//! bottleneck of the hot path (one write transaction per request). So each replica counts
//! locally and writes behind:
//!
//! - The first request of a bucket in a window on this replica goes to the store
//!   synchronously, so a replica starts from what the others have already counted.
//! - While the local estimate (last count read from the store plus what this replica counted
//!   since) stays more than a margin below the limit, and fewer than a margin of hits are
//!   waiting to be written, a request is counted in memory only. The margin is a tenth of the
//!   limit.
//! - Near the limit every request goes to the store again (carrying what is pending), so the
//!   `429` boundary is decided on the shared count, not on a stale one.
//! - A background task flushes pending counts every [`FLUSH_INTERVAL`].
//!
//! What this gives up: while a bucket is far from its limit, `X-RateLimit-Remaining` on one
//! replica does not yet include the other replicas' unwritten requests (at most one flush
//! interval's worth, and at most a margin per replica). So across N replicas a client can
//! overshoot its limit by at most (N - 1) margins; a single replica is exact.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::error::Result;
use crate::state::store::{StateStore, WindowHits};

/// How often a replica writes its locally counted requests to the state store.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(250);

/// Counts of one bucket in its current window on this replica.
#[derive(Debug, Clone, Copy)]
struct Entry {
    window: i64,
    /// The shared count as last read from the store (includes this replica's flushed hits).
    synced: i64,
    /// Hits counted here and not yet written to the store.
    pending: i64,
}

/// The distance below the limit under which every hit goes to the store: a tenth of the
/// limit, at least one.
fn margin(limit: i64) -> i64 {
    (limit / 10).max(1)
}

#[derive(Debug)]
pub struct RateWindows {
    store: Arc<dyn StateStore>,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The current window of each bucket seen here.
    entries: HashMap<String, Entry>,
    /// Pending hits of windows that ended before they were written: `(bucket, window, n)`.
    retired: Vec<(String, i64, i64)>,
}

impl Inner {
    /// The entry of `bucket`, moved on to `window` (starting from `synced`) if it was of an
    /// earlier one, whose unwritten hits are retired for the next flush. An entry of a later
    /// window (a slower concurrent request) is left as it is.
    fn current(&mut self, bucket: &str, window: i64, synced: i64) -> &mut Entry {
        let e = self.entries.entry(bucket.to_owned()).or_insert(Entry {
            window,
            synced: 0,
            pending: 0,
        });
        if e.window < window {
            if e.pending > 0 {
                self.retired.push((bucket.to_owned(), e.window, e.pending));
            }
            *e = Entry {
                window,
                synced,
                pending: 0,
            };
        }
        e
    }
}

impl RateWindows {
    pub fn new(store: Arc<dyn StateStore>) -> Arc<Self> {
        Arc::new(RateWindows {
            store,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// Starts the flusher; it stops when the last handle to `self` is dropped.
    pub fn start_flusher(self: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(FLUSH_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(this) = weak.upgrade() else { break };
                if let Err(e) = this.flush().await {
                    tracing::warn!(error = %e, "rate windows: flush to the state store failed; will retry");
                }
            }
        });
    }

    /// Counts one request of `bucket` in the window starting at `window` (microseconds) and
    /// returns the count including it.
    pub async fn hit(&self, bucket: &str, window: i64, limit: u32) -> Result<i64> {
        let limit = i64::from(limit);
        let carried = {
            let mut m = self.inner.lock().expect("rate lock");
            match m.entries.get_mut(bucket) {
                Some(e) if e.window == window => {
                    let estimate = e.synced + e.pending + 1;
                    let m = margin(limit);
                    if e.pending < m && estimate + m <= limit {
                        e.pending += 1;
                        return Ok(estimate);
                    }
                    // Near the limit: decide on the shared count, carrying what is pending.
                    std::mem::take(&mut e.pending)
                }
                _ => 0,
            }
        };
        let count = match self.store.hit_n(bucket, window, carried + 1).await {
            Ok(c) => c,
            Err(e) => {
                self.restore(bucket, window, carried);
                return Err(e);
            }
        };
        let mut m = self.inner.lock().expect("rate lock");
        let e = m.current(bucket, window, count);
        if e.window == window {
            // Counts only grow within a window; a slower concurrent answer may be older.
            e.synced = e.synced.max(count);
        }
        // Requests counted here while the store answered are not in `count` yet.
        Ok(if e.window == window {
            count.max(e.synced) + e.pending
        } else {
            count
        })
    }

    /// Counts one request in memory only and returns the local estimate: for public routes
    /// while the state store cannot be reached (their per-address limits then hold per
    /// replica; the hits are written with the next flush that succeeds).
    pub fn hit_local(&self, bucket: &str, window: i64) -> i64 {
        let mut m = self.inner.lock().expect("rate lock");
        let e = m.current(bucket, window, 0);
        e.pending += 1;
        e.synced + e.pending
    }

    /// Puts back pending hits whose write failed, so none is lost.
    fn restore(&self, bucket: &str, window: i64, n: i64) {
        if n == 0 {
            return;
        }
        let mut m = self.inner.lock().expect("rate lock");
        match m.entries.get_mut(bucket) {
            Some(e) if e.window == window => e.pending += n,
            _ => m.retired.push((bucket.to_owned(), window, n)),
        }
    }

    /// Writes every pending count to the store and forgets buckets of ended windows.
    pub async fn flush(&self) -> Result<()> {
        let now_window = asof_engine::Instant::now().micros().div_euclid(60_000_000) * 60_000_000;
        let work: Vec<(String, i64, i64)> = {
            let mut guard = self.inner.lock().expect("rate lock");
            let m = &mut *guard;
            let mut work = std::mem::take(&mut m.retired);
            work.extend(
                m.entries
                    .iter_mut()
                    .filter(|(_, e)| e.pending > 0)
                    .map(|(b, e)| (b.clone(), e.window, std::mem::take(&mut e.pending))),
            );
            m.entries.retain(|_, e| e.window >= now_window);
            work
        };
        // One window may be pending twice (a retired write that failed and was put back):
        // the store takes each window once.
        let mut merged: std::collections::BTreeMap<(String, i64), i64> = Default::default();
        for (bucket, window, n) in work {
            *merged.entry((bucket, window)).or_default() += n;
        }
        let work: Vec<WindowHits> = merged.into_iter().map(|((b, w), n)| (b, w, n)).collect();
        // One batch for every bucket: a write per bucket per flush was a third of the state
        // store's statements with many active keys (BENCHMARKS.md, "load during reloads").
        match self.store.hit_many(&work).await {
            Ok(counts) => {
                let mut m = self.inner.lock().expect("rate lock");
                for (bucket, window, count) in counts {
                    if let Some(e) = m.entries.get_mut(&bucket)
                        && e.window == window
                    {
                        e.synced = e.synced.max(count);
                    }
                }
                Ok(())
            }
            Err(e) => {
                // All or none was written: every count goes back for the next flush.
                for (bucket, window, n) in work {
                    self.restore(&bucket, window, n);
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (tempfile::TempDir, Arc<dyn StateStore>) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        (dir, crate::state::store::open(&url).await.unwrap())
    }

    const W: i64 = 60_000_000;

    #[tokio::test]
    async fn one_replica_counts_exactly_and_refuses_past_the_limit_on_the_shared_count() {
        let (_d, s) = store().await;
        let r = RateWindows::new(s.clone());
        for i in 1..=60 {
            assert_eq!(r.hit("key:a", W, 60).await.unwrap(), i);
        }
        // Past the limit the count comes from the store, which holds every hit.
        assert_eq!(r.hit("key:a", W, 60).await.unwrap(), 61);
        assert_eq!(s.hit_n("key:a", W, 0).await.unwrap(), 61);
    }

    #[tokio::test]
    async fn far_from_the_limit_hits_stay_local_until_a_flush() {
        let (_d, s) = store().await;
        let r = RateWindows::new(s.clone());
        for _ in 0..10 {
            r.hit("key:a", W, 1200).await.unwrap();
        }
        // Only the first hit of the window went to the store synchronously.
        assert_eq!(s.hit_n("key:a", W, 0).await.unwrap(), 1);
        r.flush().await.unwrap();
        assert_eq!(s.hit_n("key:a", W, 0).await.unwrap(), 10);
        r.flush().await.unwrap();
        assert_eq!(
            s.hit_n("key:a", W, 0).await.unwrap(),
            10,
            "a flush writes each hit once"
        );
    }

    #[tokio::test]
    async fn a_replica_starts_a_window_from_what_others_counted_and_sees_them_after_their_flush() {
        let (_d, s) = store().await;
        let (a, b) = (RateWindows::new(s.clone()), RateWindows::new(s.clone()));
        assert_eq!(a.hit("key:k", W, 1200).await.unwrap(), 1);
        assert_eq!(b.hit("key:k", W, 1200).await.unwrap(), 2);
        for _ in 0..5 {
            a.hit("key:k", W, 1200).await.unwrap();
        }
        a.flush().await.unwrap();
        // b's next hit far from the limit is local: it knows 2, plus its own.
        assert_eq!(b.hit("key:k", W, 1200).await.unwrap(), 3);
        // Near the limit b asks the store, carrying its pending hit; the store holds a's
        // flushed hits: 2 + 5 + 2.
        assert_eq!(b.hit("key:k", W, 4).await.unwrap(), 9);
    }

    #[tokio::test]
    async fn near_the_limit_two_replicas_never_let_more_than_the_limit_through() {
        let (_d, s) = store().await;
        let (a, b) = (RateWindows::new(s.clone()), RateWindows::new(s.clone()));
        let mut allowed = 0;
        for i in 0..100 {
            let r = if i % 2 == 0 { &a } else { &b };
            if r.hit("key:k", W, 20).await.unwrap() <= 20 {
                allowed += 1;
            }
        }
        // Margin 2: a replica holds at most two unwritten hits and goes to the store from an
        // estimate of 19 on, so the other replica's unwritten hits are all it can miss.
        assert!(allowed >= 20 - margin(20), "allowed {allowed}");
        assert!(allowed <= 20 + margin(20), "allowed {allowed}");
        a.flush().await.unwrap();
        b.flush().await.unwrap();
        assert_eq!(s.hit_n("key:k", W, 0).await.unwrap(), 100);
    }

    #[tokio::test]
    async fn a_new_window_starts_from_the_store_again() {
        let (_d, s) = store().await;
        let r = RateWindows::new(s.clone());
        r.hit("key:a", W, 1200).await.unwrap();
        r.hit("key:a", W, 1200).await.unwrap();
        assert_eq!(r.hit("key:a", 2 * W, 1200).await.unwrap(), 1);
        r.flush().await.unwrap();
        assert_eq!(
            s.hit_n("key:a", W, 0).await.unwrap(),
            2,
            "the ended window's local hit is still written"
        );
    }
}
