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
//!
//! Why a CPU share on top of the lower priority: a lower priority decides who runs when both
//! want a core, but eight broad questions in flight keep the pool's threads always wanting
//! one, and on a small machine that is most of the cores (BENCHMARKS.md measured the by-filer
//! throughput at 39% of its unloaded figure beside eight). So the pool may also be given a
//! number of cores' worth of time its tasks may use together ([`Meter`]): a task that finds
//! the pool over its share pauses between blocks until the pool is back under it. The time
//! counted is the wall time of a task's polls, which overstates what a preempted poll used;
//! under contention the pool yields more, which is the side to err on.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// Rows a single request may look at by default (`--max-walk-rows`): a few seconds of one
/// thread at worst, far above what any page of a walk reads on the corpora we measure.
pub const DEFAULT_MAX_ROWS: u64 = 4_000_000;

/// Metric names the pool records (described by the server's `obs`): the wait for a slot,
/// refusals by reason (`busy`, `too_broad`), rows looked at, partitions opened by walks.
pub const METRIC_WAIT: &str = "asof_scan_wait_seconds";
pub const METRIC_REJECTED: &str = "asof_scan_rejected_total";
pub const METRIC_ROWS: &str = "asof_scan_rows_read_total";
pub const METRIC_PARTITIONS: &str = "asof_scan_partitions_read_total";

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
    /// Slots in all, and tasks waiting for one now (for the queue-depth gauge).
    slot_count: usize,
    queued: std::sync::atomic::AtomicUsize,
    wait: Duration,
    max_rows: u64,
    threads: usize,
    /// The pool's CPU share, when bounded below its threads.
    meter: Option<Arc<Meter>>,
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
        metrics::counter!(METRIC_ROWS).increment(rows);
        if self.used > self.limit {
            metrics::counter!(METRIC_REJECTED, "reason" => "too_broad").increment(1);
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
    /// a task waits up to `wait` for a slot and may look at `max_rows` rows. With `cores`,
    /// its tasks together keep busy no more than that many cores' worth of time (a share below
    /// its threads; `None` or a share at or above them bounds nothing).
    pub fn new(
        threads: usize,
        slots: usize,
        wait: Duration,
        max_rows: u64,
        cores: Option<f64>,
    ) -> Result<Self> {
        let threads = threads.max(1);
        let meter = cores
            .filter(|c| c.is_finite() && *c > 0.0 && *c < threads as f64)
            .map(|c| Arc::new(Meter::new(c, BURST, std::time::Instant::now())));
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
                slot_count: slots.max(1),
                queued: std::sync::atomic::AtomicUsize::new(0),
                wait,
                max_rows,
                threads,
                meter,
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
                None,
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

    /// Tasks waiting for a slot and tasks running now: `(queued, running)`.
    pub fn load(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering;
        let running = self.inner.slot_count - self.inner.slots.available_permits();
        (self.inner.queued.load(Ordering::Relaxed), running)
    }

    /// Runs `task` on the pool once a slot is free (refused [`Error::Busy`] past the wait) and
    /// returns its output. Dropping the returned future aborts the task.
    pub async fn run<T, F>(&self, task: F) -> Result<T>
    where
        F: Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        use std::sync::atomic::Ordering;
        let asked = std::time::Instant::now();
        self.inner.queued.fetch_add(1, Ordering::Relaxed);
        // Counted out however the wait ends, a caller that went away included.
        let in_queue = Queued(&self.inner.queued);
        let acquired =
            tokio::time::timeout(self.inner.wait, self.inner.slots.clone().acquire_owned()).await;
        drop(in_queue);
        metrics::histogram!(METRIC_WAIT).record(asked.elapsed());
        let permit = match acquired {
            Ok(Ok(p)) => p,
            // Closed never happens (the semaphore is never closed); a timeout is "busy".
            Ok(Err(_)) | Err(_) => {
                metrics::counter!(METRIC_REJECTED, "reason" => "busy").increment(1);
                return Err(Error::Busy);
            }
        };
        let runtime = self
            .inner
            .runtime
            .as_ref()
            .expect("pool runtime while alive");
        let task = async move {
            let out = task.await;
            drop(permit);
            out
        };
        let handle = match &self.inner.meter {
            Some(meter) => runtime.spawn(Metered {
                task: Box::pin(task),
                meter: Arc::clone(meter),
                pause: None,
            }),
            None => runtime.spawn(task),
        };
        match AbortOnDrop(handle).await {
            Ok(out) => out,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(Error::Busy),
        }
    }
}

/// One task counted in the queue until dropped.
struct Queued<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Busy time the pool may run ahead of its share before a task pauses: a lone page of a walk
/// (a few milliseconds) never waits; a stream of them settles to the share.
const BURST: Duration = Duration::from_millis(50);

/// The pool's CPU share as a leaky bucket: busy time is charged as tasks run and drains at
/// `cores` seconds per second; past `burst` of debt the charging task pauses until the debt
/// is back to `burst`. One bucket for all the pool's tasks, so the bound holds however many
/// run at once.
#[derive(Debug)]
struct Meter {
    /// Busy nanoseconds drained per wall nanosecond.
    cores: f64,
    burst_ns: f64,
    /// Debt in busy nanoseconds, as of the instant beside it.
    debt: Mutex<(f64, std::time::Instant)>,
}

