//! The write-behind counters' background flush (rate windows, usage): one task per counter,
//! writing what it holds every interval while the counter lives, and keeping what failed for
//! the next round. Written once here so the two counters cannot drift in how they retry, skip
//! missed ticks or stop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;

/// Starts the flush task of `owner`: every `every`, `flush` of the owner while it lives (a
/// weak reference: the task ends with the last owner). A failed flush is logged under `what`
/// and retried on the next tick; a tick missed while a flush ran is not made up (the next
/// flush writes everything pending anyway).
pub(crate) fn start<T, F, Fut>(owner: &Arc<T>, every: Duration, what: &'static str, flush: F)
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<()>> + Send,
{
    let weak = Arc::downgrade(owner);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(this) = weak.upgrade() else { break };
            if let Err(e) = flush(this).await {
                tracing::warn!(error = %e, "{what}: flush to the state store failed; will retry");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Counter {
        flushes: AtomicUsize,
    }

    /// Waits for `cond` to hold, polling, up to a deadline far beyond the intervals involved
    /// (a loaded machine delays ticks; it never stops them).
    async fn eventually(cond: impl Fn() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::Instant::now() < deadline {
            if cond() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cond()
    }

    #[tokio::test]
    async fn a_flush_runs_every_interval_retries_after_a_failure_and_stops_with_its_owner() {
        let owner = Arc::new(Counter {
            flushes: AtomicUsize::new(0),
        });
        start(
            &owner,
            Duration::from_millis(10),
            "test",
            |c: Arc<Counter>| async move {
                let n = c.flushes.fetch_add(1, Ordering::SeqCst);
                if n == 1 {
                    return Err(crate::error::Error::Config("a failed flush".into()));
                }
                Ok(())
            },
        );
        assert!(
            eventually(|| owner.flushes.load(Ordering::SeqCst) >= 4).await,
            "a flush each interval, going on after the failed one"
        );
        let weak = Arc::downgrade(&owner);
        drop(owner);
        assert!(
            eventually(|| weak.upgrade().is_none()).await,
            "the task keeps no strong reference between ticks"
        );
        let after = weak.strong_count();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            (after, weak.strong_count()),
            (0, 0),
            "and the task has ended"
        );
    }
}
