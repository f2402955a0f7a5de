//! Arrangement shared by the ingest test files: the real source files held in the repository,
//! instants and days from text, and the certified-lane request and run most tests make.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use asof_engine::{CorpusStore, Day, Instant, Lane, SourceId};
use asof_ingest::adapter::InputFile;
use asof_ingest::pipeline::{Outcome, Request, ingest};

/// The source files the repository holds (`snapshots/sources`, with their provenance).
pub fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots/sources")
}

/// One file under [`sources`], named as an upload would name it (its last path segment).
pub fn file(rel: &str) -> InputFile {
    let path = sources().join(rel);
    InputFile {
        name: rel.rsplit('/').next().unwrap().to_owned(),
        bytes: std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    }
}

pub fn at(s: &str) -> Instant {
    Instant::parse(s).unwrap()
}

pub fn day(s: &str) -> Day {
    s.parse().unwrap()
}

/// A certified-lane ingest of `files` of `source`, committed and captured at `commit`, with
/// the default options.
pub fn request(source: SourceId, commit: &str, files: Vec<InputFile>) -> Request {
    Request {
        source,
        lane: Lane::CertifiedPit,
        commit_time: at(commit),
        captured_at: Some(at(commit)),
        certify: None,
        options: Default::default(),
        files: files.into_iter().map(Into::into).collect(),
    }
}

/// Runs an ingest without progress output.
pub async fn run(store: &CorpusStore, req: Request) -> asof_ingest::Result<Outcome> {
    ingest(store, req, &|_| {}).await
}
