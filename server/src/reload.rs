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
    let started = std::time::Instant::now();
    // The new manifest is read (and hash-checked) once; verification and the open use it.
    let manifest = match store.manifest(&version).await {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(error = %e, new = %version, kept = %current.version(), "REFUSED corpus reload: cannot read the new manifest");
            return None;
        }
    };
    // A version that fails verification is refused and the old one stays served.
    // Objects the served version holds were checked when it was loaded (and are
    // content-addressed): only the new ones are read.
    if let Err(e) =
        asof_engine::verify::verify_manifest(store, &version, &manifest, Some(current.manifest()))
            .await
    {
        tracing::error!(error = %e, new = %version, kept = %current.version(), "REFUSED corpus reload: new version failed verification");
        return None;
    }
    let verified = started.elapsed();
    // What the served version already derived from objects the new one shares (the identity
    // index, each partition's supersessions) is taken over, not built again.
    match Corpus::open_after(store.clone(), &version, manifest, Some(&*current)).await {
        Ok(c) => {
            let manifest = c.manifest().clone();
            state.swap_corpus(c);
            // Both durations, so an operator sees what a publish costs each replica.
            tracing::info!(
                from = %current.version(),
                to = %version,
                verify_ms = verified.as_millis() as u64,
                open_ms = (started.elapsed() - verified).as_millis() as u64,
                "corpus reloaded"
            );
            // Streams get the rows the new version (and any between) added.
            if let Err(e) = state
                .stream()
                .advance(store, current.manifest(), &version, &manifest)
                .await
            {
                tracing::error!(error = %e, to = %version, "stream: cannot read what the new version added; streams miss it until they reconnect");
            }
            // The old version (its access index is hundreds of thousands of slots at scale)
            // is freed off the serving threads when this is its last reference; requests
            // still holding it free it when they finish.
            tokio::task::spawn_blocking(move || drop(current));
            Some(version)
        }
        Err(e) => {
            tracing::error!(error = %e, new = %version, "REFUSED corpus reload: cannot load new version");
            None
        }
    }
}

/// Polls every `interval` until the process ends; about once a minute also drops old
/// rate-limit windows (a write to the state store, which a sub-second pointer check must not
/// bring along each time).
pub async fn reload_loop(state: AppState, store: CorpusStore, interval: Duration) {
    const PURGE_EVERY: Duration = Duration::from_secs(60);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut purged = tokio::time::Instant::now();
    loop {
        tick.tick().await;
        reload_once(&state, &store).await;
        if purged.elapsed() < PURGE_EVERY {
            continue;
        }
        purged = tokio::time::Instant::now();
        let cutoff = asof_engine::Instant::now().micros() - 10 * 60_000_000;
        if let Err(e) = state.store().purge_windows(cutoff).await {
            tracing::warn!(error = %e, "could not purge old rate-limit windows");
        }
    }
}
