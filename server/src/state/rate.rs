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
//! - At most one write of a bucket is in flight from a replica at a time (a hit that needs
//!   the shared count while the flusher writes its bucket waits for that write), and hits on
//!   their way to the store still count in the estimate. Without this a request answered
//!   while a flush was under way missed the flushed hits in `X-RateLimit-Remaining`, and two
//!   writes answering out of order could not say which hits either answer held.
//!
//! What this gives up: while a bucket is far from its limit, `X-RateLimit-Remaining` on one
//! replica does not yet include the other replicas' unwritten requests (at most one flush
//! interval's worth, and at most a margin per replica). So across N replicas a client can
//! overshoot its limit by at most (N - 1) margins; a single replica is exact.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::error::Result;
use crate::state::FastMap;
use crate::state::store::{StateStore, WindowHits};

/// How often a replica writes its locally counted requests to the state store.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(250);

/// Counts of one bucket in its current window on this replica.
#[derive(Debug, Clone, Copy)]
struct Entry {
    window: i64,
    /// The shared count as last read from the store (includes this replica's written hits).
    synced: i64,
    /// Whether `synced` was read from the store in this window (false while the window's
    /// first write is on its way).
    known: bool,
    /// Hits counted here and not yet sent to the store.
    pending: i64,
    /// Hits of the one write of this bucket in flight to the store, if any. At most one write
    /// per bucket is in flight from a replica, so an answer from the store never already holds
    /// hits this replica still counts as unwritten: the estimate `synced + in_flight +
    /// pending` is exact on one replica while a flush or a near-limit write is under way.
    in_flight: Option<i64>,
}

impl Entry {
    fn estimate(&self) -> i64 {
        self.synced + self.in_flight.unwrap_or(0) + self.pending
    }
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
    /// Woken whenever a write in flight ends, for hits waiting their bucket's turn.
    written: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    /// The current window of each bucket seen here.
    entries: FastMap<String, Entry>,
    /// Pending hits of windows that ended before they were written: `(bucket, window, n)`.
    retired: Vec<(String, i64, i64)>,
}

impl Inner {
    /// Moves `bucket` on to `window`, retiring the unwritten hits of its earlier window for
    /// the next flush, with the window's first write (of that many hits) in flight or none.
    fn start_window(&mut self, bucket: &str, window: i64, in_flight: Option<i64>) {
        if let Some(old) = self.entries.get(bucket)
            && old.pending > 0
        {
            self.retired
                .push((bucket.to_owned(), old.window, old.pending));
        }
        self.entries.insert(
            bucket.to_owned(),
            Entry {
                window,
                synced: 0,
                known: false,
                pending: 0,
                in_flight,
            },
        );
    }

    /// Ends the write in flight of `bucket` in `window`: its hits are in `count` (`Ok`) or go
    /// back to pending (`Err`, so none is lost). Returns the entry if it is still current.
    fn end_write(&mut self, bucket: &str, window: i64, written: Result<i64, i64>) -> Option<Entry> {
        match self.entries.get_mut(bucket) {
            Some(e) if e.window == window && e.in_flight.is_some() => {
                let n = e.in_flight.take().unwrap_or(0);
                match written {
                    // Counts only grow within a window.
                    Ok(count) => {
                        e.synced = e.synced.max(count);
                        e.known = true;
                    }
                    Err(back) => e.pending += back.min(n),
                }
                Some(*e)
            }
            _ => {
                if let Err(back) = written
                    && back > 0
                {
                    self.retired.push((bucket.to_owned(), window, back));
                }
                None
            }
        }
    }
}

/// What a hit does after looking at its bucket.
enum Step {
    Counted(i64),
    /// Write `n` hits (this one and those carried) and decide on the shared count.
    Write(i64),
    /// A request of a window this replica has moved past: written alone, not tracked.
    WriteUntracked,
    /// Another write of this bucket is in flight and this hit needs the shared count.
    Wait,
}

impl RateWindows {
    pub fn new(store: Arc<dyn StateStore>) -> Arc<Self> {
        Arc::new(RateWindows {
            store,
            inner: Mutex::new(Inner::default()),
            written: Notify::new(),
        })
    }

    /// Starts the flusher; it stops when the last handle to `self` is dropped.
    pub fn start_flusher(self: &Arc<Self>) {
        crate::state::flush::start(
            self,
            FLUSH_INTERVAL,
            "rate windows",
            |this: Arc<Self>| async move { this.flush().await },
        );
    }

