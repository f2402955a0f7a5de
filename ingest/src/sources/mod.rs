//! The source adapters, one module per agency format: each turns the bytes of one ingest's
//! files into rows, identity observations and list snapshots under the `crate::adapter`
//! contract. Adding a source is one module here and one arm in [`parse`].

pub mod cftc;
pub mod edgar;
pub mod fda;
pub mod fedreg;
pub mod gleif;
pub mod ofac;
pub mod tickers;

#[cfg(test)]
mod robustness;

use asof_engine::SourceId;

use crate::adapter::{Context, InputFile, Parsed};
use crate::error::Result;

/// Parses `files` with the adapter of `ctx.source`.
pub fn parse(files: &[InputFile], ctx: &Context) -> Result<Parsed> {
    match ctx.source {
        SourceId::SecEdgar => edgar::parse(files, ctx),
        SourceId::FederalRegisterPi => fedreg::parse(files, ctx),
        SourceId::CftcCot => cftc::parse(files, ctx),
        SourceId::OfacSdn => ofac::parse(files, ctx),
        SourceId::FdaDrug | SourceId::FdaDevice | SourceId::FdaFood => fda::parse(files, ctx),
        SourceId::GleifLei => gleif::parse(files, ctx),
    }
}
