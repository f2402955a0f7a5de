//! The metrics listener (`--metrics-listen`): the Prometheus text exposition of everything
//! `crate::obs` names, on an address of its own so it is never on the public one.
//!
//! One recorder per process (`metrics-exporter-prometheus`), installed only when a listener
//! is asked for; without it every record in the code is a no-op. Before each scrape renders,
//! the gauges are set from the state the service keeps (the served version, the audit queue,
//! the scan pool, open streams): a gauge not set by the latest scrape is forgotten, which is how
//! a replaced `corpus_version` leaves `asof_corpus_info`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;

use crate::error::{Error, Result};
use crate::http::AppState;
use crate::obs;

/// How often histograms are drained into their buckets between scrapes.
const UPKEEP: Duration = Duration::from_secs(5);

/// A gauge is forgotten when the scrape before this one was the last to set it (every gauge is
/// set at each scrape, so only gauges the service no longer has, an old version's info series,
/// go).
const GAUGE_IDLE: Duration = Duration::from_millis(500);

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, the event's fields
    /// (`message`, and on access lines `route`, `method`, `status`, `latency_ms`, `key_id`,
    /// `corpus_version`) and the request's span (`request_id`, `method`, `path`).
    Json,
}

/// The installed recorder's handle.
#[derive(Clone)]
pub struct Exporter {
    handle: PrometheusHandle,
}

impl Exporter {
    /// Installs the process's recorder. `describe` gives the help texts; gauges are forgotten
    /// when a scrape no longer sets them only if `forget_gauges` (the server sets every gauge
    /// at each scrape; the poller sets its own as it goes).
    pub fn install(describe: fn(), forget_gauges: bool) -> Result<Exporter> {
        let mut b = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), obs::LATENCY_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(obs::POLL_LAG.into()), obs::LAG_BUCKETS)
            })
            .map_err(|e| Error::Config(format!("metrics: {e}")))?;
        if forget_gauges {
            b = b.idle_timeout(MetricKindMask::GAUGE, Some(GAUGE_IDLE));
        }
        let handle = b
            .install_recorder()
            .map_err(|e| Error::Config(format!("metrics: {e}")))?;
        obs::set_recording();
        describe();
        let upkeep = handle.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(UPKEEP);
            loop {
                tick.tick().await;
                upkeep.run_upkeep();
            }
        });
        Ok(Exporter { handle })
    }

    /// Serves `GET /metrics` on `listen` until the process ends; `collect` runs before each
    /// rendering. Refuses an address that is not loopback: the exposition names routes,
    /// versions and volumes an outsider has no business seeing, so it is never public (a
    /// Prometheus on another machine scrapes through an agent or proxy on this one,
    /// docs/operations.md).
    pub async fn serve(
        &self,
        listen: &str,
        collect: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<SocketAddr> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| Error::Config(format!("cannot listen for metrics on {listen}: {e}")))?;
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            return Err(Error::Config(format!(
                "--metrics-listen {listen}: the metrics listener takes loopback addresses only \
                 (127.0.0.1:PORT or [::1]:PORT); it must never be public"
            )));
        }
        let handle = self.handle.clone();
        let app = Router::new().route(
            "/metrics",
            get(move || {
                let (handle, collect) = (handle.clone(), collect.clone());
                async move {
                    collect();
                    (
                        StatusCode::OK,
                        [(
                            header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        handle.render(),
                    )
                        .into_response()
                }
            }),
        );
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the metrics listener stopped");
            }
        });
        tracing::info!(%addr, "metrics on http://{addr}/metrics");
        crate::ops::announce(&format!("asof metrics on http://{addr}/metrics"));
        Ok(addr)
    }
}

/// Sets every gauge of `asof serve` from `state` (before a scrape renders).
pub fn collect(state: &AppState, reload_interval: Duration) {
    let corpus = state.corpus();
    metrics::gauge!(obs::CORPUS_INFO, "corpus_version" => corpus.version().to_owned()).set(1.0);
    let created = corpus.manifest().created_at.micros() as f64 / 1e6;
    metrics::gauge!(obs::CORPUS_CREATED).set(created);
    let now = asof_engine::Instant::now().micros() as f64 / 1e6;
    metrics::gauge!(obs::CORPUS_AGE).set((now - created).max(0.0));
    metrics::gauge!(obs::CORPUS_RELOAD_INTERVAL).set(reload_interval.as_secs_f64());
    let (queued, running) = state.scans().load();
    metrics::gauge!(obs::SCAN_QUEUED).set(queued as f64);
    metrics::gauge!(obs::SCAN_RUNNING).set(running as f64);
    let audit = state.audit().stats();
    metrics::gauge!(obs::AUDIT_QUEUED).set(audit.queued as f64);
    metrics::counter!(obs::AUDIT_RECEIPTS, "outcome" => "written").absolute(audit.written);
    metrics::counter!(obs::AUDIT_RECEIPTS, "outcome" => "dropped").absolute(audit.dropped);
    metrics::counter!(obs::AUDIT_RECEIPTS, "outcome" => "failed").absolute(audit.failed);
    metrics::counter!(obs::AUDIT_LOST).absolute(audit.lost);
    metrics::gauge!(obs::STREAMS_OPEN).set(state.stream().open_streams() as f64);
    let ready = !state.readiness().draining();
    metrics::gauge!(obs::READY).set(if ready { 1.0 } else { 0.0 });
}