    /// Counts one request of `bucket` in the window starting at `window` (microseconds) and
    /// returns the count including it.
    pub async fn hit(self: &Arc<Self>, bucket: &str, window: i64, limit: u32) -> Result<i64> {
        let limit = i64::from(limit);
        let n = loop {
            // Registered before the lock is released, so an end of write is never missed.
            let written = self.written.notified();
            let step = {
                let mut m = self.inner.lock().expect("rate lock");
                match m.entries.get_mut(bucket) {
                    Some(e) if e.window == window => {
                        let estimate = e.estimate() + 1;
                        let margin = margin(limit);
                        if e.known && e.pending < margin && estimate + margin <= limit {
                            e.pending += 1;
                            Step::Counted(estimate)
                        } else if e.in_flight.is_none() {
                            // Near the limit (or the window not yet read): decide on the
                            // shared count, carrying what is pending.
                            let n = std::mem::take(&mut e.pending) + 1;
                            e.in_flight = Some(n);
                            Step::Write(n)
                        } else {
                            Step::Wait
                        }
                    }
                    Some(e) if e.window > window => Step::WriteUntracked,
                    _ => {
                        m.start_window(bucket, window, Some(1));
                        Step::Write(1)
                    }
                }
            };
            match step {
                Step::Counted(c) => return Ok(c),
                Step::Write(n) => break n,
                Step::WriteUntracked => return self.store.hit_n(bucket, window, 1).await,
                Step::Wait => written.await,
            }
        };
        // The write and its bookkeeping run as a task of their own: were this request dropped
        // mid-write (the client gone, its deadline passed), the bucket would otherwise keep
        // a write in flight for ever and every later hit needing the shared count would wait.
        let this = Arc::clone(self);
        let bucket = bucket.to_owned();
        let write = tokio::spawn(async move {
            let answer = this.store.hit_n(&bucket, window, n).await;
            let entry = {
                let mut m = this.inner.lock().expect("rate lock");
                // This request failed with the write: the hits it carried go back, not itself.
                let result = answer.as_ref().map(|c| *c).map_err(|_| n - 1);
                m.end_write(&bucket, window, result)
            };
            this.written.notify_waiters();
            let count = answer?;
            // Requests counted here while the store answered are not in `count` yet.
            Ok(entry.map_or(count, |e| e.estimate()))
        });
        write
            .await
            .map_err(|e| std::io::Error::other(format!("rate window write: {e}")))?
    }

    /// Counts one request in memory only and returns the local estimate: for public routes
    /// while the state store cannot be reached (their per-address limits then hold per
    /// replica; the hits are written with the next flush that succeeds).
    pub fn hit_local(&self, bucket: &str, window: i64) -> i64 {
        let mut m = self.inner.lock().expect("rate lock");
        if !matches!(m.entries.get(bucket), Some(e) if e.window >= window) {
            m.start_window(bucket, window, None);
        }
        let e = m.entries.get_mut(bucket).expect("entry just made");
        e.pending += 1;
        e.estimate()
    }

    /// Writes every pending count to the store and forgets buckets of ended windows. A bucket
    /// whose write is in flight already keeps its pending hits for the next flush.
    pub async fn flush(&self) -> Result<()> {
        let now_window = asof_engine::Instant::now().micros().div_euclid(60_000_000) * 60_000_000;
        let (work, sent) = {
            let mut guard = self.inner.lock().expect("rate lock");
            let m = &mut *guard;
            let mut work = std::mem::take(&mut m.retired);
            let mut sent = Vec::new();
            for (b, e) in m.entries.iter_mut() {
                if e.pending > 0 && e.in_flight.is_none() {
                    let n = std::mem::take(&mut e.pending);
                    e.in_flight = Some(n);
                    work.push((b.clone(), e.window, n));
                    sent.push((b.clone(), e.window));
                }
            }
            // Ended windows are forgotten; hits still unsent go with the next flush.
            let ended: Vec<String> = m
                .entries
                .iter()
                .filter(|(_, e)| e.window < now_window && e.in_flight.is_none())
                .map(|(b, _)| b.clone())
                .collect();
            for b in ended {
                if let Some(e) = m.entries.remove(&b)
                    && e.pending > 0
                {
                    m.retired.push((b, e.window, e.pending));
                }
            }
            (work, sent)
        };
        if work.is_empty() {
            return Ok(());
        }
        // One window may be pending twice (a retired write that failed and was put back):
        // the store takes each window once.
        let mut merged: std::collections::BTreeMap<(String, i64), i64> = Default::default();
        for (bucket, window, n) in &work {
            *merged.entry((bucket.clone(), *window)).or_default() += n;
        }
        let batch: Vec<WindowHits> = merged.into_iter().map(|((b, w), n)| (b, w, n)).collect();
        // One batch for every bucket: a write per bucket per flush was a third of the state
        // store's statements with many active keys (BENCHMARKS.md, "load during reloads").
        let answer = self.store.hit_many(&batch).await;
        {
            let mut guard = self.inner.lock().expect("rate lock");
            let m = &mut *guard;
            match &answer {
                Ok(counts) => {
                    let counts: HashMap<(&str, i64), i64> = counts
                        .iter()
                        .map(|(b, w, c)| ((b.as_str(), *w), *c))
                        .collect();
                    for (bucket, window) in &sent {
                        // The store answers every row it wrote; were one missing, its hits
                        // are written all the same: count them as read.
                        let count = counts.get(&(bucket.as_str(), *window)).copied();
                        let count = count.unwrap_or_else(|| {
                            m.entries
                                .get(bucket)
                                .map_or(0, |e| e.synced + e.in_flight.unwrap_or(0))
                        });
                        m.end_write(bucket, *window, Ok(count));
                    }
                }
                Err(_) => {
                    // All or none was written: every count goes back for the next flush.
                    let from_entries: std::collections::HashSet<(&str, i64)> =
                        sent.iter().map(|(b, w)| (b.as_str(), *w)).collect();
                    for (bucket, window, n) in &work {
                        if from_entries.contains(&(bucket.as_str(), *window)) {
                            m.end_write(bucket, *window, Err(*n));
                        } else {
                            m.retired.push((bucket.clone(), *window, *n));
                        }
                    }
                }
            }
        }
        self.written.notify_waiters();
        answer.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (tempfile::TempDir, Arc<dyn StateStore>) {
        let (dir, _, s) = store_at().await;
        (dir, s)
    }

    /// A SQLite store and its URL, for tests that reach the database from a second connection.
    async fn store_at() -> (tempfile::TempDir, String, Arc<dyn StateStore>) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        let s = crate::state::store::open(&url).await.unwrap();
        (dir, url, s)
    }

