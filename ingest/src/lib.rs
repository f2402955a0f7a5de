//! Source adapters: agency files in, corpus rows, identity observations and certified days out.
//!
//! Each adapter is a pure function of a file's bytes (plus the capture instant the caller
//! knows from provenance); publishing goes through `asof_engine::publish`. Sources and their
//! clock rules are documented in docs/sources.md.

pub mod adapter;
pub mod edgar;
pub mod error;
pub mod gleif;
pub mod sample;
pub mod synthetic;
pub mod tickers;

pub use error::{Error, Result};
