//! The scan pool: where every read that is not the access index's runs (all-rows pages, the
//! partition walk, the sample scope, versions without access files, the DataFusion reference
//! scan), on threads of its own, a bounded number at once, each with a bound on what it reads.
//!
//! Why a pool of its own: the serving runtime's worker threads answer the by-filer hot path in
//! microseconds. A walk that decodes partitions for tens of milliseconds, or a caller asking
//! for something that touches most of the corpus, would hold one of those few threads for all
//! that time, and every request queued behind it would wait (BENCHMARKS.md measured p99 10 s
//! for everyone else while three all-rows scans ran). Here such work runs on a separate tokio
//! runtime whose threads run at a lower scheduling priority (Linux `nice` 10), so the hot path
//! keeps the cores when both want them; at most `slots` tasks run at once, others wait a short
//! while and are then refused [`Error::Busy`] (`503 overloaded` with `Retry-After`); and each
//! task may look at no more than `max_rows` rows ([`Budget`]), past which it is refused
//! [`Error::TooBroad`] (a clear envelope naming the bound and how to narrow the question). A
//! task whose caller goes away (the request deadline, a closed connection) is aborted at its
//! next block.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// Rows a single request may look at by default (`--max-walk-rows`): a few seconds of one
/// thread at worst, far above what any page of a walk reads on the corpora we measure.
pub const DEFAULT_MAX_ROWS: u64 = 4_000_000;

/// Shared by every corpus version a process serves (clone it; threads and slots are shared).
#[derive(Debug, Clone)]
pub struct ScanPool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// `None` only while being dropped.
    runtime: Option<tokio::runtime::Runtime>,
    slots: Arc<Semaphore>,
    wait: Duration,
    max_rows: u64,
    threads: usize,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A runtime may not be dropped (blocking) from async code, where a server's state can
        // end; shutting it down in the background is always allowed.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The rows one task may still look at; counts down as the walk reads.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    limit: u64,
    used: u64,
}

impl Budget {
    pub fn new(limit: u64) -> Self {
        Budget { limit, used: 0 }
    }

    /// Counts `rows` more rows looked at; refuses past the limit.
    pub fn spend(&mut self, rows: u64) -> Result<()> {
        self.used += rows;
        if self.used > self.limit {
            return Err(Error::TooBroad { limit: self.limit });
        }
        Ok(())
    }

    pub fn used(&self) -> u64 {
        self.used
    }
}

impl ScanPool {
    /// A pool of `threads` threads (at least one) running at most `slots` tasks at once;
    /// a task waits up to `wait` for a slot and may look at `max_rows` rows.
    pub fn new(threads: usize, slots: usize, wait: Duration, max_rows: u64) -> Result<Self> {
        let threads = threads.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("asof-scan")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()?;
        Ok(ScanPool {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                slots: Arc::new(Semaphore::new(slots.max(1))),
                wait,
                max_rows,
                threads,
            }),
        })
    }

    /// The process's default pool, for the CLI and tests: half the cores, no practical bound on
    /// tasks, the default row budget. A server builds its own from its flags.
    pub fn shared_default() -> Self {
        static POOL: std::sync::OnceLock<ScanPool> = std::sync::OnceLock::new();
        POOL.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(2, usize::from);
            ScanPool::new(
                cores.div_ceil(2),
                Semaphore::MAX_PERMITS,
                Duration::ZERO,
                DEFAULT_MAX_ROWS,
            )
            .expect("the default scan pool's runtime starts")
        })
        .clone()
    }

    /// A fresh budget for one task.
    pub fn budget(&self) -> Budget {
        Budget::new(self.inner.max_rows)
    }

    pub fn threads(&self) -> usize {
        self.inner.threads
    }

    /// Runs `task` on the pool once a slot is free (refused [`Error::Busy`] past the wait) and
    /// returns its output. Dropping the returned future aborts the task.
    pub async fn run<T, F>(&self, task: F) -> Result<T>
    where
        F: Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let permit =
            match tokio::time::timeout(self.inner.wait, self.inner.slots.clone().acquire_owned())
                .await
            {
                Ok(Ok(p)) => p,
                // Closed never happens (the semaphore is never closed); a timeout is "busy".
                Ok(Err(_)) | Err(_) => return Err(Error::Busy),
            };
        let runtime = self
            .inner
            .runtime
            .as_ref()
            .expect("pool runtime while alive");
        let handle = runtime.spawn(async move {
            let out = task.await;
            drop(permit);
            out
        });
        match AbortOnDrop(handle).await {
            Ok(out) => out,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(Error::Busy),
        }
    }
}

/// Aborts the pool task when the caller stops waiting for it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        // A finished task's abort (when the guard drops after this) does nothing.
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

/// Lowers the calling thread's scheduling priority (on Linux `setpriority` on the process id 0
/// applies to the calling thread only), so the serving threads win the cores when both want
/// them. Elsewhere, or when refused, the thread keeps its priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(None, 10) {
        tracing::debug!(error = %e, "the scan pool's threads keep the serving priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(slots: usize, wait_ms: u64) -> ScanPool {
        ScanPool::new(1, slots, Duration::from_millis(wait_ms), 10).unwrap()
    }

    #[tokio::test]
    async fn a_task_runs_on_the_pools_own_threads() {
        let p = pool(2, 100);
        let name = p
            .run(async { Ok(std::thread::current().name().map(str::to_owned)) })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("asof-scan"));
    }

    #[tokio::test]
    async fn a_task_past_the_slots_waits_then_is_refused_as_busy() {
        let p = pool(1, 50);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let q = p.clone();
        let held = tokio::spawn(async move {
            q.run(async move {
                let _ = rx.await;
                Ok(())
            })
            .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(matches!(p.run(async { Ok(()) }).await, Err(Error::Busy)));
        tx.send(()).unwrap();
        held.await.unwrap().unwrap();
        assert!(
            p.run(async { Ok(()) }).await.is_ok(),
            "a freed slot is taken"
        );
    }

    #[tokio::test]
    async fn a_caller_that_stops_waiting_aborts_the_task_and_frees_its_slot() {
        let p = pool(1, 2_000);
        let started = Arc::new(tokio::sync::Notify::new());
        let s = started.clone();
        let forever = p.run(async move {
            s.notify_one();
            std::future::pending::<()>().await;
            Ok(())
        });
        let timed = tokio::time::timeout(Duration::from_millis(50), forever).await;
        assert!(timed.is_err(), "the task never ends on its own");
        // The slot comes back once the aborted task is dropped on the pool.
        let again = tokio::time::timeout(Duration::from_secs(2), p.run(async { Ok(7) }))
            .await
            .expect("the slot is freed")
            .unwrap();
        assert_eq!(again, 7);
    }

    #[test]
    fn a_budget_refuses_past_its_limit_and_names_it() {
        let mut b = Budget::new(10);
        b.spend(6).unwrap();
        b.spend(4).unwrap();
        assert!(matches!(b.spend(1), Err(Error::TooBroad { limit: 10 })));
    }
}
