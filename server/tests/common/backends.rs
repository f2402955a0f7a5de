//! Running a test on both state-store backends: `on_both! { async fn name() { ... } }`
//! declares `sqlite::name` and `postgres::name` (the latter in a PostgreSQL schema of its
//! own, dropped when the test passes; skipped with a notice when PostgreSQL is unreachable,
//! a failure under `ASOF_REQUIRE_POSTGRES`).

use asof_server::Options;
use asof_server::state::store;

use super::{T, setup_with, sqlite_store};

/// Which state store a test runs on: each test declared with `on_both!` runs once on SQLite
/// (`sqlite::...`) and once on PostgreSQL (`postgres::...`, in a schema of its own).
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

tokio::task_local! {
    pub static BACKEND: Backend;
    /// PostgreSQL schemas a test made, dropped when it passes.
    pub static SCHEMAS: std::cell::RefCell<Vec<String>>;
}

pub fn postgres_url() -> String {
    std::env::var("ASOF_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The state of a test, on the backend it runs on.
pub async fn on_backend(opts: Options) -> T {
    let dir = tempfile::tempdir().unwrap();
    let store = match BACKEND.get() {
        Backend::Sqlite => sqlite_store(dir.path()).await,
        Backend::Postgres => {
            let schema = format!("asof_accounts_{}", uuid::Uuid::new_v4().simple());
            SCHEMAS.with(|s| s.borrow_mut().push(schema.clone()));
            store::open_postgres_schema(&postgres_url(), &schema)
                .await
                .unwrap()
        }
    };
    setup_with(dir, store, opts).await
}

/// Whether PostgreSQL answers; without it the `postgres::` tests say they are skipped (in CI,
/// `ASOF_REQUIRE_POSTGRES` makes that a failure).
pub async fn postgres_reachable(test: &str) -> bool {
    match sqlx::PgPool::connect(&postgres_url()).await {
        Ok(p) => {
            p.close().await;
            true
        }
        Err(e) => {
            assert!(
                std::env::var("ASOF_REQUIRE_POSTGRES").is_err(),
                "PostgreSQL required but unreachable: {e}"
            );
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: postgres::{test} ({e}){HOW_TO_RUN_POSTGRES}"
            );
            false
        }
    }
}

/// Declares each test twice: on SQLite and on PostgreSQL.
#[macro_export]
macro_rules! on_both {
    ($(async fn $name:ident() $body:block)*) => {
        mod sqlite {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    $crate::common::backends::BACKEND
                        .scope($crate::common::backends::Backend::Sqlite, async $body)
                        .await
                }
            )*
        }
        mod postgres {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    use $crate::common::backends::*;
                    if !postgres_reachable(stringify!($name)).await {
                        return;
                    }
                    let test = async {
                        $body;
                        for schema in SCHEMAS.with(|s| s.take()) {
                            asof_server::state::store::drop_postgres_schema(&postgres_url(), &schema)
                                .await
                                .unwrap();
                        }
                    };
                    SCHEMAS
                        .scope(
                            std::cell::RefCell::new(Vec::new()),
                            BACKEND.scope(Backend::Postgres, test),
                        )
                        .await
                }
            )*
        }
    };
}

/// What a PostgreSQL test's skip message adds: how to run it.
pub const HOW_TO_RUN_POSTGRES: &str = " (start PostgreSQL at 127.0.0.1:5432 with a database `test`, or set ASOF_TEST_POSTGRES_URL; ASOF_REQUIRE_POSTGRES=1 makes this a failure)";
