//! `asof serve`: bind, load corpus and state, serve until SIGTERM/Ctrl-C, drain, finish
//! in-flight requests, exit.
//!
//! The listener is bound first and answers every request `503 not_ready` while the corpus
//! and the state store load (a large corpus takes seconds), so a balancer's check of `/ready`
//! sees "not yet" rather than a refused connection it may count as a crash. On `SIGTERM`,
//! `/ready` turns 503 at once while every other request is still served for `--drain-delay`
//! seconds: the balancer takes the replica out before its listener closes.
//!
//! The connection loop is the service's own, on hyper, rather than `axum::serve`, which sets
//! no header-read timeout: a client that opens connections and sends its headers a byte at a
//! time (slowloris) would hold them, and their file descriptors, for ever, and a rolling
//! restart would wait on them. Here every connection has a deadline to send each request head
//! (which also ends idle keep-alive connections), the parser's buffer is bounded
//! (`crate::http::limits`), the number of open connections is bounded, and on `SIGTERM` idle
//! connections close at once while in-flight requests finish within the grace period.

use std::cell::RefCell;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request};
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{Semaphore, watch};

use asof_engine::{Corpus, CorpusStore};

use crate::app::app;
use crate::error::{Error, Result};
use crate::http::AppState;

/// What `asof serve` runs: the process's own settings (where it listens and loads from, its
/// connection loop, reloads, metrics and shutdown) and the application's
/// ([`crate::http::Options`]), each listed once; the CLI fills it from its flags.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: String,
    pub corpus: String,
    /// The state store's URL (its password never prints: [`crate::secret::SecretUrl`]).
    pub database_url: crate::secret::SecretUrl,
    pub reload_interval: Duration,
    /// How long after the shutdown signal connections may take to finish.
    pub shutdown_grace: Duration,
    /// How long a client may take to send a request head (from the connection's start, or
    /// from the end of its previous response): slow senders and idle keep-alive connections
    /// are closed after it.
    pub header_read_timeout: Duration,
    /// Connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Where to serve Prometheus metrics (loopback only); `None`: no metrics kept.
    pub metrics_listen: Option<String>,
    /// How long after the shutdown signal the replica keeps serving with `/ready` at 503.
    pub drain_delay: Duration,
    /// The application's settings: limits, sign-in, billing, connectors.
    pub options: crate::http::Options,
}

