//! AFL target: one input file for an ingest adapter. The first byte picks the source and the
//! name the file is given (names select the format within a source, as on the command line);
//! the rest is the file's bytes. An adapter must answer rows or an error: a panic is a crash.

use asof_engine::clock::{Instant, Lane, SourceId};
use asof_ingest::adapter::{Context, InputFile};

/// (source, lane, file name) by selector byte.
const TARGETS: &[(SourceId, Lane, &str)] = &[
    (SourceId::SecEdgar, Lane::CertifiedPit, "master.20181231.idx"),
    (SourceId::SecEdgar, Lane::CertifiedPit, "company.20221003.idx"),
    (SourceId::SecEdgar, Lane::CertifiedPit, "CIK0000940418__20260208T202041Z.json"),
    (SourceId::SecEdgar, Lane::ForwardFirstSeen, "start_00000.atom"),
    (SourceId::SecEdgar, Lane::CertifiedPit, "company_tickers_exchange.csv"),
    (SourceId::SecEdgar, Lane::CertifiedPit, "company_tickers.json"),
    (SourceId::FederalRegisterPi, Lane::CertifiedPit, "public_inspection.csv"),
    (SourceId::FederalRegisterPi, Lane::CertifiedPit, "inspection-search.json"),
    (SourceId::CftcCot, Lane::CertifiedPit, "f_year.txt"),
    (SourceId::OfacSdn, Lane::CertifiedPit, "sdn.csv"),
    (SourceId::FdaDrug, Lane::CertifiedPit, "drug.json"),
    (SourceId::FdaDevice, Lane::CertifiedPit, "device.csv"),
    (SourceId::FdaFood, Lane::CertifiedPit, "food.json"),
    (SourceId::GleifLei, Lane::CertifiedPit, "lei_records.json"),
];

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Some((&which, bytes)) = data.split_first() else {
            return;
        };
        let (source, lane, name) = TARGETS[usize::from(which) % TARGETS.len()];
        let files = [InputFile {
            name: name.to_owned(),
            bytes: bytes.to_vec(),
        }];
        let ctx = Context {
            source,
            lane,
            captured_at: Instant::parse("2026-02-08T20:20:41Z").ok(),
        };
        let _ = asof_ingest::sources::parse(&files, &ctx);
    });
}
