//! One test suite for the `StateStore` trait, run against SQLite and against PostgreSQL
//! (`ASOF_TEST_POSTGRES_URL`, default postgres://postgres@127.0.0.1:5432/test). Without a
//! reachable server the PostgreSQL test prints that it is SKIPPED, by name.

use std::sync::Arc;

use asof_engine::Instant;
use asof_server::auth::Plan;
use asof_server::state_store::{self, StateStore, hash_key};

async fn suite(s: Arc<dyn StateStore>) {
    let u = s
        .upsert_user("a@example.com", Plan::Researcher)
        .await
        .unwrap();
    assert_eq!(
        s.upsert_user("a@example.com", Plan::Desk).await.unwrap().id,
        u.id,
        "same user"
    );
    let (k, raw) = s.create_key(&u.id, "laptop", None).await.unwrap();
    assert!(raw.starts_with("svc_live_") && raw.starts_with(&k.prefix));
    let (found, owner) = s.key_by_hash(&hash_key(&raw)).await.unwrap().unwrap();
    assert_eq!((found.id.clone(), owner.plan), (k.id.clone(), Plan::Desk));
    assert!(
        s.key_by_hash(&hash_key("svc_live_other"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(s.list_keys(&u.id).await.unwrap().len(), 1);
    assert!(
        !s.revoke_key("usr_someone_else", &k.id, Instant::now())
            .await
            .unwrap()
    );
    assert!(s.revoke_key(&u.id, &k.id, Instant::now()).await.unwrap());
    assert!(
        s.key_by_hash(&hash_key(&raw))
            .await
            .unwrap()
            .unwrap()
            .0
            .revoked_at
            .is_some()
    );
    let a = s.secret("cursor_hmac").await.unwrap();
    assert_eq!(
        s.secret("cursor_hmac").await.unwrap(),
        a,
        "a secret is created once"
    );
    assert_eq!(s.hit("key:x", 60_000_000).await.unwrap(), 1);
    assert_eq!(s.hit("key:x", 60_000_000).await.unwrap(), 2);
    assert_eq!(
        s.hit("key:x", 120_000_000).await.unwrap(),
        1,
        "a new window starts at one"
    );
    assert_eq!(s.purge_windows(120_000_000).await.unwrap(), 1);
}

#[tokio::test]
async fn sqlite_state_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    suite(
        state_store::open(dir.path().join("s.db").to_str().unwrap())
            .await
            .unwrap(),
    )
    .await;
}

#[tokio::test]
async fn postgres_state_store_suite() {
    let url = std::env::var("ASOF_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("asof_test_{}", uuid::Uuid::new_v4().simple());
    let store = match state_store::open_postgres_schema(&url, &schema).await {
        Ok(s) => s,
        Err(e) if std::env::var("ASOF_REQUIRE_POSTGRES").is_err() => {
            eprintln!("SKIPPED: postgres_state_store_suite (no PostgreSQL at {url}: {e})");
            println!("SKIPPED: postgres_state_store_suite");
            return;
        }
        Err(e) => panic!("PostgreSQL required (ASOF_REQUIRE_POSTGRES) but unreachable: {e}"),
    };
    suite(store).await;
    state_store::drop_postgres_schema(&url, &schema)
        .await
        .unwrap();
}
