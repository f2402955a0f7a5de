//! `asof serve`: bind, load corpus and state, serve until SIGTERM/Ctrl-C, finish in-flight
//! requests, exit.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::Duration;

use asof_engine::{Corpus, CorpusStore};

use crate::app::app;
use crate::error::{Error, Result};
use crate::http::AppState;

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: String,
    pub corpus: String,
    pub database_url: String,
    pub reload_interval: Duration,
    pub trust_forwarded_for: bool,
    pub public_requests_per_minute: u32,
    pub request_timeout: Duration,
    pub max_concurrent_scans: usize,
    pub scan_wait: Duration,
    pub file_url_ttl: Duration,
    pub file_requests_per_minute: u32,
    pub public_url: Option<String>,
    pub max_streams_per_key: usize,
    /// How long after the shutdown signal connections may take to finish.
    pub shutdown_grace: Duration,
    /// Which sign-in ways are configured.
    pub sign_in: crate::signin::SignInConfig,
    /// Send the session cookie with `Secure`.
    pub secure_cookies: bool,
    /// The payment processor's settings.
    pub billing: crate::billing::BillingConfig,
    /// The connector's vendors.
    pub connector: crate::connector::ConnectorConfig,
}

pub async fn serve(cfg: ServeConfig) -> Result<()> {
    let store = CorpusStore::open(&cfg.corpus)?;
    let corpus = Corpus::open(store.clone()).await?;
    let state_store = crate::state::open(&cfg.database_url).await?;
    tracing::info!(
        corpus = store.display(),
        version = corpus.version(),
        state = state_store.backend(),
        "corpus loaded"
    );
    let opts = crate::http::Options {
        trust_forwarded_for: cfg.trust_forwarded_for,
        public_requests_per_minute: cfg.public_requests_per_minute,
        request_timeout: cfg.request_timeout,
        max_concurrent_scans: cfg.max_concurrent_scans,
        scan_wait: cfg.scan_wait,
        file_url_ttl: cfg.file_url_ttl,
        file_requests_per_minute: cfg.file_requests_per_minute,
        public_url: cfg.public_url,
        stream: crate::http::stream::StreamOptions {
            max_per_key: cfg.max_streams_per_key,
            ..Default::default()
        },
        sessions: crate::signin::session::SessionOptions {
            secure: cfg.secure_cookies,
            ..Default::default()
        },
        sign_in: cfg.sign_in,
        billing: cfg.billing,
        connector: cfg.connector,
        ..crate::http::Options::default()
    };
    let state = AppState::with_options(corpus, state_store, opts).await?;
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .map_err(|e| Error::Config(format!("cannot listen on {}: {e}", cfg.listen)))?;
    let addr = listener.local_addr()?;
    tokio::spawn(crate::reload::reload_loop(
        state.clone(),
        store,
        cfg.reload_interval,
    ));
    // Tests and operators wait for this line (or /health) before sending traffic.
    tracing::info!(%addr, "asof listening on http://{addr}");
    eprintln!("asof listening on http://{addr}");
    // On the signal: streams end (each sends a last comment), in-flight requests finish, and
    // after the grace period the process exits whatever connections are still open (a client
    // that stopped reading must not hold a rolling restart).
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let hub = state.stream().clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        hub.close();
        stop_tx.send_replace(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let server = axum::serve(
        listener,
        app(state.clone()).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stopped(stop_rx.clone()));
    tokio::select! {
        r = server.into_future() => r?,
        () = async {
            stopped(stop_rx).await;
            tokio::time::sleep(cfg.shutdown_grace).await;
        } => {
            tracing::warn!(grace_secs = cfg.shutdown_grace.as_secs(), "connections still open after the shutdown grace period; exiting without them");
        }
    }
    // Rate-limit counts of the last requests are shared with other replicas only once written.
    if let Err(e) = state.flush_rate_windows().await {
        tracing::warn!(error = %e, "rate windows not written at shutdown");
    }
    if let Err(e) = state.usage().flush().await {
        tracing::warn!(error = %e, "usage counts not written at shutdown");
    }
    // Receipts of the last responses may still be queued: write them before exiting.
    if !state.audit().drain(Duration::from_secs(10)).await {
        tracing::error!(stats = ?state.audit().stats(), "audit queue not drained at shutdown");
    }
    tracing::info!("shut down cleanly");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = term => {} }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}
