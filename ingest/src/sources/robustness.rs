//! Every adapter fed mutated real files (bytes flipped, cut, deleted and inserted where the
//! formats are most fragile): an adapter answers rows or an error naming the file, never a
//! panic; `ASOF_PARSER_CASES=100000` runs a long search. The coverage-guided search is AFL++
//! (`fuzz/run.sh`); its seeds and every crashing input it found (`fuzz/crashes/parse/`) are
//! replayed here on every test run.

use asof_engine::model::clock::{Instant, Lane, SourceId};
use proptest::prelude::*;

use crate::adapter::{Context, Input, InputFile};

/// A real file of `snapshots/sources` (its first `lines` lines when given), under the name an
/// operator would pass.
fn seed(rel: &str, name: &str, lines: Option<usize>) -> InputFile {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../snapshots/sources")
        .join(rel);
    let mut bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if let Some(n) = lines {
        let end = bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(n - 1)
            .map_or(bytes.len(), |(i, _)| i + 1);
        bytes.truncate(end);
    }
    InputFile {
        name: name.to_owned(),
        bytes,
    }
}

/// One ingest's worth of files per source and format.
fn seeds() -> Vec<(SourceId, Lane, Vec<InputFile>)> {
    use Lane::{CertifiedPit as Pit, ForwardFirstSeen as Fwd};
    use SourceId::*;
    vec![
        (
            SecEdgar,
            Pit,
            vec![seed(
                "sec.edgar/daily-index/master.20181231.TRUNCATED.idx",
                "master.20181231.idx",
                None,
            )],
        ),
        (
            SecEdgar,
            Pit,
            vec![seed(
                "sec.edgar/daily-index/edgecase_badform.idx.txt",
                "company.20221003.idx",
                None,
            )],
        ),
        (
            SecEdgar,
            Pit,
            vec![seed(
                "sec.edgar/submissions/CIK0000940418__20260208T202041Z.json",
                "CIK0000940418__20260208T202041Z.json",
                None,
            )],
        ),
        (
            SecEdgar,
            Fwd,
            vec![seed(
                "sec.edgar/current-feed-atom_2026-01-12/start_00000.atom",
                "start_00000.atom",
                Some(120),
            )],
        ),
        (
            SecEdgar,
            Pit,
            vec![seed(
                "sec.edgar.ticker_history/company_tickers_exchange_snapshots_edgartools/company_tickers_exchange_committed_2026-01-29.csv",
                "company_tickers_exchange.csv",
                Some(40),
            )],
        ),
        (
            FederalRegisterPi,
            Pit,
            vec![seed(
                "us.federal_register.pi/gwu_midnight_rules_2017_2021/public_inspection_midnight_documents_all.csv",
                "public_inspection.csv",
                Some(20),
            )],
        ),
        (
            FederalRegisterPi,
            Pit,
            vec![seed(
                "us.federal_register.pi/api_json/inspection-search.json",
                "inspection-search.json",
                None,
            )],
        ),
        (
            CftcCot,
            Pit,
            vec![seed(
                "us.cftc.cot/disaggregated_futures_only_2021/f_year.txt",
                "f_year.txt",
                Some(12),
            )],
        ),
        (
            OfacSdn,
            Pit,
            vec![seed(
                "us.ofac.sdn/moov_2019-01/sdn.csv",
                "sdn.csv",
                Some(40),
            )],
        ),
        (
            FdaDrug,
            Pit,
            vec![seed(
                "us.fda.enforcement.drug/openfda_doc_example/_examples.json",
                "drug.json",
                None,
            )],
        ),
        (
            FdaDevice,
            Pit,
            vec![seed(
                "us.fda.enforcement.device/openfda_api_NY_subset/medical-device-recalls.csv",
                "device.csv",
                Some(15),
            )],
        ),
        (
            FdaFood,
            Pit,
            vec![seed(
                "us.fda.enforcement.food/openfda_doc_example/_examples.json",
                "food.json",
                None,
            )],
        ),
        (
            GleifLei,
            Pit,
            vec![seed(
                "gleif.lei/api_json_gleif-rs_2025-05/lei_records/multi_lei_records.json",
                "lei_records.json",
                None,
            )],
        ),
        (
            GleifLei,
            Pit,
            vec![seed(
                "gleif.lei/api_json_gleif-rs_2025-05/field_modifications/field_modifications_549300YX4S1LLSMK2627.json",
                "field_modifications.json",
                None,
            )],
        ),
        (
            GleifLei,
            Pit,
            // A golden copy's header and first 20 records, under a name without an instant
            // (the capture comes from the context).
            vec![seed(
                "gleif.lei/golden_copy_from_api/20250515-0000-gleif-goldencopy-lei2-golden-copy.csv",
                "lei2-golden-copy.csv",
                Some(21),
            )],
        ),
    ]
}