pub async fn serve(cfg: ServeConfig) -> Result<()> {
    let exporter = match &cfg.metrics_listen {
        Some(_) => Some(crate::ops::Exporter::install(
            crate::obs::describe_serve,
            true,
        )?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .map_err(|e| Error::Config(format!("cannot listen on {}: {e}", cfg.listen)))?;
    let addr = listener.local_addr()?;
    // Until "listening" below, every request is answered `503 not_ready`.
    crate::ops::announce(&format!("asof bound to http://{addr}; loading the corpus"));
    let limits = ConnLimits {
        header_read_timeout: cfg.header_read_timeout,
        max_connections: cfg.max_connections,
    };
    // Until the corpus and the state store are loaded, every request is answered 503.
    let (loaded_tx, loaded_rx) = watch::channel(false);
    let loading = accept_loop(&listener, starting(), limits, loaded_rx);
    let load = async {
        let state = load(&cfg).await;
        loaded_tx.send_replace(true);
        state
    };
    let (_, state) = tokio::join!(loading, load);
    let (state, store) = state?;
    serve_loaded(cfg, listener, addr, limits, state, store, exporter).await
}

/// Opens the corpus and the state store and builds the application's state.
async fn load(cfg: &ServeConfig) -> Result<(AppState, CorpusStore)> {
    let store = CorpusStore::open(&cfg.corpus)?;
    let corpus = Corpus::open(store.clone()).await?;
    let state_store = crate::state::open(cfg.database_url.expose()).await?;
    tracing::info!(
        corpus = store.display(),
        version = corpus.version(),
        state = state_store.backend(),
        "corpus loaded"
    );
    let state = AppState::with_options(corpus, state_store, cfg.options.clone()).await?;
    // The manifest chain pinned requests are checked against, read off the request path.
    let learning = state.clone();
    tokio::spawn(async move {
        let served = learning.corpus();
        learning.versions().learn_chain(&served).await;
    });
    Ok((state, store))
}

/// What answers while the corpus loads: `503 not_ready` to everything, with an empty
/// `corpus_version` (there is none yet) and a request id.
fn starting() -> axum::Router {
    axum::Router::new().fallback(|req: axum::extract::Request| async move {
        let id = crate::http::request_id::RequestId::of(req.headers());
        let err = crate::error::ApiError::NotReady {
            reason: "its corpus is still loading",
        };
        let mut res = crate::http::response::error_response_at(&id, "", &err, false);
        res.headers_mut()
            .insert(&crate::http::response::X_REQUEST_ID, id.header_value());
        res
    })
}

/// Serves the loaded application until the shutdown signal, drains, and exits.
async fn serve_loaded(
    cfg: ServeConfig,
    listener: tokio::net::TcpListener,
    addr: std::net::SocketAddr,
    limits: ConnLimits,
    state: AppState,
    store: CorpusStore,
    exporter: Option<crate::ops::Exporter>,
) -> Result<()> {
    if let (Some(exporter), Some(listen)) = (&exporter, &cfg.metrics_listen) {
        let (state, interval) = (state.clone(), cfg.reload_interval);
        let collect = move || crate::ops::exporter::collect(&state, interval);
        exporter.serve(listen, Arc::new(collect)).await?;
    }
    // Taking in a new version decodes its new partitions and access files and hashes them:
    // milliseconds to tens of them of CPU per publish. On a worker thread that work would hold
    // every request queued behind it (p99 while the poller publishes); on a thread of its own
    // the OS shares the cores between it and the workers, and a profile names it. Its IO,
    // timers and any task it spawns still belong to the serving runtime (`Handle::block_on`
    // drives them there), so connections it opens stay usable by requests.
    // It stops when the process does (`reload_stop`), and the process waits for it: a thread
    // still driving the runtime's timers while the runtime shuts down would panic.
    let (reload_stop, reload_stopped) = watch::channel(false);
    let reload = {
        let (state, handle, interval) = (
            state.clone(),
            tokio::runtime::Handle::current(),
            cfg.reload_interval,
        );
        move || {
            handle.block_on(async move {
                let mut stopped = reload_stopped;
                tokio::select! {
                    () = crate::reload::reload_loop(state, store, interval) => {}
                    _ = stopped.wait_for(|s| *s) => {}
                }
            })
        }
    };
    let reloader = std::thread::Builder::new()
        .name("asof-reload".into())
        .spawn(reload)?;
    // Tests and operators wait for this line (or /health) before sending traffic.
    tracing::info!(%addr, "asof listening on http://{addr}");
    crate::ops::announce(&format!("asof listening on http://{addr}"));
    // On the signal: streams end (each sends a last comment), idle connections close,
    // in-flight requests finish, and after the grace period the process exits whatever
    // connections are still open (a client that stopped reading must not hold a rolling
    // restart).
    let (stop_tx, stop_rx) = watch::channel(false);
    let (hub, drained, drain_delay) = (state.stream().clone(), state.clone(), cfg.drain_delay);
    tokio::spawn(async move {
        shutdown_signal().await;
        // `/ready` turns 503 now; the balancer stops sending within its check interval while
        // requests it still sends are served.
        drained.readiness().drain();
        if !drain_delay.is_zero() {
            tracing::info!(
                drain_secs = drain_delay.as_secs_f64(),
                "draining: /ready answers 503; still serving"
            );
            tokio::time::sleep(drain_delay).await;
        }
        hub.close();
        stop_tx.send_replace(true);
    });
    let open = accept_loop(&listener, app(state.clone()), limits, stop_rx).await;
    drop(listener);
    if !open.wait(cfg.shutdown_grace).await {
        tracing::warn!(
            grace_secs = cfg.shutdown_grace.as_secs(),
            still_open = open.count(),
            "connections still open after the shutdown grace period; exiting without them"
        );
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
    // A reload in progress is abandoned (the next start loads the newest version anyway).
    reload_stop.send_replace(true);
    let joined = tokio::task::spawn_blocking(move || reloader.join());
    if tokio::time::timeout(Duration::from_secs(5), joined)
        .await
        .is_err()
    {
        tracing::warn!("the reload thread did not stop within 5 s; exiting without it");
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

/// What bounds each connection.
#[derive(Debug, Clone, Copy)]
struct ConnLimits {
    header_read_timeout: Duration,
    max_connections: usize,
}

/// The connections still being served after the accept loop stopped.
struct OpenConnections {
    slots: Arc<Semaphore>,
    max: usize,
}

impl OpenConnections {
    fn count(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// Waits until every connection has ended or `grace` has passed; true when all ended.
    async fn wait(&self, grace: Duration) -> bool {
        let all = self.slots.acquire_many(self.max as u32);
        matches!(tokio::time::timeout(grace, all).await, Ok(Ok(_)))
    }
}

/// Accepts connections until `stop` turns true, each served on its own task with the
/// limits; returns the connections still open then (each has been told to finish).
async fn accept_loop<S>(
    listener: &tokio::net::TcpListener,
    app: S,
    limits: ConnLimits,
    stop: watch::Receiver<bool>,
) -> OpenConnections
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(max));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(crate::http::limits::PARSE_BUFFER);
    // No `max_headers`: hyper's own ceiling (100 fields, `limits::MAX_HEADERS`) is the limit
    // answered. Set at all, even to that value, hyper builds its two field arrays anew for
    // every request head (on the heap past 100 entries), where unset they are arrays on the
    // stack: a tenth of a `/health` request's instructions when it was 512 (issue 65).
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    loop {
        // A free slot first: at the limit, new connections wait in the kernel's backlog
        // rather than being accepted and starved.
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            () = stopped(stop.clone()) => break,
        };
        let (tcp, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stopped(stop.clone()) => break,
        };
        let _ = tcp.set_nodelay(true);
        // hyper asks its service by shared reference, and an HTTP/1 connection serves one
        // request at a time: the connection's own copy of the application, in a cell, is
        // called with no copy per request (a copy costs allocations and shared counters).
        let app = RefCell::new(app.clone());
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut req = req.map(axum::body::Body::new);
                req.extensions_mut().insert(ConnectInfo(addr));
                let mut app = app.borrow_mut();
                // Tower's contract: readiness before each call. The application is always
                // ready (routers, CORS and the shared path never wait), so it is asked with a
                // waker that is never woken.
                let ready = app.poll_ready(&mut std::task::Context::from_waker(Waker::noop()));
                debug_assert!(matches!(ready, Poll::Ready(Ok(()))));
                app.call(req)
            });
        let conn = http.serve_connection(TokioIo::new(tcp), service);
        let stop = stop.clone();
        tokio::spawn(async move {
            let _slot = permit;
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = stopped(stop) => {}
            }
            // Idle connections close now; one mid-request finishes its response first.
            conn.as_mut().graceful_shutdown();
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error during shutdown");
            }
        });
    }
    OpenConnections { slots, max }
}
