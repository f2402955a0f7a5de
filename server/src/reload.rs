//! Corpus reload: poll the pointer, verify a new version fully, then swap it in atomically.

use std::time::Duration;

use asof_engine::{Corpus, CorpusStore};

use crate::http::AppState;

/// Checks the pointer once; returns the version now served when it changed.
pub async fn reload_once(state: &AppState, store: &CorpusStore) -> Option<String> {
    let current = state.corpus();
    let version = match store.current_version().await {
        Ok(Some(v)) => v,
        Ok(None) => {
            tracing::error!(
                corpus = store.display(),
                "corpus pointer vanished; keeping {}",
                current.version()
            );
            return None;
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot read the corpus pointer; keeping {}", current.version());
            return None;
        }
    };
    if version == current.version() {
        return None;
    }
    // A version that fails verification is refused and the old one stays served.
    if let Err(e) = asof_engine::verify::verify(store, Some(&version)).await {
        tracing::error!(error = %e, new = %version, kept = %current.version(), "REFUSED corpus reload: new version failed verification");
        return None;
    }
    match Corpus::open_version(store.clone(), &version).await {
        Ok(c) => {
            state.swap_corpus(c);
            tracing::info!(from = %current.version(), to = %version, "corpus reloaded");
            Some(version)
        }
        Err(e) => {
            tracing::error!(error = %e, new = %version, "REFUSED corpus reload: cannot load new version");
            None
        }
    }
}

/// Polls every `interval` until the process ends; also drops old rate-limit windows.
pub async fn reload_loop(state: AppState, store: CorpusStore, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        reload_once(&state, &store).await;
        let cutoff = asof_engine::Instant::now().micros() - 10 * 60_000_000;
        if let Err(e) = state.store().purge_windows(cutoff).await {
            tracing::warn!(error = %e, "could not purge old rate-limit windows");
        }
    }
}
