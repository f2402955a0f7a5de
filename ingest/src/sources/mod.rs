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

use asof_engine::clock::{Instant, Lane, SourceId};

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

/// The adapter, lane and file name [`parse_selected`] feeds, by selector byte (modulo the
/// length): every source and every format a file name selects within it.
pub const SELECTED: &[(SourceId, Lane, &str)] = &[
    (
        SourceId::SecEdgar,
        Lane::CertifiedPit,
        "master.20181231.idx",
    ),
    (
        SourceId::SecEdgar,
        Lane::CertifiedPit,
        "company.20221003.idx",
    ),
    (
        SourceId::SecEdgar,
        Lane::CertifiedPit,
        "CIK0000940418__20260208T202041Z.json",
    ),
    (
        SourceId::SecEdgar,
        Lane::ForwardFirstSeen,
        "start_00000.atom",
    ),
    (
        SourceId::SecEdgar,
        Lane::CertifiedPit,
        "company_tickers_exchange.csv",
    ),
    (
        SourceId::SecEdgar,
        Lane::CertifiedPit,
        "company_tickers.json",
    ),
    (
        SourceId::FederalRegisterPi,
        Lane::CertifiedPit,
        "public_inspection.csv",
    ),
    (
        SourceId::FederalRegisterPi,
        Lane::CertifiedPit,
        "inspection-search.json",
    ),
    (SourceId::CftcCot, Lane::CertifiedPit, "f_year.txt"),
    (SourceId::OfacSdn, Lane::CertifiedPit, "sdn.csv"),
    (SourceId::FdaDrug, Lane::CertifiedPit, "drug.json"),
    (SourceId::FdaDevice, Lane::CertifiedPit, "device.csv"),
    (SourceId::FdaFood, Lane::CertifiedPit, "food.json"),
    (SourceId::GleifLei, Lane::CertifiedPit, "lei_records.json"),
];

/// One fuzzing case: the first byte of `data` selects an entry of [`SELECTED`], the rest is
/// the file's bytes. The AFL target (`fuzz/`) and the replay of its kept inputs
/// (`robustness.rs`) share it, so a crash found by the fuzzer replays exactly.
pub fn parse_selected(data: &[u8]) -> Option<Result<Parsed>> {
    let (&which, bytes) = data.split_first()?;
    let (source, lane, name) = SELECTED[usize::from(which) % SELECTED.len()];
    let files = [InputFile {
        name: name.to_owned(),
        bytes: bytes.to_vec(),
    }];
    let ctx = Context {
        source,
        lane,
        captured_at: Instant::parse("2026-02-08T20:20:41Z").ok(),
    };
    Some(parse(&files, &ctx))
}
