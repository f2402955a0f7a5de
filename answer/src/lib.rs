//! The answer layer: every answer of the data routes as a value, whoever renders it.
//!
//! A front end parses a query with the route's query struct ([`params`], [`data`],
//! [`sample`]), calls one answer function with the corpus version and the [`Pager`], and
//! renders what comes back: an [`Answer`] (results, the cut, coverage, the next cursor) or an
//! [`Error`] (a refusal; a hole is [`Error::CoverageMissing`], made by [`Error::hole`] alone).
//! The HTTP handlers and MCP tools of `asof-server`, `asof query` and the in-process API of
//! the Python module ([`local`]) are such front ends. Envelopes ([`envelope`]) are the JSON
//! every one of them writes.
//!
//! This crate knows no transport: no HTTP types, no state store, no keys. It stands on the
//! engine alone, so the Python module builds without the server.

pub mod answer;
pub mod data;
pub mod envelope;
pub mod error;
pub mod local;
pub mod meta;
pub mod pager;
pub mod params;
pub mod sample;
pub mod versions;

pub use answer::{Answer, NewsPage};
pub use error::{Error, Result};
pub use pager::{Op, Pager};
