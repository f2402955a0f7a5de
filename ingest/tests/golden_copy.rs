//! GLEIF golden copies through `asof ingest`: a real-derived LEI-CDF CSV read from disk as a
//! stream, compared with the list state as a stream, answers read back through the engine.

mod common;

use common::{at, run};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use asof_engine::format::lists::KIND_LIST;
use asof_engine::read::corpus::RecordLookup;
use asof_engine::{Corpus, CorpusStore, Lane, SourceId, VisibleBy};
use asof_ingest::adapter::InputFile;
use asof_ingest::pipeline::{Request, read_files};
use asof_ingest::sources::gleif::is_lei;

const DIR: &str = "../snapshots/sources/gleif.lei/golden_copy_from_api";
const MORNING: &str = "20250515-0000-gleif-goldencopy-lei2-golden-copy.csv";
const SHELL: &str = "21380068P1DRHMJ8KU70";
/// The first record of the file, dropped from the afternoon's copy.
const DROPPED: &str = "2138004VFYZFYLELHT92";

fn morning_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(DIR)
        .join(MORNING)
}

fn morning_text() -> String {
    std::fs::read_to_string(morning_path()).unwrap()
}

/// An LEI made valid by its ISO 7064 MOD 97-10 check digits.
fn lei(prefix18: &str) -> String {
    let digits: String = prefix18
        .chars()
        .map(|c| c.to_digit(36).unwrap().to_string())
        .collect::<String>()
        + "00";
    let rem = digits
        .bytes()
        .fold(0u32, |r, b| (r * 10 + u32::from(b - b'0')) % 97);
    let l = format!("{prefix18}{:02}", 98 - rem);
    assert!(is_lei(&l), "{l}");
    l
}

/// The morning copy as the afternoon one: Shell moved to another city, the first record gone,
/// a new LEI registered (a copy of Shell's record under it).
fn afternoon_text() -> (String, String) {
    let text = morning_text();
    let new = lei("5493000ASOFTEST000");
    let mut out = Vec::new();
    let mut shell = None;
    for line in text.split_inclusive("\r\n") {
        if line.starts_with(&format!("\"{DROPPED}\"")) {
            continue;
        }
        if line.starts_with(&format!("\"{SHELL}\"")) {
            shell = Some(line.to_owned());
            out.push(line.replace("\"LONDON\"", "\"LONDRES\""));
            continue;
        }
        out.push(line.to_owned());
    }
    let shell = shell.unwrap();
    out.push(
        shell
            .replace(SHELL, &new)
            .replace("\"SHELL PLC\"", "\"ASOF TEST HOLDINGS PLC\""),
    );
    (out.concat(), new)
}