    /// Another writer holding the database, so the store's writes wait until it commits.
    async fn hold_writes(url: &str) -> sqlx::SqliteConnection {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut c)
            .await
            .unwrap();
        c
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
    async fn hits_on_their_way_to_the_store_still_count_and_a_near_limit_hit_waits_for_them() {
        let (_dir, url, s) = store_at().await;
        let r = RateWindows::new(s.clone());
        for i in 1..=5 {
            assert_eq!(r.hit("key:a", W, 1200).await.unwrap(), i);
        }
        // Another writer holds the database, so the flush of the four local hits stays in
        // flight until it lets go.
        let mut blocker = hold_writes(&url).await;
        let flush = tokio::spawn({
            let r = r.clone();
            async move { r.flush().await }
        });
        while r.inner.lock().unwrap().entries["key:a"].in_flight.is_none() {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            r.hit("key:a", W, 1200).await.unwrap(),
            6,
            "the four hits being written count"
        );
        // Near its limit a hit needs the shared count: it waits for the flush instead of
        // writing beside it.
        let near = tokio::spawn({
            let r = r.clone();
            async move { r.hit("key:a", W, 7).await }
        });
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert!(
            !near.is_finished(),
            "the near-limit hit waits for the flush"
        );
        sqlx::query("COMMIT").execute(&mut blocker).await.unwrap();
        flush.await.unwrap().unwrap();
        assert_eq!(near.await.unwrap().unwrap(), 7);
        assert_eq!(s.hit_n("key:a", W, 0).await.unwrap(), 7);
        r.flush().await.unwrap();
        assert_eq!(
            s.hit_n("key:a", W, 0).await.unwrap(),
            7,
            "nothing written twice"
        );
    }

    #[tokio::test]
    async fn a_request_dropped_mid_write_leaves_no_write_in_flight_behind() {
        let (_dir, url, s) = store_at().await;
        let r = RateWindows::new(s.clone());
        assert_eq!(r.hit("key:a", W, 5).await.unwrap(), 1);
        let mut blocker = hold_writes(&url).await;
        // Near the limit the hit writes; the request is dropped while the write waits.
        let dropped = tokio::spawn({
            let r = r.clone();
            async move { r.hit("key:a", W, 2).await }
        });
        while r.inner.lock().unwrap().entries["key:a"].in_flight.is_none() {
            tokio::task::yield_now().await;
        }
        dropped.abort();
        assert!(dropped.await.unwrap_err().is_cancelled());
        sqlx::query("COMMIT").execute(&mut blocker).await.unwrap();
        // The write finished without its request: the next hit gets its turn and the count.
        let next = tokio::time::timeout(Duration::from_secs(10), r.hit("key:a", W, 2))
            .await
            .expect("no hit waits for a write nobody finishes")
            .unwrap();
        assert_eq!(next, 3);
        assert_eq!(s.hit_n("key:a", W, 0).await.unwrap(), 3);
    }

    #[tokio::test]
    async fn a_failed_flush_puts_every_hit_back_and_the_next_one_writes_them_once() {
        let (_dir, url, s) = store_at().await;
        let r = RateWindows::new(s.clone());
        for _ in 0..4 {
            r.hit("key:a", W, 1200).await.unwrap();
        }
        r.hit("key:b", W, 1200).await.unwrap();
        r.hit("key:b", W, 1200).await.unwrap();
        // The store refuses writes: drop the table the counts go to, for one flush.
        use sqlx::Connection;
        let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("ALTER TABLE rate_windows RENAME TO rate_windows_away")
            .execute(&mut other)
            .await
            .unwrap();
        assert!(r.flush().await.is_err());
        assert_eq!(r.hit("key:a", W, 1200).await.unwrap(), 5, "no hit lost");
        sqlx::query("ALTER TABLE rate_windows_away RENAME TO rate_windows")
            .execute(&mut other)
            .await
            .unwrap();
        r.flush().await.unwrap();
        assert_eq!(s.hit_n("key:a", W, 0).await.unwrap(), 5);
        assert_eq!(s.hit_n("key:b", W, 0).await.unwrap(), 2);
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
