//! A bound on how many DataFusion scans run at once in one process.
//!
//! The index path answers a page by reading a few pages of one file; a scan (all-rows pages,
//! versions without access files, the sample scope) can read every partition of a source. A
//! burst of scans would take every core and all memory from the index path's small requests,
//! so scans queue here for a short wait and are refused with [`Error::Busy`] past it; the
//! server answers that `503 overloaded` with `Retry-After`, which clients retry.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};

/// Shared by every corpus version a process serves (clone it; the slots are shared).
#[derive(Debug, Clone)]
pub struct ScanGate {
    slots: Arc<Semaphore>,
    wait: Duration,
}

impl ScanGate {
    /// `slots` scans may run at once (at least one); others wait up to `wait`.
    pub fn new(slots: usize, wait: Duration) -> Self {
        ScanGate {
            slots: Arc::new(Semaphore::new(slots.max(1))),
            wait,
        }
    }

    /// No practical bound (the CLI and tests that do not exercise the gate).
    pub fn unbounded() -> Self {
        Self::new(Semaphore::MAX_PERMITS, Duration::ZERO)
    }

    /// Waits for a slot; the scan holds the permit until it has read its rows.
    pub async fn enter(&self) -> Result<OwnedSemaphorePermit> {
        match tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            // Closed never happens (the semaphore is never closed); a timeout is "busy".
            Ok(Err(_)) | Err(_) => Err(Error::Busy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_scan_past_the_bound_waits_then_is_refused_as_busy() {
        let gate = ScanGate::new(1, Duration::from_millis(50));
        let held = gate.enter().await.unwrap();
        assert!(matches!(gate.enter().await, Err(Error::Busy)));
        drop(held);
        assert!(gate.enter().await.is_ok(), "a freed slot is taken again");
    }

    #[tokio::test]
    async fn a_waiting_scan_gets_the_slot_freed_within_its_wait() {
        let gate = ScanGate::new(1, Duration::from_secs(5));
        let held = gate.enter().await.unwrap();
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.enter().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        waiter.await.unwrap().unwrap();
    }
}
