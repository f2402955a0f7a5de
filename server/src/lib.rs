//! asof server library: the HTTP service over the answer layer (`asof-answer`) and the as-of
//! engine, laid out by area, each layer using only the ones below it:
//!
//! - `error`, `plan`, `obs`: the server's error type, the data plans, and the metrics' names;
//! - `state`: the state store and the in-process layers in front of it;
//! - `signin`: e-mail links, OpenID Connect providers and browser sessions;
//! - `billing`: the payment processor (outbound calls, signed inbound notifications);
//! - `connector`: bring-your-own-key daily bars from market-data vendors;
//! - `http`: shared state, route entries, typed queries, cursors, envelopes, middleware;
//! - `openapi`: the description, generated from route entries;
//! - `mcp`: the MCP endpoint, re-dispatching tool calls through the router;
//! - `routes`: the route table and the handlers, by area;
//! - `app`, `serve`, `reload`: the application, the listening process and its corpus reloads;
//! - `ops`: the metrics listener, the per-request metrics and access log;
//! - `secret`: setting types whose `Debug` never prints the secret they carry.

pub mod app;
pub mod billing;
pub mod connector;
pub mod error;
pub mod http;
pub mod json;
pub mod mcp;
pub mod obs;
pub mod openapi;
pub mod ops;
pub mod plan;
pub mod reload;
pub mod routes;
pub mod secret;
pub mod serve;
pub mod signin;
pub mod state;

pub use app::{App, app};
pub use http::{AppState, Options};