fn written(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn request(files: &[PathBuf]) -> Request {
    Request {
        source: SourceId::GleifLei,
        lane: Lane::CertifiedPit,
        commit_time: at("2025-05-16T00:00:00Z"),
        captured_at: None,
        certify: None,
        options: Default::default(),
        files: read_files(files).unwrap(),
    }
}

fn kinds(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

#[tokio::test]
async fn two_golden_copies_give_the_changes_between_them_from_the_second_publish_on() {
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();

    let first = run(&store, request(&[morning_path()])).await.unwrap();
    assert_eq!(first.changes, kinds(&[("added", 94)]));
    let day = "2025-05-15".parse().unwrap();
    assert_eq!(
        first.certified,
        vec![(day, day)],
        "a whole golden copy certifies its day"
    );

    let (afternoon, new) = afternoon_text();
    let afternoon = written(
        files.path(),
        "20250515-1600-gleif-goldencopy-lei2-golden-copy.csv",
        &afternoon,
    );
    let second = run(&store, request(std::slice::from_ref(&afternoon)))
        .await
        .unwrap();
    assert_eq!(
        second.changes,
        kinds(&[("added", 1), ("modified", 1), ("removed", 1)])
    );

    let corpus = Corpus::open(store.clone()).await.unwrap();
    let state = corpus
        .manifest()
        .access
        .iter()
        .find(|e| e.kind == KIND_LIST)
        .unwrap();
    assert_eq!(
        state.row_count, 95,
        "every LEI ever listed, the removed one too"
    );

    // Shell's move is knowable from the 16:00 golden copy, not a microsecond earlier.
    let id = format!("{SHELL}@2025-05-15T16:00:00Z");
    for (cut, visible) in [
        ("2025-05-15T15:59:59.999999Z", false),
        ("2025-05-15T16:00:00Z", true),
    ] {
        let got = corpus
            .record(&id, at(cut), VisibleBy::PublishedAt)
            .await
            .unwrap();
        assert_eq!(matches!(got, RecordLookup::Visible(_)), visible, "{cut}");
    }
    let RecordLookup::Visible(r) = corpus
        .record(&id, at("2025-05-16T00:00:00Z"), VisibleBy::PublishedAt)
        .await
        .unwrap()
    else {
        panic!("the modification is a record");
    };
    assert_eq!(r.form.as_deref(), Some("lei.modified"));
    let p: serde_json::Value = serde_json::from_str(r.payload.as_deref().unwrap()).unwrap();
    assert_eq!(p["before"]["Entity.LegalAddress.City"], "LONDON");
    assert_eq!(p["after"]["Entity.LegalAddress.City"], "LONDRES");
    assert_eq!(p["name"], "SHELL PLC");

    for (entity, form) in [(DROPPED, "lei.removed"), (new.as_str(), "lei.added")] {
        let id = format!("{entity}@2025-05-15T16:00:00Z");
        let RecordLookup::Visible(r) = corpus
            .record(&id, at("2025-05-16T00:00:00Z"), VisibleBy::PublishedAt)
            .await
            .unwrap()
        else {
            panic!("{id} is a record");
        };
        assert_eq!(r.form.as_deref(), Some(form), "{id}");
    }

    // The same golden copy again changes nothing; an older one is refused, naming an LEI.
    let again = run(&store, request(std::slice::from_ref(&afternoon)))
        .await
        .unwrap();
    assert!(!again.published.changed);
    assert!(again.changes.is_empty(), "{:?}", again.changes);
    let older = written(
        files.path(),
        "20250515-0800-gleif-goldencopy-lei2-golden-copy.csv",
        &morning_text(),
    );
    let err = run(&store, request(&[older]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("older than the corpus's state"), "{err}");
}

#[tokio::test]
async fn a_delta_file_changes_the_leis_it_holds_and_removes_none() {
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    run(&store, request(&[morning_path()])).await.unwrap();
    // A last-day delta holding only Shell's changed record.
    let text = morning_text();
    let header = text.split_inclusive("\r\n").next().unwrap();
    let shell = text
        .split_inclusive("\r\n")
        .find(|l| l.starts_with(&format!("\"{SHELL}\"")))
        .unwrap()
        .replace("\"LONDON\"", "\"LONDRES\"");
    let delta = written(
        files.path(),
        "20250516-0000-gleif-goldencopy-lei2-last-day.csv",
        &format!("{header}{shell}"),
    );
    let mut req = request(&[delta]);
    req.commit_time = at("2025-05-16T01:00:00Z");
    let out = run(&store, req).await.unwrap();
    assert_eq!(out.changes, kinds(&[("modified", 1)]));
    assert!(out.certified.is_empty(), "a delta certifies no day");
}

#[tokio::test]
async fn a_golden_copy_from_disk_or_from_memory_publishes_the_same_version() {
    let mut versions = Vec::new();
    for from_disk in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut req = request(&[morning_path()]);
        if !from_disk {
            req.files = vec![
                InputFile {
                    name: morning_path().display().to_string(),
                    bytes: morning_text().into_bytes(),
                }
                .into(),
            ];
        }
        versions.push(run(&store, req).await.unwrap().published.version);
    }
    assert_eq!(versions[0], versions[1]);
}

#[tokio::test]
async fn a_golden_copy_with_other_files_or_after_the_commit_time_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let api = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../snapshots/sources/gleif.lei/api_json_gleif-rs_2025-05/lei_records/multi_lei_records.json",
    );
    let err = run(&store, request(&[morning_path(), api]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("a golden copy is ingested alone"), "{err}");

    let mut early = request(&[morning_path()]);
    early.commit_time = at("2025-05-14T00:00:00Z");
    let err = run(&store, early).await.unwrap_err().to_string();
    assert!(err.contains("after the commit time"), "{err}");
    assert!(
        store.current_version().await.unwrap().is_none(),
        "nothing was published"
    );
}
