//! The HTTP layer every route stands on: the shared state and per-request context, the route
//! entry type, typed query parameters, cursors, the envelope and answer builder, the
//! middleware, and the live stream's shared log. It knows no individual route (those are in `crate::routes`).

pub mod body;
pub mod caching;
pub mod client;
pub mod cursor;
pub mod envelope;
pub mod file_url;
pub mod guard;
pub mod limits;
pub mod middleware;
pub mod observe;
pub mod params;
pub mod range;
pub mod ready;
pub mod receipts;
pub mod request_id;
pub mod response;
pub mod route;
pub mod state;
pub mod stream;

pub use client::ClientAddr;
pub use response::{Reply, answered, ok};
pub use route::{Access, Kind, Route};
pub use state::{AppState, Caller, Ctx, Options, Principal};
