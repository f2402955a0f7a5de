//! Running a test on both state-store backends: `on_both! { async fn name() { ... } }`
//! declares `sqlite::name` and `postgres::name` (the latter in a PostgreSQL schema of its
//! own, dropped when the test passes; skipped with a notice when PostgreSQL is unreachable,
//! a failure under `ASOF_REQUIRE_POSTGRES`).

use std::sync::Arc;

use asof_server::Options;
use asof_server::state::store::{self, StateStore};

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
            let schema = PgSchema::make("asof_accounts").await;
            SCHEMAS.with(|s| s.borrow_mut().push(schema.name.clone()));
            schema.store().await
        }
    };
    setup_with(dir, store, opts).await
}

/// A PostgreSQL schema of a test's own on the shared server, so tests neither see nor leave
/// each other's rows; dropped by [`PgSchema::drop`] when the test passes.
#[derive(Debug)]
pub struct PgSchema {
    pub name: String,
}

impl PgSchema {
    /// A fresh schema named `{prefix}_{uuid}`.
    pub async fn make(prefix: &str) -> PgSchema {
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        admin(&format!("CREATE SCHEMA \"{name}\"")).await;
        PgSchema { name }
    }

    /// A fresh schema for `test`, or `None` (with the skip notice) when PostgreSQL does not
    /// answer and is not required.
    pub async fn make_for(test: &str, prefix: &str) -> Option<PgSchema> {
        if !postgres_reachable(test).await {
            return None;
        }
        Some(Self::make(prefix).await)
    }

    /// The server's URL with every connection's `search_path` set to this schema (what
    /// `asof serve --database-url` and `state::store::open` take).
    pub fn url(&self) -> String {
        let url = postgres_url();
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options=-c%20search_path%3D{}", self.name)
    }

    /// The state store in this schema, its tables made.
    pub async fn store(&self) -> Arc<dyn StateStore> {
        store::open(&self.url()).await.unwrap()
    }

    pub async fn drop(self) {
        admin(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name)).await;
    }
}

/// Runs one statement on the shared server outside any test schema. The statements are
/// built from generated names only (identifiers cannot be bound).
async fn admin(statement: &str) {
    let pool = sqlx::PgPool::connect(&postgres_url()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
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
                        for name in SCHEMAS.with(|s| s.take()) {
                            PgSchema { name }.drop().await;
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
