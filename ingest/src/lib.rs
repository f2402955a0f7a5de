//! Source adapters: agency files in, corpus rows, identity observations and certified days out.
//!
//! - `adapter`: the contract every adapter meets and the helpers they share;
//! - `sources/`: one adapter per agency format;
//! - `entries`: a list snapshot too big to hold, sorted by entity through temporary files;
//! - `pipeline`: one all-or-nothing ingest of one source's files as a new corpus version;
//! - `poll`: `asof poll`, the live lane (EDGAR's current-filings feed, politely, into the
//!   pipeline);
//! - `corpora/`: whole corpora built in one go (the shipped sample, the synthetic bench corpus).
//!
//! Each adapter is a pure function of a file's bytes (plus the capture instant the caller
//! knows from provenance); publishing goes through `asof_engine::write::publish`. Sources and their
//! clock rules are documented in docs/sources.md.

pub mod adapter;
pub mod corpora;
pub mod entries;
pub mod error;
pub mod pipeline;
pub mod poll;
pub mod sources;

pub use error::{Error, Result};