impl Meter {
    fn new(cores: f64, burst: Duration, now: std::time::Instant) -> Self {
        Meter {
            cores,
            burst_ns: burst.as_nanos() as f64,
            debt: Mutex::new((0.0, now)),
        }
    }

    /// Charges `busy` at `now`; the pause the charging task owes before it runs again.
    fn charge(&self, busy: Duration, now: std::time::Instant) -> Option<Duration> {
        let mut d = self.debt.lock().unwrap_or_else(|e| e.into_inner());
        let drained = now.saturating_duration_since(d.1).as_nanos() as f64 * self.cores;
        d.0 = (d.0 - drained).max(0.0) + busy.as_nanos() as f64;
        d.1 = d.1.max(now);
        (d.0 > self.burst_ns)
            .then(|| Duration::from_nanos(((d.0 - self.burst_ns) / self.cores) as u64))
    }
}

/// A pool task under the pool's CPU share: each poll is timed and charged; a task owing a
/// pause sleeps it out before its next poll. Pauses fall where the task yields (between
/// blocks), so a task never holds a slot's work half done for longer than one block.
struct Metered<F> {
    task: Pin<Box<F>>,
    meter: Arc<Meter>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<F: Future> Future for Metered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Every field is boxed or `Unpin`: the wrapper may be moved out of its pin.
        let this = self.get_mut();
        if let Some(pause) = &mut this.pause {
            if pause.as_mut().poll(cx).is_pending() {
                // A wake meant for the task while it pauses is not lost: the task is polled
                // once the pause ends, whatever woke it.
                return Poll::Pending;
            }
            this.pause = None;
        }
        let start = std::time::Instant::now();
        let out = this.task.as_mut().poll(cx);
        let now = std::time::Instant::now();
        if let Some(owed) = this.meter.charge(now - start, now)
            && out.is_pending()
        {
            let mut pause = Box::pin(tokio::time::sleep(owed));
            if pause.as_mut().poll(cx).is_pending() {
                this.pause = Some(pause);
            }
        }
        out
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
        ScanPool::new(1, slots, Duration::from_millis(wait_ms), 10, None).unwrap()
    }

    #[test]
    fn the_meter_lets_a_burst_through_then_owes_pauses_at_its_share() {
        let start = std::time::Instant::now();
        let m = Meter::new(0.5, Duration::from_millis(50), start);
        let ms = Duration::from_millis;
        assert_eq!(m.charge(ms(30), start), None, "inside the burst");
        assert_eq!(m.charge(ms(20), start), None, "exactly the burst");
        // 10 ms over at half a core: 20 ms of pause.
        assert_eq!(m.charge(ms(10), start), Some(ms(20)));
        // After the pause the debt is back to the burst: the next charge owes its own share.
        assert_eq!(m.charge(ms(4), start + ms(20)), Some(ms(8)));
        // A long idle drains the debt to nothing, never below.
        assert_eq!(m.charge(ms(0), start + ms(10_000)), None);
        assert_eq!(m.charge(ms(50), start + ms(10_000)), None);
        // A clock read out of order drains nothing and never panics.
        assert_eq!(m.charge(ms(2), start), Some(ms(4)));
    }

    #[tokio::test]
    async fn busy_work_on_a_pool_with_a_share_takes_the_time_the_share_allows() {
        // At half a core with a 50 ms burst, 200 ms of busy work (in 10 ms steps) needs at
        // least (200 - 50) / 0.5 = 300 ms of wall time; unbounded it would take 200.
        let spin = || async {
            for _ in 0..20 {
                let t = std::time::Instant::now();
                while t.elapsed() < Duration::from_millis(10) {
                    std::hint::spin_loop();
                }
                tokio::task::yield_now().await;
            }
            Ok(())
        };
        let shared = ScanPool::new(1, 1, Duration::from_secs(1), 10, Some(0.5)).unwrap();
        let t = std::time::Instant::now();
        shared.run(spin()).await.unwrap();
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(295),
            "200 ms of work at half a core after a 50 ms burst took {took:?}"
        );
        let whole = ScanPool::new(1, 1, Duration::from_secs(1), 10, Some(1.0)).unwrap();
        assert!(
            whole.inner.meter.is_none(),
            "a share of every thread bounds nothing"
        );
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
    async fn the_load_counts_running_and_waiting_tasks_and_forgets_a_waiter_that_left() {
        let p = pool(1, 5_000);
        assert_eq!(p.load(), (0, 0));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let q = p.clone();
        let held = tokio::spawn(async move {
            q.run(async move {
                let _ = rx.await;
                Ok(())
            })
            .await
        });
        let q = p.clone();
        let waiter = tokio::spawn(async move { q.run(async { Ok(()) }).await });
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while p.load() != (1, 1) {
            assert!(std::time::Instant::now() < deadline, "load {:?}", p.load());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The waiter's caller goes away: it is no longer counted as queued.
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(p.load(), (0, 1));
        tx.send(()).unwrap();
        held.await.unwrap().unwrap();
        assert_eq!(p.load(), (0, 0));
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
