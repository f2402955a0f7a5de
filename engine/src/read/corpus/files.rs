//! Flat files: the Parquet partitions a corpus version is made of, listed as file entries
//! paged by `(date, source_id, lane, id)`, each with its certificate. The server turns an entry
//! into a signed URL; the CLI downloads and verifies them.
//!
//! A file's id is its content hash (the partition's sha256): partitions are content-addressed
//! and never rewritten, so the same bytes keep the same id in every version that holds them.

use serde::{Deserialize, Serialize};

use super::Corpus;
use crate::model::clock::{Day, Lane, SourceId};
use crate::model::manifest::PartitionEntry;

/// One partition of the version, as a downloadable file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// The partition's sha256 (lowercase hex): stable for the same bytes across versions.
    pub id: String,
    pub source_id: SourceId,
    pub lane: Lane,
    pub date: Day,
    pub row_count: u64,
    pub bytes: u64,
    pub sha256: String,
    /// Object path under the corpus root.
    pub path: String,
    /// The coverage key of the source-day this file holds.
    pub coverage_key: String,
    /// The day's certificate row count when the corpus certifies the day (then equal to
    /// `row_count`); `None` for rows of a day the corpus does not certify (partial).
    pub certified_row_count: Option<u64>,
}

/// A keyset position in a file listing: the last file of the previous page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePosition {
    pub date: Day,
    pub source_id: SourceId,
    pub lane: Lane,
    pub id: String,
}

impl FilePosition {
    /// The listing order: by day, then by the wire spellings of source and lane (the order a
    /// client sorting the JSON gets), then by id.
    fn key(&self) -> (Day, &str, &str, &str) {
        (
            self.date,
            self.source_id.as_str(),
            self.lane.as_str(),
            &self.id,
        )
    }
}

/// A file listing request.
#[derive(Debug, Clone)]
pub struct FilesQuery {
    /// Only this source.
    pub source: Option<SourceId>,
    /// Only days in `[from, to]` (either end open).
    pub from: Option<Day>,
    pub to: Option<Day>,
    pub after: Option<FilePosition>,
    pub limit: usize,
}

impl FilesQuery {
    /// Every file of the version, in one page.
    pub fn all() -> Self {
        FilesQuery {
            source: None,
            from: None,
            to: None,
            after: None,
            limit: usize::MAX,
        }
    }
}

impl Corpus {
    /// One page of the version's files in `(date, source_id, lane, id)` order, and the position
    /// of the next page when there is one.
    pub fn files(&self, q: &FilesQuery) -> (Vec<FileEntry>, Option<FilePosition>) {
        let mut keyed: Vec<(FilePosition, &PartitionEntry)> = self
            .manifest
            .partitions
            .iter()
            .filter(|p| q.source.is_none_or(|s| s == p.source_id))
            .filter(|p| q.from.is_none_or(|d| p.date >= d) && q.to.is_none_or(|d| p.date <= d))
            .map(|p| (position(p), p))
            .filter(|(pos, _)| q.after.as_ref().is_none_or(|a| pos.key() > a.key()))
            .collect();
        keyed.sort_by(|a, b| a.0.key().cmp(&b.0.key()));
        let more = keyed.len() > q.limit;
        keyed.truncate(q.limit);
        let next = more
            .then(|| keyed.last().map(|(pos, _)| pos.clone()))
            .flatten();
        let files = keyed.into_iter().map(|(_, p)| self.file_entry(p)).collect();
        (files, next)
    }

    /// The file with this id in the version, if it holds one.
    pub fn file(&self, id: &str) -> Option<FileEntry> {
        self.manifest
            .partitions
            .iter()
            .find(|p| p.sha256 == id)
            .map(|p| self.file_entry(p))
    }

    fn file_entry(&self, p: &PartitionEntry) -> FileEntry {
        let cert = self.certificate(p.source_id, p.lane, p.date, None);
        FileEntry {
            id: p.sha256.clone(),
            source_id: p.source_id,
            lane: p.lane,
            date: p.date,
            row_count: p.row_count,
            bytes: p.bytes,
            sha256: p.sha256.clone(),
            path: p.path.clone(),
            coverage_key: cert.key,
            certified_row_count: cert.row_count,
        }
    }
}

fn position(p: &PartitionEntry) -> FilePosition {
    FilePosition {
        date: p.date,
        source_id: p.source_id,
        lane: p.lane,
        id: p.sha256.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{cert, corpus, edgar};

    async fn two_days() -> (tempfile::TempDir, Corpus) {
        let (d, _s, c) = corpus(
            vec![
                edgar(
                    "0000000001-26-000001",
                    "1",
                    Some("2026-01-05T10:00:00Z"),
                    "2026-01-06T00:00:00Z",
                ),
                edgar(
                    "0000000001-26-000002",
                    "1",
                    Some("2026-01-05T11:00:00Z"),
                    "2026-01-06T00:00:00Z",
                ),
                edgar(
                    "0000000002-26-000001",
                    "2",
                    Some("2026-01-06T10:00:00Z"),
                    "2026-01-07T00:00:00Z",
                ),
                edgar(
                    "0000000003-26-000001",
                    "3",
                    Some("2026-01-08T10:00:00Z"),
                    "2026-01-09T00:00:00Z",
                ),
            ],
            vec![cert(
                Lane::CertifiedPit,
                "2026-01-05",
                "2026-01-06",
                "2026-01-07T00:00:00Z",
            )],
        )
        .await;
        (d, c)
    }

    #[tokio::test]
    async fn a_file_is_a_partition_named_by_its_content_hash_with_its_certificate() {
        let (_d, c) = two_days().await;
        let (files, next) = c.files(&FilesQuery::all());
        assert_eq!(next, None);
        assert_eq!(files.len(), 3);
        let first = &files[0];
        assert_eq!(first.date.to_string(), "2026-01-05");
        assert_eq!(first.row_count, 2);
        assert_eq!(first.id, first.sha256);
        assert_eq!(first.certified_row_count, Some(2));
        assert_eq!(first.coverage_key, "sec.edgar/2026-01-05");
        // Jan 8 is held but not certified: its rows are partial, never a certified count.
        assert_eq!(files[2].certified_row_count, None);
        assert_eq!(c.file(&first.id), Some(first.clone()));
        assert_eq!(c.file("0".repeat(64).as_str()), None);
    }

    #[tokio::test]
    async fn pages_of_files_walk_to_the_same_files_as_one_large_page() {
        let (_d, c) = two_days().await;
        let (all, _) = c.files(&FilesQuery::all());
        let mut walked = Vec::new();
        let mut after = None;
        loop {
            let (page, next) = c.files(&FilesQuery {
                after,
                limit: 1,
                ..FilesQuery::all()
            });
            walked.extend(page);
            match next {
                Some(p) => after = Some(p),
                None => break,
            }
        }
        assert_eq!(walked, all);
    }

    #[tokio::test]
    async fn a_day_range_and_a_source_select_files() {
        let (_d, c) = two_days().await;
        let q = FilesQuery {
            from: Some("2026-01-06".parse().unwrap()),
            to: Some("2026-01-07".parse().unwrap()),
            ..FilesQuery::all()
        };
        let (files, _) = c.files(&q);
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].date.to_string(), "2026-01-06");
        let q = FilesQuery {
            source: Some(SourceId::FederalRegisterPi),
            ..FilesQuery::all()
        };
        assert!(c.files(&q).0.is_empty());
    }
}
