//! The source adapters, one module per agency format: each turns the bytes of one ingest's
//! files into rows, identity observations and list snapshots under the `crate::adapter`
//! contract. Adding a source is one module here and one arm in [`parse`].

pub mod cftc;
pub mod edgar;
pub mod fda;
pub mod fedreg;
pub mod gleif;
pub mod golden;
pub mod ofac;
pub mod tickers;

#[cfg(test)]
mod robustness;

use asof_engine::model::clock::{Instant, Lane, SourceId};

use crate::adapter::{Context, Input, InputFile, Parsed};
use crate::error::{Error, Result};

/// Parses `files` with the adapter of `ctx.source`. A GLEIF golden copy is read as a stream
/// (`golden`); every other file is loaded whole and parsed by its source's adapter.
pub fn parse(files: &[Input], ctx: &Context) -> Result<Parsed> {
    if ctx.source == SourceId::GleifLei {
        let mut golden = None;
        for f in files {
            if golden::is_golden_copy(&f.head(8)?) {
                golden = Some(f);
            }
        }
        if let Some(f) = golden {
            if files.len() > 1 {
                return Err(Error::parse(
                    f.name(),
                    "file",
                    "a golden copy is ingested alone: it is one capture of the whole list (give API responses and other golden copies in ingests of their own)",
                ));
            }
            let golden = golden::parse(f, ctx)?;
            return Ok(Parsed {
                // A whole golden copy is the whole list on its publish day, as a full OFAC
                // list is (a delta file speaks only for the records it holds).
                whole_days: if golden.full {
                    vec![golden.captured_at.day()]
                } else {
                    vec![]
                },
                golden: Some(golden),
                ..Default::default()
            });
        }
    }
    let files = files.iter().map(Input::load).collect::<Result<Vec<_>>>()?;
    parse_loaded(&files, ctx)
}

/// Parses files already in memory with the adapter of `ctx.source`.
pub fn parse_loaded(files: &[InputFile], ctx: &Context) -> Result<Parsed> {
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
    }
    .into()];
    let ctx = Context {
        source,
        lane,
        captured_at: Instant::parse("2026-02-08T20:20:41Z").ok(),
    };
    Some(parse(&files, &ctx))
}
