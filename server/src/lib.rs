//! asof server library: the HTTP service over the as-of engine (router, middleware, state
//! store, auth, cursors, audit receipts) and the envelope shared with the CLI.

pub mod account;
pub mod app;
pub mod audit;
pub mod audit_log;
pub mod auth;
pub mod cursor;
pub mod discovery;
pub mod envelope;
pub mod error;
pub mod key_cache;
pub mod mcp;
pub mod meta;
pub mod openapi;
pub mod params;
pub mod rate;
pub mod reload;
pub mod routes;
pub mod serve;
pub mod state_store;

pub use app::{AppState, app};
