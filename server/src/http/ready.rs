//! Whether this replica should be sent traffic (`GET /ready`): not while it drains before a
//! shutdown, nor while its state store does not answer. (Before its corpus is loaded the
//! process answers every request `not_ready` without the application, see `crate::serve`.)
//!
//! `/ready` takes no credential and no rate limit (a load balancer polls it), so anyone can
//! call it as often as they like: the state store is asked at most once a second whatever
//! the number of callers, and callers arriving while it is being asked wait for that one
//! answer instead of sending their own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::ApiError;
use crate::state::StateStore;

/// How long one answer of the state store counts.
const PROBE_TTL: Duration = Duration::from_secs(1);
/// How long the state store may take to answer before it counts as not answering.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
pub struct Readiness {
    draining: AtomicBool,
    /// The last probe of the state store: when, and whether it answered.
    probe: tokio::sync::Mutex<Option<(Instant, bool)>>,
}

impl Readiness {
    /// From now on the replica answers `/ready` 503 (a shutdown began); it keeps serving
    /// every other request until its listener closes.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// `Ok` when the replica should get traffic, else why not.
    pub async fn check(&self, store: &dyn StateStore) -> Result<(), ApiError> {
        if self.draining() {
            return Err(ApiError::NotReady {
                reason: "it is shutting down",
            });
        }
        let mut probe = self.probe.lock().await;
        let fresh = probe.filter(|(at, _)| at.elapsed() < PROBE_TTL);
        let answered = match fresh {
            Some((_, answered)) => answered,
            None => {
                let r = tokio::time::timeout(PROBE_TIMEOUT, store.ping()).await;
                let r = r.unwrap_or_else(|_| {
                    // The store's own count sees only pings that end; one given up on counts
                    // here, as the failure it is.
                    metrics::counter!(crate::obs::STATE_ERRORS, "operation" => "ping").increment(1);
                    Err(crate::error::Error::Config("timed out".into()))
                });
                if let Err(e) = &r {
                    tracing::warn!(error = %e, "readiness: the state store does not answer");
                }
                *probe = Some((Instant::now(), r.is_ok()));
                r.is_ok()
            }
        };
        if self.draining() {
            return Err(ApiError::NotReady {
                reason: "it is shutting down",
            });
        }
        if answered {
            Ok(())
        } else {
            Err(ApiError::NotReady {
                reason: "its state store does not answer",
            })
        }
    }
}