/// One change to a file's bytes.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(prop::sample::Index, u8),
    Delete(prop::sample::Index, usize),
    Insert(prop::sample::Index, Vec<u8>),
    Truncate(prop::sample::Index),
}

/// Bytes that matter to the formats: separators, quotes, brackets, digits, a BOM, invalid UTF-8.
fn fragile() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(b",|\"'\n\r\t<>/{}[]:-.0123456789 \xEF\xBB\xBF\xFF\xC3&;#Z".to_vec()),
        1..8,
    )
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        2 => (any::<prop::sample::Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        4 => (any::<prop::sample::Index>(), fragile()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => any::<prop::sample::Index>().prop_map(Mutation::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    match m {
        Mutation::Flip(i, b) => {
            let i = i.index(bytes.len());
            bytes[i] = *b;
        }
        Mutation::Delete(i, n) => {
            let i = i.index(bytes.len());
            let end = (i + n).min(bytes.len());
            bytes.drain(i..end);
        }
        Mutation::Insert(i, b) => {
            let i = i.index(bytes.len());
            bytes.splice(i..i, b.iter().copied());
        }
        Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len())),
    }
}

fn parse(source: SourceId, lane: Lane, files: &[InputFile]) {
    let ctx = Context {
        source,
        lane,
        captured_at: Instant::parse("2026-02-08T20:20:41Z").ok(),
    };
    // Rows or an error; a panic fails the property. A golden copy's entries are sorted too
    // (duplicates are found there).
    let inputs: Vec<Input> = files.iter().cloned().map(Input::from).collect();
    if let Ok(parsed) = super::parse(&inputs, &ctx)
        && let Some(golden) = parsed.golden
        && let Ok(sorted) = golden.entries.into_sorted()
    {
        sorted.for_each(drop);
    }
}

fn cases() -> u32 {
    std::env::var("ASOF_PARSER_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

#[test]
fn every_seed_parses_unmutated() {
    for (source, lane, files) in seeds() {
        let ctx = Context {
            source,
            lane,
            captured_at: Instant::parse("2026-02-08T20:20:41Z").ok(),
        };
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        // Seeds must be accepted, or the mutations test refusals only. The bad-form index is
        // an edge case kept for the refusal paths.
        let inputs: Vec<Input> = files.iter().cloned().map(Input::from).collect();
        let r = super::parse(&inputs, &ctx);
        if names != ["company.20221003.idx"] {
            assert!(r.is_ok(), "{source} {names:?}: {:?}", r.err());
        }
    }
}

/// The files of one kept-input folder of `fuzz/` (none when it does not exist).
fn kept(dir: &str) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(dir);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, Vec<u8>)> = entries
        .map(|e| {
            let path = e.expect("fuzz folder entry").path();
            let bytes = std::fs::read(&path).expect("kept fuzz input");
            (path.display().to_string(), bytes)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_fuzzers_seeds_select_every_adapter_and_are_accepted() {
    let seeds = kept("seeds/parse");
    assert!(
        seeds.len() >= 13,
        "fuzz/seeds/parse holds {} files",
        seeds.len()
    );
    let mut selected = std::collections::BTreeSet::new();
    for (path, data) in &seeds {
        let entry = super::SELECTED[usize::from(data[0]) % super::SELECTED.len()];
        selected.insert(entry.0);
        let r = super::parse_selected(data).expect("a seed is not empty");
        // The bad-form index is kept for the refusal paths; every other seed parses.
        if entry.2 != "company.20221003.idx" {
            assert!(r.is_ok(), "{path}: {:?}", r.err());
        }
    }
    assert_eq!(
        selected.len(),
        SourceId::ALL.len(),
        "a source without a seed: {selected:?}"
    );
}

#[test]
fn every_input_the_fuzzer_found_crashing_is_now_rows_or_an_error() {
    for (path, data) in kept("crashes/parse") {
        eprintln!("replaying {path}");
        let _ = super::parse_selected(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 500,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_real_files_give_rows_or_an_error_never_a_panic(
        which in any::<prop::sample::Index>(),
        file in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let all = seeds();
        let (source, lane, mut files) = all[which.index(all.len())].clone();
        let f = file.index(files.len());
        for m in &mutations {
            apply(&mut files[f].bytes, m);
        }
        parse(source, lane, &files);
    }

    #[test]
    fn arbitrary_bytes_under_any_name_give_an_error_never_a_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        name in prop::sample::select(vec![
            "master.20181231.idx", "CIK0000940418__20260208T202041Z.json", "start_00000.atom",
            "company_tickers.json", "company_tickers.csv", "index.json", "sdn.csv", "alt.csv",
            "f_year.txt", "drug.json", "device.csv", "lei.json", "x.csv",
        ]),
        source in prop::sample::select(SourceId::ALL.to_vec()),
    ) {
        let files = vec![InputFile { name: name.to_owned(), bytes }];
        parse(source, Lane::CertifiedPit, &files);
    }
}
