//! Corpus reload: poll the pointer, verify a new version fully, then swap it in atomically.

use std::time::Duration;

use asof_engine::{Corpus, CorpusStore};

use crate::http::AppState;
use crate::state::store::StateStore;

/// Checks the pointer once; returns the version now served when it changed.
pub async fn reload_once(state: &AppState, store: &CorpusStore) -> Option<String> {
    let current = state.corpus();
    let version = match store.current_version().await {
        Ok(Some(v)) => v,
        Ok(None) => {
            refused("pointer_missing");
            tracing::error!(
                corpus = store.display(),
                "corpus pointer vanished; keeping {}",
                current.version()
            );
            return None;
        }
        Err(e) => {
            refused("pointer_unreadable");
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
            refused("manifest");
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
        refused("verification");
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
            metrics::counter!(crate::obs::CORPUS_RELOADS).increment(1);
            metrics::histogram!(crate::obs::CORPUS_RELOAD_DURATION).record(started.elapsed());
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
            refused("open");
            tracing::error!(error = %e, new = %version, "REFUSED corpus reload: cannot load new version");
            None
        }
    }
}

/// Counts a pointer check or a new version refused, by why (`crate::obs`).
fn refused(reason: &'static str) {
    metrics::counter!(crate::obs::CORPUS_RELOAD_FAILURES, "reason" => reason).increment(1);
}

/// Polls every `interval` until the process ends; about once a minute also runs
/// [`housekeeping`] (writes to the state store, which a sub-second pointer check must not
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
        housekeeping(state.store().as_ref(), asof_engine::Instant::now()).await;
    }
}

/// The longest rate window any route counts in (e-mail sign-in's, 15 minutes): windows are
/// dropped only once the window after them ended too, whatever their length, because the
/// sign-in limits slide over two windows (`signin::mail::MailWindows`) and would start
/// again too early without the previous one.
const LONGEST_WINDOW: Duration = crate::signin::mail::MAIL_WINDOW;

/// What the state store no longer needs at `now`: rate windows that ended (with a minute to
/// spare for clocks of replicas that differ), sign-in links that expired and sessions that
/// ended or expired. Failures are logged; the next round tries again.
pub async fn housekeeping(store: &dyn StateStore, now: asof_engine::Instant) {
    let longest = i64::try_from(LONGEST_WINDOW.as_micros()).unwrap_or(i64::MAX);
    let cutoff = now.micros() - 2 * longest - 60_000_000;
    if let Err(e) = store.purge_windows(cutoff).await {
        tracing::warn!(error = %e, "could not purge old rate-limit windows");
    }
    match store.purge_sign_ins(now).await {
        Ok(n) if n > 0 => tracing::debug!(purged = n, "expired sign-in links and sessions dropped"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "could not purge expired sign-in links and sessions"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::{LinkState, SignInLink};

    const MINUTE: i64 = 60_000_000;

    #[tokio::test]
    async fn housekeeping_keeps_a_sign_in_window_until_the_next_one_ends_and_drops_expired_links_and_sessions()
     {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::state::open(&format!("sqlite://{}/state.db", dir.path().display()))
            .await
            .unwrap();
        let now = asof_engine::Instant::parse("2026-11-27T12:00:00Z").unwrap();
        let at = |m: i64| asof_engine::Instant::from_micros(now.micros() + m * MINUTE);
        // A 15-minute sign-in window that started 12 minutes ago holds five links.
        let live = now.micros() - 12 * MINUTE;
        for _ in 0..5 {
            store.hit("signin-to:x", live).await.unwrap();
        }
        // A window that ended two minutes ago: the limits slide, so it still weighs on the
        // window after it, and stays.
        let previous = now.micros() - 17 * MINUTE;
        store.hit("signin-to:z", previous).await.unwrap();
        // A window whose next window ended too.
        let ended = now.micros() - 32 * MINUTE;
        store.hit("signin-to:y", ended).await.unwrap();
        store
            .put_sign_in_link(&SignInLink::new(
                "expired",
                "a@example.com",
                "b",
                at(-20),
                at(-5),
            ))
            .await
            .unwrap();
        store
            .put_sign_in_link(&SignInLink::new(
                "live",
                "b@example.com",
                "b",
                at(-2),
                at(13),
            ))
            .await
            .unwrap();
        let user = store.sign_in_user("c@example.com").await.unwrap();
        store
            .create_session("old", &user.id, "email", at(-100), at(-1))
            .await
            .unwrap();
        assert!(store.session("old").await.unwrap().is_some());
        housekeeping(store.as_ref(), now).await;
        assert_eq!(
            store.hit("signin-to:x", live).await.unwrap(),
            6,
            "a window still running keeps its count"
        );
        assert_eq!(
            store.hit("signin-to:z", previous).await.unwrap(),
            2,
            "the window before the running one is kept"
        );
        assert_eq!(
            store.hit("signin-to:y", ended).await.unwrap(),
            1,
            "a window two windows back is gone"
        );
        assert!(matches!(
            store.use_sign_in_link("expired", "b", now).await.unwrap(),
            LinkState::Unknown
        ));
        assert!(matches!(
            store.use_sign_in_link("live", "b", now).await.unwrap(),
            LinkState::SignIn { .. }
        ));
        assert!(
            store.session("old").await.unwrap().is_none(),
            "an expired session is dropped"
        );
    }
}
